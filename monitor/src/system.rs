//! What this host is, whether it is fit for tail measurements right now, and
//! the settings that can make it fitter (`taillab system show|tune|reset`).
//!
//! [`SystemReport::collect`] records what changes a tail: the CPU and how
//! many cores are online, SMT (siblings share execution units), the kernel,
//! the frequency governor and turbo (a core that changes frequency changes
//! service times), `sched_rt_runtime_us` (real-time threads are throttled
//! for 5 % of every second unless it is -1), this process's timer slack
//! (sleeps are rounded up by it), transparent huge pages (khugepaged and
//! compaction stalls), the clock source (reading a non-TSC clock costs
//! microseconds), the cpuidle driver (a VM without one halts idle vCPUs at
//! once, and every wake-up then costs tens of microseconds), and — measured over a short window with the same
//! [`Sampler`] the runs use — steal and foreign CPU use with the processes
//! that cause it. [`SystemReport::warnings`] turns these into reasons not to
//! measure now.
//!
//! [`Tuner`] applies the settings one operation at a time, like pyperf's
//! `system tune`: every operation can be shown and applied, each prior value
//! is saved in a state file before it is changed, and `reset` writes the
//! saved values back. What a VM does not expose (no cpufreq on most cloud
//! guests) is skipped with a message saying so, never an error.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::MonitorError;
use crate::procfs;
use crate::sample::ForeignProcess;
use crate::sampler::{Sampler, SamplerConfig};
use crate::summary::Thresholds;

/// Host facts plus a short measurement of steal and foreign CPU use.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SystemReport {
    /// Kernel release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// `model name` of the first CPU in `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// The CPU advertises the `hypervisor` flag: this is a VM.
    pub virtualized: bool,
    /// Online CPUs as a CPU list (`/sys/devices/system/cpu/online`, e.g. `0-3`).
    pub cpus_online: Option<String>,
    /// Number of online CPUs (hardware threads, not cores; from the list above,
    /// else the available parallelism).
    pub cores_online: usize,
    /// `/sys/devices/system/cpu/smt/control` (on, off, forceoff, notsupported, notimplemented).
    pub smt_control: Option<String>,
    /// Sibling hyperthreads are in use (`/sys/devices/system/cpu/smt/active`).
    pub smt_active: Option<bool>,
    /// Governor → CPUs using it; empty when cpufreq is not exposed.
    pub governors: BTreeMap<String, Vec<usize>>,
    /// `scaling_driver` of the first online CPU (`intel_pstate`, `acpi-cpufreq`, ...).
    pub cpufreq_driver: Option<String>,
    /// Turbo/boost enabled, if the host says.
    pub turbo: Option<bool>,
    /// µs per period that real-time threads may run (`-1`: never throttled).
    pub sched_rt_runtime_us: Option<i64>,
    /// Length of the RT throttling period, µs (usually 1 000 000).
    pub sched_rt_period_us: Option<i64>,
    /// Timer slack of this process's thread, in ns.
    pub timer_slack_ns: i64,
    /// Current clock source (`tsc` is cheap to read; `hpet`, `acpi_pm` cost µs).
    pub clocksource: Option<String>,
    /// `/sys/devices/system/cpu/cpuidle/current_driver` (`none`: an idle
    /// CPU just halts, and on a VM waking it goes through the hypervisor).
    #[serde(default)]
    pub cpuidle_driver: Option<String>,
    /// THP mode: the bracketed choice (`always`, `madvise`, `never`).
    pub transparent_hugepage: Option<String>,
    /// `kernel.numa_balancing` (0 off; nonzero lets the kernel unmap pages to sample accesses).
    pub numa_balancing: Option<i64>,
    /// DAMON workers that are on ([`Damon`]): a guest-side proactive reclaimer, as some
    /// VM platforms configure one.
    #[serde(default)]
    pub damon: Vec<Damon>,
    /// CPUs isolated from the scheduler (`isolcpus=`), as a CPU list; empty when none.
    pub isolated_cpus: Option<String>,
    /// CPUs without the periodic tick (`nohz_full=`), as the kernel prints it;
    /// `None` when the kernel is built without it.
    pub nohz_full: Option<String>,
    /// An `irqbalance` process is running (it would undo IRQ affinity);
    /// only looked for when the measurement window is not zero.
    pub irqbalance_running: bool,
    /// 1-minute load average when collected.
    pub load1: f64,
    /// 5-minute load average.
    pub load5: f64,
    /// 15-minute load average.
    pub load15: f64,
    /// Length of the measurement window, s.
    pub window_s: f64,
    /// Steal over the window, % of one CPU.
    pub steal_pct: f64,
    /// User+system CPU of other processes over the window, % of one CPU.
    pub foreign_cpu_pct: f64,
    /// Processes that used at least 1 % of a CPU over the window.
    pub busy_processes: Vec<ForeignProcess>,
}

