//! One run of a configuration into one result folder — the unit every
//! command is built from — and the environment monitor that watches it.
//!
//! A run receives its whole configuration: nothing here reads a global.
//! Its folder gets `config.toml` (the resolved configuration, so
//! `taillab run --from DIR` reruns it) before anything is measured, then
//! `summary.json`, the interval logs and, when asked, `requests.csv`.

use crate::planned::Planned;
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use taillab_core::config::{RunConfig, Topology};
use taillab_core::dist::fmt_ns;
use taillab_core::harness::Progress;
use taillab_core::{App, DataCtx, RunSpec, Summary};
use taillab_transport::coord::RunObserver;

/// The app a configuration names, with its settings checked.
pub fn app_of(cfg: &RunConfig) -> anyhow::Result<Arc<dyn App>> {
    let app = crate::apps::find(cfg.app_name()?)?;
    cfg.check_app_keys(app.name(), app.keys())?;
    Ok(app)
}

/// `results/<app>-<time>`.
pub fn default_out(app: &str) -> PathBuf {
    let t = taillab_core::summary::rfc3339(std::time::SystemTime::now()).replace([':', '.'], "-");
    PathBuf::from("results").join(format!("{app}-{t}"))
}

/// Writes the resolved configuration beside the run's results.
pub fn write_config(cfg: &RunConfig, out: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let p = out.join("config.toml");
    std::fs::write(&p, cfg.to_toml()).with_context(|| format!("writing {}", p.display()))
}

/// One run of `cfg` into `out`: prepares data, builds server and client (or
/// starts the processes of a loopback/networked run), measures, writes the
/// run folder, returns the summary.
pub fn run_once(
    app: &Arc<dyn App>,
    cfg: &RunConfig,
    out: &Path,
    show_progress: bool,
) -> anyhow::Result<Summary> {
    cfg.validate()?;
    let spec = cfg.spec()?;
    taillab_core::summary::ensure_writable(out)?;
    write_config(cfg, out)?;
    crate::planned::preflight(cfg)?;
    crate::explain::preflight(cfg)?;
    if cfg.net.topology != Topology::Integrated {
        return run_coordinated(cfg, spec, out, show_progress);
    }
    let (mut spec, note) = cfg.run_spec()?;
    if let Some(n) = note {
        eprintln!("{n}");
    }
    place(&mut spec);
    let mut hooks = crate::hooks::of(cfg, &spec, out, show_progress)?;
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, &cfg.settings)
        .with_context(|| format!("preparing data for {}", app.name()))?;
    let server = app.server_for_run(
        &ctx,
        &cfg.settings,
        spec.threads,
        taillab_core::arrival::derive_seed(spec.seed, 7),
    )?;
    // A client per producer of the schedule (RunSpec::producers), the first as with one.
    let clients = (0..spec.producers())
        .map(|j| app.client(&ctx, &cfg.settings, producer_seed(spec.seed, j)))
        .collect::<Result<Vec<_>, _>>()?;
    // The tracer first (a host that cannot trace stops here, before any hog starts); the
    // hooks (knobs, hogs, the sampler) last, just before the run, so preparing data is
    // neither disturbed nor sampled.
    let mut explain = match cfg.record.explain {
        true => Some(crate::explain::Session::start(&spec)?),
        false => None,
    };
    let mut start = crate::hooks::Start {
        cfg,
        spec: &spec,
        pids: Vec::new(),
        foreign: None,
    };
    for h in hooks.iter_mut() {
        h.start(&mut start)?;
    }
    let mut measuring = false;
    let mut on_progress = |p: Progress| {
        if let Some(e) = &mut explain {
            e.note_workers();
        }
        let began = !measuring && measured_phase_began(&spec, &p);
        measuring |= began;
        for h in hooks.iter_mut() {
            h.interval(&p);
            if began {
                h.measured();
            }
        }
    };
    let result = taillab_core::run_integrated_with(&spec, server, clients, &mut on_progress)?;
    let mut summary =
        taillab_core::summarize(&result, app.name(), &cfg.settings, cfg.net.topology.name());
    let explained = explain.map(|e| e.finish(&result));
    let mut end = crate::hooks::End {
        result: &result,
        origin_ns: 0,
        summary: &mut summary,
        out,
    };
    for h in hooks.iter_mut() {
        h.end(&mut end)?;
    }
    crate::explain::write_run(out, cfg, &mut summary, &result, explained)?;
    Ok(summary)
}

/// A loopback or networked run: server and client processes, the same result folder as an
/// integrated run's.
fn run_coordinated(
    cfg: &RunConfig,
    spec: RunSpec,
    out: &Path,
    show_progress: bool,
) -> anyhow::Result<Summary> {
    if cfg.net.topology == Topology::Loopback {
        // The clients listen for scrapes; a port in use is said before anything starts.
        crate::metrics::check_free(cfg)?;
    }
    if cfg.record.counters != taillab_core::config::CounterMode::None {
        eprintln!("note: record.counters counts the worker threads of integrated runs; this {} run has no counters", cfg.net.topology);
    }
    let mut obs = EnvObserver::new(cfg, spec);
    obs.explain = crate::explain::Remote::start(cfg)?;
    // The knobs and hogs before the processes start (hooks' start waits for them).
    obs.hooks.insert(
        0,
        Box::new(crate::hooks::PlannedHook::coordinated(
            Planned::start(cfg, out)?,
            cfg.net.target.is_none(),
        )),
    );
    let r = taillab_transport::coord::run_config(
        cfg,
        out,
        !show_progress,
        Some(&mut obs as &mut dyn RunObserver),
    );
    // A run that failed before it finished: stop the hogs, restore the knobs (a finished
    // run's hooks have nothing left to undo).
    for h in obs.hooks.iter_mut() {
        h.abandon();
    }
    Ok(r?)
}

