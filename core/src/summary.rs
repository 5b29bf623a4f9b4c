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
use crate::harness::{Bound, RunResult};
use crate::sections::{
    CountersReport, EnvSummary, EnvironmentRedo, InterferenceReport, NodeReport, ProfileOutcome,
    RoiSection, ServeStats, TransportSection, TuningRecord,
};
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

/// `summary.json`.
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
    /// The run's own arrivals and service times through an exact queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal: Option<crate::ideal::IdealSummary>,
    /// Why there is no `ideal` (records not kept, requests missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ideal_skipped: Option<String>,
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
    /// Where an integrated run's threads ran: workers' CPUs, helpers' CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<crate::placement::PlacementSummary>,
    /// A fan-out run's leaves, copies and model ([`crate::fanout`]); its `latency_ns` are the
    /// whole requests' (service and queue: of the copy that completed each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanout: Option<crate::fanout::FanoutSummary>,
    // The sections below are added by other parts ([`crate::sections`]); each is
    // absent when its part did not run. Alphabetical, as the files always had them.
    /// Each slow request explained from the kernel's events (`record.explain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anatomy: Option<crate::sections::Anatomy>,
    /// Hardware and software counters of the workers (`record.counters`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<CountersReport>,
    /// What else ran on the host during the measured phase (`monitor.enabled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<EnvSummary>,
    /// The disturbed runs this run replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment_redo: Option<EnvironmentRedo>,
    /// Why the run was cut short (a lost server or client), when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
    /// The planned interference: what ran and what it used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interference: Option<InterferenceReport>,
    /// Each Slurm node's environment (networked runs on Slurm).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<NodeReport>>,
    /// The `perf record` profile's files, or why there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfileOutcome>,
    /// The simulator markers issued (`record.roi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roi: Option<RoiSection>,
    /// What `taillab serve` did (coordinated TCP runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServeStats>,
    /// The dispatch gaps of an integrated run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls: Option<Stalls>,
    /// How the load crossed the wire (TCP runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportSection>,
    /// The host knobs held for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuning: Option<TuningRecord>,
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

/// The JSON Schema of `summary.json` ([`RUN_SCHEMA`]), generated from [`Summary`]:
/// what `docs/schema/run-2.json` holds and `taillab config schema run` prints.
/// It describes what a reader accepts (keys with defaults are optional); keys it
/// does not name are allowed, as readers ignore them.
pub fn run_schema() -> Value {
    let mut s = serde_json::to_value(schemars::schema_for!(Summary)).unwrap_or_default();
    if let Value::Object(m) = &mut s {
        m.insert(
            "$id".into(),
            Value::String("https://taillab.invalid/schema/run-2.json".into()),
        );
        m.insert(
            "description".into(),
            Value::String(format!(
                "summary.json of one taillab run, schema `{RUN_SCHEMA}` (also reads `taillab.run/1` \
                 files). Generated from the Rust types (core/src/summary.rs, core/src/sections/) \
                 by `taillab config schema run`; do not edit by hand."
            )),
        );
    }
    s
}

/// Reads a JSON result file whose `schema` field must be `want`.
pub fn read_with_schema<T: serde::de::DeserializeOwned>(
    path: &Path,
    want: &str,
) -> Result<T, ResultError> {
    read_with_schemas(path, &[want])
}

/// Reads a JSON result file whose `schema` field must be one of `want`. A value
/// of the wrong shape is an error naming its key (`environment.steal_pct: invalid
/// type: string "x", expected f64`).
pub fn read_with_schemas<T: serde::de::DeserializeOwned>(
    path: &Path,
    want: &[&str],
) -> Result<T, ResultError> {
    let read_err = |why: String| ResultError::Read {
        path: path.into(),
        why,
    };
    let txt = std::fs::read_to_string(path).map_err(|e| read_err(e.to_string()))?;
    let v: Value = serde_json::from_str(&txt).map_err(|e| read_err(e.to_string()))?;
    let found = v
        .get("schema")
        .and_then(|s| s.as_str())
        .unwrap_or("(none)")
        .to_string();
    if !want.contains(&found.as_str()) {
        return Err(ResultError::Schema {
            path: path.into(),
            found,
            want: want.join("` or `"),
        });
    }
    serde_path_to_error::deserialize(v).map_err(|e| {
        let key = e.path().to_string();
        read_err(if key == "." {
            e.inner().to_string()
        } else {
            format!("{key}: {}", e.inner())
        })
    })
}

/// Formats a SystemTime as RFC 3339 UTC (no external date crate needed).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil-from-days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Least-squares slope of `ys` against `xs`.
fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// Tolerance of the rate check: achieved within ±2 % of the schedule's rate.
pub const RATE_TOLERANCE: f64 = 0.02;

/// A run's rates: the schedule's (from its measured arrivals), the achieved
/// (from its measured completions), and the measured span in seconds.
struct Rates {
    scheduled_qps: f64,
    achieved_qps: f64,
    duration_s: f64,
}

impl Rates {
    fn of(r: &RunResult) -> Rates {
        let (t, spec) = (&r.totals, &r.spec);
        let n = t.measured;
        let span = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / 1e9;
        let sched_span = span(r.first_measured_intended, r.last_measured_intended);
        let scheduled_qps = if r.generated_measured > 1 && sched_span > 0.0 {
            (r.generated_measured - 1) as f64 / sched_span
        } else {
            spec.qps
        };
        let done_span = span(t.first_completed, t.last_completed);
        let achieved_qps = if n > 1 && done_span > 0.0 {
            (n - 1) as f64 / done_span
        } else {
            0.0
        };
        let duration_s = match spec.measure {
            Bound::Seconds(s) => s,
            Bound::Requests(_) => sched_span,
        };
        Rates {
            scheduled_qps,
            achieved_qps,
            duration_s,
        }
    }
}

