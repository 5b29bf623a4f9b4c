//! Adding the clients' shards into one result: histograms added (never averaged), counts and
//! slices summed, the leaves' stamps joined.

use super::*;

/// Adds the clients' shards into one run (t0 = 0 on the merged time axis).
pub fn merge(
    spec: &RunSpec,
    dumps: &[ShardDump],
    wall_start: std::time::SystemTime,
) -> Result<(RunResult, Histogram<u64>, u128), TransportError> {
    let schedules: Vec<ScheduleStats> = dumps.iter().map(|d| d.schedule.clone()).collect();
    let sched = (!schedules.is_empty()).then(|| ScheduleStats::merge(&schedules));
    let slice_ns = sched.as_ref().map_or_else(|| spec.slice_ns(), |s| s.slice_ns);
    let sink = IntervalSink::new(1);
    let mut totals = Shard::new(0, &sink, slice_ns, spec.interval_ns);
    totals.first_completed = u64::MAX;
    let mut transport = new_hist();
    let mut transport_sum = 0u128;
    let mut intervals: std::collections::BTreeMap<u32, (Hists, u64, [u64; N_METRICS])> = Default::default();
    let (mut errors, mut first_error, mut aborted) = (0, None, false);
    for d in dumps {
        for i in 0..N_METRICS {
            totals.totals.0[i].add(hist(&d.hists[i])?).map_err(|_| bad_shard("histogram add"))?;
            totals.sums[i] += d.sums[i].parse::<u128>().map_err(|_| bad_shard("sum"))?;
        }
        totals.measured += d.measured;
        totals.warmup += d.warmup;
        totals.first_completed = totals.first_completed.min(d.first_completed);
        totals.last_completed = totals.last_completed.max(d.last_completed);
        add_vec(&mut totals.slice_done, &d.slice_done);
        transport.add(hist(&d.transport)?).map_err(|_| bad_shard("histogram add"))?;
        transport_sum += d.transport_sum.parse::<u128>().map_err(|_| bad_shard("sum"))?;
        for iv in &d.intervals {
            let e = intervals.entry(iv.index).or_insert_with(|| (Hists::new(), 0, [0; N_METRICS]));
            for m in 0..N_METRICS {
                e.0 .0[m].add(hist(&iv.hists[m])?).map_err(|_| bad_shard("histogram add"))?;
                e.2[m] = e.2[m].max(iv.max[m]);
            }
            e.1 += iv.count;
        }
        errors += d.errors;
        if first_error.is_none() {
            first_error = d.first_error.clone().or_else(|| d.lost.clone());
        }
        aborted |= d.aborted;
    }
    let intervals = intervals
        .into_iter()
        .map(|(index, (h, count, max))| IntervalBlob {
            index,
            count,
            max,
            hist_b64: std::array::from_fn(|m| encode_hist(&h.0[m])),
        })
        .collect();
    let s = sched.unwrap_or(ScheduleStats {
        t0: 0,
        measure_start: None,
        generated_warmup: 0,
        generated_measured: 0,
        first_measured_intended: 0,
        last_measured_intended: 0,
        slice_ns,
        arrivals_per_slice: Vec::new(),
    });
    let r = RunResult {
        spec: spec.clone(),
        t0: 0,
        measure_start: s.measure_start.unwrap_or(0),
        first_measured_intended: s.first_measured_intended,
        last_measured_intended: s.last_measured_intended,
        generated_warmup: s.generated_warmup,
        generated_measured: s.generated_measured,
        totals,
        intervals,
        slice_ns,
        arrivals_per_slice: s.arrivals_per_slice,
        errors,
        first_error,
        aborted,
        records: None,
        wall_start,
        app_stats: Value::Null,
        placement: None,
        fanout: None,
        ideal_completions: Default::default(),
    };
    Ok((r, transport, transport_sum))
}

/// A fan-out's run from its leaves' clients ([`crate::fanout`]): the schedule of the first
/// leaf that reported (every leaf's), the whole requests joined from all leaves' rows, the
/// transport times and failures of all of them.
pub(super) fn join_leaves(
    spec: &RunSpec,
    f: &taillab_core::fanout::FanoutSpec,
    shards: &[Option<ShardDump>],
    reqs: &[Vec<ReqRow>],
    wall_start: std::time::SystemTime,
) -> Result<(RunResult, Histogram<u64>, u128), TransportError> {
    let dumps: Vec<ShardDump> = shards.iter().flatten().cloned().collect();
    let (mut r, _, _) = merge(spec, &dumps[..1], wall_start)?;
    let (all, th, tsum) = merge(spec, &dumps, wall_start)?;
    let t0s: Vec<u64> = shards.iter().map(|d| d.as_ref().map_or(0, |d| d.t0)).collect();
    let axis =
        crate::fanout::Axis { measure_start: r.measure_start, slice_ns: r.slice_ns, interval_ns: spec.interval_ns };
    let j = crate::fanout::join(f, &t0s, reqs, &axis, spec.threads);
    r.totals = j.totals;
    r.intervals = j.intervals;
    r.records = Some(std::sync::Arc::new(j.records));
    r.fanout = Some(j.fanout);
    (r.errors, r.first_error, r.aborted) = (all.errors, all.first_error, all.aborted);
    Ok((r, th, tsum))
}
