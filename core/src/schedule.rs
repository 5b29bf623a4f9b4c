//! The open-loop schedule: when each request is due, what it carries, which worker a
//! per-worker dispatch gives it, and the phase bookkeeping (warmup, measured counts,
//! arrivals per saturation slice). One sequence per seed, whoever draws it.

use crate::app::Client;
use crate::arrival::{derive_seed, Share};
use crate::collector::IntervalSink;
use crate::queue::{Assigner, Discipline, Dispatch};
use crate::spec::{Bound, RunSpec};
use rand::Rng;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// One scheduled request as handed to whoever releases it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Item {
    /// Position in the schedule, from 0, warmup included.
    pub index: u64,
    /// Intended time on the harness clock (ns).
    pub intended: u64,
    /// In the measured phase (else warmup).
    pub measured: bool,
    /// The first measured request: the measured phase starts with it.
    pub first_measured: bool,
    /// The worker a per-worker dispatch assigned (0 with a shared queue).
    pub worker: usize,
}

/// The open-loop schedule: arrival times and request contents, in order.
/// Shared by every way of releasing requests (inline workers, the shaper
/// thread, transport clients) so they all see the same sequence per seed.
pub struct Schedule {
    arrival: Box<dyn crate::arrival::ArrivalProcess>,
    client: Box<dyn Client>,
    t0: u64,
    next_index: u64,
    warmup: Bound,
    measure: Bound,
    measure_start: Option<u64>,
    generated_warmup: u64,
    generated_measured: u64,
    first_measured_intended: u64,
    last_measured_intended: u64,
    slice_ns: u64,
    arrivals_per_slice: Vec<u64>,
    done: bool,
    assigner: Option<Assigner>,
    backlog: Backlog,
    /// Requests generated ahead by an idle inline worker ([`Schedule::prefill_one`]), in
    /// arrival order; [`Schedule::next`] takes from here first.
    ahead: VecDeque<(Item, Vec<u8>)>,
    /// Arrivals counted as they come due ([`Schedule::watch_due`]; `None`: not counted).
    due: Option<Due>,
}

/// The arrivals [`Schedule::due_by`] drew ahead of the requests, and how many came due.
#[derive(Default)]
struct Due {
    /// Offsets drawn by `due_by` that no request has taken yet, in order.
    drawn: VecDeque<u64>,
    /// Offsets drawn (by either) that were not yet due at the last look, in order.
    pending: VecDeque<u64>,
    /// Arrivals due so far.
    passed: u64,
}

/// At most this many requests are generated ahead of their arrival.
pub const AHEAD_MAX: usize = 1024;

impl Schedule {
    /// A schedule for `spec` (arrivals from `spec.arrival`, seeded) starting
    /// at `t0` (set it later with [`Schedule::set_start`] if not known yet).
    pub fn new(spec: &RunSpec, client: Box<dyn Client>, t0: u64) -> Self {
        Self::share(spec, client, t0, Share::WHOLE)
    }

    /// Share `share` of the schedule of `spec` (see [`crate::arrival::Share`]): its arrivals
    /// are that share of the run's stream, and its phase bounds in requests that share of the
    /// run's (bounds in seconds are the run's), so the shares of several producers add up to
    /// the run. Requests come from `client` (each producer has its own); `Item::index` counts
    /// this share's requests.
    pub fn share(spec: &RunSpec, client: Box<dyn Client>, t0: u64, share: Share) -> Self {
        let split = |b: Bound| match b {
            Bound::Requests(n) => Bound::Requests(share.requests(n)),
            s => s,
        };
        Schedule {
            arrival: spec
                .arrival
                .build_share(spec.qps, derive_seed(spec.seed, 1), share)
                .expect("RunSpec::validate checked the rate"),
            client,
            t0,
            next_index: 0,
            warmup: split(spec.warmup),
            measure: split(spec.measure),
            measure_start: None,
            generated_warmup: 0,
            generated_measured: 0,
            first_measured_intended: 0,
            last_measured_intended: 0,
            slice_ns: spec.slice_ns(),
            arrivals_per_slice: Vec::new(),
            done: false,
            assigner: match spec.dispatch {
                Dispatch::Shared => None,
                Dispatch::PerWorker(a) => {
                    Some(Assigner::new(spec.threads, a, derive_seed(spec.seed, 4)))
                }
            },
            backlog: Backlog::new(spec, derive_seed(spec.seed, 5)),
            ahead: VecDeque::new(),
            due: None,
        }
    }

    /// Counts the arrivals that come due, for [`Schedule::due_by`].
    pub fn watch_due(&mut self) {
        self.due = Some(Due::default());
    }

