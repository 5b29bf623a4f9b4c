//! The sampler: one low-priority thread that reads `/proc` every period
//! while a run measures.
//!
//! # What it reads, and why those files
//! - `/proc/stat` (host): the `cpu` line splits every CPU's wall time into
//!   user/nice/system/idle/iowait/irq/softirq/**steal**. Steal is the time
//!   the hypervisor ran someone else while our vCPU wanted to run; no
//!   in-guest tool can see it any other way. `ctxt` and `intr` give context
//!   switches and interrupts per second.
//! - `/proc/loadavg`.
//! - the harness process: `getrusage(RUSAGE_SELF)` (µs-precise CPU time,
//!   faults, voluntary and involuntary context switches of all threads, also
//!   of threads that already ended) and `/proc/self/statm` (current RSS).
//! - every thread of the harness: `/proc/self/task/T/schedstat` gives ns of
//!   CPU *and ns spent runnable but waiting for a CPU* (run-queue delay), the
//!   most direct evidence that something else took a worker's core;
//!   `status` gives its context switches, `stat` its faults and last CPU.
//! - extra processes (a server or client process in the loopback and
//!   networked configurations): `/proc/P/stat` and their threads' `status`.
//! - every other process, every `scan_period` (default 1 s) and at each phase
//!   mark: `/proc/P/stat`, to name the foreign consumers.
//!
//! # Foreign CPU: exact total, best-effort names
//! The *amount* of foreign CPU use comes from the host counters:
//! `user + nice + system` of all CPUs minus the CPU time of the harness and of
//! the extra processes. It is exact over a phase whatever processes come and
//! go. (irq and softirq time is reported separately and not counted as
//! foreign: in loopback runs much of it is our own network traffic.)
//! The *names* come from the per-process scan: the CPU-time delta of each
//! process between scans, plus processes born in between. A process that is
//! born and dies between two scans is charged to its parent as
//! `parent (children)` through the parent's `cutime`; whatever still cannot
//! be named is reported as `unattributed`, never dropped. Scanning a few
//! hundred processes costs about a millisecond, hence once a second rather
//! than every sample.
//!
//! # The experiment's process tree
//! Every process that descends from an experiment process — the harness
//! itself, or an extra pid (server, clients, hogs) — is the experiment's:
//! an app's helper processes (translate's Apertium pipeline stages), a
//! server's children, a hog's workers. The scan finds them by walking each
//! process's `PPid` chain up to the nearest experiment process, so children
//! born during the run are found at the next scan, and a helper that was
//! once seen under it stays the experiment's after it is reparented
//! (daemonized). Their CPU is subtracted from the foreign total and
//! reported under the process they descend from
//! (`ProcSample::children_cpu_pct`, `ProcTotals::children`). The scan
//! already reads every process's `stat`, where `PPid` is, so the tree costs
//! a hash-map walk per scan and no extra reads; the CPU is known per scan
//! interval and spread over its samples.
//!
//! # Units and alignment
//! Every CPU figure is a percentage **of one CPU** over the interval (100 =
//! one core fully used; a 2-CPU host's categories add up to 200), the way
//! `top` reports a process, so that "2 % steal" means the same on any host.
//! Each [`Sample`] covers the interval that ends at its `t_mono_ns`
//! (`CLOCK_MONOTONIC`, the clock of every request stamp) and also carries the
//! wall-clock time, so samples line up with 1-second interval histograms
//! ([`MonitorReport::intervals`]).
//!
//! # Phases
//! The summary covers the measured phase only. The harness either calls
//! [`Sampler::mark_measured_start`] and [`Sampler::mark_measured_end`] (each
//! wakes the sampler, which takes a sample and rescans processes at once),
//! or, if it learns the window only afterwards, passes it to
//! [`Sampler::stop_measured`]. Either way phases are assigned *by time* when
//! the sampler stops: a sample that straddles an edge of the window is split
//! there (rates shared, counts divided by duration), so the measured
//! duration is exact however late the nice-19 thread woke, and each process
//! scan's charges are shared by how much of its interval fell in each phase.
//!
//! # Cost
//! The thread runs at nice 19, so when it wakes it does not preempt a worker;
//! what it costs per sample is measured and reported in every
//! [`MonitorReport::cost`] (see monitor/README.md for numbers).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Serialize;

use crate::error::MonitorError;
use crate::procfs::{self, counter_delta, CpuTimes, HostStat};
use crate::sample::{
    ChildProcess, ForeignProcess, HostSample, Phase, ProcSample, Sample, SamplerCost, ThreadInfo,
    ThreadSample,
};
use crate::summary::EnvSummary;

/// How the sampler samples.
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// Time between samples of the host and the harness (default 100 ms).
    pub period: Duration,
    /// Time between scans of all processes to name foreign consumers
    /// (default 1 s; also scanned at every phase mark and at stop).
    pub scan_period: Duration,
    /// Other processes that belong to the experiment (server, clients):
    /// their CPU is not foreign, and they are reported like the harness.
    pub extra_pids: Vec<i32>,
    /// Thread ids of worker threads (see also [`register_worker_thread`]).
    pub worker_tids: Vec<i32>,
    /// Nice value of the sampler thread (default 19: lowest priority, so it
    /// never preempts a worker when it wakes).
    pub nice: i32,
    /// Pin the sampler thread to this CPU (e.g. the client's core rather than
    /// a worker's); `None` lets the scheduler place it.
    pub pin_cpu: Option<usize>,
    /// How many foreign processes the summary names (default 5).
    pub top_n: usize,
    /// Keep per-sample records (the time series); off keeps only the summary.
    pub keep_series: bool,
    /// Threads whose name starts with this are workers too (the harness
    /// names its workers `taillab-wrk-N`, short enough that the 15 bytes
    /// the kernel keeps still tell them apart).
    pub worker_name_prefix: Option<String>,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            period: Duration::from_nanos(
                taillab_core::config::sections::monitor_defaults::PERIOD_NS,
            ),
            scan_period: Duration::from_secs(1),
            extra_pids: Vec::new(),
            worker_tids: Vec::new(),
            nice: 19,
            pin_cpu: None,
            top_n: 5,
            keep_series: true,
            worker_name_prefix: None,
        }
    }
}

impl SamplerConfig {
    /// Checks the settings; the error names the bad one.
    pub fn validate(&self) -> Result<(), MonitorError> {
        if self.period < Duration::from_millis(10) || self.period > Duration::from_secs(60) {
            return Err(MonitorError::BadConfig {
                key: "period",
                why: format!(
                    "{:?} is outside 10 ms ..= 60 s (host counters tick every 10 ms, so shorter periods only add noise)",
                    self.period
                ),
            });
        }
        if self.scan_period < self.period {
            return Err(MonitorError::BadConfig {
                key: "scan_period",
                why: format!(
                    "{:?} is shorter than period {:?}; use a multiple of period",
                    self.scan_period, self.period
                ),
            });
        }
        if !(-20..=19).contains(&self.nice) {
            return Err(MonitorError::BadConfig {
                key: "nice",
                why: format!("{} is outside -20 ..= 19", self.nice),
            });
        }
        Ok(())
    }
}

/// What [`Sampler::stop`] returns.
#[derive(Debug, Clone, Serialize)]
pub struct MonitorReport {
    /// Sampling period, ms (`SamplerConfig::period`).
    pub period_ms: f64,
    /// Process-scan period, ms (`SamplerConfig::scan_period`).
    pub scan_period_ms: f64,
    /// Online CPUs (`cpuN` lines of `/proc/stat`) at the last sample.
    pub ncpu: usize,
    /// Baseline reading, ns on `CLOCK_MONOTONIC`.
    pub start_mono_ns: u64,
    /// Baseline reading, ns since the Unix epoch.
    pub start_wall_ns: u64,
    /// Last reading, ns on `CLOCK_MONOTONIC`.
    pub stop_mono_ns: u64,
    /// Start of the measured phase (mark or [`Sampler::stop_measured`]),
    /// ns on `CLOCK_MONOTONIC`; `None` when it was never marked.
    pub measured_start_mono_ns: Option<u64>,
    /// End of the measured phase, ns on `CLOCK_MONOTONIC` (the stop time
    /// when only the start was marked); `None` when never marked.
    pub measured_end_mono_ns: Option<u64>,
    /// Every thread of this process seen, the sampler's own excepted.
    pub threads: Vec<ThreadInfo>,
    /// Top foreign processes per phase (all names, sorted by CPU).
    pub foreign: BTreeMap<Phase, Vec<ForeignProcess>>,
    /// What the sampler thread cost.
    pub cost: SamplerCost,
    /// The time series (empty when `keep_series` was off).
    pub samples: Vec<Sample>,
    /// Totals and maxima over the measured phase.
    pub summary: EnvSummary,
}

