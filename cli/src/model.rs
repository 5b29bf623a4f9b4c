//! `taillab model`: the queueing "ideal" for a load, by exact simulation of
//! a G/G/n system (any arrival process, service times from a distribution
//! or from a run's measured histogram, n servers, FIFO/LIFO/random order,
//! shared or per-worker queues) beside the closed forms where they exist;
//! or, with `--from`, the replay of a past run's own arrivals and service
//! times under other settings ("what if it had 4 workers?").

use anyhow::{bail, Context};
use clap::Args;
use rand::SeedableRng;
use std::path::PathBuf;
use taillab_core::arrival::ArrivalSpec;
use taillab_core::collector::MetricStats;
use taillab_core::dist::{fmt_ns, Dist};
use taillab_core::fanout::{FanoutSpec, FanoutWait};
use taillab_core::ideal::{self, IdealConfig};
use taillab_core::model::{self, Empirical, ModelSpec, Service};
use taillab_core::queue::{Discipline, Dispatch};
use taillab_core::sim::SimConfig;
use taillab_core::Summary;

#[derive(Args, Debug)]
pub struct ModelArgs {
    /// Arrival rate (requests/s). With --from: replay the run's arrivals
    /// stretched or squeezed to this mean rate.
    #[arg(long)]
    qps: Option<f64>,
    /// Servers (worker threads) [default: 1, or the run's with --from].
    #[arg(long)]
    threads: Option<usize>,
    /// Service-time distribution (synth's grammar), e.g. exp:200us.
    #[arg(long, conflicts_with = "service_from")]
    service: Option<String>,
    /// Draw service times from a run's measured histogram (RUN_DIR/hist/service.hlog).
    #[arg(long, value_name = "RUN_DIR")]
    service_from: Option<PathBuf>,
    /// Arrival process: poisson, fixed, lognormal:cv=2, gamma:cv=0.5,
    /// pareto:alpha=1.5, mmpp:on=50ms,off=200ms,ratio=8, trace:FILE,
    /// steps:1000@10s,3000@10s, ramp:1000..5000 over 60s,
    /// sine:mean=3000,amp=1000,period=30s.
    #[arg(long, default_value = "poisson")]
    arrival: String,
    /// Queue discipline: fifo, lifo or random [default: fifo, or the run's].
    #[arg(long)]
    discipline: Option<String>,
    /// shared, per-worker (random worker), per-worker:round-robin [default: shared, or the run's].
    #[arg(long)]
    dispatch: Option<String>,
    /// Replay this run's own arrivals and measured service times (its
    /// requests.csv) under the settings given here.
    #[arg(long, value_name = "RUN_DIR", conflicts_with_all = ["service", "service_from"])]
    from: Option<PathBuf>,
    /// Simulated requests (the first 5 % are warmup).
    #[arg(long, default_value_t = 1_000_000)]
    requests: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Split each request over N leaves (each its own server of --threads workers and its own
    /// queue) and model the whole request's latency (docs/fanout.md).
    #[arg(long, value_name = "N")]
    fanout: Option<usize>,
    /// Replicas of each leaf (for --hedge and --tied).
    #[arg(long, value_name = "R", default_value_t = 1)]
    replicas: usize,
    /// A request is answered by all its leaves or the first K: all, k=K.
    #[arg(long, value_name = "WAIT", default_value = "all")]
    fanout_wait: String,
    /// Send a copy to another replica after a delay without an answer: after=2ms, or after=p95
    /// (the running 95th percentile of a leaf's latency).
    #[arg(long, value_name = "HEDGE", default_value = "none")]
    hedge: String,
    /// Send each sub-request to two replicas at once; the first to start cancels the other.
    #[arg(long)]
    tied: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn parse<T: std::str::FromStr<Err = taillab_core::ValueError>>(
    flag: &str,
    v: &str,
) -> anyhow::Result<T> {
    v.parse::<T>().map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

/// The queueing system the flags describe, falling back to `run`'s settings.
fn sim_config(a: &ModelArgs, run: Option<&Summary>) -> anyhow::Result<SimConfig> {
    let threads = a.threads.or(run.map(|s| s.threads)).unwrap_or(1);
    if !(1..=4096).contains(&threads) {
        bail!("--threads must be in 1..=4096, got {threads}");
    }
    let discipline = match (&a.discipline, run) {
        (Some(d), _) => parse::<Discipline>("discipline", d)?,
        (None, Some(s)) => parse::<Discipline>("discipline", &s.discipline)?,
        (None, None) => Discipline::Fifo,
    };
    let dispatch = match (&a.dispatch, run) {
        (Some(d), _) => parse::<Dispatch>("dispatch", d)?,
        (None, Some(s)) => parse::<Dispatch>("dispatch", &s.dispatch)?,
        (None, None) => Dispatch::Shared,
    };
    Ok(SimConfig {
        servers: threads,
        discipline,
        dispatch,
        seed: taillab_core::arrival::derive_seed(a.seed, 6),
    })
}

pub fn run(a: ModelArgs) -> anyhow::Result<i32> {
    let fan = fanout_spec(&a)?;
    match (&a.from, fan) {
        (Some(_), Some(_)) => {
            bail!("--fanout models a load (--qps and --service or --service-from): drop --from")
        }
        (Some(dir), None) => replay_run(&a, dir),
        (None, Some(f)) => simulate_fanout(&a, &f),
        (None, None) => simulate(&a),
    }
}

/// The fan-out the flags describe, if any (errors name the flag).
fn fanout_spec(a: &ModelArgs) -> anyhow::Result<Option<FanoutSpec>> {
    let spec = FanoutSpec {
        leaves: a.fanout.unwrap_or(1),
        replicas: a.replicas,
        wait: parse("fanout-wait", &a.fanout_wait)?,
        hedge: parse("hedge", &a.hedge)?,
        tied: a.tied,
    };
    if a.fanout.is_none() && !spec.is_on() && spec.wait == FanoutWait::All {
        return Ok(None);
    }
    spec.validate().map_err(anyhow::Error::msg)?;
    Ok(Some(spec))
}

/// `taillab model --fanout N …`: the fan-out model of [`taillab_core::fanout`] for a load.
fn simulate_fanout(a: &ModelArgs, f: &FanoutSpec) -> anyhow::Result<i32> {
    let (arrival, qps, service) = load_of(a)?;
    let sim = sim_config(a, None)?;
    let rho = qps * service.mean() / 1e9 / sim.servers as f64;
    if rho >= 1.0 {
        bail!("each leaf's utilization is {rho:.3} ≥ 1 (every leaf sees every request): lower --qps or add --threads");
    }
    let mut arr = arrival
        .build(qps, taillab_core::arrival::derive_seed(a.seed, 1))
        .map_err(|e| anyhow::anyhow!("--arrival: {e}"))?;
    // A fan-out request costs N sub-requests: fewer requests keep the model quick.
    let n = (a.requests / f.leaves as u64).max(20_000);
    let times = (0..n)
        .map(|_| arr.next_offset_ns())
        .take_while(|&t| t != taillab_core::arrival::END);
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(
        taillab_core::arrival::derive_seed(a.seed, 2),
    );
    let mut draw = || service.sample(&mut rng);
    let h = taillab_core::fanout::simulate(f, times, &mut draw, sim.servers, n / 20);
    let st = h.stats();
    let theory = 1.0 - 0.99f64.powi(f.leaves as i32);
    if a.json {
        let mut v = serde_json::to_value(&st)?;
        v["qps"] = serde_json::json!(qps);
        v["leaves"] = serde_json::json!(f.leaves);
        v["replicas"] = serde_json::json!(f.replicas);
        v["wait"] = serde_json::json!(f.wait.to_string());
        v["hedge"] = serde_json::json!(f.hedge.to_string());
        v["tied"] = serde_json::json!(f.tied);
        v["leaf_utilization"] = serde_json::json!(rho);
        v["above_leaf_p99_independent"] = serde_json::json!(theory);
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    println!(
        "fan-out over {} leaves × {} replica(s), {} worker(s) each, answered by {}, hedge {}{}: {} requests at {qps:.0}/s ({arrival}), leaf utilization {rho:.3}",
        f.leaves,
        f.replicas,
        sim.servers,
        f.wait,
        f.hedge,
        if f.tied { ", tied" } else { "" },
        st.requests
    );
    println!("request  {}", stats_line(&st.e2e));
    println!("leaf     {}", stats_line(&st.leaf));
    println!(
        "above the leaf's p99: {:.1} % of requests (independent leaves, no queueing: 1 − 0.99^{} = {:.1} %)",
        st.above_leaf_p99 * 100.0,
        f.leaves,
        theory * 100.0
    );
    println!(
        "copies per sub-request: {:.3} sent, {:.3} served, {:.3} cancelled",
        st.sent_per_sub, st.served_per_sub, st.cancelled_per_sub
    );
    Ok(0)
}

/// The arrival process, rate and service times the flags give.
fn load_of(a: &ModelArgs) -> anyhow::Result<(ArrivalSpec, f64, Service)> {
    let arrival: ArrivalSpec = parse("arrival", &a.arrival)?;
    let qps = match (a.qps, arrival.own_rate()) {
        (Some(q), Some(r)) if (q / r - 1.0).abs() > 1e-6 => {
            bail!("--qps {q} does not match `{arrival}`, which sets its own mean rate {r}/s: drop --qps")
        }
        (Some(q), _) => q,
        (None, Some(r)) => r,
        (None, None) => bail!("--qps is needed (or --from RUN_DIR to replay a run)"),
    };
    if !(qps.is_finite() && qps > 0.0) {
        bail!("--qps must be a positive number, got {qps}");
    }
    if a.requests < 1000 {
        bail!("--requests must be at least 1000 for stable quantiles");
    }
    let service = match (&a.service, &a.service_from) {
        (Some(s), None) => Service::Dist(s.parse::<Dist>().context("--service")?),
        (None, Some(dir)) => {
            Service::Empirical(Empirical::from_run(dir).map_err(anyhow::Error::msg)?)
        }
        _ => bail!(
            "give --service DIST or --service-from RUN_DIR (or --from RUN_DIR to replay a run)"
        ),
    };
    Ok((arrival, qps, service))
}

fn simulate(a: &ModelArgs) -> anyhow::Result<i32> {
    let (arrival, qps, service) = load_of(a)?;
    let sim = sim_config(a, None)?;
    let spec = ModelSpec {
        arrival: arrival.clone(),
        qps,
        service: service.clone(),
        servers: sim.servers,
        discipline: sim.discipline,
        dispatch: sim.dispatch,
        requests: a.requests,
        // The system starts empty: the first 5 % are not counted.
        warmup: a.requests / 20,
        seed: a.seed,
    };
    let r = model::simulate(&spec).map_err(anyhow::Error::msg)?;
    if a.json {
        let v = serde_json::json!({
            "arrival": arrival.to_string(), "qps": qps, "servers": sim.servers,
            "discipline": sim.discipline.to_string(), "dispatch": sim.dispatch.to_string(),
            "utilization": r.utilization, "requests": r.requests,
            "mean": r.sojourn.mean, "p50": r.sojourn.p50, "p90": r.sojourn.p90, "p95": r.sojourn.p95,
            "p99": r.sojourn.p99, "p999": r.sojourn.p999, "max": r.sojourn.max,
            "closed_form_mean": r.closed_form_mean,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    let svc = match &service {
        Service::Dist(Dist::Exp { .. }) => "M",
        Service::Dist(Dist::Fixed(_)) => "D",
        _ => "G",
    };
    let arr = match arrival {
        ArrivalSpec::Poisson => "M",
        ArrivalSpec::Fixed => "D",
        _ => "G",
    };
    println!(
        "ideal {arr}/{svc}/{} ({}) at utilization {:.3} ({} simulated requests, arrivals {arrival})",
        sim.servers,
        ideal::describe(&sim),
        r.utilization,
        r.requests
    );
    println!("sojourn {}", stats_line(&r.sojourn));
    if let Some(c) = r.closed_form_mean {
        println!(
            "closed-form mean {} (simulation {:+.2}%)",
            fmt_ns(c),
            (r.sojourn.mean / c - 1.0) * 100.0
        );
    }
    Ok(0)
}

fn stats_line(s: &MetricStats) -> String {
    format!(
        "mean {}  p50 {}  p90 {}  p95 {}  p99 {}  p99.9 {}",
        fmt_ns(s.mean),
        fmt_ns(s.p50 as f64),
        fmt_ns(s.p90 as f64),
        fmt_ns(s.p95 as f64),
        fmt_ns(s.p99 as f64),
        fmt_ns(s.p999 as f64)
    )
}

fn replay_run(a: &ModelArgs, dir: &std::path::Path) -> anyhow::Result<i32> {
    let run = Summary::read(&dir.join("summary.json"))
        .with_context(|| format!("--from {}: not a run folder", dir.display()))?;
    if a.arrival != "poisson" {
        bail!("--arrival does not apply with --from: the run's own arrivals are replayed (use --qps to change their rate)");
    }
    let run_dispatch: Dispatch = parse("dispatch", &run.dispatch)?;
    let sim = sim_config(a, Some(&run))?;
    let time_scale = match a.qps {
        None => 1.0,
        Some(q) if q.is_finite() && q > 0.0 => run.scheduled_qps / q,
        Some(q) => bail!("--qps must be a positive number, got {q}"),
    };
    let cfg = IdealConfig {
        sim,
        // The run's own per-worker assignment, unless the what-if changes it.
        recorded_workers: ideal::same_assignment(&sim, run.threads, run_dispatch),
        time_scale,
    };
    let st = ideal::replay_dir(dir, &cfg)?;
    let own = time_scale == 1.0
        && sim.servers == run.threads
        && sim.discipline.to_string() == run.discipline
        && sim.dispatch == run_dispatch;
    let measured = &run.latency_ns["sojourn"];
    let summary = ideal::summary_of(&cfg, &st, measured);
    if a.json {
        let mut v = serde_json::to_value(&summary)?;
        v["qps"] = serde_json::json!(run.scheduled_qps / time_scale);
        v["own_settings"] = serde_json::json!(own);
        if !own {
            // Measured figures belong to other settings: no excess to report.
            v.as_object_mut().map(|o| {
                o.remove("excess");
                o.remove("ratio")
            });
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(0);
    }
    println!(
        "replay of {} ({} requests, {:.1} qps): {}",
        dir.display(),
        st.replayed,
        run.scheduled_qps / time_scale,
        ideal::describe(&sim)
    );
    println!("ideal    {}", stats_line(&summary.sojourn));
    if own {
        println!("measured {}", stats_line(measured));
        // A statistic either side lacks is absent from the maps: NaN here.
        let get = |m: &std::collections::BTreeMap<String, f64>, k: &str| {
            m.get(k).copied().unwrap_or(f64::NAN)
        };
        let (e, r) = (&summary.excess, &summary.ratio);
        println!(
            "excess   mean {}  p99 {}  (measured ÷ ideal: mean {:.3}, p99 {:.3})",
            fmt_ns(get(e, "mean")),
            fmt_ns(get(e, "p99")),
            get(r, "mean"),
            get(r, "p99")
        );
    } else {
        println!(
            "the run itself ({} thread(s), {}, {}) measured {}",
            run.threads,
            run.discipline,
            run.dispatch,
            stats_line(measured)
        );
    }
    Ok(0)
}
