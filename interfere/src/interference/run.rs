//! The hogs' life: start (every process named and placed), the measured window's marks,
//! and stop (each stopped, its usage read, none left running).

use super::*;

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
    pub(super) fn emergency_cleanup(&self) -> impl Fn() + Send + Sync + 'static {
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

    pub(super) fn spawn_direct(
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

    pub(super) fn spawn_hog(&mut self, hog: &mut Hog) -> Result<(), InterfereError> {
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

    pub(super) fn not_started(hog: &Hog, why: String) -> InterfereError {
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
    pub(super) fn settle_stress(&self, hog: &mut Hog) -> Result<(), InterfereError> {
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

    pub(super) fn spawn_net(
        &mut self,
        hog: &mut Hog,
        program: &Path,
    ) -> Result<(), InterfereError> {
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

    pub(super) fn snapshot(&self) -> (UsageSnapshot, Option<u64>) {
        let pids = self.pids();
        (
            UsageSnapshot::take(&pids),
            self.cgroup.as_ref().and_then(|c| c.cpu_usage_us()),
        )
    }

    pub(super) fn take_start_mark(&self) {
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
    pub(super) fn terminate(&mut self, hogs: &mut [Hog]) -> Vec<i32> {
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

    pub(super) fn kill_all(&mut self, groups: &[i32], hogs: &mut [Hog]) {
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
