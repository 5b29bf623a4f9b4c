//! `counters`: hardware and software counters of the worker threads over the
//! measured phase (`record.counters`), as taillab-counters reads them.
//!
//! Schema [`COUNTERS_SCHEMA`]:
//! `{schema, requested, kind: hardware|software, note?, scope, requests,
//! phase_s, threads: [{tid, name, counts{event: n}, running_fraction{event: f}}],
//! total{event: n}, derived{...}, missing{event: why}}`.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The `schema` of the `counters` section. History: `taillab.counters/1` — first version.
pub const COUNTERS_SCHEMA: &str = "taillab.counters/1";

/// One worker thread's counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ThreadCounts {
    /// Kernel thread id.
    pub tid: i32,
    /// Thread name.
    pub name: String,
    /// Event → count, scaled by enabled/running time when multiplexed.
    pub counts: BTreeMap<String, f64>,
    /// Event → the fraction of the enabled time it was on the PMU (1 unless
    /// the PMU multiplexed more events than it has counters).
    pub running_fraction: BTreeMap<String, f64>,
}

/// Figures derived from the counts over all worker threads; absent when
/// their events were not counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct Derived {
    /// Instructions per cycle.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
    /// L1 instruction-cache misses per 1000 instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1i_mpki: Option<f64>,
    /// L1 data-cache misses per 1000 instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1d_mpki: Option<f64>,
    /// Last-level-cache misses per 1000 instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llc_mpki: Option<f64>,
    /// Branch mispredictions per 1000 instructions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_mpki: Option<f64>,
    /// Instructions per measured request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instructions_per_request: Option<f64>,
    /// Mean fraction of the counted time a worker was on a CPU (task clock ÷
    /// (threads × `phase_s`)).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_utilization: Option<f64>,
    /// Worker CPU time per measured request, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_us_per_request: Option<f64>,
    /// Context switches of all workers per second of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_switches_per_s: Option<f64>,
    /// CPU migrations of all workers per second of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_migrations_per_s: Option<f64>,
    /// Page faults of all workers per second of the phase.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults_per_s: Option<f64>,
}

/// The `counters` section of `summary.json`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct CountersReport {
    /// [`COUNTERS_SCHEMA`].
    pub schema: String,
    /// The mode asked for (`record.counters`).
    pub requested: String,
    /// `hardware` (PMU events and software events) or `software`.
    pub kind: String,
    /// Why hardware counters were wanted but not counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// `user+kernel`, or `user` when kernel-mode counting was not permitted.
    pub scope: String,
    /// Measured requests of the run.
    pub requests: u64,
    /// Wall time counted: from the measured phase's start until the
    /// counters were read, after the workers ended, s.
    pub phase_s: f64,
    /// Per worker thread.
    pub threads: Vec<ThreadCounts>,
    /// Event → count over all worker threads.
    pub total: BTreeMap<String, f64>,
    /// IPC, MPKI and rates.
    pub derived: Derived,
    /// Events that could not be opened or read, with the first error.
    #[serde(default)]
    pub missing: BTreeMap<String, String>,
}

impl CountersReport {
    /// One line for the human run table.
    pub fn line(&self) -> String {
        let d = &self.derived;
        let f = |name: &str, v: Option<f64>, prec: usize| v.map(|v| format!("{name} {v:.prec$}"));
        let parts: Vec<String> = if self.kind == "hardware" {
            [
                f("IPC", d.ipc, 2),
                f("L1I MPKI", d.l1i_mpki, 2),
                f("L1D MPKI", d.l1d_mpki, 2),
                f("LLC MPKI", d.llc_mpki, 2),
                f("branch MPKI", d.branch_mpki, 2),
            ]
            .into_iter()
            .flatten()
            .collect()
        } else {
            [
                d.cpu_utilization
                    .map(|u| format!("workers on CPU {:.0} %", 100.0 * u)),
                f("CPU µs/request", d.cpu_us_per_request, 1),
                f("ctx switches/s", d.context_switches_per_s, 0),
                f("page faults/s", d.page_faults_per_s, 0),
            ]
            .into_iter()
            .flatten()
            .collect()
        };
        format!(
            "counters ({}, {} threads{}): {}",
            self.kind,
            self.threads.len(),
            if self.note.is_some() {
                ", no hardware PMU"
            } else {
                ""
            },
            parts.join(", ")
        )
    }
}