static WORKERS: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// Marks the calling thread as a worker for every sampler of this process
/// and returns its kernel thread id. Call it first thing in a worker thread.
/// Thread ids that no longer exist are forgotten by the next sampler start.
pub fn register_worker_thread() -> i32 {
    let tid = procfs::gettid();
    WORKERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(tid);
    tid
}

/// Removes the calling thread from the worker registry.
pub fn unregister_worker_thread() {
    let tid = procfs::gettid();
    WORKERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&tid);
}

fn registered_workers() -> BTreeSet<i32> {
    WORKERS.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

struct Ctl {
    phase: Phase,
    /// Phase changes not yet seen by the sampler thread, with their times.
    transitions: VecDeque<(Phase, u64)>,
    stop: bool,
    worker_tids: BTreeSet<i32>,
    extra_pids: Vec<i32>,
    measured_start_ns: Option<u64>,
    measured_end_ns: Option<u64>,
    /// Measured window given to `stop_measured`, overriding the marks.
    window: Option<(u64, u64)>,
}

struct Shared {
    ctl: Mutex<Ctl>,
    cv: Condvar,
    /// Foreign CPU over the last second (% of one CPU, f64 bits; NaN before a second's samples).
    foreign_1s: Arc<AtomicU64>,
}

/// The sampler's foreign CPU over the last second, read from another thread (a live metrics
/// endpoint) while the run goes on.
#[derive(Debug, Clone)]
pub struct LiveForeign(Arc<AtomicU64>);

impl LiveForeign {
    /// Other processes' CPU over the last second, % of one CPU (`None` before a second passed).
    pub fn pct(&self) -> Option<f64> {
        let v = f64::from_bits(self.0.load(Ordering::Relaxed));
        (!v.is_nan()).then_some(v)
    }

    /// A handle no sampler of this process feeds: [`LiveForeign::relay`] sets it with what a
    /// sampler elsewhere read (a coordinated client's endpoint: its coordinator's sampler,
    /// which watches the same host). Empty until then.
    pub fn relayed() -> LiveForeign {
        LiveForeign(Arc::new(AtomicU64::new(f64::NAN.to_bits())))
    }

    /// Sets a [`LiveForeign::relayed`] handle's figure (% of one CPU).
    pub fn relay(&self, pct: f64) {
        self.0.store(pct.to_bits(), Ordering::Relaxed);
    }
}

/// A running sampler. Dropping it stops the thread and discards the data;
/// call [`Sampler::stop`] for the report.
pub struct Sampler {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<Result<MonitorReport, MonitorError>>>,
}

impl Sampler {
    /// Starts the sampler thread. It takes its baseline reading before this
    /// returns, so everything after the call is covered.
    pub fn start(config: SamplerConfig) -> Result<Sampler, MonitorError> {
        config.validate()?;
        let mut workers: BTreeSet<i32> = config.worker_tids.iter().copied().collect();
        // Forget registered tids whose thread is gone (an earlier run's workers).
        {
            let mut reg = WORKERS.lock().unwrap_or_else(|e| e.into_inner());
            reg.retain(|tid| std::path::Path::new(&format!("/proc/self/task/{tid}")).exists());
        }
        workers.extend(registered_workers());
        let shared = Arc::new(Shared {
            ctl: Mutex::new(Ctl {
                phase: Phase::Warmup,
                transitions: VecDeque::new(),
                stop: false,
                worker_tids: workers,
                extra_pids: config.extra_pids.clone(),
                measured_start_ns: None,
                measured_end_ns: None,
                window: None,
            }),
            cv: Condvar::new(),
            foreign_1s: Arc::new(AtomicU64::new(f64::NAN.to_bits())),
        });
        // The baseline is read on the sampler thread; wait until it has been.
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), MonitorError>>();
        let sh = shared.clone();
        let handle = std::thread::Builder::new()
            .name("taillab-monitor".into())
            .spawn(move || run_thread(config, sh, ready_tx))
            .map_err(MonitorError::Spawn)?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Sampler {
                shared,
                handle: Some(handle),
            }),
            Ok(Err(e)) => {
                let _ = handle.join();
                Err(e)
            }
            Err(_) => Err(join_error(handle)),
        }
    }

    fn transition(&self, phase: Phase) {
        let now = procfs::mono_ns();
        let mut c = self.shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        if c.phase == phase {
            return;
        }
        c.phase = phase;
        match phase {
            Phase::Measured => c.measured_start_ns = Some(now),
            Phase::After => c.measured_end_ns = Some(now),
            Phase::Warmup => {}
        }
        c.transitions.push_back((phase, now));
        self.shared.cv.notify_all();
    }

    /// A handle on the foreign CPU over the last second, for another thread.
    pub fn live_foreign(&self) -> LiveForeign {
        LiveForeign(self.shared.foreign_1s.clone())
    }

    /// The measured phase starts now. Non-blocking: the sampler closes the
    /// warmup interval as soon as it is scheduled.
    pub fn mark_measured_start(&self) {
        self.transition(Phase::Measured);
    }

    /// The measured phase ends now.
    pub fn mark_measured_end(&self) {
        self.transition(Phase::After);
    }

    /// Adds a worker thread id (e.g. reported by a worker thread after it
    /// started). Takes effect from the next sample.
    pub fn add_worker_tid(&self, tid: i32) {
        self.shared
            .ctl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .worker_tids
            .insert(tid);
    }

    /// Adds a process that belongs to the experiment (e.g. a server started
    /// after the sampler). Its CPU stops counting as foreign from the next
    /// sample.
    pub fn add_pid(&self, pid: i32) {
        let mut c = self.shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        if !c.extra_pids.contains(&pid) {
            c.extra_pids.push(pid);
        }
    }

    /// Takes a last sample, stops the thread and returns the report.
    pub fn stop(mut self) -> Result<MonitorReport, MonitorError> {
        self.signal_stop();
        let handle = self
            .handle
            .take()
            .expect("handle present until stop or drop");
        match handle.join() {
            Ok(r) => r,
            Err(p) => Err(MonitorError::SamplerPanicked(panic_text(&p))),
        }
    }

    /// Stops like [`stop`](Self::stop), with the measured phase given as
    /// `[start_mono_ns, end_mono_ns)` on `CLOCK_MONOTONIC` instead of by
    /// marks: for a harness that knows the window only afterwards (e.g. the
    /// intended time of the first measured request). Samples straddling the
    /// window's edges are split at them.
    pub fn stop_measured(
        self,
        start_mono_ns: u64,
        end_mono_ns: u64,
    ) -> Result<MonitorReport, MonitorError> {
        if end_mono_ns <= start_mono_ns {
            return Err(MonitorError::BadConfig {
                key: "measured window",
                why: format!("end {end_mono_ns} is not after start {start_mono_ns}"),
            });
        }
        self.shared
            .ctl
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .window = Some((start_mono_ns, end_mono_ns));
        self.stop()
    }

    fn signal_stop(&self) {
        let mut c = self.shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        c.stop = true;
        self.shared.cv.notify_all();
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            self.signal_stop();
            let _ = h.join();
        }
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

fn join_error(h: JoinHandle<Result<MonitorReport, MonitorError>>) -> MonitorError {
    match h.join() {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => {
            MonitorError::SamplerPanicked("sampler thread ended before its baseline".into())
        }
        Err(p) => MonitorError::SamplerPanicked(panic_text(&p)),
    }
}

