//! Load profiles: a rate that changes over time.
//!
//! ```text
//! steps:1000@10s,3000@10s           1000/s for 10 s, then 3000/s for 10 s
//! ramp:1000..5000 over 60s          linear from 1000/s to 5000/s in 60 s
//! sine:mean=3000,amp=1000,period=30s  3000 ± 1000/s, one cycle every 30 s
//! ```
//!
//! Arrivals are a non-homogeneous Poisson process with that rate λ(t):
//! unit-rate exponential increments of the expected count Λ(t) = ∫₀ᵗ λ,
//! mapped back through Λ⁻¹ (time rescaling), so the count in any window is
//! Poisson with mean ∫ λ over it, and a given seed gives the same times.
//! Λ⁻¹ is exact for steps and ramps and solved to 1e-12 s for the sine.
//!
//! A profile repeats after its last segment (steps and ramps restart, a
//! sine is periodic anyway). Time 0 is the schedule start, so a warmup
//! takes the beginning of the profile.

use super::{ArrivalProcess, END};
use crate::dist::parse_duration_ns;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

/// A rate over time; see the module docs.
#[derive(Debug, Clone, PartialEq)]
pub enum Profile {
    /// (rate /s, length ns) segments, in order.
    Steps(Vec<(f64, u64)>),
    /// Linear from `from` to `to` (/s) over `over_ns`.
    Ramp {
        /// Rate at the start (/s).
        from: f64,
        /// Rate at the end (/s).
        to: f64,
        /// Length of the ramp.
        over_ns: u64,
    },
    /// `mean` ± `amp` (/s), one cycle per `period_ns`.
    Sine {
        /// Mean rate (/s).
        mean: f64,
        /// Amplitude (/s), below the mean.
        amp: f64,
        /// Length of a cycle.
        period_ns: u64,
    },
}

/// How each kind is written, for error messages.
pub const PROFILE_FORMS: &str =
    "steps:RATE@DURATION,... (steps:1000@10s,3000@10s), ramp:FROM..TO over DURATION (ramp:1000..5000 over 60s) or sine:mean=RATE,amp=RATE,period=DURATION (sine:mean=3000,amp=1000,period=30s)";

fn rate(s: &str, what: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{what} `{s}` is not a number (requests per second)"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!(
            "{what} {v} must be > 0: a profile's rate must stay positive everywhere"
        ));
    }
    Ok(v)
}

fn duration(s: &str, what: &str) -> Result<u64, String> {
    let ns = parse_duration_ns(s)
        .map_err(|e| format!("{what}: {e}"))?
        .round() as u64;
    if ns == 0 {
        return Err(format!("{what} `{s}` must be longer than 0"));
    }
    Ok(ns)
}

impl Profile {
    /// Parses `kind` (`steps`, `ramp`, `sine`) with its arguments `args`;
    /// `None` when `kind` is not a profile.
    pub fn parse(kind: &str, args: &str) -> Option<Result<Profile, crate::error::ValueError>> {
        let parse = match kind {
            "steps" => Self::parse_steps,
            "ramp" => Self::parse_ramp,
            "sine" => Self::parse_sine,
            _ => return None,
        };
        Some(crate::error::ValueError::wrap(
            &format!("{kind}:{args}"),
            || parse(args),
        ))
    }

    fn parse_steps(args: &str) -> Result<Profile, String> {
        let mut v = Vec::new();
        for part in args.split(',') {
            let (r, d) = part
                .split_once('@')
                .ok_or_else(|| format!("step `{part}` needs RATE@DURATION, as in 1000@10s"))?;
            v.push((rate(r, "step rate")?, duration(d, "step length")?));
        }
        Ok(Profile::Steps(v))
    }

    fn parse_ramp(args: &str) -> Result<Profile, String> {
        let (range, over) = args
            .split_once(" over ")
            .or_else(|| args.split_once('@'))
            .ok_or_else(|| {
                "a ramp needs FROM..TO over DURATION, as in 1000..5000 over 60s".to_string()
            })?;
        let (a, b) = range
            .split_once("..")
            .ok_or_else(|| format!("ramp range `{range}` needs FROM..TO, as in 1000..5000"))?;
        Ok(Profile::Ramp {
            from: rate(a, "ramp start rate")?,
            to: rate(b, "ramp end rate")?,
            over_ns: duration(over, "ramp length")?,
        })
    }

