//! `anatomy`: each slow request explained from one run's kernel events (`record.explain`),
//! as taillab-explain joins them with the requests' stamps.
//!
//! Every request's sojourn is cut into [`PARTS`] that sum to it (checked for every request:
//! [`SumCheck`]); the tail groups say what share of their excess over the median request
//! each part holds and which tasks and interrupts took the time ([`Culprit`]).
//!
//! Schema [`ANATOMY_SCHEMA`]: `{schema, traced{cpus, tracepoints, missing, workers},
//! cost{events, events_per_s, lost, unknown_ns, drainer_cpu_s, ns_per_event, ...},
//! fault_ns, sum_check, threads[], groups[{label, quantile, threshold_ns, requests, excess_ns,
//! share{part}, tail_ns{part}, median_ns{part}, faults, culprits[]}], worst{pieces[]}}`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `schema` of the `anatomy` section. History: `taillab.anatomy/1` — first version.
pub const ANATOMY_SCHEMA: &str = "taillab.anatomy/1";

/// The parts of a request's sojourn, in the order of its life; they sum to the sojourn.
///
/// - `lag`: `[intended, sent)` with the worker (or sender) on its CPU: the harness late.
/// - `queue`: `[enqueued, started)` with the worker on its CPU: serving earlier requests.
/// - `transport`: `[sent, enqueued)` and `[finished, completed)`: the wire (integrated: 0
///   unless `net.delay`).
/// - `run`: `[started, finished)` on the CPU: the request's own CPU time (less `fault`).
/// - `fault`: the estimated time of the user page faults taken while serving it
///   (count × the host's measured cost of one, `fault_ns`; carved out of `run`).
/// - `preempted`: runnable while another task ran on the CPU.
/// - `wakeup`: runnable on an idle CPU after a wake-up (the scheduler's and the CPU's
///   wake-up delay).
/// - `blocked`: asleep (S) or in D state, until whoever woke it.
/// - `irq`: hard interrupts, the local timer and IPIs on the CPU.
/// - `softirq`: soft interrupts (NET_RX, TIMER, RCU, …), in any context.
/// - `unknown`: no trace covers it (lost records, before the tracer started).
///
/// The partition covers every phase: a request queued while its worker was preempted has
/// that time under `preempted`, not `queue`.
pub const PARTS: [&str; 11] = [
    "lag",
    "queue",
    "transport",
    "run",
    "fault",
    "preempted",
    "wakeup",
    "blocked",
    "irq",
    "softirq",
    "unknown",
];

/// Number of [`PARTS`].
pub const NPARTS: usize = PARTS.len();

/// The per-request columns `record.explain` adds to the records files: `x_<part>` for each
/// of [`PARTS`] (ns), the page faults counted while serving (`x_faults`) and the task that
/// took most of the request's time by preempting or waking it (`x_culprit_pid`, 0: none).
pub const COLUMNS: [&str; NPARTS + 2] = [
    "x_lag",
    "x_queue",
    "x_transport",
    "x_run",
    "x_fault",
    "x_preempted",
    "x_wakeup",
    "x_blocked",
    "x_irq",
    "x_softirq",
    "x_unknown",
    "x_faults",
    "x_culprit_pid",
];

/// One request's [`COLUMNS`], in their order.
pub type AnatomyRow = [u64; NPARTS + 2];

/// The whole `anatomy` section.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Anatomy {
    /// [`ANATOMY_SCHEMA`].
    pub schema: String,
    /// What was traced.
    pub traced: Traced,
    /// What tracing cost.
    pub cost: TraceCost,
    /// Estimated cost of one user page fault on this host (ns), measured before the run
    /// (a page dropped and touched again); fault time is this × the faults counted.
    pub fault_ns: f64,
    /// Whether every request's parts summed to its sojourn.
    pub sum_check: SumCheck,
    /// Each measured thread's time over the measured phase, by part of [`ThreadParts`].
    pub threads: Vec<ThreadParts>,
    /// The requests above p99 and above p99.9.
    pub groups: Vec<TailGroup>,
    /// The slowest measured request, piece by piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worst: Option<Timeline>,
}

