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
//!   order or per-worker queues, the requests that are due but not yet
//!   claimed wait in a backlog (one shared, without a lock on the claim, or
//!   one per worker with per-worker dispatch; [`crate::feed`]), and a free
//!   worker picks from the requests already due in its queue by the
//!   discipline — the newest for LIFO, any one for random — or, when none
//!   is due, waits for the earliest one to come.
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
use crate::collector::{IntervalSink, Shard, Stamps};
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
use crate::result::RunResult;
pub use crate::schedule::{Item, Schedule, ScheduleStats};
pub use crate::spec::{check_cpus, Bound, RunError, RunSpec, ShaperMode, DEFAULT_SPIN_MARGIN_NS};

mod books;
mod fanout;
mod workers;

use books::*;
use fanout::*;
use workers::*;

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
    run_integrated_with(spec, server, vec![client], progress)
}

/// [`run_integrated`] with a client per producer of the schedule ([`RunSpec::producers`]:
/// the first `producers` are used, at least one; fewer clients, fewer producers).
pub fn run_integrated_with(
    spec: &RunSpec,
    server: Arc<dyn Server>,
    clients: Vec<Box<dyn Client>>,
    progress: &mut dyn FnMut(Progress),
) -> Result<RunResult, RunError> {
    spec.validate()?;
    if clients.is_empty() {
        return Err(RunError::Invalid("an integrated run needs a client".into()));
    }
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
    let shared = shared_state(spec, server, clients, fan, !helper_cpus.is_empty());
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
    shared.feed.set_start(t0);
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
    if spec.roi != crate::roi::RoiMode::None && shared.feed.stats().measure_start.is_some() {
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
    clients: Vec<Box<dyn Client>>,
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
    let m = spec.producers().min(clients.len());
    let schedules: Vec<Schedule> = if m == 1 {
        let mut schedule = Schedule::new(spec, clients.into_iter().next().expect("a client"), 0);
        if spec.live {
            schedule.watch_due();
        }
        vec![schedule]
    } else {
        clients
            .into_iter()
            .take(m)
            .enumerate()
            .map(|(j, c)| {
                let share = crate::arrival::Share::new(j, m).expect("j < m");
                Schedule::dealt(spec, c, 0, share)
            })
            .collect()
    };
    Arc::new(Shared {
        feed: Feed::with_producers(
            schedules,
            spec.threads,
            spec.discipline,
            spec.dispatch,
            derive_seed(spec.seed, 5),
        ),
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
            let s = shared.feed.stats();
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
    let sched = shared.feed.stats();
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
            producers: shared.feed.producers(),
        }),
        ideal_completions: Default::default(),
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
