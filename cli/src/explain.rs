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
        let ex = Explainer::start(worker_cpus(spec)).context("starting --explain's tracer")?;
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
