//! Experiments: repeated runs of one point until the confidence target is
//! met, and the results tree they write.
//!
//! ```text
//! OUT/experiment.json                      parameters, points, seeds, host (taillab.experiment/1)
//! OUT/points/<point-id>/run-<k>/           one run: summary.json, hist/*.hlog
//! OUT/points/<point-id>/aggregate.json     merged histograms' stats + per-metric CI (taillab.aggregate/1)
//! ```
//!
//! Each run gets a fresh seed derived from the base seed (arrival times and
//! request contents both change, against performance hysteresis). After
//! every run, the 95 % Student-t interval over per-run estimates (see
//! [`crate::stats`]) is computed for each target metric; the point stops
//! when every half-width is within the target relative to its estimate, or
//! at the run cap — and `aggregate.json` says which.
//!
//! Files are written as soon as they are final (runs by `write_run`, the
//! aggregate atomically when the point ends), so a killed experiment keeps
//! everything it finished, and a resumed one skips finished runs and points
//! without rewriting them.
//!
//! Schema history: `taillab.experiment/1`, `taillab.aggregate/1` — first versions.

use crate::arrival::derive_seed;
use crate::collector::{decode_hist, MetricStats, METRICS};
use crate::stats::{bootstrap_interval, t_interval};
use crate::summary::{write_json_atomic, Host, ResultError, Summary};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Schema of `experiment.json` (history in the module doc).
pub const EXPERIMENT_SCHEMA: &str = "taillab.experiment/1";
/// Schema of `aggregate.json` (history in the module doc).
pub const AGGREGATE_SCHEMA: &str = "taillab.aggregate/1";

/// The stopping rule of a point.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CiTarget {
    /// Relative half-width target, e.g. 0.01 for ±1 %.
    pub target: f64,
    /// Runs made before the target may stop a point (`ci.min_runs`), ≥ 2.
    pub min_runs: usize,
    /// Runs after which a point stops unmet (`ci.max_runs`), ≥ `min_runs`.
    pub max_runs: usize,
    /// `metric.stat`, e.g. `sojourn.mean`, `sojourn.p99`.
    pub metrics: Vec<String>,
}

impl CiTarget {
    /// The `target` of [`CiTarget::fixed`]: no interval to meet (a real target is < 1).
    pub const NO_TARGET: f64 = 1.0;

    /// `n` runs per point and no CI target (`sweep.runs`; one for a plain sweep).
    pub fn fixed(n: usize) -> Self {
        CiTarget {
            target: Self::NO_TARGET,
            min_runs: n.max(1),
            max_runs: n.max(1),
            metrics: Self::default_metrics(),
        }
    }

    /// Whether this rule is a run count without a target ([`CiTarget::fixed`]).
    pub fn is_fixed(&self) -> bool {
        self.target >= Self::NO_TARGET
    }

    /// Checks the rule; the error names the flag and its allowed range.
    pub fn validate(&self) -> Result<(), crate::error::Invalid> {
        self.check().map_err(crate::error::Invalid)
    }