/// Lowers the calling thread's priority and optionally pins it. Failures are
/// ignored: an unpinned, normal-priority sampler still measures correctly.
fn make_unobtrusive(nice: i32, pin: Option<usize>) {
    let tid = procfs::gettid();
    // SAFETY: setpriority on our own tid; no memory is passed.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
    if let Some(cpu) = pin {
        // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks against its size.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if cpu < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// Readings
// ----------------------------------------------------------------------------

#[derive(Clone, Copy, Default)]
struct SelfReading {
    cpu_ns: u64,
    minflt: u64,
    majflt: u64,
    nvcsw: u64,
    nivcsw: u64,
    rss_bytes: u64,
    storage_bytes: u64,
}

#[derive(Clone, Copy, Default)]
struct ThreadReading {
    /// status and stat were read (workers): the counts below are valid.
    detail: bool,
    run_ns: u64,
    wait_ns: u64,
    vol: u64,
    invol: u64,
    minflt: u64,
    majflt: u64,
    cpu: Option<u32>,
}

#[derive(Clone, Copy, Default)]
struct ProcReading {
    ticks: u64,
    minflt: u64,
    majflt: u64,
    rss_bytes: u64,
    vol: u64,
    invol: u64,
    storage_bytes: u64,
}

#[derive(Clone)]
struct ScanEntry {
    starttime: u64,
    ticks: u64,
    child_ticks: u64,
    ppid: i32,
    comm: String,
    /// The experiment process it descends from (itself for a root).
    root: Option<i32>,
}

#[derive(Default)]
struct ForeignAcc {
    ticks: f64,
    /// CPU ticks charged per pid, to list the heaviest pids first.
    pids: HashMap<i32, f64>,
}

struct State {
    cfg: SamplerConfig,
    ticks_per_s: f64,
    page: u64,
    buf: String,
    self_pid: i32,
    sampler_tid: i32,
    host: HostStat,
    self_r: SelfReading,
    threads: HashMap<i32, ThreadReading>,
    thread_names: BTreeMap<i32, String>,
    procs: HashMap<i32, ProcReading>,
    scan: HashMap<i32, ScanEntry>,
    last_scan_boot_ns: u64,
    last_scan_mono_ns: u64,
    /// What each process scan charged, with the interval it covers.
    scans: Vec<ScanRecord>,
    auto_workers: BTreeSet<i32>,
    last_mono: u64,
}

/// What one scan over `[from, to]` (monotonic ns) charged: foreign CPU as
/// (name, pid, ticks), and the experiment's descendant processes.
struct ScanRecord {
    from: u64,
    to: u64,
    charges: Vec<(String, i32, u64)>,
    /// CPU of the experiment's descendant processes.
    ours: Vec<OurCharge>,
}

/// CPU ticks of a process that descends from an experiment process `root`
/// (the harness or an extra pid): a helper it started, or the helper's
/// reaped children (`name` ends in ` (children)`).
#[derive(Debug, Clone)]
struct OurCharge {
    root: i32,
    name: String,
    pid: i32,
    ticks: u64,
}

fn read_host(st: &mut State) -> Result<HostStat, MonitorError> {
    procfs::read_into("/proc/stat".as_ref(), &mut st.buf)
        .map_err(|e| MonitorError::io("/proc/stat", e))?;
    Ok(procfs::parse_stat(&st.buf)?)
}

/// Bytes `path` (`/proc/[pid]/io`) says the process made the block layer read or
/// write: what the kernel's storage workers did on its behalf. 0 when unreadable.
fn storage_bytes(st: &mut State, path: &str) -> u64 {
    procfs::read_into(path.as_ref(), &mut st.buf)
        .ok()
        .and_then(|_| procfs::parse_pid_io(&st.buf).ok())
        .map_or(0, |io| io.read_bytes + io.write_bytes)
}

fn read_self(st: &mut State) -> SelfReading {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let rss_pages = procfs::read_into("/proc/self/statm".as_ref(), &mut st.buf)
        .ok()
        .and_then(|_| {
            st.buf
                .split_ascii_whitespace()
                .nth(1)
                .and_then(|t| t.parse::<u64>().ok())
        })
        .unwrap_or(0);
    SelfReading {
        cpu_ns: tv(ru.ru_utime) + tv(ru.ru_stime),
        minflt: ru.ru_minflt as u64,
        majflt: ru.ru_majflt as u64,
        nvcsw: ru.ru_nvcsw as u64,
        nivcsw: ru.ru_nivcsw as u64,
        rss_bytes: rss_pages * st.page,
        storage_bytes: storage_bytes(st, "/proc/self/io"),
    }
}

/// Reads every thread of this process: `schedstat` (CPU and run-queue wait)
/// for all, `status` and `stat` (context switches, faults, CPU) only for
/// workers and, once, for a new thread's name. Per-thread `status` is the
/// costliest file (~1.5 kB of text), and the process-wide switch counts come
/// from `getrusage` anyway.
fn read_threads(st: &mut State, workers: &BTreeSet<i32>) -> HashMap<i32, ThreadReading> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for ent in dir.flatten() {
        let Some(tid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let base = PathBuf::from(format!("/proc/self/task/{tid}"));
        if !st.thread_names.contains_key(&tid) {
            // New thread: its name, and whether the name makes it a worker.
            if procfs::read_into(&base.join("stat"), &mut st.buf).is_err() {
                continue; // ended between listing and reading
            }
            let Ok(s) = procfs::parse_pid_stat(&st.buf) else {
                continue;
            };
            if st
                .cfg
                .worker_name_prefix
                .as_deref()
                .is_some_and(|p| s.comm.starts_with(p))
            {
                st.auto_workers.insert(tid);
            }
            st.thread_names.insert(tid, s.comm);
        }
        let mut r = ThreadReading::default();
        if procfs::read_into(&base.join("schedstat"), &mut st.buf).is_ok() {
            if let Ok(s) = procfs::parse_schedstat(&st.buf) {
                r.run_ns = s.run_ns;
                r.wait_ns = s.wait_ns;
            }
        }
        let worker = workers.contains(&tid) || st.auto_workers.contains(&tid);
        if worker {
            if procfs::read_into(&base.join("status"), &mut st.buf).is_ok() {
                let s = procfs::parse_pid_status(&st.buf);
                r.vol = s.voluntary_ctxt_switches.unwrap_or(0);
                r.invol = s.nonvoluntary_ctxt_switches.unwrap_or(0);
                r.detail = true;
            }
            if procfs::read_into(&base.join("stat"), &mut st.buf).is_ok() {
                if let Ok(s) = procfs::parse_pid_stat(&st.buf) {
                    r.minflt = s.minflt;
                    r.majflt = s.majflt;
                    r.cpu = s.processor;
                }
            }
        }
        out.insert(tid, r);
    }
    out
}

fn read_proc(st: &mut State, pid: i32) -> Option<ProcReading> {
    procfs::read_into(format!("/proc/{pid}/stat").as_ref(), &mut st.buf).ok()?;
    let s = procfs::parse_pid_stat(&st.buf).ok()?;
    let mut r = ProcReading {
        ticks: s.cpu_ticks(),
        minflt: s.minflt,
        majflt: s.majflt,
        rss_bytes: s.rss_pages * st.page,
        storage_bytes: storage_bytes(st, &format!("/proc/{pid}/io")),
        ..Default::default()
    };
    // The leader's status counts only the leader's switches; sum the threads.
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for ent in dir.flatten() {
            let p = ent.path().join("status");
            if procfs::read_into(&p, &mut st.buf).is_ok() {
                let s = procfs::parse_pid_status(&st.buf);
                r.vol += s.voluntary_ctxt_switches.unwrap_or(0);
                r.invol += s.nonvoluntary_ctxt_switches.unwrap_or(0);
            }
        }
    }
    Some(r)
}

/// Scans all processes and records what each used since the last scan:
/// processes of the experiment (the harness, `ours`, and everything that
/// descends from them) in `ScanRecord::ours`, everything else in
/// `ScanRecord::charges`.
fn scan_processes(st: &mut State, ours: &[i32]) {
    let boot_now = procfs::boot_ns();
    let tick_ns = 1e9 / st.ticks_per_s;
    let last_scan_tick = (st.last_scan_boot_ns as f64 / tick_ns) as u64;
    let mut next: HashMap<i32, ScanEntry> = HashMap::with_capacity(st.scan.len() + 16);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for ent in dir.flatten() {
        let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if procfs::read_into(format!("/proc/{pid}/stat").as_ref(), &mut st.buf).is_err() {
            continue;
        }
        let Ok(s) = procfs::parse_pid_stat(&st.buf) else {
            continue;
        };
        next.insert(
            pid,
            ScanEntry {
                starttime: s.starttime,
                ticks: s.cpu_ticks(),
                child_ticks: s.cutime + s.cstime,
                ppid: s.ppid,
                comm: s.comm,
                root: None,
            },
        );
    }
    let roots: BTreeSet<i32> = ours.iter().copied().chain([st.self_pid]).collect();
    assign_roots(&mut next, &st.scan, &roots);
    if st.last_scan_boot_ns != 0 {
        let (charges, ours) = charge_scan(&st.scan, &next, &roots, last_scan_tick);
        st.scans.push(ScanRecord {
            from: st.last_scan_mono_ns,
            to: procfs::mono_ns(),
            charges,
            ours,
        });
    }
    st.scan = next;
    st.last_scan_boot_ns = boot_now;
    st.last_scan_mono_ns = procfs::mono_ns();
}

/// Marks every process that descends from a root (the harness or an extra
/// pid) with the nearest such ancestor, walking `PPid` links. Once a process
/// was seen under a root it stays there (same pid and start time), so a
/// helper that daemonizes (and is reparented to init) is still the
/// experiment's. A root's own entry gets itself.
fn assign_roots(
    next: &mut HashMap<i32, ScanEntry>,
    prev: &HashMap<i32, ScanEntry>,
    roots: &BTreeSet<i32>,
) {
    let mut found: HashMap<i32, Option<i32>> = HashMap::with_capacity(next.len());
    for &r in roots {
        found.insert(r, Some(r));
    }
    let sticky = |p: i32, e: &ScanEntry| {
        prev.get(&p)
            .filter(|o| o.starttime == e.starttime)
            .and_then(|o| o.root)
            .filter(|r| roots.contains(r))
    };
    let pids: Vec<i32> = next.keys().copied().collect();
    for pid in pids {
        let mut chain = Vec::new();
        let mut p = pid;
        let walked = loop {
            if let Some(r) = found.get(&p) {
                break *r;
            }
            let Some(e) = next.get(&p) else {
                break None;
            };
            chain.push(p);
            // pid 0 and 1 end every chain; 64 levels is deeper than any real tree.
            if e.ppid <= 1 || chain.len() > 64 {
                break None;
            }
            p = e.ppid;
        };
        // The nearest root up the live tree wins (a server added as an extra
        // pid after its helpers were first seen under the harness takes
        // them over); where the chain ends without one, a process keeps the
        // root it was seen under, and its descendants inherit it.
        let mut inherited = walked;
        for &c in chain.iter().rev() {
            let r = walked.or_else(|| sticky(c, &next[&c]).or(inherited));
            found.insert(c, r);
            inherited = r;
        }
    }
    for (pid, e) in next.iter_mut() {
        e.root = found.get(pid).copied().flatten();
    }
}

/// CPU ticks each process used between two scans: `(foreign charges, the
/// experiment's charges)`, as (name, pid, ticks) and (root, name, pid, ticks).
/// A process born since the last scan is charged all its CPU; CPU of
/// children reaped in between appears in their parent's `cutime` and is
/// charged as `parent (children)`, less what those children had already
/// been charged (their last-seen CPU), so nothing is counted twice.
fn charge_scan(
    prev: &HashMap<i32, ScanEntry>,
    next: &HashMap<i32, ScanEntry>,
    roots: &BTreeSet<i32>,
    last_scan_tick: u64,
) -> (Vec<(String, i32, u64)>, Vec<OurCharge>) {
    let alive =
        |pid: i32, e: &ScanEntry| matches!(next.get(&pid), Some(n) if n.starttime == e.starttime);
    let mut gone_by_parent: HashMap<i32, u64> = HashMap::new();
    for (pid, e) in prev {
        if alive(*pid, e) {
            continue;
        }
        // On reap the parent's cutime grows by the child's own time *and*
        // the child's cutime (its reaped descendants), recursively: when a
        // whole tree ended (a hog and its workers), everything it had used
        // reaches the nearest surviving ancestor's cutime.
        let mut up = e.ppid;
        for _ in 0..64 {
            match prev.get(&up) {
                Some(p) if !alive(up, p) => up = p.ppid,
                _ => break,
            }
        }
        *gone_by_parent.entry(up).or_default() += e.ticks + e.child_ticks;
    }
    let (mut foreign, mut ours) = (Vec::new(), Vec::new());
    for (pid, n) in next {
        let (own, children) = match prev.get(pid) {
            Some(p) if p.starttime == n.starttime => (
                counter_delta(p.ticks, n.ticks),
                counter_delta(p.child_ticks, n.child_ticks)
                    .saturating_sub(gone_by_parent.get(pid).copied().unwrap_or(0)),
            ),
            // Born since the last scan: all its CPU is new.
            _ if n.starttime >= last_scan_tick => (n.ticks, 0),
            // Existed but we missed it (pid reuse race): no baseline, skip.
            _ => (0, 0),
        };
        // A root's own CPU is measured by the sampler itself, every sample.
        let own = if roots.contains(pid) { 0 } else { own };
        let mut put = |name: String, ticks: u64| match n.root {
            Some(root) => ours.push(OurCharge {
                root,
                name,
                pid: *pid,
                ticks,
            }),
            None => foreign.push((name, *pid, ticks)),
        };
        if own > 0 {
            put(n.comm.clone(), own);
        }
        if children > 0 {
            put(format!("{} (children)", n.comm), children);
        }
    }
    (foreign, ours)
}

fn pct(part: u64, total: u64, ncpu: usize) -> f64 {
    if total == 0 {
        0.0
    } else {
        100.0 * ncpu as f64 * part as f64 / total as f64
    }
}

impl HostSample {
    /// Host figures over the interval between two `/proc/stat` readings
    /// taken `dt_s` seconds apart (`load1` is left 0; the sampler fills it).
    pub fn between(old: &HostStat, new: &HostStat, dt_s: f64) -> HostSample {
        host_sample(old, new, dt_s)
    }
}

fn host_sample(old: &HostStat, new: &HostStat, dt_s: f64) -> HostSample {
    let ncpu = new.per_cpu.len().max(1);
    let d: CpuTimes = old.cpu.delta(&new.cpu);
    let t = d.total();
    let max_cpu = new.per_cpu.iter().map(|(n, _)| *n).max().unwrap_or(0);
    let mut per_steal = vec![0.0; max_cpu + 1];
    let mut per_busy = vec![0.0; max_cpu + 1];
    for (n, c) in &new.per_cpu {
        if let Some((_, o)) = old.per_cpu.iter().find(|(m, _)| m == n) {
            let dc = o.delta(c);
            per_steal[*n] = pct(dc.steal, dc.total(), 1);
            per_busy[*n] = pct(dc.busy(), dc.total(), 1);
        }
    }
    let rate = |o: Option<u64>, n: Option<u64>| match (o, n) {
        (Some(o), Some(n)) if dt_s > 0.0 => counter_delta(o, n) as f64 / dt_s,
        _ => 0.0,
    };
    HostSample {
        user_pct: pct(d.user, t, ncpu),
        nice_pct: pct(d.nice, t, ncpu),
        system_pct: pct(d.system, t, ncpu),
        idle_pct: pct(d.idle, t, ncpu),
        iowait_pct: pct(d.iowait, t, ncpu),
        irq_pct: pct(d.irq, t, ncpu),
        softirq_pct: pct(d.softirq, t, ncpu),
        steal_pct: pct(d.steal, t, ncpu),
        busy_pct: pct(d.busy(), t, ncpu),
        ctxt_per_s: rate(old.ctxt, new.ctxt),
        intr_per_s: rate(old.intr, new.intr),
        procs_running: new.procs_running.unwrap_or(0),
        procs_blocked: new.procs_blocked.unwrap_or(0),
        load1: 0.0,
        per_cpu_steal_pct: per_steal,
        per_cpu_busy_pct: per_busy,
    }
}

fn run_thread(
    cfg: SamplerConfig,
    shared: Arc<Shared>,
    ready: std::sync::mpsc::Sender<Result<(), MonitorError>>,
) -> Result<MonitorReport, MonitorError> {
    make_unobtrusive(cfg.nice, cfg.pin_cpu);
    let mut st = State::new(cfg);
    let start_mono = procfs::mono_ns();
    let start_wall = procfs::wall_ns();
    let baseline = take_baseline(&mut st, &shared);
    st.last_mono = procfs::mono_ns();
    let ok = baseline.is_ok();
    let _ = ready.send(baseline);
    if !ok {
        return Err(MonitorError::SamplerPanicked(
            "baseline failed (reported to the caller)".into(),
        ));
    }
    let (samples, cost, stop_mono) = sample_until_stopped(&mut st, &shared, start_mono)?;
    Ok(report(
        st,
        &shared,
        samples,
        cost,
        (start_mono, start_wall, stop_mono),
    ))
}

impl State {
    fn new(cfg: SamplerConfig) -> Self {
        State {
            ticks_per_s: procfs::clock_ticks_per_s(),
            page: procfs::page_size(),
            buf: String::with_capacity(4096),
            self_pid: std::process::id() as i32,
            sampler_tid: procfs::gettid(),
            host: HostStat::default(),
            self_r: SelfReading::default(),
            threads: HashMap::new(),
            thread_names: BTreeMap::new(),
            procs: HashMap::new(),
            scan: HashMap::new(),
            last_scan_boot_ns: 0,
            last_scan_mono_ns: 0,
            scans: Vec::new(),
            auto_workers: BTreeSet::new(),
            last_mono: 0,
            cfg,
        }
    }
}

/// The first reading of everything, which the first sample's deltas start from.
fn take_baseline(st: &mut State, shared: &Shared) -> Result<(), MonitorError> {
    st.host = read_host(st)?;
    st.self_r = read_self(st);
    let (extra, workers) = {
        let c = shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        (c.extra_pids.clone(), c.worker_tids.clone())
    };
    st.threads = read_threads(st, &workers);
    for &pid in &extra {
        if let Some(r) = read_proc(st, pid) {
            st.procs.insert(pid, r);
        }
    }
    scan_processes(st, &extra);
    Ok(())
}

/// What the sampler thread is woken for: the deadline, phase marks (with their times) or
/// stop, and the processes and workers to read now.
struct Tick {
    stop: bool,
    transitions: Vec<(Phase, u64)>,
    extra: Vec<i32>,
    workers: BTreeSet<i32>,
}

/// Waits for the deadline, a phase mark or stop.
fn wait_tick(shared: &Shared, next_deadline: u64) -> Tick {
    let mut c = shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if c.stop || !c.transitions.is_empty() {
            break;
        }
        let now = procfs::mono_ns();
        if now >= next_deadline {
            break;
        }
        let (g, _) = shared
            .cv
            .wait_timeout(c, Duration::from_nanos(next_deadline - now))
            .unwrap_or_else(|e| e.into_inner());
        c = g;
    }
    // Take every pending mark: the interval is split at each of them.
    Tick {
        stop: c.stop,
        transitions: c.transitions.drain(..).collect(),
        extra: c.extra_pids.clone(),
        workers: c.worker_tids.clone(),
    }
}

