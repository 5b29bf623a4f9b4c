//! A worker's outbox: the stamps of the requests it served, on their way to a helper thread
//! that records them (histograms, records, counts) on another CPU.
//!
//! One producer (the worker) and one consumer (a helper): a bounded ring with the two
//! positions on their own cache lines; each side caches the other's position and reads it
//! again only when the ring looks full (worker) or empty (helper). A push is a few stores
//! and one release store — the worker's whole share of the bookkeeping.

use crate::collector::Stamps;
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// Entries an outbox holds: at 1 M requests/s from one worker, 16 ms of them.
pub const OUTBOX: usize = 16_384;

/// What the helper needs of one served request. In-process, `enqueued` is `sent` and the
/// user-space reads are the stamps themselves ([`Stamps::local`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Served {
    /// The request's index; the top bit says it was measured (else warmup).
    pub tagged_index: u64,
    /// The schedule's time.
    pub intended: u64,
    /// When it was released (the arrival, or the worker's late wake-up).
    pub sent: u64,
    /// When a worker began serving it.
    pub started: u64,
    /// When the app returned.
    pub finished: u64,
    /// When the response was complete (after a simulated network delay, if any).
    pub completed: u64,
}

const MEASURED: u64 = 1 << 63;

impl Served {
    /// Request `index`'s record; `measured` false for warmup.
    pub fn new(index: u64, measured: bool, s: &Stamps) -> Self {
        Served {
            tagged_index: index | if measured { MEASURED } else { 0 },
            intended: s.intended,
            sent: s.sent,
            started: s.started,
            finished: s.finished,
            completed: s.completed,
        }
    }

    /// The request's index.
    pub fn index(&self) -> u64 {
        self.tagged_index & !MEASURED
    }

    /// In the measured phase (else warmup).
    pub fn measured(&self) -> bool {
        self.tagged_index & MEASURED != 0
    }

    /// The stamps again.
    pub fn stamps(&self) -> Stamps {
        Stamps::local(
            self.intended,
            self.sent,
            self.sent,
            self.started,
            self.finished,
            self.completed,
        )
    }
}

/// A single-producer, single-consumer ring of [`Served`] (see the module docs).
pub struct Outbox {
    slots: Box<[UnsafeCell<Served>]>,
    /// Entries pushed (the worker's).
    tail: CachePadded<AtomicU64>,
    /// Entries taken (the helper's).
    head: CachePadded<AtomicU64>,
    /// Times the worker found the ring full and waited for the helper.
    pub full_waits: CachePadded<AtomicU64>,
}

// SAFETY: a slot is written only by the producer before `tail` passes it and read only by
// the consumer after `tail` passed it and before `head` passes it (release/acquire pairs).
unsafe impl Sync for Outbox {}

impl Default for Outbox {
    fn default() -> Self {
        Outbox {
            slots: (0..OUTBOX).map(|_| UnsafeCell::default()).collect(),
            tail: CachePadded::default(),
            head: CachePadded::default(),
            full_waits: CachePadded::default(),
        }
    }
}

/// The producer's end, with its cached view of the consumer's position.
pub struct Sender<'a> {
    outbox: &'a Outbox,
    tail: u64,
    head_seen: u64,
}

impl Outbox {
    /// The worker's end (one per outbox).
    pub fn sender(&self) -> Sender<'_> {
        Sender {
            outbox: self,
            tail: self.tail.load(Ordering::Relaxed),
            head_seen: self.head.load(Ordering::Acquire),
        }
    }

    /// Hands every entry pushed so far to `f`, in order; returns how many.
    pub fn drain(&self, mut f: impl FnMut(&Served)) -> u64 {
        let head = self.head.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Acquire);
        for i in head..tail {
            // SAFETY: entries in head..tail were published by the release store of `tail`.
            f(unsafe { &*self.slots[i as usize % OUTBOX].get() });
        }
        self.head.store(tail, Ordering::Release);
        tail - head
    }

    /// Entries pushed and not yet drained.
    pub fn len(&self) -> u64 {
        self.tail.load(Ordering::Acquire) - self.head.load(Ordering::Acquire)
    }

    /// Nothing waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Sender<'_> {
    /// Pushes one entry; when the ring is full, waits for the helper (counted in
    /// [`Outbox::full_waits`]) — or gives up once `give_up` says so, dropping the entry.
    /// Returns whether it waited.
    #[inline]
    pub fn push(&mut self, s: Served, give_up: impl Fn() -> bool) -> bool {
        let mut waited = false;
        if self.tail - self.head_seen >= OUTBOX as u64 {
            self.head_seen = self.outbox.head.load(Ordering::Acquire);
            if self.tail - self.head_seen >= OUTBOX as u64 {
                self.outbox.full_waits.fetch_add(1, Ordering::Relaxed);
                waited = true;
                let mut spins = 0u32;
                while self.tail - self.head_seen >= OUTBOX as u64 {
                    if give_up() {
                        return true;
                    }
                    spins += 1;
                    if spins > 100 {
                        std::thread::yield_now();
                    } else {
                        std::hint::spin_loop();
                    }
                    self.head_seen = self.outbox.head.load(Ordering::Acquire);
                }
            }
        }
        // SAFETY: the slot at `tail` is outside head..tail, so the consumer does not read it.
        unsafe { *self.outbox.slots[self.tail as usize % OUTBOX].get() = s };
        self.tail += 1;
        self.outbox.tail.store(self.tail, Ordering::Release);
        waited
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every entry arrives once, in order, across wraps of the ring, with a slow consumer.
    #[test]
    fn entries_cross_in_order() {
        let ob = std::sync::Arc::new(Outbox::default());
        let n = 5 * OUTBOX as u64 + 17;
        let prod = {
            let ob = ob.clone();
            std::thread::spawn(move || {
                let mut tx = ob.sender();
                for i in 0..n {
                    let st = Stamps::local(i, i + 1, i + 1, i + 2, i + 3, i + 4);
                    tx.push(Served::new(i, i.is_multiple_of(3), &st), || false);
                }
            })
        };
        let mut next = 0u64;
        while next < n {
            ob.drain(|s| {
                assert_eq!(s.index(), next);
                assert_eq!(s.measured(), next.is_multiple_of(3));
                assert_eq!(s.stamps().completed, next + 4);
                next += 1;
            });
            std::thread::yield_now();
        }
        prod.join().unwrap();
        assert!(ob.is_empty());
    }
}
