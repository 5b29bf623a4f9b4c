//! What defines one run besides the app: rate, arrival process, phases, workers and how
//! they wait and take work, where they run, what is kept. [`RunSpec::validate`] refuses a
//! bad spec with a message that names the setting; the expected counts and lengths of the
//! phases size the records and the drain deadline.

use crate::app::AppError;
use crate::arrival::ArrivalSpec;
use crate::clock::WaitMode;
use crate::dist::Dist;
use crate::queue::{Discipline, Dispatch};
use crate::records::RECORD_BYTES;

/// Errors of a run; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A setting out of range; the message names the flag and the allowed values.
    #[error("invalid run: {0}")]
    Invalid(String),
    /// Keeping every request's stamps would take more memory than
    /// `record.max_record_mem` allows.
    #[error("keeping per-request records for {requests} requests needs {need_mb} MiB, over the {cap_mb} MiB cap; drop --save-requests or raise --max-record-mem (e.g. 4GiB)")]
    RecordsTooBig {
        /// Requests the run may schedule (warmup included, padded for count variation).
        requests: u64,
        /// Memory the records would take (MiB).
        need_mb: u64,
        /// The cap (MiB).
        cap_mb: u64,
    },
    /// The app failed to start a server or a worker.
    #[error(transparent)]
    App(#[from] AppError),
    /// The host refused a thread's placement (CPU pinning or SCHED_FIFO priority).
    #[error("{0}")]
    Setup(String),
    /// A worker thread panicked (its index, the panic message): the run is void.
    #[error("worker thread {0} panicked; the run is void: {1}")]
    Panicked(usize, String),
}

/// How a phase ends: after a number of requests or a time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Bound {
    /// This many requests, in schedule order.
    Requests(u64),
    /// This long in intended time (s).
    Seconds(f64),
}

crate::names_enum! {
/// Who releases requests at their intended times (see the module docs).
    pub enum ShaperMode ("shaper") {
        /// Workers claim the next scheduled arrival and wait for it (FIFO, no extra thread).
        Inline = "inline",
        /// A shaper thread releases requests into a real queue (any discipline).
        Thread = "thread",
    }
}