/// The CPUs and tracepoints a run traced.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Traced {
    /// CPUs whose tasks, interrupts and faults were traced (the measured threads').
    pub cpus: Vec<usize>,
    /// The CPU the drainer ran on, when it had one to itself.
    pub drainer_cpu: Option<usize>,
    /// Tracepoints opened, `sys:name`.
    pub tracepoints: Vec<String>,
    /// Optional tracepoints this kernel lacks (their time shows as the task's own).
    pub missing: Vec<String>,
    /// The measured threads.
    pub workers: Vec<WorkerThread>,
}

/// A measured thread.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
pub struct WorkerThread {
    /// Worker index (the records' `worker`).
    pub worker: usize,
    /// Kernel thread id.
    pub tid: u32,
}

/// What tracing cost.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TraceCost {
    /// Events recorded.
    pub events: u64,
    /// Events per second of tracing.
    pub events_per_s: f64,
    /// Records the kernel dropped (PERF_RECORD_LOST); their windows are `unknown`.
    pub lost: u64,
    /// Windows marked unknown for lost records.
    pub lost_windows: u64,
    /// The drainer thread's CPU time (s).
    pub drainer_cpu_s: f64,
    /// Drainer CPU per event (ns): reading and decoding, not the kernel's cost of writing.
    pub drainer_ns_per_event: f64,
    /// Seconds traced.
    pub traced_s: f64,
    /// Bytes of ring per traced CPU.
    pub ring_bytes: u64,
    /// Events beyond the tracer's memory cap were not kept (the rest of the run is unknown).
    pub truncated: bool,
}

/// Whether the parts of every request summed to its sojourn.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SumCheck {
    /// Requests checked (all that completed).
    pub requests: u64,
    /// Requests whose parts did not sum to their sojourn (a join bug if not 0).
    pub mismatched: u64,
    /// The first mismatch, when any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
}

/// One measured thread's time over the measured phase (ns).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ThreadParts {
    /// Worker index.
    pub worker: usize,
    /// Kernel thread id.
    pub tid: u32,
    /// On its CPU serving a request.
    pub serving_ns: u64,
    /// On its CPU with no request (waiting for one: spinning, or the harness's own work).
    pub idle_ns: u64,
    /// Runnable while another task ran.
    pub preempted_ns: u64,
    /// Runnable on an idle CPU after a wake-up.
    pub wakeup_ns: u64,
    /// Asleep or in D state.
    pub blocked_ns: u64,
    /// In hard interrupts, the timer and IPIs.
    pub irq_ns: u64,
    /// In soft interrupts.
    pub softirq_ns: u64,
    /// Not covered by the trace.
    pub unknown_ns: u64,
}

/// The requests above one quantile of sojourn, against the median request.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct TailGroup {
    /// `p99`, `p99.9`.
    pub label: String,
    /// The quantile in [0, 1].
    pub quantile: f64,
    /// Requests above this sojourn (ns) are in the group.
    pub threshold_ns: u64,
    /// Requests in the group.
    pub requests: u64,
    /// Mean sojourn of the group (ns).
    pub sojourn_ns: f64,
    /// Mean sojourn of the median requests (those between p45 and p55), ns.
    pub median_sojourn_ns: f64,
    /// `sojourn_ns − median_sojourn_ns`: the excess the shares divide.
    pub excess_ns: f64,
    /// Each part's share of the excess: (group mean − median mean) ÷ excess; they sum to 1
    /// (a part smaller in the tail than at the median has a negative share).
    pub share: BTreeMap<String, f64>,
    /// Each part's mean in the group (ns).
    pub tail_ns: BTreeMap<String, f64>,
    /// Each part's mean in the median requests (ns).
    pub median_ns: BTreeMap<String, f64>,
    /// Mean user page faults per request while serving, in the group.
    pub faults: f64,
    /// Mean user page faults per request while serving, in the median requests.
    pub median_faults: f64,
    /// Who took the group's time, most first (at most 8).
    pub culprits: Vec<Culprit>,
}

