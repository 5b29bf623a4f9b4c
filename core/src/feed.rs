//! How inline workers claim their next request without a lock on the way.
//!
//! The inline shaper (see [`crate::harness`]) has no shaper thread: a free worker takes the
//! next arrival of the schedule itself. That claim is on the measured path — whenever a
//! request is already waiting, the time between one request's `finished` and the next one's
//! `started` is queueing the run's ideal does not have — so it must cost a few tens of ns
//! and must not grow with the number of workers. A lock around the schedule did both wrong:
//! at 10 µs services its hand-offs added 15–30 % to the mean sojourn on 1–8 workers, and
//! beyond 8 workers the lock convoy collapsed the run (docs/methodology.md).
//!
//! So the schedule is split into a **producer** and **claims**:
//!
//! - The producer (the [`Schedule`]: arrival times and request payloads, in order) runs
//!   under a mutex, but only when some worker has nothing better to do: a worker that is
//!   early for its next arrival generates requests ahead ([`Feed::prefill_one`]), and a
//!   worker whose request has not been generated yet generates it (and those before it)
//!   itself. Generation order is the schedule's order whoever runs it, so a seed gives the
//!   same requests, times and dispatch as before.
//! - **Shared FIFO** (the default): generated requests wait in a ring; a worker claims the
//!   next one with one atomic ticket (`fetch_add`) and takes it from its slot, whose
//!   sequence number says whether it was written yet (Vyukov's bounded queue, with the
//!   single producer serialised by the mutex). The ticket is the only cache line every
//!   worker writes per request.
//! - **Per-worker FIFO**: the producer deals each request to its worker's own queue (the
//!   seeded assignment of [`Dispatch::PerWorker`]); a worker's queue is touched only by it
//!   and by whoever produces.
//! - **LIFO and random order** pick among the requests already due at the moment a worker
//!   becomes free. With one shared queue they claim from a ring too, without a lock: a
//!   frontier word releases the due requests into a bitmap, and clearing a bit is the claim
//!   (the newest due for LIFO, a uniform draw for random; [`pick`]). With per-worker queues
//!   each worker picks from its own queue (its lock is shared with the producer only), once
//!   every request due by then has been dealt. The schedule's locked claim
//!   ([`Schedule::claim`]) is the reference both are tested against.
//!
//! Everything a worker does after serving a request — histograms, records, counters — is
//! its own ([`crate::collector::Shard`], [`crate::harness::RecordWriter`]) and is deferred
//! to when it is idle (see `inline_worker` in [`crate::harness`]).

use crate::arrival::{derive_seed, Share};
use crate::collector::IntervalSink;
use crate::queue::{Discipline, Dispatch};
use crate::schedule::{Item, Schedule, ScheduleStats};
use crossbeam_utils::CachePadded;
use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

mod pick;

/// Requests the shared rings hold in all (generated ahead and not yet claimed); a power of two.
pub const RING: usize = 4096;

/// Requests generated ahead at most with per-worker queues, over all workers.
const PER_WORKER_AHEAD: u64 = RING as u64;

/// Requests a worker generates at once when the one it claimed was not generated yet (and
/// there is room): a saturated run's workers generate on demand, and one request per lock
/// hold would move the producer's state between CPUs for every request.
const ON_DEMAND_BATCH: u64 = 8;

/// One place of a ring. `seq` = p: free for position p; p + 1: holds position p's
/// request; a consumer that took position p frees the slot for p + the ring's length.
struct Slot {
    seq: AtomicU64,
    /// The request's intended time, readable by anyone (LIFO's and random order's frontier
    /// reads it before it owns the slot).
    time: AtomicU64,
    item: UnsafeCell<Item>,
    payload: UnsafeCell<Vec<u8>>,
}

// SAFETY: `item` and `payload` are written only by the producer while `seq` says the slot is
// free, and read only by the one consumer holding the slot's ticket while `seq` says it is
// full; `seq`'s release/acquire pairs order those accesses.
unsafe impl Sync for Slot {}

/// One producer's ring (shared FIFO): the requests of its share, by its own positions.
struct Ring {
    slots: Box<[CachePadded<Slot>]>,
    /// Requests its producer made in all, once its share ended (`u64::MAX` before).
    end: CachePadded<AtomicU64>,
}

impl Ring {
    fn new(len: usize) -> Ring {
        Ring {
            slots: (0..len)
                .map(|i| {
                    CachePadded::new(Slot {
                        seq: AtomicU64::new(i as u64),
                        time: AtomicU64::new(0),
                        item: UnsafeCell::new(Item::default()),
                        payload: UnsafeCell::new(Vec::with_capacity(64)),
                    })
                })
                .collect(),
            end: CachePadded::new(AtomicU64::new(u64::MAX)),
        }
    }
    fn len(&self) -> u64 {
        self.slots.len() as u64
    }
    fn slot(&self, pos: u64) -> &Slot {
        &self.slots[pos as usize & (self.slots.len() - 1)]
    }
}

