//! What a TCP run's summary says about its client: where each stamp came
//! from, the responses refused, the TCP settings chosen, and the `client`
//! check. Shared by `taillab load` and the coordinator.

use crate::client::ClientStamps;
use taillab_core::config::auto::TcpChoice;
use taillab_core::config::RunConfig;
use taillab_core::sections::transport::{BadResponses, SenderShare, StampSource, StampSources};
use taillab_core::summary::Summary;

/// Adds to a TCP run's summary what its client saw: where each stamp came
/// from (`transport.stamps`), the responses it refused
/// (`transport.bad_responses`), the resolved TCP settings
/// (`transport.choice`), and the `client` check. Used by `taillab load` and
/// by the coordinator on the merged clients.
pub fn annotate(summary: &mut Summary, cfg: &RunConfig, st: &ClientStamps, choice: Option<TcpChoice>) {
    let enqueued =
        if st.enqueued.total() > 0 { StampSource::counted(&st.enqueued) } else { StampSource::clock("not reported") };
    if let Some(t) = &mut summary.transport {
        t.stamps = Some(StampSources {
            intended: StampSource::clock("user"),
            sent: StampSource::clock("user"),
            enqueued,
            completed: StampSource::counted(&st.completed),
            completed_shared: st.shared,
            fallback: st.user_only(),
        });
        t.bad_responses = Some(BadResponses {
            unknown_id: st.unknown_id,
            duplicate: st.duplicate,
            truncated: st.truncated,
            what: st.bad_responses(),
        });
        t.choice = choice;
        t.statuses = (!st.statuses.is_empty()).then(|| st.statuses.clone());
    }
    let mut check = match (summary.latency_ns.get("recv_lag"), summary.latency_ns.get("sojourn")) {
        (Some(lag), Some(soj)) => taillab_core::summary::client_check(
            lag,
            soj,
            cfg.monitor.max_recv_lag.0,
            cfg.monitor.max_recv_lag_ratio,
            st.user_only().as_deref(),
        ),
        _ => return,
    };
    let senders = summary.transport.as_ref().and_then(|t| t.senders.as_ref());
    if let Some(senders) = senders.filter(|s| !s.is_empty()) {
        let sojourn_p50 = summary.latency_ns.get("sojourn").map_or(0, |s| s.p50);
        let capped = cfg.net.max_in_flight > 0;
        let limits = SenderLimits {
            send_lag_ns: cfg.monitor.max_send_lag.0,
            recv_lag_ns: (cfg.monitor.max_recv_lag.0 as f64).max(cfg.monitor.max_recv_lag_ratio * sojourn_p50 as f64),
            judge_recv: st.user_only().is_none(),
            judge_send: !capped,
        };
        judge_senders(&mut check, senders, &limits);
    }
    summary.checks.insert("client".into(), check);
}

/// What makes one sender the bottleneck of its run.
struct SenderLimits {
    /// Send-lag p99 above this, while the sender was busy nearly all the time: it could not
    /// keep up with its share of the schedule.
    send_lag_ns: u64,
    /// Receive-lag p99 above this: it read its responses late.
    recv_lag_ns: f64,
    /// Receive lag is measured (kernel stamps).
    judge_recv: bool,
    /// Send lag is the client's own (not the capped mode's deliberate holds).
    judge_send: bool,
}

/// A sender busier than this (% of the run's wall time) had no slack left.
pub const SATURATED_BUSY_PCT: f64 = 95.0;

/// Adds each sender's verdict to the `client` check: it fails, naming the sender, when one was
/// saturated (busy ≥ [`SATURATED_BUSY_PCT`] and late beyond the send-lag limit) or read its
/// responses late; the per-sender rows go into the check's `senders`.
fn judge_senders(check: &mut taillab_core::summary::Check, senders: &[SenderShare], l: &SenderLimits) {
    use taillab_core::dist::fmt_ns;
    let mut bad = Vec::new();
    let mut rows = Vec::new();
    for s in senders {
        let late = l.judge_send && s.send_lag_ns.p99 > l.send_lag_ns && s.busy_pct >= SATURATED_BUSY_PCT;
        let slow_reader = l.judge_recv && s.recv_lag_ns.p99 as f64 > l.recv_lag_ns;
        let name = match s.cpu {
            Some(c) => format!("client {} sender {} (CPU {c})", s.client, s.sender),
            None => format!("client {} sender {}", s.client, s.sender),
        };
        if late {
            bad.push(format!(
                "{name} was the bottleneck: busy {:.1} % of the run, send lag p99 {} over {}; give the client more senders (--senders, one CPU each)",
                s.busy_pct,
                fmt_ns(s.send_lag_ns.p99 as f64),
                fmt_ns(l.send_lag_ns as f64)
            ));
        }
        if slow_reader {
            bad.push(format!(
                "{name} read late: recv lag p99 {} over {}",
                fmt_ns(s.recv_lag_ns.p99 as f64),
                fmt_ns(l.recv_lag_ns)
            ));
        }
        rows.push(serde_json::json!({
            "client": s.client, "sender": s.sender, "cpu": s.cpu, "busy_pct": s.busy_pct, "cpu_pct": s.cpu_pct,
            "send_lag_p99_ns": s.send_lag_ns.p99, "recv_lag_p99_ns": s.recv_lag_ns.p99,
            "saturated": late, "late_reader": slow_reader,
        }));
    }
    let busiest = senders.iter().map(|s| s.busy_pct).fold(0.0, f64::max);
    if bad.is_empty() {
        check.verdict = format!("{}; {} sender(s), the busiest {busiest:.0} % busy", check.verdict, senders.len());
    } else {
        check.ok = false;
        check.verdict = format!("{}; {}", check.verdict, bad.join("; "));
    }
    check.details.insert("senders".into(), serde_json::Value::Array(rows));
}
