//! Repeated runs (`taillab run --ci`), sweeps (`taillab sweep`), the
//! saturation finder and the SLO search, over the results tree of
//! `taillab_core::experiment`.

use crate::run::{parse_enum, parse_ns, parse_secs, run_once, RunArgs};
use anyhow::{bail, Context};
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use taillab_core::arrival::ArrivalSpec;
use taillab_core::clock::WaitMode;
use taillab_core::dist::{fmt_ns, parse_duration_ns};
use taillab_core::experiment::{
    open_experiment, run_point, Aggregate, CiTarget, ExperimentMeta, EXPERIMENT_SCHEMA,
};
use taillab_core::harness::DEFAULT_SPIN_MARGIN_NS;
use taillab_core::queue::Discipline;
use taillab_core::summary::{rfc3339, write_json_atomic, Host};
use taillab_core::{App, Bound, Params, RunSpec, ShaperMode, Summary};

fn ci_target(
    target: f64,
    min_runs: usize,
    max_runs: usize,
    metrics: &[String],
) -> anyhow::Result<CiTarget> {
    let ci = CiTarget {
        target,
        min_runs,
        max_runs,
        metrics: if metrics.is_empty() {
            CiTarget::default_metrics()
        } else {
            metrics.to_vec()
        },
    };
    ci.validate().map_err(anyhow::Error::msg)?;
    Ok(ci)
}

fn point_value(
    app: &str,
    config: &str,
    qps: f64,
    threads: usize,
    params: &Params,
    id: &str,
) -> Value {
    json!({"id": id, "app": app, "config": config, "qps": qps, "threads": threads, "params": params})
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn point_id(config: &str, threads: usize, qps: f64, grid: &[(String, String)]) -> String {
    let mut id = format!("{config}-t{threads}-q{}", sanitize(&format!("{qps:.0}")));
    for (k, v) in grid {
        id.push_str(&format!("-{}-{}", sanitize(k), sanitize(v)));
    }
    id
}

fn point_bar(total: u64) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(total);
    b.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} runs eta {eta} {msg}",
        )
        .expect("valid template"),
    );
    b
}

