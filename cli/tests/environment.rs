//! The environment monitor in real runs (issue 8): a CPU hog pinned to the
//! workers' CPU makes `checks.environment` fail and names the hog; repeated
//! runs can redo disturbed runs and record it; `taillab system` works.

use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::*;

/// A shell busy loop pinned to `cpu`; killed on drop.
struct Hog(std::process::Child);

impl Hog {
    fn pinned(cpu: usize) -> Hog {
        // SAFETY: pre_exec runs in the forked child before exec; it only
        // calls sched_setaffinity on plain data.
        let child = unsafe {
            Command::new("sh")
                .arg("-c")
                .arg("while :; do :; done")
                .stdout(Stdio::null())
                .pre_exec(move || {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                    Ok(())
                })
                .spawn()
                .expect("spawn sh")
        };
        Hog(child)
    }
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

#[rustfmt::skip]
const RUN: &[&str] = &[
    "--app", "synth", "--qps", "1000", "--warmup-requests", "200", "--requests", "2000",
    "--set", "service=fixed:50us", "--cpus", "0", "-q",
];

#[test]
fn hog_on_the_workers_cpu_fails_the_environment_check_and_is_named() {
    let _s = serial();
    let out = tmp("hog");
    let hog = Hog::pinned(0);
    let o = Command::new(bin())
        .arg("run")
        .args(RUN)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let pid = hog.pid();
    drop(hog);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&out.join("summary.json"));
    let check = &s["checks"]["environment"];
    assert_eq!(check["ok"], false, "{check}");
    let verdict = check["verdict"].as_str().unwrap();
    assert!(
        verdict.contains(&pid.to_string()),
        "hog pid {pid} not named: {verdict}"
    );
    let env = &s["environment"];
    assert!(env["phase_marked"].as_bool().unwrap());
    assert!(env["measured_s"].as_f64().unwrap() > 1.0, "{env}");
    let hog_entry = env["top_foreign"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["pids"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p.as_u64() == Some(pid as u64))
        })
        .unwrap_or_else(|| panic!("hog not among top foreign: {}", env["top_foreign"]));
    assert_eq!(hog_entry["name"], "sh");
    // The pinned worker was found by name and shared CPU 0 with the hog.
    let w = &env["workers"][0];
    assert!(
        w["name"].as_str().unwrap().starts_with("taillab-wrk-"),
        "{w}"
    );
    assert_eq!(w["cpus"], serde_json::json!([0]));
    assert!(w["runq_wait_pct"].as_f64().unwrap() > 1.0, "{w}");
    // The human table shows the check; the series is written and aligned.
    let series = read_json(&out.join("environment.json"));
    assert_eq!(series["schema"], "taillab.environment/1");
    assert!(!series["intervals"].as_array().unwrap().is_empty());
    assert!(!series["report"]["samples"].as_array().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(&out);
}

