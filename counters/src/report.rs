//! The `counters` section of `summary.json`: counts per thread and in all,
//! and the figures derived from them.
//!
//! Schema `taillab.counters/1`:
//! `{schema, requested, kind: hardware|software, note?, scope, requests,
//! phase_s, threads: [{tid, name, counts{event: n}, running_fraction{event: f}}],
//! total{event: n}, derived{...}, missing{event: why}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::events::Event;

/// A thread to count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Kernel thread id.
    pub tid: i32,
    /// Thread name (`comm`).
    pub name: String,
}

impl Target {
    /// This process's threads whose name starts with `prefix` (the harness
    /// names its workers `taillab-wrk-N`), by thread id.
    pub fn threads_named(prefix: &str) -> Vec<Target> {
        let mut v: Vec<Target> = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| {
                let tid = t.file_name().to_str()?.parse().ok()?;
                let name = std::fs::read_to_string(t.path().join("comm")).ok()?;
                let name = name.trim_end().to_string();
                name.starts_with(prefix).then_some(Target { tid, name })
            })
            .collect();
        v.sort_by_key(|t| t.tid);
        v
    }
}

/// One thread's raw readings: event → (count, time enabled ns, time running ns).
pub(crate) struct Reading {
    pub target: Target,
    pub per_event: BTreeMap<Event, (u64, u64, u64)>,
}

/// One worker thread's counts.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
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
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CountersReport {
    /// `taillab.counters/1`.
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

/// `count × enabled ÷ running`: the kernel's estimate for a multiplexed
/// event (exact when it ran the whole time); 0 when it never ran.
fn scaled(count: u64, enabled: u64, running: u64) -> f64 {
    if running == 0 {
        0.0
    } else if running >= enabled {
        count as f64
    } else {
        count as f64 * enabled as f64 / running as f64
    }
}

impl Derived {
    /// From the totals over `threads_s` thread-seconds (threads × phase), a
    /// phase of `phase_s` seconds and `requests` measured requests.
    pub fn from_totals(
        total: &BTreeMap<String, f64>,
        threads_s: f64,
        phase_s: f64,
        requests: u64,
    ) -> Derived {
        let get = |e: Event| total.get(e.name()).copied();
        let ratio = |a: Option<f64>, b: Option<f64>, k: f64| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => Some(k * a / b),
            _ => None,
        };
        let per = |a: Option<f64>, d: f64| a.filter(|_| d > 0.0).map(|a| a / d);
        let instr = get(Event::Instructions);
        let req = (requests > 0).then_some(requests as f64);
        let task_s = get(Event::TaskClock).map(|ns| ns / 1e9);
        Derived {
            ipc: ratio(instr, get(Event::Cycles), 1.0),
            l1i_mpki: ratio(get(Event::L1iMisses), instr, 1000.0),
            l1d_mpki: ratio(get(Event::L1dMisses), instr, 1000.0),
            llc_mpki: ratio(get(Event::LlcMisses), instr, 1000.0),
            branch_mpki: ratio(get(Event::BranchMisses), instr, 1000.0),
            instructions_per_request: ratio(instr, req, 1.0),
            cpu_utilization: per(task_s, threads_s),
            cpu_us_per_request: ratio(task_s, req, 1e6),
            context_switches_per_s: per(get(Event::ContextSwitches), phase_s),
            cpu_migrations_per_s: per(get(Event::CpuMigrations), phase_s),
            page_faults_per_s: per(get(Event::PageFaults), phase_s),
        }
    }
}

impl CountersReport {
    /// `head` (schema, mode, kind, note, scope, requests, phase and missing
    /// events filled in) completed with the readings: per-thread and total
    /// counts and the derived figures.
    pub(crate) fn with_readings(mut self, readings: Vec<Reading>) -> CountersReport {
        for r in readings {
            let mut t = ThreadCounts {
                tid: r.target.tid,
                name: r.target.name,
                ..Default::default()
            };
            for (ev, (count, enabled, running)) in r.per_event {
                let v = scaled(count, enabled, running);
                t.counts.insert(ev.name().into(), v);
                let frac = if enabled > 0 {
                    running as f64 / enabled as f64
                } else {
                    0.0
                };
                t.running_fraction.insert(ev.name().into(), frac.min(1.0));
                *self.total.entry(ev.name().into()).or_default() += v;
            }
            self.threads.push(t);
        }
        let threads_s = self.phase_s * self.threads.len() as f64;
        self.derived = Derived::from_totals(&self.total, threads_s, self.phase_s, self.requests);
        self
    }

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multiplexed_counts_are_scaled_and_never_divide_by_zero() {
        assert_eq!(scaled(100, 10, 10), 100.0);
        assert_eq!(scaled(100, 10, 5), 200.0);
        assert_eq!(scaled(100, 10, 0), 0.0);
    }

    #[test]
    fn derived_figures_follow_their_definitions() {
        let total: BTreeMap<String, f64> = [
            ("instructions", 4e9),
            ("cycles", 2e9),
            ("l1i_misses", 8e6),
            ("branch_misses", 4e6),
            ("task_clock_ns", 1.5e9),
            ("context_switches", 300.0),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let d = Derived::from_totals(&total, 3.0, 2.0, 1000);
        assert_eq!(d.ipc, Some(2.0));
        assert_eq!(d.l1i_mpki, Some(2.0));
        assert_eq!(d.branch_mpki, Some(1.0));
        assert_eq!(d.l1d_mpki, None);
        assert_eq!(d.instructions_per_request, Some(4e6));
        assert_eq!(d.cpu_utilization, Some(0.5));
        assert_eq!(d.cpu_us_per_request, Some(1500.0));
        assert_eq!(d.context_switches_per_s, Some(150.0));
    }
}
