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
use crate::arrival::derive_seed;
use crate::clock::{now_ns, set_timer_slack_1ns, wait_until, WaitMode};
use crate::collector::{IntervalBlob, IntervalSink, Shard, Stamps};
use crate::dist::Dist;
use crate::fanout::{FanState, FanoutHists};
use crate::feed::Feed;
use crate::outbox::{Outbox, Served};
use crate::queue::{Discipline, RequestQueue};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

pub use crate::placement::place_thread_on;
pub use crate::records::{RecordWriter, Records, RECORD_BYTES, RECORD_CHUNK};
pub use crate::schedule::{Item, Schedule, ScheduleStats, AHEAD_MAX};
pub use crate::spec::{check_cpus, Bound, RunError, RunSpec, ShaperMode, DEFAULT_SPIN_MARGIN_NS};

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
    /// The measured phase has begun.
    pub measuring: bool,
    /// Requests due by now (sent by now, over TCP) that have not completed; only when
    /// [`RunSpec::live`] (counting them draws arrival times ahead, see
    /// [`Schedule::due_by`]).
    pub in_flight: Option<u64>,
    /// The measured phase's last interval every thread has finished; only when
    /// [`RunSpec::live`].
    pub interval: Option<crate::collector::LiveInterval>,
    /// The warmup's last interval every thread has finished (kept for the live numbers
    /// alone); only when [`RunSpec::live`].
    pub warmup_interval: Option<crate::collector::LiveInterval>,
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
    /// Where the threads ran (integrated runs).
    pub placement: Option<crate::placement::PlacementSummary>,
    /// A fan-out run's leaves and copies.
    pub fanout: Option<crate::fanout::FanoutRun>,
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

/// What a dispatching thread (the thread shaper, a fan-out's dispatcher) hands a worker.
struct Job {
    item: Item,
    /// When this copy was sent.
    sent: u64,
    /// When its request was released (a hedge's copy goes later).
    released: u64,
    payload: Vec<u8>,
    /// A fan-out's first copy of a sub-request (else a hedged or tied one).
    primary: bool,
}

type JobQueue = RequestQueue<Job>;

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
    feed: Feed,
    sink: IntervalSink,
    records: Option<Arc<Records>>,
    abort: AtomicBool,
    /// Requests each worker completed (its own line; the main thread adds them up).
    completed: Box<[CachePadded<AtomicU64>]>,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
    running: AtomicUsize,
    /// Each worker's outbox to its helper (empty without helpers).
    outboxes: Box<[Outbox]>,
    /// A fan-out's state (`spec.fanout`).
    fan: Option<FanState>,
    panic: Mutex<Option<(usize, String)>>,
    server: Arc<dyn Server>,
    spec: RunSpec,
}

