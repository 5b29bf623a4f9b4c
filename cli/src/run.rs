//! `taillab run`: one measurement, one result folder.

use anyhow::{bail, Context};
use clap::Args;
use std::path::PathBuf;
use taillab_core::arrival::ArrivalSpec;
use taillab_core::clock::WaitMode;
use taillab_core::dist::{fmt_ns, parse_duration_ns, Dist};
use taillab_core::harness::{Progress, DEFAULT_SPIN_MARGIN_NS};
use taillab_core::queue::Discipline;
use taillab_core::{Bound, DataCtx, Params, RunSpec, ShaperMode};

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// App to measure (see `taillab apps`).
    #[arg(long)]
    pub app: String,
    /// Where client, harness and app run: integrated (one process), loopback (server + client processes on this host) or networked (through launchers).
    #[arg(long, default_value = "integrated")]
    pub config: String,
    /// Offered load in requests per second.
    #[arg(long)]
    pub qps: f64,
    /// Worker threads serving the request queue.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Arrival process: poisson or fixed (uniform spacing).
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// Base seed: arrivals and requests derive their own streams from it.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Warmup length in requests (not measured).
    #[arg(long, conflicts_with = "warmup_seconds")]
    pub warmup_requests: Option<u64>,
    /// Warmup length in time (e.g. 2s, 500ms; a bare number is seconds).
    #[arg(long, value_parser = parse_secs)]
    pub warmup_seconds: Option<f64>,
    /// Measured requests (the run ends after them).
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Measured time (e.g. 30s; a bare number is seconds).
    #[arg(long, value_parser = parse_secs)]
    pub duration: Option<f64>,
    /// How workers wait for work: spin, block or hybrid (sleep, then spin the last --spin-margin).
    #[arg(long, default_value = "hybrid")]
    pub wait: String,
    /// Hybrid waits spin this long before a deadline (e.g. 1ms).
    #[arg(long, value_parser = parse_ns)]
    pub spin_margin: Option<u64>,
    /// inline (workers claim arrivals; FIFO) or thread (a shaper thread feeds a real queue).
    #[arg(long, default_value = "inline")]
    pub shaper: String,
    /// Queue discipline with --shaper thread: fifo, lifo or random.
    #[arg(long, default_value = "fifo")]
    pub discipline: String,
    /// App setting, as key=value (repeatable; see `taillab apps`).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Result folder (default results/<app>-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write requests.csv with every request's six stamps.
    #[arg(long)]
    pub save_requests: bool,
    /// Memory cap for per-request records, in MB.
    #[arg(long, default_value_t = 1024)]
    pub max_record_mem: u64,
    /// Interval histogram length (e.g. 1s).
    #[arg(long, value_parser = parse_ns, default_value = "1s")]
    pub interval: u64,
    /// How long to wait for stragglers after the schedule's expected end.
    #[arg(long, value_parser = parse_ns, default_value = "10s")]
    pub drain_timeout: u64,
    /// Send-lag p99 above this fails the send-lag check (e.g. 50us).
    #[arg(long, value_parser = parse_ns, default_value = "50us")]
    pub max_send_lag: u64,
    /// Simulated one-way network delay per direction (same grammar as service=).
    #[arg(long)]
    pub net_delay: Option<String>,
    /// Run workers under SCHED_FIFO at this priority (1..=99; needs root).
    #[arg(long)]
    pub rt_priority: Option<i32>,
    /// Pin workers to these CPUs, round-robin (e.g. 1 or 0,1).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub net: taillab_transport::cli::NetArgs,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit with status 1 when a check failed.
    #[arg(long)]
    pub strict: bool,
}

fn parse_ns(s: &str) -> Result<u64, String> {
    parse_duration_ns(s).map(|v| v as u64)
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a valid time")),
        Err(_) => parse_duration_ns(s).map(|v| v / 1e9),
    }
}

fn parse_enum<T: std::str::FromStr<Err = String>>(flag: &str, v: &str) -> anyhow::Result<T> {
    v.parse::<T>().map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
}

