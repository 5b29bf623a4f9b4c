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

mod interval;
mod phases;
mod read;
mod state;
#[cfg(test)]
mod tests;
mod tick;

pub use interval::IntervalEnv;
use phases::*;
use read::*;
use state::*;
use tick::*;

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
            period: Duration::from_nanos(taillab_core::config::fields::monitor_defaults::PERIOD_NS),
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
