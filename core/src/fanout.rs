//! Fan-out: one request split over N leaves, answered when all of them (or the first K)
//! have; hedged and tied requests over R replicas of each leaf ("The Tail at Scale").
//!
//! A leaf that is slow with probability p makes a request that waits for N leaves slow with
//! probability 1 − (1 − p)^N: the tail of the whole is an order statistic of its leaves'.
//! Two remedies are modelled and measured:
//! - **hedged** requests (`hedge = after=D` or `after=pQ`): when a leaf's sub-request has not
//!   answered D after it was sent (or the running Q-quantile of a leaf's latency), a copy goes
//!   to the next replica; the first answer wins and the copy still queued is cancelled. The
//!   extra load is the copies served per sub-request.
//! - **tied** requests (`tied`): both replicas get the sub-request at once; the first to start
//!   it cancels the other's copy. A worker claims a tied sub-request atomically, so a copy
//!   that finds its twin started is dropped however soon after (two real servers would both
//!   run it within their cancellation message's delay): on idle replicas the primary runs and
//!   the twin is cancelled, and tying helps only where a copy would wait in a queue.
//!
//! [`FanoutSpec`] is the configuration (`[fanout]`), [`simulate`] the exact discrete-event
//! model: N×R servers with W workers each, FIFO, every copy its own service draw. It is
//! `taillab model --fanout` and the ideal of a fan-out run (the run's own arrivals, service
//! times drawn from the run's measured copies).

use crate::collector::MetricStats;
use crate::config::value::{ConfigValue, Dur};
use hdrhistogram::Histogram;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// When a fanned-out request is answered: all leaves, or the first K.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FanoutWait {
    /// Every leaf's answer.
    #[default]
    All,
    /// The first K answers.
    First(usize),
}

impl FanoutWait {
    /// Answers needed out of `leaves`.
    pub fn needed(&self, leaves: usize) -> usize {
        match self {
            FanoutWait::All => leaves,
            FanoutWait::First(k) => *k,
        }
    }
}

impl std::fmt::Display for FanoutWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FanoutWait::All => write!(f, "all"),
            FanoutWait::First(k) => write!(f, "k={k}"),
        }
    }
}

impl std::str::FromStr for FanoutWait {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let s = s.trim();
            if s == "all" {
                return Ok(FanoutWait::All);
            }
            let k = s
                .strip_prefix("k=")
                .and_then(|k| k.parse::<usize>().ok())
                .ok_or_else(|| format!("`{s}`: say `all` or `k=K` (the first K answers)"))?;
            if k == 0 {
                return Err("k=0 waits for nothing: K must be at least 1".into());
            }
            Ok(FanoutWait::First(k))
        })
    }
}

/// When a second copy of a sub-request goes to another replica.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Hedge {
    /// Never.
    #[default]
    None,
    /// After this long without an answer (ns).
    After(u64),
    /// After the running quantile q (in (0, 1)) of a leaf's latency.
    Quantile(f64),
}

impl std::fmt::Display for Hedge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hedge::None => write!(f, "none"),
            Hedge::After(ns) => write!(f, "after={}", Dur(*ns).show()),
            Hedge::Quantile(q) => {
                // 0.95 → p95, 0.999 → p99.9
                let p = format!("{:.4}", q * 100.0);
                write!(
                    f,
                    "after=p{}",
                    p.trim_end_matches('0').trim_end_matches('.')
                )
            }
        }
    }
}

impl std::str::FromStr for Hedge {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let s = s.trim();
            if s == "none" {
                return Ok(Hedge::None);
            }
            let bad = || {
                format!("`{s}`: say `none`, `after=2ms` (a delay) or `after=p95` (a running quantile of the leaf's latency)")
            };
            let v = s.strip_prefix("after=").ok_or_else(bad)?;
            if let Some(q) = v.strip_prefix('p') {
                let q: f64 = q.parse().map_err(|_| bad())?;
                // p95 → 0.95, p99.9 → 0.999
                let q = q / 100.0;
                if !(q > 0.0 && q < 1.0) {
                    return Err(format!("`{s}`: the quantile must be between p0 and p100"));
                }
                return Ok(Hedge::Quantile(q));
            }
            let ns = Dur::parse(v).map_err(|_| bad())?.0;
            if ns == 0 {
                return Err(format!(
                "`{s}`: a hedge delay must be positive (it is how long to wait before the copy)"
            ));
            }
            Ok(Hedge::After(ns))
        })
    }
}

impl ConfigValue for FanoutWait {
    const FORM: &'static str = "all, or k=K (the first K answers)";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for Hedge {
    const FORM: &'static str = "none, after=DURATION (e.g. after=2ms) or after=pQ (e.g. after=p95)";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

fn ser_display<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

/// A fan-out (`[fanout]`): leaves, replicas, when a request is answered, hedging, tying.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize)]
pub struct FanoutSpec {
    /// Leaves a request is split over (1: no fan-out).
    pub leaves: usize,
    /// Replicas of each leaf.
    pub replicas: usize,
    /// All answers or the first K.
    #[serde(serialize_with = "ser_display")]
    pub wait: FanoutWait,
    /// Hedged copies.
    #[serde(serialize_with = "ser_display")]
    pub hedge: Hedge,
    /// Tied copies.
    pub tied: bool,
}

/// An empty histogram of ns (1 ns to 60 s at 3 significant digits, growing beyond).
fn hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// Sub-requests of the first requests whose latencies set a quantile hedge's delay before it
/// hedges at all (and how often the delay is recomputed after that).
pub const HEDGE_LEARN: u64 = 500;

impl FanoutSpec {
    /// Whether this is a fan-out at all (more than one leaf or replica).
    pub fn is_on(&self) -> bool {
        self.leaves > 1 || self.replicas > 1 || self.tied || self.hedge != Hedge::None
    }

