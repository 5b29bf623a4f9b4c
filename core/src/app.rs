//! What an application is to the harness.
//!
//! An app knows nothing about transports, clocks or statistics. It provides
//! three things:
//! - an [`App`] (the factory the CLI registers): its name, its `--set` keys,
//!   how to prepare its data, and how to build a server and a client;
//! - a [`Server`], shared by all worker threads, which hands each worker
//!   thread its own [`Worker`] (per-thread engine state such as a decoder or
//!   a JVM attachment lives there, so `handle` never needs a lock of ours);
//! - a [`Client`] that draws the next request from the app's input set. Its
//!   sequence is fully determined by the seed, so the same seed gives the
//!   same requests in every configuration.
//!
//! Requests and responses are opaque bytes: the same payload travels through
//! the integrated configuration (a `Vec<u8>` handed over in memory) and
//! through TCP (a frame), so an app is written once.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

/// Errors an app reports. Each message says what the user should change.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// A `--set` key the app does not declare.
    #[error("unknown key `{key}` for app `{app}`; valid keys: {valid} (see `taillab apps`)")]
    UnknownKey {
        /// The app the key was given to.
        app: String,
        /// The key as given.
        key: String,
        /// The app's keys, comma-separated (`(none)` when it takes none).
        valid: String,
    },
    /// A `--set` value that does not parse, or a `--set` item without `=`.
    #[error("bad value `{value}` for `{key}`: {expected}")]
    BadParam {
        /// The key (the whole item when it had no `=`).
        key: String,
        /// The value as given.
        value: String,
        /// What the key accepts, e.g. `a count from 1 to 64`.
        expected: String,
    },
    /// The app's prepared data is absent or incomplete.
    #[error("data for `{app}` is not ready: {why} (run `taillab data prepare {app}`)")]
    DataMissing {
        /// The app whose data is missing.
        app: String,
        /// What is missing or stale (a path, a format version).
        why: String,
    },
    /// `taillab data prepare` failed (fetching, building or converting the data).
    #[error("preparing data for `{app}` failed: {why}")]
    Prepare {
        /// The app whose data was being prepared.
        app: String,
        /// The step that failed and its error.
        why: String,
    },
    /// One request could not be served (malformed payload, refused by the
    /// engine): counted in the run's `errors`; the run goes on.
    #[error("request could not be handled: {0}")]
    Request(String),
    /// The app's engine (a library, a JVM, a model) failed outside a single
    /// request, e.g. while starting.
    #[error("{engine} failed: {why}")]
    Engine {
        /// What failed: the engine, or the step (e.g. `placing a worker`).
        engine: String,
        /// The engine's own error text.
        why: String,
    },
    /// A file the app reads or writes could not be.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The file concerned.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl AppError {
    /// Shorthand for an I/O error that names the file it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AppError::Io {
            path: path.into(),
            source,
        }
    }
}

/// One `--set` key an app accepts, shown by `taillab apps`.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// The key as written in `--set key=value`.
    pub name: &'static str,
    /// The value used when the key is not given, in the same text form.
    pub default: &'static str,
    /// One line of help for `taillab apps`.
    pub help: &'static str,
}

/// The `--set key=value` pairs given for an app, checked against its keys.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Params(BTreeMap<String, String>);

impl Params {
    /// No keys: every setting at its default.
    pub fn new() -> Self {
        Params(BTreeMap::new())
    }

    /// Parses `key=value` strings (as given to `--set`).
    pub fn parse<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Result<Self, AppError> {
        let mut p = Params::new();
        for s in pairs {
            let Some((k, v)) = s.split_once('=') else {
                return Err(AppError::BadParam {
                    key: s.to_string(),
                    value: String::new(),
                    expected: "--set takes key=value, e.g. --set service=exp:200us".into(),
                });
            };
            p.insert(k.trim(), v.trim());
        }
        Ok(p)
    }

    /// Sets `key` to `value`, replacing an earlier value.
    pub fn insert(&mut self, key: &str, value: &str) {
        self.0.insert(key.to_string(), value.to_string());
    }

