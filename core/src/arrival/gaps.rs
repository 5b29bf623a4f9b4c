//! Renewal processes with a chosen gap distribution, and the bursty
//! two-state MMPP.
//!
//! A renewal process draws independent gaps with mean 1/rate; only their
//! shape differs from Poisson's exponential: the coefficient of variation
//! (cv = sd/mean) says how bursty the load is (cv 0: fixed spacing, 1:
//! Poisson, > 1: clumps and lulls). Pareto gaps have a power-law tail (α ≤ 2:
//! infinite variance), the classic model of self-similar traffic.
//!
//! The MMPP (Markov-modulated Poisson process) switches between an *on*
//! state and an *off* state, each held for an exponential time (means `on`
//! and `off`); arrivals are Poisson at rate λ_on = ratio · λ_off in the on
//! state. λ_off is set so the long-run mean is the run's rate:
//! λ̄ = (on·λ_on + off·λ_off) / (on + off). Its gaps are *not*
//! independent (bursts cluster), which is the point.

use super::{ArrivalProcess, END};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Exp, Gamma, LogNormal, Pareto};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The shape of a renewal process's gaps (their mean is 1/rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GapDist {
    /// `lognormal:cv=X`.
    LogNormal {
        /// Coefficient of variation of the gaps.
        cv: f64,
    },
    /// `gamma:cv=X` (shape 1/cv²).
    Gamma {
        /// Coefficient of variation of the gaps.
        cv: f64,
    },
    /// `pareto:alpha=A`.
    Pareto {
        /// Tail index (> 1).
        alpha: f64,
    },
}

impl GapDist {
    /// Squared coefficient of variation (∞ for Pareto with α ≤ 2).
    pub fn scv(&self) -> f64 {
        match *self {
            GapDist::LogNormal { cv } | GapDist::Gamma { cv } => cv * cv,
            GapDist::Pareto { alpha } if alpha > 2.0 => 1.0 / (alpha * (alpha - 2.0)),
            GapDist::Pareto { .. } => f64::INFINITY,
        }
    }

    /// The CDF of a gap (ns) when the mean gap is `mean` ns.
    pub fn cdf(&self, mean: f64, x: f64) -> f64 {
        if x <= 0.0 {
            return 0.0;
        }
        match *self {
            GapDist::LogNormal { cv } => {
                let s2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - s2 / 2.0;
                0.5 * erfc(-(x.ln() - mu) / (s2.sqrt() * std::f64::consts::SQRT_2))
            }
            GapDist::Gamma { cv } => {
                let k = 1.0 / (cv * cv);
                lower_gamma_regularized(k, x / (mean / k))
            }
            GapDist::Pareto { alpha } => {
                let xm = mean * (alpha - 1.0) / alpha;
                if x < xm {
                    0.0
                } else {
                    1.0 - (xm / x).powf(alpha)
                }
            }
        }
    }
}

/// A renewal process: independent gaps from a [`GapDist`].
pub struct Renewal {
    rate: f64,
    t: f64,
    sampler: GapSampler,
    rng: Xoshiro256PlusPlus,
}

enum GapSampler {
    LogNormal(LogNormal<f64>),
    Gamma(Gamma<f64>),
    Pareto(Pareto<f64>),
}

impl Renewal {
    /// Gaps of shape `g` with mean 1/`rate` s. Errors name the bad parameter.
    pub fn new(g: GapDist, rate: f64, seed: u64) -> Result<Self, crate::arrival::ArrivalError> {
        let build = |why: String| crate::arrival::ArrivalError::Build {
            spec: crate::arrival::ArrivalSpec::Gaps(g).to_string(),
            why,
        };
        let mean = 1e9 / rate;
        let sampler = match g {
            GapDist::LogNormal { cv } => {
                let s2 = (1.0 + cv * cv).ln();
                LogNormal::new(mean.ln() - s2 / 2.0, s2.sqrt()).map(GapSampler::LogNormal)
            }
            .map_err(|e| build(format!("lognormal gaps with cv={cv}: {e}")))?,
            GapDist::Gamma { cv } => {
                let k = 1.0 / (cv * cv);
                Gamma::new(k, mean / k)
                    .map(GapSampler::Gamma)
                    .map_err(|e| build(format!("gamma gaps with cv={cv}: {e}")))?
            }
            GapDist::Pareto { alpha } => Pareto::new(mean * (alpha - 1.0) / alpha, alpha)
                .map(GapSampler::Pareto)
                .map_err(|e| build(format!("pareto gaps with alpha={alpha}: {e}")))?,
        };
        Ok(Renewal {
            rate,
            t: 0.0,
            sampler,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        })
    }
}

impl ArrivalProcess for Renewal {
    fn next_offset_ns(&mut self) -> u64 {
        let g = match &self.sampler {
            GapSampler::LogNormal(d) => d.sample(&mut self.rng),
            GapSampler::Gamma(d) => d.sample(&mut self.rng),
            GapSampler::Pareto(d) => d.sample(&mut self.rng),
        };
        self.t += g;
        if self.t >= END as f64 {
            return END;
        }
        self.t.round() as u64
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

/// The on/off parameters of an MMPP (ns, and λ_on/λ_off).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MmppSpec {
    /// Mean time in the on (burst) state.
    pub on_ns: u64,
    /// Mean time in the off state.
    pub off_ns: u64,
    /// On-state rate ÷ off-state rate.
    pub ratio: f64,
}

impl MmppSpec {
    /// Arrival rates (/s) in the on and off states for a long-run mean `rate`.
    pub fn rates(&self, rate: f64) -> (f64, f64) {
        let (on, off) = (self.on_ns as f64, self.off_ns as f64);
        let low = rate * (on + off) / (on * self.ratio + off);
        (self.ratio * low, low)
    }

