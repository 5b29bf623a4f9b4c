//! A real effect, not a timing target: a `cpu:1` hog pinned to a CPU takes
//! CPU time from a busy loop pinned to the same CPU, and the environment
//! monitor counts the hog as the experiment's own, not as foreign.
//! (Own test binary, so no other test of this crate runs meanwhile.)

mod common;

use std::time::{Duration, Instant};

use taillab_interfere::preflight::allowed_cpus;
use taillab_interfere::Interference;
use taillab_monitor::{Sampler, SamplerConfig, Thresholds};

fn pin_to(cpu: usize) {
    // SAFETY: a cpu_set_t built on the stack for this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// Share of the wall time a thread pinned to `cpu` gets while it spins for
/// `wall` (1.0: the CPU was all its own).
fn cpu_share(cpu: usize, wall: Duration) -> f64 {
    std::thread::spawn(move || {
        pin_to(cpu);
        let t0 = Instant::now();
        let c0 = taillab_monitor::procfs::thread_cpu_ns();
        let mut x = 0u64;
        while t0.elapsed() < wall {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        (taillab_monitor::procfs::thread_cpu_ns() - c0) as f64 / t0.elapsed().as_nanos() as f64
    })
    .join()
    .unwrap()
}

/// One comparison: Err(why) when the effect was not seen; the second value
/// says whether the host was disturbed meanwhile (other processes' CPU or
/// steal, from the monitor, with the hog counted as ours).
fn attempt(cpu: usize) -> (Result<(), String>, Option<String>) {
    let wall = Duration::from_millis(1500);
    let alone = cpu_share(cpu, wall);
    let hogs = Interference::start(&[format!("cpu:1@cpus={cpu}").parse().unwrap()]).unwrap();
    let sampler = Sampler::start(SamplerConfig {
        extra_pids: hogs.pids(),
        keep_series: false,
        ..Default::default()
    })
    .unwrap();
    sampler.mark_measured_start();
    hogs.mark_measured_start();
    let shared = cpu_share(cpu, wall);
    hogs.mark_measured_end();
    sampler.mark_measured_end();
    let env = sampler.stop().unwrap().summary;
    let report = hogs.stop();
    eprintln!(
        "CPU share of a loop on CPU {cpu}: alone {alone:.2}, with cpu:1 on the same CPU {shared:.2}; \
         hog {:.0} % of a CPU; foreign {:.0} %, steal {:.1} %",
        report.cpu_pct, env.foreign_cpu_pct, env.steal_pct
    );
    // Structural facts hold on any host.
    assert!(report.ok, "{:?}", report.problems);
    assert!(report.cpu_pct > 5.0, "the hog ran: {report:?}");
    // The monitor counts the hog among the experiment's processes (the same
    // CPU the interference report measured, up to sampling edges)...
    let planned: f64 = env.extra.iter().map(|p| p.cpu_pct).sum();
    assert!(
        planned > 0.5 * report.cpu_pct,
        "hog CPU seen as planned: {planned:.0} % of {:.0} % ({:?})",
        report.cpu_pct,
        env.extra
    );
    // ...and never names it as a foreign consumer.
    assert!(
        !env.top_foreign
            .iter()
            .any(|f| f.name.starts_with("stress-ng")),
        "{:?}",
        env.top_foreign
    );
    let th = Thresholds::default();
    let disturbed = (env.foreign_cpu_pct > th.max_foreign_pct || env.steal_pct > th.max_steal_pct)
        .then(|| {
            format!(
                "foreign {:.0} %, steal {:.1} %",
                env.foreign_cpu_pct, env.steal_pct
            )
        });
    // CFS splits one CPU between two equal-weight spinners: ~0.5 against ~1.
    let effect = if shared < 0.75 * alone {
        Ok(())
    } else {
        Err(format!("alone {alone:.2}, shared {shared:.2}"))
    };
    (effect, disturbed)
}

#[test]
fn a_pinned_cpu_hog_slows_a_loop_on_its_cpu_and_is_not_foreign() {
    let cpu = allowed_cpus()[0];
    // Three tries out of bounds on an undisturbed host fail; a disturbed one is not counted.
    common::within_tries("a pinned hog slows its CPU", 3, 3, |_| {
        let (r, why) = attempt(cpu);
        r.map_err(|e| (e, why))
    });
}