/// A DAMON worker (the kernel's data-access monitor) that is on: one of the sysfs
/// interface's `kdamonds` or one of the `damon_reclaim` / `damon_lru_sort` modules.
///
/// Its schemes act on memory it sees idle: on the test VM (a Firecracker guest, 2026-11-25)
/// `kdamonds/0` paged out unmapped file pages untouched for 60 s, so an app's data files
/// came back from disk after a pause between runs (22.7 M file refaults since boot, with
/// no other reclaim at all), and its thread woke every 500 ms for about 1 ms of CPU, 5 ms
/// every 5 s (two 20 s synth runs at 70 % load each way, on and off, showed no worker gap
/// over 1 ms either way: the page cache is what it costs a measurement).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Damon {
    /// `kdamonds/N` or the module's name.
    pub name: String,
    /// What it monitors (`paddr`, `vaddr`, `fvaddr`; the module's own for modules).
    pub operations: Option<String>,
    /// Its schemes' actions (`pageout`, `lru_prio`, `stat`, ...).
    pub actions: Vec<String>,
    /// How often it samples, µs.
    pub sample_us: Option<u64>,
}

impl Damon {
    /// Whether it changes memory (anything but `stat`), which is what disturbs a run.
    pub fn acts(&self) -> bool {
        self.actions.iter().any(|a| a != "stat")
    }

    /// DAMON workers that are on under `root`.
    pub fn collect(root: &Path) -> Vec<Damon> {
        let mut out = Vec::new();
        let admin = root.join("sys/kernel/mm/damon/admin/kdamonds");
        for i in numbered(&admin) {
            let k = admin.join(i.to_string());
            if read_trim(&k.join("state")).as_deref() != Some("on") {
                continue;
            }
            let ctx = k.join("contexts/0");
            let mut actions = Vec::new();
            for j in numbered(&ctx.join("schemes")) {
                if let Some(a) = read_trim(&ctx.join(format!("schemes/{j}/action"))) {
                    actions.push(a);
                }
            }
            out.push(Damon {
                name: format!("kdamonds/{i}"),
                operations: read_trim(&ctx.join("operations")),
                actions,
                sample_us: read_trim(&ctx.join("monitoring_attrs/intervals/sample_us"))
                    .and_then(|v| v.parse().ok()),
            });
        }
        for (module, action) in [("damon_reclaim", "pageout"), ("damon_lru_sort", "lru_sort")] {
            let params = root.join(format!("sys/module/{module}/parameters"));
            if read_trim(&params.join("enabled")).as_deref() == Some("Y") {
                out.push(Damon {
                    name: module.into(),
                    operations: None,
                    actions: vec![action.into()],
                    sample_us: read_trim(&params.join("sample_interval"))
                        .and_then(|v| v.parse().ok()),
                });
            }
        }
        out
    }
}

impl fmt::Display for Damon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on", self.name)?;
        let mut what = Vec::new();
        if let Some(o) = &self.operations {
            what.push(o.clone());
        }
        if !self.actions.is_empty() {
            what.push(self.actions.join(", "));
        }
        if let Some(us) = self.sample_us {
            what.push(format!("samples every {} ms", us as f64 / 1e3));
        }
        if !what.is_empty() {
            write!(f, " ({})", what.join("; "))?;
        }
        Ok(())
    }
}

