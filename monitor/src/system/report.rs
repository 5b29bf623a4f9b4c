//! What this host is and whether it is fit for tail measurements now ([`SystemReport`]): the
//! CPU, SMT, kernel, governor and turbo, RT throttling, timer slack, THP, the clock source, the
//! cpuidle driver, DAMON, and steal and foreign CPU over a short window, with its warnings.

use super::*;

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
pub(super) fn numbered(dir: &Path) -> Vec<usize> {
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

pub(super) fn read_trim(path: &Path) -> Option<String> {
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

pub(super) fn process_running(name: &str) -> bool {
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
    pub(super) fn fmt_activity(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
