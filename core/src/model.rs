//! Queueing "ideal" baselines: closed forms and simulated G/G/n systems.
//!
//! Two uses. [`simulate`] draws arrivals from any [`ArrivalSpec`] and
//! service times from a distribution or from a run's measured histogram and
//! runs them through the exact engine of [`crate::sim`] (`taillab model`):
//! the ideal for a load before any run. The closed forms (M/M/1, M/G/1 by
//! Pollaczek–Khinchine, M/M/c by Erlang C) are the oracles the engine is
//! tested against. The replay of a run's *own* draws is in [`crate::ideal`].

use crate::arrival::{derive_seed, ArrivalSpec};
use crate::collector::MetricStats;
use crate::dist::Dist;
use crate::queue::{Discipline, Dispatch};
use crate::sim::{Job, Sim, SimConfig};
/// Nearest-rank quantile of a sorted sample (kept here for the model's callers).
pub use crate::stats::quantile;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::path::Path;

/// Sojourn times of FIFO with `servers` identical servers: request i
/// arrives at `arrivals[i]` (non-decreasing) and needs `services[i]`.
pub fn fifo_replay(arrivals: &[u64], services: &[u64], servers: usize) -> Vec<u64> {
    assert_eq!(arrivals.len(), services.len());
    let mut out = vec![0; arrivals.len()];
    let mut sim = Sim::new(SimConfig::fifo(servers.max(1)));
    for (i, (&arrival, &service)) in arrivals.iter().zip(services).enumerate() {
        let job = Job {
            id: i as u64,
            arrival,
            service,
            worker: None,
        };
        sim.push(job, &mut |d| out[d.id as usize] = d.sojourn());
    }
    out
}

/// Why a model cannot be built or run; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The offered load is at or over the servers' capacity.
    #[error("utilization {rho:.3} ≥ 1: the queue grows without bound, no steady state to model (lower the rate or add servers)")]
    Saturated {
        /// Offered load × mean service ÷ servers.
        rho: f64,
    },
    /// The arrival process cannot be built.
    #[error(transparent)]
    Arrival(#[from] crate::arrival::ArrivalError),
    /// The folder has no readable service-time histogram.
    #[error("{source} (give a run folder written by taillab run: it holds hist/service.hlog)")]
    NoService {
        /// Why it could not be read.
        source: crate::summary::ResultError,
    },
    /// The run's service-time histogram is empty.
    #[error("{}: {source}", dir.display())]
    Empty {
        /// The run folder.
        dir: std::path::PathBuf,
        /// The error.
        source: crate::empirical::EmptyHistogram,
    },
}

pub use crate::empirical::Empirical;

impl Empirical {
    /// The measured service times of a run folder (its `hist/service.hlog`).
    pub fn from_run(dir: &Path) -> Result<Self, ModelError> {
        let h = crate::experiment::read_hlog_total(dir, "service")
            .map_err(|source| ModelError::NoService { source })?;
        Self::from_hist(&h).map_err(|source| ModelError::Empty {
            dir: dir.to_path_buf(),
            source,
        })
    }
}

/// Where simulated service times come from.
#[derive(Debug, Clone)]
pub enum Service {
    /// A distribution (`exp:200us`, ...).
    Dist(Dist),
    /// A run's measured histogram.
    Empirical(Empirical),
}

impl Service {
    /// Mean service time, ns.
    pub fn mean(&self) -> f64 {
        match self {
            Service::Dist(d) => d.mean(),
            Service::Empirical(e) => e.mean(),
        }
    }

    /// One service time, ns.
    #[inline]
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match self {
            Service::Dist(d) => d.sample(rng) as u64,
            Service::Empirical(e) => e.sample(rng),
        }
    }
}

/// A simulated G/G/n system (`taillab model`).
#[derive(Debug, Clone)]
pub struct ModelSpec {
    /// Arrival process.
    pub arrival: ArrivalSpec,
    /// Mean arrival rate (/s).
    pub qps: f64,
    /// Service times.
    pub service: Service,
    /// Workers.
    pub servers: usize,
    /// Which waiting request goes next.
    pub discipline: Discipline,
    /// One queue or one per worker.
    pub dispatch: Dispatch,
    /// Simulated requests, warmup included.
    pub requests: u64,
    /// The first requests are not counted: the system starts empty.
    pub warmup: u64,
    /// Seeds arrivals, service times and the engine.
    pub seed: u64,
}

