//! Dispatch gaps of an integrated run: stretches of time in which a request
//! was due and a worker was free, yet no request started.
//!
//! The harness needs microseconds between a request becoming due and its
//! start. A gap of milliseconds means nothing of ours ran: the VM's CPU was
//! taken away (on our Firecracker VMs such freezes of 10–30 ms are not
//! counted as hypervisor steal, and the environment sampler, asleep between
//! samples, misses them). Every request due during the gap waits it out, so
//! one 30 ms freeze can move a light-load mean by tens of percent. The
//! environment check fails a run whose longest gap exceeds
//! `monitor.max_stall` (and the service p50), see docs/methodology.md.
//!
//! A gap is measured from the records alone: with a shared queue, from the
//! moment some request is due (`intended`) while fewer than `threads`
//! requests are in service, to the next start; with per-worker queues the
//! same per worker, over the requests that worker served.

use serde::{Deserialize, Serialize};

use crate::result::RunResult;
use crate::stats::quantile;

/// The dispatch gaps of the measured phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stalls {
    /// Gaps of any length (> 0 ns) that began in the measured phase.
    pub gaps: u64,
    /// Median gap (ns): the harness's own dispatch cost.
    pub gap_p50_ns: u64,
    /// 99th-percentile gap (ns).
    pub gap_p99_ns: u64,
    /// The longest gap (ns).
    pub longest_ns: u64,
    /// When it began, seconds after the measured phase began.
    pub longest_at_s: f64,
    /// Gaps over 1 ms, and their total length (ns).
    pub over_1ms: u64,
    /// Total length of the gaps over 1 ms (ns).
    pub over_1ms_total_ns: u64,
    /// The gaps over 1 ms in the order they began, the first [`MAX_LONG_GAPS`]: the run's
    /// stall timeline (a real-time worker throttled by the kernel stalls once a second).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub long_gaps: Vec<Gap>,
}

/// One dispatch gap over 1 ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gap {
    /// When it began, seconds after the measured phase began.
    pub at_s: f64,
    /// How long it lasted (ns).
    pub length_ns: u64,
}

/// The most gaps over 1 ms a summary lists one by one (the count and total cover them all).
pub const MAX_LONG_GAPS: usize = 1000;

/// One request as the sweep needs it.
#[derive(Clone, Copy)]
struct Req {
    intended: u64,
    started: u64,
    finished: u64,
}

/// The run's dispatch gaps, or `None` without a complete set of records (a
/// run that kept none, lost some to the memory cap, or was cut short).
pub fn dispatch_gaps(r: &RunResult) -> Option<Stalls> {
    let rec = r.records.as_ref()?;
    if r.aborted {
        return None;
    }
    let per_worker = r.spec.dispatch.is_per_worker();
    let n_groups = if per_worker { r.spec.threads.max(1) } else { 1 };
    let mut groups: Vec<Vec<Req>> = vec![Vec::new(); n_groups];
    let mut count = 0u64;
    for (_, w, _, s) in rec.iter() {
        count += 1;
        let g = if per_worker { w.min(n_groups - 1) } else { 0 };
        groups[g].push(Req {
            intended: s.intended,
            started: s.started,
            finished: s.finished,
        });
    }
    if count < r.generated_warmup + r.generated_measured || count == 0 {
        return None;
    }
    let servers = if per_worker { 1 } else { r.spec.threads.max(1) };
    let mut gaps: Vec<(u64, u64)> = Vec::new();
    for g in &groups {
        sweep(g, servers, &mut gaps);
    }
    Some(summarize(gaps, r.measure_start, r.totals.last_completed))
}

/// Appends (start, length) of every gap in `reqs` served by `servers` workers
/// from one queue.
fn sweep(reqs: &[Req], servers: usize, gaps: &mut Vec<(u64, u64)>) {
    // Events at one time: finishes and arrivals open a gap, starts close it;
    // starts go first so a request started the moment it arrived opens none.
    let mut ev: Vec<(u64, u8)> = Vec::with_capacity(reqs.len() * 3);
    for q in reqs {
        ev.push((q.started, 0));
        ev.push((q.intended, 1));
        ev.push((q.finished, 2));
    }
    ev.sort_unstable();
    let (mut waiting, mut busy) = (0i64, 0i64);
    let mut open: Option<u64> = None;
    for (t, kind) in ev {
        match kind {
            0 => {
                waiting -= 1;
                busy += 1;
            }
            1 => waiting += 1,
            _ => busy -= 1,
        }
        let idle_with_work = waiting > 0 && (busy as usize) < servers;
        match (open, idle_with_work) {
            (None, true) => open = Some(t),
            (Some(s), false) => {
                if t > s {
                    gaps.push((s, t - s));
                }
                open = None;
            }
            _ => {}
        }
    }
}

