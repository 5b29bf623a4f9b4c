//! A run's result on disk: `summary.json`, interval logs, per-request records,
//! the self-checks, and the human table.
//!
//! Schema history of `summary.json` (`schema` field):
//! - `taillab.run/1` — first version: parameters, rates, counts, latency
//!   statistics of sojourn/service/queue/send_lag in ns, checks, host.
//!   Later additions, all optional (readers of the first files still read
//!   the new ones, and the new reader the old ones): `dispatch`; `ideal`
//!   (the replay of the run's own arrivals and service times through an
//!   exact queue: `sojourn` statistics, `excess` = measured − ideal and
//!   `ratio` = measured ÷ ideal per statistic, see [`crate::ideal`]) or
//!   `ideal_skipped` (why there is none); `requests.csv` gained the column
//!   `ideal_completed` when the ideal exists.
//!
//! - `taillab.run/2` — the same keys, now typed end to end: every section
//!   that other parts add (`environment`, `counters`, `transport`, `nodes`,
//!   `stalls`, `roi`, `interference`, `profile`, `tuning`, `server`,
//!   `environment_redo`, `incomplete`; [`crate::sections`]) is a field of
//!   [`Summary`] instead of an untyped map, and the file has a JSON Schema
//!   generated from these types ([`run_schema`], checked in as
//!   `docs/schema/run-2.json`). `transport.stamps.*` omit their counts when
//!   none were counted. A `taillab.run/1` file reads as run/2 (its keys are
//!   the same; it was never validated).
//!
//! Readers must refuse a schema they do not know rather than guess.

use crate::app::Params;
use crate::collector::{MetricStats, METRICS};
use crate::result::RunResult;
use crate::sections::{
    CountersReport, EnvSummary, EnvironmentRedo, InterferenceReport, NodeReport, ProfileOutcome,
    RoiSection, ServeStats, TransportSection, TuningRecord,
};
use crate::spec::Bound;
use crate::stalls::Stalls;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Schema of `summary.json` (history in the module doc).
pub const RUN_SCHEMA: &str = "taillab.run/2";
/// The earlier schemas [`Summary::read`] still reads (history in the module doc).
pub const RUN_SCHEMA_READ: &[&str] = &["taillab.run/1", RUN_SCHEMA];

/// Errors writing or reading results; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ResultError {
    /// A result file or folder could not be written.
    #[error("cannot write results to {path}: {source} ({})", write_hint(source))]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The experiment folder was removed (or its `experiment.json` deleted)
    /// while the experiment ran.
    #[error("results folder {root} vanished mid-experiment (its experiment.json is gone): the runs measured so far are lost; run again with a new --out")]
    Vanished {
        /// The experiment folder.
        root: PathBuf,
    },
    /// A result file is missing, unreadable or malformed.
    #[error("cannot read {path}: {why}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong (the OS or parser error).
        why: String,
    },
    #[error(
        "{path} has schema `{found}`, this taillab reads `{want}` (use a matching taillab version)"
    )]
    /// A result file has a schema this taillab does not read.
    Schema {
        /// The file.
        path: PathBuf,
        /// The schema it has.
        found: String,
        /// The schema this taillab reads.
        want: String,
    },
}

/// One self-check's verdict: `ok`, a one-line reason, and its numbers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Check {
    /// Whether the check passed.
    pub ok: bool,
    /// One line for the human table: what was measured against which limit.
    pub verdict: String,
    /// The check's numbers, flattened into its JSON object.
    #[serde(flatten)]
    pub details: Map<String, Value>,
}

impl Check {
    /// A verdict with `details` (a JSON object; any other value is dropped).
    pub fn new(ok: bool, verdict: impl Into<String>, details: Value) -> Self {
        let details = match details {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        Check {
            ok,
            verdict: verdict.into(),
            details,
        }
    }
}

/// Request counts of a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Counts {
    /// Warmup requests completed (outside the histograms).
    pub warmup: u64,
    /// Measured requests completed: the histograms' count.
    pub measured: u64,
    /// Measured requests scheduled but not completed by the drain deadline.
    pub unfinished: u64,
    /// Requests the app failed, warmup included (still timed: a measured one
    /// is in the histograms).
    pub errors: u64,
}

