//! One arrival stream produced by several producers at once: share `j` of `m`.
//!
//! A load that one thread cannot release on time (a TCP client's senders, and in time the
//! integrated harness's producers) is split into `m` shares, each drawn by its own producer
//! with nothing shared per request, such that their union is exactly the configured process:
//!
//! - **Poisson** (the default): share `j` is an independent Poisson stream at `rate / m` with a
//!   seed of its own. The superposition of independent Poisson streams is a Poisson stream of
//!   the summed rate, so the union has exactly the asked-for law, and no share draws another's
//!   arrivals. (The arrivals are a different sample than one producer's: `m = 1` is the run's
//!   own stream, unchanged.)
//! - **every other process** (fixed, gap distributions, MMPP, traces, rate profiles): a
//!   superposition of `m` copies would change its law (`m` fixed streams are not one fixed
//!   stream), so every share draws the whole stream from the run's own seed and keeps every
//!   `m`-th arrival, from the `j`-th on ([`Dealt`]). The union is then the very sequence one
//!   producer would draw, in order; each share pays `m` cheap draws per arrival it keeps.
//!
//! Requests are dealt the same way for phase bounds: a share of the first `n` requests is
//! [`Share::requests`] of them, so the shares' warmups and measured phases add up to the run's.

use super::{ArrivalError, ArrivalProcess, ArrivalSpec, END};

/// Share `j` (from 0) of `m` producers of one arrival stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// This producer, `0..m`.
    pub j: usize,
    /// Producers in all (≥ 1).
    pub m: usize,
}

impl Share {
    /// The whole stream (one producer).
    pub const WHOLE: Share = Share { j: 0, m: 1 };

    /// Share `j` of `m`; `None` unless `j < m`.
    pub fn new(j: usize, m: usize) -> Option<Share> {
        (j < m).then_some(Share { j, m })
    }

    /// How many of the stream's first `n` requests are this share's: those whose index `i`
    /// has `i mod m = j` (the first `n mod m` shares take one more). The shares' counts add
    /// up to `n`.
    pub fn requests(self, n: u64) -> u64 {
        let m = self.m as u64;
        n / m + u64::from((self.j as u64) < n % m)
    }

    /// The index, in the whole stream, of this share's `k`-th request (from 0) when the
    /// stream is dealt ([`Dealt`]); for independent Poisson shares a unique id with the same
    /// interleaving.
    pub fn global(self, k: u64) -> u64 {
        k * self.m as u64 + self.j as u64
    }
}

/// Every `m`-th arrival of `inner`, from the `j`-th on: one share of a stream dealt in order.
pub struct Dealt {
    inner: Box<dyn ArrivalProcess>,
    share: Share,
    /// The first call skips `j` arrivals, later calls `m − 1`.
    started: bool,
}

impl Dealt {
    /// Share `share` of `inner`'s arrivals.
    pub fn new(inner: Box<dyn ArrivalProcess>, share: Share) -> Self {
        Dealt {
            inner,
            share,
            started: false,
        }
    }
}

impl ArrivalProcess for Dealt {
    fn next_offset_ns(&mut self) -> u64 {
        let skip = if self.started {
            self.share.m - 1
        } else {
            self.share.j
        };
        self.started = true;
        for _ in 0..skip {
            if self.inner.next_offset_ns() == END {
                return END;
            }
        }
        self.inner.next_offset_ns()
    }

    fn rate(&self) -> f64 {
        self.inner.rate() / self.share.m as f64
    }
}

