//! An experiment: a base configuration and the axes it sweeps.
//!
//! An experiment file is a run configuration (sections `[load]`,
//! `[harness]`, …, `[app]`) plus two tables of its own: `[sweep]` (relative
//! loads, the SLO search, probe length) and `[grid]` (axes: `"KEY" = [values]`).
//! A list where a section expects one value is an axis too (`qps = [500,
//! 1500]` in `[load]`, `workload = ["a", "c"]` in `[app]`); list-valued keys
//! such as `harness.cpus` take their axes from `[grid]`. On the command line
//! every configuration flag of `taillab sweep` may be an axis: `a|b` always,
//! `a,b` for numbers and names, `FROM:TO:STEP` for numbers; `--grid KEY=a|b`
//! works for any key, app settings included. Flags override the file key by
//! key (a fixed value replaces a file's axis and the other way round).
//!
//! Points are every combination of axis values; their ids keep the shape
//! `TOPOLOGY-tTHREADS-qQPS[-KEY-VALUE…]` so results folders read the same.

use super::fields::{view, Field, Opts};
use super::value::{ConfigValue, Dur, Items};
use super::{
    fields, resolve, toml_alternatives, toml_items, ConfigError, RunConfig, Target, ValueError,
};
use crate::search::Slo;
use std::path::Path;

section! {
    /// What a sweep does besides running its points.
    Sweep "sweep" {
        /// Loads as fractions of the saturation rate, measured first (a list or FROM:TO:STEP).
        load: Option<Loads> = None, Opts::on(view::SWEEP);
        /// Find the highest load meeting this SLO, e.g. p99<=2ms or service.p95<=1ms.
        slo: Option<Slo> = None, Opts::on(view::SWEEP);
        /// Length of each saturation or SLO probe run (a saturation probe lasts at least 30 mean service times).
        probe: Dur = Dur(2_000_000_000), Opts::on(view::SWEEP).aliases(&["probe-seconds"]);
        /// Runs per point when no CI target (ci.target) is set, each with a fresh seed (with a target, ci.min_runs and ci.max_runs decide).
        runs: usize = 1, Opts::on(view::SWEEP);
        /// Order of the points' runs: points (each point's runs, then the next point's) or interleaved (every point's first run, then every point's second, ...: a slow drift of the host falls on all points alike; local executor).
        order: Order = Order::Points, Opts::on(view::SWEEP);
        /// Run a grid of more than 10 000 points without asking.
        yes: bool = false, Opts::on(view::SWEEP);
        /// Where the points' runs execute: local (one after another on this host) or slurm (each point's runs as a Slurm job array; docs/cluster.md).
        executor: Executor = Executor::Local, Opts::on(view::SWEEP);
        /// Slurm partition of the runs' jobs (none: the cluster's default).
        slurm_partition: Option<String> = None, Opts::on(view::SWEEP);
        /// Slurm account the runs' jobs are charged to (none: the user's default).
        slurm_account: Option<String> = None, Opts::on(view::SWEEP);
        /// Time limit of each run's Slurm job, rounded up to whole minutes (none: the partition's default).
        slurm_time: Option<Dur> = None, Opts::on(view::SWEEP);
        /// Give each run's Slurm job whole nodes (sbatch --exclusive), so no other job shares a measured node.
        slurm_exclusive: bool = false, Opts::on(view::SWEEP);
        /// Extra sbatch argument, e.g. --slurm-args=--qos=long (repeatable; one argument each; given last, so they win).
        slurm_args: Items = Items::default(), Opts::on(view::SWEEP);
        /// Runs a point adds per Slurm round once its min_runs are done and its CI target is not met (runs past the stopping point are kept as run-K.unused).
        slurm_batch: usize = 1, Opts::on(view::SWEEP);
    }
}

crate::names_enum! {
    /// Where a sweep's runs execute.
    pub enum Executor ("executor") {
        /// On this host, one run after another.
        Local = "local",
        /// As Slurm jobs (`sbatch --array`), writing into the shared results folder.
        Slurm = "slurm",
    }
}

