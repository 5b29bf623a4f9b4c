//! The self-checks of the load: the client's own lag, saturation, the inter-arrival test,
//! independence and stationarity.

use super::*;

/// The `client` check of a TCP run: did the client read its responses soon
/// after the kernel received them? `completed` is the kernel's stamp, so a
/// late reader does not lengthen one response's sojourn; but responses that
/// wait together in the socket share the stamp of the last one, and a busy
/// reader delays the next sends. It fails when `recv_lag` p99 exceeds
/// `max(max_abs_ns, max_ratio × sojourn p50)`: a lag that is both large and
/// large next to the latency measured. `fallback` names why the run had only
/// user-space stamps: then the lag is inside sojourn, unseen, and the check
/// says so instead of judging.
pub fn client_check(
    recv_lag: &MetricStats,
    sojourn: &MetricStats,
    max_abs_ns: u64,
    max_ratio: f64,
    fallback: Option<&str>,
) -> Check {
    use crate::dist::fmt_ns;
    if let Some(why) = fallback {
        return Check::new(
            true,
            format!("not measured: {why}; the client's receive delay is inside sojourn"),
            json!({"skipped": true, "reason": why}),
        );
    }
    let limit = (max_abs_ns as f64).max(max_ratio * sojourn.p50 as f64);
    let ok = recv_lag.p99 as f64 <= limit;
    let head = format!(
        "recv lag p50 {} p99 {} max {} (p99 limit {} = max({}, {max_ratio} × sojourn p50 {}))",
        fmt_ns(recv_lag.p50 as f64),
        fmt_ns(recv_lag.p99 as f64),
        fmt_ns(recv_lag.max as f64),
        fmt_ns(limit),
        fmt_ns(max_abs_ns as f64),
        fmt_ns(sojourn.p50 as f64)
    );
    let verdict = if ok {
        head
    } else {
        format!("{head}: the client read its responses late, which delays its sends and merges the stamps of responses that waited together; give it a CPU of its own (--client-cpus) or --client-wait spin")
    };
    Check::new(
        ok,
        verdict,
        json!({"p50_ns": recv_lag.p50, "p99_ns": recv_lag.p99, "max_ns": recv_lag.max, "limit_ns": limit,
               "max_abs_ns": max_abs_ns, "max_ratio": max_ratio, "sojourn_p50_ns": sojourn.p50}),
    )
}

/// Saturation: the backlog (measured arrivals − completions) must not grow
/// through the measured phase, and every measured request must finish.
pub(super) fn saturation_check(r: &RunResult) -> Check {
    let arr = &r.arrivals_per_slice;
    let done = &r.totals.slice_done;
    let mut backlog = Vec::with_capacity(arr.len());
    let mut acc: i64 = 0;
    for (j, a) in arr.iter().enumerate() {
        acc += *a as i64 - done.get(j).copied().unwrap_or(0) as i64;
        backlog.push(acc as f64);
    }
    let xs: Vec<f64> = (0..backlog.len())
        .map(|j| (j + 1) as f64 * r.slice_ns as f64 / 1e9)
        .collect();
    let growth = slope(&xs, &backlog);
    let threshold = 0.01 * r.spec.qps;
    let final_backlog = backlog.last().copied().unwrap_or(0.0);
    // A short noisy run at high load can show a slope by chance; only a
    // backlog that also ends well above a few requests per worker counts.
    let growing = growth > threshold && final_backlog > (2 * r.spec.threads + 10) as f64;
    let unfinished = r.unfinished();
    let ok = !growing && unfinished == 0 && !r.aborted;
    let verdict = if r.aborted {
        format!("run stopped with {unfinished} measured requests unfinished: its backlog could not be served by the drain deadline (the server cannot keep up)")
    } else if unfinished > 0 {
        format!("{unfinished} measured requests never completed")
    } else if growing {
        format!("backlog grew by {growth:.1} requests/s (threshold {threshold:.1}/s), ending at {final_backlog:.0}: saturated")
    } else {
        format!("backlog steady ({growth:+.1} requests/s, threshold {threshold:.1}/s)")
    };
    Check::new(
        ok,
        verdict,
        json!({"backlog_growth_per_s": growth, "threshold_per_s": threshold, "final_backlog": final_backlog,
               "unfinished": unfinished, "aborted": r.aborted}),
    )
}

/// Largest sample the sequence checks look at (the first N measured requests).
pub(super) const CHECK_SAMPLE: usize = 20_000;

