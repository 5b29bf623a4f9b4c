//! The exact discrete-event model ([`simulate`]): N×R servers of W workers, FIFO, every copy
//! its own service draw, hedge timers and tied cancellations.

use super::*;

/// One copy of a sub-request in the model.
pub(super) struct Copy {
    pub(super) sub: u64,
    pub(super) server: usize,
    pub(super) service: u64,
    pub(super) sent: u64,
    pub(super) primary: bool,
    pub(super) cancelled: bool,
}

pub(super) struct Sub {
    pub(super) logical: u64,
    pub(super) primary_server: usize,
    pub(super) done: bool,
    pub(super) started: bool,
    /// Copies not yet finished or dropped.
    pub(super) live: u32,
    /// Copies still queued (for cancellation).
    pub(super) queued: Vec<u64>,
}

pub(super) struct Logical {
    pub(super) intended: u64,
    pub(super) released: u64,
    pub(super) answers: usize,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Ev {
    /// A worker of a server finished a copy (ordered first at one time).
    Finish(u64),
    /// A worker woken for a copy starts it (or drops it, if its sub-request no longer needs it).
    Start(u64),
    /// A hedge's delay ran out.
    Hedge(u64),
    /// A hedge's copy goes out (its delay ran out, plus the dispatcher's lateness).
    /// (sub-request, lateness).
    HedgeSend(u64, u64),
}

/// What a real run adds to the model's queues beyond its service times, each drawn from what
/// the run measured: a hedge's lateness (its copy goes out after its delay ran out) and a
/// worker's wake-up (a copy sent to an idle worker starts that much later; a copy taken from
/// the queue by a worker that just finished starts at once). [`Costs::none`] adds nothing.
#[derive(Default)]
pub struct Costs<'a> {
    /// A hedge's lateness (ns), drawn per hedge.
    pub hedge_lag: Option<Box<dyn FnMut() -> u64 + 'a>>,
    /// A worker's wake-up (ns), drawn per copy that finds its worker idle.
    pub wake: Option<Box<dyn FnMut() -> u64 + 'a>>,
}

impl Costs<'_> {
    /// No costs: copies go out and start exactly on time.
    pub fn none() -> Self {
        Costs::default()
    }

    pub(super) fn draw(f: &mut Option<Box<dyn FnMut() -> u64 + '_>>) -> u64 {
        f.as_mut().map_or(0, |f| f())
    }
}

/// The fan-out model (see the module docs): requests arrive at `arrivals` (ns, non-decreasing),
/// each copy's service is `service()`; `workers` per server; the first `warmup` requests are
/// not counted. Copies go out and start exactly on time ([`simulate_with`] adds a run's costs).
pub fn simulate(
    spec: &FanoutSpec,
    arrivals: impl IntoIterator<Item = u64>,
    service: &mut dyn FnMut() -> u64,
    workers: usize,
    warmup: u64,
) -> FanoutHists {
    simulate_with(
        spec,
        arrivals.into_iter().map(|t| (t, t)),
        service,
        workers,
        warmup,
        Costs::none(),
    )
}

/// [`simulate`] with a run's costs: each request is `(arrival, release)` — its latency counts
/// from its arrival, its sub-requests go out at its release (non-decreasing) — and hedges'
/// lateness and workers' wake-ups come from `costs`.
pub fn simulate_with(
    spec: &FanoutSpec,
    arrivals: impl IntoIterator<Item = (u64, u64)>,
    service: &mut dyn FnMut() -> u64,
    workers: usize,
    warmup: u64,
    costs: Costs<'_>,
) -> FanoutHists {
    let mut m = Model {
        spec: spec.clone(),
        warmup,
        free: vec![workers; spec.servers()],
        queues: vec![VecDeque::new(); spec.servers()],
        copies: HashMap::new(),
        subs: HashMap::new(),
        logicals: HashMap::new(),
        events: BinaryHeap::new(),
        next_copy: 0,
        hedge: HedgeDelay::new(spec.hedge),
        costs,
        out: FanoutHists::default(),
    };
    let mut arrivals = arrivals.into_iter().enumerate().peekable();
    loop {
        let next_arrival = arrivals.peek().map(|&(_, (_, r))| r);
        let next_event = m.events.peek().map(|Reverse((t, _, _))| *t);
        match (next_arrival, next_event) {
            (None, None) => break,
            (Some(a), e) if e.is_none_or(|e| a < e) => {
                let (i, (t, r)) = arrivals.next().expect("peeked");
                m.arrive(i as u64, t, r, service);
            }
            _ => {
                let Reverse((t, ev, _)) = m.events.pop().expect("peeked");
                match ev {
                    Ev::Finish(c) => m.finish(c, t),
                    Ev::Start(c) => m.woken(c, t),
                    Ev::Hedge(s) => m.hedge_due(s, t, service),
                    Ev::HedgeSend(s, lag) => m.hedge_fires(s, t, lag, service),
                }
            }
        }
    }
    m.out
}