/// The checks of a run: rate, send lag, saturation, interarrival times,
/// independence, stationarity, and app errors when there were any.
fn run_checks(
    r: &RunResult,
    latency: &BTreeMap<String, MetricStats>,
    scheduled_qps: f64,
    achieved_qps: f64,
) -> BTreeMap<String, Check> {
    let (spec, n) = (&r.spec, r.totals.measured);
    let mut checks = BTreeMap::new();
    let rel = if scheduled_qps > 0.0 {
        achieved_qps / scheduled_qps - 1.0
    } else {
        -1.0
    };
    let rate_ok = n > 1 && rel.abs() <= RATE_TOLERANCE;
    checks.insert(
        "rate".to_string(),
        Check::new(
            rate_ok,
            format!(
                "achieved {:.1} qps vs scheduled {:.1} ({:+.2}%, tolerance ±{:.0}%)",
                achieved_qps,
                scheduled_qps,
                rel * 100.0,
                RATE_TOLERANCE * 100.0
            ),
            json!({"offered_qps": spec.qps, "scheduled_qps": scheduled_qps, "achieved_qps": achieved_qps,
                   "rel_error": rel, "tolerance": RATE_TOLERANCE}),
        ),
    );
    let lag = &latency["send_lag"];
    let lag_ok = lag.p99 <= spec.send_lag_p99_max_ns;
    checks.insert(
        "send_lag".to_string(),
        Check::new(
            lag_ok,
            format!(
                "send lag p50 {} p99 {} max {} (p99 threshold {})",
                crate::dist::fmt_ns(lag.p50 as f64),
                crate::dist::fmt_ns(lag.p99 as f64),
                crate::dist::fmt_ns(lag.max as f64),
                crate::dist::fmt_ns(spec.send_lag_p99_max_ns as f64)
            ),
            json!({"p50_ns": lag.p50, "p99_ns": lag.p99, "max_ns": lag.max, "threshold_ns": spec.send_lag_p99_max_ns}),
        ),
    );
    checks.insert("saturation".to_string(), saturation_check(r));
    checks.insert(
        "interarrival".to_string(),
        interarrival_check(r, scheduled_qps, latency["send_lag"].p99),
    );
    checks.insert("independence".to_string(), independence_check(r));
    checks.insert("stationarity".to_string(), stationarity_check(r));
    if r.errors > 0 {
        checks.insert(
            "errors".to_string(),
            Check::new(
                false,
                format!(
                    "{} requests failed in the app; first: {}",
                    r.errors,
                    r.first_error.clone().unwrap_or_default()
                ),
                json!({"count": r.errors}),
            ),
        );
    }
    checks
}

/// Builds the summary and its checks from what a run measured: the latency
/// statistics, the rates, the checks, then the ideal replay.
pub fn summarize(r: &RunResult, app: &str, params: &Params, config: &str) -> Summary {
    let t = &r.totals;
    let mut latency = BTreeMap::new();
    for (i, m) in METRICS.iter().enumerate() {
        latency.insert(
            m.to_string(),
            MetricStats::from_hist(&t.totals.0[i], Some(t.sums[i])),
        );
    }
    let spec = &r.spec;
    let n = t.measured;
    let Rates {
        scheduled_qps,
        achieved_qps,
        duration_s,
    } = Rates::of(r);
    let service_mean = latency["service"].mean;
    let utilization = spec.qps * service_mean / 1e9 / spec.threads as f64;
    let checks = run_checks(r, &latency, scheduled_qps, achieved_qps);

    let fanout = r
        .fanout
        .as_ref()
        .map(|f| crate::ideal::fanout_summary(f, spec.seed));
    let ideal = match &fanout {
        Some(f) => crate::ideal::fanout_ideal(r, f, &latency["sojourn"]),
        None => crate::ideal::ideal_of_run(r, &latency["sojourn"], None),
    };
    let (ideal, ideal_skipped) = match ideal {
        Ok(i) => (Some(i), None),
        Err(why) => (None, Some(why.to_string())),
    };
    Summary {
        schema: RUN_SCHEMA.into(),
        app: app.into(),
        params: params.clone(),
        config: config.into(),
        threads: spec.threads,
        seed: spec.seed,
        arrival: spec.arrival.to_string(),
        wait: spec.wait.to_string(),
        shaper: spec.shaper.to_string(),
        discipline: spec.discipline.to_string(),
        dispatch: spec.dispatch.to_string(),
        spin_margin_ns: spec.spin_margin_ns,
        net_delay: spec.net_delay.as_ref().map(|d| d.to_string()),
        offered_qps: spec.qps,
        scheduled_qps,
        achieved_qps,
        utilization,
        duration_s,
        requests: Counts {
            warmup: t.warmup,
            measured: n,
            unfinished: r.unfinished(),
            errors: r.errors,
        },
        first_error: r.first_error.clone(),
        latency_ns: latency,
        ideal,
        ideal_skipped,
        checks,
        host: Host::collect(),
        started_at: rfc3339(r.wall_start),
        interval_s: spec.interval_ns as f64 / 1e9,
        app_stats: r.app_stats.clone(),
        placement: r.placement.clone(),
        fanout,
        // Over TCP the records are the client's, whose gaps include the network; a
        // fan-out's requests are served by many queues: no one dispatch gap to speak of.
        stalls: (config == "integrated" && r.fanout.is_none())
            .then(|| crate::stalls::dispatch_gaps(r))
            .flatten(),
        anatomy: None,
        counters: None,
        environment: None,
        environment_redo: None,
        incomplete: None,
        interference: None,
        nodes: None,
        profile: None,
        roi: None,
        server: None,
        transport: None,
        tuning: None,
    }
}