/// The time-weighted foreign CPU of the samples of the last second, once they cover one.
fn publish_foreign_1s(samples: &[Sample], out: &AtomicU64) {
    let (mut dt, mut cpu) = (0.0, 0.0);
    for x in samples.iter().rev() {
        dt += x.dt_s;
        cpu += x.foreign_cpu_pct * x.dt_s;
        if dt >= 1.0 {
            out.store((cpu / dt).to_bits(), Ordering::Relaxed);
            return;
        }
    }
}

/// Samples every period (and at every mark) until stopped: the samples, the sampler's own
/// cost, and when it stopped (monotonic ns).
fn sample_until_stopped(
    st: &mut State,
    shared: &Shared,
    start_mono: u64,
) -> Result<(Vec<Sample>, SamplerCost, u64), MonitorError> {
    let period_ns = st.cfg.period.as_nanos() as u64;
    let scan_ns = st.cfg.scan_period.as_nanos() as u64;
    let mut samples: Vec<Sample> = Vec::new();
    let mut next_deadline = st.last_mono + period_ns;
    let mut cost = SamplerCost::default();
    let (mut cpu_plain_ns, mut cpu_scan_ns, mut n_plain) = (0u64, 0u64, 0u64);
    let cpu_at_start = procfs::thread_cpu_ns();
    loop {
        let tick = wait_tick(shared, next_deadline);
        let now_before = procfs::mono_ns();
        if tick.transitions.is_empty() && !tick.stop && now_before > next_deadline + period_ns {
            cost.late_samples += 1;
        }
        let cpu0 = procfs::thread_cpu_ns();
        let sample = take_sample(st, &tick)?;
        let now = sample.t_mono_ns;
        // Phases are assigned after the run, by time (see `rephase`); here
        // only note how late this thread picked up a mark.
        for &(_, t) in &tick.transitions {
            cost.max_mark_delay_ms = cost
                .max_mark_delay_ms
                .max(now.saturating_sub(t) as f64 / 1e6);
        }
        samples.push(sample);
        publish_foreign_1s(&samples, &shared.foreign_1s);
        cost.samples += 1;
        let cpu1 = procfs::thread_cpu_ns();
        // Rescan processes at boundaries and every scan period.
        let scanned =
            !tick.transitions.is_empty() || tick.stop || now >= st.last_scan_mono_ns + scan_ns;
        if scanned {
            scan_processes(st, &tick.extra);
            cost.scans += 1;
            cpu_scan_ns += procfs::thread_cpu_ns() - cpu1;
        } else {
            n_plain += 1;
            cpu_plain_ns += cpu1 - cpu0;
        }
        if tick.stop {
            break;
        }
        while next_deadline <= now {
            next_deadline += period_ns;
        }
    }
    let stop_mono = procfs::mono_ns();
    let cpu_total = procfs::thread_cpu_ns() - cpu_at_start;
    let per = |ns: u64, n: u64| {
        if n > 0 {
            ns as f64 / n as f64 / 1e3
        } else {
            0.0
        }
    };
    cost.cpu_ms = cpu_total as f64 / 1e6;
    cost.us_per_sample = per(cpu_plain_ns, n_plain);
    cost.us_per_scan = per(cpu_scan_ns, cost.scans);
    let run_s = (stop_mono - start_mono) as f64 / 1e9;
    cost.cpu_pct = if run_s > 0.0 {
        100.0 * cpu_total as f64 / 1e9 / run_s
    } else {
        0.0
    };
    Ok((samples, cost, stop_mono))
}

