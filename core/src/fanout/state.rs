//! A fan-out run's live state: the hedge delay learnt from the leaves' latency and each
//! sub-request's copies, claimed atomically by the leaf workers.

use super::*;

/// The running delay of a quantile hedge: the q-quantile of the primary copies' latencies
/// seen so far, recomputed every [`HEDGE_LEARN`] of them; none before the first
/// [`HEDGE_LEARN`].
pub struct HedgeDelay {
    pub(super) hedge: Hedge,
    pub(super) seen: Histogram<u64>,
    pub(super) delay: Option<u64>,
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
    pub(super) answers: Vec<std::sync::atomic::AtomicU32>,
    /// Per sub-request: bit 0 a copy started, bit 1 a copy answered.
    pub(super) subs: Vec<std::sync::atomic::AtomicU8>,
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

pub(super) const STARTED: u8 = 1;
pub(super) const ANSWERED: u8 = 2;

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

    pub(super) fn sub(&self, request: u64, leaf: usize) -> &std::sync::atomic::AtomicU8 {
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
