//! Host knobs held for one run and restored when it ends: IRQ affinity, a
//! C-state limit, transparent huge pages, the real-time runtime limit, NUMA
//! binding of memory.
//!
//! Each knob is a typed setting value (`FromStr` + `Display` + serde as the
//! string) so that it can be a configuration key and a sweep axis, and is
//! recorded in the run's configuration. [`Tuning::apply`] changes what was
//! asked for and returns a [`TuningGuard`] that puts everything back when it
//! drops — at the end of the run, on an error, on a panic, and (through
//! [`crate::signals`]) on Ctrl-C.
//!
//! How each knob is restored, and what survives a SIGKILL:
//! - **IRQ affinity**, **THP** and the **real-time runtime limit** are system
//!   files: each prior value is
//!   saved in a journal file (the monitor's `Tuner` state format, at
//!   `taillab_monitor::default_run_journal_path()`) *before* the file is
//!   written. The guard writes them back and deletes the journal; after a
//!   SIGKILL the next [`Tuning::apply`] (or `taillab system reset`) does.
//! - **C-state limit**: a request on `/dev/cpu_dma_latency` lasts while the
//!   file stays open, so the guard holds it; the kernel drops it when the
//!   file closes, whatever ends the process. No journal needed.
//! - **NUMA binding**: `set_mempolicy(MPOL_BIND)` on the calling thread;
//!   threads it creates afterwards (the workers) inherit it. It is process
//!   state, so it ends with the process; the guard resets the calling
//!   thread to the default policy. Apply it on the thread that will spawn
//!   the workers, before it does.
//!
//! Why these knobs matter for the tail: interrupts served on a worker's CPU
//! delay the request it is running; waking a core from a deep C-state costs
//! tens to hundreds of microseconds, paid by the request that woke it;
//! khugepaged and compaction stall allocations when THP is `always`; memory
//! on the other socket's node costs every access a remote hop; the kernel
//! stops real-time threads that used up their runtime for the rest of each
//! period (50 ms a second by default), so a SCHED_FIFO worker that spins
//! stalls every second.

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use taillab_monitor::{ResetLine, SetOutcome, Tuner};

use crate::signals;
use crate::spec::CpuList;
pub use taillab_core::config::{DmaLatency, NumaNode, RtRuntime, ThpMode};
pub use taillab_core::sections::planned::{AppliedTuning, KnobState};

