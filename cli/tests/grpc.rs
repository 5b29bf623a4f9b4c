//! gRPC and HTTP/2 on the load side, against real servers: Python grpcio's
//! server (transport/grpc/echo_server.py; grpcio from transport/pip.txt,
//! installed by `make setup`) and nginx's HTTP/2, cleartext and TLS.
//!
//! What is asserted exactly are counts, statuses and failure behaviour;
//! timings only where a deliberately slow method must show (20 ms against a
//! loopback round trip of tens of µs, with bounds a noisy VM cannot cross).

use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;
use common::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// The project's Python (`make setup` puts grpcio in it).
fn python() -> PathBuf {
    std::env::var_os("TAILLAB_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".venv/bin/python"))
}

/// The echo server, stopped (and its service times read) by [`Echo::stop`].
struct Echo {
    kid: Kid,
    port: u16,
    stats: PathBuf,
}

fn echo_server(args: &[&str]) -> Echo {
    let stats = tmp(&format!("grpc-stats-{}", args.join("-").replace('/', "")));
    let mut c = Command::new(python())
        .arg(repo().join("transport/grpc/echo_server.py"))
        .args(["--port", "0", "--stats"])
        .arg(&stats)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}; run `make setup`", python().display()));
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let Some(port) = line
        .trim()
        .strip_prefix("listening ")
        .and_then(|p| p.parse().ok())
    else {
        let _ = c.kill();
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(&mut c.stderr.take().unwrap(), &mut err);
        panic!("the gRPC echo server did not start (is grpcio installed? run `make setup`): {err}");
    };
    Echo {
        kid: Kid(c),
        port,
        stats,
    }
}

impl Echo {
    fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
    /// SIGTERM, then the server's own service times by method.
    fn stop(mut self) -> Value {
        // SAFETY: a plain signal to our own child.
        unsafe { libc::kill(self.kid.0.id() as i32, libc::SIGTERM) };
        let _ = self.kid.0.wait();
        let v = json(&self.stats);
        let _ = std::fs::remove_file(&self.stats);
        v
    }
}

/// `taillab load --app APP --target TARGET ARGS --out OUT -q`.
fn load(app: &str, target: &str, args: &[&str], out: &Path) -> std::process::Output {
    Command::new(bin())
        .args(["load", "--app", app, "--target", target, "-q", "--out"])
        .arg(out)
        .args(args)
        .output()
        .unwrap()
}

