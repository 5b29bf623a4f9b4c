//! `taillab run`: one measurement, one result folder.

use anyhow::{bail, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use taillab_core::arrival::ArrivalSpec;
use taillab_core::clock::WaitMode;
use taillab_core::dist::{fmt_ns, parse_duration_ns, Dist};
use taillab_core::harness::{Progress, DEFAULT_SPIN_MARGIN_NS};
use taillab_core::queue::Discipline;
use taillab_core::{App, Bound, DataCtx, Params, RunSpec, ShaperMode, Summary};

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
    /// Repeat with fresh seeds until the 95 % CI half-width of each target
    /// metric is within this fraction of its estimate (e.g. 0.01).
    #[arg(long)]
    pub ci: Option<f64>,
    /// Fewest runs per point with --ci.
    #[arg(long, default_value_t = 3)]
    pub min_runs: usize,
    /// Most runs per point with --ci (the report says when the target was not met).
    #[arg(long, default_value_t = 20)]
    pub max_runs: usize,
    /// Metrics the CI target applies to (default sojourn.mean,sojourn.p95,sojourn.p99).
    #[arg(long, value_delimiter = ',')]
    pub ci_metrics: Vec<String>,
    /// Continue an interrupted experiment in --out, skipping finished runs.
    #[arg(long)]
    pub resume: bool,
    /// Do not sample the environment (steal, foreign CPU, own resource use) during runs.
    #[arg(long)]
    pub no_monitor: bool,
    /// Sampling period of the environment monitor (10ms..60s).
    #[arg(long, value_parser = parse_ns, default_value = "100ms")]
    pub monitor_period: u64,
    /// Mean hypervisor steal over the measured phase (% of one CPU) above which a run is disturbed [default 1].
    #[arg(long)]
    pub max_steal: Option<f64>,
    /// Mean CPU use of other processes (% of one CPU) above which a run is disturbed [default 5].
    #[arg(long)]
    pub max_foreign: Option<f64>,
    /// With --ci: discard a run whose environment check failed and redo it
    /// with the same seed, at most N times per run (recorded in its summary).
    #[arg(long, default_value_t = 0)]
    pub redo_disturbed: usize,
}

/// How runs sample their environment: set once from the command's flags
/// (every run of a process shares them; unset means monitor on, defaults).
#[derive(Debug, Clone)]
pub struct EnvOptions {
    pub enabled: bool,
    pub period_ns: u64,
    pub thresholds: taillab_monitor::Thresholds,
}

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            enabled: true,
            period_ns: 100_000_000,
            thresholds: Default::default(),
        }
    }
}

static ENV_OPTIONS: std::sync::OnceLock<EnvOptions> = std::sync::OnceLock::new();

/// Sets the environment options for this process (first call wins).
pub fn set_env_options(a: &RunArgs) -> anyhow::Result<()> {
    let mut th = taillab_monitor::Thresholds::default();
    for (flag, v, slot) in [
        ("max-steal", a.max_steal, &mut th.max_steal_pct),
        ("max-foreign", a.max_foreign, &mut th.max_foreign_pct),
    ] {
        if let Some(v) = v {
            if !(v.is_finite() && v >= 0.0) {
                bail!("--{flag} must be a percentage of one CPU ≥ 0, got {v}");
            }
            *slot = v;
        }
    }
    if !(10_000_000..=60_000_000_000).contains(&a.monitor_period) {
        bail!("--monitor-period must be within 10ms..60s");
    }
    let _ = ENV_OPTIONS.set(EnvOptions {
        enabled: !a.no_monitor,
        period_ns: a.monitor_period,
        thresholds: th,
    });
    Ok(())
}

fn env_options() -> EnvOptions {
    ENV_OPTIONS.get().cloned().unwrap_or_default()
}

