//! Who held each traced CPU when, and from that each measured thread's timeline: running,
//! in an interrupt, preempted by whom, asleep until woken by whom, or unknown.
//!
//! A CPU's events are swept in order with the current task and a stack of interrupt
//! contexts (a hard interrupt may nest in a soft one): between two events the CPU is the
//! innermost context's. Every sample names the CPU's current task, so the first event on a
//! CPU (a timer tick, at the latest) says who ran there even before any switch. A lost
//! window (PERF_RECORD_LOST) is unknown until the next event, and forgets the current task.

use crate::decode::{Event, Kind, PREEMPTED, STATE_MASK};
use crate::drain::Trace;
use std::collections::HashMap;

/// The context a CPU runs in besides its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ctx {
    /// The task itself.
    Task,
    /// A hard interrupt (its number).
    Irq(u32),
    /// A soft interrupt (its vector).
    Softirq(u32),
    /// A system vector: the local timer, an IPI ([`crate::decode::VECTORS`] index).
    Vector(u32),
}

/// From `start` until the next one's start, a CPU ran `task` (None: unknown) in `ctx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Occ {
    /// Start (ns).
    pub start: u64,
    /// The current task (0: idle), or unknown.
    pub task: Option<u32>,
    /// The innermost context.
    pub ctx: Ctx,
}

/// Who woke a sleeping thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Waker {
    /// A task (the current task of the waking CPU, outside interrupts).
    Task(u32),
    /// An interrupt context on the waking CPU.
    Ctx(Ctx),
    /// The wake-up was not seen (lost).
    Unknown,
}

/// Why a measured thread was where it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cause {
    /// On its CPU, in its own context.
    Run,
    /// On its CPU, taken by an interrupt context.
    Ctx(Ctx),
    /// Runnable while this task ran.
    Preempted(u32),
    /// Runnable on an idle CPU (after a wake-up).
    Wakeup,
    /// Asleep until this woke it.
    Blocked(Waker),
    /// Not covered by the trace.
    Unknown,
}

/// From `start` until the next piece's start, a thread was in `cause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Start (ns).
    pub start: u64,
    /// Why.
    pub cause: Cause,
}

/// A measured thread's switches and wake-ups.
#[derive(Debug, Clone, Copy)]
enum Trans {
    /// Switched out on `cpu` with the reported state.
    Out { cpu: usize, state: u32 },
    /// Switched in on `cpu`.
    In { cpu: usize },
    /// Woken, bound for `cpu`.
    Wake { cpu: usize, by: Waker },
}

/// Every CPU's occupancy and every measured thread's transitions and faults.
pub struct Timelines {
    occ: HashMap<usize, Vec<Occ>>,
    trans: HashMap<u32, Vec<(u64, Trans)>>,
    /// Each measured thread's user page faults (times, in order).
    pub faults: HashMap<u32, Vec<u64>>,
    start: u64,
    end: u64,
}

/// Appends a change of who holds the CPU at `ts`, merging what does not change (a change
/// at the start of the last segment replaces it: that segment had no length).
fn set(occ: &mut Vec<Occ>, ts: u64, task: Option<u32>, ctx: Ctx) {
    let last = *occ.last().expect("an initial segment");
    if last.task == task && last.ctx == ctx {
        return;
    }
    if ts <= last.start {
        occ.pop();
        if occ.last().is_some_and(|p| p.task == task && p.ctx == ctx) {
            return;
        }
        occ.push(Occ {
            start: last.start,
            task,
            ctx,
        });
        return;
    }
    occ.push(Occ {
        start: ts,
        task,
        ctx,
    });
}

/// Leaves context `c`: pops it, or everything above it when exits were lost.
fn leave(stack: &mut Vec<Ctx>, c: Ctx) {
    if let Some(i) = stack.iter().rposition(|x| *x == c) {
        stack.truncate(i);
    }
}

/// One traced CPU's sweep.
struct Sweep<'a> {
    cpu: usize,
    workers: &'a [u32],
    cur: Option<u32>,
    stack: Vec<Ctx>,
    occ: Vec<Occ>,
}

