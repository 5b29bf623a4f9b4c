//! What a TCP run's summary says about its client: where each stamp came
//! from, the responses refused, the TCP settings chosen, and the `client`
//! check. Shared by `taillab load` and the coordinator.

use crate::client::ClientStamps;
use taillab_core::config::RunConfig;
use taillab_core::summary::Summary;

/// Adds to a TCP run's summary what its client saw: where each stamp came
/// from (`transport.stamps`), the responses it refused
/// (`transport.bad_responses`), the resolved TCP settings
/// (`transport.choice`), and the `client` check. Used by `taillab load` and
/// by the coordinator on the merged clients.
pub fn annotate(summary: &mut Summary, cfg: &RunConfig, st: &ClientStamps, choice: serde_json::Value) {
    use serde_json::json;
    let clocked = |c: &crate::tstamp::StampCounts| {
        let mut v = serde_json::to_value(c).unwrap_or_default();
        v["clock"] = json!(c.clock());
        v
    };
    let server = if st.enqueued.total() > 0 { clocked(&st.enqueued) } else { json!({"clock": "not reported"}) };
    let stamps = json!({
        "intended": {"clock": "user"},
        "sent": {"clock": "user"},
        "enqueued": server,
        "completed": clocked(&st.completed),
        "completed_shared": st.shared,
        "fallback": st.user_only(),
    });
    let bad = json!({"unknown_id": st.unknown_id, "duplicate": st.duplicate, "truncated": st.truncated,
                     "what": st.bad_responses()});
    if let Some(t) = summary.extra.get_mut("transport").and_then(|t| t.as_object_mut()) {
        t.insert("stamps".into(), stamps);
        t.insert("bad_responses".into(), bad);
        t.insert("choice".into(), choice);
    }
    let check = match (summary.latency_ns.get("recv_lag"), summary.latency_ns.get("sojourn")) {
        (Some(lag), Some(soj)) => taillab_core::summary::client_check(
            lag,
            soj,
            cfg.monitor.max_recv_lag.0,
            cfg.monitor.max_recv_lag_ratio,
            st.user_only().as_deref(),
        ),
        _ => return,
    };
    summary.checks.insert("client".into(), check);
}