/// Why a knob could not be applied. Knobs already applied are restored
/// before this is returned.
#[derive(Debug, thiserror::Error)]
pub enum TuningError {
    #[error("IRQ CPUs {bad} are not online (online: {online}); pick online CPUs")]
    /// `irq_cpus` names CPUs that are not online.
    IrqCpus {
        /// The offline or missing CPUs, as a CPU list.
        bad: String,
        /// The online CPUs, as a CPU list.
        online: String,
    },
    #[error("no interrupt could be moved to CPUs {cpus}: {why} (run as root; on some VMs the hypervisor owns the interrupts)")]
    /// Not one interrupt accepted the new affinity.
    Irq {
        /// The CPUs asked for, as a CPU list.
        cpus: String,
        /// The first refusal (or that the host lists no IRQs).
        why: String,
    },
    #[error("cannot hold a C-state limit: {why} (needs root and /dev/cpu_dma_latency; leave dma_latency_us unset on this host)")]
    /// `/dev/cpu_dma_latency` could not be opened or written.
    DmaLatency {
        /// The OS error.
        why: String,
    },
    #[error("cannot set transparent huge pages to {mode}: {why} (needs root and /sys/kernel/mm/transparent_hugepage; leave thp unset on this host)")]
    /// The THP mode could not be written.
    Thp {
        /// The mode asked for.
        mode: String,
        /// Why the write was refused.
        why: String,
    },
    #[error("cannot set the real-time runtime limit to {value}: {why} (needs root and /proc/sys/kernel/sched_rt_runtime_us; leave tuning.rt_runtime unset on this host)")]
    /// `sched_rt_runtime_us` could not be written, or the value exceeds the period.
    RtRuntime {
        /// The value asked for, as the kernel takes it.
        value: String,
        /// Why it was refused.
        why: String,
    },
    #[error("NUMA node {node} does not exist: this host has node(s) {nodes}")]
    /// `numa_node` names a node this host does not have.
    NumaNode {
        /// The node asked for.
        node: u32,
        /// The host's nodes, as a list.
        nodes: String,
    },
    #[error("cannot bind memory to NUMA node {node}: {why}")]
    /// `set_mempolicy(MPOL_BIND)` failed.
    NumaBind {
        /// The node asked for.
        node: u32,
        /// The OS error.
        why: String,
    },
    #[error("the tuning journal {path}: {why} (delete it after restoring the settings it lists by hand)")]
    /// The journal of prior values could not be read, written or replayed.
    Journal {
        /// The journal file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// The knobs a run may hold. `None` leaves a knob as the host has it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tuning {
    /// Move every movable interrupt to these CPUs for the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq_cpus: Option<CpuList>,
    /// Hold this C-state limit (`/dev/cpu_dma_latency`) during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_latency: Option<DmaLatency>,
    /// Transparent huge pages mode during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp: Option<ThpMode>,
    /// Bind the memory of threads created after `apply` to this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<NumaNode>,
    /// Hold this real-time runtime limit (`sched_rt_runtime_us`) during the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt_runtime: Option<RtRuntime>,
}

/// Restores every knob of a [`Tuning`] when dropped (or at [`restore`](Self::restore)).
pub struct TuningGuard {
    journal: Tuner,
    dma: Option<File>,
    numa_bound: bool,
    applied: AppliedTuning,
    cleanup_id: Option<u64>,
    done: bool,
}

impl fmt::Debug for TuningGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TuningGuard")
            .field("journal", &self.journal.state_path())
            .field("applied", &self.applied)
            .field("done", &self.done)
            .finish()
    }
}

/// Online CPUs (`/sys/devices/system/cpu/online`).
pub fn online_cpus() -> Vec<usize> {
    taillab_core::placement::online_cpus().unwrap_or_default()
}

/// Online NUMA nodes (`/sys/devices/system/node/online`; `[0]` when the
/// kernel has no NUMA support: then all memory is one node).
pub fn numa_nodes() -> Vec<usize> {
    std::fs::read_to_string("/sys/devices/system/node/online")
        .ok()
        .and_then(|s| taillab_core::placement::parse_cpu_list(s.trim()).ok())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| vec![0])
}

/// Writes back what a journal saved (a run killed before it could) and
/// deletes it. Returns one line per setting; empty when there was none.
pub fn recover_journal(path: &Path) -> Result<Vec<ResetLine>, TuningError> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    Tuner::new(path.to_path_buf(), None)
        .reset()
        .map_err(|e| TuningError::Journal {
            path: path.to_path_buf(),
            why: e.to_string(),
        })
}

const THP_FILE: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
/// The real-time runtime limit and its period (µs).
pub const RT_RUNTIME_FILE: &str = "/proc/sys/kernel/sched_rt_runtime_us";
const RT_PERIOD_FILE: &str = "/proc/sys/kernel/sched_rt_period_us";

/// The real-time runtime limit in force now (µs of each period; `None`: no limit), and the
/// period, from /proc/sys/kernel.
pub fn read_rt_runtime() -> Option<(RtRuntime, u64)> {
    let num = |f: &str| -> Option<i64> { std::fs::read_to_string(f).ok()?.trim().parse().ok() };
    let rt = num(RT_RUNTIME_FILE)?;
    let period = u64::try_from(num(RT_PERIOD_FILE)?).ok()?;
    Some((RtRuntime(u32::try_from(rt).ok()), period))
}

impl Tuning {
    /// True when no knob is set.
    pub fn is_empty(&self) -> bool {
        *self == Tuning::default()
    }

