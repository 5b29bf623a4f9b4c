//! `environment`: what else ran on the host during the measured phase, as the
//! environment monitor (taillab-monitor) summarises it, and `environment_redo`: the
//! disturbed runs a point redid. The monitor computes these figures and judges them
//! (`checks.environment`); the data lives here so that `Summary` can hold it typed.

use std::collections::BTreeMap;
use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// CPU use of one foreign process name over a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ForeignProcess {
    /// `comm` of the process (15 bytes at most), or `parent (children)` for
    /// CPU of short-lived children reaped by `parent`.
    pub name: String,
    /// Mean CPU over the phase, % of one CPU.
    pub cpu_pct: f64,
    /// Pids with this name, heaviest first (at most 8).
    pub pids: Vec<i32>,
    /// The command line of one of them, when it could still be read.
    pub cmdline: Option<String>,
}

/// CPU use of the processes that descend from one experiment process (the
/// harness, a server or client process, a hog), by name, over a phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ChildProcess {
    /// `comm` of the processes, or `parent (children)` for CPU of
    /// short-lived children reaped by `parent`.
    pub name: String,
    /// Mean CPU over the phase, % of one CPU.
    pub cpu_pct: f64,
    /// Pids with this name, heaviest first (at most 8).
    pub pids: Vec<i32>,
}

/// Totals of a process over the measured phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ProcTotals {
    /// The process id.
    pub pid: i32,
    /// Mean CPU, % of one CPU.
    pub cpu_pct: f64,
    /// Highest mean CPU over any ~1 s window, % of one CPU.
    pub cpu_max_1s_pct: f64,
    /// Largest resident set seen at a sample's end, bytes.
    pub rss_max_bytes: u64,
    /// Minor page faults over the phase.
    pub minflt: u64,
    /// Major page faults (read from disk) over the phase.
    pub majflt: u64,
    /// Voluntary context switches over the phase.
    pub vol_cs: u64,
    /// Involuntary context switches (preemptions) over the phase.
    pub invol_cs: u64,
    /// Mean CPU of the processes that descend from it (helper processes
    /// such as translate's Apertium stages, a hog's workers), % of one CPU.
    /// Part of the experiment, so not in `foreign_cpu_pct`.
    #[serde(default)]
    pub children_cpu_pct: f64,
    /// Those descendants by name, heaviest first.
    #[serde(default)]
    pub children: Vec<ChildProcess>,
    /// Bytes it made the block layer read or write over the phase.
    #[serde(default)]
    pub storage_bytes: u64,
}

/// Totals of one thread of the harness over the measured phase.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct ThreadTotals {
    /// Kernel thread id.
    pub tid: i32,
    /// Thread name (`comm`).
    pub name: String,
    /// Counted as a worker (the monitor's `ThreadInfo::worker`).
    pub worker: bool,
    /// Mean CPU, % of one CPU.
    pub cpu_pct: f64,
    /// Time runnable but waiting for a CPU, % of the phase.
    pub runq_wait_pct: f64,
    /// Voluntary context switches over the phase (0 for non-workers).
    pub vol_cs: u64,
    /// Involuntary context switches over the phase (0 for non-workers).
    pub invol_cs: u64,
    /// `invol_cs` per second of the phase: the figure the check limits.
    pub invol_per_s: f64,
    /// Highest involuntary switch rate over any ~1 s window.
    pub invol_max_1s_per_s: f64,
    /// Minor page faults over the phase (0 for non-workers).
    pub minflt: u64,
    /// Major page faults over the phase (0 for non-workers).
    pub majflt: u64,
    /// CPUs it was seen on.
    pub cpus: Vec<u32>,
}

/// What the sampler cost, in the summary.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct SamplerCostSummary {
    /// CPU time per sample without a process scan, µs.
    pub us_per_sample: f64,
    /// CPU time per process scan on top of a sample, µs.
    pub us_per_scan: f64,
    /// Mean CPU of the sampler thread, % of one CPU.
    pub cpu_pct: f64,
    /// Samples that started more than one period late (a starved sampler: a busy host).
    pub late_samples: u64,
    /// Longest delay between a phase mark and the sampler's reading, ms.
    pub max_mark_delay_ms: f64,
}

