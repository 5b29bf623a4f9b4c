//! The open-loop schedule: when each request is due, what it carries, which worker a
//! per-worker dispatch gives it, and the phase bookkeeping (warmup, measured counts,
//! arrivals per saturation slice). One sequence per seed, whoever draws it.

use crate::app::Client;
use crate::arrival::{derive_seed, Share};
use crate::collector::IntervalSink;
use crate::queue::{Assigner, Dispatch};
use crate::spec::{Bound, RunSpec};
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
    /// Arrivals counted as they come due ([`Schedule::watch_due`]; `None`: not counted).
    due: Option<Due>,
    /// One of several producers dealt the same stream ([`Schedule::dealt`]); `None`: the
    /// whole stream, or an independent share ([`Schedule::share`]).
    deal: Option<Deal>,
}

/// A share of the run's stream dealt in order (see [`Schedule::dealt`]): this producer draws
/// every arrival of the whole stream and keeps every `m`-th, and it learns from the draws it
/// skips where the run's measured phase starts, so that every producer uses the same start and
/// the same end and their requests together are exactly one producer's, in order.
struct Deal {
    share: Share,
    /// The whole stream's index of the next draw.
    drawn: u64,
    /// The run's warmup in requests (of the whole stream), when it is bounded so.
    warmup_requests: Option<u64>,
    /// The run's measured requests (of the whole stream), when bounded so.
    measure_requests: Option<u64>,
    /// Offset of the whole stream's first measured arrival, once drawn.
    start_offset: Option<u64>,
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
            due: None,
            deal: None,
        }
    }

    /// Share `share` of the run's schedule dealt in order: the whole stream's arrivals (the
    /// very times one producer draws for this seed, whatever the process) of which this
    /// producer keeps those whose index `i` has `i mod m = j`, and the phases of the whole
    /// stream (its warmup and measured requests by count, or by time from the same start), so
    /// that the shares' requests together are the run's, index for index: `Item::index` is the
    /// whole stream's. Payloads come from `client` (each producer has its own). For a shared
    /// FIFO fed by several producers (see [`crate::feed`]); not with per-worker dispatch.
    pub fn dealt(spec: &RunSpec, client: Box<dyn Client>, t0: u64, share: Share) -> Self {
        let mut s = Self::new(spec, client, t0);
        s.assigner = None;
        if share.m > 1 {
            let n = |b: Bound| match b {
                Bound::Requests(n) => Some(n),
                Bound::Seconds(_) => None,
            };
            s.deal = Some(Deal {
                share,
                drawn: 0,
                warmup_requests: n(spec.warmup),
                measure_requests: n(spec.measure),
                start_offset: None,
            });
            // Counted per share once the stream's measured phase is found (`next_offset`).
            if let Bound::Requests(w) = spec.warmup {
                s.warmup = Bound::Requests(share.requests(w));
            }
        }
        s
    }

    /// The next arrival offset of a dealt share (see [`Schedule::dealt`]): skips the other
    /// shares' arrivals, noting where the stream's measured phase starts and, from it, how many
    /// of the measured requests are this share's.
    fn next_dealt(&mut self) -> u64 {
        let d = self.deal.as_mut().expect("a dealt share");
        let (j, m) = (d.share.j as u64, d.share.m as u64);
        loop {
            let g = d.drawn;
            let o = self.arrival.next_offset_ns();
            if o == crate::arrival::END {
                return o;
            }
            d.drawn += 1;
            if d.start_offset.is_none() {
                let first = match (d.warmup_requests, self.warmup) {
                    (Some(w), _) => g >= w,
                    (None, Bound::Seconds(s)) => o as f64 >= s * 1e9,
                    (None, Bound::Requests(_)) => unreachable!("counted warmups are noted"),
                };
                if first {
                    d.start_offset = Some(o);
                    if let Some(n) = d.measure_requests {
                        // The stream's measured requests are its indexes g .. g + n.
                        let mine = d.share.requests(g + n) - d.share.requests(g);
                        self.measure = Bound::Requests(mine);
                    }
                }
            }
            if g % m == j {
                return o;
            }
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
        if self.deal.is_some() {
            return self.next_dealt();
        }
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

    /// Another request of the client's, not on the schedule (a fan-out's further leaves and
    /// copies: each its own draw of the app's requests), written into `buf`.
    pub fn extra_request(&mut self, buf: &mut Vec<u8>) {
        buf.clear();
        self.client.next_request(buf);
    }

    /// The next request (payload written into `buf`), or `None` when the
    /// measured phase is over. Sets `sink.measure_start` on the first
    /// measured request.
    pub fn next(&mut self, buf: &mut Vec<u8>, sink: &IntervalSink) -> Option<Item> {
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
        // A dealt share's measured phase starts where the whole stream's does.
        let dealt_start = self.deal.as_ref().and_then(|d| d.start_offset);
        let mut first_measured = false;
        if measured {
            let start = match self.measure_start {
                Some(t) => t,
                None => {
                    let t = match (self.warmup, dealt_start) {
                        (Bound::Seconds(s), _) => self.t0 + (s * 1e9) as u64,
                        (Bound::Requests(_), Some(o)) => self.t0 + o,
                        (Bound::Requests(_), None) => intended,
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
        let index = match &self.deal {
            Some(d) => d.share.global(self.next_index),
            None => self.next_index,
        };
        self.next_index += 1;
        Some(Item {
            index,
            intended,
            measured,
            first_measured,
            worker: self.assigner.as_mut().map_or(0, |a| a.next_worker()),
        })
    }
}

/// Stores `t` in `a` unless `a` holds an earlier, non-zero time (0: not set yet).
fn store_min(a: &AtomicU64, t: u64) {
    let _ = a.fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
        (cur == 0 || t < cur).then_some(t)
    });
}

/// A snapshot of a [`Schedule`]'s bookkeeping (see [`Schedule::stats`]); what a run's
/// schedule was ([`crate::RunResult::schedule`]), also as a loopback client sends it to its
/// coordinator.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
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

impl ScheduleStats {
    /// Several producers' schedules (shares of one stream) as one: counts summed, the measured
    /// phase from the earliest start to the latest measured arrival, arrivals per slice added
    /// slice by slice.
    pub fn merge(all: &[ScheduleStats]) -> ScheduleStats {
        let mut s = all[0].clone();
        for o in &all[1..] {
            s.measure_start = match (s.measure_start, o.measure_start) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            if o.generated_measured > 0 {
                s.first_measured_intended = if s.generated_measured > 0 {
                    s.first_measured_intended.min(o.first_measured_intended)
                } else {
                    o.first_measured_intended
                };
                s.last_measured_intended = s.last_measured_intended.max(o.last_measured_intended);
            }
            s.generated_warmup += o.generated_warmup;
            s.generated_measured += o.generated_measured;
            if o.arrivals_per_slice.len() > s.arrivals_per_slice.len() {
                s.arrivals_per_slice.resize(o.arrivals_per_slice.len(), 0);
            }
            for (a, b) in s.arrivals_per_slice.iter_mut().zip(&o.arrivals_per_slice) {
                *a += b;
            }
        }
        s
    }
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
mod dealt_tests {
    use super::*;
    use crate::arrival::ArrivalSpec;

    /// Every request of a schedule: (index, intended, measured).
    fn drain(s: &mut Schedule) -> Vec<(u64, u64, bool)> {
        let sink = IntervalSink::new(1);
        let mut buf = Vec::new();
        std::iter::from_fn(|| s.next(&mut buf, &sink))
            .map(|it| (it.index, it.intended, it.measured))
            .collect()
    }

    /// The dealt shares of a schedule are, together, exactly the one producer's schedule —
    /// the same indexes, arrival times and phases, for every kind of arrival process (renewal,
    /// modulated, a load profile, a trace in its order) and every kind of phase bound — and
    /// their merged bookkeeping is its bookkeeping: the split streams form the configured
    /// process, its rate and gaps included.
    #[test]
    fn dealt_shares_are_the_whole_schedule() {
        let bounds = [
            (Bound::Requests(37), Bound::Requests(5_000)),
            (Bound::Requests(0), Bound::Seconds(0.05)),
            (Bound::Seconds(0.01), Bound::Requests(4_001)),
            (Bound::Seconds(0.01), Bound::Seconds(0.04)),
        ];
        // A trace of irregular times (its order must survive the deal), in microseconds.
        let trace_file =
            std::env::temp_dir().join(format!("taillab-dealt-{}.txt", std::process::id()));
        let times: Vec<String> = (0..6_000u64)
            .map(|i| (i * 10 + (i * i) % 7).to_string())
            .collect();
        std::fs::write(&trace_file, times.join("\n")).unwrap();
        let trace = format!("trace:{},unit=us", trace_file.display());
        for arrival in [
            "poisson",
            "fixed",
            "lognormal:cv=2",
            "mmpp:on=5ms,off=20ms,ratio=8",
            "ramp:50000..150000 over 30ms",
            trace.as_str(),
        ] {
            for (warmup, measure) in bounds {
                let spec = RunSpec {
                    qps: 100_000.0,
                    arrival: arrival.parse::<ArrivalSpec>().unwrap(),
                    warmup,
                    measure,
                    seed: 11,
                    ..RunSpec::default()
                };
                let mut one = Schedule::new(&spec, Box::new(Counter(0)), 1_000);
                let whole = drain(&mut one);
                let want = one.stats();
                for m in [2, 3, 8] {
                    let mut shares: Vec<Schedule> = (0..m)
                        .map(|j| {
                            let share = Share::new(j, m).unwrap();
                            Schedule::dealt(&spec, Box::new(Counter(0)), 1_000, share)
                        })
                        .collect();
                    let mut got: Vec<(u64, u64, bool)> =
                        shares.iter_mut().flat_map(drain).collect();
                    // Share j holds the indexes j, j + m, ... (checked before sorting).
                    got.sort_unstable();
                    let what = format!("{arrival} {warmup:?} {measure:?} m {m}");
                    assert_eq!(got.len(), whole.len(), "{what}");
                    assert_eq!(got, whole, "{what}");
                    let stats: Vec<ScheduleStats> = shares.iter().map(|s| s.stats()).collect();
                    let merged = ScheduleStats::merge(&stats);
                    assert_eq!(merged.measure_start, want.measure_start, "{what}");
                    assert_eq!(merged.generated_warmup, want.generated_warmup, "{what}");
                    assert_eq!(merged.generated_measured, want.generated_measured, "{what}");
                    assert_eq!(
                        (
                            merged.first_measured_intended,
                            merged.last_measured_intended
                        ),
                        (want.first_measured_intended, want.last_measured_intended),
                        "{what}"
                    );
                    assert_eq!(merged.arrivals_per_slice, want.arrivals_per_slice, "{what}");
                }
            }
        }
        let _ = std::fs::remove_file(&trace_file);
    }

    /// Each share keeps its own indexes (j, j + m, ...) in order, and every producer's
    /// payloads are its own client's.
    #[test]
    fn a_dealt_share_keeps_every_mth_request() {
        let spec = RunSpec {
            qps: 50_000.0,
            measure: Bound::Requests(1_000),
            ..RunSpec::default()
        };
        let mut s = Schedule::dealt(&spec, Box::new(Counter(100)), 0, Share::new(2, 5).unwrap());
        let sink = IntervalSink::new(1);
        let mut buf = Vec::new();
        let mut k = 0;
        while let Some(it) = s.next(&mut buf, &sink) {
            assert_eq!(it.index, 5 * k + 2);
            assert_eq!(u64::from_le_bytes(buf[..8].try_into().unwrap()), 101 + k);
            k += 1;
        }
        assert_eq!(k, 200);
    }
}
