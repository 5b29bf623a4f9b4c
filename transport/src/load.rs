//! `taillab load` as a library: one open-loop load measurement against a
//! server at `net.target`, written as an ordinary result folder, or — when a
//! coordinator runs it — reported as a shard on stdout.
//!
//! The binary decides exit codes and prints; everything else is here.

use crate::client::{connect, run_load, Conns, LoadOpts};
use crate::coord::{barrier, emit_shard, RunObserver, TransportFacts};
use crate::report::annotate;
use crate::TransportError;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use taillab_core::arrival::derive_seed;
use taillab_core::config::auto;
use taillab_core::config::RunConfig;
use taillab_core::harness::Progress;
use taillab_core::{App, DataCtx, Summary};

/// Where a load's result goes.
pub enum LoadMode {
    /// A result folder (`out`), watched by the observer if there is one.
    Standalone {
        /// The result folder.
        out: PathBuf,
    },
    /// A coordinator's client: wait at the barrier, print the shard.
    Shard,
}

/// What a load measured.
pub struct LoadOutcome {
    /// The summary (standalone mode), already written.
    pub summary: Option<Summary>,
    /// Why the server was lost mid-run (what was measured is kept).
    pub lost: Option<String>,
    /// The observer's lines for the human table.
    pub env_lines: String,
}

/// `loopback` for 127.x targets, `networked` otherwise.
pub fn default_label(target: &str) -> &'static str {
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

/// Runs one load measurement of `cfg` with `app`'s requests.
pub fn load(
    app: Arc<dyn App>,
    cfg: &RunConfig,
    mode: LoadMode,
    mut obs: Option<&mut dyn RunObserver>,
    on_progress: &mut dyn FnMut(Progress),
) -> Result<LoadOutcome, TransportError> {
    let invalid = |e: taillab_core::config::ConfigError| TransportError::Invalid(e.to_string());
    let (spec, note) = cfg.run_spec().map_err(invalid)?;
    if let Some(n) = note {
        eprintln!("{n}");
    }
    cfg.check_app_keys(app.name(), app.keys()).map_err(invalid)?;
    taillab_core::harness::check_cpus("--client-cpus", &cfg.net.client_cpus.0)?;
    let opts = LoadOpts::from_config(cfg, server_affinity(cfg))?;
    if let LoadMode::Standalone { out } = &mode {
        taillab_core::summary::ensure_writable(out)?;
    }
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, &cfg.settings)?;
    // Stream 2 as in `taillab run`: one seed, one request sequence, any configuration (a
    // fan-out's other leaves: streams of their own, net.request_stream).
    let stream = match cfg.net.request_stream {
        0 => derive_seed(spec.seed, 2),
        j => derive_seed(derive_seed(spec.seed, 2), 1000 + j),
    };
    let clients = (0..opts.senders)
        .map(|j| app.client(&ctx, &cfg.settings, crate::client::sender_stream(stream, j)))
        .collect::<Result<Vec<_>, _>>()?;
    let max_frame = u32::try_from(cfg.net.max_frame.0).unwrap_or(u32::MAX);
    let wire = crate::apps::wire_for(app.name(), &cfg.settings, max_frame)?;
    let mut opts = opts;
    let conns = match crate::apps::h2_spec(app.name(), &cfg.settings)? {
        Some(h2) => {
            crate::http2::fix_choice(&mut opts.choice);
            Conns::Streams(Box::new(crate::http2::connect(&opts, &h2)?))
        }
        None => Conns::Tcp(connect(&opts, wire.as_ref())?),
    };
    // Said once the target answered, so a wrong target is one error line.
    if matches!(mode, LoadMode::Standalone { .. }) {
        eprintln!("taillab load: {}", opts.choice.line());
    }
    if let Some(w) = opts.placement_warning() {
        eprintln!("taillab load: {w}");
    }
    let shard = matches!(mode, LoadMode::Shard);
    let mut start = || if shard { barrier() } else { Ok(2_000_000) };
    if let Some(o) = obs.as_deref_mut() {
        let server = crate::client::resolve(&opts.target).map(|a| local_listeners(&a)).unwrap_or_default();
        o.started(&server);
    }
    let r = run_load(&spec, &opts, wire, clients, conns, &mut start, on_progress)?;
    let out = match mode {
        LoadMode::Shard => {
            emit_shard(&r, spec.qps, spec.seed);
            return Ok(LoadOutcome { summary: None, lost: r.lost, env_lines: String::new() });
        }
        LoadMode::Standalone { out } => out,
    };
    let label = cfg.net.label.clone().unwrap_or_else(|| default_label(&opts.target).to_string());
    let mut summary = taillab_core::summarize(&r.result, app.name(), &cfg.settings, &label);
    if let Some(l) = &r.lost {
        summary.mark_incomplete(l);
    }
    let section = TransportFacts {
        clients: 1,
        connections: r.connections,
        target: &opts.target,
        lost: r.lost.clone(),
        per_client: None,
        senders: r.senders.iter().map(|s| s.share(0)).collect(),
        max_in_flight: r.max_in_flight,
    };
    summary.transport = Some(section.section(&r.transport, r.transport_sum, r.server_timed));
    if !r.server_timed {
        summary.drop_ideal_of_external_server();
    }
    annotate(&mut summary, cfg, &r.stamps, Some(r.choice.clone()));
    let mut env_lines = String::new();
    if let Some(o) = obs {
        // The load's stamps are on this host's clock already.
        o.finished(&r.result, 0, &mut summary, &out).map_err(TransportError::Launch)?;
        env_lines = o.table_lines(&summary);
    }
    taillab_core::write_run(&out, &summary, &r.result, cfg.record.save_requests)?;
    Ok(LoadOutcome { summary: Some(summary), lost: r.lost, env_lines })
}

/// The CPUs of the server a `--target` on this host names (the union of
/// its processes' affinities), for choosing the client's defaults; `None`
/// for another host's target, or when /proc does not say.
fn server_affinity(cfg: &RunConfig) -> Option<Vec<usize>> {
    let addr = crate::client::resolve(cfg.net.target.as_deref()?).ok()?;
    let mut cpus: Vec<usize> = local_listeners(&addr).into_iter().filter_map(auto::affinity).flatten().collect();
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}
