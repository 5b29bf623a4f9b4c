//! The request queue shared by all worker threads.
//!
//! One queue, N consumers — the M/G/n structure whose "ideal" behaviour
//! queueing theory predicts. The discipline decides which waiting request a
//! free worker takes (FIFO by default; LIFO and random-order for queueing
//! studies). Workers wait for work by spinning (lowest latency, burns a
//! core), blocking on a condition variable (frees the core, pays a wake-up),
//! or hybrid (spin for a while, then block).
//!
//! Every discipline hands requests over without a lock, so a spinning worker
//! and the shaper never wait for each other's critical section (a thread
//! shaper that serialised on one lock measured its own queue, not the
//! hand-off it models; a lock holder preempted on a shared host stops every
//! worker). FIFO pushes and pops through a lock-free multi-producer,
//! multi-consumer queue; LIFO and random order, which pick from the whole
//! backlog, through a ring with one bit per waiting request ([`backlog`]'s
//! docs). Either way the condition variable is signalled only when a worker
//! is actually asleep, so a spinning worker pays no syscall on either side.

mod backlog;

use crate::clock::{now_ns, WaitMode};
use backlog::Backlog;
use crossbeam_queue::SegQueue;
use parking_lot::{Condvar, Mutex};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};

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

/// How a per-worker dispatch picks each request's worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Assign {
    /// Uniformly at random, seeded ("random worker" of the queueing
    /// literature): n independent M/G/1 queues under Poisson load.
    #[default]
    Random,
    /// Request i goes to worker i mod n: each worker sees every n-th
    /// arrival, smoother than random.
    RoundRobin,
}

/// How requests reach the workers.
///
/// `Shared`: one queue that every free worker takes from (M/G/n).
/// `PerWorker`: each request is assigned a worker when it arrives and
/// waits in that worker's own queue, even while another worker is idle
/// (n separate M/G/1 queues); the discipline then orders each worker's
/// queue. The TCP server's per-worker mode assigns whole connections
/// round-robin, so its requests reach workers in the order the client
/// spreads them over connections.
///
/// Written `shared`, `per-worker` (= `per-worker:random`),
/// `per-worker:random` or `per-worker:round-robin` (`per-worker:rr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dispatch {
    /// One queue shared by all workers.
    #[default]
    Shared,
    /// A queue per worker, requests assigned on arrival.
    PerWorker(Assign),
}

impl Dispatch {
    /// True for per-worker queues.
    pub fn is_per_worker(self) -> bool {
        matches!(self, Dispatch::PerWorker(_))
    }
}

/// How a dispatch is written (`harness.dispatch`).
pub const DISPATCH_FORM: &str =
    "shared, per-worker (a random worker), per-worker:random or per-worker:round-robin";

impl std::str::FromStr for Dispatch {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        match s.trim() {
            "shared" => Ok(Dispatch::Shared),
            "per-worker" | "per-worker:random" => Ok(Dispatch::PerWorker(Assign::Random)),
            "per-worker:round-robin" | "per-worker:rr" => {
                Ok(Dispatch::PerWorker(Assign::RoundRobin))
            }
            _ => Err(
                crate::error::ValueError::new(s, format!("unknown dispatch `{s}`"))
                    .expecting(DISPATCH_FORM),
            ),
        }
    }
}

impl std::fmt::Display for Dispatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Dispatch::Shared => "shared",
            Dispatch::PerWorker(Assign::Random) => "per-worker:random",
            Dispatch::PerWorker(Assign::RoundRobin) => "per-worker:round-robin",
        })
    }
}

crate::serde_as_display!(Dispatch);

/// Picks each request's worker for [`Dispatch::PerWorker`]: seeded, so the
/// harness and a replay of the same seed assign alike.
#[derive(Debug, Clone)]
pub struct Assigner {
    workers: usize,
    assign: Assign,
    next: usize,
    rng: Xoshiro256PlusPlus,
}