    /// No fan-out: one leaf, one replica, all answers, no copies (the configuration's default).
    pub fn default_one() -> Self {
        FanoutSpec {
            leaves: 1,
            replicas: 1,
            ..Default::default()
        }
    }

    /// Answers a request needs.
    pub fn needed(&self) -> usize {
        self.wait.needed(self.leaves)
    }

    /// Servers in all (leaves × replicas).
    pub fn servers(&self) -> usize {
        self.leaves * self.replicas
    }

    /// Checks the combination; the message names the setting to change.
    pub fn validate(&self) -> Result<(), crate::error::Invalid> {
        self.check().map_err(crate::error::Invalid)
    }

    fn check(&self) -> Result<(), String> {
        if self.leaves == 0 || self.leaves > 1024 {
            return Err(format!(
                "--fanout must be in 1..=1024 leaves, got {}",
                self.leaves
            ));
        }
        if self.replicas == 0 || self.replicas > 16 {
            return Err(format!(
                "--replicas must be in 1..=16, got {}",
                self.replicas
            ));
        }
        if let FanoutWait::First(k) = self.wait {
            if k > self.leaves {
                return Err(format!(
                    "--fanout-wait k={k} waits for more answers than the {} leaves give: K must be at most --fanout",
                    self.leaves
                ));
            }
        }
        if (self.hedge != Hedge::None || self.tied) && self.replicas < 2 {
            return Err(format!(
                "{} sends a second copy to another replica: add --replicas 2 (or more)",
                if self.tied { "--tied" } else { "--hedge" }
            ));
        }
        if self.hedge != Hedge::None && self.tied {
            return Err(
                "--hedge and --tied are two ways to use a second replica: choose one".into(),
            );
        }
        Ok(())
    }
}

/// What [`simulate`] (or a fan-out run) found, over the counted requests.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FanoutStats {
    /// Requests counted (after the warmup).
    pub requests: u64,
    /// Latency of the whole request (ns): from its arrival to its K-th answer.
    pub e2e: MetricStats,
    /// The same from the request's release to its leaves (ns): its latency less the
    /// dispatcher's own lateness (the send lag), what the leaves and their copies made of it.
    #[serde(default)]
    pub e2e_released: MetricStats,
    /// Latency of a leaf's sub-request (ns): from the request's arrival to the leaf's first answer.
    pub leaf: MetricStats,
    /// Latency of one copy sent to one replica (ns): from its send to its answer.
    pub copy: MetricStats,
    /// Copies sent per sub-request (1 without hedging or tying).
    pub sent_per_sub: f64,
    /// Copies served (started) per sub-request: the load hedging or tying adds.
    pub served_per_sub: f64,
    /// Copies cancelled before they started, per sub-request.
    pub cancelled_per_sub: f64,
    /// Fraction of requests slower than the leaves' own p99 (sub-request latency).
    pub above_leaf_p99: f64,
    /// How late hedges' copies went out (ns): from the moment the delay ran out to the send.
    #[serde(default)]
    pub hedge_lag: MetricStats,
    /// How long a copy sent to an idle worker took to start (ns): the worker's wake-up.
    #[serde(default)]
    pub wake: MetricStats,
}

/// A fan-out run's `fanout` section of summary.json: the fan-out, what was measured (whole
/// requests, leaves, copies, the load copies added), each leaf's latency, and the model of the
/// same run (its own arrivals, service times drawn from its measured copies).
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct FanoutSummary {
    /// Leaves per request.
    pub leaves: usize,
    /// Replicas per leaf.
    pub replicas: usize,
    /// Workers per leaf replica.
    pub workers_per_replica: usize,
    /// `all` or `k=K`.
    pub wait: String,
    /// `none`, `after=D` or `after=pQ`.
    pub hedge: String,
    /// Tied copies.
    pub tied: bool,
    /// What the run measured.
    pub measured: FanoutStats,
    /// Each leaf's sub-request latency (ns), leaf by leaf.
    pub per_leaf: Vec<MetricStats>,
    /// The model of this run; `null` when no copy was measured.
    pub model: Option<FanoutStats>,
    /// The same model with one of the host's measured costs taken out at a time, then all of
    /// them: what each cost adds to the whole request's latency (the send lag, the hedges'
    /// lateness, the workers' wake-ups). Only costs the run had are listed; empty for a run of
    /// over 5 000 000 sub-requests (four more models would take minutes).
    #[serde(default)]
    pub model_without: Vec<ModelWithout>,
    /// Measured ÷ model of the whole request's latency: mean, p99, p999.
    pub ratio: std::collections::BTreeMap<String, f64>,
    /// 1 − 0.99^N: the fraction of requests above the leaves' p99 if leaves were independent.
    pub above_leaf_p99_independent: f64,
}

/// The fan-out model of a run with some of its measured costs taken out (a fan-out summary's
/// `model_without`).
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct ModelWithout {
    /// What was taken out: `send lag` (requests released at their arrivals), `hedge lag`
    /// (hedges' copies sent when their delay ran out), `wake-ups` (copies start when sent to an
    /// idle worker), or `all` (the three together: the host's costs, only service times left).
    pub without: String,
    /// The whole request's latency (ns) in that model.
    pub e2e: MetricStats,
}