crate::names_enum! {
    /// In which order a sweep makes its points' runs.
    pub enum Order ("order") {
        /// Each point's runs one after another, then the next point's.
        Points = "points",
        /// Round robin: every point's first run, then every point's second, and so on.
        Interleaved = "interleaved",
    }
}

/// A list of positive numbers: `0.2,0.5` or `FROM:TO:STEP`.
#[derive(Debug, Clone, PartialEq)]
pub struct Loads(pub Vec<f64>);

impl ConfigValue for Loads {
    const FORM: &'static str = "a list like 0.2,0.5 or a range FROM:TO:STEP like 0.1:0.9:0.1";
    const LIST: bool = true;
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        parse_values(s).map(Loads)
    }
    fn parse_many(items: &[&str]) -> Result<Self, crate::error::ValueError> {
        Self::parse(&items.join(","))
    }
    fn show(&self) -> String {
        self.0
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
    fn to_toml(&self) -> Option<toml::Value> {
        Some(toml::Value::Array(
            self.0.iter().map(|v| toml::Value::Float(*v)).collect(),
        ))
    }
}

/// Parses `a:b:step` or `x,y,z` into positive values.
pub fn parse_values(s: &str) -> Result<Vec<f64>, ValueError> {
    ValueError::wrap(s, || parse_values_text(s))
}

fn parse_values_text(s: &str) -> Result<Vec<f64>, String> {
    let bad =
        || format!("`{s}` is not a list like 1000,2000 or a range FROM:TO:STEP like 0.1:0.9:0.1");
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
        if n >= 100_000 {
            return Err(format!("`{s}` expands to {} values; at most 100000", n + 1));
        }
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
        return Err(format!("`{s}`: every value must be a positive number"));
    }
    Ok(v)
}

/// One swept key and its values (text forms, checked).
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    /// Canonical key (`harness.threads`, `app.workload`).
    pub key: String,
    /// Values in order.
    pub values: Vec<String>,
}

/// A run configuration with axes.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Every fixed setting.
    pub base: RunConfig,
    /// The axes, in point-expansion order (outermost first; `load.qps` last).
    pub axes: Vec<Axis>,
    /// The sweep's own settings.
    pub sweep: Sweep,
    /// Named cases (`[[case]]`): an axis whose values each set several keys at once.
    pub cases: Vec<Case>,
}

/// One `[[case]]` of an experiment file: a name and the keys it sets, e.g.
/// `name = "hog + RT"`, `"interference.hogs" = "cpu:1@cpus=0"`,
/// `"harness.rt_priority" = 50`. The cases are one axis (key `case`): the
/// comparisons of Tales of the Tail Fig. 5 are cases, not a grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The case's name (its value on the `case` axis).
    pub name: String,
    /// What it sets, `(key, items)`.
    pub pairs: Vec<(String, Vec<String>)>,
}

/// One point of a plan.
#[derive(Debug, Clone)]
pub struct Point {
    /// Folder name under `points/`.
    pub id: String,
    /// Its resolved configuration.
    pub config: RunConfig,
    /// Its value on each axis, `(key, value)`.
    pub coords: Vec<(String, String)>,
}

/// Points that share everything but the load (one saturation search each).
#[derive(Debug, Clone)]
pub struct Group {
    /// Configuration without the load axis applied.
    pub config: RunConfig,
    /// Coordinates on the other axes.
    pub coords: Vec<(String, String)>,
}

fn canonical(key: &str) -> Result<(String, Option<Field>), ConfigError> {
    Ok(match resolve(key)? {
        Target::Field(f) => (f.key(), Some(f)),
        Target::AppSetting(k) => (format!("app.{k}"), None),
    })
}

