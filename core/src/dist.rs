//! Distributions of durations, written as short specs.
//!
//! Grammar (used by synth's `service=`, `--net-delay`, and anywhere a duration
//! distribution is needed):
//!
//! ```text
//! spec  := term ( '+' term )*            -- more than one term only as a mixture
//! term  := [ weight '*' ] base           -- weights of a mixture sum to 1
//! base  := fixed:D | exp:D | lognormal:D,cv=X | uniform:D,D | pareto:D,alpha=A
//! D     := number unit, unit one of ns, us, ms, s
//! ```
//! A top-level `mix:` prefix is allowed: `mix:0.9*exp:100us+0.1*fixed:2ms`.
//! Every parameter is a *mean* (or bound) in nanoseconds once parsed, so the
//! harness can tell offered utilization from the spec alone.
//!
//! ```
//! use taillab_core::dist::Dist;
//! // A leaf that is slow one time in a hundred: mean 0.99 × 100 µs + 0.01 × 10 ms.
//! let d: Dist = "mix:0.99*exp:100us+0.01*fixed:10ms".parse().unwrap();
//! assert!((d.mean() - 199_000.0).abs() < 1e-6);
//! assert!(d.cv() > 3.0, "a heavy tail");
//! // Printed back in the same grammar.
//! assert_eq!(d.to_string().parse::<Dist>().unwrap(), d);
//! // A bad spec says what is wrong and shows the grammar.
//! let e = "exp:100".parse::<Dist>().unwrap_err().to_string();
//! assert!(e.contains("exp:100") && e.contains("units ns, us, ms, s"));
//! ```

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Pareto};
use std::fmt;

/// A malformed spec; the message shows the grammar.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("bad distribution `{spec}`: {why}. Use e.g. fixed:200us, exp:200us, lognormal:200us,cv=0.5, uniform:100us,300us, pareto:200us,alpha=2.5 or mix:0.9*exp:100us+0.1*fixed:2ms (units ns, us, ms, s)")]
pub struct DistError {
    /// The spec as given.
    pub spec: String,
    /// Which part is wrong and why.
    pub why: String,
}

/// A distribution of durations in nanoseconds.
#[derive(Debug, Clone, PartialEq)]
pub enum Dist {
    /// Always this value (ns).
    Fixed(f64),
    /// Exponential (memoryless; coefficient of variation 1).
    Exp {
        /// Mean (ns), > 0.
        mean: f64,
    },
    /// Log-normal with this mean and coefficient of variation.
    LogNormal {
        /// Mean (ns), > 0.
        mean: f64,
        /// Coefficient of variation (standard deviation / mean), > 0.
        cv: f64,
    },
    /// Uniform between two bounds.
    Uniform {
        /// Lower bound (ns).
        lo: f64,
        /// Upper bound (ns), ≥ `lo`.
        hi: f64,
    },
    /// Pareto with the given mean and shape `alpha > 1`.
    Pareto {
        /// Mean (ns), > 0.
        mean: f64,
        /// Shape; > 1 so the mean is finite, ≤ 2 gives an infinite variance.
        alpha: f64,
    },
    /// A mixture: each term drawn with its weight (weights in (0, 1], summing to 1).
    Mix(Vec<(f64, Dist)>),
}

/// Parses a duration such as `200us` or `1.5ms` into nanoseconds.
pub fn parse_duration_ns(s: &str) -> Result<f64, crate::error::ValueError> {
    use crate::error::ValueError;
    let given = s;
    let s = s.trim();
    let units = "use ns, us, ms or s";
    let split = s.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(|| {
        ValueError::new(given, format!("`{s}` has no unit"))
            .with_fix("write it with ns, us, ms or s (e.g. 200us)")
    })?;
    let (num, unit) = s.split_at(split);
    if num.trim().is_empty() {
        return Err(ValueError::not(given, "a duration like 200us or 1.5ms"));
    }
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| ValueError::new(given, format!("`{num}` in `{s}` is not a number")))?;
    let mult = match unit {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => {
            return Err(
                ValueError::new(given, format!("unknown unit `{unit}` in `{s}`")).with_fix(units),
            )
        }
    };
    if !v.is_finite() || v < 0.0 {
        return Err(ValueError::new(
            given,
            format!("`{s}` must be a finite, non-negative duration"),
        ));
    }
    Ok(v * mult)
}