/// A producer: its share of the schedule, and where its next request goes.
struct Producer {
    sched: Schedule,
    /// Next position to fill (= requests it generated).
    pos: u64,
    /// Payload buffers for per-worker queues.
    spare: Vec<Vec<u8>>,
}

/// A worker's own queue (per-worker dispatch).
struct WorkerQueue {
    items: VecDeque<(Item, Vec<u8>)>,
    /// Payload buffers the worker gave back, for the producer to reuse.
    spare: Vec<Vec<u8>>,
    /// Random order's draws.
    rng: Xoshiro256PlusPlus,
}

impl WorkerQueue {
    /// The request the discipline takes at `now`: among those due, the oldest (FIFO), the
    /// newest (LIFO) or any one (random); when none is due, the next to come.
    fn pick(&mut self, now: u64, d: Discipline) -> Option<(Item, Vec<u8>)> {
        if d == Discipline::Fifo {
            return self.items.pop_front();
        }
        // Arrival order makes the due requests a prefix (random order shuffles the prefix
        // only: a request taken is replaced by the first, which is due too).
        let due = self.items.partition_point(|(it, _)| it.intended <= now);
        match (d, due) {
            (_, 0) | (Discipline::Fifo, _) => self.items.pop_front(),
            (Discipline::Lifo, _) => self.items.remove(due - 1),
            (Discipline::Random, _) => {
                let i = self.rng.gen_range(0..due);
                self.items.swap_remove_front(i)
            }
        }
    }
}

// One feed a run: the variants' sizes (cache-padded counters) cost nothing worth a box.
#[allow(clippy::large_enum_variant)]
enum Mode {
    /// One shared FIFO: ticket `t` is request `t` of the run, made by producer `t mod m` at
    /// its position `t div m` (see [`Schedule::dealt`]).
    Shared {
        rings: Box<[Ring]>,
        /// The next request to claim.
        ticket: CachePadded<AtomicU64>,
    },
    PerWorker {
        /// FIFO, LIFO or random order within each worker's queue.
        discipline: Discipline,
        queues: Box<[CachePadded<Mutex<WorkerQueue>>]>,
        /// Requests each worker took, for bounding how far ahead the producer goes.
        taken: Box<[CachePadded<AtomicU64>]>,
        /// Requests the producer dealt.
        dealt: CachePadded<AtomicU64>,
        /// Requests the schedule has in all, once it ended (`u64::MAX` before).
        end: CachePadded<AtomicU64>,
        /// Intended time of the last request dealt (`u64::MAX` once the schedule ended): LIFO
        /// and random order pick only once every request due by their `now` is dealt.
        horizon: CachePadded<AtomicU64>,
    },
    /// LIFO or random order from one shared queue ([`pick`]).
    Picked(Box<pick::Pool>),
}

/// Where inline workers claim requests (see the module docs).
pub struct Feed {
    /// One producer, or (shared FIFO) several, each a dealt share of the run's stream.
    producers: Box<[CachePadded<Mutex<Producer>>]>,
    mode: Mode,
    /// Several producers each mark their own first measured request: the first one claimed
    /// keeps the mark (the measured phase begins once).
    begun: AtomicBool,
}

/// What one step of the producer did.
#[derive(Debug, PartialEq, Eq)]
enum Produced {
    One,
    /// No room ahead (the ring or the per-worker bound is full).
    Full,
    /// The schedule is over.
    End,
}

impl Feed {
    /// A feed for `threads` workers serving by `discipline` and `dispatch` from `sched`;
    /// `seed` seeds random order's draws.
    pub fn new(
        sched: Schedule,
        threads: usize,
        discipline: Discipline,
        dispatch: Dispatch,
        seed: u64,
    ) -> Feed {
        Self::with_producers(vec![sched], threads, discipline, dispatch, seed)
    }

