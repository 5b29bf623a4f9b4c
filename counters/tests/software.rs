//! Counters on this host, for real: two named worker threads (one spins,
//! one sleeps and touches fresh pages) counted until they exit, read after
//! they were joined. On a host without a PMU (this project's VMs) `auto`
//! falls back to software counters and says why; with a PMU it counts both.

#[path = "../../tests/require.rs"]
#[allow(dead_code)]
mod require;

use std::time::{Duration, Instant};
use taillab_counters::{hardware_unavailable, CounterMode, Counters, Target};

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills the struct we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[test]
fn auto_counts_worker_threads_and_explains_a_missing_pmu() {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (cpu_tx, cpu_rx) = std::sync::mpsc::channel::<u64>();
    let spinner = std::thread::Builder::new()
        .name("taillab-wrk-0".into())
        .spawn({
            let cpu_tx = cpu_tx.clone();
            move || {
                go_rx.recv().unwrap();
                let c0 = thread_cpu_ns();
                let t = Instant::now();
                while t.elapsed() < Duration::from_millis(300) {
                    std::hint::spin_loop();
                }
                cpu_tx.send(thread_cpu_ns() - c0).unwrap();
            }
        })
        .unwrap();
    let (go2_tx, go2_rx) = std::sync::mpsc::channel::<()>();
    let sleeper = std::thread::Builder::new()
        .name("taillab-wrk-1".into())
        .spawn(move || {
            go2_rx.recv().unwrap();
            let mut pages = Vec::new();
            for _ in 0..20 {
                std::thread::sleep(Duration::from_millis(5));
                // 64 fresh pages each round: page faults the counters see.
                let mut v = vec![0u8; 64 * 4096];
                for i in (0..v.len()).step_by(4096) {
                    v[i] = 1;
                }
                pages.push(v);
            }
            std::hint::black_box(&pages);
        })
        .unwrap();
    std::thread::sleep(Duration::from_millis(50)); // let both name themselves
    let targets = Target::threads_named("taillab-wrk-"); // the other test names its thread otherwise
    assert_eq!(targets.len(), 2, "{targets:?}");
    let c = Counters::start(CounterMode::Auto, &targets)
        .expect("software counters open here")
        .expect("a mode other than none counts");
    let pmu = hardware_unavailable();
    match &pmu {
        Some(why) => {
            // The fallback is checked; the hardware counts are not.
            let skipped = format!("no hardware counters here, so only software ones: {why}");
            require::skip_without("pmu", &skipped);
            assert_eq!(c.kind(), "software");
            assert_eq!(c.note(), Some(why.as_str()));
        }
        None => assert_eq!(c.kind(), "hardware"),
    }
    go_tx.send(()).unwrap();
    go2_tx.send(()).unwrap();
    spinner.join().unwrap();
    sleeper.join().unwrap();
    let spun_ns = cpu_rx.recv().unwrap() as f64;
    // Both threads are gone; their counters keep the final counts.
    let r = c.finish(100);
    assert!(r.missing.is_empty(), "{:?}", r.missing);
    let by_name = |n: &str| r.threads.iter().find(|t| t.name == n).unwrap();
    let spin = by_name("taillab-wrk-0");
    let sleep = by_name("taillab-wrk-1");
    // The spinner's task clock is its CPU time (plus the few µs around the loop).
    let tc = spin.counts["task_clock_ns"];
    assert!(
        tc >= 0.95 * spun_ns && tc < spun_ns + 20e6,
        "task clock {tc} vs {spun_ns}"
    );
    // The sleeper blocked 20 times and touched 1280 fresh pages.
    assert!(sleep.counts["context_switches"] >= 20.0, "{sleep:?}");
    assert!(sleep.counts["page_faults"] >= 1000.0, "{sleep:?}");
    assert!(sleep.counts["task_clock_ns"] < tc);
    let d = &r.derived;
    assert!(d.cpu_us_per_request.unwrap() > 0.95 * spun_ns / 1e3 / 100.0);
    assert!(d.context_switches_per_s.unwrap() > 0.0);
    // The counted time is wall time, not on-CPU time: one thread mostly
    // slept, so the two together were on a CPU well under all of it, and at
    // least as long as the spinner's own CPU time says.
    let u = d.cpu_utilization.unwrap();
    let spun_share = spun_ns / 1e9 / (2.0 * r.phase_s);
    assert!(
        u < 0.8 && u >= 0.9 * spun_share,
        "utilization {u} over {} s",
        r.phase_s
    );
    assert!(
        r.phase_s >= 0.3,
        "the spinner alone ran 300 ms: {}",
        r.phase_s
    );
    if pmu.is_some() {
        assert!(d.ipc.is_none() && r.note.is_some());
        assert!(r.line().contains("no hardware PMU"), "{}", r.line());
    } else {
        assert!(d.ipc.unwrap() > 0.0);
    }
}

#[test]
fn software_mode_never_asks_for_hardware_and_none_counts_nothing() {
    let t = std::thread::Builder::new()
        .name("counted-9".into())
        .spawn(|| std::thread::sleep(Duration::from_millis(200)))
        .unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let targets: Vec<Target> = Target::threads_named("counted-9");
    assert!(Counters::start(CounterMode::None, &targets)
        .unwrap()
        .is_none());
    let c = Counters::start(CounterMode::Software, &targets)
        .unwrap()
        .unwrap();
    assert_eq!((c.kind(), c.note()), ("software", None));
    t.join().unwrap();
    let r = c.finish(0);
    assert!(!r.total.contains_key("instructions"));
    assert_eq!(
        r.derived.cpu_us_per_request, None,
        "no requests, no per-request figure"
    );
    assert!(Counters::start(CounterMode::Auto, &[]).is_err());
}