pub(super) struct Model<'a> {
    pub(super) spec: FanoutSpec,
    pub(super) warmup: u64,
    pub(super) free: Vec<usize>,
    pub(super) queues: Vec<VecDeque<u64>>,
    pub(super) copies: HashMap<u64, Copy>,
    pub(super) subs: HashMap<u64, Sub>,
    pub(super) logicals: HashMap<u64, Logical>,
    /// (time, event, tie-breaker).
    pub(super) events: BinaryHeap<Reverse<(u64, Ev, u64)>>,
    pub(super) next_copy: u64,
    pub(super) hedge: HedgeDelay,
    pub(super) costs: Costs<'a>,
    pub(super) out: FanoutHists,
}

impl Model<'_> {
    pub(super) fn counted(&self, logical: u64) -> bool {
        logical >= self.warmup
    }

    /// Request `i` arrived at `intended` and goes out to its leaves at `t`.
    pub(super) fn arrive(
        &mut self,
        i: u64,
        intended: u64,
        t: u64,
        service: &mut dyn FnMut() -> u64,
    ) {
        let (n, r) = (self.spec.leaves, self.spec.replicas);
        self.logicals.insert(
            i,
            Logical {
                intended,
                released: t,
                answers: 0,
            },
        );
        for leaf in 0..n {
            let sub = i * n as u64 + leaf as u64;
            let primary = leaf * r + (i as usize % r);
            self.subs.insert(
                sub,
                Sub {
                    logical: i,
                    primary_server: primary,
                    done: false,
                    started: false,
                    live: 0,
                    queued: Vec::new(),
                },
            );
            if self.counted(i) {
                self.out.subs += 1;
            }
            self.send(sub, primary, t, true, service());
            if self.spec.tied {
                self.send(sub, leaf * r + (primary + 1) % r, t, false, service());
            } else if let Some(d) = self.hedge.delay() {
                self.events.push(Reverse((t + d, Ev::Hedge(sub), sub)));
            }
        }
    }

    pub(super) fn send(&mut self, sub: u64, server: usize, t: u64, primary: bool, service: u64) {
        let id = self.next_copy;
        self.next_copy += 1;
        self.copies.insert(
            id,
            Copy {
                sub,
                server,
                service,
                sent: t,
                primary,
                cancelled: false,
            },
        );
        let s = self.subs.get_mut(&sub).expect("live sub");
        s.live += 1;
        let logical = s.logical;
        if self.counted(logical) {
            self.out.sent += 1;
        }
        if self.spec.tied && self.subs[&sub].started {
            // Its twin started first: dropped unserved, as the harness's worker drops it.
            self.cancel(id);
            self.copies.remove(&id);
            self.subs.get_mut(&sub).expect("live sub").live -= 1;
            self.drop_if_over(sub);
        } else if self.free[server] > 0 {
            // An idle worker: it starts the copy once it has woken.
            self.free[server] -= 1;
            let wake = Costs::draw(&mut self.costs.wake);
            if self.counted(logical) {
                self.out.wake.saturating_record(wake);
            }
            match wake {
                0 => self.start(id, t),
                w => self.events.push(Reverse((t + w, Ev::Start(id), id))),
            }
        } else {
            self.subs.get_mut(&sub).expect("live sub").queued.push(id);
            self.queues[server].push_back(id);
        }
    }

    pub(super) fn start(&mut self, id: u64, t: u64) {
        let c = &self.copies[&id];
        let (sub, service) = (c.sub, c.service);
        let s = self.subs.get_mut(&sub).expect("live sub");
        s.queued.retain(|&q| q != id);
        s.started = true;
        let (logical, cancel) = (
            s.logical,
            if self.spec.tied {
                std::mem::take(&mut s.queued)
            } else {
                Vec::new()
            },
        );
        if self.counted(logical) {
            self.out.served += 1;
        }
        // Tied: the first copy to start cancels the other while it is still queued.
        for q in cancel {
            self.cancel(q);
        }
        self.events.push(Reverse((t + service, Ev::Finish(id), id)));
    }

    /// A worker woken for copy `id` takes it: it serves it unless its sub-request has
    /// answered (or, tied, its twin started) meanwhile, as a harness worker drops such a copy.
    pub(super) fn woken(&mut self, id: u64, t: u64) {
        let sub = self.copies[&id].sub;
        let s = &self.subs[&sub];
        if s.done || (self.spec.tied && s.started) {
            self.cancel(id);
            let c = self.copies.remove(&id).expect("waking copy");
            self.subs.get_mut(&c.sub).expect("live sub").live -= 1;
            self.drop_if_over(c.sub);
            self.next_from_queue(c.server, t);
        } else {
            self.start(id, t);
        }
    }

    pub(super) fn cancel(&mut self, id: u64) {
        let c = self.copies.get_mut(&id).expect("live copy");
        if c.cancelled {
            return;
        }
        c.cancelled = true;
        let sub = c.sub;
        let s = self.subs.get_mut(&sub).expect("live sub");
        s.queued.retain(|&q| q != id);
        let logical = s.logical;
        if self.counted(logical) {
            self.out.cancelled += 1;
        }
    }

    pub(super) fn finish(&mut self, id: u64, t: u64) {
        let c = self.copies.remove(&id).expect("running copy");
        self.next_from_queue(c.server, t);
        if c.primary {
            self.hedge.observe(t - c.sent);
        }
        let counted = self.counted(self.subs[&c.sub].logical);
        if counted {
            self.out.copy.saturating_record(t - c.sent);
        }
        let s = self.subs.get_mut(&c.sub).expect("live sub");
        s.live -= 1;
        let logical = s.logical;
        if !s.done {
            s.done = true;
            // Hedged: the first answer wins, a copy still queued is cancelled.
            let queued = std::mem::take(&mut s.queued);
            for q in queued {
                self.cancel(q);
            }
            let l = self.logicals.get_mut(&logical).expect("live request");
            l.answers += 1;
            let (intended, released) = (l.intended, l.released);
            if counted {
                self.out.leaf.saturating_record(t - intended);
            }
            if l.answers == self.spec.needed() && counted {
                self.out.e2e.saturating_record(t - intended);
                self.out.e2e_released.saturating_record(t - released);
            }
            if l.answers == self.spec.leaves {
                self.logicals.remove(&logical);
            }
        }
        self.drop_if_over(c.sub);
    }

    pub(super) fn drop_if_over(&mut self, sub: u64) {
        if self.subs.get(&sub).is_some_and(|s| s.done && s.live == 0) {
            self.subs.remove(&sub);
        }
    }

    pub(super) fn next_from_queue(&mut self, server: usize, t: u64) {
        while let Some(q) = self.queues[server].pop_front() {
            let cancelled = self.copies.get(&q).is_some_and(|c| c.cancelled);
            if cancelled {
                let c = self.copies.remove(&q).expect("queued copy");
                if let Some(s) = self.subs.get_mut(&c.sub) {
                    s.live -= 1;
                }
                self.drop_if_over(c.sub);
                continue;
            }
            self.start(q, t);
            return;
        }
        self.free[server] += 1;
    }

    /// A hedge's delay ran out: its copy goes out once the dispatcher gets to it.
    pub(super) fn hedge_due(&mut self, sub: u64, t: u64, service: &mut dyn FnMut() -> u64) {
        if self.subs.get(&sub).is_none_or(|s| s.done) {
            return;
        }
        match Costs::draw(&mut self.costs.hedge_lag) {
            0 => self.hedge_fires(sub, t, 0, service),
            lag => self
                .events
                .push(Reverse((t + lag, Ev::HedgeSend(sub, lag), sub))),
        }
    }

    /// The hedge's copy of `sub` goes out at `t`, `lag` after its delay ran out, unless the
    /// sub-request has answered (the dispatcher looks when it sends).
    pub(super) fn hedge_fires(
        &mut self,
        sub: u64,
        t: u64,
        lag: u64,
        service: &mut dyn FnMut() -> u64,
    ) {
        let Some(s) = self.subs.get(&sub) else {
            return;
        };
        if s.done {
            return;
        }
        if self.counted(s.logical) {
            self.out.hedge_lag.saturating_record(lag);
        }
        let r = self.spec.replicas;
        let leaf = s.primary_server / r;
        let other = leaf * r + (s.primary_server % r + 1) % r;
        self.send(sub, other, t, false, service());
    }
}
