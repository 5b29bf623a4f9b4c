//! The join: every request's stamps cut its thread's timeline into the parts of its
//! sojourn ([`PARTS`]), which sum to it; then the tail groups' shares and culprits.
//!
//! A request's life is the stretches between its stamps: `[intended, sent)` (the harness's
//! lateness), `[sent, enqueued)` and `[finished, completed)` (the wire), `[enqueued,
//! started)` (queued) and `[started, finished)` (served). Each stretch but the wire's is
//! cut by the timeline of the thread that served the request: where that thread ran in its
//! own context the stretch's own part takes the time (`lag`, `queue`, `run`); where it was
//! preempted, asleep, in an interrupt or unknown, that part does. A request that queued
//! while its worker was preempted by a hog thus shows the hog, which is why it was slow.
//! With several workers sharing a queue, the serving worker stands for all of them.

use crate::drain::Trace;
use crate::timeline::{Cause, Ctx, Piece, Timelines, Waker};
use std::collections::HashMap;
use taillab_core::collector::Stamps;
use taillab_core::sections::anatomy::{
    self as an, Anatomy, AnatomyRow, Culprit, SumCheck, TailGroup, ThreadParts, Timeline, NPARTS,
    PARTS,
};

/// Index of each part in [`PARTS`].
const LAG: usize = 0;
const QUEUE: usize = 1;
const TRANSPORT: usize = 2;
const RUN: usize = 3;
const FAULT: usize = 4;
const PREEMPTED: usize = 5;
const WAKEUP: usize = 6;
const BLOCKED: usize = 7;
const IRQ: usize = 8;
const SOFTIRQ: usize = 9;
const UNKNOWN: usize = 10;

/// One request, as the join needs it.
#[derive(Debug, Clone, Copy)]
pub struct Request {
    /// Its index (the records' `id`).
    pub id: u64,
    /// The worker that served it.
    pub worker: usize,
    /// The thread whose timeline cuts `[intended, sent)` when it is not the worker's (a TCP
    /// client's sender), by its index in the join's threads.
    pub sender: Option<usize>,
    /// In the measured phase.
    pub measured: bool,
    /// Its stamps.
    pub stamps: Stamps,
}

/// The join's result: each request's row (by index) and the section.
pub struct Joined {
    /// Request `i`'s columns at `rows[i]` (zeros for an index with no request).
    pub rows: Vec<AnatomyRow>,
    /// The `anatomy` section.
    pub section: Anatomy,
}

/// The part a cause takes in a stretch whose own part is `own`.
fn part_of(c: Cause, own: usize) -> usize {
    match c {
        Cause::Run => own,
        Cause::Ctx(Ctx::Softirq(_)) => SOFTIRQ,
        Cause::Ctx(_) => IRQ,
        Cause::Preempted(_) => PREEMPTED,
        Cause::Wakeup => WAKEUP,
        Cause::Blocked(_) => BLOCKED,
        Cause::Unknown => UNKNOWN,
    }
}

/// Walks `[a, b)` over `pieces`, calling `f(start, len, cause)` for each overlap; time
/// before the first piece is unknown.
fn walk(pieces: &[Piece], a: u64, b: u64, mut f: impl FnMut(u64, u64, Cause)) {
    if b <= a {
        return;
    }
    let Some(first) = pieces.first() else {
        return f(a, b - a, Cause::Unknown);
    };
    let mut t = a;
    if t < first.start {
        let e = first.start.min(b);
        f(t, e - t, Cause::Unknown);
        t = e;
    }
    let mut i = pieces.partition_point(|p| p.start <= t).saturating_sub(1);
    while t < b {
        let end = pieces.get(i + 1).map_or(b, |n| n.start.min(b));
        if end > t {
            f(t, end - t, pieces[i].cause);
            t = end;
        }
        i += 1;
        if i >= pieces.len() {
            if t < b {
                f(t, b - t, pieces[pieces.len() - 1].cause);
            }
            break;
        }
    }
}

