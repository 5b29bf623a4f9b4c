//! Smoke tests of the real binary with the TPC-C apps: `taillab data prepare`
//! and `taillab run` in the integrated configuration, in memory and on disk.
//! They check that every request was answered without error and that the
//! app's statistics account for all of them; latency bounds are the apps'
//! own business (apps/oltp/README.md), not this test's.
#![cfg(feature = "oltp")]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;

/// Shared with apps/oltp's tests (same target folder), so the one-warehouse
/// database is prepared once per checkout.
fn data_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("oltp-data")
}

fn taillab(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_taillab"))
        .args(args)
        .env("TAILLAB_DATA", data_root())
        .output()
        .unwrap()
}

fn run(args: &[&str], out: &Path) -> Value {
    common::run_env(args, out, &[("TAILLAB_DATA", &data_root())])
}

/// All requests (warmup and measured) were answered, with no error.
fn check_counts(s: &Value, warmup: u64, measured: u64) {
    assert_eq!(s["requests"]["measured"].as_u64(), Some(measured), "{s}");
    assert_eq!(s["requests"]["errors"].as_u64(), Some(0), "{s}");
    let stats = &s["app_stats"];
    let done: u64 = stats["transactions"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(done, warmup + measured, "app_stats: {stats}");
    assert!(stats["transactions"]["new_order"].as_u64().unwrap() > 0);
}

#[test]
fn prepare_then_run_in_memory_with_two_workers() {
    let o = taillab(&["data", "prepare", "oltp-mem", "--set", "warehouses=1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bad = taillab(&["data", "prepare", "oltp-mem", "--set", "warehouses=0"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("warehouses"));

    let out = tmp("mem");
    let s = run(
        &[
            "--app",
            "oltp-mem",
            "--qps",
            "300",
            "--threads",
            "2",
            "--warmup-requests",
            "100",
            "--requests",
            "600",
            "--set",
            "lock=gate",
        ],
        &out,
    );
    check_counts(&s, 100, 600);
    assert_eq!(s["app_stats"]["lock"], "gate");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn run_on_disk_and_leave_no_scratch_copy() {
    let out = tmp("disk");
    let scratch = tmp("disk-scratch");
    let s = run(
        &[
            "--app",
            "oltp-disk",
            "--qps",
            "50",
            "--warmup-requests",
            "20",
            "--requests",
            "150",
            "--set",
            &format!("scratch={}", scratch.display()),
        ],
        &out,
    );
    check_counts(&s, 20, 150);
    assert!(s["app_stats"]["database"]
        .as_str()
        .unwrap()
        .contains("synchronous=FULL"));
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(left.is_empty(), "scratch copies left behind: {left:?}");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&scratch).unwrap();
}
