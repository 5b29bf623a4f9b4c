//! A fan-out over real TCP servers (`taillab run --topology loopback|networked --fanout N`):
//! N leaf servers, one client per leaf, every client sending the same schedule.
//!
//! How a request is split: the coordinator starts N `taillab serve` processes (the server
//! launcher's `{i}` is the leaf's number, so leaves can live in different network namespaces
//! or hosts) — or takes N running servers from `--target A,B,…` — and one `taillab load` per
//! leaf. Every client runs the run's own seed and rate, so request `i` has the same intended
//! time at every leaf, and all clients start their schedules at the coordinator's `go`
//! (within the pipes' latency, on their own clocks). Sub-request `i` of leaf `j` is then
//! client `j`'s request `i`; the whole request `i` is answered when its K-th leaf answered
//! (all of them by default), so its latency is the K-th smallest of its leaves' sojourns —
//! each measured on one client's clock from the intended time, so no two clocks meet.
//!
//! What is joined: the clients' per-request rows (kept for this), by request id. A request
//! that fewer than K leaves answered is not counted as finished. The model is the
//! integrated fan-out's ([`taillab_core::ideal::fanout_summary`]): the run's arrivals through
//! N exact FIFO queues of `--threads` workers each, services drawn from the leaves' own
//! (server-reported) service times; the network is not in it, so measured ÷ model says what
//! the transport and the clients add.
//!
//! Not here (yet): hedged and tied copies over TCP, replicas, several clients per leaf.

use crate::TransportError;
use std::collections::BTreeMap;
use taillab_core::collector::{IntervalSink, MetricStats, Shard, Stamps};
use taillab_core::fanout::{FanoutHists, FanoutRun, FanoutSpec};
use taillab_core::harness::Records;

/// One request row of a client (`req` line): id, worker, intended, sent, enqueued, started,
/// finished, completed, measured, enqueued_user, completed_user.
pub type ReqRow = [u64; 11];

/// Leaves of a coordinated run: a fan-out's, or 1.
pub(crate) fn leaves(cfg: &taillab_core::config::RunConfig) -> usize {
    cfg.fanout.leaves.max(1)
}

/// Client processes: one per leaf of a fan-out, else `net.clients`.
pub fn clients(cfg: &taillab_core::config::RunConfig) -> usize {
    if leaves(cfg) > 1 {
        leaves(cfg)
    } else {
        cfg.net.clients
    }
}

/// What a coordinated fan-out supports; the message names what to change.
pub fn check(f: &FanoutSpec, clients: usize) -> Result<(), TransportError> {
    let bad = |s: &str| Err(TransportError::Invalid(s.into()));
    if f.replicas > 1 || f.tied || f.hedge != taillab_core::fanout::Hedge::None {
        return bad("hedged and tied copies to replicas run in the integrated configuration only (so far): use --topology integrated, or drop --replicas, --hedge and --tied");
    }
    if clients > 1 {
        return bad("a TCP fan-out runs one client per leaf: drop --clients");
    }
    Ok(())
}

/// The targets of a fan-out's leaves from `--target A,B,…`: exactly one per leaf.
pub fn targets(list: &str, leaves: usize) -> Result<Vec<String>, TransportError> {
    let t: Vec<String> = list.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
    if t.len() != leaves {
        return Err(TransportError::Invalid(format!(
            "--fanout {leaves} needs {leaves} servers: --target names {} (list them comma-separated, HOST:PORT,HOST:PORT,…)",
            t.len()
        )));
    }
    Ok(t)
}

/// Row `r` of a client whose schedule started at `t0`, as stamps from that start.
fn stamps_of(r: &ReqRow, t0: u64) -> Stamps {
    let rel = |v: u64| v.saturating_sub(t0);
    Stamps {
        intended: rel(r[2]),
        sent: rel(r[3]),
        enqueued: rel(r[4]),
        started: rel(r[5]),
        finished: rel(r[6]),
        completed: rel(r[7]),
        enqueued_user: rel(r[9]),
        completed_user: rel(r[10]),
    }
}

/// The leaves' answers to one request: whether it was measured, and (leaf, its stamps).
type Answers = (bool, Vec<(usize, Stamps)>);

/// Every request's answers, by id; `t0s` are the clients' schedule starts on their clocks.
fn by_request(t0s: &[u64], reqs: &[Vec<ReqRow>]) -> BTreeMap<u64, Answers> {
    let mut m: BTreeMap<u64, Answers> = BTreeMap::new();
    for (leaf, (t0, rows)) in t0s.iter().zip(reqs).enumerate() {
        for r in rows {
            let e = m.entry(r[0]).or_insert((r[8] == 1, Vec::new()));
            e.1.push((leaf, stamps_of(r, *t0)));
        }
    }
    m
}

/// The whole requests of a fan-out, joined from its leaves' clients.
pub struct Joined {
    /// The whole requests' stamps: of the answer that completed each.
    pub totals: Shard,
    /// Their interval histograms.
    pub intervals: Vec<taillab_core::collector::IntervalBlob>,
    /// One record per request (the answer that completed it; `worker` is its leaf).
    pub records: Records,
    /// The leaves, for the `fanout` section and its model.
    pub fanout: FanoutRun,
}

/// Where a run's times start and how they are sliced (the base run's).
pub struct Axis {
    /// Start of the measured phase (ns after the schedule start).
    pub measure_start: u64,
    /// Saturation slice (ns).
    pub slice_ns: u64,
    /// Interval histograms' width (ns).
    pub interval_ns: u64,
}

