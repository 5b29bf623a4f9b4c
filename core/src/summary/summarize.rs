//! From a run's result to its summary: the rates, the self-checks' driver and [`summarize`].

use super::*;

/// Least-squares slope of `ys` against `xs`.
pub(super) fn slope(xs: &[f64], ys: &[f64]) -> f64 {
    let n = xs.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let (mx, my) = (xs.iter().sum::<f64>() / n, ys.iter().sum::<f64>() / n);
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if sxx == 0.0 {
        0.0
    } else {
        sxy / sxx
    }
}

/// Tolerance of the rate check: achieved within ±2 % of the schedule's rate.
pub const RATE_TOLERANCE: f64 = 0.02;

/// A run's rates: the schedule's (from its measured arrivals), the achieved
/// (from its measured completions), and the measured span in seconds.
pub(super) struct Rates {
    pub(super) scheduled_qps: f64,
    pub(super) achieved_qps: f64,
    pub(super) duration_s: f64,
}

impl Rates {
    pub(super) fn of(r: &RunResult) -> Rates {
        let (t, spec) = (&r.totals, &r.spec);
        let n = t.measured;
        let span = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / 1e9;
        let sched_span = span(r.first_measured_intended, r.last_measured_intended);
        let scheduled_qps = if r.generated_measured > 1 && sched_span > 0.0 {
            (r.generated_measured - 1) as f64 / sched_span
        } else {
            spec.qps
        };
        let done_span = span(t.first_completed, t.last_completed);
        let achieved_qps = if n > 1 && done_span > 0.0 {
            (n - 1) as f64 / done_span
        } else {
            0.0
        };
        let duration_s = match spec.measure {
            Bound::Seconds(s) => s,
            Bound::Requests(_) => sched_span,
        };
        Rates {
            scheduled_qps,
            achieved_qps,
            duration_s,
        }
    }
}

/// The checks of a run: rate, send lag, saturation, interarrival times,
/// independence, stationarity, and app errors when there were any.
pub(super) fn run_checks(
    r: &RunResult,
    latency: &BTreeMap<String, MetricStats>,
    scheduled_qps: f64,
    achieved_qps: f64,
) -> BTreeMap<String, Check> {
    let (spec, n) = (&r.spec, r.totals.measured);
    let mut checks = BTreeMap::new();
    let rel = if scheduled_qps > 0.0 {
        achieved_qps / scheduled_qps - 1.0
    } else {
        -1.0
    };
    let rate_ok = n > 1 && rel.abs() <= RATE_TOLERANCE;
    checks.insert(
        "rate".to_string(),
        Check::new(
            rate_ok,
            format!(
                "achieved {:.1} qps vs scheduled {:.1} ({:+.2}%, tolerance ±{:.0}%)",
                achieved_qps,
                scheduled_qps,
                rel * 100.0,
                RATE_TOLERANCE * 100.0
            ),
            json!({"offered_qps": spec.qps, "scheduled_qps": scheduled_qps, "achieved_qps": achieved_qps,
                   "rel_error": rel, "tolerance": RATE_TOLERANCE}),
        ),
    );
    let lag = &latency["send_lag"];
    let lag_ok = lag.p99 <= spec.send_lag_p99_max_ns;
    checks.insert(
        "send_lag".to_string(),
        Check::new(
            lag_ok,
            format!(
                "send lag p50 {} p99 {} max {} (p99 threshold {})",
                crate::dist::fmt_ns(lag.p50 as f64),
                crate::dist::fmt_ns(lag.p99 as f64),
                crate::dist::fmt_ns(lag.max as f64),
                crate::dist::fmt_ns(spec.send_lag_p99_max_ns as f64)
            ),
            json!({"p50_ns": lag.p50, "p99_ns": lag.p99, "max_ns": lag.max, "threshold_ns": spec.send_lag_p99_max_ns}),
        ),
    );
    checks.insert("saturation".to_string(), saturation_check(r));
    checks.insert(
        "interarrival".to_string(),
        interarrival_check(r, scheduled_qps, latency["send_lag"].p99),
    );
    checks.insert("independence".to_string(), independence_check(r));
    checks.insert("stationarity".to_string(), stationarity_check(r));
    if r.errors > 0 {
        checks.insert(
            "errors".to_string(),
            Check::new(
                false,
                format!(
                    "{} requests failed in the app; first: {}",
                    r.errors,
                    r.first_error.clone().unwrap_or_default()
                ),
                json!({"count": r.errors}),
            ),
        );
    }
    checks
}

