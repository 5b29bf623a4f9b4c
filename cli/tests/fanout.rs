//! Fan-out in the integrated harness (issue 38): a request split over N leaves against the
//! fan-out model of the same run; hedged and tied copies; bad input.
//!
//! The leaves are synth with `spin=sleep` (wall time, no CPU), so ten of them share two CPUs
//! without queueing for them. Bounds are for a shared 2-vCPU VM: a sleeping service wakes
//! tens of µs late, more under load, which is inside the measured service times the model
//! draws from but correlates leaves that wake together.

use serde_json::Value;
use std::process::Command;

mod common;
use common::*;

fn fan(s: &Value) -> &Value {
    &s["fanout"]
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The host disturbed one of these runs (steal, other processes), if it did.
fn disturbed(runs: &[&Value]) -> Option<String> {
    runs.iter().find_map(|s| host_disturbed(s))
}

/// `--fanout N` over exp:1ms leaves that sleep through their services, against the model of
/// the same run: docs/fanout.md claims the whole request's p99 within 5 % of the model at
/// N = 1, 10 and 50, and the fraction of requests slower than the leaves' own p99 as the
/// model has it (bench/fanout, 3 000 requests a run: within 0.6 points), which follows
/// 1 − 0.99^N within 2.7 points at 50 requests/s (the model's own tests, core/src/fanout/,
/// hold it to 1 − 0.99^N without queueing; with queueing it falls below, since every leaf
/// sees every arrival: 30.9 % at 50 leaves and 200 requests/s, `taillab model --fanout 50
/// --qps 200 --service exp:1ms`). Here: the p99 within 7 % of the model (below) and the
/// fraction within 3 points of it (one leaf: `one_leaf_matches_the_model_of_the_same_run`).
/// `requests` is sized so that 5 % is about three standard errors of a p99 estimated from
/// them (a leaf's p99 from 2 500 requests has 4 %; the maximum of N leaves' less; measured ÷
/// model of 50 independent leaves from 3 500 requests has a standard deviation of 1.5 % in a
/// simulation of this test's sizes), at a rate that keeps each leaf's queue short (its p99
/// then rests on near-independent requests).
///
/// The model draws every leaf's wake-up independently from the run's measured ones; a host
/// stall holds all the leaves that wake during it, the same requests' leaves. Two things
/// follow on a shared 2-vCPU VM (eight runs of the 50-leaf test, 2026-12-07, steal ≤ 0.12 %):
/// - a stall longer than the leaves' own p99 (wake-up max 11–28 ms against a leaf p99 of
///   6–7 ms, three runs) put measured ÷ model at 0.68–0.93: the model spread the one stall
///   over many requests. Such a try measured the host, not the model ([`stalled`]).
/// - without one (wake-up max ≤ 3.9 ms, five runs) it read 0.935–1.050: shorter stalls
///   correlate leaves too, so the p99 is held within 7 %, not the 5 % docs/fanout.md
///   measured on a quiet host. A model that loses the queueing or the fan-out's width is
///   further off than that (and its fraction above the leaf p99 far more than 3 points).
fn amplification(leaves: u32, qps: u32, requests: u32) {
    let _s = serial();
    let name = format!("{leaves} leaves");
    within_tries(&name, 4, 2, |k| {
        let s = sleeping_leaves(leaves, qps, requests, k);
        let fo = fan(&s);
        assert_eq!(fo["leaves"], leaves, "{fo}");
        assert_eq!(
            fo["per_leaf"].as_array().map(|a| a.len()),
            Some(leaves as usize)
        );
        assert_eq!(
            f(&fo["measured"]["sent_per_sub"]),
            1.0,
            "no copies without hedging"
        );
        assert!(s["ideal"]["method"]
            .as_str()
            .unwrap()
            .starts_with("fan-out model"));
        let r = f(&fo["ratio"]["p99"]);
        let (above, model_above) = (
            f(&fo["measured"]["above_leaf_p99"]),
            f(&fo["model"]["above_leaf_p99"]),
        );
        let independent = 1.0 - 0.99f64.powi(leaves as i32);
        eprintln!(
            "{name}: measured ÷ model p99 {r:.3}; above the leaf p99 {above:.4}, model {model_above:.4}, 1 − 0.99^N {independent:.4}"
        );
        // The whole request waits for its slowest leaf: well above one leaf's latency.
        let (e2e, leaf) = (
            f(&fo["measured"]["e2e"]["p50"]),
            f(&fo["measured"]["leaf"]["p50"]),
        );
        let slowest = leaves == 1 || e2e > 2.0 * leaf;
        if slowest && (r - 1.0).abs() <= 0.07 && (above - model_above).abs() <= 0.03 {
            return Ok(());
        }
        Err((
            format!("request p50 {e2e} vs leaf {leaf}; measured ÷ model p99 {r}; above the leaf p99 {above} vs model {model_above} (1 − 0.99^N {independent})"),
            disturbed(&[&s]).or_else(|| stalled(fo)),
        ))
    });
}

/// A host stall longer than the leaves' own p99 among the workers' wake-ups, if there was
/// one: it held the leaves of the same requests at once, which the model cannot place. Only a
/// rare one: wake-ups whose p999 too is beyond the leaf p99 are the harness's (a wake-up that
/// is often late), not a stall of the host, and are not excused (the stalled runs of
/// 2026-12-07 had a wake-up p999 of 1.3–3.2 ms against a leaf p99 of 6–7 ms).
fn stalled(fo: &Value) -> Option<String> {
    let w = &fo["measured"]["wake"];
    let (wake, often, leaf) = (
        f(&w["max"]),
        f(&w["p999"]),
        f(&fo["measured"]["leaf"]["p99"]),
    );
    (wake > leaf && often < leaf).then(|| {
        format!(
            "a wake-up stalled {:.1} ms, longer than the leaf p99 {:.1} ms: the host held many leaves at once",
            wake / 1e6,
            leaf / 1e6
        )
    })
}

/// A run of `--fanout leaves` over sleeping exp:1ms leaves (try `k`'s seed); its summary.
fn sleeping_leaves(leaves: u32, qps: u32, requests: u32, k: u64) -> Value {
    let out = tmp(&format!("fanout-{leaves}-{k}"));
    let (seed, n, q, l) = (
        k.to_string(),
        requests.to_string(),
        qps.to_string(),
        leaves.to_string(),
    );
    #[rustfmt::skip]
    let s = run(&[
        "--app", "synth", "--set", "service=exp:1ms", "--set", "spin=sleep", "--wait", "block",
        "--qps", &q, "--warmup-requests", "300", "--requests", &n, "--fanout", &l, "--seed", &seed,
    ], &out);
    let _ = std::fs::remove_dir_all(&out);
    s
}

/// One leaf is no fan-out (no `fanout` section): its model is the run's ideal, an exact
/// replay of its own arrivals and measured service times (bench/fanout's N = 1 row compares
/// the same), so the claim's 5 % on the p99 need not allow for sampling noise: 3 000
/// requests, as the bench.
#[test]
fn one_leaf_matches_the_model_of_the_same_run() {
    let _s = serial();
    within_tries("1 leaf", 4, 2, |k| {
        let s = sleeping_leaves(1, 200, 3_000, k);
        assert!(
            s["fanout"].is_null(),
            "one leaf is no fan-out: {}",
            s["fanout"]
        );
        let p99 = |v: &Value| f(&v["sojourn"]["p99"]);
        let r = p99(&s["latency_ns"]) / p99(&s["ideal"]);
        eprintln!("1 leaf: measured ÷ ideal p99 {r:.3}");
        if (r - 1.0).abs() <= 0.05 {
            return Ok(());
        }
        Err((format!("measured ÷ ideal p99 {r}"), disturbed(&[&s])))
    });
}

/// Between the one-leaf and fifty-leaf tests, which check the same formula at its ends.
#[test]
#[ignore = "long: one leaf and fifty leaves check the same model in the default suite; make test-long"]
fn ten_leaves_match_the_model_of_the_same_run() {
    amplification(10, 200, 5_000);
}

#[test]
fn fifty_leaves_match_the_model_of_the_same_run() {
    amplification(50, 200, 3_500);
}

/// Ten leaves, two replicas each, whose services are 1 % 10 ms (the rest exp:100us): nearly
/// one request in ten meets a slow leaf, so the unhedged p99 is about 10 ms.
#[rustfmt::skip]
const HEAVY: &[&str] = &[
    "--app", "synth", "--set", "service=mix:0.99*exp:100us+0.01*fixed:10ms", "--set", "spin=sleep",
    "--wait", "block", "--qps", "200", "--warmup-requests", "600", "--requests", "2500",
    "--fanout", "10", "--replicas", "2",
];

/// docs/fanout.md: a leaf with a heavy tail (`mix:0.99*exp:100us+0.01*fixed:10ms`) hedged
/// after its p95 has the p99 of ten leaves cut more than 5× for under 10 % more served
/// copies (the model's claim, which The Tail at Scale's hedged requests make too): checked
/// on the run's model with the host's costs taken out; the measurement against the model
/// with them, and a cut of its own that this VM's lateness leaves. Tied copies on idle
/// replicas: both go out, the first to start cancels its twin.
#[test]
fn hedging_cuts_the_tail_for_a_little_load_and_tied_copies_cancel() {
    let _s = serial();
    within_tries("hedged and tied", 4, 2, |k| {
        let seed = k.to_string();
        let one = |name: &str, extra: &[&str]| {
            let out = tmp(&format!("fanout-{name}-{k}"));
            let mut args = HEAVY.to_vec();
            args.extend(["--seed", &seed]);
            args.extend(extra);
            let s = run(&args, &out);
            let _ = std::fs::remove_dir_all(&out);
            s
        };
        let plain = one("plain", &[]);
        let hedged = one("hedged", &["--hedge", "after=p95"]);
        let tied = one("tied", &["--tied"]);
        // A host so busy that a run saturated ends it at its drain deadline, short.
        for s in [&plain, &hedged, &tied] {
            if s["requests"]["measured"] != 2500 {
                let short = format!("a run cut short: {} ({})", s["requests"], s["incomplete"]);
                return Err((short, disturbed(&[&plain, &hedged, &tied])));
            }
        }
        // Tied: both replicas get every sub-request, the first to start cancels the other.
        let t = &fan(&tied)["measured"];
        assert_eq!(f(&t["sent_per_sub"]), 2.0, "{t}");
        assert!(
            f(&t["cancelled_per_sub"]) > 0.5,
            "the twin that did not start: {t}"
        );
        let h = &fan(&hedged)["measured"];
        assert!(f(&h["sent_per_sub"]) > 1.01, "{h}");
        // Every hedge's lateness and every idle worker's wake-up is recorded, and modelled.
        let m = &fan(&hedged)["model"];
        for (what, s) in [("measured", h), ("model", m)] {
            assert!(f(&s["hedge_lag"]["count"]) > 0.0, "{what} hedge lag: {s}");
            assert!(f(&s["wake"]["count"]) > 0.0, "{what} wake-ups: {s}");
        }
        // From the release, a request's latency leaves out the dispatcher's own lateness; the
        // model is run again without each host cost the run measured, then all of them.
        assert!(f(&h["e2e_released"]["mean"]) < f(&h["e2e"]["mean"]), "{h}");
        let without: Vec<&str> = fan(&hedged)["model_without"]
            .as_array()
            .expect("model_without")
            .iter()
            .map(|w| w["without"].as_str().unwrap())
            .collect();
        for n in ["hedge lag", "wake-ups", "all"] {
            assert!(without.contains(&n), "{n} not in {without:?}");
        }
        // The claim (docs/fanout.md) is the model's: hedging the leaf after its p95 cuts ten
        // leaves' p99 more than 5x for under 10 % more served copies, once the host's costs
        // (the dispatcher's release and hedge lateness, the workers' wake-ups) are out.
        let p99 = |s: &Value| f(&s["p99"]);
        let all_out = &fan(&hedged)["model_without"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["without"] == "all")
            .expect("model without all")["e2e"];
        let model_cut = p99(&fan(&plain)["model"]["e2e"]) / p99(all_out);
        let model_served = f(&m["served_per_sub"]);
        // The measurement follows its model (the run's arrivals, draws and host costs) where
        // 2 500 requests pin it: mean and p95 (p99 lies in the sparse stretch between the
        // hedged copies and the 10 ms services, where 25 requests move it by 2x: measured ÷
        // model p99 0.64-2.03 in six runs of 2026-12-01, two in CI; mean 0.93-0.98 and p95
        // 0.88-0.91 in the four here).
        let r = |q: &str| f(&h["e2e"][q]) / f(&m["e2e"][q]);
        let (r_mean, r95) = (r("mean"), r("p95"));
        // Measured from the arrival, the host's lateness is in the tail (on this VM one sleep
        // in a thousand wakes 1.4-2.2 ms late: 2.9-4.3x at p99.9, docs/fanout.md; 3.1-6.9x
        // at p99 in the six runs): still a cut, by more than 2.5x.
        let sojourn = |s: &Value| p99(&s["latency_ns"]["sojourn"]);
        let (a, b) = (sojourn(&plain), sojourn(&hedged));
        let served = f(&h["served_per_sub"]);
        eprintln!(
            "hedged and tied: model without host costs {model_cut:.1}x for {model_served:.3} \
             served copies; measured p99 {a} -> {b} ({:.1}x) for {served:.3}; measured / model \
             mean {r_mean:.3}, p95 {r95:.3}",
            a / b
        );
        if model_cut >= 5.0
            && model_served < 1.10
            && served < 1.10
            && (0.85..=1.15).contains(&r_mean)
            && (0.8..=1.25).contains(&r95)
            && a >= 2.5 * b
        {
            return Ok(());
        }
        Err((
            format!(
                "model without host costs {model_cut:.2}x for {model_served:.3} served copies; \
                 measured p99 {a} -> {b}, {served:.3} served; measured / model mean {r_mean:.3}, \
                 p95 {r95:.3}"
            ),
            disturbed(&[&plain, &hedged, &tied]),
        ))
    });
}

#[test]
fn bad_fanout_settings_get_one_clear_line() {
    let base = ["run", "--app", "synth", "--qps", "100", "--requests", "10"];
    for (extra, want) in [
        (&["--fanout", "0"][..], "--fanout must be in 1..=1024"),
        (
            &["--fanout", "4", "--fanout-wait", "k=5"][..],
            "at most --fanout",
        ),
        (
            &["--fanout", "4", "--hedge", "after=2ms"][..],
            "--replicas 2",
        ),
        (&["--fanout", "4", "--tied"][..], "--replicas 2"),
        (
            &["--fanout", "2", "--replicas", "2", "--hedge", "after=0ms"][..],
            "positive",
        ),
        (
            &["--fanout", "2", "--shaper", "thread"][..],
            "own dispatcher",
        ),
        (
            &[
                "--topology",
                "loopback",
                "--fanout",
                "2",
                "--replicas",
                "2",
                "--tied",
            ][..],
            "integrated configuration only",
        ),
        (
            &["--topology", "loopback", "--fanout", "2", "--clients", "2"][..],
            "one client per leaf",
        ),
        (
            &[
                "--topology",
                "loopback",
                "--fanout",
                "3",
                "--target",
                "127.0.0.1:1,127.0.0.1:2",
            ][..],
            "--fanout 3 needs 3 servers",
        ),
    ] {
        let out = tmp("fanout-bad");
        let o = Command::new(bin())
            .args(base)
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {err}");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{extra:?}: {err}"
        );
        assert!(err.contains(want), "{extra:?}: {err}");
        assert!(!out.join("summary.json").exists());
    }
}