/// Every limit of the environment check is a setting, and the check applies the one given.
#[test]
fn the_monitor_limits_are_settings() {
    let _s = serial();
    let out = tmp("limits");
    #[rustfmt::skip]
    let s = run(&[
        "--app", "synth", "--qps", "1000", "--requests", "1500", "--max-steal", "2.5",
        "--max-foreign", "6", "--max-worker-preemptions", "7", "--max-worker-runq-wait", "0.5",
    ], &out);
    let items = s["checks"]["environment"]["items"].as_array().unwrap();
    let limit = |n: &str| {
        items
            .iter()
            .find(|i| i["name"] == n)
            .map(|i| i["limit"].as_f64().unwrap())
    };
    assert_eq!(limit("steal"), Some(2.5));
    assert_eq!(limit("foreign_cpu"), Some(6.0));
    assert_eq!(limit("worker_invol_cs"), Some(7.0));
    assert_eq!(limit("worker_runq_wait"), Some(0.5));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn no_monitor_leaves_the_summary_without_environment() {
    let _s = serial();
    let out = tmp("nomon");
    let o = Command::new(bin())
        .arg("run")
        .args(RUN)
        .arg("--no-monitor")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_json(&out.join("summary.json"));
    assert!(s.get("environment").is_none() && s["checks"].get("environment").is_none());
    assert!(!out.join("environment.json").exists());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn repeated_runs_redo_disturbed_runs_and_say_so() {
    let _s = serial();
    let out = tmp("redo");
    let hog = Hog::pinned(0);
    let o = Command::new(bin())
        .arg("run")
        .args(RUN)
        .args([
            "--ci",
            "0.5",
            "--min-runs",
            "2",
            "--max-runs",
            "2",
            "--redo-disturbed",
            "1",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    drop(hog);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let points: Vec<PathBuf> = std::fs::read_dir(out.join("points"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(points.len(), 1);
    let runs: Vec<String> = std::fs::read_dir(&points[0])
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    // Every run was disturbed by the hog: each was redone once and the
    // discarded attempt kept beside it.
    let redone: Vec<&String> = runs.iter().filter(|r| r.contains(".disturbed-1")).collect();
    assert!(!redone.is_empty(), "{runs:?}");
    for r in redone {
        let kept = points[0].join(r.trim_end_matches(".disturbed-1"));
        let s = read_json(&kept.join("summary.json"));
        assert_eq!(
            s["environment_redo"]["redone"], 1,
            "{}",
            s["environment_redo"]
        );
        assert!(s["environment_redo"]["discarded"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("other processes"));
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn sweeps_redo_disturbed_runs_and_record_the_host() {
    let _s = serial();
    let out = tmp("sweep-redo");
    let hog = Hog::pinned(0);
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args([
            "sweep", "--app", "synth", "--qps", "1000", "--warmup-requests", "200",
            "--requests", "2000", "--set", "service=fixed:50us", "--redo-disturbed", "1", "-q",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    drop(hog);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The hog used a whole CPU: the run was redone once, the first attempt kept.
    let point = std::fs::read_dir(out.join("points"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    assert!(point
        .join("run-0.disturbed-1")
        .join("summary.json")
        .exists());
    let s = read_json(&point.join("run-0").join("summary.json"));
    assert_eq!(
        s["environment_redo"]["redone"], 1,
        "{}",
        s["environment_redo"]
    );
    // experiment.json carries the whole `taillab system show` report.
    let e = read_json(&out.join("experiment.json"));
    assert_eq!(
        e["system"]["cores_online"].as_u64().unwrap() as usize,
        std::thread::available_parallelism().unwrap().get()
    );
    assert!(e["system"]["kernel"].is_string(), "{}", e["system"]);
    assert!(e["system"]["timer_slack_ns"].is_number());
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_single_run_is_redone_when_disturbed_and_says_so() {
    let _s = serial();
    let out = tmp("redo-one");
    let hog = Hog::pinned(0);
    let o = Command::new(bin())
        .arg("run")
        .args(RUN)
        .args(["--redo-disturbed", "1", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    drop(hog);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The hog disturbed the first attempt: it is kept beside the run, and the
    // run's summary names it.
    let aside = out.with_file_name(format!(
        "{}.disturbed-1",
        out.file_name().unwrap().to_string_lossy()
    ));
    assert!(
        aside.join("summary.json").exists(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = read_json(&out.join("summary.json"));
    assert_eq!(
        s["environment_redo"]["redone"], 1,
        "{}",
        s["environment_redo"]
    );
    assert!(out.join("config.toml").exists());
    let _ = std::fs::remove_dir_all(&aside);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn system_show_json_and_reset_without_state() {
    let _s = serial();
    let o = Command::new(bin())
        .args(["system", "show", "--json", "--window", "300ms"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["system"]["cores_online"].as_u64().unwrap() >= 1);
    assert!(v["system"]["window_s"].as_f64().unwrap() > 0.2);
    assert!(v["warnings"].is_array() && v["tuning"].is_array());
    let state = tmp("state").join("s.json");
    let o = Command::new(bin())
        .args(["system", "reset", "--state"])
        .arg(&state)
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("nothing to reset"));
    let o = Command::new(bin())
        .args(["system", "tune", "--only", "nonsense"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown operation"));
}

/// A freeze of the whole harness (SIGSTOP for 80 ms, as a VM whose CPU the
/// host takes away) while requests fall due is a dispatch gap: `stalls` in the
/// summary measures it and the environment check fails, naming it, although
/// the monitor (frozen too) saw no steal and no other process.
#[test]
fn a_frozen_harness_is_a_stall_and_disturbs_the_run() {
    let _s = serial();
    let out = tmp("freeze");
    // 500 qps of 20 µs requests: the worker is idle 99 % of the time, so the
    // freeze almost surely falls between requests (one in service would
    // stretch its service time instead, which is not a gap).
    let mut child = Command::new(bin())
        .args([
            "run",
            "--app",
            "synth",
            "--qps",
            "500",
            "--warmup-requests",
            "100",
        ])
        .args([
            "--duration",
            "4s",
            "--set",
            "service=fixed:20us",
            "-q",
            "--out",
        ])
        .arg(&out)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let pid = child.id() as i32;
    // SAFETY: kill(2) on the child this test started and still owns.
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(std::time::Duration::from_millis(80));
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(child.wait().unwrap().success());
    let s = read_json(&out.join("summary.json"));
    let longest = s["stalls"]["longest_ns"].as_f64().unwrap();
    assert!(
        (70e6..2e9).contains(&longest),
        "longest dispatch gap {longest} ns after an 80 ms freeze: {}",
        s["stalls"]
    );
    let check = &s["checks"]["environment"];
    assert_eq!(check["ok"], false, "{check}");
    assert!(
        check["verdict"].as_str().unwrap().contains("stalled"),
        "{check}"
    );
    let item = check["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "stall")
        .unwrap_or_else(|| panic!("no stall item: {check}"));
    assert_eq!(item["ok"], false, "{item}");
    assert_eq!(item["limit"], 10.0, "{item}");
    let _ = std::fs::remove_dir_all(&out);
}
