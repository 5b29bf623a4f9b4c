//! Ctrl-C (SIGINT) and SIGTERM: with `signals::install`, the hogs are gone
//! and the knobs restored before the process ends the way the signal says.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use common::*;
use taillab_interfere::tuning::numa_nodes;
use taillab_interfere::{Interference, NumaNode, ThpMode, Tuning};

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

fn thp_now() -> Option<String> {
    let t = std::fs::read_to_string(THP).ok()?;
    Some(t[t.find('[')? + 1..t.find(']')?].to_string())
}

/// Not a test on its own: the helper process the tests below signal.
#[test]
fn helper_interrupted_run() {
    let Ok(journal) = std::env::var("TAILLAB_TEST_SIGNAL_JOURNAL") else {
        return;
    };
    taillab_interfere::signals::install().unwrap();
    let thp = thp_now().map(|now| {
        if now == "never" {
            ThpMode::Madvise
        } else {
            ThpMode::Never
        }
    });
    let t = Tuning {
        thp,
        numa_node: Some(NumaNode(numa_nodes()[0] as u32)),
        ..Default::default()
    };
    let _guard = t.apply_with(std::path::Path::new(&journal)).unwrap();
    let hogs = Interference::start(&["cpu:1".parse().unwrap()]).unwrap();
    let pids: Vec<String> = hogs.pids().iter().map(|p| p.to_string()).collect();
    println!("READY {}", pids.join(","));
    std::thread::sleep(Duration::from_secs(120));
    drop(hogs);
}

fn interrupted_with(sig: i32) {
    let before = thp_now();
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("run-tuning.json");
    let mut child = spawn_helper(
        "helper_interrupted_run",
        &[("TAILLAB_TEST_SIGNAL_JOURNAL", journal.to_str().unwrap())],
    );
    let pids: Vec<i32> = read_line_starting(&mut child, "READY")
        .split(',')
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(alive(&pids), pids);
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let status = child.wait().unwrap();
    assert_eq!(
        status.signal(),
        Some(sig),
        "ends as the signal says: {status:?}"
    );
    assert_eq!(wait_gone(&pids, Duration::from_secs(3)), Vec::<i32>::new());
    assert_eq!(thp_now(), before, "THP restored by the signal thread");
    assert!(!journal.exists(), "journal consumed");
}

/// One at a time: both change THP.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn ctrl_c_stops_hogs_and_restores_knobs() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    interrupted_with(libc::SIGINT);
}

#[test]
fn sigterm_stops_hogs_and_restores_knobs() {
    let _s = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    interrupted_with(libc::SIGTERM);
}
