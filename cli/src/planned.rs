//! What an experiment plans on its host, around one run: tuning knobs held
//! for the run (restored afterwards, also after a failure or Ctrl-C),
//! background hogs started before warmup and stopped after the measured
//! phase, and a perf profile of the workers over the measured phase.
//!
//! The hogs' processes are the experiment's: their pids go to the
//! environment monitor, so they are reported under `environment.extra` and
//! never counted as foreign CPU, while anything else still is.

use serde_json::json;
use std::path::{Path, PathBuf};
use taillab_core::config::{ProfileMode, RunConfig};
use taillab_core::sections::planned::TuningRecord;
use taillab_core::summary::Check;
use taillab_core::Summary;
use taillab_interfere::{
    check_specs, preflight, profile::start_perf, InterfereOptions, Interference, PerfOptions,
    PerfTarget, Profile, ProfileOutcome, Tuning, TuningGuard,
};

/// The knobs of `cfg` as the interfere crate applies them.
fn tuning_of(cfg: &RunConfig) -> Tuning {
    let t = &cfg.tuning;
    Tuning {
        irq_cpus: (!t.irq_cpus.0.is_empty()).then(|| t.irq_cpus.clone()),
        dma_latency: t.dma_latency,
        thp: t.thp,
        numa_node: t.numa_node,
    }
}

/// Everything that must fail before anything starts: hog programs installed,
/// their CPUs allowed, knobs applicable, worker CPUs allowed, RT priority
/// permitted.
pub fn preflight(cfg: &RunConfig) -> anyhow::Result<()> {
    check_specs(&cfg.interference.hogs.0)?;
    tuning_of(cfg).validate()?;
    preflight::check_cpus("--cpus (harness.cpus)", &cfg.harness.cpus.0)?;
    preflight::check_cpus("--client-cpus (net.client_cpus)", &cfg.net.client_cpus.0)?;
    if cfg.harness.rt_priority > 0 {
        preflight::check_rt_priority(cfg.harness.rt_priority as i32)?;
    }
    if cfg.record.profile == ProfileMode::Perf {
        if let Some(why) = taillab_interfere::profile::perf_unavailable() {
            eprintln!(
                "note: record.profile = perf, but {why}; the run continues without a profile"
            );
        }
    }
    Ok(())
}

/// The planned part of one run, from before warmup to after the measured phase.
pub struct Planned {
    out: PathBuf,
    guard: Option<TuningGuard>,
    hogs: Option<Interference>,
    profile: ProfileMode,
    perf: Option<Profile>,
}

impl Planned {
    /// Applies the knobs and starts the hogs. Call on the thread that ends
    /// the run (the hogs' parent-death signal follows it).
    pub fn start(cfg: &RunConfig, out: &Path) -> anyhow::Result<Planned> {
        let t = tuning_of(cfg);
        let guard = if t.is_empty() { None } else { Some(t.apply()?) };
        let hogs = if cfg.interference.hogs.0.is_empty() {
            None
        } else {
            // Absolute: the hogs run in their own working directory.
            let dir = std::path::absolute(out.join("interference"))?;
            let opts = InterfereOptions {
                dir: Some(dir),
                ..Default::default()
            };
            Some(Interference::start_with(&cfg.interference.hogs.0, opts)?)
        };
        Ok(Planned {
            out: out.to_path_buf(),
            guard,
            hogs,
            profile: cfg.record.profile,
            perf: None,
        })
    }

    /// The hogs' processes (for the environment monitor).
    pub fn pids(&self) -> Vec<i32> {
        self.hogs.as_ref().map(|h| h.pids()).unwrap_or_default()
    }

    /// The measured phase begins: marks the hogs' window, starts perf on `target`.
    pub fn measured_start(&mut self, target: impl FnOnce() -> PerfTarget) {
        if let Some(h) = &self.hogs {
            h.mark_measured_start();
        }
        if self.profile == ProfileMode::Perf && self.perf.is_none() {
            self.perf = Some(start_perf(&target(), &self.out, &PerfOptions::default()));
        }
    }

    /// The measured phase is over: stops perf and the hogs, restores the
    /// knobs, and writes `interference`, `tuning` and `profile` into the
    /// summary (with `checks.interference` when hogs ran).
    pub fn finish(mut self, summary: &mut Summary) {
        if let Some(h) = &self.hogs {
            h.mark_measured_end();
        }
        match self.perf.take() {
            Some(Profile::Recording(r)) => {
                summary.profile = Some(r.finish());
            }
            Some(Profile::Skipped(why)) => {
                eprintln!("note: no profile: {why}");
                summary.profile = Some(ProfileOutcome::Skipped { reason: why });
            }
            None => {}
        }
        if let Some(h) = self.hogs.take() {
            let rep = h.stop();
            let verdict = if rep.ok {
                format!(
                    "{} ran as planned ({:.0} % of a CPU)",
                    describe(&rep.specs),
                    rep.cpu_pct
                )
            } else {
                rep.problems.join("; ")
            };
            summary.checks.insert(
                "interference".into(),
                Check::new(rep.ok, verdict, json!({})),
            );
            summary.interference = Some(rep);
        }
        if let Some(g) = self.guard.take() {
            let applied = g.applied().clone();
            let failed = g.restore();
            summary.tuning = Some(TuningRecord {
                applied,
                restore_failed: failed,
            });
        }
    }
}

impl Planned {
    /// A run that failed: stop everything and restore the knobs, keeping nothing.
    pub fn abandon(mut self) {
        if let Some(Profile::Recording(r)) = self.perf.take() {
            let _ = r.finish();
        }
        if let Some(h) = self.hogs.take() {
            let _ = h.stop();
        }
        if let Some(g) = self.guard.take() {
            for f in g.restore() {
                eprintln!("warning: {f}");
            }
        }
    }
}

fn describe(specs: &[taillab_core::config::InterfereSpec]) -> String {
    specs
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(" + ")
}

/// This process's worker threads (named `taillab-wrk-N`), for perf.
pub fn worker_tids() -> PerfTarget {
    let mut tids = Vec::new();
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.starts_with("taillab-wrk-") {
            if let Some(tid) = t.file_name().to_str().and_then(|n| n.parse().ok()) {
                tids.push(tid);
            }
        }
    }
    PerfTarget::Tids(tids)
}
