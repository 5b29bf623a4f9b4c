//! LIFO's and random order's backlog without a lock: the thread shaper's (and `taillab
//! serve`'s) queue when a free worker takes the newest waiting request or any one uniformly.
//!
//! Both picks need a view of the whole backlog, which used to be a deque under one lock. Here
//! it is a ring of slots in push order with a bit per slot, as the inline feed's pool of due
//! requests; the bits, their count and the cellar are [`crate::slotbits::BitPool`], shared
//! with it:
//!
//! - a push takes the next **position** (`pushed`, one `fetch_add`), writes its request into
//!   that position's slot, counts it in `pooled` and sets its bit;
//! - a pop clears a set bit (the claim): LIFO the highest below `pushed`, random order one
//!   drawn uniformly over the backlog (ring or cellar in proportion to what each holds).
//!   Whoever cleared the bit owns the request and frees the slot for the push one lap later.
//!
//! Each slot's sequence word says whose it is (Vyukov's bounded queue): `p`, free for the push
//! of position `p`; `p + 1`, holding position `p`'s request. A LIFO backlog can keep an old
//! request waiting while newer ones pass through; when a push finds its slot still holding the
//! request of a lap before (set bit), it claims that request and moves it to the **cellar**, a
//! locked list of the oldest requests in push order. Everything in the cellar is older than
//! anything in the ring, so LIFO takes the cellar's newest only when the ring is empty, and
//! random order draws over both. The cellar is touched only after a backlog of a ring's length.
//!
//! With several pushers, a pop may not see a push that took its position but has not set its
//! bit yet; it was not in the queue yet. One pusher and one popper see exactly the discipline's
//! order (tested against a deque).

use crate::slotbits::{backoff, BitPool, Picked};
use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// One place of the ring: `seq` = p, free for position p; p + 1, holds position p's request.
struct Slot<T> {
    seq: AtomicU64,
    item: UnsafeCell<MaybeUninit<T>>,
}

/// Random order's generators: a popper uses the one of its thread's index (each locked only
/// by the threads that share an index, rarely more than one).
const DRAWERS: usize = 16;

/// The lock-free backlog of LIFO or random order (see the module docs).
pub(super) struct Backlog<T> {
    slots: Box<[CachePadded<Slot<T>>]>,
    /// The bits of waiting requests, their count and the cellar.
    pool: BitPool<T>,
    /// Positions taken by pushes so far (the next push takes this one).
    pushed: CachePadded<AtomicU64>,
    rngs: Box<[CachePadded<Mutex<Xoshiro256PlusPlus>>]>,
    lifo: bool,
}

// SAFETY: a slot's request is written only by the push holding its position while `seq` says
// free, and read only by whoever cleared its bit (set after `seq` said full); the bit's and
// `seq`'s release/acquire pairs order those accesses, so requests only move between threads.
unsafe impl<T: Send> Sync for Backlog<T> {}
unsafe impl<T: Send> Send for Backlog<T> {}

/// This thread's index among the poppers of every backlog (for its generator).
fn drawer() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static ME: usize = NEXT.fetch_add(1, Ordering::Relaxed));
    ME.with(|m| *m)
}

impl<T> Backlog<T> {
    /// A backlog whose ring holds `capacity` requests (rounded up to a power of two, at least
    /// 64; longer backlogs spill to the cellar); `lifo` false is random order, drawn from `seed`.
    pub(super) fn new(capacity: usize, lifo: bool, seed: u64) -> Backlog<T> {
        let len = capacity.max(64).next_power_of_two();
        Backlog {
            slots: (0..len)
                .map(|i| {
                    CachePadded::new(Slot {
                        seq: AtomicU64::new(i as u64),
                        item: UnsafeCell::new(MaybeUninit::uninit()),
                    })
                })
                .collect(),
            pool: BitPool::new(len),
            pushed: CachePadded::new(AtomicU64::new(0)),
            rngs: (0..DRAWERS)
                .map(|i| {
                    CachePadded::new(Mutex::new(Xoshiro256PlusPlus::seed_from_u64(
                        crate::arrival::derive_seed(seed, 1 + i as u64),
                    )))
                })
                .collect(),
            lifo,
        }
    }

