//! LIFO and random order from one shared queue without a lock on the claim.
//!
//! Both pick among the requests *due* when a worker becomes free (the newest one, or any one
//! uniformly), so a claim needs a view of the whole backlog. Under one lock that view cost
//! LIFO 3 % of its ideal mean at 4 workers on a 16-CPU host (docs/hosts.md), and it would not
//! scale. Here the backlog is a ring of slots in arrival order with three shared words:
//!
//! - `due`, the **frontier**: every position below it has been *released* (it was due) or
//!   handed out as the next arrival. A free worker first releases every generated request whose
//!   intended time has come, by moving `due` past them with one compare-and-swap, then sets
//!   their bits in the pool.
//! - the **pool**, one bit per slot: set while the slot holds a released, unclaimed request.
//!   Clearing a set bit (`fetch_and`) is the claim: whoever cleared it owns the request. LIFO
//!   scans down from the frontier for the highest set bit (64 slots per word read); random
//!   order clears a set bit drawn uniformly (the bits, the count, the cellar below and the
//!   picks are [`crate::slotbits::BitPool`], which the thread shaper's queue shares).
//! - `pooled`, how many bits are set or about to be (it rises before the frontier moves, so a
//!   worker that sees the frontier at the schedule's end and `pooled` at zero knows nothing
//!   is left).
//!
//! When nothing is due a worker takes the next arrival itself: it moves the frontier by one
//! and waits for that request, as a FIFO worker takes its ticket.
//!
//! The ring holds [`super::RING`] requests. A LIFO backlog can keep an old request unclaimed
//! while newer ones pass through (it waits for the busy period to end); when a due request
//! must be generated into the slot such a request still holds, the producer moves the old one
//! to the **cellar**, a locked list of the oldest requests in arrival order. Every request in
//! the cellar is older than any in the ring and was due when it moved, so LIFO takes from the
//! cellar's newest end only when the ring has nothing due, and random order draws over the
//! ring's pool and the cellar together. The cellar is touched only after a backlog of a ring's
//! length, never on the common path.
//!
//! Two workers that become free within a few nanoseconds of each other may pick in either
//! order, as they would from one locked backlog; each request is served exactly once, and
//! one free worker alone picks exactly what the discipline defines (tested pick by pick).

use super::{backoff, Produced, Ring};
use crate::schedule::Item;
use crate::slotbits::{BitPool, Picked};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::atomic::{AtomicU64, Ordering};

/// The shared backlog of LIFO or random order (see the module docs).
pub(super) struct Pool {
    pub(super) ring: Ring,
    /// The bits of released, unclaimed requests, their count and the cellar (arrival order).
    pool: BitPool<(Item, Vec<u8>)>,
    /// The frontier: positions below it were released or handed out as the next arrival.
    pub(super) due: CachePadded<AtomicU64>,
    /// Random order's draws, one generator per worker (each locked only by its worker).
    rngs: Box<[CachePadded<Mutex<Xoshiro256PlusPlus>>]>,
    lifo: bool,
}

impl Pool {
    /// A pool for `threads` workers; `lifo` false is random order, drawn from `seed`.
    pub(super) fn new(len: usize, threads: usize, lifo: bool, seed: u64) -> Pool {
        Pool {
            pool: BitPool::new(len),
            ring: Ring::new(len),
            due: CachePadded::new(AtomicU64::new(0)),
            rngs: (0..threads.max(1))
                .map(|w| {
                    CachePadded::new(Mutex::new(Xoshiro256PlusPlus::seed_from_u64(
                        crate::arrival::derive_seed(seed, 1000 + w as u64),
                    )))
                })
                .collect(),
            lifo,
        }
    }

    /// Releases every generated request from the frontier on whose intended time is `now` or
    /// earlier. Returns the frontier after, and whether the request at it is generated (false:
    /// the caller generates it and asks again).
    pub(super) fn release(&self, now: u64) -> (u64, bool) {
        loop {
            let d = self.due.load(Ordering::Acquire);
            let mut k = 0u64;
            let generated = loop {
                let pos = d + k;
                let slot = self.ring.slot(pos);
                if slot.seq.load(Ordering::Acquire) != pos + 1 {
                    break false;
                }
                // Written before `seq` was published; if the slot has moved on since, the
                // frontier has too and the exchange below fails.
                if slot.time.load(Ordering::Relaxed) > now {
                    break true;
                }
                k += 1;
            };
            if k == 0 {
                return (d, generated);
            }
            self.pool.pooled.fetch_add(k, Ordering::SeqCst);
            if self
                .due
                .compare_exchange(d, d + k, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                self.pool.pooled.fetch_sub(k, Ordering::SeqCst);
                continue;
            }
            // Positions d .. d + k are ours to release.
            self.pool.bits.set_run(d, k);
            if generated {
                return (d + k, true);
            }
        }
    }

