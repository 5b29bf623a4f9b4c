//! The report at stop: samples split at the measured window's edges, each scan's charges
//! shared by how much of its interval fell in each phase, the foreign consumers named and the
//! experiment's helper processes credited to the process they descend from.

use super::*;

/// The report of a stopped sampler: its threads, the samples put in their phases, the
/// foreign processes and the summary of the measured phase. `times` are the monotonic start,
/// the wall-clock start and the monotonic stop.
pub(super) fn report(
    st: State,
    shared: &Shared,
    mut samples: Vec<Sample>,
    cost: SamplerCost,
    times: (u64, u64, u64),
) -> MonitorReport {
    let (start_mono, start_wall, stop_mono) = times;
    let (mut workers, ms, me, window) = {
        let c = shared.ctl.lock().unwrap_or_else(|e| e.into_inner());
        (
            c.worker_tids.clone(),
            c.measured_start_ns,
            c.measured_end_ns,
            c.window,
        )
    };
    workers.extend(st.auto_workers.iter().copied());
    let threads: Vec<ThreadInfo> = st
        .thread_names
        .iter()
        .filter(|(tid, _)| **tid != st.sampler_tid)
        .map(|(tid, name)| ThreadInfo {
            tid: *tid,
            name: name.clone(),
            worker: workers.contains(tid),
        })
        .collect();
    // The measured window: given to stop_measured, else from the marks.
    let window = window.or(ms.map(|s| (s, me.unwrap_or(stop_mono))));
    credit_descendants(&mut samples, &st.scans, st.ticks_per_s, st.self_pid);
    let samples = match window {
        Some((ws, we)) => rephase(samples, ws, we),
        // Unmarked runs are one long warmup phase.
        None => samples
            .into_iter()
            .map(|x| Sample {
                phase: Some(Phase::Warmup),
                ..x
            })
            .collect(),
    };
    let mut phase_secs: BTreeMap<Phase, f64> = BTreeMap::new();
    for x in &samples {
        *phase_secs
            .entry(x.phase.unwrap_or(Phase::Warmup))
            .or_default() += x.dt_s;
    }
    let foreign = foreign_by_phase(&st.scans, window, &phase_secs, st.ticks_per_s);
    let (summary_phase, foreign_key) = if window.is_some() {
        (Some(Phase::Measured), Phase::Measured)
    } else {
        (None, Phase::Warmup)
    };
    let no_foreign = Vec::new();
    let mut children = children_by_phase(&st.scans, window, &phase_secs, st.ticks_per_s);
    let mut summary = crate::summary::summarize(
        &samples,
        summary_phase,
        &threads,
        foreign.get(&foreign_key).unwrap_or(&no_foreign),
        st.cfg.top_n,
        &cost,
    );
    summary.attach_children(
        children.remove(&foreign_key).unwrap_or_default(),
        st.cfg.top_n,
    );
    name_top_foreign(&mut summary);
    MonitorReport {
        period_ms: st.cfg.period.as_secs_f64() * 1e3,
        scan_period_ms: st.cfg.scan_period.as_secs_f64() * 1e3,
        ncpu: st.host.per_cpu.len(),
        start_mono_ns: start_mono,
        start_wall_ns: start_wall,
        stop_mono_ns: stop_mono,
        measured_start_mono_ns: window.map(|w| w.0),
        measured_end_mono_ns: window.map(|w| w.1),
        threads,
        foreign,
        cost,
        samples: if st.cfg.keep_series {
            samples
        } else {
            Vec::new()
        },
        summary,
    }
}

/// Names the top consumers' command lines while they may still run.
pub(super) fn name_top_foreign(summary: &mut crate::summary::EnvSummary) {
    for f in &mut summary.top_foreign {
        if let Some(pid) = f.pids.first() {
            if let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) {
                let s: String = String::from_utf8_lossy(&raw)
                    .replace('\0', " ")
                    .trim()
                    .chars()
                    .take(200)
                    .collect();
                if !s.is_empty() {
                    f.cmdline = Some(s);
                }
            }
        }
    }
}

pub(super) fn phase_at(t: u64, ws: u64, we: u64) -> Phase {
    if t < ws {
        Phase::Warmup
    } else if t < we {
        Phase::Measured
    } else {
        Phase::After
    }
}

/// Assigns each sample its phase by time, splitting the samples that
/// straddle the window's start or end at that instant: per-phase durations
/// are then exact however late the sampler woke, and only the rates of the
/// two straddling samples are shared between phases.
pub(super) fn rephase(samples: Vec<Sample>, ws: u64, we: u64) -> Vec<Sample> {
    let mut out = Vec::with_capacity(samples.len() + 2);
    for x in samples {
        let end = x.t_mono_ns;
        let start = end.saturating_sub((x.dt_s * 1e9).round() as u64);
        let mut cuts: Vec<(u64, Phase)> = Vec::new();
        for b in [ws, we] {
            if b > start && b < end && !matches!(cuts.last(), Some(c) if c.0 >= b) {
                cuts.push((b, phase_at(b.saturating_sub(1), ws, we)));
            }
        }
        cuts.push((end, phase_at(end.saturating_sub(1), ws, we)));
        out.extend(split_sample(x, start, &cuts));
    }
    out
}

