//! One measurement: an open-loop schedule served by N workers.
//!
//! Two ways to drive the integrated configuration:
//!
//! - **inline** (the default): there is no shaper thread. Each worker
//!   claims its next request from the shared schedule, waits until its
//!   intended time if it is early, or starts at once if it is late — in
//!   which case the request was, in the model, waiting in the queue since
//!   its intended time (`queue = started − intended`). With FIFO and one
//!   shared queue a worker simply takes the next scheduled arrival (FIFO
//!   by construction: exactly FIFO G/G/n, no extra core, which matters on a
//!   2-core machine, and no hand-off between threads on the measured path;
//!   TailBench's integrated mode used the same idea). For LIFO, random
//!   order or per-worker queues, the schedule keeps the requests that are
//!   due but not yet claimed in a backlog (one per worker with per-worker
//!   dispatch), and a free worker picks from the requests already due in
//!   its queue by the discipline — the newest for LIFO, any one for random
//!   — or, when none is due, waits for the earliest one to come.
//! - **thread**: a shaper thread sends each request at its intended time
//!   into a real [`RequestQueue`] (one per worker with per-worker dispatch)
//!   that the workers pop: the model of what transports do.
//!
//! Either way, latency counts from the *intended* time, so a late send or a
//! stalled server is charged to the requests it delayed (no coordinated
//! omission), and `send_lag = sent − intended` records how far the harness
//! itself was off schedule.
//!
//! Per-worker dispatch ([`Dispatch::PerWorker`]): the schedule assigns each
//! request a worker (random or round-robin, seeded) as it generates it, so
//! both shapers and the ideal replay see the same assignment.

use crate::app::{AppError, Client, Server};
use crate::arrival::{derive_seed, ArrivalSpec};
use crate::clock::{now_ns, set_timer_slack_1ns, wait_until, WaitMode};
use crate::collector::{IntervalBlob, IntervalSink, Shard, Stamps};
use crate::dist::Dist;
use crate::queue::{Assigner, Discipline, Dispatch, RequestQueue};
use parking_lot::Mutex;
use rand::Rng;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

/// Errors of a run; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A setting out of range; the message names the flag and the allowed values.
    #[error("invalid run: {0}")]
    Invalid(String),
    /// Keeping every request's stamps would take more memory than
    /// `record.max_record_mem` allows.
    #[error("keeping per-request records for {requests} requests needs {need_mb} MiB, over the {cap_mb} MiB cap; drop --save-requests or raise --max-record-mem (e.g. 4GiB)")]
    RecordsTooBig {
        /// Requests the run may schedule (warmup included, padded for count variation).
        requests: u64,
        /// Memory the records would take (MiB).
        need_mb: u64,
        /// The cap (MiB).
        cap_mb: u64,
    },
    /// The app failed to start a server or a worker.
    #[error(transparent)]
    App(#[from] AppError),
    /// The host refused a thread's placement (CPU pinning or SCHED_FIFO priority).
    #[error("{0}")]
    Setup(String),
    /// A worker thread panicked (its index, the panic message): the run is void.
    #[error("worker thread {0} panicked; the run is void: {1}")]
    Panicked(usize, String),
}

/// How a phase ends: after a number of requests or a time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// This many requests, in schedule order.
    Requests(u64),
    /// This long in intended time (s).
    Seconds(f64),
}

crate::names_enum! {
/// Who releases requests at their intended times (see the module docs).
    pub enum ShaperMode ("shaper") {
        /// Workers claim the next scheduled arrival and wait for it (FIFO, no extra thread).
        Inline = "inline",
        /// A shaper thread releases requests into a real queue (any discipline).
        Thread = "thread",
    }
}

/// Everything that defines one run (besides the app).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSpec {
    /// Offered rate (requests/s), 0 < qps ≤ 1e8: the arrival process's mean.
    pub qps: f64,
    /// Worker threads, 1..=1024.
    pub threads: usize,
    /// The arrival process (Poisson, fixed gaps, bursty, trace, load profile, ...).
    pub arrival: ArrivalSpec,
    /// Base seed: arrivals, request contents and dispatch each derive their own from it.
    pub seed: u64,
    /// The unmeasured phase before the measured one (`Requests(0)`: none).
    pub warmup: Bound,
    /// The measured phase: at least one request, or a positive time.
    pub measure: Bound,
    /// How workers and the shaper wait for a time: spin, block or hybrid.
    pub wait: WaitMode,
    /// Hybrid waits sleep until this long before the deadline, then spin.
    pub spin_margin_ns: u64,
    /// Who releases requests at their intended times.
    pub shaper: ShaperMode,
    /// Order in which a queue is served.
    pub discipline: Discipline,
    /// One shared queue, or a queue per worker (see the module docs).
    pub dispatch: Dispatch,
    /// Keep every request's stamps in memory (needed for `requests.csv`).
    pub keep_records: bool,
    /// Memory cap for `keep_records` (bytes); a run that may need more is refused
    /// ([`RunError::RecordsTooBig`]).
    pub record_mem_cap: u64,
    /// Length of one interval histogram.
    pub interval_ns: u64,
    /// How long after the schedule's expected end the run waits for stragglers.
    pub drain_timeout_ns: u64,
    /// Run workers (and the shaper) under SCHED_FIFO at this priority.
    pub rt_priority: Option<i32>,
    /// Pin worker i to `cpus[i % len]` (the shaper to the last one).
    pub cpus: Vec<usize>,
    /// Send-lag p99 above this fails the send-lag check.
    pub send_lag_p99_max_ns: u64,
    /// Simulated network delay added in each direction (integrated, inline
    /// only). Requests keep their send order, as on one TCP connection.
    #[serde(serialize_with = "ser_opt_display")]
    pub net_delay: Option<Dist>,
    /// Simulator markers around the measured phase (see [`crate::roi`]).
    pub roi: crate::roi::RoiMode,
    /// Issue gem5 markers on a CPU that is not gem5's.
    pub roi_force: bool,
}

