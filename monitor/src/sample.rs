//! What the sampler records: one [`Sample`] per period (host, harness,
//! threads, extra processes), the processes it found, and its own cost.
//! Plain data, shared by the sampler that fills it and the summary that
//! reduces it.

use serde::Serialize;

/// Which part of a run an interval belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Before [`Sampler::mark_measured_start`].
    Warmup,
    /// Between the start and end marks: what the summary covers.
    Measured,
    /// After [`Sampler::mark_measured_end`].
    After,
}

/// Host-wide figures over one interval (CPU in % of one CPU).
#[derive(Debug, Clone, Default, Serialize)]
pub struct HostSample {
    pub user_pct: f64,
    pub nice_pct: f64,
    pub system_pct: f64,
    pub idle_pct: f64,
    pub iowait_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    /// user + nice + system + irq + softirq.
    pub busy_pct: f64,
    pub ctxt_per_s: f64,
    pub intr_per_s: f64,
    pub procs_running: u64,
    pub procs_blocked: u64,
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
    pub pid: i32,
    pub cpu_pct: f64,
    pub rss_bytes: u64,
    pub minflt: u64,
    pub majflt: u64,
    pub vol_cs: u64,
    pub invol_cs: u64,
    /// False when the process could not be read (it exited).
    pub alive: bool,
}

/// One thread of the harness over one interval (idle non-worker threads,
/// under 0.1 % CPU and wait, are omitted). CPU and run-queue wait are
/// read for every thread; context switches, faults and the CPU it ran on
/// only for worker threads (0 / `None` for the others), to keep samples cheap.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ThreadSample {
    pub tid: i32,
    pub cpu_pct: f64,
    /// Time runnable but not running, in % of the interval.
    pub runq_wait_pct: f64,
    pub vol_cs: u64,
    pub invol_cs: u64,
    pub minflt: u64,
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
    pub phase: Option<Phase>,
    pub host: HostSample,
    /// Host user+nice+system CPU not used by the harness or extra pids.
    pub foreign_cpu_pct: f64,
    pub harness: ProcSample,
    pub extra: Vec<ProcSample>,
    pub threads: Vec<ThreadSample>,
}

/// A thread of the harness seen during the run.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadInfo {
    pub tid: i32,
    pub name: String,
    pub worker: bool,
}

/// CPU use of one foreign process name over a phase.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct ForeignProcess {
    /// `comm` of the process (15 bytes at most), or `parent (children)` for
    /// CPU of short-lived children reaped by `parent`.
    pub name: String,
    /// Mean CPU over the phase, % of one CPU.
    pub cpu_pct: f64,
    /// Pids with this name, heaviest first (at most 8).
    pub pids: Vec<i32>,
    /// The command line of one of them, when it could still be read.
    pub cmdline: Option<String>,
}

/// What the sampler itself cost.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SamplerCost {
    pub samples: u64,
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
