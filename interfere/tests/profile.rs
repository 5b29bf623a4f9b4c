//! `perf record` of a busy thread gives a non-empty folded-stack file and a
//! flame graph, or a clear reason why this host cannot profile.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use taillab_interfere::profile::{start_perf, PerfOptions, PerfTarget, Profile, ProfileOutcome};

#[inline(never)]
fn busy_work(stop: &AtomicBool) -> u64 {
    let mut x = 1u64;
    while !stop.load(Ordering::Relaxed) {
        for _ in 0..10_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
        }
    }
    x
}

#[test]
fn a_busy_thread_shows_in_the_flame_graph() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let s = stop.clone();
    let h = std::thread::spawn(move || {
        tx.send(taillab_monitor::procfs::gettid()).unwrap();
        std::hint::black_box(busy_work(&s))
    });
    let tid = rx.recv().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = match start_perf(
        &PerfTarget::Tids(vec![tid]),
        dir.path(),
        &PerfOptions::default(),
    ) {
        Profile::Recording(r) => r,
        Profile::Skipped(why) => {
            stop.store(true, Ordering::Relaxed);
            h.join().unwrap();
            assert!(!why.is_empty());
            return common::skip_without("perf", &why);
        }
    };
    std::thread::sleep(Duration::from_millis(1000));
    let out = rec.finish();
    stop.store(true, Ordering::Relaxed);
    h.join().unwrap();
    match out {
        ProfileOutcome::Written {
            folded,
            svg,
            weight,
            stacks,
            ..
        } => {
            // ~1 s of a busy thread, weighed in sampled CPU ns.
            assert!(weight >= 100_000_000, "{weight} ns");
            assert!(stacks >= 1);
            let text = std::fs::read_to_string(dir.path().join(&folded)).unwrap();
            assert!(!text.trim().is_empty());
            let svg = std::fs::read_to_string(dir.path().join(&svg)).unwrap();
            assert!(svg.contains("<svg"), "an SVG");
        }
        ProfileOutcome::Skipped { reason } => panic!("perf started but gave nothing: {reason}"),
    }
}

#[test]
fn a_gone_thread_is_skipped_with_perfs_reason() {
    let dir = tempfile::tempdir().unwrap();
    // Pid 0x7ffffff0 does not exist.
    let why = match start_perf(
        &PerfTarget::Tids(vec![0x7fff_fff0]),
        dir.path(),
        &PerfOptions::default(),
    ) {
        Profile::Skipped(why) => why,
        // start_perf waits for perf's header, which perf writes only once
        // its events are open: a missing thread never gets that far.
        Profile::Recording(r) => panic!("perf started on a missing thread: {:?}", r.finish()),
    };
    match taillab_interfere::profile::perf_unavailable() {
        None => assert!(why.contains("No such process"), "perf's own reason: {why}"),
        Some(no_perf) => common::skip_without("perf", &format!("perf's own reason: {no_perf}")),
    }
}
