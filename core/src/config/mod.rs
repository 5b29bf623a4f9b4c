//! One run configuration.
//!
//! A run is fully described by one [`RunConfig`], in sections a reader
//! recognises: `load` (rate, arrival, counts, warmup), `harness` (workers and
//! how they wait and take work), `net` (topology, clients, connections), `record`
//! (what is kept), `monitor` (environment sampling and check limits), `ci`
//! (repeats to a confidence target) and `app` (the app's name and its own
//! settings). Every field is declared once (sections.rs); from that one
//! declaration come its TOML key (`harness.threads`), its flag (`--threads`,
//! on the commands that take it), its `--grid` axis and its line in the
//! resolved `config.toml` that each run folder keeps.
//!
//! Layers apply in order — defaults, a file (`--file`, or the `config.toml`
//! of `--from DIR`), flags — each overriding the one before; one text parser
//! per kind of value (config/value.rs) serves all of them, so a value is
//! written the same way everywhere. Setting one half of an either/or pair
//! (`requests` / `duration`) in a later layer unsets the other half; giving
//! both in one layer is an error.
//!
//! ```
//! use taillab_core::config::RunConfig;
//! let mut cfg = RunConfig::default();
//! // A file layer, then a flag layer: flags win, and `duration` unsets the file's `requests`.
//! let file: toml::Table = "[load]\nqps = 500\nrequests = 1000\n[harness]\nthreads = 2\n".parse().unwrap();
//! cfg.apply_toml(&file, "run.toml", &[]).unwrap();
//! let flags = vec![("threads".to_string(), vec!["4".to_string()]), ("duration".into(), vec!["2s".into()])];
//! cfg.apply(&flags, "flags").unwrap();
//! assert_eq!((cfg.load.qps, cfg.harness.threads), (Some(500.0), 4));
//! assert_eq!((cfg.load.requests, cfg.load.duration.map(|d| d.0)), (None, Some(2_000_000_000)));
//! // The resolved file a run folder keeps reads back to the same configuration.
//! let text = cfg.to_toml();
//! let again: toml::Table = text.parse().unwrap();
//! let mut back = RunConfig::default();
//! back.apply_toml(&again, "config.toml", &[]).unwrap();
//! assert_eq!(back, cfg);
//! ```

pub mod auto;
pub mod experiment;
pub mod flags;
pub mod interfere;
pub mod record;
pub mod sections;
pub mod tuning;
pub mod value;

pub use crate::queue::Dispatch;
pub use interfere::{Class, InterfereSet, InterfereSpec};
pub use record::{CounterMode, RequestFormat};
pub use sections::{
    view, Ci, Fanout, Field, Harness, Interference, Knobs, Load, Monitor, Net, Opts, Receive,
    Record, Spread, Stamping, Topology,
};
pub use tuning::{DmaLatency, NumaNode, ProfileMode, RtRuntime, ThpMode};
pub use value::{ConfigValue, CpuList, Dur, Items, Names, Size, ValueError};

use crate::app::{KeySpec, Params};
use crate::clock::WaitMode;
use crate::harness::{Bound, RunSpec};
use std::path::Path;

/// Errors in a configuration; each names the key and what to write instead.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A key no section has.
    #[error("unknown key `{key}`{hint}")]
    UnknownKey {
        /// The key as written.
        key: String,
        /// `; did you mean …` and where the valid keys are listed.
        hint: String,
    },
    /// A value that does not parse.
    #[error("{key}: {error}")]
    BadValue {
        /// The key.
        key: String,
        /// What was given, what is wrong, the form expected and the fix.
        error: ValueError,
    },
    /// A table, list or flag not shaped as its place needs (`[sweep]` that is
    /// not a table, a `[[case]]` without a name, `--grid` without `=`).
    #[error("{key}: {why}")]
    Malformed {
        /// The key, table or flag.
        key: String,
        /// What is wrong and how to write it.
        why: String,
    },
    /// Several values for a key that takes one (a list of values is a sweep's axis).
    #[error("{key}: takes one value, got {got}")]
    OneValue {
        /// The key.
        key: String,
        /// How many values were given.
        got: usize,
    },
    /// Settings that contradict each other or are out of range.
    #[error("{0}")]
    Invalid(String),
    /// A configuration file that can't be read or isn't TOML.
    #[error("{path}: {why}")]
    File {
        /// The file.
        path: String,
        /// What went wrong.
        why: String,
    },
}

/// The app to run: its name (the one declared field of section `app`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AppName {
    /// App name (see `taillab apps`).
    pub name: Option<String>,
}

/// Everything that defines one run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunConfig {
    /// Section `load`.
    pub load: Load,
    /// Section `harness`.
    pub harness: Harness,
    /// Section `net`.
    pub net: Net,
    /// Section `record`.
    pub record: Record,
    /// Section `monitor`.
    pub monitor: Monitor,
    /// Section `ci`.
    pub ci: Ci,
    /// Section `fanout`.
    pub fanout: Fanout,
    /// Section `interference`.
    pub interference: Interference,
    /// Section `tuning`.
    pub tuning: Knobs,
    /// Section `app`: the app's name.
    pub app: AppName,
    /// Section `app`: the app's own settings (`--set KEY=VALUE`, `app.KEY`).
    pub settings: Params,
}

/// The section keys, in the order `config.toml` lists them.
pub const SECTIONS: [&str; 10] = [
    "load",
    "harness",
    "net",
    "record",
    "monitor",
    "ci",
    "fanout",
    "interference",
    "tuning",
    "app",
];

/// Where a key leads.
#[derive(Debug, Clone)]
pub enum Target {
    /// A declared field.
    Field(Field),
    /// An app setting (`app.KEY` other than `app.name`).
    AppSetting(String),
}

