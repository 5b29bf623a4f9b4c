//! What a fan-out run and its model report: latency statistics of the whole request, a leaf
//! and a copy, the copies sent, served and cancelled, the model with each host cost taken out.

use super::*;

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