    /// The text given for `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|s| s.as_str())
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Fails on a key the app does not declare, naming the valid ones.
    pub fn check_keys(&self, app: &str, keys: &[KeySpec]) -> Result<(), AppError> {
        for k in self.0.keys() {
            if !keys.iter().any(|s| s.name == k) {
                let valid: Vec<&str> = keys.iter().map(|s| s.name).collect();
                return Err(AppError::UnknownKey {
                    app: app.to_string(),
                    key: k.clone(),
                    valid: if valid.is_empty() {
                        "(none)".into()
                    } else {
                        valid.join(", ")
                    },
                });
            }
        }
        Ok(())
    }

    /// The value of `key` parsed as `T`, or the key's declared default.
    /// `expected` describes the allowed values for the error message.
    pub fn get_parsed<T: FromStr>(
        &self,
        key: &str,
        default: T,
        expected: &str,
    ) -> Result<T, AppError> {
        match self.get(key) {
            None => Ok(default),
            Some(v) => v.parse::<T>().map_err(|_| AppError::BadParam {
                key: key.to_string(),
                value: v.to_string(),
                expected: expected.to_string(),
            }),
        }
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(f, "{}", v.join(","))
    }
}

/// Where an app keeps its prepared data (outside git).
#[derive(Debug, Clone)]
pub struct DataCtx {
    /// Root of all apps' data: `$TAILLAB_DATA`, else `~/.local/share/taillab`.
    pub root: PathBuf,
}

impl DataCtx {
    /// The data root from the environment: `$TAILLAB_DATA`, else `~/.local/share/taillab`,
    /// else `./taillab-data` when there is no `$HOME`.
    pub fn from_env() -> Self {
        let root = std::env::var_os("TAILLAB_DATA")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share/taillab"))
            })
            .unwrap_or_else(|| PathBuf::from("taillab-data"));
        DataCtx { root }
    }

    /// The finished data folder of `app` (may not exist yet).
    pub fn app_dir(&self, app: &str) -> PathBuf {
        self.root.join(app)
    }

    /// True when `app`'s data was completely prepared with format `version`.
    /// A folder without the stamp (a half-written one) is never taken as ready.
    pub fn is_prepared(&self, app: &str, version: &str) -> bool {
        std::fs::read_to_string(self.app_dir(app).join(".prepared"))
            .map(|s| s.trim() == version)
            .unwrap_or(false)
    }

    /// Builds `app`'s data with `build` into a scratch folder and moves it into
    /// place only when `build` succeeded, stamped with `version`. Idempotent:
    /// returns at once when the data is already prepared. Processes preparing
    /// the same app at once (two tests, two shells) take turns on a lock file
    /// next to the data: the first builds, the others wait and then find it
    /// prepared, so nobody replaces a folder another process is reading.
    pub fn prepare_atomically(
        &self,
        app: &str,
        version: &str,
        build: impl FnOnce(&Path) -> Result<(), AppError>,
    ) -> Result<(), AppError> {
        if self.is_prepared(app, version) {
            return Ok(());
        }
        std::fs::create_dir_all(&self.root).map_err(|e| AppError::io(&self.root, e))?;
        let lock_path = self.root.join(format!(".{}.lock", app.replace('/', "_")));
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| AppError::io(&lock_path, e))?;
        // Released when `lock` is dropped, also on an early return.
        lock.lock().map_err(|e| AppError::io(&lock_path, e))?;
        if self.is_prepared(app, version) {
            return Ok(());
        }
        eprintln!("building {}", self.app_dir(app).display());
        let tmp = self
            .root
            .join(format!(".{app}.partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).map_err(|e| AppError::io(&tmp, e))?;
        if let Err(e) = build(&tmp) {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
        let stamp = tmp.join(".prepared");
        std::fs::write(&stamp, version).map_err(|e| AppError::io(&stamp, e))?;
        let dst = self.app_dir(app);
        let _ = std::fs::remove_dir_all(&dst);
        if let Some(parent) = dst.parent() {
            std::fs::create_dir_all(parent).map_err(|e| AppError::io(parent, e))?;
        }
        std::fs::rename(&tmp, &dst).map_err(|e| AppError::io(&dst, e))?;
        Ok(())
    }
}

/// [`App::point_length`]: measured requests per point and the warmup before them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PointLength {
    /// Measured requests per point.
    pub requests: u64,
    /// Measured seconds per point instead of `requests` (an app of µs requests, whose
    /// point of 20 000 requests lasts a few seconds: the host's slow stretches of ~100 ms
    /// then fall on a point a few times or not at all, and a point must span many).
    pub secs: Option<f64>,
    /// Warmup in requests.
    pub warmup_requests: Option<u64>,
    /// Warmup in seconds (for an app whose warmup is a matter of time, e.g. a JIT).
    pub warmup_secs: Option<f64>,
    /// Rounds worth running (each is every point again, app and synthetic).
    pub rounds: Option<usize>,
}