    /// Arrivals whose intended time is at most `now` (warmup included), when watched: less
    /// the completions, the requests in the system (queued or in service) at `now`. A
    /// backlog's requests are generated only when a worker reaches them, so the arrival
    /// times up to `now` are drawn here, ahead, and handed to the requests in order: the
    /// schedule's times are the same sequence either way.
    pub fn due_by(&mut self, now: u64) -> Option<u64> {
        let t0 = self.t0;
        let d = self.due.as_mut()?;
        loop {
            while d.pending.front().is_some_and(|&o| t0 + o <= now) {
                d.pending.pop_front();
                d.passed += 1;
            }
            if !d.pending.is_empty() || self.done || d.drawn.back() == Some(&crate::arrival::END) {
                break;
            }
            let o = self.arrival.next_offset_ns();
            d.drawn.push_back(o);
            if o == crate::arrival::END {
                break;
            }
            d.pending.push_back(o);
        }
        // Arrivals past the end of a schedule by count never become requests.
        let made = self.generated_warmup + self.generated_measured;
        Some(if self.done {
            d.passed.min(made)
        } else {
            d.passed
        })
    }

    /// The next arrival's offset: one `due_by` drew, or a fresh draw.
    fn next_offset(&mut self) -> u64 {
        let Some(d) = &mut self.due else {
            return self.arrival.next_offset_ns();
        };
        if let Some(o) = d.drawn.pop_front() {
            return o;
        }
        let o = self.arrival.next_offset_ns();
        if o != crate::arrival::END {
            d.pending.push_back(o);
        }
        o
    }

    /// Sets the schedule's start (ns, harness clock) before the first request is drawn.
    pub fn set_start(&mut self, t0: u64) {
        self.t0 = t0;
    }

    /// What the schedule generated so far, for building a [`RunResult`]
    /// outside [`run_integrated`] (transport clients).
    pub fn stats(&self) -> ScheduleStats {
        ScheduleStats {
            t0: self.t0,
            measure_start: self.measure_start,
            generated_warmup: self.generated_warmup,
            generated_measured: self.generated_measured,
            first_measured_intended: self.first_measured_intended,
            last_measured_intended: self.last_measured_intended,
            slice_ns: self.slice_ns,
            arrivals_per_slice: self.arrivals_per_slice.clone(),
        }
    }

    /// The next request (payload written into `buf`), or `None` when the
    /// measured phase is over. Sets `sink.measure_start` on the first
    /// measured request.
    pub fn next(&mut self, buf: &mut Vec<u8>, sink: &IntervalSink) -> Option<Item> {
        if let Some((item, mut p)) = self.ahead.pop_front() {
            std::mem::swap(buf, &mut p);
            self.backlog.spare.push(p);
            return Some(item);
        }
        self.generate(buf, sink)
    }

    /// Another request of the client's, not on the schedule (a fan-out's further leaves and
    /// copies: each its own draw of the app's requests), written into `buf`.
    pub fn extra_request(&mut self, buf: &mut Vec<u8>) {
        buf.clear();
        self.client.next_request(buf);
    }

    /// Generates the next request ahead of time (an inline worker does this while it waits
    /// for an arrival, so that a backlog later does not wait for the client's request
    /// generation: that would be charged to queueing). False when the schedule is over or
    /// [`AHEAD_MAX`] requests are already waiting.
    pub fn prefill_one(&mut self, sink: &IntervalSink) -> bool {
        if self.ahead.len() >= AHEAD_MAX {
            return false;
        }
        let mut p = self.backlog.spare.pop().unwrap_or_default();
        match self.generate(&mut p, sink) {
            Some(item) => {
                self.ahead.push_back((item, p));
                true
            }
            None => false,
        }
    }

    fn generate(&mut self, buf: &mut Vec<u8>, sink: &IntervalSink) -> Option<Item> {
        if self.done {
            return None;
        }
        let off = self.next_offset();
        if off == crate::arrival::END {
            // A trace ran out (validate makes sure it covers the run).
            self.done = true;
            return None;
        }
        let intended = self.t0 + off;
        let measured = match self.warmup {
            Bound::Requests(n) => self.next_index >= n,
            Bound::Seconds(s) => off as f64 >= s * 1e9,
        };
        let mut first_measured = false;
        if measured {
            let start = match self.measure_start {
                Some(t) => t,
                None => {
                    let t = match self.warmup {
                        Bound::Requests(_) => intended,
                        Bound::Seconds(s) => self.t0 + (s * 1e9) as u64,
                    };
                    self.measure_start = Some(t);
                    // Several producers' shares: the measured phase starts with the first.
                    store_min(&sink.measure_start, t);
                    self.first_measured_intended = intended;
                    first_measured = true;
                    t
                }
            };
            let over = match self.measure {
                Bound::Requests(m) => self.generated_measured >= m,
                Bound::Seconds(d) => (intended - start) as f64 >= d * 1e9,
            };
            if over {
                self.done = true;
                return None;
            }
            self.generated_measured += 1;
            self.last_measured_intended = intended;
            let slice = ((intended - start) / self.slice_ns) as usize;
            if slice >= self.arrivals_per_slice.len() {
                self.arrivals_per_slice.resize(slice + 1, 0);
            }
            self.arrivals_per_slice[slice] += 1;
        } else {
            self.generated_warmup += 1;
        }
        buf.clear();
        self.client.next_request(buf);
        let index = self.next_index;
        self.next_index += 1;
        Some(Item {
            index,
            intended,
            measured,
            first_measured,
            worker: self.assigner.as_mut().map_or(0, |a| a.next_worker()),
        })
    }

