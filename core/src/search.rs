//! Experiment logic over a probe: the saturation search, the SLO search and
//! the redo of disturbed runs.
//!
//! A [`Probe`] runs one short measurement at an offered rate and returns its
//! [`Outcome`]; the searches decide which rates to try. The CLI's probe runs
//! the real app (and finds a probe it already ran when a search resumes);
//! the tests drive the searches with a fake probe that follows a known
//! latency-vs-load curve, so the logic is checked in milliseconds.

use crate::collector::{MetricStats, METRICS};
use crate::summary::Summary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a search needs to know of one measurement.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Outcome {
    /// Completions per second over the measured phase.
    pub achieved_qps: f64,
    /// The rate the schedule actually offered.
    pub scheduled_qps: f64,
    /// The saturation check passed (the backlog did not grow).
    pub steady: bool,
    /// The environment check failed (steal or other processes' CPU).
    pub disturbed: bool,
    /// Latency statistics by metric (`sojourn`, `service`, …), ns.
    pub latency: BTreeMap<String, MetricStats>,
}

impl Outcome {
    /// The outcome of a finished run.
    pub fn from_summary(s: &Summary) -> Outcome {
        Outcome {
            achieved_qps: s.achieved_qps,
            scheduled_qps: s.scheduled_qps,
            steady: s.checks.get("saturation").is_some_and(|c| c.ok),
            disturbed: s.checks.get("environment").is_some_and(|c| !c.ok),
            latency: s.latency_ns.clone(),
        }
    }

    /// Kept up: achieved ≥ 99 % of the schedule and the backlog steady.
    pub fn sustainable(&self) -> bool {
        self.achieved_qps >= 0.99 * self.scheduled_qps && self.steady
    }

    /// `metric.stat` in ns, if measured.
    pub fn value(&self, metric: &str, stat: &str) -> Option<f64> {
        self.latency.get(metric).and_then(|m| m.get(stat))
    }
}

/// Runs one probe measurement.
pub trait Probe {
    /// Why a probe could not run.
    type Error;
    /// Measures at `qps`. `name` is unique within a search (`probe-3`,
    /// `probe-3.redo-1`), so a resumed search can find a probe it ran.
    fn probe(&mut self, qps: f64, name: &str) -> Result<Outcome, Self::Error>;
}

/// One probe of a search, as recorded in its result file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// The probe's name.
    pub name: String,
    /// Offered rate.
    pub qps: f64,
    /// Achieved rate.
    pub achieved_qps: f64,
    /// Kept up (see [`Outcome::sustainable`]).
    pub sustainable: bool,
    /// Still disturbed after the redos allowed.
    pub disturbed: bool,
}

/// How a search probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchOpts {
    /// Most probes (redos not counted).
    pub max_probes: usize,
    /// Stop when the bracket is this narrow relative to its top.
    pub rel_tol: f64,
    /// Redo a disturbed probe at most this many times.
    pub redo_disturbed: usize,
}

impl Default for SearchOpts {
    fn default() -> Self {
        SearchOpts {
            max_probes: 20,
            rel_tol: 0.02,
            redo_disturbed: 1,
        }
    }
}

/// Why a search ended without a result.
#[derive(Debug, thiserror::Error)]
pub enum SearchError<E> {
    /// A probe failed to run.
    #[error("{0}")]
    Probe(E),
    /// Even the lowest rate tried was not sustainable.
    #[error("no probe load down to {lowest:.1} qps was sustainable")]
    NoneSustainable {
        /// The lowest rate tried.
        lowest: f64,
    },
}

/// The highest sustainable rate found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// Highest rate that kept up.
    pub qps: f64,
    /// Lowest rate that did not (none if every probe kept up).
    pub upper: Option<f64>,
    /// Every probe in order.
    pub probes: Vec<ProbeRecord>,
    /// The rule that defined "kept up".
    pub rule: String,
}

/// Runs `p` at `qps`, redoing a disturbed probe up to the budget.
fn probe_once<P: Probe>(
    p: &mut P,
    qps: f64,
    name: &str,
    o: &SearchOpts,
) -> Result<(Outcome, ProbeRecord), P::Error> {
    let (out, _) = with_redos(
        o.redo_disturbed,
        |k| {
            p.probe(
                qps,
                &if k == 0 {
                    name.to_string()
                } else {
                    format!("{name}.redo-{k}")
                },
            )
        },
        |out| out.disturbed,
        |_, _| Ok(()),
    )?;
    let rec = ProbeRecord {
        name: name.into(),
        qps,
        achieved_qps: out.achieved_qps,
        sustainable: out.sustainable(),
        disturbed: out.disturbed,
    };
    Ok((out, rec))
}

