//! A worker's bookkeeping: its ledger (histograms, records, completions), settled while it is
//! idle or by a helper thread on another CPU from its outbox, and the helpers' prefill of the
//! schedule.

use super::*;

/// One worker's bookkeeping: its histograms, its records, its completion count. Filled
/// by the worker itself — while it is idle ([`Ledger::settle`]), not between two requests
/// of a backlog, where its cost would be queueing the run's ideal does not have — or, when
/// the run has helpers, by a helper thread on another CPU from the worker's outbox.
pub(super) struct Ledger<'a> {
    pub(super) sh: &'a Shared,
    pub(super) w: usize,
    pub(super) shard: Shard,
    pub(super) records: Option<RecordWriter<'a>>,
    /// Served requests not yet recorded, in the order they finished.
    pub(super) pending: Vec<(Item, Stamps)>,
}

/// Served requests an inline worker keeps unrecorded at most; beyond it, a busy period
/// records a few between two requests ([`SETTLE_STEP`]) rather than all at once.
pub(super) const PENDING_MAX: usize = 4096;

/// Requests recorded between two requests of a long busy period (see [`PENDING_MAX`]).
pub(super) const SETTLE_STEP: usize = 4;

impl<'a> Ledger<'a> {
    pub(super) fn new(sh: &'a Shared, w: usize) -> Self {
        let slice_ns = sh.feed.schedule().stats().slice_ns;
        Ledger {
            sh,
            w,
            shard: Shard::new(w, &sh.sink, slice_ns, sh.spec.interval_ns),
            // The thread shaper's workers fill the indexed layout.
            records: match (&sh.records, sh.spec.shaper) {
                (Some(r), ShaperMode::Inline) => Some(r.writer()),
                _ => None,
            },
            pending: Vec::new(),
        }
    }

    /// Records one request now.
    #[inline]
    pub(super) fn record(&mut self, index: u64, measured: bool, stamps: &Stamps) {
        let sh = self.sh;
        match (&mut self.records, &sh.records) {
            (Some(wr), _) => wr.push(index, stamps, self.w, measured),
            (None, Some(r)) => r.set(index, stamps, self.w, measured),
            (None, None) => {}
        }
        self.shard.record(stamps, measured, &sh.sink);
        if measured {
            crate::roi::heartbeat(sh.spec.roi);
        }
    }

    /// Keeps a served request to record later; in a busy period too long to keep them
    /// all, records a few of the oldest.
    /// Returns whether it recorded any (time the caller's next stamp must not include).
    #[inline]
    pub(super) fn defer(&mut self, item: Item, stamps: Stamps) -> bool {
        self.pending.push((item, stamps));
        if self.pending.len() >= PENDING_MAX {
            self.settle_some(SETTLE_STEP);
            return true;
        }
        false
    }

    pub(super) fn settle_some(&mut self, n: usize) {
        let mut pending = std::mem::take(&mut self.pending);
        let n = n.min(pending.len());
        for (item, stamps) in &pending[..n] {
            self.record(item.index, item.measured, stamps);
        }
        pending.drain(..n);
        self.pending = pending;
        self.sh.completed[self.w].fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Records the deferred requests, oldest first, while there is time before `until`
    /// (the worker's next arrival) for one more.
    pub(super) fn settle(&mut self, until: u64) {
        let mut cost = 0;
        let mut done = 0;
        while done < self.pending.len() {
            let t = now_ns();
            if t + 2 * cost + IDLE_GUARD_NS >= until {
                break;
            }
            let (item, stamps) = self.pending[done];
            self.record(item.index, item.measured, &stamps);
            done += 1;
            cost = now_ns() - t;
        }
        self.pending.drain(..done);
        self.sh.completed[self.w].fetch_add(done as u64, Ordering::Relaxed);
    }

    /// Records everything and hands the current interval to the sink (end of the run).
    pub(super) fn close(mut self) -> Shard {
        self.settle_some(usize::MAX);
        self.shard.flush(&self.sh.sink);
        self.shard
    }
}

/// Where a worker's served requests go: its own [`Ledger`], or its outbox to a helper.
// One per worker thread, on its stack: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
pub(super) enum Books<'a> {
    Own(Ledger<'a>),
    Helped(&'a Shared, crate::outbox::Sender<'a>),
}

impl<'a> Books<'a> {
    pub(super) fn new(sh: &'a Shared, w: usize) -> Self {
        match sh.outboxes.get(w) {
            Some(o) => Books::Helped(sh, o.sender()),
            None => Books::Own(Ledger::new(sh, w)),
        }
    }

