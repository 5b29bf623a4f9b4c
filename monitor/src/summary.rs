//! The environment of one run, summarised over its measured phase, and the
//! check that says whether the run was disturbed.
//!
//! # Why these checks, and why these limits
//! A latency sample is only about the server if the server's CPUs were ours.
//! Three things take them away, and each has a direct measurement:
//! - **steal**: the hypervisor runs another guest on our vCPU. On the 2-vCPU
//!   VMs we develop on, steal swings from 0 % to 78 % of a CPU within
//!   minutes, and 0.7 % steal moved an M/D/1 run's p99 by +7 % (docs/hosts.md),
//!   several times the ±1–2 % sampling noise of p99 at 150 k requests.
//!   Default limit: **1 % of a CPU** averaged over the measured phase. The
//!   same evidence would justify an even lower limit, but steal of a few
//!   tenths of a percent is nearly always present on shared VMs and a check
//!   that fails every run is ignored.
//! - **foreign CPU use**: user+system time of processes that are not part of
//!   the experiment. When a foreign thread holds a worker's CPU, requests
//!   arriving meanwhile wait for it; with foreign use `u` (in CPUs) spread
//!   over `n` CPUs, about `u/n` of the requests can be hit, so to keep p99
//!   clean `u/n` must stay well below 1 %. Default limit: **5 % of a CPU**
//!   (2.5 % of requests at risk on 2 CPUs, so p99 is suspect and p95 is
//!   not); an idle Debian VM's daemons and kernel threads use well under 1 %.
//!   Lower it for p99.9 studies.
//! - **involuntary context switches of worker threads**: the scheduler took
//!   a runnable worker off its CPU for someone else. A worker alone on its
//!   CPU has nearly none (it blocks voluntarily or spins), so a rate above a
//!   few per second means sharing. Default limit: **20 per second** per
//!   worker over the measured phase (a CPU hog sharing the core causes
//!   hundreds per second), and **run-queue wait above 1 %** of the phase
//!   (time a worker was runnable but not running) — the direct measure of
//!   what the involuntary switches cost.
//!
//!   Both worker limits assume the worker has its CPU to itself. An app that
//!   does its work in helper processes (translate's eleven Apertium stages,
//!   which a worker feeds through pipes) shares the worker's CPU with them by
//!   design: every stage that wakes on that CPU preempts the worker (about
//!   90 per second on the 2-vCPU VMs, with foreign CPU near 1 %). That is the
//!   app, not the environment, so when the experiment's own descendant
//!   processes used at least [`OWN_HELPERS_MIN_PCT`] of a CPU and at least
//!   [`OWN_HELPERS_OVER_FOREIGN`] times what foreign processes used, and steal
//!   and foreign CPU passed, the worker items pass with a note naming the
//!   helpers ([`EnvCheck::notes`]). A foreign process heavy enough to matter
//!   still fails the run through the foreign-CPU limit.
//!
//!   The kernel's storage workers (`kworker/…-kblockd`, the journal's `jbd2`,
//!   see [`is_storage_worker`]) move blocks for whoever reads or writes them. An
//!   app that commits to disk keeps them busy: oltp-disk's fsyncs put kblockd at
//!   2–5 % of a CPU, and with the host's own housekeeping that failed about half
//!   of its runs on the foreign limit. When the experiment's processes read or
//!   wrote storage during the measured phase (`/proc/[pid]/io`), the storage
//!   workers' CPU is counted as theirs, with a note; without such I/O of their
//!   own it stays foreign.
//!
//! Every figure that a limit is applied to is a mean over the whole measured
//! phase; the 1-second maxima are reported next to them so a short burst is
//! visible without failing a long run on its own.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::sample::{ForeignProcess, Phase, Sample, SamplerCost, ThreadInfo};
pub use taillab_core::sections::environment::{
    EnvSummary, ProcTotals, SamplerCostSummary, ThreadTotals,
};