impl Shared {
    /// Requests completed so far, warmup included, over all workers.
    fn completed_all(&self) -> u64 {
        self.completed
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
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

/// Runs one measurement of `server` fed by `client`, in-process: builds the
/// shared state and queues, starts the threads (workers, the shaper, helpers)
/// behind two barriers, watches the run to its end (or abort), joins the
/// threads and gathers their shards into the result.
pub fn run_integrated(
    spec: &RunSpec,
    server: Arc<dyn Server>,
    client: Box<dyn Client>,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunResult, RunError> {
    spec.validate()?;
    let fan = spec
        .fanout
        .as_ref()
        .filter(|f| f.is_on() || f.needed() < f.leaves);
    let helper_cpus = if spec.shaper == ShaperMode::Inline
        && spec.roi == crate::roi::RoiMode::None
        && fan.is_none()
    {
        let allowed = crate::placement::allowed_cpus().unwrap_or_default();
        crate::placement::helper_cpus(&spec.cpus, spec.threads, spec.helpers, &allowed)
    } else {
        Vec::new()
    };
    let shared = shared_state(spec, server, client, fan, !helper_cpus.is_empty());
    let queue = queues(spec, fan);
    let n_threads = spec.total_workers() + usize::from(queue.is_some());
    // Two barriers: all workers initialised (engines loaded), then go.
    let ready = Arc::new(Barrier::new(n_threads + 1));
    let go = Arc::new(Barrier::new(n_threads + 1));
    let init_errors: Arc<Mutex<Vec<RunError>>> = Arc::default();
    let handles = spawn_workers(&shared, &queue, &ready, &go, &init_errors);
    let shaper = queue.clone().map(|q| spawn_shaper(&shared, q, &ready, &go));

    ready.wait();
    let init_failed = init_errors.lock().pop();
    if init_failed.is_some() {
        shared.abort.store(true, Ordering::Release);
    }
    // Start the schedule a little in the future so every thread is waiting.
    let t0 = now_ns() + 2_000_000;
    shared.feed.schedule().set_start(t0);
    shared.sink.start.store(t0, Ordering::Release);
    // Helpers start generating ahead now, for the 2 ms before the first arrival.
    let helpers = if init_failed.is_some() {
        Vec::new()
    } else {
        spawn_helpers(&shared, &helper_cpus)
    };
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

    let aborted = watch_run(&shared, queue.as_deref(), t0, progress);
    if spec.roi != crate::roi::RoiMode::None
        && shared.feed.schedule().stats().measure_start.is_some()
    {
        crate::roi::end(spec.roi);
    }
    let totals = join_threads(shaper, handles, helpers, aborted);
    if let Some((w, msg)) = shared.panic.lock().take() {
        return Err(RunError::Panicked(w, msg));
    }
    Ok(run_result(
        &shared,
        totals,
        t0,
        wall_start,
        aborted,
        helper_cpus,
    ))
}

/// The state every thread of a run shares: the feed (schedule and dispatch),
/// the interval sink, the records, the counters and the fan-out's state.
fn shared_state(
    spec: &RunSpec,
    server: Arc<dyn Server>,
    client: Box<dyn Client>,
    fan: Option<&crate::fanout::FanoutSpec>,
    with_helpers: bool,
) -> Arc<Shared> {
    // Worker threads in all (a fan-out has `threads` per leaf replica).
    let workers = spec.total_workers();
    let records = spec.keep_records.then(|| {
        Arc::new(match spec.shaper {
            ShaperMode::Inline => Records::sharded(spec.record_capacity(), workers),
            ShaperMode::Thread => Records::new(spec.record_capacity()),
        })
    });
    let mut schedule = Schedule::new(spec, client, 0);
    if spec.live {
        schedule.watch_due();
    }
    Arc::new(Shared {
        feed: Feed::new(schedule, spec.threads, spec.discipline, spec.dispatch),
        sink: IntervalSink::new(workers).watched(spec.live, spec.interval_ns),
        records,
        abort: AtomicBool::new(false),
        completed: (0..workers).map(|_| CachePadded::default()).collect(),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
        running: AtomicUsize::new(workers),
        outboxes: (0..if with_helpers { spec.threads } else { 0 })
            .map(|_| Outbox::default())
            .collect(),
        fan: fan.map(|f| FanState::new(f.clone(), spec.threads, spec.record_capacity())),
        panic: Mutex::new(None),
        server,
        spec: spec.clone(),
    })
}

/// The request queues between the shaper (or a fan-out's dispatcher) and the
/// workers; `None` when workers take their requests inline.
fn queues(spec: &RunSpec, fan: Option<&crate::fanout::FanoutSpec>) -> Option<Arc<Queues>> {
    (spec.shaper == ShaperMode::Thread || fan.is_some()).then(|| {
        let n = match fan {
            Some(f) => f.servers(),
            None if spec.dispatch.is_per_worker() => spec.threads,
            None => 1,
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
    })
}

/// Starts the worker threads: each places itself, builds its app worker
/// (failures go to `init_errors`), waits at both barriers and serves.
fn spawn_workers(
    shared: &Arc<Shared>,
    queue: &Option<Arc<Queues>>,
    ready: &Arc<Barrier>,
    go: &Arc<Barrier>,
    init_errors: &Arc<Mutex<Vec<RunError>>>,
) -> Vec<std::thread::JoinHandle<Option<Shard>>> {
    (0..shared.spec.total_workers())
        .map(|w| {
            let (sh, q, ready, go, ie) = (
                shared.clone(),
                queue.clone(),
                ready.clone(),
                go.clone(),
                init_errors.clone(),
            );
            std::thread::Builder::new()
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
                    match (&q, &sh.fan) {
                        (None, _) => inline_worker(&sh, w, wk.as_mut()),
                        (Some(q), Some(f)) => Some(fanout_worker(
                            &sh,
                            w,
                            wk.as_mut(),
                            &q.0[w / f.workers_per_server],
                        )),
                        (Some(q), None) => Some(queue_worker(&sh, w, wk.as_mut(), q.of(w))),
                    }
                })
                .expect("spawning a worker thread")
        })
        .collect()
}

/// Starts the shaper thread (or a fan-out's dispatcher) that fills the queues.
fn spawn_shaper(
    shared: &Arc<Shared>,
    q: Arc<Queues>,
    ready: &Arc<Barrier>,
    go: &Arc<Barrier>,
) -> std::thread::JoinHandle<()> {
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
            if sh.fan.is_some() {
                fanout_dispatcher(&sh, &q);
            } else {
                shaper_thread(&sh, &q);
            }
        })
        .expect("spawning the shaper thread")
}

