//! The discrete-event G/G/n engine behind every queueing "ideal".
//!
//! Requests ([`Job`]s) are pushed in arrival order with the service time
//! they need; the engine returns when each starts and ends ([`Done`]) on
//! `servers` identical servers that never idle while work waits and never
//! pre-empt. What differs between runs is who waits where and who goes
//! next:
//!
//! - **dispatch** ([`Dispatch`]): one shared queue (M/G/n), or a queue per
//!   server with each request assigned a server on arrival (n × M/G/1: a
//!   request can wait behind a busy server while another idles). A job may
//!   carry its server (a replay of a per-worker run uses the worker the run
//!   recorded); otherwise the engine assigns one (random or round-robin,
//!   seeded).
//! - **discipline** ([`Discipline`]): which waiting request a freed server
//!   takes: the oldest (FIFO), the newest (LIFO) or any one uniformly
//!   (random), exactly as [`crate::queue::RequestQueue`] picks.
//!
//! Tie rule: a server that frees at the same nanosecond as an arrival
//! picks its next request *before* that arrival joins the queue. FIFO and
//! per-worker FIFO results do not depend on it; LIFO and random order do
//! (rarely: integer-ns times rarely coincide except with fixed gaps and
//! fixed service times).
//!
//! Streaming: the engine holds only the requests that wait, so a replay of
//! any length needs memory for its backlog alone. FIFO results come out at
//! [`Sim::push`] (a FIFO start is known on arrival); other disciplines'
//! when a later arrival or [`Sim::finish`] decides them. Everything is
//! integer ns and, for a given seed, deterministic.

use crate::queue::{Assigner, Discipline, Dispatch};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// One request: when it arrives, how long it needs, and (optionally) the
/// server it must use under per-worker dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Job {
    /// Caller's identifier, handed back in [`Done`].
    pub id: u64,
    /// Arrival time, ns.
    pub arrival: u64,
    /// Service time, ns.
    pub service: u64,
    /// The server it must use (per-worker dispatch); `None`: the engine assigns one.
    pub worker: Option<usize>,
}

/// When a request started and ended, and on which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Done {
    /// The job's identifier.
    pub id: u64,
    /// Arrival time, ns.
    pub arrival: u64,
    /// Start of service, ns.
    pub start: u64,
    /// End of service, ns.
    pub end: u64,
    /// The server that served it.
    pub server: usize,
}

impl Done {
    /// Time from arrival to the end of service.
    #[inline]
    pub fn sojourn(&self) -> u64 {
        self.end - self.arrival
    }
}

/// The queueing system to simulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SimConfig {
    /// Identical servers (workers).
    pub servers: usize,
    /// Which waiting job a freed server takes.
    pub discipline: Discipline,
    /// One queue or one per server.
    pub dispatch: Dispatch,
    /// Seeds random order and random assignment.
    pub seed: u64,
}

impl SimConfig {
    /// `servers` FIFO servers sharing one queue.
    pub fn fifo(servers: usize) -> Self {
        SimConfig {
            servers,
            discipline: Discipline::Fifo,
            dispatch: Dispatch::Shared,
            seed: 1,
        }
    }
}

/// When each server is next free. Few servers: a linear scan beats a heap.
enum Servers {
    Few(Vec<u64>),
    Many(BinaryHeap<Reverse<(u64, usize)>>),
}

impl Servers {
    fn new(n: usize) -> Self {
        if n <= 16 {
            Servers::Few(vec![0; n])
        } else {
            Servers::Many((0..n).map(|w| Reverse((0, w))).collect())
        }
    }

    /// The earliest-free server (lowest index among ties), taken out until
    /// [`Servers::put`] returns it.
    #[inline]
    fn take(&mut self) -> (u64, usize) {
        match self {
            Servers::Few(v) => {
                let mut best = (v[0], 0);
                for (w, &t) in v.iter().enumerate().skip(1) {
                    if t < best.0 {
                        best = (t, w);
                    }
                }
                best
            }
            Servers::Many(h) => h.pop().expect("servers ≥ 1").0,
        }
    }

    #[inline]
    fn put(&mut self, w: usize, free_at: u64) {
        match self {
            Servers::Few(v) => v[w] = free_at,
            Servers::Many(h) => h.push(Reverse((free_at, w))),
        }
    }
}

/// One server with its own queue (per-worker dispatch).
#[derive(Default)]
struct Lane {
    free_at: u64,
    waiting: VecDeque<Job>,
}

/// The engine; see the module docs.
pub struct Sim {
    cfg: SimConfig,
    assigner: Assigner,
    rng: Xoshiro256PlusPlus,
    shared: Servers,
    waiting: VecDeque<Job>,
    lanes: Vec<Lane>,
    last_arrival: u64,
}

impl Sim {
    /// An empty system.
    pub fn new(cfg: SimConfig) -> Self {
        let n = cfg.servers.max(1);
        let assign = match cfg.dispatch {
            Dispatch::PerWorker(a) => a,
            Dispatch::Shared => Default::default(),
        };
        Sim {
            cfg: SimConfig { servers: n, ..cfg },
            assigner: Assigner::new(n, assign, cfg.seed ^ 0xA551_6E00),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            shared: Servers::new(n),
            waiting: VecDeque::new(),
            lanes: (0..n).map(|_| Lane::default()).collect(),
            last_arrival: 0,
        }
    }

