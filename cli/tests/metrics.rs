//! Bad input to `--metrics-listen` and `--record-format`: one clear line and exit 2 each,
//! before the run measures anything (no summary.json). The endpoint itself is scraped by
//! python/tests/test_live_metrics.py with prometheus_client's parser.

mod common;

use common::bin;
use std::process::Command;

/// Runs `taillab ARGS --out DIR`: (exit code, stderr, whether a summary was written).
fn taillab(args: &[&str], name: &str) -> (i32, String, bool) {
    let out = std::env::temp_dir().join(format!("taillab-metrics-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = Command::new(bin())
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .expect("taillab runs");
    let wrote = out.join("summary.json").exists();
    let _ = std::fs::remove_dir_all(&out);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        wrote,
    )
}

const RUN: &[&str] = &[
    "run",
    "--app",
    "synth",
    "--qps",
    "500",
    "--requests",
    "200",
    "-q",
];

fn refused(extra: &[&str], name: &str, want: &str) {
    let args: Vec<&str> = RUN.iter().chain(extra).copied().collect();
    let (code, err, wrote) = taillab(&args, name);
    assert_eq!(code, 2, "{name}: {err}");
    assert!(!wrote, "{name}: a refused run wrote a summary");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{name}: one line, got {err:?}");
    assert!(lines[0].contains(want), "{name}: {err}");
}

#[test]
fn a_port_in_use_is_one_line_before_the_run() {
    let held = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    refused(
        &["--metrics-listen", &addr],
        "in-use",
        "cannot listen there",
    );
    // A loopback run's clients would listen there: refused before the server starts.
    refused(
        &["--metrics-listen", &addr, "--topology", "loopback"],
        "in-use-loopback",
        "cannot listen there",
    );
    // A fan-out's second leaf's client would listen on the port after a free one.
    let port = held.local_addr().unwrap().port();
    if std::net::TcpListener::bind(("127.0.0.1", port - 1)).is_ok() {
        let first = format!("127.0.0.1:{}", port - 1);
        #[rustfmt::skip]
        refused(
            &["--metrics-listen", &first, "--topology", "loopback", "--fanout", "2",
              "--set", "spin=sleep"],
            "in-use-leaf",
            &format!("{addr}: cannot listen there"),
        );
    }
}

#[test]
fn an_address_that_is_not_loopback_or_not_an_address_is_one_line() {
    refused(
        &["--metrics-listen", "0.0.0.0:9464"],
        "public",
        "--metrics-public",
    );
    refused(
        &["--metrics-listen", "metrics.example:9464"],
        "name",
        "is not IP:PORT",
    );
    refused(
        &["--metrics-listen", "127.0.0.1"],
        "no-port",
        "is not IP:PORT",
    );
}

#[test]
fn an_unknown_record_format_is_one_line() {
    refused(
        &["--save-requests", "--record-format", "xml"],
        "format",
        "(expected csv or parquet)",
    );
}

#[test]
fn a_run_with_metrics_off_starts_no_endpoint() {
    let args: Vec<&str> = RUN.to_vec();
    let (code, err, wrote) = taillab(&args, "off");
    assert_eq!(code, 0, "{err}");
    assert!(wrote && !err.contains("metrics:"), "{err}");
}
