use super::*;

#[test]
fn stall_spec() {
    assert_eq!(parse_stall("none").unwrap(), None);
    assert_eq!(
        parse_stall("at:2s,for:500ms").unwrap(),
        Some(Stall {
            at_ns: 2_000_000_000,
            len_ns: 500_000_000
        })
    );
    for bad in [
        "at:2s",
        "for:1s",
        "at:2,for:1s",
        "at:1s,for:0s",
        "when:1s,for:1s",
        "x",
    ] {
        assert!(parse_stall(bad).is_err(), "{bad}");
    }
}

#[test]
fn client_is_seeded_and_server_spins_the_drawn_time() {
    let _t = timing();
    let p = Params::parse(["service=uniform:100us,300us"]).unwrap();
    let ctx = DataCtx {
        root: std::env::temp_dir(),
    };
    let mut a = Synth.client(&ctx, &p, 5).unwrap();
    let mut b = Synth.client(&ctx, &p, 5).unwrap();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..100 {
        a.next_request(&mut x);
        b.next_request(&mut y);
    }
    assert_eq!(x, y);
    let server = Synth.server(&ctx, &p, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let mut resp = Vec::new();
    let req = 250_000u64.to_le_bytes();
    let t = now_ns();
    w.handle(&req, &mut resp).unwrap();
    let took = now_ns() - t;
    assert!(took >= 250_000, "spun only {took} ns");
    assert_eq!(resp, req);
    assert!(w.handle(&[1, 2], &mut resp).is_err());
}

#[test]
fn cold_spec() {
    assert_eq!(parse_cold("none").unwrap(), None);
    let c = parse_cold("0.3,tau=10ms").unwrap().unwrap();
    assert_eq!(c.extra, 0.3);
    assert_eq!(c.tau_ns, 10e6);
    assert_eq!(c.power, 1.0);
    // With a power the factor stays near 1 until the worker is quite cold.
    let p = parse_cold("0.5,tau=10ms,power=4").unwrap().unwrap();
    assert_eq!(p.power, 4.0);
    assert!((p.factor(0.5) - (1.0 + 0.5 / 16.0)).abs() < 1e-12);
    assert!((p.factor(0.0) - 1.5).abs() < 1e-12);
    for bad in [
        "0.3",
        "x,tau=1ms",
        "-1,tau=1ms",
        "0.3,tau=0ms",
        "0.3,t=1ms",
        "0.3,tau=x",
        "0.3,tau=1ms,power=0",
        "0.3,tau=1ms,pow=2",
        "0.3,tau=1ms,power=x",
    ] {
        let e = parse_cold(bad).unwrap_err().to_string();
        assert!(e.contains("F,tau=D"), "{bad}: {e}");
    }
    // Warmth: half-way in one tau of serving; cooled by e after one tau idle.
    assert!((c.warmed(0.0, 10e6) - (1.0 - (-1f64).exp())).abs() < 1e-12);
    assert!((c.cooled(1.0, 10e6) - (-1f64).exp()).abs() < 1e-12);
    assert_eq!(c.factor(0.0), 1.3);
    assert_eq!(c.factor(1.0), 1.0);
}

/// A worker preempted in the middle of a request serves it late (the spin ends on the
/// clock), which can only make a request look slower: on a busy 2-vCPU host the warm
/// request once took 5.5 ms. So up to three tries, each on a fresh server; the last one
/// asserts.
#[test]
fn a_cold_worker_is_slower_and_warms_up() {
    let _t = timing();
    for attempt in 1..=3 {
        let p = Params::parse(["service=fixed:1ms", "cold=1,tau=2ms"]).unwrap();
        let server = Synth.server(&ctx(), &p, 1).unwrap();
        let mut w = server.worker(0).unwrap();
        let req = 1_000_000u64.to_le_bytes();
        let mut serve = || {
            let t = now_ns();
            let mut resp = Vec::new();
            w.handle(&req, &mut resp).unwrap();
            assert_eq!(resp, req, "the response carries the drawn time");
            now_ns() - t
        };
        // Cold: 1 ms x 2. Right after 2 ms of serving, warmth 1 - 1/e: x 1.37.
        let first = serve();
        let second = serve();
        std::thread::sleep(std::time::Duration::from_millis(40));
        let rested = serve();
        let r = server.report();
        let mean = r["cold"]["mean_factor"].as_f64().unwrap();
        let warmed = second < first - 300_000 && (1.7..1.9).contains(&mean);
        if !warmed && attempt < 3 {
            continue;
        }
        assert!(first >= 2_000_000, "a cold worker spun only {first} ns");
        assert!(
            second < first - 300_000 && second >= 1_000_000,
            "a warm worker took {second} ns after {first}"
        );
        assert!(
            rested >= 2_000_000,
            "after 40 ms idle (20 tau) it took {rested} ns"
        );
        assert_eq!(r["cold"]["requests"], 3);
        assert!((1.7..1.9).contains(&mean), "mean factor {mean}");
        return;
    }
}

#[test]
fn work_spin_is_calibrated() {
    let _t = timing();
    let p = Params::parse(["service=fixed:1ms", "spin=work"]).unwrap();
    let ctx = DataCtx {
        root: std::env::temp_dir(),
    };
    let server = Synth.server(&ctx, &p, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let mut best = u64::MAX;
    for _ in 0..5 {
        let t = now_ns();
        w.handle(&1_000_000u64.to_le_bytes(), &mut Vec::new())
            .unwrap();
        best = best.min(now_ns() - t);
    }
    // Best of five: within ±30 % of 1 ms even on a busy VM.
    assert!(
        (700_000..1_300_000).contains(&best),
        "work spin of 1 ms took {best} ns"
    );
}

fn ctx() -> DataCtx {
    DataCtx {
        root: std::env::temp_dir(),
    }
}

/// The tests that time a service on the wall clock, one at a time: two spinning at once
/// on a 2-CPU host preempt each other (with the harness's own threads), and a preempted
/// spin reads as a slow request. A test that fails does not poison the others.
fn timing() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `per_thread` requests on each of `threads` workers at once (each worker built on
/// its own thread); returns the server and the wall time.
fn serve_concurrently(p: &Params, threads: usize, per_thread: usize) -> (Arc<dyn Server>, u64) {
    let server = Synth.server(&ctx(), p, threads).unwrap();
    let go = Arc::new(std::sync::Barrier::new(threads));
    let t = now_ns();
    let hs: Vec<_> = (0..threads)
        .map(|i| {
            let (server, go, p) = (server.clone(), go.clone(), p.clone());
            std::thread::spawn(move || {
                let mut w = server.worker(i).unwrap();
                let mut c = Synth.client(&ctx(), &p, i as u64).unwrap();
                let mut req = Vec::new();
                go.wait();
                for _ in 0..per_thread {
                    req.clear();
                    c.next_request(&mut req);
                    w.handle(&req, &mut Vec::new()).unwrap();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    (server, now_ns() - t)
}

/// Two workers whose service is only a 2 ms critical section under the shared lock take
/// at least as long as doing all of them one after the other.
#[test]
fn locks_serialize_workers() {
    let _t = timing();
    for key in ["recv_lock", "send_lock"] {
        let p = Params::parse(["service=fixed:0ns", &format!("{key}=fixed:2ms")]).unwrap();
        let (server, took) = serve_concurrently(&p, 2, 5);
        assert!(
            took >= 20_000_000,
            "{key}: 10 sections of 2 ms took {took} ns"
        );
        let st = &server.report()[key];
        assert_eq!(st["acquired"], 10, "{st}");
        assert!(st["contended"].as_u64().unwrap() >= 1, "{st}");
    }
}

/// Poisson noise of ρ = 0.1 on back-to-back 100 µs services: the events counted match
/// rate × busy time (5 standard deviations), and the time added is ρ/(1−ρ) of the work.
#[test]
fn noise_adds_rate_times_length_to_service() {
    let _t = timing();
    let p = Params::parse([
        "service=fixed:100us",
        "noise=poisson:rate=10000,for=fixed:10us",
    ])
    .unwrap();
    let (server, _) = serve_concurrently(&p, 1, 1_500);
    let st = &server.report()["noise"];
    assert_eq!(st["workers_hit"], 1, "{st}");
    let (events, added) = (
        st["events"].as_u64().unwrap() as f64,
        st["added_ns"].as_u64().unwrap() as f64,
    );
    let work = 1_500.0 * 100e3;
    let expect = 10_000.0 * (work + added) / 1e9;
    assert!(
        (events - expect).abs() < 5.0 * expect.sqrt(),
        "{events} events, expected {expect:.0}"
    );
    assert!(
        (added / work / (0.1 / 0.9) - 1.0).abs() < 0.15,
        "added {added} ns to {work} ns of work"
    );
}

/// `cpus=` disturbs only workers pinned within the list.
#[test]
fn noise_cpus_pick_pinned_workers() {
    let p = Params::parse(["service=fixed:1us", "noise=every:100us,for=1us,cpus=0"]).unwrap();
    let server = Synth.server(&ctx(), &p, 2).unwrap();
    let s2 = server.clone();
    std::thread::spawn(move || {
        taillab_core::harness::place_thread_on(&[0], None, 0).unwrap();
        s2.worker(0).map(|_| ()).unwrap();
    })
    .join()
    .unwrap();
    let _unpinned = server.worker(1).unwrap();
    let here = allowed_cpus();
    let expect = 1 + usize::from(here == [0]);
    assert_eq!(server.report()["noise"]["workers_hit"], expect);
}

#[test]
fn scale_multiplies_service_draws_only() {
    let draw = |set: &[&str]| {
        let p = Params::parse(set.iter().copied()).unwrap();
        let mut c = Synth.client(&ctx(), &p, 9).unwrap();
        let mut out = Vec::new();
        for _ in 0..100 {
            c.next_request(&mut out);
        }
        out.chunks(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect::<Vec<_>>()
    };
    let base = ["service=lognormal:100us,cv=0.5", "recv_lock=fixed:3us"];
    let a = draw(&base);
    let b = draw(&[base[0], base[1], "scale=2.5"]);
    assert_eq!(a.len(), 300, "service, recv and send per request");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let want = if i % 3 == 0 { 2.5 * x } else { *x };
        assert!((y - want).abs() <= 2.0, "field {i}: {y} vs {want}");
    }
    let p = Params::parse([base[0], "scale=0.5"]).unwrap();
    assert_eq!(Synth.expected_service_ns(&p), Some(50e3));
}

#[test]
fn periodic_spec_round_trips() {
    for v in [
        "requests:85,for=6ms",
        "requests:72-98,for=lognormal:6.1ms,cv=0.06",
        "requests:128,for=lognormal:600us,cv=0.2,cold=no",
    ] {
        let p = Periodic::parse(v).unwrap().unwrap();
        let again = Periodic::parse(&p.to_string()).unwrap().unwrap();
        assert_eq!(p, again, "{v} -> {p}");
    }
    let p = Periodic::parse("requests:72-98,for=lognormal:6.1ms,cv=0.06")
        .unwrap()
        .unwrap();
    assert_eq!((p.lo, p.hi, p.mean_gap()), (72, 98, 85.0));
    assert_eq!(Periodic::parse("none").unwrap(), None);
    assert!(p.cold, "cold= slows slow requests unless told not to");
    let e = Periodic::parse("requests:85,for=6ms,cold=maybe").unwrap_err();
    assert!(e.contains("yes or no"), "{e}");
    // The expected service counts the slow share: 9/10 x 10 us + 1/10 x 1 ms.
    let q = Params::parse([
        "service=fixed:10us",
        "periodic=requests:10,for=1ms",
        "scale=2",
    ]);
    let got = Synth.expected_service_ns(&q.unwrap()).unwrap();
    assert!((got - 2.0 * (9e3 + 100e3)).abs() < 1.0, "{got}");
}

#[test]
fn periodic_requests_come_every_nth_and_serve_their_own_length() {
    let _t = timing();
    let p = Params::parse(["service=fixed:20us", "periodic=requests:8-12,for=fixed:2ms"]).unwrap();
    let server = Synth.server(&ctx(), &p, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let req = 20_000u64.to_le_bytes();
    let mut slow = Vec::new();
    for i in 0..200 {
        let t = now_ns();
        let mut resp = Vec::new();
        w.handle(&req, &mut resp).unwrap();
        assert_eq!(resp, req, "the response carries the client's draw");
        if now_ns() - t >= 2_000_000 {
            slow.push(i);
        }
    }
    // 200 requests, gaps 8..=12: 16 to 25 slow ones (a preempted fast one can look slow).
    assert!(
        (16..=26).contains(&slow.len()),
        "{} slow: {slow:?}",
        slow.len()
    );
    let gaps: Vec<_> = slow.windows(2).map(|w| w[1] - w[0]).collect();
    let regular = gaps.iter().filter(|g| (8..=12).contains(*g)).count();
    assert!(regular + 2 >= gaps.len(), "gaps {gaps:?}");
    let r = server.report();
    let hits = r["periodic"]["hits"].as_u64().unwrap();
    assert!((16..=25).contains(&hits), "{r}");
    assert_eq!(r["periodic"]["mean_ns"], 2e6);
    let spec = r["periodic"]["spec"].as_str().unwrap();
    assert_eq!(
        Periodic::parse(spec).unwrap(),
        Periodic::parse("requests:8-12,for=fixed:2ms").unwrap()
    );
}

/// `speed=` multiplies each stretch's service by its factor: with 5 ms stretches of
/// factors 1 and 3, a 200 µs request takes ~200 or ~600 µs, and the two come about
/// equally often; the report gives the factors' mean over the requests.
#[test]
fn speed_stretches_multiply_service() {
    let _t = timing();
    let p = Params::parse(["service=fixed:200us", "speed=1/3,every=5ms"]).unwrap();
    assert_eq!(Synth.expected_service_ns(&p), Some(400e3));
    let server = Synth.server(&ctx(), &p, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let req = 200_000u64.to_le_bytes();
    let (mut fast, mut slow) = (0, 0);
    for _ in 0..150 {
        let t = now_ns();
        w.handle(&req, &mut Vec::new()).unwrap();
        let took = now_ns() - t;
        if took >= 600_000 {
            slow += 1;
        } else if took < 400_000 {
            fast += 1;
        }
    }
    // 150 requests over ~60 ms: a dozen stretches, half of each factor; a preempted
    // fast one can look slow.
    assert!(fast >= 30 && slow >= 30, "fast {fast}, slow {slow}");
    // The mean over requests, not over time: a fast stretch holds three requests for each
    // one a slow stretch of the same length holds, so 3/4 × 1 + 1/4 × 3 = 1.5 (the time
    // average, 2, would be a wrong formula); a few preempted or straddling requests move it.
    let r = server.report();
    let m = r["speed"]["mean_factor"].as_f64().unwrap();
    assert!((1.2..=1.8).contains(&m), "{r}");
    let spec = r["speed"]["spec"].as_str().unwrap();
    assert_eq!(
        Speed::parse(spec).unwrap(),
        Speed::parse("1/3,every=5ms").unwrap()
    );
}

/// A cold worker (cold=3: four times slower, tau 1 s: it stays cold here) stretches a
/// periodic slow request too, unless the request says `cold=no`.
#[test]
fn periodic_cold_no_serves_the_drawn_length() {
    let _t = timing();
    let slow_of = |periodic: &str| {
        let p = Params::parse(["service=fixed:20us", "cold=3,tau=1s", periodic]).unwrap();
        let server = Synth.server(&ctx(), &p, 1).unwrap();
        let mut w = server.worker(0).unwrap();
        let req = 20_000u64.to_le_bytes();
        let mut slow = Vec::new();
        for _ in 0..20 {
            let t = now_ns();
            let mut resp = Vec::new();
            w.handle(&req, &mut resp).unwrap();
            let d = now_ns() - t;
            if d >= 1_500_000 {
                slow.push(d);
            }
        }
        slow.sort_unstable();
        assert!(slow.len() >= 3, "{slow:?}");
        slow[slow.len() / 2]
    };
    let no = slow_of("periodic=requests:5,for=fixed:2ms,cold=no");
    let yes = slow_of("periodic=requests:5,for=fixed:2ms");
    assert!(no < 4_000_000, "cold=no took {no} ns for 2 ms");
    assert!(yes >= 6_000_000, "a cold 2 ms slow request took {yes} ns");
}

/// `pause=requests:GAPS`: pauses come at drawn gaps of started requests — a mixture
/// drawn independently, a cycle in turn — each stretching the request that fills the
/// count.
#[test]
fn request_driven_pauses_come_at_drawn_gaps() {
    let _t = timing();
    let gaps_of = |spec: &str| {
        let p = Params::parse(["service=fixed:5us", spec]).unwrap();
        let server = Synth.server(&ctx(), &p, 1).unwrap();
        let mut w = server.worker(0).unwrap();
        let req = 5_000u64.to_le_bytes();
        let mut hit = Vec::new();
        for i in 0..1000 {
            let t = now_ns();
            let mut resp = Vec::new();
            w.handle(&req, &mut resp).unwrap();
            if now_ns() - t >= 1_000_000 {
                hit.push(i);
            }
        }
        let r = server.report();
        assert!(
            r["pause"]["hits"].as_u64().unwrap() + 2 >= hit.len() as u64,
            "{r}"
        );
        let gaps: Vec<u64> = hit.windows(2).map(|w| w[1] - w[0]).collect();
        // A preempted request can look paused: allow two strays.
        let stray = gaps
            .iter()
            .filter(|g| !(2..=4).contains(*g) && !(40..=60).contains(*g))
            .count();
        assert!(stray <= 2, "gaps {gaps:?}");
        (hit.len(), gaps)
    };
    // Mean gap 26.5: about 38 pauses in 1 000 requests; about half the gaps short.
    let (n, gaps) = gaps_of("pause=requests:0.5*40-60+0.5*2-4,for=fixed:1ms");
    let short = gaps.iter().filter(|g| **g <= 4).count();
    assert!((28..=50).contains(&n), "{n} pauses: {gaps:?}");
    assert!(short >= 8 && gaps.len() - short >= 8, "gaps {gaps:?}");
    // A cycle of two long gaps and one short: a third short, never two in a row.
    let (n, gaps) = gaps_of("pause=requests:40-60x2+2-4x1,for=fixed:1ms");
    let short: Vec<bool> = gaps.iter().map(|g| *g <= 4).collect();
    assert!((25..=40).contains(&n), "{n} pauses: {gaps:?}");
    assert!(!short.windows(2).any(|w| w[0] && w[1]), "gaps {gaps:?}");
    let k = short.iter().filter(|s| **s).count();
    assert!(
        k * 3 + 3 >= gaps.len() && k * 3 <= gaps.len() + 3,
        "gaps {gaps:?}"
    );
}

/// A run's seed draws the server's pauses afresh; the same seed draws the same ones,
/// and `server` is the run with seed 0.
#[test]
fn a_runs_seed_draws_its_own_pauses() {
    let _t = timing();
    let hits = |seed: Option<u64>| {
        let p = Params::parse(["service=fixed:5us", "pause=requests:1-100,for=fixed:2ms"]).unwrap();
        let server = match seed {
            Some(s) => Synth.server_for_run(&ctx(), &p, 1, s).unwrap(),
            None => Synth.server(&ctx(), &p, 1).unwrap(),
        };
        let mut w = server.worker(0).unwrap();
        let req = 5_000u64.to_le_bytes();
        let mut hit = std::collections::BTreeSet::new();
        for i in 0..600 {
            let t = now_ns();
            let mut resp = Vec::new();
            w.handle(&req, &mut resp).unwrap();
            if now_ns() - t >= 1_500_000 {
                hit.insert(i);
            }
        }
        hit
    };
    let differ = |a: &std::collections::BTreeSet<i32>, b: &std::collections::BTreeSet<i32>| {
        a.symmetric_difference(b).count()
    };
    let (a, b) = (hits(Some(11)), hits(Some(11)));
    // A preempted request can look paused: allow two strays.
    assert!(a.len() >= 6 && differ(&a, &b) <= 2, "{a:?} {b:?}");
    let c = hits(Some(12));
    assert!(
        differ(&a, &c) >= 6,
        "seeds 11 and 12 paused alike: {a:?} {c:?}"
    );
    let (d, e) = (hits(None), hits(Some(0)));
    assert!(differ(&d, &e) <= 2, "{d:?} {e:?}");
}

#[test]
fn long_locks_and_noise_are_warned_about() {
    let c = config(
        &Params::parse([
            "service=fixed:10us",
            "send_lock=fixed:1ms",
            "noise=every:10ms,for=50us",
        ])
        .unwrap(),
    )
    .unwrap();
    let w = c.warnings();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(
        w[0].contains("send_lock") && w[1].contains("noise"),
        "{w:?}"
    );
    let ok = config(&Params::parse(["service=fixed:10us", "recv_lock=fixed:1us"]).unwrap());
    assert!(ok.unwrap().warnings().is_empty());
}

#[test]
fn bad_params_name_the_key() {
    let ctx = DataCtx {
        root: std::env::temp_dir(),
    };
    for (p, key) in [
        ("service=exp:1", "service"),
        ("spin=fast", "spin"),
        ("stall=at:1s", "stall"),
        ("sevrice=exp:1us", "sevrice"),
        ("recv_lock=exp:1", "recv_lock"),
        ("send_lock=fast", "send_lock"),
        ("lock_spin=10", "lock_spin"),
        ("speed=1.2", "speed"),
        ("noise=poisson:rate=5", "noise"),
        ("noise=every:1ms,for=2ms", "noise"),
        ("scale=0", "scale"),
        ("scale=-2", "scale"),
        ("scale=x", "scale"),
        ("periodic=every:85,for=6ms", "periodic"),
        ("periodic=requests:0,for=6ms", "periodic"),
        ("periodic=requests:90-80,for=6ms", "periodic"),
        ("periodic=requests:85", "periodic"),
        ("periodic=requests:85,for=fast", "periodic"),
    ] {
        let e = Synth
            .server(&ctx, &Params::parse([p]).unwrap(), 1)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(key), "{p}: {e}");
    }
}
