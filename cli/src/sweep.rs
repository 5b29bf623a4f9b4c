//! `taillab sweep`: a grid of points over any configuration keys, each point
//! repeated to a CI target (or run once); relative loads measured against a
//! saturation search first; the SLO search; resumable.

use crate::args::ExperimentOut;
use crate::executor::Executor;
use crate::experiment::{
    describe, meta, point_bar, point_value, run_interleaved, run_point, table,
};
use crate::runner::{app_of, default_out};
use anyhow::Context;
use clap::Args;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use taillab_core::config::experiment::{Group, Order, Plan, Point, Sweep};
use taillab_core::config::flags::{ConfigFlags, FieldFlags};
use taillab_core::config::{view, Dur, RunConfig};
use taillab_core::dist::fmt_ns;
use taillab_core::experiment::{open_experiment, Aggregate, CiTarget};
use taillab_core::search::{find_saturation, slo_search, Outcome, Probe, SearchOpts, Slo};
use taillab_core::summary::write_json_atomic;
use taillab_core::Summary;

/// `taillab sweep`: any configuration flag may be an axis (`a|b`; `a,b` for
/// numbers and names; `FROM:TO:STEP` for numbers), and `--grid KEY=a|b`
/// sweeps any key, app settings included.
#[derive(Args, Debug, Clone)]
pub struct SweepCmd {
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::SWEEP }>,
    #[command(flatten)]
    pub sweep: FieldFlags<Sweep>,
    /// Experiment file (commented TOML, see configs/); flags override its keys.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// A key to sweep, KEY=V1|V2|... (repeatable; any key of `taillab config keys`, or app.KEY).
    #[arg(long = "grid", value_name = "KEY=V1|V2")]
    pub grid: Vec<String>,
    #[command(flatten)]
    pub exp: ExperimentOut,
    /// Print the points the sweep would run (loads relative to saturation as fractions) and stop.
    #[arg(long)]
    pub dry_run: bool,
}

/// The probe of saturation and SLO searches: a short run of the group's
/// configuration at a rate, found again by name on resume.
struct CliProbe<'a> {
    cfg: &'a RunConfig,
    dir: PathBuf,
    resume: bool,
    probe: Dur,
    /// Where probes run (here, or as Slurm jobs).
    exec: &'a dyn Executor,
}

impl Probe for CliProbe<'_> {
    type Error = anyhow::Error;
    fn probe(&mut self, qps: f64, name: &str) -> anyhow::Result<Outcome> {
        let dir = self.dir.join(name);
        if self.resume {
            if let Ok(s) = Summary::read(&dir.join("summary.json")) {
                return Ok(Outcome::from_summary(&s));
            }
        }
        let mut c = self.cfg.clone();
        c.load.qps = Some(qps);
        c.load.warmup_requests = None;
        c.load.warmup = Some(Dur(300_000_000));
        c.load.requests = None;
        c.load.duration = Some(self.probe);
        c.load.drain_timeout = Dur(2_000_000_000);
        c.ci.target = None;
        // A probe answers one question (did the server keep up?): its requests are not
        // kept. At an overload rate a duration's worth of records can exceed the memory cap
        // (speech's first probe asked for 18 M), which failed `tailwag --app speech`.
        c.record.save_requests = false;
        Ok(Outcome::from_summary(&self.exec.run_one(&c, &dir)?))
    }
}

/// A group's folder name under `saturation/` and `slo/`.
pub fn group_tag(g: &Group) -> String {
    let mut c = g.config.clone();
    c.load.qps = Some(0.0);
    taillab_core::config::experiment::point_id(&c, &g.coords)
}

/// Fewest mean service times a saturation probe lasts.
const PROBE_SERVICES: f64 = 30.0;

/// The probe length for an app whose mean service is `service_ns`: the configured one, or
/// [`PROBE_SERVICES`] service times when that is longer.
fn probe_length(configured: Dur, service_ns: f64) -> Dur {
    let need = PROBE_SERVICES * service_ns;
    if need.is_finite() && need > configured.0 as f64 {
        Dur(need.ceil() as u64)
    } else {
        configured
    }
}