    /// Inline workers: the next request worker `w` serves, its payload in
    /// `buf`. A shared FIFO takes the next arrival; otherwise the worker
    /// picks by `discipline` among the requests of its queue already due at
    /// `now` (see the module docs), or takes the earliest one to come.
    pub fn claim(
        &mut self,
        w: usize,
        now: u64,
        discipline: Discipline,
        buf: &mut Vec<u8>,
        sink: &IntervalSink,
    ) -> Option<Item> {
        if discipline == Discipline::Fifo && self.assigner.is_none() {
            return self.next(buf, sink);
        }
        let q = if self.assigner.is_some() { w } else { 0 };
        // Move every due request, and at least one for `q`, into the queues.
        loop {
            if self.backlog.peeked.is_none() {
                let mut p = self.backlog.spare.pop().unwrap_or_default();
                match self.next(&mut p, sink) {
                    Some(it) => self.backlog.peeked = Some((it, p)),
                    None => break,
                }
            }
            let (it, _) = self.backlog.peeked.as_ref().expect("just filled");
            if it.intended > now && !self.backlog.queues[q].is_empty() {
                break;
            }
            let (it, p) = self.backlog.peeked.take().expect("just filled");
            let dst = if self.assigner.is_some() {
                it.worker
            } else {
                0
            };
            self.backlog.queues[dst].push_back((it, p));
        }
        self.backlog.take(q, now, discipline, buf)
    }
}

/// Stores `t` in `a` unless `a` holds an earlier, non-zero time (0: not set yet).
fn store_min(a: &AtomicU64, t: u64) {
    let _ = a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        (cur == 0 || t < cur).then_some(t)
    });
}

/// Requests generated but not yet claimed by an inline worker, per queue
/// (one shared, or one per worker), in arrival order.
struct Backlog {
    queues: Vec<VecDeque<(Item, Vec<u8>)>>,
    /// The next request, generated but not yet due.
    peeked: Option<(Item, Vec<u8>)>,
    /// Payload buffers to reuse.
    spare: Vec<Vec<u8>>,
    rng: Xoshiro256PlusPlus,
}

impl Backlog {
    fn new(spec: &RunSpec, seed: u64) -> Self {
        let n = if spec.dispatch.is_per_worker() {
            spec.threads
        } else {
            1
        };
        Backlog {
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            peeked: None,
            spare: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    fn take(&mut self, q: usize, now: u64, d: Discipline, buf: &mut Vec<u8>) -> Option<Item> {
        let queue = &mut self.queues[q];
        // Arrival order makes the due requests a prefix (with random order the prefix is
        // shuffled, but every request in it is still due and the rest still in order).
        let due = queue.partition_point(|(it, _)| it.intended <= now);
        let (it, p) = match (d, due) {
            (_, 0) | (Discipline::Fifo, _) => queue.pop_front(),
            // The newest due request: the last of the prefix, usually the queue's last.
            (Discipline::Lifo, _) => queue.remove(due - 1),
            // Any due one, in O(1): the first takes its place. (`remove` shifted half the
            // backlog under the schedule's lock: a backlog of thousands after a stall made
            // each claim slower than a service, and the run never caught up — 4 workers at
            // 320 k/s served 15 k/s on a 16-CPU host.)
            (Discipline::Random, _) => {
                let i = self.rng.gen_range(0..due);
                queue.swap_remove_front(i)
            }
        }?;
        let old = std::mem::replace(buf, p);
        self.spare.push(old);
        Some(it)
    }
}

/// A snapshot of a [`Schedule`]'s bookkeeping (see [`Schedule::stats`]).
#[derive(Debug, Clone)]
pub struct ScheduleStats {
    /// Schedule start on the harness clock (ns); intended times count from it.
    pub t0: u64,
    /// Start of the measured phase (ns), once a measured request was drawn.
    pub measure_start: Option<u64>,
    /// Warmup requests drawn.
    pub generated_warmup: u64,
    /// Measured requests drawn.
    pub generated_measured: u64,
    /// Intended time of the first measured request (ns).
    pub first_measured_intended: u64,
    /// Intended time of the last measured request (ns).
    pub last_measured_intended: u64,
    /// Width of one saturation-check slice (ns).
    pub slice_ns: u64,
    /// Measured arrivals per slice, by intended time.
    pub arrivals_per_slice: Vec<u64>,
}

/// A client whose payloads count 1, 2, 3, … (tests of who gets which request).
#[cfg(test)]
pub(crate) struct Counter(pub u64);

#[cfg(test)]
impl Client for Counter {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        self.0 += 1;
        out.extend_from_slice(&self.0.to_le_bytes());
    }
}

#[cfg(test)]
mod backlog_tests {
    use super::*;