/// A request's stretches: (start, end, own part; `None`: the wire), monotone.
fn stretches(s: &Stamps) -> [(u64, u64, Option<usize>); 5] {
    let mut b = [
        s.intended,
        s.sent,
        s.enqueued,
        s.started,
        s.finished,
        s.completed,
    ];
    for i in 1..b.len() {
        b[i] = b[i].max(b[i - 1]);
    }
    [
        (b[0], b[1], Some(LAG)),
        (b[1], b[2], None),
        (b[2], b[3], Some(QUEUE)),
        (b[3], b[4], Some(RUN)),
        (b[4], b[5], None),
    ]
}

/// Cuts one request by its worker's pieces (its lateness by its sender's, `lag`); `each`
/// sees every piece (start, len, part, cause).
fn cut(
    r: &Request,
    (pieces, lag): (&[Piece], &[Piece]),
    faults: &[u64],
    fault_ns: f64,
    mut each: impl FnMut(u64, u64, usize, Cause),
) -> AnatomyRow {
    let mut row = AnatomyRow::default();
    for (a, b, own) in stretches(&r.stamps) {
        let pieces = if own == Some(LAG) { lag } else { pieces };
        match own {
            None => {
                row[TRANSPORT] += b - a;
                if b > a {
                    each(a, b - a, TRANSPORT, Cause::Run);
                }
            }
            Some(own) => walk(pieces, a, b, |t, len, c| {
                let p = part_of(c, own);
                row[p] += len;
                each(t, len, p, c);
            }),
        }
    }
    let s = &r.stamps;
    let (lo, hi) = (s.started, s.finished.max(s.started));
    let n = faults.partition_point(|&t| t < hi) - faults.partition_point(|&t| t < lo);
    let est = ((n as f64 * fault_ns) as u64).min(row[RUN]);
    row[RUN] -= est;
    row[FAULT] = est;
    row[NPARTS] = n as u64;
    row
}

/// Names culprits: task comms and interrupt names.
struct Names<'a> {
    trace: &'a Trace,
}

impl Names<'_> {
    fn task(&self, tid: u32) -> String {
        if tid == 0 {
            return "idle".into();
        }
        self.trace
            .comms
            .get(&tid)
            .cloned()
            .or_else(|| std::fs::read_to_string(format!("/proc/{tid}/comm")).ok())
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| format!("pid {tid}"))
    }

    fn ctx(&self, c: Ctx) -> String {
        match c {
            Ctx::Task => "task".into(),
            Ctx::Irq(n) => match self.trace.irqs.get(&n) {
                Some(name) => format!("irq {n} {name}"),
                None => format!("irq {n}"),
            },
            Ctx::Softirq(v) => crate::decode::SOFTIRQS
                .get(v as usize)
                .map_or_else(|| format!("softirq {v}"), |s| s.to_string()),
            Ctx::Vector(v) => crate::decode::VECTORS
                .get(v as usize)
                .map_or_else(|| format!("vector {v}"), |s| s.1.to_string()),
        }
    }

    /// (how, name, pid) of a cause that has a culprit.
    fn culprit(&self, c: Cause) -> Option<(&'static str, String, Option<u32>)> {
        Some(match c {
            Cause::Run | Cause::Unknown => return None,
            Cause::Preempted(t) => ("preempted", self.task(t), Some(t)),
            Cause::Wakeup => ("wakeup", "idle CPU waking".into(), None),
            Cause::Ctx(x @ Ctx::Softirq(_)) => ("softirq", self.ctx(x), None),
            Cause::Ctx(x) => ("irq", self.ctx(x), None),
            Cause::Blocked(Waker::Task(t)) => ("woke", self.task(t), Some(t)),
            Cause::Blocked(Waker::Ctx(x)) => ("woke", self.ctx(x), None),
            Cause::Blocked(Waker::Unknown) => ("woke", "unseen".into(), None),
        })
    }

    fn label(&self, c: Cause) -> Option<String> {
        self.culprit(c).map(|(how, name, pid)| {
            let pid = pid.map(|p| format!(" (pid {p})")).unwrap_or_default();
            match how {
                "preempted" => format!("preempted by {name}{pid}"),
                "woke" => format!("woken by {name}{pid}"),
                _ => format!("{name}{pid}"),
            }
        })
    }
}