impl FanoutSummary {
    /// Lines for the run's table: the fan-out, the leaves, the copies, against the model.
    pub fn describe(&self) -> String {
        use crate::dist::fmt_ns;
        let m = &self.measured;
        let mut s = format!(
            "fan-out: {} leaves × {} replica(s), answered by {}, hedge {}{} · leaf p50 {} p99 {} · above the leaf p99 {:.1} % (independent leaves {:.1} %) · copies per sub-request {:.3} sent, {:.3} served, {:.3} cancelled",
            self.leaves,
            self.replicas,
            self.wait,
            self.hedge,
            if self.tied { ", tied" } else { "" },
            fmt_ns(m.leaf.p50 as f64),
            fmt_ns(m.leaf.p99 as f64),
            m.above_leaf_p99 * 100.0,
            self.above_leaf_p99_independent * 100.0,
            m.sent_per_sub,
            m.served_per_sub,
            m.cancelled_per_sub
        );
        if let Some(md) = &self.model {
            s += &format!(
                "\nfan-out model: request p50 {} p99 {} p99.9 {} (measured ÷ model p99 {:.3})",
                fmt_ns(md.e2e.p50 as f64),
                fmt_ns(md.e2e.p99 as f64),
                fmt_ns(md.e2e.p999 as f64),
                self.ratio.get("p99").copied().unwrap_or(f64::NAN)
            );
        }
        if !self.model_without.is_empty() {
            let parts: Vec<String> = self
                .model_without
                .iter()
                .map(|w| format!("{} {}", w.without, fmt_ns(w.e2e.p999 as f64)))
                .collect();
            s += &format!(
                "\nfan-out model p99.9 without each host cost: {}",
                parts.join(", ")
            );
        }
        s
    }

    /// From a run's measurements and its model.
    pub fn new(
        spec: &FanoutSpec,
        workers_per_replica: usize,
        measured: FanoutStats,
        per_leaf: Vec<MetricStats>,
        model: Option<FanoutStats>,
    ) -> Self {
        let ratio = model
            .as_ref()
            .map(|m| {
                [
                    ("mean", measured.e2e.mean / m.e2e.mean),
                    ("p99", measured.e2e.p99 as f64 / m.e2e.p99 as f64),
                    ("p999", measured.e2e.p999 as f64 / m.e2e.p999 as f64),
                ]
                .into_iter()
                .filter(|(_, r)| r.is_finite())
                .map(|(k, r)| (k.to_string(), r))
                .collect()
            })
            .unwrap_or_default();
        FanoutSummary {
            leaves: spec.leaves,
            replicas: spec.replicas,
            workers_per_replica,
            wait: spec.wait.to_string(),
            hedge: spec.hedge.to_string(),
            tied: spec.tied,
            measured,
            per_leaf,
            model,
            model_without: Vec::new(),
            ratio,
            above_leaf_p99_independent: 1.0 - 0.99f64.powi(spec.leaves as i32),
        }
    }
}

/// What a fan-out run measured, before it is summarised: its fan-out, the workers' histograms
/// and counts, each leaf's latency, and every request's arrival (ns from the schedule's
/// start) for its model ([`crate::ideal::fanout_summary`]).
pub struct FanoutRun {
    /// The fan-out.
    pub spec: FanoutSpec,
    /// Workers of each leaf replica.
    pub workers_per_replica: usize,
    /// The measured requests' histograms and counts.
    pub hists: FanoutHists,
    /// Each leaf's sub-request latency.
    pub per_leaf: Vec<MetricStats>,
    /// Every dispatched request's arrival (its intended time), warmup first.
    pub arrivals: Vec<u64>,
    /// When each was released to its leaves, on the same axis (empty: at its arrival).
    pub released: Vec<u64>,
    /// Requests of the warmup (the model does not count them either).
    pub warmup: u64,
}

/// Histograms and counts behind [`FanoutStats`].
pub struct FanoutHists {
    /// Whole requests.
    pub e2e: Histogram<u64>,
    /// Whole requests from their release.
    pub e2e_released: Histogram<u64>,
    /// Leaf sub-requests (first answer).
    pub leaf: Histogram<u64>,
    /// Copies (send to answer).
    pub copy: Histogram<u64>,
    /// Copies' service times (a run's, for its model).
    pub service: Histogram<u64>,
    /// Hedges' lateness: from the moment a hedge's delay ran out to its copy's send.
    pub hedge_lag: Histogram<u64>,
    /// Wake-ups: from a copy's send to its start, for copies sent to an idle worker.
    pub wake: Histogram<u64>,
    /// Sub-requests counted.
    pub subs: u64,
    /// Copies sent, served and cancelled for them.
    pub sent: u64,
    /// Copies that started.
    pub served: u64,
    /// Copies cancelled before they started.
    pub cancelled: u64,
}

impl Default for FanoutHists {
    fn default() -> Self {
        FanoutHists {
            e2e: hist(),
            e2e_released: hist(),
            leaf: hist(),
            copy: hist(),
            service: hist(),
            hedge_lag: hist(),
            wake: hist(),
            subs: 0,
            sent: 0,
            served: 0,
            cancelled: 0,
        }
    }
}

impl FanoutHists {
    /// Adds another's counts (merging threads: histograms added, never averaged).
    pub fn absorb(&mut self, o: &FanoutHists) {
        self.e2e.add(&o.e2e).expect("auto-resizing histograms add");
        self.e2e_released
            .add(&o.e2e_released)
            .expect("auto-resizing histograms add");
        self.leaf
            .add(&o.leaf)
            .expect("auto-resizing histograms add");
        self.copy
            .add(&o.copy)
            .expect("auto-resizing histograms add");
        for (a, b) in [
            (&mut self.service, &o.service),
            (&mut self.hedge_lag, &o.hedge_lag),
            (&mut self.wake, &o.wake),
        ] {
            a.add(b).expect("auto-resizing histograms add");
        }
        self.subs += o.subs;
        self.sent += o.sent;
        self.served += o.served;
        self.cancelled += o.cancelled;
    }

