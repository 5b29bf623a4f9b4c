//! `--executor slurm`: a sweep's runs as Slurm jobs, written into the
//! shared results folder exactly as the local executor writes them.
//!
//! Each point's missing runs are one job array (`sbatch --array=K,…`); array
//! task K is run K of the point: `taillab slurm-task` reads the point's
//! resolved configuration, derives the run's seed with the same function as
//! a local run and runs it into `points/<id>/run-K/` with the same code
//! (disturbed runs redone alike). Job scripts, task output and the list of
//! submitted jobs live in `OUT/slurm/`, beside the results tree.
//!
//! **Rounds.** Which runs a point needs is decided by the experiment code
//! itself: the point is aggregated as a resumed local point would be
//! (`taillab_core::experiment::run_point`), and the first run it lacks is
//! what to submit next. A point's first round is its `min_runs` (one run
//! without a CI target); while the target is not met, each round adds
//! `slurm_batch` runs, up to `max_runs`. All points' rounds run at once, so
//! the cluster runs the whole sweep in parallel; with `slurm_batch = 1` each
//! point gets exactly the runs, seeds and aggregate a local sweep gives it.
//! A larger batch saves rounds; runs past the point where the target was met
//! are kept as `run-K.unused`, outside the aggregate.
//!
//! **Failures.** A task that ends without its run's `summary.json` (its job
//! failed, hit its time limit, was preempted or cancelled, a node died, or
//! `sbatch` refused it) stops its point for this invocation; the other
//! points go on. At the end every failed run is listed with Slurm's state
//! and the end of the task's stderr, and `--resume` submits only what is
//! still missing (after waiting for tasks of the interrupted sweep that are
//! still queued or running, so two tasks never write one run).

use crate::experiment::{point_bar, point_value, run_redoing_disturbed};
use crate::runner::{app_of, run_once, warn_if_saturating};
use anyhow::{bail, Context};
use clap::Args;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use taillab_core::config::experiment::{Point, Sweep};
use taillab_core::config::fields::monitor_defaults;
use taillab_core::config::fields::Launcher;
use taillab_core::config::{Dur, RunConfig, Topology};
use taillab_core::experiment::{run_point as aggregate_point, run_seed, Aggregate, CiTarget};
use taillab_core::Summary;
use taillab_transport::launch::sh_quote;
use taillab_transport::slurm::job_pids;

/// Slurm states after which a task never runs again.
const ENDED: &[&str] = &[
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "SPECIAL_EXIT",
];

/// A run the experiment code asked for that has no summary yet.
#[derive(Debug)]
struct Missing(usize);

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run-{} is missing", self.0)
    }
}

impl std::error::Error for Missing {}

/// One point as the executor sees it: where its runs go, where its job
/// files go, and how it stands.
struct Slot<'a> {
    point: &'a Point,
    dir: PathBuf,
    jobs_dir: PathBuf,
    agg: Option<Aggregate>,
    failed: bool,
}

/// A submitted task: the point's slot and the run it makes (`None`: a
/// single run into a folder of its own, e.g. a saturation probe).
#[derive(Clone)]
struct Task {
    /// Slurm's job id and array index.
    job: String,
    index: String,
    slot: usize,
    run: Option<usize>,
    out: PathBuf,
    stderr: PathBuf,
}

/// The sweep's Slurm client: its settings and the results folder (an
/// [`crate::executor::Executor`]).
pub struct Slurm<'a> {
    sweep: &'a Sweep,
    out: PathBuf,
    quiet: bool,
    /// The jobs this invocation submitted: what Ctrl-C cancels.
    submitted: Arc<Mutex<Vec<String>>>,
    /// Its cleanup in the signal handler's registry, while it lives.
    cleanup: u64,
}

impl Drop for Slurm<'_> {
    fn drop(&mut self) {
        taillab_interfere::signals::unregister(self.cleanup);
    }
}