    /// Requests waiting right now (the backlog the engine holds).
    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.lanes.iter().map(|l| l.waiting.len()).sum::<usize>()
    }

    /// Adds the next arrival (arrivals must not decrease); `out` receives
    /// every request whose start this arrival decides.
    #[inline]
    pub fn push(&mut self, job: Job, out: &mut impl FnMut(Done)) {
        debug_assert!(job.arrival >= self.last_arrival, "arrivals out of order");
        self.last_arrival = job.arrival;
        match (self.cfg.dispatch, self.cfg.discipline) {
            (Dispatch::Shared, Discipline::Fifo) => {
                let (free, w) = self.shared.take();
                let start = job.arrival.max(free);
                self.shared.put(w, start + job.service);
                out(done(&job, start, w));
            }
            (Dispatch::Shared, _) => self.push_shared(job, out),
            (Dispatch::PerWorker(_), d) => {
                let w = match job.worker {
                    Some(w) => w % self.cfg.servers,
                    None => self.assigner.next_worker(),
                };
                let lane = &mut self.lanes[w];
                if d == Discipline::Fifo {
                    let start = job.arrival.max(lane.free_at);
                    lane.free_at = start + job.service;
                    out(done(&job, start, w));
                } else {
                    lane_push(lane, w, job, d, &mut self.rng, out);
                }
            }
        }
    }

    fn push_shared(&mut self, job: Job, out: &mut impl FnMut(Done)) {
        // Servers freeing up to (and at) this arrival take waiting work first.
        while !self.waiting.is_empty() {
            let (free, w) = self.shared.take();
            if free > job.arrival {
                self.shared.put(w, free);
                break;
            }
            let next = pick(&mut self.waiting, self.cfg.discipline, &mut self.rng);
            self.shared.put(w, free + next.service);
            out(done(&next, free, w));
        }
        let (free, w) = self.shared.take();
        if free <= job.arrival {
            // An idle server (the queue is empty, or the loop above went on).
            self.shared.put(w, job.arrival + job.service);
            out(done(&job, job.arrival, w));
        } else {
            self.shared.put(w, free);
            self.waiting.push_back(job);
        }
    }

    /// Serves everything still waiting (no more arrivals).
    pub fn finish(&mut self, out: &mut impl FnMut(Done)) {
        while !self.waiting.is_empty() {
            let (free, w) = self.shared.take();
            let next = pick(&mut self.waiting, self.cfg.discipline, &mut self.rng);
            self.shared.put(w, free + next.service);
            out(done(&next, free, w));
        }
        for (w, lane) in self.lanes.iter_mut().enumerate() {
            drain_lane(lane, w, u64::MAX, self.cfg.discipline, &mut self.rng, out);
        }
    }
}

#[inline]
fn done(j: &Job, start: u64, server: usize) -> Done {
    Done {
        id: j.id,
        arrival: j.arrival,
        start,
        end: start + j.service,
        server,
    }
}

/// The next request a freed server takes, as [`crate::queue::RequestQueue`] picks it.
#[inline]
fn pick(q: &mut VecDeque<Job>, d: Discipline, rng: &mut Xoshiro256PlusPlus) -> Job {
    let j = match d {
        Discipline::Fifo => q.pop_front(),
        Discipline::Lifo => q.pop_back(),
        Discipline::Random => {
            let i = rng.gen_range(0..q.len());
            q.swap_remove_back(i)
        }
    };
    j.expect("called with work waiting")
}

/// Serves a lane's waiting requests that start no later than `until`.
fn drain_lane(
    lane: &mut Lane,
    w: usize,
    until: u64,
    d: Discipline,
    rng: &mut Xoshiro256PlusPlus,
    out: &mut impl FnMut(Done),
) {
    while !lane.waiting.is_empty() && lane.free_at <= until {
        let next = pick(&mut lane.waiting, d, rng);
        let start = lane.free_at;
        lane.free_at = start + next.service;
        out(done(&next, start, w));
    }
}

fn lane_push(
    lane: &mut Lane,
    w: usize,
    job: Job,
    d: Discipline,
    rng: &mut Xoshiro256PlusPlus,
    out: &mut impl FnMut(Done),
) {
    drain_lane(lane, w, job.arrival, d, rng, out);
    if lane.waiting.is_empty() && lane.free_at <= job.arrival {
        lane.free_at = job.arrival + job.service;
        out(done(&job, job.arrival, w));
    } else {
        lane.waiting.push_back(job);
    }
}