    fn check(&self) -> Result<(), String> {
        if !(self.target > 0.0 && self.target < 1.0) {
            return Err(format!(
                "--ci must be in (0, 1), e.g. 0.01 for ±1 %; got {}",
                self.target
            ));
        }
        if self.min_runs < 2 {
            return Err(format!(
                "--min-runs must be ≥ 2 (a CI needs two runs); got {}",
                self.min_runs
            ));
        }
        if self.max_runs < self.min_runs {
            return Err(format!(
                "--max-runs {} is below --min-runs {}",
                self.max_runs, self.min_runs
            ));
        }
        for m in &self.metrics {
            let ok = m.split_once('.').is_some_and(|(a, b)| {
                METRICS.contains(&a) && MetricStats::default().get(b).is_some()
            });
            if !ok {
                return Err(format!(
                    "--ci-metrics `{m}` is not METRIC.STAT with METRIC one of {} and STAT one of mean, p50, p90, p95, p99, p999, max",
                    METRICS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// What a target covers unless told: sojourn mean, p95 and p99.
    pub fn default_metrics() -> Vec<String> {
        vec![
            "sojourn.mean".into(),
            "sojourn.p95".into(),
            "sojourn.p99".into(),
        ]
    }
}

/// One metric's interval across runs. With one run the interval is
/// undefined: NaN, written as `null` (JSON has no NaN) and read back as NaN.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MetricCi {
    /// Mean of the per-run values (ns for every latency statistic).
    #[serde(deserialize_with = "nan_if_null")]
    pub estimate: f64,
    /// Lower bound of the 95 % Student-t interval.
    #[serde(deserialize_with = "nan_if_null")]
    pub ci_low: f64,
    /// Upper bound of the 95 % Student-t interval.
    #[serde(deserialize_with = "nan_if_null")]
    pub ci_high: f64,
    /// Half-width over |estimate|; the metric is met when it is ≤ the target.
    #[serde(deserialize_with = "nan_if_null")]
    pub rel_half_width: f64,
    /// Runs the interval covers.
    pub n: usize,
    /// Percentile-bootstrap 95 % interval (2000 resamples): the cross-check of
    /// the t interval, which assumes near-normal per-run values.
    #[serde(deserialize_with = "nan_if_null")]
    pub bootstrap_low: f64,
    /// Upper bound of the bootstrap interval.
    #[serde(deserialize_with = "nan_if_null")]
    pub bootstrap_high: f64,
    /// The metric's value in each run, in run order.
    #[serde(deserialize_with = "nans_if_null")]
    pub per_run: Vec<f64>,
    /// `rel_half_width` ≤ the target.
    pub met: bool,
}

/// `null` (how serde_json writes NaN) as NaN.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A list with `null`s (NaN written as JSON) as NaNs.
fn nans_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v = Vec::<Option<f64>>::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

/// `aggregate.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Aggregate {
    /// [`AGGREGATE_SCHEMA`]; readers refuse any other.
    pub schema: String,
    /// The point as `experiment.json` lists it (app, rate, threads, axis values,
    /// configuration).
    pub point: Value,
    /// Runs made.
    pub runs: usize,
    /// Each run's seed, in run order ([`run_seed`]).
    pub seeds: Vec<u64>,
    /// The relative half-width target (`ci.target`).
    pub target: f64,
    /// Every metric met the target.
    pub target_met: bool,
    /// Why the point stopped: the target met, or the run cap reached first.
    pub stopped: String,
    /// Each target metric (`sojourn.p99`) and its interval across runs.
    pub metrics: BTreeMap<String, MetricCi>,
    /// Statistics of the histograms of all runs added together.
    pub merged: BTreeMap<String, MetricStats>,
    /// How many runs failed each check (a failed run is kept, never dropped).
    pub checks_failed: BTreeMap<String, usize>,
    /// Mean of the runs' achieved rates (requests/s).
    pub achieved_qps: f64,
}

impl Aggregate {
    /// Reads an `aggregate.json`, refusing another schema.
    pub fn read(path: &Path) -> Result<Self, ResultError> {
        crate::summary::read_with_schema(path, AGGREGATE_SCHEMA)
    }
}

/// Seed of run `k` of a point (recorded in the aggregate).
pub fn run_seed(base: u64, k: usize) -> u64 {
    derive_seed(base, 1000 + k as u64)
}

/// Adds up the interval logs of `run_dir` for `metric`.
pub fn read_hlog_total(run_dir: &Path, metric: &str) -> Result<Histogram<u64>, ResultError> {
    let path = run_dir.join("hist").join(format!("{metric}.hlog"));
    let txt = std::fs::read_to_string(&path).map_err(|e| ResultError::Read {
        path: path.clone(),
        why: e.to_string(),
    })?;
    let mut total = Histogram::<u64>::new(3).expect("3 significant digits is valid");
    for line in txt
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('"') && !l.is_empty())
    {
        let b64 = line.rsplit(',').next().unwrap_or("");
        let h = decode_hist(b64).ok_or_else(|| ResultError::Read {
            path: path.clone(),
            why: format!("bad histogram line `{}`", &line[..line.len().min(40)]),
        })?;
        total.add(&h).map_err(|e| ResultError::Read {
            path: path.clone(),
            why: format!("{e:?}"),
        })?;
    }
    Ok(total)
}

/// Runs (or resumes) one point into `dir`. `run_once(seed, run_dir)` performs
/// and writes one run and returns its summary. `on_run` is told after each run.
pub fn run_point<E>(
    dir: &Path,
    point: &Value,
    base_seed: u64,
    ci: &CiTarget,
    resume: bool,
    run_once: &mut dyn FnMut(u64, &Path) -> Result<Summary, E>,
    on_run: &mut dyn FnMut(usize, &Aggregate),
) -> Result<Aggregate, E>
where
    E: From<ResultError>,
{
    let mut p = PointRuns::open(dir, point, base_seed, ci, resume)?;
    while let Some(agg) = p.step(run_once)? {
        on_run(p.runs(), &agg);
    }
    Ok(p.finish()?)
}

/// One point's runs taken one at a time, so a caller can interleave the runs of
/// several points (`sweep.order = interleaved`) under the same stopping rule as
/// [`run_point`]: [`PointRuns::step`] makes the next run until the point stops,
/// [`PointRuns::finish`] writes (or, on resume, reads) `aggregate.json`.
pub struct PointRuns<'a> {
    dir: PathBuf,
    point: &'a Value,
    base_seed: u64,
    ci: &'a CiTarget,
    resume: bool,
    root: Option<PathBuf>,
    summaries: Vec<(PathBuf, u64, Summary)>,
    agg: Option<Aggregate>,
    /// The point was finished before (resume): its aggregate as read.
    done: Option<Aggregate>,
}

impl<'a> PointRuns<'a> {
    /// Opens the point's folder (creating it); on resume a finished point is read
    /// and makes no more runs.
    pub fn open(
        dir: &Path,
        point: &'a Value,
        base_seed: u64,
        ci: &'a CiTarget,
        resume: bool,
    ) -> Result<Self, ResultError> {
        let agg_path = dir.join("aggregate.json");
        let done = if resume && agg_path.exists() {
            Some(Aggregate::read(&agg_path)?)
        } else {
            None
        };
        let root = experiment_root(dir);
        if done.is_none() {
            still_there(&root)?;
            std::fs::create_dir_all(dir).map_err(|e| ResultError::Write {
                path: dir.into(),
                source: e,
            })?;
        }
        Ok(Self {
            dir: dir.into(),
            point,
            base_seed,
            ci,
            resume,
            root,
            summaries: Vec::new(),
            agg: None,
            done,
        })
    }