/// Ticks charged by the scans per phase and key, as (key, % of one CPU,
/// pids heaviest first), heaviest key first: each scan's charges are shared
/// among the phases by how much of the scan's interval each phase covers.
pub(super) fn charges_by_phase<K: Ord + Clone + std::hash::Hash>(
    scans: &[ScanRecord],
    window: Option<(u64, u64)>,
    phase_secs: &BTreeMap<Phase, f64>,
    ticks_per_s: f64,
    items: impl Fn(&ScanRecord) -> Vec<(K, i32, u64)>,
) -> BTreeMap<Phase, Vec<(K, f64, Vec<i32>)>> {
    let mut acc: BTreeMap<Phase, HashMap<K, ForeignAcc>> = BTreeMap::new();
    for r in scans {
        let len = r.to.saturating_sub(r.from).max(1) as f64;
        let shares: Vec<(Phase, f64)> = match window {
            None => vec![(Phase::Warmup, 1.0)],
            Some((ws, we)) => {
                let overlap =
                    |a: u64, b: u64| r.to.min(b).saturating_sub(r.from.max(a)) as f64 / len;
                vec![
                    (Phase::Warmup, overlap(0, ws)),
                    (Phase::Measured, overlap(ws, we)),
                    (Phase::After, overlap(we, u64::MAX)),
                ]
            }
        };
        let charged = items(r);
        for (phase, w) in shares.into_iter().filter(|s| s.1 > 0.0) {
            let a = acc.entry(phase).or_default();
            for (key, pid, ticks) in &charged {
                let e = a.entry(key.clone()).or_default();
                e.ticks += *ticks as f64 * w;
                *e.pids.entry(*pid).or_default() += *ticks as f64 * w;
            }
        }
    }
    let mut out = BTreeMap::new();
    for (phase, a) in acc {
        let secs = phase_secs.get(&phase).copied().unwrap_or(0.0);
        let mut v: Vec<(K, f64, Vec<i32>)> = a
            .into_iter()
            .map(|(key, a)| {
                let mut pids: Vec<(i32, f64)> = a.pids.into_iter().collect();
                pids.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
                let pct = if secs > 0.0 {
                    100.0 * a.ticks / ticks_per_s / secs
                } else {
                    0.0
                };
                (key, pct, pids.into_iter().take(8).map(|(p, _)| p).collect())
            })
            .filter(|f| f.1 > 0.0)
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out.insert(phase, v);
    }
    out
}

/// Foreign CPU per phase and name (see [`charges_by_phase`]).
pub(super) fn foreign_by_phase(
    scans: &[ScanRecord],
    window: Option<(u64, u64)>,
    phase_secs: &BTreeMap<Phase, f64>,
    ticks_per_s: f64,
) -> BTreeMap<Phase, Vec<ForeignProcess>> {
    charges_by_phase(scans, window, phase_secs, ticks_per_s, |r| {
        r.charges.clone()
    })
    .into_iter()
    .map(|(phase, v)| {
        let v = v
            .into_iter()
            .map(|(name, cpu_pct, pids)| ForeignProcess {
                name,
                cpu_pct,
                pids,
                cmdline: None,
            })
            .collect();
        (phase, v)
    })
    .collect()
}

/// The experiment's descendant processes per phase, by the process they
/// descend from (root pid) and name.
pub(super) fn children_by_phase(
    scans: &[ScanRecord],
    window: Option<(u64, u64)>,
    phase_secs: &BTreeMap<Phase, f64>,
    ticks_per_s: f64,
) -> BTreeMap<Phase, BTreeMap<i32, Vec<ChildProcess>>> {
    let items = |r: &ScanRecord| {
        r.ours
            .iter()
            .map(|c| ((c.root, c.name.clone()), c.pid, c.ticks))
            .collect()
    };
    charges_by_phase(scans, window, phase_secs, ticks_per_s, items)
        .into_iter()
        .map(|(phase, v)| {
            let mut by_root: BTreeMap<i32, Vec<ChildProcess>> = BTreeMap::new();
            for ((root, name), cpu_pct, pids) in v {
                by_root.entry(root).or_default().push(ChildProcess {
                    name,
                    cpu_pct,
                    pids,
                });
            }
            (phase, by_root)
        })
        .collect()
}

