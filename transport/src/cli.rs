//! Flags and entry points of `taillab serve` and `taillab load`, and the
//! network flags `taillab run` takes for `--config loopback|networked`.
//!
//! They live here (not in the CLI crate) because the coordinator
//! ([`crate::coord`]) builds `serve`/`load` command lines: flag names are
//! defined and used in one place.

use crate::client::{connect, run_load, LoadOpts, Receive};
use crate::coord::{transport_section, RunObserver, ShardDump};
use crate::server::{serve, ServeOpts};
use crate::TransportError;
use clap::Args;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use taillab_core::arrival::{derive_seed, ArrivalSpec};
use taillab_core::clock::WaitMode;
use taillab_core::dist::parse_duration_ns;
use taillab_core::harness::{Progress, DEFAULT_SPIN_MARGIN_NS};
use taillab_core::{App, Bound, DataCtx, Params, RunSpec};

pub fn parse_ns(s: &str) -> Result<u64, String> {
    parse_duration_ns(s).map(|v| v as u64)
}

fn parse_secs(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} is not a valid time")),
        Err(_) => parse_duration_ns(s).map(|v| v / 1e9),
    }
}

fn parse_size(s: &str) -> Result<u32, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        None => (s, 1u64),
        Some((i, _)) => (
            &s[..i],
            match &s[i..] {
                "B" | "b" => 1,
                "KiB" | "K" | "k" => 1 << 10,
                "MiB" | "M" | "m" => 1 << 20,
                u => return Err(format!("unknown size unit `{u}`; use B, KiB or MiB")),
            },
        ),
    };
    let v: u64 = num.trim().parse().map_err(|_| format!("`{s}` is not a size like 16MiB"))?;
    let b = v * mult;
    if b == 0 || b > 1 << 30 {
        return Err(format!("frame cap {b} bytes is out of range 1..=1GiB"));
    }
    Ok(b as u32)
}

/// `taillab serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// App to serve (see `taillab apps`).
    #[arg(long)]
    pub app: String,
    /// Worker threads sharing the one request queue.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Address to listen on. Loopback unless you name another address; port 0 lets the kernel pick (printed as `listening ADDR`).
    #[arg(long, default_value = "127.0.0.1:7878")]
    pub listen: std::net::SocketAddr,
    /// How idle workers wait for work: spin, block or hybrid (spin --spin-margin, then block).
    #[arg(long, default_value = "hybrid")]
    pub wait: String,
    /// Hybrid workers spin this long for work before blocking.
    #[arg(long, value_parser = parse_ns)]
    pub spin_margin: Option<u64>,
    /// Queue discipline: fifo, lifo or random.
    #[arg(long, default_value = "fifo")]
    pub discipline: String,
    /// App setting, as key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Largest request payload accepted (e.g. 16MiB); bigger frames drop the connection.
    #[arg(long, value_parser = parse_size, default_value = "16MiB")]
    pub max_frame: u32,
    /// Seed of the random queue discipline.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also stop when stdin reaches end of file (used by the coordinator, through any launcher).
    #[arg(long)]
    pub exit_on_eof: bool,
    /// Pin workers to these CPUs, round-robin (e.g. 1 or 0,1).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// Run workers under SCHED_FIFO at this priority (1..=99; needs root).
    #[arg(long)]
    pub rt_priority: Option<i32>,
    /// How requests reach workers: shared (reader threads feed one queue all workers share: the M/G/n model)
    /// or per-worker (each worker reads the connections it owns: no hand-off, n separate queues).
    #[arg(long, default_value = "shared")]
    pub dispatch: String,
}

fn parse_enum<T: std::str::FromStr<Err = String>>(flag: &str, v: &str) -> Result<T, TransportError> {
    v.parse::<T>().map_err(|e| TransportError::Invalid(format!("--{flag}: {e}")))
}