    /// Runs made (or resumed) so far.
    pub fn runs(&self) -> usize {
        self.summaries.len()
    }

    /// Whether the point has stopped: target met after `min_runs`, the run cap, or
    /// finished before.
    fn stopped(&self) -> bool {
        self.done.is_some()
            || self.agg.as_ref().is_some_and(|a| {
                let k = self.summaries.len();
                (k >= self.ci.min_runs && a.target_met) || k >= self.ci.max_runs
            })
    }

    /// Makes (or, on resume, reads) the next run and returns the aggregate so far;
    /// `None` once the point has stopped.
    pub fn step<E>(
        &mut self,
        run_once: &mut dyn FnMut(u64, &Path) -> Result<Summary, E>,
    ) -> Result<Option<Aggregate>, E>
    where
        E: From<ResultError>,
    {
        if self.stopped() {
            return Ok(None);
        }
        let k = self.summaries.len();
        let seed = run_seed(self.base_seed, k);
        let run_dir = self.dir.join(format!("run-{k}"));
        let done = run_dir.join("summary.json");
        let s = if self.resume && done.exists() {
            Summary::read(&done)?
        } else {
            run_once(seed, &run_dir)?
        };
        // A run recreates its folder; never on top of a removed experiment.
        still_there(&self.root)?;
        self.summaries.push((run_dir, seed, s));
        let agg = aggregate(self.point, self.ci, &self.summaries)?;
        self.agg = Some(agg.clone());
        Ok(Some(agg))
    }