impl Default for PointLength {
    fn default() -> Self {
        PointLength {
            requests: 20_000,
            secs: None,
            warmup_requests: None,
            warmup_secs: None,
            rounds: None,
        }
    }
}

/// The app factory: one per application, registered by the CLI.
pub trait App: Send + Sync {
    /// Name used on the command line (`--app NAME`).
    fn name(&self) -> &'static str;
    /// One line for `taillab apps`.
    fn about(&self) -> &'static str;
    /// The `--set` keys this app accepts.
    fn keys(&self) -> &'static [KeySpec];
    /// Builds the app's input data if it is not there yet (idempotent).
    fn prepare(&self, _data: &DataCtx, _params: &Params) -> Result<(), AppError> {
        Ok(())
    }
    /// Builds the server side: loads data, starts engines. `threads` is the
    /// number of workers that will call [`Server::worker`].
    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        threads: usize,
    ) -> Result<Arc<dyn Server>, AppError>;
    /// How long a point must run for its tail to repeat, when the user gives no length
    /// (`taillab tailwag`): by default 20 000 requests and no warmup.
    fn point_length(&self) -> PointLength {
        PointLength::default()
    }
    /// [`App::server`] for one run: `seed` is the run's own stream, for a server that
    /// draws randomness of its own (synth's pauses, slow requests and noise), so that
    /// runs with fresh seeds draw them afresh. By default the server ignores it.
    fn server_for_run(
        &self,
        data: &DataCtx,
        params: &Params,
        threads: usize,
        _seed: u64,
    ) -> Result<Arc<dyn Server>, AppError> {
        self.server(data, params, threads)
    }
    /// Mean service time (ns) these params imply, when the app can tell
    /// without running (synth can); used to warn before a run that will
    /// saturate.
    fn expected_service_ns(&self, _params: &Params) -> Option<f64> {
        None
    }
    /// Checks the settings' values without building anything, where the app can (synth
    /// can), so that a design of many configurations refuses a bad one before any runs
    /// (`taillab attribute`). By default every value is accepted here and checked when
    /// the server starts.
    fn check_params(&self, _params: &Params) -> Result<(), AppError> {
        Ok(())
    }
    /// Builds a client whose request sequence is determined by `seed`.
    fn client(
        &self,
        data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError>;
}

