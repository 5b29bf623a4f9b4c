//! `--metrics-listen HOST:PORT`: a run's live numbers as OpenMetrics text, served over HTTP
//! while it runs (`GET /metrics`), for a Prometheus scrape or `curl`.
//!
//! What it serves comes from the progress reports the run's main thread makes every 20 ms
//! ([`Progress`]): requests completed, requests in flight, the phase, and each phase's last
//! interval that every thread has finished: its request count and each metric's p50, p99 and
//! max. The measured phase's are taken from the very histograms that become that interval's
//! line of `hist/*.hlog`, so a scrape and the interval log agree for the same second; the
//! warmup's from histograms the run keeps for this endpoint alone. The host's steal is read
//! from `/proc/stat` by the endpoint's own thread, once a second; other processes' CPU comes
//! from the environment sampler of the run (integrated), of the `taillab load`, or of a
//! loopback run's coordinator, which relays it to its clients. Off (the default) none of this
//! exists: no thread, no socket, and the run computes no interval quantiles.
//!
//! The endpoint listens on loopback unless `monitor.metrics_public` says otherwise: a run's
//! numbers, app and settings are nobody else's business by default.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taillab_core::collector::{LiveInterval, METRICS};
use taillab_core::config::RunConfig;
use taillab_core::harness::Progress;