/// The numbered entries of a sysfs directory (`kdamonds/0`, `schemes/1`, ...), in order.
fn numbered(dir: &Path) -> Vec<usize> {
    let mut ids: Vec<usize> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

fn read_trim(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The bracketed choice in a sysfs selector file (`always [madvise] never`).
pub fn bracketed(s: &str) -> Option<String> {
    let a = s.find('[')?;
    let b = s[a..].find(']')? + a;
    Some(s[a + 1..b].to_string())
}

impl SystemReport {
    /// Collects the facts and measures steal and foreign CPU over 1 s.
    pub fn collect() -> Result<SystemReport, MonitorError> {
        Self::collect_with(Path::new("/"), Duration::from_secs(1))
    }

    /// Like [`collect`](Self::collect) with a given window; `root` prefixes
    /// the static files (for tests), the live measurement always uses /proc.
    pub fn collect_with(root: &Path, window: Duration) -> Result<SystemReport, MonitorError> {
        let p = |rel: &str| root.join(rel);
        let cpuinfo = std::fs::read_to_string(p("proc/cpuinfo")).unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string());
        let virtualized = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .is_some_and(|l| l.split_ascii_whitespace().any(|f| f == "hypervisor"));
        let cpus_online = read_trim(&p("sys/devices/system/cpu/online"));
        let online: Vec<usize> = cpus_online
            .as_deref()
            .and_then(|s| taillab_core::placement::parse_cpu_list(s).ok())
            .unwrap_or_default();
        let cores_online = if online.is_empty() {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        } else {
            online.len()
        };
        let mut governors: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut cpufreq_driver = None;
        for &c in &online {
            let base = p(&format!("sys/devices/system/cpu/cpu{c}/cpufreq"));
            if let Some(g) = read_trim(&base.join("scaling_governor")) {
                governors.entry(g).or_default().push(c);
            }
            if cpufreq_driver.is_none() {
                cpufreq_driver = read_trim(&base.join("scaling_driver"));
            }
        }
        let turbo = read_trim(&p("sys/devices/system/cpu/intel_pstate/no_turbo"))
            .map(|v| v == "0")
            .or_else(|| read_trim(&p("sys/devices/system/cpu/cpufreq/boost")).map(|v| v == "1"));
        let num = |rel: &str| read_trim(&p(rel)).and_then(|v| v.parse::<i64>().ok());
        let loadavg = std::fs::read_to_string(p("proc/loadavg"))
            .ok()
            .and_then(|t| procfs::parse_loadavg(&t).ok())
            .unwrap_or_default();
        let mut report = SystemReport {
            kernel: read_trim(&p("proc/sys/kernel/osrelease")),
            cpu_model,
            virtualized,
            cpus_online,
            cores_online,
            smt_control: read_trim(&p("sys/devices/system/cpu/smt/control")),
            smt_active: read_trim(&p("sys/devices/system/cpu/smt/active")).map(|v| v == "1"),
            governors,
            cpufreq_driver,
            turbo,
            sched_rt_runtime_us: num("proc/sys/kernel/sched_rt_runtime_us"),
            sched_rt_period_us: num("proc/sys/kernel/sched_rt_period_us"),
            // SAFETY: PR_GET_TIMERSLACK has no pointer arguments.
            timer_slack_ns: unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) as i64 },
            clocksource: read_trim(&p(
                "sys/devices/system/clocksource/clocksource0/current_clocksource",
            )),
            cpuidle_driver: read_trim(&p("sys/devices/system/cpu/cpuidle/current_driver")),
            transparent_hugepage: read_trim(&p("sys/kernel/mm/transparent_hugepage/enabled"))
                .map(|v| bracketed(&v).unwrap_or(v)),
            numa_balancing: num("proc/sys/kernel/numa_balancing"),
            damon: Damon::collect(root),
            isolated_cpus: read_trim(&p("sys/devices/system/cpu/isolated")),
            nohz_full: read_trim(&p("sys/devices/system/cpu/nohz_full")),
            irqbalance_running: false,
            load1: loadavg.load1,
            load5: loadavg.load5,
            load15: loadavg.load15,
            window_s: 0.0,
            steal_pct: 0.0,
            foreign_cpu_pct: 0.0,
            busy_processes: Vec::new(),
        };
        if !window.is_zero() {
            let period = Duration::from_millis(100).min(window);
            let sampler = Sampler::start(SamplerConfig {
                period: period.max(Duration::from_millis(10)),
                scan_period: window.max(period),
                keep_series: false,
                top_n: 20,
                ..Default::default()
            })?;
            std::thread::sleep(window);
            let r = sampler.stop()?;
            let s = r.summary;
            report.window_s = s.measured_s;
            report.steal_pct = s.steal_pct;
            report.foreign_cpu_pct = s.foreign_cpu_pct;
            report.busy_processes = s
                .top_foreign
                .into_iter()
                .filter(|f| f.cpu_pct >= 1.0)
                .collect();
            report.irqbalance_running =
                r.foreign.values().flatten().any(|f| f.name == "irqbalance")
                    || process_running("irqbalance");
        }
        Ok(report)
    }

    /// Why this host is unsuitable for tail measurements right now (empty:
    /// nothing found). Uses the same limits as the per-run check.
    pub fn warnings(&self, th: &Thresholds) -> Vec<String> {
        let mut w = Vec::new();
        if self.window_s > 0.0 && self.steal_pct > th.max_steal_pct {
            w.push(format!(
                "hypervisor steal is {:.1} % of a CPU (limit {} %): other guests are taking our vCPUs; wait and check again",
                self.steal_pct, th.max_steal_pct
            ));
        }
        if self.window_s > 0.0 && self.foreign_cpu_pct > th.max_foreign_pct {
            let names: Vec<String> = self
                .busy_processes
                .iter()
                .take(5)
                .map(|f| {
                    format!(
                        "{} {:.0} % (pid {})",
                        f.name,
                        f.cpu_pct,
                        f.pids.first().copied().unwrap_or(0)
                    )
                })
                .collect();
            w.push(format!(
                "other processes use {:.0} % of a CPU (limit {} %){}: stop them or expect disturbed runs",
                self.foreign_cpu_pct,
                th.max_foreign_pct,
                if names.is_empty() { String::new() } else { format!(": {}", names.join(", ")) }
            ));
        }
        if self.cores_online < 2 {
            w.push(
                "only one CPU is online: the load generator and the workers will share it".into(),
            );
        }
        if self.load1 > self.cores_online as f64 * 0.5 {
            w.push(format!(
                "1-minute load average is {:.2} on {} CPUs: the host was busy recently",
                self.load1, self.cores_online
            ));
        }
        let non_perf: Vec<&String> = self
            .governors
            .keys()
            .filter(|g| *g != "performance")
            .collect();
        if !non_perf.is_empty() {
            w.push(format!(
                "CPU frequency governor is {} rather than performance: service times change with the clock (`taillab system tune`)",
                non_perf.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("/")
            ));
        }
        if self.turbo == Some(true) {
            w.push("turbo/boost is on: the clock depends on temperature and on the other cores (`taillab system tune` turns it off)".into());
        }
        if let Some(rt) = self.sched_rt_runtime_us {
            if rt != -1 {
                w.push(format!(
                    "sched_rt_runtime_us is {rt}: real-time worker threads would be throttled each second (`taillab system tune` sets -1)"
                ));
            }
        }
        if self.transparent_hugepage.as_deref() == Some("always") {
            w.push("transparent huge pages are `always`: khugepaged and compaction can stall workers (`taillab system tune` sets madvise)".into());
        }
        if let Some(cs) = &self.clocksource {
            if cs != "tsc" {
                w.push(format!(
                    "clock source is {cs}, not tsc: every timestamp costs more and may jitter"
                ));
            }
        }
        if self.virtualized && self.cpuidle_driver.as_deref() == Some("none") {
            w.push("no cpuidle driver on this VM: an idle vCPU halts at once and waking it costs tens of µs, paid by every request that wakes a sleeping thread (`--wait spin` avoids it; the cpuidle-haltpoll driver, where the kernel has it, polls before halting)".into());
        }
        if self.numa_balancing.unwrap_or(0) > 0 {
            w.push("automatic NUMA balancing is on: it unmaps pages to sample them, causing minor faults in workers (`taillab system tune` turns it off)".into());
        }
        for d in self.damon.iter().filter(|d| d.acts()) {
            w.push(format!(
                "DAMON {d}: the kernel acts on memory it sees idle (a pageout scheme drops page cache unused for a while, so an app's data files come back from disk after a pause between runs), and its thread wakes on every sample (`taillab system tune` stops it)"
            ));
        }
        if self.irqbalance_running {
            w.push(
                "irqbalance is running: it may move interrupts onto the workers' CPUs during a run"
                    .into(),
            );
        }
        w
    }
}

