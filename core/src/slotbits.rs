//! One bit per slot of a ring, read from a position down: the part that the lock-free LIFO and
//! random-order picks share ([`crate::feed`]'s pool of due requests and
//! [`crate::queue::RequestQueue`]'s backlog).
//!
//! Positions count up forever; position `p` lives in slot `p mod len`. A set bit marks a slot
//! that holds a request nobody has claimed; clearing it with one `fetch_and` is the claim:
//! whoever cleared it owns the request until it frees the slot. Setting a bit is a release
//! (everything the setter wrote into the slot before is seen by the claimer).
//!
//! The scans read 64 slots a word, from a `top` position down, so they meet the newest requests
//! first: LIFO's pick is the highest set position below `top`. Random order draws a set bit
//! uniformly: where at least one slot in [`DENSE`] is set it tries slots drawn uniformly until
//! one is set (each set slot equally likely, a few reads), else it counts the set bits word by
//! word until it has seen as many as the caller expects and takes the k-th of them (a short
//! backlog sits in the few words below `top`). Counting alone read every word of a ring that a
//! saturated backlog had spread over: 64 cache lines a pick.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use rand::Rng;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Random order tries slots at random while at least one slot in this many is set (on average
/// at most this many reads a pick; after four times as many misses it counts instead).
const DENSE: u64 = 8;

/// The bits of a ring of `len` slots (a power of two, at least 64).
pub(crate) struct SlotBits {
    words: Box<[AtomicU64]>,
    len: u64,
}

impl SlotBits {
    pub(crate) fn new(len: usize) -> SlotBits {
        assert!(len.is_power_of_two() && len >= 64, "a ring of whole words");
        SlotBits {
            words: (0..len / 64).map(|_| AtomicU64::new(0)).collect(),
            len: len as u64,
        }
    }

    fn at(&self, pos: u64) -> (&AtomicU64, u64) {
        let s = pos & (self.len - 1);
        (&self.words[(s >> 6) as usize], 1u64 << (s & 63))
    }

    /// Sets the bits of positions `from .. from + k` (at most `len` of them): one `fetch_or` a
    /// word.
    pub(crate) fn set_run(&self, from: u64, k: u64) {
        let mut pos = from;
        while pos < from + k {
            let s = pos & (self.len - 1);
            let in_word = (64 - (s & 63)).min(from + k - pos);
            let (word, first) = self.at(pos);
            let mask = if in_word == 64 {
                u64::MAX
            } else {
                ((1u64 << in_word) - 1) * first
            };
            word.fetch_or(mask, Ordering::AcqRel);
            pos += in_word;
        }
    }

    /// Clears position (or slot) `pos`'s bit; true if it was set: the caller owns the slot.
    pub(crate) fn claim(&self, pos: u64) -> bool {
        let (word, bit) = self.at(pos);
        word.fetch_and(!bit, Ordering::AcqRel) & bit != 0
    }

    /// The slot of the highest set position among the `min(top, len)` positions below `top`
    /// (a snapshot: the caller claims it, and looks again if that fails).
    pub(crate) fn newest_below(&self, top: u64) -> Option<u64> {
        let mut left = top.min(self.len);
        let mut pos = top;
        while left > 0 {
            let s = (pos - 1) & (self.len - 1);
            let b = s & 63;
            let n = (b + 1).min(left);
            // Bits b - n + 1 ..= b of this word are positions pos - n ..= pos - 1.
            let mask = if n == 64 {
                u64::MAX
            } else {
                ((1u64 << n) - 1) << (b + 1 - n)
            };
            let m = self.words[(s >> 6) as usize].load(Ordering::Acquire) & mask;
            if m != 0 {
                return Some((s & !63) + 63 - u64::from(m.leading_zeros()));
            }
            pos -= n;
            left -= n;
        }
        None
    }

    /// The word holding position `top - 1`, then the ones before it (wrapping): the `i`-th.
    fn word_below(&self, top: u64, i: usize) -> usize {
        let nw = self.words.len();
        let first = ((top.wrapping_sub(1) & (self.len - 1)) >> 6) as usize;
        (first + nw - i % nw) % nw
    }

    /// Counts set bits word by word from `top`'s down until at least `want` are seen or every
    /// word is read: (bits seen, words read).
    pub(crate) fn count_below(&self, top: u64, want: u64) -> (u64, usize) {
        let (mut seen, mut words) = (0u64, 0usize);
        while words < self.words.len() && seen < want {
            let w = &self.words[self.word_below(top, words)];
            seen += u64::from(w.load(Ordering::Acquire).count_ones());
            words += 1;
        }
        (seen, words)
    }