    /// A feed whose requests come from `scheds`: one schedule, or (one shared FIFO only)
    /// the dealt shares `j` of `m = scheds.len()` of one ([`Schedule::dealt`]), in order.
    pub fn with_producers(
        scheds: Vec<Schedule>,
        threads: usize,
        discipline: Discipline,
        dispatch: Dispatch,
        seed: u64,
    ) -> Feed {
        let m = scheds.len();
        assert!(m >= 1, "a feed needs a schedule");
        let shared = (discipline, dispatch) == (Discipline::Fifo, Dispatch::Shared);
        assert!(
            m == 1 || shared,
            "several producers feed one shared FIFO only"
        );
        let mode = match (discipline, dispatch) {
            (Discipline::Fifo, Dispatch::Shared) => Mode::Shared {
                rings: (0..m)
                    .map(|_| Ring::new((RING / m).next_power_of_two().max(256)))
                    .collect(),
                ticket: CachePadded::new(AtomicU64::new(0)),
            },
            (discipline, Dispatch::PerWorker(_)) => Mode::PerWorker {
                discipline,
                queues: (0..threads)
                    .map(|w| {
                        CachePadded::new(Mutex::new(WorkerQueue {
                            items: VecDeque::new(),
                            spare: Vec::new(),
                            rng: Xoshiro256PlusPlus::seed_from_u64(derive_seed(
                                seed,
                                2000 + w as u64,
                            )),
                        }))
                    })
                    .collect(),
                taken: (0..threads).map(|_| CachePadded::default()).collect(),
                dealt: CachePadded::default(),
                end: CachePadded::new(AtomicU64::new(u64::MAX)),
                horizon: CachePadded::default(),
            },
            (d, Dispatch::Shared) => Mode::Picked(Box::new(pick::Pool::new(
                RING,
                threads,
                d == Discipline::Lifo,
                seed,
            ))),
        };
        Feed {
            producers: scheds
                .into_iter()
                .map(|sched| {
                    CachePadded::new(Mutex::new(Producer {
                        sched,
                        pos: 0,
                        spare: Vec::new(),
                    }))
                })
                .collect(),
            mode,
            begun: AtomicBool::new(false),
        }
    }

    /// Producers of this feed.
    pub fn producers(&self) -> usize {
        self.producers.len()
    }