/// Everything the join reads, per worker.
struct Threads {
    pieces: HashMap<usize, Vec<Piece>>,
    faults: HashMap<usize, Vec<u64>>,
}

impl Threads {
    fn pieces(&self, w: usize) -> &[Piece] {
        self.pieces.get(&w).map_or(&[][..], |v| &v[..])
    }

    /// Request `r`'s worker's and sender's pieces, and its worker's faults.
    fn of(&self, r: &Request) -> ((&[Piece], &[Piece]), &[u64]) {
        let lag = self.pieces(r.sender.unwrap_or(r.worker));
        (
            (self.pieces(r.worker), lag),
            self.faults.get(&r.worker).map_or(&[][..], |v| &v[..]),
        )
    }
}

/// Joins `trace` with the requests: `workers` maps worker index → tid; `fault_ns` is the
/// estimated cost of one page fault.
pub fn join(
    trace: &Trace,
    workers: &[(usize, u32)],
    requests: &[Request],
    fault_ns: f64,
) -> Joined {
    let tids: Vec<u32> = workers.iter().map(|w| w.1).collect();
    let tl = Timelines::build(trace, &tids);
    let th = Threads {
        pieces: workers.iter().map(|&(w, t)| (w, tl.pieces(t))).collect(),
        faults: workers
            .iter()
            .map(|&(w, t)| (w, tl.faults.get(&t).cloned().unwrap_or_default()))
            .collect(),
    };
    let names = Names { trace };
    let n = requests.iter().map(|r| r.id + 1).max().unwrap_or(0) as usize;
    let mut rows = vec![AnatomyRow::default(); n];
    let mut check = SumCheck::default();
    for r in requests {
        let (p, f) = th.of(r);
        let mut top: Vec<(u32, u64)> = Vec::new();
        let mut row = cut(r, p, f, fault_ns, |_, len, _, c| {
            if let Some(t) = culprit_tid(c) {
                match top.iter_mut().find(|x| x.0 == t) {
                    Some(x) => x.1 += len,
                    None => top.push((t, len)),
                }
            }
        });
        row[NPARTS + 1] = top.iter().max_by_key(|x| x.1).map_or(0, |x| x.0 as u64);
        sum_check(&mut check, r, &row);
        rows[r.id as usize] = row;
    }
    let section = Anatomy {
        schema: an::ANATOMY_SCHEMA.into(),
        traced: an::Traced {
            cpus: trace.cpus.clone(),
            drainer_cpu: trace.drainer_cpu,
            tracepoints: trace.tracepoints.clone(),
            missing: trace.missing.clone(),
            workers: workers
                .iter()
                .map(|&(worker, tid)| an::WorkerThread { worker, tid })
                .collect(),
        },
        cost: cost(trace),
        fault_ns,
        sum_check: check,
        threads: thread_parts(&th, workers, requests, &rows),
        groups: groups(requests, &rows, &th, fault_ns, &names),
        worst: worst(requests, &th, fault_ns, &names),
    };
    Joined { rows, section }
}

/// The task a cause names, for the `x_culprit_pid` column.
fn culprit_tid(c: Cause) -> Option<u32> {
    match c {
        Cause::Preempted(t) | Cause::Blocked(Waker::Task(t)) if t != 0 => Some(t),
        _ => None,
    }
}

fn sum_check(check: &mut SumCheck, r: &Request, row: &AnatomyRow) {
    check.requests += 1;
    let sojourn = r.stamps.completed.saturating_sub(r.stamps.intended);
    let sum: u64 = row[..NPARTS].iter().sum();
    if sum != sojourn {
        check.mismatched += 1;
        check.first.get_or_insert_with(|| {
            format!(
                "request {}: parts sum to {sum} ns, sojourn {sojourn} ns",
                r.id
            )
        });
    }
}

