//! Turning stamps into statistics without disturbing what is measured.
//!
//! Each worker (or client receive thread) owns a [`Shard`]: HdrHistograms for
//! the measured phase (3 significant digits, ns), exact sums for the means, a
//! per-slice completion count for the saturation check, and the histograms of
//! the current reporting interval. Nothing is shared on the hot path: a shard
//! is merged into the run's totals after the run (histograms are *added*;
//! percentiles are never averaged).
//!
//! Interval histograms cost memory (≈ 200 KB per metric), so a worker never
//! keeps more than one interval: when it completes its first request of a new
//! interval it swaps in a spare set (prepared by the run's main thread) and
//! drops the full set into an [`IntervalSink`] inbox. The main thread merges
//! the inbox, compresses finished intervals (a few KB each) and hands the
//! emptied sets back as spares. The worker's cost is a pointer swap and an
//! uncontended lock, a few tens of ns once per interval.
//!
//! A watched run (`--metrics-listen`) keeps the warmup's intervals the same way, counted
//! from the schedule's start, for the live endpoint alone: they never reach the interval
//! logs or the totals, and a thread stops keeping them at its first measured request.
//!
//! All histograms are pre-faulted (zeroed by a write, not only by `calloc`),
//! so no page fault lands inside a measured request.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};

/// How many derived durations each request has.
pub const N_METRICS: usize = 6;

/// The derived durations, in this order everywhere. `recv_lag` and
/// `server_recv_lag` are the time between the kernel receiving a response
/// (request) and the client's (server's) code reading it: 0 in integrated
/// runs, and 0 in TCP runs whose sockets gave no kernel stamps.
pub const METRICS: [&str; N_METRICS] = [
    "sojourn",
    "service",
    "queue",
    "send_lag",
    "recv_lag",
    "server_recv_lag",
];

/// The stamps of one request (ns, one monotonic clock per host): the six of
/// the model, and the two user-space reads that a kernel receive stamp
/// replaced (equal to `enqueued` and `completed` when there was none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamps {
    /// When the arrival process scheduled the request.
    pub intended: u64,
    /// When it was released: by an inline worker, the shaper thread or a TCP client's sender.
    pub sent: u64,
    /// The request arrived at the server: the kernel's receive stamp of its
    /// last segment over TCP when there is one.
    pub enqueued: u64,
    /// When a worker began serving it.
    pub started: u64,
    /// When the app returned its response.
    pub finished: u64,
    /// The response arrived at the client: the kernel's receive stamp of the
    /// segment that completed it over TCP when there is one.
    pub completed: u64,
    /// The server's code had read the request (≥ `enqueued`).
    pub enqueued_user: u64,
    /// The client's code had read the response (≥ `completed`).
    pub completed_user: u64,
}

impl Stamps {
    /// Stamps of a request with no kernel stamps (integrated runs): the
    /// user-space reads are `enqueued` and `completed` themselves.
    pub fn local(
        intended: u64,
        sent: u64,
        enqueued: u64,
        started: u64,
        finished: u64,
        completed: u64,
    ) -> Self {
        Stamps {
            intended,
            sent,
            enqueued,
            started,
            finished,
            completed,
            enqueued_user: enqueued,
            completed_user: completed,
        }
    }

    /// The [`METRICS`] (see docs/design.md). Saturating, so a stamp taken on
    /// another host (where only durations cross) never wraps.
    #[inline]
    pub fn durations(&self) -> [u64; N_METRICS] {
        [
            self.completed.saturating_sub(self.intended),
            self.finished.saturating_sub(self.started),
            self.started.saturating_sub(self.enqueued),
            self.sent.saturating_sub(self.intended),
            self.completed_user.saturating_sub(self.completed),
            self.enqueued_user.saturating_sub(self.enqueued),
        ]
    }
}

/// Largest value a histogram is sized for up front (auto-resizes beyond).
const HIST_MAX_NS: u64 = 60_000_000_000;

fn new_hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, HIST_MAX_NS, 3).expect("valid bounds");
    h.auto(true);
    // Writing zeros faults the pages in now rather than during a request.
    h.reset();
    h
}

/// One histogram per metric.
#[derive(Clone)]
pub struct Hists(pub [Histogram<u64>; N_METRICS]);

