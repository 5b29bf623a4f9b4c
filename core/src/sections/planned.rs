//! The sections a run's planned disturbances add (taillab-interfere computes
//! them, the CLI's `planned` module writes them): `interference` (the hogs: what
//! ran, what it used, whether any died early), `profile` (`perf record`'s files)
//! and `tuning` (the host knobs held for the run and their restore).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::config::interfere::{Class, InterfereSpec};
use crate::config::CpuList;

/// Schema of [`InterferenceReport`] (`summary.json` → `interference`).
///
/// History: `taillab.interference/1` — first version.
pub const INTERFERENCE_SCHEMA: &str = "taillab.interference/1";

/// The `interference` section of `summary.json`: what ran, its processes,
/// what they used over the window, and whether any ended early.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InterferenceReport {
    /// [`INTERFERENCE_SCHEMA`].
    pub schema: String,
    /// Every hog's spec, in start order.
    pub specs: Vec<InterfereSpec>,
    /// `measured` (between the marks) or `whole` (start to stop).
    pub window: String,
    /// Length of the window, s (`CLOCK_MONOTONIC`).
    pub seconds: f64,
    /// `cgroup` or `process-group` (see taillab-interfere's `contain`).
    pub containment: String,
    /// CPU of all hog processes over the window, s: the cgroup's count
    /// (which includes processes that exited) where there is one, else the
    /// sum over processes.
    pub cpu_s: f64,
    /// `cpu_s` as % of one CPU.
    pub cpu_pct: f64,
    /// Bytes the block layer read for the hogs, summed over [`HogReport::read_bytes`].
    pub read_bytes: u64,
    /// Bytes the block layer wrote for the hogs, summed over the hogs.
    pub write_bytes: u64,
    /// Bytes through read calls (`rchar`), summed over the hogs.
    pub read_chars: u64,
    /// Bytes through write calls (`wchar`), summed over the hogs.
    pub write_chars: u64,
    /// One record per hog, in start order.
    pub hogs: Vec<HogReport>,
    /// False when a hog ended early or a process could not be killed.
    pub ok: bool,
    /// One sentence per problem (empty when ok).
    pub problems: Vec<String>,
    /// Pids still alive after stop (should always be empty).
    pub leftover: Vec<i32>,
    /// The folder the logs were kept in, if they were.
    pub log_dir: Option<String>,
}

impl InterferenceReport {
    /// Every pid of every hog (for telling interference apart from the
    /// server in the monitor's `extra` processes).
    pub fn all_pids(&self) -> Vec<i32> {
        self.hogs
            .iter()
            .flat_map(|h| h.pids.iter().copied())
            .collect()
    }
}

/// One process of a hog over the reported window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HogProcess {
    /// `parent` (stress-ng), `worker` (its workers and their children),
    /// `server` or `client` (iperf3).
    pub role: String,
    /// What it used over the window (flattened into this record in JSON).
    #[serde(flatten)]
    pub usage: ProcessUsage,
}

/// One hog in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HogReport {
    /// The hog's spec as configured.
    pub spec: InterfereSpec,
    /// Its kind (`spec.class`, repeated for readers of the JSON).
    pub class: Class,
    /// The command line(s) run (iperf3: server `;` client).
    pub command: Vec<String>,
    /// Every process of the hog seen while it ran.
    pub pids: Vec<i32>,
    /// CPUs the hog was pinned to (`spec.cpus`); `None`: not pinned.
    pub cpus: Option<CpuList>,
    /// Nice value it ran at (`spec.nice`); `None`: inherited.
    pub nice: Option<i32>,
    /// Each process seen, with its role and usage.
    pub processes: Vec<HogProcess>,
    /// CPU seconds over the window, summed over `processes`.
    pub cpu_s: f64,
    /// `cpu_s` as % of one CPU over the window (200 = two CPUs busy).
    pub cpu_pct: f64,
    /// Bytes the block layer read, summed over `processes` (unreadable ones count 0).
    pub read_bytes: u64,
    /// Bytes the block layer wrote, summed over `processes`.
    pub write_bytes: u64,
    /// Bytes through read calls (`rchar`; sockets and page cache included), summed.
    pub read_chars: u64,
    /// Bytes through write calls (`wchar`), summed.
    pub write_chars: u64,
    /// A process of this hog ended before `stop`.
    pub died_early: bool,
    /// How each direct child ended (`stress-ng parent: exit status 0`).
    pub exit: Vec<String>,
    /// Path of the hog's log file (see [`InterferenceReport::log_dir`] for whether it was kept).
    pub log: String,
    /// The last lines of the log when the hog died early.
    pub log_tail: Vec<String>,
}

