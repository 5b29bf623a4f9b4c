//! Helpers shared by the integration tests: real processes, real /proc.
#![allow(dead_code)]

#[path = "../../../tests/require.rs"]
mod require;
#[allow(unused_imports)] // each test binary uses its own subset
pub use require::{skip_without, within_tries};

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use taillab_interfere::usage;

/// Pids from `pids` that are still running (zombies count as gone: they
/// have exited and use nothing; init reaps them).
pub fn alive(pids: &[i32]) -> Vec<i32> {
    pids.iter()
        .copied()
        .filter(|&p| usage::is_alive(p))
        .collect()
}

/// Waits up to `timeout` for every pid to be gone; returns survivors.
pub fn wait_gone(pids: &[i32], timeout: Duration) -> Vec<i32> {
    let until = Instant::now() + timeout;
    loop {
        let left = alive(pids);
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes whose name starts with `stress-ng` or is `iperf3` and
/// whose parent chain leads to this process.
pub fn my_hog_processes() -> Vec<i32> {
    let me = std::process::id() as i32;
    let table = usage::process_table();
    usage::descendants(me, &table)
        .into_iter()
        .skip(1)
        .filter(|&p| {
            usage::read_process(p).is_some_and(|r| {
                r.state != 'Z' && (r.name.starts_with("stress-ng") || r.name == "iperf3")
            })
        })
        .collect()
}

/// Runs this test binary again as a helper: only the test `name` runs, with
/// `env` set. Its stdout is piped.
pub fn spawn_helper(name: &str, env: &[(&str, &str)]) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args([name, "--exact", "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// Reads the helper's stdout until a line starting with `prefix`; returns
/// the rest of that line.
pub fn read_line_starting(child: &mut Child, prefix: &str) -> String {
    let out = child.stdout.take().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap() == 0 {
            panic!("helper ended before printing `{prefix}`");
        }
        // The test harness prints `test NAME ... ` before the helper's output.
        if let Some(at) = line.find(prefix) {
            let rest = line[at + prefix.len()..].trim().to_string();
            // Keep draining so the helper never blocks on a full pipe.
            std::thread::spawn(move || {
                let mut sink = String::new();
                while r.read_line(&mut sink).unwrap_or(0) > 0 {
                    sink.clear();
                }
            });
            return rest;
        }
    }
}

/// SIGKILLs a child and reaps it.
pub fn sigkill(child: &mut Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
}
