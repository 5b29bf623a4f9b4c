//! When to stop waiting for a backlog after the schedule's end.
//!
//! The drain deadline (`load.drain_timeout` past the schedule's expected
//! end) exists so a healthy run's last requests complete. A saturated run's
//! backlog outlasts any sensible deadline: waiting for it only pads the
//! run's wall time (a 10 s run at three times the service rate took 20 s),
//! and the tail it would add is the backlog's age, reported as saturated
//! either way. So once a second has passed since the schedule's end, the
//! rate at which the backlog was served over that second says how long the
//! rest would take; a run that would need longer than the time left before
//! its deadline, or longer than its whole measured phase, stops now — with
//! the same verdict it would have had at the deadline (`aborted`, its
//! unserved requests counted as unfinished). A backlog of a few requests
//! per worker is a healthy run's stragglers and is always waited for.

/// How long the backlog's service rate is measured before it is judged.
pub const WINDOW_NS: u64 = 1_000_000_000;

/// Watches a run past its schedule's end (see the module docs).
#[derive(Debug, Clone)]
pub struct DrainWatch {
    end: u64,
    deadline: u64,
    measure_ns: u64,
    stragglers: u64,
    mark: Option<(u64, u64)>,
}

impl DrainWatch {
    /// For a schedule expected to end at `end` (the monotonic clock's ns)
    /// with its drain deadline `drain_ns` later, a measured phase of
    /// `measure_ns` and `threads` workers (see `RunSpec::drain_watch`).
    pub fn new(end: u64, drain_ns: u64, measure_ns: u64, threads: usize) -> Self {
        DrainWatch {
            end,
            deadline: end + drain_ns,
            measure_ns,
            stragglers: 2 * threads as u64 + 10,
            mark: None,
        }
    }

    /// The drain deadline: the run stops here whatever is left.
    pub fn deadline(&self) -> u64 {
        self.deadline
    }

    /// Whether to stop now: `done` requests served so far, `backlog()`
    /// the requests due by the schedule's end and not served yet (see
    /// `RunSpec::backlog`; asked only past the schedule's end).
    pub fn hopeless(&mut self, now: u64, done: u64, backlog: impl FnOnce() -> u64) -> bool {
        if now < self.end {
            return false;
        }
        let backlog = backlog();
        if backlog <= self.stragglers {
            return false;
        }
        let Some((t, d)) = self.mark else {
            self.mark = Some((now, done));
            return false;
        };
        if now - t < WINDOW_NS {
            return false;
        }
        self.mark = Some((now, done));
        let per_ns = done.saturating_sub(d) as f64 / (now - t) as f64;
        let need = backlog as f64 / per_ns;
        need > self.deadline.saturating_sub(now) as f64 || need > self.measure_ns as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Bound, RunSpec};

    fn spec(secs: f64) -> RunSpec {
        RunSpec {
            qps: 30_000.0,
            measure: Bound::Seconds(secs),
            warmup: Bound::Requests(0),
            ..RunSpec::default()
        }
    }

    #[test]
    fn a_backlog_that_outlasts_the_run_stops_a_second_after_the_end() {
        let s = spec(10.0);
        let mut w = s.drain_watch(0);
        let end = s.expected_total_ns();
        // Served at 10 000/s with 200 000 left: 20 s > 10 s measured, > 10 s left.
        assert!(!w.hopeless(end - 1, 100_000, || 200_000), "before the end");
        assert!(!w.hopeless(end, 100_000, || 200_000), "the window starts");
        assert!(!w.hopeless(end + WINDOW_NS / 2, 105_000, || 195_000));
        assert!(w.hopeless(end + WINDOW_NS, 110_000, || 190_000));
    }

    #[test]
    fn stragglers_and_a_clearable_backlog_are_waited_for() {
        let s = spec(10.0);
        let end = s.expected_total_ns();
        let mut w = s.drain_watch(0);
        // A few requests per worker, nothing served for a second: stragglers.
        assert!(!w.hopeless(end, 1000, || 5));
        assert!(!w.hopeless(end + 2 * WINDOW_NS, 1000, || 5));
        // 20 000 left at 10 000/s: 2 s, well inside both limits.
        let mut w = s.drain_watch(0);
        assert!(!w.hopeless(end, 0, || 30_000));
        assert!(!w.hopeless(end + WINDOW_NS, 10_000, || 20_000));
        // Nothing served at all for a second with a real backlog: stop.
        assert!(w.hopeless(end + 2 * WINDOW_NS, 10_000, || 20_000));
    }

    #[test]
    fn backlog_counts_what_is_still_to_come() {
        let s = spec(10.0);
        // Everything generated: only the unserved count.
        assert_eq!(s.backlog(300_000, 10_000_000_000, 299_000), 1000);
        // Generation stopped halfway (inline workers claim lazily): the
        // second half's expected arrivals are still due.
        let b = s.backlog(150_000, 5_000_000_000, 149_990);
        assert!((150_000..150_020).contains(&b), "{b}");
        let r = RunSpec {
            measure: Bound::Requests(1000),
            ..spec(1.0)
        };
        assert_eq!(r.backlog(400, 0, 390), 610);
    }
}
