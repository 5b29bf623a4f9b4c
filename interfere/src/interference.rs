//! Planned background load: start the hogs, name every process they run,
//! measure what they used, and stop them so that none survives.
//!
//! A run starts its [`Interference`] before warmup and stops it after the
//! measured phase; [`Interference::pids`] are handed to the environment
//! monitor as the experiment's own processes, so their CPU is planned
//! interference and not foreign use, while anything else still fails the
//! environment check. [`Interference::stop`] returns an
//! [`InterferenceReport`], the `interference` section of `summary.json`.
//!
//! The network hog is iperf3 (server and client on 127.0.0.1, one client
//! with N parallel TCP streams) rather than a second taillab load: it needs
//! no second app or server configuration, its rate is one flag, and its
//! traffic is pure loopback TCP, which is the point of the hog.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::contain::{self, Cgroup, Watchdog};
use crate::preflight::{self, PreflightError};
use crate::signals;
use crate::spec::{Class, CpuList, InterfereSpec};
use crate::usage::{self, ProcessUsage, UsageSnapshot};
pub use taillab_core::sections::planned::{
    HogProcess, HogReport, InterferenceReport, INTERFERENCE_SCHEMA as REPORT_SCHEMA,
};

/// Why interference could not start. Nothing is left running when this is
/// returned.
#[derive(Debug, thiserror::Error)]
pub enum InterfereError {
    /// A check before starting failed (CPUs, nice value, program not installed).
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// The folder for logs and scratch files could not be created.
    #[error("cannot create the interference folder {path}: {source}")]
    Folder {
        /// The folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A hog's program could not be started.
    #[error("cannot start `{command}` for interference {spec}: {source}")]
    Spawn {
        /// The interference spec, as written in the configuration.
        spec: String,
        /// The command line that failed.
        command: String,
        /// The error `spawn` returned.
        source: std::io::Error,
    },
    /// A hog started but exited or failed before it settled; its log is kept.
    #[error("interference {spec} did not start: {why}; its log {log} ends with: {tail}")]
    NotStarted {
        /// The interference spec, as written in the configuration.
        spec: String,
        /// What was seen: an exit status, too few workers in time, or no iperf3 server.
        why: String,
        /// Path of the hog's log file.
        log: String,
        /// Its last three lines, joined by ` | `.
        tail: String,
    },
}

/// How long a hog's process tree must stop growing before it counts as started.
pub const SETTLE_QUIET: Duration = Duration::from_millis(150);

/// Where logs and scratch files go, and how long to wait for start-up.
#[derive(Debug, Clone)]
pub struct InterfereOptions {
    /// Folder for each hog's log (`interfere-<k>-<class>.log`) and the
    /// `io`/`hdd` scratch files. `None`: a fresh folder under the temp dir,
    /// deleted at stop unless a hog died early (then its logs are kept and
    /// the report names the folder).
    pub dir: Option<PathBuf>,
    /// How long a hog may take to start all its processes (default 10 s).
    pub settle_timeout: Duration,
    /// How long `stop` waits for SIGTERM before SIGKILL (default 3 s).
    pub term_grace: Duration,
    /// Use a cgroup-v2 group where the host allows one (default true;
    /// false tests or forces process-group containment alone).
    pub use_cgroup: bool,
}

impl Default for InterfereOptions {
    fn default() -> Self {
        InterfereOptions {
            dir: None,
            settle_timeout: Duration::from_secs(10),
            term_grace: Duration::from_secs(3),
            use_cgroup: true,
        }
    }
}

/// One direct child (stress-ng, or iperf3 server/client).
#[derive(Debug)]
struct Direct {
    role: &'static str,
    child: Child,
    /// Exit status if it ended before `stop` began.
    early_exit: Option<ExitStatus>,
    status: Option<ExitStatus>,
}

/// One process of a hog seen at some point.
#[derive(Debug, Clone)]
struct Seen {
    role: &'static str,
    name: String,
    starttime: u64,
}

#[derive(Debug)]
struct Hog {
    spec: InterfereSpec,
    command: Vec<String>,
    log: PathBuf,
    direct: Vec<Direct>,
    seen: BTreeMap<i32, Seen>,
}

/// Snapshots that bound the reported window.
#[derive(Debug, Default)]
struct Marks {
    start: Option<(UsageSnapshot, Option<u64>)>,
    end: Option<(UsageSnapshot, Option<u64>)>,
    measured: bool,
}

/// Running planned interference. Dropping it without [`stop`](Self::stop)
/// kills every hog at once.
#[derive(Debug)]
pub struct Interference {
    hogs: Mutex<Vec<Hog>>,
    cgroup: Option<Cgroup>,
    watchdog: Option<Watchdog>,
    dir: PathBuf,
    dir_is_temp: bool,
    marks: Mutex<Marks>,
    opts: InterfereOptions,
    /// Process group of every direct child ever spawned (its pid), shared
    /// with the emergency cleanup run from a signal.
    groups: Arc<Mutex<Vec<i32>>>,
    cleanup_id: Option<u64>,
    /// Keep the scratch folder (a hog failed to start: its log explains why).
    keep_dir: bool,
    stopped: bool,
}

fn stress_args(spec: &InterfereSpec, dir: &Path) -> Vec<String> {
    let n = spec.count.to_string();
    let mut a: Vec<String> = Vec::new();
    let mut push = |s: &[&str]| a.extend(s.iter().map(|x| x.to_string()));
    match spec.class {
        Class::Cpu => {
            push(&["--cpu", &n]);
            if let Some(l) = spec.param("load") {
                push(&["--cpu-load", l]);
            }
            if let Some(m) = spec.param("method") {
                push(&["--cpu-method", m]);
            }
        }
        Class::Vm => {
            push(&["--vm", &n, "--vm-keep"]);
            if let Some(b) = spec.param("bytes") {
                push(&["--vm-bytes", b]);
            }
        }
        Class::Io => {
            push(&["--iomix", &n]);
            if let Some(b) = spec.param("bytes") {
                push(&["--iomix-bytes", b]);
            }
        }
        Class::Hdd => {
            push(&["--hdd", &n]);
            if let Some(b) = spec.param("bytes") {
                push(&["--hdd-bytes", b]);
            }
        }
        Class::Cache => push(&["--cache", &n]),
        Class::Net => unreachable!("net runs iperf3"),
    }
    // `--timeout 0`: run until stopped.
    push(&["--timeout", "0", "--temp-path", &dir.display().to_string()]);
    a
}

/// A cpu_set_t for `pre_exec` (built before fork: no allocation after it).
fn cpu_set(cpus: &CpuList) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.cpus() {
        // SAFETY: CPU_SET on our own set; c < CPU_SETSIZE was checked by preflight.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

struct ChildSetup {
    cpus: Option<libc::cpu_set_t>,
    nice: Option<i32>,
    cgroup_fd: Option<i32>,
    parent: i32,
}

impl ChildSetup {
    /// Runs in the child between fork and exec: only async-signal-safe calls.
    fn apply(&self) -> std::io::Result<()> {
        // SAFETY: plain syscalls on the calling (child) process.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // The parent may have died before the prctl: then nobody will kill us.
            if libc::getppid() != self.parent {
                libc::_exit(1);
            }
            if let Some(fd) = self.cgroup_fd {
                // A failure leaves the child outside the group; checked after spawn.
                libc::write(fd, b"0".as_ptr().cast(), 1);
            }
            if let Some(set) = &self.cpus {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(n) = self.nice {
                if libc::setpriority(libc::PRIO_PROCESS, 0, n) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

fn tail_of(path: &Path, lines: usize) -> Vec<String> {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<String> = t.lines().map(str::to_string).collect();
    v[v.len().saturating_sub(lines)..].to_vec()
}

/// Describes an exit status in words.
pub fn describe_status(s: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// A free TCP port on 127.0.0.1 (the kernel's choice, released at once).
fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Whether something listens on 127.0.0.1:`port` (from /proc/net/tcp, so
/// that checking does not use up iperf3's test connection).
fn listening(port: u16) -> bool {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"0A")
        })
    })
}

impl Interference {
    /// Starts every hog with default options. See [`start_with`](Self::start_with).
    pub fn start(specs: &[InterfereSpec]) -> Result<Interference, InterfereError> {
        Self::start_with(specs, InterfereOptions::default())
    }

    /// Checks everything that can be checked first (programs installed,
    /// CPUs allowed, nice permitted), then starts each hog and waits until
    /// all its processes exist. Any failure stops what already started.
    /// Call it on a thread that lives until `stop` (see [`crate::contain`]).
    pub fn start_with(
        specs: &[InterfereSpec],
        opts: InterfereOptions,
    ) -> Result<Interference, InterfereError> {
        check_specs(specs)?;
        contain::sweep_orphans();
        let (dir, dir_is_temp) = match &opts.dir {
            Some(d) => (d.clone(), false),
            None => (scratch_dir(), true),
        };
        std::fs::create_dir_all(&dir).map_err(|source| InterfereError::Folder {
            path: dir.clone(),
            source,
        })?;
        // Nothing to contain without hogs: no group, no watchdog.
        let any = !specs.is_empty();
        let cgroup = (opts.use_cgroup && any).then(Cgroup::create).flatten();
        let watchdog = any
            .then(|| {
                let cg = cgroup.as_ref().map(|c| c.dir.as_path());
                Watchdog::start(cg, dir_is_temp.then_some(dir.as_path())).ok()
            })
            .flatten();
        let mut me = Interference {
            hogs: Mutex::new(Vec::new()),
            cgroup,
            watchdog,
            dir,
            dir_is_temp,
            marks: Mutex::new(Marks::default()),
            opts,
            groups: Arc::default(),
            cleanup_id: None,
            keep_dir: false,
            stopped: false,
        };
        me.cleanup_id = Some(signals::register(me.emergency_cleanup()));
        for (k, spec) in specs.iter().enumerate() {
            let mut hog = Hog {
                spec: spec.clone(),
                command: Vec::new(),
                log: me.dir.join(format!("interfere-{k}-{}.log", spec.class)),
                direct: Vec::new(),
                seen: BTreeMap::new(),
            };
            let started = me.spawn_hog(&mut hog);
            // Kept even on failure, so that dropping `me` kills and reaps it.
            me.hogs
                .get_mut()
                .unwrap_or_else(|e| e.into_inner())
                .push(hog);
            if let Err(e) = started {
                me.keep_dir = matches!(e, InterfereError::NotStarted { .. });
                return Err(e);
            }
        }
        let _ = me.pids();
        me.take_start_mark();
        Ok(me)
    }

    /// A closure that kills every hog of this interference, for the signal
    /// handler: it holds pids and paths, not `self`.
    fn emergency_cleanup(&self) -> impl Fn() + Send + Sync + 'static {
        let cg = self.cgroup.as_ref().map(|c| c.dir.clone());
        let watch = self.groups.clone();
        move || {
            if let Some(d) = &cg {
                let _ = std::fs::write(d.join("cgroup.kill"), "1");
            }
            let groups = watch.lock().unwrap_or_else(|e| e.into_inner()).clone();
            contain::signal_groups(&groups, libc::SIGKILL);
            // The process exits right after: wait (briefly) until the hogs are
            // really gone, so none is seen running after the run ended.
            let until = std::time::Instant::now() + Duration::from_secs(2);
            while !contain::group_members(&groups).is_empty() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn spawn_direct(
        &mut self,
        spec: &InterfereSpec,
        role: &'static str,
        program: &Path,
        args: &[String],
        log: &Path,
    ) -> Result<Direct, InterfereError> {
        use std::os::unix::process::CommandExt;
        let logf = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|source| InterfereError::Folder {
                path: log.to_path_buf(),
                source,
            })?;
        let setup = ChildSetup {
            cpus: spec.cpus.as_ref().map(cpu_set),
            nice: spec.nice,
            cgroup_fd: self.cgroup.as_ref().map(|c| c.procs_fd()),
            parent: std::process::id() as i32,
        };
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(logf.try_clone().map_err(|source| InterfereError::Folder {
                path: log.to_path_buf(),
                source,
            })?)
            .stderr(logf);
        // SAFETY: ChildSetup::apply makes only async-signal-safe syscalls.
        unsafe { cmd.pre_exec(move || setup.apply()) };
        let child = cmd.spawn().map_err(|source| InterfereError::Spawn {
            spec: spec.to_string(),
            command: format!("{} {}", program.display(), args.join(" ")),
            source,
        })?;
        let pid = child.id() as i32;
        if let Some(w) = self.watchdog.as_mut() {
            w.watch_group(pid);
        }
        self.groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        if self.cgroup.as_ref().is_some_and(|c| !c.contains(pid)) {
            // The host refused the move (e.g. a threaded or foreign
            // subtree): rely on process groups from here on.
            self.cgroup = None;
        }
        Ok(Direct {
            role,
            child,
            early_exit: None,
            status: None,
        })
    }

    fn spawn_hog(&mut self, hog: &mut Hog) -> Result<(), InterfereError> {
        let spec = hog.spec.clone();
        let program = preflight::require_program(
            spec.class.program(),
            spec.class.program(),
            &format!("interference {spec}"),
        )?;
        if spec.class == Class::Net {
            return self.spawn_net(hog, &program);
        }
        let args = stress_args(&spec, &self.dir);
        hog.command = std::iter::once("stress-ng".to_string())
            .chain(args.iter().cloned())
            .collect();
        let d = self.spawn_direct(&spec, "parent", &program, &args, &hog.log.clone())?;
        hog.direct.push(d);
        self.settle_stress(hog)
    }

    fn not_started(hog: &Hog, why: String) -> InterfereError {
        InterfereError::NotStarted {
            spec: hog.spec.to_string(),
            why,
            log: hog.log.display().to_string(),
            tail: tail_of(&hog.log, 3).join(" | "),
        }
    }

    /// Waits until stress-ng has forked all its workers (and, for `vm`, each
    /// worker its child), then until its process tree stops growing for
    /// [`SETTLE_QUIET`]: some stressors fork helpers of their own (an
    /// `iomix` worker runs 18), and every one must be known before the
    /// monitor is told which processes are planned.
    fn settle_stress(&self, hog: &mut Hog) -> Result<(), InterfereError> {
        let want = hog.spec.count as usize;
        let until = Instant::now() + self.opts.settle_timeout;
        let root = hog.direct[0].child.id() as i32;
        let (mut last, mut since) = (0usize, Instant::now());
        loop {
            if let Ok(Some(st)) = hog.direct[0].child.try_wait() {
                hog.direct[0].status = Some(st);
                let why = format!("stress-ng ended ({})", describe_status(&st));
                return Err(Self::not_started(hog, why));
            }
            let table = usage::process_table();
            let kids: Vec<i32> = table
                .iter()
                .filter(|(_, pp)| *pp == root)
                .map(|(p, _)| *p)
                .collect();
            let grandkids = table.iter().filter(|(_, pp)| kids.contains(pp)).count();
            let started = kids.len() >= want && (hog.spec.class != Class::Vm || grandkids >= want);
            let tree = usage::descendants(root, &table).len();
            if tree != last {
                (last, since) = (tree, Instant::now());
            }
            if started && since.elapsed() >= SETTLE_QUIET {
                return Ok(());
            }
            if Instant::now() >= until {
                if started {
                    return Ok(()); // still forking: pids() finds the rest later
                }
                let why = format!(
                    "only {} of {want} workers appeared within {:?}",
                    kids.len(),
                    self.opts.settle_timeout
                );
                return Err(Self::not_started(hog, why));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn spawn_net(&mut self, hog: &mut Hog, program: &Path) -> Result<(), InterfereError> {
        let port = free_port()
            .map_err(|e| Self::not_started(hog, format!("no free loopback port: {e}")))?
            .to_string();
        let server: Vec<String> = ["-s", "-B", "127.0.0.1", "-p", &port]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let spec = hog.spec.clone();
        let d = self.spawn_direct(&spec, "server", program, &server, &hog.log.clone())?;
        hog.direct.push(d);
        let until = Instant::now() + self.opts.settle_timeout;
        while !listening(port.parse().unwrap_or(0)) {
            if let Ok(Some(st)) = hog.direct[0].child.try_wait() {
                return Err(Self::not_started(
                    hog,
                    format!("iperf3 server ended ({})", describe_status(&st)),
                ));
            }
            if Instant::now() >= until {
                return Err(Self::not_started(
                    hog,
                    format!("iperf3 server not listening on port {port}"),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut client: Vec<String> = ["-c", "127.0.0.1", "-p", &port, "-t", "0", "-P"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        client.push(spec.count.to_string());
        if let Some(r) = spec.param("rate") {
            client.extend(["-b".to_string(), r.to_string()]);
        }
        let d = self.spawn_direct(&spec, "client", program, &client, &hog.log.clone())?;
        hog.direct.push(d);
        hog.command = std::iter::once("iperf3".to_string())
            .chain(server)
            .chain(std::iter::once(";".into()))
            .chain(std::iter::once("iperf3".into()))
            .chain(client)
            .collect();
        Ok(())
    }

    /// Every live process of every hog now (direct children, stress-ng
    /// workers and their children, found through /proc). Pass them to the
    /// environment monitor (`Sampler::add_pid`) as the experiment's own;
    /// call again after a phase change if a hog may re-fork (a `vm` worker
    /// killed by the OOM killer is restarted by stress-ng).
    pub fn pids(&self) -> Vec<i32> {
        let table = usage::process_table();
        let mut out = Vec::new();
        let mut hogs = self.hogs.lock().unwrap_or_else(|e| e.into_inner());
        for hog in hogs.iter_mut() {
            for d in &hog.direct {
                for pid in usage::descendants(d.child.id() as i32, &table) {
                    let Some(r) = usage::read_process(pid) else {
                        continue;
                    };
                    if r.state == 'Z' {
                        continue;
                    }
                    let role = if pid == d.child.id() as i32 {
                        d.role
                    } else {
                        "worker"
                    };
                    hog.seen.entry(pid).or_insert(Seen {
                        role,
                        name: r.name,
                        starttime: r.starttime,
                    });
                    out.push(pid);
                }
            }
        }
        out
    }

    /// The watchdog process (see [`crate::contain`]), if it could start.
    pub fn watchdog_pid(&self) -> Option<i32> {
        self.watchdog.as_ref().map(|w| w.pid())
    }

    /// The cgroup-v2 directory holding the hogs, when one is used.
    pub fn cgroup_dir(&self) -> Option<&Path> {
        self.cgroup.as_ref().map(|c| c.dir.as_path())
    }

    /// The folder holding the hogs' logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `"cgroup"` when a cgroup-v2 group holds the hogs, else `"process-group"`.
    pub fn containment(&self) -> &'static str {
        if self.cgroup.is_some() {
            "cgroup"
        } else {
            "process-group"
        }
    }

    fn snapshot(&self) -> (UsageSnapshot, Option<u64>) {
        let pids = self.pids();
        (
            UsageSnapshot::take(&pids),
            self.cgroup.as_ref().and_then(|c| c.cpu_usage_us()),
        )
    }

    fn take_start_mark(&self) {
        let s = self.snapshot();
        self.marks.lock().unwrap_or_else(|e| e.into_inner()).start = Some(s);
    }

    /// Starts the reported window here (when warmup ends). Without it the
    /// report covers the time since the hogs started.
    pub fn mark_measured_start(&self) {
        let s = self.snapshot();
        let mut m = self.marks.lock().unwrap_or_else(|e| e.into_inner());
        m.start = Some(s);
        m.measured = true;
        m.end = None;
    }

    /// Ends the reported window here (when the measured phase ends).
    /// Without it the window ends when `stop` is called.
    pub fn mark_measured_end(&self) {
        let s = self.snapshot();
        self.marks.lock().unwrap_or_else(|e| e.into_inner()).end = Some(s);
    }

    /// Problems so far: hogs or hog processes that ended although nobody
    /// stopped them. Empty while all is well.
    pub fn problems(&self) -> Vec<String> {
        let _ = self.pids();
        let mut hogs = self.hogs.lock().unwrap_or_else(|e| e.into_inner());
        hogs.iter_mut().flat_map(hog_problems).collect()
    }

    /// Stops every hog (SIGTERM, then SIGKILL after the grace time), makes
    /// sure none of their processes is left, and reports what they used.
    pub fn stop(mut self) -> InterferenceReport {
        self.stopped = true;
        let need_end = self
            .marks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .end
            .is_none();
        let end = need_end.then(|| self.snapshot());
        let problems = self.problems();
        let (start, end, measured) = {
            let mut m = self.marks.lock().unwrap_or_else(|e| e.into_inner());
            let start = m.start.take().unwrap_or_default();
            (start, m.end.take().or(end).unwrap_or_default(), m.measured)
        };
        let hogs = std::mem::take(&mut *self.hogs.lock().unwrap_or_else(|e| e.into_inner()));
        let mut hogs = hogs;
        let leftover = self.terminate(&mut hogs);
        let secs = end.0.mono_ns.saturating_sub(start.0.mono_ns) as f64 / 1e9;
        let usage = end.0.usage_since(&start.0);
        let cg_cpu = match (start.1, end.1) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e6),
            _ => None,
        };
        let hog_reports: Vec<HogReport> =
            hogs.iter().map(|h| hog_report(h, &usage, secs)).collect();
        let keep_logs = !problems.is_empty() || !self.dir_is_temp;
        if !keep_logs {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
        assemble(AssembleArgs {
            hogs: hog_reports,
            window: if measured { "measured" } else { "whole" },
            seconds: secs,
            containment: self.containment(),
            cgroup_cpu_s: cg_cpu,
            problems,
            leftover,
            log_dir: keep_logs.then(|| self.dir.display().to_string()),
        })
    }

    /// SIGTERM to every group, wait, SIGKILL what is left, reap, check.
    fn terminate(&mut self, hogs: &mut [Hog]) -> Vec<i32> {
        let groups: Vec<i32> = hogs
            .iter()
            .flat_map(|h| h.direct.iter().map(|d| d.child.id() as i32))
            .collect();
        contain::signal_groups(&groups, libc::SIGTERM);
        let until = Instant::now() + self.opts.term_grace;
        loop {
            let mut running = 0;
            for d in hogs.iter_mut().flat_map(|h| h.direct.iter_mut()) {
                if d.status.is_none() {
                    match d.child.try_wait() {
                        Ok(Some(s)) => d.status = Some(s),
                        _ => running += 1,
                    }
                }
            }
            if running == 0 || Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill_all(&groups, hogs);
        let mut left = group_leftovers(&groups, Duration::from_secs(2));
        if let Some(cg) = &self.cgroup {
            left.extend(cg.remove(Duration::from_secs(2)));
        }
        left.sort_unstable();
        left.dedup();
        if let Some(w) = self.watchdog.take() {
            w.finish(left.is_empty());
        }
        left
    }

    fn kill_all(&mut self, groups: &[i32], hogs: &mut [Hog]) {
        if let Some(cg) = &self.cgroup {
            cg.kill();
        }
        contain::signal_groups(groups, libc::SIGKILL);
        for d in hogs.iter_mut().flat_map(|h| h.direct.iter_mut()) {
            if d.status.is_none() {
                d.status = d.child.wait().ok();
            }
        }
    }
}

/// Waits until no live process is left in `groups`, SIGKILLing again;
/// returns those that would not go.
fn group_leftovers(groups: &[i32], timeout: Duration) -> Vec<i32> {
    let until = Instant::now() + timeout;
    loop {
        let left = contain::group_members(groups);
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        contain::signal_groups(groups, libc::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn hog_problems(hog: &mut Hog) -> Vec<String> {
    let mut out = Vec::new();
    for d in hog.direct.iter_mut() {
        if d.early_exit.is_none() && d.status.is_none() {
            if let Ok(Some(s)) = d.child.try_wait() {
                d.early_exit = Some(s);
                d.status = Some(s);
            }
        }
        if let Some(s) = d.early_exit {
            out.push(format!(
                "interference {}: {} {} (pid {}) ended before the run did ({}); see {}",
                hog.spec,
                hog.spec.class.program(),
                d.role,
                d.child.id(),
                describe_status(&s),
                hog.log.display()
            ));
        }
    }
    let directs: Vec<i32> = hog.direct.iter().map(|d| d.child.id() as i32).collect();
    for (pid, s) in &hog.seen {
        if directs.contains(pid) {
            continue;
        }
        let alive = usage::read_process(*pid)
            .is_some_and(|r| r.starttime == s.starttime && r.state != 'Z' && r.state != 'X');
        if !alive {
            out.push(format!(
                "interference {}: {} {} (pid {pid}) ended before the run did; see {}",
                hog.spec,
                s.role,
                s.name,
                hog.log.display()
            ));
        }
    }
    out
}

/// The checks [`Interference::start`] makes before starting anything
/// (programs installed, CPUs allowed, nice permitted), for a caller that
/// validates a whole configuration before any part of a run starts.
pub fn check_specs(specs: &[InterfereSpec]) -> Result<(), PreflightError> {
    for s in specs {
        preflight::require_program(
            s.class.program(),
            s.class.program(),
            &format!("interference {s}"),
        )?;
        if let Some(c) = &s.cpus {
            preflight::check_cpus(&format!("interference {s}"), c.cpus())?;
        }
        if let Some(n) = s.nice {
            preflight::check_nice(n)?;
        }
    }
    Ok(())
}

fn scratch_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "taillab-interfere-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

impl Drop for Interference {
    fn drop(&mut self) {
        if let Some(id) = self.cleanup_id.take() {
            signals::unregister(id);
        }
        if self.stopped {
            return;
        }
        let mut hogs = std::mem::take(&mut *self.hogs.lock().unwrap_or_else(|e| e.into_inner()));
        let groups = self
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.kill_all(&groups, &mut hogs);
        let left = group_leftovers(&groups, Duration::from_secs(1));
        if let Some(cg) = &self.cgroup {
            cg.remove(Duration::from_secs(1));
        }
        if let Some(w) = self.watchdog.take() {
            w.finish(left.is_empty());
        }
        if self.dir_is_temp && !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

fn hog_report(h: &Hog, usage: &[ProcessUsage], secs: f64) -> HogReport {
    let mut processes: Vec<HogProcess> = Vec::new();
    for (pid, s) in &h.seen {
        let u = usage
            .iter()
            .find(|u| u.pid == *pid)
            .cloned()
            .unwrap_or(ProcessUsage {
                pid: *pid,
                name: s.name.clone(),
                ..Default::default()
            });
        processes.push(HogProcess {
            role: s.role.into(),
            usage: u,
        });
    }
    let sum = |f: fn(&ProcessUsage) -> Option<u64>| -> u64 {
        processes.iter().filter_map(|p| f(&p.usage)).sum()
    };
    let cpu_s: f64 = processes.iter().map(|p| p.usage.cpu_s).sum();
    let died_early =
        h.direct.iter().any(|d| d.early_exit.is_some()) || processes.iter().any(|p| !p.usage.alive);
    HogReport {
        spec: h.spec.clone(),
        class: h.spec.class,
        command: h.command.clone(),
        pids: h.seen.keys().copied().collect(),
        cpus: h.spec.cpus.clone(),
        nice: h.spec.nice,
        cpu_s,
        cpu_pct: if secs > 0.0 {
            100.0 * cpu_s / secs
        } else {
            0.0
        },
        read_bytes: sum(|u| u.read_bytes),
        write_bytes: sum(|u| u.write_bytes),
        read_chars: sum(|u| u.read_chars),
        write_chars: sum(|u| u.write_chars),
        processes,
        died_early,
        exit: h
            .direct
            .iter()
            .map(|d| {
                let st = d
                    .status
                    .as_ref()
                    .map(describe_status)
                    .unwrap_or_else(|| "unknown".into());
                let when = if d.early_exit.is_some() {
                    "before stop"
                } else {
                    "after stop"
                };
                format!(
                    "{} {} (pid {}): {st} {when}",
                    h.spec.class.program(),
                    d.role,
                    d.child.id()
                )
            })
            .collect(),
        log: h.log.display().to_string(),
        log_tail: if died_early {
            tail_of(&h.log, 5)
        } else {
            Vec::new()
        },
    }
}

struct AssembleArgs {
    hogs: Vec<HogReport>,
    window: &'static str,
    seconds: f64,
    containment: &'static str,
    cgroup_cpu_s: Option<f64>,
    problems: Vec<String>,
    leftover: Vec<i32>,
    log_dir: Option<String>,
}

fn assemble(a: AssembleArgs) -> InterferenceReport {
    let cpu_s = a
        .cgroup_cpu_s
        .unwrap_or_else(|| a.hogs.iter().map(|h| h.cpu_s).sum());
    let mut problems = a.problems;
    if !a.leftover.is_empty() {
        problems.push(format!(
            "interference processes {:?} could not be killed; kill them by hand",
            a.leftover
        ));
    }
    InterferenceReport {
        schema: REPORT_SCHEMA.into(),
        specs: a.hogs.iter().map(|h| h.spec.clone()).collect(),
        window: a.window.into(),
        seconds: a.seconds,
        containment: a.containment.into(),
        cpu_s,
        cpu_pct: if a.seconds > 0.0 {
            100.0 * cpu_s / a.seconds
        } else {
            0.0
        },
        read_bytes: a.hogs.iter().map(|h| h.read_bytes).sum(),
        write_bytes: a.hogs.iter().map(|h| h.write_bytes).sum(),
        read_chars: a.hogs.iter().map(|h| h.read_chars).sum(),
        write_chars: a.hogs.iter().map(|h| h.write_chars).sum(),
        ok: problems.is_empty(),
        problems,
        leftover: a.leftover,
        log_dir: a.log_dir,
        hogs: a.hogs,
    }
}
