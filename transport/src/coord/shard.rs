//! The `shard` line each client prints at the end (its histograms, counts and per-slice
//! arrivals and completions, relative to its own schedule start) and how it is read back.

use super::*;

/// One client's measurement as it crosses the pipe. Times are relative to
/// the client's own schedule start (clocks of different hosts never meet).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardDump {
    /// This client's share of the rate (requests/s): the run's rate / clients.
    pub qps: f64,
    /// This client's seed (derived from the run's; the run's own with one client).
    pub seed: u64,
    /// Connections the client used.
    pub connections: usize,
    /// The client's schedule start on its own clock (ns): its `req` rows are on that clock.
    #[serde(default)]
    pub t0: u64,
    /// Responses carried the server's queue and service times (a taillab server).
    pub server_timed: bool,
    /// Measured requests completed.
    pub measured: u64,
    /// Warmup requests completed.
    pub warmup: u64,
    /// Requests written, warmup included.
    pub sent: u64,
    /// Failed requests (error responses, bad or missing responses), warmup included.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// The client stopped before every response came (drain deadline, server lost).
    pub aborted: bool,
    /// Why the server was lost mid-run, if it was (what was measured is kept).
    pub lost: Option<String>,
    /// The client's schedule, its times counted from its start (`schedule.t0` = 0): the
    /// result's own type, serialized as it is.
    pub schedule: ScheduleStats,
    /// Earliest completion of a measured request (ns after the schedule start;
    /// `u64::MAX` when there was none).
    pub first_completed: u64,
    /// Latest completion of a measured request (ns after the schedule start).
    pub last_completed: u64,
    /// Measured completions per slice, by completion time.
    pub slice_done: Vec<u64>,
    /// Exact sums of the metrics in `METRICS` order (decimal strings: u128).
    pub sums: [String; N_METRICS],
    /// HdrHistogram V2 deflate, base64, same metric order.
    pub hists: [String; N_METRICS],
    /// The `transport` histogram (ns; same encoding as `hists`).
    pub transport: String,
    /// Exact sum of `transport` (ns; a decimal string: u128).
    pub transport_sum: String,
    /// Interval histograms, in order.
    pub intervals: Vec<IntervalDump>,
    /// The clocks of the client's stamps and the responses it refused.
    pub stamps: ClientStamps,
    /// The TCP settings the client ran with (resolved).
    pub choice: TcpChoice,
    /// Each of the client's senders (its own `client` number is set by the coordinator).
    #[serde(default)]
    pub senders: Vec<SenderShare>,
    /// The capped mode's limit of requests in flight per connection (0: open loop).
    #[serde(default)]
    pub max_in_flight: usize,
}

/// One interval's histograms ([`IntervalBlob`]) as they cross the pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalDump {
    /// Which interval: it starts `index` × `record.interval` after the measured
    /// phase began.
    pub index: u32,
    /// Measured requests completed in it.
    pub count: u64,
    /// Largest value of each metric in it (ns).
    pub max: [u64; N_METRICS],
    /// Each metric's histogram, same encoding as [`ShardDump::hists`].
    pub hists: [String; N_METRICS],
}

impl ShardDump {
    /// What client run `r` sends the coordinator; `qps` and `seed` are this client's.
    pub fn from_load(r: &LoadResult, qps: f64, seed: u64) -> Self {
        let x = &r.result;
        let t = &x.totals;
        let rel = |v: u64| v.saturating_sub(x.t0);
        ShardDump {
            qps,
            seed,
            connections: r.connections,
            t0: x.t0,
            server_timed: r.server_timed,
            measured: t.measured,
            warmup: t.warmup,
            sent: r.sent,
            errors: x.errors,
            first_error: x.first_error.clone(),
            aborted: x.aborted,
            lost: r.lost.clone(),
            schedule: ScheduleStats {
                t0: 0,
                measure_start: Some(rel(x.measure_start)),
                first_measured_intended: rel(x.first_measured_intended),
                last_measured_intended: rel(x.last_measured_intended),
                ..x.schedule()
            },
            first_completed: if t.measured == 0 { u64::MAX } else { rel(t.first_completed) },
            last_completed: rel(t.last_completed),
            slice_done: t.slice_done.clone(),
            sums: std::array::from_fn(|i| t.sums[i].to_string()),
            hists: std::array::from_fn(|i| encode_hist(&t.totals.0[i])),
            transport: encode_hist(&r.transport),
            transport_sum: r.transport_sum.to_string(),
            intervals: x
                .intervals
                .iter()
                .map(|b| IntervalDump { index: b.index, count: b.count, max: b.max, hists: b.hist_b64.clone() })
                .collect(),
            stamps: r.stamps.clone(),
            choice: r.choice.clone(),
            senders: r.senders.iter().map(|s| s.share(0)).collect(),
            max_in_flight: r.max_in_flight,
        }
    }
}

pub(super) fn bad_shard(why: &str) -> TransportError {
    TransportError::Protocol(format!(
        "a client's shard is corrupt ({why}); are client and coordinator the same taillab version?"
    ))
}

pub(super) fn hist(b64: &str) -> Result<Histogram<u64>, TransportError> {
    let mut h = decode_hist(b64).ok_or_else(|| bad_shard("undecodable histogram"))?;
    h.auto(true);
    Ok(h)
}

pub(super) fn add_vec(a: &mut Vec<u64>, b: &[u64]) {
    if b.len() > a.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}