    /// The point's aggregate, written to `aggregate.json` (the one read on resume
    /// when the point was finished before). Fails when no run was made.
    pub fn finish(self) -> Result<Aggregate, ResultError> {
        if let Some(a) = self.done {
            return Ok(a);
        }
        still_there(&self.root)?;
        let k = self.summaries.len();
        let mut agg = self.agg.ok_or_else(|| ResultError::Read {
            path: self.dir.clone(),
            why: "the point has no run".into(),
        })?;
        agg.stopped = if self.ci.is_fixed() {
            format!("{k} run(s) as asked, no CI target")
        } else if agg.target_met {
            format!("target ±{:.2}% met after {k} runs", self.ci.target * 100.0)
        } else {
            format!(
                "run cap {} reached before the ±{:.2}% target",
                self.ci.max_runs,
                self.ci.target * 100.0
            )
        };
        write_json_atomic(&self.dir.join("aggregate.json"), &agg)?;
        Ok(agg)
    }
}

/// The experiment folder `dir` lies in: its nearest ancestor holding
/// `experiment.json` (none for a point outside an experiment).
fn experiment_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|a| a.join("experiment.json").is_file())
        .map(Path::to_path_buf)
}

/// Fails when the experiment in `out` (its `experiment.json`) is gone. A sweep checks before
/// each point: a point opened after the folder was removed finds no experiment above it
/// and, without this, would recreate the folders and report success over the lost runs.
pub fn check_experiment(out: &Path) -> Result<(), ResultError> {
    still_there(&Some(out.to_path_buf()))
}

/// Fails when the experiment folder found at the start is gone: a run
/// writing into a recreated folder would report success over lost runs.
fn still_there(root: &Option<PathBuf>) -> Result<(), ResultError> {
    match root {
        Some(r) if !r.join("experiment.json").is_file() => {
            Err(ResultError::Vanished { root: r.clone() })
        }
        _ => Ok(()),
    }
}

fn aggregate(
    point: &Value,
    ci: &CiTarget,
    runs: &[(PathBuf, u64, Summary)],
) -> Result<Aggregate, ResultError> {
    let mut metrics = BTreeMap::new();
    let mut all_met = true;
    for m in &ci.metrics {
        let (metric, stat) = m.split_once('.').expect("validated");
        let xs: Vec<f64> = runs
            .iter()
            .map(|(_, _, s)| {
                s.latency_ns
                    .get(metric)
                    .and_then(|x| x.get(stat))
                    .unwrap_or(f64::NAN)
            })
            .collect();
        let t = t_interval(&xs);
        let (bl, bh) = bootstrap_interval(&xs, 2000, 17);
        let met = t.rel_half_width <= ci.target;
        all_met &= met;
        metrics.insert(
            m.clone(),
            MetricCi {
                estimate: t.estimate,
                ci_low: t.ci_low,
                ci_high: t.ci_high,
                rel_half_width: t.rel_half_width,
                n: t.n,
                bootstrap_low: bl,
                bootstrap_high: bh,
                per_run: xs,
                met,
            },
        );
    }
    let mut merged = BTreeMap::new();
    for metric in METRICS {
        let mut total = Histogram::<u64>::new(3).expect("valid");
        let mut sum = 0.0;
        for (dir, _, s) in runs {
            total
                .add(read_hlog_total(dir, metric)?)
                .map_err(|e| ResultError::Read {
                    path: dir.clone(),
                    why: format!("{e:?}"),
                })?;
            if let Some(x) = s.latency_ns.get(metric) {
                sum += x.mean * x.count as f64;
            }
        }
        let mut st = MetricStats::from_hist(&total, None);
        if st.count > 0 {
            st.mean = sum / st.count as f64; // exact: from the runs' exact sums
        }
        merged.insert(metric.to_string(), st);
    }
    let mut checks_failed = BTreeMap::new();
    for (_, _, s) in runs {
        for (name, c) in &s.checks {
            *checks_failed.entry(name.clone()).or_insert(0) += usize::from(!c.ok);
        }
    }
    let achieved = runs.iter().map(|r| r.2.achieved_qps).sum::<f64>() / runs.len() as f64;
    Ok(Aggregate {
        schema: AGGREGATE_SCHEMA.into(),
        point: point.clone(),
        runs: runs.len(),
        seeds: runs.iter().map(|r| r.1).collect(),
        target: ci.target,
        target_met: all_met,
        stopped: String::new(),
        metrics,
        merged,
        checks_failed,
        achieved_qps: achieved,
    })
}