fn cost(t: &Trace) -> an::TraceCost {
    let events = t.events();
    let secs = t.end_ns.saturating_sub(t.start_ns) as f64 / 1e9;
    an::TraceCost {
        events,
        events_per_s: if secs > 0.0 {
            events as f64 / secs
        } else {
            0.0
        },
        lost: t.lost,
        lost_windows: t.lost_windows,
        drainer_cpu_s: t.drainer_cpu_ns as f64 / 1e9,
        drainer_ns_per_event: t.drainer_cpu_ns as f64 / events.max(1) as f64,
        traced_s: secs,
        ring_bytes: t.ring_bytes as u64,
        truncated: t.truncated_at.is_some(),
    }
}

/// Each worker's time over the measured requests' span.
fn thread_parts(
    th: &Threads,
    workers: &[(usize, u32)],
    requests: &[Request],
    rows: &[AnatomyRow],
) -> Vec<ThreadParts> {
    let m = || requests.iter().filter(|r| r.measured);
    let (Some(a), Some(b)) = (
        m().map(|r| r.stamps.intended).min(),
        m().map(|r| r.stamps.completed).max(),
    ) else {
        return Vec::new();
    };
    workers
        .iter()
        .map(|&(w, tid)| {
            let mut t = ThreadParts {
                worker: w,
                tid,
                ..ThreadParts::default()
            };
            let p = th.pieces(w);
            let mut on = 0;
            walk(p, a, b, |_, len, c| match part_of(c, RUN) {
                RUN => on += len,
                PREEMPTED => t.preempted_ns += len,
                WAKEUP => t.wakeup_ns += len,
                BLOCKED => t.blocked_ns += len,
                IRQ => t.irq_ns += len,
                SOFTIRQ => t.softirq_ns += len,
                _ => t.unknown_ns += len,
            });
            t.serving_ns = m()
                .filter(|r| r.worker == w)
                .map(|r| rows[r.id as usize][RUN] + rows[r.id as usize][FAULT])
                .sum();
            t.idle_ns = on.saturating_sub(t.serving_ns);
            t
        })
        .collect()
}

fn sojourn(r: &Request) -> u64 {
    r.stamps.completed.saturating_sub(r.stamps.intended)
}

/// The requests above p99 and p99.9 against those between p45 and p55.
fn groups(
    requests: &[Request],
    rows: &[AnatomyRow],
    th: &Threads,
    fault_ns: f64,
    names: &Names,
) -> Vec<TailGroup> {
    let mut m: Vec<&Request> = requests.iter().filter(|r| r.measured).collect();
    if m.len() < 2 {
        return Vec::new();
    }
    m.sort_by_key(|r| sojourn(r));
    let n = m.len();
    let mid = &m[(n * 45 / 100)..(n * 55 / 100).max(n * 45 / 100 + 1)];
    let mean = |set: &[&Request], k: usize| {
        set.iter()
            .map(|r| rows[r.id as usize][k] as f64)
            .sum::<f64>()
            / set.len() as f64
    };
    let mean_sojourn =
        |set: &[&Request]| set.iter().map(|r| sojourn(r) as f64).sum::<f64>() / set.len() as f64;
    [("p99", 0.99), ("p99.9", 0.999)]
        .into_iter()
        .map(|(label, q)| {
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
            let threshold = sojourn(m[rank]);
            let mut from = m.partition_point(|r| sojourn(r) <= threshold);
            if from == n {
                from = rank; // ties at the top: the group is those at the threshold
            }
            let tail = &m[from..];
            let (ts, ms) = (mean_sojourn(tail), mean_sojourn(mid));
            let excess = ts - ms;
            let mut g = TailGroup {
                label: label.into(),
                quantile: q,
                threshold_ns: threshold,
                requests: tail.len() as u64,
                sojourn_ns: ts,
                median_sojourn_ns: ms,
                excess_ns: excess,
                faults: mean(tail, NPARTS),
                median_faults: mean(mid, NPARTS),
                ..TailGroup::default()
            };
            for (k, p) in PARTS.iter().enumerate() {
                let (t, md) = (mean(tail, k), mean(mid, k));
                g.tail_ns.insert(p.to_string(), t);
                g.median_ns.insert(p.to_string(), md);
                let share = if excess > 0.0 { (t - md) / excess } else { 0.0 };
                g.share.insert(p.to_string(), share);
            }
            g.culprits = culprits(tail, th, fault_ns, names);
            g
        })
        .collect()
}