/// Starts the environment sampler for a run. Worker threads are found by
/// their name; when workers are pinned, the sampler goes to a CPU they do not
/// use (if there is one), so it never competes with them.
fn start_monitor(spec: &RunSpec, period_ns: u64) -> anyhow::Result<taillab_monitor::Sampler> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let pin_cpu = if spec.cpus.is_empty() {
        None
    } else {
        (0..ncpu).find(|c| !spec.cpus.contains(c))
    };
    let period = std::time::Duration::from_nanos(period_ns);
    let cfg = taillab_monitor::SamplerConfig {
        period,
        scan_period: period.max(std::time::Duration::from_secs(1)),
        pin_cpu,
        worker_name_prefix: Some("taillab-wrk-".into()),
        ..Default::default()
    };
    taillab_monitor::Sampler::start(cfg).map_err(|e| anyhow::anyhow!("environment monitor: {e}"))
}

/// The environment monitor of a loopback/networked run or a `taillab load`:
/// it samples this host from the moment the server and clients are up,
/// counts their CPU as the experiment's (not foreign), and attaches the
/// measured window.
pub struct EnvObserver {
    env: EnvOptions,
    spec: RunSpec,
    sampler: Option<taillab_monitor::Sampler>,
}

impl EnvObserver {
    /// With the process's environment options (`taillab load` has the defaults).
    pub fn new(spec: RunSpec) -> Self {
        EnvObserver {
            env: env_options(),
            spec,
            sampler: None,
        }
    }
}

impl taillab_transport::coord::RunObserver for EnvObserver {
    fn started(&mut self, pids: &[i32]) {
        match start_monitor(&self.spec, self.env.period_ns) {
            Ok(s) => {
                for p in pids {
                    s.add_pid(*p);
                }
                self.sampler = Some(s);
            }
            Err(e) => eprintln!("warning: {e}; this run has no environment check"),
        }
    }

    fn finished(
        &mut self,
        r: &taillab_core::RunResult,
        origin_ns: u64,
        summary: &mut Summary,
        out: &Path,
    ) -> Result<(), String> {
        let Some(s) = self.sampler.take() else {
            return Ok(());
        };
        let (start, end) = measured_window(r, summary);
        attach_environment_window(
            s,
            (origin_ns + start, origin_ns + end),
            r.spec.interval_ns,
            summary,
            &self.env.thresholds,
            out,
        )
        .map_err(|e| e.to_string())
    }

    fn table_lines(&self, summary: &Summary) -> String {
        env_lines(summary)
    }
}

/// Stops the sampler with the run's measured window, adds `environment` and
/// `checks.environment` to the summary and writes `environment.json` (the
/// time series, also re-bucketed to the interval histograms' intervals).
fn attach_environment(
    sampler: taillab_monitor::Sampler,
    r: &taillab_core::RunResult,
    summary: &mut Summary,
    th: &taillab_monitor::Thresholds,
    out: &Path,
) -> anyhow::Result<()> {
    let window = measured_window(r, summary);
    attach_environment_window(sampler, window, r.spec.interval_ns, summary, th, out)
}

/// The measured phase on the run's clock: from its start until its last
/// request completed.
fn measured_window(r: &taillab_core::RunResult, summary: &Summary) -> (u64, u64) {
    let start = r.measure_start;
    let end = if r.totals.last_completed > start {
        r.totals.last_completed
    } else {
        start + (summary.duration_s * 1e9) as u64
    };
    (start, end)
}

