//! What runs on the nodes: `taillab slurm-task` (one run of a point, into its folder) and
//! `taillab node-monitor` (a node's environment sampler), and the job scripts' time format.

use super::*;

/// Slurm's `--time` for a duration: whole minutes, rounded up.
pub fn slurm_time(d: Dur) -> String {
    let min = d.0.div_ceil(60_000_000_000).max(1);
    format!("{}-{:02}:{:02}:00", min / 1440, min / 60 % 24, min % 60)
}

/// The taillab binary the nodes run: `net.remote_taillab`, else this one.
pub(super) fn taillab_exe(cfg: &RunConfig) -> anyhow::Result<String> {
    Ok(match &cfg.net.remote_taillab {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locating the taillab binary")?
            .to_string_lossy()
            .into_owned(),
    })
}

/// `taillab slurm-task`: one run inside a Slurm task (written by the executor).
#[derive(Args, Debug, Clone)]
pub struct TaskCmd {
    /// The point's resolved configuration.
    #[arg(long)]
    pub config: PathBuf,
    /// The point's folder (with --run) or the run's folder.
    #[arg(long)]
    pub dir: PathBuf,
    /// Run K of the point: its seed derived from the base seed, written to DIR/run-K.
    #[arg(long)]
    pub run: Option<usize>,
}

/// Runs one task: the same code a local sweep runs for that run.
pub fn task(a: TaskCmd) -> anyhow::Result<i32> {
    let base = RunConfig::read(&a.config)?;
    let host = std::env::var("SLURMD_NODENAME").unwrap_or_else(|_| "?".into());
    match a.run {
        Some(k) => {
            let mut c = base.clone();
            c.load.seed = run_seed(base.load.seed, k);
            let out = a.dir.join(format!("run-{k}"));
            eprintln!(
                "taillab slurm-task: run-{k} (seed {}) on {host} into {}",
                c.load.seed,
                out.display()
            );
            let app = app_of(&c)?;
            run_redoing_disturbed(c.ci.redo_disturbed, &out, |d| run_once(&app, &c, d, false))?;
        }
        None => {
            eprintln!(
                "taillab slurm-task: one run on {host} into {}",
                a.dir.display()
            );
            run_once(&app_of(&base)?, &base, &a.dir, false)?;
        }
    }
    Ok(0)
}

/// `taillab slurm-node-monitor`: samples this node for a networked run's
/// coordinator (the `slurm` launcher's monitor step on every node).
#[derive(Args, Debug, Clone)]
pub struct NodeMonitorCmd {
    /// Sampling period.
    #[arg(long, default_value_t = Dur(monitor_defaults::PERIOD_NS))]
    pub period: Dur,
    /// Steal limit, % of one CPU.
    #[arg(long, default_value_t = monitor_defaults::MAX_STEAL_PCT)]
    pub max_steal: f64,
    /// Foreign CPU limit, % of one CPU.
    #[arg(long, default_value_t = monitor_defaults::MAX_FOREIGN_PCT)]
    pub max_foreign: f64,
}

/// Prints `monitoring` once sampling, reads `window START END` (wall-clock
/// ns) and prints `env {json}`: the node's figures over that window.
pub fn node_monitor(a: NodeMonitorCmd) -> anyhow::Result<i32> {
    let period = Duration::from_nanos(a.period.0);
    let cfg = taillab_monitor::SamplerConfig {
        period,
        scan_period: period.max(Duration::from_secs(1)),
        ..Default::default()
    };
    let sampler = taillab_monitor::Sampler::start(cfg)
        .map_err(|e| anyhow::anyhow!("environment monitor: {e}"))?;
    let own = std::env::var("SLURM_JOB_ID")
        .map(|j| job_pids(&j))
        .unwrap_or_default();
    for pid in &own {
        sampler.add_pid(*pid);
    }
    println!("monitoring");
    std::io::stdout().flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let w: Vec<u64> = line
        .trim()
        .strip_prefix("window ")
        .map(|r| {
            r.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let [start, end] = w.as_slice() else {
        return Ok(0); // the coordinator went away: nothing to report
    };
    // Wall clock to this node's monotonic clock, as of now.
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    let off = wall - taillab_core::clock::now_ns() as i128;
    let mono = |t: u64| (t as i128 - off).max(1) as u64;
    let report = sampler.stop_measured(mono(*start), mono(*end).max(mono(*start) + 1))?;
    let th = taillab_monitor::Thresholds {
        max_steal_pct: a.max_steal,
        max_foreign_pct: a.max_foreign,
        ..Default::default()
    };
    let s = &report.summary;
    let check = taillab_monitor::EnvCheck::of(s, &th);
    let v = serde_json::json!({
        "ok": check.ok, "reasons": check.reasons, "notes": check.notes, "measured_s": s.measured_s, "ncpu": s.ncpu,
        "steal_pct": s.steal_pct, "steal_max_1s_pct": s.steal_max_1s_pct,
        "foreign_cpu_pct": s.foreign_cpu_pct, "foreign_cpu_max_1s_pct": s.foreign_cpu_max_1s_pct,
        "host_busy_pct": s.host_busy_pct, "top_foreign": s.top_foreign, "job_pids": own,
    });
    println!("env {v}");
    std::io::stdout().flush()?;
    Ok(0)
}