/// Formats nanoseconds with a readable unit (for tables and messages).
pub fn fmt_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3}s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.2}us", ns / 1e3)
    } else {
        format!("{ns:.0}ns")
    }
}

impl std::str::FromStr for Dist {
    type Err = DistError;
    fn from_str(spec: &str) -> Result<Self, DistError> {
        let err = |why: String| DistError {
            spec: spec.to_string(),
            why,
        };
        let body = spec.trim();
        let body = body.strip_prefix("mix:").unwrap_or(body);
        if body.is_empty() {
            return Err(err("empty spec".into()));
        }
        let terms: Vec<&str> = body.split('+').collect();
        if terms.len() == 1 && !terms[0].contains('*') {
            return parse_base(terms[0]).map_err(err);
        }
        let mut parts = Vec::new();
        for t in terms {
            let (w, b) = t.split_once('*').ok_or_else(|| {
                err(format!(
                    "mixture term `{t}` needs a weight, as in 0.1*fixed:2ms"
                ))
            })?;
            let w: f64 = w
                .trim()
                .parse()
                .map_err(|_| err(format!("weight `{w}` is not a number")))?;
            if !(w > 0.0 && w <= 1.0) {
                return Err(err(format!("weight {w} must be in (0, 1]")));
            }
            parts.push((w, parse_base(b).map_err(err)?));
        }
        let total: f64 = parts.iter().map(|p| p.0).sum();
        if (total - 1.0).abs() > 1e-6 {
            return Err(err(format!("mixture weights sum to {total}, not 1")));
        }
        Ok(Dist::Mix(parts))
    }
}

