//! After a load: each lane's measurements gathered, then the lanes added into one run —
//! histograms added (never averaged), schedules' counts and slices summed, records merged in
//! the order of their intended send times.

use super::lane::Shared;
use super::receive::RecvOut;
use super::send::SelfCost;
use super::{ClientStamps, LoadOpts, LoadResult, SenderReport};
use crate::wire::Wire;
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use taillab_core::collector::{IntervalSink, MetricStats, Shard};
use taillab_core::harness::{Records, ScheduleStats};
use taillab_core::{RunResult, RunSpec};

/// One lane after its threads ended.
pub(super) struct Lane {
    sh: Arc<Shared>,
    outs: Vec<RecvOut>,
    cost: SelfCost,
    connections: usize,
}

impl Lane {
    /// Joins the lane's sender and receiver threads (a thread that panicked gave nothing).
    pub(super) fn join(
        sh: Arc<Shared>,
        sender: std::thread::JoinHandle<(Vec<RecvOut>, SelfCost)>,
        receivers: Vec<std::thread::JoinHandle<RecvOut>>,
        connections: usize,
    ) -> Lane {
        let (mut outs, cost) = sender.join().unwrap_or_default();
        outs.extend(receivers.into_iter().filter_map(|r| r.join().ok()));
        Lane { sh, outs, cost, connections }
    }

    /// What the sender's own receive sides saw: send and receive lag, requests measured.
    fn report(&self, cpu: Option<usize>) -> SenderReport {
        let (mut send, mut recv) = (super::new_hist(), super::new_hist());
        let (mut s_sum, mut r_sum, mut measured) = (0u128, 0u128, 0);
        for (shard, ..) in &self.outs {
            send.add(&shard.totals.0[3]).expect("auto-resizing histograms add");
            recv.add(&shard.totals.0[4]).expect("auto-resizing histograms add");
            s_sum += shard.sums[3];
            r_sum += shard.sums[4];
            measured += shard.measured;
        }
        SenderReport {
            sender: self.sh.lane,
            cpu,
            connections: self.connections,
            sent: self.sh.sent.load(Ordering::Relaxed),
            cost: self.cost,
            measured,
            send_lag: MetricStats::from_hist(&send, Some(s_sum)),
            recv_lag: MetricStats::from_hist(&recv, Some(r_sum)),
        }
    }
}

/// Adds up what every lane's receive sides measured: shards, transport histograms and sums,
/// kernel stamp counts.
fn gather(lanes: &mut [Lane], fallback: &Option<String>) -> (Option<Shard>, Histogram<u64>, u128, ClientStamps) {
    let mut totals: Option<Shard> = None;
    let mut transport = super::new_hist();
    let mut transport_sum = 0u128;
    let mut stamps = ClientStamps { fallback: fallback.clone(), ..Default::default() };
    for lane in lanes {
        for (shard, th, ts, st) in lane.outs.drain(..) {
            transport.add(&th).expect("auto-resizing histograms add");
            transport_sum += ts;
            stamps.absorb(&st);
            match &mut totals {
                None => totals = Some(shard),
                Some(t) => t.absorb(&shard),
            }
        }
    }
    (totals, transport, transport_sum, stamps)
}

/// The lanes' records as one run's: one lane's as they are; several lanes' renumbered in the
/// order of their intended send times (one host, one clock), as the sequence checks and the
/// ideal read a single stream.
fn records(lanes: &[Lane]) -> Option<Arc<Records>> {
    let mut kept: Vec<&Arc<Records>> = lanes.iter().filter_map(|l| l.sh.records.as_ref()).collect();
    if kept.len() <= 1 {
        return kept.pop().cloned();
    }
    let mut all: Vec<_> = kept.iter().flat_map(|r| r.iter()).collect();
    all.sort_unstable_by_key(|(i, _, _, st)| (st.intended, *i));
    let merged = Records::new(all.len() as u64);
    for (n, (_, worker, measured, st)) in all.into_iter().enumerate() {
        merged.set(n as u64, &st, worker, measured);
    }
    Some(Arc::new(merged))
}

/// Why a run that scheduled requests but got no response to any is an error, not a result:
/// the server took the connections (and any handshake or PING of its protocol) but completed
/// nothing, so there is no latency to report.
fn nothing_completed(target: &str, sent: u64, scheduled: u64) -> String {
    if sent == 0 {
        format!("{target} took the connections but the client could send none of the {scheduled} scheduled requests (the connections never became ready): nothing was measured")
    } else {
        format!("{target} completed no request: {sent} sent, none answered (it accepted the connections and its protocol's handshake, but answered nothing; is --app the protocol it speaks?)")
    }
}

