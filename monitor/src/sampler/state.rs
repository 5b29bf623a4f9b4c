//! What the sampler keeps between samples: the last readings of the host, the harness, its
//! threads and the extra processes, and the process scan with what each scan charged.

use super::*;

#[derive(Clone, Copy, Default)]
pub(super) struct SelfReading {
    pub(super) cpu_ns: u64,
    pub(super) minflt: u64,
    pub(super) majflt: u64,
    pub(super) nvcsw: u64,
    pub(super) nivcsw: u64,
    pub(super) rss_bytes: u64,
    pub(super) storage_bytes: u64,
}

#[derive(Clone, Copy, Default)]
pub(super) struct ThreadReading {
    /// status and stat were read (workers): the counts below are valid.
    pub(super) detail: bool,
    pub(super) run_ns: u64,
    pub(super) wait_ns: u64,
    pub(super) vol: u64,
    pub(super) invol: u64,
    pub(super) minflt: u64,
    pub(super) majflt: u64,
    pub(super) cpu: Option<u32>,
}

#[derive(Clone, Copy, Default)]
pub(super) struct ProcReading {
    pub(super) ticks: u64,
    pub(super) minflt: u64,
    pub(super) majflt: u64,
    pub(super) rss_bytes: u64,
    pub(super) vol: u64,
    pub(super) invol: u64,
    pub(super) storage_bytes: u64,
}

#[derive(Clone)]
pub(super) struct ScanEntry {
    pub(super) starttime: u64,
    pub(super) ticks: u64,
    pub(super) child_ticks: u64,
    pub(super) ppid: i32,
    pub(super) comm: String,
    /// The experiment process it descends from (itself for a root).
    pub(super) root: Option<i32>,
}

#[derive(Default)]
pub(super) struct ForeignAcc {
    pub(super) ticks: f64,
    /// CPU ticks charged per pid, to list the heaviest pids first.
    pub(super) pids: HashMap<i32, f64>,
}

pub(super) struct State {
    pub(super) cfg: SamplerConfig,
    pub(super) ticks_per_s: f64,
    pub(super) page: u64,
    pub(super) buf: String,
    /// The per-sample `/proc` files, kept open ([`procfs::ProcFiles`]).
    pub(super) files: procfs::ProcFiles,
    pub(super) self_pid: i32,
    pub(super) sampler_tid: i32,
    pub(super) host: HostStat,
    pub(super) self_r: SelfReading,
    pub(super) threads: HashMap<i32, ThreadReading>,
    pub(super) thread_names: BTreeMap<i32, String>,
    pub(super) procs: HashMap<i32, ProcReading>,
    pub(super) scan: HashMap<i32, ScanEntry>,
    pub(super) last_scan_boot_ns: u64,
    pub(super) last_scan_mono_ns: u64,
    /// What each process scan charged, with the interval it covers.
    pub(super) scans: Vec<ScanRecord>,
    pub(super) auto_workers: BTreeSet<i32>,
    pub(super) last_mono: u64,
}

/// What one scan over `[from, to]` (monotonic ns) charged: foreign CPU as
/// (name, pid, ticks), and the experiment's descendant processes.
pub(super) struct ScanRecord {
    pub(super) from: u64,
    pub(super) to: u64,
    pub(super) charges: Vec<(String, i32, u64)>,
    /// CPU of the experiment's descendant processes.
    pub(super) ours: Vec<OurCharge>,
}

/// CPU ticks of a process that descends from an experiment process `root`
/// (the harness or an extra pid): a helper it started, or the helper's
/// reaped children (`name` ends in ` (children)`).
#[derive(Debug, Clone)]
pub(super) struct OurCharge {
    pub(super) root: i32,
    pub(super) name: String,
    pub(super) pid: i32,
    pub(super) ticks: u64,
}

impl State {
    pub(super) fn new(cfg: SamplerConfig) -> Self {
        State {
            ticks_per_s: procfs::clock_ticks_per_s(),
            page: procfs::page_size(),
            buf: String::with_capacity(4096),
            files: procfs::ProcFiles::default(),
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
