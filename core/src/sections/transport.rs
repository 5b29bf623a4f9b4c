//! The sections a TCP run adds (taillab-transport computes them): `transport`
//! (how the load crossed the wire, per client, and where each stamp's clock
//! came from) and `server` (what `taillab serve` did).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::collector::MetricStats;
use crate::config::auto::TcpChoice;

/// `transport`: how the load crossed the wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TransportSection {
    /// Client processes.
    pub clients: usize,
    /// Connections per client.
    pub connections_per_client: usize,
    /// The server address.
    pub target: String,
    /// Responses carried the server's queue and service times. External servers
    /// report nothing: their queue and service read 0 and `transport` is then
    /// everything but send lag.
    pub server_timed: bool,
    /// The time on the wire and in both kernels: sojourn − send lag − queue − service (ns).
    pub transport_ns: MetricStats,
    /// Why the server was lost, if it was.
    pub server_lost: Option<String>,
    /// Per-client counts and histograms (coordinated runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_client: Option<Vec<ClientShare>>,
    /// Where each stamp came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamps: Option<StampSources>,
    /// Responses the client refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bad_responses: Option<BadResponses>,
    /// The TCP settings the run resolved, and why (`null`: not known).
    #[serde(default)]
    pub choice: Option<TcpChoice>,
    /// Responses by the status their protocol gave them, warmup included: gRPC
    /// status names (`OK`, `UNAVAILABLE`, …), HTTP status codes of HTTP/2 runs,
    /// `RST_STREAM` reasons of streams the server reset (absent for other protocols).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statuses: Option<std::collections::BTreeMap<String, u64>>,
    /// Each sender thread of each client: its connections, what it sent, its CPU and how
    /// late it was (`net.senders`; absent in files written before senders existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub senders: Option<Vec<SenderShare>>,
    /// Set when the run capped requests in flight (`net.max_in_flight`, the other load
    /// testers' method): latency is then counted from each request's actual send, and a
    /// request held back while its connection was full is not charged for the wait
    /// (coordinated omission). Absent for open-loop runs, whose latency counts from the
    /// intended send.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capped: Option<CappedTiming>,
}

/// `transport.capped`: how a capped run's latency was counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CappedTiming {
    /// Most requests in flight per connection.
    pub max_in_flight: usize,
    /// What sojourn counts from: `sent` (the actual send).
    pub timed_from: String,
    /// The consequence in words.
    pub note: String,
}

/// One sender thread of a client (`transport.senders`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SenderShare {
    /// The client process (0 for `taillab load`).
    pub client: usize,
    /// The sender within its client, from 0.
    pub sender: usize,
    /// The CPU it was pinned to (absent: not pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// Its connections.
    pub connections: usize,
    /// Requests it wrote, warmup included.
    pub sent: u64,
    /// Measured requests whose responses it (or its receiver threads) recorded.
    pub measured: u64,
    /// Writes it made (each carries the requests due at one wake-up for one connection).
    pub writes: u64,
    /// Its thread's CPU time over the run, as a percentage of the run's wall time.
    pub cpu_pct: f64,
    /// The share of the run's wall time it had work (sending, reading, recording) rather
    /// than waiting for the next send time with nothing to read (%). A sender near 100 %
    /// and late is the run's bottleneck.
    pub busy_pct: f64,
    /// The send lag of its measured requests (ns).
    pub send_lag_ns: MetricStats,
    /// The receive lag of its measured responses (ns).
    pub recv_lag_ns: MetricStats,
}

/// One client process of a coordinated run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientShare {
    /// Its seed (absent when it sent nothing back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Its share of the rate (requests/s).
    pub qps: f64,
    /// Measured requests it completed.
    pub measured: u64,
    /// Warmup requests it completed.
    pub warmup: u64,
    /// Failed requests, warmup included (absent when it sent nothing back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<u64>,
    /// Why it stopped early, if it did.
    pub lost: Option<String>,
    /// Its sojourn histogram (HdrHistogram V2 deflate, base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sojourn_hist: Option<String>,
}

