use super::*;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

fn poisson(n: usize, gap_ns: f64, seed: u64) -> Vec<u64> {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let e = Exp::new(1.0 / gap_ns).unwrap();
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += e.sample(&mut rng);
            t as u64
        })
        .collect()
}

fn exp_service(mean: f64, seed: u64) -> impl FnMut() -> u64 {
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
    let e = Exp::new(1.0 / mean).unwrap();
    move || e.sample(&mut rng) as u64
}

fn spec(leaves: usize) -> FanoutSpec {
    FanoutSpec {
        leaves,
        replicas: 1,
        ..Default::default()
    }
}

/// Without queueing (arrivals far apart) a request waiting for N exponential leaves takes
/// the maximum of N draws: P(max ≤ x) = (1 − e^(−x/S))^N.
#[test]
fn the_whole_is_the_maximum_of_its_leaves() {
    let s = 1e6;
    for n in [1, 10, 50] {
        let h = simulate(
            &spec(n),
            poisson(20_000, 1e9, 1),
            &mut exp_service(s, 2),
            1,
            0,
        );
        let p99 = h.e2e.value_at_quantile(0.99) as f64;
        // (1 − e^(−x/S))^N = 0.99  →  x = −S ln(1 − 0.99^(1/N))
        let want = -s * (1.0 - 0.99f64.powf(1.0 / n as f64)).ln();
        assert!(
            (p99 / want - 1.0).abs() < 0.06,
            "N={n}: p99 {p99} vs {want}"
        );
        let above = h.stats().above_leaf_p99;
        let theory = 1.0 - 0.99f64.powi(n as i32);
        assert!(
            (above - theory).abs() < 0.02,
            "N={n}: {above} above the leaf p99, theory {theory}"
        );
    }
}

/// With queueing, one leaf is an M/M/1: its sojourn is exponential with rate μ − λ.
#[test]
fn one_leaf_is_an_mm1_queue() {
    let (s, gap) = (1e5, 2e5); // ρ = 0.5
    let h = simulate(
        &spec(1),
        poisson(200_000, gap, 3),
        &mut exp_service(s, 4),
        1,
        10_000,
    );
    let mean = h.e2e.mean();
    let want = 1.0 / (1.0 / s - 1.0 / gap);
    assert!(
        (mean / want - 1.0).abs() < 0.05,
        "mean {mean} vs M/M/1 {want}"
    );
    let st = h.stats();
    assert_eq!(st.sent_per_sub, 1.0);
    assert_eq!(st.cancelled_per_sub, 0.0);
}

/// First K of N: the K-th order statistic, faster than all N.
#[test]
fn the_first_k_answers_come_sooner() {
    let mut all = spec(10);
    let a = simulate(
        &all,
        poisson(10_000, 1e9, 5),
        &mut exp_service(1e6, 6),
        1,
        0,
    );
    all.wait = FanoutWait::First(5);
    let k = simulate(
        &all,
        poisson(10_000, 1e9, 5),
        &mut exp_service(1e6, 6),
        1,
        0,
    );
    assert!(k.e2e.value_at_quantile(0.99) * 2 < a.e2e.value_at_quantile(0.99));
}

/// A heavy-tailed leaf (1 % of services 100× the rest): hedging after the leaf's p95 cuts
/// the tail by far more than 5× for a few % more load — p99.9 of one leaf, p99 of ten
/// (at p99.9 ten leaves meet a slow primary *and* a slow copy: 10 × 0.01² = 1e-3) — and
/// tied requests cancel the copy that did not start.
#[test]
fn hedging_cuts_the_tail_for_a_little_load() {
    let mk = |seed| {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let d: crate::dist::Dist = "mix:0.99*exp:100us+0.01*fixed:10ms".parse().unwrap();
        move || d.sample(&mut rng) as u64
    };
    let arr = || poisson(100_000, 5e6, 7);
    for (leaves, q) in [(1, 0.999), (10, 0.99)] {
        let base = FanoutSpec {
            leaves,
            replicas: 2,
            ..Default::default()
        };
        let hedged = FanoutSpec {
            hedge: Hedge::Quantile(0.95),
            ..base.clone()
        };
        let plain = simulate(&base, arr(), &mut mk(8), 1, 5_000);
        let h = simulate(&hedged, arr(), &mut mk(8), 1, 5_000);
        let (a, b) = (plain.e2e.value_at_quantile(q), h.e2e.value_at_quantile(q));
        assert!(a > 5 * b, "{leaves} leaves: quantile {q} {a} → {b}");
        let st = h.stats();
        assert!(st.served_per_sub < 1.10, "extra load {}", st.served_per_sub);
        assert!(st.sent_per_sub > 1.02, "hedges sent {}", st.sent_per_sub);
    }
    let tied = FanoutSpec {
        leaves: 10,
        replicas: 2,
        tied: true,
        ..Default::default()
    };
    let t = simulate(&tied, arr(), &mut mk(8), 1, 5_000).stats();
    assert_eq!(t.sent_per_sub, 2.0);
    assert!(t.cancelled_per_sub > 0.0 && t.served_per_sub < 2.0, "{t:?}");
    // At this light load the replicas are idle: the primary starts at once and its twin is
    // dropped unserved, as a worker that finds it started drops it.
    assert!(
        t.served_per_sub < 1.001 && t.cancelled_per_sub > 0.999,
        "{t:?}"
    );
}