impl RunArgs {
    /// The harness spec these flags describe; errors name the flag.
    pub fn spec(&self) -> anyhow::Result<RunSpec> {
        let measure = match (self.requests, self.duration) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(s)) => Bound::Seconds(s),
            _ => bail!("say how long to measure: --requests N or --duration TIME"),
        };
        let warmup = match (self.warmup_requests, self.warmup_seconds) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(s)) => Bound::Seconds(s),
            _ => Bound::Requests(0),
        };
        let net_delay = match &self.net_delay {
            None => None,
            Some(s) => Some(s.parse::<Dist>().map_err(|e| anyhow::anyhow!("--net-delay: {e}"))?),
        };
        Ok(RunSpec {
            qps: self.qps,
            threads: self.threads,
            arrival: parse_enum::<ArrivalSpec>("arrival", &self.arrival)?,
            seed: self.seed,
            warmup,
            measure,
            wait: parse_enum::<WaitMode>("wait", &self.wait)?,
            spin_margin_ns: self.spin_margin.unwrap_or(DEFAULT_SPIN_MARGIN_NS),
            shaper: parse_enum::<ShaperMode>("shaper", &self.shaper)?,
            discipline: parse_enum::<Discipline>("discipline", &self.discipline)?,
            keep_records: self.save_requests,
            record_mem_cap: self.max_record_mem << 20,
            interval_ns: self.interval,
            drain_timeout_ns: self.drain_timeout,
            send_lag_p99_max_ns: self.max_send_lag,
            rt_priority: self.rt_priority,
            cpus: self.cpus.clone(),
            net_delay,
        })
    }
}

fn default_out(app: &str) -> PathBuf {
    let t = taillab_core::summary::rfc3339(std::time::SystemTime::now()).replace([':', '.'], "-");
    PathBuf::from("results").join(format!("{app}-{t}"))
}

pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let app = crate::apps::find(&a.app)?;
    if !["integrated", "loopback", "networked"].contains(&a.config.as_str()) {
        bail!("unknown --config `{}`; use integrated, loopback or networked", a.config);
    }
    let spec = a.spec()?;
    spec.validate()?;
    let params = Params::parse(a.set.iter().map(|s| s.as_str()))?;
    params.check_keys(app.name(), app.keys())?;
    let out = a.out.clone().unwrap_or_else(|| default_out(app.name()));
    taillab_core::summary::ensure_writable(&out)?;

    if let Some(svc) = app.expected_service_ns(&params) {
        let rho = spec.qps * svc / 1e9 / spec.threads as f64;
        if rho >= 1.0 {
            eprintln!(
                "warning: mean service {} × {} qps over {} thread(s) is utilization {:.2} ≥ 1: the run will saturate (running it anyway)",
                fmt_ns(svc),
                spec.qps,
                spec.threads,
                rho
            );
        }
    }
    if a.config != "integrated" {
        let quiet = a.quiet || a.json;
        // Server and client processes; the same result folder as integrated.
        let s = taillab_transport::coord::run_config(&a.config, &a.net, &spec, app.name(), &params, &out, quiet)?;
        match a.json {
            true => println!("{}", serde_json::to_string_pretty(&s)?),
            false => println!("{}results: {}", taillab_core::summary::human_table(&s), out.display()),
        }
        return Ok(if a.strict && !s.ok() { 1 } else { 0 });
    }
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, &params).with_context(|| format!("preparing data for {}", app.name()))?;
    let server = app.server(&ctx, &params, spec.threads)?;
    let client = app.client(&ctx, &params, taillab_core::arrival::derive_seed(spec.seed, 2))?;

    let bar = progress_bar(&spec, a.quiet || a.json);
    let mut on_progress = |p: Progress| {
        if let Some(b) = &bar {
            b.set_length(p.expected_ns / 1_000_000);
            b.set_position((p.elapsed_ns / 1_000_000).min(p.expected_ns / 1_000_000));
            b.set_message(format!("{} requests", p.completed));
        }
    };
    let result = taillab_core::run_integrated(&spec, server, client, &mut on_progress)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let summary = taillab_core::summarize(&result, app.name(), &params, &a.config);
    taillab_core::write_run(&out, &summary, &result, a.save_requests)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", taillab_core::summary::human_table(&summary));
        println!("results: {}", out.display());
    }
    Ok(if a.strict && !summary.ok() { 1 } else { 0 })
}

fn progress_bar(spec: &RunSpec, quiet: bool) -> Option<indicatif::ProgressBar> {
    // Only for runs long enough to wait on; the bar redraws at most 20×/s
    // from the main thread, never from a worker.
    let expected_s = spec.expected_measure_ns() as f64 / 1e9;
    if quiet || expected_s < 1.0 {
        return None;
    }
    let b = indicatif::ProgressBar::new(0);
    b.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% eta {eta} {msg}")
            .expect("valid template"),
    );
    Some(b)
}