/// Limits for [`EnvCheck::of`]; see the module docs for the defaults.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Thresholds {
    /// Mean steal over the measured phase, % of one CPU.
    pub max_steal_pct: f64,
    /// Mean foreign CPU use over the measured phase, % of one CPU.
    pub max_foreign_pct: f64,
    /// Involuntary context switches per second of any worker thread.
    pub max_worker_invol_per_s: f64,
    /// Run-queue wait of any worker thread, % of the phase.
    pub max_worker_runq_wait_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        use taillab_core::config::fields::monitor_defaults as d;
        Thresholds {
            max_steal_pct: d::MAX_STEAL_PCT,
            max_foreign_pct: d::MAX_FOREIGN_PCT,
            max_worker_invol_per_s: d::MAX_WORKER_PREEMPTIONS_PER_S,
            max_worker_runq_wait_pct: d::MAX_WORKER_RUNQ_WAIT_PCT,
        }
    }
}

/// The experiment's descendant processes must use at least this much CPU (% of one CPU) for
/// a worker's preemptions to be put down to them (see the module docs).
pub const OWN_HELPERS_MIN_PCT: f64 = 10.0;
/// ... and at least this many times the foreign processes' CPU.
pub const OWN_HELPERS_OVER_FOREIGN: f64 = 4.0;

/// Kernel threads that move blocks to and from storage for whoever asked: the journal
/// (`jbd2/...`) and kworkers running one of these workqueues (`kworker/1:1H-kblockd`: a
/// kworker's name ends in the workqueue it runs at the moment).
pub const STORAGE_WORKQUEUES: &[&str] = &[
    "kblockd",
    "writeback",
    "flush-",
    "ext4-",
    "xfs-",
    "btrfs-",
    "nvme-",
    "dio/",
];

/// Whether a foreign process named `name` is a kernel storage worker (see
/// [`STORAGE_WORKQUEUES`]).
pub fn is_storage_worker(name: &str) -> bool {
    name.starts_with("jbd2/")
        || name.strip_prefix("kworker/").is_some_and(|k| {
            k.split_once('-')
                .is_some_and(|(_, wq)| STORAGE_WORKQUEUES.iter().any(|w| wq.starts_with(w)))
        })
}

/// One line of the verdict.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckItem {
    /// `steal`, `foreign_cpu`, `worker_invol_cs` or `worker_runq_wait`.
    pub name: String,
    /// The measured figure (for worker items, the worst worker's).
    pub value: f64,
    /// The limit from [`Thresholds`].
    pub limit: f64,
    /// Unit of `value` and `limit` (`% of a CPU`, `per second`, `% of the phase`).
    pub unit: String,
    /// `value <= limit`.
    pub ok: bool,
}

/// `checks.environment` in `summary.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EnvCheck {
    /// True when every item passed and the phase was sampled: the run was not disturbed.
    pub ok: bool,
    /// Why the run is marked disturbed, one sentence each (empty when ok).
    pub reasons: Vec<String>,
    /// Each figure against its limit.
    pub items: Vec<CheckItem>,
    /// The limits applied.
    pub thresholds: Thresholds,
    /// What passed only because it was put down to the app itself (its helper processes
    /// preempting a worker), one sentence each.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Index ranges of consecutive samples adding up to at least `min_s`
/// seconds; a final short remainder is kept if it is at least half as long
/// (or if it is all there is).
fn windows(samples: &[&Sample], min_s: f64) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let (mut start, mut acc) = (0, 0.0);
    for (i, s) in samples.iter().enumerate() {
        acc += s.dt_s;
        if acc >= min_s {
            out.push(start..i + 1);
            start = i + 1;
            acc = 0.0;
        }
    }
    if start < samples.len() && (acc >= min_s / 2.0 || out.is_empty()) {
        out.push(start..samples.len());
    }
    out
}

fn wmean(samples: &[&Sample], f: impl Fn(&Sample) -> f64) -> f64 {
    let t: f64 = samples.iter().map(|s| s.dt_s).sum();
    if t <= 0.0 {
        return 0.0;
    }
    samples.iter().map(|s| f(s) * s.dt_s).sum::<f64>() / t
}

fn max_window(samples: &[&Sample], f: impl Fn(&Sample) -> f64 + Copy) -> f64 {
    windows(samples, 1.0)
        .into_iter()
        .map(|r| wmean(&samples[r], f))
        .fold(0.0, f64::max)
}

