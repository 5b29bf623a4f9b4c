//! The short human table printed after a run.

use super::*;

/// Width of the row names of [`human_table`]: every row lines up under the header.
pub(super) const ROW: usize = 16;

/// The short human table printed after a run: one verdict line first, then what ran, the
/// latency rows (a quantity the run did not measure says so instead of reading 0), the ideal
/// and its excess, and every check.
pub fn human_table(s: &Summary) -> String {
    let mut o = verdict_line(s);
    o.push_str(&run_lines(s));
    o.push_str(&format!(
        "{:<ROW$}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}{:>11}\n",
        "", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"
    ));
    let external = s.transport.as_ref().is_some_and(|t| !t.server_timed);
    for m in METRICS {
        let Some(x) = s.latency_ns.get(m) else {
            continue;
        };
        if m.ends_with("recv_lag") && x.max == 0 {
            // No socket (integrated) or no kernel stamps: nothing to show.
            continue;
        }
        if external && matches!(m, "service" | "queue" | "server_recv_lag") {
            o.push_str(&format!(
                "{m:<ROW$}{:>11}\n",
                "n/a (external server: only sojourn is seen)"
            ));
            continue;
        }
        o.push_str(&stat_row(m, x.mean, |q| stat_of(x, q)));
    }
    if let Some(i) = &s.ideal {
        let x = &i.sojourn;
        o.push_str(&stat_row("ideal", x.mean, |q| stat_of(x, q)));
        let e = |k: &str| i.excess.get(k).copied().unwrap_or(f64::NAN);
        o.push_str(&stat_row("excess", e("mean"), |q| e(q)));
    } else if external {
        o.push_str(&format!(
            "{:<ROW$}{:>11}\n",
            "ideal", "n/a (external server: no service times to replay)"
        ));
    }
    for (name, c) in &s.checks {
        o.push_str(&format!(
            "check {:<13} {}  {}\n",
            name,
            if c.ok { "ok  " } else { "FAIL" },
            c.verdict
        ));
    }
    o
}

/// The table's first line: whether every check passed, and what a failure means.
pub(super) fn verdict_line(s: &Summary) -> String {
    let failed: Vec<&str> = s
        .checks
        .iter()
        .filter(|(_, c)| !c.ok)
        .map(|(n, _)| n.as_str())
        .collect();
    if failed.is_empty() {
        return format!("verdict: every check passed ({})\n", s.checks.len());
    }
    format!(
        "verdict: {} of {} checks FAILED ({}): the numbers below describe this run, not necessarily the system; --strict exits 1 on a failed check, --redo-disturbed N redoes a run the environment check failed\n",
        failed.len(),
        s.checks.len(),
        failed.join(", ")
    )
}

/// What ran: app, configuration, load, and how much was measured.
pub(super) fn run_lines(s: &Summary) -> String {
    let params = if s.params.iter().next().is_some() {
        format!(" ({})", s.params)
    } else {
        String::new()
    };
    let mut o = format!(
        "{}{} · {} · {} thread{} · {} {:.0} qps · wait {} · shaper {}\n",
        s.app,
        params,
        s.config,
        s.threads,
        if s.threads == 1 { "" } else { "s" },
        s.arrival,
        s.offered_qps,
        s.wait,
        s.shaper
    );
    if let Some(p) = &s.placement {
        o.push_str(&format!("placement: {}\n", p.describe()));
    }
    if let Some(f) = &s.fanout {
        o.push_str(&format!("{}\n", f.describe()));
    }
    if let Some(c) = s.transport.as_ref().and_then(|t| t.capped.as_ref()) {
        o.push_str(&format!(
            "CAPPED, sojourn timed from the actual send: {}\n",
            c.note
        ));
    }
    let external = s.transport.as_ref().is_some_and(|t| !t.server_timed);
    let utilization = if external {
        "n/a (external server)".to_string()
    } else {
        format!("{:.2}", s.utilization)
    };
    o.push_str(&format!(
        "{} measured ({} warmup) over {:.1} s · achieved {:.1} qps · utilization {}{}\n",
        s.requests.measured,
        s.requests.warmup,
        s.duration_s,
        s.achieved_qps,
        utilization,
        if s.requests.unfinished > 0 {
            format!(" · {} UNFINISHED", s.requests.unfinished)
        } else {
            String::new()
        }
    ));
    o
}

/// A statistic of `x` by its summary key (`p50`, …, `max`).
pub(super) fn stat_of(x: &MetricStats, q: &str) -> f64 {
    (match q {
        "p50" => x.p50,
        "p90" => x.p90,
        "p95" => x.p95,
        "p99" => x.p99,
        "p999" => x.p999,
        _ => x.max,
    }) as f64
}

/// One row of the table: `name`, then mean, p50, p90, p95, p99, p99.9 and max.
pub(super) fn stat_row(name: &str, mean: f64, stat: impl Fn(&str) -> f64) -> String {
    use crate::dist::fmt_ns;
    let cells: String = ["p50", "p90", "p95", "p99", "p999", "max"]
        .iter()
        .map(|q| format!("{:>11}", fmt_ns(stat(q))))
        .collect();
    format!("{name:<ROW$}{:>11}{cells}\n", fmt_ns(mean))
}
