//! Estimators and tests behind the experiment stopping rule and the checks.
//!
//! **Confidence intervals across runs.** Requests within one run are
//! correlated (a queue remembers), so a CI computed from one run's requests
//! as if they were independent is too narrow. Runs with fresh seeds are
//! independent, so each run contributes *one* estimate per metric (its mean,
//! p95, p99, ...) and the 95 % CI is Student-t over those estimates:
//! `x̄ ± t₀.₉₇₅,ₖ₋₁ · s/√k`. A percentile bootstrap over the same per-run
//! estimates is reported beside it as a cross-check.

use rand::{Rng, SeedableRng};

/// Two-sided 97.5 % quantile of Student's t with `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        1..=30 => T[df - 1],
        // Cornish–Fisher expansion around the normal quantile; < 0.001 off beyond 30.
        _ => {
            let z: f64 = 1.959_964;
            let d = df as f64;
            z + (z.powi(3) + z) / (4.0 * d)
                + (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / (96.0 * d * d)
        }
    }
}

/// A 95 % confidence interval for the mean of per-run estimates.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Interval {
    /// Mean of the per-run values.
    pub estimate: f64,
    /// Lower bound of the 95 % interval (−∞ with fewer than 2 runs).
    pub ci_low: f64,
    /// Upper bound of the 95 % interval (+∞ with fewer than 2 runs).
    pub ci_high: f64,
    /// Half-width relative to the estimate (∞ with fewer than 2 runs).
    pub rel_half_width: f64,
    /// Number of runs.
    pub n: usize,
}