/// A task or interrupt that took time from slow requests.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Culprit {
    /// How: `preempted` (ran while the request's thread was runnable), `woke` (woke it
    /// from a sleep: the time asleep), `irq`, `softirq`, `wakeup` (an idle CPU waking).
    pub how: String,
    /// The task's command or the interrupt's name (`NET_RX`, `local timer`, `virtio0-input.0`).
    pub name: String,
    /// The task's id, the kernel's pid of a thread (tasks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// A thread of the measured process itself (the harness's own: its main thread,
    /// helpers, another worker), as the samples' process ids say.
    #[serde(default)]
    pub own: bool,
    /// Time it took from the group's requests, summed (ns).
    pub total_ns: u64,
    /// The group's requests it touched.
    pub requests: u64,
}

/// One request's life, piece by piece.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Timeline {
    /// The request's id.
    pub id: u64,
    /// The worker that served it.
    pub worker: usize,
    /// Its sojourn (ns).
    pub sojourn_ns: u64,
    /// Its pieces in order, from its intended time.
    pub pieces: Vec<Piece>,
    /// User page faults taken while serving it.
    pub faults: u64,
}

/// A stretch of one request's life in one part.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Piece {
    /// Start, ns after the request's intended time.
    pub start_ns: u64,
    /// Length (ns).
    pub len_ns: u64,
    /// One of [`PARTS`].
    pub part: String,
    /// Who, where a part has one (`preempted by hog (pid 7)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub culprit: Option<String>,
}

impl Anatomy {
    /// The lines `taillab explain` prints: each group's shares and culprits.
    pub fn table(&self) -> String {
        use crate::dist::fmt_ns;
        let mut o = String::new();
        let c = &self.cost;
        o.push_str(&format!(
            "traced CPUs {:?}: {} events ({:.0}/s), {} lost; drainer {:.1} % of a CPU ({:.0} ns/event); sum check: {} of {} requests mismatched\n",
            self.traced.cpus,
            c.events,
            c.events_per_s,
            c.lost,
            100.0 * c.drainer_cpu_s / c.traced_s.max(1e-9),
            c.drainer_ns_per_event,
            self.sum_check.mismatched,
            self.sum_check.requests
        ));
        for g in &self.groups {
            o.push_str(&format!(
                "\nabove {} ({} requests, > {}): mean {} vs median {}, excess {}\n",
                g.label,
                g.requests,
                fmt_ns(g.threshold_ns as f64),
                fmt_ns(g.sojourn_ns),
                fmt_ns(g.median_sojourn_ns),
                fmt_ns(g.excess_ns)
            ));
            let mut parts: Vec<_> = g.share.iter().collect();
            parts.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
            for (p, s) in parts.into_iter().filter(|(_, s)| s.abs() >= 0.005) {
                o.push_str(&format!(
                    "  {p:<10} {:>6.1} %   tail {:>9}  median {:>9}\n",
                    100.0 * s,
                    fmt_ns(g.tail_ns[p]),
                    fmt_ns(g.median_ns[p])
                ));
            }
            o.push_str(&format!(
                "  page faults per request: {:.1} (median {:.1}; fault time estimated at {} each)\n",
                g.faults,
                g.median_faults,
                fmt_ns(self.fault_ns)
            ));
            for k in &g.culprits {
                let pid = k.pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
                let pid = if k.own { pid + " [this run's]" } else { pid };
                o.push_str(&format!(
                    "  {:<9} {}{pid}: {} over {} requests\n",
                    k.how,
                    k.name,
                    fmt_ns(k.total_ns as f64),
                    k.requests
                ));
            }
        }
        o
    }
}
