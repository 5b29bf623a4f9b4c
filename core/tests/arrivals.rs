//! Arrival processes end to end: a trace replays its file's times exactly,
//! a stepped profile shows its steps in the per-interval achieved rate,
//! bad traces and rates are refused before a run starts, and the ideal
//! works from records shaped like a TCP client's.

mod common;

use common::*;
use std::sync::Arc;
use taillab_core::collector::{IntervalSink, Shard, Stamps};
use taillab_core::harness::{Bound, Records, RunError};
use taillab_core::{RunResult, RunSpec};

#[test]
fn trace_replays_the_file_exactly() {
    let _s = serial();
    let dir = tmp("trace");
    std::fs::create_dir_all(&dir).unwrap();
    // Irregular timestamps in seconds with µs digits, starting at an arbitrary epoch.
    let mut t = 1_700_000_000.0f64;
    let mut times = Vec::new();
    for i in 0..3_000u64 {
        times.push(format!("{t:.6}"));
        t += [0.0005, 0.00013, 0.002, 0.000_001, 0.0][(i * 7 % 5) as usize];
    }
    let file = dir.join("arrivals.txt");
    std::fs::write(&file, format!("# seconds\n{}\n", times.join("\n"))).unwrap();
    let arrival: taillab_core::arrival::ArrivalSpec =
        format!("trace:{},scale=2", file.display()).parse().unwrap();
    let spec = RunSpec {
        qps: arrival.own_rate().unwrap(),
        arrival: arrival.clone(),
        warmup: Bound::Requests(500),
        measure: Bound::Requests(2_500),
        keep_records: true,
        ..RunSpec::default()
    };
    let (r, s, _) = run(&spec, "fixed:20us");
    assert_eq!(s.requests.measured, 2_500);
    taillab_core::write_run(&dir.join("run"), &s, &r, true).unwrap();
    let csv = std::fs::read_to_string(dir.join("run/requests.csv")).unwrap();
    let mut lines = csv.lines();
    let head = lines.next().unwrap();
    assert!(head.ends_with(",ideal_completed"), "{head}");
    let intended: Vec<u64> = lines
        .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
        .collect();
    // Exactly the file's distances from its first time, halved by scale=2, rounded once.
    let want: Vec<u64> = times
        .iter()
        .map(|x| (((x.parse::<f64>().unwrap() - 1_700_000_000.0) * 1e9) / 2.0).round() as u64)
        .collect();
    let got: Vec<u64> = intended.iter().map(|x| x - intended[0]).collect();
    assert_eq!(got, want);
    assert_eq!(s.arrival, arrival.to_string());
    assert!(
        s.checks["interarrival"].ok,
        "{}",
        s.checks["interarrival"].verdict
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn steps_show_in_the_interval_rate() {
    let _s = serial();
    let arrival: taillab_core::arrival::ArrivalSpec = "steps:1000@1s,3000@1s".parse().unwrap();
    let spec = RunSpec {
        qps: 2000.0,
        arrival,
        warmup: Bound::Requests(0),
        measure: Bound::Seconds(4.0),
        interval_ns: 500_000_000,
        keep_records: true,
        ..RunSpec::default()
    };
    let (r, s, _) = run(&spec, "fixed:20us");
    let counts: Vec<u64> = r.intervals.iter().map(|b| b.count).collect();
    eprintln!("per-interval counts {counts:?}");
    // 500 ms intervals: 500 requests at 1000/s, 1500 at 3000/s (Poisson: ±5σ).
    let want = [500.0, 500.0, 1500.0, 1500.0, 500.0, 500.0, 1500.0, 1500.0];
    for (i, w) in want.iter().enumerate() {
        let c = counts.get(i).copied().unwrap_or(0) as f64;
        assert!(
            (c - w).abs() < 5.0 * w.sqrt(),
            "interval {i}: {c} requests, want ≈ {w}"
        );
    }
    assert!(s.checks["stationarity"].verdict.starts_with("skipped"));
}

#[test]
fn bad_arrivals_are_refused_before_the_run() {
    let dir = tmp("short");
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("short.csv");
    std::fs::write(&f, "time_ms\n0\n1\n2\n3\n").unwrap();
    let arrival: taillab_core::arrival::ArrivalSpec =
        format!("trace:{}", f.display()).parse().unwrap();
    let spec = RunSpec {
        qps: arrival.own_rate().unwrap(),
        arrival: arrival.clone(),
        measure: Bound::Requests(10),
        ..RunSpec::default()
    };
    let e = spec.validate().unwrap_err().to_string();
    assert!(e.contains("line 5") && e.contains("10 measured"), "{e}");
    let secs = RunSpec {
        measure: Bound::Seconds(1.0),
        ..spec.clone()
    };
    let e = secs.validate().unwrap_err().to_string();
    assert!(e.contains("lengthen the trace"), "{e}");
    let wrong = RunSpec {
        qps: 5.0,
        measure: Bound::Requests(3),
        ..spec
    };
    assert!(
        matches!(wrong.validate(), Err(RunError::Invalid(m)) if m.contains("sets its own mean rate"))
    );
    let e = "steps:100@1s,0@1s"
        .parse::<taillab_core::arrival::ArrivalSpec>()
        .unwrap_err();
    assert!(e.to_string().contains("positive"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A TCP client's records: `enqueued = sent`, `started = enqueued + the
/// server's queue`, `finished = started + the server's service`, and
/// `completed` after the return trip. The ideal uses the server's service
/// times; the excess is what transport added.
#[test]
fn ideal_from_tcp_shaped_records_shows_transport_as_excess() {
    let n = 5_000u64;
    let rec = Records::new(n);
    let sink = IntervalSink::new(1);
    sink.measure_start
        .store(1, std::sync::atomic::Ordering::Release);
    let mut shard = Shard::new(0, &sink, 10_000_000, 1_000_000_000);
    // One server at 50 µs per request, arrivals every 100 µs: no queueing in the ideal.
    let (svc, wire) = (50_000u64, 30_000u64);
    for i in 0..n {
        let intended = 1_000 + i * 100_000;
        let st = Stamps::local(
            intended,
            intended + 1_000,
            intended + 1_000,
            intended + 1_000 + 2_000,
            intended + 1_000 + 2_000 + svc,
            intended + 1_000 + 2_000 + svc + wire,
        );
        rec.set(i, &st, (i % 4) as usize, true);
        shard.record(&st, true, &sink);
    }
    shard.flush(&sink);
    let r = RunResult {
        spec: RunSpec {
            qps: 10_000.0,
            measure: Bound::Requests(n),
            ..RunSpec::default()
        },
        t0: 0,
        measure_start: 1,
        first_measured_intended: 1_000,
        last_measured_intended: 1_000 + (n - 1) * 100_000,
        generated_warmup: 0,
        generated_measured: n,
        totals: shard,
        intervals: sink.finish(),
        slice_ns: 10_000_000,
        arrivals_per_slice: vec![],
        errors: 0,
        first_error: None,
        aborted: false,
        records: Some(Arc::new(rec)),
        wall_start: std::time::SystemTime::now(),
        app_stats: serde_json::Value::Null,
        placement: None,
        fanout: None,
        ideal_completions: Default::default(),
    };
    let s = taillab_core::summarize(&r, "null", &Default::default(), "loopback");
    let i = s.ideal.expect("records give an ideal");
    assert_eq!(i.sojourn.mean, svc as f64);
    // Measured sojourn = send lag + server queue + service + transport.
    let e = i.excess["mean"];
    assert!(
        (e - (1_000 + 2_000 + wire) as f64).abs() < 1.0,
        "excess {e}"
    );
    let no_rec = RunResult { records: None, ..r };
    let s = taillab_core::summarize(&no_rec, "null", &Default::default(), "loopback");
    assert!(s.ideal.is_none() && s.ideal_skipped.unwrap().contains("records"));
}