impl Sweep<'_> {
    fn event(&mut self, e: &Event, prev_ts: u64, tl: &mut Timelines) {
        let ts = e.ts.max(tl.start);
        if e.kind == Kind::Lost {
            // Records were dropped since the last one: that stretch is unknown.
            set(&mut self.occ, prev_ts.max(tl.start), None, Ctx::Task);
            self.cur = None;
            self.stack.clear();
            set(&mut self.occ, ts, None, Ctx::Task);
            return;
        }
        if e.kind != Kind::Switch {
            // A sample names the CPU's current task (interrupted or not).
            self.cur = Some(e.tid);
        }
        match e.kind {
            Kind::Switch => {
                self.cur = Some(e.a);
                self.stack.clear();
                if self.workers.contains(&e.tid) {
                    let t = Trans::Out {
                        cpu: self.cpu,
                        state: e.b,
                    };
                    tl.trans.entry(e.tid).or_default().push((ts, t));
                }
                if self.workers.contains(&e.a) {
                    let t = Trans::In { cpu: self.cpu };
                    tl.trans.entry(e.a).or_default().push((ts, t));
                }
            }
            Kind::IrqEntry => self.stack.push(Ctx::Irq(e.a)),
            Kind::IrqExit => leave(&mut self.stack, Ctx::Irq(e.a)),
            Kind::SoftirqEntry => self.stack.push(Ctx::Softirq(e.a)),
            Kind::SoftirqExit => leave(&mut self.stack, Ctx::Softirq(e.a)),
            Kind::VectorEntry => self.stack.push(Ctx::Vector(e.a)),
            Kind::VectorExit => leave(&mut self.stack, Ctx::Vector(e.a)),
            Kind::Waking => {
                if self.workers.contains(&e.a) {
                    let by = match self.stack.last() {
                        Some(c) => Waker::Ctx(*c),
                        None => Waker::Task(e.tid),
                    };
                    let t = Trans::Wake {
                        cpu: e.b as usize,
                        by,
                    };
                    tl.trans.entry(e.a).or_default().push((ts, t));
                }
            }
            Kind::Fault => {
                if self.workers.contains(&e.tid) {
                    tl.faults.entry(e.tid).or_default().push(ts);
                }
            }
            Kind::Lost => {}
        }
        let ctx = self.stack.last().copied().unwrap_or(Ctx::Task);
        set(&mut self.occ, ts, self.cur, ctx);
    }
}

impl Timelines {
    /// Sweeps every ring of `trace` for the measured threads `workers` (tids).
    pub fn build(trace: &Trace, workers: &[u32]) -> Timelines {
        let mut tl = Timelines {
            occ: HashMap::new(),
            trans: HashMap::new(),
            faults: HashMap::new(),
            start: trace.start_ns,
            end: trace.end_ns.max(trace.start_ns),
        };
        for ring in &trace.rings {
            let mut s = Sweep {
                cpu: ring.cpu,
                workers,
                cur: None,
                stack: Vec::new(),
                occ: vec![Occ {
                    start: tl.start,
                    task: None,
                    ctx: Ctx::Task,
                }],
            };
            let mut prev = tl.start;
            for e in &ring.events {
                if !ring.traced && e.kind != Kind::Waking {
                    continue;
                }
                if ring.traced {
                    s.event(e, prev, &mut tl);
                } else if workers.contains(&e.a) {
                    // Another CPU woke a thread of ours: who ran there is all it says.
                    let t = Trans::Wake {
                        cpu: e.b as usize,
                        by: Waker::Task(e.tid),
                    };
                    tl.trans.entry(e.a).or_default().push((e.ts, t));
                }
                prev = e.ts;
            }
            if ring.traced {
                if let Some(t) = trace.truncated_at {
                    set(&mut s.occ, t, None, Ctx::Task);
                }
                set(&mut s.occ, tl.end, None, Ctx::Task);
                tl.occ.insert(ring.cpu, s.occ);
            }
        }
        for v in tl.trans.values_mut() {
            v.sort_by_key(|(t, _)| *t);
        }
        for v in tl.faults.values_mut() {
            v.sort_unstable();
        }
        tl
    }

    /// The traced CPU thread `tid` runs on when no switch says: the first whose occupancy
    /// names it.
    fn home(&self, tid: u32) -> Option<usize> {
        let mut cpus: Vec<_> = self.occ.keys().copied().collect();
        cpus.sort_unstable();
        cpus.into_iter()
            .find(|c| self.occ[c].iter().any(|o| o.task == Some(tid)))
    }

    /// Thread `tid`'s pieces from the trace's start to its end (a last piece, `Unknown`,
    /// starts at the end).
    pub fn pieces(&self, tid: u32) -> Vec<Piece> {
        let none = Vec::new();
        let trans = self.trans.get(&tid).unwrap_or(&none);
        let first = trans.iter().find_map(|(_, t)| match t {
            Trans::Out { cpu, .. } => Some(State::On(*cpu)),
            Trans::In { .. } => Some(State::Unknown),
            Trans::Wake { .. } => None,
        });
        let mut state = match first {
            Some(s) => s,
            None => self.home(tid).map_or(State::Unknown, State::On),
        };
        let mut out = vec![Piece {
            start: self.start,
            cause: Cause::Unknown,
        }];
        let mut t = self.start;
        for &(ts, tr) in trans {
            let by = match tr {
                Trans::Wake { by, .. } => by,
                _ => Waker::Unknown,
            };
            self.emit(&mut out, tid, state, by, t, ts);
            state = state.after(tr);
            t = ts.max(t);
        }
        self.emit(&mut out, tid, state, Waker::Unknown, t, self.end);
        push(&mut out, self.end, Cause::Unknown);
        out
    }