/// Moves the CPU of the experiment's descendant processes from foreign to
/// the process each descends from, sample by sample. The scans know it per
/// scan interval (about 1 s); each scan's ticks are spread over the samples
/// it covers by overlap. Scans are taken right after a sample, so their
/// edges fall on samples' edges and the spreading only evens out rates
/// within one scan interval.
pub(super) fn credit_descendants(
    samples: &mut [Sample],
    scans: &[ScanRecord],
    ticks_per_s: f64,
    self_pid: i32,
) {
    for r in scans.iter().filter(|r| !r.ours.is_empty()) {
        let len = r.to.saturating_sub(r.from).max(1) as f64;
        let mut by_root: BTreeMap<i32, u64> = BTreeMap::new();
        for c in &r.ours {
            *by_root.entry(c.root).or_default() += c.ticks;
        }
        let first = samples.partition_point(|x| x.t_mono_ns <= r.from);
        for x in samples[first..].iter_mut() {
            let end = x.t_mono_ns;
            let start = end.saturating_sub((x.dt_s * 1e9).round() as u64);
            if start >= r.to {
                break;
            }
            let overlap = r.to.min(end).saturating_sub(r.from.max(start)) as f64;
            if overlap <= 0.0 || x.dt_s <= 0.0 {
                continue;
            }
            for (&root, &ticks) in &by_root {
                let pct = 100.0 * ticks as f64 * (overlap / len) / ticks_per_s / x.dt_s;
                let owner = if root == self_pid {
                    None
                } else {
                    x.extra.iter_mut().find(|p| p.pid == root)
                };
                match owner {
                    Some(p) => p.children_cpu_pct += pct,
                    // A root not sampled (yet): the harness started it.
                    None => x.harness.children_cpu_pct += pct,
                }
                x.foreign_cpu_pct = (x.foreign_cpu_pct - pct).max(0.0);
            }
        }
    }
}

/// Splits a sample over `[start, cuts.last]` into one piece per cut
/// `(end, phase)`, dropping empty pieces. Rates are kept; counts are shared
/// by duration (rounded, the last piece takes the remainder).
pub(super) fn split_sample(sample: Sample, start: u64, cuts: &[(u64, Phase)]) -> Vec<Sample> {
    let total_ns = cuts
        .last()
        .map(|c| c.0)
        .unwrap_or(start)
        .saturating_sub(start);
    if cuts.len() == 1 || total_ns == 0 {
        let mut s = sample;
        s.phase = cuts.last().map(|c| c.1);
        return vec![s];
    }
    let end_wall = sample.t_wall_ns;
    let end_mono = sample.t_mono_ns;
    let mut out = Vec::new();
    let mut left = sample.clone();
    let mut from = start;
    for (i, &(to, phase)) in cuts.iter().enumerate() {
        if to <= from && i + 1 < cuts.len() {
            continue;
        }
        let f = (to - from) as f64 / total_ns as f64;
        let last = i + 1 == cuts.len();
        let share = |n: u64, rest: &mut u64| {
            let v = if last {
                *rest
            } else {
                ((n as f64 * f).round() as u64).min(*rest)
            };
            *rest -= v;
            v
        };
        let mut piece = sample.clone();
        piece.phase = Some(phase);
        piece.t_mono_ns = to;
        piece.t_wall_ns = end_wall.saturating_sub(end_mono - to);
        piece.dt_s = (to - from) as f64 / 1e9;
        let (h, hl) = (&sample.harness, &mut left.harness);
        piece.harness.minflt = share(h.minflt, &mut hl.minflt);
        piece.harness.majflt = share(h.majflt, &mut hl.majflt);
        piece.harness.vol_cs = share(h.vol_cs, &mut hl.vol_cs);
        piece.harness.invol_cs = share(h.invol_cs, &mut hl.invol_cs);
        piece.harness.storage_bytes = share(h.storage_bytes, &mut hl.storage_bytes);
        for (k, e) in piece.extra.iter_mut().enumerate() {
            let (o, l) = (&sample.extra[k], &mut left.extra[k]);
            e.minflt = share(o.minflt, &mut l.minflt);
            e.majflt = share(o.majflt, &mut l.majflt);
            e.vol_cs = share(o.vol_cs, &mut l.vol_cs);
            e.invol_cs = share(o.invol_cs, &mut l.invol_cs);
            e.storage_bytes = share(o.storage_bytes, &mut l.storage_bytes);
        }
        for (k, t) in piece.threads.iter_mut().enumerate() {
            let (o, l) = (&sample.threads[k], &mut left.threads[k]);
            t.minflt = share(o.minflt, &mut l.minflt);
            t.majflt = share(o.majflt, &mut l.majflt);
            t.vol_cs = share(o.vol_cs, &mut l.vol_cs);
            t.invol_cs = share(o.invol_cs, &mut l.invol_cs);
        }
        if piece.dt_s > 0.0 {
            out.push(piece);
        }
        from = to;
    }
    out
}
