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
use taillab_core::clock::WaitMode;
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
        rt_runtime: t.rt_runtime,
    }
}

/// Everything that must fail before anything starts: hog programs installed,
/// their CPUs allowed, knobs applicable, worker CPUs allowed, RT priority
/// (or the workers' nice value) permitted.
pub fn preflight(cfg: &RunConfig) -> anyhow::Result<()> {
    check_specs(&cfg.interference.hogs.0)?;
    tuning_of(cfg).validate()?;
    preflight::check_cpus("--cpus (harness.cpus)", &cfg.harness.cpus.0)?;
    preflight::check_cpus("--client-cpus (net.client_cpus)", &cfg.net.client_cpus.0)?;
    if cfg.harness.rt_priority > 0 {
        preflight::check_rt_priority(cfg.harness.rt_priority as i32)?;
    }
    rt_starvation(cfg)?;
    if let Some(n) = cfg.harness.nice {
        preflight::check_nice(n)?;
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

/// Refuses a run that could starve the host: with no real-time limit (`tuning.rt_runtime =
/// -1`) a SCHED_FIFO worker that spins never gives its CPU up, so workers that may cover every
/// online CPU would leave none for the kernel's threads, the monitor or a shell.
fn rt_starvation(cfg: &RunConfig) -> anyhow::Result<()> {
    let unlimited = cfg.tuning.rt_runtime.is_some_and(|r| r.0.is_none());
    let spin = Some(WaitMode::Spin);
    let spins = cfg.harness.wait == WaitMode::Spin || cfg.net.server_wait == spin;
    if !unlimited || cfg.harness.rt_priority == 0 || !spins {
        return Ok(());
    }
    let online = taillab_interfere::tuning::online_cpus().len().max(1);
    let pinned: std::collections::BTreeSet<usize> = cfg.harness.cpus.0.iter().copied().collect();
    let covered = if pinned.is_empty() {
        cfg.harness.threads
    } else {
        pinned.len().min(cfg.harness.threads)
    };
    if covered >= online {
        let place = if pinned.is_empty() {
            "on any CPU".to_string()
        } else {
            format!("on CPUs {}", cfg.harness.cpus)
        };
        anyhow::bail!(
            "tuning.rt_runtime = -1 with {} spinning SCHED_FIFO worker(s) {place} could take all {online} CPUs of this host and starve it; pin fewer workers than CPUs (--cpus) or keep the real-time limit",
            cfg.harness.threads,
        );
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

#[cfg(test)]
mod tests {
    use super::*;
    use taillab_core::config::{CpuList, RtRuntime};

    fn spinning(threads: usize, cpus: &[usize], rt_runtime: Option<u32>) -> RunConfig {
        let mut c = RunConfig::default();
        c.harness.threads = threads;
        c.harness.cpus = CpuList(cpus.to_vec());
        c.harness.rt_priority = 50;
        c.harness.wait = WaitMode::Spin;
        c.tuning.rt_runtime = Some(RtRuntime(rt_runtime));
        c
    }

    #[test]
    fn no_rt_limit_is_refused_for_spinning_workers_that_could_take_every_cpu() {
        let online = taillab_interfere::tuning::online_cpus().len().max(1);
        let e = rt_starvation(&spinning(online, &[], None)).unwrap_err();
        assert!(e.to_string().contains("starve"), "{e}");
        // Pinned to every CPU: the same.
        let all: Vec<usize> = taillab_interfere::tuning::online_cpus();
        assert!(rt_starvation(&spinning(online, &all, None)).is_err());
        // With the kernel's limit, or blocking workers, or no real-time priority: allowed.
        assert!(rt_starvation(&spinning(online, &[], Some(950_000))).is_ok());
        let mut blocking = spinning(online, &[], None);
        blocking.harness.wait = WaitMode::Block;
        assert!(rt_starvation(&blocking).is_ok());
        let mut normal = spinning(online, &[], None);
        normal.harness.rt_priority = 0;
        assert!(rt_starvation(&normal).is_ok());
        // One CPU left free: allowed.
        if online >= 2 {
            assert!(rt_starvation(&spinning(online, &all[1..], None)).is_ok());
        }
    }
}