/// Facts about the host that affect the tail, recorded with every result.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Host {
    /// CPU model name from /proc/cpuinfo (`unknown` when absent).
    pub cpu: String,
    /// CPUs this process may use.
    pub cores: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// The host's name (from the kernel).
    pub hostname: String,
    /// taillab's version (the package version).
    pub taillab: String,
    /// Commit the binary was built from ([`BUILD_GIT`]; `unknown` when unset).
    pub git: String,
}

impl Host {
    /// Reads this host's and this binary's facts.
    pub fn collect() -> Self {
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        };
        Host {
            cpu,
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            kernel: read("/proc/sys/kernel/osrelease"),
            hostname: read("/proc/sys/kernel/hostname"),
            taillab: env!("CARGO_PKG_VERSION").to_string(),
            git: BUILD_GIT.get().copied().unwrap_or("unknown").to_string(),
        }
    }
}

fn shared() -> String {
    "shared".into()
}

/// The git commit the running binary was built from, set once by the
/// binary at start-up (`host.git`; "unknown" when unset).
pub static BUILD_GIT: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

crate::summary_struct! {
/// `summary.json`. The optional sections (after `optional`) are each `Option<T>`, absent
/// from the file when `None` and `None` when absent, declared so once by [`crate::summary_struct`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, JsonSchema)]
#[schemars(title = "taillab run summary (summary.json)")]
pub struct Summary {
    /// [`RUN_SCHEMA`]; readers refuse any other.
    pub schema: String,
    /// The app's registered name (as `taillab apps` lists it).
    pub app: String,
    /// The app's `--set` settings.
    pub params: Params,
    /// Topology (`integrated`, `loopback`, `networked`), or the label of a
    /// standalone `taillab load` (`net.label`).
    pub config: String,
    /// Worker threads (`harness.threads`).
    pub threads: usize,
    /// This run's seed: arrival times, request contents, dispatch all follow from it.
    pub seed: u64,
    /// The arrival process in its spec form (`load.arrival`).
    pub arrival: String,
    /// How the harness waits for a send time: spin, block or hybrid (`harness.wait`).
    pub wait: String,
    /// Who released requests: `inline` or `thread` (`harness.shaper`).
    pub shaper: String,
    /// Queue order: `fifo`, `lifo` or `random` (`harness.discipline`).
    pub discipline: String,
    /// `shared` or `per-worker:…` (absent in early files: shared).
    #[serde(default = "shared")]
    pub dispatch: String,
    /// Hybrid waits spin this long before a deadline (ns).
    pub spin_margin_ns: u64,
    /// Simulated one-way network delay, as a distribution spec (integrated runs only).
    pub net_delay: Option<String>,
    /// The rate asked for (requests/s).
    pub offered_qps: f64,
    /// Rate of the realised schedule (a Poisson schedule's own rate differs
    /// from the offered one by sampling noise, ≈ 1/√n).
    pub scheduled_qps: f64,
    /// Measured completions per second: (measured − 1) over the span from the first
    /// to the last completion; 0 with fewer than two.
    pub achieved_qps: f64,
    /// Offered load × mean measured service time ÷ threads.
    pub utilization: f64,
    /// Length of the measured phase (s): as set, or the span of its scheduled
    /// arrivals when it is bounded by a request count.
    pub duration_s: f64,
    /// Request counts by phase.
    pub requests: Counts,
    /// The first app error's message, when any request failed.
    pub first_error: Option<String>,
    /// Every derived time ([`METRICS`]) over the measured requests (ns).
    pub latency_ns: BTreeMap<String, MetricStats>,
    /// The self-checks by name (`rate`, `send_lag`, `saturation`, ...); a failed
    /// check marks the run, it never drops it.
    pub checks: BTreeMap<String, Check>,
    /// The host the run measured on.
    pub host: Host,
    /// Wall-clock start of the schedule, RFC 3339 in UTC.
    pub started_at: String,
    /// Length of one interval of the `hist/*.hlog` logs (s).
    pub interval_s: f64,
    /// The app's own statistics ([`crate::app::Server::report`]); `null` when it has none.
    #[serde(default)]
    pub app_stats: Value,
}
optional {
    /// The run's own arrivals and service times through an exact queue.
    ideal: crate::ideal::IdealSummary,
    /// Why there is no `ideal` (records not kept, requests missing).
    ideal_skipped: String,
    /// Where an integrated run's threads ran: workers' CPUs, helpers' CPUs.
    placement: crate::placement::PlacementSummary,
    /// A fan-out run's leaves, copies and model ([`crate::fanout`]); its `latency_ns` are the
    /// whole requests' (service and queue: of the copy that completed each).
    fanout: crate::fanout::FanoutSummary,
    // The sections below are added by other parts ([`crate::sections`]); each is
    // absent when its part did not run. Alphabetical, as the files always had them.
    /// Each slow request explained from the kernel's events (`record.explain`).
    anatomy: crate::sections::Anatomy,
    /// Hardware and software counters of the workers (`record.counters`).
    counters: CountersReport,
    /// What else ran on the host during the measured phase (`monitor.enabled`).
    environment: EnvSummary,
    /// The disturbed runs this run replaced.
    environment_redo: EnvironmentRedo,
    /// Why the run was cut short (a lost server or client), when it was.
    incomplete: String,
    /// The planned interference: what ran and what it used.
    interference: InterferenceReport,
    /// Each Slurm node's environment (networked runs on Slurm).
    nodes: Vec<NodeReport>,
    /// The `perf record` profile's files, or why there is none.
    profile: ProfileOutcome,
    /// The simulator markers issued (`record.roi`).
    roi: RoiSection,
    /// What `taillab serve` did (coordinated TCP runs).
    server: ServeStats,
    /// The dispatch gaps of an integrated run.
    stalls: Stalls,
    /// How the load crossed the wire (TCP runs).
    transport: TransportSection,
    /// The host knobs held for the run.
    tuning: TuningRecord,
}
}

