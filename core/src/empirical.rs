//! Draws from a measured distribution: a histogram's buckets with their frequencies, a value
//! uniformly inside each (buckets are 0.1 % wide, so the draws keep the shape to that). The
//! models' service times "as measured" (`taillab model --service-from`, a fan-out run's model).

use hdrhistogram::Histogram;
use rand::Rng;

/// Service times drawn from a run's measured distribution: each draw picks
/// a histogram bucket with its frequency and a value uniformly inside it
/// (buckets are 0.1 % wide, so the draws keep the run's shape to that).
#[derive(Debug, Clone)]
pub struct Empirical {
    /// Bucket bounds (inclusive) and cumulative counts.
    buckets: Vec<(u64, u64)>,
    cum: Vec<u64>,
    mean: f64,
}

/// A histogram with no values: there is nothing to draw from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the service-time histogram is empty")]
pub struct EmptyHistogram;

impl Empirical {
    /// From a histogram of ns values.
    pub fn from_hist(h: &Histogram<u64>) -> Result<Self, EmptyHistogram> {
        let (mut buckets, mut cum, mut acc, mut sum) = (Vec::new(), Vec::new(), 0u64, 0f64);
        for v in h.iter_recorded() {
            let x = v.value_iterated_to();
            let lo = h.lowest_equivalent(x);
            let hi = h.highest_equivalent(x);
            acc += v.count_at_value();
            sum += v.count_at_value() as f64 * (lo as f64 + hi as f64) / 2.0;
            buckets.push((lo, hi));
            cum.push(acc);
        }
        if acc == 0 {
            return Err(EmptyHistogram);
        }
        Ok(Empirical {
            buckets,
            cum,
            mean: sum / acc as f64,
        })
    }

    /// Mean of the draws, ns.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// One draw, ns.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        let total = *self.cum.last().expect("non-empty");
        let u = rng.gen_range(0..total);
        let i = self.cum.partition_point(|&c| c <= u);
        let (lo, hi) = self.buckets[i];
        if hi > lo {
            rng.gen_range(lo..=hi)
        } else {
            lo
        }
    }
}