/// What [`simulate`] found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModelResult {
    /// Offered load × mean service ÷ servers.
    pub utilization: f64,
    /// Counted (post-warmup) requests.
    pub requests: u64,
    /// Sojourn statistics of the counted requests, ns.
    pub sojourn: MetricStats,
    /// The closed-form mean sojourn where one applies (Poisson arrivals).
    pub closed_form_mean: Option<f64>,
}

/// Runs `spec` through the exact engine.
pub fn simulate(spec: &ModelSpec) -> Result<ModelResult, ModelError> {
    let rho = spec.qps * spec.service.mean() / 1e9 / spec.servers as f64;
    if rho >= 1.0 {
        return Err(ModelError::Saturated { rho });
    }
    let mut arrivals = spec.arrival.build(spec.qps, derive_seed(spec.seed, 1))?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(spec.seed, 2));
    let mut sim = Sim::new(SimConfig {
        servers: spec.servers,
        discipline: spec.discipline,
        dispatch: spec.dispatch,
        seed: derive_seed(spec.seed, 6),
    });
    let mut hist = crate::ideal::new_hist();
    let mut sum = 0u128;
    let mut record = |d: crate::sim::Done| {
        if d.id >= spec.warmup {
            hist.saturating_record(d.sojourn());
            sum += d.sojourn() as u128;
        }
    };
    for id in 0..spec.requests {
        let arrival = arrivals.next_offset_ns();
        if arrival == crate::arrival::END {
            break;
        }
        let job = Job {
            id,
            arrival,
            service: spec.service.sample(&mut rng),
            worker: None,
        };
        sim.push(job, &mut record);
    }
    sim.finish(&mut record);
    let requests = hist.len();
    Ok(ModelResult {
        utilization: rho,
        requests,
        sojourn: MetricStats::from_hist(&hist, Some(sum)),
        closed_form_mean: closed_form_mean(spec),
    })
}