/// The `environment` section of `summary.json`: totals and maxima over the
/// measured phase. CPU figures are % of one CPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, JsonSchema)]
pub struct EnvSummary {
    /// False when the harness never marked the measured phase; the figures
    /// then cover the whole time the sampler ran.
    pub phase_marked: bool,
    /// Seconds covered by the samples summarised.
    pub measured_s: f64,
    /// Samples summarised.
    pub samples: usize,
    /// CPUs seen (highest CPU number + 1, so offline CPUs in between count).
    pub ncpu: usize,
    /// Mean hypervisor steal, summed over CPUs: the figure the check limits.
    pub steal_pct: f64,
    /// Highest mean steal over any ~1 s window.
    pub steal_max_1s_pct: f64,
    /// Mean steal of each CPU (index = CPU number), % of that CPU.
    pub steal_per_cpu_pct: Vec<f64>,
    /// Mean busy CPU (user + nice + system + irq + softirq).
    pub host_busy_pct: f64,
    /// Mean user-mode CPU, nice included.
    pub host_user_pct: f64,
    /// Mean kernel-mode CPU, interrupts excluded.
    pub host_system_pct: f64,
    /// Mean idle-with-I/O-outstanding time.
    pub host_iowait_pct: f64,
    /// Mean hardware-interrupt time.
    pub host_irq_pct: f64,
    /// Mean softirq time.
    pub host_softirq_pct: f64,
    /// Mean context switches per second, host-wide.
    pub ctxt_per_s: f64,
    /// Highest context-switch rate over any ~1 s window.
    pub ctxt_max_1s_per_s: f64,
    /// Mean interrupts per second, host-wide.
    pub intr_per_s: f64,
    /// Highest 1-minute load average read at a sample.
    pub load1_max: f64,
    /// Host user+nice+system not used by the harness, its extra processes or
    /// any process descending from them.
    pub foreign_cpu_pct: f64,
    /// Highest foreign CPU over any ~1 s window.
    pub foreign_cpu_max_1s_pct: f64,
    /// The biggest foreign consumers by name.
    pub top_foreign: Vec<ForeignProcess>,
    /// Foreign CPU that the process scans could not put a name on.
    pub foreign_unattributed_pct: f64,
    /// This process.
    pub harness: ProcTotals,
    /// The experiment's other processes, by pid.
    pub extra: Vec<ProcTotals>,
    /// Worker threads seen in the phase.
    pub workers: Vec<ThreadTotals>,
    /// The harness's other threads seen in the phase (the sampler's own excepted).
    pub other_threads: Vec<ThreadTotals>,
    /// What the sampler cost.
    pub sampler: SamplerCostSummary,
}

impl EnvSummary {
    /// Names the descendants of the harness and of each extra process
    /// (`children`, keyed by the pid they descend from), the `top_n`
    /// heaviest of each.
    pub fn attach_children(
        &mut self,
        mut children: BTreeMap<i32, Vec<ChildProcess>>,
        top_n: usize,
    ) {
        let mut take = |pid: i32| {
            let mut v = children.remove(&pid).unwrap_or_default();
            v.truncate(top_n);
            v
        };
        self.harness.children = take(self.harness.pid);
        for e in &mut self.extra {
            e.children = take(e.pid);
        }
    }

    /// The top foreign consumers as `name 12.3 % (pid 42)` or
    /// `name 20.0 % (pids 42, 43)` (heaviest pids first).
    pub fn foreign_names(&self) -> String {
        let v: Vec<String> = self
            .top_foreign
            .iter()
            .filter(|f| f.cpu_pct >= 0.05)
            .map(|f| match f.pids.len() {
                0 => format!("{} {:.1} %", f.name, f.cpu_pct),
                1 => format!("{} {:.1} % (pid {})", f.name, f.cpu_pct, f.pids[0]),
                _ => {
                    let p: Vec<String> = f.pids.iter().take(3).map(|p| p.to_string()).collect();
                    format!("{} {:.1} % (pids {})", f.name, f.cpu_pct, p.join(", "))
                }
            })
            .collect();
        if v.is_empty() {
            "no process could be named".into()
        } else {
            v.join(", ")
        }
    }

    /// CPU of the experiment's own descendant processes (the harness's and the other
    /// experiment processes' children), % of one CPU.
    pub fn own_helpers_cpu_pct(&self) -> f64 {
        self.harness.children_cpu_pct + self.extra.iter().map(|p| p.children_cpu_pct).sum::<f64>()
    }

    /// Bytes the experiment's processes (the harness and the extra ones) made the block
    /// layer read or write over the phase.
    pub fn own_storage_bytes(&self) -> u64 {
        self.harness.storage_bytes + self.extra.iter().map(|p| p.storage_bytes).sum::<u64>()
    }

    /// The experiment's own descendant processes, heaviest first (`apertium-transfer 21.0 %, ...`,
    /// at most five), with their total.
    pub fn own_helper_names(&self) -> String {
        let mut v: Vec<&ChildProcess> = std::iter::once(&self.harness)
            .chain(&self.extra)
            .flat_map(|p| &p.children)
            .collect();
        v.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct));
        let names: Vec<String> = v
            .iter()
            .take(5)
            .map(|c| format!("{} {:.1} %", c.name, c.cpu_pct))
            .collect();
        format!(
            "{:.0} % of a CPU: {}",
            self.own_helpers_cpu_pct(),
            names.join(", ")
        )
    }
}

