//! `speed=F1/F2/...,every=D`: the host's speed of the moment.
//!
//! Real work on a shared host runs at the memory system's speed of the moment, which moves
//! by tens of percent for seconds at a time (other guests' traffic); a synthetic workload
//! that spins on the clock does not feel it. The queue does: a stretch at 1.2× the mean
//! service pushes a 70 % load to 84 %, and the waiting time is convex in the load, so an
//! app whose speed wanders queues more than a steady one of the same mean service.
//! `taillab fit --pooled` measures the wander from the app's records (its mean service per
//! stretch of wall time) and writes it as a set of factors; here every stretch of `every`
//! of wall time, counted from the server's start, multiplies the service of the requests
//! that start in it by one factor. The factors are dealt like cards: each cycle through
//! all of them in an order drawn from the run's seed, so a run of a few seconds meets them
//! all in their proportions instead of a lucky or unlucky handful. All workers share the
//! stretch (it is the host's).

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::fmt;
use taillab_core::dist::{fmt_ns, parse_duration_ns};

const FORM: &str =
    "write it as F1/F2/...,every=D with factors > 0, e.g. 0.8/1/1.2,every=500ms (or none)";

/// The factors and the length of a stretch.
#[derive(Debug, Clone, PartialEq)]
pub struct Speed {
    /// One factor per stretch, dealt in shuffled cycles.
    pub factors: Vec<f64>,
    /// Length of a stretch in ns.
    pub every_ns: f64,
}

impl Speed {
    /// Parses `F1/F2/...,every=D` (`none`: no speed changes).
    pub fn parse(v: &str) -> Result<Option<Speed>, String> {
        if v == "none" {
            return Ok(None);
        }
        let (fs, every) = v
            .split_once(',')
            .ok_or_else(|| format!("no every= after the factors; {FORM}"))?;
        let factors = fs
            .split('/')
            .map(|f| {
                f.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .ok_or_else(|| format!("`{f}` is not a factor > 0; {FORM}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let d = every
            .trim()
            .strip_prefix("every=")
            .ok_or_else(|| format!("`{every}` is not every=DURATION; {FORM}"))?;
        let every_ns = parse_duration_ns(d).map_err(|e| format!("{e}; {FORM}"))?;
        if every_ns <= 0.0 {
            return Err(format!("every must be > 0; {FORM}"));
        }
        Ok(Some(Speed { factors, every_ns }))
    }

    /// The mean factor (what the mean service is multiplied by over whole cycles).
    pub fn mean(&self) -> f64 {
        self.factors.iter().sum::<f64>() / self.factors.len() as f64
    }

    /// The order in which cycle `cycle` of a run seeded `seed` deals the factors.
    fn order(&self, seed: u64, cycle: u64) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.factors.len()).collect();
        let mut rng =
            Xoshiro256PlusPlus::seed_from_u64(taillab_core::arrival::derive_seed(seed, cycle));
        order.shuffle(&mut rng);
        order
    }
}

/// One worker's view of the deal: the current cycle's order, drawn once per cycle rather
/// than per request (every worker draws the same order from the run's seed).
#[derive(Debug, Default)]
pub struct Dealer {
    cycle: Option<u64>,
    order: Vec<usize>,
}

impl Dealer {
    /// The factor of the stretch `elapsed_ns` after the origin, for a run seeded `seed`.
    pub fn factor(&mut self, speed: &Speed, seed: u64, elapsed_ns: u64) -> f64 {
        let k = (elapsed_ns as f64 / speed.every_ns) as u64;
        let n = speed.factors.len() as u64;
        let (cycle, at) = (k / n, (k % n) as usize);
        if self.cycle != Some(cycle) {
            self.order = speed.order(seed, cycle);
            self.cycle = Some(cycle);
        }
        speed.factors[self.order[at]]
    }
}

impl fmt::Display for Speed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fs: Vec<String> = self.factors.iter().map(|x| format!("{x}")).collect();
        write!(f, "{},every={}", fs.join("/"), fmt_ns(self.every_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let s = Speed::parse("0.8/1/1.2,every=500ms").unwrap().unwrap();
        assert_eq!(s.factors, vec![0.8, 1.0, 1.2]);
        assert_eq!(s.every_ns, 5e8);
        assert!((s.mean() - 1.0).abs() < 1e-12);
        assert_eq!(Speed::parse("none").unwrap(), None);
        for bad in [
            "0.8/1.2",
            "0.8/x,every=1s",
            "0/1,every=1s",
            "1,every=0s",
            "1,per=1s",
        ] {
            let e = Speed::parse(bad).unwrap_err();
            assert!(e.contains("every="), "{bad}: {e}");
        }
        let again = Speed::parse(&s.to_string()).unwrap().unwrap();
        assert_eq!(again, s);
    }

    #[test]
    fn every_cycle_deals_each_factor_once() {
        let s = Speed::parse("0.7/0.9/1/1.1/1.3,every=1ms")
            .unwrap()
            .unwrap();
        let mut d = Dealer::default();
        for cycle in 0..20u64 {
            let mut got: Vec<f64> = (0..5)
                .map(|i| d.factor(&s, 42, (cycle * 5 + i) * 1_000_000 + 500_000))
                .collect();
            got.sort_by(f64::total_cmp);
            assert_eq!(got, s.factors, "cycle {cycle}");
        }
        // Within a stretch the factor holds; the order differs between cycles and seeds,
        // and a worker that starts late (a fresh dealer) meets the same order.
        assert_eq!(
            d.factor(&s, 42, 0),
            Dealer::default().factor(&s, 42, 999_999)
        );
        let order = |seed| {
            let mut d = Dealer::default();
            (0..50)
                .map(|k| d.factor(&s, seed, k * 1_000_000))
                .collect::<Vec<_>>()
        };
        assert_eq!(Dealer::default().factor(&s, 42, 37_000_000), order(42)[37]);
        assert_ne!(order(42), order(43));
        let first: Vec<f64> = order(42)[..5].to_vec();
        assert!((5..50).step_by(5).any(|c| order(42)[c..c + 5] != first[..]));
    }
}