/// The mean sojourn queueing theory gives for `spec`, when it has one:
/// Poisson arrivals with one shared queue (M/G/1 by Pollaczek–Khinchine,
/// M/M/c by Erlang C) or random per-worker queues (each an M/G/1 at λ/c).
/// The mean does not depend on the order of service (FIFO, LIFO, random)
/// as long as that order ignores service times.
pub fn closed_form_mean(spec: &ModelSpec) -> Option<f64> {
    let Service::Dist(d) = &spec.service else {
        return None;
    };
    if spec.arrival != ArrivalSpec::Poisson {
        return None;
    }
    let c = spec.servers;
    match spec.dispatch {
        Dispatch::Shared if c == 1 => Some(mg1_mean(spec.qps, d.mean(), d.second_moment())),
        Dispatch::Shared if matches!(d, Dist::Exp { .. }) => Some(mmc_mean(c, spec.qps, d.mean())),
        Dispatch::PerWorker(crate::queue::Assign::Random) => {
            Some(mg1_mean(spec.qps / c as f64, d.mean(), d.second_moment()))
        }
        _ => None,
    }
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

/// M/G/1 mean sojourn by Pollaczek–Khinchine: S + λE\[S²\] / (2(1−ρ)).
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrival::{ArrivalProcess, Poisson};
    use crate::dist::Dist;
    use rand::SeedableRng;

    fn sim_fifo(lambda: f64, svc: &Dist, servers: usize, n: usize, seed: u64) -> Vec<u64> {
        let mut p = Poisson::new(lambda, seed);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed + 1);
        let a: Vec<u64> = (0..n).map(|_| p.next_offset_ns()).collect();
        let s: Vec<u64> = (0..n).map(|_| svc.sample(&mut rng) as u64).collect();
        fifo_replay(&a, &s, servers)
    }

    #[test]
    fn replay_matches_closed_forms() {
        let n = 400_000;
        let mm1 = sim_fifo(2500.0, &"exp:200us".parse().unwrap(), 1, n, 1);
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
        let md1 = sim_fifo(2500.0, &d, 1, n, 2);
        let mean = md1.iter().sum::<u64>() as f64 / n as f64;
        let pk = mg1_mean(2500.0, d.mean(), d.second_moment());
        assert!((pk - 300e3).abs() < 1.0);
        assert!((mean / pk - 1.0).abs() < 0.03, "M/D/1 mean {mean} vs {pk}");

        let mm2 = sim_fifo(8000.0, &"exp:200us".parse().unwrap(), 2, n, 3);
        let mean = mm2.iter().sum::<u64>() as f64 / n as f64;
        assert!(
            (mean / mmc_mean(2, 8000.0, 200e3) - 1.0).abs() < 0.04,
            "M/M/2 mean {mean}"
        );
    }

    fn spec(qps: f64, servers: usize, disc: Discipline, disp: Dispatch, seed: u64) -> ModelSpec {
        ModelSpec {
            arrival: ArrivalSpec::Poisson,
            qps,
            service: Service::Dist("exp:200us".parse().unwrap()),
            servers,
            discipline: disc,
            dispatch: disp,
            requests: 400_000,
            warmup: 20_000,
            seed,
        }
    }

    #[test]
    fn disciplines_against_theory() {
        use crate::queue::Assign;
        let sh = Dispatch::Shared;
        let fifo = simulate(&spec(3500.0, 1, Discipline::Fifo, sh, 1)).unwrap();
        let lifo = simulate(&spec(3500.0, 1, Discipline::Lifo, sh, 1)).unwrap();
        let rand = simulate(&spec(3500.0, 1, Discipline::Random, sh, 1)).unwrap();
        let th = mm1_mean(3500.0, 200e3);
        assert_eq!(
            fifo.closed_form_mean.map(|m| (m - th).abs() < 1e-6),
            Some(true)
        );
        // Same mean whatever the order (it ignores service times)...
        for (name, r) in [("fifo", &fifo), ("lifo", &lifo), ("random", &rand)] {
            assert!(
                (r.sojourn.mean / th - 1.0).abs() < 0.05,
                "{name} mean {}",
                r.sojourn.mean
            );
        }
        // ...but LIFO lets some requests wait through whole busy periods: a
        // longer tail (≈ 2× FIFO's p99.9 at ρ = 0.7), random order in between.
        let q = |r: &ModelResult| r.sojourn.p999 as f64;
        assert!(
            q(&lifo) > 1.5 * q(&fifo),
            "lifo p99.9 {} fifo {}",
            q(&lifo),
            q(&fifo)
        );
        assert!(
            q(&rand) > 1.1 * q(&fifo) && q(&rand) < q(&lifo),
            "random p99.9 {}",
            q(&rand)
        );
        assert!((fifo.sojourn.p99 as f64 / mm1_quantile(3500.0, 200e3, 0.99) - 1.0).abs() < 0.05);

        // Two workers with their own queues, random assignment: two M/M/1s at half the rate.
        let pw = simulate(&spec(
            5000.0,
            2,
            Discipline::Fifo,
            Dispatch::PerWorker(Assign::Random),
            2,
        ))
        .unwrap();
        let half = mm1_mean(2500.0, 200e3);
        assert!(
            (pw.sojourn.mean / half - 1.0).abs() < 0.05,
            "per-worker mean {}",
            pw.sojourn.mean
        );
        assert!((pw.sojourn.p99 as f64 / mm1_quantile(2500.0, 200e3, 0.99) - 1.0).abs() < 0.06);
        // A shared queue is better than both, round-robin better than random.
        let shared = simulate(&spec(5000.0, 2, Discipline::Fifo, sh, 2)).unwrap();
        let rr = simulate(&spec(
            5000.0,
            2,
            Discipline::Fifo,
            Dispatch::PerWorker(Assign::RoundRobin),
            2,
        ))
        .unwrap();
        assert!((shared.sojourn.mean / mmc_mean(2, 5000.0, 200e3) - 1.0).abs() < 0.05);
        assert!(shared.sojourn.mean < rr.sojourn.mean && rr.sojourn.mean < pw.sojourn.mean);
    }

    #[test]
    fn empirical_service_keeps_the_histogram() {
        let mut h = crate::ideal::new_hist();
        let d: Dist = "lognormal:200us,cv=1.5".parse().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(4);
        for _ in 0..200_000 {
            h.record(d.sample(&mut rng) as u64).unwrap();
        }
        let e = Empirical::from_hist(&h).unwrap();
        assert!((e.mean() / h.mean() - 1.0).abs() < 0.002);
        let mut h2 = crate::ideal::new_hist();
        for _ in 0..200_000 {
            h2.record(e.sample(&mut rng)).unwrap();
        }
        for q in [0.5, 0.9, 0.99] {
            let (a, b) = (
                h.value_at_quantile(q) as f64,
                h2.value_at_quantile(q) as f64,
            );
            assert!((a / b - 1.0).abs() < 0.03, "q{q}: {a} vs {b}");
        }
        assert!(Empirical::from_hist(&crate::ideal::new_hist()).is_err());
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