fn describe(agg: &Aggregate) -> String {
    agg.metrics
        .iter()
        .map(|(m, c)| format!("{m} ±{:.1}%", c.rel_half_width * 100.0))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `taillab run --ci T`: one point, repeated to the target.
pub fn run_repeated(
    a: &RunArgs,
    app: &Arc<dyn App>,
    params: &Params,
    spec: &RunSpec,
    target: f64,
    out: &Path,
) -> anyhow::Result<i32> {
    let ci = ci_target(target, a.min_runs, a.max_runs, &a.ci_metrics)?;
    let id = point_id(&a.config, spec.threads, spec.qps, &[]);
    let point = point_value(app.name(), &a.config, spec.qps, spec.threads, params, &id);
    let meta = ExperimentMeta {
        schema: EXPERIMENT_SCHEMA.into(),
        kind: "run".into(),
        parameters: json!({"app": app.name(), "config": a.config, "params": params, "spec": spec}),
        base_seed: spec.seed,
        points: vec![point.clone()],
        ci: ci.clone(),
        host: Host::collect(),
        system: system_report(),
        taillab: env!("CARGO_PKG_VERSION").into(),
        started_at: rfc3339(std::time::SystemTime::now()),
    };
    open_experiment(out, &meta, a.resume).map_err(anyhow::Error::msg)?;
    let bar = (!a.quiet).then(|| point_bar(ci.max_runs as u64));
    let dir = out.join("points").join(&id);
    let agg = run_point(
        &dir,
        &point,
        spec.seed,
        &ci,
        a.resume,
        &mut |seed, run_dir| -> anyhow::Result<Summary> {
            let s = RunSpec {
                seed,
                ..spec.clone()
            };
            run_redoing_disturbed(a.redo_disturbed, run_dir, |dir| {
                run_once(app, params, &s, &a.config, dir, a.save_requests, false)
            })
        },
        &mut |k, agg| {
            if let Some(b) = &bar {
                b.set_position(k as u64);
                b.set_message(describe(agg));
            }
        },
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    print!("{}", table(&[agg]));
    println!("results: {}", out.display());
    Ok(0)
}

/// The full host inspection of `taillab system show` (no measuring window:
/// each run's own environment check measures steal and foreign CPU).
fn system_report() -> Option<serde_json::Value> {
    taillab_monitor::SystemReport::collect_with(Path::new("/"), std::time::Duration::ZERO)
        .ok()
        .and_then(|r| serde_json::to_value(r).ok())
}

/// Runs `once` into `run_dir`; while its environment check fails and the
/// budget allows, moves the disturbed run aside (`run-K.disturbed-N`, kept
/// for inspection) and runs again with the same seed. The final summary
/// records every discarded attempt under `environment_redo`, so a redo is
/// never silent.
fn run_redoing_disturbed(
    budget: usize,
    run_dir: &Path,
    mut once: impl FnMut(&Path) -> anyhow::Result<Summary>,
) -> anyhow::Result<Summary> {
    let mut discarded = Vec::new();
    loop {
        let mut s = once(run_dir)?;
        if discarded.len() < budget && crate::run::env_disturbed(&s) {
            let name = run_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let aside = run_dir.with_file_name(format!("{name}.disturbed-{}", discarded.len() + 1));
            let _ = std::fs::remove_dir_all(&aside);
            std::fs::rename(run_dir, &aside)
                .with_context(|| format!("moving disturbed run {} aside", run_dir.display()))?;
            let why = s
                .checks
                .get("environment")
                .map(|c| c.verdict.clone())
                .unwrap_or_default();
            eprintln!("run {name} disturbed ({why}); redoing it with the same seed");
            discarded.push(json!({ "moved_to": aside.display().to_string(), "reason": why }));
            continue;
        }
        if !discarded.is_empty() {
            s.extra.insert(
                "environment_redo".to_string(),
                json!({ "redone": discarded.len(), "budget": budget, "discarded": discarded }),
            );
            taillab_core::summary::write_json_atomic(&run_dir.join("summary.json"), &s)?;
        }
        return Ok(s);
    }
}

/// The per-point table printed after experiments and sweeps.
pub fn table(aggs: &[Aggregate]) -> String {
    let mut o = format!(
        "{:<34}{:>5} {:<6}{:>18}{:>18}{:>18}  {}\n",
        "point", "runs", "target", "mean", "p95", "p99", "checks failed (runs)"
    );
    for a in aggs {
        // One run and no target asked (a plain sweep): no interval to show.
        let no_ci = a.runs < 2 && a.target >= 1.0;
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
            if no_ci {
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

/// An experiment file (TOML). Every key is optional; flags override it.
#[derive(Debug, Default, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct ExperimentFile {
    pub app: Option<String>,
    pub configs: Option<Vec<String>>,
    pub threads: Option<Vec<usize>>,
    pub qps: Option<Vec<f64>>,
    pub load: Option<String>,
    pub of_saturation: Option<bool>,
    pub arrival: Option<String>,
    pub seed: Option<u64>,
    pub warmup_requests: Option<u64>,
    pub warmup_seconds: Option<f64>,
    pub requests: Option<u64>,
    pub duration: Option<String>,
    pub wait: Option<String>,
    pub spin_margin: Option<String>,
    pub shaper: Option<String>,
    pub discipline: Option<String>,
    pub interval: Option<String>,
    pub ci: Option<f64>,
    pub min_runs: Option<usize>,
    pub max_runs: Option<usize>,
    pub ci_metrics: Option<Vec<String>>,
    pub slo: Option<String>,
    pub probe_seconds: Option<f64>,
    pub redo_disturbed: Option<usize>,
    pub set: Option<BTreeMap<String, String>>,
    pub grid: Option<BTreeMap<String, Vec<String>>>,
}

impl ExperimentFile {
    pub fn read(path: &Path) -> anyhow::Result<Self> {
        let txt =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        toml::from_str(&txt)
            .map_err(|e| anyhow::anyhow!("{}: {}", path.display(), e.to_string().trim()))
    }
}

#[derive(Args, Debug, Clone, Default)]
pub struct SweepArgs {
    /// Experiment file (commented TOML, see configs/); flags override its keys.
    #[arg(long)]
    pub file: Option<PathBuf>,
    #[arg(long)]
    pub app: Option<String>,
    /// Configurations, comma-separated (integrated, loopback, networked).
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,
    /// Worker-thread counts, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Loads in requests/s: a list (1000,2000) or a range FROM:TO:STEP.
    #[arg(long)]
    pub qps: Option<String>,
    /// Loads as fractions FROM:TO:STEP (or a list) of the measured saturation rate.
    #[arg(long)]
    pub load: Option<String>,
    /// Interpret --load as fractions of the saturation rate (measured first).
    #[arg(long)]
    pub of_saturation: bool,
    #[arg(long)]
    pub arrival: Option<String>,
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long)]
    pub warmup_requests: Option<u64>,
    #[arg(long, value_parser = parse_secs)]
    pub warmup_seconds: Option<f64>,
    #[arg(long)]
    pub requests: Option<u64>,
    #[arg(long)]
    pub duration: Option<String>,
    #[arg(long)]
    pub wait: Option<String>,
    #[arg(long)]
    pub spin_margin: Option<String>,
    #[arg(long)]
    pub shaper: Option<String>,
    #[arg(long)]
    pub discipline: Option<String>,
    #[arg(long)]
    pub interval: Option<String>,
    /// CI target per point (fraction, e.g. 0.01); without it each point is one run.
    #[arg(long)]
    pub ci: Option<f64>,
    #[arg(long)]
    pub min_runs: Option<usize>,
    #[arg(long)]
    pub max_runs: Option<usize>,
    #[arg(long, value_delimiter = ',')]
    pub ci_metrics: Vec<String>,
    /// Find the highest load meeting an SLO, e.g. p99<=2ms or service.p95<=1ms.
    #[arg(long)]
    pub slo: Option<String>,
    /// Length of each saturation/SLO probe run, seconds.
    #[arg(long)]
    pub probe_seconds: Option<f64>,
    /// Discard a run whose environment check failed (steal, foreign CPU)
    /// and redo it with the same seed, at most N times per run; every
    /// discarded attempt is kept aside and named in the run's summary.
    #[arg(long)]
    pub redo_disturbed: Option<usize>,
    /// Fixed app setting KEY=VALUE (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// App setting to sweep, KEY=V1|V2|... (repeatable).
    #[arg(long = "grid", value_name = "KEY=V1|V2")]
    pub grid: Vec<String>,
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted sweep in --out: finished runs and points are kept as they are.
    #[arg(long)]
    pub resume: bool,
    #[arg(long, short)]
    pub quiet: bool,
}

/// Parses `a:b:step` or `x,y,z` into values; `what` names the key for errors.
pub fn parse_values(s: &str, what: &str) -> anyhow::Result<Vec<f64>> {
    let bad = || {
        anyhow::anyhow!(
            "{what} `{s}`: write a list like 1000,2000 or a range FROM:TO:STEP like 0.1:0.9:0.1"
        )
    };
    let v: Vec<f64> = if s.contains(':') {
        let p: Vec<f64> = s
            .split(':')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?;
        if p.len() != 3 || p[2].is_nan() || p[2] <= 0.0 || p[1] < p[0] {
            return Err(bad());
        }
        let n = ((p[1] - p[0]) / p[2] + 1e-9).floor() as usize;
        (0..=n)
            .map(|i| ((p[0] + i as f64 * p[2]) * 1e9).round() / 1e9)
            .collect()
    } else {
        s.split(',')
            .map(|x| x.trim().parse::<f64>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad())?
    };
    if v.is_empty() || v.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
        bail!("{what} `{s}`: every value must be a positive number");
    }
    if v.len() > 1000 {
        bail!("{what} `{s}` expands to {} values; at most 1000", v.len());
    }
    Ok(v)
}

/// The merged, validated description of a sweep.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SweepPlan {
    pub app: String,
    pub configs: Vec<String>,
    pub threads: Vec<usize>,
    pub qps: Vec<f64>,
    pub of_saturation: bool,
    pub fixed: Params,
    pub grid: Vec<(String, Vec<String>)>,
    pub template: RunSpecTemplate,
    pub ci: Option<CiTarget>,
    pub slo: Option<(String, String, f64)>,
    pub probe_seconds: f64,
    pub redo_disturbed: usize,
}

