//! The load client's senders, connection spread and capped mode, through the real binary over
//! real sockets: `taillab load --senders M` against memcached (Debian) and `taillab serve`,
//! the shares of one schedule adding up to the configured process, the per-sender report,
//! the other tools' capped method against the open loop on a server with planted slow
//! requests, and the bad input.

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};

mod common;
use common::*;

fn load(addr: &str, args: &[&str], out: &Path) -> std::process::Output {
    Command::new(bin())
        .arg("load")
        .args(["--target", addr, "-q", "--no-monitor", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

/// `requests.csv` as rows of numbers, with its header.
fn rows(out: &Path) -> (Vec<String>, Vec<Vec<u64>>) {
    let txt = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let mut lines = txt.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    (head, rows)
}

fn col(head: &[String], name: &str) -> usize {
    head.iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {head:?}"))
}

#[test]
fn two_senders_split_one_poisson_schedule_and_report_each_sender() {
    let _s = serial();
    let (_m, addr) = memcached();
    let out = tmp("senders-mc");
    let o = load(
        &addr,
        &[
            "--app",
            "memcached",
            "--senders",
            "2",
            "--connections",
            "4",
            "--qps",
            "4000",
            "--warmup-requests",
            "1000",
            "--requests",
            "8000",
            "--save-requests",
            "--set",
            "keys=1000",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_summary(&out);
    assert_eq!(
        s["requests"]["measured"], 8000,
        "the shares' counts add up to the run's"
    );
    assert_eq!(s["requests"]["errors"], 0, "{}", s["first_error"]);
    let senders = s["transport"]["senders"]
        .as_array()
        .expect("transport.senders");
    assert_eq!(senders.len(), 2);
    let (mut sent, mut measured) = (0, 0);
    for (j, x) in senders.iter().enumerate() {
        assert_eq!(x["sender"], j);
        assert_eq!(x["connections"], 2, "4 connections over 2 senders");
        // Each sender's share of 9000 requests: 4500 ± a few (dealt: exactly 4500).
        let n = x["sent"].as_u64().unwrap();
        assert!((4000..=5000).contains(&n), "sender {j} sent {n}");
        assert!(x["busy_pct"].as_f64().unwrap() <= 100.0);
        assert!(x["send_lag_ns"]["count"].as_u64().unwrap() > 0);
        sent += n;
        measured += x["measured"].as_u64().unwrap();
    }
    assert_eq!(
        sent, 9000,
        "warmup and measured requests, every one sent once"
    );
    assert_eq!(measured, 8000);
    assert!(
        s["checks"]["client"]["senders"].is_array(),
        "{}",
        s["checks"]["client"]
    );
    // The records: one stream, renumbered in intended order, every connection used.
    let (head, r) = rows(&out);
    let (id, worker, intended, m) = (
        col(&head, "id"),
        col(&head, "worker"),
        col(&head, "intended"),
        col(&head, "measured"),
    );
    assert_eq!(r.len(), 9000);
    assert!(r
        .windows(2)
        .all(|w| w[0][id] < w[1][id] && w[0][intended] <= w[1][intended]));
    let mut conns: Vec<u64> = r.iter().map(|x| x[worker]).collect();
    conns.sort_unstable();
    conns.dedup();
    assert_eq!(conns, vec![0, 1, 2, 3]);
    // Two independent Poisson streams at 2000/s superpose to one at 4000/s: the merged
    // intended gaps are exponential with mean 250 µs (one sender's gaps alone would have
    // mean 500 µs; Erlang-2 gaps of a dealt Poisson stream would fail the KS test).
    let t: Vec<f64> = r
        .iter()
        .filter(|x| x[m] == 1)
        .map(|x| x[intended] as f64)
        .collect();
    let gaps: Vec<f64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    // 8000 gaps: the mean's standard error is 1.1 %.
    assert!((mean / 250_000.0 - 1.0).abs() < 0.05, "mean gap {mean} ns");
    let (d, pv) = taillab_core::arrival::ks_exponential(&gaps, mean);
    assert!(
        pv > 0.001,
        "merged intended gaps vs exponential: D {d} p {pv}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn senders_deal_a_fixed_schedule_in_order() {
    // A fixed schedule split over senders must still be one fixed schedule: every gap
    // 1/rate, not two interleaved streams at half the rate with arbitrary phases.
    let _s = serial();
    let srv = Kid(Command::new(bin())
        .args([
            "serve",
            "--app",
            "null",
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let addr = listening(srv);
    let out = tmp("senders-fixed");
    let o = load(
        &addr.1,
        &[
            "--app",
            "null",
            "--senders",
            "3",
            "--connections",
            "3",
            "--arrival",
            "fixed",
            "--qps",
            "3000",
            "--warmup-requests",
            "300",
            "--requests",
            "3000",
            "--save-requests",
        ],
        &out,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (head, r) = rows(&out);
    let intended = col(&head, "intended");
    assert_eq!(r.len(), 3300);
    // Fixed arrivals are n × 1e9 / rate, rounded: every gap is 333 333 or 333 334 ns.
    for w in r.windows(2) {
        let g = w[1][intended] - w[0][intended];
        assert!((333_333..=333_334).contains(&g), "a gap of {g} ns");
    }
    let s = read_summary(&out);
    assert_eq!(s["transport"]["server_timed"], true);
    assert_eq!(s["transport"]["senders"].as_array().unwrap().len(), 3);
    let _ = std::fs::remove_dir_all(&out);
}

/// The address a `taillab serve` printed (`listening ADDR`), and the server.
fn listening(mut srv: Kid) -> (Kid, String) {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(srv.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("serve said {line:?}"))
        .to_string();
    (srv, addr)
}

#[test]
fn bad_sender_settings_get_one_clear_line() {
    let _s = serial();
    let (_m, addr) = memcached();
    let out = tmp("senders-bad");
    let base = ["--app", "memcached", "--qps", "1000", "--requests", "500"];
    let cases: [(&[&str], &str); 3] = [
        (
            &["--senders", "3", "--connections", "2"],
            "needs at least as many connections",
        ),
        (&["--senders", "0"], "net.senders must be in 1..=256"),
        (
            &["--max-in-flight", "2", "--receive", "threads"],
            "needs the senders to read their own responses",
        ),
    ];
    for (args, want) in cases {
        let mut a: Vec<&str> = base.to_vec();
        a.extend(args);
        let o = load(&addr, &a, &out);
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was accepted");
        let errs: Vec<&str> = e.lines().filter(|l| l.starts_with("error")).collect();
        assert_eq!(errs.len(), 1, "{args:?}: {e}");
        assert!(errs[0].contains(want), "{args:?}: {}", errs[0]);
    }
    // More senders than CPUs to pin them to: a warning naming the placement, and the run.
    let o = load(
        &addr,
        &[
            &base[..],
            &["--senders", "2", "--connections", "2", "--client-cpus", "0"],
        ]
        .concat(),
        &out,
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(
        e.contains("2 senders on 1 CPU(s) (sender→CPU 0→0 1→0)"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_server_that_answers_nothing_is_an_error_not_an_empty_run() {
    // It accepts the connections and reads every request, and never writes a byte.
    let _s = serial();
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut c = c;
                let mut b = [0u8; 4096];
                while std::io::Read::read(&mut c, &mut b).is_ok_and(|n| n > 0) {}
            });
        }
    });
    let out = tmp("senders-mute");
    let o = load(
        &addr,
        &[
            "--app",
            "null",
            "--senders",
            "2",
            "--connections",
            "2",
            "--qps",
            "200",
            "--duration",
            "1s",
        ],
        &out,
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let errs: Vec<&str> = e.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errs.len(), 1, "{e}");
    assert!(
        errs[0].contains(&format!("{addr} did not answer"))
            || errs[0].contains("completed no request"),
        "{}",
        errs[0]
    );
    let s = read_summary(&out);
    assert_eq!(s["requests"]["measured"], 0);
    let _ = std::fs::remove_dir_all(&out);
}

/// A loopback run of synth with a planted slow request every 500th (2 ms, fixed), timed the
/// open-loop way or capped at one request in flight per connection.
fn planted(name: &str, extra: &[&str]) -> Value {
    let out = tmp(name);
    let mut args = vec![
        "--app",
        "synth",
        "--topology",
        "loopback",
        "--threads",
        "1",
        "--connections",
        "2",
        "--set",
        "service=exp:20us",
        "--set",
        "periodic=requests:500,for=fixed:2ms",
        "--qps",
        "5000",
        "--warmup-requests",
        "2000",
        "--requests",
        "30000",
        "--save-requests",
    ];
    args.extend(extra);
    let s = run(&args, &out);
    let _ = std::fs::remove_dir_all(&out);
    s
}

#[test]
fn the_capped_method_hides_the_planted_tail_the_open_loop_measures() {
    // Every 500th request takes 2 ms; at 5000/s the ~10 requests that arrive during it wait
    // behind it (2 % of all), so the true p99 is a millisecond or so, and the run's ideal
    // (its own arrivals and service times replayed through an exact FIFO queue) says what
    // it is. The open loop measures it; a client that keeps at most one request in flight
    // per connection holds the arrivals back while the slow one runs and times each from its
    // actual send: only the one or two in flight see the stall.
    let _s = serial();
    within_tries("capped vs open", 3, 2, |_| {
        let open = planted("capped-open", &[]);
        let capped = planted("capped-one", &["--max-in-flight", "1"]);
        let p99 = |s: &Value| s["latency_ns"]["sojourn"]["p99"].as_f64().unwrap();
        let ideal = open["ideal"]["sojourn"]["p99"].as_f64().unwrap_or(0.0);
        assert_eq!(
            capped["transport"]["capped"]["max_in_flight"], 1,
            "{}",
            capped["transport"]
        );
        assert!(open["transport"].get("capped").is_none());
        let disturbed = host_disturbed(&open).or_else(|| host_disturbed(&capped));
        let (o, c) = (p99(&open), p99(&capped));
        eprintln!(
            "capped vs open: open p99 ÷ ideal {:.3}, capped p99 ÷ ideal {:.3} (ideal {ideal:.0} ns)",
            o / ideal,
            c / ideal
        );
        // The open loop's p99 is at least 85 % of its ideal's (it hides no part of the planted
        // tail) and at most 3 × it plus the loopback's own ~20 µs: the ideal has no network,
        // and on two vCPUs the host's own threads take a CPU from the sender or the server's
        // worker for ~2 ms at a time, which the open loop charges, rightly, to the requests
        // they delayed (docs/protocol.md). How much varies by the day: 1.24–1.55 × on
        // 2026-12-01, 1.41–2.61 × in 20 runs on 2026-12-07 (the same VM kind, steal ≤ 1.5 %,
        // the client and the server pinned apart or not alike). A client that charged
        // requests more than their own wait (the stall twice, or the wrong request's intended
        // time) is out by more than that. The capped p99 is under a third of the ideal: held
        // requests are not charged the 2 ms (0.09–0.11 × in the same runs).
        let near = ideal > 500_000.0 && o >= 0.85 * ideal && o <= 3.0 * ideal + 50_000.0;
        if near && c < ideal / 3.0 {
            Ok(())
        } else {
            Err((
                format!("open p99 {o:.0} ns, its ideal {ideal:.0} ns, capped p99 {c:.0} ns"),
                disturbed,
            ))
        }
    });
}

/// The capped method far above what the client can schedule and send (the way a server's
/// closed-loop peak is measured, bench/transport's senders section): the sender is late all
/// along, and must still read the answers that free room in its connections. It used to race
/// through the schedule holding request after request, its answers unread, until the
/// schedule ended: seconds of silence at 2 M/s offered, which the watcher took for a dead
/// server (exit 2, "did not answer"), in 3 of 4 runs on the 2-vCPU VM. Now the run ends
/// well, its answers read as they came (every request answered, none lost), at the rate the
/// pair carries.
#[test]
fn a_capped_client_far_above_its_servers_rate_keeps_reading_its_answers() {
    let _s = serial();
    let (_srv, addr) = serve(&["--app", "null", "--threads", "1"]);
    let out = tmp("senders-capped-peak");
    let o = load(
        &addr,
        &[
            "--app",
            "null",
            "--connections",
            "8",
            "--max-in-flight",
            "64",
            "--qps",
            "3000000",
            "--duration",
            "2s",
            "--warmup-seconds",
            "0.5",
        ],
        &out,
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    let s = read_summary(&out);
    assert_eq!(s["transport"]["capped"]["max_in_flight"], 64);
    let measured = s["requests"]["measured"].as_f64().unwrap();
    let achieved = s["achieved_qps"].as_f64().unwrap();
    // Two vCPUs carry 1-2 M null requests a second this way (docs/transport-cost.md): anything
    // above 100 k/s is a run whose sender kept its connections busy.
    assert!(
        measured > 100_000.0 && achieved > 100_000.0,
        "measured {measured}, achieved {achieved}/s: {e}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