    /// Checks what can be checked without changing anything.
    pub fn validate(&self) -> Result<(), TuningError> {
        if let Some(c) = &self.irq_cpus {
            let online = online_cpus();
            let bad: Vec<usize> = c
                .cpus()
                .iter()
                .copied()
                .filter(|x| !online.contains(x))
                .collect();
            if !bad.is_empty() {
                return Err(TuningError::IrqCpus {
                    bad: CpuList(bad).to_string(),
                    online: CpuList(online).to_string(),
                });
            }
        }
        if let Some(n) = self.numa_node {
            let nodes = numa_nodes();
            if !nodes.contains(&(n.0 as usize)) {
                return Err(TuningError::NumaNode {
                    node: n.0,
                    nodes: CpuList(nodes).to_string(),
                });
            }
        }
        Ok(())
    }

    /// Applies every knob with the default journal. See [`apply_with`](Self::apply_with).
    pub fn apply(&self) -> Result<TuningGuard, TuningError> {
        self.apply_with(&taillab_monitor::default_run_journal_path())
    }

    /// Restores whatever a killed run left in `journal`, then applies the
    /// knobs in order (IRQs, THP, RT runtime, C-states, NUMA). On an error the knobs
    /// applied so far are restored before it is returned.
    pub fn apply_with(&self, journal: &Path) -> Result<TuningGuard, TuningError> {
        self.validate()?;
        let recovered = recover_journal(journal)?;
        let jpath = journal.to_path_buf();
        let mut g = TuningGuard {
            journal: Tuner::new(jpath.clone(), None),
            dma: None,
            numa_bound: false,
            applied: AppliedTuning {
                knobs: Vec::new(),
                recovered: recovered.into_iter().map(|l| l.text).collect(),
            },
            cleanup_id: Some(signals::register(move || {
                let _ = recover_journal(&jpath);
            })),
            done: false,
        };
        if let Some(c) = &self.irq_cpus {
            let k = g.apply_irq(c)?;
            g.applied.knobs.push(k);
        }
        if let Some(m) = self.thp {
            let k = g.apply_thp(m)?;
            g.applied.knobs.push(k);
        }
        if let Some(r) = self.rt_runtime {
            let k = g.apply_rt_runtime(r)?;
            g.applied.knobs.push(k);
        }
        if let Some(d) = self.dma_latency {
            let k = g.apply_dma(d)?;
            g.applied.knobs.push(k);
        }
        if let Some(n) = self.numa_node {
            let k = g.apply_numa(n)?;
            g.applied.knobs.push(k);
        }
        Ok(g)
    }
}

fn journal_err(path: &Path, e: impl fmt::Display) -> TuningError {
    TuningError::Journal {
        path: path.to_path_buf(),
        why: e.to_string(),
    }
}

/// Every `/proc/irq/N/smp_affinity_list`, in IRQ order.
pub fn irq_affinity_files() -> Vec<PathBuf> {
    let mut irqs: Vec<u32> = std::fs::read_dir("/proc/irq")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    irqs.sort_unstable();
    irqs.into_iter()
        .map(|i| PathBuf::from(format!("/proc/irq/{i}/smp_affinity_list")))
        .filter(|p| p.exists())
        .collect()
}