/// The saturation rate of a group: searched once, then read back on resume.
fn saturation(
    g: &Group,
    plan: &Plan,
    out: &Path,
    resume: bool,
    quiet: bool,
    exec: &dyn Executor,
) -> anyhow::Result<f64> {
    let dir = out.join("saturation").join(group_tag(g));
    let result = dir.join("saturation.json");
    if resume && result.exists() {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&result)?)?;
        return v["qps"]
            .as_f64()
            .ok_or_else(|| anyhow::anyhow!("{} lacks qps", result.display()));
    }
    let app = app_of(&g.config)?;
    let threads = g.config.harness.threads as f64;
    let mut probe = CliProbe {
        cfg: &g.config,
        dir: dir.clone(),
        resume,
        probe: plan.sweep.probe,
        exec,
    };
    let guess = match app.expected_service_ns(&g.config.settings) {
        Some(svc) if svc > 0.0 => threads * 1e9 / svc,
        // Measure the service time at a light load first: 200 qps, and ten times lower
        // until some measured requests finish (speech's second-long requests never did at
        // 200 qps: the guess was then 8 M qps and every probe failed).
        _ => {
            let configured = probe.probe;
            let mut rate = 200.0;
            let mut k = 0;
            loop {
                let name = if k == 0 {
                    "calibrate".to_string()
                } else {
                    format!("calibrate-{k}")
                };
                probe.probe = Dur(configured.0.max((5e9 / rate) as u64));
                let o = probe.probe(rate, &name)?;
                probe.probe = configured;
                let served = o.value("service", "count").unwrap_or(0.0);
                let mean = o.value("service", "mean").unwrap_or(0.0);
                if served >= 3.0 && mean > 0.0 {
                    break threads * 1e9 / mean;
                }
                k += 1;
                rate /= 10.0;
                if k > 4 {
                    anyhow::bail!(
                        "{}: no request finished in calibration probes down to {rate:.3} qps; \
                         give --qps instead of --load, or a longer --probe",
                        app.name()
                    );
                }
            }
        }
    };
    // A probe must see enough requests to tell a growing backlog from a steady one: at
    // least PROBE_SERVICES mean service times (speech's 2 s probe held about ten).
    let longer = probe_length(plan.sweep.probe, threads * 1e9 / guess);
    if longer != plan.sweep.probe {
        if !quiet {
            eprintln!(
                "  saturation probes lengthened to {} ({PROBE_SERVICES} mean service times)",
                fmt_ns(longer.0 as f64)
            );
        }
        probe.probe = longer;
    }
    let opts = SearchOpts {
        redo_disturbed: g.config.ci.redo_disturbed.max(1),
        ..Default::default()
    };
    let sat = find_saturation(&mut probe, guess, &opts, &mut |r| {
        if !quiet {
            eprintln!(
                "  saturation probe {}: {:.0} qps → achieved {:.0} {}{}",
                r.name,
                r.qps,
                r.achieved_qps,
                if r.sustainable { "ok" } else { "saturated" },
                if r.disturbed { " (disturbed)" } else { "" }
            );
        }
    })
    .map_err(|e| anyhow::anyhow!("{e} for {} ({})", app.name(), group_tag(g)))?;
    write_json_atomic(&result, &sat)?;
    Ok(sat.qps)
}

pub fn sweep(a: SweepCmd) -> anyhow::Result<i32> {
    let plan = Plan::build(a.file.as_deref(), &a.cfg.pairs, &a.sweep.pairs, &a.grid)?;
    let groups = plan.groups()?;
    for g in &groups {
        app_of(&g.config)?;
        crate::planned::preflight(&g.config)?;
    }
    if a.dry_run {
        return dry_run(&plan, &groups);
    }
    let name = plan.base.app.name.clone().unwrap_or_else(|| "apps".into());
    let out = a
        .exp
        .out
        .clone()
        .unwrap_or_else(|| default_out(&format!("sweep-{name}")));
    let created = crate::run::missing_dirs(&out);
    let done =
        execute(&plan, &out, a.exp.resume, a.exp.quiet, &Rates::Search).inspect_err(|_| {
            // Failed before any run finished (e.g. an app setting refused when
            // the app starts): leave nothing behind.
            if !created.is_empty() && !holds_a_run(&out) {
                let _ = std::fs::remove_dir_all(&out);
                created
                    .iter()
                    .skip(1)
                    .try_for_each(std::fs::remove_dir)
                    .ok();
            }
        })?;
    print!("{}", table(&done.aggs));
    println!("results: {}", out.display());
    Ok(0)
}

/// Whether any run under `dir` finished (wrote its summary.json).
pub fn holds_a_run(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            let p = e.path();
            p.file_name().is_some_and(|n| n == "summary.json") || (p.is_dir() && holds_a_run(&p))
        })
}

