//! Values of the per-run host settings (section `tuning`) and of profiling
//! (`record.profile`); `taillab-interfere` applies and restores them.

use super::value::ConfigValue;
use std::fmt;
use std::str::FromStr;

crate::names_enum! {
    /// `transparent_hugepage/enabled` for a run.
    pub enum ThpMode ("THP mode") {
        /// Huge pages wherever possible.
        Always = "always",
        /// Only where a program asks (madvise).
        Madvise = "madvise",
        /// Never.
        Never = "never",
    }
}

crate::names_enum! {
    /// Profiling during the measured phase.
    #[derive(Default)]
    pub enum ProfileMode ("profile") {
        /// No profile.
        #[default]
        Off = "off",
        /// `perf record -g` of the workers, written as a folded-stack file and a flame graph.
        Perf = "perf",
    }
}

/// A C-state limit: the longest wake-up latency, in µs, the CPUs may have
/// (`0`: stay in C0/C1, no deep sleep), held through `/dev/cpu_dma_latency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DmaLatency(pub u32);

impl FromStr for DmaLatency {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        let t = s.trim().trim_end_matches("us").trim_end_matches("µs");
        t.parse::<u32>()
            .ok()
            .filter(|v| *v <= 2_000_000_000)
            .map(DmaLatency)
            .ok_or_else(|| crate::error::ValueError::not(s, <Self as ConfigValue>::FORM))
    }
}

impl fmt::Display for DmaLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.0)
    }
}

/// The real-time runtime limit held for a run (`/proc/sys/kernel/sched_rt_runtime_us`): the
/// µs of each period (`sched_rt_period_us`, 1 s by default) that real-time threads may run
/// before the kernel throttles them for the rest of it, or `None` for no limit (the kernel's
/// `-1`). The kernel's default, 950000 of 1000000, lets a SCHED_FIFO worker that spins run
/// 950 ms and stops it for 50 ms every second (TailWAG Fig. 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RtRuntime(pub Option<u32>);

impl RtRuntime {
    /// The value as the kernel's file takes it: `-1` or the µs.
    pub fn kernel(&self) -> String {
        self.0.map_or("-1".into(), |v| v.to_string())
    }
}

impl FromStr for RtRuntime {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        crate::error::ValueError::wrap(s, || {
            let t = s.trim();
            if t == "-1" || t == "unlimited" {
                return Ok(RtRuntime(None));
            }
            t.trim_end_matches("us")
                .trim_end_matches("µs")
                .parse::<u32>()
                .ok()
                .filter(|v| *v <= 2_000_000_000)
                .map(|v| RtRuntime(Some(v)))
                .ok_or_else(|| {
                    format!("bad real-time runtime `{s}`: expected microseconds of each period like 950000, or -1 for no limit")
                })
        })
    }
}

impl fmt::Display for RtRuntime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}us"),
            None => f.write_str("-1"),
        }
    }
}

/// A NUMA node number for binding workers' memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NumaNode(pub u32);

impl FromStr for NumaNode {
    type Err = crate::error::ValueError;
    fn from_str(s: &str) -> Result<Self, crate::error::ValueError> {
        s.trim()
            .trim_start_matches("node")
            .parse::<u32>()
            .ok()
            .filter(|n| *n < 1024)
            .map(NumaNode)
            .ok_or_else(|| crate::error::ValueError::not(s, <Self as ConfigValue>::FORM))
    }
}

impl fmt::Display for NumaNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

crate::serde_as_display!(DmaLatency, NumaNode, RtRuntime);

impl ConfigValue for DmaLatency {
    const FORM: &'static str = "a C-state limit in microseconds like 0 or 10us";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for NumaNode {
    const FORM: &'static str = "a NUMA node number like 0";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}

impl ConfigValue for RtRuntime {
    const FORM: &'static str = "µs of each real-time period like 950000, or -1 for no limit";
    fn parse(s: &str) -> Result<Self, crate::error::ValueError> {
        s.parse()
    }
    fn show(&self) -> String {
        self.to_string()
    }
}