/// Maximum sustainable throughput: from 0.8 × `guess`, double until a
/// probe falls behind, then bisect until the bracket is within `rel_tol`.
pub fn find_saturation<P: Probe>(
    p: &mut P,
    guess: f64,
    o: &SearchOpts,
    log: &mut dyn FnMut(&ProbeRecord),
) -> Result<Saturation, SearchError<P::Error>> {
    let (mut lo, mut hi): (f64, Option<f64>) = (0.0, None);
    let mut probes = Vec::new();
    let mut qps = guess.clamp(1.0, 1e7) * 0.8;
    for i in 0..o.max_probes {
        let (_, rec) = probe_once(p, qps, &format!("probe-{i}"), o).map_err(SearchError::Probe)?;
        log(&rec);
        if rec.sustainable {
            lo = qps;
        } else {
            hi = Some(qps);
        }
        probes.push(rec);
        qps = match hi {
            None => qps * 2.0,
            Some(h) if h - lo <= o.rel_tol * h => break,
            Some(h) => (lo + h) / 2.0,
        };
    }
    if lo == 0.0 {
        return Err(SearchError::NoneSustainable { lowest: qps });
    }
    Ok(Saturation {
        qps: lo,
        upper: hi,
        probes,
        rule: "achieved >= 99% of scheduled and backlog steady".into(),
    })
}

/// A service-level objective: `metric.stat <= bound`.
#[derive(Debug, Clone, PartialEq)]
pub struct Slo {
    /// `sojourn`, `service`, `queue` or `send_lag`.
    pub metric: String,
    /// `mean`, `p50`, …, `max`.
    pub stat: String,
    /// The bound in ns.
    pub bound_ns: f64,
}

impl std::str::FromStr for Slo {
    type Err = crate::error::ValueError;
    /// `p99<=2ms` (sojourn) or `service.p95<=500us`.
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        use crate::error::ValueError;
        let bad = || {
            ValueError::not(s, "an SLO")
                .with_fix("write STAT<=TIME, e.g. p99<=2ms or service.p95<=500us")
        };
        let (lhs, rhs) = s.split_once("<=").ok_or_else(bad)?;
        let (metric, stat) = match lhs.trim().split_once('.') {
            Some((m, st)) => (m.to_string(), st.to_string()),
            None => ("sojourn".to_string(), lhs.trim().to_string()),
        };
        if !METRICS.contains(&metric.as_str()) || MetricStats::default().get(&stat).is_none() {
            return Err(bad());
        }
        let bound_ns = crate::dist::parse_duration_ns(rhs)
            .map_err(|e| ValueError::new(s, format!("`{s}`: {e}")))?;
        Ok(Slo {
            metric,
            stat,
            bound_ns,
        })
    }
}

impl std::fmt::Display for Slo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let b = crate::config::Dur(self.bound_ns.round() as u64);
        if self.metric == "sojourn" {
            write!(f, "{}<={b}", self.stat)
        } else {
            write!(f, "{}.{}<={b}", self.metric, self.stat)
        }
    }
}

impl crate::config::ConfigValue for Slo {
    const FORM: &'static str = "an SLO like p99<=2ms or service.p95<=500us";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl Slo {
    /// Whether a probe met it (and kept up).
    pub fn met_by(&self, o: &Outcome) -> bool {
        o.value(&self.metric, &self.stat)
            .is_some_and(|v| v <= self.bound_ns)
            && o.sustainable()
    }
}

/// The highest rate up to `saturation` that meets `slo`: the top first,
/// then bisection; `None` when no rate tried met it.
pub fn slo_search<P: Probe>(
    p: &mut P,
    saturation: f64,
    slo: &Slo,
    o: &SearchOpts,
) -> Result<(Option<f64>, Vec<ProbeRecord>), P::Error> {
    let mut probes = Vec::new();
    let (top, rec) = probe_once(p, saturation, "probe-top", o)?;
    probes.push(rec);
    if slo.met_by(&top) {
        return Ok((Some(saturation), probes));
    }
    let (mut lo, mut hi) = (0.0, saturation);
    for i in 0..o.max_probes.min(10) {
        let q = (lo + hi) / 2.0;
        let (out, rec) = probe_once(p, q, &format!("probe-{i}"), o)?;
        probes.push(rec);
        if slo.met_by(&out) {
            lo = q;
        } else {
            hi = q;
        }
        if hi - lo <= o.rel_tol * saturation {
            break;
        }
    }
    Ok(((lo > 0.0).then_some(lo), probes))
}

