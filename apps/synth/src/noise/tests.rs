use super::*;

#[test]
fn parses_round_trips_and_refuses() {
    for (s, n) in [
        ("none", 0),
        ("poisson:rate=2000,for=exp:5us", 1),
        ("every:1ms,for:20us", 1),
        ("every:1ms,for=uniform:1us,3us,cpus=0,2", 1),
        (
            "poisson:rate=10,for=lognormal:200us,cv=0.5,cpus=1-3;every:4ms,for=2us",
            2,
        ),
    ] {
        let x: Noise = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(x.0.len(), n, "{s}");
        let back: Noise = x.to_string().parse().unwrap();
        assert_eq!(back, x, "{s} -> {x}");
    }
    let x: Noise = "every:1ms,for=uniform:1us,3us,cpus=0,2".parse().unwrap();
    assert_eq!(x.0[0].cpus, Some(vec![0, 2]));
    assert_eq!(x.0[0].length.mean(), 2e3);
    let r: Noise = "poisson:rate=1,for=1us,cpus=1-3".parse().unwrap();
    assert_eq!(r.0[0].cpus, Some(vec![1, 2, 3]));
    for bad in [
        "poisson:for=5us",
        "poisson:rate=0,for=5us",
        "poisson:rate=2000",
        "every:0ms,for=1us",
        "every:1ms,rate=3,for=1us",
        "every:1ms,for=2ms",
        "burst:1ms,for=1us",
        "every:1ms,for=1us,cpus=a",
        "every:1ms,for=1us,cpus=3-1",
        "every:1ms,for=exp:1",
        "every:for=1us",
        "poisson",
    ] {
        let e = bad.parse::<Noise>().unwrap_err();
        assert!(e.contains("poisson:rate="), "{bad}: {e}");
    }
}

#[test]
fn cpus_restrict_which_workers_are_hit() {
    let n: Noise = "every:1ms,for=1us,cpus=1".parse().unwrap();
    assert!(n.0[0].hits(&[1]));
    assert!(!n.0[0].hits(&[0]));
    assert!(
        !n.0[0].hits(&[0, 1]),
        "an unpinned worker may run off the list"
    );
    assert!(!WorkerNoise::new(&n, &[0], 1, 0).active());
    assert!(WorkerNoise::new(&n, &[1], 1, 0).active());
    assert_eq!(
        n.stretch(),
        0.0,
        "restricted sources do not stretch every worker"
    );
}

/// Events added to back-to-back busy stretches match rate × busy time, with the
/// extensions included (Poisson count: within 5 standard deviations).
#[test]
fn poisson_noise_adds_rate_times_length() {
    let n: Noise = "poisson:rate=20000,for=fixed:5us".parse().unwrap();
    let mut w = WorkerNoise::new(&n, &[0], 7, 0);
    let (mut t, base) = (0u64, 100_000u64);
    for _ in 0..5_000 {
        let end = w.extend(t, t + base);
        t = end + 50_000; // idle gap: events there are dropped
    }
    let busy = 5_000.0 * base as f64 + w.added_ns as f64;
    let expect = 20_000.0 * busy / 1e9;
    let sd = expect.sqrt();
    assert!(
        (w.events as f64 - expect).abs() < 5.0 * sd,
        "{} events, expected {expect:.0} ± {sd:.0}",
        w.events
    );
    // ρ = 0.1: the stretch is ρ/(1-ρ) of the undisturbed work.
    let stretch = w.added_ns as f64 / (5_000.0 * base as f64);
    assert!(
        (stretch / n.stretch() - 1.0).abs() < 0.06,
        "stretch {stretch}"
    );
}

#[test]
fn periodic_noise_hits_once_per_period_of_busy_time() {
    let n: Noise = "every:1ms,for=20us".parse().unwrap();
    let mut w = WorkerNoise::new(&n, &[0], 3, 0);
    let end = w.extend(0, 100_000_000);
    // 100 ms of work plus the ticks' own 2 %: 102 ticks, give or take the phase.
    assert!((101..=103).contains(&w.events), "{} ticks", w.events);
    assert_eq!(end - 100_000_000, w.added_ns);
    // A busy stretch shorter than the period after a long idle: at most one tick.
    let before = w.events;
    w.extend(500_000_000, 500_000_100);
    assert!(w.events - before <= 1);
}

