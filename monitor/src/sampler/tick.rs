//! The sampling loop: the baseline, waiting for the deadline or a phase mark, and one sample
//! of the host, the harness, its threads and the extra processes as deltas over the interval.

use super::*;

/// The first reading of everything, which the first sample's deltas start from.
pub(super) fn take_baseline(st: &mut State, shared: &Shared) -> Result<(), MonitorError> {
    st.host = read_host(st)?;
    st.self_r = read_self(st);
    let (extra, workers) = {
        let c = shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        (c.extra_pids.clone(), c.worker_tids.clone())
    };
    st.threads = read_threads(st, &workers);
    for &pid in &extra {
        if let Some(r) = read_proc(st, pid) {
            st.procs.insert(pid, r);
        }
    }
    scan_processes(st, &extra);
    Ok(())
}

/// What the sampler thread is woken for: the deadline, phase marks (with their times) or
/// stop, and the processes and workers to read now.
pub(super) struct Tick {
    pub(super) stop: bool,
    pub(super) transitions: Vec<(Phase, u64)>,
    pub(super) extra: Vec<i32>,
    pub(super) workers: BTreeSet<i32>,
}

/// Waits for the deadline, a phase mark or stop.
pub(super) fn wait_tick(shared: &Shared, next_deadline: u64) -> Tick {
    let mut c = shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if c.stop || !c.transitions.is_empty() {
            break;
        }
        let now = procfs::mono_ns();
        if now >= next_deadline {
            break;
        }
        let (g, _) = shared
            .cv
            .wait_timeout(c, Duration::from_nanos(next_deadline - now))
            .unwrap_or_else(|e| e.into_inner());
        c = g;
    }
    // Take every pending mark: the interval is split at each of them.
    Tick {
        stop: c.stop,
        transitions: c.transitions.drain(..).collect(),
        extra: c.extra_pids.clone(),
        workers: c.worker_tids.clone(),
    }
}

/// The time-weighted foreign CPU of the samples of the last second, once they cover one.
pub(super) fn publish_foreign_1s(samples: &[Sample], out: &AtomicU64) {
    let (mut dt, mut cpu) = (0.0, 0.0);
    for x in samples.iter().rev() {
        dt += x.dt_s;
        cpu += x.foreign_cpu_pct * x.dt_s;
        if dt >= 1.0 {
            out.store((cpu / dt).to_bits(), Ordering::Relaxed);
            return;
        }
    }
}

/// Samples every period (and at every mark) until stopped: the samples, the sampler's own
/// cost, and when it stopped (monotonic ns).
pub(super) fn sample_until_stopped(
    st: &mut State,
    shared: &Shared,
    start_mono: u64,
) -> Result<(Vec<Sample>, SamplerCost, u64), MonitorError> {
    let period_ns = st.cfg.period.as_nanos() as u64;
    let scan_ns = st.cfg.scan_period.as_nanos() as u64;
    let mut samples: Vec<Sample> = Vec::new();
    let mut next_deadline = st.last_mono + period_ns;
    let mut cost = SamplerCost::default();
    let (mut cpu_plain_ns, mut cpu_scan_ns, mut n_plain) = (0u64, 0u64, 0u64);
    let cpu_at_start = procfs::thread_cpu_ns();
    loop {
        let tick = wait_tick(shared, next_deadline);
        let now_before = procfs::mono_ns();
        if tick.transitions.is_empty() && !tick.stop && now_before > next_deadline + period_ns {
            cost.late_samples += 1;
        }
        let cpu0 = procfs::thread_cpu_ns();
        let sample = take_sample(st, &tick)?;
        let now = sample.t_mono_ns;
        // Phases are assigned after the run, by time (see `rephase`); here
        // only note how late this thread picked up a mark.
        for &(_, t) in &tick.transitions {
            cost.max_mark_delay_ms = cost
                .max_mark_delay_ms
                .max(now.saturating_sub(t) as f64 / 1e6);
        }
        samples.push(sample);
        publish_foreign_1s(&samples, &shared.foreign_1s);
        cost.samples += 1;
        let cpu1 = procfs::thread_cpu_ns();
        // Rescan processes at boundaries and every scan period.
        let scanned =
            !tick.transitions.is_empty() || tick.stop || now >= st.last_scan_mono_ns + scan_ns;
        if scanned {
            scan_processes(st, &tick.extra);
            cost.scans += 1;
            cpu_scan_ns += procfs::thread_cpu_ns() - cpu1;
        } else {
            n_plain += 1;
            cpu_plain_ns += cpu1 - cpu0;
        }
        if tick.stop {
            break;
        }
        while next_deadline <= now {
            next_deadline += period_ns;
        }
    }
    let stop_mono = procfs::mono_ns();
    let cpu_total = procfs::thread_cpu_ns() - cpu_at_start;
    let per = |ns: u64, n: u64| {
        if n > 0 {
            ns as f64 / n as f64 / 1e3
        } else {
            0.0
        }
    };
    cost.cpu_ms = cpu_total as f64 / 1e6;
    cost.us_per_sample = per(cpu_plain_ns, n_plain);
    cost.us_per_scan = per(cpu_scan_ns, cost.scans);
    let run_s = (stop_mono - start_mono) as f64 / 1e9;
    cost.cpu_pct = if run_s > 0.0 {
        100.0 * cpu_total as f64 / 1e9 / run_s
    } else {
        0.0
    };
    Ok((samples, cost, stop_mono))
}

