//! What happens around every integrated run — the live metrics endpoint, the progress bar,
//! the planned hogs and knobs, the environment sampler, the worker threads' counters and the
//! region-of-interest markers — as [`RunHook`]s that [`crate::runner::run_once`] calls in
//! turn: at the start, at every progress report, when the measured phase begins, and at the
//! end. The runner knows none of them by name; a new one is a type and a line in [`of`].
//!
//! Order matters where one hook hands another something: the planned hogs' processes go to
//! the sampler (it counts their CPU as the experiment's), and the sampler's live foreign-CPU
//! figure goes to the metrics endpoint. [`Start`] carries those forward, so [`of`] lists the
//! hooks in the order they must start; they end in the same order (the bar first, so nothing
//! prints over it).

use crate::planned::Planned;
use crate::runner::{attach_environment, measured_window, start_monitor, thresholds};
use std::path::Path;
use taillab_core::config::RunConfig;
use taillab_core::harness::Progress;
use taillab_core::{RunResult, RunSpec, Summary};

/// What a starting hook sees, and what it hands to the hooks after it.
pub struct Start<'a> {
    /// The run's configuration and spec.
    pub cfg: &'a RunConfig,
    /// The run's spec (workers placed).
    pub spec: &'a RunSpec,
    /// The run's folder.
    pub out: &'a Path,
    /// Processes of the experiment besides this one (the planned hogs): not foreign.
    pub pids: Vec<i32>,
    /// Other processes' CPU, live, once the sampler runs.
    pub foreign: Option<taillab_monitor::LiveForeign>,
}

/// Something that happens around every run (see the module docs).
pub trait RunHook {
    /// Just before the run (data prepared, server and client built).
    fn start(&mut self, _s: &mut Start) -> anyhow::Result<()> {
        Ok(())
    }
    /// Each progress report (every 20 ms, on the run's main thread).
    fn interval(&mut self, _p: &Progress) {}
    /// The measured phase began, as the progress reports tell.
    fn measured(&mut self) {}
    /// After the run: what it adds to the summary (and to the run's folder).
    fn end(&mut self, _r: &RunResult, _summary: &mut Summary, _out: &Path) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The hooks of an integrated run of `cfg`, in the order they start and end. The metrics
/// endpoint starts listening here, before any data is prepared (a port in use stops the run
/// before it costs anything).
pub fn of(
    cfg: &RunConfig,
    spec: &RunSpec,
    show_progress: bool,
) -> anyhow::Result<Vec<Box<dyn RunHook>>> {
    let mut hooks: Vec<Box<dyn RunHook>> = Vec::new();
    if let Some(bar) = progress_bar(spec, !show_progress) {
        hooks.push(Box::new(Bar(bar)));
    }
    hooks.push(Box::new(PlannedHook(None)));
    if cfg.monitor.enabled {
        hooks.push(Box::new(SamplerHook(None)));
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
            before: taillab_core::roi::emitted(),
        }));
    }
    Ok(hooks)
}

/// The progress bar of a run long enough to wait on.
struct Bar(indicatif::ProgressBar);

impl RunHook for Bar {
    fn interval(&mut self, p: &Progress) {
        self.0.set_length(p.expected_ns / 1_000_000);
        self.0
            .set_position((p.elapsed_ns / 1_000_000).min(p.expected_ns / 1_000_000));
        self.0.set_message(format!("{} requests", p.completed));
    }
    fn end(&mut self, _: &RunResult, _: &mut Summary, _: &Path) -> anyhow::Result<()> {
        self.0.finish_and_clear();
        Ok(())
    }
}

fn progress_bar(spec: &RunSpec, quiet: bool) -> Option<indicatif::ProgressBar> {
    // Only for runs long enough to wait on; the bar redraws at most 20×/s
    // from the main thread, never from a worker.
    let expected_s = spec.expected_measure_ns() as f64 / 1e9;
    if quiet || expected_s < 1.0 {
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

/// The planned hogs and knobs (and `record.profile`): started just before the run, the hogs'
/// window and perf from the measured phase on, stopped and restored at the end.
struct PlannedHook(Option<Planned>);

impl RunHook for PlannedHook {
    fn start(&mut self, s: &mut Start) -> anyhow::Result<()> {
        let p = Planned::start(s.cfg, s.out)?;
        s.pids.extend(p.pids());
        self.0 = Some(p);
        Ok(())
    }
    fn measured(&mut self) {
        if let Some(p) = &mut self.0 {
            p.measured_start(crate::planned::worker_tids);
        }
    }
    fn end(&mut self, _: &RunResult, summary: &mut Summary, _: &Path) -> anyhow::Result<()> {
        if let Some(p) = self.0.take() {
            p.finish(summary);
        }
        Ok(())
    }
}

/// The environment sampler: from just before the run to its end, then the `environment`
/// section and check over the measured window, and environment.json.
struct SamplerHook(Option<(taillab_monitor::Sampler, RunConfig)>);

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
    fn end(&mut self, r: &RunResult, summary: &mut Summary, out: &Path) -> anyhow::Result<()> {
        let Some((sampler, cfg)) = self.0.take() else {
            return Ok(());
        };
        let window = measured_window(r, summary);
        attach_environment(
            sampler,
            window,
            r.spec.interval_ns,
            summary,
            &thresholds(&cfg),
            cfg.monitor.max_stall.0,
            out,
        )
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
    fn end(&mut self, r: &RunResult, summary: &mut Summary, _: &Path) -> anyhow::Result<()> {
        if let Some(c) = self.counters.take() {
            summary.counters = Some(c.finish(r.totals.measured));
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
    fn end(&mut self, _: &RunResult, summary: &mut Summary, _: &Path) -> anyhow::Result<()> {
        summary.roi = Some(taillab_core::sections::RoiSection {
            mode: self.mode,
            issued: taillab_core::roi::emitted().since(self.before),
        });
        Ok(())
    }
}