/// One sample over `[last_mono, now]`; the readings it ends with become the next one's base.
fn take_sample(st: &mut State, tick: &Tick) -> Result<Sample, MonitorError> {
    let host = read_host(st)?;
    let self_r = read_self(st);
    let threads = read_threads(st, &tick.workers);
    let mut extra_now = HashMap::new();
    for &pid in &tick.extra {
        if let Some(r) = read_proc(st, pid) {
            extra_now.insert(pid, r);
        }
    }
    let now = procfs::mono_ns();
    let dt_s = (now - st.last_mono) as f64 / 1e9;
    let mut hs = host_sample(&st.host, &host, dt_s);
    if procfs::read_into("/proc/loadavg".as_ref(), &mut st.buf).is_ok() {
        if let Ok(l) = procfs::parse_loadavg(&st.buf) {
            hs.load1 = l.load1;
        }
    }
    let harness = ProcSample {
        pid: st.self_pid,
        cpu_pct: 100.0 * counter_delta(st.self_r.cpu_ns, self_r.cpu_ns) as f64 / 1e9 / dt_s,
        rss_bytes: self_r.rss_bytes,
        minflt: counter_delta(st.self_r.minflt, self_r.minflt),
        majflt: counter_delta(st.self_r.majflt, self_r.majflt),
        vol_cs: counter_delta(st.self_r.nvcsw, self_r.nvcsw),
        invol_cs: counter_delta(st.self_r.nivcsw, self_r.nivcsw),
        alive: true,
        children_cpu_pct: 0.0,
        storage_bytes: counter_delta(st.self_r.storage_bytes, self_r.storage_bytes),
    };
    let extra: Vec<ProcSample> = tick
        .extra
        .iter()
        .map(|&pid| {
            proc_sample(
                pid,
                st.procs.get(&pid),
                extra_now.get(&pid),
                st.ticks_per_s,
                dt_s,
            )
        })
        .collect();
    let ours_pct = harness.cpu_pct + extra.iter().map(|s| s.cpu_pct).sum::<f64>();
    let foreign = (hs.user_pct + hs.nice_pct + hs.system_pct - ours_pct).max(0.0);
    let thread_samples = thread_samples(&st.threads, &threads, st.sampler_tid, dt_s);
    st.host = host;
    st.self_r = self_r;
    st.threads = threads;
    st.procs = extra_now;
    st.last_mono = now;
    Ok(Sample {
        t_mono_ns: now,
        t_wall_ns: procfs::wall_ns(),
        dt_s,
        phase: None,
        host: hs,
        foreign_cpu_pct: foreign,
        harness,
        extra,
        threads: thread_samples,
    })
}

/// An extra process over one sample, from its readings before and after (`None`: it did
/// not exist then).
fn proc_sample(
    pid: i32,
    old: Option<&ProcReading>,
    new: Option<&ProcReading>,
    ticks_per_s: f64,
    dt_s: f64,
) -> ProcSample {
    match (old, new) {
        (Some(o), Some(n)) => ProcSample {
            pid,
            cpu_pct: 100.0 * counter_delta(o.ticks, n.ticks) as f64 / ticks_per_s / dt_s,
            rss_bytes: n.rss_bytes,
            minflt: counter_delta(o.minflt, n.minflt),
            majflt: counter_delta(o.majflt, n.majflt),
            vol_cs: counter_delta(o.vol, n.vol),
            invol_cs: counter_delta(o.invol, n.invol),
            alive: true,
            children_cpu_pct: 0.0,
            storage_bytes: counter_delta(o.storage_bytes, n.storage_bytes),
        },
        // Added since the last sample: no baseline yet.
        (None, Some(n)) => ProcSample {
            pid,
            rss_bytes: n.rss_bytes,
            alive: true,
            ..Default::default()
        },
        _ => ProcSample {
            pid,
            alive: false,
            ..Default::default()
        },
    }
}

