//! The monitor's figures per interval, aligned with the harness's interval histograms
//! ([`MonitorReport::intervals`]).

use super::*;

/// Environment figures over one aligned interval (see [`MonitorReport::intervals`]).
#[derive(Debug, Clone, Default, Serialize)]
pub struct IntervalEnv {
    /// Interval start, ns on `CLOCK_MONOTONIC`.
    pub start_mono_ns: u64,
    /// Seconds of samples that fell into the interval.
    pub covered_s: f64,
    /// Hypervisor steal, % of one CPU (summed over CPUs), time-weighted mean.
    pub steal_pct: f64,
    /// CPU of processes outside the experiment, % of one CPU, time-weighted mean.
    pub foreign_cpu_pct: f64,
    /// Host busy CPU (user + nice + system + irq + softirq), % of one CPU.
    pub host_busy_pct: f64,
    /// This process's CPU, % of one CPU, time-weighted mean.
    pub harness_cpu_pct: f64,
    /// Involuntary context switches of all worker threads in the interval.
    pub worker_invol_cs: u64,
    /// Mean run-queue wait of the worker threads, % of the interval.
    pub worker_runq_wait_pct: f64,
}

impl MonitorReport {
    /// Re-buckets the samples into intervals of `width_ns` starting at
    /// `origin_ns` (e.g. the start time and width of the interval
    /// histograms), so environment and latency can be plotted on one axis.
    /// A sample is assigned to the interval holding its midpoint.
    pub fn intervals(&self, origin_ns: u64, width_ns: u64) -> Vec<IntervalEnv> {
        let workers: BTreeSet<i32> = self
            .threads
            .iter()
            .filter(|t| t.worker)
            .map(|t| t.tid)
            .collect();
        let mut out: Vec<IntervalEnv> = Vec::new();
        if width_ns == 0 {
            return out;
        }
        for s in &self.samples {
            let mid = s.t_mono_ns.saturating_sub((s.dt_s * 5e8) as u64);
            if mid < origin_ns {
                continue;
            }
            let k = ((mid - origin_ns) / width_ns) as usize;
            while out.len() <= k {
                let start = origin_ns + out.len() as u64 * width_ns;
                out.push(IntervalEnv {
                    start_mono_ns: start,
                    ..Default::default()
                });
            }
            let iv = &mut out[k];
            let w = s.dt_s;
            iv.covered_s += w;
            iv.steal_pct += s.host.steal_pct * w;
            iv.foreign_cpu_pct += s.foreign_cpu_pct * w;
            iv.host_busy_pct += s.host.busy_pct * w;
            iv.harness_cpu_pct += s.harness.cpu_pct * w;
            let ws: Vec<&ThreadSample> = s
                .threads
                .iter()
                .filter(|t| workers.contains(&t.tid))
                .collect();
            iv.worker_invol_cs += ws.iter().map(|t| t.invol_cs).sum::<u64>();
            if !ws.is_empty() {
                iv.worker_runq_wait_pct +=
                    ws.iter().map(|t| t.runq_wait_pct).sum::<f64>() / ws.len() as f64 * w;
            }
        }
        for iv in &mut out {
            if iv.covered_s > 0.0 {
                let c = iv.covered_s;
                iv.steal_pct /= c;
                iv.foreign_cpu_pct /= c;
                iv.host_busy_pct /= c;
                iv.harness_cpu_pct /= c;
                iv.worker_runq_wait_pct /= c;
            }
        }
        out
    }
}