/// Per request id, the sojourns (completed − intended) of its measured leaf rows in requests.csv.
fn leaf_sojourns(csv: &str) -> std::collections::BTreeMap<u64, Vec<u64>> {
    let mut lines = csv.lines();
    let head: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| head.iter().position(|h| *h == n).unwrap();
    let (id, int, comp, meas) = (
        col("id"),
        col("intended"),
        col("completed"),
        col("measured"),
    );
    assert_eq!(
        head.last(),
        Some(&"leaf"),
        "a fan-out's rows name their leaf"
    );
    let mut m: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
    for l in lines {
        let v: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        if v[meas] == 1 {
            m.entry(v[id]).or_default().push(v[comp] - v[int]);
        }
    }
    m
}

/// Over real TCP: three `taillab serve` leaves, one client each, every client sending the
/// run's schedule; the whole request is its slowest leaf's answer, joined by request id.
#[test]
fn a_loopback_fanout_over_three_servers_joins_their_answers() {
    let _s = serial();
    within_tries("loopback fan-out", 3, 2, |k| {
        let out = tmp(&format!("fanout-loopback-{k}"));
        let seed = k.to_string();
        #[rustfmt::skip]
        let s = run(&[
            "--app", "synth", "--set", "service=exp:500us", "--set", "spin=sleep", "--wait", "block",
            "--topology", "loopback", "--fanout", "3", "--qps", "200", "--warmup-requests", "200",
            "--requests", "1500", "--save-requests", "--seed", &seed,
        ], &out);
        let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
        let _ = std::fs::remove_dir_all(&out);
        loopback_joined(&s, &csv);
        // The model is the integrated one fed with the leaves' own service times and the
        // clients' releases (docs/fanout.md): it has no network in it, so what the sockets add
        // is the measured p99 less the model's, and the sockets never take latency away. Each
        // leaf's copies report it (`transport_ns`: sojourn less send lag, queue and service);
        // the whole request waits for the slowest of three, whose transport is above a copy's
        // p99.9 less often than 1 % of the time (3 × 0.1 %). So the whole request's p99 lies
        // between the model's and the model's plus the copies' p99.9 transport; with 1 500
        // requests the p99 of the slowest of three exponential leaves has a standard error of
        // about 4 %, hence four of them either side.
        let fo = fan(&s);
        let (p99, model) = (
            f(&fo["measured"]["e2e"]["p99"]),
            f(&fo["model"]["e2e"]["p99"]),
        );
        let sockets = f(&s["transport"]["transport_ns"]["p999"]);
        eprintln!(
            "loopback fan-out: p99 {p99} ns, model {model} ns, the sockets' p99.9 {sockets} ns"
        );
        if (0.84 * model..=1.16 * (model + sockets)).contains(&p99) {
            return Ok(());
        }
        Err((
            format!("measured p99 {p99} ns vs model {model} ns, the sockets' p99.9 {sockets} ns"),
            disturbed(&[&s]),
        ))
    });
}