fn process_running(name: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
            && read_trim(&e.path().join("comm")).as_deref() == Some(name)
    })
}

impl SystemReport {
    /// The report's last lines: the load average, then steal, foreign CPU and
    /// the busiest other processes when they were sampled over a window.
    fn fmt_activity(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "load average:         {:.2} {:.2} {:.2}",
            self.load1, self.load5, self.load15
        )?;
        if self.window_s > 0.0 {
            writeln!(
                f,
                "steal (over {:.1} s):    {:.2} % of a CPU",
                self.window_s, self.steal_pct
            )?;
            writeln!(
                f,
                "foreign CPU:          {:.1} % of a CPU",
                self.foreign_cpu_pct
            )?;
            for p in &self.busy_processes {
                writeln!(
                    f,
                    "  {:>6.1} %  {} (pid {}){}",
                    p.cpu_pct,
                    p.name,
                    p.pids.first().copied().unwrap_or(0),
                    p.cmdline
                        .as_ref()
                        .map(|c| format!(": {c}"))
                        .unwrap_or_default()
                )?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for SystemReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "(not readable)".into());
        writeln!(
            f,
            "CPU:                  {}{}",
            opt(&self.cpu_model),
            if self.virtualized {
                " (virtual machine)"
            } else {
                ""
            }
        )?;
        writeln!(
            f,
            "CPUs online:          {} ({})",
            self.cores_online,
            opt(&self.cpus_online)
        )?;
        writeln!(
            f,
            "SMT:                  {}{}",
            opt(&self.smt_control),
            match self.smt_active {
                Some(true) => ", active",
                Some(false) => ", inactive",
                None => "",
            }
        )?;
        writeln!(f, "kernel:               {}", opt(&self.kernel))?;
        if self.governors.is_empty() {
            writeln!(
                f,
                "governor:             (no cpufreq: frequency is up to the hypervisor)"
            )?;
        } else {
            let g: Vec<String> = self
                .governors
                .iter()
                .map(|(g, c)| format!("{g} on CPUs {c:?}"))
                .collect();
            writeln!(
                f,
                "governor:             {} (driver {})",
                g.join(", "),
                opt(&self.cpufreq_driver)
            )?;
        }
        writeln!(
            f,
            "turbo/boost:          {}",
            match self.turbo {
                Some(true) => "on",
                Some(false) => "off",
                None => "(not readable)",
            }
        )?;
        let num = |o: Option<i64>| {
            o.map(|v| v.to_string())
                .unwrap_or_else(|| "(not readable)".into())
        };
        writeln!(
            f,
            "sched_rt_runtime_us:  {} (period {})",
            num(self.sched_rt_runtime_us),
            num(self.sched_rt_period_us)
        )?;
        writeln!(
            f,
            "timer slack:          {} ns (this process)",
            self.timer_slack_ns
        )?;
        writeln!(f, "clock source:         {}", opt(&self.clocksource))?;
        writeln!(f, "cpuidle driver:       {}", opt(&self.cpuidle_driver))?;
        writeln!(
            f,
            "transparent hugepage: {}",
            opt(&self.transparent_hugepage)
        )?;
        writeln!(f, "NUMA balancing:       {}", num(self.numa_balancing))?;
        if self.damon.is_empty() {
            writeln!(f, "DAMON:                off")?;
        }
        for d in &self.damon {
            writeln!(f, "DAMON:                {d}")?;
        }
        writeln!(
            f,
            "isolated CPUs:        {}",
            self.isolated_cpus
                .clone()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "none".into())
        )?;
        self.fmt_activity(f)
    }
}

