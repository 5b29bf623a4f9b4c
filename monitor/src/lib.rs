//! taillab-monitor: what else was happening on the host while a run measured.
//!
//! A tail latency is only evidence about a server if the CPUs it ran on were
//! the server's. On shared VMs they often are not: the hypervisor's steal
//! time on our 2-vCPU development VMs swings between 0 % and 78 % of a CPU
//! from minute to minute, and other processes compete for the cores. No load
//! tester we compared (TailBench, wrk2, mutilate, Lancet) records either, so
//! their users cannot tell a slow server from a stolen CPU. taillab records
//! both for every run and marks disturbed runs:
//!
//! - [`Sampler`] (module [`sampler`]): one low-priority thread reading
//!   `/proc` every 100 ms during a run — host steal and CPU split, context
//!   switches and interrupts, load, the harness's own CPU, RSS, faults and
//!   context switches per thread (with run-queue wait), extra processes, and
//!   the foreign processes by name. Its [`MonitorReport`] holds a time series
//!   on the harness's monotonic clock and an [`EnvSummary`] over the
//!   measured phase.
//! - [`EnvCheck::of`] (module [`summary`]): the verdict
//!   `checks.environment`, with the limits and why they are what they are.
//!   [`EnvSummary`] itself, the `environment` section of `summary.json`, is
//!   plain data in `taillab_core::sections` (re-exported here) so that the
//!   run's summary holds it typed.
//! - [`SystemReport`] and [`Tuner`] (module [`system`]): `taillab system
//!   show|tune|reset`.
//! - [`procfs`]: the parsers, tested against captured files in `tests/data`.
//!
//! ```no_run
//! use taillab_monitor::{EnvCheck, Sampler, SamplerConfig, Thresholds};
//! let sampler = Sampler::start(SamplerConfig::default())?;
//! // ... warm up; each worker thread calls taillab_monitor::register_worker_thread() ...
//! sampler.mark_measured_start();
//! // ... measure ...
//! sampler.mark_measured_end();
//! let report = sampler.stop()?;
//! let check = EnvCheck::of(&report.summary, &Thresholds::default());
//! if !check.ok { eprintln!("{check}"); }
//! # Ok::<(), taillab_monitor::MonitorError>(())
//! ```

#![warn(missing_docs)]
pub mod error;
pub mod procfs;
pub mod sample;
pub mod sampler;
pub mod summary;
pub mod system;

pub use error::MonitorError;
pub use sample::{ChildProcess, ForeignProcess, Phase, Sample, SamplerCost};
pub use sampler::{
    register_worker_thread, unregister_worker_thread, IntervalEnv, LiveForeign, MonitorReport,
    Sampler, SamplerConfig,
};
pub use summary::{
    summarize, CheckItem, EnvCheck, EnvSummary, ProcTotals, ThreadTotals, Thresholds,
};
pub use system::{
    default_run_journal_path, default_state_path, Damon, OpState, ResetLine, SetOutcome,
    SystemReport, Tuner,
};