fn ser_opt_display<S: serde::Serializer>(d: &Option<Dist>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&d.to_string()),
        None => s.serialize_none(),
    }
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            qps: 1000.0,
            threads: 1,
            arrival: ArrivalSpec::Poisson,
            seed: 1,
            warmup: Bound::Requests(0),
            measure: Bound::Requests(10_000),
            wait: WaitMode::Hybrid,
            spin_margin_ns: DEFAULT_SPIN_MARGIN_NS,
            shaper: ShaperMode::Inline,
            discipline: Discipline::Fifo,
            dispatch: Dispatch::Shared,
            keep_records: false,
            record_mem_cap: 1 << 30,
            interval_ns: 1_000_000_000,
            drain_timeout_ns: 10_000_000_000,
            send_lag_p99_max_ns: 50_000,
            rt_priority: None,
            cpus: Vec::new(),
            net_delay: None,
            roi: crate::roi::RoiMode::None,
            roi_force: false,
        }
    }
}

/// Default hybrid spin margin. Sleeping until 200 µs before a deadline cost
/// +2.5 % on M/M/1 mean here, 50 µs cost +6 % (docs/hosts.md): the VM's
/// wake-ups are that slow. 1 ms keeps the error near pure spinning while
/// still sleeping through long idle gaps.
pub const DEFAULT_SPIN_MARGIN_NS: u64 = 1_000_000;

/// Bytes of memory one kept record costs.
pub const RECORD_BYTES: u64 = RECORD_WORDS as u64 * 8;

