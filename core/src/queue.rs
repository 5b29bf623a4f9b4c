//! The request queue shared by all worker threads.
//!
//! One queue, N consumers — the M/G/n structure whose "ideal" behaviour
//! queueing theory predicts. The discipline decides which waiting request a
//! free worker takes (FIFO by default; LIFO and random-order for queueing
//! studies). Workers wait for work by spinning (lowest latency, burns a
//! core), blocking on a condition variable (frees the core, pays a wake-up),
//! or hybrid (spin for a while, then block).
//!
//! Pushes take a short uncontended lock and only signal the condition
//! variable when a worker is actually asleep, so a spinning worker pays no
//! syscall on either side.

use crate::clock::{now_ns, WaitMode};
use parking_lot::{Condvar, Mutex};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

crate::names_enum! {
/// Which waiting request a free worker takes.
    pub enum Discipline ("queue discipline") {
        /// The oldest waiting request first.
        Fifo = "fifo",
        /// The newest waiting request first.
        Lifo = "lifo",
        /// A waiting request chosen uniformly at random.
        Random = "random",
    }
}

struct Inner<T> {
    items: VecDeque<T>,
    rng: Xoshiro256PlusPlus,
    sleepers: usize,
}

/// A multi-producer, multi-consumer request queue.
pub struct RequestQueue<T> {
    inner: Mutex<Inner<T>>,
    cv: Condvar,
    len: AtomicUsize,
    closed: AtomicBool,
    discipline: Discipline,
    /// How long a hybrid waiter spins before it blocks.
    spin_ns: u64,
}

impl<T> RequestQueue<T> {
    pub fn new(discipline: Discipline, capacity: usize, spin_ns: u64, seed: u64) -> Self {
        RequestQueue {
            inner: Mutex::new(Inner {
                items: VecDeque::with_capacity(capacity),
                rng: Xoshiro256PlusPlus::seed_from_u64(seed),
                sleepers: 0,
            }),
            cv: Condvar::new(),
            len: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            discipline,
            spin_ns,
        }
    }

    pub fn push(&self, item: T) {
        let mut g = self.inner.lock();
        g.items.push_back(item);
        self.len.store(g.items.len(), Ordering::Release);
        let wake = g.sleepers > 0;
        drop(g);
        if wake {
            self.cv.notify_one();
        }
    }

    /// Number of waiting requests (a snapshot).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// No more pushes: waiting workers drain what is left, then get `None`.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _g = self.inner.lock();
        self.cv.notify_all();
    }

    fn take(&self, g: &mut Inner<T>) -> Option<T> {
        let item = match self.discipline {
            Discipline::Fifo => g.items.pop_front(),
            Discipline::Lifo => g.items.pop_back(),
            Discipline::Random => {
                let n = g.items.len();
                if n == 0 {
                    None
                } else {
                    let i = g.rng.gen_range(0..n);
                    g.items.swap_remove_back(i)
                }
            }
        };
        self.len.store(g.items.len(), Ordering::Release);
        item
    }

    fn try_pop(&self) -> Option<T> {
        if self.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.take(&mut self.inner.lock())
    }

    /// Takes the next request, waiting the given way; `None` once the queue
    /// is closed and empty.
    pub fn pop(&self, mode: WaitMode) -> Option<T> {
        let spin_until = match mode {
            WaitMode::Spin => u64::MAX,
            WaitMode::Block => 0,
            WaitMode::Hybrid => now_ns() + self.spin_ns,
        };
        loop {
            if let Some(x) = self.try_pop() {
                return Some(x);
            }
            if self.closed.load(Ordering::Acquire) {
                // Pushes happen-before close, so one last look is enough.
                return self.take(&mut self.inner.lock());
            }
            if spin_until == u64::MAX || now_ns() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            let mut g = self.inner.lock();
            if let Some(x) = self.take(&mut g) {
                return Some(x);
            }
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            g.sleepers += 1;
            self.cv.wait(&mut g);
            g.sleepers -= 1;
            if let Some(x) = self.take(&mut g) {
                return Some(x);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn disciplines_order() {
        for (d, want) in [
            (Discipline::Fifo, vec![1, 2, 3]),
            (Discipline::Lifo, vec![3, 2, 1]),
        ] {
            let q = RequestQueue::new(d, 4, 0, 1);
            for i in 1..=3 {
                q.push(i);
            }
            q.close();
            let got: Vec<i32> = std::iter::from_fn(|| q.pop(WaitMode::Spin)).collect();
            assert_eq!(got, want);
        }
        let q = RequestQueue::new(Discipline::Random, 100, 0, 1);
        for i in 0..100 {
            q.push(i);
        }
        q.close();
        let mut got: Vec<i32> = std::iter::from_fn(|| q.pop(WaitMode::Block)).collect();
        assert_ne!(
            got,
            (0..100).collect::<Vec<_>>(),
            "random order came out FIFO"
        );
        got.sort();
        assert_eq!(got, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn every_item_delivered_once_under_each_wait_mode() {
        for mode in [WaitMode::Spin, WaitMode::Block, WaitMode::Hybrid] {
            let q = Arc::new(RequestQueue::new(Discipline::Fifo, 16, 20_000, 1));
            let workers: Vec<_> = (0..2)
                .map(|_| {
                    let q = q.clone();
                    std::thread::spawn(move || {
                        let mut got = Vec::new();
                        while let Some(x) = q.pop(mode) {
                            got.push(x);
                        }
                        got
                    })
                })
                .collect();
            for i in 0..20_000u32 {
                q.push(i);
                if i % 1000 == 0 {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
            }
            q.close();
            let mut all: Vec<u32> = workers
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect();
            all.sort();
            assert_eq!(all, (0..20_000).collect::<Vec<_>>(), "{mode}");
        }
    }
}