/// One sample over `[last_mono, now]`; the readings it ends with become the next one's base.
pub(super) fn take_sample(st: &mut State, tick: &Tick) -> Result<Sample, MonitorError> {
    let host = read_host(st)?;
    let self_r = read_self(st);
    let threads = read_threads(st, &tick.workers);
    let mut extra_now = HashMap::new();
    for &pid in &tick.extra {
        if let Some(r) = read_proc(st, pid) {
            extra_now.insert(pid, r);
        }
    }
    let now = procfs::mono_ns();
    let dt_s = (now - st.last_mono) as f64 / 1e9;
    let mut hs = host_sample(&st.host, &host, dt_s);
    if st.files.read("/proc/loadavg".as_ref(), &mut st.buf).is_ok() {
        if let Ok(l) = procfs::parse_loadavg(&st.buf) {
            hs.load1 = l.load1;
        }
    }
    let harness = ProcSample {
        pid: st.self_pid,
        cpu_pct: 100.0 * counter_delta(st.self_r.cpu_ns, self_r.cpu_ns) as f64 / 1e9 / dt_s,
        rss_bytes: self_r.rss_bytes,
        minflt: counter_delta(st.self_r.minflt, self_r.minflt),
        majflt: counter_delta(st.self_r.majflt, self_r.majflt),
        vol_cs: counter_delta(st.self_r.nvcsw, self_r.nvcsw),
        invol_cs: counter_delta(st.self_r.nivcsw, self_r.nivcsw),
        alive: true,
        children_cpu_pct: 0.0,
        storage_bytes: counter_delta(st.self_r.storage_bytes, self_r.storage_bytes),
    };
    let extra: Vec<ProcSample> = tick
        .extra
        .iter()
        .map(|&pid| {
            proc_sample(
                pid,
                st.procs.get(&pid),
                extra_now.get(&pid),
                st.ticks_per_s,
                dt_s,
            )
        })
        .collect();
    let ours_pct = harness.cpu_pct + extra.iter().map(|s| s.cpu_pct).sum::<f64>();
    let foreign = (hs.user_pct + hs.nice_pct + hs.system_pct - ours_pct).max(0.0);
    let thread_samples = thread_samples(&st.threads, &threads, st.sampler_tid, dt_s);
    st.host = host;
    st.self_r = self_r;
    st.threads = threads;
    st.procs = extra_now;
    st.last_mono = now;
    // Files of threads and processes that went away are closed; the rest stay open.
    st.files.sweep();
    Ok(Sample {
        t_mono_ns: now,
        t_wall_ns: procfs::wall_ns(),
        dt_s,
        phase: None,
        host: hs,
        foreign_cpu_pct: foreign,
        harness,
        extra,
        threads: thread_samples,
    })
}

/// An extra process over one sample, from its readings before and after (`None`: it did
/// not exist then).
pub(super) fn proc_sample(
    pid: i32,
    old: Option<&ProcReading>,
    new: Option<&ProcReading>,
    ticks_per_s: f64,
    dt_s: f64,
) -> ProcSample {
    match (old, new) {
        (Some(o), Some(n)) => ProcSample {
            pid,
            cpu_pct: 100.0 * counter_delta(o.ticks, n.ticks) as f64 / ticks_per_s / dt_s,
            rss_bytes: n.rss_bytes,
            minflt: counter_delta(o.minflt, n.minflt),
            majflt: counter_delta(o.majflt, n.majflt),
            vol_cs: counter_delta(o.vol, n.vol),
            invol_cs: counter_delta(o.invol, n.invol),
            alive: true,
            children_cpu_pct: 0.0,
            storage_bytes: counter_delta(o.storage_bytes, n.storage_bytes),
        },
        // Added since the last sample: no baseline yet.
        (None, Some(n)) => ProcSample {
            pid,
            rss_bytes: n.rss_bytes,
            alive: true,
            ..Default::default()
        },
        _ => ProcSample {
            pid,
            alive: false,
            ..Default::default()
        },
    }
}

/// The threads over one sample (the sampler's own left out), from their readings before
/// and after; idle non-worker threads are left out of the series (a long run would
/// otherwise store thousands of rows of zeros).
pub(super) fn thread_samples(
    before: &HashMap<i32, ThreadReading>,
    after: &HashMap<i32, ThreadReading>,
    sampler_tid: i32,
    dt_s: f64,
) -> Vec<ThreadSample> {
    let mut out = Vec::new();
    for (tid, n) in after {
        if *tid == sampler_tid {
            continue;
        }
        let Some(o) = before.get(tid) else {
            continue;
        };
        // Counts only when both readings had them (a thread that just
        // became a worker has no baseline yet).
        let d = |f: fn(&ThreadReading) -> u64| {
            if o.detail && n.detail {
                counter_delta(f(o), f(n))
            } else {
                0
            }
        };
        let cpu_pct = 100.0 * counter_delta(o.run_ns, n.run_ns) as f64 / 1e9 / dt_s;
        let runq_wait_pct = 100.0 * counter_delta(o.wait_ns, n.wait_ns) as f64 / 1e9 / dt_s;
        if !n.detail && cpu_pct < 0.1 && runq_wait_pct < 0.1 {
            continue;
        }
        out.push(ThreadSample {
            tid: *tid,
            cpu_pct,
            runq_wait_pct,
            vol_cs: d(|r| r.vol),
            invol_cs: d(|r| r.invol),
            minflt: d(|r| r.minflt),
            majflt: d(|r| r.majflt),
            cpu: if n.detail { n.cpu } else { None },
        });
    }
    out.sort_by_key(|t| t.tid);
    out
}
