//! What a run measured, before it is summarised: [`RunResult`], which the harness (integrated
//! runs) and the coordinator (loopback and networked runs) fill and
//! [`crate::summary::summarize`], the ideal and the stall detector read. It lives apart from
//! the harness so that what reads a result does not depend on what ran it.

use std::sync::Arc;

use crate::collector::{IntervalBlob, Shard};
use crate::records::Records;
use crate::spec::{Bound, RunSpec};

/// What a run measured, before it is summarised.
pub struct RunResult {
    /// The spec it ran.
    pub spec: RunSpec,
    /// Schedule start on the harness clock.
    pub t0: u64,
    /// Start of the measured phase on the harness clock (ns); `t0` if none began.
    pub measure_start: u64,
    /// Intended time of the first measured request (ns).
    pub first_measured_intended: u64,
    /// Intended time of the last measured request (ns).
    pub last_measured_intended: u64,
    /// Warmup requests the schedule drew.
    pub generated_warmup: u64,
    /// Measured requests the schedule drew (those not completed are `unfinished`).
    pub generated_measured: u64,
    /// Merged over all workers.
    pub totals: Shard,
    /// Interval histograms, in order.
    pub intervals: Vec<IntervalBlob>,
    /// Width of one saturation-check slice (ns).
    pub slice_ns: u64,
    /// Measured arrivals per slice, by intended time.
    pub arrivals_per_slice: Vec<u64>,
    /// Requests the app failed, warmup included.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// The run hit its drain deadline and stopped before serving everything.
    pub aborted: bool,
    /// Every request's stamps, when `spec.keep_records` was set.
    pub records: Option<Arc<Records>>,
    /// Wall-clock start, for the interval logs' StartTime.
    pub wall_start: std::time::SystemTime,
    /// The app's own statistics ([`crate::app::Server::report`]), read after the run.
    pub app_stats: serde_json::Value,
    /// Where the threads ran (integrated runs).
    pub placement: Option<crate::placement::PlacementSummary>,
    /// A fan-out run's leaves and copies.
    pub fanout: Option<crate::fanout::FanoutRun>,
    /// Each request's completion in the run's ideal, by request index: kept by
    /// [`crate::summary::summarize`] when the records are to be written
    /// (`spec.save_requests`), so that writing them hands the replay on instead of running
    /// it a second time. Empty until then.
    pub ideal_completions: std::sync::OnceLock<Vec<u64>>,
}

impl RunResult {
    /// The run's schedule, its times on the result's clock (see [`RunResult::t0`]).
    pub fn schedule(&self) -> crate::schedule::ScheduleStats {
        crate::schedule::ScheduleStats {
            t0: self.t0,
            measure_start: Some(self.measure_start),
            generated_warmup: self.generated_warmup,
            generated_measured: self.generated_measured,
            first_measured_intended: self.first_measured_intended,
            last_measured_intended: self.last_measured_intended,
            slice_ns: self.slice_ns,
            arrivals_per_slice: self.arrivals_per_slice.clone(),
        }
    }

    /// Measured requests scheduled but never completed.
    pub fn unfinished(&self) -> u64 {
        let planned = match self.spec.measure {
            Bound::Requests(m) => m.max(self.generated_measured),
            Bound::Seconds(_) => self.generated_measured,
        };
        planned.saturating_sub(self.totals.measured)
    }
}
