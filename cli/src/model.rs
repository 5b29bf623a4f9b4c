//! `taillab model`: the queueing "ideal" for a load, by exact FIFO replay of
//! simulated draws (any service distribution, n servers), beside the closed
//! forms where they exist.

use anyhow::Context;
use clap::Args;
use taillab_core::arrival::{derive_seed, ArrivalSpec};
use taillab_core::dist::{fmt_ns, Dist};
use taillab_core::model;

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Arrival rate (requests/s).
    #[arg(long)]
    qps: f64,
    /// Servers (worker threads).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Service-time distribution (synth's grammar), e.g. exp:200us.
    #[arg(long)]
    service: String,
    /// Arrival process: poisson or fixed.
    #[arg(long, default_value = "poisson")]
    arrival: String,
    /// Simulated requests.
    #[arg(long, default_value_t = 1_000_000)]
    requests: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: ModelArgs) -> anyhow::Result<i32> {
    use rand::SeedableRng;
    let svc: Dist = a.service.parse().context("--service")?;
    let arrival: ArrivalSpec = a.arrival.parse().map_err(|e: String| anyhow::anyhow!("--arrival: {e}"))?;
    anyhow::ensure!(a.qps.is_finite() && a.qps > 0.0, "--qps must be a positive number, got {}", a.qps);
    anyhow::ensure!(a.threads >= 1, "--threads must be at least 1");
    anyhow::ensure!(a.requests >= 1000, "--requests must be at least 1000 for stable quantiles");
    let rho = a.qps * svc.mean() / 1e9 / a.threads as f64;
    anyhow::ensure!(rho < 1.0, "utilization {rho:.3} ≥ 1: the queue grows without bound, no steady state to model");
    let mut p = arrival.build(a.qps, derive_seed(a.seed, 1));
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(derive_seed(a.seed, 2));
    let arr: Vec<u64> = (0..a.requests).map(|_| p.next_offset_ns()).collect();
    let s: Vec<u64> = (0..a.requests).map(|_| svc.sample(&mut rng) as u64).collect();
    // Drop the first 5 % as warmup: the replay starts empty.
    let skip = a.requests / 20;
    let mut soj = model::fifo_replay(&arr, &s, a.threads)[skip..].to_vec();
    let mean = soj.iter().sum::<u64>() as f64 / soj.len() as f64;
    soj.sort_unstable();
    let q = |x: f64| model::quantile(&soj, x) as f64;
    let closed = match (arrival, a.threads) {
        (ArrivalSpec::Poisson, 1) => Some(model::mg1_mean(a.qps, svc.mean(), svc.second_moment())),
        (ArrivalSpec::Poisson, c) if matches!(svc, Dist::Exp { .. }) => Some(model::mmc_mean(c, a.qps, svc.mean())),
        _ => None,
    };
    let v = serde_json::json!({
        "utilization": rho, "requests": soj.len(), "mean": mean,
        "p50": q(0.5), "p90": q(0.9), "p95": q(0.95), "p99": q(0.99), "p999": q(0.999),
        "closed_form_mean": closed,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!(
            "ideal FIFO {}/{}/{} at utilization {:.3} ({} simulated requests)",
            if arrival == ArrivalSpec::Poisson { "M" } else { "D" },
            match svc { Dist::Exp { .. } => "M", Dist::Fixed(_) => "D", _ => "G" },
            a.threads, rho, soj.len()
        );
        println!("sojourn mean {}  p50 {}  p90 {}  p95 {}  p99 {}  p99.9 {}",
            fmt_ns(mean), fmt_ns(q(0.5)), fmt_ns(q(0.9)), fmt_ns(q(0.95)), fmt_ns(q(0.99)), fmt_ns(q(0.999)));
        if let Some(c) = closed {
            println!("closed-form mean {} (replay {:+.2}%)", fmt_ns(c), (mean / c - 1.0) * 100.0);
        }
    }
    Ok(0)
}