impl Summary {
    /// Whether every self-check passed.
    pub fn ok(&self) -> bool {
        self.checks.values().all(|c| c.ok)
    }

    /// Marks a run cut short by a lost server or client: `incomplete` says
    /// why, and the saturation check fails naming that instead of the load.
    /// What was measured stays as it is.
    pub fn mark_incomplete(&mut self, why: &str) {
        self.incomplete = Some(why.into());
        if let Some(c) = self.checks.get_mut("saturation") {
            c.ok = false;
            c.verdict = format!(
                "run cut short ({why}): {} measured requests kept, {} unfinished",
                self.requests.measured, self.requests.unfinished
            );
        }
    }

    /// Reads a `summary.json` of any schema in [`RUN_SCHEMA_READ`], refusing
    /// others; a key of the wrong shape is an error naming it.
    pub fn read(path: &Path) -> Result<Self, ResultError> {
        read_with_schemas(path, RUN_SCHEMA_READ)
    }
}

impl Summary {
    /// An external server's run (only sojourn is seen): its ideal would replay service times of
    /// 0 and say nothing, so it has none, and says why.
    pub fn drop_ideal_of_external_server(&mut self) {
        if self.ideal.take().is_some() || self.ideal_skipped.is_none() {
            self.ideal_skipped = Some(
                "an external server reports no service times: there is nothing to replay".into(),
            );
        }
    }
}

mod checks;
mod schema;
mod summarize;
mod table;
#[cfg(test)]
mod tests;
mod write;

pub use checks::*;
pub use schema::*;
pub use summarize::*;
pub use table::*;
pub use write::*;
