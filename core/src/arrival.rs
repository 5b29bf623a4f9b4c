//! Open-loop arrival processes.
//!
//! An arrival process yields the *intended* send times of requests as offsets
//! (ns) from the schedule's start. The schedule is absolute — each time is the
//! previous one plus a gap, accumulated in `f64` nanoseconds (exact to 2⁵³ ns,
//! about 104 days) and only then rounded — so a late send never shifts later
//! arrivals and rounding never drifts. Nothing here waits for responses: that
//! is what makes the load open-loop and the latency free of coordinated
//! omission.
//!
//! The processes a user can name ([`ArrivalSpec`], one grammar for the
//! integrated and the TCP configurations):
//!
//! ```text
//! poisson                          exponential gaps (memoryless: the M of M/G/n)
//! fixed                            evenly spaced
//! lognormal:cv=2                   independent gaps of that shape and coefficient
//! gamma:cv=0.5                       of variation, mean 1/qps (cv 1 = Poisson's)
//! pareto:alpha=1.5                 power-law gaps (alpha > 1; ≤ 2: infinite variance)
//! mmpp:on=50ms,off=200ms,ratio=8   bursts: on/off states (exponential holding
//!                                    times), on-rate = ratio × off-rate, mean qps
//! trace:FILE[,gaps][,unit=U][,column=C][,scale=X]   times from a file (see trace.rs)
//! steps:1000@10s,3000@10s          load profiles: a rate that changes over time,
//! ramp:1000..5000 over 60s           as a non-homogeneous Poisson process
//! sine:mean=3000,amp=1000,period=30s  (see profile.rs)
//! ```
//!
//! ```
//! use taillab_core::arrival::ArrivalSpec;
//! // Bursts: 50 ms on at 8× the rate of the 200 ms off, 1000 requests/s on average.
//! let spec: ArrivalSpec = "mmpp:on=50ms,off=200ms,ratio=8".parse().unwrap();
//! let mut p = spec.build(1000.0, 7).unwrap();
//! let times: Vec<u64> = (0..20_000).map(|_| p.next_offset_ns()).collect();
//! assert!(times.windows(2).all(|w| w[0] <= w[1]), "an absolute, non-decreasing schedule");
//! let rate = 20_000.0 / (times[19_999] as f64 / 1e9);
//! assert!((rate / 1000.0 - 1.0).abs() < 0.1, "mean rate {rate}");
//! // A load profile sets its own rate: the run's qps must be its mean.
//! let steps: ArrivalSpec = "steps:1000@10s,3000@10s".parse().unwrap();
//! assert_eq!(steps.own_rate(), Some(2000.0));
//! ```
//!
//! **Rate.** The first six take their mean rate from the run's `qps`. A trace
//! or a load profile defines its own rate over time: the run's `qps` must then
//! be its mean ([`ArrivalSpec::own_rate`]; [`crate::harness::RunSpec::validate`]
//! refuses another value), which the harness uses for utilization, the
//! number of per-request records to reserve and the expected run length.
//!
//! **Phases.** Warmup and measured bounds apply to the schedule as for any
//! process: requests or seconds counted from the schedule start. A profile's
//! time 0 is the schedule start, so a 10 s warmup takes the first 10 s of a
//! profile; profiles repeat after their last segment. A trace must hold
//! enough arrivals for warmup + measured requests (or reach past warmup +
//! duration): the run is refused before it starts otherwise.
//!
//! Adding a process means implementing [`ArrivalProcess`] and a case in
//! [`ArrivalSpec`].

mod gaps;
mod profile;
mod share;
mod trace;

pub use gaps::{erfc, ln_gamma, lower_gamma_regularized, GapDist, Mmpp, MmppSpec, Renewal};
pub use profile::{Profile, ProfileProcess, PROFILE_FORMS};
pub use share::{Dealt, Share};
pub use trace::{Trace, TraceProcess, Unit};