/// Where a plan's relative loads (`sweep.load`) get their 100 %.
pub enum Rates<'a> {
    /// The saturation search of each group (read back on resume).
    Search,
    /// Given per group (e.g. another experiment's saturation rates).
    Given(&'a dyn Fn(&Group) -> anyhow::Result<f64>),
}

/// What an executed plan ran.
pub struct Executed {
    /// Every point, in order.
    pub points: Vec<Point>,
    /// Their aggregates.
    pub aggs: Vec<Aggregate>,
    /// The saturation rate of each group whose loads were relative, by group tag.
    pub saturation: Vec<(String, f64)>,
}

/// Runs every point of `plan` into `out` (experiment.json, points/, and the
/// SLO searches), resuming finished runs when asked.
pub fn execute(
    plan: &Plan,
    out: &Path,
    resume: bool,
    quiet: bool,
    rates: &Rates,
) -> anyhow::Result<Executed> {
    let groups = plan.groups()?;
    let ci = stopping_rule(plan)?;
    let parameters = json!({
        "base": plan.base.to_json(),
        "axes": plan.axes.iter().map(|x| json!({"key": x.key, "values": x.values})).collect::<Vec<_>>(),
        "sweep": {"load": plan.sweep.load.as_ref().map(|l| l.0.clone()), "slo": plan.sweep.slo.as_ref().map(|s| s.to_string()),
                  "probe_s": plan.sweep.probe.secs()},
    });
    let exec = crate::executor::of(&plan.sweep, out, quiet)?;
    let mut m = meta("sweep", parameters, plan.base.load.seed, &ci);
    open_experiment(out, &m, resume)?;
    // Expand the points (saturation first where loads are relative).
    let (mut points, mut sats) = (Vec::new(), Vec::new());
    for g in &groups {
        let scale = if plan.of_saturation() {
            let sat = match rates {
                Rates::Search => saturation(g, plan, out, resume, quiet, exec.as_ref())?,
                Rates::Given(f) => f(g)?,
            };
            eprintln!("saturation of {}: {sat:.0} qps", group_tag(g));
            sats.push((group_tag(g), sat));
            sat
        } else {
            1.0
        };
        points.extend(plan.points(g, scale)?);
    }
    m.points = points.iter().map(point_value).collect();
    // Rewrite with the point list (first start) — on resume the parameters matched, so the list is the same.
    if !resume || !out.join("points").exists() {
        write_json_atomic(&out.join("experiment.json"), &m)?;
    }
    let dirs: Vec<_> = points
        .iter()
        .map(|p| (p, out.join("points").join(&p.id)))
        .collect();
    let aggs = exec.run_points(&dirs, &ci, &mut |dirs, ci| {
        run_points(dirs, out, ci, resume, quiet, plan.sweep.order)
    })?;
    if let Some(slo) = &plan.sweep.slo {
        for g in &groups {
            slo_point(g, plan, slo, out, resume, quiet, exec.as_ref())?;
        }
    }
    Ok(Executed {
        points,
        aggs,
        saturation: sats,
    })
}

/// When a point stops: its CI target, else `sweep.runs` runs (default one).
fn stopping_rule(plan: &Plan) -> anyhow::Result<CiTarget> {
    Ok(plan
        .base
        .ci_target()?
        .unwrap_or_else(|| CiTarget::fixed(plan.sweep.runs)))
}