/// A run's costs move the model by what they cost: a release lag and a worker's wake-up
/// add to every request's latency, a hedge's lateness to the requests its copy answers.
#[test]
fn a_runs_costs_are_modelled() {
    let fixed = |ns: u64| -> Option<Box<dyn FnMut() -> u64>> { Some(Box::new(move || ns)) };
    let arr = poisson(20_000, 1e8, 11);
    let one = spec(1);
    let plain = simulate(&one, arr.clone(), &mut exp_service(1e6, 12), 1, 0);
    let costly = simulate_with(
        &one,
        arr.iter().map(|&t| (t, t + 200_000)),
        &mut exp_service(1e6, 12),
        1,
        0,
        Costs {
            wake: fixed(300_000),
            ..Costs::none()
        },
    );
    let added = costly.e2e.mean() - plain.e2e.mean();
    assert!((added / 500_000.0 - 1.0).abs() < 0.02, "added {added} ns");
    // From the release, the release lag is not counted: the wake-up alone is added.
    let after = costly.e2e_released.mean() - plain.e2e.mean();
    assert!((after / 300_000.0 - 1.0).abs() < 0.03, "added {after} ns");
    let w = costly.stats().wake;
    // Every copy that found its worker idle (nearly all, at 1 % load) woke.
    assert!(w.count > 19_000 && w.count <= 20_000, "{w:?}");
    assert!((w.p50 as f64 / 300_000.0 - 1.0).abs() < 0.01, "{w:?}");

    // 10 % of primaries take 20 ms; their hedges after 1 ms answer in 100 µs nine times
    // in ten: p95 is a hedged request, 1.1 ms — or 1.6 ms when hedges go out 500 µs late.
    let hedged = FanoutSpec {
        leaves: 1,
        replicas: 2,
        hedge: Hedge::After(1_000_000),
        ..Default::default()
    };
    let mk = |seed| {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let d: crate::dist::Dist = "mix:0.9*fixed:100us+0.1*fixed:20ms".parse().unwrap();
        move || d.sample(&mut rng) as u64
    };
    let on_time = simulate(&hedged, arr.clone(), &mut mk(13), 1, 0);
    let late = simulate_with(
        &hedged,
        arr.iter().map(|&t| (t, t)),
        &mut mk(13),
        1,
        0,
        Costs {
            hedge_lag: fixed(500_000),
            ..Costs::none()
        },
    );
    let (a, b) = (
        on_time.e2e.value_at_quantile(0.95) as f64,
        late.e2e.value_at_quantile(0.95) as f64,
    );
    assert!((a / 1.1e6 - 1.0).abs() < 0.01, "on time p95 {a}");
    assert!((b / 1.6e6 - 1.0).abs() < 0.01, "late p95 {b}");
    let st = late.stats();
    assert!(
        st.hedge_lag.count > 1_500 && st.hedge_lag.p50 >= 499_000,
        "{st:?}"
    );
    assert_eq!(on_time.stats().hedge_lag.p99, 0);
}

#[test]
fn bad_specs_are_named() {
    assert!("k=0".parse::<FanoutWait>().is_err());
    assert_eq!("k=3".parse::<FanoutWait>().unwrap(), FanoutWait::First(3));
    assert_eq!("after=p95".parse::<Hedge>().unwrap(), Hedge::Quantile(0.95));
    assert_eq!(
        "after=2ms".parse::<Hedge>().unwrap(),
        Hedge::After(2_000_000)
    );
    assert!("after=0ms"
        .parse::<Hedge>()
        .unwrap_err()
        .to_string()
        .contains("positive"));
    let mut s = spec(4);
    s.wait = FanoutWait::First(5);
    assert!(s.validate().unwrap_err().0.contains("at most --fanout"));
    let s = FanoutSpec {
        leaves: 4,
        replicas: 1,
        hedge: Hedge::After(1000),
        ..Default::default()
    };
    assert!(s.validate().unwrap_err().0.contains("--replicas 2"));
    assert!(spec(0).validate().is_err());
}