impl TuningGuard {
    fn apply_irq(&mut self, cpus: &CpuList) -> Result<KnobState, TuningError> {
        let want = cpus.to_string();
        let files = irq_affinity_files();
        let (mut moved, mut same, mut refused) = (0, 0, Vec::new());
        let mut before = None;
        for f in &files {
            let out = self
                .journal
                .set_saving(f, &want)
                .map_err(|e| journal_err(self.journal.state_path(), e))?;
            match out {
                SetOutcome::Changed { old } => {
                    moved += 1;
                    before.get_or_insert(old);
                }
                SetOutcome::Unchanged => same += 1,
                SetOutcome::Refused { why } => refused.push(why),
            }
        }
        if moved + same == 0 {
            return Err(TuningError::Irq {
                cpus: want,
                why: refused
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "this host lists no IRQs in /proc/irq".into()),
            });
        }
        Ok(KnobState {
            knob: "irq_cpus".into(),
            requested: want,
            before,
            message: format!(
                "moved {moved} of {} IRQs ({same} already there, {} refused by the kernel: managed or per-CPU interrupts)",
                files.len(),
                refused.len()
            ),
        })
    }

    fn apply_thp(&mut self, mode: ThpMode) -> Result<KnobState, TuningError> {
        let path = Path::new(THP_FILE);
        let out = self
            .journal
            .set_saving(path, &mode.to_string())
            .map_err(|e| journal_err(self.journal.state_path(), e))?;
        let (before, message) = match out {
            SetOutcome::Changed { old } => (Some(old), "set".to_string()),
            SetOutcome::Unchanged => (Some(mode.to_string()), "already set".to_string()),
            SetOutcome::Refused { why } => {
                return Err(TuningError::Thp {
                    mode: mode.to_string(),
                    why,
                })
            }
        };
        Ok(KnobState {
            knob: "thp".into(),
            requested: mode.to_string(),
            before,
            message,
        })
    }

    fn apply_rt_runtime(&mut self, r: RtRuntime) -> Result<KnobState, TuningError> {
        let value = r.kernel();
        let refused = |why: String| TuningError::RtRuntime {
            value: value.clone(),
            why,
        };
        let (_, period) = read_rt_runtime().ok_or_else(|| {
            refused(format!(
                "{RT_RUNTIME_FILE} or {RT_PERIOD_FILE} cannot be read"
            ))
        })?;
        if r.0.is_some_and(|v| u64::from(v) > period) {
            return Err(refused(format!("it exceeds the period, {period} µs")));
        }
        let out = self
            .journal
            .set_saving(Path::new(RT_RUNTIME_FILE), &value)
            .map_err(|e| journal_err(self.journal.state_path(), e))?;
        let (before, message) = match out {
            SetOutcome::Changed { old } => (Some(old), format!("set (period {period} µs)")),
            SetOutcome::Unchanged => (Some(value.clone()), "already set".to_string()),
            SetOutcome::Refused { why } => return Err(refused(why)),
        };
        Ok(KnobState {
            knob: "rt_runtime".into(),
            requested: value,
            before,
            message,
        })
    }

    fn apply_dma(&mut self, d: DmaLatency) -> Result<KnobState, TuningError> {
        let before = read_dma_latency().map(|v| format!("{v}us"));
        let mut f = File::options()
            .read(true)
            .write(true)
            .open("/dev/cpu_dma_latency")
            .map_err(|e| TuningError::DmaLatency { why: e.to_string() })?;
        f.write_all(&(d.0 as i32).to_ne_bytes())
            .map_err(|e| TuningError::DmaLatency { why: e.to_string() })?;
        self.dma = Some(f);
        Ok(KnobState {
            knob: "dma_latency".into(),
            requested: d.to_string(),
            before,
            message: format!(
                "held open for the run (the kernel now allows {} µs)",
                read_dma_latency().map_or("?".into(), |v| v.to_string())
            ),
        })
    }

    fn apply_numa(&mut self, n: NumaNode) -> Result<KnobState, TuningError> {
        const MPOL_BIND: i64 = 2;
        let nodes = numa_nodes();
        let mut mask = [0u64; 16];
        mask[(n.0 / 64) as usize] |= 1 << (n.0 % 64);
        // SAFETY: set_mempolicy reads `maxnode` bits from the mask we own.
        let r = unsafe {
            libc::syscall(
                libc::SYS_set_mempolicy,
                MPOL_BIND,
                mask.as_ptr(),
                (mask.len() * 64) as u64,
            )
        };
        if r != 0 {
            return Err(TuningError::NumaBind {
                node: n.0,
                why: std::io::Error::last_os_error().to_string(),
            });
        }
        self.numa_bound = true;
        Ok(KnobState {
            knob: "numa_node".into(),
            requested: n.to_string(),
            before: Some("default".into()),
            message: if nodes.len() == 1 {
                format!(
                    "this host has one NUMA node ({}): all memory is already local, binding changes nothing",
                    nodes[0]
                )
            } else {
                format!(
                    "memory of threads created from now on is bound to node {} (nodes: {})",
                    n.0,
                    CpuList(nodes)
                )
            },
        })
    }

    /// What was applied (for the run's configuration record).
    pub fn applied(&self) -> &AppliedTuning {
        &self.applied
    }

    /// Restores every knob now; one line per file written back.
    pub fn restore(mut self) -> Vec<String> {
        self.restore_inner().into_iter().map(|l| l.text).collect()
    }

    fn restore_inner(&mut self) -> Vec<ResetLine> {
        if self.done {
            return Vec::new();
        }
        self.done = true;
        let mut out = Vec::new();
        if self.numa_bound {
            // SAFETY: MPOL_DEFAULT with no mask resets this thread's policy.
            unsafe { libc::syscall(libc::SYS_set_mempolicy, 0i64, std::ptr::null::<u64>(), 0u64) };
            out.push(done("memory policy of this thread back to default"));
        }
        if self.dma.take().is_some() {
            out.push(done("C-state limit released"));
        }
        match recover_journal(self.journal.state_path()) {
            Ok(v) => out.extend(v),
            Err(e) => out.push(ResetLine {
                text: e.to_string(),
                failed: true,
            }),
        }
        if let Some(id) = self.cleanup_id.take() {
            signals::unregister(id);
        }
        out
    }
}

