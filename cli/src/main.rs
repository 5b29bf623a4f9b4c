//! `taillab`: the one command users type.
//!
//! Only this binary decides exit codes: 0 success, 1 a measurement whose
//! checks failed (with `--strict`), 2 bad input or an error that stopped the
//! work. Every error is printed as one line that says what to fix.

mod analysis;
mod apps;
mod args;
mod attribute;
mod config_cmd;
mod environment;
mod executor;
mod experiment;
mod explain;
mod fit;
mod hooks;
mod metrics;
mod model;
mod planned;
mod progress;
mod reproduce;
mod run;
mod runner;
mod serve;
mod slurm;
mod sweep;
mod system;
mod tailwag;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(name = "taillab", version, about = "Measure, explain and predict tail latency", long_about = None)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// One measurement of an app under open-loop load; writes OUT/summary.json and OUT/config.toml.
    Run(Box<run::RunCmd>),
    /// Serve an app over TCP (the server side of loopback/networked runs).
    Serve(Box<serve::ServeCmd>),
    /// Open-loop load over TCP against a `taillab serve` or an external server; writes OUT/summary.json.
    Load(Box<serve::LoadCmd>),
    /// A grid of runs over any configuration keys (loads, threads, topologies,
    /// app settings, ...), each point optionally repeated to a CI target; resumable.
    Sweep(Box<sweep::SweepCmd>),
    /// Attribute the tail to its causes: a factorial (or resolution-IV fractional) design
    /// over configuration keys, replicated in randomised blocks, analysed by quantile
    /// regression with CIs from a cluster bootstrap over runs (docs/attribute.md).
    Attribute(Box<attribute::AttributeCmd>),
    /// Why were a run's slow requests slow: its `anatomy` (a run made with --explain).
    Explain(explain::ExplainCmd),
    /// TailWAG's validation: measure an app, fit its service times, run the
    /// fitted synthetic workload at the same loads, and compare the tails.
    ///
    /// Each point measures the app's own default length unless --requests or --duration
    /// is given: 20 000 requests; middleware 200 000 (about 20 collector pauses) after a
    /// 5 s warmup; oltp-disk 3 000, translate 5 000, speech 1 000 (one round).
    Tailwag(Box<tailwag::TailwagCmd>),
    /// Reproduce a seed paper's figure or table on this machine: runs, page, computed verdict.
    Reproduce(Box<reproduce::ReproduceCmd>),
    /// The configuration's keys (`keys`) and a resolved configuration (`show`).
    Config {
        #[command(subcommand)]
        cmd: config_cmd::ConfigCmd,
    },
    /// Write an HTML report (figures, tables, checks) for a results folder.
    Report {
        /// A run, experiment or sweep folder.
        results: PathBuf,
        /// Where to write index.html (default RESULTS/report).
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Compare two results folders point by point, with significance.
    Compare {
        a: PathBuf,
        b: PathBuf,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Fit measured service times with a mixture of log-normals (with per-request records
    /// also: a slow request that comes at regular gaps, and whether the order of service
    /// times matters); print the synth settings.
    Fit(fit::FitArgs),
    /// List the apps and their --set keys.
    Apps,
    /// The queueing-theory ideal for a load (exact FIFO replay + closed forms).
    Model(model::ModelArgs),
    /// Is this host fit for tail measurements now? Show, tune or reset its settings.
    System {
        #[command(subcommand)]
        cmd: system::SystemCmd,
    },
    /// One run inside a Slurm task (written by `--executor slurm`).
    #[command(hide = true)]
    SlurmTask(slurm::TaskCmd),
    /// A node's environment monitor in a `--launcher slurm` run.
    #[command(hide = true)]
    SlurmNodeMonitor(slurm::NodeMonitorCmd),
    /// Prepare or locate app input data.
    Data {
        #[command(subcommand)]
        cmd: DataCmd,
    },
}

#[derive(Subcommand)]
enum DataCmd {
    /// Build an app's input data set (idempotent; also done on first use).
    Prepare {
        /// App name, or `all`.
        app: String,
        /// App settings that affect the data, as key=value.
        #[arg(long = "set", value_name = "KEY=VALUE")]
        set: Vec<String>,
    },
    /// Print where app data lives ($TAILLAB_DATA or ~/.local/share/taillab).
    Path,
}

fn main() {
    let _ = taillab_core::summary::BUILD_GIT.set(env!("TAILLAB_GIT"));
    let cli = Cli::try_parse().unwrap_or_else(|e| usage_error(e));
    quiet_on_closed_stdout();
    let code = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(cli.cmd))) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => {
            eprintln!("error: {}", one_line(&e));
            2
        }
        // The reader of stdout went away (the panic unwound, so running work was stopped
        // and cleaned up); 141 is what a shell reports for a writer SIGPIPE ended.
        Err(_) if STDOUT_CLOSED.load(std::sync::atomic::Ordering::SeqCst) => 141,
        Err(p) => std::panic::resume_unwind(p),
    };
    std::process::exit(code);
}

