use super::*;

fn st(i: u64, q: u64, svc: u64, lag: u64) -> Stamps {
    Stamps::local(
        i,
        i + lag,
        i + lag,
        i + lag + q,
        i + lag + q + svc,
        i + lag + q + svc,
    )
}

#[test]
fn durations_decompose_sojourn() {
    let s = st(1000, 30, 200, 5);
    assert_eq!(s.durations(), [235, 200, 30, 5, 0, 0]);
    let k = Stamps {
        enqueued_user: s.enqueued + 7,
        completed_user: s.completed + 11,
        ..s
    };
    assert_eq!(k.durations(), [235, 200, 30, 5, 11, 7]);
}

#[test]
fn shards_merge_to_the_same_stats_as_one() {
    let sink = IntervalSink::new(2);
    sink.measure_start.store(1, Ordering::Release);
    let mut a = Shard::new(0, &sink, 1_000_000, 10_000_000);
    let mut b = Shard::new(1, &sink, 1_000_000, 10_000_000);
    let sink1 = IntervalSink::new(1);
    sink1.measure_start.store(1, Ordering::Release);
    let mut one = Shard::new(0, &sink1, 1_000_000, 10_000_000);
    for i in 0..10_000u64 {
        let s = st(i * 3_000, i % 97, 1000 + (i * 7919) % 5000, i % 3);
        if i % 2 == 0 {
            a.record(&s, true, &sink)
        } else {
            b.record(&s, true, &sink)
        }
        one.record(&s, true, &sink1);
    }
    a.absorb(&b);
    assert_eq!(a.measured, 10_000);
    for (m, name) in METRICS.iter().enumerate() {
        let x = MetricStats::from_hist(&a.totals.0[m], Some(a.sums[m]));
        let y = MetricStats::from_hist(&one.totals.0[m], Some(one.sums[m]));
        assert_eq!(x, y, "metric {name}");
    }
    assert_eq!(a.slice_done, one.slice_done);
}

#[test]
fn intervals_cover_every_measured_request() {
    let sink = IntervalSink::new(2);
    sink.measure_start.store(1, Ordering::Release);
    let mut shards: Vec<Shard> = (0..2)
        .map(|w| Shard::new(w, &sink, 1_000_000, 1_000_000))
        .collect();
    let n = 50_000u64;
    for i in 0..n {
        let s = st(i * 200, 0, 100, 0);
        shards[(i % 2) as usize].record(&s, true, &sink);
        if i % 5000 == 0 {
            sink.collect();
        }
    }
    for s in &mut shards {
        s.flush(&sink);
    }
    let blobs = sink.finish();
    assert_eq!(blobs.iter().map(|b| b.count).sum::<u64>(), n);
    // Completion times span 10 ms, so there are 10 one-ms intervals, in order.
    assert_eq!(
        blobs.iter().map(|b| b.index).collect::<Vec<_>>(),
        (0..10).collect::<Vec<_>>()
    );
    let h = decode_hist(&blobs[3].hist_b64[1]).unwrap();
    assert_eq!(h.len(), blobs[3].count);
    assert_eq!(h.max(), 100);
}

#[test]
fn first_roll_takes_a_prepared_spare() {
    // The worker must not allocate histograms between two requests: its
    // first roll takes the set the sink prepared.
    let sink = IntervalSink::new(1);
    sink.measure_start.store(1, Ordering::Release);
    let mut shard = Shard::new(0, &sink, 1_000_000, 1_000_000);
    let prepared: *const Hists = &**sink.spares[0].lock().last().expect("a spare left");
    shard.record(&st(10, 0, 100, 0), true, &sink);
    shard.record(&st(2_000_000, 0, 100, 0), true, &sink);
    assert_eq!(shard.cur_k, 2);
    assert!(
        std::ptr::eq(&*shard.cur, prepared),
        "the first roll allocated"
    );
}

#[test]
fn warmup_is_counted_not_recorded() {
    for watched in [false, true] {
        let sink = IntervalSink::new(1).watched(watched, 1000);
        let mut s = Shard::new(0, &sink, 1000, 1000);
        s.record(&st(0, 1, 2, 3), false, &sink);
        assert_eq!((s.warmup, s.measured, s.totals.count()), (1, 0, 0));
        s.flush(&sink);
        assert!(
            sink.finish().is_empty(),
            "a warmup request in the interval log"
        );
    }
}

/// A watched run's warmup intervals: counted from the schedule's start, every warmup
/// request in one, the last one cut short where the measured phase begins (a warmup
/// request completing after that counts in it), served once every thread has left it;
/// the measured intervals are what an unwatched run logs.
#[test]
fn a_watched_runs_warmup_has_intervals_of_its_own() {
    const MS: u64 = 1_000_000;
    let run = |watched: bool| {
        let sink = IntervalSink::new(2).watched(watched, MS);
        sink.start.store(1000, Ordering::Release);
        let mut shards: Vec<Shard> = (0..2).map(|w| Shard::new(w, &sink, MS, MS)).collect();
        // Warmup 2.5 ms, one request every 10 µs of 100 ns; then 2 ms measured.
        for i in 0..250u64 {
            shards[(i % 2) as usize].record(&st(1000 + i * 10_000, 0, 100, 0), false, &sink);
        }
        sink.collect();
        if watched {
            let w = sink.latest_warmup().expect("warmup interval 1 is finished");
            assert_eq!((w.index, w.count, w.length_ns), (1, 100, MS));
            assert_eq!((w.p50[1], w.max[1]), (100, 100));
        }
        sink.measure_start
            .store(1000 + 5 * MS / 2, Ordering::Release);
        // A warmup request completing after the measured phase began, in the interval
        // after the warmup's last.
        let late = st(1000 + 5 * MS / 2 - 50, 0, MS / 2 + 100, 0);
        shards[0].record(&late, false, &sink);
        for i in 0..200u64 {
            let s = st(1000 + 5 * MS / 2 + i * 10_000, 0, 200, 0);
            shards[(i % 2) as usize].record(&s, true, &sink);
        }
        sink.collect();
        let (w, m) = (sink.latest_warmup(), sink.latest());
        for s in &mut shards {
            s.flush(&sink);
        }
        let blobs = sink.finish();
        let logged: Vec<(u32, u64)> = blobs.iter().map(|b| (b.index, b.count)).collect();
        (w, logged, m)
    };
    let (w, logged, latest) = run(true);
    let w = w.expect("the warmup's last interval is finished");
    assert_eq!((w.index, w.count, w.length_ns), (2, 51, MS / 2));
    assert_eq!(w.p50[1], 100);
    assert_eq!(logged, vec![(0, 100), (1, 100)]);
    let m = latest.expect("measured interval 0 is finished");
    assert_eq!((m.index, m.count, m.length_ns, m.p50[1]), (0, 100, MS, 200));
    let (none, plain, _) = run(false);
    assert_eq!((none, plain), (None, logged));
}