/// The `client` check of a TCP run: did the client read its responses soon
/// after the kernel received them? `completed` is the kernel's stamp, so a
/// late reader does not lengthen one response's sojourn; but responses that
/// wait together in the socket share the stamp of the last one, and a busy
/// reader delays the next sends. It fails when `recv_lag` p99 exceeds
/// `max(max_abs_ns, max_ratio × sojourn p50)`: a lag that is both large and
/// large next to the latency measured. `fallback` names why the run had only
/// user-space stamps: then the lag is inside sojourn, unseen, and the check
/// says so instead of judging.
pub fn client_check(
    recv_lag: &MetricStats,
    sojourn: &MetricStats,
    max_abs_ns: u64,
    max_ratio: f64,
    fallback: Option<&str>,
) -> Check {
    use crate::dist::fmt_ns;
    if let Some(why) = fallback {
        return Check::new(
            true,
            format!("not measured: {why}; the client's receive delay is inside sojourn"),
            json!({"skipped": true, "reason": why}),
        );
    }
    let limit = (max_abs_ns as f64).max(max_ratio * sojourn.p50 as f64);
    let ok = recv_lag.p99 as f64 <= limit;
    let head = format!(
        "recv lag p50 {} p99 {} max {} (p99 limit {} = max({}, {max_ratio} × sojourn p50 {}))",
        fmt_ns(recv_lag.p50 as f64),
        fmt_ns(recv_lag.p99 as f64),
        fmt_ns(recv_lag.max as f64),
        fmt_ns(limit),
        fmt_ns(max_abs_ns as f64),
        fmt_ns(sojourn.p50 as f64)
    );
    let verdict = if ok {
        head
    } else {
        format!("{head}: the client read its responses late, which delays its sends and merges the stamps of responses that waited together; give it a CPU of its own (--client-cpus) or --client-wait spin")
    };
    Check::new(
        ok,
        verdict,
        json!({"p50_ns": recv_lag.p50, "p99_ns": recv_lag.p99, "max_ns": recv_lag.max, "limit_ns": limit,
               "max_abs_ns": max_abs_ns, "max_ratio": max_ratio, "sojourn_p50_ns": sojourn.p50}),
    )
}

/// Saturation: the backlog (measured arrivals − completions) must not grow
/// through the measured phase, and every measured request must finish.
fn saturation_check(r: &RunResult) -> Check {
    let arr = &r.arrivals_per_slice;
    let done = &r.totals.slice_done;
    let mut backlog = Vec::with_capacity(arr.len());
    let mut acc: i64 = 0;
    for (j, a) in arr.iter().enumerate() {
        acc += *a as i64 - done.get(j).copied().unwrap_or(0) as i64;
        backlog.push(acc as f64);
    }
    let xs: Vec<f64> = (0..backlog.len())
        .map(|j| (j + 1) as f64 * r.slice_ns as f64 / 1e9)
        .collect();
    let growth = slope(&xs, &backlog);
    let threshold = 0.01 * r.spec.qps;
    let final_backlog = backlog.last().copied().unwrap_or(0.0);
    // A short noisy run at high load can show a slope by chance; only a
    // backlog that also ends well above a few requests per worker counts.
    let growing = growth > threshold && final_backlog > (2 * r.spec.threads + 10) as f64;
    let unfinished = r.unfinished();
    let ok = !growing && unfinished == 0 && !r.aborted;
    let verdict = if r.aborted {
        format!("run stopped with {unfinished} measured requests unfinished: its backlog could not be served by the drain deadline (the server cannot keep up)")
    } else if unfinished > 0 {
        format!("{unfinished} measured requests never completed")
    } else if growing {
        format!("backlog grew by {growth:.1} requests/s (threshold {threshold:.1}/s), ending at {final_backlog:.0}: saturated")
    } else {
        format!("backlog steady ({growth:+.1} requests/s, threshold {threshold:.1}/s)")
    };
    Check::new(
        ok,
        verdict,
        json!({"backlog_growth_per_s": growth, "threshold_per_s": threshold, "final_backlog": final_backlog,
               "unfinished": unfinished, "aborted": r.aborted}),
    )
}

/// Largest sample the sequence checks look at (the first N measured requests).
const CHECK_SAMPLE: usize = 20_000;

fn skipped(why: &str) -> Check {
    Check::new(true, format!("skipped: {why}"), json!({"skipped": true}))
}

/// Measured requests' stamps in request (= intended) order, up to `limit`.
fn measured_stamps(r: &RunResult, limit: usize) -> Option<Vec<crate::collector::Stamps>> {
    let rec = r.records.as_ref()?;
    Some(
        rec.iter()
            .filter(|x| x.2)
            .map(|x| x.3)
            .take(limit)
            .collect(),
    )
}

/// Why the sequence checks were skipped: the stamps they need were not kept.
const NO_RECORDS: &str = "no per-request records (integrated: raise --max-record-mem; loopback: --save-requests; networked: one client with --save-requests)";

/// Inter-arrival fit: do the actual send gaps follow the process asked for?
/// - Poisson and renewal gaps (`lognormal:`, `gamma:`, `pareto:`):
///   Kolmogorov–Smirnov of the intended gaps against the gap distribution with
///   the schedule's rate, and of the send gaps against the intended ones up to
///   the send lag's p99 (each fails at p < 0.001).
/// - fixed: gaps within ±5 % of their mean at p99.
/// - processes whose gaps are not independent draws (MMPP, traces, load
///   profiles): two-sample KS of the send gaps against the intended
///   schedule's own gaps, i.e. did the harness realise the schedule it was
///   given (fails at p < 0.001).
fn interarrival_check(r: &RunResult, scheduled_qps: f64, lag_p99: u64) -> Check {
    let Some(st) = measured_stamps(r, CHECK_SAMPLE + 1) else {
        return skipped(NO_RECORDS);
    };
    interarrival_of(&st, &r.spec.arrival, scheduled_qps, lag_p99)
}

