//! The feed's claims against the schedule: every request once, in the discipline's order.

use super::*;
use crate::queue::Assign;
use crate::schedule::Counter;
use crate::spec::{Bound, RunSpec};
use std::sync::Arc;

fn spec(n: u64, threads: usize, dispatch: Dispatch) -> RunSpec {
    RunSpec {
        qps: 1e6,
        threads,
        dispatch,
        warmup: Bound::Requests(10),
        measure: Bound::Requests(n),
        ..RunSpec::default()
    }
}

/// Every request is claimed exactly once, with its own payload, by workers racing on
/// the ring (some prefilling, some not); each worker sees its requests in schedule order.
/// Workers `0..threads` racing to claim from `feed` until it ends: each worker's
/// requests with their payload's counter, in the order it claimed them. After every
/// `every`-th claim of an even worker (0: never) it generates up to `ahead` requests.
/// `timed`: each claims at the clock's time (the schedule's times are on it) and then
/// serves 0-3 us, or sleeps 6 ms once in 3 000 claims (so backlogs build and drain); else
/// at time 0 (FIFO needs no time) and at once.
fn race(
    feed: &Arc<Feed>,
    threads: usize,
    every: usize,
    ahead: usize,
    timed: bool,
) -> Vec<Vec<(Item, u64)>> {
    let sink = Arc::new(IntervalSink::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|w| {
            let (feed, sink) = (feed.clone(), sink.clone());
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let mut got = Vec::new();
                let now = || if timed { crate::clock::now_ns() } else { 0 };
                while let Some(it) = feed.claim(w, now(), &mut buf, &sink) {
                    got.push((it, u64::from_le_bytes(buf[..8].try_into().unwrap())));
                    let k = got.len() as u64;
                    if timed && k % 3000 == 1500 + 300 * w as u64 {
                        std::thread::sleep(std::time::Duration::from_millis(6));
                    } else if timed {
                        let until = crate::clock::now_ns() + (k * 7919 + w as u64) % 3000;
                        while crate::clock::now_ns() < until {
                            std::hint::spin_loop();
                        }
                    }
                    if every > 0 && w % 2 == 0 && got.len() % every == 0 {
                        for _ in 0..ahead {
                            feed.prefill_one(w, &sink);
                        }
                    }
                }
                got
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn racing_workers_claim_every_request_once_in_order() {
    for dispatch in [Dispatch::Shared, Dispatch::PerWorker(Assign::Random)] {
        let threads = 4;
        let n = 50_000;
        let s = spec(n, threads, dispatch);
        let reference = reference(&s);
        assert_eq!(reference.len() as u64, n + 10);
        let feed = Arc::new(Feed::new(
            Schedule::new(&s, Box::new(Counter(0)), 0),
            threads,
            Discipline::Fifo,
            dispatch,
            0,
        ));
        let raced = race(&feed, threads, 3, 5, false);
        let mut all = Vec::new();
        for (w, got) in raced.into_iter().enumerate() {
            let got: Vec<_> = got
                .into_iter()
                .map(|(it, p)| (it.index, it.intended, it.worker, p))
                .collect();
            assert!(
                got.windows(2).all(|p| p[0].0 < p[1].0),
                "{dispatch}: worker {w} out of order"
            );
            if dispatch != Dispatch::Shared {
                assert!(
                    got.iter().all(|g| g.2 == w),
                    "{dispatch}: a request for another worker"
                );
            }
            all.extend(got);
        }
        each_once(all, &reference, &dispatch.to_string());
        assert_eq!(feed.schedule().stats().generated_measured, n);
    }
}

/// The ring never holds more than it has room for, and generating ahead stops there.
#[test]
fn generating_ahead_is_bounded_by_the_ring() {
    let s = spec(3 * RING as u64, 1, Dispatch::Shared);
    let feed = Feed::new(
        Schedule::new(&s, Box::new(Counter(0)), 0),
        1,
        Discipline::Fifo,
        Dispatch::Shared,
        0,
    );
    let sink = IntervalSink::new(1);
    let mut n = 0;
    while feed.prefill_one(0, &sink) {
        n += 1;
    }
    assert_eq!(n, RING);
    let mut buf = Vec::new();
    assert_eq!(feed.claim(0, 0, &mut buf, &sink).unwrap().index, 0);
    assert!(
        feed.prefill_one(0, &sink),
        "a claimed slot makes room for one more"
    );
    assert!(!feed.prefill_one(0, &sink));
}

/// Several producers (dealt shares) feeding racing workers: every request of the one
/// producer's schedule is claimed exactly once — the same indexes and arrival times —
/// each worker sees its requests in arrival order, the measured phase begins once, and
/// the merged bookkeeping counts the run.
#[test]
fn several_producers_feed_the_one_schedule_in_order() {
    let threads = 3;
    let n = 60_000;
    let s = spec(n, threads, Dispatch::Shared);
    let reference: Vec<(u64, u64)> = {
        let mut sched = Schedule::new(&s, Box::new(Counter(0)), 0);
        let sink = IntervalSink::new(1);
        let mut buf = Vec::new();
        std::iter::from_fn(|| sched.next(&mut buf, &sink))
            .map(|it| (it.index, it.intended))
            .collect()
    };
    for m in [2, 3, 5] {
        let scheds = (0..m)
            .map(|j| {
                let share = Share::new(j, m).unwrap();
                Schedule::dealt(&s, Box::new(Counter(1_000_000 * j as u64)), 0, share)
            })
            .collect();
        let feed = Arc::new(Feed::with_producers(
            scheds,
            threads,
            Discipline::Fifo,
            Dispatch::Shared,
            0,
        ));
        let mut all = Vec::new();
        for got in race(&feed, threads, 7, 9, false) {
            let got: Vec<_> = got
                .into_iter()
                .map(|(it, p)| (it.index, it.intended, it.first_measured, p))
                .collect();
            assert!(
                got.windows(2).all(|p| p[0].0 < p[1].0),
                "m {m}: out of order"
            );
            all.extend(got);
        }
        all.sort();
        let got: Vec<(u64, u64)> = all.iter().map(|g| (g.0, g.1)).collect();
        assert_eq!(got, reference, "m {m}");
        assert_eq!(all.iter().filter(|g| g.2).count(), 1, "m {m}: begun once");
        // Request i came from producer i mod m, with that producer's own payloads.
        for g in &all {
            let j = g.0 % m as u64;
            assert_eq!(
                g.3,
                1_000_000 * j + g.0 / m as u64 + 1,
                "m {m}: request {}",
                g.0
            );
        }
        let st = feed.stats();
        assert_eq!(
            (st.generated_warmup, st.generated_measured),
            (10, n),
            "m {m}"
        );
        assert_eq!(feed.producers(), m);
    }
}

/// `got` (index, intended, worker, payload counter), sorted, is `reference` request for
/// request: every one claimed exactly once, each with the payload generated for it (the
/// counter is 1-based).
fn each_once(mut got: Vec<(u64, u64, usize, u64)>, reference: &[(u64, u64, usize)], tag: &str) {
    got.sort();
    assert_eq!(got.len(), reference.len(), "{tag}: every request once");
    for (g, r) in got.iter().zip(reference) {
        assert_eq!((g.0, g.1, g.2), *r, "{tag}");
        assert_eq!(g.3, g.0 + 1, "{tag}: request {} got another's payload", g.0);
    }
}

/// The whole schedule of `s` as (index, intended, worker), in order.
fn reference(s: &RunSpec) -> Vec<(u64, u64, usize)> {
    let mut sched = Schedule::new(s, Box::new(Counter(0)), 0);
    let sink = IntervalSink::new(1);
    let mut buf = Vec::new();
    std::iter::from_fn(|| sched.next(&mut buf, &sink))
        .map(|it| (it.index, it.intended, it.worker))
        .collect()
}

/// One thread claims for workers in turn on a simulated clock (services of 0.2-1.8 us
/// at 1 M arrivals/s, and every 7 000 claims a stall of 9 ms: a backlog of 9 000, more
/// than the ring holds): every pick is what the discipline takes from the requests
/// unclaimed at that moment. LIFO: the newest due in the worker's queue, exactly;
/// random: a due one; both: the earliest to come when none is due.
#[test]
fn one_free_worker_picks_what_the_discipline_takes() {
    for d in [Discipline::Lifo, Discipline::Random] {
        for (dispatch, threads) in [
            (Dispatch::Shared, 1),
            (Dispatch::Shared, 3),
            (Dispatch::PerWorker(Assign::Random), 3),
        ] {
            let s = spec(30_000, threads, dispatch);
            let all = reference(&s);
            let feed = Feed::new(
                Schedule::new(&s, Box::new(Counter(0)), 0),
                threads,
                d,
                dispatch,
                7,
            );
            let sink = IntervalSink::new(threads);
            let per_worker = dispatch.is_per_worker();
            let queue_of = |i: usize| if per_worker { all[i].2 } else { 0 };
            // Unclaimed indexes per queue.
            let mut open: Vec<std::collections::BTreeSet<u64>> = (0..threads)
                .map(|q| {
                    (0..all.len())
                        .filter(|&i| queue_of(i) == q)
                        .map(|i| i as u64)
                        .collect()
                })
                .collect();
            let mut buf = Vec::new();
            let mut now = 0u64;
            let mut k = 0u64;
            let mut claimed = 0;
            let mut from_cellar_era = false;
            loop {
                let w = (k % threads as u64) as usize;
                let q = if per_worker { w } else { 0 };
                let Some(it) = feed.claim(w, now, &mut buf, &sink) else {
                    assert!(open[q].is_empty(), "{d} {dispatch}: ended early");
                    if open.iter().all(|o| o.is_empty()) {
                        break;
                    }
                    k += 1;
                    continue;
                };
                let tag = format!("{d} {dispatch} w{w}: claim {k} at {now}");
                assert_eq!(
                    u64::from_le_bytes(buf[..8].try_into().unwrap()),
                    it.index + 1,
                    "{tag}: payload"
                );
                assert_eq!(
                    (it.intended, it.worker),
                    (all[it.index as usize].1, all[it.index as usize].2),
                    "{tag}"
                );
                assert!(
                    open[q].contains(&it.index),
                    "{tag}: {} twice or not its queue's",
                    it.index
                );
                let due_newest = open[q]
                    .iter()
                    .rev()
                    .find(|&&i| all[i as usize].1 <= now)
                    .copied();
                let earliest = *open[q].iter().next().unwrap();
                match (d, due_newest) {
                    (_, None) => assert_eq!(it.index, earliest, "{tag}: none due"),
                    (Discipline::Lifo, Some(n)) => assert_eq!(it.index, n, "{tag}: LIFO"),
                    (_, Some(_)) => {
                        assert!(it.intended <= now, "{tag}: random took one not due")
                    }
                }
                if due_newest.is_some()
                    && open[q]
                        .iter()
                        .filter(|&&i| all[i as usize].1 <= now)
                        .count()
                        > RING
                {
                    from_cellar_era = true;
                }
                open[q].remove(&it.index);
                claimed += 1;
                k += 1;
                now = now.max(it.intended) + 200 + (k * 7919 % 1600);
                if k.is_multiple_of(7000) {
                    now += 9_000_000;
                }
            }
            assert_eq!(claimed, all.len(), "{d} {dispatch}");
            assert!(
                from_cellar_era || per_worker,
                "{d} {dispatch}: the backlog never passed the ring"
            );
        }
    }
}

/// Random order draws uniformly: with every request of a short schedule due, the first
/// pick falls on each of the 20 about equally often over 600 seeds (a pick that favoured
/// the oldest, the newest or one word of the pool would put hundreds on one).
#[test]
fn random_order_draws_uniformly() {
    for dispatch in [Dispatch::Shared, Dispatch::PerWorker(Assign::RoundRobin)] {
        let s = spec(10, 1, dispatch);
        let mut first = [0u32; 20];
        let mut last = [0u32; 20];
        for seed in 0..600 {
            let feed = Feed::new(
                Schedule::new(&s, Box::new(Counter(0)), 0),
                1,
                Discipline::Random,
                dispatch,
                seed,
            );
            let sink = IntervalSink::new(1);
            let mut buf = Vec::new();
            let got: Vec<u64> = std::iter::from_fn(|| feed.claim(0, u64::MAX / 2, &mut buf, &sink))
                .map(|it| it.index)
                .collect();
            assert_eq!(got.len(), 20);
            first[got[0] as usize] += 1;
            last[got[19] as usize] += 1;
        }
        for (i, (&f, &l)) in first.iter().zip(&last).enumerate() {
            assert!(
                (8..=56).contains(&f),
                "{dispatch}: request {i} first {f} times of 600"
            );
            assert!(
                (8..=56).contains(&l),
                "{dispatch}: request {i} last {l} times of 600"
            );
        }
    }
    // 150 requests fill three words of the pool's bitmap (64, 64 and 22 of them): the
    // first pick falls in each in proportion (expected 256, 256 and 88 of 600; a draw
    // from the newest word only, or from the words as if equally full, is far off).
    let s = spec(140, 1, Dispatch::Shared);
    let mut by_word = [0u32; 3];
    for seed in 0..600 {
        let feed = Feed::new(
            Schedule::new(&s, Box::new(Counter(0)), 0),
            1,
            Discipline::Random,
            Dispatch::Shared,
            seed,
        );
        let sink = IntervalSink::new(1);
        let mut buf = Vec::new();
        let it = feed.claim(0, u64::MAX / 2, &mut buf, &sink).unwrap();
        by_word[(it.index / 64) as usize] += 1;
    }
    assert!(
        (196..=316).contains(&by_word[0])
            && (196..=316).contains(&by_word[1])
            && (45..=131).contains(&by_word[2]),
        "first picks by word of the pool: {by_word:?} (expected about 256, 256, 88)"
    );
}

/// Workers racing in real time (1 M arrivals/s, services of 0-3 us, each worker pausing
/// 6 ms now and then, so backlogs build and drain): every request is claimed
/// exactly once with its own payload, by LIFO and random order, shared and per worker.
#[test]
fn racing_lifo_and_random_claim_every_request_once() {
    for d in [Discipline::Lifo, Discipline::Random] {
        for dispatch in [Dispatch::Shared, Dispatch::PerWorker(Assign::Random)] {
            let threads = 4;
            let n = 40_000;
            let s = spec(n, threads, dispatch);
            let all = reference(&s);
            let t0 = crate::clock::now_ns();
            let feed = Arc::new(Feed::new(
                Schedule::new(&s, Box::new(Counter(0)), t0),
                threads,
                d,
                dispatch,
                3,
            ));
            let mut got: Vec<(u64, u64, usize, u64)> = Vec::new();
            for (w, claimed) in race(&feed, threads, 5, 1, true).into_iter().enumerate() {
                for (it, p) in claimed {
                    if dispatch.is_per_worker() {
                        assert_eq!(it.worker, w, "{d} {dispatch}: another worker's request");
                    }
                    got.push((it.index, it.intended - t0, it.worker, p));
                }
            }
            each_once(got, &all, &format!("{d} {dispatch}"));
        }
    }
}