impl Assigner {
    /// Assigns among `workers` by `assign`, seeded.
    pub fn new(workers: usize, assign: Assign, seed: u64) -> Self {
        Assigner {
            workers: workers.max(1),
            assign,
            next: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    /// The worker of the next request.
    #[inline]
    pub fn next_worker(&mut self) -> usize {
        match self.assign {
            Assign::Random => self.rng.gen_range(0..self.workers),
            Assign::RoundRobin => {
                let w = self.next;
                self.next = (w + 1) % self.workers;
                w
            }
        }
    }
}

/// Where the waiting requests are (one a queue: the variants' sizes cost nothing worth a box).
#[allow(clippy::large_enum_variant)]
enum Waiting<T> {
    Fifo(SegQueue<T>),
    /// LIFO or random order.
    Backlog(Backlog<T>),
}

/// A multi-producer, multi-consumer request queue.
pub struct RequestQueue<T> {
    waiting: Waiting<T>,
    /// The sleepers' lock (held from a sleeper's count to its wait, and to notify).
    sleep: Mutex<()>,
    cv: Condvar,
    /// Workers counted before their last look and asleep (or about to be) on `cv`.
    sleepers: AtomicUsize,
    closed: AtomicBool,
    /// How long a hybrid waiter spins before it blocks.
    spin_ns: u64,
}

impl<T> RequestQueue<T> {
    /// An empty queue; `capacity` is how many LIFO or random-order requests its ring holds
    /// before the oldest spill to a locked list, `spin_ns` how long a hybrid waiter spins,
    /// `seed` seeds random order.
    pub fn new(discipline: Discipline, capacity: usize, spin_ns: u64, seed: u64) -> Self {
        RequestQueue {
            waiting: match discipline {
                Discipline::Fifo => Waiting::Fifo(SegQueue::new()),
                d => Waiting::Backlog(Backlog::new(capacity, d == Discipline::Lifo, seed)),
            },
            sleep: Mutex::new(()),
            cv: Condvar::new(),
            sleepers: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            spin_ns,
        }
    }

    /// Adds a request; wakes a sleeping worker if there is one.
    pub fn push(&self, item: T) {
        match &self.waiting {
            Waiting::Fifo(q) => q.push(item),
            Waiting::Backlog(b) => b.push(item),
        }
        // A sleeper counts itself before its last look, both sides fenced: either its look
        // saw this request, or this load sees it counted. It holds the lock from its count to
        // its wait, so taking the lock here means it is waiting when notified.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) > 0 {
            let _g = self.sleep.lock();
            self.cv.notify_one();
        }
    }

    /// Number of waiting requests (a snapshot).
    pub fn len(&self) -> usize {
        match &self.waiting {
            Waiting::Fifo(q) => q.len(),
            Waiting::Backlog(b) => b.len(),
        }
    }

    /// No request waiting (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// No more pushes: waiting workers drain what is left, then get `None`.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _g = self.sleep.lock();
        self.cv.notify_all();
    }

    /// One look: the discipline's pick, `None` if nothing is waiting.
    fn look(&self) -> Option<T> {
        match &self.waiting {
            Waiting::Fifo(q) => q.pop(),
            Waiting::Backlog(b) => b.pop(),
        }
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
            if let Some(x) = self.look() {
                return Some(x);
            }
            if self.closed.load(Ordering::Acquire) {
                // Pushes happen-before close, so one look after seeing it is enough.
                return self.look();
            }
            if spin_until == u64::MAX || now_ns() < spin_until {
                std::hint::spin_loop();
                continue;
            }
            let mut g = self.sleep.lock();
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            let closed = self.closed.load(Ordering::Acquire);
            let got = self.look();
            if got.is_none() && !closed {
                self.cv.wait(&mut g);
            }
            self.sleepers.fetch_sub(1, Ordering::Relaxed);
            if got.is_some() || closed {
                return got;
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
    fn dispatch_round_trips_and_assigns() {
        for s in ["shared", "per-worker:random", "per-worker:round-robin"] {
            let d: Dispatch = s.parse().unwrap();
            assert_eq!(d.to_string(), s);
            assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{s}\""));
        }
        assert_eq!(
            "per-worker".parse::<Dispatch>().unwrap(),
            Dispatch::PerWorker(Assign::Random)
        );
        assert!("perworker"
            .parse::<Dispatch>()
            .unwrap_err()
            .to_string()
            .contains("per-worker"));
        let mut rr = Assigner::new(3, Assign::RoundRobin, 1);
        let got: Vec<usize> = (0..7).map(|_| rr.next_worker()).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2, 0]);
        let mut r = Assigner::new(4, Assign::Random, 9);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[r.next_worker()] += 1;
        }
        assert!(
            counts.iter().all(|&c| (9_000..11_000).contains(&c)),
            "{counts:?}"
        );
    }

    /// Every request reaches exactly one worker, whatever the discipline and the wait (a lost
    /// wake-up would leave a blocked worker asleep and the test hung; a double pop, a repeat).
    #[test]
    fn every_item_delivered_once_under_each_wait_mode() {
        for d in [Discipline::Fifo, Discipline::Lifo, Discipline::Random] {
            for mode in [WaitMode::Spin, WaitMode::Block, WaitMode::Hybrid] {
                let q = Arc::new(RequestQueue::new(d, 16, 20_000, 1));
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
                let got: Vec<Vec<u32>> = workers.into_iter().map(|h| h.join().unwrap()).collect();
                if d == Discipline::Fifo {
                    // One producer: each worker sees its requests in the order they were pushed.
                    assert!(
                        got.iter().all(|g| g.windows(2).all(|p| p[0] < p[1])),
                        "{mode}"
                    );
                }
                let mut all: Vec<u32> = got.concat();
                all.sort();
                assert_eq!(all, (0..20_000).collect::<Vec<_>>(), "{d} {mode}");
                assert!(q.is_empty());
            }
        }
    }

    /// Blocked workers are woken by each push, one request at a time, and by close.
    #[test]
    fn blocked_workers_wake_for_each_request_and_for_close() {
        let q = Arc::new(RequestQueue::new(Discipline::Fifo, 16, 0, 1));
        let workers: Vec<_> = (0..3)
            .map(|_| {
                let q = q.clone();
                std::thread::spawn(move || std::iter::from_fn(|| q.pop(WaitMode::Block)).count())
            })
            .collect();
        for i in 0..300u32 {
            // Long enough between pushes for every worker to be asleep again.
            std::thread::sleep(std::time::Duration::from_micros(300));
            q.push(i);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        q.close();
        let n: usize = workers.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(n, 300);
    }
}