/// A loopback fan-out's structure: three leaves and their clients, every leaf answering every
/// measured request, the whole request its slowest answer (`csv`: the run's requests.csv).
fn loopback_joined(s: &Value, csv: &str) {
    let fo = fan(s);
    assert_eq!(
        (s["config"].as_str(), fo["leaves"].as_u64()),
        (Some("loopback"), Some(3))
    );
    assert_eq!(s["transport"]["clients"], 3, "one client per leaf");
    assert_eq!(s["requests"]["measured"], 1500);
    assert_eq!(fo["per_leaf"].as_array().map(|a| a.len()), Some(3));
    assert!(s["ideal"]["method"]
        .as_str()
        .unwrap()
        .starts_with("fan-out model"));
    // Each leaf draws its own requests (its own service times): the slowest of three is well
    // above one leaf (for exponential leaves the median of three's maximum is 2.3× a leaf's).
    let (e2e, leaf) = (
        f(&fo["measured"]["e2e"]["p50"]),
        f(&fo["measured"]["leaf"]["p50"]),
    );
    assert!(
        e2e > 1.5 * leaf,
        "request p50 {e2e} vs a leaf's {leaf}: are the leaves' requests the same?"
    );
    let per = leaf_sojourns(csv);
    assert_eq!(per.len(), 1500);
    assert!(per.values().all(|v| v.len() == 3));
    let mut whole: Vec<u64> = per.values().map(|v| *v.iter().max().unwrap()).collect();
    whole.sort_unstable();
    for (q, key) in [(0.5, "p50"), (0.99, "p99")] {
        let exact = whole[((q * whole.len() as f64).ceil() as usize).max(1) - 1] as f64;
        let got = f(&s["latency_ns"]["sojourn"][key]);
        assert!(
            (got / exact - 1.0).abs() < 0.01,
            "{key}: summary {got} vs rows {exact}"
        );
    }
}

