//! taillab-interfere: load and settings an experiment *plans*, as opposed to
//! the foreign load the environment monitor detects.
//!
//! A server's tail is made by what shares its host as much as by its own
//! code: a CPU hog on a worker's core, memory or disk traffic, interrupts
//! routed to the wrong core, a core waking from a deep C-state. To study
//! those causes one has to produce them on purpose, hold them steady during
//! the measured phase, record what they used — and leave the host as it
//! was. This crate does that:
//!
//! - [`Interference`] (module [`interference`]): stress-ng and iperf3 hogs
//!   from [`InterfereSpec`]s such as `cpu:1@cpus=0`; their pids for the
//!   monitor; an [`InterferenceReport`] of what they used and whether any
//!   died early; none of their processes outlives the run ([`contain`]).
//! - [`Tuning`] (module [`tuning`]): IRQ affinity, a C-state limit, THP mode
//!   and NUMA memory binding for one run, restored by a [`TuningGuard`]
//!   (and from a journal after a SIGKILL).
//! - [`usage`]: what a process used between two moments (CPU, peak RSS,
//!   faults, context switches, I/O bytes), the rows of a resource table.
//! - [`profile`]: `perf record` of chosen threads into a folded-stack file
//!   and a flame graph.
//! - [`preflight`]: the checks that must fail before anything starts.
//! - [`signals`]: Ctrl-C restores the host too.
//!
//! ```no_run
//! use taillab_interfere::{Interference, InterfereSpec, Tuning};
//! let specs: Vec<InterfereSpec> = vec!["cpu:1@cpus=0".parse()?];
//! taillab_interfere::signals::install()?;           // once, in main
//! let tuning: Tuning = Tuning::default();           // from the configuration
//! let guard = tuning.apply()?;                       // before the workers start
//! let hogs = Interference::start(&specs)?;           // before warmup
//! let pids = hogs.pids();                            // -> Sampler::add_pid each
//! hogs.mark_measured_start();                        // when warmup ends
//! hogs.mark_measured_end();                          // when the measured phase ends
//! let report = hogs.stop();                          // -> summary.json "interference"
//! drop(guard);                                       // knobs restored
//! # let _ = (pids, report);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs)]
pub mod contain;
pub mod interference;
pub mod preflight;
pub mod profile;
pub mod signals;
pub mod spec;
pub mod tuning;
pub mod usage;

pub use interference::{
    check_specs, HogProcess, HogReport, InterfereError, InterfereOptions, Interference,
    InterferenceReport, REPORT_SCHEMA,
};
pub use preflight::PreflightError;
pub use profile::{PerfOptions, PerfTarget, Profile, ProfileMode, ProfileOutcome};
pub use spec::{Class, CpuList, InterfereSet, InterfereSpec};
pub use tuning::{
    AppliedTuning, DmaLatency, KnobState, NumaNode, RtRuntime, ThpMode, Tuning, TuningError,
    TuningGuard,
};
pub use usage::{ProcessUsage, UsageSnapshot};