/// The points' runs, each point's together (`sweep.order = points`) or round robin
/// (`interleaved`, see [`run_interleaved`]), under one progress bar over all runs.
fn run_points(
    dirs: &[(&Point, PathBuf)],
    out: &Path,
    ci: &CiTarget,
    resume: bool,
    quiet: bool,
    order: Order,
) -> anyhow::Result<Vec<Aggregate>> {
    let bar = (!quiet).then(|| point_bar((dirs.len() * ci.max_runs) as u64));
    // Told after run k of point i; `pos` is the bar's position.
    let tell = |i: usize, k: usize, pos: u64, agg: &Aggregate| {
        if let Some(b) = &bar {
            b.set_position(pos);
            b.set_message(format!(
                "run {k} of point {}/{} {} {}",
                i + 1,
                dirs.len(),
                dirs[i].0.id,
                describe(agg)
            ));
        }
    };
    let aggs = if order == Order::Interleaved {
        let mut done = 0;
        run_interleaved(dirs, ci, resume, &mut |i, k, agg| {
            done += 1;
            tell(i, k, done, agg)
        })
        .map_err(|e| vanished_or(out, e))?
    } else {
        let mut aggs = Vec::new();
        for (i, (p, dir)) in dirs.iter().enumerate() {
            taillab_core::experiment::check_experiment(out)?;
            let base = (i * ci.max_runs) as u64;
            let agg = run_point(p, dir, ci, resume, &mut |k, agg| {
                tell(i, k, base + k as u64, agg)
            })
            .with_context(|| format!("point {}", p.id))
            .map_err(|e| vanished_or(out, e))?;
            aggs.push(agg);
        }
        aggs
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(aggs)
}

/// A point's error, unless the results folder itself is gone: then that is the error (a run
/// whose folder was removed under it fails on whichever of its files it touched first, and
/// the user must learn that the folder vanished, not which file).
fn vanished_or(out: &Path, e: anyhow::Error) -> anyhow::Error {
    match taillab_core::experiment::check_experiment(out) {
        Err(v) => v.into(),
        Ok(()) => e,
    }
}

/// Highest load meeting the SLO: probes up to the saturation rate, then a
/// point at that load for the CI.
fn slo_point(
    g: &Group,
    plan: &Plan,
    slo: &Slo,
    out: &Path,
    resume: bool,
    quiet: bool,
    exec: &dyn Executor,
) -> anyhow::Result<()> {
    let sat = saturation(g, plan, out, resume, quiet, exec)?;
    let dir = out.join("slo").join(group_tag(g));
    let mut probe = CliProbe {
        cfg: &g.config,
        dir: dir.clone(),
        resume,
        probe: plan.sweep.probe,
        exec,
    };
    let opts = SearchOpts {
        redo_disturbed: g.config.ci.redo_disturbed,
        ..Default::default()
    };
    let (found, probes) = slo_search(&mut probe, sat, slo, &opts)?;
    let report = match found {
        None => {
            json!({"slo": slo.to_string(), "qps": null, "saturation_qps": sat, "probes": probes,
                       "verdict": "no load met the SLO"})
        }
        Some(lo) => {
            let key = format!("{}.{}", slo.metric, slo.stat);
            let ci = g.config.ci_target()?.unwrap_or(CiTarget {
                target: 0.05,
                min_runs: 3,
                max_runs: 5,
                metrics: vec![],
            });
            let ci = CiTarget {
                metrics: vec![key.clone()],
                ..ci
            };
            let mut c = g.config.clone();
            c.load.qps = Some(lo);
            let point = Point {
                id: "slo".into(),
                config: c,
                coords: g.coords.clone(),
            };
            let one = [(&point, dir.join("point"))];
            let agg = exec
                .run_points(&one, &ci, &mut |one, ci| {
                    Ok(vec![run_point(
                        one[0].0,
                        &one[0].1,
                        ci,
                        resume,
                        &mut |_, _| {},
                    )?])
                })?
                .remove(0);
            let m = &agg.metrics[&key];
            json!({"slo": slo.to_string(), "qps": lo, "saturation_qps": sat, "probes": probes,
                   "estimate_ns": m.estimate, "ci_low_ns": m.ci_low, "ci_high_ns": m.ci_high, "runs": agg.runs,
                   "verdict": format!("highest load meeting the SLO: {lo:.0} qps ({key} {} ±{:.1}%)", fmt_ns(m.estimate), m.rel_half_width * 100.0)})
        }
    };
    println!(
        "slo {}: {}",
        group_tag(g),
        report["verdict"].as_str().unwrap_or("")
    );
    write_json_atomic(&dir.join("slo.json"), &report)?;
    Ok(())
}

fn dry_run(plan: &Plan, groups: &[Group]) -> anyhow::Result<i32> {
    let rel = plan.of_saturation();
    for g in groups {
        for p in plan.points(g, 1.0)? {
            let load = p.config.load.qps.unwrap_or(0.0);
            if rel {
                println!("{:<48} load {load} × saturation of {}", p.id, group_tag(g));
            } else {
                println!("{:<48} {load} qps", p.id);
            }
        }
    }
    let runs = stopping_rule(plan)?.max_runs;
    let order = match plan.sweep.order {
        Order::Interleaved if runs > 1 => ", interleaved (every point's run k before any run k+1)",
        _ => "",
    };
    println!(
        "{} points, at most {} runs{order}",
        plan.count(),
        plan.count() * runs
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fast apps keep the configured probe; a second-long service gets 30 of them.
    #[test]
    fn probes_last_thirty_service_times() {
        let two = Dur(2_000_000_000);
        assert_eq!(probe_length(two, 60_000.0), two);
        assert_eq!(probe_length(two, 1e9), Dur(30_000_000_000));
        assert_eq!(probe_length(two, f64::INFINITY), two);
    }
}
