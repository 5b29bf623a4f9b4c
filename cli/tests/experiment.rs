//! Experiments and sweeps through the real binary: the results tree, the CI
//! stopping rule's bookkeeping, resume after a kill, and refusal to mix runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::*;

fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(files_under(&p));
        } else {
            v.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    v.sort();
    v
}

const SWEEP: &[&str] = &[
    "sweep",
    "--app",
    "synth",
    "--qps",
    "300,600,900",
    "--duration",
    "0.6s",
    "--set",
    "service=exp:100us",
    "--ci",
    "0.5",
    "--min-runs",
    "2",
    "--max-runs",
    "2",
    "--seed",
    "3",
    "-q",
];

#[test]
fn sweep_survives_kill_and_resume_without_rewriting() {
    let _s = serial();
    let out = tmp("resume");
    let mut child = Command::new(bin())
        .args(SWEEP)
        .arg("--out")
        .arg(&out)
        .spawn()
        .unwrap();
    let first = out.join("points/integrated-t1-q300/aggregate.json");
    let t = Instant::now();
    while !first.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "first point never finished"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = files_under(&out.join("points/integrated-t1-q300"));
    let exp_before = std::fs::read(out.join("experiment.json")).unwrap();
    // Without --resume the folder is refused, so nothing is overwritten by accident.
    let o = Command::new(bin())
        .args(SWEEP)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--resume"));
    // Resuming with other parameters is refused too.
    let mut other: Vec<&str> = SWEEP.to_vec();
    other[4] = "300,600,1200";
    let o = Command::new(bin())
        .args(&other)
        .arg("--resume")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("different parameters"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = Command::new(bin())
        .args(SWEEP)
        .arg("--resume")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        files_under(&out.join("points/integrated-t1-q300")),
        before,
        "a finished point was rewritten"
    );
    assert_eq!(
        std::fs::read(out.join("experiment.json")).unwrap(),
        exp_before
    );
    let exp = json(&out.join("experiment.json"));
    assert_eq!(exp["schema"], "taillab.experiment/1");
    assert_eq!(exp["points"].as_array().unwrap().len(), 3);
    for q in [300, 600, 900] {
        let agg = json(&out.join(format!("points/integrated-t1-q{q}/aggregate.json")));
        assert_eq!(agg["schema"], "taillab.aggregate/1");
        assert_eq!(agg["runs"], 2);
        assert_eq!(agg["seeds"].as_array().unwrap().len(), 2);
        assert_ne!(
            agg["seeds"][0], agg["seeds"][1],
            "runs must use fresh seeds"
        );
        // Merged = histograms added: its count is the sum of the runs' counts.
        let counts: u64 = (0..2)
            .map(|k| {
                json(&out.join(format!("points/integrated-t1-q{q}/run-{k}/summary.json")))
                    ["requests"]["measured"]
                    .as_u64()
                    .unwrap()
            })
            .sum();
        assert_eq!(agg["merged"]["sojourn"]["count"].as_u64().unwrap(), counts);
        for m in ["sojourn.mean", "sojourn.p95", "sojourn.p99"] {
            let c = &agg["metrics"][m];
            assert!(c["ci_low"].as_f64().unwrap() <= c["estimate"].as_f64().unwrap());
            assert_eq!(c["per_run"].as_array().unwrap().len(), 2);
        }
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn run_with_ci_stops_at_target_or_cap_and_says_which() {
    let _s = serial();
    let out = tmp("ci");
    let o = Command::new(bin())
        .args([
            "run",
            "--app",
            "synth",
            "--qps",
            "500",
            "--duration",
            "0.5s",
            "--set",
            "service=fixed:100us",
            "--ci",
            "0.3",
            "--min-runs",
            "3",
            "--max-runs",
            "6",
            "--ci-metrics",
            "service.p50",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let agg = json(&out.join("points/integrated-t1-q500/aggregate.json"));
    // A fixed 100 µs service has a p50 that varies far less than ±30 %: met at the minimum.
    assert_eq!(agg["target_met"], true, "{}", agg["stopped"]);
    assert_eq!(agg["runs"], 3);
    assert!(agg["stopped"]
        .as_str()
        .unwrap()
        .contains("met after 3 runs"));
    let o = Command::new(bin())
        .args([
            "run",
            "--app",
            "synth",
            "--qps",
            "500",
            "--duration",
            "0.3s",
            "--set",
            "service=exp:100us",
            "--ci",
            "0.0001",
            "--min-runs",
            "2",
            "--max-runs",
            "2",
            "-q",
            "--out",
        ])
        .arg(out.join("cap"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let agg = json(&out.join("cap/points/integrated-t1-q500/aggregate.json"));
    assert_eq!(agg["target_met"], false);
    assert!(agg["stopped"].as_str().unwrap().contains("run cap 2"));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn experiment_files_are_validated_with_the_key_named() {
    let _s = serial();
    let dir = tmp("toml");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    let head = "[app]\nname = \"synth\"\n";
    for (body, needle) in [
        (
            "[load]\nqps = [100.0]\nduration = \"1s\"\n[harness]\nthreds = [1]\n",
            "did you mean `harness.threads`",
        ),
        ("[load]\nqps = [0.0]\nduration = \"1s\"\n", "qps"),
        ("[load]\nqps = [100.0]\n", "--requests N or --duration"),
        (
            "[load]\nduration = \"soon\"\nqps = 5\n",
            "duration like 30s",
        ),
        (
            "[load]\nqps = 100\nduration = \"1s\"\ncolour = \"red\"\n",
            "load.colour",
        ),
        (
            "colour = \"red\"\n[load]\nqps = 100\nduration = \"1s\"\n",
            "app.colour",
        ),
        (
            "[load]\nqps = [100.0]\nduration = \"1s\"\n[sweep]\nslo = \"p99 < 1ms\"\n",
            "sweep.slo",
        ),
        (
            "[load]\nduration = \"1s\"\n[sweep]\nload = \"0.1:0.5:0.1\"\nprobe_secs = 1\n",
            "did you mean `probe`",
        ),
        (
            "[load]\nqps = 10\nduration = \"1s\"\n[grid]\n\"harness.rt_priority\" = [0, 100]\n",
            "rt_priority",
        ),
    ] {
        let body = format!("{head}{body}");
        std::fs::write(&f, &body).unwrap();
        let o = Command::new(bin())
            .args(["sweep", "--file"])
            .arg(&f)
            .args(["--out"])
            .arg(dir.join("o"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{body}: {err}");
        assert!(err.contains(needle), "{body}: `{err}` lacks `{needle}`");
    }
    // A list where `taillab run` takes one value: the error points to sweeps.
    std::fs::write(
        &f,
        format!("{head}[load]\nqps = 100\nduration = \"1s\"\n[harness]\nthreads = [1, 2]\n"),
    )
    .unwrap();
    let o = Command::new(bin())
        .args(["run", "--file"])
        .arg(&f)
        .arg("--out")
        .arg(dir.join("r"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("harness.threads: takes one value, got 2")
            && err.contains("use `taillab sweep`"),
        "{err}"
    );
    // The shipped files parse and validate.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../configs");
    let mut files = Vec::new();
    let mut dirs = vec![root];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "toml")
                && p.file_name().unwrap() != "items.toml"
                && p.file_name().unwrap() != "coverage.toml"
            {
                files.push(p);
            }
        }
    }
    assert!(files.len() > 20, "{files:?}");
    for p in files {
        let o = Command::new(bin())
            .args(["sweep", "--dry-run", "--file"])
            .arg(&p)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{}: {}",
            p.display(),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    for cfg in ["demo.toml", "synth.toml"] {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../configs")
            .join(cfg);
        let txt = std::fs::read_to_string(&p).unwrap();
        assert!(
            txt.lines()
                .filter(|l| l.contains(" = "))
                .all(|l| l.contains('#')),
            "{cfg}: every key needs a comment"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn saturation_finder_brackets_the_service_rate() {
    let _s = serial();
    let out = tmp("sat");
    // fixed 400 µs on one worker saturates at 2500/s; loads of 0.5 and 0.8 of the found rate.
    let o = Command::new(bin())
        .args([
            "sweep",
            "--app",
            "synth",
            "--load",
            "0.5,0.8",
            "--probe-seconds",
            "0.7",
            "--duration",
            "0.5s",
            "--set",
            "service=fixed:400us",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let sat = json(&out.join("saturation/integrated-t1-q0/saturation.json"));
    let q = sat["qps"].as_f64().unwrap();
    // A noisy VM steals some capacity; it can never exceed the service rate.
    assert!((1000.0..=2550.0).contains(&q), "saturation rate {q}");
    let exp = json(&out.join("experiment.json"));
    let pts: Vec<f64> = exp["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["qps"].as_f64().unwrap())
        .collect();
    assert!(
        (pts[0] / q - 0.5).abs() < 0.01 && (pts[1] / q - 0.8).abs() < 0.01,
        "{pts:?} vs {q}"
    );
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn any_key_is_an_axis_and_the_report_puts_settings_side_by_side() {
    let _s = serial();
    let out = tmp("axes");
    // Topology × load × RT priority: 8 points, each a resolved configuration.
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["sweep", "--app", "null", "--grid", "net.topology=integrated|loopback",
               "--qps", "1000,3000", "--grid", "harness.rt_priority=0|10",
               "--requests", "1500", "--warmup-requests", "200", "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let exp = json(&out.join("experiment.json"));
    let points = exp["points"].as_array().unwrap();
    assert_eq!(points.len(), 8, "{exp}");
    let mut seen = std::collections::BTreeSet::new();
    for p in points {
        let c = &p["configuration"];
        let key = (
            c["net"]["topology"].as_str().unwrap().to_string(),
            c["harness"]["rt_priority"].as_i64().unwrap(),
            c["load"]["qps"].as_f64().unwrap() as i64,
        );
        // The run folder keeps the same configuration, and it reruns as is.
        let run = out
            .join("points")
            .join(p["id"].as_str().unwrap())
            .join("run-0");
        let toml = std::fs::read_to_string(run.join("config.toml")).unwrap();
        assert!(toml.contains(&format!("rt_priority = {}", key.1)), "{toml}");
        assert!(
            toml.contains(&format!("topology = \"{}\"", key.0)),
            "{toml}"
        );
        assert_eq!(json(&run.join("summary.json"))["config"], key.0.as_str());
        seen.insert(key);
    }
    assert_eq!(seen.len(), 8);
    let html = report_html(&out);
    for fig in ["config_comparison", "setting_comparison"] {
        assert!(html.contains(fig), "the report lacks {fig}");
        assert!(
            out.join(format!("report/figures/{fig}.png")).exists(),
            "{fig} not drawn"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_run_reruns_from_its_folder() {
    let _s = serial();
    let (a, b) = (tmp("from-a"), tmp("from-b"));
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["run", "--app", "synth", "--qps", "800", "--requests", "400", "--seed", "9",
               "--set", "service=fixed:100us", "--threads", "2", "-q", "--out"])
        .arg(&a)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The same run again, with one override.
    let o = Command::new(bin())
        .args(["run", "--from"])
        .arg(&a)
        .args(["--requests", "300", "-q", "--out"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (sa, sb) = (json(&a.join("summary.json")), json(&b.join("summary.json")));
    for k in ["app", "threads", "seed", "offered_qps"] {
        assert_eq!(sa[k], sb[k], "{k}");
    }
    assert_eq!(sb["requests"]["measured"], 300);
    assert!(std::fs::read_to_string(b.join("config.toml"))
        .unwrap()
        .contains("service = \"fixed:100us\""));
    // Bad input: a folder without config.toml, a grid key that does not exist.
    let o = Command::new(bin())
        .args(["run", "--from", "/tmp"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no config.toml"));
    let o = Command::new(bin())
        .args([
            "sweep",
            "--app",
            "synth",
            "--qps",
            "10",
            "--requests",
            "5",
            "--grid",
            "harness.therads=1|2",
            "--dry-run",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("harness.therads") && e.contains("harness.threads"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

/// A reader that stops early (`taillab config keys | head -1`) ends taillab quietly: exit
/// 141 (a writer ended by SIGPIPE, as a shell reports it), no panic on stderr. The pipe's
/// reading end is closed before taillab starts, so its first write fails.
#[test]
fn closed_stdout_ends_quietly() {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(bin())
        .args(["config", "keys"])
        .stdout(writer)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.code(), Some(141), "{err}");
}

/// `--runs N --order interleaved`: every point gets N runs with fresh seeds, taken round
/// robin (every point's first run before any second one), stopped as a count, not a
/// target; a killed interleaved sweep resumes without rewriting a finished run. `--runs`
/// with a CI target is refused, saying which to drop.
#[test]
fn interleaved_runs_alternate_between_points_and_resume() {
    let _s = serial();
    let out = tmp("interleaved");
    #[rustfmt::skip]
    let args = ["sweep", "--app", "synth", "--qps", "300,600,900", "--duration", "0.4s",
                "--set", "service=exp:100us", "--runs", "3", "--order", "interleaved",
                "--seed", "5", "-q", "--out"];
    // Killed once the second pass has begun: the first runs of all points are final.
    let mut child = Command::new(bin()).args(args).arg(&out).spawn().unwrap();
    let second = out.join("points/integrated-t1-q300/run-1/summary.json");
    let t = Instant::now();
    while !second.exists() {
        assert!(t.elapsed() < Duration::from_secs(60), "no second run");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let first_of = |q: u32| out.join(format!("points/integrated-t1-q{q}/run-0"));
    for q in [600, 900] {
        assert!(
            first_of(q).join("summary.json").exists(),
            "q{q}'s first run must come before any point's second"
        );
    }
    let before = files_under(&first_of(900));
    let o = Command::new(bin())
        .args(args)
        .arg(&out)
        .arg("--resume")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        files_under(&first_of(900)),
        before,
        "a finished run was rewritten"
    );
    // Start times: pass k of every point before pass k+1 of any.
    let started = |q: u32, k: usize| -> String {
        json(&out.join(format!("points/integrated-t1-q{q}/run-{k}/summary.json")))["started_at"]
            .as_str()
            .unwrap()
            .to_string()
    };
    for k in 1..3 {
        let last_of_pass = [300, 600, 900].map(|q| started(q, k - 1)).into_iter().max();
        let first_of_next = [300, 600, 900].map(|q| started(q, k)).into_iter().min();
        assert!(
            last_of_pass < first_of_next,
            "pass {k} began before pass {} ended",
            k - 1
        );
    }
    for q in [300, 600, 900] {
        let agg = json(&out.join(format!("points/integrated-t1-q{q}/aggregate.json")));
        assert_eq!(agg["runs"], 3);
        assert!(
            agg["stopped"]
                .as_str()
                .unwrap()
                .contains("3 run(s) as asked"),
            "{agg}"
        );
        let seeds = agg["seeds"].as_array().unwrap();
        assert!(seeds[0] != seeds[1] && seeds[1] != seeds[2], "{agg}");
    }
    std::fs::remove_dir_all(&out).unwrap();
    let o = Command::new(bin())
        .args([
            "sweep", "--app", "synth", "--qps", "300", "--runs", "3", "--ci", "0.05",
        ])
        .arg("--out")
        .arg(tmp("interleaved-ci"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("drop --runs"), "{err}");
}