/// [`interarrival_check`] on the measured requests' stamps `st`.
fn interarrival_of(
    st: &[crate::collector::Stamps],
    arrival: &crate::arrival::ArrivalSpec,
    scheduled_qps: f64,
    lag_p99: u64,
) -> Check {
    if st.len() < 50 {
        return skipped("fewer than 50 measured requests");
    }
    let gaps_of = |mut t: Vec<u64>| -> Vec<f64> {
        // Late requests keep their intended send time; sort so gaps are
        // between consecutive releases, as a wire would see them.
        t.sort_unstable();
        t.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
    };
    let gaps = gaps_of(st.iter().map(|s| s.sent).collect());
    let mean_gap = 1e9 / scheduled_qps;
    if *arrival == crate::arrival::ArrivalSpec::Fixed {
        return fixed_spacing(&gaps, mean_gap);
    }
    let ks = |test: &str, what: String, (d, p): (f64, f64)| {
        Check::new(
            p >= 0.001,
            format!("{what}: KS D={d:.4}, p={p:.3} over {} gaps", gaps.len()),
            json!({"test": test, "d": d, "p_value": p, "gaps": gaps.len(), "alpha": 0.001}),
        )
    };
    let intended = gaps_of(st.iter().map(|s| s.intended).collect());
    // Each send may be late by its send lag (judged by its own check), so the wire's gaps
    // are compared with the schedule's up to the send lag's p99: one client thread cannot
    // put two requests closer than one write's cost (over loopback a write runs the
    // receiver's TCP stack too, ~5–10 µs), so requests due closer than that leave together,
    // and a plain fit of the wire's gaps would fail every run at µs scale.
    let tol = (lag_p99 as f64).max(1_000.0);
    let wire = crate::arrival::ks_two_sample_within(&gaps, &intended, tol);
    let tol_s = crate::dist::fmt_ns(tol);
    match arrival.gap_cdf(mean_gap) {
        Some(cdf) => {
            // Poisson and renewal processes: the schedule's own gaps against the process
            // asked for (a wrong generator or rate fails here), and the wire against the
            // schedule.
            let (d, p) = crate::arrival::ks_one_sample(&intended, &cdf);
            let (wd, wp) = wire;
            let plain = crate::arrival::ks_one_sample(&gaps, &cdf).0;
            let (test, what) = if *arrival == crate::arrival::ArrivalSpec::Poisson {
                ("ks_exponential", "exponential".to_string())
            } else {
                ("ks_gaps", format!("the gaps of {arrival}"))
            };
            Check::new(
                p >= 0.001 && wp >= 0.001,
                format!(
                    "intended gaps vs {what}: KS D={d:.4}, p={p:.3}; send gaps vs intended \
                     within the send lag p99 {tol_s}: D={wd:.4}, p={wp:.3}; over {} gaps",
                    gaps.len()
                ),
                json!({"test": test, "d": d, "p_value": p, "gaps": gaps.len(), "alpha": 0.001,
                       "wire_d": wd, "wire_p_value": wp, "tolerance_ns": tol,
                       "send_gaps_d": plain}),
            )
        }
        None => ks(
            "ks_vs_schedule",
            format!(
                "send gaps vs the intended schedule's ({arrival}), within the send lag p99 {tol_s}"
            ),
            wire,
        ),
    }
}

fn fixed_spacing(gaps: &[f64], mean_gap: f64) -> Check {
    let mut dev: Vec<f64> = gaps.iter().map(|g| (g / mean_gap - 1.0).abs()).collect();
    dev.sort_by(|a, b| a.total_cmp(b));
    let p99 = dev[((dev.len() as f64 * 0.99) as usize).min(dev.len() - 1)];
    Check::new(
        p99 <= 0.05,
        format!(
            "send gaps within {:.1}% of the fixed spacing at p99 (limit 5%)",
            p99 * 100.0
        ),
        json!({"test": "fixed_spacing", "p99_rel_dev": p99, "limit": 0.05}),
    )
}

/// Independence (Lancet's check): the smallest lag at which consecutive
/// sojourn times are no longer rank-correlated (|Spearman| < 0.05). Fails
/// when they stay correlated beyond 5 % of the sample: the run then holds
/// few independent observations and should be longer.
fn independence_check(r: &RunResult) -> Check {
    let Some(st) = measured_stamps(r, CHECK_SAMPLE) else {
        return skipped(NO_RECORDS);
    };
    if st.len() < 200 {
        return skipped("fewer than 200 measured requests");
    }
    let soj: Vec<f64> = st.iter().map(|s| s.durations()[0] as f64).collect();
    let max_lag = soj.len() / 20;
    let mut lag = 1;
    let mut rho = crate::stats::spearman_lag(&soj, 1);
    let rho1 = rho;
    while rho.abs() >= 0.05 && lag < max_lag {
        lag = (lag * 2).min(max_lag);
        rho = crate::stats::spearman_lag(&soj, lag);
    }
    let ok = rho.abs() < 0.05;
    Check::new(
        ok,
        if ok {
            format!("sojourns independent beyond lag {lag} (Spearman {rho:+.3}; lag 1 {rho1:+.3})")
        } else {
            format!("sojourns still correlated at lag {lag} (Spearman {rho:+.3}): lengthen the run")
        },
        json!({"lag": lag, "spearman_at_lag": rho, "spearman_lag1": rho1, "threshold": 0.05, "sample": soj.len()}),
    )
}