/// `transport.stamps`: the clock behind each of a request's stamps.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StampSources {
    /// `intended`: the client's schedule, user space.
    pub intended: StampSource,
    /// `sent`: the client's read of the clock after writing, user space.
    pub sent: StampSource,
    /// `enqueued`: as the server reported it (`not reported` by external servers).
    pub enqueued: StampSource,
    /// `completed`: the client's receive stamps.
    pub completed: StampSource,
    /// Responses completed by a read that also completed a later one: they
    /// carry that later segment's stamp (an upper bound).
    pub completed_shared: u64,
    /// Why the run has only user-space receive stamps (`null`: it has kernel ones).
    pub fallback: Option<String>,
}

/// One stamp's clock and, where counted, how many stamps came from each source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StampSource {
    /// `user`, `kernel-software`, `kernel-hardware`, `mixed` or `not reported`.
    pub clock: String,
    /// The counts (absent when nothing was counted).
    #[serde(flatten, skip_serializing_if = "StampCounts::is_empty")]
    pub counts: StampCounts,
}

impl StampSource {
    /// A clock without counts.
    pub fn clock(clock: &str) -> Self {
        StampSource {
            clock: clock.into(),
            counts: StampCounts::default(),
        }
    }

    /// `counts` with the clock they say.
    pub fn counted(counts: &StampCounts) -> Self {
        StampSource {
            clock: counts.clock().into(),
            counts: counts.clone(),
        }
    }
}

/// `transport.bad_responses`: responses the client refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BadResponses {
    /// Responses for an id never sent.
    pub unknown_id: u64,
    /// Second responses to one request.
    pub duplicate: u64,
    /// Connections the server closed in the middle of a response.
    pub truncated: u64,
    /// The three in words (`null`: none).
    pub what: Option<String>,
}

/// How many stamps of one kind came from which clock (`summary.json`,
/// `transport.stamps`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(default)]
pub struct StampCounts {
    /// Kernel software stamps used.
    pub kernel_software: u64,
    /// Kernel hardware stamps used.
    pub kernel_hardware: u64,
    /// User-space stamps: the socket gave no kernel stamp.
    pub user: u64,
    /// Kernel stamps refused: later than the read that returned them.
    pub refused_late: u64,
    /// Kernel stamps refused: earlier than the request's send (client: than
    /// the server's finish placed on the client's clock).
    pub refused_early: u64,
    /// Hardware stamps not on the system clock (software used instead).
    pub hw_unsynced: u64,
}

impl StampCounts {
    /// Adds `o`'s counts.
    pub fn absorb(&mut self, o: &StampCounts) {
        self.kernel_software += o.kernel_software;
        self.kernel_hardware += o.kernel_hardware;
        self.user += o.user;
        self.refused_late += o.refused_late;
        self.refused_early += o.refused_early;
        self.hw_unsynced += o.hw_unsynced;
    }

    /// All stamps counted.
    pub fn total(&self) -> u64 {
        self.kernel_software
            + self.kernel_hardware
            + self.user
            + self.refused_late
            + self.refused_early
    }

    /// The clock most stamps came from: `kernel-hardware`,
    /// `kernel-software`, `user`, or `mixed` when no kind has 99 %.
    pub fn clock(&self) -> &'static str {
        let t = self.total().max(1) as f64;
        let share = |n: u64| n as f64 / t >= 0.99;
        if self.total() == 0 || share(self.user + self.refused_late + self.refused_early) {
            "user"
        } else if share(self.kernel_hardware) {
            "kernel-hardware"
        } else if share(self.kernel_software) {
            "kernel-software"
        } else {
            "mixed"
        }
    }
    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        *self == StampCounts::default()
    }
}

/// What the server did, reported when it stops.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServeStats {
    /// Connections accepted.
    pub connections: u64,
    /// Connections closed for garbage or a disconnect mid-frame (clean closes not counted).
    pub dropped: u64,
    /// Connections closed at accept because `net.max_connections` were open.
    pub refused: u64,
    /// Requests served.
    pub requests: u64,
    /// Requests the app failed (each answered with an error frame).
    pub app_errors: u64,
    /// The dispatch it ran with (resolved).
    pub dispatch: String,
    /// The wait mode its workers ran with (resolved).
    pub wait: String,
    /// Where its `enqueued` stamps came from, one per read that completed frames.
    pub enqueued_stamps: StampCounts,
}
