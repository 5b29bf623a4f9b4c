//! What the sampler records: one [`Sample`] per period (host, harness,
//! threads, extra processes), the processes it found, and its own cost.
//! Plain data, shared by the sampler that fills it and the summary that
//! reduces it.

use serde::Serialize;

/// Which part of a run an interval belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before [`Sampler::mark_measured_start`](crate::Sampler::mark_measured_start).
    Warmup,
    /// Between the start and end marks: what the summary covers.
    Measured,
    /// After [`Sampler::mark_measured_end`](crate::Sampler::mark_measured_end).
    After,
}

/// Host-wide figures over one interval (CPU in % of one CPU, summed over
/// all CPUs: 0 to 100 × the number of CPUs), from `/proc/stat` and `/proc/loadavg`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostSample {
    /// User mode at normal priority.
    pub user_pct: f64,
    /// User mode at positive nice values.
    pub nice_pct: f64,
    /// Kernel mode, interrupts excluded.
    pub system_pct: f64,
    /// Idle with no I/O outstanding.
    pub idle_pct: f64,
    /// Idle while I/O was outstanding.
    pub iowait_pct: f64,
    /// Hardware interrupts.
    pub irq_pct: f64,
    /// Softirqs.
    pub softirq_pct: f64,
    /// Hypervisor steal: time our vCPUs wanted to run but another guest did.
    pub steal_pct: f64,
    /// user + nice + system + irq + softirq.
    pub busy_pct: f64,
    /// Context switches per second, all CPUs.
    pub ctxt_per_s: f64,
    /// Interrupts per second, all CPUs.
    pub intr_per_s: f64,
    /// Runnable tasks at the end of the interval.
    pub procs_running: u64,
    /// Tasks blocked on I/O at the end of the interval.
    pub procs_blocked: u64,
    /// 1-minute load average at the end of the interval.
    pub load1: f64,
    /// Steal per CPU (index = CPU number; offline CPUs are 0).
    pub per_cpu_steal_pct: Vec<f64>,
    /// Busy per CPU.
    pub per_cpu_busy_pct: Vec<f64>,
}

/// A process (the harness or an extra pid) over one interval. Counts are
/// deltas over the interval; `rss_bytes` is the value at its end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcSample {
    /// The process id.
    pub pid: i32,
    /// Mean CPU (user + system, all threads), % of one CPU.
    pub cpu_pct: f64,
    /// Resident set at the end of the interval, bytes.
    pub rss_bytes: u64,
    /// Minor page faults in the interval.
    pub minflt: u64,
    /// Major page faults (read from disk) in the interval.
    pub majflt: u64,
    /// Voluntary context switches (blocking) in the interval, all threads.
    pub vol_cs: u64,
    /// Involuntary context switches (preemption) in the interval, all threads.
    pub invol_cs: u64,
    /// False when the process could not be read (it exited).
    pub alive: bool,
    /// CPU of the processes that descend from it (helpers it started and
    /// their children), % of one CPU: the experiment's, not foreign. Known
    /// per process scan (about 1 s) and spread over its samples.
    pub children_cpu_pct: f64,
    /// Bytes it made the block layer read or write in the interval
    /// (`/proc/[pid]/io` `read_bytes` + `write_bytes`; 0 where the kernel
    /// keeps no task I/O accounting).
    pub storage_bytes: u64,
}

/// One thread of the harness over one interval (idle non-worker threads,
/// under 0.1 % CPU and wait, are omitted). CPU and run-queue wait are
/// read for every thread; context switches, faults and the CPU it ran on
/// only for worker threads (0 / `None` for the others), to keep samples cheap.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadSample {
    /// Kernel thread id.
    pub tid: i32,
    /// CPU time in the interval (`schedstat`), % of one CPU.
    pub cpu_pct: f64,
    /// Time runnable but not running, in % of the interval.
    pub runq_wait_pct: f64,
    /// Voluntary context switches in the interval (workers only).
    pub vol_cs: u64,
    /// Involuntary context switches in the interval (workers only): preempted while runnable.
    pub invol_cs: u64,
    /// Minor page faults in the interval (workers only).
    pub minflt: u64,
    /// Major page faults in the interval (workers only).
    pub majflt: u64,
    /// CPU it last ran on.
    pub cpu: Option<u32>,
}

/// Everything measured over one interval, which ends at `t_mono_ns`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    /// End of the interval on `CLOCK_MONOTONIC` (ns).
    pub t_mono_ns: u64,
    /// End of the interval on the wall clock (ns since the Unix epoch).
    pub t_wall_ns: u64,
    /// Interval length in seconds.
    pub dt_s: f64,
    /// The phase the interval belongs to; `None` while the sampler runs, set
    /// when it stops (intervals straddling a mark are split there).
    pub phase: Option<Phase>,
    /// Host-wide figures.
    pub host: HostSample,
    /// Host user+nice+system CPU not used by the harness, the extra pids or
    /// any process that descends from them.
    pub foreign_cpu_pct: f64,
    /// This process (CPU, faults and switches from `getrusage`, RSS from `statm`).
    pub harness: ProcSample,
    /// The experiment's other processes (`SamplerConfig::extra_pids`,
    /// [`Sampler::add_pid`](crate::Sampler::add_pid)), in the order given.
    pub extra: Vec<ProcSample>,
    /// This process's threads, sorted by tid (idle non-workers omitted).
    pub threads: Vec<ThreadSample>,
}

/// A thread of the harness seen during the run.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadInfo {
    /// Kernel thread id.
    pub tid: i32,
    /// Thread name (`comm`, at most 15 bytes) when first seen.
    pub name: String,
    /// Counted as a worker: given in `SamplerConfig::worker_tids`, registered
    /// with [`register_worker_thread`](crate::register_worker_thread) or
    /// [`Sampler::add_worker_tid`](crate::Sampler::add_worker_tid), or named
    /// with `SamplerConfig::worker_name_prefix`.
    pub worker: bool,
}

pub use taillab_core::sections::environment::{ChildProcess, ForeignProcess};

/// What the sampler itself cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SamplerCost {
    /// Samples taken.
    pub samples: u64,
    /// Scans of all processes taken (to name foreign CPU consumers).
    pub scans: u64,
    /// CPU time of the sampler thread, total.
    pub cpu_ms: f64,
    /// CPU time per sample without a process scan (µs).
    pub us_per_sample: f64,
    /// CPU time per process scan (µs), on top of a sample.
    pub us_per_scan: f64,
    /// Mean CPU use of the sampler thread, % of one CPU.
    pub cpu_pct: f64,
    /// Samples that started more than one period late (the thread was
    /// starved: itself a sign of a busy host).
    pub late_samples: u64,
    /// Longest delay between a phase mark and the sampler's reading (ms);
    /// the interval is split at the mark, so this only smears rates.
    pub max_mark_delay_ms: f64,
}