fn parse_base(s: &str) -> Result<Dist, String> {
    let s = s.trim();
    let (kind, args) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` needs a kind and parameters, as in exp:200us"))?;
    let args: Vec<&str> = args.split(',').map(|a| a.trim()).collect();
    let named = |name: &str| -> Result<f64, String> {
        let a = args
            .iter()
            .find_map(|a| a.strip_prefix(name).and_then(|r| r.strip_prefix('=')))
            .ok_or_else(|| format!("`{s}` needs {name}=VALUE"))?;
        a.parse::<f64>()
            .map_err(|_| format!("{name}=`{a}` is not a number"))
    };
    let expect_args = |n: usize| -> Result<(), String> {
        if args.len() != n {
            Err(format!(
                "`{kind}` takes {n} parameter(s), got {}",
                args.len()
            ))
        } else {
            Ok(())
        }
    };
    let d = match kind {
        "fixed" => {
            expect_args(1)?;
            Dist::Fixed(parse_duration_ns(args[0])?)
        }
        "exp" => {
            expect_args(1)?;
            Dist::Exp {
                mean: parse_duration_ns(args[0])?,
            }
        }
        "lognormal" => {
            expect_args(2)?;
            let cv = named("cv")?;
            if !(cv > 0.0 && cv.is_finite()) {
                return Err(format!("cv={cv} must be > 0"));
            }
            Dist::LogNormal {
                mean: parse_duration_ns(args[0])?,
                cv,
            }
        }
        "uniform" => {
            expect_args(2)?;
            let (lo, hi) = (parse_duration_ns(args[0])?, parse_duration_ns(args[1])?);
            if lo > hi {
                return Err(format!("uniform bounds {} > {}", args[0], args[1]));
            }
            Dist::Uniform { lo, hi }
        }
        "pareto" => {
            expect_args(2)?;
            let alpha = named("alpha")?;
            if !(alpha > 1.0 && alpha.is_finite()) {
                return Err(format!("alpha={alpha} must be > 1 for a finite mean"));
            }
            Dist::Pareto {
                mean: parse_duration_ns(args[0])?,
                alpha,
            }
        }
        _ => return Err(format!("unknown kind `{kind}`")),
    };
    if let Dist::Exp { mean } | Dist::LogNormal { mean, .. } | Dist::Pareto { mean, .. } = d {
        if mean <= 0.0 {
            return Err(format!("the mean of `{s}` must be > 0"));
        }
    }
    Ok(d)
}

impl Dist {
    /// The mean in ns.
    pub fn mean(&self) -> f64 {
        match self {
            Dist::Fixed(v) => *v,
            Dist::Exp { mean } | Dist::LogNormal { mean, .. } | Dist::Pareto { mean, .. } => *mean,
            Dist::Uniform { lo, hi } => (lo + hi) / 2.0,
            Dist::Mix(p) => p.iter().map(|(w, d)| w * d.mean()).sum(),
        }
    }

    /// The second moment E\[X²\] in ns², for Pollaczek–Khinchine.
    pub fn second_moment(&self) -> f64 {
        match self {
            Dist::Fixed(v) => v * v,
            Dist::Exp { mean } => 2.0 * mean * mean,
            Dist::LogNormal { mean, cv } => mean * mean * (1.0 + cv * cv),
            Dist::Uniform { lo, hi } => (lo * lo + lo * hi + hi * hi) / 3.0,
            Dist::Pareto { mean, alpha } => {
                if *alpha <= 2.0 {
                    f64::INFINITY
                } else {
                    let xm = mean * (alpha - 1.0) / alpha;
                    alpha * xm * xm / (alpha - 2.0)
                }
            }
            Dist::Mix(p) => p.iter().map(|(w, d)| w * d.second_moment()).sum(),
        }
    }

    /// Coefficient of variation (std / mean).
    pub fn cv(&self) -> f64 {
        let m = self.mean();
        if m == 0.0 {
            return 0.0;
        }
        ((self.second_moment() - m * m).max(0.0)).sqrt() / m
    }

    /// Draws one value in ns (never negative).
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        match self {
            Dist::Fixed(v) => *v,
            Dist::Exp { mean } => Exp::new(1.0 / mean)
                .expect("mean > 0 checked at parse")
                .sample(rng),
            Dist::LogNormal { mean, cv } => {
                // For lognormal, cv² = e^{σ²} − 1 and mean = e^{μ + σ²/2}.
                let s2 = (1.0 + cv * cv).ln();
                let mu = mean.ln() - s2 / 2.0;
                LogNormal::new(mu, s2.sqrt())
                    .expect("σ > 0 checked at parse")
                    .sample(rng)
            }
            Dist::Uniform { lo, hi } => {
                if hi > lo {
                    rng.gen_range(*lo..*hi)
                } else {
                    *lo
                }
            }
            Dist::Pareto { mean, alpha } => {
                let xm = mean * (alpha - 1.0) / alpha;
                Pareto::new(xm, *alpha)
                    .expect("alpha > 1 checked at parse")
                    .sample(rng)
            }
            Dist::Mix(p) => {
                let mut u: f64 = rng.gen();
                for (w, d) in p {
                    if u < *w {
                        return d.sample(rng);
                    }
                    u -= w;
                }
                p.last().expect("a mixture has terms").1.sample(rng)
            }
        }
    }
}

impl fmt::Display for Dist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = |ns: f64| format!("{}ns", ns.round() as u64);
        match self {
            Dist::Fixed(v) => write!(f, "fixed:{}", d(*v)),
            Dist::Exp { mean } => write!(f, "exp:{}", d(*mean)),
            Dist::LogNormal { mean, cv } => write!(f, "lognormal:{},cv={cv}", d(*mean)),
            Dist::Uniform { lo, hi } => write!(f, "uniform:{},{}", d(*lo), d(*hi)),
            Dist::Pareto { mean, alpha } => write!(f, "pareto:{},alpha={alpha}", d(*mean)),
            Dist::Mix(p) => {
                let v: Vec<String> = p.iter().map(|(w, x)| format!("{w}*{x}")).collect();
                write!(f, "mix:{}", v.join("+"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;

    #[test]
    fn parses_each_kind() {
        assert_eq!("fixed:200us".parse::<Dist>().unwrap(), Dist::Fixed(200e3));
        assert_eq!(
            "exp:1.5ms".parse::<Dist>().unwrap(),
            Dist::Exp { mean: 1.5e6 }
        );
        assert_eq!(
            "lognormal:200us,cv=0.5".parse::<Dist>().unwrap(),
            Dist::LogNormal {
                mean: 200e3,
                cv: 0.5
            }
        );
        assert_eq!(
            "uniform:100us,300us".parse::<Dist>().unwrap(),
            Dist::Uniform {
                lo: 100e3,
                hi: 300e3
            }
        );
        let m: Dist = "mix:0.9*exp:100us+0.1*fixed:2ms".parse().unwrap();
        assert!((m.mean() - (0.9 * 100e3 + 0.1 * 2e6)).abs() < 1e-6);
        let m2: Dist = "0.5*fixed:1s+0.5*fixed:3s".parse().unwrap();
        assert_eq!(m2.mean(), 2e9);
    }

    #[test]
    fn rejects_bad_specs_with_reasons() {
        for bad in [
            "",
            "exp",
            "exp:",
            "exp:200",
            "exp:200xs",
            "exp:-1us",
            "exp:0us",
            "lognormal:1us",
            "lognormal:1us,cv=0",
            "uniform:3us,1us",
            "0.5*exp:1us+0.4*exp:2us",
            "mix:exp:1us+fixed:2us",
            "gauss:1us",
            "pareto:1us,alpha=1",
            "fixed:1us,2us",
            "1.5*exp:1us",
        ] {
            let e = bad.parse::<Dist>();
            assert!(e.is_err(), "accepted `{bad}`");
            assert!(
                e.unwrap_err().to_string().contains("e.g."),
                "no hint for `{bad}`"
            );
        }
    }

    #[test]
    fn moments_match_samples() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        for spec in [
            "exp:200us",
            "lognormal:200us,cv=0.5",
            "uniform:100us,300us",
            "fixed:50us",
            "mix:0.9*exp:100us+0.1*fixed:2ms",
            "pareto:100us,alpha=3.5",
        ] {
            let d: Dist = spec.parse().unwrap();
            let n = 200_000;
            let xs: Vec<f64> = (0..n).map(|_| d.sample(&mut rng)).collect();
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            assert!(
                (mean / d.mean() - 1.0).abs() < 0.02,
                "{spec}: mean {mean} vs {}",
                d.mean()
            );
            let cv = var.sqrt() / mean;
            assert!(
                (cv - d.cv()).abs() < 0.05 + 0.05 * d.cv(),
                "{spec}: cv {cv} vs {}",
                d.cv()
            );
            assert!(xs.iter().all(|&x| x >= 0.0));
        }
    }

    proptest! {
        #[test]
        fn display_round_trips(mean in 1u64..10_000_000, cv in 0.05f64..4.0, w in 0.05f64..0.95) {
            for d in [
                Dist::Exp { mean: mean as f64 },
                Dist::Fixed(mean as f64),
                Dist::LogNormal { mean: mean as f64, cv },
                Dist::Mix(vec![(w, Dist::Exp { mean: mean as f64 }), (1.0 - w, Dist::Fixed(2.0 * mean as f64))]),
            ] {
                let back: Dist = d.to_string().parse().unwrap();
                prop_assert!((back.mean() - d.mean()).abs() < 1e-6 * d.mean().max(1.0));
            }
        }

        #[test]
        fn parser_never_panics(s in "\\PC{0,40}") {
            let _ = s.parse::<Dist>();
        }

        #[test]
        fn durations_scale(v in 0.0f64..1e6) {
            let (us, ms) = (v.to_string() + "us", v.to_string() + "ms");
            prop_assert!((parse_duration_ns(&us).unwrap() - v * 1e3).abs() < 1e-6 * v.max(1.0));
            prop_assert!((parse_duration_ns(&ms).unwrap() - v * 1e6).abs() < 1e-3 * v.max(1.0));
        }
    }
}
