//! `taillab tailwag APP` end to end with a short setting (issue 15): the app
//! measured at loads relative to its saturation rate, its service times
//! fitted, the fitted synthetic workload run at the same absolute rates, and
//! the validation written; synth fitted to synth recovers the mixture it ran.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;

/// `tailwag` whose folder is removed afterwards.
fn tailwag(app: &str, extra: &[&str]) {
    let out = tailwag_in(app, extra);
    std::fs::remove_dir_all(&out).unwrap();
}

/// `taillab tailwag APP` (the app positional, as the README writes it) at two loads with
/// `extra`, its files' shape checked; returns its folder.
fn tailwag_in(app: &str, extra: &[&str]) -> PathBuf {
    // A folder of its own per call: two tests of one app shared one, and the first's clean-up
    // (after `serial` is released) met the second's files ("Directory not empty").
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let _s = serial();
    let out = tmp(&format!("tailwag-{app}-{n}"));
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["tailwag", app, "--load", "0.3,0.6", "--requests", "1500",
               "--warmup-requests", "100", "--probe", "500ms", "-q", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let tw = json(&out.join("tailwag.json"));
    assert!(tw["spec"].as_str().unwrap().contains("lognormal"), "{tw}");
    // Both sides ran the same points: same thread counts and absolute rates.
    let m = json(&out.join("measured/experiment.json"));
    let each = extra.contains(&"each");
    let s = if each {
        // One synthetic folder per measured point, each with that point's own fit.
        let mut pts = Vec::new();
        for p in m["points"].as_array().unwrap() {
            let id = p["id"].as_str().unwrap();
            let e = json(&out.join("synthetic").join(id).join("experiment.json"));
            assert!(
                tw["specs"][id].as_str().unwrap().contains("lognormal"),
                "{id}: {tw}"
            );
            pts.extend(e["points"].as_array().unwrap().iter().cloned());
        }
        serde_json::json!({ "points": pts })
    } else if extra.contains(&"highest") {
        assert_eq!(tw["fit_at"], "highest");
        // The fit is of the one-worker point at the highest load.
        let last = m["points"].as_array().unwrap().last().unwrap();
        assert_eq!(tw["fit_point"], last["id"], "{tw}");
        json(&out.join("synthetic/experiment.json"))
    } else {
        // The default: one fit across the loads, its optional terms chosen on held-out
        // blocks; a kept cold start is in the settings the synthetic workload runs with.
        assert_eq!(tw["fit_at"], "all");
        assert_eq!(tw["fit_point"], "all");
        let set = tw["settings_fitted"].to_string();
        let all = pooled_fit(&out);
        assert_eq!(all["by_point"].as_array().unwrap().len(), 2, "{all}");
        let steps = all["selection"]["steps"].as_array().unwrap();
        // Every optional term tried (then each mixture component beyond the first).
        let terms: Vec<&str> = steps.iter().map(|s| s["term"].as_str().unwrap()).collect();
        assert_eq!(terms[..4], ["pause", "cold", "speed", "periodic"], "{all}");
        assert!(
            terms[4..].iter().all(|t| t.starts_with("component ")),
            "{all}"
        );
        let cold = all["selection"]["kept"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t == "cold");
        assert_eq!(set.contains("cold="), cold, "{tw}");
        let s = json(&out.join("synthetic/experiment.json"));
        let run = out.join("synthetic/points");
        let first = std::fs::read_dir(&run)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let summary = read_summary(&first.join("run-0"));
        if cold {
            assert!(
                summary["app_stats"]["cold"]["requests"].as_u64().unwrap() > 0,
                "the synthetic runs with cold=: {}",
                summary["app_stats"]
            );
        }
        s
    };
    let rates = |e: &serde_json::Value| -> Vec<(u64, i64)> {
        e["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["threads"].as_u64().unwrap(),
                    p["qps"].as_f64().unwrap() as i64,
                )
            })
            .collect()
    };
    assert_eq!(rates(&m), rates(&s));
    assert_eq!(s["points"][0]["app"], "synth");
    assert!(out.join("measured/fit.json").exists());
    let v = json(&out.join("validation/validation.json"));
    assert!(v.to_string().contains("p99"), "{v}");
    // Every point runs in blocks: its error has a standard error from their spread, and the
    // summary the noise floor it makes.
    for p in v["points"].as_array().unwrap() {
        assert!(p["error_p95_se"].as_f64().is_some_and(|x| x > 0.0), "{p}");
    }
    assert!(
        v["summary"]["stats"]["p95"]["noise_floor"]
            .as_f64()
            .is_some_and(|x| x > 0.0),
        "{v}"
    );
    if each {
        assert_eq!(tw["rounds"], 1, "--fit-at each runs one round");
    } else {
        // Two rounds by default. Round 2: the same absolute rates, fresh seeds, round 1's error with round 2's
        // beside it, and the app against itself (round 2 vs round 1).
        let m2 = json(&out.join("round-2/measured/experiment.json"));
        let s2 = json(&out.join("round-2/synthetic/experiment.json"));
        assert_eq!(rates(&m2), rates(&m));
        assert_eq!(rates(&s2), rates(&m));
        assert_ne!(
            m2["base_seed"], m["base_seed"],
            "round 2 reuses round 1's seed"
        );
        assert_eq!(tw["rounds"], 2);
        for p in v["points"].as_array().unwrap() {
            assert_eq!(p["rounds"], 2, "{p}");
            assert!(
                p["error_p95_r2"].is_number() && p["repeat_p95"].is_number(),
                "{p}"
            );
            // The error is round 1's (the runs the fit came from); the later round is
            // beside it, out of sample, with the app against itself.
            assert_eq!(p["error_mean"], p["error_mean_r1"], "{p}");
            assert!(p["later_error_p99"].is_number(), "{p}");
        }
        let p95 = &v["summary"]["stats"]["p95"];
        assert!(
            p95["app_repeat"].is_number() && p95["later"].is_number(),
            "{v}"
        );
    }
    assert!(out.join("validation/index.html").exists());
    if extra.contains(&"highest") {
        // Resumed with other synthetic settings: refused, with what to do.
        #[rustfmt::skip]
        let o = Command::new(bin())
            .args(["tailwag", "--app", app, "--load", "0.3,0.6", "--requests", "1500",
                   "--warmup-requests", "100", "--probe", "500ms", "-q", "--resume",
                   "--synth-set", "scale=1.01", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            !o.status.success() && err.contains("remove that folder"),
            "{err}"
        );
    }
    out
}

