//! Queueing "ideal" baselines: closed forms and an exact FIFO replay.
//!
//! The replay is the sharpest check of a harness: feed it the *same*
//! intended arrival times and the *same* measured service times a run saw,
//! and it returns the sojourn times an ideal FIFO G/G/n server would have
//! given. Measured − replayed is then the harness's own error, free of the
//! sampling noise that makes a comparison with the closed form fuzzy
//! (≈ ±1–2 % on p99 at 150 k requests, docs/hosts.md).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Sojourn times of FIFO with `servers` identical servers: request i
/// arrives at `arrivals[i]` (non-decreasing) and needs `services[i]`.
pub fn fifo_replay(arrivals: &[u64], services: &[u64], servers: usize) -> Vec<u64> {
    assert_eq!(arrivals.len(), services.len());
    let mut free: BinaryHeap<Reverse<u64>> = (0..servers.max(1)).map(|_| Reverse(0)).collect();
    arrivals
        .iter()
        .zip(services)
        .map(|(&a, &s)| {
            let Reverse(f) = free.pop().expect("servers ≥ 1");
            let start = a.max(f);
            free.push(Reverse(start + s));
            start + s - a
        })
        .collect()
}

/// M/M/1 mean sojourn (ns) at arrival rate `lambda` (/s) and mean service `s_ns`.
pub fn mm1_mean(lambda: f64, s_ns: f64) -> f64 {
    let mu = 1e9 / s_ns;
    1e9 / (mu - lambda)
}

/// M/M/1 sojourn quantile q: sojourn is exponential with rate μ − λ.
pub fn mm1_quantile(lambda: f64, s_ns: f64, q: f64) -> f64 {
    let mu = 1e9 / s_ns;
    -(1.0 - q).ln() / (mu - lambda) * 1e9
}

/// M/G/1 mean sojourn by Pollaczek–Khinchine: S + λE[S²] / (2(1−ρ)).
pub fn mg1_mean(lambda: f64, mean_ns: f64, second_moment_ns2: f64) -> f64 {
    let rho = lambda * mean_ns / 1e9;
    mean_ns + lambda / 1e9 * second_moment_ns2 / (2.0 * (1.0 - rho))
}

/// Erlang C: probability an arrival waits in M/M/c at offered load a = λ/μ.
pub fn erlang_c(c: usize, a: f64) -> f64 {
    let rho = a / c as f64;
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..c {
        term *= a / k as f64;
        sum += term;
    }
    let last = term * a / c as f64 / (1.0 - rho);
    last / (sum + last)
}

/// M/M/c mean sojourn (ns).
pub fn mmc_mean(c: usize, lambda: f64, s_ns: f64) -> f64 {
    let mu = 1e9 / s_ns;
    let a = lambda / mu;
    s_ns + erlang_c(c, a) / (c as f64 * mu - lambda) * 1e9
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
    use crate::arrival::{ArrivalProcess, Poisson};
    use crate::dist::Dist;
    use rand::SeedableRng;

    fn simulate(lambda: f64, svc: &Dist, servers: usize, n: usize, seed: u64) -> Vec<u64> {
        let mut p = Poisson::new(lambda, seed);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed + 1);
        let a: Vec<u64> = (0..n).map(|_| p.next_offset_ns()).collect();
        let s: Vec<u64> = (0..n).map(|_| svc.sample(&mut rng) as u64).collect();
        fifo_replay(&a, &s, servers)
    }

    #[test]
    fn replay_matches_closed_forms() {
        let n = 400_000;
        let mm1 = simulate(2500.0, &"exp:200us".parse().unwrap(), 1, n, 1);
        let mean = mm1.iter().sum::<u64>() as f64 / n as f64;
        assert!(
            (mean / mm1_mean(2500.0, 200e3) - 1.0).abs() < 0.03,
            "M/M/1 mean {mean}"
        );
        let mut s = mm1.clone();
        s.sort_unstable();
        let p99 = quantile(&s, 0.99) as f64;
        assert!(
            (p99 / mm1_quantile(2500.0, 200e3, 0.99) - 1.0).abs() < 0.04,
            "M/M/1 p99 {p99}"
        );

        let d: Dist = "fixed:200us".parse().unwrap();
        let md1 = simulate(2500.0, &d, 1, n, 2);
        let mean = md1.iter().sum::<u64>() as f64 / n as f64;
        let pk = mg1_mean(2500.0, d.mean(), d.second_moment());
        assert!((pk - 300e3).abs() < 1.0);
        assert!((mean / pk - 1.0).abs() < 0.03, "M/D/1 mean {mean} vs {pk}");

        let mm2 = simulate(8000.0, &"exp:200us".parse().unwrap(), 2, n, 3);
        let mean = mm2.iter().sum::<u64>() as f64 / n as f64;
        assert!(
            (mean / mmc_mean(2, 8000.0, 200e3) - 1.0).abs() < 0.04,
            "M/M/2 mean {mean}"
        );
    }

    #[test]
    fn closed_forms_known_values() {
        assert!((mm1_mean(2500.0, 200e3) - 400e3).abs() < 1e-6);
        assert!((erlang_c(1, 0.5) - 0.5).abs() < 1e-12);
        // M/M/2 at a = 1: C = 1/3.
        assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
        assert!((mmc_mean(1, 2500.0, 200e3) - mm1_mean(2500.0, 200e3)).abs() < 1e-6);
    }

    #[test]
    fn replay_edge_cases() {
        assert_eq!(fifo_replay(&[0, 0, 0], &[10, 10, 10], 1), vec![10, 20, 30]);
        assert_eq!(fifo_replay(&[0, 0, 0], &[10, 10, 10], 3), vec![10, 10, 10]);
        assert_eq!(fifo_replay(&[0, 100], &[10, 10], 1), vec![10, 10]);
        assert_eq!(quantile(&[1, 2, 3, 4], 0.5), 2);
        assert_eq!(quantile(&[1, 2, 3, 4], 1.0), 4);
    }
}