pub(super) fn skipped(why: &str) -> Check {
    Check::new(true, format!("skipped: {why}"), json!({"skipped": true}))
}

/// Measured requests' stamps in request (= intended) order, up to `limit`.
pub(super) fn measured_stamps(
    r: &RunResult,
    limit: usize,
) -> Option<Vec<crate::collector::Stamps>> {
    let rec = r.records.as_ref()?;
    Some(
        rec.iter()
            .filter(|x| x.2)
            .map(|x| x.3)
            .take(limit)
            .collect(),
    )
}

/// Why the sequence checks were skipped: the stamps they need were not kept.
pub(super) const NO_RECORDS: &str = "no per-request records (integrated: raise --max-record-mem; loopback: --save-requests; networked: one client with --save-requests)";

/// Inter-arrival fit: do the actual send gaps follow the process asked for?
/// - Poisson and renewal gaps (`lognormal:`, `gamma:`, `pareto:`):
///   Kolmogorov–Smirnov of the intended gaps against the gap distribution with
///   the schedule's rate, and of the send gaps against the intended ones up to
///   the send lag's p99 (each fails at p < 0.001).
/// - fixed: gaps within ±5 % of their mean at p99.
/// - processes whose gaps are not independent draws (MMPP, traces, load
///   profiles): two-sample KS of the send gaps against the intended
///   schedule's own gaps, i.e. did the harness realise the schedule it was
///   given (fails at p < 0.001).
pub(super) fn interarrival_check(r: &RunResult, scheduled_qps: f64, lag_p99: u64) -> Check {
    let Some(st) = measured_stamps(r, CHECK_SAMPLE + 1) else {
        return skipped(NO_RECORDS);
    };
    interarrival_of(&st, &r.spec.arrival, scheduled_qps, lag_p99)
}

/// [`interarrival_check`] on the measured requests' stamps `st`.
pub(super) fn interarrival_of(
    st: &[crate::collector::Stamps],
    arrival: &crate::arrival::ArrivalSpec,
    scheduled_qps: f64,
    lag_p99: u64,
) -> Check {
    if st.len() < 50 {
        return skipped("fewer than 50 measured requests");
    }
    let gaps_of = |mut t: Vec<u64>| -> Vec<f64> {
        // Late requests keep their intended send time; sort so gaps are
        // between consecutive releases, as a wire would see them.
        t.sort_unstable();
        t.windows(2).map(|w| (w[1] - w[0]) as f64).collect()
    };
    let gaps = gaps_of(st.iter().map(|s| s.sent).collect());
    let mean_gap = 1e9 / scheduled_qps;
    if *arrival == crate::arrival::ArrivalSpec::Fixed {
        return fixed_spacing(&gaps, mean_gap);
    }
    let ks = |test: &str, what: String, (d, p): (f64, f64)| {
        Check::new(
            p >= 0.001,
            format!("{what}: KS D={d:.4}, p={p:.3} over {} gaps", gaps.len()),
            json!({"test": test, "d": d, "p_value": p, "gaps": gaps.len(), "alpha": 0.001}),
        )
    };
    let intended = gaps_of(st.iter().map(|s| s.intended).collect());
    // Each send may be late by its send lag (judged by its own check), so the wire's gaps
    // are compared with the schedule's up to the send lag's p99: one client thread cannot
    // put two requests closer than one write's cost (over loopback a write runs the
    // receiver's TCP stack too, ~5–10 µs), so requests due closer than that leave together,
    // and a plain fit of the wire's gaps would fail every run at µs scale.
    let tol = (lag_p99 as f64).max(1_000.0);
    let wire = crate::arrival::ks_two_sample_within(&gaps, &intended, tol);
    let tol_s = crate::dist::fmt_ns(tol);
    match arrival.gap_cdf(mean_gap) {
        Some(cdf) => {
            // Poisson and renewal processes: the schedule's own gaps against the process
            // asked for (a wrong generator or rate fails here), and the wire against the
            // schedule.
            let (d, p) = crate::arrival::ks_one_sample(&intended, &cdf);
            let (wd, wp) = wire;
            let plain = crate::arrival::ks_one_sample(&gaps, &cdf).0;
            let (test, what) = if *arrival == crate::arrival::ArrivalSpec::Poisson {
                ("ks_exponential", "exponential".to_string())
            } else {
                ("ks_gaps", format!("the gaps of {arrival}"))
            };
            Check::new(
                p >= 0.001 && wp >= 0.001,
                format!(
                    "intended gaps vs {what}: KS D={d:.4}, p={p:.3}; send gaps vs intended \
                     within the send lag p99 {tol_s}: D={wd:.4}, p={wp:.3}; over {} gaps",
                    gaps.len()
                ),
                json!({"test": test, "d": d, "p_value": p, "gaps": gaps.len(), "alpha": 0.001,
                       "wire_d": wd, "wire_p_value": wp, "tolerance_ns": tol,
                       "send_gaps_d": plain}),
            )
        }
        None => ks(
            "ks_vs_schedule",
            format!(
                "send gaps vs the intended schedule's ({arrival}), within the send lag p99 {tol_s}"
            ),
            wire,
        ),
    }
}