impl RunSpec {
    /// Checks the spec; the error names the bad setting and the allowed range.
    pub fn validate(&self) -> Result<(), RunError> {
        let bad = |s: String| Err(RunError::Invalid(s));
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return bad(format!("--qps must be a positive number, got {}", self.qps));
        }
        if self.qps > 1e8 {
            return bad(format!(
                "--qps {} is beyond what one host can schedule (max 1e8)",
                self.qps
            ));
        }
        if self.threads == 0 || self.threads > 1024 {
            return bad(format!(
                "--threads must be in 1..=1024, got {}",
                self.threads
            ));
        }
        match self.measure {
            Bound::Requests(0) => return bad("--requests must be at least 1".into()),
            Bound::Seconds(s) if !(s.is_finite() && s > 0.0) => {
                return bad(format!("--duration must be a positive time, got {s}s"))
            }
            _ => {}
        }
        if let Bound::Seconds(s) = self.warmup {
            if !(s.is_finite() && s >= 0.0) {
                return bad(format!("--warmup-seconds must be ≥ 0, got {s}"));
            }
        }
        if self.interval_ns < 1_000_000 {
            return bad("--interval must be at least 1ms".into());
        }
        if self.net_delay.is_some() && self.shaper == ShaperMode::Thread {
            return bad(
                "--net-delay is simulated by inline workers only: drop --shaper thread".into(),
            );
        }
        if self.net_delay.is_some() && self.discipline != Discipline::Fifo {
            return bad(format!(
                "--net-delay is simulated for FIFO only: drop --discipline {} or --net-delay",
                self.discipline
            ));
        }
        self.check_arrival()?;
        check_cpus("--cpus", &self.cpus)?;
        crate::roi::check(self.roi, self.roi_force)
            .map_err(|e| RunError::Invalid(e.to_string()))?;
        let cap = self.record_capacity();
        if self.keep_records && cap * RECORD_BYTES > self.record_mem_cap {
            return Err(RunError::RecordsTooBig {
                requests: cap,
                need_mb: (cap * RECORD_BYTES) >> 20,
                cap_mb: self.record_mem_cap >> 20,
            });
        }
        Ok(())
    }

    /// A trace or load profile sets the rate itself: `qps` must be its
    /// mean, and a trace must be long enough for both phases.
    fn check_arrival(&self) -> Result<(), RunError> {
        let bad = |s: String| Err(RunError::Invalid(s));
        if let Some(r) = self.arrival.own_rate() {
            if (self.qps / r - 1.0).abs() > 1e-6 {
                return bad(format!(
                    "--qps {} does not match `{}`, which sets its own mean rate {r}/s: set --qps {r} (a trace or load profile decides the rate)",
                    self.qps, self.arrival
                ));
            }
        }
        let crate::arrival::ArrivalSpec::Trace(t) = &self.arrival else {
            return Ok(());
        };
        let last = format!(
            "{} has {} arrivals over {:.3} s (the last at line {})",
            t.path.display(),
            t.len(),
            t.offset_s(t.len() - 1),
            t.line(t.len() - 1)
        );
        match (self.warmup, self.measure) {
            (Bound::Requests(w), Bound::Requests(m)) if w + m > t.len() as u64 => bad(format!(
                "trace {last}; the run needs {w} warmup + {m} measured = {} requests: lengthen the trace or lower the counts",
                w + m
            )),
            _ => {
                let end = self.phase_times().2;
                let reach = t.offset_s(t.len() - 1) + 1.0 / t.mean_rate();
                if end > reach * (1.0 + 1e-9) {
                    bad(format!(
                        "trace {last}; the run needs {end:.3} s of arrivals (warmup + measured): lengthen the trace or shorten the run"
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Expected (warmup count, measured count, measured start s, end s),
    /// counts padded by `sigmas` standard deviations of the count.
    pub(crate) fn phase_counts(&self, sigmas: f64) -> (f64, f64, f64, f64) {
        let a = &self.arrival;
        let disp = a.dispersion(self.qps);
        let pad = |m: f64| m + sigmas * (disp * m).sqrt() + if sigmas > 0.0 { 100.0 } else { 0.0 };
        let (warm, start) = match self.warmup {
            Bound::Requests(n) => (n as f64, a.time_of(self.qps, n as f64)),
            Bound::Seconds(s) => (pad(a.expected_count(self.qps, 0.0, s)), s),
        };
        let (meas, end) = match self.measure {
            Bound::Requests(m) => {
                let n = m as f64;
                (n, a.time_of(self.qps, self.warmup_requests() + n))
            }
            Bound::Seconds(d) => (pad(a.expected_count(self.qps, start, start + d)), start + d),
        };
        (warm, meas, start, end)
    }

    fn warmup_requests(&self) -> f64 {
        match self.warmup {
            Bound::Requests(n) => n as f64,
            Bound::Seconds(s) => self.arrival.expected_count(self.qps, 0.0, s),
        }
    }

    /// (measured start s, measured end s, run end s), unpadded.
    fn phase_times(&self) -> (f64, f64, f64) {
        let (_, _, start, end) = self.phase_counts(0.0);
        (start, end, end)
    }

    /// Requests the run is expected to schedule, warmup included, with room
    /// for the count variation of time-bounded phases (10 σ of the arrival
    /// process's own dispersion).
    pub fn record_capacity(&self) -> u64 {
        let (w, m, _, _) = self.phase_counts(10.0);
        (w + m).ceil() as u64
    }

    /// Width of the saturation check's slices: 1/20 of the measured phase.
    pub fn slice_ns(&self) -> u64 {
        (self.expected_measure_ns() / 20).max(1_000_000)
    }

    /// Expected length of the measured phase in ns.
    pub fn expected_measure_ns(&self) -> u64 {
        let (start, end, _) = self.phase_times();
        ((end - start).max(0.0) * 1e9) as u64
    }

    /// Expected length of the whole schedule in ns, padded for count
    /// variation (6 σ) so the drain deadline never cuts a healthy run.
    pub fn expected_total_ns(&self) -> u64 {
        let total = |n: f64| {
            let disp = self.arrival.dispersion(self.qps).max(1.0);
            self.arrival
                .time_of(self.qps, n + 6.0 * (disp * n).sqrt() + 10.0)
        };
        let secs = match (self.warmup, self.measure) {
            (_, Bound::Seconds(_)) => self.phase_times().2,
            (Bound::Requests(w), Bound::Requests(m)) => total((w + m) as f64),
            (Bound::Seconds(s), Bound::Requests(m)) => {
                total(self.arrival.expected_count(self.qps, 0.0, s) + m as f64).max(s)
            }
        };
        (secs * 1e9) as u64
    }

    /// Watches this run past its schedule's end, which started at `t0`
    /// (see [`crate::drain`]).
    pub fn drain_watch(&self, t0: u64) -> crate::drain::DrainWatch {
        crate::drain::DrainWatch::new(
            t0 + self.expected_total_ns(),
            self.drain_timeout_ns,
            self.expected_measure_ns(),
            self.threads,
        )
    }

    /// Requests due by the schedule's end and not served yet: those
    /// generated and not `done`, plus those still to be generated — counted
    /// exactly for a schedule bounded by requests, else the expected
    /// arrivals between the last generated one (`last_intended_ns`, since
    /// the schedule's start) and the schedule's end.
    pub fn backlog(&self, generated: u64, last_intended_ns: u64, done: u64) -> u64 {
        let (w, m, _, end) = self.phase_counts(0.0);
        let to_come = match (self.warmup, self.measure) {
            (Bound::Requests(_), Bound::Requests(_)) => w + m - generated as f64,
            _ => self
                .arrival
                .expected_count(self.qps, last_intended_ns as f64 / 1e9, end),
        };
        generated.saturating_sub(done) + to_come.max(0.0) as u64
    }
}

/// Per-request stamps kept for the whole run, indexed by request number.
/// Each slot is written by exactly one worker; atomics make that safe
/// without locks (relaxed stores are plain moves on x86).
pub struct Records {
    slots: Vec<[AtomicU64; RECORD_WORDS]>,
}

/// Words of one record: the eight stamps and a tag.
const RECORD_WORDS: usize = 9;

impl Records {
    /// Room for `n` requests' stamps ([`RunSpec::record_capacity`]), its pages
    /// touched now so none faults in during the run.
    pub fn new(n: u64) -> Self {
        let slots: Vec<[AtomicU64; RECORD_WORDS]> = (0..n).map(|_| Default::default()).collect();
        // Written above, so the pages are resident before the run starts.
        Records { slots }
    }

    /// Stores request `i`'s stamps, the worker that served it and its phase; an
    /// index beyond the capacity is dropped.
    #[inline]
    pub fn set(&self, i: u64, s: &Stamps, worker: usize, measured: bool) {
        if let Some(slot) = self.slots.get(i as usize) {
            let v = [
                s.intended,
                s.sent,
                s.enqueued,
                s.started,
                s.finished,
                s.completed,
                s.enqueued_user,
                s.completed_user,
            ];
            for (a, x) in slot.iter().zip(v) {
                a.store(x, Ordering::Relaxed);
            }
            slot[RECORD_WORDS - 1].store(
                ((worker as u64) << 1) | measured as u64 | (1 << 63),
                Ordering::Release,
            );
        }
    }

    /// The requests that completed, in request order:
    /// (index, worker, measured, stamps).
    pub fn iter(&self) -> impl Iterator<Item = (u64, usize, bool, Stamps)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            let tag = s[RECORD_WORDS - 1].load(Ordering::Acquire);
            if tag >> 63 == 0 {
                return None;
            }
            let g = |k: usize| s[k].load(Ordering::Relaxed);
            Some((
                i as u64,
                ((tag & !(1 << 63)) >> 1) as usize,
                tag & 1 == 1,
                Stamps {
                    intended: g(0),
                    sent: g(1),
                    enqueued: g(2),
                    started: g(3),
                    finished: g(4),
                    completed: g(5),
                    enqueued_user: g(6),
                    completed_user: g(7),
                },
            ))
        })
    }

    /// Requests it has room for.
    pub fn capacity(&self) -> u64 {
        self.slots.len() as u64
    }
}

/// One scheduled request as handed to whoever releases it.
#[derive(Debug, Clone, Copy)]
pub struct Item {
    /// Position in the schedule, from 0, warmup included.
    pub index: u64,
    /// Intended time on the harness clock (ns).
    pub intended: u64,
    /// In the measured phase (else warmup).
    pub measured: bool,
    /// The first measured request: the measured phase starts with it.
    pub first_measured: bool,
    /// The worker a per-worker dispatch assigned (0 with a shared queue).
    pub worker: usize,
}

/// The open-loop schedule: arrival times and request contents, in order.
/// Shared by every way of releasing requests (inline workers, the shaper
/// thread, transport clients) so they all see the same sequence per seed.
pub struct Schedule {
    arrival: Box<dyn crate::arrival::ArrivalProcess>,
    client: Box<dyn Client>,
    t0: u64,
    next_index: u64,
    warmup: Bound,
    measure: Bound,
    measure_start: Option<u64>,
    generated_warmup: u64,
    generated_measured: u64,
    first_measured_intended: u64,
    last_measured_intended: u64,
    slice_ns: u64,
    arrivals_per_slice: Vec<u64>,
    done: bool,
    assigner: Option<Assigner>,
    backlog: Backlog,
    /// Requests generated ahead by an idle inline worker ([`Schedule::prefill_one`]), in
    /// arrival order; [`Schedule::next`] takes from here first.
    ahead: VecDeque<(Item, Vec<u8>)>,
}

/// At most this many requests are generated ahead of their arrival.
pub const AHEAD_MAX: usize = 1024;

impl Schedule {
    /// A schedule for `spec` (arrivals from `spec.arrival`, seeded) starting
    /// at `t0` (set it later with [`Schedule::set_start`] if not known yet).
    pub fn new(spec: &RunSpec, client: Box<dyn Client>, t0: u64) -> Self {
        Schedule {
            arrival: spec
                .arrival
                .build(spec.qps, derive_seed(spec.seed, 1))
                .expect("RunSpec::validate checked the rate"),
            client,
            t0,
            next_index: 0,
            warmup: spec.warmup,
            measure: spec.measure,
            measure_start: None,
            generated_warmup: 0,
            generated_measured: 0,
            first_measured_intended: 0,
            last_measured_intended: 0,
            slice_ns: spec.slice_ns(),
            arrivals_per_slice: Vec::new(),
            done: false,
            assigner: match spec.dispatch {
                Dispatch::Shared => None,
                Dispatch::PerWorker(a) => {
                    Some(Assigner::new(spec.threads, a, derive_seed(spec.seed, 4)))
                }
            },
            backlog: Backlog::new(spec, derive_seed(spec.seed, 5)),
            ahead: VecDeque::new(),
        }
    }

    /// Sets the schedule's start (ns, harness clock) before the first request is drawn.
    pub fn set_start(&mut self, t0: u64) {
        self.t0 = t0;
    }

    /// What the schedule generated so far, for building a [`RunResult`]
    /// outside [`run_integrated`] (transport clients).
    pub fn stats(&self) -> ScheduleStats {
        ScheduleStats {
            t0: self.t0,
            measure_start: self.measure_start,
            generated_warmup: self.generated_warmup,
            generated_measured: self.generated_measured,
            first_measured_intended: self.first_measured_intended,
            last_measured_intended: self.last_measured_intended,
            slice_ns: self.slice_ns,
            arrivals_per_slice: self.arrivals_per_slice.clone(),
        }
    }

    /// The next request (payload written into `buf`), or `None` when the
    /// measured phase is over. Sets `sink.measure_start` on the first
    /// measured request.
    pub fn next(&mut self, buf: &mut Vec<u8>, sink: &IntervalSink) -> Option<Item> {
        if let Some((item, mut p)) = self.ahead.pop_front() {
            std::mem::swap(buf, &mut p);
            self.backlog.spare.push(p);
            return Some(item);
        }
        self.generate(buf, sink)
    }

    /// Generates the next request ahead of time (an inline worker does this while it waits
    /// for an arrival, so that a backlog later does not wait for the client's request
    /// generation: that would be charged to queueing). False when the schedule is over or
    /// [`AHEAD_MAX`] requests are already waiting.
    pub fn prefill_one(&mut self, sink: &IntervalSink) -> bool {
        if self.ahead.len() >= AHEAD_MAX {
            return false;
        }
        let mut p = self.backlog.spare.pop().unwrap_or_default();
        match self.generate(&mut p, sink) {
            Some(item) => {
                self.ahead.push_back((item, p));
                true
            }
            None => false,
        }
    }

    fn generate(&mut self, buf: &mut Vec<u8>, sink: &IntervalSink) -> Option<Item> {
        if self.done {
            return None;
        }
        let off = self.arrival.next_offset_ns();
        if off == crate::arrival::END {
            // A trace ran out (validate makes sure it covers the run).
            self.done = true;
            return None;
        }
        let intended = self.t0 + off;
        let measured = match self.warmup {
            Bound::Requests(n) => self.next_index >= n,
            Bound::Seconds(s) => off as f64 >= s * 1e9,
        };
        let mut first_measured = false;
        if measured {
            let start = match self.measure_start {
                Some(t) => t,
                None => {
                    let t = match self.warmup {
                        Bound::Requests(_) => intended,
                        Bound::Seconds(s) => self.t0 + (s * 1e9) as u64,
                    };
                    self.measure_start = Some(t);
                    sink.measure_start.store(t, Ordering::Release);
                    self.first_measured_intended = intended;
                    first_measured = true;
                    t
                }
            };
            let over = match self.measure {
                Bound::Requests(m) => self.generated_measured >= m,
                Bound::Seconds(d) => (intended - start) as f64 >= d * 1e9,
            };
            if over {
                self.done = true;
                return None;
            }
            self.generated_measured += 1;
            self.last_measured_intended = intended;
            let slice = ((intended - start) / self.slice_ns) as usize;
            if slice >= self.arrivals_per_slice.len() {
                self.arrivals_per_slice.resize(slice + 1, 0);
            }
            self.arrivals_per_slice[slice] += 1;
        } else {
            self.generated_warmup += 1;
        }
        buf.clear();
        self.client.next_request(buf);
        let index = self.next_index;
        self.next_index += 1;
        Some(Item {
            index,
            intended,
            measured,
            first_measured,
            worker: self.assigner.as_mut().map_or(0, |a| a.next_worker()),
        })
    }

    /// Inline workers: the next request worker `w` serves, its payload in
    /// `buf`. A shared FIFO takes the next arrival; otherwise the worker
    /// picks by `discipline` among the requests of its queue already due at
    /// `now` (see the module docs), or takes the earliest one to come.
    pub fn claim(
        &mut self,
        w: usize,
        now: u64,
        discipline: Discipline,
        buf: &mut Vec<u8>,
        sink: &IntervalSink,
    ) -> Option<Item> {
        if discipline == Discipline::Fifo && self.assigner.is_none() {
            return self.next(buf, sink);
        }
        let q = if self.assigner.is_some() { w } else { 0 };
        // Move every due request, and at least one for `q`, into the queues.
        loop {
            if self.backlog.peeked.is_none() {
                let mut p = self.backlog.spare.pop().unwrap_or_default();
                match self.next(&mut p, sink) {
                    Some(it) => self.backlog.peeked = Some((it, p)),
                    None => break,
                }
            }
            let (it, _) = self.backlog.peeked.as_ref().expect("just filled");
            if it.intended > now && !self.backlog.queues[q].is_empty() {
                break;
            }
            let (it, p) = self.backlog.peeked.take().expect("just filled");
            let dst = if self.assigner.is_some() {
                it.worker
            } else {
                0
            };
            self.backlog.queues[dst].push_back((it, p));
        }
        self.backlog.take(q, now, discipline, buf)
    }
}

/// Requests generated but not yet claimed by an inline worker, per queue
/// (one shared, or one per worker), in arrival order.
struct Backlog {
    queues: Vec<VecDeque<(Item, Vec<u8>)>>,
    /// The next request, generated but not yet due.
    peeked: Option<(Item, Vec<u8>)>,
    /// Payload buffers to reuse.
    spare: Vec<Vec<u8>>,
    rng: Xoshiro256PlusPlus,
}

impl Backlog {
    fn new(spec: &RunSpec, seed: u64) -> Self {
        let n = if spec.dispatch.is_per_worker() {
            spec.threads
        } else {
            1
        };
        Backlog {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            peeked: None,
            spare: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    fn take(&mut self, q: usize, now: u64, d: Discipline, buf: &mut Vec<u8>) -> Option<Item> {
        let queue = &mut self.queues[q];
        // Arrival order makes the due requests a prefix.
        let due = queue.partition_point(|(it, _)| it.intended <= now);
        let i = match (d, due) {
            (_, 0) | (Discipline::Fifo, _) => 0,
            (Discipline::Lifo, _) => due - 1,
            (Discipline::Random, _) => self.rng.gen_range(0..due),
        };
        let (it, p) = queue.remove(i)?;
        let old = std::mem::replace(buf, p);
        self.spare.push(old);
        Some(it)
    }
}

/// A snapshot of a [`Schedule`]'s bookkeeping (see [`Schedule::stats`]).
#[derive(Debug, Clone)]
pub struct ScheduleStats {
    /// Schedule start on the harness clock (ns); intended times count from it.
    pub t0: u64,
    /// Start of the measured phase (ns), once a measured request was drawn.
    pub measure_start: Option<u64>,
    /// Warmup requests drawn.
    pub generated_warmup: u64,
    /// Measured requests drawn.
    pub generated_measured: u64,
    /// Intended time of the first measured request (ns).
    pub first_measured_intended: u64,
    /// Intended time of the last measured request (ns).
    pub last_measured_intended: u64,
    /// Width of one saturation-check slice (ns).
    pub slice_ns: u64,
    /// Measured arrivals per slice, by intended time.
    pub arrivals_per_slice: Vec<u64>,
}

/// Progress of a run, for progress bars.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Requests completed so far, warmup included.
    pub completed: u64,
    /// Requests the run is expected to schedule (padded, see [`RunSpec::record_capacity`]).
    pub planned: u64,
    /// Time since the schedule started (ns).
    pub elapsed_ns: u64,
    /// Expected length of the whole schedule (ns, padded for count variation).
    pub expected_ns: u64,
}

/// What a run measured, before it is summarised.
pub struct RunResult {
    /// The spec it ran.
    pub spec: RunSpec,
    /// Schedule start on the harness clock.
    pub t0: u64,
    /// Start of the measured phase on the harness clock (ns); `t0` if none began.
    pub measure_start: u64,
    /// Intended time of the first measured request (ns).
    pub first_measured_intended: u64,
    /// Intended time of the last measured request (ns).
    pub last_measured_intended: u64,
    /// Warmup requests the schedule drew.
    pub generated_warmup: u64,
    /// Measured requests the schedule drew (those not completed are `unfinished`).
    pub generated_measured: u64,
    /// Merged over all workers.
    pub totals: Shard,
    /// Interval histograms, in order.
    pub intervals: Vec<IntervalBlob>,
    /// Width of one saturation-check slice (ns).
    pub slice_ns: u64,
    /// Measured arrivals per slice, by intended time.
    pub arrivals_per_slice: Vec<u64>,
    /// Requests the app failed, warmup included.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// The run hit its drain deadline and stopped before serving everything.
    pub aborted: bool,
    /// Every request's stamps, when `spec.keep_records` was set.
    pub records: Option<Arc<Records>>,
    /// Wall-clock start, for the interval logs' StartTime.
    pub wall_start: std::time::SystemTime,
    /// The app's own statistics ([`Server::report`]), read after the run.
    pub app_stats: serde_json::Value,
}

impl RunResult {
    /// Measured requests scheduled but never completed.
    pub fn unfinished(&self) -> u64 {
        let planned = match self.spec.measure {
            Bound::Requests(m) => m.max(self.generated_measured),
            Bound::Seconds(_) => self.generated_measured,
        };
        planned.saturating_sub(self.totals.measured)
    }
}

/// What the shaper thread hands workers: the item, its send time, its payload.
type JobQueue = RequestQueue<(Item, u64, Vec<u8>)>;

/// The thread shaper's queues: one shared, or one per worker.
struct Queues(Vec<JobQueue>);

impl Queues {
    /// The queue of request `item`, or of worker `w`.
    fn of(&self, w: usize) -> &JobQueue {
        &self.0[w % self.0.len()]
    }
    fn close(&self) {
        for q in &self.0 {
            q.close();
        }
    }
}

struct Shared {
    sched: Mutex<Schedule>,
    sink: IntervalSink,
    records: Option<Arc<Records>>,
    abort: AtomicBool,
    completed: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
    running: AtomicUsize,
    panic: Mutex<Option<(usize, String)>>,
    server: Arc<dyn Server>,
    spec: RunSpec,
}

/// Ends the run loudly if a worker panics (a quiet partial run would skew the tail).
struct PanicGuard<'a>(&'a Shared, usize);
impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            *self.0.panic.lock() = Some((self.1, "see the panic message above".into()));
            self.0.abort.store(true, Ordering::Release);
        }
        self.0.running.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Runs one measurement of `server` fed by `client`, in-process.
pub fn run_integrated(
    spec: &RunSpec,
    server: Arc<dyn Server>,
    client: Box<dyn Client>,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunResult, RunError> {
    spec.validate()?;
    let slice_ns = spec.slice_ns();
    let records = spec
        .keep_records
        .then(|| Arc::new(Records::new(spec.record_capacity())));
    let shared = Arc::new(Shared {
        sched: Mutex::new(Schedule::new(spec, client, 0)),
        sink: IntervalSink::new(spec.threads),
        records,
        abort: AtomicBool::new(false),
        completed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
        running: AtomicUsize::new(spec.threads),
        panic: Mutex::new(None),
        server,
        spec: spec.clone(),
    });
    let queue: Option<Arc<Queues>> = (spec.shaper == ShaperMode::Thread).then(|| {
        let n = if spec.dispatch.is_per_worker() {
            spec.threads
        } else {
            1
        };
        Arc::new(Queues(
            (0..n)
                .map(|i| {
                    RequestQueue::new(
                        spec.discipline,
                        4096,
                        spec.spin_margin_ns,
                        derive_seed(spec.seed, 3 + 1000 * i as u64),
                    )
                })
                .collect(),
        ))
    });
    let n_threads = spec.threads + usize::from(queue.is_some());
    // Two barriers: all workers initialised (engines loaded), then go.
    let ready = Arc::new(Barrier::new(n_threads + 1));
    let go = Arc::new(Barrier::new(n_threads + 1));
    let init_errors: Arc<Mutex<Vec<RunError>>> = Arc::default();

    let mut handles = Vec::new();
    for w in 0..spec.threads {
        let (sh, q, ready, go, ie) = (
            shared.clone(),
            queue.clone(),
            ready.clone(),
            go.clone(),
            init_errors.clone(),
        );
        let h = std::thread::Builder::new()
            .name(format!("taillab-wrk-{w}"))
            .spawn(move || -> Option<Shard> {
                let _guard = PanicGuard(&sh, w);
                set_timer_slack_1ns();
                let worker = place_thread(&sh.spec, w)
                    .and_then(|_| sh.server.worker(w).map_err(RunError::App));
                let mut worker = match worker {
                    Ok(x) => Some(x),
                    Err(e) => {
                        ie.lock().push(e);
                        None
                    }
                };
                ready.wait();
                go.wait();
                let wk = worker.as_mut()?;
                if sh.abort.load(Ordering::Acquire) {
                    return None;
                }
                Some(match &q {
                    None => inline_worker(&sh, w, wk.as_mut()),
                    Some(q) => queue_worker(&sh, w, wk.as_mut(), q.of(w)),
                })
            })
            .expect("spawning a worker thread");
        handles.push(h);
    }
    let shaper = queue.clone().map(|q| {
        let (sh, ready, go) = (shared.clone(), ready.clone(), go.clone());
        std::thread::Builder::new()
            .name("taillab-shaper".into())
            .spawn(move || {
                set_timer_slack_1ns();
                if let Err(e) = place_thread(&sh.spec, usize::MAX) {
                    eprintln!("warning: shaper thread: {e}");
                }
                ready.wait();
                go.wait();
                shaper_thread(&sh, &q);
            })
            .expect("spawning the shaper thread")
    });

    ready.wait();
    let init_failed = init_errors.lock().pop();
    if init_failed.is_some() {
        shared.abort.store(true, Ordering::Release);
    }
    // Start the schedule a little in the future so every thread is waiting.
    let t0 = now_ns() + 2_000_000;
    shared.sched.lock().t0 = t0;
    let wall_start = std::time::SystemTime::now();
    go.wait();
    if let Some(e) = init_failed {
        if let Some(q) = &queue {
            q.close();
        }
        for h in handles {
            let _ = h.join();
        }
        return Err(e);
    }

    let expected = spec.expected_total_ns();
    let mut watch = spec.drain_watch(t0);
    let planned = spec.record_capacity();
    let mut aborted_at = None;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        shared.sink.collect();
        let now = now_ns();
        let done = shared.completed.load(Ordering::Relaxed);
        progress(Progress {
            completed: done,
            planned,
            elapsed_ns: now.saturating_sub(t0),
            expected_ns: expected,
        });
        if shared.running.load(Ordering::Acquire) == 0 {
            break;
        }
        let backlog = || {
            let s = shared.sched.lock();
            let last = s.last_measured_intended.saturating_sub(t0);
            spec.backlog(s.generated_warmup + s.generated_measured, last, done)
        };
        if aborted_at.is_none()
            && !shared.abort.load(Ordering::Acquire)
            && (now > watch.deadline() || watch.hopeless(now, done, backlog))
        {
            // Saturated or hung: stop handing out requests; what was not
            // served is reported as unfinished, never silently dropped.
            aborted_at = Some(now);
            shared.abort.store(true, Ordering::Release);
            if let Some(q) = &queue {
                q.close();
            }
        }
        if aborted_at.is_some_and(|t| now > t + 2_000_000_000) {
            break; // a worker stuck inside the app; leave it behind
        }
    }
    if spec.roi != crate::roi::RoiMode::None && shared.sched.lock().measure_start.is_some() {
        crate::roi::end(spec.roi);
    }
    let aborted = aborted_at.is_some();
    if let Some(s) = shaper {
        if s.is_finished() || !aborted {
            let _ = s.join();
        }
    }
    let mut totals: Option<Shard> = None;
    for h in handles {
        if aborted && !h.is_finished() {
            continue;
        }
        match h.join() {
            Ok(Some(s)) => match &mut totals {
                None => totals = Some(s),
                Some(t) => t.absorb(&s),
            },
            Ok(None) => {}
            Err(_) => {}
        }
    }
    if let Some((w, msg)) = shared.panic.lock().take() {
        return Err(RunError::Panicked(w, msg));
    }
    let intervals = shared.sink.finish();
    let sched = shared.sched.lock();
    let totals = totals.unwrap_or_else(|| Shard::new(0, &shared.sink, slice_ns, spec.interval_ns));
    let measure_start = sched.measure_start.unwrap_or(t0);
    let (gw, gm, fmi, lmi, aps) = (
        sched.generated_warmup,
        sched.generated_measured,
        sched.first_measured_intended,
        sched.last_measured_intended,
        sched.arrivals_per_slice.clone(),
    );
    drop(sched);
    let records = shared.records.clone();
    let app_stats = shared.server.report();
    let first_error = shared.first_error.lock().clone();
    Ok(RunResult {
        spec: spec.clone(),
        t0,
        measure_start,
        first_measured_intended: fmi,
        last_measured_intended: lmi,
        generated_warmup: gw,
        generated_measured: gm,
        totals,
        intervals,
        slice_ns,
        arrivals_per_slice: aps,
        errors: shared.errors.load(Ordering::Relaxed),
        first_error,
        aborted,
        records,
        wall_start,
        app_stats,
    })
}

/// Applies `--rt-priority` and `--cpus` to the calling thread (`w` is the
/// worker index, `usize::MAX` for the shaper).
fn place_thread(spec: &RunSpec, w: usize) -> Result<(), RunError> {
    place_thread_on(&spec.cpus, spec.rt_priority, w)
}

/// Checks that every CPU in `cpus` (given with `flag`) is one this process
/// may run on, so a bad list is refused before a run starts rather than inside a thread.
pub fn check_cpus(flag: &str, cpus: &[usize]) -> Result<(), RunError> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: cpu_set_t is plain data; we pass its true size.
    let (r, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let r = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (r, set)
    };
    if r != 0 {
        return Ok(()); // cannot tell; placing the thread will say what is wrong
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET only reads the set, `i` is below its size.
    let allowed: Vec<usize> = (0..max)
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .collect();
    match cpus.iter().find(|c| !allowed.contains(c)) {
        None => Ok(()),
        Some(c) => Err(RunError::Invalid(format!(
            "{flag}: CPU {c} is not available to this process (it may use {}; see `nproc`)",
            allowed
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ))),
    }
}

/// Pins the calling thread to `cpus[w % len]` (the last CPU for
/// `w == usize::MAX`) and puts it under SCHED_FIFO at `rt_priority`; either
/// may be absent. Used by integrated workers and by `taillab serve`'s.
pub fn place_thread_on(cpus: &[usize], rt_priority: Option<i32>, w: usize) -> Result<(), RunError> {
    if !cpus.is_empty() {
        let cpu = if w == usize::MAX {
            *cpus.last().expect("non-empty")
        } else {
            cpus[w % cpus.len()]
        };
        // SAFETY: cpu_set_t is plain data; we pass its true size.
        let r = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if r != 0 {
            return Err(RunError::Setup(format!(
                "cannot pin a thread to CPU {cpu}: {} (check --cpus against `nproc`)",
                std::io::Error::last_os_error()
            )));
        }
    }
    if let Some(prio) = rt_priority {
        let p = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: plain syscall on the calling thread with a valid param struct.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
            return Err(RunError::Setup(format!(
                "SCHED_FIFO priority {prio} refused: {} (needs root or CAP_SYS_NICE; priorities 1..=99)",
                std::io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// Adds the simulated network delay of one direction (0 without `--net-delay`).
#[inline]
fn net_delay(d: &Option<Dist>, rng: &mut Xoshiro256PlusPlus) -> u64 {
    match d {
        None => 0,
        Some(d) => d.sample(rng) as u64,
    }
}

#[inline]
fn finish_request(
    sh: &Shared,
    shard: &mut Shard,
    w: usize,
    item: &Item,
    stamps: &Stamps,
    result: Result<(), AppError>,
) {
    if let Err(e) = result {
        if sh.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            *sh.first_error.lock() = Some(e.to_string());
        }
    }
    if let Some(r) = &sh.records {
        r.set(item.index, stamps, w, item.measured);
    }
    shard.record(stamps, item.measured, &sh.sink);
    if item.measured {
        crate::roi::heartbeat(sh.spec.roi);
    }
    sh.completed.fetch_add(1, Ordering::Relaxed);
}

/// An idle inline worker generates requests ahead until shortly before `until` (its next
/// arrival): in the integrated configuration the client's request generation runs on the
/// worker, and done between requests of a backlog it would delay every waiting request —
/// time the run's ideal (service times only) does not have. One request per lock hold, and
/// never waiting for the lock another worker holds.
fn prefill(sh: &Shared, until: u64) {
    let mut cost = 0;
    loop {
        let t = now_ns();
        if t + 2 * cost + PREFILL_GUARD_NS >= until {
            return;
        }
        let Some(mut s) = sh.sched.try_lock() else {
            return;
        };
        if !s.prefill_one(&sh.sink) {
            return;
        }
        drop(s);
        cost = now_ns() - t;
    }
}

/// How long before an arrival an idle inline worker stops generating requests ahead.
const PREFILL_GUARD_NS: u64 = 5_000;

fn inline_worker(sh: &Shared, w: usize, worker: &mut dyn crate::app::Worker) -> Shard {
    let spec = &sh.spec;
    let mut shard = Shard::new(w, &sh.sink, sh.sched.lock().slice_ns, spec.interval_ns);
    let mut req = Vec::with_capacity(256);
    let mut resp = Vec::with_capacity(256);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(spec.seed, 100 + w as u64));
    loop {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        // Only LIFO and random order need the time: they pick among requests due by now.
        let now = if spec.discipline == Discipline::Fifo {
            0
        } else {
            now_ns()
        };
        let claimed = sh
            .sched
            .lock()
            .claim(w, now, spec.discipline, &mut req, &sh.sink);
        let Some(item) = claimed else {
            break;
        };
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        // The request reaches the server after the simulated outbound delay.
        let arrive = item.intended + net_delay(&spec.net_delay, &mut rng);
        let now = now_ns();
        let (sent, started) = if now < arrive {
            // Early: generate the next requests while idle, then wait for the
            // arrival; any lateness of the wake-up is the harness's send lag,
            // not queueing.
            prefill(sh, arrive);
            let t = wait_until(arrive, spec.wait, spec.spin_margin_ns);
            (t, t)
        } else {
            // Late: the request has been queued since it arrived.
            (arrive, now)
        };
        resp.clear();
        let r = worker.handle(&req, &mut resp);
        let finished = now_ns();
        let completed = finished + net_delay(&spec.net_delay, &mut rng);
        let stamps = Stamps::local(
            item.intended,
            sent - (arrive - item.intended),
            sent,
            started,
            finished,
            completed,
        );
        finish_request(sh, &mut shard, w, &item, &stamps, r);
    }
    shard.flush(&sh.sink);
    shard
}

fn shaper_thread(sh: &Shared, q: &Queues) {
    let spec = &sh.spec;
    let mut buf = Vec::with_capacity(256);
    // The shaper is the client: it waits hybrid (or spins with --wait spin),
    // never blocks only, because its lateness is send lag.
    let mode = if spec.wait == WaitMode::Spin {
        WaitMode::Spin
    } else {
        WaitMode::Hybrid
    };
    loop {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let Some(item) = sh.sched.lock().next(&mut buf, &sh.sink) else {
            break;
        };
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        let sent = wait_until(item.intended, mode, spec.spin_margin_ns);
        let payload = std::mem::replace(&mut buf, Vec::with_capacity(256));
        q.of(item.worker).push((item, sent, payload));
    }
    q.close();
}

fn queue_worker(sh: &Shared, w: usize, worker: &mut dyn crate::app::Worker, q: &JobQueue) -> Shard {
    let spec = &sh.spec;
    let mut shard = Shard::new(w, &sh.sink, sh.sched.lock().slice_ns, spec.interval_ns);
    let mut resp = Vec::with_capacity(256);
    while let Some((item, sent, payload)) = q.pop(spec.wait) {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let started = now_ns();
        resp.clear();
        let r = worker.handle(&payload, &mut resp);
        let finished = now_ns();
        // In-process the push is the arrival and the return is the completion.
        let stamps = Stamps::local(item.intended, sent, sent, started, finished, finished);
        finish_request(sh, &mut shard, w, &item, &stamps, r);
    }
    shard.flush(&sh.sink);
    shard
}

#[cfg(test)]
mod prefill_tests {
    use super::*;

    struct Counter(u64);
    impl Client for Counter {
        fn next_request(&mut self, out: &mut Vec<u8>) {
            self.0 += 1;
            out.extend_from_slice(&self.0.to_le_bytes());
        }
    }

    fn drain(s: &mut Schedule, sink: &IntervalSink, prefill_every: usize) -> Vec<(u64, u64, u64)> {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            if prefill_every > 0 && got.len() % prefill_every == 0 {
                for _ in 0..prefill_every {
                    s.prefill_one(sink);
                }
            }
            let Some(it) = s.next(&mut buf, sink) else {
                break;
            };
            let payload = u64::from_le_bytes(buf[..8].try_into().unwrap());
            got.push((it.index, it.intended, payload));
        }
        got
    }

    /// Requests generated ahead come out exactly as without: same order, same intended
    /// times, each with its own payload; the schedule ends at the same request; the
    /// look-ahead is bounded.
    #[test]
    fn generating_ahead_changes_nothing_but_when() {
        let spec = RunSpec {
            measure: Bound::Requests(3_000),
            warmup: Bound::Requests(100),
            ..RunSpec::default()
        };
        let sink = IntervalSink::new(1);
        let plain = drain(&mut Schedule::new(&spec, Box::new(Counter(0)), 0), &sink, 0);
        assert_eq!(plain.len(), 3_100);
        for k in [1, 7, 5_000] {
            let mut s = Schedule::new(&spec, Box::new(Counter(0)), 0);
            assert_eq!(drain(&mut s, &sink, k), plain, "prefill {k} at a time");
            assert_eq!(s.stats().generated_measured, 3_000);
        }
        let mut s = Schedule::new(&spec, Box::new(Counter(0)), 0);
        while s.prefill_one(&sink) {}
        assert_eq!(s.ahead.len(), AHEAD_MAX);
    }
}
