//! `taillab serve` and `taillab load`: the two halves of a TCP run, as
//! commands (the coordinator of loopback/networked runs starts them too).

use crate::args::Output;
use crate::runner::{default_out, EnvObserver};
use clap::Args;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use taillab_core::config::flags::ConfigFlags;
use taillab_core::config::view;
use taillab_core::harness::Progress;
use taillab_core::DataCtx;
use taillab_transport::coord::{emit_server_stats, serve_defaults, RunObserver};
use taillab_transport::load::{load, LoadMode};
use taillab_transport::server::{serve, ServeOpts};

/// `taillab serve`.
#[derive(Args, Debug, Clone)]
pub struct ServeCmd {
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::SERVE }>,
    /// Also stop when stdin reaches end of file (used by the coordinator, through any launcher).
    #[arg(long)]
    pub exit_on_eof: bool,
}

/// Runs `taillab serve` until SIGINT/SIGTERM (or EOF on stdin).
pub fn serve_cmd(a: ServeCmd) -> anyhow::Result<i32> {
    let mut cfg = serve_defaults();
    cfg.apply(&a.cfg.pairs, "flags")?;
    let app = crate::runner::app_of(&cfg)?;
    let opts = ServeOpts::from_config(&cfg)?;
    let ctx = DataCtx::from_env();
    app.prepare(&ctx, &cfg.settings)?;
    let server = app.server_for_run(
        &ctx,
        &cfg.settings,
        opts.threads,
        taillab_core::arrival::derive_seed(cfg.load.seed, 7),
    )?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    if a.exit_on_eof {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            stop.store(true, Ordering::Release);
        });
    }
    let (threads, choice) = (opts.threads, opts.choice.clone());
    if cfg.record.explain {
        // The coordinator's join needs the server's own stamps of each request.
        taillab_transport::explain::enable();
    }
    let stats = serve(server.clone(), &opts, stop, |addr| {
        // The one line on stdout: the coordinator (and scripts) read the port here.
        println!("listening {addr}");
        let _ = std::io::stdout().flush();
        eprintln!(
            "taillab serve: {} with {threads} worker(s) on {addr}; {}; stop with Ctrl-C",
            app.name(),
            choice
        );
    })?;
    eprintln!(
        "taillab serve: stopped after {} requests on {} connections ({} dropped, {} refused, {} app errors)",
        stats.requests, stats.connections, stats.dropped, stats.refused, stats.app_errors
    );
    taillab_transport::explain::emit();
    emit_server_stats(&stats, server.report());
    Ok(0)
}

/// `taillab load`.
#[derive(Args, Debug, Clone)]
pub struct LoadCmd {
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::LOAD }>,
    #[command(flatten)]
    pub output: Output,
    /// Not a load flag: refused with a pointer to --client-cpus.
    #[arg(long, hide = true)]
    pub cpus: Option<String>,
    /// Coordinator mode: print `ready` once connected, wait for `go DELAY_NS` on stdin.
    #[arg(long, hide = true)]
    pub barrier: bool,
    /// Coordinator mode: print the histograms as one `shard {json}` line on stdout; write no folder.
    #[arg(long, hide = true)]
    pub emit_shard: bool,
}

/// Runs `taillab load`: 2 when the server was lost (what was measured until
/// then is still written), 1 with --strict when a check failed.
pub fn load_cmd(a: LoadCmd) -> anyhow::Result<i32> {
    if a.cpus.is_some() {
        anyhow::bail!("taillab load has no --cpus (that places a server's workers); pin this client's threads with --client-cpus");
    }
    let mut cfg = taillab_core::config::RunConfig::default();
    cfg.apply(&a.cfg.pairs, "flags")?;
    let app = crate::runner::app_of(&cfg)?;
    let spec = cfg.spec()?;
    if a.emit_shard != a.barrier {
        anyhow::bail!("--barrier and --emit-shard go together (the coordinator's client mode)");
    }
    let quiet = a.output.quiet || a.output.json || a.emit_shard;
    // One progress line a second on stderr (stdout carries results).
    let show = !quiet && spec.expected_measure_ns() >= 1_000_000_000;
    let metrics = match crate::metrics::address(&cfg, 0)? {
        Some(a) => Some(crate::metrics::MetricsServer::start(&cfg, a)?),
        None => None,
    };
    // A coordinator's client serves what the coordinator's monitor reads of this host: it
    // is told once a second on stdin, after `go` (so only once the schedule runs, when the
    // first progress report comes).
    let mut relayed = metrics.as_ref().filter(|_| a.barrier).map(|m| {
        let f = taillab_monitor::LiveForeign::relayed();
        m.watch_foreign(f.clone());
        f
    });
    let mut last_print = 0u64;
    let mut on_progress = |p: Progress| {
        if let Some(m) = &metrics {
            m.update(&p);
        }
        if let Some(f) = relayed.take() {
            taillab_transport::coord::follow_coordinator(move |pct| f.relay(pct));
        }
        if show && p.elapsed_ns >= last_print + 1_000_000_000 {
            last_print = p.elapsed_ns;
            crate::progress::line(&format!(
                "{:>5.1}% {} requests",
                100.0 * p.elapsed_ns as f64 / p.expected_ns.max(1) as f64,
                p.completed
            ));
        }
    };
    let mut created = Vec::new();
    let mode = if a.emit_shard {
        LoadMode::Shard
    } else {
        let out = a
            .output
            .out
            .clone()
            .unwrap_or_else(|| default_out(&format!("{}-load", app.name())));
        created = crate::run::missing_dirs(&out);
        crate::runner::write_config(&cfg, &out)?;
        LoadMode::Standalone { out }
    };
    let out = match &mode {
        LoadMode::Standalone { out } => Some(out.clone()),
        LoadMode::Shard => None,
    };
    // A coordinator's client is watched by the coordinator.
    let mut obs = EnvObserver::new(&cfg, spec);
    if let Some(m) = &metrics {
        obs.serve_foreign_on(m);
    }
    let watch = cfg.monitor.enabled && !a.emit_shard;
    let r = load(
        app,
        &cfg,
        mode,
        watch.then_some(&mut obs as &mut dyn RunObserver),
        &mut on_progress,
    )
    .inspect_err(|_| {
        // Nothing measured (no server, a bad setting): leave no folder.
        if let Some(out) = &out {
            crate::run::forget_unused(out, &created);
        }
    })?;
    crate::progress::end_line(show);
    if let Some(l) = &r.lost {
        eprintln!("error: {l}; keeping the requests measured so far");
    }
    let code = if r.lost.is_some() { 2 } else { 0 };
    let Some(summary) = r.summary else {
        return Ok(code);
    };
    if a.output.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!(
            "{}{}",
            taillab_core::summary::human_table(&summary),
            r.env_lines
        );
        println!("results: {}", out.expect("standalone").display());
    }
    Ok(if code != 0 {
        code
    } else if a.output.strict && !summary.ok() {
        1
    } else {
        0
    })
}