use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;

/// What [`ArrivalProcess::next_offset_ns`] returns when a process has no
/// more arrivals (the end of a trace).
pub const END: u64 = u64::MAX;

/// A source of intended arrival times.
pub trait ArrivalProcess: Send {
    /// The next intended arrival, in ns since the schedule start
    /// (non-decreasing), or [`END`] when there are no more.
    fn next_offset_ns(&mut self) -> u64;
    /// Mean rate in requests per second (the offered load).
    fn rate(&self) -> f64;
}

/// Poisson arrivals: exponential gaps with mean 1/rate.
pub struct Poisson {
    rate: f64,
    t: f64,
    exp: Exp<f64>,
    rng: Xoshiro256PlusPlus,
}

impl Poisson {
    /// Poisson arrivals at `rate` requests/s, seeded.
    pub fn new(rate: f64, seed: u64) -> Self {
        Poisson {
            rate,
            t: 0.0,
            exp: Exp::new(rate / 1e9).expect("rate validated > 0"),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
}

impl ArrivalProcess for Poisson {
    #[inline]
    fn next_offset_ns(&mut self) -> u64 {
        self.t += self.exp.sample(&mut self.rng);
        self.t.round() as u64
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

/// Uniformly spaced arrivals (a deterministic process, the `D` of M/D/1's
/// mirror image D/M/1).
pub struct Fixed {
    rate: f64,
    n: u64,
}

impl Fixed {
    /// One arrival every 1/`rate` s.
    pub fn new(rate: f64) -> Self {
        Fixed { rate, n: 0 }
    }
}

impl ArrivalProcess for Fixed {
    fn next_offset_ns(&mut self) -> u64 {
        self.n += 1;
        // Multiply rather than accumulate so the n-th arrival has no rounding drift.
        (self.n as f64 * 1e9 / self.rate).round() as u64
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

/// The arrival processes a user can name (`--arrival`); see the module docs.
///
/// Parsed with `FromStr` (errors name the expected form), written back with
/// `Display` (which parses to an equal spec), and (de)serialized as that
/// string.
#[derive(Debug, Clone, PartialEq)]
pub enum ArrivalSpec {
    /// `poisson`: exponential gaps.
    Poisson,
    /// `fixed`: evenly spaced.
    Fixed,
    /// A renewal process with gaps of this shape.
    Gaps(GapDist),
    /// `mmpp:on=…,off=…,ratio=…`: on/off bursts.
    Mmpp(MmppSpec),
    /// `trace:FILE…`: times read from a file.
    Trace(Trace),
    /// `steps:`, `ramp:`, `sine:`: a rate that changes over time.
    Profile(Profile),
}

/// Every form, for error messages.
const FORMS: &str = "poisson, fixed, lognormal:cv=X, gamma:cv=X, pareto:alpha=A, mmpp:on=DURATION,off=DURATION,ratio=R, trace:FILE[,gaps][,unit=s|ms|us|ns][,column=NAME][,scale=X], steps:RATE@DURATION,..., ramp:FROM..TO over DURATION or sine:mean=RATE,amp=RATE,period=DURATION";

/// Errors building a process.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrivalError {
    #[error("arrival rate must be a positive number of requests per second, got {0}")]
    /// The rate is not a positive number.
    Rate(f64),
    #[error("arrival process `{spec}`: {why}")]
    /// The process could not be built from its parameters.
    Build {
        /// The spec as written.
        spec: String,
        /// What is wrong.
        why: String,
    },
}

impl ArrivalSpec {
    /// Builds the process at mean `rate` requests/s, seeded. Traces and
    /// profiles keep their own rate (the run's `qps` was checked to be it).
    pub fn build(&self, rate: f64, seed: u64) -> Result<Box<dyn ArrivalProcess>, ArrivalError> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(ArrivalError::Rate(rate));
        }
        Ok(match self {
            ArrivalSpec::Poisson => Box::new(Poisson::new(rate, seed)),
            ArrivalSpec::Fixed => Box::new(Fixed::new(rate)),
            ArrivalSpec::Gaps(g) => Box::new(Renewal::new(*g, rate, seed)?),
            ArrivalSpec::Mmpp(m) => Box::new(Mmpp::new(*m, rate, seed)),
            ArrivalSpec::Trace(t) => Box::new(TraceProcess::new(t.clone())),
            ArrivalSpec::Profile(p) => Box::new(ProfileProcess::new(p.clone(), seed)),
        })
    }

    /// The mean rate (/s) a trace or a profile defines; `None` for processes
    /// that take the run's `qps`.
    pub fn own_rate(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Trace(t) => Some(t.mean_rate()),
            ArrivalSpec::Profile(p) => Some(p.mean_rate()),
            _ => None,
        }
    }

    /// Squared coefficient of variation of the gaps (1 for Poisson, 0 for
    /// fixed); `None` where gaps are not independent draws of one shape.
    pub fn gap_scv(&self) -> Option<f64> {
        match self {
            ArrivalSpec::Poisson => Some(1.0),
            ArrivalSpec::Fixed => Some(0.0),
            ArrivalSpec::Gaps(g) => Some(g.scv()),
            _ => None,
        }
    }

    /// The CDF of one gap (ns) when gaps are independent with mean
    /// `mean_gap` ns: what the inter-arrival check tests sent gaps against.
    /// `None` for fixed spacing (checked by its spread) and for processes
    /// whose gaps are not independent (checked against their own schedule).
    pub fn gap_cdf(&self, mean_gap: f64) -> Option<impl Fn(f64) -> f64> {
        let g = match self {
            ArrivalSpec::Poisson => GapDist::Gamma { cv: 1.0 },
            ArrivalSpec::Gaps(g) => *g,
            _ => return None,
        };
        Some(move |x: f64| match g {
            GapDist::Gamma { cv: 1.0 } => 1.0 - (-x / mean_gap).exp(),
            _ => g.cdf(mean_gap, x),
        })
    }

    /// Whether the offered load is the same throughout (a profile or a
    /// trace changes it on purpose, so latency may trend with it).
    pub fn is_stationary(&self) -> bool {
        !matches!(self, ArrivalSpec::Trace(_) | ArrivalSpec::Profile(_))
    }

    /// Long-run index of dispersion of arrival counts (Var/mean; 1 for
    /// Poisson): how far a time-bounded phase's count may stray.
    pub fn dispersion(&self, qps: f64) -> f64 {
        match self {
            ArrivalSpec::Fixed | ArrivalSpec::Trace(_) => 0.0,
            ArrivalSpec::Mmpp(m) => m.dispersion(qps),
            // A renewal process's counts spread as cv² (∞ for heavy Pareto: a cap).
            ArrivalSpec::Gaps(g) => g.scv().min(100.0),
            ArrivalSpec::Poisson | ArrivalSpec::Profile(_) => 1.0,
        }
    }

    /// Expected arrivals with offsets in [a, b) s at mean rate `qps`.
    pub fn expected_count(&self, qps: f64, a: f64, b: f64) -> f64 {
        match self {
            ArrivalSpec::Trace(t) => t.count_between(a, b) as f64,
            ArrivalSpec::Profile(p) => p.cum(b) - p.cum(a),
            _ => qps * (b - a),
        }
    }

    /// Expected time (s from the schedule start) by which `n` arrivals
    /// have happened at mean rate `qps`.
    pub fn time_of(&self, qps: f64, n: f64) -> f64 {
        match self {
            ArrivalSpec::Trace(t) => {
                let i = n.ceil() as usize;
                if i == 0 {
                    0.0
                } else if i <= t.len() {
                    t.offset_s(i - 1)
                } else {
                    t.offset_s(t.len() - 1) + (i - t.len()) as f64 / t.mean_rate()
                }
            }
            ArrivalSpec::Profile(p) => p.inv(n),
            _ => n / qps,
        }
    }
}

fn named(args: &str, key: &str, form: &str) -> Result<f64, String> {
    let v = args
        .split(',')
        .find_map(|a| a.trim().strip_prefix(key).and_then(|r| r.strip_prefix('=')))
        .ok_or_else(|| format!("needs {key}=VALUE, as in {form}"))?;
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| format!("{key}=`{v}` is not a number"))
}

fn only_keys(args: &str, keys: &[&str], form: &str) -> Result<(), String> {
    for a in args.split(',') {
        let k = a.split_once('=').map(|x| x.0).unwrap_or(a).trim();
        if !keys.contains(&k) {
            return Err(format!("unknown key `{k}`; write it as {form}"));
        }
    }
    Ok(())
}

fn parse_gaps(kind: &str, args: &str) -> Result<GapDist, String> {
    let cv = |form: &str| -> Result<f64, String> {
        only_keys(args, &["cv"], form)?;
        let cv = named(args, "cv", form)?;
        if cv > 0.0 {
            Ok(cv)
        } else {
            Err(format!(
                "cv={cv} must be > 0 (cv 1 is Poisson; use fixed for evenly spaced)"
            ))
        }
    };
    Ok(match kind {
        "lognormal" => GapDist::LogNormal {
            cv: cv("lognormal:cv=2")?,
        },
        "gamma" => GapDist::Gamma {
            cv: cv("gamma:cv=0.5")?,
        },
        _ => {
            only_keys(args, &["alpha"], "pareto:alpha=1.5")?;
            let alpha = named(args, "alpha", "pareto:alpha=1.5")?;
            if alpha <= 1.0 {
                return Err(format!("alpha={alpha} must be > 1 for a finite mean gap"));
            }
            GapDist::Pareto { alpha }
        }
    })
}

fn parse_mmpp(args: &str) -> Result<MmppSpec, String> {
    const FORM: &str = "mmpp:on=50ms,off=200ms,ratio=8";
    only_keys(args, &["on", "off", "ratio"], FORM)?;
    let dur = |key: &str| -> Result<u64, String> {
        let v = args
            .split(',')
            .find_map(|a| a.trim().strip_prefix(key).and_then(|r| r.strip_prefix('=')))
            .ok_or_else(|| format!("needs {key}=DURATION, as in {FORM}"))?;
        let ns = crate::dist::parse_duration_ns(v)?.round() as u64;
        if ns == 0 {
            return Err(format!("{key}={v} must be longer than 0"));
        }
        Ok(ns)
    };
    let ratio = named(args, "ratio", FORM)?;
    if ratio <= 0.0 {
        return Err(format!(
            "ratio={ratio} must be > 0 (on-state rate ÷ off-state rate)"
        ));
    }
    Ok(MmppSpec {
        on_ns: dur("on")?,
        off_ns: dur("off")?,
        ratio,
    })
}

impl std::str::FromStr for ArrivalSpec {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let s = s.trim();
            let fail = |why: String| format!("arrival process `{s}`: {why}");
            match s {
                "poisson" => return Ok(ArrivalSpec::Poisson),
                "fixed" => return Ok(ArrivalSpec::Fixed),
                _ => {}
            }
            let Some((kind, args)) = s.split_once(':') else {
                return Err(format!("unknown arrival process `{s}`; use {FORMS}"));
            };
            if let Some(p) = Profile::parse(kind, args) {
                return p
                    .map(ArrivalSpec::Profile)
                    .map_err(|e| fail(format!("{e}; forms: {PROFILE_FORMS}")));
            }
            match kind {
                "lognormal" | "gamma" | "pareto" => parse_gaps(kind, args).map(ArrivalSpec::Gaps),
                "mmpp" => parse_mmpp(args).map(ArrivalSpec::Mmpp),
                "trace" => Ok(ArrivalSpec::Trace(Trace::parse(args)?)),
                _ => Err(format!("unknown kind `{kind}`; use {FORMS}")),
            }
            .map_err(fail)
        })
    }
}