impl Default for Hists {
    fn default() -> Self {
        Self::new()
    }
}

impl Hists {
    /// Empty histograms (1 ns to 60 s at 3 significant digits, growing beyond),
    /// their pages already faulted in.
    pub fn new() -> Self {
        Hists(std::array::from_fn(|_| new_hist()))
    }

    /// Adds one request's durations, in [`METRICS`] order (ns).
    #[inline]
    pub fn record(&mut self, d: &[u64; N_METRICS]) {
        for (h, v) in self.0.iter_mut().zip(d) {
            h.saturating_record(*v);
        }
    }

    /// Adds `other`'s counts into these (merging shards, never averaging).
    pub fn add(&mut self, other: &Hists) {
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            a.add(b).expect("auto-resizing histograms always add");
        }
    }

    /// Empties every histogram, keeping its memory.
    pub fn reset(&mut self) {
        for h in &mut self.0 {
            h.reset();
        }
    }

    /// Requests recorded (every record adds one to each metric).
    pub fn count(&self) -> u64 {
        self.0[0].len()
    }
}

/// Compresses a histogram as an HdrHistogram V2 deflate blob, base64-encoded
/// (the payload of one interval-log line).
pub fn encode_hist(h: &Histogram<u64>) -> String {
    let mut buf = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut buf)
        .expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(buf)
}

/// Decodes what [`encode_hist`] wrote (used by tests and by merging tools).
pub fn decode_hist(b64: &str) -> Option<Histogram<u64>> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut std::io::Cursor::new(bytes))
        .ok()
}

/// A finished interval: its index and, per metric, the compressed histogram
/// and its max (for the log line).
#[derive(Debug, Clone)]
pub struct IntervalBlob {
    /// Which interval: it starts `index` × `record.interval` after the measured
    /// phase began (requests fall in by completion time).
    pub index: u32,
    /// Measured requests completed in the interval.
    pub count: u64,
    /// Largest value of each metric in the interval (ns).
    pub max: [u64; N_METRICS],
    /// Each metric's histogram, compressed by [`encode_hist`].
    pub hist_b64: [String; N_METRICS],
}

/// A finished interval's numbers as the run goes on (`--metrics-listen`). A measured
/// interval's are taken from the merged histograms that become its line of the log, so they
/// agree with it; a warmup interval's from histograms kept for this alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveInterval {
    /// Which interval ([`IntervalBlob::index`]; a warmup interval counts from the schedule's
    /// start).
    pub index: u32,
    /// Its length (ns): one interval, or less for the warmup's last, which ends where the
    /// measured phase begins.
    pub length_ns: u64,
    /// Requests of its phase completed in it.
    pub count: u64,
    /// Each metric's median (ns), in [`METRICS`] order.
    pub p50: [u64; N_METRICS],
    /// Each metric's value at quantile 0.99 (ns).
    pub p99: [u64; N_METRICS],
    /// Each metric's largest value (ns).
    pub max: [u64; N_METRICS],
}

impl LiveInterval {
    fn of(index: u32, length_ns: u64, h: &Hists) -> Self {
        let q = |x: f64| std::array::from_fn(|m| h.0[m].value_at_quantile(x));
        LiveInterval {
            index,
            length_ns,
            count: h.count(),
            p50: q(0.5),
            p99: q(0.99),
            max: std::array::from_fn(|m| h.0[m].max()),
        }
    }
}

/// One phase's interval histograms on their way from the threads to the main thread.
struct Track {
    /// Full sets handed in: (interval, thread, histograms).
    inbox: Mutex<Vec<(u32, usize, Box<Hists>)>>,
    /// Each thread's current interval; `u32::MAX` once it has left the phase.
    thread_interval: Vec<AtomicU32>,
    /// Merged sets of the intervals some thread may still add to.
    merged: Mutex<BTreeMap<u32, Hists>>,
    /// The last finished interval's numbers, when watched.
    latest: Mutex<Option<LiveInterval>>,
}

impl Track {
    fn new(threads: usize) -> Self {
        Track {
            inbox: Mutex::new(Vec::new()),
            thread_interval: (0..threads).map(|_| AtomicU32::new(0)).collect(),
            merged: Mutex::new(BTreeMap::new()),
            latest: Mutex::new(None),
        }
    }