/// RunSpec minus what a sweep varies.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSpecTemplate {
    pub arrival: String,
    pub seed: u64,
    pub warmup: Bound,
    pub measure: Bound,
    pub wait: String,
    pub spin_margin_ns: u64,
    pub shaper: String,
    pub discipline: String,
    pub interval_ns: u64,
}

impl RunSpecTemplate {
    fn spec(&self, qps: f64, threads: usize, seed: u64) -> anyhow::Result<RunSpec> {
        Ok(RunSpec {
            qps,
            threads,
            seed,
            arrival: parse_enum::<ArrivalSpec>("arrival", &self.arrival)?,
            warmup: self.warmup,
            measure: self.measure,
            wait: parse_enum::<WaitMode>("wait", &self.wait)?,
            spin_margin_ns: self.spin_margin_ns,
            shaper: parse_enum::<ShaperMode>("shaper", &self.shaper)?,
            discipline: parse_enum::<Discipline>("discipline", &self.discipline)?,
            keep_records: true,
            interval_ns: self.interval_ns,
            ..RunSpec::default()
        })
    }
}

/// Parses `p99<=2ms` / `service.p95<=1ms` into (metric, stat, bound ns).
pub fn parse_slo(s: &str) -> anyhow::Result<(String, String, f64)> {
    let bad = || {
        anyhow::anyhow!("--slo `{s}`: write it as STAT<=TIME, e.g. p99<=2ms or service.p95<=500us")
    };
    let (lhs, rhs) = s.split_once("<=").ok_or_else(bad)?;
    let (metric, stat) = match lhs.trim().split_once('.') {
        Some((m, st)) => (m.to_string(), st.to_string()),
        None => ("sojourn".to_string(), lhs.trim().to_string()),
    };
    if !taillab_core::collector::METRICS.contains(&metric.as_str())
        || taillab_core::collector::MetricStats::default()
            .get(&stat)
            .is_none()
    {
        return Err(bad());
    }
    let bound = parse_duration_ns(rhs).map_err(|e| anyhow::anyhow!("--slo `{s}`: {e}"))?;
    Ok((metric, stat, bound))
}