/// Runs `taillab serve` until SIGINT/SIGTERM; returns the exit code.
pub fn serve_main(app: Arc<dyn App>, a: &ServeArgs) -> Result<i32, TransportError> {
    let params = Params::parse(a.set.iter().map(|s| s.as_str()))?;
    params.check_keys(app.name(), app.keys())?;
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, &params)?;
    let server = app.server(&ctx, &params, a.threads)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| TransportError::Io { what: "installing a signal handler".into(), source: e })?;
    }
    if a.exit_on_eof {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            stop.store(true, Ordering::Release);
        });
    }
    let opts = ServeOpts {
        listen: a.listen,
        threads: a.threads,
        wait: parse_enum("wait", &a.wait)?,
        spin_ns: a.spin_margin.unwrap_or(DEFAULT_SPIN_MARGIN_NS),
        discipline: parse_enum("discipline", &a.discipline)?,
        max_frame: a.max_frame,
        seed: a.seed,
        cpus: a.cpus.clone(),
        rt_priority: a.rt_priority,
        dispatch: parse_enum("dispatch", &a.dispatch)?,
    };
    let stats = serve(server.clone(), &opts, stop, |addr| {
        // The one line on stdout: the coordinator (and scripts) read the port here.
        println!("listening {addr}");
        let _ = std::io::stdout().flush();
        eprintln!("taillab serve: {} with {} worker(s) on {addr}; stop with Ctrl-C", app.name(), a.threads);
    })?;
    eprintln!(
        "taillab serve: stopped after {} requests on {} connections ({} dropped, {} app errors)",
        stats.requests, stats.connections, stats.dropped, stats.app_errors
    );
    // For the coordinator: what the server and the app saw (whole lifetime).
    // Nobody may be reading any more (a script took the port and left): ignore EPIPE.
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "stats {}", serde_json::json!({"serve": stats, "app": server.report()}));
    let _ = o.flush();
    Ok(0)
}

/// `taillab load`.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// App whose requests to send (its server must be at --target).
    #[arg(long)]
    pub app: String,
    /// Server address HOST:PORT.
    #[arg(long)]
    pub target: String,
    /// TCP connections; requests go round-robin over them.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Offered load in requests per second.
    #[arg(long)]
    pub qps: f64,
    /// Arrival process: poisson or fixed.
    #[arg(long, default_value = "poisson")]
    pub arrival: String,
    /// Base seed (the same seed gives the same requests as `taillab run`).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    #[arg(long, conflicts_with = "warmup_seconds")]
    pub warmup_requests: Option<u64>,
    #[arg(long, value_parser = parse_secs)]
    pub warmup_seconds: Option<f64>,
    /// Measured requests.
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Measured time (e.g. 30s).
    #[arg(long, value_parser = parse_secs)]
    pub duration: Option<f64>,
    /// How the sender waits for each intended time: spin or hybrid.
    #[arg(long, default_value = "hybrid")]
    pub wait: String,
    /// Hybrid waits spin this long before a deadline.
    #[arg(long, value_parser = parse_ns)]
    pub spin_margin: Option<u64>,
    /// App setting, as key=value (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Server worker threads (recorded in the summary; used for utilization).
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Result folder (default results/<app>-load-<time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub save_requests: bool,
    #[arg(long, default_value_t = 1024)]
    pub max_record_mem: u64,
    #[arg(long, value_parser = parse_ns, default_value = "1s")]
    pub interval: u64,
    #[arg(long, value_parser = parse_ns, default_value = "10s")]
    pub drain_timeout: u64,
    #[arg(long, value_parser = parse_ns, default_value = "50us")]
    pub max_send_lag: u64,
    /// Declare the server dead after this long without any response while requests are outstanding.
    #[arg(long, value_parser = parse_ns, default_value = "4s")]
    pub dead_after: u64,
    /// Largest response payload accepted.
    #[arg(long, value_parser = parse_size, default_value = "16MiB")]
    pub max_frame: u32,
    /// Most due requests coalesced into one write when the sender runs late.
    #[arg(long, default_value_t = 64)]
    pub max_batch: usize,
    /// Pin the client's threads to these CPUs, round-robin: the sender to the first, receiver
    /// threads to the next ones (e.g. 0 while the server runs with --cpus 1).
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// Who reads responses: sender (the sender reads its connections without blocking while it waits
    /// for the next send: one thread, no wake-ups) or threads (one blocking receiver thread per
    /// connection). Default: sender with --wait spin, threads otherwise.
    #[arg(long)]
    pub receive: Option<String>,
    /// Label for summary.json's `config` (default: loopback for 127.x targets, else networked).
    #[arg(long)]
    pub config_label: Option<String>,
    /// Coordinator mode: print `ready` once connected, wait for `go DELAY_NS` on stdin.
    #[arg(long, hide = true)]
    pub barrier: bool,
    /// Coordinator mode: print the histograms as one `shard {json}` line on stdout; write no folder.
    #[arg(long, hide = true)]
    pub emit_shard: bool,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit with status 1 when a check failed.
    #[arg(long)]
    pub strict: bool,
    /// Do not sample the host during the run (no environment check). When it is sampled, a
    /// server listening on --target on this host counts as the experiment's, not as foreign CPU.
    #[arg(long)]
    pub no_monitor: bool,
}