    /// The slot of the `k`-th set bit (from 0) in the first `words` words that
    /// [`Self::count_below`] read, counted again in the same order; `None` if those words hold
    /// fewer now (a claim raced with the count).
    pub(crate) fn kth_below(&self, top: u64, words: usize, mut k: u64) -> Option<u64> {
        for i in 0..words {
            let wi = self.word_below(top, i);
            let mut v = self.words[wi].load(Ordering::Acquire);
            let c = u64::from(v.count_ones());
            if k >= c {
                k -= c;
                continue;
            }
            for _ in 0..k {
                v &= v.wrapping_sub(1);
            }
            return Some(wi as u64 * 64 + u64::from(v.trailing_zeros()));
        }
        None
    }

    /// Whether slot (or position) `pos`'s bit is set (a snapshot).
    fn is_set(&self, pos: u64) -> bool {
        let (word, bit) = self.at(pos);
        word.load(Ordering::Acquire) & bit != 0
    }

    /// The slot of a set bit drawn uniformly (a snapshot: the caller claims it, and draws again
    /// if that fails), for a ring holding about `pooled` set bits; `top` is the position the
    /// count starts below (the newest). `None`: no set bit seen.
    pub(crate) fn draw(&self, top: u64, pooled: u64, rng: &mut impl Rng) -> Option<u64> {
        if pooled * DENSE >= self.len {
            for _ in 0..4 * DENSE {
                let s = rng.gen_range(0..self.len);
                if self.is_set(s) {
                    return Some(s);
                }
            }
        }
        let (seen, words) = self.count_below(top, pooled);
        if seen == 0 {
            return None;
        }
        self.kth_below(top, words, rng.gen_range(0..seen))
    }

    /// Every set slot (for dropping what is left).
    pub(crate) fn set_slots(&self) -> impl Iterator<Item = u64> + '_ {
        self.words.iter().enumerate().flat_map(|(wi, w)| {
            let mut v = w.load(Ordering::Acquire);
            std::iter::from_fn(move || {
                (v != 0).then(|| {
                    let b = u64::from(v.trailing_zeros());
                    v &= v - 1;
                    wi as u64 * 64 + b
                })
            })
        })
    }
}