/// Stationarity: Mann–Kendall trend test on per-interval p99 sojourn; a
/// significant trend (p < 0.01, ≥ 5 intervals) means the run was not in
/// steady state (warmup too short, or the system drifting).
fn stationarity_check(r: &RunResult) -> Check {
    if !r.spec.arrival.is_stationary() {
        return skipped("the load changes over time on purpose (a trace or load profile)");
    }
    let p99s: Vec<f64> = r
        .intervals
        .iter()
        .filter(|b| b.count >= 20)
        .filter_map(|b| crate::collector::decode_hist(&b.hist_b64[0]))
        .map(|h| h.value_at_quantile(0.99) as f64)
        .collect();
    if p99s.len() < 5 {
        return skipped(
            "fewer than 5 intervals with 20+ requests (lengthen the run or shorten --interval)",
        );
    }
    let (z, p) = crate::stats::mann_kendall(&p99s);
    let ok = p >= 0.01;
    Check::new(
        ok,
        if ok {
            format!(
                "no trend in per-interval p99 over {} intervals (Mann–Kendall p={p:.3})",
                p99s.len()
            )
        } else {
            format!(
                "per-interval p99 trends {} (Mann–Kendall z={z:+.2}, p={p:.4}): not in steady state; lengthen the warmup",
                if z > 0.0 { "up" } else { "down" }
            )
        },
        json!({"test": "mann_kendall", "z": z, "p_value": p, "intervals": p99s.len(), "alpha": 0.01}),
    )
}

/// What to do about a failed write.
fn write_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            "the file system is full: free space there or pick another --out"
        }
        _ => "pick a writable --out",
    }
}