/// Writes ns exactly, in the largest unit that divides them (`50ms`, `1500us`).
pub fn fmt_duration(ns: u64) -> String {
    for (d, u) in [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")] {
        if ns.is_multiple_of(d) && ns > 0 {
            return format!("{}{u}", ns / d);
        }
    }
    format!("{ns}ns")
}

impl std::fmt::Display for ArrivalSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArrivalSpec::Poisson => f.write_str("poisson"),
            ArrivalSpec::Fixed => f.write_str("fixed"),
            ArrivalSpec::Gaps(GapDist::LogNormal { cv }) => write!(f, "lognormal:cv={cv}"),
            ArrivalSpec::Gaps(GapDist::Gamma { cv }) => write!(f, "gamma:cv={cv}"),
            ArrivalSpec::Gaps(GapDist::Pareto { alpha }) => write!(f, "pareto:alpha={alpha}"),
            ArrivalSpec::Mmpp(m) => write!(
                f,
                "mmpp:on={},off={},ratio={}",
                fmt_duration(m.on_ns),
                fmt_duration(m.off_ns),
                m.ratio
            ),
            ArrivalSpec::Trace(t) => write!(f, "{t}"),
            ArrivalSpec::Profile(p) => write!(f, "{p}"),
        }
    }
}

impl serde::Serialize for ArrivalSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ArrivalSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Derives independent stream seeds from one base seed (SplitMix64), so the
/// arrival times and the request contents are independent yet reproducible.
pub fn derive_seed(base: u64, stream: u64) -> u64 {
    let mut z = base ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// One-sample Kolmogorov–Smirnov statistic of `xs` against Exp(mean) and its
/// asymptotic p-value. Used by tests and by the inter-arrival self-check.
pub fn ks_exponential(xs: &[f64], mean: f64) -> (f64, f64) {
    ks_one_sample(xs, |x| 1.0 - (-x / mean).exp())
}

/// One-sample Kolmogorov–Smirnov statistic of `xs` against `cdf`, and its
/// asymptotic p-value.
pub fn ks_one_sample(xs: &[f64], cdf: impl Fn(f64) -> f64) -> (f64, f64) {
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len() as f64;
    let mut d: f64 = 0.0;
    for (i, x) in v.iter().enumerate() {
        let f = cdf(*x);
        d = d
            .max((f - i as f64 / n).abs())
            .max(((i + 1) as f64 / n - f).abs());
    }
    (d, ks_pvalue(d, v.len()))
}

/// Two-sample Kolmogorov–Smirnov statistic of `a` against `b` (ties
/// handled), and its asymptotic p-value with n = |a||b| / (|a| + |b|).
pub fn ks_two_sample(a: &[f64], b: &[f64]) -> (f64, f64) {
    let sorted = |x: &[f64]| {
        let mut v = x.to_vec();
        v.sort_by(|p, q| p.total_cmp(q));
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (mut i, mut j, mut d) = (0, 0, 0.0f64);
    while i < a.len() && j < b.len() {
        let x = a[i].min(b[j]);
        while i < a.len() && a[i] <= x {
            i += 1;
        }
        while j < b.len() && b[j] <= x {
            j += 1;
        }
        d = d.max((i as f64 / na - j as f64 / nb).abs());
    }
    let n = (na * nb / (na + nb)).round() as usize;
    (d, ks_pvalue(d, n.max(1)))
}

/// Two-sample Kolmogorov–Smirnov statistic up to a shift of `tol`: the
/// largest `F_a(x) − F_b(x + tol)` or `F_b(x) − F_a(x + tol)` (0 when each
/// distribution is within `tol` of the other), and its asymptotic p-value.
/// For samples that should be equal up to a known jitter (send gaps vs
/// intended gaps, each send late by up to its send lag): plain KS would
/// reject atoms (a trace's equal gaps) smeared by a microsecond.
pub fn ks_two_sample_within(a: &[f64], b: &[f64], tol: f64) -> (f64, f64) {
    let sorted = |x: &[f64]| {
        let mut v = x.to_vec();
        v.sort_by(|p, q| p.total_cmp(q));
        v
    };
    let (a, b) = (sorted(a), sorted(b));
    let cdf = |v: &[f64], x: f64| v.partition_point(|&y| y <= x) as f64 / v.len() as f64;
    let mut d = 0.0f64;
    for &x in &a {
        d = d.max(cdf(&a, x) - cdf(&b, x + tol));
    }
    for &x in &b {
        d = d.max(cdf(&b, x) - cdf(&a, x + tol));
    }
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let n = (na * nb / (na + nb)).round() as usize;
    (d, ks_pvalue(d, n.max(1)))
}

/// Asymptotic Kolmogorov distribution tail P(D_n > d) (Marsaglia et al.'s
/// series with Stephens' small-sample correction).
pub fn ks_pvalue(d: f64, n: usize) -> f64 {
    let sn = (n as f64).sqrt();
    let t = (sn + 0.12 + 0.11 / sn) * d;
    let mut p = 0.0;
    for k in 1..100 {
        let k = k as f64;
        let term = 2.0 * (-1f64).powf(k - 1.0) * (-2.0 * k * k * t * t).exp();
        p += term;
        if term.abs() < 1e-12 {
            break;
        }
    }
    p.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn gaps(p: &mut dyn ArrivalProcess, n: usize) -> Vec<f64> {
        let mut prev = 0u64;
        (0..n)
            .map(|_| {
                let t = p.next_offset_ns();
                let g = (t - prev) as f64;
                prev = t;
                g
            })
            .collect()
    }

    #[test]
    fn poisson_gaps_are_exponential() {
        let mut p = Poisson::new(2500.0, 11);
        let g = gaps(&mut p, 50_000);
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        assert!((mean / 400_000.0 - 1.0).abs() < 0.02, "mean gap {mean}");
        let (d, pv) = ks_exponential(&g, 400_000.0);
        assert!(pv > 0.001, "KS D={d} p={pv}");
        // The same test must reject clearly non-exponential gaps.
        let mut f = Fixed::new(2500.0);
        let (_, pf) = ks_exponential(&gaps(&mut f, 5_000), 400_000.0);
        assert!(pf < 1e-6, "fixed gaps passed as exponential (p={pf})");
    }

    #[test]
    fn ks_rejects_wrong_mean() {
        let mut p = Poisson::new(2500.0, 5);
        let g = gaps(&mut p, 20_000);
        let (_, pv) = ks_exponential(&g, 440_000.0);
        assert!(pv < 0.001, "a 10% wrong mean passed (p={pv})");
    }

    #[test]
    fn fixed_has_no_drift() {
        let mut f = Fixed::new(3.0); // 333_333_333.33 ns gaps
        let mut last = 0;
        for _ in 0..3_000_000 {
            last = f.next_offset_ns();
        }
        assert_eq!(last, 1_000_000u64 * 1_000_000_000);
    }

    #[test]
    fn seeds_are_reproducible_and_streams_independent() {
        let a: Vec<u64> = (0..5)
            .map(|_| 0)
            .scan(Poisson::new(1e4, 9), |p, _| Some(p.next_offset_ns()))
            .collect();
        let b: Vec<u64> = (0..5)
            .map(|_| 0)
            .scan(Poisson::new(1e4, 9), |p, _| Some(p.next_offset_ns()))
            .collect();
        assert_eq!(a, b);
        assert_ne!(derive_seed(7, 0), derive_seed(7, 1));
        assert_ne!(derive_seed(7, 0), derive_seed(8, 0));
    }

    #[test]
    fn every_form_round_trips() {
        for s in [
            "poisson",
            "fixed",
            "lognormal:cv=2",
            "gamma:cv=0.5",
            "pareto:alpha=1.5",
            "mmpp:on=50ms,off=200ms,ratio=8",
            "mmpp:on=1500us,off=2s,ratio=0.5",
            "steps:1000@10s,3000@10s",
            "ramp:1000..5000 over 60s",
            "sine:mean=3000,amp=1000,period=30s",
        ] {
            let a: ArrivalSpec = s.parse().unwrap();
            assert_eq!(a.to_string(), s);
            let j = serde_json::to_string(&a).unwrap();
            assert_eq!(j, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<ArrivalSpec>(&j).unwrap(), a);
        }
        assert_eq!(
            "ramp:1000..5000@60s"
                .parse::<ArrivalSpec>()
                .unwrap()
                .to_string(),
            "ramp:1000..5000 over 60s"
        );
    }

    #[test]
    fn bad_specs_name_the_form() {
        for (s, want) in [
            ("poison", "poisson, fixed"),
            ("lognormal", "poisson, fixed"),
            ("lognormal:cv=0", "must be > 0"),
            ("lognormal:sigma=1", "unknown key `sigma`"),
            ("gamma:cv=x", "not a number"),
            ("pareto:alpha=1", "must be > 1"),
            ("mmpp:on=50ms,off=200ms", "ratio="),
            ("mmpp:on=0ms,off=200ms,ratio=2", "longer than 0"),
            ("steps:1000@10s,0@5s", "must stay positive"),
            ("sine:mean=10,amp=20,period=1s", "must stay > 0"),
            ("walk:1", "unknown kind `walk`"),
        ] {
            let e = s.parse::<ArrivalSpec>().unwrap_err();
            assert!(e.to_string().contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn renewal_gaps_have_the_asked_shape() {
        let mean = 1e9 / 2000.0;
        for s in [
            "lognormal:cv=2",
            "gamma:cv=0.5",
            "pareto:alpha=3.5",
            "poisson",
        ] {
            let a: ArrivalSpec = s.parse().unwrap();
            let mut p = a.build(2000.0, 17).unwrap();
            let g = gaps(p.as_mut(), 100_000);
            let m = g.iter().sum::<f64>() / g.len() as f64;
            let sd = (g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / g.len() as f64).sqrt();
            let cv = a.gap_scv().unwrap().sqrt();
            assert!((m / mean - 1.0).abs() < 0.03, "{s}: mean gap {m}");
            assert!(
                (sd / m - cv).abs() < 0.1 * cv.max(0.5),
                "{s}: cv {} vs {cv}",
                sd / m
            );
            let cdf = a.gap_cdf(mean).unwrap();
            let (d, pv) = ks_one_sample(&g[..20_000], &cdf);
            assert!(pv > 0.001, "{s}: KS D={d} p={pv}");
        }
        // The test tells shapes apart: gamma cv=0.5 gaps are not lognormal cv=2.
        let mut p = "gamma:cv=0.5"
            .parse::<ArrivalSpec>()
            .unwrap()
            .build(2000.0, 3)
            .unwrap();
        let g = gaps(p.as_mut(), 20_000);
        let other = "lognormal:cv=2".parse::<ArrivalSpec>().unwrap();
        let (_, pv) = ks_one_sample(&g, other.gap_cdf(mean).unwrap());
        assert!(pv < 1e-6, "gamma gaps passed as lognormal (p={pv})");
    }

    #[test]
    fn mmpp_keeps_its_mean_rate_and_bursts() {
        let a: ArrivalSpec = "mmpp:on=50ms,off=200ms,ratio=8".parse().unwrap();
        let mut p = a.build(3000.0, 5).unwrap();
        let mut counts = vec![0u32; 600]; // 100 ms windows over 60 s
        loop {
            let t = p.next_offset_ns();
            if t >= 60_000_000_000 {
                break;
            }
            counts[(t / 100_000_000) as usize] += 1;
        }
        let n: u32 = counts.iter().sum();
        // 60 s at 3000/s; the count's sd is about sqrt(dispersion · 180000).
        let sd = (a.dispersion(3000.0) * 180_000.0).sqrt();
        assert!(
            (n as f64 - 180_000.0).abs() < 5.0 * sd,
            "{n} arrivals (sd {sd:.0})"
        );
        let m = n as f64 / 600.0;
        let var = counts.iter().map(|&c| (c as f64 - m).powi(2)).sum::<f64>() / 599.0;
        assert!(
            var / m > 5.0,
            "100 ms counts look Poisson (var/mean {})",
            var / m
        );
    }

    #[test]
    fn two_sample_ks_tells_same_from_different() {
        let mut p = Poisson::new(1000.0, 1);
        let mut q = Poisson::new(1000.0, 2);
        let (a, b) = (gaps(&mut p, 10_000), gaps(&mut q, 10_000));
        assert!(ks_two_sample(&a, &b).1 > 0.001);
        assert!(ks_two_sample(&a, &a).0 == 0.0);
        let c: Vec<f64> = b.iter().map(|x| x * 1.1).collect();
        assert!(ks_two_sample(&a, &c).1 < 0.001);
        // Atoms smeared by a little jitter: plain KS rejects, within the jitter it passes.
        let atoms: Vec<f64> = (0..5000).map(|i| [0.0, 65e3, 250e3][i % 3]).collect();
        let smeared: Vec<f64> = atoms
            .iter()
            .enumerate()
            .map(|(i, x)| x + (i % 7) as f64 * 300.0)
            .collect();
        assert!(ks_two_sample(&atoms, &smeared).1 < 0.001);
        assert!(ks_two_sample_within(&atoms, &smeared, 2_000.0).1 > 0.5);
        assert!(
            ks_two_sample_within(&a, &c, 2_000.0).1 < 0.001,
            "a 10 % stretch is not jitter"
        );
    }

    #[test]
    fn profile_and_trace_set_their_rate() {
        let a: ArrivalSpec = "steps:1000@10s,3000@10s".parse().unwrap();
        assert_eq!(a.own_rate(), Some(2000.0));
        assert!((a.expected_count(1.0, 5.0, 15.0) - 20_000.0).abs() < 1e-6);
        assert!((a.time_of(1.0, 13_000.0) - 11.0).abs() < 1e-9);
        assert!(!a.is_stationary());
        assert_eq!("poisson".parse::<ArrivalSpec>().unwrap().own_rate(), None);
        assert_eq!(fmt_duration(1_500_000), "1500us");
        assert_eq!(fmt_duration(7), "7ns");
    }

    proptest! {
        #[test]
        fn schedule_is_monotonic_with_right_cv(rate in 10.0f64..1e6, seed in any::<u64>()) {
            let mut p = Poisson::new(rate, seed);
            let g = gaps(&mut p, 4_000);
            let mean = g.iter().sum::<f64>() / g.len() as f64;
            let sd = (g.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (g.len() - 1) as f64).sqrt();
            // 4000 exponential gaps: mean within ±8 % and cv within ±0.1 at far beyond 3σ.
            prop_assert!((mean * rate / 1e9 - 1.0).abs() < 0.08);
            prop_assert!((sd / mean - 1.0).abs() < 0.1);
            let mut f = Fixed::new(rate);
            let gf = gaps(&mut f, 1000);
            let mf = gf.iter().sum::<f64>() / gf.len() as f64;
            prop_assert!(gf.iter().all(|x| (x - mf).abs() <= 1.0));
        }
    }
}