// ----------------------------------------------------------------------------
// tune / reset
// ----------------------------------------------------------------------------

/// How a file's current value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// The whole trimmed content.
    Plain,
    /// The bracketed word of a selector (`always [madvise] never`).
    Selector,
}

#[derive(Debug, Clone)]
struct FileSetting {
    path: PathBuf,
    desired: String,
    form: Form,
}

/// One tuning operation: a named group of files and the values it wants.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The name `taillab system tune` takes and prints (`cpu_governor`, `turbo`, ...).
    pub name: &'static str,
    /// Why it matters for the tail.
    pub why: &'static str,
    files: Vec<FileSetting>,
    /// Said when the files do not exist on this host.
    unavailable: &'static str,
}

/// The state of one operation on this host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpState {
    /// The operation's name.
    pub name: String,
    /// Why it matters for the tail.
    pub why: String,
    /// `tuned`, `not tuned` or `unavailable`.
    pub status: String,
    /// Current values, `path = value`.
    pub current: Vec<String>,
    /// The value the operation writes (that of its first file; empty when unavailable).
    pub desired: String,
    /// What happened when applying or resetting (empty for show).
    pub message: String,
}

impl fmt::Display for OpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One value, or the distinct values of a multi-file setting.
        let mut now: Vec<&str> = self
            .current
            .iter()
            .filter_map(|c| c.rsplit_once(" = ").map(|(_, v)| v))
            .collect();
        now.dedup();
        write!(f, "{:<22} {:<11}", self.name, self.status)?;
        if !now.is_empty() {
            write!(f, " now {:<10} want {:<10}", now.join("/"), self.desired)?;
        }
        if !self.message.is_empty() {
            write!(f, " {}", self.message)?;
        }
        Ok(())
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StateFile {
    schema: String,
    /// Absolute path → value before taillab first changed it.
    saved: BTreeMap<String, String>,
}

const STATE_SCHEMA: &str = "taillab.system-tune/1";

/// Shows, applies and resets the tuning operations.
pub struct Tuner {
    root: PathBuf,
    state_path: PathBuf,
    ops: Vec<Operation>,
}

/// Where `tune` keeps prior values unless told otherwise:
/// `$TAILLAB_STATE_DIR`, else `$XDG_STATE_HOME/taillab`, else
/// `~/.local/state/taillab`, else `/tmp/taillab-state`; file
/// `system-tune.json`.
pub fn default_state_path() -> PathBuf {
    let dir = std::env::var_os("TAILLAB_STATE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_STATE_HOME").map(|d| PathBuf::from(d).join("taillab")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/taillab")))
        .unwrap_or_else(|| PathBuf::from("/tmp/taillab-state"));
    dir.join("system-tune.json")
}

/// Where a run keeps the prior values of the knobs it changes for its own
/// duration (IRQ affinity, transparent huge pages): `run-tuning.json` next
/// to [`default_state_path`]. A run that ends normally restores them and
/// deletes the file; one killed outright leaves it for the next run's start
/// or `taillab system reset`, which write the values back.
pub fn default_run_journal_path() -> PathBuf {
    default_state_path().with_file_name("run-tuning.json")
}

/// What [`Tuner::set_saving`] did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    /// The file already held the value; nothing was saved or written.
    Unchanged,
    /// The value was written; `old` is saved in the state file.
    Changed {
        /// The value before, as read (a selector file's bracketed choice).
        old: String,
    },
    /// The kernel (or a missing file) refused; nothing changed.
    Refused {
        /// The reason, with what to do (e.g. `permission denied (run as root)`).
        why: String,
    },
}

fn read_value(path: &Path, form: Form) -> Option<String> {
    let v = read_trim(path)?;
    Some(match form {
        Form::Plain => v,
        Form::Selector => bracketed(&v).unwrap_or(v),
    })
}

fn write_error_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied (run as root)".into(),
        Some(libc::EROFS) => {
            "read-only on this machine (a container or VM that does not allow it)".into()
        }
        Some(libc::EINVAL) => "the kernel rejected the value".into(),
        Some(libc::EIO) => "the kernel cannot change it here".into(),
        _ => e.to_string(),
    }
}

/// A setting that writes `v` to the whole file.
fn plain(path: PathBuf, v: &str) -> FileSetting {
    FileSetting {
        path,
        desired: v.into(),
        form: Form::Plain,
    }
}