    fn ring_len(&self) -> u64 {
        self.slots.len() as u64
    }

    /// Adds a request (never waits for a pop: a full ring spills its oldest to the cellar).
    pub(super) fn push(&self, item: T) {
        let len = self.ring_len();
        let pos = self.pushed.fetch_add(1, Ordering::AcqRel);
        let slot = &self.slots[(pos & (len - 1)) as usize];
        let mut spins = 0u32;
        loop {
            let seq = slot.seq.load(Ordering::Acquire);
            if seq == pos {
                break;
            }
            // The request of a lap before is still waiting: it moves to the cellar.
            if pos >= len && seq == pos - len + 1 && self.pool.bits.claim(pos) {
                // SAFETY: we cleared its bit: the slot is ours (module docs).
                self.pool
                    .spill(unsafe { (*slot.item.get()).assume_init_read() });
                break;
            }
            // Its request is being taken, or written by a push a lap before: wait for either.
            backoff(&mut spins);
        }
        // SAFETY: `seq` said free for us, or we emptied the slot above.
        unsafe { (*slot.item.get()).write(item) };
        self.pool.pooled.fetch_add(1, Ordering::SeqCst);
        slot.seq.store(pos + 1, Ordering::Release);
        self.pool.bits.set_run(pos, 1);
    }

    /// Requests waiting (a snapshot; a push in flight may already count).
    pub(super) fn len(&self) -> usize {
        self.pool.waiting() as usize
    }

    /// The discipline's pick; `None` only when nothing is waiting or about to be (a push that
    /// counted its request and has not set its bit is waited for).
    pub(super) fn pop(&self) -> Option<T> {
        let mut spins = 0u32;
        loop {
            if self.pool.waiting() == 0 {
                return None;
            }
            let top = self.pushed.load(Ordering::Acquire);
            let got = if self.lifo {
                self.pool.newest(top)
            } else {
                self.pool
                    .any(top, &mut *self.rngs[drawer() % DRAWERS].lock())
            };
            match got {
                Picked::Slot(s) => {
                    let slot = &self.slots[s as usize];
                    let pos = slot.seq.load(Ordering::Acquire) - 1;
                    // SAFETY: we cleared its bit, set after the request was written: ours
                    // until `seq` frees the slot.
                    let item = unsafe { (*slot.item.get()).assume_init_read() };
                    slot.seq.store(pos + self.ring_len(), Ordering::Release);
                    return Some(item);
                }
                Picked::Cellar(item) => return Some(item),
                Picked::Retry => backoff(&mut spins),
            }
        }
    }
}