/// Splits a sweep flag's value into axis values, if it names several.
fn axis_values(f: Option<&Field>, items: &[String]) -> Option<Vec<String>> {
    if items.len() > 1 && !f.is_some_and(|f| f.repeated || f.list) {
        return Some(items.to_vec());
    }
    let [one] = items else { return None };
    if one.contains('|') {
        return Some(one.split('|').map(|v| v.trim().to_string()).collect());
    }
    let f = f?;
    if f.list {
        return None;
    }
    if f.comma_axis && f.number && one.contains(':') {
        return parse_values(one)
            .ok()
            .map(|v| v.iter().map(|x| x.to_string()).collect());
    }
    if f.comma_axis && one.contains(',') {
        return Some(one.split(',').map(|v| v.trim().to_string()).collect());
    }
    None
}

/// The fixed values and axes a plan's layers set, in order (the file, then the flags).
#[derive(Default)]
struct Layers {
    fixed: Vec<(String, Vec<String>)>,
    axes: Vec<Axis>,
    /// Keys set by the layer being read (the file, then the flags): an
    /// either/or pair given whole within one layer is refused.
    layer: Vec<String>,
}

impl Layers {
    /// Sets `key` to `items`, as one value or (`axis`) as an axis of values.
    fn put(&mut self, key: &str, items: Vec<String>, axis: bool) -> Result<(), ConfigError> {
        let (k, f) = canonical(key)?;
        if let Some(f) = &f {
            if let Some(other) = f
                .opts
                .clears
                .iter()
                .map(|c| format!("{}.{c}", f.section))
                .find(|c| self.layer.contains(c))
            {
                return Err(ConfigError::Invalid(format!(
                    "give either {other} or {k}, not both"
                )));
            }
            self.layer.push(k.clone());
        }
        // A later layer's key replaces the earlier value or axis, and the
        // other half of an either/or pair (`requests` after `duration`).
        let cleared: Vec<String> = f
            .iter()
            .flat_map(|f| {
                f.opts
                    .clears
                    .iter()
                    .map(move |c| format!("{}.{c}", f.section))
            })
            .collect();
        let gone = |x: &str| x == k || cleared.iter().any(|c| c == x);
        self.fixed
            .retain(|(fk, _)| canonical(fk).map(|c| !gone(&c.0)).unwrap_or(true));
        self.axes.retain(|a| !gone(&a.key));
        if axis {
            if items.is_empty() {
                return Err(ConfigError::Malformed {
                    key: k,
                    why: "an axis needs at least one value".into(),
                });
            }
            for v in &items {
                if let Some(f) = &f {
                    (f.check)(v).map_err(|e| ConfigError::BadValue {
                        key: k.clone(),
                        error: e.or_expected(f.form),
                    })?;
                }
            }
            self.axes.push(Axis {
                key: k,
                values: items,
            });
        } else {
            self.fixed.push((k, items));
        }
        Ok(())
    }

    /// Reads an experiment file: its keys, then its `sweep`, `case` and `grid` tables.
    fn read_file(
        &mut self,
        path: &Path,
        sweep: &mut Sweep,
        cases: &mut Vec<Case>,
    ) -> Result<(), ConfigError> {
        let doc = super::read_toml(path)?;
        let origin = path.display().to_string();
        for (k, items) in RunConfig::toml_pairs(&doc, &["sweep", "grid", "case", "attribute"])? {
            let (_, f) = canonical(&k)?;
            let is_list = f.is_some_and(|f| f.list || f.repeated);
            let axis = !is_list && (items.len() > 1 || doc_is_array(&doc, &k));
            self.put(&k, items, axis)?;
        }
        if let Some(t) = doc.get("sweep") {
            let t = t.as_table().ok_or_else(|| ConfigError::Malformed {
                key: "sweep".into(),
                why: "must be a table".into(),
            })?;
            for (k, v) in t {
                let items = toml_items(v).map_err(|error| ConfigError::BadValue {
                    key: format!("sweep.{k}"),
                    error,
                })?;
                set_sweep(sweep, k, &items, &origin)?;
            }
        }
        if let Some(v) = doc.get("case") {
            *cases = read_cases(v)?;
        }
        if let Some(t) = doc.get("grid") {
            let t = t.as_table().ok_or_else(|| ConfigError::Malformed {
                key: "grid".into(),
                why: "must be a table of KEY = [values]".into(),
            })?;
            for (k, v) in t {
                let items = toml_alternatives(v).map_err(|error| ConfigError::BadValue {
                    key: format!("grid.{k}"),
                    error,
                })?;
                self.put(k, items, true)?;
            }
        }
        Ok(())
    }
}

