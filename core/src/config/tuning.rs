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

crate::serde_as_display!(DmaLatency, NumaNode);

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