/// Joins the leaves' clients (`t0s[j]`: client `j`'s schedule start on its clock, `reqs[j]`
/// its rows) into whole requests; `workers` is each leaf server's worker count.
pub fn join(f: &FanoutSpec, t0s: &[u64], reqs: &[Vec<ReqRow>], axis: &Axis, workers: usize) -> Joined {
    let sink = IntervalSink::new(1);
    sink.measure_start.store(axis.measure_start.max(1), std::sync::atomic::Ordering::Release);
    let mut totals = Shard::new(0, &sink, axis.slice_ns, axis.interval_ns);
    let mut hists = FanoutHists::default();
    let mut per_leaf: Vec<_> = (0..reqs.len()).map(|_| FanoutHists::default().leaf).collect();
    let answers = by_request(t0s, reqs);
    let records = Records::new(answers.keys().next_back().map_or(0, |k| k + 1));
    let need = f.needed();
    let (mut arrivals, mut warmup) = (Vec::with_capacity(answers.len()), 0u64);
    for (&id, (measured, got)) in &answers {
        arrivals.push(got[0].1.intended);
        warmup += u64::from(!measured);
        if got.len() < need {
            continue;
        }
        let mut order: Vec<&(usize, Stamps)> = got.iter().collect();
        order.sort_by_key(|(_, s)| s.completed.saturating_sub(s.intended));
        let (leaf, whole) = order[need - 1];
        totals.record(whole, *measured, &sink);
        records.set(id, whole, *leaf, *measured);
        if !measured {
            continue;
        }
        hists.e2e.saturating_record(whole.completed.saturating_sub(whole.intended));
        // Each leaf's client releases its own copy: the completing one's release.
        hists.e2e_released.saturating_record(whole.completed.saturating_sub(whole.sent));
        for (j, s) in got {
            let d = s.durations();
            hists.leaf.saturating_record(d[0]);
            hists.copy.saturating_record(d[0]);
            hists.service.saturating_record(d[1]);
            per_leaf[*j].saturating_record(d[0]);
        }
        hists.subs += f.leaves as u64;
        hists.sent += got.len() as u64;
        hists.served += got.len() as u64;
    }
    totals.flush(&sink);
    // From the first arrival, in schedule order (ids are drawn in order).
    let first = arrivals.first().copied().unwrap_or(0);
    arrivals.iter_mut().for_each(|a| *a -= first.min(*a));
    Joined {
        totals,
        intervals: sink.finish(),
        records,
        fanout: FanoutRun {
            spec: f.clone(),
            workers_per_replica: workers,
            hists,
            per_leaf: per_leaf.iter().map(|h| MetricStats::from_hist(h, None)).collect(),
            arrivals,
            released: Vec::new(),
            warmup,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: u64, t: u64, sojourn: u64, service: u64, measured: bool) -> ReqRow {
        // A request intended at t, served from t+1 for `service`, completed at t+sojourn.
        [id, 0, t, t, t, t + 1, t + 1 + service, t + sojourn, measured as u64, t, t + sojourn]
    }

    #[test]
    fn targets_need_one_per_leaf() {
        assert_eq!(targets("a:1, b:2", 2).unwrap(), vec!["a:1", "b:2"]);
        let e = targets("a:1", 3).unwrap_err().to_string();
        assert!(e.contains("--fanout 3 needs 3 servers") && e.contains("names 1"), "{e}");
    }

    #[test]
    fn the_whole_request_waits_for_its_kth_answer() {
        use taillab_core::fanout::FanoutWait;
        // Two leaves whose clients started at different times on their clocks (t0).
        let rows = |t0: u64, soj: [u64; 3]| -> Vec<ReqRow> {
            (0..3).map(|i| row(i, t0 + 1000 * i, soj[i as usize], 5, i > 0)).collect()
        };
        let reqs = vec![rows(10_000, [50, 70, 300]), rows(99_000, [60, 400, 90])];
        let t0s = [10_000, 99_000];
        let axis = Axis { measure_start: 1000, slice_ns: 1_000_000, interval_ns: 1_000_000_000 };
        let mut f = FanoutSpec::default_one();
        f.leaves = 2;
        let all = join(&f, &t0s, &reqs, &axis, 1);
        let h = &all.totals.totals.0[0];
        // Measured: requests 1 and 2; all answers: max(70, 400) and max(300, 90).
        assert_eq!((h.len(), h.min(), h.max()), (2, 300, 400));
        assert_eq!((all.totals.measured, all.totals.warmup), (2, 1));
        let fan = &all.fanout;
        assert_eq!((fan.hists.subs, fan.hists.leaf.len(), fan.warmup), (4, 4, 1));
        assert_eq!(fan.arrivals, vec![0, 1000, 2000]);
        assert_eq!(fan.hists.service.max(), 5);
        assert_eq!(all.records.iter().count(), 3);
        // A request one leaf never answered is not finished when all are awaited.
        let mut short = reqs.clone();
        short[1].pop();
        assert_eq!(join(&f, &t0s, &short, &axis, 1).totals.measured, 1);
        // The first answer of two: min(70, 400), min(300, 90).
        f.wait = FanoutWait::First(1);
        let first = join(&f, &t0s, &reqs, &axis, 1);
        let h = &first.totals.totals.0[0];
        assert_eq!((h.min(), h.max()), (70, 90));
        assert_eq!(join(&f, &t0s, &short, &axis, 1).totals.measured, 2);
    }
}
