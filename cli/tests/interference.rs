//! Planned interference and host tuning in real runs (issue 16): a CPU hog on
//! the worker's core raises the service tail, the summary names it, the
//! worker's preemption by it is not blamed on the host, and knobs changed for
//! a run are back afterwards — also after Ctrl-C.

use serde_json::Value;
use std::path::Path;
use std::process::Command;

mod common;
use common::*;

#[rustfmt::skip]
const RUN: &[&str] = &[
    "--app", "synth", "--qps", "2000", "--warmup-requests", "200", "--requests", "4000",
    "--set", "service=exp:100us", "--cpus", "0",
];

fn svc_p99(s: &Value) -> f64 {
    s["latency_ns"]["service"]["p99"].as_f64().unwrap()
}

#[test]
fn a_hog_on_the_workers_cpu_raises_the_tail_and_is_named() {
    let _s = serial();
    let mut ratios = Vec::new();
    for k in 0..3 {
        let (a, b) = (tmp(&format!("hog-a{k}")), tmp(&format!("hog-b{k}")));
        let quiet = run(RUN, &a);
        let mut args = RUN.to_vec();
        args.extend(["--interfere", "cpu:1@cpus=0"]);
        let hog = run(&args, &b);
        // The summary names what ran and what it used.
        let i = &hog["interference"];
        assert_eq!(i["specs"][0], "cpu:1@cpus=0", "{i}");
        assert!(
            i["hogs"][0]["pids"]
                .as_array()
                .is_some_and(|p| !p.is_empty()),
            "{i}"
        );
        assert_eq!(
            hog["checks"]["interference"]["ok"], true,
            "{}",
            hog["checks"]["interference"]
        );
        // The hog preempts the worker by design: that is not the host's fault.
        let env = &hog["checks"]["environment"]["verdict"];
        assert!(!env.as_str().unwrap_or("").contains("preempted"), "{env}");
        // Nothing of it is left running.
        for p in i["hogs"][0]["pids"].as_array().unwrap() {
            assert!(
                !Path::new(&format!("/proc/{}", p.as_i64().unwrap())).exists(),
                "hog {p} survived"
            );
        }
        let r = svc_p99(&hog) / svc_p99(&quiet);
        ratios.push(r);
        let _ = std::fs::remove_dir_all(&a);
        let _ = std::fs::remove_dir_all(&b);
        // A hog sharing the core shows in service p99 (here it was 4–9× on a quiet VM).
        if r > 1.5 {
            return;
        }
    }
    panic!("service p99 with a hog on the worker's CPU vs without: {ratios:?}");
}

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

fn thp_mode() -> Option<String> {
    let t = std::fs::read_to_string(THP).ok()?;
    t.split_whitespace()
        .find(|w| w.starts_with('['))
        .map(|w| w.trim_matches(['[', ']']).to_string())
}

#[test]
fn knobs_are_restored_after_a_run_and_after_ctrl_c() {
    let _s = serial();
    let Some(before) = thp_mode() else {
        return skip_without("thp", &format!("{THP} does not exist on this host"));
    };
    let other = if before == "never" {
        "madvise"
    } else {
        "never"
    };
    let out = tmp("knobs");
    let mut args = RUN.to_vec();
    args.extend(["--thp", other, "--dma-latency", "0"]);
    let s = run(&args, &out);
    assert_eq!(
        thp_mode().as_deref(),
        Some(before.as_str()),
        "THP not restored"
    );
    let knobs = s["tuning"]["applied"]["knobs"]
        .as_array()
        .expect("tuning recorded");
    assert!(
        knobs.iter().any(|k| k.to_string().contains(other)),
        "{}",
        s["tuning"]
    );
    assert!(std::fs::read_to_string(out.join("config.toml"))
        .unwrap()
        .contains(&format!("thp = \"{other}\"")));
    // Ctrl-C in the middle of a long run: knobs back, no hog left.
    let out2 = tmp("knobs-int");
    let mut c = Command::new(bin());
    c.arg("run").args([
        "--app",
        "synth",
        "--qps",
        "1000",
        "--duration",
        "30s",
        "--set",
        "service=exp:50us",
        "-q",
    ]);
    c.args(["--thp", other, "--interfere", "cpu:1", "--out"])
        .arg(&out2);
    let mut child = c.spawn().unwrap();
    let t0 = std::time::Instant::now();
    while thp_mode().as_deref() != Some(other) && t0.elapsed().as_secs() < 20 {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(
        thp_mode().as_deref(),
        Some(other),
        "the run never applied THP"
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let st = child.wait().unwrap();
    assert!(!st.success());
    assert_eq!(
        thp_mode().as_deref(),
        Some(before.as_str()),
        "THP not restored after Ctrl-C"
    );
    assert!(
        running("stress-ng").is_empty(),
        "stress-ng left running: {:?}",
        running("stress-ng")
    );
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&out2);
}

/// Live (not zombie) processes whose name starts with `name`. A killed hog
/// whose parent exited stays a zombie until init reaps it: not running.
fn running(name: &str) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let (Some(a), Some(b)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let zombie = stat[b + 1..].trim_start().starts_with('Z');
        if stat[a + 1..b].starts_with(name) && !zombie {
            v.push(pid);
        }
    }
    v
}

#[test]
fn bad_interference_is_refused_before_anything_starts() {
    for (bad, want) in [
        (vec!["--interfere", "gpu:1"], "unknown class `gpu`"),
        (vec!["--interfere", "cpu:1@cpus=4096"], "4096"),
        (vec!["--thp", "sometimes"], "THP mode"),
        (vec!["--rt-priority", "100"], "rt_priority"),
        (vec!["--nice", "20"], "harness.nice must be -20..=19"),
        (vec!["--nice", "-20", "--rt-priority", "50"], "both set"),
    ] {
        let mut args = vec!["run", "-q"];
        args.extend(RUN);
        args.extend(bad.iter().copied());
        let o = Command::new(bin())
            .args(&args)
            .args(["--out", "/tmp/taillab-never-written"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {e}");
        assert!(e.contains(want), "{bad:?}: {e}");
        assert!(!Path::new("/tmp/taillab-never-written").exists());
    }
}

#[test]
fn a_perf_profile_is_written_or_its_absence_explained() {
    let _s = serial();
    let out = tmp("perf");
    let mut args = RUN.to_vec();
    args.extend(["--profile", "perf"]);
    let s = run(&args, &out);
    let p = &s["profile"];
    match p["status"].as_str() {
        Some("written") => {
            let folded = std::fs::read_to_string(out.join(p["folded"].as_str().unwrap())).unwrap();
            assert!(folded.lines().count() > 0, "empty folded stacks");
            assert!(out.join(p["svg"].as_str().unwrap()).exists());
        }
        Some("skipped") => {
            let why = p["reason"].as_str().unwrap_or_default();
            assert!(!why.is_empty(), "{p}");
            skip_without("perf", &format!("the run's profile was skipped: {why}"));
        }
        _ => panic!("no profile section: {s}"),
    }
    let _ = std::fs::remove_dir_all(&out);
}