/// Starts one helper thread per entry of `helper_cpus`, each pinned to its CPU
/// when it has one.
fn spawn_helpers(
    shared: &Arc<Shared>,
    helper_cpus: &[Option<usize>],
) -> Vec<std::thread::JoinHandle<Vec<Shard>>> {
    let n = helper_cpus.len();
    helper_cpus
        .iter()
        .copied()
        .enumerate()
        .map(|(k, cpu)| {
            let sh = shared.clone();
            std::thread::Builder::new()
                .name(format!("taillab-hlp-{k}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        if let Err(e) = place_thread_on(&[c], None, 0) {
                            eprintln!("warning: helper thread {k}: {e}");
                        }
                    }
                    helper_thread(&sh, k, n)
                })
                .expect("spawning a helper thread")
        })
        .collect()
}

/// Reports progress every 20 ms until every worker is done; aborts a run that
/// is saturated or hung (past its drain deadline, or hopeless). Returns whether
/// it aborted.
fn watch_run(
    shared: &Shared,
    queue: Option<&Queues>,
    t0: u64,
    progress: &mut dyn FnMut(Progress),
) -> bool {
    let spec = &shared.spec;
    let expected = spec.expected_total_ns();
    let mut watch = spec.drain_watch(t0);
    let planned = spec.record_capacity();
    let mut aborted_at = None;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(20));
        shared.sink.collect();
        let now = now_ns();
        let done = shared.completed_all();
        let in_flight = if spec.live {
            let due = shared.feed.schedule().due_by(now);
            due.map(|d| d.saturating_sub(done))
        } else {
            None
        };
        progress(Progress {
            completed: done,
            planned,
            elapsed_ns: now.saturating_sub(t0),
            expected_ns: expected,
            measuring: shared.sink.measuring(now),
            in_flight,
            interval: shared.sink.latest(),
            warmup_interval: shared.sink.latest_warmup(),
        });
        if shared.running.load(Ordering::Acquire) == 0 {
            break;
        }
        let backlog = || {
            let s = shared.feed.schedule().stats();
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
            if let Some(q) = queue {
                q.close();
            }
        }
        if aborted_at.is_some_and(|t| now > t + 2_000_000_000) {
            break; // a worker stuck inside the app; leave it behind
        }
    }
    aborted_at.is_some()
}