fn werr(path: &Path) -> impl FnOnce(std::io::Error) -> ResultError + '_ {
    move |e| ResultError::Write {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Makes `dir` and proves it is writable (before a run, so a long run never
/// ends with nowhere to put its result).
pub fn ensure_writable(dir: &Path) -> Result<(), ResultError> {
    std::fs::create_dir_all(dir).map_err(werr(dir))?;
    let probe = dir.join(".taillab-write-test");
    std::fs::write(&probe, b"ok").map_err(werr(&probe))?;
    std::fs::remove_file(&probe).map_err(werr(&probe))?;
    Ok(())
}

/// Writes `summary.json` atomically (temp file + rename), so a reader or a
/// resumed sweep never sees a half-written one.
pub fn write_json_atomic(path: &Path, v: &impl Serialize) -> Result<(), ResultError> {
    let tmp = path.with_extension("json.tmp");
    let txt = serde_json::to_string_pretty(v).expect("summaries serialize");
    // A failed write (a full disk) leaves neither a summary nor a torn temp file.
    let written = std::fs::write(&tmp, txt + "\n").map_err(werr(&tmp));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::rename(&tmp, path).map_err(werr(path))
}

/// Header of `requests.csv`: the stamps of each request, in ns (the two
/// user-space reads last, so readers of the first nine columns still work).
pub const REQUESTS_CSV_HEADER: &str =
    "id,worker,intended,sent,enqueued,started,finished,completed,measured,enqueued_user,completed_user";

/// One `requests.csv` row (no line end), in [`REQUESTS_CSV_HEADER`]'s order.
pub fn write_request_row(
    w: &mut impl Write,
    id: u64,
    worker: usize,
    measured: bool,
    st: &crate::collector::Stamps,
) -> std::io::Result<()> {
    write!(
        w,
        "{id},{worker},{},{},{},{},{},{},{},{},{}",
        st.intended,
        st.sent,
        st.enqueued,
        st.started,
        st.finished,
        st.completed,
        measured as u8,
        st.enqueued_user,
        st.completed_user
    )
}

/// Writes a run's folder: `hist/*.hlog`, optional `requests.csv`, and
/// `summary.json` last (its presence marks the run finished).
pub fn write_run(
    dir: &Path,
    s: &Summary,
    r: &RunResult,
    save_requests: bool,
) -> Result<(), ResultError> {
    write_run_explained(dir, s, r, save_requests, None)
}

/// [`write_run`] with each request's anatomy (by request index) as the records' `x_*`
/// columns (`record.explain`).
pub fn write_run_explained(
    dir: &Path,
    s: &Summary,
    r: &RunResult,
    save_requests: bool,
    anatomy: Option<&[crate::sections::AnatomyRow]>,
) -> Result<(), ResultError> {
    ensure_writable(dir)?;
    let hist = dir.join("hist");
    std::fs::create_dir_all(&hist).map_err(werr(&hist))?;
    let start =
        r.wall_start + std::time::Duration::from_nanos(r.measure_start.saturating_sub(r.t0));
    let start_s = start
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let iv = r.spec.interval_ns as f64 / 1e9;
    for (m, name) in METRICS.iter().enumerate() {
        let path = hist.join(format!("{name}.hlog"));
        let mut out = String::new();
        out.push_str(&format!(
            "#[taillab {} {}: {} of {} ({}), ns]\n",
            env!("CARGO_PKG_VERSION"),
            s.app,
            name,
            s.app,
            s.config
        ));
        out.push_str("#[Histogram log format version 1.3]\n");
        out.push_str(&format!(
            "#[StartTime: {start_s:.3} (seconds since epoch), {}]\n",
            rfc3339(start)
        ));
        out.push_str(&format!(
            "#[BaseTime: {start_s:.3} (seconds since epoch)]\n"
        ));
        out.push_str("#[MaxValueDivisor: 1000000.0]\n");
        out.push_str("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
        for b in &r.intervals {
            out.push_str(&format!(
                "Tag={name},{:.3},{:.3},{:.3},{}\n",
                b.index as f64 * iv,
                iv,
                b.max[m] as f64 / 1e6,
                b.hist_b64[m]
            ));
        }
        std::fs::write(&path, out).map_err(werr(&path))?;
    }
    if save_requests {
        if let Some(rec) = &r.records {
            // The ideal's completion of each request, when the run has an ideal.
            let mut ideal = Vec::new();
            let with_ideal = s.ideal.is_some()
                && crate::ideal::ideal_of_run(r, &s.latency_ns["sojourn"], Some(&mut ideal))
                    .is_ok();
            write_records(
                dir,
                r.spec.record_format,
                rec,
                with_ideal.then_some(&ideal[..]),
                anatomy,
            )?;
        }
    }
    write_json_atomic(&dir.join("summary.json"), s)
}

/// Writes `rec` as `dir/requests.csv` or `dir/requests.parquet`, streaming (the Parquet
/// writer holds one row group, see [`crate::reqfile`]).
fn write_records(
    dir: &Path,
    format: crate::reqfile::RequestFormat,
    rec: &crate::records::Records,
    ideal: Option<&[u64]>,
    anatomy: Option<&[crate::sections::AnatomyRow]>,
) -> Result<(), ResultError> {
    use crate::reqfile::{Extra, Row, RowWriter};
    let path = dir.join(crate::reqfile::file_name(format));
    let extra = Extra {
        ideal: ideal.is_some(),
        anatomy: anatomy.is_some(),
        sender: None,
    };
    let go = || -> std::io::Result<()> {
        let mut w = RowWriter::create(dir, format, extra)?;
        for (i, wk, measured, st) in rec.iter() {
            w.push(&Row {
                id: i,
                worker: wk as u64,
                stamps: st,
                measured,
                ideal_completed: ideal.map(|v| v[i as usize]),
                sender: None,
                anatomy: anatomy.and_then(|a| a.get(i as usize)).copied(),
            })?;
        }
        w.finish()
    };
    go().map_err(werr(&path))
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

/// Width of the row names of [`human_table`]: every row lines up under the header.
const ROW: usize = 16;

/// The short human table printed after a run: one verdict line first, then what ran, the
/// latency rows (a quantity the run did not measure says so instead of reading 0), the ideal
/// and its excess, and every check.
pub fn human_table(s: &Summary) -> String {
    let mut o = verdict_line(s);
    o.push_str(&run_lines(s));
    o.push_str(&format!(
        "{:<ROW$}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n",
        "", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"
    ));
    let external = s.transport.as_ref().is_some_and(|t| !t.server_timed);
    for m in METRICS {
        let Some(x) = s.latency_ns.get(m) else {
            continue;
        };
        if m.ends_with("recv_lag") && x.max == 0 {
            // No socket (integrated) or no kernel stamps: nothing to show.
            continue;
        }
        if external && matches!(m, "service" | "queue" | "server_recv_lag") {
            o.push_str(&format!(
                "{m:<ROW$}{:>11}\n",
                "n/a (external server: only sojourn is seen)"
            ));
            continue;
        }
        o.push_str(&stat_row(m, x.mean, |q| stat_of(x, q)));
    }
    if let Some(i) = &s.ideal {
        let x = &i.sojourn;
        o.push_str(&stat_row("ideal", x.mean, |q| stat_of(x, q)));
        let e = |k: &str| i.excess.get(k).copied().unwrap_or(f64::NAN);
        o.push_str(&stat_row("excess", e("mean"), |q| e(q)));
    } else if external {
        o.push_str(&format!(
            "{:<ROW$}{:>11}\n",
            "ideal", "n/a (external server: no service times to replay)"
        ));
    }
    for (name, c) in &s.checks {
        o.push_str(&format!(
            "check {:<13} {}  {}\n",
            name,
            if c.ok { "ok  " } else { "FAIL" },
            c.verdict
        ));
    }
    o
}

/// The table's first line: whether every check passed, and what a failure means.
fn verdict_line(s: &Summary) -> String {
    let failed: Vec<&str> = s
        .checks
        .iter()
        .filter(|(_, c)| !c.ok)
        .map(|(n, _)| n.as_str())
        .collect();
    if failed.is_empty() {
        return format!("verdict: every check passed ({})\n", s.checks.len());
    }
    format!(
        "verdict: {} of {} checks FAILED ({}): the numbers below describe this run, not necessarily the system; --strict exits 1 on a failed check, --redo-disturbed N redoes a run the environment check failed\n",
        failed.len(),
        s.checks.len(),
        failed.join(", ")
    )
}

/// What ran: app, configuration, load, and how much was measured.
fn run_lines(s: &Summary) -> String {
    let params = if s.params.iter().next().is_some() {
        format!(" ({})", s.params)
    } else {
        String::new()
    };
    let mut o = format!(
        "{}{} · {} · {} thread{} · {} {:.0} qps · wait {} · shaper {}\n",
        s.app,
        params,
        s.config,
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        s.arrival,
        s.offered_qps,
        s.wait,
        s.shaper
    );
    if let Some(p) = &s.placement {
        o.push_str(&format!("placement: {}\n", p.describe()));
    }
    if let Some(f) = &s.fanout {
        o.push_str(&format!("{}\n", f.describe()));
    }
    if let Some(c) = s.transport.as_ref().and_then(|t| t.capped.as_ref()) {
        o.push_str(&format!(
            "CAPPED, sojourn timed from the actual send: {}\n",
            c.note
        ));
    }
    let external = s.transport.as_ref().is_some_and(|t| !t.server_timed);
    let utilization = if external {
        "n/a (external server)".to_string()
    } else {
        format!("{:.2}", s.utilization)
    };
    o.push_str(&format!(
        "{} measured ({} warmup) over {:.1} s · achieved {:.1} qps · utilization {}{}\n",
        s.requests.measured,
        s.requests.warmup,
        s.duration_s,
        s.achieved_qps,
        utilization,
        if s.requests.unfinished > 0 {
            format!(" · {} UNFINISHED", s.requests.unfinished)
        } else {
            String::new()
        }
    ));
    o
}

/// A statistic of `x` by its summary key (`p50`, …, `max`).
fn stat_of(x: &MetricStats, q: &str) -> f64 {
    (match q {
        "p50" => x.p50,
        "p90" => x.p90,
        "p95" => x.p95,
        "p99" => x.p99,
        "p999" => x.p999,
        _ => x.max,
    }) as f64
}

/// One row of the table: `name`, then mean, p50, p90, p95, p99, p99.9 and max.
fn stat_row(name: &str, mean: f64, stat: impl Fn(&str) -> f64) -> String {
    use crate::dist::fmt_ns;
    let cells: String = ["p50", "p90", "p95", "p99", "p999", "max"]
        .iter()
        .map(|q| format!("{:>11}", fmt_ns(stat(q))))
        .collect();
    format!("{name:<ROW$}{:>11}{cells}\n", fmt_ns(mean))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repository's root (tests/data, docs/schema).
    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    /// A copy of `tests/data/run-v1/summary.json` (a real `taillab.run/1` file)
    /// with `edit` applied, written into a temporary folder.
    fn edited_v1(tag: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
        let src = root().join("tests/data/run-v1/summary.json");
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
        edit(&mut v);
        let dir =
            std::env::temp_dir().join(format!("taillab-summary-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("summary.json");
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        p
    }

    #[test]
    fn the_checked_in_schema_is_the_one_the_types_generate() {
        let want = serde_json::to_string_pretty(&run_schema()).unwrap() + "\n";
        // The Python package carries its own copy: it is installed without docs/.
        for rel in ["docs/schema/run-2.json", "python/taillab/schema/run-2.json"] {
            let p = root().join(rel);
            if std::env::var_os("TAILLAB_BLESS").is_some() {
                std::fs::create_dir_all(p.parent().unwrap()).unwrap();
                std::fs::write(&p, &want).unwrap();
            }
            let have = std::fs::read_to_string(&p).unwrap_or_default();
            assert!(
                have == want,
                "{rel} is not the schema the types in core/src/summary.rs and core/src/sections/ generate; \
                 regenerate it with `TAILLAB_BLESS=1 cargo test --release -p taillab-core checked_in_schema` \
                 (or `taillab config schema run > {rel}`) and commit it with the change of the types"
            );
        }
    }

    #[test]
    fn a_run_1_file_still_reads() {
        let p = root().join("tests/data/run-v1/summary.json");
        let s = Summary::read(&p).unwrap();
        assert_eq!(s.schema, "taillab.run/1");
        assert!(s.latency_ns["sojourn"].count > 0);
        assert!(s.environment.is_none() && s.transport.is_none());
    }

    #[test]
    fn interarrival_judges_the_schedule_and_the_wire_within_the_send_lag() {
        use crate::arrival::ArrivalSpec;
        use crate::collector::Stamps;
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let mean = 50_000.0; // 20 000 requests/s
        let mut t = 1e9;
        let intended: Vec<u64> = (0..20_000)
            .map(|_| {
                t += -mean * (1.0 - rng.gen::<f64>()).ln();
                t as u64
            })
            .collect();
        // One client thread: a write costs 8 µs, so a request due sooner after the last
        // write waits for it and leaves with the next one (the wire's gaps alone fail a
        // plain fit to the exponential; they are within the send lag of the schedule).
        let mut free = 0u64;
        let wire: Vec<Stamps> = intended
            .iter()
            .map(|&i| {
                let sent = i.max(free);
                free = sent + 8_000;
                Stamps {
                    intended: i,
                    sent,
                    ..Stamps::default()
                }
            })
            .collect();
        let lag = |st: &[Stamps]| {
            let mut l: Vec<u64> = st.iter().map(|s| s.sent - s.intended).collect();
            l.sort_unstable();
            l[l.len() * 99 / 100]
        };
        let c = interarrival_of(&wire, &ArrivalSpec::Poisson, 20_000.0, lag(&wire));
        assert!(c.ok, "{}", c.verdict);
        assert!(
            c.details["send_gaps_d"].as_f64().unwrap() > 0.02,
            "{:?}",
            c.details
        );
        // A schedule that is not Poisson fails on its own gaps, however well it is sent.
        let fixed: Vec<Stamps> = (0..20_000u64)
            .map(|k| Stamps {
                intended: k * 50_000,
                sent: k * 50_000,
                ..Stamps::default()
            })
            .collect();
        let c = interarrival_of(&fixed, &ArrivalSpec::Poisson, 20_000.0, 0);
        assert!(
            !c.ok && c.details["p_value"].as_f64().unwrap() < 1e-6,
            "{}",
            c.verdict
        );
        // A wire that sends every request in bursts of four (held up to 200 µs, beyond a
        // send lag p99 said to be 1 µs) fails against the schedule.
        let bursts: Vec<Stamps> = intended
            .chunks(4)
            .flat_map(|c| {
                let last = *c.last().unwrap();
                c.iter().map(move |&i| Stamps {
                    intended: i,
                    sent: last,
                    ..Stamps::default()
                })
            })
            .collect();
        let c = interarrival_of(&bursts, &ArrivalSpec::Poisson, 20_000.0, 1_000);
        assert!(
            !c.ok && c.details["wire_p_value"].as_f64().unwrap() < 1e-6,
            "{}",
            c.verdict
        );
    }

    #[test]
    fn the_table_leads_with_its_verdict_lines_up_and_says_what_was_not_measured() {
        let mut s = Summary::read(&root().join("tests/data/run-v1/summary.json")).unwrap();
        let t = human_table(&s);
        let first = t.lines().next().unwrap();
        let failed: Vec<&String> = s
            .checks
            .iter()
            .filter(|(_, c)| !c.ok)
            .map(|(n, _)| n)
            .collect();
        if failed.is_empty() {
            assert!(first.starts_with("verdict: every check passed"), "{first}");
        } else {
            assert!(
                first.contains("FAILED") && first.contains("--strict"),
                "{first}"
            );
        }
        // Every statistics row (the header's columns, the metrics, the ideal and its excess)
        // is as wide as the header: the columns line up.
        let header = t
            .lines()
            .find(|l| l.trim_start().starts_with("mean"))
            .unwrap();
        let rows: Vec<&str> = t
            .lines()
            .filter(|l| {
                METRICS
                    .iter()
                    .chain(&["ideal", "excess"])
                    .any(|m| l.starts_with(&format!("{m} ")))
            })
            .collect();
        assert!(rows.len() >= 4, "{t}");
        for r in &rows {
            assert_eq!(r.len(), header.len(), "{r:?} under {header:?}");
        }
        // An external server: only sojourn is seen, and the table says so rather than 0.
        s.checks.get_mut("rate").unwrap().ok = false;
        s.transport = Some(crate::sections::transport::TransportSection::default());
        s.drop_ideal_of_external_server();
        let t = human_table(&s);
        assert!(t.lines().next().unwrap().contains("FAILED (rate"), "{t}");
        for m in ["service", "queue", "ideal"] {
            let row = t.lines().find(|l| l.starts_with(&format!("{m} "))).unwrap();
            assert!(row.contains("n/a (external server"), "{row}");
        }
        assert!(t.contains("utilization n/a (external server)"), "{t}");
        assert!(s.ideal.is_none() && s.ideal_skipped.is_some());
    }

    #[test]
    fn every_section_reads_back_as_written() {
        use crate::sections::{environment::*, planned::*, transport::*, RoiSection};
        let mut s = Summary::read(&root().join("tests/data/run-v1/summary.json")).unwrap();
        s.schema = RUN_SCHEMA.into();
        s.counters = Some(Default::default());
        s.environment = Some(EnvSummary {
            top_foreign: vec![ForeignProcess {
                name: "cron".into(),
                cpu_pct: 1.5,
                pids: vec![7],
                cmdline: None,
            }],
            ..Default::default()
        });
        s.environment_redo = Some(EnvironmentRedo {
            redone: 1,
            budget: 2,
            discarded: vec![DiscardedRun::default()],
        });
        s.incomplete = Some("server lost".into());
        s.interference = Some(Default::default());
        s.nodes = Some(vec![
            NodeReport {
                node: "n1".into(),
                roles: vec!["server".into()],
                outcome: NodeOutcome::Env(NodeEnv {
                    ok: true,
                    ..Default::default()
                }),
            },
            NodeReport {
                node: "n2".into(),
                roles: vec![],
                outcome: NodeOutcome::Error {
                    error: "gone".into(),
                },
            },
        ]);
        s.profile = Some(ProfileOutcome::Skipped {
            reason: "no perf".into(),
        });
        s.roi = Some(RoiSection {
            mode: crate::roi::RoiMode::Zsim,
            issued: Default::default(),
        });
        s.server = Some(Default::default());
        s.stalls = None;
        let counted = StampCounts {
            user: 3,
            ..Default::default()
        };
        s.transport = Some(TransportSection {
            stamps: Some(StampSources {
                enqueued: StampSource::clock("not reported"),
                completed: StampSource::counted(&counted),
                ..Default::default()
            }),
            per_client: Some(vec![ClientShare::default()]),
            ..Default::default()
        });
        s.tuning = Some(Default::default());
        let dir = std::env::temp_dir().join(format!("taillab-sections-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("summary.json");
        write_json_atomic(&p, &s).unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        // The JSON shapes readers rely on.
        assert_eq!(
            v["transport"]["stamps"]["enqueued"],
            json!({"clock": "not reported"})
        );
        assert_eq!(v["transport"]["stamps"]["completed"]["user"], 3);
        assert_eq!(
            v["nodes"][1],
            json!({"node": "n2", "roles": [], "error": "gone"})
        );
        assert_eq!(
            v["profile"],
            json!({"status": "skipped", "reason": "no perf"})
        );
        assert_eq!(Summary::read(&p).unwrap(), s);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn a_key_of_the_wrong_shape_is_named() {
        for (path, tag) in [
            (
                &["latency_ns", "sojourn", "p99"][..],
                "latency_ns.sojourn.p99",
            ),
            (&["requests", "measured"][..], "requests.measured"),
        ] {
            let p = edited_v1(tag, |v| {
                let mut at = v;
                for k in path {
                    at = &mut at[*k];
                }
                *at = json!("abc");
            });
            let e = Summary::read(&p).unwrap_err().to_string();
            assert!(
                e.contains(&p.display().to_string()) && e.contains(tag),
                "{e}"
            );
        }
        let p = edited_v1("env", |v| {
            v["environment"] = json!({"steal_pct": "abc"});
        });
        let e = Summary::read(&p).unwrap_err().to_string();
        assert!(e.contains("environment"), "{e}");
        let p = edited_v1("schema", |v| v["schema"] = json!("taillab.run/99"));
        let e = Summary::read(&p).unwrap_err().to_string();
        assert!(
            e.contains("taillab.run/99") && e.contains("taillab.run/2"),
            "{e}"
        );
    }

    #[test]
    fn rfc3339_known_dates() {
        let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(t(1_795_305_600)), "2026-11-22T00:00:00.000Z");
    }

    #[test]
    fn client_check_fails_on_a_late_reader_only() {
        let st = |p50: u64, p99: u64| MetricStats {
            count: 100,
            p50,
            p99,
            max: p99,
            ..Default::default()
        };
        let soj = st(100_000, 300_000);
        // Small lag: within the absolute floor.
        assert!(client_check(&st(2_000, 40_000), &soj, 50_000, 0.5, None).ok);
        // Large next to the floor but small next to the latency measured.
        assert!(
            client_check(
                &st(2_000, 49_000),
                &st(1_000_000, 2_000_000),
                20_000,
                0.5,
                None
            )
            .ok
        );
        let bad = client_check(&st(900_000, 1_500_000), &soj, 50_000, 0.5, None);
        assert!(
            !bad.ok && bad.verdict.contains("--client-cpus"),
            "{}",
            bad.verdict
        );
        let fb = client_check(
            &MetricStats::default(),
            &soj,
            50_000,
            0.5,
            Some("no kernel stamps"),
        );
        assert!(fb.ok && fb.verdict.contains("not measured"));
    }

    #[test]
    fn slope_of_a_line() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert!((slope(&xs, &[3.0, 5.0, 7.0, 9.0]) - 2.0).abs() < 1e-12);
        assert_eq!(slope(&[1.0], &[1.0]), 0.0);
    }
}
