//! Helpers shared by the integration tests of the real binary.
#![allow(dead_code)] // each test binary uses its own subset

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Serialises timing-sensitive tests within one test binary (a failed one
/// does not poison the others).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_taillab")
}

/// A fresh (removed) path in the temp folder, unique to this test process.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("taillab-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn json(p: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub fn read_summary(dir: &Path) -> Value {
    json(&dir.join("summary.json"))
}

/// `taillab run ARGS --out OUT -q` with extra environment; fails the test
/// with the binary's stderr unless it succeeded; returns summary.json.
pub fn run_env(args: &[&str], out: &Path, env: &[(&str, &Path)]) -> Value {
    let mut c = Command::new(bin());
    c.arg("run").args(args).arg("--out").arg(out).arg("-q");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "taillab run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    read_summary(out)
}

pub fn run(args: &[&str], out: &Path) -> Value {
    run_env(args, out, &[])
}