impl<T> Drop for Backlog<T> {
    fn drop(&mut self) {
        for s in self.pool.bits.set_slots() {
            // SAFETY: a set bit is a written, unclaimed request, and nobody else is left.
            unsafe { (*self.slots[s as usize].item.get()).assume_init_drop() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::Rng;
    use std::collections::VecDeque;
    use std::sync::Arc;

    /// One pusher and one popper, interleaved at random through backlogs longer than the ring
    /// (so the cellar is used): every LIFO pop is the newest waiting request, exactly what a
    /// deque's back gives; random order pops a waiting request, each once.
    #[test]
    fn one_popper_sees_the_discipline_through_the_cellar() {
        for lifo in [true, false] {
            let b: Backlog<u32> = Backlog::new(64, lifo, 5);
            let mut want: VecDeque<u32> = VecDeque::new();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
            let (mut next, mut spilled) = (0u32, false);
            for round in 0..400 {
                // Bursts of up to 300 pushes (past the ring of 64), then up to 200 pops.
                for _ in 0..rng.gen_range(0..300) {
                    b.push(next);
                    want.push_back(next);
                    next += 1;
                }
                spilled |= b.pool.in_cellar() > 0;
                assert_eq!(b.len(), want.len(), "round {round}");
                for _ in 0..rng.gen_range(0..200) {
                    let got = b.pop();
                    if lifo {
                        assert_eq!(got, want.pop_back(), "round {round}");
                    } else {
                        match got {
                            Some(x) => {
                                let i = want.iter().position(|&w| w == x).expect("waiting");
                                want.remove(i);
                            }
                            None => assert!(want.is_empty()),
                        }
                    }
                }
            }
            assert!(spilled, "the test never reached the cellar");
            while let Some(x) = b.pop() {
                if lifo {
                    assert_eq!(Some(x), want.pop_back());
                } else {
                    let i = want.iter().position(|&w| w == x).expect("waiting");
                    want.remove(i);
                }
            }
            assert!(want.is_empty());
        }
    }

    /// Random order draws uniformly: the first pop from 20 waiting requests, and from a backlog
    /// spread over the ring's words and the cellar, lands on each about equally often.
    #[test]
    fn random_order_is_uniform() {
        for (n, cap) in [(20u32, 64usize), (200, 64)] {
            let mut counts = vec![0u32; n as usize];
            let seeds = 60 * n;
            for seed in 0..seeds {
                let b: Backlog<u32> = Backlog::new(cap, false, u64::from(seed));
                for i in 0..n {
                    b.push(i);
                }
                counts[b.pop().unwrap() as usize] += 1;
            }
            // 60 expected a request: a binomial's 5 sd is about 38.
            assert!(
                counts.iter().all(|&c| (22..=98).contains(&c)),
                "n {n}: {counts:?}"
            );
            // The cellar's requests (the oldest) are drawn as often as the ring's.
            if n > cap as u32 {
                let old: u32 = counts[..(n as usize - cap)].iter().sum();
                let share = f64::from(old) / f64::from(seeds);
                let want = (n as usize - cap) as f64 / f64::from(n);
                assert!(
                    (share - want).abs() < 0.03,
                    "cellar share {share} want {want}"
                );
            }
        }
    }

    /// Pushers and poppers racing: every request popped exactly once; what is left is dropped.
    #[test]
    fn racing_pushers_and_poppers_deliver_each_once() {
        for lifo in [true, false] {
            let b = Arc::new(Backlog::<Box<u64>>::new(64, lifo, 3));
            let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let poppers: Vec<_> = (0..3)
                .map(|_| {
                    let (b, done) = (b.clone(), done.clone());
                    std::thread::spawn(move || {
                        let mut got = Vec::new();
                        loop {
                            match b.pop() {
                                Some(x) => got.push(*x),
                                None if done.load(Ordering::Acquire) && b.len() == 0 => break,
                                None => std::hint::spin_loop(),
                            }
                        }
                        got
                    })
                })
                .collect();
            let pushers: Vec<_> = (0..2u64)
                .map(|p| {
                    let b = b.clone();
                    std::thread::spawn(move || {
                        for i in 0..50_000u64 {
                            b.push(Box::new(p * 1_000_000 + i));
                            if i % 5_000 == 0 {
                                std::thread::sleep(std::time::Duration::from_micros(300));
                            }
                        }
                    })
                })
                .collect();
            pushers.into_iter().for_each(|h| h.join().unwrap());
            done.store(true, Ordering::Release);
            let mut all: Vec<u64> = poppers
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect();
            all.sort_unstable();
            let want: Vec<u64> = (0..2u64)
                .flat_map(|p| (0..50_000).map(move |i| p * 1_000_000 + i))
                .collect();
            assert_eq!(all.len(), want.len(), "lifo {lifo}");
            assert_eq!(all, want, "lifo {lifo}");
        }
        // Dropped with requests in the ring and the cellar: each freed once (miri-free check:
        // the count of live boxes).
        let live = Arc::new(());
        {
            let b: Backlog<Arc<()>> = Backlog::new(64, true, 1);
            for _ in 0..150 {
                b.push(live.clone());
            }
            drop(b.pop());
            assert_eq!(Arc::strong_count(&live), 150);
        }
        assert_eq!(Arc::strong_count(&live), 1);
    }
}
