//! What a client's receive sides say about their stamps and the responses they refused.

use crate::tstamp::StampCounts;

/// The clocks of a client's stamps and the responses it refused
/// (`summary.json`, `transport.stamps` and `transport.bad_responses`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClientStamps {
    /// `completed`, one per response.
    pub completed: StampCounts,
    /// `enqueued`, as the server reported it (empty for external servers).
    pub enqueued: StampCounts,
    /// Responses completed by a read that also completed a later one: they
    /// carry that later segment's stamp (an upper bound).
    pub shared: u64,
    /// Why the client's sockets gave no kernel stamps (`None`: they did).
    pub fallback: Option<String>,
    /// Responses for an id never sent.
    pub unknown_id: u64,
    /// Second responses to one request.
    pub duplicate: u64,
    /// Connections the server closed in the middle of a response.
    pub truncated: u64,
    /// Responses by the status the protocol gave them (HTTP/2 runs: gRPC
    /// status names, HTTP status codes, `RST_STREAM` reasons), warmup included.
    #[serde(default)]
    pub statuses: std::collections::BTreeMap<String, u64>,
}

impl ClientStamps {
    /// Adds another receive side's counts.
    pub fn absorb(&mut self, o: &ClientStamps) {
        self.completed.absorb(&o.completed);
        self.enqueued.absorb(&o.enqueued);
        self.shared += o.shared;
        self.fallback = self.fallback.take().or_else(|| o.fallback.clone());
        self.unknown_id += o.unknown_id;
        self.duplicate += o.duplicate;
        self.truncated += o.truncated;
        for (k, n) in &o.statuses {
            *self.statuses.entry(k.clone()).or_insert(0) += n;
        }
    }

    /// The bad responses in one line, if there were any.
    pub fn bad_responses(&self) -> Option<String> {
        let parts: Vec<String> = [
            (self.unknown_id, "for an id never sent"),
            (self.duplicate, "duplicated"),
            (self.truncated, "cut short when the server closed the connection"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} responses {what}"))
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// Why `completed` is not a kernel stamp, when it mostly is not.
    pub fn user_only(&self) -> Option<String> {
        if self.completed.clock() != "user" {
            return None;
        }
        Some(self.fallback.clone().unwrap_or_else(|| {
            if self.completed.refused_late + self.completed.refused_early > 0 {
                "kernel receive stamps were refused (they fell outside the request's own stamps)".into()
            } else {
                "the sockets gave no kernel receive stamps".into()
            }
        }))
    }
}