/// `experiment.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExperimentMeta {
    /// [`EXPERIMENT_SCHEMA`]; readers refuse any other.
    pub schema: String,
    /// `run` (one point with repeats) or `sweep`.
    pub kind: String,
    /// Everything that defines the experiment, as given (after defaults).
    pub parameters: Value,
    /// Seed every run's seed derives from (`load.seed`, see [`run_seed`]).
    pub base_seed: u64,
    /// Every point, as the aggregates record them.
    pub points: Vec<Value>,
    /// The stopping rule of every point.
    pub ci: CiTarget,
    /// The host it started on; a resume on another CPU, core count or kernel is refused.
    pub host: Host,
    /// Everything `taillab system show` reports about the host (governor,
    /// SMT, RT throttling, THP, isolation, load, ...), when it could be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<Value>,
    /// taillab's version (the package version).
    pub taillab: String,
    /// Wall-clock start, RFC 3339 in UTC.
    pub started_at: String,
}

/// Why an experiment folder cannot be started or resumed ([`open_experiment`]); each says
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The folder holds an experiment and `--resume` was not given.
    #[error("{0} already holds an experiment; add --resume to continue it, or pick a new --out")]
    Exists(PathBuf),
    /// Its `experiment.json` cannot be read or parsed.
    #[error("{path}: {why}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What went wrong and what to do.
        why: String,
    },
    /// It was written by a taillab with another experiment schema.
    #[error("{path} has schema `{found}`, this taillab resumes `{EXPERIMENT_SCHEMA}`: resume it with the taillab that started it, or pick a new --out")]
    Schema {
        /// The file.
        path: PathBuf,
        /// Its schema.
        found: String,
    },
    /// It was started with other parameters (keys, seed or CI settings).
    #[error("cannot resume {out}: it was started with different parameters ({what}); use the same flags/file or a new --out")]
    Parameters {
        /// The folder.
        out: PathBuf,
        /// The keys that differ (or "seed or CI settings").
        what: String,
    },
    /// It was measured on another kind of host.
    #[error("cannot resume {out}: it was measured on another host ({was}) than this one ({now}); results would be mixed")]
    Host {
        /// The folder.
        out: PathBuf,
        /// The host it was measured on.
        was: String,
        /// This host.
        now: String,
    },
    /// It cannot be created or written.
    #[error(transparent)]
    Write(#[from] ResultError),
}

/// Starts an experiment in `out`: writes `experiment.json`, or — when
/// resuming — checks that the stored one describes the same experiment on
/// the same kind of host, so runs made differently are never mixed.
pub fn open_experiment(out: &Path, meta: &ExperimentMeta, resume: bool) -> Result<(), ResumeError> {
    let path = out.join("experiment.json");
    if path.exists() {
        if !resume {
            return Err(ResumeError::Exists(out.to_path_buf()));
        }
        let unreadable = |why: String| ResumeError::Unreadable {
            path: path.clone(),
            why,
        };
        let txt = std::fs::read_to_string(&path)
            .map_err(|e| unreadable(format!("cannot read it: {e}")))?;
        let old: Value = serde_json::from_str(&txt).map_err(|e| {
            unreadable(format!(
                "not valid JSON ({e}): it cannot be resumed; start again in a new --out"
            ))
        })?;
        let found = old.get("schema").and_then(|s| s.as_str()).unwrap_or("none");
        if found != EXPERIMENT_SCHEMA {
            return Err(ResumeError::Schema {
                path,
                found: found.to_string(),
            });
        }
        let old: ExperimentMeta =
            serde_json::from_value(old).map_err(|e| unreadable(e.to_string()))?;
        check_resumable(out, &old, meta)?;
        return Ok(());
    }
    std::fs::create_dir_all(out).map_err(|e| ResultError::Write {
        path: out.to_path_buf(),
        source: e,
    })?;
    Ok(write_json_atomic(&path, meta)?)
}