/// On SIGINT/SIGTERM/SIGHUP (Ctrl-C; the handler then ends the process): cancels the
/// jobs this invocation submitted — queued tasks would otherwise run on with nobody to
/// collect them — and says what is kept and how to go on.
fn cancel_on_signal(submitted: &Mutex<Vec<String>>, out: &Path) {
    let jobs = submitted.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let what = if jobs.is_empty() {
        "no Slurm job was submitted yet".to_string()
    } else {
        match Command::new("scancel")
            .args(&jobs)
            .stdin(Stdio::null())
            .output()
        {
            Ok(o) if o.status.success() => format!("cancelled Slurm job(s) {}", jobs.join(",")),
            Ok(o) => format!(
                "scancel {} failed ({}): {}; cancel them yourself",
                jobs.join(" "),
                o.status,
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => format!(
                "could not run scancel ({e}): cancel job(s) {} yourself",
                jobs.join(",")
            ),
        }
    };
    eprintln!(
        "taillab: interrupted: {what}; finished runs are kept in {} — --resume continues",
        out.display()
    );
}

impl<'a> Slurm<'a> {
    /// The executor of a sweep writing into `out`; fails when Slurm's
    /// client commands are missing.
    pub fn new(sweep: &'a Sweep, out: &Path, quiet: bool) -> anyhow::Result<Self> {
        for prog in ["sbatch", "squeue"] {
            let ok = Command::new(prog)
                .arg("--version")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if ok.is_err() {
                bail!("`{prog}` not found: --executor slurm needs Slurm's client commands on PATH (Debian: slurm-client) and a cluster they reach; or run with --executor local");
            }
        }
        std::fs::create_dir_all(out.join("slurm"))
            .with_context(|| format!("creating {}", out.join("slurm").display()))?;
        let out = out
            .canonicalize()
            .with_context(|| format!("resolving {}", out.display()))?;
        let submitted: Arc<Mutex<Vec<String>>> = Default::default();
        let cleanup = {
            let (submitted, out) = (submitted.clone(), out.clone());
            taillab_interfere::signals::register(move || cancel_on_signal(&submitted, &out))
        };
        Ok(Slurm {
            sweep,
            out,
            quiet,
            submitted,
            cleanup,
        })
    }

    fn say(&self, bar: Option<&indicatif::ProgressBar>, line: &str) {
        match bar {
            Some(b) => b.println(line),
            None if !self.quiet => eprintln!("{line}"),
            None => {}
        }
    }

    /// Where a folder of the results tree keeps its Slurm files.
    fn jobs_dir(&self, dir: &Path) -> PathBuf {
        self.out
            .join("slurm")
            .join(dir.strip_prefix(&self.out).unwrap_or(dir))
    }

    /// Runs every point's runs (into `dir` each) to its stopping rule and
    /// returns their aggregates, in order.
    pub fn run_points(
        &self,
        points: &[(&Point, PathBuf)],
        ci: &CiTarget,
    ) -> anyhow::Result<Vec<Aggregate>> {
        self.wait_for_leftovers()?;
        let mut slots = Vec::new();
        for (p, dir) in points {
            app_of(&p.config).map(|app| warn_if_saturating(&app, &p.config))?;
            let dir = self.out.join(dir.strip_prefix(&self.out).unwrap_or(dir));
            let jobs_dir = self.jobs_dir(&dir);
            std::fs::create_dir_all(&jobs_dir)?;
            std::fs::write(jobs_dir.join("point.toml"), p.config.to_toml())?;
            slots.push(Slot {
                point: p,
                dir,
                jobs_dir,
                agg: None,
                failed: false,
            });
        }
        let total = (points.len() * ci.max_runs) as u64;
        let bar = (!self.quiet).then(|| point_bar(total));
        let mut failures = Vec::new();
        loop {
            let tasks = self.submit_round(&mut slots, ci, &mut failures, bar.as_ref())?;
            if tasks.is_empty() {
                break;
            }
            for (task, why) in self.wait(&tasks, bar.as_ref().map(|b| (b, &slots[..], ci)))? {
                let s = &mut slots[task.slot];
                s.failed = true;
                let run = task.run.map_or("?".into(), |k| k.to_string());
                failures.push(format!("{} run-{run}: {why}", s.point.id));
            }
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        if !failures.is_empty() {
            for f in &failures {
                eprintln!("failed: {f}");
            }
            bail!(
                "{} run(s) failed under Slurm (listed above; task output in {}); every finished run is kept: rerun with --resume to run the rest",
                failures.len(),
                self.out.join("slurm").display()
            );
        }
        Ok(slots
            .into_iter()
            .map(|s| s.agg.expect("every point settled"))
            .collect())
    }

    /// Submits the next runs of every point not settled yet (one job array
    /// each); returns their tasks. A refused submission fails its point.
    fn submit_round(
        &self,
        slots: &mut [Slot],
        ci: &CiTarget,
        failures: &mut Vec<String>,
        bar: Option<&indicatif::ProgressBar>,
    ) -> anyhow::Result<Vec<Task>> {
        let mut tasks = Vec::new();
        for (i, s) in slots.iter_mut().enumerate() {
            if s.agg.is_some() || s.failed {
                continue;
            }
            let Some(k) = settle(s, ci)? else { continue };
            let want = self.wanted(s, k, ci);
            match self.submit_point(s, &want) {
                Ok(job) => {
                    let line = format!("slurm: job {job}: {} run(s) of {}", want.len(), s.point.id);
                    self.say(bar, &line);
                    tasks.extend(want.iter().map(|k| Task {
                        job: job.clone(),
                        index: k.to_string(),
                        slot: i,
                        run: Some(*k),
                        out: s.dir.join(format!("run-{k}")),
                        stderr: s.jobs_dir.join(format!("run-{k}.err")),
                    }));
                }
                Err(e) => {
                    s.failed = true;
                    failures.push(format!("{} runs {want:?}: {e:#}", s.point.id));
                }
            }
        }
        Ok(tasks)
    }

    /// The runs to submit for a point whose first missing run is `k`.
    fn wanted(&self, s: &Slot, k: usize, ci: &CiTarget) -> Vec<usize> {
        let upto = if k < ci.min_runs {
            ci.min_runs
        } else {
            (k + self.sweep.slurm_batch.max(1)).min(ci.max_runs)
        };
        (k..upto.max(k + 1))
            .filter(|j| !s.dir.join(format!("run-{j}/summary.json")).exists())
            .collect()
    }

    /// One job array for `runs` of a point; returns the job id.
    fn submit_point(&self, s: &Slot, runs: &[usize]) -> anyhow::Result<String> {
        let script = s.jobs_dir.join("task.sh");
        let exe = taillab_exe(&s.point.config)?;
        let body = format!(
            "#!/bin/sh\n# Written by taillab: array task K is run K of point {}.\nexec {} slurm-task --config {} --dir {} --run \"$SLURM_ARRAY_TASK_ID\"\n",
            s.point.id,
            sh_quote(&exe),
            sh_quote(&s.jobs_dir.join("point.toml").to_string_lossy()),
            sh_quote(&s.dir.to_string_lossy()),
        );
        std::fs::write(&script, body)?;
        let list: Vec<String> = runs.iter().map(|k| k.to_string()).collect();
        let mut args = vec![format!("--array={}", list.join(","))];
        args.extend(self.sbatch_args(&s.point.config, &s.point.id, &s.jobs_dir, "run-%a"));
        args.push(script.to_string_lossy().into_owned());
        self.sbatch(&args)
    }

    /// The sbatch options every job gets (the user's extra ones last).
    fn sbatch_args(&self, cfg: &RunConfig, name: &str, jobs_dir: &Path, stem: &str) -> Vec<String> {
        let sw = self.sweep;
        let name: String = name.chars().take(60).collect();
        let mut a = vec![
            "--parsable".to_string(),
            format!("--job-name=taillab-{name}"),
            format!(
                "--output={}",
                jobs_dir.join(format!("{stem}.out")).display()
            ),
            format!("--error={}", jobs_dir.join(format!("{stem}.err")).display()),
            format!("--chdir={}", self.out.display()),
            // The workers and the client (or the coordinator) each want a CPU.
            format!("--cpus-per-task={}", cfg.harness.threads + 1),
        ];
        if cfg.net.topology == Topology::Networked && cfg.net.launcher == Launcher::Slurm {
            a.push(format!(
                "--nodes={}",
                cfg.net.server_nodes + cfg.net.client_nodes
            ));
        }
        if let Some(p) = &sw.slurm_partition {
            a.push(format!("--partition={p}"));
        }
        if let Some(p) = &sw.slurm_account {
            a.push(format!("--account={p}"));
        }
        if let Some(t) = sw.slurm_time {
            a.push(format!("--time={}", slurm_time(t)));
        }
        if sw.slurm_exclusive {
            a.push("--exclusive".into());
        }
        a.extend(sw.slurm_args.0.iter().cloned());
        a
    }

    /// Runs sbatch, records the job for a later --resume, returns its id.
    fn sbatch(&self, args: &[String]) -> anyhow::Result<String> {
        let o = Command::new("sbatch")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running sbatch")?;
        if !o.status.success() {
            let err = String::from_utf8_lossy(&o.stderr);
            let lines: Vec<&str> = err
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect();
            bail!(
                "sbatch refused the job ({}): {}",
                o.status,
                lines.join(" | ")
            );
        }
        let text = String::from_utf8_lossy(&o.stdout);
        let job = text.trim().split(';').next().unwrap_or("").to_string();
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
            bail!("sbatch printed no job id (got {:?})", text.trim());
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out.join("slurm/jobs"))?;
        writeln!(f, "{job}")?;
        self.submitted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(job.clone());
        Ok(job)
    }

    /// Waits until every task ended; returns the tasks that left no
    /// summary, with why.
    fn wait(
        &self,
        tasks: &[Task],
        bar: Option<(&indicatif::ProgressBar, &[Slot], &CiTarget)>,
    ) -> anyhow::Result<Vec<(Task, String)>> {
        let mut jobs: Vec<String> = tasks.iter().map(|t| t.job.clone()).collect();
        jobs.dedup();
        let key = |t: &Task| (t.job.clone(), t.index.clone());
        let started = Instant::now();
        let mut last: BTreeMap<(String, String), String> = BTreeMap::new();
        let mut poll = Duration::from_millis(500);
        loop {
            let states = squeue(&jobs)?;
            last.extend(states.iter().map(|(k, v)| (k.clone(), v.clone())));
            // A task in an end state ended; so did one squeue lists no more.
            // Just after submission a task may not be listed yet.
            let open = tasks
                .iter()
                .filter(|t| match states.get(&key(t)) {
                    Some(st) => !ENDED.contains(&st.as_str()),
                    None => {
                        !last.contains_key(&key(t)) && started.elapsed() < Duration::from_secs(10)
                    }
                })
                .count();
            if let Some((b, slots, ci)) = bar {
                b.set_position(runs_done(slots, ci));
                b.set_message(count_states(&states, &jobs));
            }
            if open == 0 {
                break;
            }
            std::thread::sleep(poll);
            poll = (poll * 2).min(Duration::from_secs(5));
        }
        let mut failed = Vec::new();
        for t in tasks {
            let state = last.get(&key(t)).cloned();
            if summary_appears(&t.out, state.as_deref() == Some("COMPLETED")) {
                continue;
            }
            let state = state.unwrap_or_else(|| "ended (no longer listed by squeue)".into());
            let why = format!(
                "Slurm job {}_{} {state}; {}",
                t.job,
                t.index,
                stderr_tail(&t.stderr)
            );
            failed.push((t.clone(), why));
        }
        Ok(failed)
    }

    /// Waits for tasks of an earlier (interrupted) invocation that Slurm
    /// still runs, so a resubmitted run never has two writers.
    fn wait_for_leftovers(&self) -> anyhow::Result<()> {
        let path = self.out.join("slurm/jobs");
        let Ok(txt) = std::fs::read_to_string(&path) else {
            return Ok(());
        };
        let jobs: Vec<String> = txt
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        let mut told = false;
        loop {
            let open = squeue(&jobs)?
                .values()
                .filter(|s| !ENDED.contains(&s.as_str()))
                .count();
            if open == 0 {
                return Ok(());
            }
            if !told && !self.quiet {
                eprintln!("slurm: waiting for {open} task(s) of the earlier invocation to end (scancel them to stop waiting)");
                told = true;
            }
            std::thread::sleep(Duration::from_secs(2));
        }
    }

    /// One run of `cfg` into `dir` as a Slurm job (a saturation or SLO
    /// probe); returns its summary.
    pub fn run_one(&self, cfg: &RunConfig, dir: &Path) -> anyhow::Result<Summary> {
        let dir = self.out.join(dir.strip_prefix(&self.out).unwrap_or(dir));
        let jobs_dir = self.jobs_dir(&dir);
        std::fs::create_dir_all(&jobs_dir)?;
        let config = jobs_dir.join("config.toml");
        std::fs::write(&config, cfg.to_toml())?;
        let script = jobs_dir.join("task.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n# Written by taillab: one run into {}.\nexec {} slurm-task --config {} --dir {}\n",
                dir.display(),
                sh_quote(&taillab_exe(cfg)?),
                sh_quote(&config.to_string_lossy()),
                sh_quote(&dir.to_string_lossy())
            ),
        )?;
        let mut args = vec!["--array=0".to_string()];
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        args.extend(self.sbatch_args(cfg, &name, &jobs_dir, "run"));
        args.push(script.to_string_lossy().into_owned());
        let job = self.sbatch(&args)?;
        let task = Task {
            job,
            index: "0".into(),
            slot: 0,
            run: None,
            out: dir.clone(),
            stderr: jobs_dir.join("run.err"),
        };
        let failed = self.wait(&[task], None)?;
        if let Some((_, why)) = failed.first() {
            bail!("{}: {why}", dir.display());
        }
        Ok(Summary::read(&dir.join("summary.json"))?)
    }
}

