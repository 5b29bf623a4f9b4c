//! The environment monitor of a run: the sampler started for it (away from the workers'
//! CPUs), the limits it is judged by, and, at the end, the `environment` section and check over
//! the measured window (with the integrated harness's own stall item) and environment.json.
//! Used by the sampler's hook ([`crate::hooks`]) for every topology.

use anyhow::Context;
use std::path::Path;
use taillab_core::config::RunConfig;
use taillab_core::{RunSpec, Summary};

/// The environment check's limits of `cfg` (the workers' preemption not judged where planned
/// hogs share their CPUs).
pub(crate) fn thresholds(cfg: &RunConfig) -> taillab_monitor::Thresholds {
    let mut t = taillab_monitor::Thresholds {
        max_steal_pct: cfg.monitor.max_steal,
        max_foreign_pct: cfg.monitor.max_foreign,
        max_worker_invol_per_s: cfg.monitor.max_worker_preemptions,
        max_worker_runq_wait_pct: cfg.monitor.max_worker_runq_wait,
    };
    if hogs_share_worker_cpus(cfg) {
        // Planned interference on the workers' CPUs preempts them by design:
        // judge the host (steal, foreign CPU), not the workers' preemption.
        t.max_worker_invol_per_s = 1e12;
        t.max_worker_runq_wait_pct = 1e12;
    }
    t
}

/// Whether a planned hog may run on a CPU a worker runs on.
fn hogs_share_worker_cpus(cfg: &RunConfig) -> bool {
    let workers = &cfg.harness.cpus.0;
    cfg.interference.hogs.0.iter().any(|h| match &h.cpus {
        None => true,
        Some(c) => workers.is_empty() || c.0.iter().any(|x| workers.contains(x)),
    })
}

/// Starts the environment sampler for a run. Worker threads are found by
/// their name; when workers are pinned, the sampler goes to a CPU they do not
/// use (if there is one), so it never competes with them.
pub(crate) fn start_monitor(
    spec: &RunSpec,
    period_ns: u64,
) -> anyhow::Result<taillab_monitor::Sampler> {
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let pin_cpu = if spec.cpus.is_empty() {
        None
    } else {
        (0..ncpu).find(|c| !spec.cpus.contains(c))
    };
    let period = std::time::Duration::from_nanos(period_ns);
    let cfg = taillab_monitor::SamplerConfig {
        period,
        scan_period: period.max(std::time::Duration::from_secs(1)),
        pin_cpu,
        worker_name_prefix: Some("taillab-wrk-".into()),
        ..Default::default()
    };
    taillab_monitor::Sampler::start(cfg).map_err(|e| anyhow::anyhow!("environment monitor: {e}"))
}

/// The measured phase on the run's clock: from its start until its last
/// request completed.
pub(crate) fn measured_window(r: &taillab_core::RunResult, summary: &Summary) -> (u64, u64) {
    let start = r.measure_start;
    let end = if r.totals.last_completed > start {
        r.totals.last_completed
    } else {
        start + (summary.duration_s * 1e9) as u64
    };
    (start, end)
}

/// Stops the sampler with the run's measured window (on this host's clock),
/// adds `environment` and `checks.environment` to the summary and writes
/// `environment.json` (the time series, also re-bucketed to the interval
/// histograms' intervals).
pub(crate) fn attach_environment(
    sampler: taillab_monitor::Sampler,
    (start, end): (u64, u64),
    interval_ns: u64,
    summary: &mut Summary,
    th: &taillab_monitor::Thresholds,
    max_stall_ns: u64,
    out: &Path,
) -> anyhow::Result<()> {
    let report = sampler.stop_measured(start, end.max(start + 1))?;
    let mut check = taillab_monitor::EnvCheck::of(&report.summary, th);
    stall_item(summary, max_stall_ns, &mut check);
    let s = &report.summary;
    let verdict = if check.ok {
        let head = format!(
            "steal {:.2} %, other processes {:.1} % of a CPU",
            s.steal_pct, s.foreign_cpu_pct
        );
        std::iter::once(head)
            .chain(check.notes.iter().cloned())
            .collect::<Vec<_>>()
            .join("; ")
    } else {
        check.reasons.join("; ")
    };
    summary.checks.insert(
        "environment".to_string(),
        taillab_core::summary::Check::new(
            check.ok,
            verdict,
            serde_json::json!({ "reasons": check.reasons, "items": check.items, "thresholds": check.thresholds, "notes": check.notes }),
        ),
    );
    summary.environment = Some(s.clone());
    let series = serde_json::json!({
        "schema": "taillab.environment/1",
        "intervals": report.intervals(start, interval_ns),
        "report": report,
    });
    let path = out.join("environment.json");
    std::fs::write(&path, serde_json::to_string(&series)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Adds the `stall` item to the environment check of an integrated run: its
/// longest dispatch gap (`stalls` in the summary) against the larger of
/// `monitor.max_stall` and the service p50. The sampler can't see such a
/// freeze (it sleeps between samples, and the hypervisor did not count it as
/// steal); the records can.
fn stall_item(summary: &Summary, max_stall_ns: u64, check: &mut taillab_monitor::EnvCheck) {
    let Some(st) = &summary.stalls else {
        return;
    };
    let p50 = summary
        .latency_ns
        .get("service")
        .map_or(0.0, |m| m.p50 as f64);
    let limit = (max_stall_ns as f64).max(p50);
    let ok = (st.longest_ns as f64) <= limit;
    check.items.push(taillab_monitor::CheckItem {
        name: "stall".into(),
        value: st.longest_ns as f64 / 1e6,
        limit: limit / 1e6,
        unit: "ms".into(),
        ok,
    });
    if !ok {
        check.ok = false;
        check.reasons.push(format!(
            "the run stalled: no request started for {:.1} ms at {:.2} s into the measured phase although one was due and a worker free (limit {:.1} ms: the larger of monitor.max_stall and the service p50); {} gaps over 1 ms, {:.1} ms in all. The worker did not run: the VM froze (hypervisor steal does not show it) or something else held its CPU",
            st.longest_ns as f64 / 1e6,
            st.longest_at_s,
            limit / 1e6,
            st.over_1ms,
            st.over_1ms_total_ns as f64 / 1e6
        ));
    }
}

/// The environment lines of the human table, if the run was monitored.
pub fn env_lines(s: &Summary) -> String {
    let env = s
        .environment
        .as_ref()
        .map(|e| e.to_string())
        .unwrap_or_default();
    let counters = s
        .counters
        .as_ref()
        .map(|c| c.line() + "\n")
        .unwrap_or_default();
    env + &counters
}
