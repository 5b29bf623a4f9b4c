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
//!   every request due by then has been dealt.
//!
//! Everything a worker does after serving a request — histograms, records, counters — is
//! its own ([`crate::collector::Shard`], [`crate::harness::RecordWriter`]) and is deferred
//! to when it is idle (see `inline_worker` in [`crate::harness`]).

use crate::arrival::Share;
use crate::collector::IntervalSink;
use crate::queue::{Discipline, Dispatch};
use crate::schedule::{Item, Schedule, ScheduleStats};
use crate::slotbits::backoff;
use crossbeam_utils::CachePadded;
use parking_lot::{MappedMutexGuard, Mutex, MutexGuard};
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

mod own;
mod pick;

use own::WorkerQueue;

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
                    .map(|w| CachePadded::new(Mutex::new(WorkerQueue::new(seed, w))))
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

#[cfg(test)]
mod tests;