pub(super) fn fixed_spacing(gaps: &[f64], mean_gap: f64) -> Check {
    let mut dev: Vec<f64> = gaps.iter().map(|g| (g / mean_gap - 1.0).abs()).collect();
    dev.sort_by(|a, b| a.total_cmp(b));
    let p99 = dev[((dev.len() as f64 * 0.99) as usize).min(dev.len() - 1)];
    Check::new(
        p99 <= 0.05,
        format!(
            "send gaps within {:.1}% of the fixed spacing at p99 (limit 5%)",
            p99 * 100.0
        ),
        json!({"test": "fixed_spacing", "p99_rel_dev": p99, "limit": 0.05}),
    )
}

/// Independence (Lancet's check): the smallest lag at which consecutive
/// sojourn times are no longer rank-correlated (|Spearman| < 0.05). Fails
/// when they stay correlated beyond 5 % of the sample: the run then holds
/// few independent observations and should be longer.
pub(super) fn independence_check(r: &RunResult) -> Check {
    let Some(st) = measured_stamps(r, CHECK_SAMPLE) else {
        return skipped(NO_RECORDS);
    };
    if st.len() < 200 {
        return skipped("fewer than 200 measured requests");
    }
    let soj: Vec<f64> = st.iter().map(|s| s.durations()[0] as f64).collect();
    let max_lag = soj.len() / 20;
    let mut lag = 1;
    let mut rho = crate::stats::spearman_lag(&soj, 1);
    let rho1 = rho;
    while rho.abs() >= 0.05 && lag < max_lag {
        lag = (lag * 2).min(max_lag);
        rho = crate::stats::spearman_lag(&soj, lag);
    }
    let ok = rho.abs() < 0.05;
    Check::new(
        ok,
        if ok {
            format!("sojourns independent beyond lag {lag} (Spearman {rho:+.3}; lag 1 {rho1:+.3})")
        } else {
            format!("sojourns still correlated at lag {lag} (Spearman {rho:+.3}): lengthen the run")
        },
        json!({"lag": lag, "spearman_at_lag": rho, "spearman_lag1": rho1, "threshold": 0.05, "sample": soj.len()}),
    )
}

/// Stationarity: Mann–Kendall trend test on per-interval p99 sojourn; a
/// significant trend (p < 0.01, ≥ 5 intervals) means the run was not in
/// steady state (warmup too short, or the system drifting).
pub(super) fn stationarity_check(r: &RunResult) -> Check {
    if !r.spec.arrival.is_stationary() {
        return skipped("the load changes over time on purpose (a trace or load profile)");
    }
    let p99s: Vec<f64> = r
        .intervals
        .iter()
        .filter(|b| b.count >= 20)
        .filter_map(|b| crate::collector::decode_hist(&b.hist_b64[0]))
        .map(|h| h.value_at_quantile(0.99) as f64)
        .collect();
    if p99s.len() < 5 {
        return skipped(
            "fewer than 5 intervals with 20+ requests (lengthen the run or shorten --interval)",
        );
    }
    let (z, p) = crate::stats::mann_kendall(&p99s);
    let ok = p >= 0.01;
    Check::new(
        ok,
        if ok {
            format!(
                "no trend in per-interval p99 over {} intervals (Mann–Kendall p={p:.3})",
                p99s.len()
            )
        } else {
            format!(
                "per-interval p99 trends {} (Mann–Kendall z={z:+.2}, p={p:.4}): not in steady state; lengthen the warmup",
                if z > 0.0 { "up" } else { "down" }
            )
        },
        json!({"test": "mann_kendall", "z": z, "p_value": p, "intervals": p99s.len(), "alpha": 0.01}),
    )
}