/// Every declared field, section by section.
pub fn fields() -> Vec<Field> {
    let mut v = Load::fields();
    v.extend(Harness::fields());
    v.extend(Net::fields());
    v.extend(Record::fields());
    v.extend(Monitor::fields());
    v.extend(Ci::fields());
    v.extend(Fanout::fields());
    v.extend(Interference::fields());
    v.extend(Knobs::fields());
    v.push(app_field());
    v
}

/// `app.name`, flag `--app`.
pub fn app_field() -> Field {
    Field {
        section: "app",
        name: "name",
        doc: " App to run (see `taillab apps`); the section's other keys are the app's own settings (`--set KEY=VALUE`).\n",
        form: "an app name",
        possible: None,
        switch: false,
        repeated: false,
        list: false,
        comma_axis: true,
        number: false,
        opts: Opts::on(view::ALL).flag("app"),
        check: |_| Ok(()),
        default: || "none".into(),
    }
}

/// Resolves a key as a user may write it: `section.field`, a field name that
/// only one section has, a flag name, or `app.SETTING`.
pub fn resolve(key: &str) -> Result<Target, ConfigError> {
    let key = key.trim();
    let all = fields();
    if let Some((sec, name)) = key.split_once('.') {
        if let Some(f) = all.iter().find(|f| f.section == sec && f.name == name) {
            return Ok(Target::Field(*f));
        }
        if sec == "app" && !name.is_empty() {
            return Ok(Target::AppSetting(name.to_string()));
        }
        return Err(unknown(key, &all));
    }
    let named: Vec<&Field> = all.iter().filter(|f| f.name == key).collect();
    if let [one] = named.as_slice() {
        return Ok(Target::Field(**one));
    }
    if named.len() > 1 {
        let keys: Vec<String> = named.iter().map(|f| f.key()).collect();
        return Err(ConfigError::UnknownKey {
            key: key.into(),
            hint: format!(
                " without a section: it could be {}; write the section too",
                keys.join(" or ")
            ),
        });
    }
    let flag = key.trim_start_matches("--");
    if let Some(f) = all
        .iter()
        .find(|f| f.flag() == flag || f.opts.aliases.contains(&flag))
    {
        return Ok(Target::Field(*f));
    }
    Err(unknown(key, &all))
}

fn unknown(key: &str, all: &[Field]) -> ConfigError {
    let keys: Vec<String> = all.iter().map(|f| f.key()).collect();
    let hint = match value::nearest(key, keys.iter().map(String::as_str)) {
        Some(n) => {
            let sec = n.split('.').next().unwrap_or("");
            format!("; did you mean `{n}` (section [{sec}])? `taillab config keys` lists every key")
        }
        None => "; `taillab config keys` lists every key".into(),
    };
    ConfigError::UnknownKey {
        key: key.into(),
        hint,
    }
}

