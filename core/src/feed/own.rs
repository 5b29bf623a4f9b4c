//! Per-worker dispatch: each worker's own queue, dealt by the producer, picked by the
//! discipline (its lock is shared with the producer only).

use super::{Feed, Produced};
use crate::arrival::derive_seed;
use crate::collector::IntervalSink;
use crate::queue::Discipline;
use crate::schedule::Item;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// A worker's own queue (per-worker dispatch), in arrival order.
pub(super) struct WorkerQueue {
    pub(super) items: VecDeque<(Item, Vec<u8>)>,
    /// Payload buffers the worker gave back, for the producer to reuse.
    pub(super) spare: Vec<Vec<u8>>,
    /// Random order's draws.
    rng: Xoshiro256PlusPlus,
}

impl WorkerQueue {
    /// Worker `w`'s queue; `seed` seeds its random order.
    pub(super) fn new(seed: u64, w: usize) -> WorkerQueue {
        WorkerQueue {
            items: VecDeque::new(),
            spare: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(derive_seed(seed, 2000 + w as u64)),
        }
    }

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
            // The newest due request: the last of the prefix, usually the queue's last.
            (Discipline::Lifo, _) => self.items.remove(due - 1),
            // Any due one, in O(1): the first takes its place. (`remove` shifted half the
            // backlog: a backlog of thousands after a stall made each claim slower than a
            // service, and the run never caught up — 4 workers at 320 k/s served 15 k/s on a
            // 16-CPU host.)
            (Discipline::Random, _) => {
                let i = self.rng.gen_range(0..due);
                self.items.swap_remove_front(i)
            }
        }
    }

    /// [`WorkerQueue::pick`], its payload swapped into `buf` (the buffer it held kept for the
    /// producer).
    fn take(&mut self, now: u64, d: Discipline, buf: &mut Vec<u8>) -> Option<Item> {
        let (item, p) = self.pick(now, d)?;
        self.spare.push(std::mem::replace(buf, p));
        Some(item)
    }
}

impl Feed {
    /// Per-worker LIFO or random order: deals every request due by `now` (its worker's pick
    /// may be the newest of them).
    pub(super) fn deal_due(&self, now: u64, horizon: &AtomicU64, sink: &IntervalSink) {
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

    /// Worker's queue `q`'s pick at `now` by `discipline`; generates until something is
    /// dealt to it when it is empty; `None` once the schedule ended and `q` is empty.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn take_own(
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
            let ended = end.load(Ordering::Acquire) != u64::MAX;
            // Once `end` is set everything was dealt: this look is the last.
            let got = q.lock().take(now, discipline, buf);
            if got.is_some() || ended {
                if got.is_some() {
                    taken.fetch_add(1, Ordering::Release);
                }
                return got;
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(intended: impl IntoIterator<Item = u64>) -> WorkerQueue {
        let mut q = WorkerQueue::new(7, 0);
        q.items = intended
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let it = Item {
                    index: i as u64,
                    intended: t,
                    measured: true,
                    ..Item::default()
                };
                (it, Vec::new())
            })
            .collect();
        q
    }

    /// The intended time of the request `take` hands out at `now` (None: the queue is empty).
    fn take(q: &mut WorkerQueue, now: u64, d: Discipline) -> Option<u64> {
        q.take(now, d, &mut Vec::new()).map(|it| it.intended)
    }

    #[test]
    fn random_order_takes_any_due_request_and_leaves_the_rest_in_order() {
        use Discipline::Random;
        // 2 000 due by t = 5 000, 10 not yet.
        let mut q = queue((1..=2000).chain(10_001..=10_010));
        let got: Vec<u64> = (0..1999)
            .map(|_| take(&mut q, 5000, Random).unwrap())
            .collect();
        assert!(got.iter().all(|&t| t <= 2000), "taken before it was due");
        let mut seen = got.clone();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1999, "a request taken twice");
        // Uniform among the due: the first 500 picks average near 1 000 (FIFO: 250, LIFO: 1 750).
        let mean = got[..500].iter().sum::<u64>() as f64 / 500.0;
        assert!((900.0..1100.0).contains(&mean), "first picks' mean {mean}");
        // The last due one, then the future ones, each once it is due.
        assert!(take(&mut q, 5000, Random).unwrap() <= 2000);
        let mut rest: Vec<u64> = (0..10)
            .map(|_| take(&mut q, 20_000, Random).unwrap())
            .collect();
        rest.sort_unstable();
        assert_eq!(rest, (10_001..=10_010).collect::<Vec<_>>());
        assert_eq!(take(&mut q, 20_000, Random), None);
    }

    #[test]
    fn lifo_takes_the_newest_due_and_fifo_the_oldest() {
        let mut q = queue([1, 2, 3, 50]);
        assert_eq!(take(&mut q, 10, Discipline::Lifo), Some(3));
        assert_eq!(take(&mut q, 10, Discipline::Fifo), Some(1));
        // None due: the earliest, whatever the discipline.
        assert_eq!(take(&mut q, 0, Discipline::Lifo), Some(2));
        assert_eq!(take(&mut q, 0, Discipline::Random), Some(50));
    }
}
