//! `--explain` in a run (its checks before anything starts, the tracer around the run, the
//! join after it) and `taillab explain RUN`, which prints a run's `anatomy` section.
//! The tracing and the join are taillab-explain's; this is where a run meets them.

use anyhow::{bail, Context};
use clap::Args;
use std::path::PathBuf;
use taillab_core::config::{ConfigValue, RunConfig, Topology};
use taillab_core::sections::Anatomy;
use taillab_core::{RunSpec, ShaperMode, Summary};
use taillab_explain::{Explainer, Joined, Request};

/// `taillab explain RUN`: the slow requests of an explained run and what took their time.
#[derive(Args, Debug)]
pub struct ExplainCmd {
    /// A run folder written with --explain.
    pub run: PathBuf,
    /// Print the `anatomy` section as JSON instead.
    #[arg(long)]
    pub json: bool,
}

/// Prints the section; exit 2 when the run has none.
pub fn explain_cmd(c: ExplainCmd) -> anyhow::Result<i32> {
    let path = c.run.join("summary.json");
    let s = Summary::read(&path)?;
    let Some(a) = s.anatomy else {
        bail!(
            "{} has no anatomy section: the run was not explained; rerun it with `taillab run --from {} --explain` (as root)",
            c.run.display(),
            c.run.display()
        );
    };
    if c.json {
        println!("{}", serde_json::to_string_pretty(&a)?);
    } else {
        print!("{}", a.table());
        print!("{}", worst_lines(&a));
    }
    Ok(0)
}

/// The slowest request's pieces, one a line.
fn worst_lines(a: &Anatomy) -> String {
    use taillab_core::dist::fmt_ns;
    let Some(w) = &a.worst else {
        return String::new();
    };
    let mut o = format!(
        "\nslowest request {} (worker {}): {} , {} page faults\n",
        w.id,
        w.worker,
        fmt_ns(w.sojourn_ns as f64),
        w.faults
    );
    for p in &w.pieces {
        o.push_str(&format!(
            "  +{:>9}  {:>9}  {:<10} {}\n",
            fmt_ns(p.start_ns as f64),
            fmt_ns(p.len_ns as f64),
            p.part,
            p.culprit.as_deref().unwrap_or("")
        ));
    }
    o
}

/// Checks before a run with `record.explain`: what it explains, and that this host can
/// trace (root, tracefs, the tracepoints, perf_event_paranoid). Nothing for other runs.
pub fn preflight(cfg: &RunConfig) -> anyhow::Result<()> {
    if !cfg.record.explain {
        return Ok(());
    }
    if cfg.net.topology == Topology::Networked {
        bail!("record.explain traces this host's CPUs: integrated and loopback runs only (drop --explain or use --topology loopback)");
    }
    if cfg.fanout.leaves > 1 || cfg.fanout.replicas > 1 {
        bail!("record.explain does not explain fan-out runs yet (a request there is many leaves' requests): drop --explain or --fanout");
    }
    if cfg.net.topology == Topology::Loopback && cfg.net.clients != 1 {
        bail!("record.explain over loopback joins one client's requests with the server's: use --clients 1");
    }
    if cfg.net.topology == Topology::Loopback && cfg.net.target.is_some() {
        bail!("record.explain over loopback needs the server it starts (its own stamps of each request): drop --target");
    }
    if cfg.net.topology == Topology::Integrated && cfg.harness.shaper == ShaperMode::Thread {
        bail!("record.explain cuts a request's lateness by its worker's timeline, which --shaper thread does not share: use the inline shaper (the default)");
    }
    let (spec, _) = cfg.run_spec()?;
    if !spec.keep_records {
        bail!(
            "record.explain joins every request's stamps: {} requests do not fit record.max_record_mem {}; raise --max-record-mem or measure fewer requests",
            spec.record_capacity(),
            cfg.record.max_record_mem.show()
        );
    }
    let cpu = cfg.harness.cpus.0.first().copied().unwrap_or(0);
    taillab_explain::preflight(cpu)?;
    Ok(())
}