/// Builds the summary from the samples of `phase` (all samples when
/// `None`) and the foreign processes charged to that phase.
pub fn summarize(
    all: &[Sample],
    phase: Option<Phase>,
    threads: &[ThreadInfo],
    foreign: &[ForeignProcess],
    top_n: usize,
    cost: &SamplerCost,
) -> EnvSummary {
    let s: Vec<&Sample> = all
        .iter()
        .filter(|x| phase.is_none() || x.phase == phase)
        .collect();
    let measured_s: f64 = s.iter().map(|x| x.dt_s).sum();
    let ncpu = s
        .iter()
        .map(|x| x.host.per_cpu_steal_pct.len())
        .max()
        .unwrap_or(0);
    let steal_per_cpu: Vec<f64> = (0..ncpu)
        .map(|c| {
            wmean(&s, |x| {
                x.host.per_cpu_steal_pct.get(c).copied().unwrap_or(0.0)
            })
        })
        .collect();
    let harness = harness_totals(&s);
    let extra = extra_totals(&s, measured_s);
    let (mut workers, mut other_threads) = (Vec::new(), Vec::new());
    for t in threads {
        match thread_totals(&s, t, measured_s) {
            Some(tt) if t.worker => workers.push(tt),
            Some(tt) => other_threads.push(tt),
            None => {}
        }
    }
    let foreign_cpu_pct = wmean(&s, |x| x.foreign_cpu_pct);
    let named: f64 = foreign.iter().map(|f| f.cpu_pct).sum();
    EnvSummary {
        phase_marked: phase.is_some(),
        measured_s,
        samples: s.len(),
        ncpu,
        steal_pct: wmean(&s, |x| x.host.steal_pct),
        steal_max_1s_pct: max_window(&s, |x| x.host.steal_pct),
        steal_per_cpu_pct: steal_per_cpu,
        host_busy_pct: wmean(&s, |x| x.host.busy_pct),
        host_user_pct: wmean(&s, |x| x.host.user_pct + x.host.nice_pct),
        host_system_pct: wmean(&s, |x| x.host.system_pct),
        host_iowait_pct: wmean(&s, |x| x.host.iowait_pct),
        host_irq_pct: wmean(&s, |x| x.host.irq_pct),
        host_softirq_pct: wmean(&s, |x| x.host.softirq_pct),
        ctxt_per_s: wmean(&s, |x| x.host.ctxt_per_s),
        ctxt_max_1s_per_s: max_window(&s, |x| x.host.ctxt_per_s),
        intr_per_s: wmean(&s, |x| x.host.intr_per_s),
        load1_max: s.iter().map(|x| x.host.load1).fold(0.0, f64::max),
        foreign_cpu_pct,
        foreign_cpu_max_1s_pct: max_window(&s, |x| x.foreign_cpu_pct),
        top_foreign: foreign.iter().take(top_n).cloned().collect(),
        foreign_unattributed_pct: (foreign_cpu_pct - named).max(0.0),
        harness,
        extra,
        workers,
        other_threads,
        sampler: SamplerCostSummary {
            us_per_sample: cost.us_per_sample,
            us_per_scan: cost.us_per_scan,
            cpu_pct: cost.cpu_pct,
            late_samples: cost.late_samples,
            max_mark_delay_ms: cost.max_mark_delay_ms,
        },
    }
}

/// The harness process over the samples `s`.
fn harness_totals(s: &[&Sample]) -> ProcTotals {
    let sum = |f: &dyn Fn(&Sample) -> u64| s.iter().map(|x| f(x)).sum::<u64>();
    ProcTotals {
        pid: s.first().map(|x| x.harness.pid).unwrap_or(0),
        cpu_pct: wmean(s, |x| x.harness.cpu_pct),
        cpu_max_1s_pct: max_window(s, |x| x.harness.cpu_pct),
        rss_max_bytes: s.iter().map(|x| x.harness.rss_bytes).max().unwrap_or(0),
        minflt: sum(&|x| x.harness.minflt),
        majflt: sum(&|x| x.harness.majflt),
        vol_cs: sum(&|x| x.harness.vol_cs),
        invol_cs: sum(&|x| x.harness.invol_cs),
        children_cpu_pct: wmean(s, |x| x.harness.children_cpu_pct),
        children: Vec::new(),
        storage_bytes: sum(&|x| x.harness.storage_bytes),
    }
}