    fn backlog(intended: impl IntoIterator<Item = u64>) -> Backlog {
        let q = intended
            .into_iter()
            .enumerate()
            .map(|(i, t)| {
                let it = Item {
                    index: i as u64,
                    intended: t,
                    measured: true,
                    first_measured: false,
                    worker: 0,
                };
                (it, Vec::new())
            })
            .collect();
        Backlog {
            queues: vec![q],
            peeked: None,
            spare: Vec::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(7),
        }
    }

    /// The intended time of the request `take` hands out at `now` (None: the backlog is empty).
    fn take(b: &mut Backlog, now: u64, d: Discipline) -> Option<u64> {
        b.take(0, now, d, &mut Vec::new()).map(|it| it.intended)
    }

    #[test]
    fn random_order_takes_any_due_request_and_leaves_the_rest_in_order() {
        use Discipline::Random;
        // 2 000 due by t = 5 000, 10 not yet.
        let mut b = backlog((1..=2000).chain(10_001..=10_010));
        let got: Vec<u64> = (0..1999)
            .map(|_| take(&mut b, 5000, Random).unwrap())
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
        assert!(take(&mut b, 5000, Random).unwrap() <= 2000);
        let mut rest: Vec<u64> = (0..10)
            .map(|_| take(&mut b, 20_000, Random).unwrap())
            .collect();
        rest.sort_unstable();
        assert_eq!(rest, (10_001..=10_010).collect::<Vec<_>>());
        assert_eq!(take(&mut b, 20_000, Random), None);
    }

    #[test]
    fn lifo_takes_the_newest_due_and_fifo_the_oldest() {
        let mut b = backlog([1, 2, 3, 50]);
        assert_eq!(take(&mut b, 10, Discipline::Lifo), Some(3));
        assert_eq!(take(&mut b, 10, Discipline::Fifo), Some(1));
        // None due: the earliest, whatever the discipline.
        assert_eq!(take(&mut b, 0, Discipline::Lifo), Some(2));
        assert_eq!(take(&mut b, 0, Discipline::Random), Some(50));
    }
}

#[cfg(test)]
mod prefill_tests {
    use super::*;

    fn drain(s: &mut Schedule, sink: &IntervalSink, prefill_every: usize) -> Vec<(u64, u64, u64)> {
        let mut buf = Vec::new();
        let mut got = Vec::new();
        loop {
            if prefill_every > 0 && got.len() % prefill_every == 0 {
                for _ in 0..prefill_every {
                    s.prefill_one(sink);
                }
            }
            let Some(it) = s.next(&mut buf, sink) else {
                break;
            };
            let payload = u64::from_le_bytes(buf[..8].try_into().unwrap());
            got.push((it.index, it.intended, payload));
        }
        got
    }

    /// Requests generated ahead come out exactly as without: same order, same intended
    /// times, each with its own payload; the schedule ends at the same request; the
    /// look-ahead is bounded.
    #[test]
    fn generating_ahead_changes_nothing_but_when() {
        let spec = RunSpec {
            measure: Bound::Requests(3_000),
            warmup: Bound::Requests(100),
            ..RunSpec::default()
        };
        let sink = IntervalSink::new(1);
        let plain = drain(&mut Schedule::new(&spec, Box::new(Counter(0)), 0), &sink, 0);
        assert_eq!(plain.len(), 3_100);
        for k in [1, 7, 5_000] {
            let mut s = Schedule::new(&spec, Box::new(Counter(0)), 0);
            assert_eq!(drain(&mut s, &sink, k), plain, "prefill {k} at a time");
            assert_eq!(s.stats().generated_measured, 3_000);
        }
        let mut s = Schedule::new(&spec, Box::new(Counter(0)), 0);
        while s.prefill_one(&sink) {}
        assert_eq!(s.ahead.len(), AHEAD_MAX);
    }
}