    fn parse_sine(args: &str) -> Result<Profile, String> {
        let (mut mean, mut amp, mut period) = (None, None, None);
        for part in args.split(',') {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}` needs key=value"))?;
            match k.trim() {
                "mean" => mean = Some(rate(v, "sine mean")?),
                "amp" => {
                    let a: f64 = v
                        .trim()
                        .parse()
                        .map_err(|_| format!("amp `{v}` is not a number"))?;
                    if !(a.is_finite() && a >= 0.0) {
                        return Err(format!("amp {a} must be ≥ 0"));
                    }
                    amp = Some(a)
                }
                "period" => period = Some(duration(v, "sine period")?),
                other => return Err(format!("unknown sine key `{other}` (mean, amp, period)")),
            }
        }
        let (Some(mean), Some(amp), Some(period_ns)) = (mean, amp, period) else {
            return Err("a sine needs mean=, amp= and period=".into());
        };
        if amp >= mean {
            return Err(format!(
                "amp {amp} ≥ mean {mean}: the rate would reach {} /s; a profile's rate must stay > 0 (use amp < mean)",
                mean - amp
            ));
        }
        Ok(Profile::Sine {
            mean,
            amp,
            period_ns,
        })
    }

    /// Length of one cycle, in s.
    pub fn period_s(&self) -> f64 {
        match self {
            Profile::Steps(v) => v.iter().map(|s| s.1).sum::<u64>() as f64 / 1e9,
            Profile::Ramp { over_ns, .. } => *over_ns as f64 / 1e9,
            Profile::Sine { period_ns, .. } => *period_ns as f64 / 1e9,
        }
    }

    /// The rate (/s) at time `t` s.
    pub fn rate_at(&self, t: f64) -> f64 {
        let p = self.period_s();
        let t = t.rem_euclid(p);
        match self {
            Profile::Steps(v) => {
                let mut end = 0.0;
                for (r, d) in v {
                    end += *d as f64 / 1e9;
                    if t < end {
                        return *r;
                    }
                }
                v.last().map(|s| s.0).unwrap_or(0.0)
            }
            Profile::Ramp { from, to, .. } => from + (to - from) * t / p,
            Profile::Sine { mean, amp, .. } => {
                mean + amp * (2.0 * std::f64::consts::PI * t / p).sin()
            }
        }
    }

    /// Expected arrivals in one cycle.
    fn cycle_count(&self) -> f64 {
        self.cum_in_cycle(self.period_s())
    }

    /// Mean rate over a cycle (/s): the run's `qps` for a profile.
    pub fn mean_rate(&self) -> f64 {
        self.cycle_count() / self.period_s()
    }

    /// Λ(t): expected arrivals in [0, t] (t in s).
    pub fn cum(&self, t: f64) -> f64 {
        let p = self.period_s();
        let k = (t / p).floor();
        k * self.cycle_count() + self.cum_in_cycle(t - k * p)
    }

    fn cum_in_cycle(&self, t: f64) -> f64 {
        match self {
            Profile::Steps(v) => {
                let (mut acc, mut start) = (0.0, 0.0);
                for (r, d) in v {
                    let len = *d as f64 / 1e9;
                    if t <= start + len {
                        return acc + r * (t - start);
                    }
                    acc += r * len;
                    start += len;
                }
                acc
            }
            Profile::Ramp { from, to, over_ns } => {
                let k = (to - from) / (*over_ns as f64 / 1e9);
                from * t + k * t * t / 2.0
            }
            Profile::Sine { mean, amp, .. } => {
                let w = 2.0 * std::f64::consts::PI / self.period_s();
                mean * t + amp / w * (1.0 - (w * t).cos())
            }
        }
    }

    /// Λ⁻¹(y): the time (s) by which `y` arrivals are expected.
    pub fn inv(&self, y: f64) -> f64 {
        let c = self.cycle_count();
        let k = (y / c).floor();
        k * self.period_s() + self.inv_in_cycle(y - k * c)
    }

    fn inv_in_cycle(&self, y: f64) -> f64 {
        match self {
            Profile::Steps(v) => {
                let (mut acc, mut start) = (0.0, 0.0);
                for (r, d) in v {
                    let len = *d as f64 / 1e9;
                    if y <= acc + r * len {
                        return start + (y - acc) / r;
                    }
                    acc += r * len;
                    start += len;
                }
                start
            }
            Profile::Ramp { from, to, over_ns } => {
                let k = (to - from) / (*over_ns as f64 / 1e9);
                // Root of from·t + k t²/2 = y, in the form that is stable for k → 0.
                2.0 * y / (from + (from * from + 2.0 * k * y).max(0.0).sqrt())
            }
            Profile::Sine { mean, amp, .. } => {
                // Λ(t) − mean·t lies in [0, 2·amp/w], which brackets t.
                let w = 2.0 * std::f64::consts::PI / self.period_s();
                let (mut lo, mut hi) = (((y - 2.0 * amp / w) / mean).max(0.0), y / mean);
                let mut t = (lo + hi) / 2.0;
                for _ in 0..100 {
                    let f = self.cum_in_cycle(t) - y;
                    if f.abs() < 1e-9 || hi - lo < 1e-12 {
                        break;
                    }
                    if f > 0.0 {
                        hi = t;
                    } else {
                        lo = t;
                    }
                    let newton = t - f / self.rate_at(t);
                    t = if newton > lo && newton < hi {
                        newton
                    } else {
                        (lo + hi) / 2.0
                    };
                }
                t
            }
        }
    }
}

/// Writes a rate so that it parses back to the same f64.
fn r(x: f64) -> String {
    format!("{x}")
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = super::fmt_duration;
        match self {
            Profile::Steps(v) => {
                let parts: Vec<String> = v
                    .iter()
                    .map(|(x, l)| format!("{}@{}", r(*x), d(*l)))
                    .collect();
                write!(f, "steps:{}", parts.join(","))
            }
            Profile::Ramp { from, to, over_ns } => {
                write!(f, "ramp:{}..{} over {}", r(*from), r(*to), d(*over_ns))
            }
            Profile::Sine {
                mean,
                amp,
                period_ns,
            } => write!(
                f,
                "sine:mean={},amp={},period={}",
                r(*mean),
                r(*amp),
                d(*period_ns)
            ),
        }
    }
}

/// The non-homogeneous Poisson process of a [`Profile`].
pub struct ProfileProcess {
    profile: Profile,
    /// Expected-count position of the last arrival.
    u: f64,
    rng: Xoshiro256PlusPlus,
}

impl ProfileProcess {
    /// Arrivals following `profile`, seeded.
    pub fn new(profile: Profile, seed: u64) -> Self {
        ProfileProcess {
            profile,
            u: 0.0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
}

impl ArrivalProcess for ProfileProcess {
    fn next_offset_ns(&mut self) -> u64 {
        use rand::Rng;
        self.u += self.rng.sample::<f64, _>(rand_distr::Exp1);
        let t = self.profile.inv(self.u) * 1e9;
        if t >= END as f64 {
            END
        } else {
            t.round() as u64
        }
    }
    fn rate(&self) -> f64 {
        self.profile.mean_rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Profile {
        let (k, a) = s.split_once(':').unwrap();
        Profile::parse(k, a).unwrap().unwrap()
    }

    #[test]
    fn inverse_undoes_cumulative() {
        for s in [
            "steps:1000@10s,3000@10s,500@5s",
            "ramp:1000..5000 over 60s",
            "ramp:5000..1000 over 60s",
            "ramp:2000..2000 over 1s",
            "sine:mean=3000,amp=1000,period=30s",
            "sine:mean=3000,amp=2999,period=1s",
        ] {
            let pr = p(s);
            for t in [0.0, 0.001, 1.0, 7.3, 10.0, 29.9, 61.0, 123.4] {
                let y = pr.cum(t);
                let back = pr.inv(y);
                assert!((back - t).abs() < 1e-6, "{s}: t {t} → Λ {y} → {back}");
            }
            assert_eq!(p(&pr.to_string()), pr, "{s} round trip");
        }
        let st = p("steps:1000@10s,3000@10s");
        assert!((st.mean_rate() - 2000.0).abs() < 1e-9);
        assert!((st.cum(15.0) - 25_000.0).abs() < 1e-6);
        assert!((p("ramp:1000..5000 over 60s").mean_rate() - 3000.0).abs() < 1e-9);
        assert!((p("sine:mean=3000,amp=1000,period=30s").mean_rate() - 3000.0).abs() < 1e-6);
        assert_eq!(st.rate_at(12.0), 3000.0);
        assert_eq!(st.rate_at(21.0), 1000.0, "repeats after a cycle");
    }

    #[test]
    fn refuses_rates_that_reach_zero() {
        for (k, a) in [
            ("steps", "1000@10s,0@1s"),
            ("steps", "-5@1s"),
            ("ramp", "0..100 over 1s"),
            ("sine", "mean=100,amp=100,period=1s"),
            ("steps", "1000@0s"),
            ("steps", "1000"),
            ("ramp", "1..2"),
            ("sine", "mean=100,period=1s"),
        ] {
            let e = Profile::parse(k, a).unwrap().unwrap_err();
            assert!(!e.to_string().is_empty(), "{k}:{a}");
        }
        let e = Profile::parse("sine", "mean=100,amp=150,period=1s")
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("> 0"), "{e}");
    }

    #[test]
    fn counts_follow_the_profile() {
        let mut pp = ProfileProcess::new(p("steps:1000@1s,4000@1s"), 3);
        let mut counts = [0u32; 4];
        loop {
            let t = pp.next_offset_ns();
            if t >= 4_000_000_000 {
                break;
            }
            counts[(t / 1_000_000_000) as usize] += 1;
        }
        // Poisson counts: ±5σ of 1000 is ±160, of 4000 is ±320.
        for (c, want) in counts.iter().zip([1000.0, 4000.0, 1000.0, 4000.0]) {
            assert!(
                (*c as f64 - want).abs() < 5.0 * f64::sqrt(want),
                "{counts:?}"
            );
        }
    }
}
