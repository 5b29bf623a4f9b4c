//! The real binary over real sockets: `taillab serve`, `taillab load`,
//! `taillab run --config loopback|networked`, and real external servers
//! (memcached, redis-server, nginx from Debian; transport/apt.txt).
//!
//! Timing assertions are deliberately loose (a 2-vCPU VM shared with other
//! work moves tails by multiples); what is asserted exactly are counts, the
//! merge arithmetic and the failure behaviour.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::*;

fn load(addr: &str, args: &[&str], out: &Path) -> std::process::Output {
    Command::new(bin())
        .arg("load")
        .args(["--target", addr, "-q", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

fn p(s: &Value, metric: &str, k: &str) -> u64 {
    s["latency_ns"][metric][k].as_u64().unwrap()
}

fn decode(b64: &str) -> hdrhistogram::Histogram<u64> {
    taillab_core::collector::decode_hist(b64).unwrap()
}

#[test]
fn loopback_two_clients_merge_into_one_result() {
    let _s = serial();
    let out = tmp("loopback");
    let o = Command::new(bin())
        .args([
            "run",
            "--app",
            "null",
            "--config",
            "loopback",
            "--clients",
            "2",
            "--connections",
            "2",
            // Each client's sender reads its two connections through epoll.
            "--receive",
            "sender",
        ])
        .args([
            "--qps",
            "2000",
            "--warmup-requests",
            "200",
            "--requests",
            "3001",
            "--save-requests",
            "-q",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_summary(&out);
    assert_eq!(s["schema"], "taillab.run/2");
    assert_eq!(s["config"], "loopback");
    // The server reported what it served (warmup included) when it stopped.
    assert_eq!(s["server"]["requests"], 3201, "{}", s["server"]);
    assert_eq!(s["server"]["connections"], 4, "{}", s["server"]);
    assert_eq!(s["server"]["dropped"], 0, "clean disconnects are not drops");
    // The environment monitor covered the run; server and clients are the
    // experiment's own processes, not foreign ones.
    assert!(
        s["checks"]["environment"]["ok"].is_boolean(),
        "{}",
        s["checks"]
    );
    let extra = s["environment"]["extra"]
        .as_array()
        .expect("environment.extra");
    assert_eq!(extra.len(), 3, "server + 2 clients: {extra:?}");
    assert!(
        extra.iter().all(|x| x["cpu_pct"].as_f64().unwrap() > 0.0),
        "{extra:?}"
    );
    assert!(out.join("environment.json").exists());
    // Every client's stamps, with the client named.
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next().unwrap(),
        "id,worker,intended,sent,enqueued,started,finished,completed,measured,enqueued_user,completed_user,client"
    );
    let rows: Vec<Vec<u64>> = lines
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 3201);
    assert_eq!(rows.iter().filter(|r| r[8] == 1).count(), 3001);
    for c in 0..2 {
        assert!(rows.iter().any(|r| r[11] == c), "no rows of client {c}");
    }
    assert!(rows
        .iter()
        .all(|r| r[2] <= r[3] && r[5] <= r[6] && r[6] <= r[7]));
    // The sequence checks ran on both clients' streams, merged (whether the
    // sends fit Poisson depends on how quiet the host is, so only that they
    // ran on every measured request is asserted here).
    let ia = &s["checks"]["interarrival"];
    assert_eq!(ia["test"], "ks_exponential", "{ia}");
    assert_eq!(ia["gaps"], 3000, "{ia}");
    assert_eq!(s["requests"]["measured"], 3001);
    assert_eq!(s["requests"]["warmup"], 200);
    assert_eq!(s["requests"]["unfinished"], 0);
    let t = &s["transport"];
    assert_eq!(t["clients"], 2);
    let per: Vec<&Value> = t["per_client"].as_array().unwrap().iter().collect();
    let counts: Vec<u64> = per
        .iter()
        .map(|c| c["measured"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 3001, "{counts:?}");
    assert_ne!(
        per[0]["seed"], per[1]["seed"],
        "clients must draw independent Poisson streams"
    );
    // The merged percentiles are those of the added histograms, not averages.
    let mut h = decode(per[0]["sojourn_hist"].as_str().unwrap());
    h.add(decode(per[1]["sojourn_hist"].as_str().unwrap()))
        .unwrap();
    assert_eq!(h.len(), 3001);
    for (k, q) in [("p50", 0.5), ("p99", 0.99), ("max", 1.0)] {
        assert_eq!(p(&s, "sojourn", k), h.value_at_quantile(q), "{k}");
    }
    // Server-side durations came back and transport is what remains.
    assert!(p(&s, "service", "max") > 0);
    let tr = t["transport_ns"]["mean"].as_f64().unwrap();
    let m = |k: &str| s["latency_ns"][k]["mean"].as_f64().unwrap();
    let want = m("sojourn") - m("send_lag") - m("queue") - m("service");
    assert!(
        (tr - want).abs() <= 1.0 + want.abs() * 1e-6,
        "transport mean {tr} vs {want}"
    );
    for f in ["sojourn", "service", "queue", "send_lag"] {
        let log = std::fs::read_to_string(out.join("hist").join(format!("{f}.hlog"))).unwrap();
        assert!(
            log.lines().any(|l| l.starts_with("Tag=")),
            "{f}.hlog has no intervals"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn same_seed_same_schedule_as_integrated() {
    let _s = serial();
    let (_srv, addr) = serve(&["--app", "null"]);
    let (a, b) = (tmp("seed-load"), tmp("seed-int"));
    let args = [
        "--app",
        "null",
        "--qps",
        "3000",
        "--requests",
        "300",
        "--seed",
        "42",
        "--save-requests",
    ];
    // Both receive modes record every request of the same schedule.
    let o = load(&addr, &[&args[..], &["--receive", "threads"]].concat(), &a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(bin())
        .arg("run")
        .args(args)
        .args(["-q", "--out"])
        .arg(&b)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let offsets = |d: &Path| -> Vec<u64> {
        let txt = std::fs::read_to_string(d.join("requests.csv")).unwrap();
        let v: Vec<u64> = txt
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(2).unwrap().parse().unwrap())
            .collect();
        v.iter().map(|x| x - v[0]).collect()
    };
    // And through the coordinator (loopback, one client): same schedule, and
    // its records feed the sequence checks as in an integrated run.
    let c = tmp("seed-loopback");
    let o = Command::new(bin())
        .args(["run", "--config", "loopback"])
        .args(args)
        .args(["-q", "--out"])
        .arg(&c)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (x, y, z) = (offsets(&a), offsets(&b), offsets(&c));
    assert_eq!(x.len(), 300);
    assert_eq!(
        x, y,
        "the same seed must give the same arrival schedule in every configuration"
    );
    assert_eq!(x, z, "loopback run schedule");
    let s = read_summary(&c);
    let verdict = s["checks"]["interarrival"]["verdict"].as_str().unwrap();
    assert!(
        verdict.contains("KS"),
        "interarrival check not run: {verdict}"
    );
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
    let _ = std::fs::remove_dir_all(&c);
}

#[test]
fn serve_places_its_workers() {
    let _s = serial();
    let (srv, addr) = serve(&[
        "--app",
        "null",
        "--threads",
        "2",
        "--cpus",
        "1",
        "--rt-priority",
        "5",
    ]);
    // Each worker thread is pinned to CPU 1 and runs SCHED_FIFO 5 (field 41 of stat: policy 1).
    let mut seen = 0;
    for t in std::fs::read_dir(format!("/proc/{}/task", srv.0.id()))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("taillab-srv-") {
            continue;
        }
        seen += 1;
        let status = std::fs::read_to_string(t.path().join("status")).unwrap();
        assert!(
            status.contains("Cpus_allowed_list:\t1\n"),
            "{comm}: {status}"
        );
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split(' ').collect();
        // Fields after comm start at field 3: rt_priority is field 40, policy 41.
        assert_eq!((f[40 - 3], f[41 - 3]), ("5", "1"), "{comm}: {stat}");
    }
    assert_eq!(seen, 2, "two worker threads");
    // `load --cpus`: the sender on the first CPU, receiver i on the (i+1)-th, round-robin.
    let out = tmp("load-cpus");
    #[rustfmt::skip]
    let mut c = background_load(&addr, "threads", "200",
                                &["--client-cpus", "1,0", "--connections", "2"], &out);
    let want = [
        ("taillab-sender", "1"),
        ("taillab-recv-0", "0"),
        ("taillab-recv-1", "1"),
    ];
    let since = Instant::now();
    let mut found = Vec::new();
    while found.len() < want.len() && since.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
        found.clear();
        for t in std::fs::read_dir(format!("/proc/{}/task", c.0.id()))
            .unwrap()
            .flatten()
        {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            if let Some((_, cpu)) = want.iter().find(|(n, _)| comm.trim() == *n) {
                assert!(
                    status.contains(&format!("Cpus_allowed_list:\t{cpu}\n")),
                    "{comm}: {status}"
                );
                found.push(comm);
            }
        }
    }
    assert_eq!(found.len(), want.len(), "threads seen: {found:?}");
    let _ = c.0.kill();
    let _ = std::fs::remove_dir_all(&out);
}

/// `--nice` puts every worker thread of `taillab serve` at that nice value under CFS
/// (stat field 19 the nice value, field 41 the policy: 0 is SCHED_OTHER), and only them: the
/// process's main thread keeps its own.
#[test]
fn serve_runs_its_workers_at_a_nice_value() {
    let _s = serial();
    let (srv, _addr) = serve(&["--app", "null", "--threads", "2", "--nice", "-7"]);
    let (mut workers, mut others) = (0, 0);
    for t in std::fs::read_dir(format!("/proc/{}/task", srv.0.id()))
        .unwrap()
        .flatten()
    {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap();
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = after.split(' ').collect();
        if comm.starts_with("taillab-srv-") {
            workers += 1;
            assert_eq!((f[19 - 3], f[41 - 3]), ("-7", "0"), "{comm}: {stat}");
        } else if t.file_name().to_str() == Some(&srv.0.id().to_string()) {
            others += 1;
            assert_ne!(f[19 - 3], "-7", "the main thread moved too: {stat}");
        }
    }
    assert_eq!(
        (workers, others),
        (2, 1),
        "two worker threads and the main one"
    );
}

#[test]
fn server_drops_garbage_and_keeps_serving() {
    let _s = serial();
    for dispatch in ["shared", "per-worker"] {
        garbage_case(dispatch);
    }
}

fn garbage_case(dispatch: &str) {
    let (mut srv, addr) = serve(&[
        "--app",
        "null",
        "--threads",
        "2",
        "--max-frame",
        "1KiB",
        "--dispatch",
        dispatch,
    ]);
    // Garbage: the server hangs up on it.
    let mut g = TcpStream::connect(&addr).unwrap();
    g.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    g.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(
        g.read(&mut buf).unwrap_or(0),
        0,
        "garbage must close the connection"
    );
    // A frame over the cap: refused the same way, before its payload arrives.
    let mut big = TcpStream::connect(&addr).unwrap();
    let mut f = Vec::new();
    taillab_transport::proto::encode_request(1, &[0u8; 2048], &mut f);
    big.write_all(&f[..16]).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(
        big.read(&mut buf).unwrap_or(0),
        0,
        "an oversized frame must close the connection"
    );
    // A well-formed request on a fresh connection still gets its echo.
    let mut ok = TcpStream::connect(&addr).unwrap();
    let mut f = Vec::new();
    taillab_transport::proto::encode_request(7, b"ping", &mut f);
    ok.write_all(&f).unwrap();
    let mut resp = [0u8; taillab_transport::proto::RESP_HEADER + 4];
    ok.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    ok.read_exact(&mut resp).unwrap();
    let h = taillab_transport::proto::parse(&resp, 1024, taillab_transport::proto::Kind::Response)
        .unwrap()
        .unwrap();
    assert_eq!((h.id, &resp[h.header_len()..]), (7, &b"ping"[..]));
    drop(ok);
    // SIGTERM: clean exit with status 0, and the drops were logged.
    unsafe { libc::kill(srv.0.id() as i32, libc::SIGTERM) };
    let st = srv.0.wait().unwrap();
    assert!(st.success(), "serve exited with {st}");
    let mut err = String::new();
    srv.0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("bad magic"), "{err}");
    assert!(err.contains("exceeds the 1024-byte cap"), "{err}");
}

/// A load client against a fresh null server, in the background.
fn background_load(addr: &str, receive: &str, qps: &str, extra: &[&str], out: &Path) -> Kid {
    #[rustfmt::skip]
    let c = Command::new(bin())
        .args(["load", "--app", "null", "--target", addr, "--qps", qps, "--duration", "20s",
               "--receive", receive, "-q", "--out"])
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Kid(c)
}

/// Stops the server `srv` (SIGSTOP: a hung process), waits for the load `c` to exit within
/// `limit`, then lets the server go on; returns the load's status and stderr.
fn freeze_until_exit(
    srv: &Kid,
    c: &mut Kid,
    limit: Duration,
) -> (std::process::ExitStatus, String) {
    let pid = srv.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let r = exits_within(c, limit, "the server hung");
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    r
}

/// Waits for `c` to exit, failing if it takes longer than `limit`; returns its status and stderr.
fn exits_within(c: &mut Kid, limit: Duration, what: &str) -> (std::process::ExitStatus, String) {
    let since = Instant::now();
    let status = loop {
        if let Some(s) = c.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            since.elapsed() < limit,
            "load still running {limit:?} after {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    c.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    (status, err)
}

/// What a client keeps from a run that lost its server.
fn kept_what_it_measured(out: &Path) {
    let s = read_summary(out);
    assert!(
        s["requests"]["measured"].as_u64().unwrap() > 200,
        "kept what it measured"
    );
    assert_eq!(
        s["checks"]["saturation"]["ok"], false,
        "a lost server must fail a check"
    );
}

#[test]
fn dead_server_is_detected_and_the_measured_part_kept() {
    let _s = serial();
    for receive in ["sender", "threads"] {
        let (mut srv, addr) = serve(&["--app", "null"]);
        let out = tmp("dead");
        let mut c = background_load(&addr, receive, "1000", &[], &out);
        std::thread::sleep(Duration::from_millis(1500));
        srv.0.kill().unwrap();
        let (status, err) = exits_within(&mut c, Duration::from_secs(5), "the server died");
        assert!(!status.success(), "--receive {receive}");
        assert!(
            err.contains("closed") || err.contains("failed"),
            "--receive {receive}: {err}"
        );
        kept_what_it_measured(&out);
        let _ = std::fs::remove_dir_all(&out);
    }
}

#[test]
fn hung_server_is_detected_and_the_measured_part_kept() {
    let _s = serial();
    for receive in ["sender", "threads"] {
        let (srv, addr) = serve(&["--app", "null"]);
        let out = tmp("hung");
        // Fast enough that a stopped server's socket buffers fill within the
        // wait, so a sender blocked in a full socket is exercised too.
        let mut c = background_load(&addr, receive, "50000", &["--dead-after", "2s"], &out);
        std::thread::sleep(Duration::from_millis(1500));
        let (status, err) = freeze_until_exit(&srv, &mut c, Duration::from_secs(8));
        assert!(!status.success(), "--receive {receive}");
        assert!(err.contains("dead or hung"), "--receive {receive}: {err}");
        kept_what_it_measured(&out);
        let _ = std::fs::remove_dir_all(&out);
    }
}

/// A server that stops answering before the schedule ends (a hung process, here SIGSTOP) is an
/// error naming it even when the drain ends the run before `--dead-after` would have; what was
/// measured before is kept. (Before, such a run ended as a saturated one, exit status 0.)
#[test]
fn a_server_silent_at_the_schedule_s_end_is_an_error_not_a_saturated_run() {
    let _s = serial();
    let (srv, addr) = serve(&["--app", "null"]);
    let out = tmp("silent");
    #[rustfmt::skip]
    let mut c = Kid(Command::new(bin())
        .args(["load", "--app", "null", "--target", &addr, "--qps", "1000", "--duration", "2s",
               "--warmup-requests", "100", "--dead-after", "60s", "-q", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    std::thread::sleep(Duration::from_millis(1200));
    let (status, err) = freeze_until_exit(&srv, &mut c, Duration::from_secs(20));
    assert_eq!(status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains(&format!("{addr} did not answer")) && lines[0].contains("dead or hung"),
        "{err}"
    );
    kept_what_it_measured(&out);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn bad_flags_give_one_clear_error() {
    let o = Command::new(bin())
        .args([
            "load",
            "--app",
            "null",
            "--target",
            "127.0.0.1:1",
            "--qps",
            "10",
            "--requests",
            "5",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("is the server running"), "{e}");
    let o = Command::new(bin())
        .args([
            "run",
            "--app",
            "memcached",
            "--config",
            "loopback",
            "--qps",
            "10",
            "--requests",
            "5",
            "-q",
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--target"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(bin())
        .args(["serve", "--app", "null", "--max-frame", "2GiB"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // Each bad value is refused before anything starts, naming the flag and what to use.
    let lb: &[&str] = &["run", "--config", "loopback"];
    let ld: &[&str] = &["load", "--target", "127.0.0.1:1"];
    #[rustfmt::skip]
    let cases: [(&[&str], &[&str], &[&str]); 6] = [
        (lb, &["--dispatch", "mine"], &["--dispatch", "per-worker"]),
        (lb, &["--receive", "nap"], &["--receive", "threads"]),
        (ld, &["--receive", "nap"], &["--receive", "threads"]),
        (lb, &["--client-cpus", "4096"], &["--client-cpus", "4096"]),
        (ld, &["--client-cpus", "4096"], &["--client-cpus", "4096"]),
        (ld, &["--cpus", "0"], &["--cpus", "--client-cpus"]),
    ];
    for (cmd, bad, want) in cases {
        let o = Command::new(bin())
            .args(cmd)
            .args(bad)
            .args(["--app", "null", "--qps", "10", "--requests", "5", "-q"])
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{cmd:?} {bad:?}: {e}");
        assert!(want.iter().all(|w| e.contains(w)), "{cmd:?} {bad:?}: {e}");
    }
}

#[test]
fn per_worker_dispatch_serves_every_connection() {
    let _s = serial();
    let out = tmp("per-worker");
    // Two workers, two clients × two connections: each worker owns two.
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["run", "--app", "synth", "--config", "loopback", "--dispatch", "per-worker",
               "--receive", "threads", "--threads", "2", "--clients", "2", "--connections", "2", "--qps", "3000",
               "--warmup-requests", "200", "--requests", "4000", "--set", "service=fixed:50us",
               "-q", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_summary(&out);
    assert_eq!(s["requests"]["measured"], 4000);
    assert_eq!(s["requests"]["unfinished"], 0);
    assert_eq!(s["server"]["requests"], 4200, "{}", s["server"]);
    assert_eq!(s["server"]["connections"], 4);
    assert_eq!(s["server"]["dropped"], 0);
    // The server's service times are the app's: fixed 50 µs spins.
    let svc = p(&s, "service", "p50") as f64;
    assert!((svc / 50e3 - 1.0).abs() < 0.05, "service p50 {svc}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A loopback `null` run with kept requests; its summary and requests.csv rows.
fn stamped_run(name: &str, extra: &[&str]) -> (Value, Vec<Vec<u64>>) {
    let out = tmp(name);
    #[rustfmt::skip]
    let o = Command::new(bin())
        .args(["run", "--app", "null", "--config", "loopback", "--qps", "2000", "--requests", "3000",
               "--warmup-requests", "300", "--save-requests", "-q", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let rows = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    let s = read_summary(&out);
    let _ = std::fs::remove_dir_all(&out);
    (s, rows)
}

#[test]
fn kernel_stamps_are_monotone_per_request() {
    let _s = serial();
    let (s, rows) = stamped_run("kstamps", &[]);
    let st = &s["transport"]["stamps"];
    assert_eq!(st["completed"]["clock"], "kernel-software", "{st}");
    assert_eq!(st["enqueued"]["clock"], "kernel-software", "{st}");
    assert_eq!(s["latency_ns"]["recv_lag"]["count"], 3000);
    assert!(s["checks"]["client"]["verdict"]
        .as_str()
        .unwrap()
        .starts_with("recv lag"));
    // intended ≤ sent ≤ enqueued (kernel, at the server) ≤ enqueued_user ≤
    // started ≤ finished ≤ completed (kernel, at the client) ≤ completed_user.
    for r in &rows {
        let chain = [r[2], r[3], r[4], r[9], r[5], r[6], r[7], r[10]];
        assert!(chain.windows(2).all(|w| w[0] <= w[1]), "{r:?}");
    }
    // The user-space reads come after the kernel's arrivals: both lags are seen.
    let later = |a: usize, b: usize| rows.iter().filter(|r| r[a] > r[b]).count();
    assert!(
        later(10, 7) > rows.len() * 9 / 10,
        "recv lag: {}",
        later(10, 7)
    );
    assert!(
        later(9, 4) > rows.len() * 9 / 10,
        "server recv lag: {}",
        later(9, 4)
    );
}

#[test]
fn user_stamps_when_timestamping_is_off() {
    let _s = serial();
    let (s, rows) = stamped_run("ustamps", &["--stamps", "user"]);
    let st = &s["transport"]["stamps"];
    assert_eq!(st["completed"]["clock"], "user", "{st}");
    assert_eq!(st["enqueued"]["clock"], "user", "{st}");
    assert_eq!(st["fallback"], "net.stamps = user", "{st}");
    let c = &s["checks"]["client"];
    assert!(
        c["ok"].as_bool().unwrap() && c["verdict"].as_str().unwrap().contains("not measured"),
        "{c}"
    );
    assert_eq!(s["latency_ns"]["recv_lag"]["max"], 0);
    assert!(rows.iter().all(|r| r[7] == r[10] && r[4] == r[9]));
}

/// A server that answers request 5 twice, answers an id never sent, and
/// closes in the middle of its 61st response.
fn misbehaving_server() -> String {
    use taillab_transport::proto::{encode_response, pack_recv, parse, Kind};
    use taillab_transport::tstamp::StampClock;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let (mut buf, mut chunk, mut n) = (Vec::new(), [0u8; 4096], 0);
        let answer = |id: u64, out: &mut Vec<u8>| {
            encode_response(
                Kind::Response,
                id,
                10,
                20,
                pack_recv(StampClock::User, 0),
                b"x",
                out,
            )
        };
        loop {
            let k = s.read(&mut chunk).unwrap();
            buf.extend_from_slice(&chunk[..k]);
            while let Ok(Some(h)) = parse(&buf, 1 << 20, Kind::Request) {
                buf.drain(..h.frame_len());
                let mut out = Vec::new();
                answer(h.id, &mut out);
                if h.id == 5 {
                    answer(5, &mut out);
                    answer(1 << 40, &mut out);
                }
                n += 1;
                if n == 61 {
                    s.write_all(&out[..out.len() / 2]).unwrap();
                    return;
                }
                s.write_all(&out).unwrap();
            }
        }
    });
    addr
}

#[test]
fn bad_responses_are_counted_and_named() {
    let _s = serial();
    let out = tmp("bad-responses");
    let addr = misbehaving_server();
    #[rustfmt::skip]
    let o = load(&addr, &["--app", "null", "--qps", "1000", "--requests", "200", "--warmup-requests", "0",
                          "--save-requests"], &out);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = read_summary(&out);
    let b = &s["transport"]["bad_responses"];
    assert_eq!(
        (
            b["unknown_id"].as_u64(),
            b["duplicate"].as_u64(),
            b["truncated"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{b}"
    );
    let e = s["checks"]["errors"]["verdict"].as_str().unwrap();
    assert!(
        e.contains("never sent") && e.contains("duplicated") && e.contains("cut short"),
        "{e}"
    );
    // Only the 60 whole answers were recorded, none with a negative latency.
    assert_eq!(s["requests"]["measured"], 60);
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    for l in csv.lines().skip(1) {
        let r: Vec<u64> = l.split(',').map(|x| x.parse().unwrap()).collect();
        assert!(r[2] <= r[3] && r[3] <= r[7] && r[7] <= r[10], "{r:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
}

// ---- real external servers -------------------------------------------------

fn external_load(app: &str, port: u16, sets: &[&str]) -> Value {
    let out = tmp(&format!("ext-{app}"));
    let addr = format!("127.0.0.1:{port}");
    let mut args = vec![
        "--app",
        app,
        "--qps",
        "2000",
        "--warmup-requests",
        "200",
        "--requests",
        "2000",
        "--connections",
        "2",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    let o = load(&addr, &args, &out);
    assert!(
        o.status.success(),
        "{app}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = read_summary(&out);
    let _ = std::fs::remove_dir_all(&out);
    assert_eq!(s["requests"]["measured"], 2000, "{app}");
    assert_eq!(s["requests"]["errors"], 0, "{app}: {}", s["first_error"]);
    assert_eq!(s["transport"]["server_timed"], false);
    // Sojourn is all an external server lets us see; it must be real time.
    assert!(
        p(&s, "sojourn", "p50") > 1000,
        "{app}: p50 below 1 µs is not a TCP round trip"
    );
    assert_eq!(p(&s, "service", "max"), 0);
    // `load` watched the host, and found the server listening on the target
    // port: its CPU is the experiment's, listed apart, not foreign.
    assert!(
        s["checks"]["environment"]["ok"].is_boolean(),
        "{app}: {}",
        s["checks"]
    );
    let extra = s["environment"]["extra"]
        .as_array()
        .expect("environment.extra");
    assert!(!extra.is_empty(), "{app}: the local server was not found");
    s
}

#[test]
fn memcached_real_server() {
    let _s = serial();
    let (_m, addr) = memcached();
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    external_load(
        "memcached",
        port,
        &["keys=1000", "value_size=100", "get_ratio=0.9"],
    );
}

#[test]
fn redis_real_server() {
    let _s = serial();
    let port = free_port();
    let dir = tmp("redis");
    std::fs::create_dir_all(&dir).unwrap();
    let _r = Kid(Command::new(need("redis-server"))
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
        ])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    wait_port(port);
    external_load("redis", port, &["keys=1000", "zipf=0.99"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nginx_real_server() {
    let _s = serial();
    let dir = tmp("nginx");
    let (_n, port) = nginx(&dir, "", "");
    external_load("http", port, &["path=/index.html"]);
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- networked: two network namespaces joined by a veth pair -------------

/// Deletes the namespaces when dropped — also when an assertion failed.
struct Netns(Vec<String>);
impl Drop for Netns {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = Command::new("ip").args(["netns", "del", n]).status();
        }
    }
}

fn ip(args: &[&str]) {
    let o = Command::new("ip").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Two network namespaces joined by a veth pair: the server side 10.231.0.1, the client
/// side 10.231.0.2; `None` (a skip said) without root.
fn veth_pair() -> Option<(Netns, String, String)> {
    // Creating namespaces needs CAP_SYS_ADMIN; say so instead of failing obscurely.
    if unsafe { libc::geteuid() } != 0 {
        skip_without(
            "netns",
            "creating network namespaces needs root (ip netns add)",
        );
        return None;
    }
    let tag = format!(
        "{}{}",
        std::process::id() % 100_000,
        Instant::now().elapsed().subsec_nanos() % 1000
    );
    let (ns_s, ns_c) = (format!("tlsrv{tag}"), format!("tlcli{tag}"));
    let guard = Netns(vec![ns_s.clone(), ns_c.clone()]);
    let (va, vb) = (format!("tva{tag}"), format!("tvb{tag}"));
    ip(&["netns", "add", &ns_s]);
    ip(&["netns", "add", &ns_c]);
    ip(&["link", "add", &va, "type", "veth", "peer", "name", &vb]);
    ip(&["link", "set", &va, "netns", &ns_s]);
    ip(&["link", "set", &vb, "netns", &ns_c]);
    ip(&["-n", &ns_s, "addr", "add", "10.231.0.1/24", "dev", &va]);
    ip(&["-n", &ns_c, "addr", "add", "10.231.0.2/24", "dev", &vb]);
    for (ns, dev) in [(&ns_s, &va), (&ns_c, &vb)] {
        ip(&["-n", ns, "link", "set", dev, "up"]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
    }
    Some((guard, ns_s, ns_c))
}

/// `taillab run --app null --config networked ARGS` with the server in `ns_s` (listening on
/// the veth's 10.231.0.1) and the clients in `ns_c`.
fn run_across(
    ns_s: &str,
    ns_c: &str,
    args: &[&str],
    out: &std::path::Path,
) -> std::process::Output {
    Command::new(bin())
        .args(["run", "--app", "null", "--config", "networked", "-q"])
        .args(args)
        .args(["--listen", "10.231.0.1:0"])
        .args([
            "--server-launcher",
            &format!("ip netns exec {ns_s} {{cmd}}"),
        ])
        .args([
            "--client-launcher",
            &format!("ip netns exec {ns_c} {{cmd}}"),
        ])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn networked_over_netns_veth() {
    let _s = serial();
    let Some((_guard, ns_s, ns_c)) = veth_pair() else {
        return;
    };
    let out = tmp("netns");
    #[rustfmt::skip]
    let o = run_across(&ns_s, &ns_c, &[
        "--clients", "2", "--connections", "2",
        "--qps", "1500", "--warmup-requests", "100", "--requests", "2001",
    ], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_summary(&out);
    assert_eq!(s["config"], "networked");
    assert!(s["transport"]["target"]
        .as_str()
        .unwrap()
        .starts_with("10.231.0.1:"));
    let per = s["transport"]["per_client"].as_array().unwrap();
    let sum: u64 = per.iter().map(|c| c["measured"].as_u64().unwrap()).sum();
    assert_eq!(sum, s["requests"]["measured"].as_u64().unwrap());
    assert_eq!(sum, 2001);
    let mut h = decode(per[0]["sojourn_hist"].as_str().unwrap());
    h.add(decode(per[1]["sojourn_hist"].as_str().unwrap()))
        .unwrap();
    assert_eq!(p(&s, "sojourn", "p99"), h.value_at_quantile(0.99));
    assert_eq!(p(&s, "sojourn", "p50"), h.value_at_quantile(0.5));
    let _ = std::fs::remove_dir_all(&out);
}

/// A networked fan-out: two leaf servers in one namespace, their clients in another,
/// every sub-request over the veth pair; the whole request is the slower of its two answers.
#[test]
fn networked_fanout_over_netns_veth() {
    let _s = serial();
    let Some((_guard, ns_s, ns_c)) = veth_pair() else {
        return;
    };
    let out = tmp("netns-fanout");
    #[rustfmt::skip]
    let o = run_across(&ns_s, &ns_c, &[
        "--fanout", "2", "--qps", "1000", "--warmup-requests", "100", "--requests", "1500",
    ], &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_summary(&out);
    let targets: Vec<&str> = s["transport"]["target"]
        .as_str()
        .unwrap()
        .split(',')
        .collect();
    assert_eq!(targets.len(), 2, "{targets:?}");
    assert!(targets.iter().all(|t| t.starts_with("10.231.0.1:")));
    assert_ne!(targets[0], targets[1], "two servers");
    assert_eq!(s["fanout"]["leaves"], 2);
    assert_eq!(s["requests"]["measured"], 1500);
    let (e2e, leaf) = (
        s["fanout"]["measured"]["e2e"]["p50"].as_f64().unwrap(),
        s["fanout"]["measured"]["leaf"]["p50"].as_f64().unwrap(),
    );
    assert!(
        e2e >= leaf,
        "the slower of two answers: p50 {e2e} vs a leaf's {leaf}"
    );
    let _ = std::fs::remove_dir_all(&out);
}
