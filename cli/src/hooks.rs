//! What happens around every run — the live metrics endpoint, the progress bar, the planned
//! hogs and knobs, the environment sampler, the worker threads' counters and the
//! region-of-interest markers — as [`RunHook`]s called in turn: at the start, at every
//! progress report, when the measured phase begins, and at the end. An integrated run's
//! hooks are [`of`]'s, called by [`crate::runner::run_once`]; a loopback, networked or
//! `taillab load` run's are its [`crate::runner::EnvObserver`]'s, called as the coordinator
//! reports (the planned hogs and the sampler, the same types). Neither caller knows a hook
//! by name; a new one is a type and a line where the list is made.
//!
//! Order matters where one hook hands another something: the planned hogs' processes go to
//! the sampler (it counts their CPU as the experiment's), and the sampler's live foreign-CPU
//! figure goes to the metrics endpoint. [`Start`] carries those forward, so [`of`] lists the
//! hooks in the order they must start; they end in the same order (the bar first, so nothing
//! prints over it).

use crate::environment::{attach_environment, measured_window, start_monitor, thresholds};
use crate::planned::Planned;
use std::path::Path;
use taillab_core::config::RunConfig;
use taillab_core::harness::Progress;
use taillab_core::{RunResult, RunSpec, Summary};
use taillab_interfere::PerfTarget;

/// What a starting hook sees, and what it hands to the hooks after it.
pub struct Start<'a> {
    /// The run's configuration.
    pub cfg: &'a RunConfig,
    /// The run's spec (workers placed).
    pub spec: &'a RunSpec,
    /// Processes of the experiment besides this one (a coordinated run's server and
    /// clients first, then the planned hogs): not foreign.
    pub pids: Vec<i32>,
    /// Other processes' CPU, live, once the sampler runs.
    pub foreign: Option<taillab_monitor::LiveForeign>,
}

/// What an ending hook sees: the run's result, and the summary it adds to.
pub struct End<'a> {
    /// What the run measured.
    pub result: &'a RunResult,
    /// The result's time zero on this host's clock (0 for an integrated run; a coordinated
    /// run's times count from its clients' start).
    pub origin_ns: u64,
    /// The summary, before it is written.
    pub summary: &'a mut Summary,
    /// The run's folder.
    pub out: &'a Path,
}

/// Something that happens around every run (see the module docs).
pub trait RunHook {
    /// Just before the run (data prepared, server and client built; a coordinated run's
    /// processes up).
    fn start(&mut self, _s: &mut Start) -> anyhow::Result<()> {
        Ok(())
    }
    /// Each progress report (every 20 ms, on the run's main thread).
    fn interval(&mut self, _p: &Progress) {}
    /// The measured phase began, as the progress reports tell.
    fn measured(&mut self) {}
    /// After the run: what it adds to the summary (and to the run's folder).
    fn end(&mut self, _e: &mut End) -> anyhow::Result<()> {
        Ok(())
    }
    /// The run failed before its end: undo what was started (hogs stopped, knobs restored).
    fn abandon(&mut self) {}
}

/// The hooks of an integrated run of `cfg`, in the order they start and end. The metrics
/// endpoint starts listening here, before any data is prepared (a port in use stops the run
/// before it costs anything).
pub fn of(
    cfg: &RunConfig,
    spec: &RunSpec,
    out: &Path,
    show_progress: bool,
) -> anyhow::Result<Vec<Box<dyn RunHook>>> {
    let mut hooks: Vec<Box<dyn RunHook>> = Vec::new();
    if show_progress {
        hooks.push(Box::new(Bar(None)));
    }
    hooks.push(Box::new(PlannedHook::integrated(out)));
    if cfg.monitor.enabled {
        hooks.push(Box::new(SamplerHook::default()));
    }
    if let Some(a) = crate::metrics::address(cfg, 0)? {
        hooks.push(Box::new(Metrics(crate::metrics::MetricsServer::start(
            cfg, a,
        )?)));
    }
    if cfg.record.counters != taillab_core::config::CounterMode::None {
        hooks.push(Box::new(CountersHook {
            mode: cfg.record.counters,
            counters: None,
        }));
    }
    if spec.roi != taillab_core::roi::RoiMode::None {
        hooks.push(Box::new(Roi {
            mode: spec.roi,
            before: Default::default(),
        }));
    }
    Ok(hooks)
}