/// The experiment's other processes over the samples `s` (`measured_s` long), by pid.
fn extra_totals(s: &[&Sample], measured_s: f64) -> Vec<ProcTotals> {
    let mut extra: BTreeMap<i32, ProcTotals> = BTreeMap::new();
    for x in s {
        for p in &x.extra {
            let e = extra.entry(p.pid).or_insert_with(|| ProcTotals {
                pid: p.pid,
                ..Default::default()
            });
            e.cpu_pct += p.cpu_pct * x.dt_s;
            e.children_cpu_pct += p.children_cpu_pct * x.dt_s;
            e.rss_max_bytes = e.rss_max_bytes.max(p.rss_bytes);
            e.minflt += p.minflt;
            e.majflt += p.majflt;
            e.vol_cs += p.vol_cs;
            e.invol_cs += p.invol_cs;
            e.storage_bytes += p.storage_bytes;
        }
    }
    for (pid, e) in extra.iter_mut() {
        if measured_s > 0.0 {
            e.cpu_pct /= measured_s;
            e.children_cpu_pct /= measured_s;
        }
        e.cpu_max_1s_pct = max_window(s, |x| {
            x.extra
                .iter()
                .find(|p| p.pid == *pid)
                .map(|p| p.cpu_pct)
                .unwrap_or(0.0)
        });
    }
    extra.into_values().collect()
}