/// A load that must succeed; its summary.
fn load_ok(app: &str, target: &str, args: &[&str]) -> Value {
    let out = tmp(&format!("{app}-load"));
    let o = load(app, target, args, &out);
    assert!(
        o.status.success(),
        "{app} {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let s = read_summary(&out);
    let _ = std::fs::remove_dir_all(&out);
    s
}

fn p(s: &Value, metric: &str, k: &str) -> u64 {
    s["latency_ns"][metric][k].as_u64().unwrap()
}

/// A serialized `taillab.Payload { data: "hello" }` in a file.
fn request_file() -> PathBuf {
    let f = tmp("grpc-request.bin");
    std::fs::write(&f, b"\x0a\x05hello").unwrap();
    f
}

fn calls(method: &str, req: &Path, qps: &str, warmup: &str, n: &str) -> Vec<String> {
    [
        "--set",
        &format!("method=/taillab.Echo/{method}"),
        "--set",
        &format!("request={}", req.display()),
        "--qps",
        qps,
        "--warmup-requests",
        warmup,
        "--requests",
        n,
        "--connections",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

#[test]
fn grpc_unary_calls_and_a_slow_method_in_the_sojourn() {
    let _s = serial();
    let req = request_file();
    let srv = echo_server(&["--slow", "20"]);
    let fast = load_ok(
        "grpc",
        &srv.target(),
        &strs(&calls("Echo", &req, "400", "100", "800")),
    );
    assert_eq!(fast["requests"]["measured"], 800);
    assert_eq!(fast["requests"]["errors"], 0, "{}", fast["first_error"]);
    let t = &fast["transport"];
    assert_eq!(t["statuses"], serde_json::json!({"OK": 900}), "{t}");
    assert_eq!(t["server_timed"], false);
    // Loopback sockets give kernel receive stamps; the HTTP/2 thread's reads carry them.
    assert!(
        t["stamps"]["completed"]["kernel_software"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        t["stamps"]
    );
    assert!(p(&fast, "sojourn", "p50") > 1000, "not a round trip");
    let slow = load_ok(
        "grpc",
        &srv.target(),
        &strs(&calls("Slow", &req, "20", "5", "60")),
    );
    assert_eq!(slow["requests"]["errors"], 0, "{}", slow["first_error"]);
    let own = srv.stop();
    let own_slow = own["Slow"]["p50_ns"].as_u64().unwrap();
    assert!(own_slow >= 20_000_000, "the server's Slow: {own}");
    assert_eq!(own["Echo"]["count"], 900, "{own}");
    // The slow method's service time is in its sojourn, and it is what sets it apart.
    let (s50, f50) = (p(&slow, "sojourn", "p50"), p(&fast, "sojourn", "p50"));
    assert!(
        s50 >= own_slow,
        "sojourn p50 {s50} below the server's own {own_slow}"
    );
    assert!(
        s50 - f50.min(s50) >= own_slow * 9 / 10 && s50 < own_slow + 50_000_000,
        "slow p50 {s50}, fast p50 {f50}, the server's Slow p50 {own_slow}"
    );
    let _ = std::fs::remove_file(&req);
}

#[test]
fn grpc_failures_are_counted_by_status() {
    let _s = serial();
    let req = request_file();
    let srv = echo_server(&["--fail-code", "RESOURCE_EXHAUSTED"]);
    let s = load_ok(
        "grpc",
        &srv.target(),
        &strs(&calls("Fail", &req, "200", "0", "100")),
    );
    assert_eq!(s["requests"]["errors"], 100);
    assert_eq!(
        s["transport"]["statuses"],
        serde_json::json!({"RESOURCE_EXHAUSTED": 100})
    );
    let first = s["first_error"].as_str().unwrap();
    assert!(first.contains("RESOURCE_EXHAUSTED (8)"), "{first}");
    assert_eq!(s["checks"]["errors"]["ok"], false);
    // A method the server does not have: gRPC's own answer, counted the same way.
    let s = load_ok(
        "grpc",
        &srv.target(),
        &strs(&calls("Nope", &req, "200", "0", "50")),
    );
    assert_eq!(
        s["transport"]["statuses"],
        serde_json::json!({"UNIMPLEMENTED": 50})
    );
    srv.stop();
    let _ = std::fs::remove_file(&req);
}

/// A load that must fail with exit status 2 and one `error:` line containing every `want`.
fn refused(app: &str, target: &str, args: &[&str], want: &[&str]) -> PathBuf {
    let out = tmp(&format!("refused-{app}"));
    let o = load(app, target, args, &out);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
    let lines: Vec<&str> = e.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(lines.len(), 1, "{args:?}: {e}");
    assert!(
        want.iter().all(|w| lines[0].contains(w)),
        "{args:?}: {}",
        lines[0]
    );
    out
}

#[test]
fn grpc_bad_input_gets_one_clear_line() {
    let _s = serial();
    let req = request_file();
    let base = ["--qps", "100", "--requests", "50"];
    let with = |sets: &[String]| -> Vec<String> {
        let mut v: Vec<String> = base.iter().map(|s| s.to_string()).collect();
        for s in sets {
            v.extend(["--set".to_string(), s.clone()]);
        }
        v
    };
    let method = "method=/taillab.Echo/Echo".to_string();
    let request = format!("request={}", req.display());
    // Refused before anything connects.
    let cases: [(Vec<String>, &[&str]); 3] = [
        (
            with(&["method=taillab.Echo/Echo".into(), request.clone()]),
            &["method", "start with `/`"],
        ),
        (
            with(&[method.clone(), "request=/nonexistent/req.bin".into()]),
            &["/nonexistent/req.bin", "No such file"],
        ),
        (
            with(std::slice::from_ref(&request)),
            &["method", "/package.Service/Method"],
        ),
    ];
    for (args, want) in &cases {
        refused("grpc", "127.0.0.1:1", &strs(args), want);
    }
    let args = with(&[method, request]);
    // A server that speaks HTTP/1 only.
    let dir = tmp("grpc-nginx1");
    let (_n, port) = nginx(&dir, "", "");
    refused(
        "grpc",
        &format!("127.0.0.1:{port}"),
        &strs(&args),
        &["HTTP/1 only"],
    );
    // An HTTP/2 server that is not gRPC: the run stops at its first answer,
    // and keeps (and marks) what it measured.
    let dir2 = tmp("grpc-nginx2");
    let (_n2, port2) = nginx(&dir2, "http2", "");
    let out = refused(
        "grpc",
        &format!("127.0.0.1:{port2}"),
        &strs(&args),
        &["not a gRPC response", "keeping the requests measured"],
    );
    let s = read_summary(&out);
    let why = s["incomplete"].as_str().unwrap_or_default();
    assert!(why.contains("not a gRPC response"), "{}", s["incomplete"]);
    for d in [dir, dir2, out] {
        let _ = std::fs::remove_dir_all(d);
    }
    let _ = std::fs::remove_file(&req);
}

/// A gRPC server that answers HTTP/2 PINGs but no call (its Slow method sleeps past the run):
/// one error line naming it, not a run of no requests that exits 0.
#[test]
fn a_grpc_server_that_never_answers_is_an_error() {
    let _s = serial();
    let req = request_file();
    let srv = echo_server(&["--slow", "600000"]);
    let target = srv.target();
    let out = refused(
        "grpc",
        &target,
        &strs(&calls("Slow", &req, "50", "0", "50")),
        &[
            &format!("{target} did not answer"),
            "50 requests outstanding",
            "dead or hung",
        ],
    );
    let s = read_summary(&out);
    assert_eq!(s["requests"]["measured"], 0);
    assert!(
        s["incomplete"]
            .as_str()
            .unwrap_or_default()
            .contains("did not answer"),
        "{}",
        s["incomplete"]
    );
    drop(srv);
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&req);
}

/// `taillab run --topology loopback --target HOST:PORT` drives an external gRPC server through
/// the coordinator (docs/protocol.md): two clients' calls, merged into one run.
#[test]
fn a_loopback_run_drives_an_external_grpc_server() {
    let _s = serial();
    let req = request_file();
    let srv = echo_server(&[]);
    let out = tmp("grpc-loopback");
    let target = srv.target();
    let mut args: Vec<String> = [
        "run",
        "--app",
        "grpc",
        "--topology",
        "loopback",
        "--clients",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(["--target".into(), target, "-q".into()]);
    args.extend(calls("Echo", &req, "400", "50", "400"));
    let o = Command::new(bin())
        .args(&args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = read_summary(&out);
    assert_eq!(s["config"], "loopback");
    assert_eq!(s["transport"]["clients"], 2);
    assert_eq!(s["requests"]["measured"], 400);
    assert_eq!(s["requests"]["errors"], 0, "{}", s["first_error"]);
    assert!(p(&s, "sojourn", "p50") > 1000, "not a round trip");
    // The server answered every call the clients sent, warmup included.
    let own = srv.stop();
    assert_eq!(own["Echo"]["count"], 450, "{own}");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_file(&req);
}

fn openssl(dir: &Path, args: &[&str]) {
    let o = Command::new(need("openssl"))
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A test CA, and a certificate for localhost and 127.0.0.1 it signed with its key, in `dir`:
/// (CA, certificate, key).
fn test_pki(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=taillab test CA"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem"]);
    openssl(dir, &ca);
    let mut csr = vec![
        "req",
        "-subj",
        "/CN=localhost",
        "-keyout",
        "key.pem",
        "-out",
        "leaf.csr",
    ];
    csr.extend(ec);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext",
            "-out",
            "cert.pem",
        ],
    );
    (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    )
}

#[test]
fn http2_against_nginx_cleartext_and_tls() {
    let _s = serial();
    let run = [
        "--qps",
        "1000",
        "--warmup-requests",
        "100",
        "--requests",
        "1000",
    ];
    let dir = tmp("h2-nginx");
    let (_n, port) = nginx(&dir, "http2", "");
    let mut args: Vec<&str> = run.to_vec();
    args.extend([
        "--connections",
        "2",
        "--set",
        "path=/index.html",
        "--set",
        "version=2",
    ]);
    let s = load_ok("http", &format!("127.0.0.1:{port}"), &args);
    assert_eq!(s["requests"]["measured"], 1000);
    assert_eq!(s["requests"]["errors"], 0, "{}", s["first_error"]);
    assert_eq!(s["transport"]["statuses"], serde_json::json!({"200": 1100}));
    // TLS with ALPN h2, trusting the test's own CA.
    let (ca_pem, cert, key) = test_pki(&dir.join("tls"));
    let dir_tls = tmp("h2-nginx-tls");
    let conf = format!(
        "ssl_certificate {}; ssl_certificate_key {};",
        cert.display(),
        key.display()
    );
    let (_t, tport) = nginx(&dir_tls, "ssl http2", &conf);
    let ca = format!("ca={}", ca_pem.display());
    let mut args: Vec<&str> = run.to_vec();
    args.extend(["--set", "version=2", "--set", "tls=true", "--set", &ca]);
    args.extend(["--set", "path=/index.html"]);
    let s = load_ok("http", &format!("127.0.0.1:{tport}"), &args);
    assert_eq!(s["requests"]["errors"], 0, "{}", s["first_error"]);
    assert_eq!(s["transport"]["statuses"], serde_json::json!({"200": 1100}));
    // gRPC over TLS to grpcio, with the same certificate.
    let srv = echo_server(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let req = request_file();
    let mut args = calls("Echo", &req, "300", "50", "300");
    args.extend([
        "--set".into(),
        "tls=true".into(),
        "--set".into(),
        ca.clone(),
    ]);
    let s = load_ok("grpc", &srv.target(), &strs(&args));
    assert_eq!(s["transport"]["statuses"], serde_json::json!({"OK": 350}));
    srv.stop();
    for d in [dir, dir_tls] {
        let _ = std::fs::remove_dir_all(d);
    }
    let _ = std::fs::remove_file(&req);
}