/// Everything that defines one run (besides the app).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunSpec {
    /// Offered rate (requests/s), 0 < qps ≤ 1e8: the arrival process's mean.
    pub qps: f64,
    /// Worker threads, 1..=1024.
    pub threads: usize,
    /// The arrival process (Poisson, fixed gaps, bursty, trace, load profile, ...).
    pub arrival: ArrivalSpec,
    /// Base seed: arrivals, request contents and dispatch each derive their own from it.
    pub seed: u64,
    /// The unmeasured phase before the measured one (`Requests(0)`: none).
    pub warmup: Bound,
    /// The measured phase: at least one request, or a positive time.
    pub measure: Bound,
    /// How workers and the shaper wait for a time: spin, block or hybrid.
    pub wait: WaitMode,
    /// Hybrid waits sleep until this long before the deadline, then spin.
    pub spin_margin_ns: u64,
    /// Who releases requests at their intended times.
    pub shaper: ShaperMode,
    /// Order in which a queue is served.
    pub discipline: Discipline,
    /// One shared queue, or a queue per worker (see the module docs).
    pub dispatch: Dispatch,
    /// Keep every request's stamps in memory (needed for `requests.csv`).
    pub keep_records: bool,
    /// The file `write_run` writes the records to, when it writes them
    /// (`record.format`: `requests.csv` or `requests.parquet`).
    pub record_format: crate::reqfile::RequestFormat,
    /// The records will be written (`record.save_requests`): the summary then keeps the
    /// ideal's completion of each request for them ([`crate::RunResult::ideal_completions`]).
    pub save_requests: bool,
    /// Report live numbers in every [`crate::harness::Progress`] (in-flight requests, the
    /// last finished interval's quantiles): `monitor.metrics_listen` is set. Off, the run
    /// computes none of them.
    pub live: bool,
    /// Memory cap for `keep_records` (bytes); a run that may need more is refused
    /// ([`RunError::RecordsTooBig`]).
    pub record_mem_cap: u64,
    /// Length of one interval histogram.
    pub interval_ns: u64,
    /// How long after the schedule's expected end the run waits for stragglers.
    pub drain_timeout_ns: u64,
    /// Run workers (and the shaper) under SCHED_FIFO at this priority.
    pub rt_priority: Option<i32>,
    /// Run workers (and the shaper) under CFS at this nice value (-20..=19); never together
    /// with `rt_priority`.
    pub nice: Option<i32>,
    /// Pin worker i to `cpus[i % len]` (the shaper to the last one).
    pub cpus: Vec<usize>,
    /// Helper threads of the inline shaper (see [`crate::placement::helper_cpus`]); `None`:
    /// chosen from the placement.
    pub helpers: Option<usize>,
    /// Producers of an integrated inline run's schedule (see [`crate::feed`]); `None`: one
    /// ([`RunSpec::producers`]).
    pub producers: Option<usize>,
    /// Each request split over leaves (see [`crate::fanout`]); `None`: one server.
    /// `threads` is then the workers of each leaf's replica.
    pub fanout: Option<crate::fanout::FanoutSpec>,
    /// Send-lag p99 above this fails the send-lag check.
    pub send_lag_p99_max_ns: u64,
    /// Simulated network delay added in each direction (integrated, inline
    /// only). Requests keep their send order, as on one TCP connection.
    #[serde(serialize_with = "ser_opt_display")]
    pub net_delay: Option<Dist>,
    /// Simulator markers around the measured phase (see [`crate::roi`]).
    pub roi: crate::roi::RoiMode,
    /// Issue gem5 markers on a CPU that is not gem5's.
    pub roi_force: bool,
}

fn ser_opt_display<S: serde::Serializer>(d: &Option<Dist>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&d.to_string()),
        None => s.serialize_none(),
    }
}

impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            qps: 1000.0,
            threads: 1,
            arrival: ArrivalSpec::Poisson,
            seed: 1,
            warmup: Bound::Requests(0),
            measure: Bound::Requests(10_000),
            wait: WaitMode::Hybrid,
            spin_margin_ns: DEFAULT_SPIN_MARGIN_NS,
            shaper: ShaperMode::Inline,
            discipline: Discipline::Fifo,
            dispatch: Dispatch::Shared,
            keep_records: false,
            record_format: crate::reqfile::RequestFormat::Csv,
            save_requests: false,
            live: false,
            record_mem_cap: 1 << 30,
            interval_ns: 1_000_000_000,
            drain_timeout_ns: 10_000_000_000,
            send_lag_p99_max_ns: 50_000,
            rt_priority: None,
            nice: None,
            cpus: Vec::new(),
            helpers: None,
            producers: None,
            fanout: None,
            net_delay: None,
            roi: crate::roi::RoiMode::None,
            roi_force: false,
        }
    }
}

/// At most this many producers make one schedule.
pub const MAX_PRODUCERS: usize = 64;

/// Default hybrid spin margin. Sleeping until 200 µs before a deadline cost
/// +2.5 % on M/M/1 mean here, 50 µs cost +6 % (docs/hosts.md): the VM's
/// wake-ups are that slow. 1 ms keeps the error near pure spinning while
/// still sleeping through long idle gaps.
pub const DEFAULT_SPIN_MARGIN_NS: u64 = 1_000_000;