/// Thread `t` over the samples `s` (`measured_s` long); `None` when no sample saw it.
fn thread_totals(s: &[&Sample], t: &ThreadInfo, measured_s: f64) -> Option<ThreadTotals> {
    let mut tt = ThreadTotals {
        tid: t.tid,
        name: t.name.clone(),
        worker: t.worker,
        ..Default::default()
    };
    let mut seen = false;
    for x in s {
        if let Some(ts) = x.threads.iter().find(|q| q.tid == t.tid) {
            seen = true;
            tt.cpu_pct += ts.cpu_pct * x.dt_s;
            tt.runq_wait_pct += ts.runq_wait_pct * x.dt_s;
            tt.vol_cs += ts.vol_cs;
            tt.invol_cs += ts.invol_cs;
            tt.minflt += ts.minflt;
            tt.majflt += ts.majflt;
            if let Some(c) = ts.cpu {
                if !tt.cpus.contains(&c) {
                    tt.cpus.push(c);
                }
            }
        }
    }
    if !seen {
        return None;
    }
    if measured_s > 0.0 {
        tt.cpu_pct /= measured_s;
        tt.runq_wait_pct /= measured_s;
        tt.invol_per_s = tt.invol_cs as f64 / measured_s;
    }
    // The worst one-second window of preemptions.
    tt.invol_max_1s_per_s = windows(s, 1.0)
        .into_iter()
        .map(|r| {
            let w = &s[r];
            let secs: f64 = w.iter().map(|x| x.dt_s).sum();
            let n: u64 = w
                .iter()
                .filter_map(|x| x.threads.iter().find(|q| q.tid == t.tid))
                .map(|q| q.invol_cs)
                .sum();
            if secs > 0.0 {
                n as f64 / secs
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max);
    tt.cpus.sort_unstable();
    Some(tt)
}

/// CPU of the kernel's storage workers among the foreign processes (see
/// [`is_storage_worker`]), % of one CPU, and their names.
fn storage_workers(s: &EnvSummary) -> (f64, String) {
    let w: Vec<&ForeignProcess> = s
        .top_foreign
        .iter()
        .filter(|f| is_storage_worker(&f.name))
        .collect();
    let names: Vec<String> = w
        .iter()
        .map(|f| format!("{} {:.1} %", f.name, f.cpu_pct))
        .collect();
    (w.iter().map(|f| f.cpu_pct).sum(), names.join(", "))
}

impl EnvCheck {
    /// Applies the limits to `s`. Fails (never panics) on an empty summary.
    pub fn of(s: &EnvSummary, th: &Thresholds) -> EnvCheck {
        let mut c = EnvCheck {
            ok: false,
            reasons: Vec::new(),
            items: Vec::new(),
            thresholds: th.clone(),
            notes: Vec::new(),
        };
        if s.samples == 0 || s.measured_s <= 0.0 {
            c.reasons.push(
                "the environment was not sampled during the measured phase (was the sampler started before the run?)"
                    .to_string(),
            );
        }
        let steal_ok = c.steal(s, th);
        let (foreign_ok, foreign) = c.foreign(s, th);
        // The app's own helper processes (not foreign) sharing the workers' CPUs.
        let own_pct = s.own_helpers_cpu_pct();
        let own_helpers = steal_ok
            && foreign_ok
            && own_pct >= OWN_HELPERS_MIN_PCT
            && own_pct >= OWN_HELPERS_OVER_FOREIGN * foreign;
        c.worker_preemptions(s, th, own_helpers, (foreign_ok, foreign));
        c.worker_runq_wait(s, th, own_helpers);
        c.ok = c.reasons.is_empty();
        c
    }

    fn item(&mut self, name: &str, value: f64, limit: f64, unit: &str, ok: bool) {
        self.items.push(CheckItem {
            name: name.into(),
            value,
            limit,
            unit: unit.into(),
            ok,
        });
    }

    /// The item of a per-worker figure (its worst worker against `limit`; passed when the
    /// app's own helpers explain it), and the workers over the limit.
    fn worker_item<'s>(
        &mut self,
        (name, unit): (&str, &str),
        s: &'s EnvSummary,
        figure: fn(&ThreadTotals) -> f64,
        limit: f64,
        own_helpers: bool,
    ) -> Vec<&'s ThreadTotals> {
        let worst = s.workers.iter().map(figure).fold(0.0, f64::max);
        self.item(name, worst, limit, unit, worst <= limit || own_helpers);
        s.workers.iter().filter(|w| figure(w) > limit).collect()
    }

    /// Hypervisor steal against its limit; whether it passed.
    fn steal(&mut self, s: &EnvSummary, th: &Thresholds) -> bool {
        let ok = s.steal_pct <= th.max_steal_pct;
        self.item("steal", s.steal_pct, th.max_steal_pct, "% of a CPU", ok);
        if !ok {
            self.reasons.push(format!(
                "hypervisor steal averaged {:.2} % of a CPU over the measured phase (limit {} %, worst second {:.1} %): other guests ran on our vCPUs; rerun when `taillab system show` reports low steal",
                s.steal_pct, th.max_steal_pct, s.steal_max_1s_pct
            ));
        }
        ok
    }

    /// Other processes' CPU against its limit; whether it passed, and the figure judged.
    fn foreign(&mut self, s: &EnvSummary, th: &Thresholds) -> (bool, f64) {
        // The kernel's storage workers serve whoever reads and writes blocks: when the
        // experiment did, their CPU is its own disk I/O (oltp-disk's commits: kblockd near
        // 5 % of a CPU), not foreign.
        let (storage_pct, storage_names) = storage_workers(s);
        let own_io = s.own_storage_bytes() > 0 && storage_pct > 0.0;
        let foreign = if own_io {
            (s.foreign_cpu_pct - storage_pct).max(0.0)
        } else {
            s.foreign_cpu_pct
        };
        let ok = foreign <= th.max_foreign_pct;
        self.item("foreign_cpu", foreign, th.max_foreign_pct, "% of a CPU", ok);
        if own_io && storage_pct >= 0.5 {
            self.notes.push(format!(
                "the kernel's storage workers used {storage_pct:.1} % of a CPU while the experiment read or wrote {:.1} MiB of storage ({storage_names}): counted as its own I/O, not as other processes",
                s.own_storage_bytes() as f64 / (1 << 20) as f64
            ));
        }
        if !ok {
            self.reasons.push(format!(
                "other processes used {:.1} % of a CPU over the measured phase (limit {} %): {}{}",
                foreign,
                th.max_foreign_pct,
                s.foreign_names(),
                if s.foreign_unattributed_pct >= 1.0 {
                    format!(
                        "; {:.1} % could not be attributed (short-lived processes)",
                        s.foreign_unattributed_pct
                    )
                } else {
                    String::new()
                }
            ));
        }
        (ok, foreign)
    }

    /// Each worker's involuntary context switches against their limit (a note instead of a
    /// reason when the app's own helpers explain them); `foreign` is that check's outcome.
    fn worker_preemptions(
        &mut self,
        s: &EnvSummary,
        th: &Thresholds,
        own_helpers: bool,
        foreign: (bool, f64),
    ) {
        let (foreign_ok, foreign_pct) = foreign;
        let limit = th.max_worker_invol_per_s;
        let over = self.worker_item(
            ("worker_invol_cs", "per second"),
            s,
            |w| w.invol_per_s,
            limit,
            own_helpers,
        );
        for w in over {
            if own_helpers {
                self.notes.push(format!(
                    "worker thread {} ({}) was preempted {:.0} times per second (limit {}) by the app's own helper processes ({}; foreign {:.1} %): not counted as a disturbance",
                    w.tid,
                    w.name,
                    w.invol_per_s,
                    limit,
                    s.own_helper_names(),
                    foreign_pct
                ));
                continue;
            }
            self.reasons.push(format!(
                "worker thread {} ({}) was preempted {:.0} times per second (limit {}, worst second {:.0}): something else ran on its CPU{}",
                w.tid,
                w.name,
                w.invol_per_s,
                limit,
                w.invol_max_1s_per_s,
                // Name the candidates unless the foreign reason already did.
                if s.top_foreign.is_empty() || !foreign_ok {
                    String::new()
                } else {
                    format!(" ({})", s.foreign_names())
                }
            ));
        }
    }

    /// Each worker's run-queue wait against its limit (a note instead of a reason when the
    /// app's own helpers explain it).
    fn worker_runq_wait(&mut self, s: &EnvSummary, th: &Thresholds, own_helpers: bool) {
        let limit = th.max_worker_runq_wait_pct;
        let over = self.worker_item(
            ("worker_runq_wait", "% of the phase"),
            s,
            |w| w.runq_wait_pct,
            limit,
            own_helpers,
        );
        for w in over {
            if own_helpers {
                self.notes.push(format!(
                    "worker thread {} ({}) waited for a CPU {:.1} % of the measured phase (limit {} %) behind the app's own helper processes ({}): not counted as a disturbance",
                    w.tid,
                    w.name,
                    w.runq_wait_pct,
                    limit,
                    s.own_helper_names()
                ));
                continue;
            }
            self.reasons.push(format!(
                "worker thread {} ({}) waited for a CPU {:.1} % of the measured phase (limit {} %)",
                w.tid, w.name, w.runq_wait_pct, limit
            ));
        }
    }
}