/// Aggregates a point from its finished runs with the experiment code;
/// `Some(k)`: run k is the first one it still needs.
fn settle(s: &mut Slot, ci: &CiTarget) -> anyhow::Result<Option<usize>> {
    let r = aggregate_point(
        &s.dir,
        &point_value(s.point),
        s.point.config.load.seed,
        ci,
        true,
        &mut |_, run_dir| -> anyhow::Result<Summary> {
            let k = run_index(run_dir).context("a run folder named run-K")?;
            Err(Missing(k).into())
        },
        &mut |_, _| {},
    );
    match r {
        Ok(agg) => {
            set_aside_unused(&s.dir, agg.runs)?;
            s.agg = Some(agg);
            Ok(None)
        }
        Err(e) => match e.downcast_ref::<Missing>() {
            Some(Missing(k)) => Ok(Some(*k)),
            None => Err(e.context(format!("point {}", s.point.id))),
        },
    }
}

fn run_index(dir: &Path) -> Option<usize> {
    dir.file_name()?
        .to_str()?
        .strip_prefix("run-")?
        .parse()
        .ok()
}

/// Runs a batch made past the point's stopping point: renamed, so readers
/// of the results tree see exactly the aggregated runs.
fn set_aside_unused(dir: &Path, used: usize) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if run_index(&p).is_some_and(|k| k >= used) && p.is_dir() {
            let to = p.with_file_name(format!(
                "{}.unused",
                p.file_name().unwrap_or_default().to_string_lossy()
            ));
            let _ = std::fs::remove_dir_all(&to);
            std::fs::rename(&p, &to).with_context(|| format!("moving {} aside", p.display()))?;
        }
    }
    Ok(())
}

