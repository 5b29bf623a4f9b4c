//! A run's per-request records written as requests.csv and as requests.parquet (the same
//! run, written twice) read back as the same rows, and those rows are the run's own records:
//! same ids, workers, phases and stamps, the ideal's completion included. A live run's
//! progress reports (`RunSpec::live`) count requests in flight and carry the finished
//! intervals that the interval log then holds.

mod common;

use common::*;
use taillab_core::config::RequestFormat;
use taillab_core::harness::{Bound, Progress};
use taillab_core::reqfile::{file_name, read_all};
use taillab_core::RunSpec;

#[test]
fn a_runs_records_read_back_the_same_from_csv_and_parquet() {
    let _g = serial();
    let spec = RunSpec {
        qps: 5_000.0,
        warmup: Bound::Requests(500),
        measure: Bound::Requests(5_000),
        keep_records: true,
        save_requests: true,
        ..RunSpec::default()
    };
    let (mut r, s, _) = run(&spec, "exp:20us");
    // The summary kept the ideal's completions for the records; writing them from those is
    // writing them from a second replay.
    let kept = r
        .ideal_completions
        .get()
        .cloned()
        .expect("kept for the records");
    assert_eq!(kept.len() as u64, s.requests.measured + s.requests.warmup);
    let replay = tmp("records-replay");
    let csv = |d: &std::path::Path| std::fs::read(d.join(file_name(RequestFormat::Csv))).unwrap();
    taillab_core::write_run(&replay.join("kept"), &s, &r, true).unwrap();
    let _ = r.ideal_completions.take();
    taillab_core::write_run(&replay.join("again"), &s, &r, true).unwrap();
    assert_eq!(csv(&replay.join("kept")), csv(&replay.join("again")));
    let _ = std::fs::remove_dir_all(&replay);
    let dir = tmp("records");
    let mut read = Vec::new();
    for f in [RequestFormat::Csv, RequestFormat::Parquet] {
        r.spec.record_format = f;
        let d = dir.join(f.name());
        taillab_core::write_run(&d, &s, &r, true).unwrap();
        let other = match f {
            RequestFormat::Csv => RequestFormat::Parquet,
            RequestFormat::Parquet => RequestFormat::Csv,
        };
        assert!(
            !d.join(file_name(other)).exists(),
            "{f} run wrote the other format too"
        );
        read.push(read_all(&d.join(file_name(f))).unwrap());
    }
    let (csv, parquet) = (&read[0], &read[1]);
    assert!(
        csv.0.ideal,
        "the run has an ideal, so the file has ideal_completed"
    );
    assert_eq!(csv, parquet);
    let rows = &csv.1;
    assert_eq!(rows.len() as u64, s.requests.measured + s.requests.warmup);
    let mem: Vec<_> = r.records.as_ref().unwrap().iter().collect();
    assert_eq!(mem.len(), rows.len());
    for (row, (id, worker, measured, st)) in rows.iter().zip(mem) {
        assert_eq!(
            (row.id, row.worker, row.measured, row.stamps),
            (id, worker as u64, measured, st)
        );
        assert!(row.ideal_completed.unwrap() >= st.intended);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_live_run_reports_in_flight_and_its_finished_intervals() {
    let _g = serial();
    let spec = RunSpec {
        qps: 2_000.0,
        warmup: Bound::Requests(200),
        measure: Bound::Seconds(2.5),
        interval_ns: 500_000_000,
        live: true,
        ..RunSpec::default()
    };
    let mut seen: Vec<Progress> = Vec::new();
    let r = taillab_core::run_integrated(
        &spec,
        std::sync::Arc::new(Spin),
        client("exp:50us", 3),
        &mut |p| seen.push(p),
    )
    .unwrap();
    assert!(
        seen.iter().all(|p| p.in_flight.is_some()),
        "a live run counts in-flight requests"
    );
    assert!(seen.iter().any(|p| p.measuring) && !seen[0].measuring);
    let last = seen
        .iter()
        .rev()
        .find_map(|p| p.interval)
        .expect("intervals were finished");
    let logged = r
        .intervals
        .iter()
        .find(|b| b.index == last.index)
        .expect("in the log");
    assert_eq!(last.count, logged.count);
    let h = taillab_core::collector::decode_hist(&logged.hist_b64[0]).unwrap();
    assert_eq!(
        (last.p50[0], last.p99[0], last.max[0]),
        (h.value_at_quantile(0.5), h.value_at_quantile(0.99), h.max())
    );
    // At an utilisation of 0.1 a handful of requests are in the system, never hundreds.
    let most = seen.iter().filter_map(|p| p.in_flight).max().unwrap();
    assert!(most < 100, "in flight at most {most}");

    // Off, none of it is computed.
    let off = RunSpec {
        live: false,
        measure: Bound::Requests(500),
        ..spec
    };
    let mut quiet = Vec::new();
    taillab_core::run_integrated(
        &off,
        std::sync::Arc::new(Spin),
        client("exp:50us", 3),
        &mut |p| quiet.push(p),
    )
    .unwrap();
    assert!(quiet
        .iter()
        .all(|p| p.in_flight.is_none() && p.interval.is_none()));
}