fn done(text: &str) -> ResetLine {
    ResetLine {
        text: text.into(),
        failed: false,
    }
}

impl Drop for TuningGuard {
    fn drop(&mut self) {
        // Only what could not be put back is worth a word here.
        for line in self.restore_inner().into_iter().filter(|l| l.failed) {
            eprintln!("taillab: {line}");
        }
    }
}

/// The C-state limit in force now (µs), from `/dev/cpu_dma_latency`.
pub fn read_dma_latency() -> Option<i32> {
    use std::io::Read;
    let mut b = [0u8; 4];
    File::open("/dev/cpu_dma_latency")
        .ok()?
        .read_exact(&mut b)
        .ok()?;
    Some(i32::from_ne_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for s in ["always", "madvise", "never"] {
            assert_eq!(s.parse::<ThpMode>().unwrap().to_string(), s);
        }
        assert!("sometimes"
            .parse::<ThpMode>()
            .unwrap_err()
            .to_string()
            .contains("always, madvise or never"));
        assert_eq!("0".parse::<DmaLatency>().unwrap().to_string(), "0us");
        assert_eq!("10us".parse::<DmaLatency>().unwrap(), DmaLatency(10));
        assert!("-1".parse::<DmaLatency>().is_err());
        assert_eq!("node1".parse::<NumaNode>().unwrap(), NumaNode(1));
        for (s, want) in [("-1", None), ("unlimited", None), ("950000", Some(950_000))] {
            assert_eq!(s.parse::<RtRuntime>().unwrap(), RtRuntime(want), "{s}");
        }
        assert_eq!("950000us".parse::<RtRuntime>().unwrap().kernel(), "950000");
        assert_eq!(RtRuntime(None).to_string(), "-1");
        assert!("-2".parse::<RtRuntime>().is_err());
        let t = Tuning {
            irq_cpus: Some("1".parse().unwrap()),
            dma_latency: Some(DmaLatency(0)),
            thp: Some(ThpMode::Never),
            numa_node: Some(NumaNode(0)),
            rt_runtime: Some(RtRuntime(None)),
        };
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(
            j,
            r#"{"irq_cpus":"1","dma_latency":"0us","thp":"never","numa_node":"0","rt_runtime":"-1"}"#
        );
        assert_eq!(serde_json::from_str::<Tuning>(&j).unwrap(), t);
    }

    #[test]
    fn bad_node_and_cpus_are_refused_before_anything_changes() {
        let t = Tuning {
            numa_node: Some(NumaNode(999)),
            ..Default::default()
        };
        let e = t.validate().unwrap_err().to_string();
        assert!(e.contains("node 999 does not exist"), "{e}");
        let t = Tuning {
            irq_cpus: Some(CpuList(vec![4000])),
            ..Default::default()
        };
        assert!(t.validate().unwrap_err().to_string().contains("not online"));
    }
}
