//! Helpers shared by the integration tests of the real binary.
#![allow(dead_code)] // each test binary uses its own subset

use serde_json::Value;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[path = "../../../tests/require.rs"]
mod require;
#[allow(unused_imports)] // each test binary uses its own subset
pub use require::{accuracy_outcome, skip_without, within_tries};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Serialises timing-sensitive tests within one test binary (a failed one
/// does not poison the others).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_taillab")
}

/// A fresh (removed) path in the temp folder, unique to this test process.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("taillab-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

pub fn json(p: &Path) -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub fn read_summary(dir: &Path) -> Value {
    json(&dir.join("summary.json"))
}

/// `taillab run ARGS --out OUT -q` with extra environment; fails the test
/// with the binary's stderr unless it succeeded; returns summary.json.
pub fn run_env(args: &[&str], out: &Path, env: &[(&str, &Path)]) -> Value {
    let mut c = Command::new(bin());
    c.arg("run").args(args).arg("--out").arg(out).arg("-q");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "taillab run failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    read_summary(out)
}

pub fn run(args: &[&str], out: &Path) -> Value {
    run_env(args, out, &[])
}

/// Why a run's environment check blames the host (hypervisor steal, other
/// processes' CPU), if it does. Preemption of a worker by the experiment's
/// own threads is not the host's doing and is not counted.
pub fn host_disturbed(s: &Value) -> Option<String> {
    let items = s["checks"]["environment"]["items"].as_array()?;
    let v: Vec<String> = items
        .iter()
        .filter(|i| i["ok"] == false && (i["name"] == "steal" || i["name"] == "foreign_cpu"))
        .map(|i| {
            format!(
                "{} {:.1} {} (limit {})",
                i["name"].as_str().unwrap_or("?"),
                i["value"].as_f64().unwrap_or(0.0),
                i["unit"].as_str().unwrap_or(""),
                i["limit"]
            )
        })
        .collect();
    (!v.is_empty()).then(|| v.join(", "))
}

/// Each true (weight, mean ns, cv) is the mode made of the fitted components whose means
/// lie within two of its log-sds (a mode of cv 0.15 spans ×0.74–×1.35; the modes here
/// are 5× or more apart). The mode's weight (their sum) must be within ±0.03 and its
/// mean (their weighted mean) within 5 %. BIC may split one measured mode into near
/// components when the host stretches some of its services (a slow CI machine did:
/// 30 µs came out as 26 + 31.5 + 36 µs, 0.61 in all); that is the same mode, and its
/// weight and mean are what the fit must get right. Components in no mode (a disturbed
/// host's slow requests) may hold 0.03 of the weight in all.
pub fn check_components(f: &Value, truth: &[(f64, f64, f64)]) -> Result<(), String> {
    let comps: Vec<(f64, f64)> = f["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["weight"].as_f64().unwrap(),
                c["mean_ns"].as_f64().unwrap(),
            )
        })
        .collect();
    let mut used = vec![false; comps.len()];
    for &(w, m, cv) in truth {
        let reach = 2.0 * (1.0 + cv * cv).ln().sqrt();
        let (mut fw, mut sum) = (0.0, 0.0);
        for (i, &(cw, cm)) in comps.iter().enumerate() {
            if !used[i] && (cm / m).ln().abs() < reach {
                used[i] = true;
                fw += cw;
                sum += cw * cm;
            }
        }
        let fm = if fw > 0.0 { sum / fw } else { 0.0 };
        if (fw - w).abs() > 0.03 || (fm / m - 1.0).abs() > 0.05 {
            return Err(format!(
                "mode ({w}, {m} ns) fitted as ({fw:.4}, {fm:.0} ns); fit {comps:?}"
            ));
        }
    }
    let extra: f64 = comps
        .iter()
        .zip(&used)
        .filter(|(_, u)| !**u)
        .map(|(c, _)| c.0)
        .sum();
    if extra > 0.03 {
        return Err(format!("components in no mode hold {extra:.3}: {comps:?}"));
    }
    Ok(())
}

/// A child killed (by its pid) when the test ends, pass or fail.
pub struct Kid(pub Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `taillab serve ARGS` on a kernel-chosen loopback port; returns it and its address.
pub fn serve(args: &[&str]) -> (Kid, String) {
    let mut c = Command::new(bin())
        .arg("serve")
        .args(args)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| panic!("serve printed {line:?}"))
        .to_string();
    (Kid(c), addr)
}

/// `taillab report DIR --out DIR/report` (it must succeed); the report's index.html.
pub fn report_html(dir: &Path) -> String {
    let o = Command::new(bin())
        .arg("report")
        .arg(dir)
        .arg("--out")
        .arg(dir.join("report"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(dir.join("report/index.html")).unwrap()
}

// ---- real external servers -------------------------------------------------

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// An installed program's path; fails the test, naming `make setup`, when it is missing.
pub fn need(prog: &str) -> PathBuf {
    for d in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"] {
        let p = Path::new(d).join(prog);
        if p.exists() {
            return p;
        }
    }
    panic!("{prog} is not installed: run `make setup` (transport/apt.txt lists it)");
}

pub fn wait_port(port: u16) {
    let t = std::time::Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "server on port {port} did not come up"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Starts nginx (its own config, pid, temp and log paths under `dir`) serving a 612-byte
/// `/index.html` on 127.0.0.1 on a free port, with `listen` options (`http2`, `ssl http2`)
/// and `server` directives; returns it and the port once it accepts connections.
pub fn nginx(dir: &Path, listen: &str, server: &str) -> (Kid, u16) {
    let port = free_port();
    std::fs::create_dir_all(dir.join("html")).unwrap();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(dir.join("html/index.html"), "x".repeat(612)).unwrap();
    let conf = format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log;\n\
         events {{ worker_connections 256; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/tmp_body;\n  proxy_temp_path {d}/tmp_proxy;\n\
           fastcgi_temp_path {d}/tmp_fcgi;\n  uwsgi_temp_path {d}/tmp_uwsgi;\n  scgi_temp_path {d}/tmp_scgi;\n\
           keepalive_requests 1000000;\n  keepalive_timeout 300s;\n\
           server {{ listen 127.0.0.1:{port} {listen}; root {d}/html; {server} }}\n}}\n",
        d = dir.display()
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let kid = Kid(Command::new(need("nginx"))
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .arg("-e")
        .arg(dir.join("logs/error.log"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    wait_port(port);
    (kid, port)
}

/// A memcached from Debian (`-t 1`, 64 MiB) on a free loopback port, and its `HOST:PORT`;
/// stopped when the `Kid` drops.
pub fn memcached() -> (Kid, String) {
    let port = free_port();
    let kid = Kid(Command::new(need("memcached"))
        .args([
            "-l",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-U",
            "0",
            "-t",
            "1",
            "-m",
            "64",
            "-u",
            "root",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    wait_port(port);
    (kid, format!("127.0.0.1:{port}"))
}