    /// The statistics.
    pub fn stats(&self) -> FanoutStats {
        let per = |x: u64| x as f64 / self.subs.max(1) as f64;
        let p99 = self.leaf.value_at_quantile(0.99);
        let above = if self.e2e.is_empty() {
            0.0
        } else {
            self.e2e
                .count_between(self.e2e.highest_equivalent(p99) + 1, u64::MAX) as f64
                / self.e2e.len() as f64
        };
        FanoutStats {
            requests: self.e2e.len(),
            e2e: MetricStats::from_hist(&self.e2e, None),
            e2e_released: MetricStats::from_hist(&self.e2e_released, None),
            leaf: MetricStats::from_hist(&self.leaf, None),
            copy: MetricStats::from_hist(&self.copy, None),
            sent_per_sub: per(self.sent),
            served_per_sub: per(self.served),
            cancelled_per_sub: per(self.cancelled),
            above_leaf_p99: above,
            hedge_lag: MetricStats::from_hist(&self.hedge_lag, None),
            wake: MetricStats::from_hist(&self.wake, None),
        }
    }
}

/// The running delay of a quantile hedge: the q-quantile of the primary copies' latencies
/// seen so far, recomputed every [`HEDGE_LEARN`] of them; none before the first
/// [`HEDGE_LEARN`].
pub struct HedgeDelay {
    hedge: Hedge,
    seen: Histogram<u64>,
    delay: Option<u64>,
}

impl HedgeDelay {
    /// For `hedge`.
    pub fn new(hedge: Hedge) -> Self {
        HedgeDelay {
            hedge,
            seen: hist(),
            delay: match hedge {
                Hedge::After(d) => Some(d),
                _ => None,
            },
        }
    }

    /// A primary copy answered after `ns`.
    pub fn observe(&mut self, ns: u64) {
        if let Hedge::Quantile(q) = self.hedge {
            self.seen.saturating_record(ns);
            if self.seen.len().is_multiple_of(HEDGE_LEARN) {
                self.delay = Some(self.seen.value_at_quantile(q).max(1));
            }
        }
    }

    /// The delay after which a copy goes out now (`None`: no hedging yet, or never).
    pub fn delay(&self) -> Option<u64> {
        self.delay
    }
}

/// A fan-out run's shared state (see `fanout_dispatcher` and `fanout_worker` in
/// [`crate::harness`]): per request the answers so far, per sub-request whether a copy
/// started and whether one answered, the running hedge delay, and what the workers measured.
pub struct FanState {
    /// The fan-out.
    pub spec: FanoutSpec,
    /// Workers of each leaf replica.
    pub workers_per_server: usize,
    /// Answers each request has had.
    answers: Vec<std::sync::atomic::AtomicU32>,
    /// Per sub-request: bit 0 a copy started, bit 1 a copy answered.
    subs: Vec<std::sync::atomic::AtomicU8>,
    /// The delay of a hedge (quantile hedges learn it from primary copies).
    pub hedge: parking_lot::Mutex<HedgeDelay>,
    /// What the workers measured (each adds its own at the end).
    pub hists: parking_lot::Mutex<FanoutHists>,
    /// Each leaf's sub-request latencies.
    pub per_leaf: parking_lot::Mutex<Vec<Histogram<u64>>>,
    /// Copies the dispatcher sent for measured requests, and their sub-requests.
    pub sent: std::sync::atomic::AtomicU64,
    /// Sub-requests of measured requests.
    pub subs_measured: std::sync::atomic::AtomicU64,
    /// Every request's arrival offset (ns from the schedule's start), for the model.
    pub arrivals: parking_lot::Mutex<Vec<u64>>,
    /// Every request's release offset (when the dispatcher sent its sub-requests).
    pub released: parking_lot::Mutex<Vec<u64>>,
}

const STARTED: u8 = 1;
const ANSWERED: u8 = 2;

impl FanState {
    /// Room for `requests` requests of `spec`.
    pub fn new(spec: FanoutSpec, workers_per_server: usize, requests: u64) -> Self {
        let n = requests as usize;
        FanState {
            answers: (0..n).map(|_| Default::default()).collect(),
            subs: (0..n * spec.leaves).map(|_| Default::default()).collect(),
            hedge: parking_lot::Mutex::new(HedgeDelay::new(spec.hedge)),
            hists: parking_lot::Mutex::new(FanoutHists::default()),
            per_leaf: parking_lot::Mutex::new((0..spec.leaves).map(|_| hist()).collect()),
            sent: Default::default(),
            subs_measured: Default::default(),
            arrivals: parking_lot::Mutex::new(Vec::with_capacity(n)),
            released: parking_lot::Mutex::new(Vec::with_capacity(n)),
            spec,
            workers_per_server,
        }
    }

    /// Requests it has room for.
    pub fn capacity(&self) -> u64 {
        self.answers.len() as u64
    }

    fn sub(&self, request: u64, leaf: usize) -> &std::sync::atomic::AtomicU8 {
        &self.subs[request as usize * self.spec.leaves + leaf]
    }

    /// A worker takes a copy off its queue: whether to serve it. A tied copy is served only
    /// by the first to start; any copy of a sub-request that already answered is dropped.
    pub fn take(&self, request: u64, leaf: usize) -> bool {
        use std::sync::atomic::Ordering;
        let s = self.sub(request, leaf);
        if self.spec.tied {
            s.fetch_or(STARTED, Ordering::AcqRel) & (STARTED | ANSWERED) == 0
        } else {
            s.load(Ordering::Acquire) & ANSWERED == 0
        }
    }