/// [`attach_environment`] for a window given on this host's clock.
fn attach_environment_window(
    sampler: taillab_monitor::Sampler,
    (start, end): (u64, u64),
    interval_ns: u64,
    summary: &mut Summary,
    th: &taillab_monitor::Thresholds,
    out: &Path,
) -> anyhow::Result<()> {
    let report = sampler.stop_measured(start, end.max(start + 1))?;
    let check = report.summary.check(th);
    let s = &report.summary;
    let verdict = if check.ok {
        format!(
            "steal {:.2} %, other processes {:.1} % of a CPU",
            s.steal_pct, s.foreign_cpu_pct
        )
    } else {
        check.reasons.join("; ")
    };
    summary.checks.insert(
        "environment".to_string(),
        taillab_core::summary::Check::new(
            check.ok,
            verdict,
            serde_json::json!({ "reasons": check.reasons, "items": check.items, "thresholds": check.thresholds }),
        ),
    );
    summary
        .extra
        .insert("environment".to_string(), serde_json::to_value(s)?);
    let series = serde_json::json!({
        "schema": "taillab.environment/1",
        "intervals": report.intervals(start, interval_ns),
        "report": report,
    });
    let path = out.join("environment.json");
    std::fs::write(&path, serde_json::to_string(&series)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Whether a run's environment check failed.
pub fn env_disturbed(s: &Summary) -> bool {
    s.checks.get("environment").is_some_and(|c| !c.ok)
}

/// The environment lines of the human table, if the run was monitored.
pub fn env_lines(s: &Summary) -> String {
    s.extra
        .get("environment")
        .and_then(|v| serde_json::from_value::<taillab_monitor::EnvSummary>(v.clone()).ok())
        .map(|e| e.to_string())
        .unwrap_or_default()
}

pub(crate) fn parse_ns(s: &str) -> Result<u64, String> {
    parse_duration_ns(s).map(|v| v as u64)
}

pub(crate) fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a valid time")),
        Err(_) => parse_duration_ns(s).map(|v| v / 1e9),
    }
}

pub(crate) fn parse_enum<T: std::str::FromStr<Err = String>>(
    flag: &str,
    v: &str,
) -> anyhow::Result<T> {
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
            Some(s) => Some(
                s.parse::<Dist>()
                    .map_err(|e| anyhow::anyhow!("--net-delay: {e}"))?,
            ),
        };
        let spec = RunSpec {
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
            // Kept in memory whenever they fit (the sequence checks use them);
            // written out only with --save-requests.
            keep_records: true,
            record_mem_cap: self.max_record_mem << 20,
            interval_ns: self.interval,
            drain_timeout_ns: self.drain_timeout,
            send_lag_p99_max_ns: self.max_send_lag,
            rt_priority: self.rt_priority,
            cpus: self.cpus.clone(),
            net_delay,
        };
        Ok(
            if !self.save_requests
                && spec.record_capacity() * taillab_core::harness::RECORD_BYTES
                    > spec.record_mem_cap
            {
                eprintln!(
                "note: {} requests exceed --max-record-mem {} MB for per-request records; keeping histograms only (sequence checks skipped)",
                spec.record_capacity(),
                self.max_record_mem
            );
                RunSpec {
                    keep_records: false,
                    ..spec
                }
            } else {
                spec
            },
        )
    }
}

pub fn default_out(app: &str) -> PathBuf {
    let t = taillab_core::summary::rfc3339(std::time::SystemTime::now()).replace([':', '.'], "-");
    PathBuf::from("results").join(format!("{app}-{t}"))
}

/// `--config loopback|networked` flags of the `taillab run` invocation; sweeps use the defaults.
static NET_ARGS: std::sync::OnceLock<taillab_transport::cli::NetArgs> = std::sync::OnceLock::new();