impl Plan {
    /// Builds and checks a plan: `file` (an experiment file), then `flags`
    /// (the sweep's configuration flags, values possibly axes), then `grid`
    /// (`KEY=a|b`). Every point must be a valid run.
    pub fn build(
        file: Option<&Path>,
        flags: &[(String, Vec<String>)],
        sweep_flags: &[(String, Vec<String>)],
        grid: &[String],
    ) -> Result<Plan, ConfigError> {
        let plan = Self::parse(file, flags, sweep_flags, grid)?;
        plan.check()?;
        Ok(plan)
    }

    /// [`Plan::build`] without checking the points: reads the file's keys,
    /// sweep, cases and grid, then the flags, the sweep flags and `--grid`,
    /// each layer replacing what the earlier set; then the base run and the
    /// axes in their order.
    pub fn parse(
        file: Option<&Path>,
        flags: &[(String, Vec<String>)],
        sweep_flags: &[(String, Vec<String>)],
        grid: &[String],
    ) -> Result<Plan, ConfigError> {
        let mut layers = Layers::default();
        let mut sweep = Sweep::default();
        let mut cases: Vec<Case> = Vec::new();
        if let Some(path) = file {
            layers.read_file(path, &mut sweep, &mut cases)?;
        }
        layers.layer.clear();
        for (k, items) in flags {
            let (_, f) = canonical(k)?;
            match axis_values(f.as_ref(), items) {
                Some(vals) => layers.put(k, vals, true)?,
                None => layers.put(k, items.clone(), false)?,
            }
        }
        for (k, items) in sweep_flags {
            let name = k.strip_prefix("sweep.").unwrap_or(k);
            set_sweep(&mut sweep, name, items, "flags")?;
        }
        for g in grid {
            let (k, vs) = g.split_once('=').ok_or_else(|| ConfigError::Malformed {
                key: g.clone(),
                why: "--grid takes KEY=V1|V2|…, e.g. --grid harness.rt_priority=0|10".into(),
            })?;
            layers.put(
                k,
                vs.split('|').map(|v| v.trim().to_string()).collect(),
                true,
            )?;
        }
        let mut base = RunConfig::default();
        base.apply(
            &layers.fixed,
            file.map(|p| p.display().to_string())
                .as_deref()
                .unwrap_or("flags"),
        )?;
        let mut axes = layers.axes;
        axes.sort_by_key(|a| match a.key.as_str() {
            "net.topology" => 0,
            "harness.threads" => 1,
            "load.qps" => 3,
            _ => 2,
        });
        if !cases.is_empty() {
            axes.insert(
                0,
                Axis {
                    key: "case".into(),
                    values: cases.iter().map(|c| c.name.clone()).collect(),
                },
            );
        }
        Ok(Plan {
            base,
            axes,
            sweep,
            cases,
        })
    }