/// The CPUs a run's workers use: their pins, else every CPU this process may use.
pub fn worker_cpus(spec: &RunSpec) -> Vec<usize> {
    let mut cpus: Vec<usize> = if spec.cpus.is_empty() {
        taillab_core::placement::allowed_cpus().unwrap_or_default()
    } else {
        (0..spec.total_workers())
            .map(|w| spec.cpus[w % spec.cpus.len()])
            .collect()
    };
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// The tracer of one integrated run.
pub struct Session {
    ex: Explainer,
    threads: usize,
}

impl Session {
    /// Starts tracing the workers' CPUs (just before the run: data preparation and the
    /// planned load's start are not traced).
    pub fn start(spec: &RunSpec) -> anyhow::Result<Session> {
        let ex = Explainer::start(worker_cpus(spec), spec.nice)
            .context("starting --explain's tracer")?;
        Ok(Session {
            ex,
            threads: spec.total_workers(),
        })
    }

    /// Learns the worker threads' ids while they run (from the run's progress reports).
    pub fn note_workers(&mut self) {
        self.ex.note_workers(self.threads);
    }

    /// Stops tracing and joins the trace with the run's records.
    pub fn finish(self, r: &taillab_core::RunResult) -> Joined {
        let requests: Vec<Request> = r
            .records
            .iter()
            .flat_map(|rec| rec.iter())
            .map(|(id, worker, measured, stamps)| Request {
                id,
                worker,
                sender: None,
                measured,
                stamps,
            })
            .collect();
        self.ex.finish(&requests)
    }
}

/// Writes the run's folder; an explained run's summary gets its `anatomy` section and its
/// records the `x_*` columns.
pub fn write_run(
    out: &std::path::Path,
    cfg: &RunConfig,
    summary: &mut Summary,
    result: &taillab_core::RunResult,
    explained: Option<Joined>,
) -> anyhow::Result<()> {
    let rows = explained.map(|j| {
        summary.anatomy = Some(j.section);
        j.rows
    });
    taillab_core::summary::write_run_explained(
        out,
        summary,
        result,
        cfg.record.save_requests,
        rows.as_deref(),
    )?;
    Ok(())
}

/// Index of a TCP client's sender thread among the join's threads (after any worker's).
const SENDER: usize = 1 << 20;

/// The tracer of a loopback run: the server's workers and the client's sender are threads
/// of other processes, on this host's clock.
pub struct Remote {
    /// The tracer, until [`Remote::finish`].
    ex: Option<Explainer>,
    /// The run's processes (the server first, then the client).
    pids: Vec<i32>,
    rows: Option<Vec<taillab_core::sections::AnatomyRow>>,
}

impl Remote {
    /// Starts tracing before the processes start, on the CPUs they are pinned to, else on
    /// every CPU; `None` without `record.explain`.
    pub fn start(cfg: &RunConfig) -> anyhow::Result<Option<Remote>> {
        if !cfg.record.explain {
            return Ok(None);
        }
        let (srv, cli) = (&cfg.harness.cpus.0, &cfg.net.client_cpus.0);
        let mut cpus: Vec<usize> = if srv.is_empty() || cli.is_empty() {
            taillab_core::placement::allowed_cpus().unwrap_or_default()
        } else {
            srv.iter().chain(cli).copied().collect()
        };
        cpus.sort_unstable();
        cpus.dedup();
        let ex = Explainer::start(cpus, cfg.harness.nice).context("starting --explain's tracer")?;
        Ok(Some(Remote {
            ex: Some(ex),
            pids: Vec::new(),
            rows: None,
        }))
    }

    /// The processes are up: the server's workers' page faults are traced from now on.
    pub fn started(&mut self, pids: &[i32]) {
        self.pids = pids.to_vec();
        let srv = pids
            .first()
            .map(|p| taillab_explain::threads_named(&p.to_string(), "taillab-srv-"))
            .unwrap_or_default();
        if let Some(ex) = &mut self.ex {
            ex.set_workers(srv);
        }
    }

    /// Stops tracing and joins: the client's records with the server's own stamps of each
    /// request; the section goes into `summary`.
    pub fn finish(&mut self, r: &taillab_core::RunResult, summary: &mut Summary) {
        let Some(ex) = self.ex.take() else {
            return;
        };
        let (trace, fault_ns) = ex.stop();
        let server: std::collections::HashMap<u64, [u64; 5]> = taillab_transport::explain::take()
            .into_iter()
            .map(|s| (s[0], s))
            .collect();
        let mut tids: Vec<u32> = server.values().map(|s| s[1] as u32).collect();
        tids.sort_unstable();
        tids.dedup();
        let mut threads: Vec<(usize, u32)> = tids.iter().copied().enumerate().collect();
        // The client's sender: its name in the trace, in the client's process.
        let client = self.pids.get(1).map(|p| *p as u32);
        let sender = trace.comms.iter().find(|(t, n)| {
            n.as_str() == "taillab-sender" && client.is_some_and(|c| trace.tgids.get(t) == Some(&c))
        });
        if let Some((t, _)) = sender {
            threads.push((SENDER, *t));
        }
        let requests = remote_requests(r, &server, &tids, sender.is_some());
        let j = taillab_explain::join(&trace, &threads, &requests, fault_ns);
        summary.anatomy = Some(j.section);
        self.rows = Some(j.rows);
    }

    /// The rows [`Remote::finish`] made.
    pub fn take_rows(&mut self) -> Option<Vec<taillab_core::sections::AnatomyRow>> {
        self.rows.take()
    }
}

/// The client's records with the server's stamps in place of the ones it placed from its
/// send time; a request the server did not log keeps the client's (its parts still sum).
/// The records keep the client's own stamps, which over loopback are this host's clock (the
/// result's timeline is relative to the clients' origin; the records are not).
fn remote_requests(
    r: &taillab_core::RunResult,
    server: &std::collections::HashMap<u64, [u64; 5]>,
    tids: &[u32],
    sender: bool,
) -> Vec<Request> {
    r.records
        .iter()
        .flat_map(|rec| rec.iter())
        .map(|(id, _, measured, mut stamps)| {
            let mut worker = 0;
            if let Some(s) = server.get(&id) {
                worker = tids.binary_search(&(s[1] as u32)).unwrap_or(0);
                (stamps.enqueued, stamps.started, stamps.finished) = (s[2], s[3], s[4]);
            }
            Request {
                id,
                worker,
                sender: sender.then_some(SENDER),
                measured,
                stamps,
            }
        })
        .collect()
}