/// Several clients' and a fan-out's leaves' records go to requests.parquet when asked: the
/// rows the CSV would hold, with the column that names their sender (`client`, `leaf`).
#[test]
fn several_clients_and_fanout_leaves_write_parquet_records() {
    use taillab_core::reqfile::{read_all, Sender};
    let _s = serial();
    #[rustfmt::skip]
    let cases: [(Sender, &[&str]); 2] = [
        (Sender::Client, &["--app", "null", "--clients", "2", "--qps", "2000"]),
        (Sender::Leaf, &["--app", "synth", "--set", "service=exp:300us", "--set", "spin=sleep",
                         "--wait", "block", "--fanout", "2", "--qps", "400"]),
    ];
    for (sender, args) in cases {
        let out = tmp(&format!("parquet-{sender}"));
        #[rustfmt::skip]
        let common = ["--topology", "loopback", "--warmup-requests", "100", "--requests", "600",
                      "--save-requests", "--record-format", "parquet"];
        let s = run(&[args, &common[..]].concat(), &out);
        assert!(!out.join("requests.csv").exists(), "{sender}");
        let (extra, rows) = read_all(&out.join("requests.parquet")).unwrap();
        assert_eq!((extra.ideal, extra.sender), (false, Some(sender)));
        let senders: std::collections::BTreeSet<_> = rows.iter().map(|r| r.sender).collect();
        assert_eq!(
            senders,
            [Some(0), Some(1)].into(),
            "{sender}: every one's rows"
        );
        assert!(rows
            .iter()
            .all(|r| r.stamps.intended <= r.stamps.sent && r.stamps.started <= r.stamps.finished));
        let measured = rows.iter().filter(|r| r.measured).count() as u64;
        if sender == Sender::Client {
            // The clients share the run's requests.
            assert_eq!(measured, s["requests"]["measured"].as_u64().unwrap());
            assert_eq!(
                rows.len() as u64,
                measured + s["requests"]["warmup"].as_u64().unwrap()
            );
            let _ = std::fs::remove_dir_all(&out);
            continue;
        }
        // Every leaf answered every measured request; the whole is the slower answer.
        let mut per: std::collections::BTreeMap<u64, Vec<u64>> = Default::default();
        for r in rows.iter().filter(|r| r.measured) {
            per.entry(r.id)
                .or_default()
                .push(r.stamps.completed - r.stamps.intended);
        }
        assert_eq!(per.len(), 600);
        assert!(per.values().all(|v| v.len() == 2));
        let mut whole: Vec<u64> = per.values().map(|v| *v.iter().max().unwrap()).collect();
        whole.sort_unstable();
        let exact = whole[whole.len() / 2 - 1] as f64;
        let got = f(&s["latency_ns"]["sojourn"]["p50"]);
        assert!(
            (got / exact - 1.0).abs() < 0.01,
            "p50: summary {got} vs rows {exact}"
        );
        let _ = std::fs::remove_dir_all(&out);
    }
}