    /// A thread hands in interval `k`'s set (an empty one goes straight back to its spares).
    #[allow(clippy::vec_box)]
    fn hand_in(&self, k: u32, w: usize, full: Box<Hists>, spares: &Mutex<Vec<Box<Hists>>>) {
        if full.count() > 0 {
            self.inbox.lock().push((k, w, full));
        } else {
            spares.lock().push(full);
        }
    }

    /// Merges what was handed in (the emptied sets go back to their threads' spares) and
    /// takes out the intervals every thread has moved past, in order.
    #[allow(clippy::vec_box)]
    fn collect(&self, spares: &[Mutex<Vec<Box<Hists>>>]) -> Vec<(u32, Hists)> {
        let items = std::mem::take(&mut *self.inbox.lock());
        let mut merged = self.merged.lock();
        for (k, w, mut h) in items {
            merged.entry(k).or_default().add(&h);
            h.reset();
            spares[w].lock().push(h);
        }
        let low = self
            .thread_interval
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .min()
            .unwrap_or(0);
        let finished: Vec<u32> = merged.range(..low).map(|(k, _)| *k).collect();
        finished
            .into_iter()
            .map(|k| (k, merged.remove(&k).expect("key listed above")))
            .collect()
    }
}

/// Where threads drop full interval histograms; drained by the main thread.
pub struct IntervalSink {
    // Boxed so a swap moves a pointer, not six histogram headers.
    #[allow(clippy::vec_box)]
    spares: Vec<Mutex<Vec<Box<Hists>>>>,
    /// The measured phase's intervals: the interval logs.
    measured: Track,
    /// The warmup's intervals, kept only when watched: the live endpoint's alone.
    warmup: Track,
    /// Finished measured intervals, kept in the plain V2 encoding (run-length compact) until
    /// [`IntervalSink::finish`] deflates them: deflating six histograms took milliseconds on
    /// the collecting thread, which on a small host shares a CPU with a sender or a worker.
    done: Mutex<Vec<PlainBlob>>,
    /// Start of the measured phase (0 until known): intervals and slices
    /// count from it.
    pub measure_start: std::sync::atomic::AtomicU64,
    /// Start of the schedule (0 until known): the warmup's intervals count from it.
    pub start: std::sync::atomic::AtomicU64,
    /// When watched, the length of one interval (ns): keep each phase's last finished
    /// interval ([`IntervalSink::watched`]).
    live: Option<u64>,
}

impl IntervalSink {
    /// A sink for `workers` shards, each given two sets of histograms: one a
    /// shard takes as its first interval's, and a spare for its first roll.
    /// With one, the first roll (a second into the measured phase) found
    /// none and allocated a set of histograms (megabytes, faulted in) on the
    /// worker between two requests: a dispatch gap of several milliseconds.
    pub fn new(workers: usize) -> Self {
        IntervalSink {
            spares: (0..workers)
                .map(|_| Mutex::new(vec![Box::new(Hists::new()), Box::new(Hists::new())]))
                .collect(),
            measured: Track::new(workers),
            warmup: Track::new(workers),
            done: Mutex::new(Vec::new()),
            measure_start: std::sync::atomic::AtomicU64::new(0),
            start: std::sync::atomic::AtomicU64::new(0),
            live: None,
        }
    }

    /// With `on`, the run is watched: shards also keep the warmup's intervals (`interval_ns`
    /// long, from [`IntervalSink::start`]; a third set of histograms each, for the warmup's
    /// current interval), and [`IntervalSink::collect`] keeps the numbers of each phase's
    /// last finished interval, for [`IntervalSink::latest`] and
    /// [`IntervalSink::latest_warmup`] (a few quantile look-ups on the main thread once an
    /// interval). Off, none of this.
    pub fn watched(mut self, on: bool, interval_ns: u64) -> Self {
        if on {
            self.live = Some(interval_ns.max(1));
            for s in &self.spares {
                s.lock().push(Box::new(Hists::new()));
            }
        }
        self
    }