/// Places an integrated run's threads: without `harness.cpus`, workers one per CPU away
/// from the sampler where they fit ([`taillab_core::placement`]). summary.json and the run's
/// table say where everything went; more workers than CPUs is a warning here (written so that
/// a closed stderr cannot end the run).
fn place(spec: &mut RunSpec) {
    use std::io::Write;
    let Some(allowed) = taillab_core::placement::allowed_cpus().filter(|a| !a.is_empty()) else {
        return;
    };
    if spec.cpus.is_empty() {
        let extra = usize::from(spec.shaper == taillab_core::ShaperMode::Thread);
        let p = taillab_core::placement::default_placement(spec.total_workers(), extra, &allowed);
        if p.oversubscribed {
            let _ = writeln!(std::io::stderr(), "{}", p.line);
        }
        spec.cpus = p.cpus;
    }
}

/// Whether the measured phase has begun, as far as a progress report (every
/// 20 ms) tells: warmup by time ends at its time, by requests when that
/// many completed.
fn measured_phase_began(spec: &RunSpec, p: &Progress) -> bool {
    match spec.warmup {
        taillab_core::Bound::Seconds(s) => p.elapsed_ns as f64 >= s * 1e9,
        taillab_core::Bound::Requests(n) => p.completed >= n,
    }
}

/// Warns before a run whose offered load already exceeds what the threads can serve.
pub fn warn_if_saturating(app: &Arc<dyn App>, cfg: &RunConfig) {
    let (Some(svc), Some(qps)) = (app.expected_service_ns(&cfg.settings), cfg.load.qps) else {
        return;
    };
    let threads = cfg.harness.threads;
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

/// The environment monitor of a loopback/networked run or a `taillab load`: its hooks (the
/// planned hogs and knobs, the sampler, a load's live endpoint) started once the server and
/// clients are up, with their processes counted as the experiment's (not foreign), and ended
/// over the measured window; and `record.explain`'s tracer.
pub struct EnvObserver {
    cfg: RunConfig,
    spec: RunSpec,
    /// In the order they start and end ([`crate::hooks`]).
    pub hooks: Vec<Box<dyn crate::hooks::RunHook>>,
    /// Other processes' CPU, live, once the sampler runs.
    foreign: Option<taillab_monitor::LiveForeign>,
    /// `record.explain`'s tracer (loopback runs).
    pub explain: Option<crate::explain::Remote>,
}

impl EnvObserver {
    /// With `cfg`'s monitor settings.
    pub fn new(cfg: &RunConfig, spec: RunSpec) -> Self {
        let mut hooks: Vec<Box<dyn crate::hooks::RunHook>> = Vec::new();
        if cfg.monitor.enabled {
            hooks.push(Box::new(crate::hooks::SamplerHook::default()));
        }
        EnvObserver {
            cfg: cfg.clone(),
            spec,
            hooks,
            foreign: None,
            explain: None,
        }
    }

    /// The live endpoint `m` serves this monitor's foreign CPU and its flag, from the moment
    /// the sampler starts.
    pub fn serve_foreign_on(&mut self, m: &crate::metrics::MetricsServer) {
        self.hooks
            .push(Box::new(crate::hooks::ForeignOn(m.foreign_slot())));
    }
}

impl RunObserver for EnvObserver {
    fn started(&mut self, pids: &[i32]) {
        if let Some(e) = &mut self.explain {
            e.started(pids);
        }
        let mut s = crate::hooks::Start {
            cfg: &self.cfg,
            spec: &self.spec,
            pids: pids.to_vec(),
            foreign: None,
        };
        for h in self.hooks.iter_mut() {
            if let Err(e) = h.start(&mut s) {
                eprintln!("warning: {e}; this run has no environment check");
            }
        }
        self.foreign = s.foreign;
    }

    fn finished(
        &mut self,
        r: &taillab_core::RunResult,
        origin_ns: u64,
        summary: &mut Summary,
        out: &Path,
    ) -> Result<(), String> {
        if let Some(e) = &mut self.explain {
            e.finish(r, summary);
        }
        let mut end = crate::hooks::End {
            result: r,
            origin_ns,
            summary,
            out,
        };
        for h in self.hooks.iter_mut() {
            h.end(&mut end).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    fn anatomy_rows(&mut self) -> Option<Vec<taillab_core::sections::AnatomyRow>> {
        self.explain.as_mut().and_then(|e| e.take_rows())
    }

    fn table_lines(&self, summary: &Summary) -> String {
        crate::environment::env_lines(summary)
    }

    fn foreign_cpu_pct(&self) -> Option<f64> {
        self.foreign.as_ref()?.pct()
    }
}

/// The seed of producer `j`'s client: the run's client seed for the first (one producer draws
/// the requests it always drew), one of its own for each other.
fn producer_seed(seed: u64, j: usize) -> u64 {
    match j {
        0 => taillab_core::arrival::derive_seed(seed, 2),
        j => taillab_core::arrival::derive_seed(seed, 0x9D0C_0000 + j as u64),
    }
}
