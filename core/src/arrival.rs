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
//! Adding a process means implementing [`ArrivalProcess`] and a case in
//! [`ArrivalSpec`].

use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A source of intended arrival times.
pub trait ArrivalProcess: Send {
    /// The next intended arrival, in ns since the schedule start (non-decreasing).
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

/// The arrival processes a user can name (`--arrival`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalSpec {
    Poisson,
    Fixed,
}

impl ArrivalSpec {
    /// Builds the process at `rate` requests/s, seeded.
    pub fn build(self, rate: f64, seed: u64) -> Box<dyn ArrivalProcess> {
        match self {
            ArrivalSpec::Poisson => Box::new(Poisson::new(rate, seed)),
            ArrivalSpec::Fixed => Box::new(Fixed::new(rate)),
        }
    }

    /// Squared coefficient of variation of the gaps (1 for Poisson, 0 for fixed).
    pub fn gap_scv(self) -> f64 {
        match self {
            ArrivalSpec::Poisson => 1.0,
            ArrivalSpec::Fixed => 0.0,
        }
    }
}

impl std::str::FromStr for ArrivalSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "poisson" => Ok(ArrivalSpec::Poisson),
            "fixed" => Ok(ArrivalSpec::Fixed),
            _ => Err(format!("unknown arrival process `{s}`; use poisson or fixed")),
        }
    }
}

impl std::fmt::Display for ArrivalSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ArrivalSpec::Poisson => "poisson",
            ArrivalSpec::Fixed => "fixed",
        })
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
    let mut v: Vec<f64> = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len() as f64;
    let mut d: f64 = 0.0;
    for (i, x) in v.iter().enumerate() {
        let f = 1.0 - (-x / mean).exp();
        d = d.max((f - i as f64 / n).abs()).max(((i + 1) as f64 / n - f).abs());
    }
    (d, ks_pvalue(d, v.len()))
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
        let a: Vec<u64> = (0..5).map(|_| 0).scan(Poisson::new(1e4, 9), |p, _| Some(p.next_offset_ns())).collect();
        let b: Vec<u64> = (0..5).map(|_| 0).scan(Poisson::new(1e4, 9), |p, _| Some(p.next_offset_ns())).collect();
        assert_eq!(a, b);
        assert_ne!(derive_seed(7, 0), derive_seed(7, 1));
        assert_ne!(derive_seed(7, 0), derive_seed(8, 0));
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
