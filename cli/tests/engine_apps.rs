//! Smoke tests: the real binary runs the speech and middleware apps end to
//! end in the integrated configuration and summary.json carries their
//! answers' evidence (decoding takes milliseconds, the JVM reports the
//! collector that was asked for).

use std::process::Command;

mod common;
use common::*;

#[cfg(feature = "middleware")]
#[test]
fn middleware_runs_and_reports_its_collector() {
    let out = tmp("middleware");
    let s = run(
        &[
            "--app",
            "middleware",
            "--qps",
            "300",
            "--warmup-requests",
            "300",
            "--requests",
            "600",
        ],
        &out,
    );
    // The default run must use G1; asking for another GC is a new process.
    assert_eq!(s["app_stats"]["gc"], "g1", "{}", s["app_stats"]);
    let s2 = run(
        &[
            "--app",
            "middleware",
            "--qps",
            "300",
            "--warmup-requests",
            "300",
            "--requests",
            "600",
            "--set",
            "gc=serial",
            "--set",
            "heap=256m",
            "--set",
            "warehouses=1",
        ],
        &out,
    );
    let stats = &s2["app_stats"];
    assert_eq!(stats["gc"], "serial", "{stats}");
    let names: Vec<&str> = stats["collectors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"Copy"), "{names:?}");
    assert_eq!(s2["requests"]["errors"], 0, "{}", s2["first_error"]);
    assert_eq!(s2["latency_ns"]["service"]["count"], 600);
    let _ = std::fs::remove_dir_all(&out);
}

#[cfg(feature = "middleware")]
#[test]
fn middleware_bad_gc_is_a_usage_error() {
    let o = Command::new(env!("CARGO_BIN_EXE_taillab"))
        .args([
            "run",
            "--app",
            "middleware",
            "--qps",
            "10",
            "--requests",
            "5",
            "--set",
            "gc=cms",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("gc") && err.contains("shenandoah"), "{err}");
}

#[cfg(feature = "speech")]
#[test]
fn speech_runs_end_to_end() {
    let out = tmp("speech");
    let s = run(
        &[
            "--app",
            "speech",
            "--set",
            "set=an4",
            "--qps",
            "2",
            "--warmup-requests",
            "1",
            "--requests",
            "4",
        ],
        &out,
    );
    assert_eq!(s["requests"]["errors"], 0, "{}", s["first_error"]);
    let service = &s["latency_ns"]["service"];
    assert_eq!(service["count"], 4);
    // A real decode of 0.5-5 s of audio takes milliseconds at least.
    assert!(service["p50"].as_f64().unwrap() > 1e6, "{service}");
    let _ = std::fs::remove_dir_all(&out);
}

/// Translate runs its Apertium stages as child processes: they are the
/// experiment's (reported under the harness), never foreign load, so a run is
/// not marked disturbed by its own app (issue 19).
#[cfg(feature = "translate")]
#[test]
fn translate_helpers_are_the_experiments_not_foreign() {
    let out = tmp("translate-children");
    let s = run(
        &[
            "--app",
            "translate",
            "--qps",
            "20",
            "--warmup-requests",
            "20",
            "--requests",
            "200",
        ],
        &out,
    );
    let env = &s["environment"];
    let foreign = env["top_foreign"].to_string();
    for stage in ["lt-proc", "apertium", "lrx-proc", "cg-proc"] {
        assert!(
            !foreign.contains(stage),
            "{stage} counted as foreign: {foreign}"
        );
    }
    let children = env["harness"]["children"].to_string();
    assert!(
        children.contains("lt-proc") || children.contains("apertium"),
        "{}",
        env["harness"]
    );
    assert!(
        env["harness"]["children_cpu_pct"].as_f64().unwrap() > 0.0,
        "{}",
        env["harness"]
    );
    let verdict = s["checks"]["environment"]["verdict"].as_str().unwrap_or("");
    assert!(
        !verdict.contains("lt-proc") && !verdict.contains("apertium"),
        "{verdict}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// In the integrated configuration the client's request generation runs on the worker
/// (kv draws a Zipfian key and builds its request: several µs). Done between the requests
/// of a backlog, it delayed each of them, and kv's mean sojourn at 60–70 % load was
/// 1.15–1.22× the ideal replay of its own service times (6 of 6 runs, 2-vCPU VM), where
/// synth's was 1.01×. An idle worker now generates requests ahead: 1.015–1.04×. One of five
/// tries must be within 8 %; a try whose host was disturbed (steal, other processes: in one
/// full-suite run every try shared the CPUs with 50–130 % of a CPU of other work and was
/// 1.10–1.82×) is not counted, and two undisturbed tries out of bounds fail the test
/// (`within_tries`).
#[cfg(feature = "kv")]
#[test]
fn kv_under_load_stays_near_its_ideal() {
    let _s = serial();
    within_tries("kv near its ideal", 5, 2, |k| {
        let out = tmp(&format!("kv-near-ideal-{k}"));
        #[rustfmt::skip]
        let s = run(&["--app", "kv", "--qps", "7000", "--threads", "1", "--warmup-requests", "2000",
                      "--requests", "15000", "--seed", &k.to_string()], &out);
        let _ = std::fs::remove_dir_all(&out);
        let (m, i) = (
            s["latency_ns"]["sojourn"]["mean"].as_f64().unwrap(),
            s["ideal"]["sojourn"]["mean"].as_f64().unwrap(),
        );
        let util = s["utilization"].as_f64().unwrap();
        assert!(
            util > 0.3,
            "too light a load to test anything: utilization {util}"
        );
        if m / i <= 1.08 {
            return Ok(());
        }
        let verdict = s["checks"]["environment"]["verdict"].as_str().unwrap_or("");
        Err((
            format!(
                "measured ÷ ideal mean sojourn {:.3} at utilization {util:.2} ({verdict})",
                m / i
            ),
            host_disturbed(&s),
        ))
    });
}

/// A real app's run carries its ideal (the replay of its own arrivals and
/// service times) and the excess over it, and the report shows both: the
/// CCDF figure and the measured-vs-ideal table (issue 14).
#[cfg(feature = "kv")]
#[test]
fn kv_run_reports_its_ideal_and_excess() {
    let out = tmp("kv-ideal");
    #[rustfmt::skip]
    let s = run(&["--app", "kv", "--set", "keys=20000", "--qps", "2000", "--warmup-requests", "500",
                  "--requests", "3000", "--save-requests"], &out);
    let i = &s["ideal"];
    assert_eq!(i["method"], "replay", "{i}");
    assert_eq!(i["replayed"], 3500);
    assert_eq!(i["sojourn"]["count"], 3000);
    let measured = &s["latency_ns"]["sojourn"];
    for q in ["mean", "p50", "p99"] {
        let (m, id) = (
            measured[q].as_f64().unwrap(),
            i["sojourn"][q].as_f64().unwrap(),
        );
        // The ideal keeps the measured service times and removes only
        // what a perfect queue would not add: it never exceeds the run.
        assert!(
            id > 0.0 && id <= m * 1.001,
            "{q}: ideal {id} vs measured {m}"
        );
        let ex = i["excess"][q].as_f64().unwrap();
        assert!(
            (ex - (m - id)).abs() <= 1e-6 * m + 1.0,
            "{q}: excess {ex} ≠ {m} − {id}"
        );
    }
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    assert!(csv.lines().next().unwrap().ends_with(",ideal_completed"));
    let html = report_html(&out);
    assert!(html.contains("ideal_ccdf"), "no ideal figure");
    assert!(html.contains("Measured vs ideal"), "no excess table");
    let _ = std::fs::remove_dir_all(&out);
}