impl ArrivalSpec {
    /// Share `share` of this process at the whole stream's mean `rate` requests/s and seed
    /// `seed` (see the module docs): an independent Poisson stream at `rate / m` for Poisson,
    /// the whole stream dealt in order for every other process. `Share::WHOLE` builds the
    /// process itself ([`ArrivalSpec::build`]).
    pub fn build_share(
        &self,
        rate: f64,
        seed: u64,
        share: Share,
    ) -> Result<Box<dyn ArrivalProcess>, ArrivalError> {
        if share.m == 1 {
            return self.build(rate, seed);
        }
        match self {
            ArrivalSpec::Poisson => self.build(
                rate / share.m as f64,
                super::derive_seed(seed, 0x5EED_0000 + share.j as u64),
            ),
            _ => Ok(Box::new(Dealt::new(self.build(rate, seed)?, share))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(p: &mut dyn ArrivalProcess, n: usize) -> Vec<u64> {
        (0..n).map(|_| p.next_offset_ns()).collect()
    }

    /// The shares' arrivals merged in time order.
    fn merged(spec: &ArrivalSpec, rate: f64, m: usize, each: usize) -> Vec<u64> {
        let mut all: Vec<u64> = (0..m)
            .flat_map(|j| {
                let mut p = spec
                    .build_share(rate, 7, Share::new(j, m).unwrap())
                    .unwrap();
                offsets(p.as_mut(), each)
            })
            .collect();
        all.sort_unstable();
        all
    }

    #[test]
    fn counts_of_the_first_n_requests_add_up() {
        for m in 1..6 {
            for n in [0u64, 1, 7, 100, 101] {
                let sum: u64 = (0..m).map(|j| Share::new(j, m).unwrap().requests(n)).sum();
                assert_eq!(sum, n, "m {m} n {n}");
            }
        }
        assert_eq!(Share::new(2, 3).unwrap().requests(8), 2); // indexes 2, 5
        assert_eq!(Share::new(1, 3).unwrap().requests(8), 3); // 1, 4, 7
        assert!(Share::new(3, 3).is_none());
    }

    #[test]
    fn a_dealt_stream_is_the_whole_stream_in_order() {
        // Fixed, lognormal, MMPP and a profile: the shares' union is the very sequence.
        for s in [
            "fixed",
            "lognormal:cv=2",
            "mmpp:on=5ms,off=20ms,ratio=8",
            "steps:1000@1s,3000@1s",
        ] {
            let spec: ArrivalSpec = s.parse().unwrap();
            let rate = spec.own_rate().unwrap_or(2000.0);
            let whole = offsets(spec.build(rate, 7).unwrap().as_mut(), 3000);
            for m in [2, 3] {
                let got = merged(&spec, rate, m, 3000 / m);
                assert_eq!(got, whole, "{s}, {m} shares");
                // And share j holds exactly the indexes j, j + m, ...
                let mut p = spec
                    .build_share(rate, 7, Share::new(1, m).unwrap())
                    .unwrap();
                let mine = offsets(p.as_mut(), 10);
                let want: Vec<u64> = (0..10).map(|k| whole[k * m + 1]).collect();
                assert_eq!(mine, want, "{s}, share 1 of {m}");
            }
        }
    }

    #[test]
    fn poisson_shares_superpose_to_a_poisson_stream_of_the_whole_rate() {
        let spec = ArrivalSpec::Poisson;
        let (rate, m, each) = (10_000.0, 4, 25_000);
        let t = merged(&spec, rate, m, each);
        // Only up to the earliest share's end is the superposition complete.
        let end = (0..m)
            .map(|j| {
                let mut p = spec
                    .build_share(rate, 7, Share::new(j, m).unwrap())
                    .unwrap();
                *offsets(p.as_mut(), each).last().unwrap()
            })
            .min()
            .unwrap();
        let t: Vec<u64> = t.into_iter().filter(|&x| x <= end).collect();
        let achieved = t.len() as f64 / (end as f64 / 1e9);
        // 90 000+ arrivals: the rate's standard error is ~0.3 %; 2 % catches a share at the
        // wrong rate (each at rate instead of rate / m would be 4×).
        assert!((achieved / rate - 1.0).abs() < 0.02, "rate {achieved}");
        let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let (d, p) = crate::arrival::ks_exponential(&gaps, 1e9 / rate);
        // Merged Erlang-like or fixed gaps fail this by far (D ≈ 0.1+); a true Poisson
        // stream passes at the 1 % level nearly always.
        assert!(p > 0.01, "KS D {d} p {p}");
        // Different shares draw different streams (seeded apart).
        let a = offsets(
            spec.build_share(rate, 7, Share::new(0, 2).unwrap())
                .unwrap()
                .as_mut(),
            5,
        );
        let b = offsets(
            spec.build_share(rate, 7, Share::new(1, 2).unwrap())
                .unwrap()
                .as_mut(),
            5,
        );
        assert_ne!(a, b);
    }

    #[test]
    fn the_whole_share_is_the_process_itself() {
        let spec = ArrivalSpec::Poisson;
        let a = offsets(spec.build(3000.0, 9).unwrap().as_mut(), 100);
        let b = offsets(
            spec.build_share(3000.0, 9, Share::WHOLE).unwrap().as_mut(),
            100,
        );
        assert_eq!(a, b);
    }
}