impl SweepArgs {
    /// File values, overridden by flags, defaulted, validated.
    pub fn plan(&self) -> anyhow::Result<SweepPlan> {
        let f = match &self.file {
            Some(p) => ExperimentFile::read(p)?,
            None => ExperimentFile::default(),
        };
        let app = self.app.clone().or(f.app).ok_or_else(|| {
            anyhow::anyhow!("say which app: --app NAME or `app = ...` in the file")
        })?;
        let configs = if self.configs.is_empty() {
            f.configs.unwrap_or_else(|| vec!["integrated".into()])
        } else {
            self.configs.clone()
        };
        let threads = if self.threads.is_empty() {
            f.threads.unwrap_or_else(|| vec![1])
        } else {
            self.threads.clone()
        };
        if threads.iter().any(|t| *t == 0 || *t > 1024) {
            bail!("threads: every count must be in 1..=1024, got {threads:?}");
        }
        let of_saturation = self.of_saturation || f.of_saturation.unwrap_or(false);
        let using_load =
            self.load.is_some() || (self.qps.is_none() && f.load.is_some() && f.qps.is_none());
        let qps = match (&self.qps, &self.load) {
            (Some(q), _) => parse_values(q, "--qps")?,
            (None, Some(l)) => parse_values(l, "--load")?,
            (None, None) => match (f.qps.clone(), f.load.clone()) {
                (Some(q), _) => {
                    if q.iter().any(|x| !(x.is_finite() && *x > 0.0)) {
                        bail!("qps: every value must be a positive number, got {q:?}");
                    }
                    q
                }
                (None, Some(l)) => parse_values(&l, "load")?,
                (None, None) => {
                    bail!("say which loads: --qps LIST|RANGE, or --load RANGE --of-saturation")
                }
            },
        };
        if using_load && !of_saturation {
            bail!("--load gives fractions: add --of-saturation (or use --qps for absolute rates)");
        }
        if of_saturation && qps.iter().any(|x| *x > 1.5) {
            bail!("--load with --of-saturation takes fractions of the saturation rate (e.g. 0.1:0.9:0.1), got {qps:?}");
        }
        let measure = match (
            self.requests.or(f.requests),
            self.duration.clone().or(f.duration),
        ) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(d)) => {
                Bound::Seconds(parse_secs(&d).map_err(|e| anyhow::anyhow!("duration: {e}"))?)
            }
            (Some(_), Some(_)) => bail!("give either requests or duration, not both"),
            (None, None) => {
                bail!("say how long each run measures: --requests N or --duration TIME")
            }
        };
        let warmup = match (
            self.warmup_requests.or(f.warmup_requests),
            self.warmup_seconds.or(f.warmup_seconds),
        ) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(s)) => Bound::Seconds(s),
            (None, None) => Bound::Requests(0),
            _ => bail!("give either warmup_requests or warmup_seconds, not both"),
        };
        let spin_margin_ns = match self.spin_margin.clone().or(f.spin_margin) {
            Some(s) => parse_ns(&s).map_err(|e| anyhow::anyhow!("spin_margin: {e}"))?,
            None => DEFAULT_SPIN_MARGIN_NS,
        };
        let interval_ns = match self.interval.clone().or(f.interval) {
            Some(s) => parse_ns(&s).map_err(|e| anyhow::anyhow!("interval: {e}"))?,
            None => 1_000_000_000,
        };
        let mut fixed = Params::new();
        for (k, v) in f.set.unwrap_or_default() {
            fixed.insert(&k, &v);
        }
        for (k, v) in Params::parse(self.set.iter().map(|s| s.as_str()))?.iter() {
            fixed.insert(k, v);
        }
        let mut grid: BTreeMap<String, Vec<String>> = f.grid.unwrap_or_default();
        for g in &self.grid {
            let (k, vs) = g
                .split_once('=')
                .ok_or_else(|| anyhow::anyhow!("--grid `{g}`: write KEY=V1|V2"))?;
            grid.insert(
                k.trim().into(),
                vs.split('|').map(|v| v.trim().to_string()).collect(),
            );
        }
        if grid.values().any(|v| v.is_empty()) {
            bail!("grid: every key needs at least one value");
        }
        let ci = match self.ci.or(f.ci) {
            None => None,
            Some(t) => Some(ci_target(
                t,
                self.min_runs.or(f.min_runs).unwrap_or(3),
                self.max_runs.or(f.max_runs).unwrap_or(20),
                &if self.ci_metrics.is_empty() {
                    f.ci_metrics.unwrap_or_default()
                } else {
                    self.ci_metrics.clone()
                },
            )?),
        };
        let slo = match self.slo.clone().or(f.slo) {
            Some(s) => Some(parse_slo(&s)?),
            None => None,
        };
        let probe_seconds = self.probe_seconds.or(f.probe_seconds).unwrap_or(2.0);
        if !(probe_seconds > 0.0 && probe_seconds <= 600.0) {
            bail!("probe_seconds must be in (0, 600], got {probe_seconds}");
        }
        let redo_disturbed = self.redo_disturbed.or(f.redo_disturbed).unwrap_or(0);
        if redo_disturbed > 20 {
            bail!("redo_disturbed must be in 0..=20 (redos per run), got {redo_disturbed}");
        }
        let template = RunSpecTemplate {
            arrival: self
                .arrival
                .clone()
                .or(f.arrival)
                .unwrap_or_else(|| "poisson".into()),
            seed: self.seed.or(f.seed).unwrap_or(1),
            warmup,
            measure,
            wait: self
                .wait
                .clone()
                .or(f.wait)
                .unwrap_or_else(|| "hybrid".into()),
            spin_margin_ns,
            shaper: self
                .shaper
                .clone()
                .or(f.shaper)
                .unwrap_or_else(|| "inline".into()),
            discipline: self
                .discipline
                .clone()
                .or(f.discipline)
                .unwrap_or_else(|| "fifo".into()),
            interval_ns,
        };
        // Validate the template through a real spec (names the bad key).
        template.spec(1.0, threads[0], 1)?.validate()?;
        for c in &configs {
            if !["integrated", "loopback", "networked"].contains(&c.as_str()) {
                bail!("configs: unknown `{c}`; use integrated, loopback or networked");
            }
        }
        Ok(SweepPlan {
            app,
            configs,
            threads,
            qps,
            of_saturation,
            fixed,
            grid: grid.into_iter().collect(),
            template,
            ci,
            slo,
            probe_seconds,
            redo_disturbed,
        })
    }
}