/// The fit across the loads (entry `all`) of a tailwag folder's `measured/fit.json`.
fn pooled_fit(out: &Path) -> serde_json::Value {
    let fit = json(&out.join("measured/fit.json"));
    let pooled = fit["fits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["point"] == "all");
    pooled
        .cloned()
        .unwrap_or_else(|| panic!("no pooled fit: {fit}"))
}

/// Why any measured run of a tailwag folder was disturbed (steal, other processes).
fn measured_disturbed(out: &Path) -> Option<String> {
    let points = out.join("measured/points");
    let mut why = Vec::new();
    for p in std::fs::read_dir(&points).unwrap().flatten() {
        for r in std::fs::read_dir(p.path()).unwrap().flatten() {
            let s = r.path().join("summary.json");
            if let Some(w) = s.exists().then(|| host_disturbed(&json(&s))).flatten() {
                why.push(format!("{}: {w}", r.path().display()));
            }
        }
    }
    (!why.is_empty()).then(|| why.join("; "))
}

/// synth fitted to synth across the loads (the default `--fit-at all`): a two-part mixture
/// (0.8 of 50 µs and 0.2 of 400 µs, cv 0.2) comes back as its two modes, each weight within
/// ±0.03 and mean within 5 % (`check_components`: 3 000 requests give a weight a standard
/// error of 0.007); the data have no cold start, no host speed and no periodic request, and
/// the fit keeps none of them (each optional term must earn its place on held-out blocks):
/// the bound on F is 0.05 and on the synthetic runs' cold factor 1.05. (Three tailwag runs
/// with 3 000 requests per load on the 2-vCPU VM, 2026-11-26, gave 0.790-0.798 / 50.0-50.2 µs
/// and 0.193-0.203 / 399-401 µs; a busy host added a third component of 4-5 ms holding
/// 1-2 %.) A miss on a host the environment check calls disturbed skips the check (feature
/// `undisturbed`).
#[test]
fn tailwag_synth_recovers_a_known_mixture() {
    let service = "service=mix:0.8*lognormal:50us,cv=0.2+0.2*lognormal:400us,cv=0.2";
    let out = tailwag_in("synth", &["--set", service]);
    let all = pooled_fit(&out);
    let mut bad: Vec<String> = check_components(&all, &[(0.8, 50e3, 0.2), (0.2, 400e3, 0.2)])
        .err()
        .into_iter()
        .collect();
    let extra = all["cold"]["extra"].as_f64().unwrap_or(0.0);
    if extra > 0.05 {
        bad.push(format!(
            "a cold start of F {extra:.3} the data lack: {}",
            all["cold"]
        ));
    }
    for cold in synthetic_cold_factors(&out) {
        if cold > 1.05 {
            bad.push(format!("the synthetic runs slowed {cold:.3}x after idling"));
        }
    }
    if !all["speed"]["factors"].is_null() {
        bad.push(format!("a host speed the data lack: {}", all["speed"]));
    }
    if !all["periodic"].is_null() {
        bad.push(format!(
            "a periodic request the data lack: {}",
            all["periodic"]
        ));
    }
    let why = measured_disturbed(&out);
    std::fs::remove_dir_all(&out).unwrap();
    // One try (a tailwag run takes minutes): counted in the ledger as an accuracy test.
    let name = "tailwag synth recovers its mixture";
    match (bad.is_empty(), why) {
        (true, _) => accuracy_outcome(name, "passed", 1),
        (false, Some(w)) => {
            accuracy_outcome(name, "disturbed", 1);
            skip_without(
                "undisturbed",
                &format!("{}; disturbed: {w}", bad.join("; ")),
            )
        }
        (false, None) => {
            accuracy_outcome(name, "failed", 1);
            panic!("synth fitted to synth: {}", bad.join("; "))
        }
    }
}

/// The synthetic runs' mean cold-start factors (`app_stats.cold.mean_factor`).
fn synthetic_cold_factors(out: &Path) -> Vec<f64> {
    let mut f = Vec::new();
    for p in std::fs::read_dir(out.join("synthetic/points"))
        .unwrap()
        .flatten()
    {
        for r in std::fs::read_dir(p.path()).unwrap().flatten() {
            let s = r.path().join("summary.json");
            if s.exists() {
                f.extend(json(&s)["app_stats"]["cold"]["mean_factor"].as_f64());
            }
        }
    }
    f
}

/// The default `--fit-at all`.
#[test]
fn tailwag_kv_runs_end_to_end() {
    tailwag("kv", &["--set", "keys=20000"]);
}

/// `--fit-at highest`: the synthetic fitted to the one-worker point at the highest load.
#[test]
fn tailwag_synth_fit_at_highest() {
    tailwag(
        "synth",
        &[
            "--fit-at",
            "highest",
            "--set",
            "service=exp:50us",
            "--rounds",
            "2",
        ],
    );
}

/// Rounds that cannot be compared are refused before anything runs.
#[test]
fn tailwag_bad_rounds_are_refused() {
    for (args, why) in [
        (&["--rounds", "0"][..], "at least 1"),
        (&["--rounds", "2", "--fit-at", "each"][..], "--fit-at each"),
    ] {
        let out = tmp("tailwag-bad-rounds");
        let o = Command::new(bin())
            .args(["tailwag", "--app", "synth", "-q", "--out"])
            .arg(&out)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(why), "{args:?}: {err}");
        assert!(!out.join("measured").exists(), "{args:?} ran something");
    }
}

/// With `--fit-at each`: every point its own fit and synthetic run.
#[test]
fn tailwag_img_dnn_runs_end_to_end() {
    tailwag("img-dnn", &["--fit-at", "each"]);
}