/// Builds the summary and its checks from what a run measured: the latency
/// statistics, the rates, the checks, then the ideal replay.
pub fn summarize(r: &RunResult, app: &str, params: &Params, config: &str) -> Summary {
    let t = &r.totals;
    let mut latency = BTreeMap::new();
    for (i, m) in METRICS.iter().enumerate() {
        latency.insert(
            m.to_string(),
            MetricStats::from_hist(&t.totals.0[i], Some(t.sums[i])),
        );
    }
    let spec = &r.spec;
    let n = t.measured;
    let Rates {
        scheduled_qps,
        achieved_qps,
        duration_s,
    } = Rates::of(r);
    let service_mean = latency["service"].mean;
    let utilization = spec.qps * service_mean / 1e9 / spec.threads as f64;
    let checks = run_checks(r, &latency, scheduled_qps, achieved_qps);

    let fanout = r
        .fanout
        .as_ref()
        .map(|f| crate::ideal::fanout_summary(f, spec.seed));
    let ideal = match &fanout {
        Some(f) => crate::ideal::fanout_ideal(r, f, &latency["sojourn"]),
        None => ideal_keeping_completions(r, &latency["sojourn"]),
    };
    let (ideal, ideal_skipped) = match ideal {
        Ok(i) => (Some(i), None),
        Err(why) => (None, Some(why.to_string())),
    };
    Summary {
        schema: RUN_SCHEMA.into(),
        app: app.into(),
        params: params.clone(),
        config: config.into(),
        threads: spec.threads,
        seed: spec.seed,
        arrival: spec.arrival.to_string(),
        wait: spec.wait.to_string(),
        shaper: spec.shaper.to_string(),
        discipline: spec.discipline.to_string(),
        dispatch: spec.dispatch.to_string(),
        spin_margin_ns: spec.spin_margin_ns,
        net_delay: spec.net_delay.as_ref().map(|d| d.to_string()),
        offered_qps: spec.qps,
        scheduled_qps,
        achieved_qps,
        utilization,
        duration_s,
        requests: Counts {
            warmup: t.warmup,
            measured: n,
            unfinished: r.unfinished(),
            errors: r.errors,
        },
        first_error: r.first_error.clone(),
        latency_ns: latency,
        ideal,
        ideal_skipped,
        checks,
        host: Host::collect(),
        started_at: rfc3339(r.wall_start),
        interval_s: spec.interval_ns as f64 / 1e9,
        app_stats: r.app_stats.clone(),
        placement: r.placement.clone(),
        fanout,
        // Over TCP the records are the client's, whose gaps include the network; a
        // fan-out's requests are served by many queues: no one dispatch gap to speak of.
        stalls: (config == "integrated" && r.fanout.is_none())
            .then(|| crate::stalls::dispatch_gaps(r))
            .flatten(),
        anatomy: None,
        counters: None,
        environment: None,
        environment_redo: None,
        incomplete: None,
        interference: None,
        nodes: None,
        profile: None,
        roi: None,
        server: None,
        transport: None,
        tuning: None,
    }
}

/// The run's ideal; with records to write, each request's ideal completion is kept in the
/// result for them ([`RunResult::ideal_completions`]).
fn ideal_keeping_completions(
    r: &RunResult,
    sojourn: &MetricStats,
) -> Result<crate::ideal::IdealSummary, crate::ideal::IdealError> {
    if !(r.spec.save_requests && r.records.is_some()) {
        return crate::ideal::ideal_of_run(r, sojourn, None);
    }
    let mut done = Vec::new();
    let i = crate::ideal::ideal_of_run(r, sojourn, Some(&mut done))?;
    let _ = r.ideal_completions.set(done);
    Ok(i)
}