static STDOUT_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `taillab config keys | head` closes stdout early. SIGPIPE stays ignored, as Rust sets it:
/// the coordinator writes to its clients' stdin pipes, and a client that died must not kill
/// it. So printing fails with EPIPE and `println!` panics; this hook keeps that one panic
/// quiet (no message, no backtrace) and lets it unwind, so `main` exits with 141.
fn quiet_on_closed_stdout() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let p = info.payload();
        let msg = p
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| p.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            STDOUT_CLOSED.store(true, std::sync::atomic::Ordering::SeqCst);
            return;
        }
        default_hook(info);
    }));
}

/// An error and its causes on one line, each cause once: many messages
/// already quote their cause (`{what}: {source}`).
fn one_line(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain().map(|c| c.to_string()) {
        if !msg.contains(&cause) {
            if !msg.is_empty() {
                msg.push_str(": ");
            }
            msg.push_str(&cause);
        }
    }
    msg
}

/// A command-line error as one line (clap's own first line and its tip),
/// exit 2; `--help` and `--version` print as usual.
fn usage_error(e: clap::Error) -> ! {
    if !e.use_stderr() {
        e.exit();
    }
    let text = e.to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut msg = lines
        .next()
        .unwrap_or("error: bad command line")
        .to_string();
    for tip in lines.filter(|l| l.starts_with("tip:")) {
        msg.push_str("; ");
        msg.push_str(tip);
    }
    if let Some(bad) = msg
        .split('\'')
        .nth(1)
        .filter(|a| a.parse::<f64>().is_ok_and(|x| x < 0.0))
    {
        msg.push_str(&format!(
            "; `{bad}` is read as a flag: values here are never negative"
        ));
    }
    eprintln!("{msg} (see --help)");
    std::process::exit(2);
}

fn dispatch(cmd: Cmd) -> anyhow::Result<i32> {
    if matches!(
        cmd,
        Cmd::Run(_)
            | Cmd::Sweep(_)
            | Cmd::Attribute(_)
            | Cmd::Tailwag(_)
            | Cmd::Reproduce(_)
            | Cmd::SlurmTask(_)
    ) {
        // Ctrl-C or SIGTERM stops a run's hogs and restores its knobs before exiting.
        taillab_interfere::signals::install()?;
    }
    match cmd {
        Cmd::Run(a) => run::run(*a),
        Cmd::Model(a) => model::run(a),
        Cmd::Fit(a) => fit::run(a),
        Cmd::Explain(a) => explain::explain_cmd(a),
        Cmd::System { cmd } => system::run(cmd),
        Cmd::Sweep(a) => sweep::sweep(*a),
        Cmd::Serve(a) => serve::serve_cmd(*a),
        Cmd::Load(a) => serve::load_cmd(*a),
        Cmd::Config { cmd } => config_cmd::run(cmd),
        Cmd::Attribute(a) => attribute::attribute(*a),
        Cmd::Tailwag(a) => tailwag::tailwag(*a),
        Cmd::Reproduce(a) => reproduce::reproduce(*a),
        Cmd::SlurmTask(a) => slurm::task(a),
        Cmd::SlurmNodeMonitor(a) => slurm::node_monitor(a),
        Cmd::Report { results, out } => {
            let mut args = vec!["report".to_string(), results.display().to_string()];
            if let Some(o) = out {
                args.extend(["--out".to_string(), o.display().to_string()]);
            }
            analysis::run_python(&args)
        }
        Cmd::Compare { a, b, out } => {
            let mut args = vec![
                "compare".to_string(),
                a.display().to_string(),
                b.display().to_string(),
            ];
            if let Some(o) = out {
                args.extend(["--out".to_string(), o.display().to_string()]);
            }
            analysis::run_python(&args)
        }
        Cmd::Apps => {
            for app in apps::all() {
                println!("{:<12} {}", app.name(), app.about());
                for k in app.keys() {
                    println!(
                        "    --set {}=…  (default {})  {}",
                        k.name, k.default, k.help
                    );
                }
            }
            Ok(0)
        }
        Cmd::Data { cmd: DataCmd::Path } => {
            println!("{}", taillab_core::DataCtx::from_env().root.display());
            Ok(0)
        }
        Cmd::Data {
            cmd: DataCmd::Prepare { app, set },
        } => {
            let ctx = taillab_core::DataCtx::from_env();
            let params = taillab_core::Params::parse(set.iter().map(|s| s.as_str()))?;
            let list = if app == "all" {
                apps::all()
            } else {
                vec![apps::find(&app)?]
            };
            for a in list {
                params.check_keys(a.name(), a.keys())?;
                // The folder is the app's to name (oltp's depends on the
                // warehouses, search's on the corpus): it says so when it builds.
                eprintln!(
                    "preparing data for {} under {}",
                    a.name(),
                    ctx.root.display()
                );
                a.prepare(&ctx, &params)?;
            }
            Ok(0)
        }
    }
}