    /// Asymptotic index of dispersion of counts, Var N(t) / E N(t) for
    /// long t: how much wider than Poisson the count of a window spreads.
    pub fn dispersion(&self, rate: f64) -> f64 {
        let (l1, l2) = self.rates(rate);
        // Leaving rates of on and off (per ns), and the mean rate per ns.
        let (r1, r2) = (1.0 / self.on_ns as f64, 1.0 / self.off_ns as f64);
        let (l1, l2, lbar) = (l1 / 1e9, l2 / 1e9, rate / 1e9);
        1.0 + 2.0 * r1 * r2 * (l1 - l2).powi(2) / (lbar * (r1 + r2).powi(3))
    }
}

/// The MMPP process; see the module docs.
pub struct Mmpp {
    rate: f64,
    /// Per-ns arrival rates in the on and off states.
    lambda: [f64; 2],
    hold: [Exp<f64>; 2],
    on: bool,
    t: f64,
    state_end: f64,
    rng: Xoshiro256PlusPlus,
}

impl Mmpp {
    /// The process of `spec` with long-run mean `rate` requests/s, seeded.
    pub fn new(spec: MmppSpec, rate: f64, seed: u64) -> Self {
        let (hi, lo) = spec.rates(rate);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let hold = [
            Exp::new(1.0 / spec.on_ns as f64).expect("on > 0 checked at parse"),
            Exp::new(1.0 / spec.off_ns as f64).expect("off > 0 checked at parse"),
        ];
        // Start in the stationary state distribution, so the run has no
        // transient from a fixed initial state.
        let p_on = spec.on_ns as f64 / (spec.on_ns + spec.off_ns) as f64;
        let on = rng.gen::<f64>() < p_on;
        let state_end = hold[usize::from(!on)].sample(&mut rng);
        Mmpp {
            rate,
            lambda: [hi / 1e9, lo / 1e9],
            hold,
            on,
            t: 0.0,
            state_end,
            rng,
        }
    }
}

impl ArrivalProcess for Mmpp {
    fn next_offset_ns(&mut self) -> u64 {
        loop {
            let s = usize::from(!self.on);
            // Memoryless: a gap that overruns the state is redrawn in the next one.
            let g = self.rng.sample::<f64, _>(rand_distr::Exp1) / self.lambda[s];
            if self.t + g < self.state_end {
                self.t += g;
                return if self.t >= END as f64 {
                    END
                } else {
                    self.t.round() as u64
                };
            }
            self.t = self.state_end;
            self.on = !self.on;
            self.state_end = self.t + self.hold[usize::from(!self.on)].sample(&mut self.rng);
        }
    }
    fn rate(&self) -> f64 {
        self.rate
    }
}

/// Complementary error function (Numerical Recipes' Chebyshev fit,
/// relative error < 1.2e-7: far below what a KS test resolves).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, 9 terms; ~1e-15 relative).
pub fn ln_gamma(x: f64) -> f64 {
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection keeps the series in its accurate range.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + 7.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// Regularized lower incomplete gamma P(k, x): the Gamma(k, 1) CDF at x.
/// Series below k + 1, Lentz's continued fraction above (Numerical Recipes).
pub fn lower_gamma_regularized(k: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let front = (-x + k * x.ln() - ln_gamma(k)).exp();
    if x < k + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / k, 1.0 / k, k);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-15 {
                break;
            }
        }
        (sum * front).clamp(0.0, 1.0)
    } else {
        let tiny = 1e-300;
        let mut b = x + 1.0 - k;
        let mut c = 1.0 / tiny;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..10_000 {
            let an = -(i as f64) * (i as f64 - k);
            b += 2.0;
            d = an * d + b;
            if d.abs() < tiny {
                d = tiny;
            }
            c = b + an / c;
            if c.abs() < tiny {
                c = tiny;
            }
            d = 1.0 / d;
            let del = d * c;
            h *= del;
            if (del - 1.0).abs() < 1e-15 {
                break;
            }
        }
        (1.0 - front * h).clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_functions_known_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-7);
        assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-7);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
        // P(1, x) is the unit exponential CDF; P(3, 2) from tables.
        for x in [0.1, 1.0, 2.5, 10.0] {
            assert!((lower_gamma_regularized(1.0, x) - (1.0 - (-x).exp())).abs() < 1e-12);
        }
        assert!((lower_gamma_regularized(3.0, 2.0) - 0.323_323_583_8).abs() < 1e-9);
        assert!((lower_gamma_regularized(0.25, 5.0) - 0.999_507_974_9).abs() < 1e-9);
    }

    #[test]
    fn mmpp_rates_average_to_the_mean_and_burst() {
        let s = MmppSpec {
            on_ns: 50_000_000,
            off_ns: 200_000_000,
            ratio: 8.0,
        };
        let (hi, lo) = s.rates(3000.0);
        assert!((hi / lo - 8.0).abs() < 1e-9);
        assert!(((50.0 * hi + 200.0 * lo) / 250.0 - 3000.0).abs() < 1e-6);
        assert!(s.dispersion(3000.0) > 10.0, "{}", s.dispersion(3000.0));
        let flat = MmppSpec { ratio: 1.0, ..s };
        assert!((flat.dispersion(3000.0) - 1.0).abs() < 1e-12);
    }
}
