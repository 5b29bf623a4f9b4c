//! How many requests per second the ideal's engine simulates on one core:
//! arrivals drawn, service times drawn, the queue run, every sojourn
//! recorded in a histogram — what `taillab model` does per request.
//!
//! `cargo run --release -p taillab-core --example model_speed [-- REQUESTS]`
//! (bench/model runs it and prints the host).

use std::time::Instant;

/// This thread's CPU time in s: on a shared host a wall-clock rate also
/// measures the neighbours, the CPU-time rate only this code.
fn cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: plain syscall writing into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}
use taillab_core::arrival::ArrivalSpec;
use taillab_core::model::{simulate, ModelSpec, Service};
use taillab_core::queue::{Assign, Discipline, Dispatch};

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("REQUESTS is a count"))
        .unwrap_or(20_000_000);
    let sh = Dispatch::Shared;
    let pw = Dispatch::PerWorker(Assign::Random);
    let cases: [(&str, &str, usize, Discipline, Dispatch); 8] = [
        ("M/M/1 fifo", "poisson", 1, Discipline::Fifo, sh),
        ("M/M/1 lifo", "poisson", 1, Discipline::Lifo, sh),
        ("M/M/1 random", "poisson", 1, Discipline::Random, sh),
        ("M/M/2 fifo shared", "poisson", 2, Discipline::Fifo, sh),
        ("M/M/2 fifo per-worker", "poisson", 2, Discipline::Fifo, pw),
        ("M/M/2 lifo shared", "poisson", 2, Discipline::Lifo, sh),
        ("M/M/16 fifo shared", "poisson", 16, Discipline::Fifo, sh),
        (
            "G/M/1 fifo, lognormal:cv=2",
            "lognormal:cv=2",
            1,
            Discipline::Fifo,
            sh,
        ),
    ];
    println!(
        "{:<28}{:>12}{:>16}{:>16}{:>10}",
        "system (rho 0.7)", "requests", "Mreq/s (CPU)", "Mreq/s (wall)", "ns/req"
    );
    for (name, arrival, servers, discipline, dispatch) in cases {
        let spec = ModelSpec {
            arrival: arrival.parse::<ArrivalSpec>().expect("valid"),
            qps: 3500.0 * servers as f64,
            service: Service::Dist("exp:200us".parse().expect("valid")),
            servers,
            discipline,
            dispatch,
            requests: n,
            warmup: n / 20,
            seed: 1,
        };
        let (t, c) = (Instant::now(), cpu_s());
        let r = simulate(&spec).expect("stable system");
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
        assert!(r.requests > 0);
        println!(
            "{:<28}{:>12}{:>16.1}{:>16.1}{:>10.1}",
            name,
            n,
            n as f64 / cpu / 1e6,
            n as f64 / wall / 1e6,
            cpu * 1e9 / n as f64
        );
    }
}