/// The threads over one sample (the sampler's own left out), from their readings before
/// and after; idle non-worker threads are left out of the series (a long run would
/// otherwise store thousands of rows of zeros).
fn thread_samples(
    before: &HashMap<i32, ThreadReading>,
    after: &HashMap<i32, ThreadReading>,
    sampler_tid: i32,
    dt_s: f64,
) -> Vec<ThreadSample> {
    let mut out = Vec::new();
    for (tid, n) in after {
        if *tid == sampler_tid {
            continue;
        }
        let Some(o) = before.get(tid) else {
            continue;
        };
        // Counts only when both readings had them (a thread that just
        // became a worker has no baseline yet).
        let d = |f: fn(&ThreadReading) -> u64| {
            if o.detail && n.detail {
                counter_delta(f(o), f(n))
            } else {
                0
            }
        };
        let cpu_pct = 100.0 * counter_delta(o.run_ns, n.run_ns) as f64 / 1e9 / dt_s;
        let runq_wait_pct = 100.0 * counter_delta(o.wait_ns, n.wait_ns) as f64 / 1e9 / dt_s;
        if !n.detail && cpu_pct < 0.1 && runq_wait_pct < 0.1 {
            continue;
        }
        out.push(ThreadSample {
            tid: *tid,
            cpu_pct,
            runq_wait_pct,
            vol_cs: d(|r| r.vol),
            invol_cs: d(|r| r.invol),
            minflt: d(|r| r.minflt),
            majflt: d(|r| r.majflt),
            cpu: if n.detail { n.cpu } else { None },
        });
    }
    out.sort_by_key(|t| t.tid);
    out
}

/// The report of a stopped sampler: its threads, the samples put in their phases, the
/// foreign processes and the summary of the measured phase. `times` are the monotonic start,
/// the wall-clock start and the monotonic stop.
fn report(
    st: State,
    shared: &Shared,
    mut samples: Vec<Sample>,
    cost: SamplerCost,
    times: (u64, u64, u64),
) -> MonitorReport {
    let (start_mono, start_wall, stop_mono) = times;
    let (mut workers, ms, me, window) = {
        let c = shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        (
            c.worker_tids.clone(),
            c.measured_start_ns,
            c.measured_end_ns,
            c.window,
        )
    };
    workers.extend(st.auto_workers.iter().copied());
    let threads: Vec<ThreadInfo> = st
        .thread_names
        .iter()
        .filter(|(tid, _)| **tid != st.sampler_tid)
        .map(|(tid, name)| ThreadInfo {
            tid: *tid,
            name: name.clone(),
            worker: workers.contains(tid),
        })
        .collect();
    // The measured window: given to stop_measured, else from the marks.
    let window = window.or(ms.map(|s| (s, me.unwrap_or(stop_mono))));
    credit_descendants(&mut samples, &st.scans, st.ticks_per_s, st.self_pid);
    let samples = match window {
        Some((ws, we)) => rephase(samples, ws, we),
        // Unmarked runs are one long warmup phase.
        None => samples
            .into_iter()
            .map(|x| Sample {
                phase: Some(Phase::Warmup),
                ..x
            })
            .collect(),
    };
    let mut phase_secs: BTreeMap<Phase, f64> = BTreeMap::new();
    for x in &samples {
        *phase_secs
            .entry(x.phase.unwrap_or(Phase::Warmup))
            .or_default() += x.dt_s;
    }
    let foreign = foreign_by_phase(&st.scans, window, &phase_secs, st.ticks_per_s);
    let (summary_phase, foreign_key) = if window.is_some() {
        (Some(Phase::Measured), Phase::Measured)
    } else {
        (None, Phase::Warmup)
    };
    let no_foreign = Vec::new();
    let mut children = children_by_phase(&st.scans, window, &phase_secs, st.ticks_per_s);
    let mut summary = crate::summary::summarize(
        &samples,
        summary_phase,
        &threads,
        foreign.get(&foreign_key).unwrap_or(&no_foreign),
        st.cfg.top_n,
        &cost,
    );
    summary.attach_children(
        children.remove(&foreign_key).unwrap_or_default(),
        st.cfg.top_n,
    );
    name_top_foreign(&mut summary);
    MonitorReport {
        period_ms: st.cfg.period.as_secs_f64() * 1e3,
        scan_period_ms: st.cfg.scan_period.as_secs_f64() * 1e3,
        ncpu: st.host.per_cpu.len(),
        start_mono_ns: start_mono,
        start_wall_ns: start_wall,
        stop_mono_ns: stop_mono,
        measured_start_mono_ns: window.map(|w| w.0),
        measured_end_mono_ns: window.map(|w| w.1),
        threads,
        foreign,
        cost,
        samples: if st.cfg.keep_series {
            samples
        } else {
            Vec::new()
        },
        summary,
    }
}

/// Names the top consumers' command lines while they may still run.
fn name_top_foreign(summary: &mut crate::summary::EnvSummary) {
    for f in &mut summary.top_foreign {
        if let Some(pid) = f.pids.first() {
            if let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                let s: String = String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .trim()
                    .chars()
                    .take(200)
                    .collect();
                if !s.is_empty() {
                    f.cmdline = Some(s);
                }
            }
        }
    }
}

fn phase_at(t: u64, ws: u64, we: u64) -> Phase {
    if t < ws {
        Phase::Warmup
    } else if t < we {
        Phase::Measured
    } else {
        Phase::After
    }
}

/// Assigns each sample its phase by time, splitting the samples that
/// straddle the window's start or end at that instant: per-phase durations
/// are then exact however late the sampler woke, and only the rates of the
/// two straddling samples are shared between phases.
fn rephase(samples: Vec<Sample>, ws: u64, we: u64) -> Vec<Sample> {
    let mut out = Vec::with_capacity(samples.len() + 2);
    for x in samples {
        let end = x.t_mono_ns;
        let start = end.saturating_sub((x.dt_s * 1e9).round() as u64);
        let mut cuts: Vec<(u64, Phase)> = Vec::new();
        for b in [ws, we] {
            if b > start && b < end && !matches!(cuts.last(), Some(c) if c.0 >= b) {
                cuts.push((b, phase_at(b.saturating_sub(1), ws, we)));
            }
        }
        cuts.push((end, phase_at(end.saturating_sub(1), ws, we)));
        out.extend(split_sample(x, start, &cuts));
    }
    out
}

/// Ticks charged by the scans per phase and key, as (key, % of one CPU,
/// pids heaviest first), heaviest key first: each scan's charges are shared
/// among the phases by how much of the scan's interval each phase covers.
fn charges_by_phase<K: Ord + Clone + std::hash::Hash>(
    scans: &[ScanRecord],
    window: Option<(u64, u64)>,
    phase_secs: &BTreeMap<Phase, f64>,
    ticks_per_s: f64,
    items: impl Fn(&ScanRecord) -> Vec<(K, i32, u64)>,
) -> BTreeMap<Phase, Vec<(K, f64, Vec<i32>)>> {
    let mut acc: BTreeMap<Phase, HashMap<K, ForeignAcc>> = BTreeMap::new();
    for r in scans {
        let len = r.to.saturating_sub(r.from).max(1) as f64;
        let shares: Vec<(Phase, f64)> = match window {
            None => vec![(Phase::Warmup, 1.0)],
            Some((ws, we)) => {
                let overlap =
                    |a: u64, b: u64| r.to.min(b).saturating_sub(r.from.max(a)) as f64 / len;
                vec![
                    (Phase::Warmup, overlap(0, ws)),
                    (Phase::Measured, overlap(ws, we)),
                    (Phase::After, overlap(we, u64::MAX)),
                ]
            }
        };
        let charged = items(r);
        for (phase, w) in shares.into_iter().filter(|s| s.1 > 0.0) {
            let a = acc.entry(phase).or_default();
            for (key, pid, ticks) in &charged {
                let e = a.entry(key.clone()).or_default();
                e.ticks += *ticks as f64 * w;
                *e.pids.entry(*pid).or_default() += *ticks as f64 * w;
            }
        }
    }
    let mut out = BTreeMap::new();
    for (phase, a) in acc {
        let secs = phase_secs.get(&phase).copied().unwrap_or(0.0);
        let mut v: Vec<(K, f64, Vec<i32>)> = a
            .into_iter()
            .map(|(key, a)| {
                let mut pids: Vec<(i32, f64)> = a.pids.into_iter().collect();
                pids.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
                let pct = if secs > 0.0 {
                    100.0 * a.ticks / ticks_per_s / secs
                } else {
                    0.0
                };
                (key, pct, pids.into_iter().take(8).map(|(p, _)| p).collect())
            })
            .filter(|f| f.1 > 0.0)
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out.insert(phase, v);
    }
    out
}