/// Whether `meta` continues the experiment `old` started in `out`: same parameters, same
/// kind of host (a change of the host's tuning is allowed, and said).
fn check_resumable(
    out: &Path,
    old: &ExperimentMeta,
    meta: &ExperimentMeta,
) -> Result<(), ResumeError> {
    if old.parameters != meta.parameters || old.base_seed != meta.base_seed || old.ci != meta.ci {
        let diff = diff_keys(&old.parameters, &meta.parameters);
        let what = if diff.is_empty() {
            "seed or CI settings".to_string()
        } else {
            diff.join(", ")
        };
        return Err(ResumeError::Parameters {
            out: out.to_path_buf(),
            what,
        });
    }
    let (a, b) = (&old.host, &meta.host);
    if a.cpu != b.cpu || a.cores != b.cores || a.kernel != b.kernel {
        let host = |h: &Host| format!("{} × {}, kernel {}", h.cores, h.cpu, h.kernel);
        return Err(ResumeError::Host {
            out: out.to_path_buf(),
            was: host(a),
            now: host(b),
        });
    }
    // Tuning that moves tails but not the host's identity: resuming is
    // allowed, never silently.
    if let (Some(x), Some(y)) = (&old.system, &meta.system) {
        let changed: Vec<&str> = [
            "smt_active",
            "governors",
            "turbo",
            "sched_rt_runtime_us",
            "transparent_hugepage",
            "isolated_cpus",
            "nohz_full",
            "clocksource",
            "cpuidle_driver",
        ]
        .into_iter()
        // A key the old report lacks was not recorded then (older taillab).
        .filter(|k| x.get(*k).is_some() && x.get(*k) != y.get(*k))
        .collect();
        if !changed.is_empty() {
            eprintln!(
                "warning: resuming {} on a host whose settings changed since it started ({}); the new runs are merged with the old ones",
                out.display(),
                changed.join(", ")
            );
        }
    }
    Ok(())
}

fn diff_keys(a: &Value, b: &Value) -> Vec<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .filter(|k| x.get(*k) != y.get(*k))
                .map(|k| k.to_string())
                .collect()
        }
        _ => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removed_experiment_folder_is_noticed() {
        let root = std::env::temp_dir().join(format!("taillab-vanish-{}", std::process::id()));
        let point = root.join("points/p");
        std::fs::create_dir_all(&point).unwrap();
        assert_eq!(
            experiment_root(&point),
            None,
            "no experiment.json: not an experiment"
        );
        std::fs::write(root.join("experiment.json"), "{}").unwrap();
        let found = experiment_root(&point);
        assert_eq!(found.as_deref(), Some(root.as_path()));
        assert!(still_there(&found).is_ok());
        std::fs::remove_dir_all(&root).unwrap();
        // A run would recreate the point's folder; the experiment's file stays gone.
        std::fs::create_dir_all(&point).unwrap();
        let e = still_there(&found).unwrap_err().to_string();
        assert!(e.contains("vanished") && e.contains("new --out"), "{e}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn ci_target_validation_names_the_flag() {
        let ok = CiTarget {
            target: 0.01,
            min_runs: 3,
            max_runs: 20,
            metrics: CiTarget::default_metrics(),
        };
        ok.validate().unwrap();
        for (bad, needle) in [
            (
                CiTarget {
                    target: 0.0,
                    ..ok.clone()
                },
                "--ci",
            ),
            (
                CiTarget {
                    min_runs: 1,
                    ..ok.clone()
                },
                "--min-runs",
            ),
            (
                CiTarget {
                    max_runs: 2,
                    ..ok.clone()
                },
                "--max-runs",
            ),
            (
                CiTarget {
                    metrics: vec!["latency.p99".into()],
                    ..ok.clone()
                },
                "--ci-metrics",
            ),
            (
                CiTarget {
                    metrics: vec!["sojourn.p98".into()],
                    ..ok.clone()
                },
                "--ci-metrics",
            ),
        ] {
            assert!(bad.validate().unwrap_err().0.contains(needle));
        }
    }

    #[test]
    fn a_one_run_interval_reads_back_as_nan() {
        let m = MetricCi {
            estimate: 5.0,
            ci_low: f64::NAN,
            ci_high: f64::NAN,
            rel_half_width: f64::NAN,
            n: 1,
            bootstrap_low: f64::NAN,
            bootstrap_high: f64::NAN,
            per_run: vec![5.0, f64::NAN],
            met: false,
        };
        let back: MetricCi = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(back.estimate, 5.0);
        assert!(back.rel_half_width.is_nan() && back.ci_low.is_nan() && back.per_run[1].is_nan());
    }

    #[test]
    fn diff_names_changed_keys() {
        let a = serde_json::json!({"qps": [1, 2], "app": "synth"});
        let b = serde_json::json!({"qps": [1, 3], "app": "synth", "threads": 2});
        assert_eq!(
            diff_keys(&a, &b),
            vec!["qps".to_string(), "threads".to_string()]
        );
    }
}