/// The text items of a TOML value (an array gives one item per element).
pub fn toml_items(v: &toml::Value) -> Result<Vec<String>, ValueError> {
    let one = |v: &toml::Value| -> Result<String, ValueError> {
        let bad = |why: &str| Err(ValueError::new(v.to_string(), why));
        Ok(match v {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Datetime(d) => d.to_string(),
            toml::Value::Array(_) => return bad("a list inside a list is not a value"),
            toml::Value::Table(_) => return bad("expected a value, found a table"),
        })
    };
    match v {
        toml::Value::Array(a) => a.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// The alternatives of a grid axis or a factor written in TOML: one per array
/// element (an element that is itself a list is one alternative, its items joined
/// by commas), or the items of a single value.
pub fn toml_alternatives(v: &toml::Value) -> Result<Vec<String>, ValueError> {
    match v {
        toml::Value::Array(a) => a
            .iter()
            .map(|x| toml_items(x).map(|i| i.join(",")))
            .collect(),
        v => toml_items(v),
    }
}

/// The client's sender threads against its connections (`net.senders`, `net.connections`):
/// each sender owns whole connections, so there must be one for each.
pub fn check_senders(n: &Net) -> Result<(), ConfigError> {
    let bad = |s: String| Err(ConfigError::Invalid(s));
    if n.senders == 0 || n.senders > 256 {
        return bad(format!("net.senders must be in 1..=256, got {}", n.senders));
    }
    if n.connections < n.senders {
        return bad(format!(
            "net.senders {} needs at least as many connections (each sender owns whole connections: connection c belongs to sender c mod senders); give --connections {} or more",
            n.senders, n.senders
        ));
    }
    if n.max_in_flight > 1 << 20 {
        return bad(format!(
            "net.max_in_flight must be 0 (no cap: open loop) or 1..=1048576, got {}",
            n.max_in_flight
        ));
    }
    Ok(())
}

impl RunConfig {
    /// Sets `key` (as [`resolve`] reads it) from text items.
    pub fn set(&mut self, key: &str, items: &[&str]) -> Result<(), ConfigError> {
        match resolve(key)? {
            Target::AppSetting(k) => {
                match items {
                    [v] => self.settings.insert(&k, v),
                    _ => {
                        return Err(ConfigError::OneValue {
                            key: format!("app.{k}"),
                            got: items.len(),
                        })
                    }
                }
                Ok(())
            }
            Target::Field(f) => self.set_field(&f, items),
        }
    }

    /// Sets a declared field; the error names the key and the expected form.
    pub fn set_field(&mut self, f: &Field, items: &[&str]) -> Result<(), ConfigError> {
        if items.len() != 1 && !(f.list || f.repeated) {
            return Err(ConfigError::OneValue {
                key: f.key(),
                got: items.len(),
            });
        }
        let bad = |e: ValueError| ConfigError::BadValue {
            key: f.key(),
            error: e.or_expected(f.form),
        };
        let known = match f.section {
            "load" => self.load.set(f.name, items),
            "harness" => self.harness.set(f.name, items),
            "net" => self.net.set(f.name, items),
            "record" => self.record.set(f.name, items),
            "monitor" => self.monitor.set(f.name, items),
            "ci" => self.ci.set(f.name, items),
            "fanout" => self.fanout.set(f.name, items),
            "interference" => self.interference.set(f.name, items),
            "tuning" => self.tuning.set(f.name, items),
            "app" => match items {
                [v] => {
                    self.app.name = <Option<String>>::parse(v).map_err(bad)?;
                    Ok(true)
                }
                _ => {
                    return Err(ConfigError::OneValue {
                        key: f.key(),
                        got: items.len(),
                    })
                }
            },
            _ => Ok(false),
        }
        .map_err(bad)?;
        debug_assert!(known, "declared field {} has no setter", f.key());
        for other in f.opts.clears {
            let g = fields()
                .into_iter()
                .find(|g| g.section == f.section && g.name == *other);
            if let Some(g) = g {
                let none = ["none"];
                self.set_field(
                    &Field {
                        opts: Opts::on(0),
                        ..g
                    },
                    &none,
                )?;
            }
        }
        Ok(())
    }

    /// The text form of `key`'s value.
    pub fn get(&self, key: &str) -> Result<String, ConfigError> {
        Ok(match resolve(key)? {
            Target::AppSetting(k) => self.settings.get(&k).unwrap_or("").to_string(),
            Target::Field(f) => self.get_field(&f),
        })
    }

    /// The text form of a declared field.
    pub fn get_field(&self, f: &Field) -> String {
        match f.section {
            "load" => self.load.get(f.name),
            "harness" => self.harness.get(f.name),
            "net" => self.net.get(f.name),
            "record" => self.record.get(f.name),
            "monitor" => self.monitor.get(f.name),
            "ci" => self.ci.get(f.name),
            "fanout" => self.fanout.get(f.name),
            "interference" => self.interference.get(f.name),
            "tuning" => self.tuning.get(f.name),
            "app" => Some(self.app.name.show()),
            _ => None,
        }
        .unwrap_or_default()
    }

    fn get_toml(&self, f: &Field) -> Option<toml::Value> {
        match f.section {
            "load" => self.load.get_toml(f.name),
            "harness" => self.harness.get_toml(f.name),
            "net" => self.net.get_toml(f.name),
            "record" => self.record.get_toml(f.name),
            "monitor" => self.monitor.get_toml(f.name),
            "ci" => self.ci.get_toml(f.name),
            "fanout" => self.fanout.get_toml(f.name),
            "interference" => self.interference.get_toml(f.name),
            "tuning" => self.tuning.get_toml(f.name),
            "app" => self.app.name.to_toml(),
            _ => None,
        }
    }

    /// Applies one layer of `(key, items)` pairs: later pairs override
    /// earlier ones, and an either/or pair given whole is refused.
    pub fn apply(
        &mut self,
        pairs: &[(String, Vec<String>)],
        origin: &str,
    ) -> Result<(), ConfigError> {
        let mut seen: Vec<Field> = Vec::new();
        for (k, items) in pairs {
            if let Target::Field(f) = resolve(k)? {
                if let Some(g) = seen
                    .iter()
                    .find(|g| g.section == f.section && f.opts.clears.contains(&g.name))
                {
                    return Err(ConfigError::Invalid(format!(
                        "{origin}: give either {} or {}, not both",
                        g.key(),
                        f.key()
                    )));
                }
                seen.push(f);
            }
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            self.set(k, &refs)?;
        }
        Ok(())
    }

    /// The `(key, items)` pairs of a parsed TOML document's run sections
    /// (`[load]`, `[harness]`, …, `[app]`); `extra` names other top-level
    /// tables the caller handles itself (an experiment's `[sweep]`, `[grid]`).
    pub fn toml_pairs(
        doc: &toml::Table,
        extra: &[&str],
    ) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
        let mut pairs = Vec::new();
        for (sec, v) in doc {
            if extra.contains(&sec.as_str()) {
                continue;
            }
            let Some(t) = v.as_table() else {
                return Err(match resolve(sec) {
                    Ok(Target::Field(f)) => ConfigError::UnknownKey {
                        key: sec.clone(),
                        hint: format!(
                            " at the top level; it belongs in section [{}] as `{}`",
                            f.section, f.name
                        ),
                    },
                    _ => unknown_top(sec, extra),
                });
            };
            if !SECTIONS.contains(&sec.as_str()) {
                return Err(unknown_top(sec, extra));
            }
            for (k, v) in t {
                let key = format!("{sec}.{k}");
                let items = toml_items(v).map_err(|error| ConfigError::BadValue {
                    key: key.clone(),
                    error,
                })?;
                pairs.push((key, items));
            }
        }
        Ok(pairs)
    }

    /// Applies a TOML document's run sections (see [`RunConfig::toml_pairs`]).
    pub fn apply_toml(
        &mut self,
        doc: &toml::Table,
        origin: &str,
        extra: &[&str],
    ) -> Result<(), ConfigError> {
        let pairs = Self::toml_pairs(doc, extra)?;
        self.apply(&pairs, origin)
    }

    /// Reads a resolved `config.toml` (as written by [`RunConfig::to_toml`]).
    pub fn read(path: &Path) -> Result<RunConfig, ConfigError> {
        let doc = read_toml(path)?;
        let mut c = RunConfig::default();
        c.apply_toml(&doc, &path.display().to_string(), &[])?;
        Ok(c)
    }

    /// The whole configuration as commented TOML: every key, defaults included.
    pub fn to_toml(&self) -> String {
        let mut o = String::from(
            "# A taillab run's resolved configuration: every setting, defaults included.\n\
             # Rerun it with `taillab run --from DIR` (flags override); any key is a sweep axis.\n",
        );
        let all = fields();
        for sec in SECTIONS {
            o.push_str(&format!("\n[{sec}]\n"));
            for f in all.iter().filter(|f| f.section == sec) {
                o.push_str(&format!("# {}\n", f.help()));
                match self.get_toml(f) {
                    Some(v) => o.push_str(&format!("{} = {}\n", f.name, toml_value(&v))),
                    None => o.push_str(&format!("# {} = (not set)\n", f.name)),
                }
            }
            if sec == "app" {
                for (k, v) in self.settings.iter() {
                    o.push_str(&format!(
                        "{k} = {}\n",
                        toml_value(&toml::Value::String(v.to_string()))
                    ));
                }
            }
        }
        o
    }

    /// The configuration as JSON (for experiment.json), section by section.
    pub fn to_json(&self) -> serde_json::Value {
        let doc: toml::Table = toml::from_str(&self.to_toml()).expect("config.toml reads back");
        serde_json::to_value(doc).expect("TOML values convert to JSON")
    }

    /// Pairs for the fields that differ from `base` and are flags of command
    /// `v`: how the coordinator hands a configuration to `serve` and `load`.
    pub fn flags_for(&self, v: u8, base: &RunConfig) -> Vec<String> {
        let mut argv = Vec::new();
        for f in fields().iter().filter(|f| f.in_view(v)) {
            let (mine, theirs) = (self.get_field(f), base.get_field(f));
            if mine == theirs {
                continue;
            }
            if f.switch {
                let on = mine == "true";
                if on != f.opts.negate {
                    argv.push(format!("--{}", f.flag()));
                }
                continue;
            }
            match self.get_toml(f) {
                Some(toml::Value::Array(a)) if f.repeated => {
                    for item in a {
                        argv.push(format!("--{}", f.flag()));
                        argv.push(toml_items(&item).unwrap_or_default().concat());
                    }
                }
                _ => {
                    argv.push(format!("--{}", f.flag()));
                    argv.push(mine);
                }
            }
        }
        if v & view::ALL != 0 {
            for (k, val) in self.settings.iter() {
                argv.push("--set".into());
                argv.push(format!("{k}={val}"));
            }
        }
        argv
    }

    /// The app's name, or an error saying how to give it.
    pub fn app_name(&self) -> Result<&str, ConfigError> {
        self.app.name.as_deref().ok_or_else(|| {
            ConfigError::Invalid("say which app: --app NAME (or `name = ...` in section [app]; `taillab apps` lists them)".into())
        })
    }

    /// Checks the app settings against the app's keys; an unknown one is
    /// named with the nearest app key or configuration key.
    pub fn check_app_keys(&self, app: &str, keys: &[KeySpec]) -> Result<(), ConfigError> {
        for (k, _) in self.settings.iter() {
            if keys.iter().any(|s| s.name == k) {
                continue;
            }
            let app_keys: Vec<&str> = keys.iter().map(|s| s.name).collect();
            let cfg_keys: Vec<String> = fields().iter().map(|f| f.key()).collect();
            let near = value::nearest(k, app_keys.iter().copied())
                .map(|n| format!("`{n}` (an app key)"))
                .or_else(|| {
                    value::nearest(k, cfg_keys.iter().map(String::as_str)).map(|n| format!("`{n}`"))
                });
            return Err(ConfigError::UnknownKey {
                key: format!("app.{k}"),
                hint: format!(
                    ": `{app}` has no setting `{k}`{}; its keys are {} (see `taillab apps`)",
                    near.map(|n| format!(" — did you mean {n}?"))
                        .unwrap_or_default(),
                    if app_keys.is_empty() {
                        "(none)".to_string()
                    } else {
                        app_keys.join(", ")
                    }
                ),
            });
        }
        Ok(())
    }

    /// The harness's view of this configuration; fails when a required
    /// setting is missing or a value is out of range.
    pub fn spec(&self) -> Result<RunSpec, ConfigError> {
        let l = &self.load;
        let qps = l.qps.or_else(|| l.arrival.own_rate()).ok_or_else(|| {
            ConfigError::Invalid(
                "say the offered load: --qps RATE (or `qps` in section [load])".into(),
            )
        })?;
        let measure = match (l.requests, l.duration) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(d)) => Bound::Seconds(d.secs()),
            _ => {
                return Err(ConfigError::Invalid(
                    "say how long to measure: --requests N or --duration TIME (load.requests / load.duration)".into(),
                ))
            }
        };
        let warmup = match (l.warmup_requests, l.warmup) {
            (Some(n), _) => Bound::Requests(n),
            (None, Some(d)) => Bound::Seconds(d.secs()),
            (None, None) => Bound::Requests(0),
        };
        let h = &self.harness;
        if h.rt_priority > 99 {
            return Err(ConfigError::Invalid(format!(
                "harness.rt_priority must be 0 (normal scheduling) or 1..=99 (SCHED_FIFO), got {}",
                h.rt_priority
            )));
        }
        if let Some(n) = h.nice {
            if !(-20..=19).contains(&n) {
                return Err(ConfigError::Invalid(format!(
                    "harness.nice must be -20..=19 (a CFS nice value; -20 is the highest), got {n}"
                )));
            }
            if h.rt_priority > 0 {
                return Err(ConfigError::Invalid(format!(
                    "harness.nice {n} and harness.rt_priority {} both set: a worker runs under one scheduling class, CFS at a nice value or SCHED_FIFO at a priority; leave one out",
                    h.rt_priority
                )));
            }
        }
        let spec = RunSpec {
            qps,
            threads: h.threads,
            arrival: l.arrival.clone(),
            dispatch: h.dispatch.unwrap_or_default(),
            seed: l.seed,
            warmup,
            measure,
            wait: rt_wait(h.rt_priority, h.wait),
            spin_margin_ns: h.spin_margin.0,
            shaper: h.shaper,
            discipline: h.discipline,
            keep_records: self.record.save_requests,
            record_format: self.record.format,
            live: self.monitor.metrics_listen.is_some(),
            record_mem_cap: self.record.max_record_mem.0,
            interval_ns: self.record.interval.0,
            drain_timeout_ns: l.drain_timeout.0,
            rt_priority: (h.rt_priority > 0).then_some(h.rt_priority as i32),
            nice: h.nice,
            cpus: h.cpus.0.clone(),
            helpers: h.helpers,
            fanout: {
                let f = &self.fanout;
                let spec = crate::fanout::FanoutSpec {
                    leaves: f.leaves,
                    replicas: f.replicas,
                    wait: f.wait,
                    hedge: f.hedge,
                    tied: f.tied,
                };
                // Any fan-out setting off its default is checked (--fanout 0 included).
                (spec != crate::fanout::FanoutSpec::default_one()).then_some(spec)
            },
            send_lag_p99_max_ns: self.monitor.max_send_lag.0,
            net_delay: self.net.delay.clone(),
            roi: self.record.roi,
            roi_force: self.record.roi_force,
        };
        spec.validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        Ok(spec)
    }

    /// [`RunConfig::spec`] for running: every request's stamps are kept in
    /// memory whenever they fit under `record.max_record_mem` (the sequence
    /// checks and the run's ideal use them), and written to disk only with
    /// `record.save_requests`. The note says when they did not fit.
    pub fn run_spec(&self) -> Result<(RunSpec, Option<String>), ConfigError> {
        let spec = self.spec()?;
        let need = spec.record_capacity() * crate::harness::RECORD_BYTES;
        let fits = need <= spec.record_mem_cap;
        let mut notes = Vec::new();
        if !fits && !self.record.save_requests {
            notes.push(format!(
                "note: {} requests exceed record.max_record_mem {} for per-request records; keeping histograms only (sequence checks and the ideal skipped)",
                spec.record_capacity(),
                self.record.max_record_mem.show()
            ));
        }
        if spec.wait != self.harness.wait {
            notes.push(format!(
                "note: with --rt-priority {} workers block while idle instead of spinning (--wait hybrid spins): a SCHED_FIFO thread that spins keeps its CPU from everything else, and the kernel's RT throttling then stops it for the rest of each second; --wait spin spins anyway",
                self.harness.rt_priority
            ));
        }
        let note = (!notes.is_empty()).then(|| notes.join("\n"));
        Ok((
            RunSpec {
                keep_records: fits || self.record.save_requests,
                ..spec
            },
            note,
        ))
    }

    /// Checks everything that can be checked before a run starts.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.app_name()?;
        self.spec()?;
        let n = &self.net;
        let bad = |s: String| Err(ConfigError::Invalid(s));
        if n.clients == 0 || n.clients > 256 {
            return bad(format!("net.clients must be in 1..=256, got {}", n.clients));
        }
        if n.connections == 0 || n.connections > 4096 {
            return bad(format!(
                "net.connections must be in 1..=4096, got {}",
                n.connections
            ));
        }
        if n.max_connections == 0 || n.max_connections > 1_000_000 {
            return bad(format!(
                "net.max_connections must be in 1..=1000000, got {}",
                n.max_connections
            ));
        }
        if n.target.is_none() && n.clients * n.connections > n.max_connections {
            return bad(format!(
                "net.clients × net.connections = {} exceeds net.max_connections {}; raise --max-connections",
                n.clients * n.connections,
                n.max_connections
            ));
        }
        let launchers = n.client_launcher.0.len();
        if launchers > 1 && launchers != n.clients {
            return bad(format!(
                "give net.client_launcher once (for all clients) or {} times (one per client), not {launchers} times",
                n.clients
            ));
        }
        match n.topology {
            Topology::Integrated => {
                if n.clients != 1 || n.target.is_some() {
                    return bad("net.clients and net.target apply to loopback/networked runs; add --topology loopback".into());
                }
                if n.launcher != sections::Launcher::Templates {
                    return bad("net.launcher slurm starts the processes of a networked run; add --topology networked".into());
                }
            }
            Topology::Loopback | Topology::Networked => {
                if self.record.roi != crate::roi::RoiMode::None {
                    return bad("record.roi marks the measured phase of an integrated run (the one process a simulator runs); use --topology integrated".into());
                }
                if n.delay.is_some() {
                    return bad("net.delay simulates a network in integrated runs; loopback/networked have a real one".into());
                }
                if n.topology == Topology::Loopback
                    && (n.server_launcher != "{cmd}" || launchers > 0)
                {
                    return bad(
                        "launchers are for --topology networked; loopback runs everything here"
                            .into(),
                    );
                }
            }
        }
        check_senders(n)?;
        if n.max_batch == 0 || n.max_frame.0 == 0 || n.max_frame.0 > 1 << 30 {
            return bad("net.max_batch must be ≥ 1 and net.max_frame in 1B..=1GiB".into());
        }
        let m = &self.monitor;
        if !(10_000_000..=60_000_000_000).contains(&m.period.0) {
            return bad(format!(
                "monitor.period must be within 10ms..60s, got {}",
                m.period
            ));
        }
        for (k, v) in [("max_steal", m.max_steal), ("max_foreign", m.max_foreign)] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!(
                    "monitor.{k} must be a percentage of one CPU ≥ 0, got {v}"
                ));
            }
        }
        if !(m.max_recv_lag_ratio.is_finite() && m.max_recv_lag_ratio >= 0.0) {
            return bad(format!(
                "monitor.max_recv_lag_ratio must be a fraction of sojourn p50 ≥ 0, got {}",
                m.max_recv_lag_ratio
            ));
        }
        if let Some(text) = &m.metrics_listen {
            let a = metrics_address(text, m.metrics_public)
                .map_err(|e| ConfigError::Invalid(e.to_string()))?;
            // One client per fan-out leaf, else net.clients.
            let clients = if self.fanout.leaves > 1 {
                self.fanout.leaves
            } else {
                n.clients
            };
            if a.port() != 0 && a.port() as usize + clients - 1 > u16::MAX as usize {
                return bad(format!(
                    "monitor.metrics_listen {a}: client i of {clients} listens on port {}+i, beyond 65535; give a lower port",
                    a.port()
                ));
            }
        }
        if self.ci.redo_disturbed > 20 {
            return bad(format!(
                "ci.redo_disturbed must be in 0..=20 (redos per run), got {}",
                self.ci.redo_disturbed
            ));
        }
        if let Some(t) = self.ci_target()? {
            t.validate().map_err(|e| ConfigError::Invalid(e.0))?;
        }
        Ok(())
    }

    /// The stopping rule, when a CI target is set.
    pub fn ci_target(&self) -> Result<Option<crate::experiment::CiTarget>, ConfigError> {
        let c = &self.ci;
        Ok(c.target.map(|target| crate::experiment::CiTarget {
            target,
            min_runs: c.min_runs,
            max_runs: c.max_runs,
            metrics: if c.metrics.0.is_empty() {
                crate::experiment::CiTarget::default_metrics()
            } else {
                c.metrics.0.clone()
            },
        }))
    }
}