    fn check(&self) -> Result<(), ConfigError> {
        let has_qps_axis = self.axes.iter().any(|a| a.key == "load.qps");
        if let Some(l) = &self.sweep.load {
            if has_qps_axis || self.base.load.qps.is_some() {
                return Err(ConfigError::Invalid(
                    "give loads either as rates (load.qps / --qps) or as fractions of saturation (sweep.load / --load), not both".into(),
                ));
            }
            if l.0.iter().any(|x| *x > 1.5) {
                return Err(ConfigError::Invalid(format!(
                    "sweep.load takes fractions of the saturation rate (e.g. 0.1:0.9:0.1), got {}",
                    l.show()
                )));
            }
        } else if !has_qps_axis && self.base.load.qps.is_none() && self.sweep.slo.is_none() {
            return Err(ConfigError::Invalid(
                "say which loads: --qps LIST|RANGE (load.qps), or --load FRACTIONS to measure the saturation rate first (sweep.load)".into(),
            ));
        }
        if self.sweep.runs == 0 {
            return Err(ConfigError::Invalid(
                "sweep.runs (--runs) is the number of runs per point: give 1 or more".into(),
            ));
        }
        let ci_set =
            self.base.ci.target.is_some() || self.axes.iter().any(|a| a.key == "ci.target");
        if self.sweep.runs > 1 && ci_set {
            return Err(ConfigError::Invalid(format!(
                "sweep.runs = {} and a CI target (ci.target) both say how many runs a point gets: \
                 drop --runs, or drop the target and keep a fixed count",
                self.sweep.runs
            )));
        }
        let n = self.count();
        if n > 10_000 && !self.sweep.yes {
            return Err(ConfigError::Invalid(format!(
                "this grid has {n} points (more than 10 000); check the axes or add --yes"
            )));
        }
        // Every combination must be a valid run (names the first bad one).
        for g in self.groups()? {
            for p in self.points(&g, 1.0)? {
                p.config
                    .validate()
                    .map_err(|e| ConfigError::Invalid(format!("point {}: {e}", p.id)))?;
            }
        }
        Ok(())
    }

    /// Number of points.
    pub fn count(&self) -> usize {
        let loads = self.sweep.load.as_ref().map_or(1, |l| l.0.len());
        self.axes.iter().map(|a| a.values.len()).product::<usize>() * loads
    }

    /// Whether loads are fractions of a measured saturation rate.
    pub fn of_saturation(&self) -> bool {
        self.sweep.load.is_some()
    }

    /// Every combination of the axes other than the load.
    pub fn groups(&self) -> Result<Vec<Group>, ConfigError> {
        let mut groups = vec![Group {
            config: self.base.clone(),
            coords: vec![],
        }];
        for a in self.axes.iter().filter(|a| a.key != "load.qps") {
            let mut next = Vec::new();
            for g in &groups {
                for v in &a.values {
                    let mut c = g.config.clone();
                    if a.key == "case" {
                        let case = self
                            .cases
                            .iter()
                            .find(|x| &x.name == v)
                            .expect("case axis values are case names");
                        c.apply(&case.pairs, &format!("case `{v}`"))?;
                    } else {
                        c.set(&a.key, &[v])?;
                    }
                    let mut coords = g.coords.clone();
                    coords.push((a.key.clone(), v.clone()));
                    next.push(Group { config: c, coords });
                }
            }
            groups = next;
        }
        Ok(groups)
    }

    /// The group's points: its loads are the `load.qps` axis (or the base
    /// rate), or `sweep.load` fractions × `saturation`.
    pub fn points(&self, g: &Group, saturation: f64) -> Result<Vec<Point>, ConfigError> {
        let rates: Vec<f64> = match (
            &self.sweep.load,
            self.axes.iter().find(|a| a.key == "load.qps"),
        ) {
            (Some(l), _) => {
                l.0.iter()
                    .map(|f| (f * saturation * 100.0).round() / 100.0)
                    .collect()
            }
            (None, Some(a)) => a
                .values
                .iter()
                .map(|v| f64::parse(v).unwrap_or(0.0))
                .collect(),
            (None, None) => self.base.load.qps.into_iter().collect(),
        };
        rates
            .into_iter()
            .map(|q| {
                let mut c = g.config.clone();
                c.load.qps = Some(q);
                Ok(Point {
                    id: point_id(&c, &g.coords),
                    config: c,
                    coords: g.coords.clone(),
                })
            })
            .collect()
    }
}