    /// Nothing released is waiting (a snapshot).
    pub(super) fn empty(&self) -> bool {
        self.pool.waiting() == 0
    }

    /// Worker `w`'s pick among the released requests, its payload swapped into `buf`; `None`
    /// when none is waiting (a snapshot: releases in flight may show up a moment later).
    pub(super) fn pick(&self, w: usize, buf: &mut Vec<u8>) -> Option<Item> {
        let mut spins = 0u32;
        loop {
            if self.empty() {
                return None;
            }
            let d = self.due.load(Ordering::Acquire);
            let got = if self.lifo {
                self.pool.newest(d)
            } else {
                self.pool
                    .any(d, &mut *self.rngs[w % self.rngs.len()].lock())
            };
            match got {
                Picked::Slot(s) => return Some(self.take_slot(s, buf)),
                Picked::Cellar((item, payload)) => {
                    *buf = payload;
                    return Some(item);
                }
                // Counted but its bit not set yet (a release in flight), or raced: again
                // (yielding after a while: the releaser may be preempted on our CPU).
                Picked::Retry => backoff(&mut spins),
            }
        }
    }

    /// Takes the request of slot `s`, whose bit we cleared, and frees the slot.
    fn take_slot(&self, s: u64, buf: &mut Vec<u8>) -> Item {
        let slot = &self.ring.slots[s as usize];
        // The bit was set after the request was published (seq = pos + 1) and nobody else can
        // clear it: the slot is ours until we free it.
        let pos = slot.seq.load(Ordering::Acquire) - 1;
        // SAFETY: we own the slot (the bit we cleared) until `seq` frees it.
        let item = unsafe { *slot.item.get() };
        unsafe { std::ptr::swap(buf, slot.payload.get()) };
        slot.seq.store(pos + self.ring.len(), Ordering::Release);
        item
    }

    /// Takes position `d`, handed to us as the next arrival (we moved the frontier past it);
    /// `None` if it is not generated yet.
    pub(super) fn take_next(&self, d: u64, buf: &mut Vec<u8>) -> Option<Item> {
        let slot = self.ring.slot(d);
        if slot.seq.load(Ordering::Acquire) != d + 1 {
            return None;
        }
        // SAFETY: position d was generated and moving the frontier past it made it ours.
        let item = unsafe { *slot.item.get() };
        unsafe { std::ptr::swap(buf, slot.payload.get()) };
        slot.seq.store(d + self.ring.len(), Ordering::Release);
        Some(item)
    }

    /// Makes slot `pos` free for the producer. `needed`: a worker waits for position `pos`
    /// (it is at or just past the frontier), so a released request still in the slot moves
    /// to the cellar; otherwise an occupied slot means the ring is full.
    pub(super) fn make_room(&self, pos: u64, needed: bool) -> Result<(), Produced> {
        let len = self.ring.len();
        let slot = self.ring.slot(pos);
        let mut spins = 0u32;
        loop {
            let seq = slot.seq.load(Ordering::Acquire);
            if seq == pos {
                return Ok(());
            }
            if !needed || pos >= self.due.load(Ordering::Acquire) + len {
                return Err(Produced::Full);
            }
            let old = pos - len;
            if seq == old + 1 && self.pool.bits.claim(old) {
                // SAFETY: we cleared its bit: the slot is ours until `seq` frees it.
                let item = unsafe { *slot.item.get() };
                let payload = unsafe { std::mem::take(&mut *slot.payload.get()) };
                self.pool.spill((item, payload));
                slot.seq.store(pos, Ordering::Release);
                return Ok(());
            }
            // Its request is being taken, or released a moment ago: wait for either.
            backoff(&mut spins);
        }
    }
}