    /// Pieces of `[a, b)` in `state` (a blocked stretch ends with `by`'s wake-up).
    fn emit(&self, out: &mut Vec<Piece>, tid: u32, state: State, by: Waker, a: u64, b: u64) {
        if b <= a {
            return;
        }
        let cpu = match state {
            State::On(c) | State::Runnable(c) | State::Blocked(c) => c,
            State::Unknown => return push(out, a, Cause::Unknown),
        };
        let Some(occ) = self.occ.get(&cpu) else {
            return push(out, a, Cause::Unknown);
        };
        let i = occ.partition_point(|o| o.start <= a).saturating_sub(1);
        for o in occ[i..].iter().take_while(|o| o.start < b) {
            let cause = match (state, o.task) {
                (_, None) => Cause::Unknown,
                (State::Blocked(_), _) => Cause::Blocked(by),
                (State::On(_), Some(x)) if x == tid => match o.ctx {
                    Ctx::Task => Cause::Run,
                    c => Cause::Ctx(c),
                },
                // On its CPU by its switches, yet another task there: records were lost.
                (State::On(_), _) => Cause::Unknown,
                (_, Some(_)) if o.ctx != Ctx::Task => Cause::Ctx(o.ctx),
                (_, Some(0)) => Cause::Wakeup,
                (_, Some(x)) if x == tid => Cause::Unknown,
                (_, Some(x)) => Cause::Preempted(x),
            };
            push(out, o.start.max(a), cause);
        }
    }
}

/// Where a thread is between two of its transitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// On this CPU.
    On(usize),
    /// Runnable, waiting for this CPU.
    Runnable(usize),
    /// Asleep (it left this CPU).
    Blocked(usize),
    /// Not known.
    Unknown,
}

impl State {
    fn after(self, t: Trans) -> State {
        match t {
            Trans::In { cpu } => State::On(cpu),
            Trans::Out { cpu, state } if state & STATE_MASK == 0 || state & PREEMPTED != 0 => {
                State::Runnable(cpu)
            }
            Trans::Out { cpu, .. } => State::Blocked(cpu),
            // A wake-up ends a sleep; one that comes while it runs changes nothing.
            Trans::Wake { cpu, .. } => match self {
                State::Blocked(_) | State::Unknown => State::Runnable(cpu),
                s => s,
            },
        }
    }
}

/// Appends a piece, merging one that does not change the cause (one at the start of the
/// last piece replaces it).
fn push(out: &mut Vec<Piece>, start: u64, cause: Cause) {
    if let Some(l) = out.last().copied() {
        if l.cause == cause {
            return;
        }
        if start <= l.start {
            out.pop();
            if out.last().is_some_and(|p| p.cause == cause) {
                return;
            }
            out.push(Piece {
                start: l.start,
                cause,
            });
            return;
        }
    }
    out.push(Piece { start, cause });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::CpuEvents;

    fn ev(ts: u64, tid: u32, kind: Kind, a: u32, b: u32) -> Event {
        Event {
            ts,
            tid,
            kind,
            a,
            b,
        }
    }

    fn trace(traced: Vec<Event>, other: Vec<Event>, end: u64) -> Trace {
        Trace {
            cpus: vec![1],
            rings: vec![
                CpuEvents {
                    cpu: 0,
                    traced: false,
                    events: other,
                },
                CpuEvents {
                    cpu: 1,
                    traced: true,
                    events: traced,
                },
            ],
            start_ns: 0,
            end_ns: end,
            ..Trace::default()
        }
    }

    /// Worker 10 on CPU 1: a tick names it, preempted by 20, asleep, woken by 30 from CPU
    /// 0, runnable on the idle CPU, back on, records lost, an interrupt.
    #[test]
    fn a_threads_life_is_cut_at_its_switches_and_interrupts() {
        let t = trace(
            vec![
                ev(100, 10, Kind::VectorEntry, 0, 0),
                ev(110, 10, Kind::VectorExit, 0, 0),
                ev(200, 10, Kind::Switch, 20, PREEMPTED),
                ev(300, 20, Kind::Switch, 10, 1),
                ev(400, 10, Kind::Switch, 0, 1),
                ev(550, 0, Kind::Switch, 10, 0),
                ev(700, 0, Kind::Lost, 3, 0),
                ev(800, 10, Kind::IrqEntry, 9, 0),
            ],
            vec![ev(500, 30, Kind::Waking, 10, 1)],
            1_000,
        );
        let tl = Timelines::build(&t, &[10]);
        let p = tl.pieces(10);
        let got: Vec<(u64, Cause)> = p.iter().map(|p| (p.start, p.cause)).collect();
        assert_eq!(
            got,
            vec![
                // Before the first event nothing names the CPU's task.
                (0, Cause::Unknown),
                (100, Cause::Ctx(Ctx::Vector(0))),
                (110, Cause::Run),
                (200, Cause::Preempted(20)),
                (300, Cause::Run),
                (400, Cause::Blocked(Waker::Task(30))),
                (500, Cause::Wakeup),
                // Lost records: unknown from the last record before them to the next.
                (550, Cause::Unknown),
                (800, Cause::Ctx(Ctx::Irq(9))),
                (1_000, Cause::Unknown),
            ]
        );
    }
}