/// Every combination of grid values.
fn grid_combos(grid: &[(String, Vec<String>)]) -> Vec<Vec<(String, String)>> {
    let mut combos = vec![vec![]];
    for (k, vs) in grid {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                vs.iter().map(move |v| {
                    let mut c2: Vec<(String, String)> = c.clone();
                    c2.push((k.clone(), v.clone()));
                    c2
                })
            })
            .collect();
    }
    combos
}

pub fn sweep(a: SweepArgs) -> anyhow::Result<i32> {
    let plan = a.plan()?;
    let app = crate::apps::find(&plan.app)?;
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| crate::run::default_out(&format!("sweep-{}", plan.app)));
    let combos = grid_combos(&plan.grid);
    for combo in &combos {
        let mut p = plan.fixed.clone();
        for (k, v) in combo {
            p.insert(k, v);
        }
        p.check_keys(app.name(), app.keys())?;
    }
    // One run per point unless a CI target was asked for.
    let ci = plan.ci.clone().unwrap_or(CiTarget {
        target: 1.0,
        min_runs: 1,
        max_runs: 1,
        metrics: CiTarget::default_metrics(),
    });
    let parameters = serde_json::to_value(&plan)?;
    let mut meta = ExperimentMeta {
        schema: EXPERIMENT_SCHEMA.into(),
        kind: "sweep".into(),
        parameters,
        base_seed: plan.template.seed,
        points: vec![],
        ci: ci.clone(),
        host: Host::collect(),
        system: system_report(),
        taillab: env!("CARGO_PKG_VERSION").into(),
        started_at: rfc3339(std::time::SystemTime::now()),
    };
    open_experiment(&out, &meta, a.resume).map_err(anyhow::Error::msg)?;

    // Expand points (saturation first where loads are relative).
    let mut points: Vec<(String, f64, usize, Params, String)> = Vec::new();
    for config in &plan.configs {
        for &threads in &plan.threads {
            for combo in &combos {
                let mut params = plan.fixed.clone();
                for (k, v) in combo {
                    params.insert(k, v);
                }
                let scale = if plan.of_saturation {
                    let sat = find_saturation(
                        &app, &params, config, threads, &plan, &out, a.resume, a.quiet,
                    )?;
                    eprintln!("saturation of {config} t{threads} {params}: {:.0} qps", sat);
                    sat
                } else {
                    1.0
                };
                for &q in &plan.qps {
                    let qps = (q * scale * 100.0).round() / 100.0;
                    points.push((
                        config.clone(),
                        qps,
                        threads,
                        params.clone(),
                        point_id(config, threads, qps, combo),
                    ));
                }
            }
        }
    }
    meta.points = points
        .iter()
        .map(|(c, q, t, p, id)| point_value(app.name(), c, *q, *t, p, id))
        .collect();
    // Rewrite with the point list (first start) — on resume the parameters matched, so the list is the same.
    if !a.resume || !out.join("points").exists() {
        write_json_atomic(&out.join("experiment.json"), &meta)?;
    }
    let bar = (!a.quiet).then(|| point_bar((points.len() * ci.max_runs) as u64));
    let mut aggs = Vec::new();
    let mut done_runs = 0u64;
    for (i, (config, qps, threads, params, id)) in points.iter().enumerate() {
        crate::run::warn_if_saturating(&app, params, *qps, *threads);
        let point = &meta.points[i];
        let spec = plan.template.spec(*qps, *threads, plan.template.seed)?;
        let base = done_runs;
        let agg = run_point(
            &out.join("points").join(id),
            point,
            plan.template.seed,
            &ci,
            a.resume,
            &mut |seed, run_dir| -> anyhow::Result<Summary> {
                let s = RunSpec {
                    seed,
                    ..spec.clone()
                };
                run_redoing_disturbed(plan.redo_disturbed, run_dir, |dir| {
                    run_once(&app, params, &s, config, dir, false, false)
                })
            },
            &mut |k, agg| {
                if let Some(b) = &bar {
                    b.set_position(base + k as u64);
                    b.set_message(format!(
                        "point {}/{} {id} {}",
                        i + 1,
                        points.len(),
                        describe(agg)
                    ));
                }
            },
        )?;
        done_runs += ci.max_runs as u64;
        if let Some(b) = &bar {
            b.set_position(done_runs);
        }
        aggs.push(agg);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    print!("{}", table(&aggs));
    if let Some(slo) = &plan.slo {
        for config in &plan.configs {
            for &threads in &plan.threads {
                let params = plan.fixed.clone();
                slo_search(
                    &app, &params, config, threads, &plan, slo, &out, a.resume, a.quiet,
                )?;
            }
        }
    }
    println!("results: {}", out.display());
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
/// A short probe run at `qps`; true when it kept up (achieved ≥ 99 % of the
/// schedule, backlog not growing, nothing unfinished).
fn probe(
    app: &Arc<dyn App>,
    params: &Params,
    config: &str,
    threads: usize,
    qps: f64,
    plan: &SweepPlan,
    dir: &Path,
    resume: bool,
) -> anyhow::Result<Summary> {
    if resume {
        if let Ok(s) = Summary::read(&dir.join("summary.json")) {
            return Ok(s);
        }
    }
    let mut spec = plan.template.spec(qps, threads, plan.template.seed)?;
    spec.warmup = Bound::Seconds(0.3);
    spec.measure = Bound::Seconds(plan.probe_seconds);
    spec.drain_timeout_ns = 2_000_000_000;
    run_once(app, params, &spec, config, dir, false, false)
}

fn sustainable(s: &Summary) -> bool {
    s.achieved_qps >= 0.99 * s.scheduled_qps && s.checks.get("saturation").is_some_and(|c| c.ok)
}

/// Maximum sustainable throughput by expanding then bisecting probe runs.
#[allow(clippy::too_many_arguments)]
fn find_saturation(
    app: &Arc<dyn App>,
    params: &Params,
    config: &str,
    threads: usize,
    plan: &SweepPlan,
    out: &Path,
    resume: bool,
    quiet: bool,
) -> anyhow::Result<f64> {
    let tag = point_id(
        config,
        threads,
        0.0,
        &params
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<_>>(),
    );
    let dir = out.join("saturation").join(&tag);
    let result = dir.join("saturation.json");
    if resume && result.exists() {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&result)?)?;
        return v["qps"]
            .as_f64()
            .ok_or_else(|| anyhow::anyhow!("{} lacks qps", result.display()));
    }
    let mut guess = match app.expected_service_ns(params) {
        Some(svc) if svc > 0.0 => threads as f64 * 1e9 / svc,
        _ => {
            // Measure the service time at a light load first.
            let s = probe(
                app,
                params,
                config,
                threads,
                200.0,
                plan,
                &dir.join("calibrate"),
                resume,
            )?;
            threads as f64 * 1e9 / s.latency_ns["service"].mean.max(1.0)
        }
    };
    guess = guess.clamp(1.0, 1e7);
    let (mut lo, mut hi): (f64, Option<f64>) = (0.0, None);
    let mut probes = Vec::new();
    let mut qps = guess * 0.8;
    for i in 0..14 {
        let s = probe(
            app,
            params,
            config,
            threads,
            qps,
            plan,
            &dir.join(format!("probe-{i}")),
            resume,
        )?;
        let ok = sustainable(&s);
        if !quiet {
            eprintln!(
                "  saturation probe {i}: {qps:.0} qps → achieved {:.0} {}",
                s.achieved_qps,
                if ok { "ok" } else { "saturated" }
            );
        }
        probes.push(json!({"qps": qps, "achieved_qps": s.achieved_qps, "sustainable": ok}));
        if ok {
            lo = qps;
        } else {
            hi = Some(qps);
        }
        qps = match hi {
            None => qps * 1.5,
            Some(h) => {
                if h - lo <= 0.02 * h {
                    break;
                }
                (lo + h) / 2.0
            }
        };
    }
    if lo == 0.0 {
        bail!("no probe load down to {qps:.1} qps was sustainable for {} ({config}, {threads} threads)", app.name());
    }
    write_json_atomic(
        &result,
        &json!({"qps": lo, "upper": hi, "probes": probes, "rule": "achieved >= 99% of scheduled and backlog steady"}),
    )?;
    Ok(lo)
}

