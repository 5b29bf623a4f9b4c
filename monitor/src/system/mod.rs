//! What this host is, whether it is fit for tail measurements right now, and
//! the settings that can make it fitter (`taillab system show|tune|reset`).
//!
//! [`SystemReport::collect`] records what changes a tail: the CPU and how
//! many cores are online, SMT (siblings share execution units), the kernel,
//! the frequency governor and turbo (a core that changes frequency changes
//! service times), `sched_rt_runtime_us` (real-time threads are throttled
//! for 5 % of every second unless it is -1), this process's timer slack
//! (sleeps are rounded up by it), transparent huge pages (khugepaged and
//! compaction stalls), the clock source (reading a non-TSC clock costs
//! microseconds), the cpuidle driver (a VM without one halts idle vCPUs at
//! once, and every wake-up then costs tens of microseconds), and — measured over a short window with the same
//! [`Sampler`] the runs use — steal and foreign CPU use with the processes
//! that cause it. [`SystemReport::warnings`] turns these into reasons not to
//! measure now.
//!
//! [`Tuner`] applies the settings one operation at a time, like pyperf's
//! `system tune`: every operation can be shown and applied, each prior value
//! is saved in a state file before it is changed, and `reset` writes the
//! saved values back. What a VM does not expose (no cpufreq on most cloud
//! guests) is skipped with a message saying so, never an error.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::MonitorError;
use crate::procfs;
use crate::sample::ForeignProcess;
use crate::sampler::{Sampler, SamplerConfig};
use crate::summary::Thresholds;

mod report;
#[cfg(test)]
mod tests;
mod tune;

pub use report::*;
pub use tune::*;