/// The `damon` operation under `root`.
fn damon_operation(root: &Path) -> Operation {
    let p = |rel: &str| root.join(rel);
    // DAMON: every kdamond that exists (state off; reset turns those that were on back
    // on with their configuration, which sysfs keeps), and the reclaim modules.
    let admin = p("sys/kernel/mm/damon/admin/kdamonds");
    let mut damon: Vec<FileSetting> = numbered(&admin)
        .iter()
        .map(|i| plain(admin.join(format!("{i}/state")), "off"))
        .filter(|f| f.path.exists())
        .collect();
    for module in ["damon_reclaim", "damon_lru_sort"] {
        let f = p(&format!("sys/module/{module}/parameters/enabled"));
        if f.exists() {
            damon.push(plain(f, "N"));
        }
    }
    Operation {
        name: "damon",
        why: "DAMON's schemes reclaim or reorder memory the kernel sees idle: page cache an app reads comes back from disk after a pause, and its thread wakes every sample",
        files: damon,
        unavailable: "no DAMON worker on this host",
    }
}

/// The `irq_affinity` operation under `root`: interrupts moved off `cpus`.
fn irq_operation(root: &Path, online: &[usize], cpus: &[usize]) -> Operation {
    let p = |rel: &str| root.join(rel);
    let keep: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !cpus.contains(c))
        .collect();
    let list = keep
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut files = Vec::new();
    if !keep.is_empty() {
        if let Ok(dir) = std::fs::read_dir(p("proc/irq")) {
            let mut irqs: Vec<u32> = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect();
            irqs.sort_unstable();
            for irq in irqs {
                let f = p(&format!("proc/irq/{irq}/smp_affinity_list"));
                if f.exists() {
                    files.push(plain(f, &list));
                }
            }
        }
    }
    Operation {
        name: "irq_affinity",
        why: "interrupts handled on a worker's CPU delay the request it is serving",
        files,
        unavailable: "no movable IRQs, or every online CPU is a worker CPU",
    }
}

impl Tuner {
    /// Operations for the live system; `worker_cpus` enables the IRQ
    /// affinity operation (interrupts moved off those CPUs).
    pub fn new(state_path: PathBuf, worker_cpus: Option<&[usize]>) -> Tuner {
        Self::with_root(Path::new("/"), state_path, worker_cpus)
    }

    /// Like [`new`](Self::new) with every system path under `root` (tests).
    pub fn with_root(root: &Path, state_path: PathBuf, worker_cpus: Option<&[usize]>) -> Tuner {
        let p = |rel: &str| root.join(rel);
        let online: Vec<usize> = read_trim(&p("sys/devices/system/cpu/online"))
            .and_then(|s| taillab_core::placement::parse_cpu_list(&s).ok())
            .unwrap_or_default();
        let mut ops = vec![
            Operation {
                name: "cpu_governor",
                why: "a fixed, maximal clock: service times do not depend on how busy the core was a moment ago",
                files: online
                    .iter()
                    .map(|c| plain(p(&format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")), "performance"))
                    .filter(|f| f.path.exists())
                    .collect(),
                unavailable: "no cpufreq on this host (usual on VMs: the hypervisor sets the frequency)",
            },
            Operation {
                name: "turbo",
                why: "turbo clocks depend on temperature and on what the other cores do: off gives repeatable service times",
                files: [
                    plain(p("sys/devices/system/cpu/intel_pstate/no_turbo"), "1"),
                    plain(p("sys/devices/system/cpu/cpufreq/boost"), "0"),
                ]
                .into_iter()
                .filter(|f| f.path.exists())
                .take(1)
                .collect(),
                unavailable: "no turbo/boost control on this host",
            },
            Operation {
                name: "sched_rt_runtime_us",
                why: "-1 lets real-time worker threads run without being throttled for 50 ms each second",
                files: vec![plain(p("proc/sys/kernel/sched_rt_runtime_us"), "-1")]
                    .into_iter()
                    .filter(|f| f.path.exists())
                    .collect(),
                unavailable: "the kernel has no RT throttling knob",
            },
            Operation {
                name: "numa_balancing",
                why: "NUMA balancing unmaps pages to sample accesses, which makes workers take minor faults",
                files: vec![plain(p("proc/sys/kernel/numa_balancing"), "0")]
                    .into_iter()
                    .filter(|f| f.path.exists())
                    .collect(),
                unavailable: "the kernel has no NUMA balancing",
            },
            Operation {
                name: "transparent_hugepage",
                why: "with `always`, khugepaged and compaction can stall any allocation; madvise limits that to code that asks",
                files: vec![FileSetting {
                    path: p("sys/kernel/mm/transparent_hugepage/enabled"),
                    desired: "madvise".into(),
                    form: Form::Selector,
                }]
                .into_iter()
                .filter(|f| f.path.exists())
                .collect(),
                unavailable: "the kernel has no transparent huge pages",
            },
        ];
        ops.push(damon_operation(root));
        if let Some(cpus) = worker_cpus {
            ops.push(irq_operation(root, &online, cpus));
        }
        Tuner {
            root: root.to_path_buf(),
            state_path,
            ops,
        }
    }

    /// The operations this tuner knows.
    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }

    fn state_of(&self, op: &Operation) -> OpState {
        let current: Vec<String> = op
            .files
            .iter()
            .map(|f| {
                let rel = f
                    .path
                    .strip_prefix(&self.root)
                    .unwrap_or(&f.path)
                    .display()
                    .to_string();
                format!(
                    "/{} = {}",
                    rel.trim_start_matches('/'),
                    read_value(&f.path, f.form).unwrap_or_else(|| "?".into())
                )
            })
            .collect();
        let status = if op.files.is_empty() {
            "unavailable"
        } else if op
            .files
            .iter()
            .all(|f| read_value(&f.path, f.form).as_deref() == Some(f.desired.as_str()))
        {
            "tuned"
        } else {
            "not tuned"
        };
        OpState {
            name: op.name.into(),
            why: op.why.into(),
            status: status.into(),
            current,
            desired: op
                .files
                .first()
                .map(|f| f.desired.clone())
                .unwrap_or_default(),
            message: if op.files.is_empty() {
                format!("skipped: {}", op.unavailable)
            } else {
                String::new()
            },
        }
    }

    /// The state of every operation, changing nothing.
    pub fn show(&self) -> Vec<OpState> {
        self.ops.iter().map(|op| self.state_of(op)).collect()
    }

    fn load_state(&self) -> Result<StateFile, MonitorError> {
        match std::fs::read_to_string(&self.state_path) {
            Ok(t) => serde_json::from_str(&t).map_err(|e| MonitorError::State {
                action: "parse",
                path: self.state_path.clone(),
                why: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile {
                schema: STATE_SCHEMA.into(),
                saved: BTreeMap::new(),
            }),
            Err(e) => Err(MonitorError::State {
                action: "read",
                path: self.state_path.clone(),
                why: e.to_string(),
            }),
        }
    }

    fn save_state(&self, s: &StateFile) -> Result<(), MonitorError> {
        let err = |action, e: &dyn fmt::Display| MonitorError::State {
            action,
            path: self.state_path.clone(),
            why: e.to_string(),
        };
        if let Some(dir) = self.state_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err("create the folder of", &e))?;
        }
        let text = serde_json::to_string_pretty(s).map_err(|e| err("encode", &e))?;
        // Write-then-rename so a crash never leaves a half-written state file.
        let tmp = self.state_path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| err("write", &e))?;
        std::fs::rename(&tmp, &self.state_path).map_err(|e| err("write", &e))
    }