/// The run the lanes measured together.
#[allow(clippy::too_many_arguments)]
pub(super) fn result(
    spec: &RunSpec,
    opts: &LoadOpts,
    wire: &Arc<dyn Wire>,
    mut lanes: Vec<Lane>,
    sink: &IntervalSink,
    t0: u64,
    wall_start: std::time::SystemTime,
    aborted: bool,
    fallback: &Option<String>,
    k: usize,
) -> LoadResult {
    let senders: Vec<SenderReport> = lanes.iter().enumerate().map(|(j, l)| l.report(opts.sender_cpu(j))).collect();
    let (totals, transport, transport_sum, stamps) = gather(&mut lanes, fallback);
    let stats: Vec<ScheduleStats> =
        lanes.iter().map(|l| l.sh.sched.lock().take().expect("every sender stores its schedule stats")).collect();
    let stats = ScheduleStats::merge(&stats);
    let intervals = sink.finish();
    let totals = totals.unwrap_or_else(|| Shard::new(0, sink, spec.slice_ns(), spec.interval_ns));
    let (mut errors, mut first_error, mut lost) = (0, None, None);
    for l in &lanes {
        errors += l.sh.errors.load(Ordering::Relaxed);
        first_error = first_error.or_else(|| l.sh.first_error());
        lost = lost.or_else(|| l.sh.lost());
    }
    let sent: u64 = lanes.iter().map(|l| l.sh.sent.load(Ordering::Relaxed)).sum();
    let scheduled = stats.generated_warmup + stats.generated_measured;
    if lost.is_none() && scheduled > 0 && totals.measured + totals.warmup == 0 {
        lost = Some(nothing_completed(&opts.target, sent, scheduled));
    }
    if let Some(bad) = stamps.bad_responses() {
        errors += stamps.unknown_id + stamps.duplicate + stamps.truncated;
        first_error = Some(match first_error {
            Some(e) => format!("{bad}; {e}"),
            None => bad,
        });
    }
    let result = RunResult {
        spec: spec.clone(),
        t0,
        measure_start: stats.measure_start.unwrap_or(t0),
        first_measured_intended: stats.first_measured_intended,
        last_measured_intended: stats.last_measured_intended,
        generated_warmup: stats.generated_warmup,
        generated_measured: stats.generated_measured,
        totals,
        intervals,
        slice_ns: stats.slice_ns,
        arrivals_per_slice: stats.arrivals_per_slice,
        errors,
        first_error,
        aborted,
        records: records(&lanes),
        wall_start,
        app_stats: serde_json::Value::Null,
        placement: None,
        fanout: None,
        ideal_completions: Default::default(),
    };
    LoadResult {
        result,
        transport,
        transport_sum,
        lost,
        sent,
        server_timed: wire.server_timed(),
        connections: k,
        stamps,
        choice: opts.choice.clone(),
        senders,
        max_in_flight: opts.max_in_flight,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(start: u64, warm: u64, meas: u64, first: u64, last: u64, slices: Vec<u64>) -> ScheduleStats {
        ScheduleStats {
            t0: 0,
            measure_start: Some(start),
            generated_warmup: warm,
            generated_measured: meas,
            first_measured_intended: first,
            last_measured_intended: last,
            slice_ns: 10,
            arrivals_per_slice: slices,
        }
    }

    #[test]
    fn the_lanes_schedules_add_up() {
        let s =
            ScheduleStats::merge(&[stats(100, 5, 50, 101, 900, vec![3, 4]), stats(90, 6, 40, 95, 950, vec![1, 1, 2])]);
        assert_eq!(s.measure_start, Some(90), "the measured phase starts with the earliest lane");
        assert_eq!((s.generated_warmup, s.generated_measured), (11, 90));
        assert_eq!((s.first_measured_intended, s.last_measured_intended), (95, 950));
        assert_eq!(s.arrivals_per_slice, vec![4, 5, 2]);
        // A lane that measured nothing leaves the phase's bounds alone.
        let idle = ScheduleStats { measure_start: None, ..stats(0, 2, 0, 0, 0, vec![]) };
        let s = ScheduleStats::merge(&[stats(100, 5, 50, 101, 900, vec![3]), idle]);
        assert_eq!((s.first_measured_intended, s.last_measured_intended), (101, 900));
    }
}