/// The server side of an app, shared by all worker threads.
pub trait Server: Send + Sync {
    /// Called once on each worker thread, on that thread, before the run
    /// starts; the returned worker handles that thread's requests.
    fn worker(&self, index: usize) -> Result<Box<dyn Worker>, AppError>;
    /// Called once, from a worker thread, when the measured phase begins;
    /// `at_ns` is its start on the harness clock ([`crate::clock::now_ns`]).
    /// It runs just before the first measured request, so it must be quick
    /// (microseconds): requests due meanwhile wait for it, and a long one is a
    /// dispatch gap in `stalls`. Do slow first-time setup when the server is built.
    fn begin_measurement(&self, _at_ns: u64) {}
    /// App statistics for `summary.json` (`app_stats`), read after the run.
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

/// One worker thread's handle on the app.
pub trait Worker {
    /// Handles one request, writing the response into `resp` (cleared by the caller).
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError>;
}

/// The client side of an app: draws requests from its input set.
pub trait Client: Send {
    /// Writes the next request into `out` (cleared by the caller).
    fn next_request(&mut self, out: &mut Vec<u8>);
}

/// Service times of `n` back-to-back `handle` calls on one worker, on
/// requests drawn from `client`, after `warmup` untimed calls; `each` sees
/// every timed response. Sorted, in ns. For the apps' `*_service_time`
/// examples, which measure an engine before the harness does.
pub fn time_handles(
    worker: &mut dyn Worker,
    client: &mut dyn Client,
    warmup: usize,
    n: usize,
    mut each: impl FnMut(&[u8]),
) -> Result<Vec<u64>, AppError> {
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    let mut ns = Vec::with_capacity(n);
    for i in 0..warmup + n {
        req.clear();
        resp.clear();
        client.next_request(&mut req);
        let t = std::time::Instant::now();
        worker.handle(&req, &mut resp)?;
        let dt = t.elapsed().as_nanos() as u64;
        if i >= warmup {
            ns.push(dt);
            each(&resp);
        }
    }
    ns.sort_unstable();
    Ok(ns)
}

/// `mean … p50 … p95 … p99 … max …` of sorted ns, in µs (one decimal).
pub fn service_line(sorted_ns: &[u64]) -> String {
    if sorted_ns.is_empty() {
        return "no samples".into();
    }
    let q = |p: f64| sorted_ns[((sorted_ns.len() - 1) as f64 * p).round() as usize] as f64 / 1e3;
    let mean = sorted_ns.iter().sum::<u64>() as f64 / sorted_ns.len() as f64 / 1e3;
    format!(
        "mean {mean:.1} p50 {:.1} p95 {:.1} p99 {:.1} max {:.1} (µs)",
        q(0.5),
        q(0.95),
        q(0.99),
        q(1.0)
    )
}

/// An app's name, one-line description and `--set` keys ([`App::name`], [`App::about`],
/// [`App::keys`]), declared once inside its `impl App` block:
/// `taillab_core::app_info!("kv", "in-memory ordered key-value store …", KEYS);`.
#[macro_export]
macro_rules! app_info {
    ($name:expr, $about:expr, $keys:expr $(,)?) => {
        fn name(&self) -> &'static str {
            $name
        }
        fn about(&self) -> &'static str {
            $about
        }
        fn keys(&self) -> &'static [$crate::app::KeySpec] {
            $keys
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[KeySpec] = &[KeySpec {
        name: "ops",
        default: "8",
        help: "ops per request",
    }];

    #[test]
    fn params_parse_and_check() {
        let p = Params::parse(["ops=16"]).unwrap();
        assert_eq!(p.get("ops"), Some("16"));
        p.check_keys("kv", KEYS).unwrap();
        assert_eq!(p.get_parsed::<u32>("ops", 8, "a count").unwrap(), 16);
        let bad = Params::parse(["opz=1"]).unwrap();
        let e = bad.check_keys("kv", KEYS).unwrap_err().to_string();
        assert!(e.contains("opz") && e.contains("ops"), "{e}");
        assert!(Params::parse(["noequals"]).is_err());
        let p = Params::parse(["ops=x"]).unwrap();
        assert!(p.get_parsed::<u32>("ops", 8, "a count").is_err());
    }

    #[test]
    fn prepare_is_atomic_and_idempotent() {
        let root = std::env::temp_dir().join(format!("taillab-prep-{}", std::process::id()));
        let ctx = DataCtx { root: root.clone() };
        assert!(ctx
            .prepare_atomically("a", "v1", |_| Err(AppError::Request("boom".into())))
            .is_err());
        assert!(!ctx.is_prepared("a", "v1"));
        let mut calls = 0;
        for _ in 0..2 {
            ctx.prepare_atomically("a", "v1", |d| {
                calls += 1;
                std::fs::write(d.join("x"), "1").map_err(|e| AppError::io(d, e))
            })
            .unwrap();
        }
        assert_eq!(calls, 1);
        assert!(ctx.is_prepared("a", "v1"));
        assert!(!ctx.is_prepared("a", "v2"));
        std::fs::remove_dir_all(root).unwrap();
    }

    /// Preparers racing on one app (CI ran two tests that both prepared the
    /// TPC-C data; the second replaced the folder the first was reading):
    /// one builds, the others wait and find the data there.
    #[test]
    fn concurrent_preparers_build_once() {
        let root = std::env::temp_dir().join(format!("taillab-prep-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let builds = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let ctx = DataCtx { root: root.clone() };
                    ctx.prepare_atomically("w/1", "v1", |d| {
                        builds.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(100));
                        std::fs::write(d.join("x"), "1").map_err(|e| AppError::io(d, e))
                    })
                    .unwrap();
                    assert!(ctx.app_dir("w/1").join("x").exists());
                });
            }
        });
        assert_eq!(builds.load(std::sync::atomic::Ordering::SeqCst), 1);
        std::fs::remove_dir_all(root).unwrap();
    }
}