/// A TOML value as it appears after `key = ` (inline).
fn toml_value(v: &toml::Value) -> String {
    v.to_string()
}

/// Reads and parses a TOML file; errors name the file and line.
pub fn read_toml(path: &Path) -> Result<toml::Table, ConfigError> {
    let txt = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        why: format!("{e} (give a readable TOML file)"),
    })?;
    txt.parse::<toml::Table>().map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        why: toml_error_line(&txt, &e),
    })
}

/// A TOML syntax error on one line (the parser's own rendering draws the
/// source over several): where it is and what the parser expected.
fn toml_error_line(txt: &str, e: &toml::de::Error) -> String {
    let msg = e.message().trim().replace('\n', ", ");
    match e.span() {
        Some(span) => {
            // An error at the end of the file is reported on its last line.
            let at = span.start.min(txt.trim_end().len());
            let before = &txt[..at];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("TOML syntax error at line {line}, column {col}: {msg} (fix the file there)")
        }
        None => format!("TOML syntax error: {msg} (fix the file)"),
    }
}

fn unknown_top(sec: &str, extra: &[&str]) -> ConfigError {
    let mut names: Vec<&str> = SECTIONS.to_vec();
    names.extend_from_slice(extra);
    let keys: Vec<String> = fields().iter().map(|f| f.key()).collect();
    let hint = match value::nearest(sec, names.iter().copied()) {
        Some(n) => format!(
            " at the top level; did you mean section [{n}]? sections are {}",
            names.join(", ")
        ),
        None => match value::nearest(sec, keys.iter().map(String::as_str)) {
            Some(k) => format!(" at the top level; did you mean `{k}`?"),
            None => format!(" at the top level; sections are {}", names.join(", ")),
        },
    };
    ConfigError::UnknownKey {
        key: sec.into(),
        hint,
    }
}

