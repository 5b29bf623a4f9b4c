//! One run configuration.
//!
//! A run is fully described by one [`RunConfig`], in sections a reader
//! recognises: `load` (rate, arrival, counts, warmup), `harness` (workers and
//! how they wait and take work), `net` (topology, clients, connections), `record`
//! (what is kept), `monitor` (environment sampling and check limits), `ci`
//! (repeats to a confidence target) and `app` (the app's name and its own
//! settings). Every field is declared once (fields.rs); from that one
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
mod checks;
pub mod experiment;
pub mod fields;
pub mod flags;
pub mod interfere;
pub mod record;
#[cfg(test)]
mod tests;
pub mod tuning;
pub mod value;

pub use crate::queue::Dispatch;
pub use fields::{
    view, Ci, Fanout, Field, Harness, Interference, Knobs, Load, Monitor, Net, Opts, Receive,
    Record, Spread, Stamping, Topology,
};
pub use interfere::{Class, InterfereSet, InterfereSpec};
pub use record::{CounterMode, RequestFormat};
pub use tuning::{DmaLatency, NumaNode, ProfileMode, RtRuntime, ThpMode};
pub use value::{ConfigValue, CpuList, Dur, Items, Names, Size, ValueError};

use crate::app::{KeySpec, Params};
use crate::clock::WaitMode;
use crate::spec::{Bound, RunSpec};
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
