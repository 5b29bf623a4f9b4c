//! Points of an experiment: one configuration repeated with fresh seeds to a
//! CI target (or run once), disturbed runs redone, written into the results
//! tree of `taillab_core::experiment`; the per-point table.

use crate::runner::{app_of, run_once, warn_if_saturating};
use anyhow::Context;
use serde_json::{json, Value};
use std::path::Path;
use taillab_core::config::experiment::Point;
use taillab_core::config::RunConfig;
use taillab_core::dist::fmt_ns;
use taillab_core::experiment::{
    run_point as run_repeats, Aggregate, CiTarget, ExperimentMeta, PointRuns, EXPERIMENT_SCHEMA,
};
use taillab_core::sections::environment::{DiscardedRun, EnvironmentRedo};
use taillab_core::summary::{rfc3339, Host};
use taillab_core::Summary;

/// The `points` entry of experiment.json for `p`.
pub fn point_value(p: &Point) -> Value {
    let c = &p.config;
    json!({
        "id": p.id,
        "app": c.app.name,
        "config": c.net.topology.name(),
        "qps": c.load.qps,
        "threads": c.harness.threads,
        "params": c.settings,
        "axes": p.coords.iter().map(|(k, v)| json!({"key": k, "value": v})).collect::<Vec<_>>(),
        "configuration": c.to_json(),
    })
}

/// experiment.json's metadata (kind `run` or `sweep`).
pub fn meta(kind: &str, parameters: Value, base_seed: u64, ci: &CiTarget) -> ExperimentMeta {
    ExperimentMeta {
        schema: EXPERIMENT_SCHEMA.into(),
        kind: kind.into(),
        parameters,
        base_seed,
        points: vec![],
        ci: ci.clone(),
        host: Host::collect(),
        system: system_report(),
        taillab: env!("CARGO_PKG_VERSION").into(),
        started_at: rfc3339(std::time::SystemTime::now()),
    }
}

/// Runs a point's runs into `dir` (skipping finished ones on resume) and
/// returns its aggregate. `progress(k, agg)` is told after each run.
pub fn run_point(
    p: &Point,
    dir: &Path,
    ci: &CiTarget,
    resume: bool,
    progress: &mut dyn FnMut(usize, &Aggregate),
) -> anyhow::Result<Aggregate> {
    let app = app_of(&p.config)?;
    warn_if_saturating(&app, &p.config);
    let mut once = one_run(p, &app);
    let agg = run_repeats(
        dir,
        &point_value(p),
        p.config.load.seed,
        ci,
        resume,
        &mut once,
        progress,
    )?;
    Ok(agg)
}

/// The points' runs round robin (`sweep.order = interleaved`): every point's first
/// run, then every point's second, and so on, each point stopping under `ci` as
/// [`run_point`] does; `progress(i, k, agg)` is told after point `i`'s `k`-th run.
/// Returns the points' aggregates in order.
pub fn run_interleaved(
    points: &[(&Point, std::path::PathBuf)],
    ci: &CiTarget,
    resume: bool,
    progress: &mut dyn FnMut(usize, usize, &Aggregate),
) -> anyhow::Result<Vec<Aggregate>> {
    let apps = points
        .iter()
        .map(|(p, _)| {
            let app = app_of(&p.config)?;
            warn_if_saturating(&app, &p.config);
            Ok(app)
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let values: Vec<Value> = points.iter().map(|(p, _)| point_value(p)).collect();
    let mut open = points
        .iter()
        .zip(&values)
        .map(|((p, dir), v)| PointRuns::open(dir, v, p.config.load.seed, ci, resume))
        .collect::<Result<Vec<_>, _>>()?;
    loop {
        let mut ran = false;
        for (i, ((p, _), pr)) in points.iter().zip(open.iter_mut()).enumerate() {
            let agg = pr
                .step(&mut one_run(p, &apps[i]))
                .with_context(|| format!("point {}", p.id))?;
            if let Some(agg) = agg {
                ran = true;
                progress(i, pr.runs(), &agg);
            }
        }
        if !ran {
            break;
        }
    }
    open.into_iter()
        .zip(points)
        .map(|(pr, (p, _))| pr.finish().with_context(|| format!("point {}", p.id)))
        .collect()
}

/// One run of point `p` with seed `seed` into `run_dir`, redone while disturbed
/// (`ci.redo_disturbed`).
pub fn one_run<'a>(
    p: &'a Point,
    app: &'a std::sync::Arc<dyn taillab_core::App>,
) -> impl FnMut(u64, &Path) -> anyhow::Result<Summary> + 'a {
    move |seed, run_dir| {
        let mut c = p.config.clone();
        c.load.seed = seed;
        run_redoing_disturbed(p.config.ci.redo_disturbed, run_dir, |d| {
            run_once(app, &c, d, false)
        })
    }
}