/// Whether a run's summary exists. A task Slurm says completed gets up to
/// 30 s for it to show: a shared filesystem may take that long to show this
/// host a file another node wrote.
fn summary_appears(run_dir: &Path, completed: bool) -> bool {
    let p = run_dir.join("summary.json");
    let until = Instant::now() + Duration::from_secs(if completed { 30 } else { 0 });
    loop {
        // Listing the folder refreshes an NFS client's cached view of it.
        let _ = std::fs::read_dir(run_dir).map(|d| d.count());
        if p.exists() {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// The last lines of a task's stderr, for the failure report.
fn stderr_tail(path: &Path) -> String {
    let Ok(f) = std::fs::File::open(path) else {
        return format!("no stderr at {} (the task never started?)", path.display());
    };
    let lines: Vec<String> = std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return format!("its stderr ({}) is empty", path.display());
    }
    let tail = &lines[lines.len().saturating_sub(3)..];
    format!("stderr ({}): {}", path.display(), tail.join(" | "))
}

/// `(job, task) → state` for every task squeue still lists.
fn squeue(jobs: &[String]) -> anyhow::Result<BTreeMap<(String, String), String>> {
    let o = Command::new("squeue")
        .args([
            "-h",
            "-r",
            "-t",
            "all",
            "-o",
            "%F|%K|%T",
            "-j",
            &jobs.join(","),
        ])
        .stdin(Stdio::null())
        .output()
        .context("running squeue")?;
    let mut m = BTreeMap::new();
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        // Jobs purged from the controller's memory are simply not listed.
        if err.contains("Invalid job id") {
            return Ok(m);
        }
        bail!("squeue failed ({}): {}", o.status, err.trim());
    }
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.trim().split('|').collect();
        if let [job, task, state] = f.as_slice() {
            let task = if *task == "N/A" { "0" } else { task };
            m.insert((job.to_string(), task.to_string()), state.to_string());
        }
    }
    Ok(m)
}

fn count_states(states: &BTreeMap<(String, String), String>, jobs: &[String]) -> String {
    let mut n: BTreeMap<&str, usize> = BTreeMap::new();
    for s in states.values() {
        *n.entry(s.as_str()).or_default() += 1;
    }
    let parts: Vec<String> = n
        .iter()
        .map(|(s, c)| format!("{c} {}", s.to_lowercase()))
        .collect();
    format!("slurm job(s) {}: {}", jobs.join(","), parts.join(", "))
}

fn runs_done(slots: &[Slot], ci: &CiTarget) -> u64 {
    slots
        .iter()
        .map(|s| {
            (0..ci.max_runs)
                .filter(|k| s.dir.join(format!("run-{k}/summary.json")).exists())
                .count() as u64
        })
        .sum()
}

mod task;

pub use task::*;
#[cfg(test)]
mod tests;
