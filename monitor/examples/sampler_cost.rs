//! What the sampler costs, and whether it disturbs a spinning worker.
//!
//! `cargo run --release -p taillab-monitor --example sampler_cost -- [ROUNDS] [SECONDS] [THREADS]`
//!
//! Cost: the sampler measures its own thread's CPU time per sample and per
//! process scan (`MonitorReport::cost`).
//!
//! Perturbation: a probe thread spins on the clock and records every gap
//! longer than 5 µs between two consecutive reads — time it did not run.
//! Rounds alternate sampler off / on (ABAB…, so drift in the host's load
//! hits both alike), and the probe reports per condition how many gaps per
//! second it saw and how much time they took. If the sampler perturbed a
//! worker, the "on" rounds would show more gaps or more lost time. `THREADS`
//! extra idle threads make the harness look like one with that many workers
//! (the sampler reads every thread's files).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use taillab_monitor::procfs::mono_ns;
use taillab_monitor::{Sampler, SamplerConfig};

#[derive(Default, Clone, Copy)]
struct Gaps {
    secs: f64,
    n: u64,
    lost_ns: u64,
    max_ns: u64,
}

fn probe(secs: f64) -> Gaps {
    let end = mono_ns() + (secs * 1e9) as u64;
    let mut g = Gaps {
        secs,
        ..Default::default()
    };
    let mut last = mono_ns();
    while last < end {
        let now = mono_ns();
        let d = now - last;
        if d > 5_000 {
            g.n += 1;
            g.lost_ns += d;
            g.max_ns = g.max_ns.max(d);
        }
        last = now;
    }
    g
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: f64| args.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(d);
    let rounds = arg(1, 4.0) as usize;
    let secs = arg(2, 2.0);
    let threads = arg(3, 8.0) as usize;

    let stop = Arc::new(AtomicBool::new(false));
    let idle: Vec<_> = (0..threads)
        .map(|_| {
            let s = stop.clone();
            std::thread::spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        })
        .collect();

    let procs = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|s| s.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0);
    println!(
        "host: {procs} processes; harness: {} threads; loadavg {}",
        threads + 2,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );

    let (mut off, mut on) = (Gaps::default(), Gaps::default());
    let mut costs = Vec::new();
    for r in 0..rounds * 2 {
        let with = r % 2 == 1;
        let sampler =
            with.then(|| Sampler::start(SamplerConfig::default()).expect("start sampler"));
        let g = probe(secs);
        if let Some(s) = sampler {
            let rep = s.stop().expect("stop sampler");
            costs.push(rep.cost);
        }
        let acc = if with { &mut on } else { &mut off };
        acc.secs += g.secs;
        acc.n += g.n;
        acc.lost_ns += g.lost_ns;
        acc.max_ns = acc.max_ns.max(g.max_ns);
    }
    stop.store(true, Ordering::Relaxed);
    for t in idle {
        let _ = t.join();
    }

    let n = costs.len() as f64;
    let mean =
        |f: &dyn Fn(&taillab_monitor::SamplerCost) -> f64| costs.iter().map(f).sum::<f64>() / n;
    println!(
        "sampler cost: {:.0} µs CPU per sample, {:.0} µs per process scan, {:.2} % of one CPU (100 ms period, 1 s scans); {} late samples",
        mean(&|c| c.us_per_sample),
        mean(&|c| c.us_per_scan),
        mean(&|c| c.cpu_pct),
        costs.iter().map(|c| c.late_samples).sum::<u64>()
    );
    for (name, g) in [("sampler off", off), ("sampler on ", on)] {
        println!(
            "probe, {name}: {:.1} gaps > 5 µs per s, {:.3} % of time lost, longest gap {:.0} µs ({:.0} s)",
            g.n as f64 / g.secs,
            100.0 * g.lost_ns as f64 / 1e9 / g.secs,
            g.max_ns as f64 / 1e3,
            g.secs
        );
    }
}