/// Joins the threads and adds up their shards; after an abort, a thread still
/// stuck inside the app is left behind (helpers get 2 s to record what the
/// workers pushed).
fn join_threads(
    shaper: Option<std::thread::JoinHandle<()>>,
    handles: Vec<std::thread::JoinHandle<Option<Shard>>>,
    helpers: Vec<std::thread::JoinHandle<Vec<Shard>>>,
    aborted: bool,
) -> Option<Shard> {
    if let Some(s) = shaper {
        if s.is_finished() || !aborted {
            let _ = s.join();
        }
    }
    let mut totals: Option<Shard> = None;
    let mut absorb = |s: Shard| match &mut totals {
        None => totals = Some(s),
        Some(t) => t.absorb(&s),
    };
    for h in handles {
        if aborted && !h.is_finished() {
            continue;
        }
        if let Ok(Some(s)) = h.join() {
            absorb(s);
        }
    }
    // Helpers end once what the workers pushed is recorded (soon after an abort).
    let give_up = now_ns() + 2_000_000_000;
    for h in helpers {
        while aborted && !h.is_finished() && now_ns() < give_up {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if aborted && !h.is_finished() {
            continue;
        }
        if let Ok(shards) = h.join() {
            shards.into_iter().for_each(&mut absorb);
        }
    }
    totals
}

/// The run's result from its shared state and the workers' shards.
fn run_result(
    shared: &Shared,
    totals: Option<Shard>,
    t0: u64,
    wall_start: std::time::SystemTime,
    aborted: bool,
    helper_cpus: Vec<Option<usize>>,
) -> RunResult {
    let spec = &shared.spec;
    let slice_ns = spec.slice_ns();
    let intervals = shared.sink.finish();
    let sched = shared.feed.schedule().stats();
    let totals = totals.unwrap_or_else(|| Shard::new(0, &shared.sink, slice_ns, spec.interval_ns));
    let measure_start = sched.measure_start.unwrap_or(t0);
    let (gw, gm, fmi, lmi, aps) = (
        sched.generated_warmup,
        sched.generated_measured,
        sched.first_measured_intended,
        sched.last_measured_intended,
        sched.arrivals_per_slice,
    );
    let records = shared.records.clone();
    let app_stats = shared.server.report();
    let first_error = shared.first_error.lock().clone();
    RunResult {
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
        fanout: shared.fan.as_ref().map(|f| fanout_run(f, gw)),
        placement: Some(crate::placement::PlacementSummary {
            workers: spec.cpus.clone(),
            outbox_full_waits: shared
                .outboxes
                .iter()
                .map(|o| o.full_waits.load(Ordering::Relaxed))
                .sum(),
            helpers: helper_cpus,
        }),
    }
}

/// Applies `--rt-priority` (or `--nice`) and `--cpus` to the calling thread (`w` is the
/// worker index, `usize::MAX` for the shaper).
fn place_thread(spec: &RunSpec, w: usize) -> Result<(), RunError> {
    place_thread_on(&spec.cpus, spec.rt_priority, w)
        .and_then(|()| spec.nice.map_or(Ok(()), crate::placement::set_thread_nice))
        .map_err(|e| RunError::Setup(e.to_string()))
}

/// Adds the simulated network delay of one direction (0 without `--net-delay`).
#[inline]
fn net_delay(d: &Option<Dist>, rng: &mut Xoshiro256PlusPlus) -> u64 {
    match d {
        None => 0,
        Some(d) => d.sample(rng) as u64,
    }
}

/// Counts a failed request (the first failure's message is kept).
#[cold]
fn count_error(sh: &Shared, e: AppError) {
    if sh.errors.fetch_add(1, Ordering::Relaxed) == 0 {
        *sh.first_error.lock() = Some(e.to_string());
    }
}

/// One worker's bookkeeping: its histograms, its records, its completion count. Filled
/// by the worker itself — while it is idle ([`Ledger::settle`]), not between two requests
/// of a backlog, where its cost would be queueing the run's ideal does not have — or, when
/// the run has helpers, by a helper thread on another CPU from the worker's outbox.
struct Ledger<'a> {
    sh: &'a Shared,
    w: usize,
    shard: Shard,
    records: Option<RecordWriter<'a>>,
    /// Served requests not yet recorded, in the order they finished.
    pending: Vec<(Item, Stamps)>,
}