/// Runs `once` into `run_dir`; while its environment check fails and the
/// budget allows, moves the disturbed run aside (`run-K.disturbed-N`, kept
/// for inspection) and runs again with the same seed. The final summary
/// records every discarded attempt under `environment_redo`, so a redo is
/// never silent.
pub fn run_redoing_disturbed(
    budget: usize,
    run_dir: &Path,
    mut once: impl FnMut(&Path) -> anyhow::Result<Summary>,
) -> anyhow::Result<Summary> {
    let name = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut discarded = Vec::new();
    let (mut s, n) = taillab_core::search::with_redos(
        budget,
        |_| once(run_dir),
        disturbed,
        |k, s: Summary| {
            let aside = run_dir.with_file_name(format!("{name}.disturbed-{}", k + 1));
            let _ = std::fs::remove_dir_all(&aside);
            std::fs::rename(run_dir, &aside)
                .with_context(|| format!("moving disturbed run {} aside", run_dir.display()))?;
            let why = s
                .checks
                .get("environment")
                .map(|c| c.verdict.clone())
                .unwrap_or_default();
            eprintln!("run {name} disturbed ({why}); redoing it with the same seed");
            discarded.push(DiscardedRun {
                moved_to: aside.display().to_string(),
                reason: why,
            });
            Ok(())
        },
    )?;
    if n > 0 {
        s.environment_redo = Some(EnvironmentRedo {
            redone: n,
            budget,
            discarded,
        });
        taillab_core::summary::write_json_atomic(&run_dir.join("summary.json"), &s)?;
    }
    Ok(s)
}

/// Whether a run's environment check failed.
pub fn disturbed(s: &Summary) -> bool {
    s.checks.get("environment").is_some_and(|c| !c.ok)
}

/// The JSON of a configuration's `parameters` for a one-point experiment.
pub fn run_parameters(cfg: &RunConfig) -> Value {
    json!({ "app": cfg.app.name, "config": cfg.net.topology.name(), "configuration": cfg.to_json() })
}

pub fn point_bar(total: u64) -> indicatif::ProgressBar {
    crate::progress::bar(
        total,
        "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs eta {eta} {msg}",
        "[{elapsed_precise}] {pos}/{len} runs {msg}",
        crate::progress::Pace {
            gap: std::time::Duration::ZERO,
            settle: std::time::Duration::from_millis(100),
        },
    )
}