    /// The (first) producer's schedule, locked (its bookkeeping, the thread shaper's `next`,
    /// a fan-out's dispatcher: all with one producer).
    pub fn schedule(&self) -> MappedMutexGuard<'_, Schedule> {
        MutexGuard::map(self.producers[0].lock(), |p| &mut p.sched)
    }

    /// Sets every producer's start (ns, harness clock) before the first request is drawn.
    pub fn set_start(&self, t0: u64) {
        for p in self.producers.iter() {
            p.lock().sched.set_start(t0);
        }
    }

    /// What the producers generated so far, as one schedule's.
    pub fn stats(&self) -> ScheduleStats {
        let all: Vec<ScheduleStats> = self
            .producers
            .iter()
            .map(|p| p.lock().sched.stats())
            .collect();
        ScheduleStats::merge(&all)
    }

    /// Worker `w`'s next request, its payload swapped into `buf`; `None` when the schedule
    /// is over. `now` matters only for LIFO and random order (they pick among the requests
    /// due by then).
    #[inline]
    pub fn claim(
        &self,
        w: usize,
        now: u64,
        buf: &mut Vec<u8>,
        sink: &IntervalSink,
    ) -> Option<Item> {
        match &self.mode {
            Mode::Shared { rings, ticket } => {
                let t = ticket.fetch_add(1, Ordering::Relaxed);
                let m = rings.len() as u64;
                if m == 1 {
                    // Returned as it is: moving the item through a local here cost a
                    // store-forwarding stall a claim (6.9 → 6.2 M/s at one worker).
                    return self.take_shared(rings, 0, t, buf, sink);
                }
                let mut item = self.take_shared(rings, (t % m) as usize, t / m, buf, sink)?;
                if item.first_measured && self.begun.swap(true, Ordering::AcqRel) {
                    item.first_measured = false;
                }
                Some(item)
            }
            Mode::PerWorker {
                discipline,
                queues,
                taken,
                end,
                horizon,
                ..
            } => {
                if *discipline != Discipline::Fifo {
                    self.deal_due(now, horizon, sink);
                }
                self.take_own(&queues[w], now, *discipline, &taken[w], end, buf, sink)
            }
            Mode::Picked(pool) => self.take_picked(pool, w, now, buf, sink),
        }
    }

    /// Takes position `k` of producer `j`'s ring (the holder of its ticket alone does).
    fn take_shared(
        &self,
        rings: &[Ring],
        j: usize,
        k: u64,
        buf: &mut Vec<u8>,
        sink: &IntervalSink,
    ) -> Option<Item> {
        let ring = &rings[j];
        let slot = ring.slot(k);
        let mut spins = 0u32;
        loop {
            if slot.seq.load(Ordering::Acquire) == k + 1 {
                // SAFETY: seq = k + 1 hands this slot to the holder of ticket k, us alone.
                let item = unsafe { *slot.item.get() };
                unsafe { std::ptr::swap(buf, slot.payload.get()) };
                slot.seq.store(k + ring.len(), Ordering::Release);
                return Some(item);
            }
            if k >= ring.end.load(Ordering::Acquire) {
                return None;
            }
            // Not generated yet: generate up to it (and a few beyond). Never block on the
            // lock: its holder may be waiting for us to empty this very slot (it is
            // generating a ring's length ahead), so keep looking at the slot while someone
            // else generates.
            if let Some(mut p) = self.producers[j].try_lock() {
                // One producer keeps generating one request per need (as it always did).
                let batch = if rings.len() > 1 { ON_DEMAND_BATCH } else { 0 };
                let mut extra = 0;
                while p.pos <= k || extra < batch {
                    let needed = p.pos <= k;
                    match self.produce(j, &mut p, sink, needed) {
                        Produced::One => extra += u64::from(!needed),
                        _ => break,
                    }
                }
            } else {
                backoff(&mut spins);
            }
        }
    }

    /// LIFO's or random order's claim from one shared queue: release what is due (generating
    /// up to the first request that is not), pick among the released; when none is waiting,
    /// take the next arrival.
    fn take_picked(
        &self,
        pool: &pick::Pool,
        w: usize,
        now: u64,
        buf: &mut Vec<u8>,
        sink: &IntervalSink,
    ) -> Option<Item> {
        let mut spins = 0u32;
        loop {
            let (d, generated) = pool.release(now);
            let ended = d >= pool.ring.end.load(Ordering::Acquire);
            if !generated && !ended {
                // The request at the frontier is not generated: every due one must be before
                // a pick (the newest due may be among them). Never block on the lock (its
                // holder may wait for a slot we are about to free).
                if let Some(mut p) = self.producers[0].try_lock() {
                    let mut extra = 0;
                    while p.pos <= d || extra < ON_DEMAND_BATCH {
                        let needed = p.pos <= d;
                        match self.produce(0, &mut p, sink, needed) {
                            Produced::One => extra += u64::from(!needed),
                            _ => break,
                        }
                    }
                } else {
                    backoff(&mut spins);
                }
                continue;
            }
            if let Some(item) = pool.pick(w, buf) {
                return Some(item);
            }
            if ended {
                if pool.empty() {
                    return None;
                }
                continue;
            }
            // Nothing due is waiting: the next arrival (generated, not due yet) is ours if
            // the frontier is still at it.
            if pool
                .due
                .compare_exchange(d, d + 1, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Some(
                    pool.take_next(d, buf)
                        .expect("the frontier's request was generated"),
                );
            }
        }
    }

    /// Per-worker LIFO or random order: deals every request due by `now` (its worker's pick
    /// may be the newest of them).
    fn deal_due(&self, now: u64, horizon: &AtomicU64, sink: &IntervalSink) {
        if horizon.load(Ordering::Acquire) > now {
            return;
        }
        let mut p = self.producers[0].lock();
        while horizon.load(Ordering::Acquire) <= now {
            if self.produce(0, &mut p, sink, true) == Produced::End {
                break;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn take_own(
        &self,
        q: &Mutex<WorkerQueue>,
        now: u64,
        discipline: Discipline,
        taken: &AtomicU64,
        end: &AtomicU64,
        buf: &mut Vec<u8>,
        sink: &IntervalSink,
    ) -> Option<Item> {
        loop {
            {
                let mut q = q.lock();
                if let Some((item, p)) = q.pick(now, discipline) {
                    let old = std::mem::replace(buf, p);
                    q.spare.push(old);
                    drop(q);
                    taken.fetch_add(1, Ordering::Release);
                    return Some(item);
                }
            }
            if end.load(Ordering::Acquire) != u64::MAX {
                // Everything was dealt before `end` was set: one last look.
                let mut q = q.lock();
                let (item, p) = q.pick(now, discipline)?;
                let old = std::mem::replace(buf, p);
                q.spare.push(old);
                drop(q);
                taken.fetch_add(1, Ordering::Release);
                return Some(item);
            }
            // Nothing dealt to us yet: generate until something is (or the schedule ends).
            let mut p = self.producers[0].lock();
            while q.lock().items.is_empty() {
                if self.produce(0, &mut p, sink, true) == Produced::End {
                    break;
                }
            }
        }
    }

    /// Generates one request ahead if there is room and nobody else is generating; false
    /// when it did not (an idle worker calls this while it waits for its next arrival).
    /// With several producers it tries each once, from worker `w`'s own (`w mod m`).
    pub fn prefill_one(&self, w: usize, sink: &IntervalSink) -> bool {
        let m = self.producers.len();
        if m == 1 {
            return match self.producers[0].try_lock() {
                Some(mut p) => self.produce(0, &mut p, sink, false) == Produced::One,
                None => false,
            };
        }
        (0..m).any(|i| {
            let j = (w + i) % m;
            match self.producers[j].try_lock() {
                Some(mut p) => self.produce(j, &mut p, sink, false) == Produced::One,
                None => false,
            }
        })
    }

    /// Generates producer `j`'s next request into its ring or its worker's queue. With
    /// `needed`, a worker waits for it: a ring slot whose last request was claimed but not
    /// yet taken is waited for (its claimant is between two instructions), and the
    /// per-worker bound on requests ahead does not apply.
    fn produce(&self, j: usize, p: &mut Producer, sink: &IntervalSink, needed: bool) -> Produced {
        match &self.mode {
            Mode::Shared { rings, ticket } => {
                let ring = &rings[j];
                let pos = p.pos;
                // Positions of this ring claimed so far: tickets t < ticket with t mod m = j.
                let (m, t) = (rings.len(), ticket.load(Ordering::Acquire));
                let claimed = if m == 1 {
                    t
                } else {
                    Share { j, m }.requests(t)
                };
                if pos >= claimed + ring.len() {
                    return Produced::Full;
                }
                let slot = ring.slot(pos);
                let mut spins = 0u32;
                while slot.seq.load(Ordering::Acquire) != pos {
                    if !needed {
                        return Produced::Full;
                    }
                    // Its last request was claimed (the ticket is past it) and its claimant
                    // is taking it without the lock.
                    backoff(&mut spins);
                }
                // SAFETY: seq = pos: the slot is free and we are its only producer (lock).
                let payload = unsafe { &mut *slot.payload.get() };
                match p.sched.next(payload, sink) {
                    None => {
                        ring.end.store(pos, Ordering::Release);
                        Produced::End
                    }
                    Some(item) => {
                        unsafe { *slot.item.get() = item };
                        slot.seq.store(pos + 1, Ordering::Release);
                        p.pos = pos + 1;
                        Produced::One
                    }
                }
            }
            Mode::PerWorker {
                queues,
                taken,
                dealt,
                end,
                horizon,
                ..
            } => {
                let d = dealt.load(Ordering::Relaxed);
                if !needed {
                    let took: u64 = taken.iter().map(|t| t.load(Ordering::Acquire)).sum();
                    if d >= took + PER_WORKER_AHEAD {
                        return Produced::Full;
                    }
                }
                let mut payload = p.spare.pop().unwrap_or_default();
                match p.sched.next(&mut payload, sink) {
                    None => {
                        end.store(d, Ordering::Release);
                        horizon.store(u64::MAX, Ordering::Release);
                        Produced::End
                    }
                    Some(item) => {
                        let mut q = queues[item.worker].lock();
                        q.items.push_back((item, payload));
                        if let Some(b) = q.spare.pop() {
                            p.spare.push(b);
                        }
                        drop(q);
                        dealt.store(d + 1, Ordering::Relaxed);
                        horizon.store(item.intended, Ordering::Release);
                        p.pos += 1;
                        Produced::One
                    }
                }
            }
            Mode::Picked(pool) => {
                let pos = p.pos;
                if let Err(full) = pool.make_room(pos, needed) {
                    return full;
                }
                let slot = pool.ring.slot(pos);
                // SAFETY: seq = pos: the slot is free and we are its only producer (lock).
                let payload = unsafe { &mut *slot.payload.get() };
                match p.sched.next(payload, sink) {
                    None => {
                        pool.ring.end.store(pos, Ordering::Release);
                        Produced::End
                    }
                    Some(item) => {
                        unsafe { *slot.item.get() = item };
                        slot.time.store(item.intended, Ordering::Relaxed);
                        slot.seq.store(pos + 1, Ordering::Release);
                        p.pos = pos + 1;
                        Produced::One
                    }
                }
            }
        }
    }
}

/// Spins a while, then yields the CPU (a waiter may share it with whoever it waits for).
#[inline]
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins > 200 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::Assign;
    use crate::schedule::Counter;
    use crate::spec::{Bound, RunSpec};
    use std::sync::Arc;

    fn spec(n: u64, threads: usize, dispatch: Dispatch) -> RunSpec {
        RunSpec {
            qps: 1e6,
            threads,
            dispatch,
            warmup: Bound::Requests(10),
            measure: Bound::Requests(n),
            ..RunSpec::default()
        }
    }

    /// Every request is claimed exactly once, with its own payload, by workers racing on
    /// the ring (some prefilling, some not); each worker sees its requests in schedule order.
    /// Workers `0..threads` racing to claim from `feed` until it ends: each worker's
    /// requests with their payload's counter, in the order it claimed them. After every
    /// `every`-th claim of an even worker (0: never) it generates up to `ahead` requests.
    /// `timed`: each claims at the clock's time (the schedule's times are on it) and then
    /// serves 0-3 us, or sleeps 6 ms once in 3 000 claims (so backlogs build and drain); else
    /// at time 0 (FIFO needs no time) and at once.
    fn race(
        feed: &Arc<Feed>,
        threads: usize,
        every: usize,
        ahead: usize,
        timed: bool,
    ) -> Vec<Vec<(Item, u64)>> {
        let sink = Arc::new(IntervalSink::new(threads));
        let handles: Vec<_> = (0..threads)
            .map(|w| {
                let (feed, sink) = (feed.clone(), sink.clone());
                std::thread::spawn(move || {
                    let mut buf = Vec::new();
                    let mut got = Vec::new();
                    let now = || if timed { crate::clock::now_ns() } else { 0 };
                    while let Some(it) = feed.claim(w, now(), &mut buf, &sink) {
                        got.push((it, u64::from_le_bytes(buf[..8].try_into().unwrap())));
                        let k = got.len() as u64;
                        if timed && k % 3000 == 1500 + 300 * w as u64 {
                            std::thread::sleep(std::time::Duration::from_millis(6));
                        } else if timed {
                            let until = crate::clock::now_ns() + (k * 7919 + w as u64) % 3000;
                            while crate::clock::now_ns() < until {
                                std::hint::spin_loop();
                            }
                        }
                        if every > 0 && w % 2 == 0 && got.len() % every == 0 {
                            for _ in 0..ahead {
                                feed.prefill_one(w, &sink);
                            }
                        }
                    }
                    got
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn racing_workers_claim_every_request_once_in_order() {
        for dispatch in [Dispatch::Shared, Dispatch::PerWorker(Assign::Random)] {
            let threads = 4;
            let n = 50_000;
            let s = spec(n, threads, dispatch);
            let reference = reference(&s);
            assert_eq!(reference.len() as u64, n + 10);
            let feed = Arc::new(Feed::new(
                Schedule::new(&s, Box::new(Counter(0)), 0),
                threads,
                Discipline::Fifo,
                dispatch,
                0,
            ));
            let raced = race(&feed, threads, 3, 5, false);
            let mut all = Vec::new();
            for (w, got) in raced.into_iter().enumerate() {
                let got: Vec<_> = got
                    .into_iter()
                    .map(|(it, p)| (it.index, it.intended, it.worker, p))
                    .collect();
                assert!(
                    got.windows(2).all(|p| p[0].0 < p[1].0),
                    "{dispatch}: worker {w} out of order"
                );
                if dispatch != Dispatch::Shared {
                    assert!(
                        got.iter().all(|g| g.2 == w),
                        "{dispatch}: a request for another worker"
                    );
                }
                all.extend(got);
            }
            each_once(all, &reference, &dispatch.to_string());
            assert_eq!(feed.schedule().stats().generated_measured, n);
        }
    }

    /// The ring never holds more than it has room for, and generating ahead stops there.
    #[test]
    fn generating_ahead_is_bounded_by_the_ring() {
        let s = spec(3 * RING as u64, 1, Dispatch::Shared);
        let feed = Feed::new(
            Schedule::new(&s, Box::new(Counter(0)), 0),
            1,
            Discipline::Fifo,
            Dispatch::Shared,
            0,
        );
        let sink = IntervalSink::new(1);
        let mut n = 0;
        while feed.prefill_one(0, &sink) {
            n += 1;
        }
        assert_eq!(n, RING);
        let mut buf = Vec::new();
        assert_eq!(feed.claim(0, 0, &mut buf, &sink).unwrap().index, 0);
        assert!(
            feed.prefill_one(0, &sink),
            "a claimed slot makes room for one more"
        );
        assert!(!feed.prefill_one(0, &sink));
    }

    /// Several producers (dealt shares) feeding racing workers: every request of the one
    /// producer's schedule is claimed exactly once — the same indexes and arrival times —
    /// each worker sees its requests in arrival order, the measured phase begins once, and
    /// the merged bookkeeping counts the run.
    #[test]
    fn several_producers_feed_the_one_schedule_in_order() {
        let threads = 3;
        let n = 60_000;
        let s = spec(n, threads, Dispatch::Shared);
        let reference: Vec<(u64, u64)> = {
            let mut sched = Schedule::new(&s, Box::new(Counter(0)), 0);
            let sink = IntervalSink::new(1);
            let mut buf = Vec::new();
            std::iter::from_fn(|| sched.next(&mut buf, &sink))
                .map(|it| (it.index, it.intended))
                .collect()
        };
        for m in [2, 3, 5] {
            let scheds = (0..m)
                .map(|j| {
                    let share = Share::new(j, m).unwrap();
                    Schedule::dealt(&s, Box::new(Counter(1_000_000 * j as u64)), 0, share)
                })
                .collect();
            let feed = Arc::new(Feed::with_producers(
                scheds,
                threads,
                Discipline::Fifo,
                Dispatch::Shared,
                0,
            ));
            let mut all = Vec::new();
            for got in race(&feed, threads, 7, 9, false) {
                let got: Vec<_> = got
                    .into_iter()
                    .map(|(it, p)| (it.index, it.intended, it.first_measured, p))
                    .collect();
                assert!(
                    got.windows(2).all(|p| p[0].0 < p[1].0),
                    "m {m}: out of order"
                );
                all.extend(got);
            }
            all.sort();
            let got: Vec<(u64, u64)> = all.iter().map(|g| (g.0, g.1)).collect();
            assert_eq!(got, reference, "m {m}");
            assert_eq!(all.iter().filter(|g| g.2).count(), 1, "m {m}: begun once");
            // Request i came from producer i mod m, with that producer's own payloads.
            for g in &all {
                let j = g.0 % m as u64;
                assert_eq!(
                    g.3,
                    1_000_000 * j + g.0 / m as u64 + 1,
                    "m {m}: request {}",
                    g.0
                );
            }
            let st = feed.stats();
            assert_eq!(
                (st.generated_warmup, st.generated_measured),
                (10, n),
                "m {m}"
            );
            assert_eq!(feed.producers(), m);
        }
    }

    /// `got` (index, intended, worker, payload counter), sorted, is `reference` request for
    /// request: every one claimed exactly once, each with the payload generated for it (the
    /// counter is 1-based).
    fn each_once(mut got: Vec<(u64, u64, usize, u64)>, reference: &[(u64, u64, usize)], tag: &str) {
        got.sort();
        assert_eq!(got.len(), reference.len(), "{tag}: every request once");
        for (g, r) in got.iter().zip(reference) {
            assert_eq!((g.0, g.1, g.2), *r, "{tag}");
            assert_eq!(g.3, g.0 + 1, "{tag}: request {} got another's payload", g.0);
        }
    }

    /// The whole schedule of `s` as (index, intended, worker), in order.
    fn reference(s: &RunSpec) -> Vec<(u64, u64, usize)> {
        let mut sched = Schedule::new(s, Box::new(Counter(0)), 0);
        let sink = IntervalSink::new(1);
        let mut buf = Vec::new();
        std::iter::from_fn(|| sched.next(&mut buf, &sink))
            .map(|it| (it.index, it.intended, it.worker))
            .collect()
    }

    /// One thread claims for workers in turn on a simulated clock (services of 0.2-1.8 us
    /// at 1 M arrivals/s, and every 7 000 claims a stall of 9 ms: a backlog of 9 000, more
    /// than the ring holds): every pick is what the discipline takes from the requests
    /// unclaimed at that moment. LIFO: the newest due in the worker's queue, exactly;
    /// random: a due one; both: the earliest to come when none is due.
    #[test]
    fn one_free_worker_picks_what_the_discipline_takes() {
        for d in [Discipline::Lifo, Discipline::Random] {
            for (dispatch, threads) in [
                (Dispatch::Shared, 1),
                (Dispatch::Shared, 3),
                (Dispatch::PerWorker(Assign::Random), 3),
            ] {
                let s = spec(30_000, threads, dispatch);
                let all = reference(&s);
                let feed = Feed::new(
                    Schedule::new(&s, Box::new(Counter(0)), 0),
                    threads,
                    d,
                    dispatch,
                    7,
                );
                let sink = IntervalSink::new(threads);
                let per_worker = dispatch.is_per_worker();
                let queue_of = |i: usize| if per_worker { all[i].2 } else { 0 };
                // Unclaimed indexes per queue.
                let mut open: Vec<std::collections::BTreeSet<u64>> = (0..threads)
                    .map(|q| {
                        (0..all.len())
                            .filter(|&i| queue_of(i) == q)
                            .map(|i| i as u64)
                            .collect()
                    })
                    .collect();
                let mut buf = Vec::new();
                let mut now = 0u64;
                let mut k = 0u64;
                let mut claimed = 0;
                let mut from_cellar_era = false;
                loop {
                    let w = (k % threads as u64) as usize;
                    let q = if per_worker { w } else { 0 };
                    let Some(it) = feed.claim(w, now, &mut buf, &sink) else {
                        assert!(open[q].is_empty(), "{d} {dispatch}: ended early");
                        if open.iter().all(|o| o.is_empty()) {
                            break;
                        }
                        k += 1;
                        continue;
                    };
                    let tag = format!("{d} {dispatch} w{w}: claim {k} at {now}");
                    assert_eq!(
                        u64::from_le_bytes(buf[..8].try_into().unwrap()),
                        it.index + 1,
                        "{tag}: payload"
                    );
                    assert_eq!(
                        (it.intended, it.worker),
                        (all[it.index as usize].1, all[it.index as usize].2),
                        "{tag}"
                    );
                    assert!(
                        open[q].contains(&it.index),
                        "{tag}: {} twice or not its queue's",
                        it.index
                    );
                    let due_newest = open[q]
                        .iter()
                        .rev()
                        .find(|&&i| all[i as usize].1 <= now)
                        .copied();
                    let earliest = *open[q].iter().next().unwrap();
                    match (d, due_newest) {
                        (_, None) => assert_eq!(it.index, earliest, "{tag}: none due"),
                        (Discipline::Lifo, Some(n)) => assert_eq!(it.index, n, "{tag}: LIFO"),
                        (_, Some(_)) => {
                            assert!(it.intended <= now, "{tag}: random took one not due")
                        }
                    }
                    if due_newest.is_some()
                        && open[q]
                            .iter()
                            .filter(|&&i| all[i as usize].1 <= now)
                            .count()
                            > RING
                    {
                        from_cellar_era = true;
                    }
                    open[q].remove(&it.index);
                    claimed += 1;
                    k += 1;
                    now = now.max(it.intended) + 200 + (k * 7919 % 1600);
                    if k.is_multiple_of(7000) {
                        now += 9_000_000;
                    }
                }
                assert_eq!(claimed, all.len(), "{d} {dispatch}");
                assert!(
                    from_cellar_era || per_worker,
                    "{d} {dispatch}: the backlog never passed the ring"
                );
            }
        }
    }

    /// Random order draws uniformly: with every request of a short schedule due, the first
    /// pick falls on each of the 20 about equally often over 600 seeds (a pick that favoured
    /// the oldest, the newest or one word of the pool would put hundreds on one).
    #[test]
    fn random_order_draws_uniformly() {
        for dispatch in [Dispatch::Shared, Dispatch::PerWorker(Assign::RoundRobin)] {
            let s = spec(10, 1, dispatch);
            let mut first = [0u32; 20];
            let mut last = [0u32; 20];
            for seed in 0..600 {
                let feed = Feed::new(
                    Schedule::new(&s, Box::new(Counter(0)), 0),
                    1,
                    Discipline::Random,
                    dispatch,
                    seed,
                );
                let sink = IntervalSink::new(1);
                let mut buf = Vec::new();
                let got: Vec<u64> =
                    std::iter::from_fn(|| feed.claim(0, u64::MAX / 2, &mut buf, &sink))
                        .map(|it| it.index)
                        .collect();
                assert_eq!(got.len(), 20);
                first[got[0] as usize] += 1;
                last[got[19] as usize] += 1;
            }
            for (i, (&f, &l)) in first.iter().zip(&last).enumerate() {
                assert!(
                    (8..=56).contains(&f),
                    "{dispatch}: request {i} first {f} times of 600"
                );
                assert!(
                    (8..=56).contains(&l),
                    "{dispatch}: request {i} last {l} times of 600"
                );
            }
        }
        // 150 requests fill three words of the pool's bitmap (64, 64 and 22 of them): the
        // first pick falls in each in proportion (expected 256, 256 and 88 of 600; a draw
        // from the newest word only, or from the words as if equally full, is far off).
        let s = spec(140, 1, Dispatch::Shared);
        let mut by_word = [0u32; 3];
        for seed in 0..600 {
            let feed = Feed::new(
                Schedule::new(&s, Box::new(Counter(0)), 0),
                1,
                Discipline::Random,
                Dispatch::Shared,
                seed,
            );
            let sink = IntervalSink::new(1);
            let mut buf = Vec::new();
            let it = feed.claim(0, u64::MAX / 2, &mut buf, &sink).unwrap();
            by_word[(it.index / 64) as usize] += 1;
        }
        assert!(
            (196..=316).contains(&by_word[0])
                && (196..=316).contains(&by_word[1])
                && (45..=131).contains(&by_word[2]),
            "first picks by word of the pool: {by_word:?} (expected about 256, 256, 88)"
        );
    }

    /// Workers racing in real time (1 M arrivals/s, services of 0-3 us, each worker pausing
    /// 6 ms now and then, so backlogs build and drain): every request is claimed
    /// exactly once with its own payload, by LIFO and random order, shared and per worker.
    #[test]
    fn racing_lifo_and_random_claim_every_request_once() {
        for d in [Discipline::Lifo, Discipline::Random] {
            for dispatch in [Dispatch::Shared, Dispatch::PerWorker(Assign::Random)] {
                let threads = 4;
                let n = 40_000;
                let s = spec(n, threads, dispatch);
                let all = reference(&s);
                let t0 = crate::clock::now_ns();
                let feed = Arc::new(Feed::new(
                    Schedule::new(&s, Box::new(Counter(0)), t0),
                    threads,
                    d,
                    dispatch,
                    3,
                ));
                let mut got: Vec<(u64, u64, usize, u64)> = Vec::new();
                for (w, claimed) in race(&feed, threads, 5, 1, true).into_iter().enumerate() {
                    for (it, p) in claimed {
                        if dispatch.is_per_worker() {
                            assert_eq!(it.worker, w, "{d} {dispatch}: another worker's request");
                        }
                        got.push((it.index, it.intended - t0, it.worker, p));
                    }
                }
                each_once(got, &all, &format!("{d} {dispatch}"));
            }
        }
    }
}