/// One run of `app` into `out`: prepares data, builds server and client,
/// measures, writes the run folder, returns the summary.
pub fn run_once(
    app: &Arc<dyn App>,
    params: &Params,
    spec: &RunSpec,
    config: &str,
    out: &Path,
    save_requests: bool,
    show_progress: bool,
) -> anyhow::Result<Summary> {
    if !["integrated", "loopback", "networked"].contains(&config) {
        bail!("unknown --config `{config}`; use integrated, loopback or networked");
    }
    spec.validate()?;
    taillab_core::summary::ensure_writable(out)?;
    if config != "integrated" {
        // Server and client processes; the same result folder as integrated.
        let net = NET_ARGS.get().cloned().unwrap_or_default();
        // Transports keep records (and write requests.csv) only when asked to.
        let spec = RunSpec {
            keep_records: save_requests,
            ..spec.clone()
        };
        let mut obs = EnvObserver::new(spec.clone());
        let monitor = obs.env.enabled;
        return Ok(taillab_transport::coord::run_config(
            config,
            &net,
            &spec,
            app.name(),
            params,
            out,
            !show_progress,
            monitor.then_some(&mut obs as &mut dyn taillab_transport::coord::RunObserver),
        )?);
    }
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, params)
        .with_context(|| format!("preparing data for {}", app.name()))?;
    let server = app.server(&ctx, params, spec.threads)?;
    let client = app.client(
        &ctx,
        params,
        taillab_core::arrival::derive_seed(spec.seed, 2),
    )?;
    let env = env_options();
    // Started last, just before the run, so preparing data is not sampled.
    let sampler = if env.enabled {
        Some(start_monitor(spec, env.period_ns)?)
    } else {
        None
    };
    let bar = progress_bar(spec, !show_progress);
    let mut on_progress = |p: Progress| {
        if let Some(b) = &bar {
            b.set_length(p.expected_ns / 1_000_000);
            b.set_position((p.elapsed_ns / 1_000_000).min(p.expected_ns / 1_000_000));
            b.set_message(format!("{} requests", p.completed));
        }
    };
    let result = taillab_core::run_integrated(spec, server, client, &mut on_progress)?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut summary = taillab_core::summarize(&result, app.name(), params, config);
    if let Some(s) = sampler {
        attach_environment(s, &result, &mut summary, &env.thresholds, out)?;
    }
    taillab_core::write_run(out, &summary, &result, save_requests)?;
    Ok(summary)
}

/// Warns before a run whose offered load already exceeds what the threads can serve.
pub fn warn_if_saturating(app: &Arc<dyn App>, params: &Params, qps: f64, threads: usize) {
    if let Some(svc) = app.expected_service_ns(params) {
        let rho = qps * svc / 1e9 / threads as f64;
        if rho >= 1.0 {
            eprintln!(
                "warning: mean service {} × {} qps over {} thread(s) is utilization {:.2} ≥ 1: the run will saturate (running it anyway)",
                fmt_ns(svc),
                qps,
                threads,
                rho
            );
        }
    }
}

pub fn run(a: RunArgs) -> anyhow::Result<i32> {
    let app = crate::apps::find(&a.app)?;
    let _ = NET_ARGS.set(a.net.clone());
    if !["integrated", "loopback", "networked"].contains(&a.config.as_str()) {
        bail!(
            "unknown --config `{}`; use integrated, loopback or networked",
            a.config
        );
    }
    let spec = a.spec()?;
    spec.validate()?;
    let params = Params::parse(a.set.iter().map(|s| s.as_str()))?;
    params.check_keys(app.name(), app.keys())?;
    set_env_options(&a)?;
    if a.redo_disturbed > 0 && a.ci.is_none() {
        bail!("--redo-disturbed applies to repeated runs: add --ci TARGET (or drop it)");
    }
    let out = a.out.clone().unwrap_or_else(|| default_out(app.name()));
    let existed = out.exists();
    taillab_core::summary::ensure_writable(&out)?;
    warn_if_saturating(&app, &params, spec.qps, spec.threads);
    // A run that fails before writing anything (e.g. a bad app setting found
    // when the app starts) leaves no empty results folder behind.
    let forget_empty = |e: anyhow::Error| {
        if !existed {
            let _ = std::fs::remove_dir(&out);
        }
        e
    };
    if let Some(target) = a.ci {
        return crate::experiment::run_repeated(&a, &app, &params, &spec, target, &out)
            .map_err(forget_empty);
    }
    let summary = run_once(
        &app,
        &params,
        &spec,
        &a.config,
        &out,
        a.save_requests,
        !(a.quiet || a.json),
    )
    .map_err(forget_empty)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", taillab_core::summary::human_table(&summary));
        print!("{}", env_lines(&summary));
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
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% eta {eta} {msg}",
        )
        .expect("valid template"),
    );
    Some(b)
}