    /// The measured phase's last interval every thread has finished, when watched.
    pub fn latest(&self) -> Option<LiveInterval> {
        *self.measured.latest.lock()
    }

    /// The warmup's last interval every thread has finished, when watched.
    pub fn latest_warmup(&self) -> Option<LiveInterval> {
        *self.warmup.latest.lock()
    }

    /// Whether the measured phase has begun by `now` (harness clock).
    pub fn measuring(&self, now: u64) -> bool {
        let t = self.measure_start.load(Ordering::Acquire);
        t != 0 && now >= t
    }

    fn take_spare(&self, worker: usize) -> Box<Hists> {
        // A missing spare (main thread behind) costs an allocation, never a wait.
        self.spares[worker]
            .lock()
            .pop()
            .unwrap_or_else(|| Box::new(Hists::new()))
    }

    /// The warmup's length from the schedule's start (ns), once the measured phase's start
    /// is known.
    fn warmup_span(&self) -> Option<u64> {
        let (s, m) = (
            self.start.load(Ordering::Acquire),
            self.measure_start.load(Ordering::Acquire),
        );
        (s != 0 && m > s).then(|| m - s)
    }

    /// Main thread: merge what threads handed in, compress measured intervals
    /// that every thread has moved past, and refill the threads' spares.
    pub fn collect(&self) {
        let finished = self.measured.collect(&self.spares);
        if !finished.is_empty() {
            let mut done = self.done.lock();
            done.extend(finished.iter().map(|(k, h)| PlainBlob::of(*k, h)));
        }
        let Some(len) = self.live else {
            return;
        };
        if let Some((k, h)) = finished.last() {
            *self.measured.latest.lock() = Some(LiveInterval::of(*k, len, h));
        }
        if let Some((k, h)) = self.warmup.collect(&self.spares).last() {
            // The warmup's last interval is cut short where the measured phase begins.
            let from = *k as u64 * len;
            let length = self
                .warmup_span()
                .filter(|&span| span > from)
                .map_or(len, |span| (span - from).min(len));
            *self.warmup.latest.lock() = Some(LiveInterval::of(*k, length, h));
        }
    }

    /// After all workers flushed: every measured interval, compressed, in order.
    pub fn finish(&self) -> Vec<IntervalBlob> {
        self.collect();
        let mut merged = self.measured.merged.lock();
        let mut done: Vec<IntervalBlob> = std::mem::take(&mut *self.done.lock())
            .into_iter()
            .map(PlainBlob::deflated)
            .collect();
        for (k, h) in std::mem::take(&mut *merged) {
            done.push(blob(k, &h));
        }
        done.sort_by_key(|b| b.index);
        done
    }
}

/// A finished interval waiting for [`IntervalSink::finish`]: its histograms V2-encoded, not
/// deflated yet.
struct PlainBlob {
    index: u32,
    count: u64,
    max: [u64; N_METRICS],
    v2: [Vec<u8>; N_METRICS],
}

impl PlainBlob {
    fn of(k: u32, h: &Hists) -> Self {
        PlainBlob {
            index: k,
            count: h.count(),
            max: std::array::from_fn(|i| h.0[i].max()),
            v2: std::array::from_fn(|i| {
                let mut buf = Vec::new();
                V2Serializer::new()
                    .serialize(&h.0[i], &mut buf)
                    .expect("serializing to memory cannot fail");
                buf
            }),
        }
    }

    /// The interval as the interval logs carry it: each histogram deflated, base64.
    fn deflated(self) -> IntervalBlob {
        IntervalBlob {
            index: self.index,
            count: self.count,
            max: self.max,
            hist_b64: self.v2.map(|b| {
                let h: Histogram<u64> = Deserializer::new()
                    .deserialize(&mut b.as_slice())
                    .expect("a V2 encoding this process wrote");
                encode_hist(&h)
            }),
        }
    }
}

fn blob(k: u32, h: &Hists) -> IntervalBlob {
    IntervalBlob {
        index: k,
        count: h.count(),
        max: std::array::from_fn(|i| h.0[i].max()),
        hist_b64: std::array::from_fn(|i| encode_hist(&h.0[i])),
    }
}