/// The `[[case]]` tables of an experiment file.
fn read_cases(v: &toml::Value) -> Result<Vec<Case>, ConfigError> {
    let bad = |why: String| ConfigError::Malformed {
        key: "case".into(),
        why,
    };
    let list = v
        .as_array()
        .ok_or_else(|| bad("write cases as [[case]] tables, each with a name".into()))?;
    let mut cases: Vec<Case> = Vec::new();
    for t in list {
        let t = t
            .as_table()
            .ok_or_else(|| bad("each [[case]] is a table".into()))?;
        let name = t
            .get("name")
            .and_then(|n| n.as_str())
            .ok_or_else(|| bad("every [[case]] needs `name = \"...\"`".into()))?
            .to_string();
        if cases.iter().any(|c| c.name == name) {
            return Err(bad(format!("two cases are named `{name}`")));
        }
        let mut pairs = Vec::new();
        for (k, v) in t.iter().filter(|(k, _)| *k != "name") {
            let items = toml_items(v).map_err(|error| ConfigError::BadValue {
                key: format!("case `{name}`: {k}"),
                error,
            })?;
            let (key, f) = canonical(k)?;
            if let Some(f) = f {
                for i in &items {
                    (f.check)(i).map_err(|e| ConfigError::BadValue {
                        key: format!("case `{name}`: {key}"),
                        error: e.or_expected(f.form),
                    })?;
                }
            }
            pairs.push((key, items));
        }
        cases.push(Case { name, pairs });
    }
    Ok(cases)
}

fn doc_is_array(doc: &toml::Table, key: &str) -> bool {
    let (sec, k) = key.split_once('.').unwrap_or(("", key));
    doc.get(sec)
        .and_then(|t| t.get(k))
        .is_some_and(|v| v.is_array())
}

fn set_sweep(s: &mut Sweep, k: &str, items: &[String], origin: &str) -> Result<(), ConfigError> {
    let refs: Vec<&str> = items.iter().map(String::as_str).collect();
    let name = if k == "probe_seconds" || k == "probe-seconds" {
        "probe"
    } else {
        k
    };
    match s.set(name, &refs) {
        Ok(true) => Ok(()),
        Ok(false) => {
            let keys: Vec<String> = Sweep::fields().iter().map(|f| f.name.to_string()).collect();
            let near = super::value::nearest(k, keys.iter().map(String::as_str));
            Err(ConfigError::UnknownKey {
                key: format!("sweep.{k}"),
                hint: format!(
                    " in {origin}; [sweep] takes {}{}",
                    keys.join(", "),
                    near.map(|n| format!(" (did you mean `{n}`?)"))
                        .unwrap_or_default()
                ),
            })
        }
        Err(error) => Err(ConfigError::BadValue {
            key: format!("sweep.{k}"),
            error,
        }),
    }
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

/// `TOPOLOGY-tTHREADS-qQPS` and `-NAME-VALUE` for every other axis.
pub fn point_id(c: &RunConfig, coords: &[(String, String)]) -> String {
    let mut id = format!(
        "{}-t{}-q{}",
        c.net.topology,
        c.harness.threads,
        sanitize(&format!("{:.0}", c.load.qps.unwrap_or(0.0)))
    );
    for (k, v) in coords {
        if k == "net.topology" || k == "harness.threads" || k == "load.qps" {
            continue;
        }
        let name = k.rsplit('.').next().unwrap_or(k);
        id.push_str(&format!("-{}-{}", sanitize(name), sanitize(v)));
    }
    id
}

/// Every declared key of `[sweep]` (for `taillab config keys`).
pub fn sweep_fields() -> Vec<Field> {
    Sweep::fields()
}

/// The keys any experiment may sweep (all configuration keys).
pub fn sweepable() -> Vec<String> {
    fields().iter().map(|f| f.key()).collect()
}

#[cfg(test)]
mod tests;
