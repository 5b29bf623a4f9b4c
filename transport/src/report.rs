//! What a TCP run's summary says about its client: where each stamp came
//! from, the responses refused, the TCP settings chosen, and the `client`
//! check. Shared by `taillab load` and the coordinator.

use crate::client::ClientStamps;
use taillab_core::config::auto::TcpChoice;
use taillab_core::config::RunConfig;
use taillab_core::sections::transport::{BadResponses, StampSource, StampSources};
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