/// Pauses stop work in progress and delay work that starts inside one; they do not
/// overlap, and their time share is rate × length.
#[test]
fn pauses_stop_the_world() {
    assert!(Pause::parse("none").unwrap().is_none());
    for bad in [
        "poisson:rate=2",
        "every:1ms,for=1us,cpus=0",
        "every:1ms,for=1us;every:2ms,for=1us",
        "every:1ms,for=2ms",
    ] {
        assert!(Pause::parse(bad).is_err(), "{bad}");
    }
    for bad in [
        "requests:0,for=1ms",
        "requests:10",
        "requests:x,for=1ms",
        "requests:10,for=1ms,cpus=0",
        "requests:20-10,for=1ms",
        "requests:0.5*10-20+0.4*1-5,for=1ms",
        "requests:0.5*10-20+1-5,for=1ms",
        "requests:1.5*10-20,for=1ms",
    ] {
        assert!(Pause::parse(bad).is_err(), "{bad}");
    }
    // Drawn gaps: a range, or a mixture of ranges; round trips, mean, draws in range.
    for spec in [
        "requests:90-110,for=2ms",
        "requests:0.6*12000-16000+0.4*1-2000,for=lognormal:24ms,cv=0.5",
        "requests:12000-16000x4+1-2000x2,for=lognormal:24ms,cv=0.5",
    ] {
        let p = Pause::parse(spec).unwrap().unwrap();
        assert_eq!(Pause::parse(&p.to_string()).unwrap().unwrap(), p, "{spec}");
    }
    let g = Gaps::parse("0.6*12000-16000+0.4*1-2000").unwrap();
    assert!((g.mean() - (0.6 * 14000.0 + 0.4 * 1000.5)).abs() < 1e-6);
    let mut rng: Xoshiro256PlusPlus = rand::SeedableRng::seed_from_u64(5);
    let mut at = CyclePos::default();
    let draws: Vec<u64> = (0..20_000).map(|_| g.sample(&mut rng, &mut at)).collect();
    assert!(draws
        .iter()
        .all(|&d| (1..=2000).contains(&d) || (12000..=16000).contains(&d)));
    let short = draws.iter().filter(|&&d| d <= 2000).count() as f64 / draws.len() as f64;
    assert!((short - 0.4).abs() < 0.02, "{short} of the gaps short");
    let mean = draws.iter().sum::<u64>() as f64 / draws.len() as f64;
    assert!((mean / g.mean() - 1.0).abs() < 0.02, "{mean}");
    assert_eq!(Gaps::parse("100").unwrap().to_string(), "100");
    // A cycle: its terms in turn, each repeated (a drawn number of times when a range);
    // round trips; refusals.
    for spec in ["100-200x3+1-10x2", "100-200x2-4+1-10x1-2"] {
        let c = Gaps::parse(spec).unwrap();
        assert_eq!(Gaps::parse(&c.to_string()).unwrap(), c, "{spec}");
        assert_eq!(c.to_string(), spec);
    }
    let c = Gaps::parse("100-200x3+1-10x2").unwrap();
    assert!((c.mean() - (3.0 * 150.0 + 2.0 * 5.5) / 5.0).abs() < 1e-9);
    let runs = |c: &Gaps, rng: &mut Xoshiro256PlusPlus| {
        let mut at = CyclePos::default();
        let long: Vec<bool> = (0..400).map(|_| c.sample(rng, &mut at) >= 100).collect();
        let mut runs: Vec<(bool, usize)> = Vec::new();
        for l in long {
            match runs.last_mut() {
                Some((k, n)) if *k == l => *n += 1,
                _ => runs.push((l, 1)),
            }
        }
        // The first and last runs may be cut.
        runs[1..runs.len() - 1].to_vec()
    };
    let r = runs(&c, &mut rng);
    assert!(r.iter().all(|&(l, n)| n == if l { 3 } else { 2 }), "{r:?}");
    let c = Gaps::parse("100-200x2-4+1-10x1-2").unwrap();
    assert!((c.mean() - (3.0 * 150.0 + 1.5 * 5.5) / 4.5).abs() < 1e-9);
    let r = runs(&c, &mut rng);
    assert!(
        r.iter()
            .all(|&(l, n)| if l { (2..=4).contains(&n) } else { n <= 2 }),
        "{r:?}"
    );
    for want in [(true, 2), (true, 3), (true, 4), (false, 1), (false, 2)] {
        assert!(r.contains(&want), "{want:?} in {r:?}");
    }
    for bad in [
        "100x0",
        "100-50x2",
        "0.5*100x2+0.5*10x1",
        "100x2+10",
        "100x3-2",
    ] {
        assert!(Gaps::parse(bad).is_err(), "{bad}");
    }
    let r = Pause::parse("requests:100,for=2ms").unwrap().unwrap();
    assert_eq!(Pause::parse(&r.to_string()).unwrap().unwrap(), r);
    assert!((r.per_request_ns(1e3) - 2e4).abs() < 1e-6);
    // A request-driven pause starts when triggered, or after the one under way.
    let mut c = PauseClock::new(&r, 3, 0);
    assert_eq!(c.extend(0, 1000), (1000, 0));
    c.trigger(5_000);
    c.trigger(6_000);
    assert_eq!(c.extend(5_000, 5_100), (5_000 + 4_000_000 + 100, 2));
    let p = Pause::parse("every:10ms,for=1ms").unwrap().unwrap();
    assert_eq!(Pause::parse(&p.to_string()).unwrap().unwrap(), p);
    let mut c = PauseClock::new(&p, 1, 0);
    c.reach(1e9);
    let (ps, pe) = c.windows[0];
    assert!((pe - ps - 1e6).abs() < 1.0 && ps < 1e7);
    // Work started inside the pause waits for its end.
    let mid = (ps + 0.5e6) as u64;
    let (end, hits) = c.extend(mid, mid + 100);
    assert_eq!((end, hits), ((pe + 100.0).round() as u64, 1));
    // Work spanning the pause's start is stretched by all of it.
    let before = (ps - 50.0) as u64;
    let (end, hits) = c.extend(before, before + 100);
    assert_eq!((end, hits), (before + 100 + 1_000_000, 1));
    // Work between pauses is untouched; work spanning three periods meets three.
    let gap = (pe + 1000.0) as u64;
    assert_eq!(c.extend(gap, gap + 100), (gap + 100, 0));
    let (end, hits) = c.extend(gap, gap + 35_000_000);
    assert_eq!(hits, 3, "ends at {end}");
    // Poisson pauses: about rate × length of a long stretch of work is paused.
    let p = Pause::parse("poisson:rate=100,for=exp:1ms")
        .unwrap()
        .unwrap();
    let mut c = PauseClock::new(&p, 7, 0);
    let (end, hits) = c.extend(0, 10_000_000_000);
    let paused = (end - 10_000_000_000) as f64 / end as f64;
    assert!((paused - 0.1).abs() < 0.02, "{paused} of the time paused");
    assert!(hits > 900 && hits < 1200, "{hits} pauses");
}