impl LoadArgs {
    pub fn spec(&self) -> Result<RunSpec, TransportError> {
        let measure = match (self.requests, self.duration) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(s)) => Bound::Seconds(s),
            _ => {
                return Err(TransportError::Invalid("say how long to measure: --requests N or --duration TIME".into()))
            }
        };
        let warmup = match (self.warmup_requests, self.warmup_seconds) {
            (Some(n), None) => Bound::Requests(n),
            (None, Some(s)) => Bound::Seconds(s),
            _ => Bound::Requests(0),
        };
        let spec = RunSpec {
            qps: self.qps,
            threads: self.threads,
            arrival: parse_enum::<ArrivalSpec>("arrival", &self.arrival)?,
            seed: self.seed,
            warmup,
            measure,
            wait: parse_enum::<WaitMode>("wait", &self.wait)?,
            spin_margin_ns: self.spin_margin.unwrap_or(DEFAULT_SPIN_MARGIN_NS),
            keep_records: self.save_requests,
            record_mem_cap: self.max_record_mem << 20,
            interval_ns: self.interval,
            drain_timeout_ns: self.drain_timeout,
            send_lag_p99_max_ns: self.max_send_lag,
            cpus: self.cpus.clone(),
            ..RunSpec::default()
        };
        spec.validate()?;
        Ok(spec)
    }
}

fn default_label(target: &str) -> &'static str {
    if target.starts_with("127.") || target.starts_with("localhost") || target.starts_with("[::1]") {
        "loopback"
    } else {
        "networked"
    }
}

/// The processes on this host with a listening TCP socket on `addr`'s port
/// (any local address): the server a loopback `load` drives, so that its
/// CPU counts as the experiment's. Empty for other hosts' addresses or when
/// /proc does not say.
pub fn local_listeners(addr: &SocketAddr) -> Vec<i32> {
    if !addr.ip().is_loopback() {
        return Vec::new();
    }
    let port = format!(":{:04X}", addr.port());
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let txt = std::fs::read_to_string(table).unwrap_or_default();
        for l in txt.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode; st 0A = LISTEN
            if f.len() > 9 && f[1].ends_with(&port) && f[3] == "0A" {
                inodes.push(format!("socket:[{}]", f[9]));
            }
        }
    }
    let mut pids = Vec::new();
    if inodes.is_empty() {
        return pids;
    }
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let owns =
            std::fs::read_dir(e.path().join("fd")).into_iter().flatten().flatten().any(|fd| {
                std::fs::read_link(fd.path()).is_ok_and(|t| inodes.iter().any(|i| t.as_os_str() == i.as_str()))
            });
        if owns && pid != std::process::id() as i32 {
            pids.push(pid);
        }
    }
    pids
}

