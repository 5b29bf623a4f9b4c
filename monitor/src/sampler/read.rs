//! Reading `/proc`: the host, the harness (`getrusage`, `statm`), its threads' schedstat,
//! status and stat, the extra processes, and the scan of every process that names the
//! foreign consumers and finds the experiment's process tree.

use super::*;

pub(super) fn read_host(st: &mut State) -> Result<HostStat, MonitorError> {
    st.files
        .read("/proc/stat".as_ref(), &mut st.buf)
        .map_err(|e| MonitorError::io("/proc/stat", e))?;
    Ok(procfs::parse_stat(&st.buf)?)
}

/// Bytes `path` (`/proc/[pid]/io`) says the process made the block layer read or
/// write: what the kernel's storage workers did on its behalf. 0 when unreadable.
pub(super) fn storage_bytes(st: &mut State, path: &str) -> u64 {
    st.files
        .read(path.as_ref(), &mut st.buf)
        .ok()
        .and_then(|_| procfs::parse_pid_io(&st.buf).ok())
        .map_or(0, |io| io.read_bytes + io.write_bytes)
}

pub(super) fn read_self(st: &mut State) -> SelfReading {
    // SAFETY: getrusage fills the struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    let rss_pages = st
        .files
        .read("/proc/self/statm".as_ref(), &mut st.buf)
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
pub(super) fn read_threads(st: &mut State, workers: &BTreeSet<i32>) -> HashMap<i32, ThreadReading> {
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
            if st.files.read(&base.join("stat"), &mut st.buf).is_err() {
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
        if st.files.read(&base.join("schedstat"), &mut st.buf).is_ok() {
            if let Ok(s) = procfs::parse_schedstat(&st.buf) {
                r.run_ns = s.run_ns;
                r.wait_ns = s.wait_ns;
            }
        }
        let worker = workers.contains(&tid) || st.auto_workers.contains(&tid);
        if worker {
            if st.files.read(&base.join("status"), &mut st.buf).is_ok() {
                let s = procfs::parse_pid_status(&st.buf);
                r.vol = s.voluntary_ctxt_switches.unwrap_or(0);
                r.invol = s.nonvoluntary_ctxt_switches.unwrap_or(0);
                r.detail = true;
            }
            if st.files.read(&base.join("stat"), &mut st.buf).is_ok() {
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

pub(super) fn read_proc(st: &mut State, pid: i32) -> Option<ProcReading> {
    st.files
        .read(format!("/proc/{pid}/stat").as_ref(), &mut st.buf)
        .ok()?;
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
            if st.files.read(&p, &mut st.buf).is_ok() {
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
pub(super) fn scan_processes(st: &mut State, ours: &[i32]) {
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
pub(super) fn assign_roots(
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
pub(super) fn charge_scan(
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

pub(super) fn pct(part: u64, total: u64, ncpu: usize) -> f64 {
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

pub(super) fn host_sample(old: &HostStat, new: &HostStat, dt_s: f64) -> HostSample {
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