/// Foreign CPU per phase and name (see [`charges_by_phase`]).
fn foreign_by_phase(
    scans: &[ScanRecord],
    window: Option<(u64, u64)>,
    phase_secs: &BTreeMap<Phase, f64>,
    ticks_per_s: f64,
) -> BTreeMap<Phase, Vec<ForeignProcess>> {
    charges_by_phase(scans, window, phase_secs, ticks_per_s, |r| {
        r.charges.clone()
    })
    .into_iter()
    .map(|(phase, v)| {
        let v = v
            .into_iter()
            .map(|(name, cpu_pct, pids)| ForeignProcess {
                name,
                cpu_pct,
                pids,
                cmdline: None,
            })
            .collect();
        (phase, v)
    })
    .collect()
}

/// The experiment's descendant processes per phase, by the process they
/// descend from (root pid) and name.
fn children_by_phase(
    scans: &[ScanRecord],
    window: Option<(u64, u64)>,
    phase_secs: &BTreeMap<Phase, f64>,
    ticks_per_s: f64,
) -> BTreeMap<Phase, BTreeMap<i32, Vec<ChildProcess>>> {
    let items = |r: &ScanRecord| {
        r.ours
            .iter()
            .map(|c| ((c.root, c.name.clone()), c.pid, c.ticks))
            .collect()
    };
    charges_by_phase(scans, window, phase_secs, ticks_per_s, items)
        .into_iter()
        .map(|(phase, v)| {
            let mut by_root: BTreeMap<i32, Vec<ChildProcess>> = BTreeMap::new();
            for ((root, name), cpu_pct, pids) in v {
                by_root.entry(root).or_default().push(ChildProcess {
                    name,
                    cpu_pct,
                    pids,
                });
            }
            (phase, by_root)
        })
        .collect()
}

/// Moves the CPU of the experiment's descendant processes from foreign to
/// the process each descends from, sample by sample. The scans know it per
/// scan interval (about 1 s); each scan's ticks are spread over the samples
/// it covers by overlap. Scans are taken right after a sample, so their
/// edges fall on samples' edges and the spreading only evens out rates
/// within one scan interval.
fn credit_descendants(
    samples: &mut [Sample],
    scans: &[ScanRecord],
    ticks_per_s: f64,
    self_pid: i32,
) {
    for r in scans.iter().filter(|r| !r.ours.is_empty()) {
        let len = r.to.saturating_sub(r.from).max(1) as f64;
        let mut by_root: BTreeMap<i32, u64> = BTreeMap::new();
        for c in &r.ours {
            *by_root.entry(c.root).or_default() += c.ticks;
        }
        let first = samples.partition_point(|x| x.t_mono_ns <= r.from);
        for x in samples[first..].iter_mut() {
            let end = x.t_mono_ns;
            let start = end.saturating_sub((x.dt_s * 1e9).round() as u64);
            if start >= r.to {
                break;
            }
            let overlap = r.to.min(end).saturating_sub(r.from.max(start)) as f64;
            if overlap <= 0.0 || x.dt_s <= 0.0 {
                continue;
            }
            for (&root, &ticks) in &by_root {
                let pct = 100.0 * ticks as f64 * (overlap / len) / ticks_per_s / x.dt_s;
                let owner = if root == self_pid {
                    None
                } else {
                    x.extra.iter_mut().find(|p| p.pid == root)
                };
                match owner {
                    Some(p) => p.children_cpu_pct += pct,
                    // A root not sampled (yet): the harness started it.
                    None => x.harness.children_cpu_pct += pct,
                }
                x.foreign_cpu_pct = (x.foreign_cpu_pct - pct).max(0.0);
            }
        }
    }
}

/// Splits a sample over `[start, cuts.last]` into one piece per cut
/// `(end, phase)`, dropping empty pieces. Rates are kept; counts are shared
/// by duration (rounded, the last piece takes the remainder).
fn split_sample(sample: Sample, start: u64, cuts: &[(u64, Phase)]) -> Vec<Sample> {
    let total_ns = cuts
        .last()
        .map(|c| c.0)
        .unwrap_or(start)
        .saturating_sub(start);
    if cuts.len() == 1 || total_ns == 0 {
        let mut s = sample;
        s.phase = cuts.last().map(|c| c.1);
        return vec![s];
    }
    let end_wall = sample.t_wall_ns;
    let end_mono = sample.t_mono_ns;
    let mut out = Vec::new();
    let mut left = sample.clone();
    let mut from = start;
    for (i, &(to, phase)) in cuts.iter().enumerate() {
        if to <= from && i + 1 < cuts.len() {
            continue;
        }
        let f = (to - from) as f64 / total_ns as f64;
        let last = i + 1 == cuts.len();
        let share = |n: u64, rest: &mut u64| {
            let v = if last {
                *rest
            } else {
                ((n as f64 * f).round() as u64).min(*rest)
            };
            *rest -= v;
            v
        };
        let mut piece = sample.clone();
        piece.phase = Some(phase);
        piece.t_mono_ns = to;
        piece.t_wall_ns = end_wall.saturating_sub(end_mono - to);
        piece.dt_s = (to - from) as f64 / 1e9;
        let (h, hl) = (&sample.harness, &mut left.harness);
        piece.harness.minflt = share(h.minflt, &mut hl.minflt);
        piece.harness.majflt = share(h.majflt, &mut hl.majflt);
        piece.harness.vol_cs = share(h.vol_cs, &mut hl.vol_cs);
        piece.harness.invol_cs = share(h.invol_cs, &mut hl.invol_cs);
        piece.harness.storage_bytes = share(h.storage_bytes, &mut hl.storage_bytes);
        for (k, e) in piece.extra.iter_mut().enumerate() {
            let (o, l) = (&sample.extra[k], &mut left.extra[k]);
            e.minflt = share(o.minflt, &mut l.minflt);
            e.majflt = share(o.majflt, &mut l.majflt);
            e.vol_cs = share(o.vol_cs, &mut l.vol_cs);
            e.invol_cs = share(o.invol_cs, &mut l.invol_cs);
            e.storage_bytes = share(o.storage_bytes, &mut l.storage_bytes);
        }
        for (k, t) in piece.threads.iter_mut().enumerate() {
            let (o, l) = (&sample.threads[k], &mut left.threads[k]);
            t.minflt = share(o.minflt, &mut l.minflt);
            t.majflt = share(o.majflt, &mut l.majflt);
            t.vol_cs = share(o.vol_cs, &mut l.vol_cs);
            t.invol_cs = share(o.invol_cs, &mut l.invol_cs);
        }
        if piece.dt_s > 0.0 {
            out.push(piece);
        }
        from = to;
    }
    out
}

/// Environment figures over one aligned interval (see [`MonitorReport::intervals`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalEnv {
    /// Interval start, ns on `CLOCK_MONOTONIC`.
    pub start_mono_ns: u64,
    /// Seconds of samples that fell into the interval.
    pub covered_s: f64,
    /// Hypervisor steal, % of one CPU (summed over CPUs), time-weighted mean.
    pub steal_pct: f64,
    /// CPU of processes outside the experiment, % of one CPU, time-weighted mean.
    pub foreign_cpu_pct: f64,
    /// Host busy CPU (user + nice + system + irq + softirq), % of one CPU.
    pub host_busy_pct: f64,
    /// This process's CPU, % of one CPU, time-weighted mean.
    pub harness_cpu_pct: f64,
    /// Involuntary context switches of all worker threads in the interval.
    pub worker_invol_cs: u64,
    /// Mean run-queue wait of the worker threads, % of the interval.
    pub worker_runq_wait_pct: f64,
}