impl fmt::Display for EnvCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ok {
            write!(f, "environment ok")?;
            if !self.notes.is_empty() {
                write!(f, " ({})", self.notes.join("; "))?;
            }
            return Ok(());
        }
        write!(f, "environment DISTURBED: {}", self.reasons.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_and_keep_remainder() {
        let mk = |dt| Sample {
            dt_s: dt,
            ..Default::default()
        };
        let v: Vec<Sample> = (0..25).map(|_| mk(0.1)).collect();
        let r: Vec<&Sample> = v.iter().collect();
        let w = windows(&r, 1.0);
        // 0.1 s steps accumulate to >= 1 s after 10 or 11 samples (float sums).
        assert!(w.len() == 2 || w.len() == 3, "{w:?}");
        assert_eq!(w[0].start, 0);
        let one: Vec<&Sample> = r[..3].to_vec();
        assert_eq!(windows(&one, 1.0), vec![0..3]);
    }

    #[test]
    fn check_passes_quiet_and_fails_each_limit() {
        let quiet = EnvSummary {
            samples: 10,
            measured_s: 1.0,
            ..Default::default()
        };
        assert!(EnvCheck::of(&quiet, &Thresholds::default()).ok);
        let mut stolen = quiet.clone();
        stolen.steal_pct = 3.0;
        let c = EnvCheck::of(&stolen, &Thresholds::default());
        assert!(!c.ok && c.reasons[0].contains("steal"));
        let mut busy = quiet.clone();
        busy.foreign_cpu_pct = 60.0;
        busy.top_foreign = vec![ForeignProcess {
            name: "cc1plus".into(),
            cpu_pct: 55.0,
            pids: vec![7],
            cmdline: None,
        }];
        let c = EnvCheck::of(&busy, &Thresholds::default());
        assert!(
            !c.ok && c.reasons[0].contains("cc1plus 55.0 % (pid 7)"),
            "{c:?}"
        );
        let mut pre = quiet.clone();
        pre.workers = vec![ThreadTotals {
            tid: 9,
            name: "w0".into(),
            worker: true,
            invol_per_s: 300.0,
            ..Default::default()
        }];
        let c = EnvCheck::of(&pre, &Thresholds::default());
        assert!(
            !c.ok && c.reasons[0].contains("worker thread 9 (w0)"),
            "{c:?}"
        );
        let empty = EnvSummary::default();
        assert!(!EnvCheck::of(&empty, &Thresholds::default()).ok);
    }

    #[test]
    fn storage_workers_count_as_the_apps_own_io_only_when_it_did_io() {
        assert!(is_storage_worker("kworker/1:1H-kblockd"));
        assert!(is_storage_worker("kworker/u8:0-ext4-rsv-conversion"));
        assert!(is_storage_worker("jbd2/vda-8"));
        assert!(!is_storage_worker("kworker/1:0-mm_percpu_wq"));
        assert!(!is_storage_worker("kworker/0:2"));
        assert!(!is_storage_worker("kdamond.0"));
        // oltp-disk's commits: kblockd near 5 % of a CPU, the rest of the host quiet.
        let kw = |name: &str, cpu_pct| ForeignProcess {
            name: name.into(),
            cpu_pct,
            pids: vec![44],
            cmdline: None,
        };
        let mut disk = EnvSummary {
            samples: 10,
            measured_s: 1.0,
            foreign_cpu_pct: 6.5,
            top_foreign: vec![kw("kworker/1:1H-kblockd", 4.7), kw("kdamond.0", 1.8)],
            ..Default::default()
        };
        disk.harness.storage_bytes = 3 << 20;
        let c = EnvCheck::of(&disk, &Thresholds::default());
        assert!(c.ok, "{c:?}");
        let item = c.items.iter().find(|i| i.name == "foreign_cpu").unwrap();
        assert!((item.value - 1.8).abs() < 1e-9, "{item:?}");
        assert!(
            c.notes.len() == 1 && c.notes[0].contains("kworker/1:1H-kblockd 4.7 %"),
            "{c:?}"
        );
        // Without I/O of the experiment's own, they are someone else's.
        let mut none = disk.clone();
        none.harness.storage_bytes = 0;
        let c = EnvCheck::of(&none, &Thresholds::default());
        assert!(!c.ok && c.notes.is_empty(), "{c:?}");
        // A server process's I/O counts too; a heavy foreign process still fails the run.
        let mut server = none.clone();
        server.extra = vec![ProcTotals {
            pid: 5,
            storage_bytes: 1 << 20,
            ..Default::default()
        }];
        assert!(EnvCheck::of(&server, &Thresholds::default()).ok);
        server.foreign_cpu_pct = 12.0;
        server.top_foreign.push(kw("cc1plus", 5.5));
        let c = EnvCheck::of(&server, &Thresholds::default());
        assert!(!c.ok && c.reasons[0].contains("7.3 %"), "{c:?}");
    }

    #[test]
    fn the_apps_own_helpers_preempting_a_worker_pass_with_a_note() {
        // translate: the worker feeds Apertium stages that wake on its CPU.
        let mut own = EnvSummary {
            samples: 10,
            measured_s: 1.0,
            foreign_cpu_pct: 1.2,
            ..Default::default()
        };
        own.workers = vec![ThreadTotals {
            tid: 9,
            name: "w0".into(),
            worker: true,
            invol_per_s: 95.0,
            runq_wait_pct: 1.5,
            ..Default::default()
        }];
        own.harness.children_cpu_pct = 60.0;
        own.harness.children = vec![crate::sample::ChildProcess {
            name: "apertium-transfer".into(),
            cpu_pct: 21.0,
            pids: vec![11],
        }];
        let c = EnvCheck::of(&own, &Thresholds::default());
        assert!(c.ok, "{c:?}");
        assert_eq!(c.notes.len(), 2, "{c:?}");
        assert!(c.notes[0].contains("apertium-transfer 21.0 %"), "{c:?}");
        assert!(c.items.iter().all(|i| i.ok));
        // The same preemption with helpers too light to explain it fails,
        let mut light = own.clone();
        light.harness.children_cpu_pct = 3.0;
        assert!(!EnvCheck::of(&light, &Thresholds::default()).ok);
        // and so does it when foreign processes ran about as much as the helpers.
        let mut foreign = own.clone();
        foreign.harness.children_cpu_pct = 12.0;
        foreign.foreign_cpu_pct = 4.0;
        let c = EnvCheck::of(&foreign, &Thresholds::default());
        assert!(!c.ok && c.notes.is_empty(), "{c:?}");
        // Steal or foreign CPU over their limits still fail the run.
        let mut stolen = own.clone();
        stolen.steal_pct = 3.0;
        let c = EnvCheck::of(&stolen, &Thresholds::default());
        assert!(!c.ok && c.reasons.len() == 3, "{c:?}");
    }
}