/// Replays `jobs` (in arrival order) and returns every request's result,
/// in completion-decision order. For inputs that fit in memory.
pub fn replay(cfg: SimConfig, jobs: impl IntoIterator<Item = Job>) -> Vec<Done> {
    let mut sim = Sim::new(cfg);
    let mut v = Vec::new();
    let mut out = |d: Done| v.push(d);
    for j in jobs {
        sim.push(j, &mut out);
    }
    sim.finish(&mut out);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Assign;
    use proptest::prelude::*;

    fn jobs(a: &[u64], s: &[u64]) -> Vec<Job> {
        a.iter()
            .zip(s)
            .enumerate()
            .map(|(i, (&arrival, &service))| Job {
                id: i as u64,
                arrival,
                service,
                worker: None,
            })
            .collect()
    }

    fn sojourns(cfg: SimConfig, a: &[u64], s: &[u64]) -> Vec<u64> {
        let mut v = vec![0; a.len()];
        for d in replay(cfg, jobs(a, s)) {
            v[d.id as usize] = d.sojourn();
        }
        v
    }

    fn cfg(n: usize, discipline: Discipline, dispatch: Dispatch) -> SimConfig {
        SimConfig {
            servers: n,
            discipline,
            dispatch,
            seed: 7,
        }
    }

    #[test]
    fn small_cases_by_hand() {
        let (a, s) = ([0, 0, 0], [10, 10, 10]);
        let sh = Dispatch::Shared;
        assert_eq!(sojourns(cfg(1, Discipline::Fifo, sh), &a, &s), [10, 20, 30]);
        // LIFO: the first starts at once; at 10 the newest (id 2) goes next.
        assert_eq!(sojourns(cfg(1, Discipline::Lifo, sh), &a, &s), [10, 30, 20]);
        assert_eq!(sojourns(cfg(3, Discipline::Lifo, sh), &a, &s), [10, 10, 10]);
        // Tie rule: the server freed at 10 takes waiting id 1 before id 2 arrives at 10.
        assert_eq!(
            sojourns(cfg(1, Discipline::Lifo, sh), &[0, 5, 10], &[10, 10, 10]),
            [10, 15, 20]
        );
        // Per-worker round-robin on 2 servers: 0,2 on server 0; 1,3 on server 1.
        let rr = Dispatch::PerWorker(Assign::RoundRobin);
        assert_eq!(
            sojourns(
                cfg(2, Discipline::Fifo, rr),
                &[0, 0, 0, 0],
                &[10, 10, 10, 10]
            ),
            [10, 10, 20, 20]
        );
        // A job pinned to a busy worker waits although the other is idle.
        let pinned: Vec<Job> = jobs(&[0, 1], &[10, 10])
            .into_iter()
            .map(|j| Job {
                worker: Some(0),
                ..j
            })
            .collect();
        let d = replay(cfg(2, Discipline::Fifo, rr), pinned);
        assert_eq!(d[1].start, 10);
        assert_eq!(d[1].server, 0);
    }

    proptest! {
        #[test]
        fn shared_fifo_matches_lindley(gaps in proptest::collection::vec(0u64..500, 1..300),
                                       svc in proptest::collection::vec(1u64..900, 300),
                                       n in 1usize..20) {
            let a: Vec<u64> = gaps.iter().scan(0, |t, g| { *t += g; Some(*t) }).collect();
            let s = &svc[..a.len()];
            // The textbook recursion: each arrival takes the earliest-free server.
            let mut free = vec![0u64; n];
            let want: Vec<u64> = a.iter().zip(s).map(|(&a, &s)| {
                let w = (0..n).min_by_key(|&w| free[w]).unwrap();
                let start = a.max(free[w]);
                free[w] = start + s;
                start + s - a
            }).collect();
            prop_assert_eq!(sojourns(cfg(n, Discipline::Fifo, Dispatch::Shared), &a, s), want);
        }

        #[test]
        fn every_discipline_serves_everyone_once_without_idling(
            gaps in proptest::collection::vec(0u64..300, 1..300), n in 1usize..4, d in 0usize..3, pw in any::<bool>()) {
            let a: Vec<u64> = gaps.iter().scan(0, |t, g| { *t += g; Some(*t) }).collect();
            let s = vec![100u64; a.len()];
            let disc = [Discipline::Fifo, Discipline::Lifo, Discipline::Random][d];
            let disp = if pw { Dispatch::PerWorker(Assign::Random) } else { Dispatch::Shared };
            let done = replay(cfg(n, disc, disp), jobs(&a, &s));
            let mut ids: Vec<u64> = done.iter().map(|d| d.id).collect();
            ids.sort_unstable();
            prop_assert_eq!(ids, (0..a.len() as u64).collect::<Vec<_>>());
            // With equal service times every work-conserving order gives the
            // same multiset of end times: compare with FIFO.
            if !pw {
                let mut ends: Vec<u64> = done.iter().map(|d| d.end).collect();
                let mut fifo: Vec<u64> = replay(cfg(n, Discipline::Fifo, disp), jobs(&a, &s))
                    .iter().map(|d| d.end).collect();
                ends.sort_unstable();
                fifo.sort_unstable();
                prop_assert_eq!(ends, fifo);
            }
            for x in &done {
                prop_assert!(x.start >= x.arrival && x.end == x.start + 100);
            }
        }
    }
}