    /// Keeps a served request for the books; true when that took noticeable time (a worker's
    /// own books recorded some, or a helper's outbox was full).
    #[inline]
    pub(super) fn defer(&mut self, item: Item, stamps: Stamps) -> bool {
        match self {
            Books::Own(l) => l.defer(item, stamps),
            Books::Helped(sh, tx) => tx
                .push(Served::new(item.index, item.measured, &stamps), || {
                    sh.abort.load(Ordering::Relaxed)
                }),
        }
    }

    /// Idle until `until`: record what waits (a helper does that elsewhere).
    pub(super) fn settle(&mut self, until: u64) {
        if let Books::Own(l) = self {
            l.settle(until);
        }
    }

    pub(super) fn helped(&self) -> bool {
        matches!(self, Books::Helped(..))
    }

    pub(super) fn close(self) -> Option<Shard> {
        match self {
            Books::Own(l) => Some(l.close()),
            Books::Helped(..) => None,
        }
    }
}

/// A helper thread of an integrated inline run (`harness.helpers`): it keeps the schedule
/// generated ahead and records what its workers (`w % helpers == k`) served, so that a
/// worker's own share of the bookkeeping is a claim and a push. It ends when every worker
/// has and all they pushed is recorded (or, after an abort, when they stop pushing).
pub(super) fn helper_thread(sh: &Shared, k: usize, helpers: usize) -> Vec<Shard> {
    let mine: Vec<usize> = (0..sh.spec.threads).filter(|w| w % helpers == k).collect();
    let mut ledgers: Vec<Ledger> = mine.iter().map(|&w| Ledger::new(sh, w)).collect();
    let mut quiet_since: Option<u64> = None;
    loop {
        let mut did = 0;
        for (l, &w) in ledgers.iter_mut().zip(&mine) {
            let n = sh.outboxes[w].drain(|s| l.record(s.index(), s.measured(), &s.stamps()));
            sh.completed[w].fetch_add(n, Ordering::Relaxed);
            did += n;
        }
        let mut generated = 0;
        while generated < HELPER_BATCH && sh.feed.prefill_one(k + generated as usize, &sh.sink) {
            generated += 1;
        }
        if generated == HELPER_BATCH {
            continue; // more room ahead: fill it before sleeping
        }
        if did + generated > 0 {
            quiet_since = None;
        } else {
            if sh.running.load(Ordering::Acquire) == 0
                && mine.iter().all(|&w| sh.outboxes[w].is_empty())
            {
                break;
            }
            let now = now_ns();
            let since = *quiet_since.get_or_insert(now);
            if sh.abort.load(Ordering::Acquire) && now - since > 500_000_000 {
                break; // a worker stuck in the app: what it served so far is recorded
            }
        }
        // The ring is full and the outboxes empty: sleep a little. The ring holds
        // [`crate::feed::RING`] requests and each outbox [`crate::outbox::OUTBOX`]: at 1 M
        // requests/s that is milliseconds, against a wake-up of tens of µs.
        std::thread::sleep(std::time::Duration::from_micros(HELPER_NAP_US));
    }
    ledgers.into_iter().map(Ledger::close).collect()
}

/// Requests a helper generates ahead between two looks at its workers' outboxes.
pub(super) const HELPER_BATCH: u64 = 256;

/// How long a helper sleeps when the ring is full and its workers' outboxes empty (µs).
pub(super) const HELPER_NAP_US: u64 = 50;

/// An idle inline worker generates requests ahead until shortly before `until` (its next
/// arrival): in the integrated configuration the client's request generation runs on the
/// worker, and done between requests of a backlog it would delay every waiting request —
/// time the run's ideal (service times only) does not have. One request per lock hold, and
/// never waiting for the lock another worker holds.
pub(super) fn prefill(sh: &Shared, w: usize, until: u64) {
    let mut cost = 0;
    loop {
        let t = now_ns();
        if t + 2 * cost + IDLE_GUARD_NS >= until {
            return;
        }
        if !sh.feed.prefill_one(w, &sh.sink) {
            return;
        }
        cost = now_ns() - t;
    }
}