/// What one thread measured; merged across threads after the run.
pub struct Shard {
    worker: usize,
    /// Histograms of the [`METRICS`] over the measured requests (ns).
    pub totals: Hists,
    /// Exact sum of each metric over the measured requests (ns), for the means.
    pub sums: [u128; N_METRICS],
    /// Measured requests completed.
    pub measured: u64,
    /// Warmup requests completed (kept out of the histograms).
    pub warmup: u64,
    /// Earliest `completed` stamp of a measured request (`u64::MAX` before any).
    pub first_completed: u64,
    /// Latest `completed` stamp of a measured request (0 before any).
    pub last_completed: u64,
    /// Completions per saturation slice (by completion time).
    pub slice_done: Vec<u64>,
    measure_start: u64,
    slice_ns: u64,
    interval_ns: u64,
    cur_k: u32,
    cur: Box<Hists>,
    /// A watched run's warmup: its current interval and that interval's histograms, until
    /// this thread's first measured request.
    warm: Option<(u32, Box<Hists>)>,
    /// Start of the schedule (from the sink, at the first warmup request).
    start: u64,
}

impl Shard {
    /// A shard for thread `worker` of `sink`: saturation slices `slice_ns` and
    /// interval histograms `interval_ns` long (ns since the measured phase began).
    pub fn new(worker: usize, sink: &IntervalSink, slice_ns: u64, interval_ns: u64) -> Self {
        Shard {
            worker,
            totals: Hists::new(),
            sums: [0; N_METRICS],
            measured: 0,
            warmup: 0,
            first_completed: u64::MAX,
            last_completed: 0,
            slice_done: Vec::with_capacity(64),
            measure_start: 0,
            slice_ns: slice_ns.max(1),
            interval_ns: interval_ns.max(1),
            cur_k: 0,
            cur: sink.take_spare(worker),
            warm: sink.live.map(|_| (0, sink.take_spare(worker))),
            start: 0,
        }
    }

    /// Records one finished request.
    #[inline]
    pub fn record(&mut self, s: &Stamps, measured: bool, sink: &IntervalSink) {
        self.record_durations(&s.durations(), s.completed, measured, sink);
    }

    /// Records one finished request by its durations ([`Stamps::durations`], or a client's
    /// own reckoning of them) and its `completed` stamp.
    #[inline]
    pub fn record_durations(
        &mut self,
        d: &[u64; N_METRICS],
        completed: u64,
        measured: bool,
        sink: &IntervalSink,
    ) {
        if !measured {
            self.warmup += 1;
            if self.warm.is_some() {
                self.record_warmup(d, completed, sink);
            }
            return;
        }
        if self.warm.is_some() {
            self.leave_warmup(sink);
        }
        let d = *d;
        self.totals.record(&d);
        for (acc, v) in self.sums.iter_mut().zip(d) {
            *acc += v as u128;
        }
        if self.measure_start == 0 {
            // Set by the schedule before the first measured request is handed out.
            self.measure_start = sink.measure_start.load(Ordering::Acquire);
        }
        self.measured += 1;
        self.first_completed = self.first_completed.min(completed);
        self.last_completed = self.last_completed.max(completed);
        let rel = completed.saturating_sub(self.measure_start);
        let slice = (rel / self.slice_ns) as usize;
        if slice >= self.slice_done.len() {
            self.slice_done.resize(slice + 1, 0);
        }
        self.slice_done[slice] += 1;
        let k = (rel / self.interval_ns).min(u32::MAX as u64) as u32;
        if k > self.cur_k {
            self.roll(k, sink);
        }
        self.cur.record(&d);
    }

    /// A watched run's warmup request: into the warmup's interval by its completion time, as
    /// a measured request. One that completes after the measured phase began counts in the
    /// warmup's last interval, not in one of its own.
    fn record_warmup(&mut self, d: &[u64; N_METRICS], completed: u64, sink: &IntervalSink) {
        if self.start == 0 {
            self.start = sink.start.load(Ordering::Acquire);
        }
        let mut k = if self.start == 0 {
            0
        } else {
            (completed.saturating_sub(self.start) / self.interval_ns).min(u32::MAX as u64 - 1)
                as u32
        };
        if let Some(span) = sink.warmup_span() {
            k = k.min((span.saturating_sub(1) / self.interval_ns) as u32);
        }
        let w = self.worker;
        let Some((cur_k, cur)) = &mut self.warm else {
            return;
        };
        if k > *cur_k {
            let full = std::mem::replace(cur, sink.take_spare(w));
            sink.warmup.hand_in(*cur_k, w, full, &sink.spares[w]);
            *cur_k = k;
            sink.warmup.thread_interval[w].store(k, Ordering::Release);
        }
        cur.record(d);
    }