/// Highest load meeting the SLO: bisection over probe runs up to the
/// saturation rate, then an experiment at that load for the CI.
#[allow(clippy::too_many_arguments)]
fn slo_search(
    app: &Arc<dyn App>,
    params: &Params,
    config: &str,
    threads: usize,
    plan: &SweepPlan,
    slo: &(String, String, f64),
    out: &Path,
    resume: bool,
    quiet: bool,
) -> anyhow::Result<()> {
    let (metric, stat, bound) = slo;
    let sat = find_saturation(app, params, config, threads, plan, out, resume, quiet)?;
    let dir = out.join("slo").join(format!("{config}-t{threads}"));
    let meets = |s: &Summary| {
        s.latency_ns
            .get(metric)
            .and_then(|m| m.get(stat))
            .is_some_and(|v| v <= *bound)
            && sustainable(s)
    };
    let (mut lo, mut hi) = (0.0, sat);
    let top = probe(
        app,
        params,
        config,
        threads,
        sat,
        plan,
        &dir.join("probe-top"),
        resume,
    )?;
    if meets(&top) {
        lo = sat;
    } else {
        for i in 0..10 {
            let q = (lo + hi) / 2.0;
            let s = probe(
                app,
                params,
                config,
                threads,
                q,
                plan,
                &dir.join(format!("probe-{i}")),
                resume,
            )?;
            if meets(&s) {
                lo = q;
            } else {
                hi = q;
            }
            if hi - lo <= 0.02 * sat {
                break;
            }
        }
    }
    let report = if lo <= 0.0 {
        json!({"slo": format!("{metric}.{stat}<={}", fmt_ns(*bound)), "qps": null, "saturation_qps": sat,
               "verdict": "no load met the SLO"})
    } else {
        let ci = plan.ci.clone().unwrap_or(CiTarget {
            target: 0.05,
            min_runs: 3,
            max_runs: 5,
            metrics: vec![],
        });
        let ci = CiTarget {
            metrics: vec![format!("{metric}.{stat}")],
            ..ci
        };
        let spec = plan.template.spec(lo, threads, plan.template.seed)?;
        let point = point_value(app.name(), config, lo, threads, params, "slo");
        let agg = run_point(
            &dir.join("point"),
            &point,
            plan.template.seed,
            &ci,
            resume,
            &mut |seed, run_dir| -> anyhow::Result<Summary> {
                run_once(
                    app,
                    params,
                    &RunSpec {
                        seed,
                        ..spec.clone()
                    },
                    config,
                    run_dir,
                    false,
                    false,
                )
            },
            &mut |_, _| {},
        )?;
        let m = &agg.metrics[&format!("{metric}.{stat}")];
        json!({"slo": format!("{metric}.{stat}<={}", fmt_ns(*bound)), "qps": lo, "saturation_qps": sat,
               "estimate_ns": m.estimate, "ci_low_ns": m.ci_low, "ci_high_ns": m.ci_high, "runs": agg.runs,
               "verdict": format!("highest load meeting the SLO: {lo:.0} qps ({metric}.{stat} {} ±{:.1}%)", fmt_ns(m.estimate), m.rel_half_width * 100.0)})
    };
    println!(
        "slo {config} t{threads}: {}",
        report["verdict"].as_str().unwrap_or("")
    );
    write_json_atomic(&dir.join("slo.json"), &report)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_ranges() {
        assert_eq!(
            parse_values("0.1:0.5:0.1", "x").unwrap(),
            vec![0.1, 0.2, 0.3, 0.4, 0.5]
        );
        assert_eq!(
            parse_values("1000,2500", "x").unwrap(),
            vec![1000.0, 2500.0]
        );
        for bad in ["", "a,b", "1:0:0.1", "0.1:0.5", "0.1:0.5:0", "0,1", "-1"] {
            assert!(parse_values(bad, "--qps").is_err(), "{bad}");
        }
        assert_eq!(
            parse_slo("p99<=2ms").unwrap(),
            ("sojourn".into(), "p99".into(), 2e6)
        );
        assert_eq!(
            parse_slo("service.p95<=500us").unwrap(),
            ("service".into(), "p95".into(), 5e5)
        );
        assert!(parse_slo("p98<=1ms").is_err() && parse_slo("p99<2ms").is_err());
    }

    #[test]
    fn grid_expands_all_combinations() {
        let g = vec![
            ("a".to_string(), vec!["1".to_string(), "2".to_string()]),
            ("b".to_string(), vec!["x".to_string()]),
        ];
        assert_eq!(grid_combos(&g).len(), 2);
        assert_eq!(grid_combos(&[]).len(), 1);
    }

    #[test]
    fn file_keys_are_checked_and_flags_override() {
        let dir = std::env::temp_dir().join(format!("taillab-toml-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.toml");
        std::fs::write(
            &f,
            "app = \"synth\"\nqps = [100.0]\nduration = \"1s\"\nthreds = [2]\n",
        )
        .unwrap();
        let e = SweepArgs {
            file: Some(f.clone()),
            ..Default::default()
        }
        .plan()
        .unwrap_err()
        .to_string();
        assert!(e.contains("threds"), "{e}");
        std::fs::write(
            &f,
            "app = \"synth\"\nqps = [100.0]\nduration = \"1s\"\nthreads = [2]\n",
        )
        .unwrap();
        let p = SweepArgs {
            file: Some(f.clone()),
            threads: vec![1],
            ..Default::default()
        }
        .plan()
        .unwrap();
        assert_eq!(p.threads, vec![1]);
        std::fs::write(
            &f,
            "app = \"synth\"\nqps = [100.0]\nduration = \"1s\"\nci = 2.0\n",
        )
        .unwrap();
        let e = SweepArgs {
            file: Some(f.clone()),
            ..Default::default()
        }
        .plan()
        .unwrap_err()
        .to_string();
        assert!(e.contains("--ci must be in (0, 1)"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