/// Student-t interval over `xs` (one value per run).
pub fn t_interval(xs: &[f64]) -> Interval {
    let n = xs.len();
    let mean = if n == 0 {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / n as f64
    };
    if n < 2 {
        return Interval {
            estimate: mean,
            ci_low: f64::NEG_INFINITY,
            ci_high: f64::INFINITY,
            rel_half_width: f64::INFINITY,
            n,
        };
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let h = t975(n - 1) * (var / n as f64).sqrt();
    Interval {
        estimate: mean,
        ci_low: mean - h,
        ci_high: mean + h,
        rel_half_width: if mean != 0.0 {
            h / mean.abs()
        } else {
            f64::INFINITY
        },
        n,
    }
}

/// Percentile-bootstrap 95 % interval of the mean of `xs` (the cross-check).
pub fn bootstrap_interval(xs: &[f64], resamples: usize, seed: u64) -> (f64, f64) {
    let n = xs.len();
    if n < 2 {
        return (f64::NEG_INFINITY, f64::INFINITY);
    }
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| xs[rng.gen_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| means[((q * resamples as f64) as usize).min(resamples - 1)];
    (at(0.025), at(0.975))
}

/// Spearman rank correlation of `xs[i]` with `xs[i + lag]`.
pub fn spearman_lag(xs: &[f64], lag: usize) -> f64 {
    if xs.len() <= lag + 2 {
        return 0.0;
    }
    let a = ranks(&xs[..xs.len() - lag]);
    let b = ranks(&xs[lag..]);
    pearson(&a, &b)
}

fn ranks(xs: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..xs.len()).collect();
    idx.sort_by(|&i, &j| xs[i].total_cmp(&xs[j]));
    let mut r = vec![0.0; xs.len()];
    let mut i = 0;
    while i < idx.len() {
        // Ties share their average rank.
        let mut j = i;
        while j + 1 < idx.len() && xs[idx[j + 1]] == xs[idx[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0;
        for k in i..=j {
            r[idx[k]] = avg;
        }
        i = j + 1;
    }
    r
}

fn pearson(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(b) {
        sab += (x - ma) * (y - mb);
        saa += (x - ma).powi(2);
        sbb += (y - mb).powi(2);
    }
    if saa == 0.0 || sbb == 0.0 {
        0.0
    } else {
        sab / (saa * sbb).sqrt()
    }
}

/// Mann–Kendall trend test: (S statistic normalised to z, two-sided p).
pub fn mann_kendall(xs: &[f64]) -> (f64, f64) {
    let n = xs.len();
    if n < 3 {
        return (0.0, 1.0);
    }
    let mut s = 0i64;
    for i in 0..n {
        for j in i + 1..n {
            s += (xs[j] - xs[i])
                .partial_cmp(&0.0)
                .map(|o| o as i64)
                .unwrap_or(0);
        }
    }
    let nf = n as f64;
    let var = nf * (nf - 1.0) * (2.0 * nf + 5.0) / 18.0;
    let z = if s > 0 {
        (s as f64 - 1.0) / var.sqrt()
    } else if s < 0 {
        (s as f64 + 1.0) / var.sqrt()
    } else {
        0.0
    };
    (z, 2.0 * (1.0 - normal_cdf(z.abs())))
}

/// Standard normal CDF (Abramowitz–Stegun 7.1.26 erf; |error| < 1.5e-7).
pub fn normal_cdf(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.327_591_1 * x.abs() / std::f64::consts::SQRT_2);
    let y = 1.0
        - (((((1.061_405_429 * t - 1.453_152_027) * t) + 1.421_413_741) * t - 0.284_496_736) * t
            + 0.254_829_592)
            * t
            * (-(x * x) / 2.0).exp();
    if x >= 0.0 {
        0.5 * (1.0 + y)
    } else {
        0.5 * (1.0 - y)
    }
}

/// Quantile q of a sample (nearest rank, as HdrHistogram reports).
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop_assert, proptest};
    use rand_distr::{Distribution, Exp};

    #[test]
    fn t_table_and_expansion_agree() {
        assert!((t975(1) - 12.706).abs() < 1e-9);
        assert!((t975(30) - 2.042).abs() < 1e-9);
        assert!((t975(31) - 2.0395).abs() < 2e-3);
        assert!((t975(1000) - 1.9623).abs() < 1e-3);
    }

    /// The documented property: per-run p99 estimates from runs of a known
    /// distribution give 95 % intervals that cover the true p99 in 93–97 %
    /// of trials.
    #[test]
    fn percentile_ci_covers_truth_95_percent() {
        let true_p99 = 100f64.ln(); // Exp(1)
        let exp = Exp::new(1.0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(42);
        let (trials, runs, per_run) = (2000, 8, 4000);
        let mut covered = 0;
        let mut buf = vec![0.0f64; per_run];
        for _ in 0..trials {
            let est: Vec<f64> = (0..runs)
                .map(|_| {
                    for x in buf.iter_mut() {
                        *x = exp.sample(&mut rng);
                    }
                    buf.sort_by(|a, b| a.total_cmp(b));
                    buf[(0.99 * per_run as f64).ceil() as usize - 1]
                })
                .collect();
            let ci = t_interval(&est);
            if ci.ci_low <= true_p99 && true_p99 <= ci.ci_high {
                covered += 1;
            }
        }
        let cov = covered as f64 / trials as f64;
        assert!((0.93..=0.97).contains(&cov), "coverage {cov}");
    }

    #[test]
    fn bootstrap_brackets_t_interval() {
        let xs = [10.0, 11.0, 9.5, 10.2, 10.8, 9.9, 10.1, 10.4];
        let t = t_interval(&xs);
        let (lo, hi) = bootstrap_interval(&xs, 4000, 1);
        assert!(lo < t.estimate && t.estimate < hi);
        // Bootstrap intervals of the mean are a bit narrower than t for small k, never wildly different.
        assert!(
            (hi - lo) / (t.ci_high - t.ci_low) > 0.5 && (hi - lo) / (t.ci_high - t.ci_low) < 1.2
        );
    }

    #[test]
    fn spearman_and_trend() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let iid: Vec<f64> = (0..5000).map(|_| rng.gen::<f64>()).collect();
        assert!(spearman_lag(&iid, 1).abs() < 0.05);
        // An AR(1) process is correlated at lag 1.
        let mut x = 0.0;
        let ar: Vec<f64> = (0..5000)
            .map(|_| {
                x = 0.9 * x + rng.gen::<f64>();
                x
            })
            .collect();
        assert!(spearman_lag(&ar, 1) > 0.7);
        let up: Vec<f64> = (0..20).map(|i| i as f64 + rng.gen::<f64>() * 3.0).collect();
        assert!(mann_kendall(&up).1 < 0.01);
        let flat: Vec<f64> = (0..20).map(|_| rng.gen::<f64>()).collect();
        assert!(mann_kendall(&flat).1 > 0.001);
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
    }

    proptest! {
        #[test]
        fn interval_contains_estimate(xs in proptest::collection::vec(1.0f64..1e6, 2..30)) {
            let ci = t_interval(&xs);
            prop_assert!(ci.ci_low <= ci.estimate && ci.estimate <= ci.ci_high);
            prop_assert!(ci.rel_half_width >= 0.0);
        }
    }
}