pub fn describe(agg: &Aggregate) -> String {
    agg.metrics
        .iter()
        .map(|(m, c)| format!("{m} ±{:.1}%", c.rel_half_width * 100.0))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The full host inspection of `taillab system show` (no measuring window:
/// each run's own environment check measures steal and foreign CPU).
fn system_report() -> Option<serde_json::Value> {
    taillab_monitor::SystemReport::collect_with(Path::new("/"), std::time::Duration::ZERO)
        .ok()
        .and_then(|r| serde_json::to_value(r).ok())
}

/// The per-point table printed after experiments and sweeps.
pub fn table(aggs: &[Aggregate]) -> String {
    let mut o = format!(
        "{:<34}{:>5} {:<6}{:>18}{:>18}{:>18}  {}\n",
        "point", "runs", "target", "mean", "p95", "p99", "checks failed (runs)"
    );
    for a in aggs {
        // No target asked (a plain sweep, sweep.runs): none to meet; one run: no interval.
        let no_target = a.target >= CiTarget::NO_TARGET;
        let no_ci = a.runs < 2 && no_target;
        let cell = |m: &str| {
            a.metrics
                .get(m)
                .map(|c| {
                    if no_ci || !c.rel_half_width.is_finite() {
                        fmt_ns(c.estimate)
                    } else {
                        format!("{} ±{:.1}%", fmt_ns(c.estimate), c.rel_half_width * 100.0)
                    }
                })
                .unwrap_or_else(|| "-".into())
        };
        let failed: Vec<String> = a
            .checks_failed
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k}×{n}"))
            .collect();
        o.push_str(&format!(
            "{:<34}{:>5} {:<6}{:>18}{:>18}{:>18}  {}\n",
            a.point["id"].as_str().unwrap_or("?"),
            a.runs,
            if no_target {
                "-"
            } else if a.target_met {
                "met"
            } else {
                "NOT"
            },
            cell("sojourn.mean"),
            cell("sojourn.p95"),
            cell("sojourn.p99"),
            if failed.is_empty() {
                "none".into()
            } else {
                failed.join(" ")
            }
        ));
    }
    for a in aggs {
        if let Some(why) = why_not_met(a) {
            o.push_str(&why);
            o.push('\n');
        }
    }
    o
}

/// Why a point with a CI target stopped without meeting it, in words: its widest interval
/// after the run cap and about how many runs that spread would need (the half-width
/// shrinks as one over the root of the runs). None for a point that met its target or
/// had none.
fn why_not_met(a: &Aggregate) -> Option<String> {
    if a.target >= CiTarget::NO_TARGET || a.target_met {
        return None;
    }
    let (m, c) = a
        .metrics
        .iter()
        .filter(|(_, c)| !c.met)
        .max_by(|x, y| x.1.rel_half_width.total_cmp(&y.1.rel_half_width))?;
    let id = a.point["id"].as_str().unwrap_or("?");
    let (hw, target) = (c.rel_half_width * 100.0, a.target * 100.0);
    let need = if hw.is_finite() {
        let n = (a.runs as f64 * (hw / target).powi(2)).ceil();
        format!("at that spread about {n:.0} runs would meet it")
    } else {
        "its runs gave no interval".into()
    };
    let spread = match a.checks_failed.get("environment").copied().unwrap_or(0) {
        0 => "its runs differ that much on this host".to_string(),
        n => format!(
            "{n} of its runs were disturbed (other processes or steal: the environment check), \
             which widens it"
        ),
    };
    Some(format!(
        "{id}: target ±{target:.1} % not met in {} runs (the cap, ci.max_runs): {m} is still \
         ±{hw:.1} %, as {spread}; {need}, or longer runs (load.duration) narrow it",
        a.runs
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(target_met: bool, p99_hw: f64) -> Aggregate {
        let ci = |hw: f64| {
            json!({"estimate": 1e6, "ci_low": 1.0, "ci_high": 2.0, "rel_half_width": hw, "n": 5,
                   "bootstrap_low": 1.0, "bootstrap_high": 2.0, "per_run": [1e6, 1e6, 1e6, 1e6, 1e6],
                   "met": hw <= 0.05})
        };
        serde_json::from_value(json!({
            "schema": "x", "point": {"id": "integrated-t1-q500"}, "runs": 5, "seeds": [],
            "target": 0.05, "target_met": target_met, "stopped": "",
            "metrics": {"sojourn.mean": ci(0.043), "sojourn.p99": ci(p99_hw)},
            "merged": {}, "checks_failed": {}, "achieved_qps": 500.0
        }))
        .unwrap()
    }

    /// A point that stopped at the run cap says so in words under the table, with its
    /// widest interval and about how many runs would do; one that met its target does not.
    #[test]
    fn a_point_short_of_its_target_says_why() {
        let t = table(&[agg(false, 0.085), agg(true, 0.04)]);
        let why: Vec<&str> = t.lines().skip(3).collect();
        assert_eq!(why.len(), 1, "{t}");
        for want in [
            "integrated-t1-q500: target ±5.0 % not met in 5 runs",
            "sojourn.p99 is still ±8.5 %",
            "about 15 runs would meet it",
        ] {
            assert!(why[0].contains(want), "{want}: {t}");
        }
        let mut busy = agg(false, 0.3);
        busy.checks_failed.insert("environment".into(), 4);
        assert!(table(&[busy]).contains("4 of its runs were disturbed"));
    }
}