    /// Whether the sub-request has answered (a pending hedge is then not sent).
    pub fn answered(&self, request: u64, leaf: usize) -> bool {
        self.sub(request, leaf)
            .load(std::sync::atomic::Ordering::Acquire)
            & ANSWERED
            != 0
    }

    /// A copy answered: `Some(answers)` of the request so far when it was the sub-request's
    /// first answer, `None` when another copy had answered before.
    pub fn answer(&self, request: u64, leaf: usize) -> Option<u32> {
        use std::sync::atomic::Ordering;
        if self.sub(request, leaf).fetch_or(ANSWERED, Ordering::AcqRel) & ANSWERED != 0 {
            return None;
        }
        Some(self.answers[request as usize].fetch_add(1, Ordering::AcqRel) + 1)
    }
}

/// One copy of a sub-request in the model.
struct Copy {
    sub: u64,
    server: usize,
    service: u64,
    sent: u64,
    primary: bool,
    cancelled: bool,
}

struct Sub {
    logical: u64,
    primary_server: usize,
    done: bool,
    started: bool,
    /// Copies not yet finished or dropped.
    live: u32,
    /// Copies still queued (for cancellation).
    queued: Vec<u64>,
}

struct Logical {
    intended: u64,
    released: u64,
    answers: usize,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// A worker of a server finished a copy (ordered first at one time).
    Finish(u64),
    /// A worker woken for a copy starts it (or drops it, if its sub-request no longer needs it).
    Start(u64),
    /// A hedge's delay ran out.
    Hedge(u64),
    /// A hedge's copy goes out (its delay ran out, plus the dispatcher's lateness).
    /// (sub-request, lateness).
    HedgeSend(u64, u64),
}

/// What a real run adds to the model's queues beyond its service times, each drawn from what
/// the run measured: a hedge's lateness (its copy goes out after its delay ran out) and a
/// worker's wake-up (a copy sent to an idle worker starts that much later; a copy taken from
/// the queue by a worker that just finished starts at once). [`Costs::none`] adds nothing.
#[derive(Default)]
pub struct Costs<'a> {
    /// A hedge's lateness (ns), drawn per hedge.
    pub hedge_lag: Option<Box<dyn FnMut() -> u64 + 'a>>,
    /// A worker's wake-up (ns), drawn per copy that finds its worker idle.
    pub wake: Option<Box<dyn FnMut() -> u64 + 'a>>,
}

impl Costs<'_> {
    /// No costs: copies go out and start exactly on time.
    pub fn none() -> Self {
        Costs::default()
    }

    fn draw(f: &mut Option<Box<dyn FnMut() -> u64 + '_>>) -> u64 {
        f.as_mut().map_or(0, |f| f())
    }
}

/// The fan-out model (see the module docs): requests arrive at `arrivals` (ns, non-decreasing),
/// each copy's service is `service()`; `workers` per server; the first `warmup` requests are
/// not counted. Copies go out and start exactly on time ([`simulate_with`] adds a run's costs).
pub fn simulate(
    spec: &FanoutSpec,
    arrivals: impl IntoIterator<Item = u64>,
    service: &mut dyn FnMut() -> u64,
    workers: usize,
    warmup: u64,
) -> FanoutHists {
    simulate_with(
        spec,
        arrivals.into_iter().map(|t| (t, t)),
        service,
        workers,
        warmup,
        Costs::none(),
    )
}

/// [`simulate`] with a run's costs: each request is `(arrival, release)` — its latency counts
/// from its arrival, its sub-requests go out at its release (non-decreasing) — and hedges'
/// lateness and workers' wake-ups come from `costs`.
pub fn simulate_with(
    spec: &FanoutSpec,
    arrivals: impl IntoIterator<Item = (u64, u64)>,
    service: &mut dyn FnMut() -> u64,
    workers: usize,
    warmup: u64,
    costs: Costs<'_>,
) -> FanoutHists {
    let mut m = Model {
        spec: spec.clone(),
        warmup,
        free: vec![workers; spec.servers()],
        queues: vec![VecDeque::new(); spec.servers()],
        copies: HashMap::new(),
        subs: HashMap::new(),
        logicals: HashMap::new(),
        events: BinaryHeap::new(),
        next_copy: 0,
        hedge: HedgeDelay::new(spec.hedge),
        costs,
        out: FanoutHists::default(),
    };
    let mut arrivals = arrivals.into_iter().enumerate().peekable();
    loop {
        let next_arrival = arrivals.peek().map(|&(_, (_, r))| r);
        let next_event = m.events.peek().map(|Reverse((t, _, _))| *t);
        match (next_arrival, next_event) {
            (None, None) => break,
            (Some(a), e) if e.is_none_or(|e| a < e) => {
                let (i, (t, r)) = arrivals.next().expect("peeked");
                m.arrive(i as u64, t, r, service);
            }
            _ => {
                let Reverse((t, ev, _)) = m.events.pop().expect("peeked");
                match ev {
                    Ev::Finish(c) => m.finish(c, t),
                    Ev::Start(c) => m.woken(c, t),
                    Ev::Hedge(s) => m.hedge_due(s, t, service),
                    Ev::HedgeSend(s, lag) => m.hedge_fires(s, t, lag, service),
                }
            }
        }
    }
    m.out
}

struct Model<'a> {
    spec: FanoutSpec,
    warmup: u64,
    free: Vec<usize>,
    queues: Vec<VecDeque<u64>>,
    copies: HashMap<u64, Copy>,
    subs: HashMap<u64, Sub>,
    logicals: HashMap<u64, Logical>,
    /// (time, event, tie-breaker).
    events: BinaryHeap<Reverse<(u64, Ev, u64)>>,
    next_copy: u64,
    hedge: HedgeDelay,
    costs: Costs<'a>,
    out: FanoutHists,
}