    /// Applies every operation (or only those named in `only`), saving each
    /// prior value first. A value saved by an earlier `tune` is kept, so
    /// `reset` always returns to the state before the first `tune`.
    pub fn apply(&self, only: &[String]) -> Result<Vec<OpState>, MonitorError> {
        let mut state = self.load_state()?;
        let mut out = Vec::new();
        for op in self
            .ops
            .iter()
            .filter(|o| only.is_empty() || only.iter().any(|n| n == o.name))
        {
            let before = self.state_of(op);
            if before.status != "not tuned" {
                out.push(OpState {
                    message: if before.status == "tuned" {
                        "already set".into()
                    } else {
                        before.message.clone()
                    },
                    ..before
                });
                continue;
            }
            let (mut changed, mut failed) = (0, Vec::new());
            for f in &op.files {
                let Some(old) = read_value(&f.path, f.form) else {
                    continue;
                };
                if old == f.desired {
                    continue;
                }
                let key = f.path.display().to_string();
                state.saved.entry(key.clone()).or_insert(old.clone());
                // Save before writing: a crash after the write can still be reset.
                self.save_state(&state)?;
                match std::fs::write(&f.path, &f.desired) {
                    Ok(()) => changed += 1,
                    Err(e) => {
                        failed.push(format!("{}: {}", f.path.display(), write_error_text(&e)));
                        // Nothing changed, so there is nothing to restore.
                        if state.saved.get(&key) == Some(&old) {
                            state.saved.remove(&key);
                            self.save_state(&state)?;
                        }
                    }
                }
            }
            let mut after = self.state_of(op);
            after.message = if failed.is_empty() {
                format!("applied ({changed} file(s))")
            } else {
                format!(
                    "skipped what cannot be changed on this machine: {}",
                    failed.join("; ")
                )
            };
            out.push(after);
        }
        Ok(out)
    }

    /// Writes `value` to one file, saving the file's current value in the
    /// state file first (a value saved earlier is kept), so that
    /// [`reset`](Self::reset) — in this process or, after a crash, in the
    /// next one — writes it back. Selector files (`always [madvise] never`)
    /// are saved as their bracketed word.
    pub fn set_saving(&self, file: &Path, value: &str) -> Result<SetOutcome, MonitorError> {
        let form = match read_trim(file) {
            Some(v) if bracketed(&v).is_some() => Form::Selector,
            Some(_) => Form::Plain,
            None => {
                return Ok(SetOutcome::Refused {
                    why: format!("{} does not exist or cannot be read", file.display()),
                })
            }
        };
        let Some(old) = read_value(file, form) else {
            return Ok(SetOutcome::Refused {
                why: format!("{} cannot be read", file.display()),
            });
        };
        if old == value {
            return Ok(SetOutcome::Unchanged);
        }
        let mut state = self.load_state()?;
        let key = file.display().to_string();
        let fresh = !state.saved.contains_key(&key);
        state.saved.entry(key.clone()).or_insert(old.clone());
        // Save before writing: a crash after the write can still be reset.
        self.save_state(&state)?;
        match std::fs::write(file, value) {
            Ok(()) => Ok(SetOutcome::Changed { old }),
            Err(e) => {
                if fresh {
                    state.saved.remove(&key);
                    self.save_state(&state)?;
                }
                Ok(SetOutcome::Refused {
                    why: format!("{}: {}", file.display(), write_error_text(&e)),
                })
            }
        }
    }