fn summarize(mut gaps: Vec<(u64, u64)>, start: u64, end: u64) -> Stalls {
    gaps.retain(|&(s, _)| s >= start && s <= end.max(start));
    let longest = gaps
        .iter()
        .copied()
        .max_by_key(|g| g.1)
        .unwrap_or((start, 0));
    let mut long: Vec<(u64, u64)> = gaps.iter().copied().filter(|g| g.1 > 1_000_000).collect();
    long.sort_unstable();
    let over: Vec<u64> = long.iter().map(|g| g.1).collect();
    let mut lens: Vec<u64> = gaps.iter().map(|g| g.1).collect();
    lens.sort_unstable();
    Stalls {
        gaps: lens.len() as u64,
        gap_p50_ns: if lens.is_empty() {
            0
        } else {
            quantile(&lens, 0.5)
        },
        gap_p99_ns: if lens.is_empty() {
            0
        } else {
            quantile(&lens, 0.99)
        },
        longest_ns: longest.1,
        longest_at_s: longest.0.saturating_sub(start) as f64 / 1e9,
        over_1ms: over.len() as u64,
        over_1ms_total_ns: over.iter().sum(),
        long_gaps: long
            .iter()
            .take(MAX_LONG_GAPS)
            .map(|&(at, length_ns)| Gap {
                at_s: at.saturating_sub(start) as f64 / 1e9,
                length_ns,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(intended: u64, started: u64, finished: u64) -> Req {
        Req {
            intended,
            started,
            finished,
        }
    }

    fn gaps_of(reqs: &[Req], servers: usize) -> Vec<(u64, u64)> {
        let mut g = Vec::new();
        sweep(reqs, servers, &mut g);
        g
    }

    #[test]
    fn one_worker_gap_is_due_to_start() {
        // Due at 10, started at 10: no gap. Due at 20 while the first runs
        // until 30, started at 31: a 1 ns gap from the finish. Due at 100,
        // started 5 ms late: one 5 ms gap.
        let r = [
            req(10, 10, 30),
            req(20, 31, 40),
            req(100, 5_000_100, 5_000_200),
        ];
        assert_eq!(gaps_of(&r, 1), vec![(30, 1), (100, 5_000_000)]);
    }

    #[test]
    fn a_busy_worker_is_no_gap_but_a_free_one_is() {
        // Two workers: the second request waits while both are busy (no
        // gap), the third is due while one is free and starts late (gap).
        let r = [
            req(0, 0, 1000),
            req(0, 0, 1000),
            req(10, 1000, 1500),
            req(2000, 2600, 2700),
        ];
        assert_eq!(gaps_of(&r, 2), vec![(2000, 600)]);
        // With one worker the same requests queue behind each other: the
        // late starts after each finish are gaps, the waits are not.
        let r1 = [req(0, 0, 1000), req(10, 1000, 1500), req(2000, 2600, 2700)];
        assert_eq!(gaps_of(&r1, 1), vec![(2000, 600)]);
    }

    #[test]
    fn summary_keeps_the_measured_phase_and_the_longest() {
        let s = summarize(
            vec![(5, 3_000_000), (100, 10), (200, 2_000_000), (300, 20)],
            50,
            1000,
        );
        assert_eq!(s.gaps, 3);
        assert_eq!(s.longest_ns, 2_000_000);
        assert!((s.longest_at_s - 150e-9).abs() < 1e-12);
        assert_eq!((s.over_1ms, s.over_1ms_total_ns), (1, 2_000_000));
        assert_eq!(s.long_gaps.len(), 1);
        assert_eq!(s.long_gaps[0].length_ns, 2_000_000);
        assert!((s.long_gaps[0].at_s - 150e-9).abs() < 1e-12);
    }

    #[test]
    fn the_long_gaps_are_the_timeline_in_order() {
        let s = summarize(
            vec![(3_000, 4_000_000), (1_000, 2_000_000), (2_000, 10)],
            0,
            10_000,
        );
        let at: Vec<u64> = s
            .long_gaps
            .iter()
            .map(|g| (g.at_s * 1e9).round() as u64)
            .collect();
        assert_eq!(at, vec![1_000, 3_000]);
        assert_eq!(s.over_1ms_total_ns, 6_000_000);
    }
}