/// Runs `taillab load`; returns the exit code (2 when the server was lost:
/// what was measured until then is still written). `obs` (the CLI's
/// environment monitor) watches the run; a local server at the target is
/// reported to it as the experiment's own process.
pub fn load_main(
    app: Arc<dyn App>,
    a: &LoadArgs,
    mut obs: Option<&mut dyn RunObserver>,
) -> Result<i32, TransportError> {
    let spec = a.spec()?;
    let params = Params::parse(a.set.iter().map(|s| s.as_str()))?;
    params.check_keys(app.name(), app.keys())?;
    let label = a.config_label.clone().unwrap_or_else(|| default_label(&a.target).to_string());
    let out = if a.emit_shard {
        None
    } else {
        let o = a.out.clone().unwrap_or_else(|| {
            let t = taillab_core::summary::rfc3339(std::time::SystemTime::now()).replace([':', '.'], "-");
            PathBuf::from("results").join(format!("{}-load-{t}", app.name()))
        });
        taillab_core::summary::ensure_writable(&o)?;
        Some(o)
    };
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, &params)?;
    // Stream 2 as in `taillab run`: one seed, one request sequence, any configuration.
    let client = app.client(&ctx, &params, derive_seed(spec.seed, 2))?;
    let wire = crate::apps::wire_for(app.name(), &params, a.max_frame)?;
    let opts = LoadOpts {
        target: a.target.clone(),
        connections: a.connections,
        dead_after_ns: a.dead_after,
        max_batch: a.max_batch,
        receive: match &a.receive {
            Some(r) => parse_enum("receive", r)?,
            None => Receive::default_for(spec.wait),
        },
    };
    let streams = connect(&opts, wire.as_ref())?;
    let barrier = a.barrier;
    let mut start = || -> Result<u64, TransportError> {
        if !barrier {
            return Ok(2_000_000);
        }
        println!("ready");
        let _ = std::io::stdout().flush();
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| TransportError::Io { what: "reading the coordinator's go".into(), source: e })?;
        line.trim().strip_prefix("go ").and_then(|d| d.parse::<u64>().ok()).ok_or_else(|| {
            TransportError::Launch(format!("expected `go DELAY_NS` from the coordinator, got {:?}", line.trim()))
        })
    };
    let quiet = a.quiet || a.json || a.emit_shard;
    // One progress line a second on stderr (stdout carries results).
    let show = !quiet && spec.expected_measure_ns() >= 1_000_000_000;
    let mut last_print = 0u64;
    let mut on_progress = |p: Progress| {
        if show && p.elapsed_ns >= last_print + 1_000_000_000 {
            last_print = p.elapsed_ns;
            eprint!("\r{:>5.1}% {} requests", 100.0 * p.elapsed_ns as f64 / p.expected_ns.max(1) as f64, p.completed);
        }
    };
    if let Some(o) = obs.as_deref_mut() {
        let server = streams.first().and_then(|s| s.peer_addr().ok()).map(|a| local_listeners(&a)).unwrap_or_default();
        o.started(&server);
    }
    let r = run_load(&spec, &opts, wire, client, streams, &mut start, &mut on_progress)?;
    if show {
        eprintln!();
    }
    if let Some(l) = &r.lost {
        eprintln!("error: {l}; keeping the {} requests measured so far", r.result.totals.measured);
    }
    if a.emit_shard {
        let d = ShardDump::from_load(&r, spec.qps, spec.seed);
        println!("shard {}", serde_json::to_string(&d).expect("shards serialize"));
        // Per-request stamps follow, one `req` line each (this client's clock and ids).
        if a.save_requests {
            if let Some(rec) = &r.result.records {
                let mut o = std::io::BufWriter::new(std::io::stdout().lock());
                for (i, wk, measured, st) in rec.iter() {
                    let _ = write!(o, "req ")
                        .and_then(|_| taillab_core::summary::write_request_row(&mut o, i, wk, measured, &st))
                        .and_then(|_| writeln!(o));
                }
            }
        }
        let _ = std::io::stdout().flush();
        return Ok(if r.lost.is_some() { 2 } else { 0 });
    }
    let mut summary = taillab_core::summarize(&r.result, app.name(), &params, &label);
    summary.extra.insert(
        "transport".into(),
        transport_section(
            &r.transport,
            r.transport_sum,
            r.server_timed,
            1,
            r.connections,
            &a.target,
            r.lost.clone(),
            None,
        ),
    );
    let out = out.expect("set unless emitting a shard");
    let mut env_lines = String::new();
    if let Some(o) = obs {
        // The load's stamps are on this host's clock already.
        o.finished(&r.result, 0, &mut summary, &out).map_err(TransportError::Launch)?;
        env_lines = o.table_lines(&summary);
    }
    taillab_core::write_run(&out, &summary, &r.result, a.save_requests)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&summary).expect("summaries serialize"));
    } else {
        print!("{}{env_lines}", taillab_core::summary::human_table(&summary));
        println!("results: {}", out.display());
    }
    Ok(if r.lost.is_some() {
        2
    } else if a.strict && !summary.ok() {
        1
    } else {
        0
    })
}

/// Flags of `taillab run` for `--config loopback|networked`.
#[derive(Args, Debug, Clone, Default)]
pub struct NetArgs {
    /// Client processes (loopback/networked); the rate is split evenly, each a Poisson stream with its own seed.
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// TCP connections per client.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Server listen address (loopback/networked; port 0 = any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// Use an already running server at HOST:PORT instead of starting one (required for external apps such as memcached).
    #[arg(long)]
    pub target: Option<String>,
    /// How to start the server (networked): a shell template with {cmd}, e.g. `ip netns exec NS {cmd}` or `ssh HOST {cmdq}`.
    #[arg(long, default_value = "{cmd}")]
    pub server_launcher: String,
    /// How to start client i (networked): once for all clients or once per client; {i} is the client number.
    #[arg(long)]
    pub client_launcher: Vec<String>,
    /// Path of the taillab binary on the hosts the launchers reach (default: this binary).
    #[arg(long)]
    pub remote_taillab: Option<String>,
    /// Declare the server dead after this long without a response.
    #[arg(long, value_parser = parse_ns, default_value = "4s")]
    pub dead_after: u64,
    /// How the server started for loopback/networked hands requests to workers: shared or per-worker (see `taillab serve --help`).
    #[arg(long, default_value = "shared")]
    pub dispatch: String,
    /// Pin each client's threads to these CPUs (`taillab load --cpus`; --cpus places the server's workers).
    #[arg(long, value_delimiter = ',')]
    pub client_cpus: Vec<usize>,
    /// Who reads responses in each client: sender or threads (see `taillab load --help`).
    #[arg(long)]
    pub receive: Option<String>,
}
