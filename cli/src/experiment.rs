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
fn one_run<'a>(
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
    o
}
