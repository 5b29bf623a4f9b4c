//! `taillab fit` on runs of the real binary: synth draws service times from a known
//! mixture of log-normals, the fit must recover it, and its spec must reproduce the run.
//!
//! Bounds: each true component's weight ±0.03 and mean ±5 %, taken over the fitted
//! components that make up its mode (see `check_components`; the fitted means include the
//! harness's ~0.2 µs around each service, < 1 % here); p50/p99 of a rerun of the fitted
//! spec within 3 % of the original's (15 000 requests: the p99's sampling error is ~0.5 %
//! per run). A host disturbed by other processes or steal preempts workers mid-service,
//! which adds a slow component of its own; such tries are repeated and, if all are
//! disturbed, the test says INCONCLUSIVE and skips rather than blame the fit (it fails where
//! `TAILLAB_REQUIRE` lists `undisturbed`).

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod common;
use common::*;

/// This checkout's Python package (not whatever the venv installed in editable mode).
fn python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../python")
}

fn fit_cmd(args: &[&str]) -> Output {
    Command::new(bin())
        .arg("fit")
        .args(args)
        .env("PYTHONPATH", python_dir())
        .output()
        .unwrap()
}

/// `taillab fit DIR --json`: the first (only) fit of a run folder.
fn fit(dir: &Path) -> Value {
    let o = fit_cmd(&[dir.to_str().unwrap(), "--json"]);
    assert!(
        o.status.success(),
        "taillab fit failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc: Value = serde_json::from_slice(&o.stdout).expect("fit --json prints JSON");
    assert_eq!(doc["schema"], "taillab.fit/1");
    doc["fits"][0].clone()
}

fn disturbed(s: &Value) -> Option<String> {
    host_disturbed(s)
}

fn within_tries(name: &str, attempt: impl FnMut(u64) -> Result<(), (String, Option<String>)>) {
    common::within_tries(name, 5, 2, attempt)
}

fn synth_run(spec: &str, qps: &str, requests: &str, seed: u64, out: &Path) -> Value {
    run(
        &[
            "--app",
            "synth",
            "--qps",
            qps,
            "--threads",
            "1",
            "--requests",
            requests,
            "--warmup-requests",
            "500",
            "--seed",
            &seed.to_string(),
            "--set",
            &format!("service={spec}"),
            "--save-requests",
        ],
        out,
    )
}

fn recovers(name: &str, spec: &str, qps: &str, truth: &[(f64, f64, f64)]) {
    let _serial = serial();
    within_tries(name, |k| {
        let out = tmp(&format!("fit-{name}-{k}"));
        let s = synth_run(spec, qps, "6000", 40 + k, &out);
        let f = fit(&out);
        assert_eq!(f["source"], "requests");
        assert_eq!(f["n"], 6000);
        let r = check_components(&f, truth)
            .and_then(|()| match &f["periodic"] {
                Value::Null => Ok(()),
                p => Err(format!("independent draws taken for periodic: {p}")),
            })
            .map_err(|e| (e, disturbed(&s)));
        let _ = std::fs::remove_dir_all(&out);
        r
    });
}

#[test]
fn fit_recovers_one_component() {
    recovers("one", "lognormal:80us,cv=0.2", "2500", &[(1.0, 80e3, 0.2)]);
}

#[test]
fn fit_recovers_two_components() {
    recovers(
        "two",
        "mix:0.7*lognormal:40us,cv=0.2+0.3*lognormal:300us,cv=0.2",
        "2500",
        &[(0.7, 40e3, 0.2), (0.3, 300e3, 0.2)],
    );
}

#[test]
fn fit_recovers_three_components() {
    recovers(
        "three",
        "mix:0.6*lognormal:30us,cv=0.15+0.3*lognormal:150us,cv=0.15+0.1*lognormal:800us,cv=0.15",
        "2000",
        &[(0.6, 30e3, 0.15), (0.3, 150e3, 0.15), (0.1, 800e3, 0.15)],
    );
}

/// The fitted spec, run again with another seed, gives the original's service p50 and
/// p99 within 3 %.
#[test]
fn fitted_spec_round_trips() {
    let _serial = serial();
    let spec = "mix:0.8*lognormal:50us,cv=0.1+0.2*lognormal:200us,cv=0.1";
    within_tries("round trip", |k| {
        let (a, b) = (tmp(&format!("rt-a-{k}")), tmp(&format!("rt-b-{k}")));
        let sa = synth_run(spec, "5000", "15000", 60 + k, &a);
        let fitted = fit(&a)["spec"].as_str().unwrap().to_string();
        let sb = synth_run(&fitted, "5000", "15000", 80 + k, &b);
        let why = disturbed(&sa).or(disturbed(&sb));
        let svc = |s: &Value, q: &str| s["latency_ns"]["service"][q].as_f64().unwrap();
        for q in ["p50", "p99"] {
            let (x, y) = (svc(&sa, q), svc(&sb, q));
            if (y / x - 1.0).abs() > 0.03 {
                return Err((format!("{q}: {x} ns, fitted {fitted} gives {y} ns"), why));
            }
        }
        let _ = (std::fs::remove_dir_all(&a), std::fs::remove_dir_all(&b));
        Ok(())
    });
}

/// synth's `periodic=` (a 2 ms request every 60th to 80th) is found by the fit: the slow
/// component leaves the mixture and comes back as `periodic=` with its gap range within ±5
/// requests and its mean within 5 %; the order check sees that shuffling the run's service
/// times would queue more (independent draws bunch the slow ones).
#[test]
fn fit_finds_a_periodic_slow_request() {
    let _serial = serial();
    within_tries("periodic", |k| {
        let out = tmp(&format!("fit-periodic-{k}"));
        let s = run(
            &[
                "--app",
                "synth",
                "--qps",
                "7000",
                "--threads",
                "1",
                "--requests",
                "8000",
                "--warmup-requests",
                "500",
                "--seed",
                &(120 + k).to_string(),
                "--set",
                "service=lognormal:50us,cv=0.1",
                "--set",
                "periodic=requests:60-80,for=lognormal:2ms,cv=0.05",
                "--save-requests",
            ],
            &out,
        );
        let f = fit(&out);
        let why = disturbed(&s);
        let p = &f["periodic"];
        let Some(setting) = p["setting"].as_str() else {
            return Err((
                format!("no periodic component found: {}", f["components"]),
                why,
            ));
        };
        let gap = p["gap_mean"].as_f64().unwrap();
        let mean = p["mean_ns"].as_f64().unwrap();
        let (lo, hi) = setting
            .trim_start_matches("requests:")
            .split_once(',')
            .and_then(|(g, _)| g.split_once('-'))
            .map(|(a, b)| (a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap()))
            .unwrap_or((0.0, 0.0));
        let sets = f["synth_settings"].to_string();
        let effect = f["order"]["effect"]["p99"].as_f64().unwrap();
        let r = if (gap - 70.0).abs() > 3.0
            || (lo - 60.0).abs() > 5.0
            || (hi - 80.0).abs() > 5.0
            || (mean / 2e6 - 1.0).abs() > 0.05
            || !sets.contains("periodic=requests:")
            || f["synth_set"].as_str().unwrap_or("ms,").contains("ms,")
            || effect >= 0.0
        {
            Err((
                format!("periodic {p}, settings {sets}, order effect on p99 {effect}"),
                why,
            ))
        } else {
            Ok(())
        };
        let _ = std::fs::remove_dir_all(&out);
        r
    });
}

/// Too few requests to fit: refused with the reason, exit 2; the JSON output still
/// carries the reason.
#[test]
fn fit_refuses_small_runs() {
    let out = tmp("fit-small");
    run(
        &[
            "--app",
            "synth",
            "--qps",
            "2000",
            "--requests",
            "300",
            "--warmup-requests",
            "50",
            "--set",
            "service=fixed:20us",
        ],
        &out,
    );
    let o = fit_cmd(&[out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("300 measured requests") && err.contains("1000"),
        "{err}"
    );
    let o = fit_cmd(&[out.to_str().unwrap(), "--point", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no point"));
    let o = fit_cmd(&[out.to_str().unwrap(), "--components", "7"]);
    assert_eq!(o.status.code(), Some(2), "clap refuses K outside 1..=5");
    let _ = std::fs::remove_dir_all(&out);
}

/// A critical section longer than the service it wraps runs, with a warning.
#[test]
fn synth_warns_about_long_locks() {
    let out = tmp("fit-longlock");
    let o = Command::new(bin())
        .args([
            "run",
            "--app",
            "synth",
            "--qps",
            "200",
            "--requests",
            "200",
            "--warmup-requests",
            "20",
            "--set",
            "service=fixed:10us",
            "--set",
            "recv_lock=fixed:100us",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("warning: synth: recv_lock"), "{err}");
    let s = read_summary(&out);
    assert_eq!(s["app_stats"]["recv_lock"]["acquired"], 220);
    // Service time covers the critical section: ≥ 110 µs at the median.
    assert!(s["latency_ns"]["service"]["p50"].as_f64().unwrap() >= 110e3);
    let _ = std::fs::remove_dir_all(&out);
}

/// A one-worker synth sweep at two rates with `sets`, saving its requests into `out`, then
/// `taillab fit --pooled` of it: the pooled entry, and why a point's run was disturbed.
fn pooled_sweep_fit(
    out: &Path,
    qps: &[u32],
    requests: &str,
    seed: u64,
    sets: &[&str],
) -> (Value, Option<String>) {
    let mut cmd = std::process::Command::new(bin());
    let rates: Vec<String> = qps.iter().map(|q| q.to_string()).collect();
    #[rustfmt::skip]
    cmd.args(["sweep", "--app", "synth", "--threads", "1", "--qps", &rates.join(","),
              "--requests", requests, "--warmup-requests", "300", "--seed", &seed.to_string(),
              "--save-requests", "-q", "--out"])
        .arg(out);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let why = qps.iter().find_map(|q| {
        let p = out.join("points").join(format!("integrated-t1-q{q}"));
        disturbed(&read_summary(&p.join("run-0")))
    });
    let o = fit_cmd(&[out.to_str().unwrap(), "--pooled", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let all = doc["fits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["point"] == "all")
        .cloned()
        .expect("the pooled entry");
    (all, why)
}

/// The cold start's tau is `truth` (apps/synth/README.md: synth's own `cold=0.5,tau=3ms` is
/// found at 3 ms) and lies within the fit's interval for it (`cold.tau_tie_ns`: the taus whose
/// replay is as good as the choice's); the grid's neighbours, 1 and 10 ms, are a factor of three
/// off and no longer pass.
fn tau_found(cold: &Value, truth: f64) -> Result<(), String> {
    let tau = cold["tau_ns"].as_f64().unwrap_or(0.0);
    let tie: Vec<f64> = cold["tau_tie_ns"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    if tau == truth && tie.contains(&truth) {
        Ok(())
    } else {
        Err(format!("tau {tau} ns, interval {tie:?} (true {truth} ns)"))
    }
}

/// `taillab fit --pooled` on a sweep of synth with a known cold start (`cold=0.5,tau=3ms`:
/// 1.5× slower after a long idle, warm within a few ms of serving) at a light and a heavy
/// load: recovers the slowdown within ±0.15, tau (`tau_found`), the warm service mean within
/// 5 %, and each load's mean service within 5 %.
#[test]
fn pooled_fit_recovers_a_cold_start() {
    let _serial = serial();
    within_tries("cold start", |k| {
        let out = tmp(&format!("fit-cold-{k}"));
        let sets = ["service=lognormal:200us,cv=0.1", "cold=0.5,tau=3ms"];
        let (all, why) = pooled_sweep_fit(&out, &[400, 3000], "4000", 90 + k, &sets);
        let c = &all["cold"];
        let extra = c["extra"].as_f64().unwrap_or(0.0);
        let settings = all["synth_settings"].to_string();
        let mean: f64 = all["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["weight"].as_f64().unwrap() * c["mean_ns"].as_f64().unwrap())
            .sum();
        let mut bad = Vec::new();
        if !(0.35..=0.65).contains(&extra) {
            bad.push(format!("slowdown {extra:.3} (true 0.5)"));
        }
        if let Err(e) = tau_found(c, 3e6) {
            bad.push(e);
        }
        if (mean / 200e3 - 1.0).abs() > 0.05 {
            bad.push(format!("warm mean {mean:.0} ns (true 200 µs)"));
        }
        for b in all["by_point"].as_array().unwrap() {
            let (m, p) = (
                b["measured_service_mean_ns"].as_f64().unwrap(),
                b["model_service_mean_ns"].as_f64().unwrap(),
            );
            if (p / m - 1.0).abs() > 0.05 {
                bad.push(format!(
                    "{}: model {p:.0} ns vs measured {m:.0}",
                    b["point"]
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&out);
        if bad.is_empty() {
            assert!(settings.contains("cold="), "{settings}");
            Ok(())
        } else {
            Err((format!("{}; fit {all}", bad.join(", ")), why))
        }
    });
}

/// `taillab fit --pooled` on synth whose service wanders with the host's speed
/// (`speed=0.7/1/1.3,every=500ms`: a third of the half-seconds 30 % slower, a third 30 %
/// faster) at 30 and 70 % load: writes a `speed=` whose factors span at least 0.8–1.2 with a
/// cv of 15–35 % (true 24.5 %), the replay keeping most of it (the wander is the clock's,
/// so the queue feels all of it), and the term is kept on the held-out half of the records
/// (28 000 requests per load: the fitted half of the busier load holds eight 500 ms
/// stretches, the speed's least six).
#[test]
fn pooled_fit_recovers_the_host_speed() {
    let _serial = serial();
    within_tries("host speed", |k| {
        let out = tmp(&format!("fit-speed-{k}"));
        let sets = [
            "service=lognormal:200us,cv=0.3",
            "speed=0.7/1/1.3,every=500ms",
        ];
        let (all, why) = pooled_sweep_fit(&out, &[1500, 3500], "28000", 70 + k, &sets);
        let sp = &all["speed"];
        let _ = std::fs::remove_dir_all(&out);
        let Some(f) = sp["factors"].as_array() else {
            return Err((format!("no speed found: {sp}"), why));
        };
        let f: Vec<f64> = f.iter().map(|x| x.as_f64().unwrap()).collect();
        let (lo, hi) = (f[0], f[f.len() - 1]);
        let cv = sp["cv"].as_f64().unwrap();
        let settings = all["synth_settings"].to_string();
        if lo <= 0.8
            && hi >= 1.2
            && (0.15..=0.35).contains(&cv)
            && sp["share"].as_f64() >= Some(0.75)
        {
            assert!(settings.contains("speed="), "{settings}");
            Ok(())
        } else {
            Err((
                format!("factors {f:?}, cv {cv:.3}, share {}: {sp}", sp["share"]),
                why,
            ))
        }
    });
}

/// The optional terms the pooled fit kept (`selection.kept`).
fn kept_terms(all: &Value) -> Vec<String> {
    all["selection"]["kept"]
        .as_array()
        .unwrap_or_else(|| panic!("no selection: {all}"))
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

/// The documented symptom, gone: synth with a plain two-part mixture (clock spin: no cold
/// start, no speed of its own) at 1 500 / 3 500 / 5 500 qps, `taillab fit --pooled`, kept a
/// cold start of F 0.0057, tau 100 ms (R² 0.000) in its synth settings. Every optional
/// term must now earn its place on held-out blocks: none is kept, and the settings are the
/// mixture alone.
#[test]
fn pooled_fit_keeps_no_term_a_plain_mixture_lacks() {
    let _serial = serial();
    within_tries("no spurious term", |k| {
        let out = tmp(&format!("fit-plain-{k}"));
        let sets = ["service=mix:0.8*lognormal:50us,cv=0.2+0.2*lognormal:400us,cv=0.2"];
        let (all, why) = pooled_sweep_fit(&out, &[1500, 3500, 5500], "5000", 150 + k, &sets);
        let _ = std::fs::remove_dir_all(&out);
        let kept = kept_terms(&all);
        let settings = all["synth_settings"].as_array().unwrap().clone();
        if kept.is_empty() && settings.len() == 1 && all["cold"].is_null() {
            assert!(settings[0].as_str().unwrap().starts_with("service=mix:"));
            Ok(())
        } else {
            Err((
                format!("kept {kept:?}, settings {settings:?}: {}", all["selection"]),
                why,
            ))
        }
    });
}

/// synth with a set mixture (0.8 of 100 µs, 0.2 of 300 µs), a cold start (`cold=0.5,tau=3ms`)
/// and a periodic slow request (3 ms every 40th to 60th request) at three loads: the pooled
/// fit keeps exactly the cold start and the periodic request (no host speed, no pauses) and
/// recovers each within its interval: the slowdown within ±0.15 of 0.5 and tau
/// (`tau_found`), the periodic gap's mean within ±4 of 50 and its length within 5 %
/// of 3 ms, each mode of the mixture's weight within ±0.03 and mean within 5 %
/// (`check_components`, the periodic request being its third mode, 2 % of requests).
/// (The cold start's slowdown came out at 0.30 until the fit stopped reading the periodic
/// request's coldness as a flatter cold start: python/taillab/fit/cold.py `_warm_line`.)
#[test]
fn pooled_fit_keeps_every_true_term_and_recovers_it() {
    let _serial = serial();
    within_tries("true terms", |k| {
        let out = tmp(&format!("fit-terms-{k}"));
        let sets = [
            "service=mix:0.8*lognormal:100us,cv=0.2+0.2*lognormal:300us,cv=0.2",
            "cold=0.5,tau=3ms",
            "periodic=requests:40-60,for=lognormal:3ms,cv=0.05",
        ];
        let (all, why) = pooled_sweep_fit(&out, &[800, 2000, 3000], "6000", 170 + k, &sets);
        let _ = std::fs::remove_dir_all(&out);
        let mut bad = Vec::new();
        let kept = kept_terms(&all);
        if kept != ["cold", "periodic"] {
            bad.push(format!("kept {kept:?}: {}", all["selection"]));
        }
        let c = &all["cold"];
        let extra = c["extra"].as_f64().unwrap_or(0.0);
        if !(0.35..=0.65).contains(&extra) {
            bad.push(format!("cold start F {extra:.3} (true 0.5)"));
        }
        if let Err(e) = tau_found(c, 3e6) {
            bad.push(e);
        }
        let p = &all["periodic"];
        let gap = p["gap_mean"].as_f64().unwrap_or(0.0);
        let mean = p["mean_ns"].as_f64().unwrap_or(0.0);
        if (gap - 50.0).abs() > 4.0 || (mean / 3e6 - 1.0).abs() > 0.05 {
            bad.push(format!(
                "periodic every {gap:.1}, {mean:.0} ns (true 50, 3 ms): {p}"
            ));
        }
        let truth = [(0.784, 100e3, 0.2), (0.196, 300e3, 0.2), (0.02, 3e6, 0.05)];
        if let Err(e) = check_components(&all, &truth) {
            bad.push(e);
        }
        if bad.is_empty() {
            let sets = all["synth_settings"].to_string();
            assert!(sets.contains("cold=") && sets.contains("periodic=requests:"));
            Ok(())
        } else {
            Err((bad.join("; "), why))
        }
    });
}

/// `taillab fit`'s flags are declared once, in the Python package: `--help` prints its flags
/// (`--fit-set` among them), `--fit-set help` every setting with its reason, and a bad
/// setting is refused with the keys (exit 2).
#[test]
fn fit_flags_are_declared_once() {
    let o = fit_cmd(&["--help"]);
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && help.contains("--fit-set"), "{help}");
    let dir = tmp("fit-flags");
    std::fs::create_dir_all(&dir).unwrap();
    let o = fit_cmd(&[dir.to_str().unwrap(), "--fit-set", "help"]);
    let keys = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && keys.contains("select_min_gain = 0.005: "),
        "{keys}"
    );
    let o = fit_cmd(&[dir.to_str().unwrap(), "--pooled", "--fit-set", "no_such=1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("select_min_gain"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