impl Model<'_> {
    fn counted(&self, logical: u64) -> bool {
        logical >= self.warmup
    }

    /// Request `i` arrived at `intended` and goes out to its leaves at `t`.
    fn arrive(&mut self, i: u64, intended: u64, t: u64, service: &mut dyn FnMut() -> u64) {
        let (n, r) = (self.spec.leaves, self.spec.replicas);
        self.logicals.insert(
            i,
            Logical {
                intended,
                released: t,
                answers: 0,
            },
        );
        for leaf in 0..n {
            let sub = i * n as u64 + leaf as u64;
            let primary = leaf * r + (i as usize % r);
            self.subs.insert(
                sub,
                Sub {
                    logical: i,
                    primary_server: primary,
                    done: false,
                    started: false,
                    live: 0,
                    queued: Vec::new(),
                },
            );
            if self.counted(i) {
                self.out.subs += 1;
            }
            self.send(sub, primary, t, true, service());
            if self.spec.tied {
                self.send(sub, leaf * r + (primary + 1) % r, t, false, service());
            } else if let Some(d) = self.hedge.delay() {
                self.events.push(Reverse((t + d, Ev::Hedge(sub), sub)));
            }
        }
    }

    fn send(&mut self, sub: u64, server: usize, t: u64, primary: bool, service: u64) {
        let id = self.next_copy;
        self.next_copy += 1;
        self.copies.insert(
            id,
            Copy {
                sub,
                server,
                service,
                sent: t,
                primary,
                cancelled: false,
            },
        );
        let s = self.subs.get_mut(&sub).expect("live sub");
        s.live += 1;
        let logical = s.logical;
        if self.counted(logical) {
            self.out.sent += 1;
        }
        if self.spec.tied && self.subs[&sub].started {
            // Its twin started first: dropped unserved, as the harness's worker drops it.
            self.cancel(id);
            self.copies.remove(&id);
            self.subs.get_mut(&sub).expect("live sub").live -= 1;
            self.drop_if_over(sub);
        } else if self.free[server] > 0 {
            // An idle worker: it starts the copy once it has woken.
            self.free[server] -= 1;
            let wake = Costs::draw(&mut self.costs.wake);
            if self.counted(logical) {
                self.out.wake.saturating_record(wake);
            }
            match wake {
                0 => self.start(id, t),
                w => self.events.push(Reverse((t + w, Ev::Start(id), id))),
            }
        } else {
            self.subs.get_mut(&sub).expect("live sub").queued.push(id);
            self.queues[server].push_back(id);
        }
    }

    fn start(&mut self, id: u64, t: u64) {
        let c = &self.copies[&id];
        let (sub, service) = (c.sub, c.service);
        let s = self.subs.get_mut(&sub).expect("live sub");
        s.queued.retain(|&q| q != id);
        s.started = true;
        let (logical, cancel) = (
            s.logical,
            if self.spec.tied {
                std::mem::take(&mut s.queued)
            } else {
                Vec::new()
            },
        );
        if self.counted(logical) {
            self.out.served += 1;
        }
        // Tied: the first copy to start cancels the other while it is still queued.
        for q in cancel {
            self.cancel(q);
        }
        self.events.push(Reverse((t + service, Ev::Finish(id), id)));
    }

    /// A worker woken for copy `id` takes it: it serves it unless its sub-request has
    /// answered (or, tied, its twin started) meanwhile, as a harness worker drops such a copy.
    fn woken(&mut self, id: u64, t: u64) {
        let sub = self.copies[&id].sub;
        let s = &self.subs[&sub];
        if s.done || (self.spec.tied && s.started) {
            self.cancel(id);
            let c = self.copies.remove(&id).expect("waking copy");
            self.subs.get_mut(&c.sub).expect("live sub").live -= 1;
            self.drop_if_over(c.sub);
            self.next_from_queue(c.server, t);
        } else {
            self.start(id, t);
        }
    }

    fn cancel(&mut self, id: u64) {
        let c = self.copies.get_mut(&id).expect("live copy");
        if c.cancelled {
            return;
        }
        c.cancelled = true;
        let sub = c.sub;
        let s = self.subs.get_mut(&sub).expect("live sub");
        s.queued.retain(|&q| q != id);
        let logical = s.logical;
        if self.counted(logical) {
            self.out.cancelled += 1;
        }
    }

    fn finish(&mut self, id: u64, t: u64) {
        let c = self.copies.remove(&id).expect("running copy");
        self.next_from_queue(c.server, t);
        if c.primary {
            self.hedge.observe(t - c.sent);
        }
        let counted = self.counted(self.subs[&c.sub].logical);
        if counted {
            self.out.copy.saturating_record(t - c.sent);
        }
        let s = self.subs.get_mut(&c.sub).expect("live sub");
        s.live -= 1;
        let logical = s.logical;
        if !s.done {
            s.done = true;
            // Hedged: the first answer wins, a copy still queued is cancelled.
            let queued = std::mem::take(&mut s.queued);
            for q in queued {
                self.cancel(q);
            }
            let l = self.logicals.get_mut(&logical).expect("live request");
            l.answers += 1;
            let (intended, released) = (l.intended, l.released);
            if counted {
                self.out.leaf.saturating_record(t - intended);
            }
            if l.answers == self.spec.needed() && counted {
                self.out.e2e.saturating_record(t - intended);
                self.out.e2e_released.saturating_record(t - released);
            }
            if l.answers == self.spec.leaves {
                self.logicals.remove(&logical);
            }
        }
        self.drop_if_over(c.sub);
    }

    fn drop_if_over(&mut self, sub: u64) {
        if self.subs.get(&sub).is_some_and(|s| s.done && s.live == 0) {
            self.subs.remove(&sub);
        }
    }

    fn next_from_queue(&mut self, server: usize, t: u64) {
        while let Some(q) = self.queues[server].pop_front() {
            let cancelled = self.copies.get(&q).is_some_and(|c| c.cancelled);
            if cancelled {
                let c = self.copies.remove(&q).expect("queued copy");
                if let Some(s) = self.subs.get_mut(&c.sub) {
                    s.live -= 1;
                }
                self.drop_if_over(c.sub);
                continue;
            }
            self.start(q, t);
            return;
        }
        self.free[server] += 1;
    }

    /// A hedge's delay ran out: its copy goes out once the dispatcher gets to it.
    fn hedge_due(&mut self, sub: u64, t: u64, service: &mut dyn FnMut() -> u64) {
        if self.subs.get(&sub).is_none_or(|s| s.done) {
            return;
        }
        match Costs::draw(&mut self.costs.hedge_lag) {
            0 => self.hedge_fires(sub, t, 0, service),
            lag => self
                .events
                .push(Reverse((t + lag, Ev::HedgeSend(sub, lag), sub))),
        }
    }

    /// The hedge's copy of `sub` goes out at `t`, `lag` after its delay ran out, unless the
    /// sub-request has answered (the dispatcher looks when it sends).
    fn hedge_fires(&mut self, sub: u64, t: u64, lag: u64, service: &mut dyn FnMut() -> u64) {
        let Some(s) = self.subs.get(&sub) else {
            return;
        };
        if s.done {
            return;
        }
        if self.counted(s.logical) {
            self.out.hedge_lag.saturating_record(lag);
        }
        let r = self.spec.replicas;
        let leaf = s.primary_server / r;
        let other = leaf * r + (s.primary_server % r + 1) % r;
        self.send(sub, other, t, false, service());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_distr::{Distribution, Exp};

    fn poisson(n: usize, gap_ns: f64, seed: u64) -> Vec<u64> {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let e = Exp::new(1.0 / gap_ns).unwrap();
        let mut t = 0.0;
        (0..n)
            .map(|_| {
                t += e.sample(&mut rng);
                t as u64
            })
            .collect()
    }

    fn exp_service(mean: f64, seed: u64) -> impl FnMut() -> u64 {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let e = Exp::new(1.0 / mean).unwrap();
        move || e.sample(&mut rng) as u64
    }

    fn spec(leaves: usize) -> FanoutSpec {
        FanoutSpec {
            leaves,
            replicas: 1,
            ..Default::default()
        }
    }

    /// Without queueing (arrivals far apart) a request waiting for N exponential leaves takes
    /// the maximum of N draws: P(max ≤ x) = (1 − e^(−x/S))^N.
    #[test]
    fn the_whole_is_the_maximum_of_its_leaves() {
        let s = 1e6;
        for n in [1, 10, 50] {
            let h = simulate(
                &spec(n),
                poisson(20_000, 1e9, 1),
                &mut exp_service(s, 2),
                1,
                0,
            );
            let p99 = h.e2e.value_at_quantile(0.99) as f64;
            // (1 − e^(−x/S))^N = 0.99  →  x = −S ln(1 − 0.99^(1/N))
            let want = -s * (1.0 - 0.99f64.powf(1.0 / n as f64)).ln();
            assert!(
                (p99 / want - 1.0).abs() < 0.06,
                "N={n}: p99 {p99} vs {want}"
            );
            let above = h.stats().above_leaf_p99;
            let theory = 1.0 - 0.99f64.powi(n as i32);
            assert!(
                (above - theory).abs() < 0.02,
                "N={n}: {above} above the leaf p99, theory {theory}"
            );
        }
    }

    /// With queueing, one leaf is an M/M/1: its sojourn is exponential with rate μ − λ.
    #[test]
    fn one_leaf_is_an_mm1_queue() {
        let (s, gap) = (1e5, 2e5); // ρ = 0.5
        let h = simulate(
            &spec(1),
            poisson(200_000, gap, 3),
            &mut exp_service(s, 4),
            1,
            10_000,
        );
        let mean = h.e2e.mean();
        let want = 1.0 / (1.0 / s - 1.0 / gap);
        assert!(
            (mean / want - 1.0).abs() < 0.05,
            "mean {mean} vs M/M/1 {want}"
        );
        let st = h.stats();
        assert_eq!(st.sent_per_sub, 1.0);
        assert_eq!(st.cancelled_per_sub, 0.0);
    }

    /// First K of N: the K-th order statistic, faster than all N.
    #[test]
    fn the_first_k_answers_come_sooner() {
        let mut all = spec(10);
        let a = simulate(
            &all,
            poisson(10_000, 1e9, 5),
            &mut exp_service(1e6, 6),
            1,
            0,
        );
        all.wait = FanoutWait::First(5);
        let k = simulate(
            &all,
            poisson(10_000, 1e9, 5),
            &mut exp_service(1e6, 6),
            1,
            0,
        );
        assert!(k.e2e.value_at_quantile(0.99) * 2 < a.e2e.value_at_quantile(0.99));
    }

    /// A heavy-tailed leaf (1 % of services 100× the rest): hedging after the leaf's p95 cuts
    /// the tail by far more than 5× for a few % more load — p99.9 of one leaf, p99 of ten
    /// (at p99.9 ten leaves meet a slow primary *and* a slow copy: 10 × 0.01² = 1e-3) — and
    /// tied requests cancel the copy that did not start.
    #[test]
    fn hedging_cuts_the_tail_for_a_little_load() {
        let mk = |seed| {
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            let d: crate::dist::Dist = "mix:0.99*exp:100us+0.01*fixed:10ms".parse().unwrap();
            move || d.sample(&mut rng) as u64
        };
        let arr = || poisson(100_000, 5e6, 7);
        for (leaves, q) in [(1, 0.999), (10, 0.99)] {
            let base = FanoutSpec {
                leaves,
                replicas: 2,
                ..Default::default()
            };
            let hedged = FanoutSpec {
                hedge: Hedge::Quantile(0.95),
                ..base.clone()
            };
            let plain = simulate(&base, arr(), &mut mk(8), 1, 5_000);
            let h = simulate(&hedged, arr(), &mut mk(8), 1, 5_000);
            let (a, b) = (plain.e2e.value_at_quantile(q), h.e2e.value_at_quantile(q));
            assert!(a > 5 * b, "{leaves} leaves: quantile {q} {a} → {b}");
            let st = h.stats();
            assert!(st.served_per_sub < 1.10, "extra load {}", st.served_per_sub);
            assert!(st.sent_per_sub > 1.02, "hedges sent {}", st.sent_per_sub);
        }
        let tied = FanoutSpec {
            leaves: 10,
            replicas: 2,
            tied: true,
            ..Default::default()
        };
        let t = simulate(&tied, arr(), &mut mk(8), 1, 5_000).stats();
        assert_eq!(t.sent_per_sub, 2.0);
        assert!(t.cancelled_per_sub > 0.0 && t.served_per_sub < 2.0, "{t:?}");
        // At this light load the replicas are idle: the primary starts at once and its twin is
        // dropped unserved, as a worker that finds it started drops it.
        assert!(
            t.served_per_sub < 1.001 && t.cancelled_per_sub > 0.999,
            "{t:?}"
        );
    }

    /// A run's costs move the model by what they cost: a release lag and a worker's wake-up
    /// add to every request's latency, a hedge's lateness to the requests its copy answers.
    #[test]
    fn a_runs_costs_are_modelled() {
        let fixed = |ns: u64| -> Option<Box<dyn FnMut() -> u64>> { Some(Box::new(move || ns)) };
        let arr = poisson(20_000, 1e8, 11);
        let one = spec(1);
        let plain = simulate(&one, arr.clone(), &mut exp_service(1e6, 12), 1, 0);
        let costly = simulate_with(
            &one,
            arr.iter().map(|&t| (t, t + 200_000)),
            &mut exp_service(1e6, 12),
            1,
            0,
            Costs {
                wake: fixed(300_000),
                ..Costs::none()
            },
        );
        let added = costly.e2e.mean() - plain.e2e.mean();
        assert!((added / 500_000.0 - 1.0).abs() < 0.02, "added {added} ns");
        // From the release, the release lag is not counted: the wake-up alone is added.
        let after = costly.e2e_released.mean() - plain.e2e.mean();
        assert!((after / 300_000.0 - 1.0).abs() < 0.03, "added {after} ns");
        let w = costly.stats().wake;
        // Every copy that found its worker idle (nearly all, at 1 % load) woke.
        assert!(w.count > 19_000 && w.count <= 20_000, "{w:?}");
        assert!((w.p50 as f64 / 300_000.0 - 1.0).abs() < 0.01, "{w:?}");

        // 10 % of primaries take 20 ms; their hedges after 1 ms answer in 100 µs nine times
        // in ten: p95 is a hedged request, 1.1 ms — or 1.6 ms when hedges go out 500 µs late.
        let hedged = FanoutSpec {
            leaves: 1,
            replicas: 2,
            hedge: Hedge::After(1_000_000),
            ..Default::default()
        };
        let mk = |seed| {
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
            let d: crate::dist::Dist = "mix:0.9*fixed:100us+0.1*fixed:20ms".parse().unwrap();
            move || d.sample(&mut rng) as u64
        };
        let on_time = simulate(&hedged, arr.clone(), &mut mk(13), 1, 0);
        let late = simulate_with(
            &hedged,
            arr.iter().map(|&t| (t, t)),
            &mut mk(13),
            1,
            0,
            Costs {
                hedge_lag: fixed(500_000),
                ..Costs::none()
            },
        );
        let (a, b) = (
            on_time.e2e.value_at_quantile(0.95) as f64,
            late.e2e.value_at_quantile(0.95) as f64,
        );
        assert!((a / 1.1e6 - 1.0).abs() < 0.01, "on time p95 {a}");
        assert!((b / 1.6e6 - 1.0).abs() < 0.01, "late p95 {b}");
        let st = late.stats();
        assert!(
            st.hedge_lag.count > 1_500 && st.hedge_lag.p50 >= 499_000,
            "{st:?}"
        );
        assert_eq!(on_time.stats().hedge_lag.p99, 0);
    }

    #[test]
    fn bad_specs_are_named() {
        assert!("k=0".parse::<FanoutWait>().is_err());
        assert_eq!("k=3".parse::<FanoutWait>().unwrap(), FanoutWait::First(3));
        assert_eq!("after=p95".parse::<Hedge>().unwrap(), Hedge::Quantile(0.95));
        assert_eq!(
            "after=2ms".parse::<Hedge>().unwrap(),
            Hedge::After(2_000_000)
        );
        assert!("after=0ms"
            .parse::<Hedge>()
            .unwrap_err()
            .to_string()
            .contains("positive"));
        let mut s = spec(4);
        s.wait = FanoutWait::First(5);
        assert!(s.validate().unwrap_err().0.contains("at most --fanout"));
        let s = FanoutSpec {
            leaves: 4,
            replicas: 1,
            hedge: Hedge::After(1000),
            ..Default::default()
        };
        assert!(s.validate().unwrap_err().0.contains("--replicas 2"));
        assert!(spec(0).validate().is_err());
    }
}