/// A wait for another thread's step that is a few instructions away: spin, then yield (the
/// thread we wait for may be preempted on our CPU).
pub(crate) fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins > 200 {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// What a pick found: a slot whose bit it cleared (the caller takes the slot's request and
/// frees it), a request from the cellar, or nothing it could take now (empty, or a push or a
/// claim raced with it: look again while [`BitPool::waiting`] counts some).
pub(crate) enum Picked<C> {
    Slot(u64),
    Cellar(C),
    Retry,
}

/// The part of a lock-free LIFO or random-order backlog that does not depend on what its slots
/// hold: the bits, how many are set or about to be (`pooled`), and the **cellar**, a locked list
/// of requests older than any in the ring (moved out of a slot a push needed), in push order.
/// LIFO takes the cellar's newest only when the ring is empty; random order chooses ring or
/// cellar in proportion to what each holds. Its users: [`crate::feed`]'s pool of due requests
/// and [`crate::queue::RequestQueue`]'s backlog.
pub(crate) struct BitPool<C> {
    pub(crate) bits: SlotBits,
    /// Bits set, or about to be (raised before a bit is set, lowered when one is claimed).
    pub(crate) pooled: CachePadded<AtomicU64>,
    cellar: Mutex<VecDeque<C>>,
    cellar_len: CachePadded<AtomicU64>,
}

impl<C> BitPool<C> {
    pub(crate) fn new(len: usize) -> BitPool<C> {
        BitPool {
            bits: SlotBits::new(len),
            pooled: CachePadded::new(AtomicU64::new(0)),
            cellar: Mutex::new(VecDeque::new()),
            cellar_len: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Requests in the ring (or about to be) and in the cellar (a snapshot).
    pub(crate) fn waiting(&self) -> u64 {
        self.pooled.load(Ordering::SeqCst) + self.cellar_len.load(Ordering::SeqCst)
    }

    /// Requests in the cellar (a snapshot).
    #[cfg(test)]
    pub(crate) fn in_cellar(&self) -> u64 {
        self.cellar_len.load(Ordering::SeqCst)
    }

    /// Clears slot (or position) `s`'s bit; true if it was set: the slot is the caller's until
    /// it frees it, and no longer counted.
    pub(crate) fn claim(&self, s: u64) -> bool {
        if !self.bits.claim(s) {
            return false;
        }
        self.pooled.fetch_sub(1, Ordering::SeqCst);
        true
    }

    /// Moves a request whose bit the caller cleared with [`SlotBits::claim`] (its slot needed by
    /// a push) to the cellar.
    pub(crate) fn spill(&self, c: C) {
        let mut cellar = self.cellar.lock();
        cellar.push_back(c);
        // Counted in the cellar before it leaves `pooled`: never seen as gone.
        self.cellar_len.fetch_add(1, Ordering::SeqCst);
        drop(cellar);
        self.pooled.fetch_sub(1, Ordering::SeqCst);
    }

    /// LIFO: the highest set position below `top` (claimed), else, with nothing pooled, the
    /// cellar's newest.
    pub(crate) fn newest(&self, top: u64) -> Picked<C> {
        if let Some(s) = self.bits.newest_below(top) {
            return if self.claim(s) {
                Picked::Slot(s)
            } else {
                Picked::Retry
            };
        }
        if self.pooled.load(Ordering::SeqCst) > 0 {
            return Picked::Retry;
        }
        self.take_cellar(|c| c.pop_back())
    }

    /// Random order: one drawn uniformly among the ring's (claimed) and the cellar's; `top` is
    /// the position the ring's newest are below.
    pub(crate) fn any(&self, top: u64, rng: &mut impl Rng) -> Picked<C> {
        let in_ring = self.pooled.load(Ordering::SeqCst);
        let in_cellar = self.cellar_len.load(Ordering::SeqCst);
        if in_ring + in_cellar == 0 {
            return Picked::Retry;
        }
        if rng.gen_range(0..in_ring + in_cellar) >= in_ring {
            let i = rng.gen_range(0..in_cellar) as usize;
            return self.take_cellar(|c| c.swap_remove_back(i.min(c.len().saturating_sub(1))));
        }
        match self.bits.draw(top, in_ring, rng) {
            Some(s) if self.claim(s) => Picked::Slot(s),
            _ => Picked::Retry,
        }
    }

    fn take_cellar(&self, take: impl FnOnce(&mut VecDeque<C>) -> Option<C>) -> Picked<C> {
        if self.cellar_len.load(Ordering::SeqCst) == 0 {
            return Picked::Retry;
        }
        let mut c = self.cellar.lock();
        match take(&mut c) {
            Some(x) => {
                self.cellar_len.fetch_sub(1, Ordering::SeqCst);
                Picked::Cellar(x)
            }
            None => Picked::Retry,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    /// The scans against their definitions over every `top` of a small ring with a pattern of
    /// bits that crosses words and the wrap.
    #[test]
    fn scans_match_their_definitions() {
        let len = 256u64;
        let b = SlotBits::new(len as usize);
        let set: Vec<u64> = [0, 1, 63, 64, 65, 127, 130, 200, 254, 255].to_vec();
        for &s in &set {
            b.set_run(s, 1);
        }
        b.set_run(140, 70); // 140 ..= 209, across words
        let is_set = |p: u64| {
            let s = p % len;
            set.contains(&s) || (140..210).contains(&s)
        };
        for top in [
            1u64, 2, 63, 64, 65, 128, 129, 200, 256, 257, 300, 511, 512, 700,
        ] {
            let want = (top.saturating_sub(len)..top).rev().find(|&p| is_set(p));
            assert_eq!(b.newest_below(top), want.map(|p| p % len), "top {top}");
            // The k-th set bit, counting whole words from top's down, must be a set slot,
            // and every set slot is reached by exactly one k.
            let total = (0..len).filter(|&s| is_set(s)).count() as u64;
            let (seen, words) = b.count_below(top, total);
            assert_eq!(seen, total);
            let mut got: Vec<u64> = (0..total)
                .map(|k| b.kth_below(top, words, k).unwrap())
                .collect();
            assert!(got.iter().all(|&s| is_set(s)));
            got.sort();
            got.dedup();
            assert_eq!(got.len() as u64, total, "top {top}");
            assert_eq!(b.kth_below(top, words, total), None);
            // Counting from top's word down: k = 0 is in the nearest word that has a bit.
            let near = (0..len / 64)
                .map(|i| ((top - 1 + len * 4 - 64 * i) % len) / 64)
                .find(|&w| (w * 64..w * 64 + 64).any(is_set))
                .unwrap();
            assert_eq!(b.kth_below(top, words, 0).unwrap() / 64, near, "top {top}");
        }
        // Drawing: only set slots, each about equally often, dense (tries) and sparse (counts).
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(4);
        let total = (0..len).filter(|&s| is_set(s)).count() as u64;
        let sparse = SlotBits::new(len as usize);
        sparse.set_run(100, 1);
        sparse.set_run(3, 1);
        for (bits, n, pooled) in [(&b, total, total), (&sparse, 2, 2)] {
            let mut counts = std::collections::HashMap::new();
            for _ in 0..400 * n {
                let s = bits.draw(300, pooled, &mut rng).unwrap();
                *counts.entry(s).or_insert(0u32) += 1;
            }
            assert_eq!(counts.len() as u64, n);
            // 400 expected each: 5 sd is 100.
            assert!(
                counts.values().all(|&c| (300..=500).contains(&c)),
                "{counts:?}"
            );
        }
        assert_eq!(SlotBits::new(64).draw(5, 0, &mut rng), None);
        let mut left: Vec<u64> = b.set_slots().collect();
        left.sort();
        assert_eq!(left, (0..len).filter(|&s| is_set(s)).collect::<Vec<_>>());
        assert!(b.claim(256 + 130), "a position claims its slot");
        assert!(!b.claim(130), "a bit is claimed once");
        assert!(!b.claim(44));
    }
}