/// Runs `once(k)` (k = 0, 1, …) while its result is disturbed and the budget
/// allows, handing each discarded result to `discard(k, result)` (the CLI
/// moves the run aside and keeps it). Returns the last result and how many
/// were discarded.
pub fn with_redos<T, E>(
    budget: usize,
    mut once: impl FnMut(usize) -> Result<T, E>,
    disturbed: impl Fn(&T) -> bool,
    mut discard: impl FnMut(usize, T) -> Result<(), E>,
) -> Result<(T, usize), E> {
    let mut k = 0;
    loop {
        let r = once(k)?;
        if k < budget && disturbed(&r) {
            discard(k, r)?;
            k += 1;
            continue;
        }
        return Ok((r, k));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An M/M/1 server with capacity `mu`: keeps up below it, p99 sojourn
    /// ln(100)/(μ−λ); a list of probe names to report as disturbed once.
    struct Mm1 {
        mu: f64,
        calls: Vec<(String, f64)>,
        disturb: Vec<String>,
        fail_at: Option<usize>,
    }

    impl Probe for Mm1 {
        type Error = String;
        fn probe(&mut self, qps: f64, name: &str) -> Result<Outcome, String> {
            self.calls.push((name.into(), qps));
            if self.fail_at == Some(self.calls.len()) {
                return Err(format!("probe {name} crashed"));
            }
            let keeps = qps < self.mu;
            let mut lat = BTreeMap::new();
            let p99 = if keeps {
                (100f64.ln() / (self.mu - qps) * 1e9) as u64
            } else {
                u64::MAX
            };
            lat.insert(
                "sojourn".to_string(),
                MetricStats {
                    p99,
                    ..Default::default()
                },
            );
            Ok(Outcome {
                achieved_qps: if keeps { qps } else { self.mu },
                scheduled_qps: qps,
                steady: keeps,
                disturbed: self.disturb.iter().any(|d| d == name),
                latency: lat,
            })
        }
    }

    fn mm1(mu: f64) -> Mm1 {
        Mm1 {
            mu,
            calls: vec![],
            disturb: vec![],
            fail_at: None,
        }
    }

    #[test]
    fn saturation_found_within_tolerance_from_any_guess() {
        for guess in [10.0, 900.0, 1000.0, 50_000.0] {
            let mut p = mm1(1000.0);
            let s = find_saturation(&mut p, guess, &SearchOpts::default(), &mut |_| {}).unwrap();
            assert!(
                s.qps < 1000.0 && s.qps > 1000.0 * 0.97,
                "guess {guess}: {}",
                s.qps
            );
            assert!(s.upper.unwrap() >= 1000.0);
            assert_eq!(s.probes.len(), p.calls.len());
        }
    }

    #[test]
    fn disturbed_probe_is_redone_and_failures_propagate() {
        let mut p = mm1(1000.0);
        p.disturb = vec!["probe-0".into()];
        let s = find_saturation(&mut p, 1000.0, &SearchOpts::default(), &mut |_| {}).unwrap();
        assert_eq!(p.calls[0].0, "probe-0");
        assert_eq!(p.calls[1].0, "probe-0.redo-1");
        assert_eq!(p.calls[0].1, p.calls[1].1);
        assert!(!s.probes[0].disturbed);
        let mut p = mm1(1000.0);
        p.fail_at = Some(3);
        let e = find_saturation(&mut p, 1000.0, &SearchOpts::default(), &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("crashed"), "{e}");
        let mut p = mm1(0.0);
        let e = find_saturation(&mut p, 1000.0, &SearchOpts::default(), &mut |_| {}).unwrap_err();
        assert!(matches!(e, SearchError::NoneSustainable { .. }), "{e}");
    }

    #[test]
    fn slo_search_finds_the_known_rate() {
        // p99 ≤ 10 ms ⇔ μ − λ ≥ ln(100)/0.01 ≈ 460.5 ⇔ λ ≤ 539.5 at μ = 1000.
        let slo: Slo = "p99<=10ms".parse().unwrap();
        let mut p = mm1(1000.0);
        let (q, _) = slo_search(&mut p, 990.0, &slo, &SearchOpts::default()).unwrap();
        let want = 1000.0 - 100f64.ln() / 0.01;
        let q = q.unwrap();
        assert!(q <= want && q > want - 0.02 * 990.0, "{q} vs {want}");
        let tight: Slo = "p99<=1us".parse().unwrap();
        assert_eq!(
            slo_search(&mut mm1(1000.0), 990.0, &tight, &SearchOpts::default())
                .unwrap()
                .0,
            None
        );
        let easy: Slo = "p99<=10s".parse().unwrap();
        assert_eq!(
            slo_search(&mut mm1(1000.0), 990.0, &easy, &SearchOpts::default())
                .unwrap()
                .0,
            Some(990.0)
        );
    }

    #[test]
    fn slo_grammar() {
        let s: Slo = "service.p95<=500us".parse().unwrap();
        assert_eq!(
            (s.metric.as_str(), s.stat.as_str(), s.bound_ns),
            ("service", "p95", 5e5)
        );
        assert_eq!(s.to_string().parse::<Slo>().unwrap(), s);
        for bad in ["p98<=1ms", "p99<2ms", "lag.p99<=1ms", "p99<=fast"] {
            assert!(bad.parse::<Slo>().is_err(), "{bad}");
        }
    }

    #[test]
    fn redos_stop_at_the_budget() {
        let mut discarded = vec![];
        let (r, n) = with_redos(
            2,
            Ok::<_, ()>,
            |_| true,
            |k, _| {
                discarded.push(k);
                Ok(())
            },
        )
        .unwrap();
        assert_eq!((r, n, discarded), (2, 2, vec![0, 1]));
        let (r, n) = with_redos(5, Ok::<_, ()>, |k| *k < 1, |_, _| Ok(())).unwrap();
        assert_eq!((r, n), (1, 1));
    }
}