    /// Hands the warmup's last interval in: this thread is done with the warmup.
    fn leave_warmup(&mut self, sink: &IntervalSink) {
        if let Some((k, full)) = self.warm.take() {
            sink.warmup
                .hand_in(k, self.worker, full, &sink.spares[self.worker]);
            sink.warmup.thread_interval[self.worker].store(u32::MAX, Ordering::Release);
        }
    }

    fn roll(&mut self, k: u32, sink: &IntervalSink) {
        let full = std::mem::replace(&mut self.cur, sink.take_spare(self.worker));
        let w = self.worker;
        sink.measured.hand_in(self.cur_k, w, full, &sink.spares[w]);
        self.cur_k = k;
        sink.measured.thread_interval[w].store(k, Ordering::Release);
    }

    /// Hands the current interval to the sink (at the end of the run).
    pub fn flush(&mut self, sink: &IntervalSink) {
        self.leave_warmup(sink);
        self.roll(u32::MAX, sink);
    }

    /// Adds another shard's totals into this one.
    pub fn absorb(&mut self, o: &Shard) {
        self.totals.add(&o.totals);
        for (a, b) in self.sums.iter_mut().zip(o.sums) {
            *a += b;
        }
        self.measured += o.measured;
        self.warmup += o.warmup;
        self.first_completed = self.first_completed.min(o.first_completed);
        self.last_completed = self.last_completed.max(o.last_completed);
        if o.slice_done.len() > self.slice_done.len() {
            self.slice_done.resize(o.slice_done.len(), 0);
        }
        for (a, b) in self.slice_done.iter_mut().zip(&o.slice_done) {
            *a += b;
        }
    }
}

/// Summary statistics of one metric, in ns.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct MetricStats {
    /// Requests in the histogram.
    pub count: u64,
    /// Mean (ns): exact when the sum was known, else the histogram's.
    pub mean: f64,
    /// Standard deviation (ns), from the histogram.
    pub stdev: f64,
    /// Smallest value (ns).
    pub min: u64,
    /// Median (ns; histogram values carry 3 significant digits).
    pub p50: u64,
    /// Value at quantile 0.90 (ns).
    pub p90: u64,
    /// Value at quantile 0.95 (ns).
    pub p95: u64,
    /// Value at quantile 0.99 (ns).
    pub p99: u64,
    /// Value at quantile 0.999 (ns).
    pub p999: u64,
    /// Largest value (ns).
    pub max: u64,
}

impl MetricStats {
    /// From a histogram; `exact_sum` (when known) replaces the histogram's
    /// bucketed mean so the mean carries no quantization error.
    pub fn from_hist(h: &Histogram<u64>, exact_sum: Option<u128>) -> Self {
        if h.is_empty() {
            return MetricStats::default();
        }
        let q = |x: f64| h.value_at_quantile(x);
        MetricStats {
            count: h.len(),
            mean: exact_sum
                .map(|s| s as f64 / h.len() as f64)
                .unwrap_or_else(|| h.mean()),
            stdev: h.stdev(),
            min: h.min(),
            p50: q(0.50),
            p90: q(0.90),
            p95: q(0.95),
            p99: q(0.99),
            p999: q(0.999),
            max: h.max(),
        }
    }

    /// The value of a named statistic (`mean`, `p99`, ...), for CI targets.
    pub fn get(&self, stat: &str) -> Option<f64> {
        Some(match stat {
            "count" => self.count as f64,
            "mean" => self.mean,
            "stdev" => self.stdev,
            "min" => self.min as f64,
            "p50" => self.p50 as f64,
            "p90" => self.p90 as f64,
            "p95" => self.p95 as f64,
            "p99" => self.p99 as f64,
            "p999" => self.p999 as f64,
            "max" => self.max as f64,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests;