/// Served requests an inline worker keeps unrecorded at most; beyond it, a busy period
/// records a few between two requests ([`SETTLE_STEP`]) rather than all at once.
const PENDING_MAX: usize = 4096;

/// Requests recorded between two requests of a long busy period (see [`PENDING_MAX`]).
const SETTLE_STEP: usize = 4;

impl<'a> Ledger<'a> {
    fn new(sh: &'a Shared, w: usize) -> Self {
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
    fn record(&mut self, index: u64, measured: bool, stamps: &Stamps) {
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
    fn defer(&mut self, item: Item, stamps: Stamps) -> bool {
        self.pending.push((item, stamps));
        if self.pending.len() >= PENDING_MAX {
            self.settle_some(SETTLE_STEP);
            return true;
        }
        false
    }

    fn settle_some(&mut self, n: usize) {
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
    fn settle(&mut self, until: u64) {
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
    fn close(mut self) -> Shard {
        self.settle_some(usize::MAX);
        self.shard.flush(&self.sh.sink);
        self.shard
    }
}

/// Where a worker's served requests go: its own [`Ledger`], or its outbox to a helper.
// One per worker thread, on its stack: the size of the larger variant does not matter.
#[allow(clippy::large_enum_variant)]
enum Books<'a> {
    Own(Ledger<'a>),
    Helped(&'a Shared, crate::outbox::Sender<'a>),
}

impl<'a> Books<'a> {
    fn new(sh: &'a Shared, w: usize) -> Self {
        match sh.outboxes.get(w) {
            Some(o) => Books::Helped(sh, o.sender()),
            None => Books::Own(Ledger::new(sh, w)),
        }
    }

    /// Keeps a served request for the books; true when that took noticeable time (a worker's
    /// own books recorded some, or a helper's outbox was full).
    #[inline]
    fn defer(&mut self, item: Item, stamps: Stamps) -> bool {
        match self {
            Books::Own(l) => l.defer(item, stamps),
            Books::Helped(sh, tx) => tx
                .push(Served::new(item.index, item.measured, &stamps), || {
                    sh.abort.load(Ordering::Relaxed)
                }),
        }
    }

    /// Idle until `until`: record what waits (a helper does that elsewhere).
    fn settle(&mut self, until: u64) {
        if let Books::Own(l) = self {
            l.settle(until);
        }
    }

    fn helped(&self) -> bool {
        matches!(self, Books::Helped(..))
    }

    fn close(self) -> Option<Shard> {
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
fn helper_thread(sh: &Shared, k: usize, helpers: usize) -> Vec<Shard> {
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
        while generated < HELPER_BATCH && sh.feed.prefill_one(&sh.sink) {
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
const HELPER_BATCH: u64 = 256;

/// How long a helper sleeps when the ring is full and its workers' outboxes empty (µs).
const HELPER_NAP_US: u64 = 50;

/// An idle inline worker generates requests ahead until shortly before `until` (its next
/// arrival): in the integrated configuration the client's request generation runs on the
/// worker, and done between requests of a backlog it would delay every waiting request —
/// time the run's ideal (service times only) does not have. One request per lock hold, and
/// never waiting for the lock another worker holds.
fn prefill(sh: &Shared, until: u64) {
    let mut cost = 0;
    loop {
        let t = now_ns();
        if t + 2 * cost + IDLE_GUARD_NS >= until {
            return;
        }
        if !sh.feed.prefill_one(&sh.sink) {
            return;
        }
        cost = now_ns() - t;
    }
}

/// How long before an arrival an idle inline worker stops recording and generating ahead
/// (beyond twice what the last step took).
const IDLE_GUARD_NS: u64 = 500;

/// An inline worker: claim the next request ([`Feed::claim`]); early, settle the books,
/// generate ahead and wait for its arrival; late, start at once (it has been queued since
/// it arrived); serve it; claim the next one; read the clock once for this one's
/// `finished` and (if it is due) the next one's `started`; keep the stamps for the books.
///
/// So between two requests of a backlog there is nothing: the claim (one atomic ticket,
/// tens of ns) falls inside the measured service time of the request before, where the
/// run's ideal — which replays the measured service times — sees it too, as a server's
/// own dequeue would be. A claim after the `finished` stamp was instead queueing that no
/// ideal has: 2–3 % of a 1 µs service, +15–20 % on the mean sojourn at ρ 0.8.
fn inline_worker(sh: &Shared, w: usize, worker: &mut dyn crate::app::Worker) -> Option<Shard> {
    let spec = &sh.spec;
    let mut books = Books::new(sh, w);
    let mut req = Vec::with_capacity(256);
    let mut resp = Vec::with_capacity(256);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(spec.seed, 100 + w as u64));
    // Only LIFO and random order need the time: they pick among requests due by now.
    let timed = spec.discipline != Discipline::Fifo;
    let claim = |req: &mut Vec<u8>| {
        if sh.abort.load(Ordering::Relaxed) {
            return None;
        }
        let now = if timed { now_ns() } else { 0 };
        sh.feed.claim(w, now, req, &sh.sink)
    };
    let mut next = claim(&mut req);
    let mut now = now_ns();
    while let Some(item) = next {
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        // The request reaches the server after the simulated outbound delay.
        let arrive = item.intended + net_delay(&spec.net_delay, &mut rng);
        let (sent, started) = if now < arrive {
            // Early: record what was served, generate the next requests, then wait for the
            // arrival; any lateness of the wake-up is the harness's send lag, not queueing.
            books.settle(arrive);
            if !books.helped() {
                prefill(sh, arrive);
            }
            let t = wait_until(arrive, spec.wait, spec.spin_margin_ns);
            (t, t)
        } else {
            // Late: the request has been queued since it arrived.
            (arrive, now)
        };
        resp.clear();
        let r = worker.handle(&req, &mut resp);
        // The request is served (its payload no longer needed): claim the next one first.
        next = claim(&mut req);
        now = now_ns();
        let finished = now;
        if let Err(e) = r {
            count_error(sh, e);
        }
        let completed = finished + net_delay(&spec.net_delay, &mut rng);
        let stamps = Stamps::local(
            item.intended,
            sent - (arrive - item.intended),
            sent,
            started,
            finished,
            completed,
        );
        if books.defer(item, stamps) {
            now = now_ns(); // the next request's start is after the bookkeeping
        }
    }
    books.close()
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
        let Some(item) = sh.feed.schedule().next(&mut buf, &sh.sink) else {
            break;
        };
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        let sent = wait_until(item.intended, mode, spec.spin_margin_ns);
        let payload = std::mem::replace(&mut buf, Vec::with_capacity(256));
        q.of(item.worker).push(Job {
            item,
            sent,
            released: sent,
            payload,
            primary: true,
        });
    }
    q.close();
}

/// A hedge's copy due at `at` for `leaf` of request `item`, released at `released` (ordered
/// by time, soonest first).
struct HedgeAt {
    at: u64,
    leaf: usize,
    item: Item,
    released: u64,
}

impl PartialEq for HedgeAt {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}

impl Eq for HedgeAt {}

impl Ord for HedgeAt {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.item.index, o.leaf).cmp(&(self.at, self.item.index, self.leaf))
    }
}

impl PartialOrd for HedgeAt {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// A fan-out's dispatcher: releases each request at its intended time as one sub-request per
/// leaf (to replica `request mod R`, and with `tied` a copy to the next replica at once),
/// and sends a hedge's copy to the next replica when a sub-request has not answered by its
/// deadline. Every copy is a fresh draw of the app's requests (see [`crate::fanout`]).
///
/// It waits for its deadlines as the workers wait for work (`harness.wait`): with `block` it
/// sleeps to each one and is late by the host's wake-up delay (the requests' `send_lag`, the
/// hedges' `hedge_lag`, both in the model); it does not spin the last `spin_margin` before
/// each, on a CPU that a worker woken by the last release or by its service's end needs (on
/// two CPUs that held workers back by up to the margin, a cost neither recorded nor modelled).
fn fanout_dispatcher(sh: &Shared, q: &Queues) {
    let fan = sh.fan.as_ref().expect("a fan-out run");
    let (spec, f) = (&sh.spec, &fan.spec);
    let (n, r) = (f.leaves, f.replicas);
    let mode = spec.wait;
    let mut hedge_lag = FanoutHists::default().hedge_lag;
    let mut hedges = std::collections::BinaryHeap::<HedgeAt>::new();
    let mut next: Option<(Item, Vec<Vec<u8>>)> = None;
    let mut ended = false;
    let t0 = sh.feed.schedule().stats().t0;
    let copy = |to: usize, item: Item, sent: u64, released: u64, primary: bool| {
        let mut payload = Vec::with_capacity(64);
        sh.feed.schedule().extra_request(&mut payload);
        q.0[to].push(Job {
            item,
            sent,
            released,
            payload,
            primary,
        });
        if item.measured {
            fan.sent.fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        if next.is_none() && !ended {
            let mut s = sh.feed.schedule();
            let mut first = Vec::with_capacity(64);
            match s.next(&mut first, &sh.sink) {
                Some(item) if item.index < fan.capacity() => {
                    let mut ps = vec![first];
                    for _ in 1..n {
                        let mut b = Vec::with_capacity(64);
                        s.extra_request(&mut b);
                        ps.push(b);
                    }
                    next = Some((item, ps));
                }
                _ => ended = true,
            }
        }
        let t_next = next.as_ref().map_or(u64::MAX, |(it, _)| it.intended);
        let t_hedge = hedges.peek().map_or(u64::MAX, |h| h.at);
        if t_next == u64::MAX && t_hedge == u64::MAX {
            break;
        }
        let now = wait_until(t_next.min(t_hedge), mode, spec.spin_margin_ns);
        while hedges.peek().is_some_and(|h| h.at <= now) {
            let h = hedges.pop().expect("peeked");
            if !fan.answered(h.item.index, h.leaf) {
                let rep = (h.item.index as usize % r + 1) % r;
                copy(h.leaf * r + rep, h.item, now, h.released, false);
                if h.item.measured {
                    hedge_lag.saturating_record(now - h.at);
                }
            }
        }
        if t_next > now {
            continue;
        }
        let (item, payloads) = next.take().expect("due");
        fan.arrivals.lock().push(item.intended - t0);
        fan.released.lock().push(now.max(item.intended) - t0);
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        let rep = item.index as usize % r;
        let delay = fan.hedge.lock().delay();
        for (leaf, payload) in payloads.into_iter().enumerate() {
            q.0[leaf * r + rep].push(Job {
                item,
                sent: now,
                released: now,
                payload,
                primary: true,
            });
            if f.tied {
                copy(leaf * r + (rep + 1) % r, item, now, now, false);
            } else if let Some(d) = delay {
                hedges.push(HedgeAt {
                    at: now + d,
                    leaf,
                    item,
                    released: now,
                });
            }
        }
        if item.measured {
            fan.sent.fetch_add(n as u64, Ordering::Relaxed);
            fan.subs_measured.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
    fan.hists
        .lock()
        .hedge_lag
        .add(&hedge_lag)
        .expect("auto-resizing histograms add");
    q.close();
}

/// A worker of one leaf replica: serves the copies of its queue; a copy whose sub-request
/// already answered (or, tied, whose twin started) is dropped and counted; the answer that
/// completes a request (its K-th) records the request, its stamps those of the request's
/// release and of the copy that completed it.
fn fanout_worker(
    sh: &Shared,
    w: usize,
    worker: &mut dyn crate::app::Worker,
    q: &JobQueue,
) -> Shard {
    let fan = sh.fan.as_ref().expect("a fan-out run");
    let leaf = w / fan.workers_per_server / fan.spec.replicas;
    let k = fan.spec.needed() as u32;
    let learns = matches!(fan.spec.hedge, crate::fanout::Hedge::Quantile(_));
    let mut ledger = Ledger::new(sh, w);
    let mut h = FanoutHists::default();
    let mut resp = Vec::with_capacity(256);
    // Since when this worker has had nothing to do: a copy sent after it found the worker
    // idle, and the time to its start is the worker's wake-up.
    let mut idle_since = now_ns();
    while let Some(job) = q.pop(sh.spec.wait) {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let (req, m) = (job.item.index, job.item.measured);
        if !fan.take(req, leaf) {
            h.cancelled += u64::from(m);
            idle_since = now_ns();
            continue;
        }
        let started = now_ns();
        if m && job.sent >= idle_since {
            h.wake.saturating_record(started - job.sent);
        }
        resp.clear();
        let r = worker.handle(&job.payload, &mut resp);
        let finished = now_ns();
        idle_since = finished;
        if let Err(e) = r {
            count_error(sh, e);
        }
        if m {
            h.served += 1;
            h.copy.saturating_record(finished - job.sent);
            h.service.saturating_record(finished - started);
        }
        if job.primary && learns {
            fan.hedge.lock().observe(finished - job.sent);
        }
        let Some(answers) = fan.answer(req, leaf) else {
            continue;
        };
        let intended = job.item.intended;
        if m {
            h.leaf.saturating_record(finished - intended);
        }
        if answers == k {
            if m {
                h.e2e.saturating_record(finished - intended);
                h.e2e_released.saturating_record(finished - job.released);
            }
            // Sent when the request was released; enqueued when this copy was (a hedge's
            // later), so `queue` is the completing copy's own wait.
            let stamps = Stamps::local(
                intended,
                job.released,
                job.sent,
                started,
                finished,
                finished,
            );
            ledger.record(req, m, &stamps);
            sh.completed[w].fetch_add(1, Ordering::Relaxed);
        }
    }
    fan.per_leaf.lock()[leaf]
        .add(&h.leaf)
        .expect("auto-resizing histograms add");
    fan.hists.lock().absorb(&h);
    ledger.close()
}

/// What a fan-out run measured (its model is made when it is summarised).
fn fanout_run(fan: &FanState, warmup: u64) -> crate::fanout::FanoutRun {
    let mut hists = std::mem::take(&mut *fan.hists.lock());
    hists.subs = fan.subs_measured.load(Ordering::Relaxed);
    hists.sent = fan.sent.load(Ordering::Relaxed);
    crate::fanout::FanoutRun {
        spec: fan.spec.clone(),
        workers_per_replica: fan.workers_per_server,
        hists,
        per_leaf: fan
            .per_leaf
            .lock()
            .iter()
            .map(|h| crate::collector::MetricStats::from_hist(h, None))
            .collect(),
        arrivals: std::mem::take(&mut *fan.arrivals.lock()),
        released: std::mem::take(&mut *fan.released.lock()),
        warmup,
    }
}

fn queue_worker(sh: &Shared, w: usize, worker: &mut dyn crate::app::Worker, q: &JobQueue) -> Shard {
    let spec = &sh.spec;
    let mut ledger = Ledger::new(sh, w);
    let mut resp = Vec::with_capacity(256);
    while let Some(Job {
        item,
        sent,
        payload,
        ..
    }) = q.pop(spec.wait)
    {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let started = now_ns();
        resp.clear();
        let r = worker.handle(&payload, &mut resp);
        let finished = now_ns();
        if let Err(e) = r {
            count_error(sh, e);
        }
        // In-process the push is the arrival and the return is the completion.
        let stamps = Stamps::local(item.intended, sent, sent, started, finished, finished);
        ledger.record(item.index, item.measured, &stamps);
        sh.completed[w].fetch_add(1, Ordering::Relaxed);
    }
    ledger.close()
}