/// What a scrape shows: the run's settings and its latest progress report.
#[derive(Debug, Clone, Default)]
struct State {
    /// Label pairs of `taillab_run_info`.
    info: Vec<(&'static str, String)>,
    /// The offered rate (requests/s).
    offered: f64,
    /// Length of one interval (s).
    interval_s: f64,
    /// Steal (fraction of one CPU) above which the environment check fails a run.
    steal_limit: f64,
    /// The latest progress report.
    progress: Option<Progress>,
    /// The host's steal over the last second (fraction of one CPU).
    steal: Option<f64>,
    /// Other processes' CPU over the last second, from the run's environment sampler.
    foreign: Option<taillab_monitor::LiveForeign>,
    /// % of one CPU of other processes above which the environment check fails a run.
    foreign_limit: f64,
}

/// The endpoint: a thread answering scrapes until dropped.
pub struct MetricsServer {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The address `cfg.monitor.metrics_listen` names (client `i` of a loopback or networked run
/// gets the port plus `i`), or `None` when it names none. The configuration's `validate`
/// has checked it already; this resolves it.
pub fn address(cfg: &RunConfig, client: usize) -> anyhow::Result<Option<SocketAddr>> {
    let Some(text) = cfg.monitor.metrics_listen.as_deref() else {
        return Ok(None);
    };
    let mut a = taillab_core::config::metrics_address(text, cfg.monitor.metrics_public)
        .map_err(|e| anyhow::anyhow!(e))?;
    if a.port() != 0 {
        a.set_port(a.port() + client as u16);
    }
    Ok(Some(a))
}

/// The topology `taillab_run_info` names: the run's; a `taillab load`'s (a coordinator's client
/// or one of its own) is its summary's label: what the coordinator says, else where its target is.
fn topology(cfg: &RunConfig) -> String {
    match (&cfg.net.target, &cfg.net.label) {
        (Some(_), Some(l)) => l.clone(),
        (Some(t), None) => taillab_transport::load::default_label(t).to_string(),
        (None, _) => cfg.net.topology.name().to_string(),
    }
}

/// Binds every address the clients of a loopback run (one per leaf of a fan-out) will listen
/// on, and lets go of them: a port in use is said here, before the server starts, instead of
/// by a client later.
pub fn check_free(cfg: &RunConfig) -> anyhow::Result<()> {
    for i in 0..taillab_transport::fanout::clients(cfg) {
        if let Some(a) = address(cfg, i)? {
            bind(a)?;
        }
    }
    Ok(())
}

fn bind(a: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(a).map_err(|e| {
        anyhow::anyhow!("--metrics-listen {a}: cannot listen there ({e}); give a free port")
    })
}

impl MetricsServer {
    /// Binds `addr` and starts answering scrapes; says where on stderr.
    pub fn start(cfg: &RunConfig, addr: SocketAddr) -> anyhow::Result<MetricsServer> {
        let listener = bind(addr)?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let h = &cfg.harness;
        let state = State {
            info: vec![
                ("app", cfg.app_name().unwrap_or("?").to_string()),
                ("topology", topology(cfg)),
                ("threads", h.threads.to_string()),
                ("wait", h.wait.to_string()),
                (
                    "monitor",
                    if cfg.monitor.enabled { "on" } else { "off" }.to_string(),
                ),
            ],
            offered: cfg.load.qps.unwrap_or(0.0),
            interval_s: cfg.record.interval.0 as f64 / 1e9,
            steal_limit: cfg.monitor.max_steal / 100.0,
            foreign_limit: cfg.monitor.max_foreign,
            ..State::default()
        };
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("taillab-metrics".into())
            .spawn(move || serve(listener, &st, &sp))?;
        let public = if addr.ip().is_loopback() {
            ""
        } else {
            " (not loopback: monitor.metrics_public)"
        };
        eprintln!("metrics: http://{addr}/metrics{public}");
        Ok(MetricsServer {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// Serves the foreign-CPU flag from the run's environment sampler.
    pub fn watch_foreign(&self, f: taillab_monitor::LiveForeign) {
        self.foreign_slot().watch(f);
    }

    /// Where a sampler that starts later, out of reach of the caller (a `taillab load`'s
    /// environment observer), hands over its foreign-CPU handle.
    pub fn foreign_slot(&self) -> ForeignSlot {
        ForeignSlot(self.state.clone())
    }

    /// Takes a progress report (from the run's main thread).
    pub fn update(&self, p: &Progress) {
        if let Ok(mut s) = self.state.lock() {
            s.progress = Some(*p);
        }
    }
}

/// An endpoint's place for the foreign-CPU handle ([`MetricsServer::foreign_slot`]).
#[derive(Clone)]
pub struct ForeignSlot(Arc<Mutex<State>>);

impl ForeignSlot {
    /// Serves the foreign-CPU flag from `f` from now on.
    pub fn watch(&self, f: taillab_monitor::LiveForeign) {
        if let Ok(mut s) = self.0.lock() {
            s.foreign = Some(f);
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The endpoint's thread: answers scrapes one at a time and samples steal once a second.
fn serve(listener: TcpListener, state: &Mutex<State>, stop: &AtomicBool) {
    let mut steal = Steal::default();
    let mut next_sample = Instant::now();
    while !stop.load(Ordering::Acquire) {
        if Instant::now() >= next_sample {
            let s = steal.sample();
            if let Ok(mut st) = state.lock() {
                st.steal = s.or(st.steal);
            }
            next_sample += Duration::from_secs(1);
        }
        match listener.accept() {
            Ok((sock, _)) => {
                let body = state.lock().map(|s| render(&s)).unwrap_or_default();
                let _ = answer(sock, &body);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// Reads one request and answers it: the metrics for `GET /metrics` (or `/`), 404 for any
/// other path, 405 for any other method.
fn answer(mut sock: TcpStream, body: &str) -> std::io::Result<()> {
    sock.set_nonblocking(false)?;
    sock.set_read_timeout(Some(Duration::from_secs(2)))?;
    sock.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        let n = sock.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut words = head.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, text) = match (method, path) {
        ("GET" | "HEAD", "/metrics" | "/") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            body,
        ),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "taillab serves /metrics\n"),
        _ => ("405 Method Not Allowed", "text/plain", "GET /metrics\n"),
    };
    let payload = if method == "HEAD" { "" } else { text };
    write!(
        sock,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{payload}",
        text.len()
    )?;
    sock.flush()
}

/// The host's steal between two reads of `/proc/stat`, as a fraction of one CPU.
#[derive(Default)]
struct Steal {
    last: Option<(u64, u64)>,
}

impl Steal {
    fn sample(&mut self) -> Option<f64> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        let stat = taillab_monitor::procfs::parse_stat(&text).ok()?;
        let cpus = stat.per_cpu.len().max(1) as u64;
        let now = (stat.cpu.steal, stat.cpu.total());
        let prev = self.last.replace(now)?;
        let total = now.1.saturating_sub(prev.1);
        // Ticks of all CPUs; one CPU's worth of wall time is total / cpus.
        (total > 0).then(|| (now.0.saturating_sub(prev.0) * cpus) as f64 / total as f64)
    }
}

/// One metric family's header.
fn family(o: &mut String, name: &str, kind: &str, unit: Option<&str>, help: &str) {
    let _ = writeln!(o, "# TYPE {name} {kind}");
    if let Some(u) = unit {
        let _ = writeln!(o, "# UNIT {name} {u}");
    }
    let _ = writeln!(o, "# HELP {name} {help}");
}

/// A label value, escaped as OpenMetrics asks.
fn esc(v: &str) -> String {
    v.replace('\\', r"\\")
        .replace('"', "\\\"")
        .replace('\n', r"\n")
}

/// The OpenMetrics text of `s`.
fn render(s: &State) -> String {
    let mut o = String::new();
    let labels: Vec<String> = s
        .info
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", esc(v)))
        .collect();
    family(
        &mut o,
        "taillab_run",
        "info",
        None,
        "The run being measured.",
    );
    let _ = writeln!(o, "taillab_run_info{{{}}} 1", labels.join(","));
    family(
        &mut o,
        "taillab_offered_requests_per_second",
        "gauge",
        None,
        "The offered rate: the arrival process's mean.",
    );
    let _ = writeln!(o, "taillab_offered_requests_per_second {}", s.offered);
    environment(&mut o, s);
    let Some(p) = &s.progress else {
        o.push_str("# EOF\n");
        return o;
    };
    family(
        &mut o,
        "taillab_phase",
        "stateset",
        None,
        "The run's phase.",
    );
    for ph in ["warmup", "measured"] {
        let on = (ph == "measured") == p.measuring;
        let _ = writeln!(
            o,
            "taillab_phase{{taillab_phase=\"{ph}\"}} {}",
            u8::from(on)
        );
    }
    family(
        &mut o,
        "taillab_elapsed_seconds",
        "gauge",
        Some("seconds"),
        "Time since the schedule started.",
    );
    let _ = writeln!(o, "taillab_elapsed_seconds {}", p.elapsed_ns as f64 / 1e9);
    family(
        &mut o,
        "taillab_requests_completed",
        "counter",
        None,
        "Requests completed so far, warmup included.",
    );
    let _ = writeln!(o, "taillab_requests_completed_total {}", p.completed);
    if let Some(n) = p.in_flight {
        family(
            &mut o,
            "taillab_requests_in_flight",
            "gauge",
            None,
            "Requests due by now (sent, over TCP) that have not completed.",
        );
        let _ = writeln!(o, "taillab_requests_in_flight {n}");
    }
    intervals(&mut o, p, s.interval_s);
    o.push_str("# EOF\n");
    o
}

/// The environment's families: the host's steal (the endpoint's own reading) and other
/// processes' CPU (the run's sampler's, when the monitor is on), each with its flag.
fn environment(o: &mut String, s: &State) {
    let foreign = s.foreign.as_ref().and_then(|f| f.pct());
    if let Some(st) = s.steal {
        family(
            o,
            "taillab_environment_steal_ratio",
            "gauge",
            None,
            "The host's hypervisor steal over the last second, in CPUs (1 = one CPU's time).",
        );
        let _ = writeln!(o, "taillab_environment_steal_ratio {st}");
    }
    if let Some(pct) = foreign {
        family(
            o,
            "taillab_environment_foreign_cpu_ratio",
            "gauge",
            None,
            "Other processes' CPU over the last second, in CPUs (the environment monitor's).",
        );
        let _ = writeln!(o, "taillab_environment_foreign_cpu_ratio {}", pct / 100.0);
    }
    let flags = [
        ("steal", s.steal.map(|st| st > s.steal_limit)),
        ("foreign_cpu", foreign.map(|f| f > s.foreign_limit)),
    ];
    if flags.iter().any(|f| f.1.is_some()) {
        family(o, "taillab_environment_flag", "gauge", None, "1 where the environment check would fail the run, over the last second: steal above monitor.max_steal, other processes' CPU above monitor.max_foreign.");
        for (check, on) in flags {
            if let Some(on) = on {
                let _ = writeln!(
                    o,
                    "taillab_environment_flag{{check=\"{check}\"}} {}",
                    u8::from(on)
                );
            }
        }
    }
}

/// The families of each phase's last finished interval, labelled `phase`: the measured
/// phase's (those of the interval logs) and, from a watched run's own histograms, the
/// warmup's, which stay as the warmup left them once the measured phase has begun.
fn intervals(o: &mut String, p: &Progress, len_s: f64) {
    let ivs: Vec<(&str, &LiveInterval)> =
        [("measured", &p.interval), ("warmup", &p.warmup_interval)]
            .into_iter()
            .filter_map(|(ph, iv)| Some((ph, iv.as_ref()?)))
            .collect();
    if ivs.is_empty() {
        return;
    }
    let each = |o: &mut String, name: &str, v: &dyn Fn(&LiveInterval) -> f64| {
        for (ph, iv) in &ivs {
            let _ = writeln!(o, "{name}{{phase=\"{ph}\"}} {}", v(iv));
        }
    };
    family(o, "taillab_interval_start_seconds", "gauge", Some("seconds"), "Start of the phase's last finished interval, from the phase's start: the measured phase's (the interval's StartTimestamp in hist/*.hlog), the schedule's for warmup.");
    each(o, "taillab_interval_start_seconds", &|iv: &LiveInterval| {
        iv.index as f64 * len_s
    });
    family(
        o,
        "taillab_interval_requests",
        "gauge",
        None,
        "Requests of the phase completed in that interval.",
    );
    each(o, "taillab_interval_requests", &|iv: &LiveInterval| {
        iv.count as f64
    });
    family(
        o,
        "taillab_achieved_requests_per_second",
        "gauge",
        None,
        "The achieved rate: that interval's requests over its length (the warmup's last interval ends where the measured phase begins).",
    );
    each(
        o,
        "taillab_achieved_requests_per_second",
        &|iv: &LiveInterval| iv.count as f64 / (iv.length_ns.max(1) as f64 / 1e9),
    );
    family(o, "taillab_interval_latency_seconds", "gauge", Some("seconds"), "p50, p99 and max of each metric in that interval (sojourn, service, queue, send_lag, recv_lag, server_recv_lag), by phase.");
    for (ph, iv) in &ivs {
        for (m, name) in METRICS.iter().enumerate() {
            for (q, v) in [("0.5", iv.p50[m]), ("0.99", iv.p99[m]), ("1", iv.max[m])] {
                let _ = writeln!(
                    o,
                    "taillab_interval_latency_seconds{{metric=\"{name}\",phase=\"{ph}\",quantile=\"{q}\"}} {}",
                    v as f64 / 1e9
                );
            }
        }
    }
}
