//! The `counters` section of `summary.json` from the readings: counts per
//! thread and in all, and the figures derived from them. The section's types
//! live in `taillab_core::sections::counters` (re-exported here).

use std::collections::BTreeMap;

use crate::events::Event;
pub use taillab_core::sections::counters::{
    CountersReport, Derived, ThreadCounts, COUNTERS_SCHEMA,
};

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

/// The derived figures from the totals over `threads_s` thread-seconds
/// (threads × phase), a phase of `phase_s` seconds and `requests` measured requests.
pub fn derive(
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

/// `head` (schema, mode, kind, note, scope, requests, phase and missing
/// events filled in) completed with the readings: per-thread and total
/// counts and the derived figures.
pub(crate) fn with_readings(mut head: CountersReport, readings: Vec<Reading>) -> CountersReport {
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
            *head.total.entry(ev.name().into()).or_default() += v;
        }
        head.threads.push(t);
    }
    let threads_s = head.phase_s * head.threads.len() as f64;
    head.derived = derive(&head.total, threads_s, head.phase_s, head.requests);
    head
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
        let d = derive(&total, 3.0, 2.0, 1000);
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