/// Who took the time of `tail`'s requests, most first.
fn culprits(tail: &[&Request], th: &Threads, fault_ns: f64, names: &Names) -> Vec<Culprit> {
    let mut by: HashMap<(&'static str, String, Option<u32>), (u64, u64)> = HashMap::new();
    for r in tail {
        let (p, f) = th.of(r);
        let mut mine: HashMap<(&'static str, String, Option<u32>), u64> = HashMap::new();
        cut(r, p, f, fault_ns, |_, len, _, c| {
            if let Some(k) = names.culprit(c) {
                *mine.entry(k).or_default() += len;
            }
        });
        for (k, v) in mine {
            let e = by.entry(k).or_default();
            e.0 += v;
            e.1 += 1;
        }
    }
    let me = std::process::id();
    let mut v: Vec<Culprit> = by
        .into_iter()
        .map(|((how, name, pid), (total, reqs))| Culprit {
            how: how.into(),
            name,
            pid,
            own: pid.is_some_and(|p| names.trace.tgids.get(&p) == Some(&me)),
            total_ns: total,
            requests: reqs,
        })
        .collect();
    v.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    v.truncate(8);
    v
}

/// The slowest measured request's pieces.
fn worst(requests: &[Request], th: &Threads, fault_ns: f64, names: &Names) -> Option<Timeline> {
    let r = requests
        .iter()
        .filter(|r| r.measured)
        .max_by_key(|r| sojourn(r))?;
    let (p, f) = th.of(r);
    let mut pieces: Vec<an::Piece> = Vec::new();
    let row = cut(r, p, f, fault_ns, |t, len, part, c| {
        let culprit = names.label(c);
        let start = t - r.stamps.intended;
        match pieces.last_mut() {
            Some(l) if l.part == PARTS[part] && l.culprit == culprit => l.len_ns += len,
            _ => pieces.push(an::Piece {
                start_ns: start,
                len_ns: len,
                part: PARTS[part].into(),
                culprit,
            }),
        }
    });
    Some(Timeline {
        id: r.id,
        worker: r.worker,
        sojourn_ns: sojourn(r),
        pieces,
        faults: row[NPARTS],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: u64, cause: Cause) -> Piece {
        Piece { start, cause }
    }

    fn req(id: u64, intended: u64, started: u64, finished: u64) -> Request {
        Request {
            id,
            worker: 0,
            sender: None,
            measured: true,
            stamps: Stamps::local(intended, intended, intended, started, finished, finished),
        }
    }

    #[test]
    fn a_request_is_cut_into_parts_that_sum_to_its_sojourn() {
        let pieces = vec![
            p(0, Cause::Run),
            p(150, Cause::Preempted(7)),
            p(250, Cause::Run),
            p(300, Cause::Ctx(Ctx::Softirq(3))),
            p(320, Cause::Run),
            p(1_000, Cause::Unknown),
        ];
        // Queued 100..200 (preempted from 150), served 200..400 (a softirq inside).
        let r = req(0, 100, 200, 400);
        let row = cut(
            &r,
            (&pieces, &pieces),
            &[210, 390, 500],
            30.0,
            |_, _, _, _| {},
        );
        assert_eq!(row[QUEUE], 50);
        assert_eq!(row[PREEMPTED], 100);
        assert_eq!(row[SOFTIRQ], 20);
        // Two faults inside the service (the third after it): 60 ns estimated, out of run.
        assert_eq!((row[NPARTS], row[FAULT]), (2, 60));
        assert_eq!(row[RUN], 50 + 80 - 60);
        assert_eq!(row[..NPARTS].iter().sum::<u64>(), 300);
        // Outside the trace: unknown.
        let both = (&pieces[..], &pieces[..]);
        let late = cut(&req(1, 900, 950, 1_100), both, &[], 0.0, |_, _, _, _| {});
        assert_eq!((late[QUEUE], late[RUN], late[UNKNOWN]), (50, 50, 100));
    }
}