/// How workers wait, given their RT priority: a SCHED_FIFO worker that spins is never
/// preempted by the ordinary threads of its CPU, so it takes the whole CPU, and the kernel's
/// RT throttling (`sched_rt_runtime_us`: 950 ms of each second by default) then stops it for
/// the rest of each second — in Tales of the Tail's Fig. 5 case (a CPU hog beside an RT
/// worker at 40 % load) hybrid waits gave a queue p99 of 46 ms. So under `rt_priority`
/// hybrid waits block; an RT thread's timer has no slack and it preempts the hog on waking.
/// An explicit `spin` is kept.
pub fn rt_wait(rt_priority: u32, wait: WaitMode) -> WaitMode {
    if rt_priority > 0 && wait == WaitMode::Hybrid {
        WaitMode::Block
    } else {
        wait
    }
}

/// `monitor.metrics_listen` as an address: `IP:PORT` (`[::1]:9464` for IPv6) or
/// `localhost:PORT`. An address other than loopback is refused unless `public`
/// (`monitor.metrics_public`): a run's numbers, app and settings stay on the host by default.
pub fn metrics_address(text: &str, public: bool) -> Result<std::net::SocketAddr, ValueError> {
    ValueError::wrap(text, || metrics_address_text(text, public))
}

fn metrics_address_text(text: &str, public: bool) -> Result<std::net::SocketAddr, String> {
    let a = match (text.parse(), text.strip_prefix("localhost:")) {
        (Ok(a), _) => a,
        (Err(_), Some(p)) if p.parse::<u16>().is_ok() => {
            std::net::SocketAddr::from(([127, 0, 0, 1], p.parse::<u16>().expect("checked")))
        }
        _ => {
            return Err(format!(
                "monitor.metrics_listen `{text}` is not IP:PORT (e.g. 127.0.0.1:9464)"
            ))
        }
    };
    if !a.ip().is_loopback() && !public {
        return Err(format!(
            "monitor.metrics_listen {a} is not a loopback address: anyone who reaches this host could read the run's metrics; add --metrics-public to serve them there"
        ));
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::experiment::Plan;
    use super::flags::ConfigFlags;
    use super::*;
    use clap::{Args, FromArgMatches};

    /// A value of `f` other than its default, in its text form.
    fn sample(f: &Field) -> String {
        if let Some(p) = f.possible {
            let d = (f.default)();
            return p
                .iter()
                .find(|n| **n != d)
                .expect("two choices")
                .to_string();
        }
        let form = f.form;
        let v = if f.switch {
            if (f.default)() == "true" {
                "false"
            } else {
                "true"
            }
        } else if form.contains("k=K") {
            "k=3"
        } else if form.contains("after=") {
            "after=2ms"
        } else if form.contains("CLASS:N") {
            "cpu:1@cpus=0"
        } else if form.contains("C-state") {
            "10us"
        } else if form.contains("real-time period") {
            "950000"
        } else if form.contains("NUMA") {
            "0"
        } else if form.contains("duration") {
            "3ms"
        } else if form.contains("size") {
            "2MiB"
        } else if form.contains("CPU list") {
            "0"
        } else if form.contains("distribution") {
            "exp:5us"
        } else if form.contains("arrival") {
            "fixed"
        } else if form.contains("comma-separated") {
            "sojourn.p99"
        } else if form.contains("number like 2500") {
            "0.25"
        } else if form.contains("whole number") {
            "7"
        } else {
            "some:text"
        };
        v.to_string()
    }

    fn roundtrip(c: &RunConfig) -> RunConfig {
        let doc: toml::Table = c.to_toml().parse().expect("config.toml is TOML");
        let mut back = RunConfig::default();
        back.apply_toml(&doc, "config.toml", &[])
            .expect("config.toml reads back");
        back
    }

    fn parse_flags<const V: u8>(argv: &[String]) -> Vec<(String, Vec<String>)> {
        let cmd = ConfigFlags::<V>::augment_args(clap::Command::new("t").no_binary_name(true));
        let m = cmd
            .try_get_matches_from(argv)
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        ConfigFlags::<V>::from_arg_matches(&m).unwrap().pairs
    }

    #[test]
    fn every_field_from_toml_flag_grid_and_round_trip() {
        let all = fields();
        assert!(all.len() > 40, "{} fields", all.len());
        for f in &all {
            assert!(!f.help().is_empty(), "{} has no help", f.key());
            let v = sample(f);
            let want = {
                let mut c = RunConfig::default();
                c.set_field(f, &[&v])
                    .unwrap_or_else(|e| panic!("{}: {e}", f.key()));
                let got = c.get_field(f);
                assert_ne!(
                    got,
                    (f.default)(),
                    "{}: sample {v} equals the default",
                    f.key()
                );
                c
            };
            // TOML.
            let lit = if f.switch || v.parse::<f64>().is_ok() {
                v.clone()
            } else {
                format!("{v:?}")
            };
            let doc: toml::Table = format!("[{}]\n{} = {lit}\n", f.section, f.name)
                .parse()
                .unwrap();
            let mut c = RunConfig::default();
            c.apply_toml(&doc, "t", &[])
                .unwrap_or_else(|e| panic!("{}: {e}", f.key()));
            assert_eq!(c, want, "{} from TOML", f.key());
            // Flags, in every command that takes them.
            let argv: Vec<String> = if f.switch {
                vec![format!("--{}", f.flag())]
            } else {
                vec![format!("--{}", f.flag()), v.clone()]
            };
            for (bit, pairs) in [
                (
                    view::RUN,
                    parse_flags::<{ view::RUN }> as fn(&[String]) -> _,
                ),
                (view::SERVE, parse_flags::<{ view::SERVE }>),
                (view::LOAD, parse_flags::<{ view::LOAD }>),
            ] {
                if f.in_view(bit) {
                    let mut c = RunConfig::default();
                    c.apply(&pairs(&argv), "flags").unwrap();
                    assert_eq!(c, want, "{} from flag in view {bit}", f.key());
                }
            }
            // A grid axis (two values: the default and the sample); the
            // load axis makes points rather than groups.
            if f.key() == "load.qps" {
                let plan = Plan::parse(None, &[], &[], &[format!("load.qps=3|{v}")]).unwrap();
                let pts = plan.points(&plan.groups().unwrap()[0], 1.0).unwrap();
                assert_eq!(pts[1].config, want, "load.qps from --grid");
                assert_eq!(roundtrip(&want), want, "load.qps through config.toml");
                continue;
            }
            let grid = format!("{}={}|{}", f.key(), (f.default)(), v);
            let plan =
                Plan::parse(None, &[], &[], &[grid]).unwrap_or_else(|e| panic!("{}: {e}", f.key()));
            let groups = plan.groups().unwrap();
            assert_eq!(groups.len(), 2, "{}", f.key());
            assert_eq!(groups[1].config, want, "{} from --grid", f.key());
            assert_eq!(
                groups[0].config,
                RunConfig::default(),
                "{} default from --grid",
                f.key()
            );
            // config.toml.
            assert_eq!(roundtrip(&want), want, "{} through config.toml", f.key());
        }
    }

    #[test]
    fn flags_are_unique_per_command() {
        for bit in [view::RUN, view::SWEEP, view::SERVE, view::LOAD] {
            let mut seen = std::collections::BTreeSet::new();
            for f in fields().iter().filter(|f| f.in_view(bit)) {
                for n in
                    std::iter::once(f.flag()).chain(f.opts.aliases.iter().map(|a| a.to_string()))
                {
                    assert!(seen.insert(n.clone()), "flag --{n} twice in view {bit}");
                }
            }
        }
    }

    #[test]
    fn bad_values_name_key_and_form() {
        let mut c = RunConfig::default();
        let e = c.set("harness.threads", &["two"]).unwrap_err().to_string();
        assert!(
            e.starts_with("harness.threads:") && e.contains("whole number"),
            "{e}"
        );
        let e = c.set("load.duration", &["soon"]).unwrap_err().to_string();
        assert!(
            e.contains("load.duration") && e.contains("duration like 30s"),
            "{e}"
        );
        let e = c.set("harness.wait", &["nap"]).unwrap_err().to_string();
        assert!(e.contains("spin, block or hybrid"), "{e}");
        // The error keeps its parts: the parser's own form stays, and a setting's
        // form is added, once, only where the parser named none.
        let parts = |key: &str, v: &str| match c.clone().set(key, &[v]) {
            Err(ConfigError::BadValue { key, error }) => (key, error),
            other => panic!("{key}={v}: {other:?}"),
        };
        let (key, e) = parts("harness.threads", "two");
        assert_eq!((key.as_str(), e.given.as_str()), ("harness.threads", "two"));
        assert_eq!(e.expected.as_deref(), Some(<usize as ConfigValue>::FORM));
        let (_, e) = parts("harness.wait", "nap");
        assert_eq!(e.expected.as_deref(), Some("spin, block or hybrid"));
        let (_, e) = parts("harness.dispatch", "nope");
        assert!(e.problem.contains("unknown dispatch `nope`"), "{e:?}");
        assert_eq!(e.expected.as_deref(), Some(<Dispatch as ConfigValue>::FORM));
        let (_, e) = parts("load.duration", "20x");
        assert_eq!(e.to_string().matches("(expected").count(), 1, "{e}");
        let e = c.set("harness.thread", &["2"]).unwrap_err().to_string();
        assert!(
            e.contains("did you mean `harness.threads` (section [harness])"),
            "{e}"
        );
        // Later layers clear the other half of a pair; one layer may not give both.
        c.set("requests", &["10"]).unwrap();
        c.set("duration", &["1s"]).unwrap();
        assert_eq!(
            (c.load.requests, c.load.duration),
            (None, Some(Dur(1_000_000_000)))
        );
        let both = vec![
            ("load.requests".into(), vec!["1".into()]),
            ("load.duration".into(), vec!["1s".into()]),
        ];
        assert!(c
            .apply(&both, "flags")
            .unwrap_err()
            .to_string()
            .contains("not both"));
        // Several values where one is taken: a variant of its own (a caller hints at sweeps).
        for (k, v) in [
            ("harness.threads", &["1", "2"][..]),
            ("app.service", &["a", "b"]),
            ("app.name", &[]),
        ] {
            let e = c.set(k, v).unwrap_err();
            assert!(
                matches!(&e, ConfigError::OneValue { got, .. } if *got == v.len()),
                "{k}: {e}"
            );
        }
        // A list or repeated key takes several.
        c.set("harness.cpus", &["0", "1"]).unwrap();
        c.set("net.client_launcher", &["a {cmd}", "b {cmd}"])
            .unwrap();
    }

    /// Under `rt_priority` a hybrid wait blocks (a spinning SCHED_FIFO worker is throttled),
    /// the run says so, and an explicit spin is kept.
    #[test]
    fn rt_workers_block_instead_of_spinning() {
        let mut c = RunConfig::default();
        c.set("app.name", &["synth"]).unwrap();
        c.set("load.qps", &["1000"]).unwrap();
        c.set("load.requests", &["100"]).unwrap();
        let (spec, note) = c.run_spec().unwrap();
        assert_eq!((spec.wait, note), (WaitMode::Hybrid, None));
        c.set("harness.rt_priority", &["50"]).unwrap();
        let (spec, note) = c.run_spec().unwrap();
        assert_eq!(spec.wait, WaitMode::Block);
        assert!(note.unwrap().contains("RT throttling"));
        c.set("harness.wait", &["spin"]).unwrap();
        let (spec, note) = c.run_spec().unwrap();
        assert_eq!((spec.wait, note), (WaitMode::Spin, None));
    }

    /// `harness.nice` reaches the spec, round-trips through config.toml, and is refused out
    /// of -20..=19 or beside `rt_priority` (one scheduling class per worker).
    #[test]
    fn a_worker_nice_value_is_checked() {
        let mut c = RunConfig::default();
        c.set("app.name", &["synth"]).unwrap();
        c.set("load.qps", &["1000"]).unwrap();
        c.set("load.requests", &["100"]).unwrap();
        c.set("harness.nice", &["-20"]).unwrap();
        assert_eq!(c.spec().unwrap().nice, Some(-20));
        assert_eq!(roundtrip(&c), c);
        c.set("harness.nice", &["20"]).unwrap();
        assert!(c.spec().unwrap_err().to_string().contains("-20..=19"));
        c.set("harness.nice", &["-5"]).unwrap();
        c.set("harness.rt_priority", &["50"]).unwrap();
        let e = c.spec().unwrap_err().to_string();
        assert!(
            e.contains("harness.nice -5") && e.contains("rt_priority 50"),
            "{e}"
        );
    }

    #[test]
    fn app_settings_and_flags_for_children() {
        let mut c = RunConfig::default();
        c.set("app.name", &["kv"]).unwrap();
        c.set("app.workload", &["c"]).unwrap();
        c.set("harness.threads", &["2"]).unwrap();
        c.set("net.client_cpus", &["0"]).unwrap();
        assert_eq!(roundtrip(&c), c);
        let keys = [KeySpec {
            name: "workload",
            default: "a",
            help: "",
        }];
        c.check_app_keys("kv", &keys).unwrap();
        c.set("app.worklaod", &["c"]).unwrap();
        let e = c.check_app_keys("kv", &keys).unwrap_err().to_string();
        assert!(e.contains("did you mean `workload`"), "{e}");
        let mut c = RunConfig::default();
        c.set("harness.threads", &["2"]).unwrap();
        c.set("net.client_cpus", &["0"]).unwrap();
        c.set("harness.wait", &["spin"]).unwrap();
        let serve = c.flags_for(view::SERVE, &RunConfig::default());
        assert_eq!(serve, ["--threads", "2", "--wait", "spin"]);
        let load = c.flags_for(view::LOAD, &RunConfig::default());
        assert_eq!(
            load,
            ["--threads", "2", "--wait", "spin", "--client-cpus", "0"]
        );
    }
}