impl fmt::Display for EnvSummary {
    /// A few lines for the human run table.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "environment over {:.1} s{}: steal {:.2} % (max 1 s {:.1} %), foreign CPU {:.1} % (max 1 s {:.1} %), host busy {:.0} % of {} CPUs",
            self.measured_s,
            if self.phase_marked { "" } else { " (whole run, phase not marked)" },
            self.steal_pct,
            self.steal_max_1s_pct,
            self.foreign_cpu_pct,
            self.foreign_cpu_max_1s_pct,
            self.host_busy_pct,
            self.ncpu
        )?;
        if self.foreign_cpu_pct >= 0.5 {
            writeln!(f, "  foreign: {}", self.foreign_names())?;
        }
        writeln!(
            f,
            "  harness: CPU {:.0} %, RSS max {:.1} MiB, faults {} minor / {} major, ctx switches {} vol / {} invol",
            self.harness.cpu_pct,
            self.harness.rss_max_bytes as f64 / (1 << 20) as f64,
            self.harness.minflt,
            self.harness.majflt,
            self.harness.vol_cs,
            self.harness.invol_cs
        )?;
        write_children(f, &self.harness)?;
        for x in &self.extra {
            writeln!(
                f,
                "  process {} (server/client): CPU {:.0} %, RSS max {:.1} MiB, faults {} minor / {} major, ctx switches {} vol / {} invol",
                x.pid,
                x.cpu_pct,
                x.rss_max_bytes as f64 / (1 << 20) as f64,
                x.minflt,
                x.majflt,
                x.vol_cs,
                x.invol_cs
            )?;
            write_children(f, x)?;
        }
        for w in &self.workers {
            writeln!(
                f,
                "  worker {} ({}): CPU {:.0} %, run-queue wait {:.2} %, invol {:.1}/s, vol {}, CPUs {:?}",
                w.tid, w.name, w.cpu_pct, w.runq_wait_pct, w.invol_per_s, w.vol_cs, w.cpus
            )?;
        }
        Ok(())
    }
}

/// `    its processes: CPU 12 % (lt-proc 8.0 %, apertium-transf 3.1 %)`, when any.
fn write_children(f: &mut fmt::Formatter<'_>, p: &ProcTotals) -> fmt::Result {
    if p.children_cpu_pct < 0.05 && p.children.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = p
        .children
        .iter()
        .take(4)
        .map(|c| format!("{} {:.1} %", c.name, c.cpu_pct))
        .collect();
    writeln!(
        f,
        "    its child processes: CPU {:.1} % ({})",
        p.children_cpu_pct,
        names.join(", ")
    )
}

/// One node's environment over a networked run's measured phase (`nodes` of
/// summary.json, from the monitor each Slurm node ran): its figures, or why
/// there are none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeReport {
    /// The node's host name.
    pub node: String,
    /// What ran there: `server`, `client 0`, ...
    pub roles: Vec<String>,
    /// Its figures, or the error that left it unmonitored.
    #[serde(flatten)]
    pub outcome: NodeOutcome,
}

/// What a node's monitor reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum NodeOutcome {
    /// The node was monitored.
    Env(NodeEnv),
    /// It was not: the monitor did not start, exited, or sent nothing readable.
    Error {
        /// Why, in words.
        error: String,
    },
}

impl NodeReport {
    /// Whether the node was monitored and its check passed.
    pub fn ok(&self) -> bool {
        matches!(&self.outcome, NodeOutcome::Env(e) if e.ok)
    }
}

/// A monitored node's figures (a subset of [`EnvSummary`]) and its check.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NodeEnv {
    /// Whether the node's environment check passed.
    pub ok: bool,
    /// Why it failed, one sentence each.
    pub reasons: Vec<String>,
    /// What passed only because it was put down to the experiment itself.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Seconds covered by its samples.
    pub measured_s: f64,
    /// CPUs seen.
    pub ncpu: usize,
    /// Mean hypervisor steal, % of one CPU.
    pub steal_pct: f64,
    /// Highest steal over any ~1 s window.
    pub steal_max_1s_pct: f64,
    /// Mean CPU of processes outside the job, % of one CPU.
    pub foreign_cpu_pct: f64,
    /// Highest foreign CPU over any ~1 s window.
    pub foreign_cpu_max_1s_pct: f64,
    /// Mean busy CPU of the node.
    pub host_busy_pct: f64,
    /// The biggest foreign consumers by name.
    pub top_foreign: Vec<ForeignProcess>,
    /// The job's processes on the node (counted as the experiment's own).
    pub job_pids: Vec<i32>,
}

/// `environment_redo`: a point's disturbed runs that were set aside and run
/// again with the same seed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct EnvironmentRedo {
    /// Times this run was redone.
    pub redone: usize,
    /// Redos allowed per run (`redo_disturbed`).
    pub budget: usize,
    /// The runs set aside, in order.
    pub discarded: Vec<DiscardedRun>,
}

/// One disturbed run set aside.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DiscardedRun {
    /// Where its folder was moved.
    pub moved_to: String,
    /// Its `checks.environment` verdict.
    pub reason: String,
}