impl MonitorReport {
    /// Re-buckets the samples into intervals of `width_ns` starting at
    /// `origin_ns` (e.g. the start time and width of the interval
    /// histograms), so environment and latency can be plotted on one axis.
    /// A sample is assigned to the interval holding its midpoint.
    pub fn intervals(&self, origin_ns: u64, width_ns: u64) -> Vec<IntervalEnv> {
        let workers: BTreeSet<i32> = self
            .threads
            .iter()
            .filter(|t| t.worker)
            .map(|t| t.tid)
            .collect();
        let mut out: Vec<IntervalEnv> = Vec::new();
        if width_ns == 0 {
            return out;
        }
        for s in &self.samples {
            let mid = s.t_mono_ns.saturating_sub((s.dt_s * 5e8) as u64);
            if mid < origin_ns {
                continue;
            }
            let k = ((mid - origin_ns) / width_ns) as usize;
            while out.len() <= k {
                let start = origin_ns + out.len() as u64 * width_ns;
                out.push(IntervalEnv {
                    start_mono_ns: start,
                    ..Default::default()
                });
            }
            let iv = &mut out[k];
            let w = s.dt_s;
            iv.covered_s += w;
            iv.steal_pct += s.host.steal_pct * w;
            iv.foreign_cpu_pct += s.foreign_cpu_pct * w;
            iv.host_busy_pct += s.host.busy_pct * w;
            iv.harness_cpu_pct += s.harness.cpu_pct * w;
            let ws: Vec<&ThreadSample> = s
                .threads
                .iter()
                .filter(|t| workers.contains(&t.tid))
                .collect();
            iv.worker_invol_cs += ws.iter().map(|t| t.invol_cs).sum::<u64>();
            if !ws.is_empty() {
                iv.worker_runq_wait_pct +=
                    ws.iter().map(|t| t.runq_wait_pct).sum::<f64>() / ws.len() as f64 * w;
            }
        }
        for iv in &mut out {
            if iv.covered_s > 0.0 {
                let c = iv.covered_s;
                iv.steal_pct /= c;
                iv.foreign_cpu_pct /= c;
                iv.host_busy_pct /= c;
                iv.harness_cpu_pct /= c;
                iv.worker_runq_wait_pct /= c;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(end_ms: u64, dt_ms: u64, invol: u64) -> Sample {
        Sample {
            t_mono_ns: end_ms * 1_000_000,
            t_wall_ns: 1_000_000_000_000 + end_ms * 1_000_000,
            dt_s: dt_ms as f64 / 1e3,
            harness: ProcSample {
                invol_cs: invol,
                cpu_pct: 50.0,
                ..Default::default()
            },
            threads: vec![ThreadSample {
                tid: 1,
                invol_cs: invol,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn rephase_splits_at_both_edges_and_shares_counts() {
        // One 100 ms sample ending at 200 ms; window 130..170 ms.
        let out = rephase(vec![sample(200, 100, 10)], 130_000_000, 170_000_000);
        let phases: Vec<_> = out.iter().map(|x| x.phase.unwrap()).collect();
        assert_eq!(phases, [Phase::Warmup, Phase::Measured, Phase::After]);
        let dts: Vec<f64> = out.iter().map(|x| (x.dt_s * 1e3).round()).collect();
        assert_eq!(dts, [30.0, 40.0, 30.0]);
        assert_eq!(out.iter().map(|x| x.harness.invol_cs).sum::<u64>(), 10);
        assert_eq!(out.iter().map(|x| x.threads[0].invol_cs).sum::<u64>(), 10);
        assert_eq!(out[1].harness.invol_cs, 4);
        assert!(out.iter().all(|x| x.harness.cpu_pct == 50.0));
        assert_eq!(out[1].t_mono_ns, 170_000_000);
        assert_eq!(
            out[0].t_wall_ns + 70_000_000,
            1_000_000_000_000 + 200_000_000
        );
    }

    #[test]
    fn rephase_keeps_whole_samples_inside_and_outside() {
        let v = vec![
            sample(100, 100, 1),
            sample(200, 100, 1),
            sample(300, 100, 1),
        ];
        let out = rephase(v, 100_000_000, 200_000_000);
        let phases: Vec<_> = out.iter().map(|x| x.phase.unwrap()).collect();
        assert_eq!(phases, [Phase::Warmup, Phase::Measured, Phase::After]);
    }

    fn entry(ppid: i32, starttime: u64) -> ScanEntry {
        ScanEntry {
            starttime,
            ticks: 0,
            child_ticks: 0,
            ppid,
            comm: "x".into(),
            root: None,
        }
    }

    #[test]
    fn descendants_get_the_nearest_root_and_keep_it_when_reparented() {
        // 100 = harness, 200 = a hog it started (extra pid); 201 the hog's
        // worker; 101 -> 102 a helper tree of the harness; 300 foreign.
        let roots: BTreeSet<i32> = [100, 200].into();
        let mut next: HashMap<i32, ScanEntry> = [
            (100, entry(50, 1)),
            (200, entry(100, 2)),
            (201, entry(200, 3)),
            (101, entry(100, 4)),
            (102, entry(101, 5)),
            (300, entry(1, 6)),
            (50, entry(1, 0)),
        ]
        .into();
        assign_roots(&mut next, &HashMap::new(), &roots);
        let root = |m: &HashMap<i32, ScanEntry>, p: i32| m[&p].root;
        assert_eq!(root(&next, 201), Some(200));
        assert_eq!(root(&next, 200), Some(200));
        assert_eq!(root(&next, 102), Some(100));
        assert_eq!(root(&next, 300), None);
        // The harness's own parent is not the experiment's.
        assert_eq!(root(&next, 50), None);
        // 101 exits; 102 is reparented to init but stays the harness's.
        let mut later: HashMap<i32, ScanEntry> =
            [(100, entry(50, 1)), (102, entry(1, 5)), (103, entry(1, 7))].into();
        assign_roots(&mut later, &next, &roots);
        assert_eq!(root(&later, 102), Some(100));
        // A new orphan was never seen under a root.
        assert_eq!(root(&later, 103), None);
        // 101's helper 102 was seen under the harness; 101 becomes an extra
        // pid (a server added after the first scan): it takes 102 over.
        let more: BTreeSet<i32> = [100, 101, 200].into();
        let mut again: HashMap<i32, ScanEntry> = [
            (100, entry(50, 1)),
            (101, entry(100, 4)),
            (102, entry(101, 5)),
        ]
        .into();
        assign_roots(&mut again, &next, &more);
        assert_eq!(root(&again, 102), Some(101));
    }

    #[test]
    fn a_tree_that_ended_is_not_charged_again_to_its_surviving_ancestor() {
        // Harness 100 started hog 200, whose worker 201 used 500 ticks; both
        // ended since the last scan and the harness reaped 200, which had
        // reaped 201: the harness's cutime grew by 200's and 201's CPU,
        // 510 ticks last seen plus 6 used after the last scan.
        let roots: BTreeSet<i32> = [100, 200].into();
        let mk = |ppid, start, ticks, child_ticks| ScanEntry {
            ticks,
            child_ticks,
            ..entry(ppid, start)
        };
        let mut prev: HashMap<i32, ScanEntry> = [
            (100, mk(1, 1, 50, 0)),
            (200, mk(100, 2, 10, 0)),
            (201, mk(200, 3, 500, 0)),
        ]
        .into();
        assign_roots(&mut prev, &HashMap::new(), &roots);
        let mut next: HashMap<i32, ScanEntry> = [(100, mk(1, 1, 60, 516))].into();
        assign_roots(&mut next, &prev, &roots);
        let (foreign, ours) = charge_scan(&prev, &next, &roots, 0);
        assert!(foreign.is_empty(), "{foreign:?}");
        // Only the 6 ticks used since the last scan; the harness's own CPU is
        // measured every sample, not here.
        let total: u64 = ours.iter().map(|c| c.ticks).sum();
        assert_eq!(total, 6, "{ours:?}");
    }

    #[test]
    fn descendant_cpu_moves_from_foreign_to_its_root() {
        let mut v = vec![sample(100, 100, 0), sample(200, 100, 0)];
        for x in &mut v {
            x.foreign_cpu_pct = 80.0;
            x.extra = vec![ProcSample {
                pid: 200,
                ..Default::default()
            }];
        }
        // 10 ticks (0.1 s at 100 Hz) of the harness's helper and 4 of the
        // hog's worker over the scan 0..200 ms.
        let scans = vec![ScanRecord {
            from: 0,
            to: 200_000_000,
            charges: Vec::new(),
            ours: vec![
                OurCharge {
                    root: 100,
                    name: "lt-proc".into(),
                    pid: 101,
                    ticks: 10,
                },
                OurCharge {
                    root: 200,
                    name: "stress".into(),
                    pid: 201,
                    ticks: 4,
                },
            ],
        }];
        credit_descendants(&mut v, &scans, 100.0, 100);
        for x in &v {
            // 0.05 s of CPU in each 0.1 s sample: 50 %; the hog's 20 %.
            assert!((x.harness.children_cpu_pct - 50.0).abs() < 1e-9);
            assert!((x.extra[0].children_cpu_pct - 20.0).abs() < 1e-9);
            assert!((x.foreign_cpu_pct - 10.0).abs() < 1e-9);
        }
    }

    #[test]
    fn foreign_charges_are_shared_by_overlap() {
        let scans = vec![ScanRecord {
            from: 0,
            to: 1_000_000_000,
            charges: vec![("hog".into(), 7, 100)],
            ours: Vec::new(),
        }];
        let secs: BTreeMap<Phase, f64> = [
            (Phase::Warmup, 0.25),
            (Phase::Measured, 0.5),
            (Phase::After, 0.25),
        ]
        .into();
        let f = foreign_by_phase(&scans, Some((250_000_000, 750_000_000)), &secs, 100.0);
        // 50 ticks (0.5 s of CPU) over a 0.5 s phase: one full CPU.
        assert!((f[&Phase::Measured][0].cpu_pct - 100.0).abs() < 1e-9);
        assert_eq!(f[&Phase::Measured][0].pids, vec![7]);
    }
}