impl RunSpec {
    /// Why this run's schedule must have one producer (see [`crate::feed`]); `None` when
    /// several can feed it: an integrated inline run serving one shared FIFO queue, without a
    /// fan-out (its dispatcher is the one producer) or live numbers (they count arrivals as
    /// they come due, on one schedule).
    pub fn single_producer(&self) -> Option<&'static str> {
        if self.shaper != ShaperMode::Inline {
            Some("the thread shaper is the schedule's one producer")
        } else if self.discipline != Discipline::Fifo {
            Some("LIFO and random order pick among one backlog")
        } else if self.dispatch != crate::queue::Dispatch::Shared {
            Some("per-worker dispatch assigns workers from one stream")
        } else if self.fanout.is_some() {
            Some("a fan-out's dispatcher is the schedule's one producer")
        } else if self.live {
            Some("live numbers count arrivals on one schedule")
        } else {
            None
        }
    }

    /// Producers of the schedule: `producers` where several can feed the run (one unless
    /// asked: the default stays one until a many-core host has measured several), 1 where one
    /// must ([`RunSpec::single_producer`]).
    pub fn producers(&self) -> usize {
        if self.single_producer().is_some() {
            return 1;
        }
        self.producers.unwrap_or(1).max(1)
    }

    fn check_producers(&self) -> Result<(), RunError> {
        let Some(p) = self.producers else {
            return Ok(());
        };
        if p == 0 || p > MAX_PRODUCERS {
            return Err(RunError::Invalid(format!(
                "--producers must be in 1..={MAX_PRODUCERS}, got {p}"
            )));
        }
        match self.single_producer() {
            Some(why) if p > 1 => Err(RunError::Invalid(format!(
                "--producers {p}: this run has one producer ({why}); drop --producers"
            ))),
            _ => Ok(()),
        }
    }

    /// Checks the spec; the error names the bad setting and the allowed range.
    pub fn validate(&self) -> Result<(), RunError> {
        let bad = |s: String| Err(RunError::Invalid(s));
        if !(self.qps.is_finite() && self.qps > 0.0) {
            return bad(format!("--qps must be a positive number, got {}", self.qps));
        }
        if self.qps > 1e8 {
            return bad(format!(
                "--qps {} is beyond what one host can schedule (max 1e8)",
                self.qps
            ));
        }
        if self.threads == 0 || self.threads > 1024 {
            return bad(format!(
                "--threads must be in 1..=1024, got {}",
                self.threads
            ));
        }
        match self.measure {
            Bound::Requests(0) => return bad("--requests must be at least 1".into()),
            Bound::Seconds(s) if !(s.is_finite() && s > 0.0) => {
                return bad(format!("--duration must be a positive time, got {s}s"))
            }
            _ => {}
        }
        if let Bound::Seconds(s) = self.warmup {
            if !(s.is_finite() && s >= 0.0) {
                return bad(format!("--warmup-seconds must be ≥ 0, got {s}"));
            }
        }
        if self.interval_ns < 1_000_000 {
            return bad("--interval must be at least 1ms".into());
        }
        if self.net_delay.is_some() && self.shaper == ShaperMode::Thread {
            return bad(
                "--net-delay is simulated by inline workers only: drop --shaper thread".into(),
            );
        }
        if self.net_delay.is_some() && self.discipline != Discipline::Fifo {
            return bad(format!(
                "--net-delay is simulated for FIFO only: drop --discipline {} or --net-delay",
                self.discipline
            ));
        }
        if let Some(h) = self.helpers.filter(|&h| h > 0) {
            if self.shaper == ShaperMode::Thread {
                return bad(format!("--helpers {h} serve the inline shaper: drop --shaper thread or set --helpers 0"));
            }
            if h > 64 {
                return bad(format!("--helpers must be in 0..=64, got {h}"));
            }
            if self.roi != crate::roi::RoiMode::None {
                return bad(
                    "--roi marks requests on the workers' own threads: set --helpers 0".into(),
                );
            }
        }
        self.check_producers()?;
        if let Some(f) = &self.fanout {
            f.validate().map_err(|e| RunError::Invalid(e.0))?;
            self.check_fanout()?;
        }
        self.check_arrival()?;
        check_cpus("--cpus", &self.cpus)?;
        crate::roi::check(self.roi, self.roi_force)
            .map_err(|e| RunError::Invalid(e.to_string()))?;
        let cap = self.record_capacity();
        if self.keep_records && cap * RECORD_BYTES > self.record_mem_cap {
            return Err(RunError::RecordsTooBig {
                requests: cap,
                need_mb: (cap * RECORD_BYTES) >> 20,
                cap_mb: self.record_mem_cap >> 20,
            });
        }
        Ok(())
    }

    /// Worker threads in all: `threads`, or `threads` per leaf replica of a fan-out.
    pub fn total_workers(&self) -> usize {
        self.threads * self.fanout.as_ref().map_or(1, |f| f.servers())
    }

    /// A fan-out has its own dispatcher: the settings of the other shapers do not apply.
    fn check_fanout(&self) -> Result<(), RunError> {
        let bad = |s: &str| Err(RunError::Invalid(s.into()));
        if self.shaper == ShaperMode::Thread {
            return bad("--fanout releases requests with its own dispatcher: drop --shaper thread");
        }
        if self.discipline != Discipline::Fifo || self.dispatch != Dispatch::Shared {
            return bad("--fanout's leaves serve their queues FIFO, one queue per leaf replica: drop --discipline and --dispatch");
        }
        if self.net_delay.is_some() {
            return bad("--fanout does not simulate a network delay: drop --net-delay");
        }
        if self.roi != crate::roi::RoiMode::None {
            return bad("--roi marks an integrated run of one server: drop it with --fanout");
        }
        if self.total_workers() > 4096 {
            return bad("--fanout × --replicas × --threads is over 4096 worker threads: fewer leaves, replicas or threads");
        }
        Ok(())
    }

    /// A trace or load profile sets the rate itself: `qps` must be its
    /// mean, and a trace must be long enough for both phases.
    fn check_arrival(&self) -> Result<(), RunError> {
        let bad = |s: String| Err(RunError::Invalid(s));
        if let Some(r) = self.arrival.own_rate() {
            if (self.qps / r - 1.0).abs() > 1e-6 {
                return bad(format!(
                    "--qps {} does not match `{}`, which sets its own mean rate {r}/s: set --qps {r} (a trace or load profile decides the rate)",
                    self.qps, self.arrival
                ));
            }
        }
        let crate::arrival::ArrivalSpec::Trace(t) = &self.arrival else {
            return Ok(());
        };
        let last = format!(
            "{} has {} arrivals over {:.3} s (the last at line {})",
            t.path.display(),
            t.len(),
            t.offset_s(t.len() - 1),
            t.line(t.len() - 1)
        );
        match (self.warmup, self.measure) {
            (Bound::Requests(w), Bound::Requests(m)) if w + m > t.len() as u64 => bad(format!(
                "trace {last}; the run needs {w} warmup + {m} measured = {} requests: lengthen the trace or lower the counts",
                w + m
            )),
            _ => {
                let end = self.phase_times().2;
                let reach = t.offset_s(t.len() - 1) + 1.0 / t.mean_rate();
                if end > reach * (1.0 + 1e-9) {
                    bad(format!(
                        "trace {last}; the run needs {end:.3} s of arrivals (warmup + measured): lengthen the trace or shorten the run"
                    ))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Expected (warmup count, measured count, measured start s, end s),
    /// counts padded by `sigmas` standard deviations of the count.
    pub(crate) fn phase_counts(&self, sigmas: f64) -> (f64, f64, f64, f64) {
        let a = &self.arrival;
        let disp = a.dispersion(self.qps);
        let pad = |m: f64| m + sigmas * (disp * m).sqrt() + if sigmas > 0.0 { 100.0 } else { 0.0 };
        let (warm, start) = match self.warmup {
            Bound::Requests(n) => (n as f64, a.time_of(self.qps, n as f64)),
            Bound::Seconds(s) => (pad(a.expected_count(self.qps, 0.0, s)), s),
        };
        let (meas, end) = match self.measure {
            Bound::Requests(m) => {
                let n = m as f64;
                (n, a.time_of(self.qps, self.warmup_requests() + n))
            }
            Bound::Seconds(d) => (pad(a.expected_count(self.qps, start, start + d)), start + d),
        };
        (warm, meas, start, end)
    }

    fn warmup_requests(&self) -> f64 {
        match self.warmup {
            Bound::Requests(n) => n as f64,
            Bound::Seconds(s) => self.arrival.expected_count(self.qps, 0.0, s),
        }
    }

    /// (measured start s, measured end s, run end s), unpadded.
    fn phase_times(&self) -> (f64, f64, f64) {
        let (_, _, start, end) = self.phase_counts(0.0);
        (start, end, end)
    }

    /// Requests the run is expected to schedule, warmup included, with room
    /// for the count variation of time-bounded phases (10 σ of the arrival
    /// process's own dispersion).
    pub fn record_capacity(&self) -> u64 {
        let (w, m, _, _) = self.phase_counts(10.0);
        (w + m).ceil() as u64
    }

    /// Width of the saturation check's slices: 1/20 of the measured phase.
    pub fn slice_ns(&self) -> u64 {
        (self.expected_measure_ns() / 20).max(1_000_000)
    }

    /// Expected length of the measured phase in ns.
    pub fn expected_measure_ns(&self) -> u64 {
        let (start, end, _) = self.phase_times();
        ((end - start).max(0.0) * 1e9) as u64
    }

    /// Expected length of the whole schedule in ns, padded for count
    /// variation (6 σ) so the drain deadline never cuts a healthy run.
    pub fn expected_total_ns(&self) -> u64 {
        let total = |n: f64| {
            let disp = self.arrival.dispersion(self.qps).max(1.0);
            self.arrival
                .time_of(self.qps, n + 6.0 * (disp * n).sqrt() + 10.0)
        };
        let secs = match (self.warmup, self.measure) {
            (_, Bound::Seconds(_)) => self.phase_times().2,
            (Bound::Requests(w), Bound::Requests(m)) => total((w + m) as f64),
            (Bound::Seconds(s), Bound::Requests(m)) => {
                total(self.arrival.expected_count(self.qps, 0.0, s) + m as f64).max(s)
            }
        };
        (secs * 1e9) as u64
    }

    /// Watches this run past its schedule's end, which started at `t0`
    /// (see [`crate::drain`]).
    pub fn drain_watch(&self, t0: u64) -> crate::drain::DrainWatch {
        crate::drain::DrainWatch::new(
            t0 + self.expected_total_ns(),
            self.drain_timeout_ns,
            self.expected_measure_ns(),
            self.threads,
        )
    }

    /// Requests due by the schedule's end and not served yet: those
    /// generated and not `done`, plus those still to be generated — counted
    /// exactly for a schedule bounded by requests, else the expected
    /// arrivals between the last generated one (`last_intended_ns`, since
    /// the schedule's start) and the schedule's end.
    pub fn backlog(&self, generated: u64, last_intended_ns: u64, done: u64) -> u64 {
        let (w, m, _, end) = self.phase_counts(0.0);
        let to_come = match (self.warmup, self.measure) {
            (Bound::Requests(_), Bound::Requests(_)) => w + m - generated as f64,
            _ => self
                .arrival
                .expected_count(self.qps, last_intended_ns as f64 / 1e9, end),
        };
        generated.saturating_sub(done) + to_come.max(0.0) as u64
    }
}

/// Checks that every CPU in `cpus` (given with `flag`) is online and one this process may
/// run on (see [`crate::placement::check_cpus`]).
pub fn check_cpus(flag: &str, cpus: &[usize]) -> Result<(), RunError> {
    crate::placement::check_cpus(flag, cpus).map_err(|e| RunError::Invalid(e.to_string()))
}