/// The progress bar of a run long enough to wait on, drawn from the run's start (not while
/// its data is prepared).
struct Bar(Option<indicatif::ProgressBar>);

impl RunHook for Bar {
    fn start(&mut self, s: &mut Start) -> anyhow::Result<()> {
        self.0 = progress_bar(s.spec);
        Ok(())
    }
    fn interval(&mut self, p: &Progress) {
        if let Some(b) = &self.0 {
            b.set_length(p.expected_ns / 1_000_000);
            b.set_position((p.elapsed_ns / 1_000_000).min(p.expected_ns / 1_000_000));
            b.set_message(format!("{} requests", p.completed));
        }
    }
    fn end(&mut self, _: &mut End) -> anyhow::Result<()> {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
        Ok(())
    }
}

fn progress_bar(spec: &RunSpec) -> Option<indicatif::ProgressBar> {
    // Only for runs long enough to wait on; the bar redraws at most 20×/s
    // from the main thread, never from a worker.
    let expected_s = spec.expected_measure_ns() as f64 / 1e9;
    if expected_s < 1.0 {
        return None;
    }
    Some(crate::progress::bar(
        0,
        "{spinner} [{elapsed_precise}] {bar:40} {percent:>3}% eta {eta} {msg}",
        "run {percent:>3}% [{elapsed_precise}] eta {eta} {msg}",
        crate::progress::Pace {
            gap: std::time::Duration::from_secs(2),
            settle: std::time::Duration::ZERO,
        },
    ))
}

/// The planned hogs and knobs (and `record.profile`), stopped and restored at the end.
pub struct PlannedHook {
    planned: Option<Planned>,
    /// Where they start and what perf profiles (see the constructors).
    how: PlannedHow,
}

enum PlannedHow {
    /// Started just before the run into this folder; the hogs' window and perf on the
    /// workers from the measured phase on.
    Integrated(std::path::PathBuf),
    /// Started before the processes; their window and perf (on the server when this run
    /// started it) from the start: over TCP the server's warmup is not visible here.
    Coordinated { profile_first: bool },
}

impl PlannedHook {
    /// An integrated run's, writing into `out`.
    pub fn integrated(out: &Path) -> Self {
        PlannedHook {
            planned: None,
            how: PlannedHow::Integrated(out.to_path_buf()),
        }
    }

    /// A coordinated run's, already started (before its processes); `profile_first`: perf
    /// profiles the first process (the server, when the run started it).
    pub fn coordinated(p: Planned, profile_first: bool) -> Self {
        PlannedHook {
            planned: Some(p),
            how: PlannedHow::Coordinated { profile_first },
        }
    }
}

impl RunHook for PlannedHook {
    fn start(&mut self, s: &mut Start) -> anyhow::Result<()> {
        let p = match (&self.how, self.planned.take()) {
            (PlannedHow::Integrated(out), _) => Planned::start(s.cfg, out)?,
            (PlannedHow::Coordinated { profile_first }, Some(mut p)) => {
                let first = s.pids.first().copied().filter(|_| *profile_first);
                p.measured_start(|| PerfTarget::Pids(first.into_iter().collect()));
                p
            }
            (PlannedHow::Coordinated { .. }, None) => return Ok(()),
        };
        s.pids.extend(p.pids());
        self.planned = Some(p);
        Ok(())
    }
    fn measured(&mut self) {
        if let (Some(p), PlannedHow::Integrated(_)) = (&mut self.planned, &self.how) {
            p.measured_start(crate::planned::worker_tids);
        }
    }
    fn end(&mut self, e: &mut End) -> anyhow::Result<()> {
        if let Some(p) = self.planned.take() {
            p.finish(e.summary);
        }
        Ok(())
    }
    fn abandon(&mut self) {
        if let Some(p) = self.planned.take() {
            p.abandon();
        }
    }
}