/// What one process used over a window (one row of a resource table).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProcessUsage {
    /// The process id.
    pub pid: i32,
    /// `comm` (at most 15 bytes), from the latest reading.
    pub name: String,
    /// Still running (not exited, not a zombie) at the end of the window.
    pub alive: bool,
    /// CPU seconds over the window.
    pub cpu_s: f64,
    /// Mean CPU over the window, % of one CPU.
    pub cpu_pct: f64,
    /// Peak resident set since the process started (`VmHWM`).
    pub rss_max_bytes: u64,
    /// Minor page faults over the window.
    pub minflt: u64,
    /// Major page faults (served from disk) over the window.
    pub majflt: u64,
    /// Voluntary context switches (the process blocked) over the window, all threads.
    pub vol_cs: u64,
    /// Involuntary context switches (the process was preempted) over the window, all threads.
    pub invol_cs: u64,
    /// Bytes the block layer read for it (`/proc/PID/io` `read_bytes`); `None` when unreadable.
    pub read_bytes: Option<u64>,
    /// Bytes the block layer wrote for it (`/proc/PID/io` `write_bytes`); `None` when unreadable.
    pub write_bytes: Option<u64>,
    /// Bytes through read calls, sockets and page cache included (`rchar`); `None` when unreadable.
    pub read_chars: Option<u64>,
    /// Bytes through write calls, sockets and page cache included (`wchar`);
    /// `None` when unreadable.
    pub write_chars: Option<u64>,
}

/// The files a finished profile wrote, for the run's summary and the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum ProfileOutcome {
    /// The profile's files are in the run folder.
    Written {
        /// The raw `perf record` output (`perf.data`), relative to the run folder.
        data: String,
        /// The folded stacks (`perf.folded`), relative to the run folder.
        folded: String,
        /// The flame graph (`flame.svg`), relative to the run folder.
        svg: String,
        /// Sum of the folded counts. perf weighs each sample by its
        /// period, so with `cpu-clock` this is sampled CPU time in ns.
        weight: u64,
        /// Distinct stacks (lines of the folded file).
        stacks: usize,
    },
    /// No profile: perf missing or not permitted, or it recorded nothing.
    Skipped {
        /// Why, and what would make it work.
        reason: String,
    },
}

/// What happened to one knob (the run's `tuning` record).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct KnobState {
    /// The knob's key: `irq_cpus`, `thp`, `rt_runtime`, `dma_latency` or `numa_node`.
    pub knob: String,
    /// The value asked for, as the configuration spells it.
    pub requested: String,
    /// The value before the run (the first distinct one for many files).
    pub before: Option<String>,
    /// What was done, in words (`moved 18 of 20 IRQs; 2 refused`).
    pub message: String,
}

/// The record of taillab-interfere's `Tuning::apply`, for `summary.json` / `experiment.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AppliedTuning {
    /// The knobs applied, in order (IRQs, THP, RT runtime, C-states, NUMA).
    pub knobs: Vec<KnobState>,
    /// Settings restored from a journal left by a run that was killed.
    pub recovered: Vec<String>,
}

/// `tuning`: the knobs a run held and what could not be restored after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TuningRecord {
    /// The knobs applied, as the guard recorded them.
    pub applied: AppliedTuning,
    /// What putting the knobs back did, one line each (`C-state limit released`; a
    /// failure says `could not ...`). The key's name promises only failures; it holds
    /// every line of the restore, as it always has.
    pub restore_failed: Vec<String>,
}
