//! taillab-counters: what the CPU did for each worker thread over the
//! measured phase (`record.counters`, `--counters`).
//!
//! Latency says how long a request took; counters say why: instructions per
//! cycle (IPC) and misses per thousand instructions (MPKI) in the L1
//! instruction and data caches, the last-level cache and the branch
//! predictor are how the microarchitecture papers on latency-critical
//! services characterise their apps (one table, apps side by side). taillab
//! opens the counters with `perf_event_open` (through the `perf-event2`
//! crate) on each worker thread (`taillab-wrk-N`) when the measured phase
//! begins and reads them after the workers finished, so warmup and data
//! preparation are not in them. `summary.json` gets a `counters` section
//! ([`CountersReport`]); `taillab report` shows all apps side by side.
//!
//! # Without a hardware PMU
//! Many VMs have no virtual PMU (no `/sys/bus/event_source/devices/cpu`;
//! opening a hardware event fails with `ENOENT`). Then the run continues
//! with the kernel's *software* counters — task clock (CPU time),
//! context switches, CPU migrations, page faults — and the report says why
//! the hardware ones are missing ([`hardware_unavailable`]). Software
//! counters are always counted, next to the hardware ones.
//!
//! # What the counts cover
//! Each worker thread from the measured phase's start (seen by the runner's
//! progress callback, within 20 ms) until the thread exits, which is when
//! the last measured request it served completed. The harness's own work
//! on that thread is included: claiming requests and waiting for their
//! arrival. With `harness.wait = spin` or `hybrid` a worker spins while it
//! waits, and spinning retires instructions at a high IPC; use
//! `--wait block` when the counters should describe the app alone (the
//! task clock then says how much of the phase the worker was busy).
//! Counts of events the PMU multiplexed are scaled by enabled/running time,
//! and the running fraction is reported.
//!
//! # Privileges
//! Counting a thread of one's own process is allowed at
//! `kernel.perf_event_paranoid` ≤ 2 for user-mode events; kernel-mode
//! events need ≤ 1 or CAP_PERFMON. Events are opened counting user and
//! kernel mode, and fall back to user mode only (reported as `scope`).

#![warn(missing_docs)]

mod events;
mod report;
mod session;

pub use events::Event;
pub use report::{derive, CountersReport, Derived, Target, ThreadCounts, COUNTERS_SCHEMA};
pub use session::{hardware_unavailable, Counters};
pub use taillab_core::config::CounterMode;

/// Why counters could not be started at all.
#[derive(Debug, thiserror::Error)]
pub enum CountersError {
    /// No worker thread to count.
    #[error("no worker threads to count (threads named taillab-wrk-N); the run has none yet?")]
    NoThreads,
    /// Not even software counters open.
    #[error("perf_event_open failed for every counter ({0}); check kernel.perf_event_paranoid (`sysctl kernel.perf_event_paranoid`, 2 or lower lets a process count its own threads) or run without --counters")]
    Unavailable(String),
}