/// The environment sampler: from just before the run to its end, then the `environment`
/// section and check over the measured window, and environment.json.
#[derive(Default)]
pub struct SamplerHook(Option<(taillab_monitor::Sampler, RunConfig)>);

impl RunHook for SamplerHook {
    fn start(&mut self, s: &mut Start) -> anyhow::Result<()> {
        let sampler = start_monitor(s.spec, s.cfg.monitor.period.0)?;
        for p in &s.pids {
            sampler.add_pid(*p);
        }
        s.foreign = Some(sampler.live_foreign());
        self.0 = Some((sampler, s.cfg.clone()));
        Ok(())
    }
    fn end(&mut self, e: &mut End) -> anyhow::Result<()> {
        let Some((sampler, cfg)) = self.0.take() else {
            return Ok(());
        };
        let (start, end) = measured_window(e.result, e.summary);
        attach_environment(
            sampler,
            (e.origin_ns + start, e.origin_ns + end),
            e.result.spec.interval_ns,
            e.summary,
            &thresholds(&cfg),
            cfg.monitor.max_stall.0,
            e.out,
        )
    }
}

/// A `taillab load`'s live endpoint: the sampler's foreign CPU once it runs (its progress
/// is the load's own to report).
pub struct ForeignOn(pub crate::metrics::ForeignSlot);

impl RunHook for ForeignOn {
    fn start(&mut self, s: &mut Start) -> anyhow::Result<()> {
        if let Some(f) = &s.foreign {
            self.0.watch(f.clone());
        }
        Ok(())
    }
}

/// The live metrics endpoint (`record.metrics`): progress as it comes, and the sampler's
/// foreign CPU once it runs.
struct Metrics(crate::metrics::MetricsServer);

impl RunHook for Metrics {
    fn start(&mut self, s: &mut Start) -> anyhow::Result<()> {
        if let Some(f) = &s.foreign {
            self.0.watch_foreign(f.clone());
        }
        Ok(())
    }
    fn interval(&mut self, p: &Progress) {
        self.0.update(p);
    }
}

/// `record.counters` on the worker threads, over the measured phase.
struct CountersHook {
    mode: taillab_core::config::CounterMode,
    counters: Option<taillab_counters::Counters>,
}

impl RunHook for CountersHook {
    fn measured(&mut self) {
        if self.counters.is_none() {
            self.counters = start_counters(self.mode);
        }
    }
    fn end(&mut self, e: &mut End) -> anyhow::Result<()> {
        if let Some(c) = self.counters.take() {
            e.summary.counters = Some(c.finish(e.result.totals.measured));
        }
        Ok(())
    }
}

/// Opens `record.counters` on the worker threads (at the measured phase's start). A host
/// without a PMU gets software counters and a note; a failure leaves the run without
/// counters, never stops it.
fn start_counters(mode: taillab_core::config::CounterMode) -> Option<taillab_counters::Counters> {
    use taillab_counters::{CounterMode, Counters, Target};
    match Counters::start(mode, &Target::threads_named("taillab-wrk-")) {
        Ok(c) => {
            if let Some(why) = c.as_ref().and_then(|c| c.note()) {
                let level = if mode == CounterMode::Hardware {
                    "warning"
                } else {
                    "note"
                };
                eprintln!("{level}: no hardware counters: {why}; counting software events (task clock, context switches, migrations, page faults) instead");
            }
            c
        }
        Err(e) => {
            eprintln!("warning: record.counters: {e}; the run continues without counters");
            None
        }
    }
}

/// `harness.roi`: the markers the run issued, counted from its start.
struct Roi {
    mode: taillab_core::roi::RoiMode,
    before: taillab_core::roi::RoiCounts,
}

impl RunHook for Roi {
    fn start(&mut self, _: &mut Start) -> anyhow::Result<()> {
        self.before = taillab_core::roi::emitted();
        Ok(())
    }
    fn end(&mut self, e: &mut End) -> anyhow::Result<()> {
        e.summary.roi = Some(taillab_core::sections::RoiSection {
            mode: self.mode,
            issued: taillab_core::roi::emitted().since(self.before),
        });
        Ok(())
    }
}