    /// The state file this tuner saves prior values in.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// Writes back every value saved by `apply` and deletes the state file.
    /// Values that cannot be written back stay in the file and are reported
    /// (their lines are [`ResetLine::failed`]).
    pub fn reset(&self) -> Result<Vec<ResetLine>, MonitorError> {
        let mut state = self.load_state()?;
        let mut msgs = Vec::new();
        if state.saved.is_empty() {
            msgs.push(ResetLine::done(format!(
                "nothing to reset: no saved values in {}",
                self.state_path.display()
            )));
            return Ok(msgs);
        }
        let mut left = BTreeMap::new();
        for (path, value) in std::mem::take(&mut state.saved) {
            // Already back (a kdamond turned on again by its platform refuses "on" with EBUSY).
            let now = read_trim(Path::new(&path)).map(|v| bracketed(&v).unwrap_or(v));
            if now.as_deref() == Some(value.as_str()) {
                msgs.push(ResetLine::done(format!(
                    "restored {path} = {value} (it already was)"
                )));
                continue;
            }
            match std::fs::write(&path, &value) {
                Ok(()) => msgs.push(ResetLine::done(format!("restored {path} = {value}"))),
                Err(e) => {
                    msgs.push(ResetLine {
                        text: format!(
                            "could not restore {path} = {value}: {}",
                            write_error_text(&e)
                        ),
                        failed: true,
                    });
                    left.insert(path, value);
                }
            }
        }
        if left.is_empty() {
            std::fs::remove_file(&self.state_path).map_err(|e| MonitorError::State {
                action: "remove",
                path: self.state_path.clone(),
                why: e.to_string(),
            })?;
        } else {
            state.saved = left;
            self.save_state(&state)?;
        }
        Ok(msgs)
    }
}

/// One line of [`Tuner::reset`]: a setting written back (or already
/// back), or one that could not be, which stays in the state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetLine {
    /// What was done, as printed (`restored /sys/... = madvise`).
    pub text: String,
    /// The value could not be written back.
    pub failed: bool,
}

impl ResetLine {
    fn done(text: String) -> Self {
        ResetLine {
            text,
            failed: false,
        }
    }
}

impl fmt::Display for ResetLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_saving_then_reset_restores_plain_and_selector_files() {
        let dir = std::env::temp_dir().join(format!("taillab-set-saving-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (plain, sel) = (dir.join("plain"), dir.join("sel"));
        std::fs::write(&plain, "0-1\n").unwrap();
        std::fs::write(&sel, "always [madvise] never\n").unwrap();
        let t = Tuner::with_root(&dir, dir.join("journal.json"), None);
        assert_eq!(t.set_saving(&plain, "0-1").unwrap(), SetOutcome::Unchanged);
        assert_eq!(
            t.set_saving(&plain, "1").unwrap(),
            SetOutcome::Changed { old: "0-1".into() }
        );
        // A second change keeps the first saved value.
        t.set_saving(&plain, "0").unwrap();
        assert_eq!(
            t.set_saving(&sel, "never").unwrap(),
            SetOutcome::Changed {
                old: "madvise".into()
            }
        );
        assert!(matches!(
            t.set_saving(&dir.join("missing"), "x").unwrap(),
            SetOutcome::Refused { .. }
        ));
        let msgs = t.reset().unwrap();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert_eq!(std::fs::read_to_string(&plain).unwrap(), "0-1");
        assert_eq!(std::fs::read_to_string(&sel).unwrap(), "madvise");
        assert!(!t.state_path().exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_value_that_cannot_be_written_back_is_a_failed_line_and_stays_saved() {
        let dir = std::env::temp_dir().join(format!("taillab-reset-fail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let knob = dir.join("knob");
        std::fs::write(&knob, "a\n").unwrap();
        let t = Tuner::with_root(&dir, dir.join("journal.json"), None);
        t.set_saving(&knob, "b").unwrap();
        // A folder now stands where the knob was: writing it back fails.
        std::fs::remove_file(&knob).unwrap();
        std::fs::create_dir(&knob).unwrap();
        let msgs = t.reset().unwrap();
        assert!(
            matches!(msgs.as_slice(), [l] if l.failed && l.text.starts_with("could not restore")),
            "{msgs:?}"
        );
        assert!(t.state_path().exists(), "kept for a later reset");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cpu_lists_and_selectors() {
        assert_eq!(
            bracketed("always [madvise] never").as_deref(),
            Some("madvise")
        );
        assert_eq!(bracketed("none"), None);
    }
}
