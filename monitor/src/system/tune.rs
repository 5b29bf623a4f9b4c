//! The settings that make a host fitter ([`Tuner`]): each operation shown and applied one at a
//! time, every prior value saved in a state file first, and `reset` writing them back.

use super::*;

/// How a file's current value is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Form {
    /// The whole trimmed content.
    Plain,
    /// The bracketed word of a selector (`always [madvise] never`).
    Selector,
}

#[derive(Debug, Clone)]
pub(super) struct FileSetting {
    pub(super) path: PathBuf,
    pub(super) desired: String,
    pub(super) form: Form,
}

/// One tuning operation: a named group of files and the values it wants.
#[derive(Debug, Clone)]
pub struct Operation {
    /// The name `taillab system tune` takes and prints (`cpu_governor`, `turbo`, ...).
    pub name: &'static str,
    /// Why it matters for the tail.
    pub why: &'static str,
    pub(super) files: Vec<FileSetting>,
    /// Said when the files do not exist on this host.
    pub(super) unavailable: &'static str,
}

/// The state of one operation on this host.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OpState {
    /// The operation's name.
    pub name: String,
    /// Why it matters for the tail.
    pub why: String,
    /// `tuned`, `not tuned` or `unavailable`.
    pub status: String,
    /// Current values, `path = value`.
    pub current: Vec<String>,
    /// The value the operation writes (that of its first file; empty when unavailable).
    pub desired: String,
    /// What happened when applying or resetting (empty for show).
    pub message: String,
}

impl fmt::Display for OpState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One value, or the distinct values of a multi-file setting.
        let mut now: Vec<&str> = self
            .current
            .iter()
            .filter_map(|c| c.rsplit_once(" = ").map(|(_, v)| v))
            .collect();
        now.dedup();
        write!(f, "{:<22} {:<11}", self.name, self.status)?;
        if !now.is_empty() {
            write!(f, " now {:<10} want {:<10}", now.join("/"), self.desired)?;
        }
        if !self.message.is_empty() {
            write!(f, " {}", self.message)?;
        }
        Ok(())
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub(super) struct StateFile {
    pub(super) schema: String,
    /// Absolute path → value before taillab first changed it.
    pub(super) saved: BTreeMap<String, String>,
}

pub(super) const STATE_SCHEMA: &str = "taillab.system-tune/1";

/// Shows, applies and resets the tuning operations.
pub struct Tuner {
    pub(super) root: PathBuf,
    pub(super) state_path: PathBuf,
    pub(super) ops: Vec<Operation>,
}

/// Where `tune` keeps prior values unless told otherwise:
/// `$TAILLAB_STATE_DIR`, else `$XDG_STATE_HOME/taillab`, else
/// `~/.local/state/taillab`, else `/tmp/taillab-state`; file
/// `system-tune.json`.
pub fn default_state_path() -> PathBuf {
    let dir = std::env::var_os("TAILLAB_STATE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_STATE_HOME").map(|d| PathBuf::from(d).join("taillab")))
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state/taillab")))
        .unwrap_or_else(|| PathBuf::from("/tmp/taillab-state"));
    dir.join("system-tune.json")
}

/// Where a run keeps the prior values of the knobs it changes for its own
/// duration (IRQ affinity, transparent huge pages): `run-tuning.json` next
/// to [`default_state_path`]. A run that ends normally restores them and
/// deletes the file; one killed outright leaves it for the next run's start
/// or `taillab system reset`, which write the values back.
pub fn default_run_journal_path() -> PathBuf {
    default_state_path().with_file_name("run-tuning.json")
}

/// What [`Tuner::set_saving`] did to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetOutcome {
    /// The file already held the value; nothing was saved or written.
    Unchanged,
    /// The value was written; `old` is saved in the state file.
    Changed {
        /// The value before, as read (a selector file's bracketed choice).
        old: String,
    },
    /// The kernel (or a missing file) refused; nothing changed.
    Refused {
        /// The reason, with what to do (e.g. `permission denied (run as root)`).
        why: String,
    },
}

pub(super) fn read_value(path: &Path, form: Form) -> Option<String> {
    let v = read_trim(path)?;
    Some(match form {
        Form::Plain => v,
        Form::Selector => bracketed(&v).unwrap_or(v),
    })
}

pub(super) fn write_error_text(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => "permission denied (run as root)".into(),
        Some(libc::EROFS) => {
            "read-only on this machine (a container or VM that does not allow it)".into()
        }
        Some(libc::EINVAL) => "the kernel rejected the value".into(),
        Some(libc::EIO) => "the kernel cannot change it here".into(),
        _ => e.to_string(),
    }
}

/// A setting that writes `v` to the whole file.
pub(super) fn plain(path: PathBuf, v: &str) -> FileSetting {
    FileSetting {
        path,
        desired: v.into(),
        form: Form::Plain,
    }
}

/// The `damon` operation under `root`.
pub(super) fn damon_operation(root: &Path) -> Operation {
    let p = |rel: &str| root.join(rel);
    // DAMON: every kdamond that exists (state off; reset turns those that were on back
    // on with their configuration, which sysfs keeps), and the reclaim modules.
    let admin = p("sys/kernel/mm/damon/admin/kdamonds");
    let mut damon: Vec<FileSetting> = numbered(&admin)
        .iter()
        .map(|i| plain(admin.join(format!("{i}/state")), "off"))
        .filter(|f| f.path.exists())
        .collect();
    for module in ["damon_reclaim", "damon_lru_sort"] {
        let f = p(&format!("sys/module/{module}/parameters/enabled"));
        if f.exists() {
            damon.push(plain(f, "N"));
        }
    }
    Operation {
        name: "damon",
        why: "DAMON's schemes reclaim or reorder memory the kernel sees idle: page cache an app reads comes back from disk after a pause, and its thread wakes every sample",
        files: damon,
        unavailable: "no DAMON worker on this host",
    }
}

/// The `irq_affinity` operation under `root`: interrupts moved off `cpus`.
pub(super) fn irq_operation(root: &Path, online: &[usize], cpus: &[usize]) -> Operation {
    let p = |rel: &str| root.join(rel);
    let keep: Vec<usize> = online
        .iter()
        .copied()
        .filter(|c| !cpus.contains(c))
        .collect();
    let list = keep
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut files = Vec::new();
    if !keep.is_empty() {
        if let Ok(dir) = std::fs::read_dir(p("proc/irq")) {
            let mut irqs: Vec<u32> = dir
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse().ok()))
                .collect();
            irqs.sort_unstable();
            for irq in irqs {
                let f = p(&format!("proc/irq/{irq}/smp_affinity_list"));
                if f.exists() {
                    files.push(plain(f, &list));
                }
            }
        }
    }
    Operation {
        name: "irq_affinity",
        why: "interrupts handled on a worker's CPU delay the request it is serving",
        files,
        unavailable: "no movable IRQs, or every online CPU is a worker CPU",
    }
}

impl Tuner {
    /// Operations for the live system; `worker_cpus` enables the IRQ
    /// affinity operation (interrupts moved off those CPUs).
    pub fn new(state_path: PathBuf, worker_cpus: Option<&[usize]>) -> Tuner {
        Self::with_root(Path::new("/"), state_path, worker_cpus)
    }

    /// Like [`new`](Self::new) with every system path under `root` (tests).
    pub fn with_root(root: &Path, state_path: PathBuf, worker_cpus: Option<&[usize]>) -> Tuner {
        let p = |rel: &str| root.join(rel);
        let online: Vec<usize> = read_trim(&p("sys/devices/system/cpu/online"))
            .and_then(|s| taillab_core::placement::parse_cpu_list(&s).ok())
            .unwrap_or_default();
        let mut ops = vec![
            Operation {
                name: "cpu_governor",
                why: "a fixed, maximal clock: service times do not depend on how busy the core was a moment ago",
                files: online
                    .iter()
                    .map(|c| plain(p(&format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor")), "performance"))
                    .filter(|f| f.path.exists())
                    .collect(),
                unavailable: "no cpufreq on this host (usual on VMs: the hypervisor sets the frequency)",
            },
            Operation {
                name: "turbo",
                why: "turbo clocks depend on temperature and on what the other cores do: off gives repeatable service times",
                files: [
                    plain(p("sys/devices/system/cpu/intel_pstate/no_turbo"), "1"),
                    plain(p("sys/devices/system/cpu/cpufreq/boost"), "0"),
                ]
                .into_iter()
                .filter(|f| f.path.exists())
                .take(1)
                .collect(),
                unavailable: "no turbo/boost control on this host",
            },
            Operation {
                name: "sched_rt_runtime_us",
                why: "-1 lets real-time worker threads run without being throttled for 50 ms each second",
                files: vec![plain(p("proc/sys/kernel/sched_rt_runtime_us"), "-1")]
                    .into_iter()
                    .filter(|f| f.path.exists())
                    .collect(),
                unavailable: "the kernel has no RT throttling knob",
            },
            Operation {
                name: "numa_balancing",
                why: "NUMA balancing unmaps pages to sample accesses, which makes workers take minor faults",
                files: vec![plain(p("proc/sys/kernel/numa_balancing"), "0")]
                    .into_iter()
                    .filter(|f| f.path.exists())
                    .collect(),
                unavailable: "the kernel has no NUMA balancing",
            },
            Operation {
                name: "transparent_hugepage",
                why: "with `always`, khugepaged and compaction can stall any allocation; madvise limits that to code that asks",
                files: vec![FileSetting {
                    path: p("sys/kernel/mm/transparent_hugepage/enabled"),
                    desired: "madvise".into(),
                    form: Form::Selector,
                }]
                .into_iter()
                .filter(|f| f.path.exists())
                .collect(),
                unavailable: "the kernel has no transparent huge pages",
            },
        ];
        ops.push(damon_operation(root));
        if let Some(cpus) = worker_cpus {
            ops.push(irq_operation(root, &online, cpus));
        }
        Tuner {
            root: root.to_path_buf(),
            state_path,
            ops,
        }
    }

    /// The operations this tuner knows.
    pub fn operations(&self) -> &[Operation] {
        &self.ops
    }

    pub(super) fn state_of(&self, op: &Operation) -> OpState {
        let current: Vec<String> = op
            .files
            .iter()
            .map(|f| {
                let rel = f
                    .path
                    .strip_prefix(&self.root)
                    .unwrap_or(&f.path)
                    .display()
                    .to_string();
                format!(
                    "/{} = {}",
                    rel.trim_start_matches('/'),
                    read_value(&f.path, f.form).unwrap_or_else(|| "?".into())
                )
            })
            .collect();
        let status = if op.files.is_empty() {
            "unavailable"
        } else if op
            .files
            .iter()
            .all(|f| read_value(&f.path, f.form).as_deref() == Some(f.desired.as_str()))
        {
            "tuned"
        } else {
            "not tuned"
        };
        OpState {
            name: op.name.into(),
            why: op.why.into(),
            status: status.into(),
            current,
            desired: op
                .files
                .first()
                .map(|f| f.desired.clone())
                .unwrap_or_default(),
            message: if op.files.is_empty() {
                format!("skipped: {}", op.unavailable)
            } else {
                String::new()
            },
        }
    }

    /// The state of every operation, changing nothing.
    pub fn show(&self) -> Vec<OpState> {
        self.ops.iter().map(|op| self.state_of(op)).collect()
    }

    pub(super) fn load_state(&self) -> Result<StateFile, MonitorError> {
        match std::fs::read_to_string(&self.state_path) {
            Ok(t) => serde_json::from_str(&t).map_err(|e| MonitorError::State {
                action: "parse",
                path: self.state_path.clone(),
                why: e.to_string(),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(StateFile {
                schema: STATE_SCHEMA.into(),
                saved: BTreeMap::new(),
            }),
            Err(e) => Err(MonitorError::State {
                action: "read",
                path: self.state_path.clone(),
                why: e.to_string(),
            }),
        }
    }

    pub(super) fn save_state(&self, s: &StateFile) -> Result<(), MonitorError> {
        let err = |action, e: &dyn fmt::Display| MonitorError::State {
            action,
            path: self.state_path.clone(),
            why: e.to_string(),
        };
        if let Some(dir) = self.state_path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| err("create the folder of", &e))?;
        }
        let text = serde_json::to_string_pretty(s).map_err(|e| err("encode", &e))?;
        // Write-then-rename so a crash never leaves a half-written state file.
        let tmp = self.state_path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| err("write", &e))?;
        std::fs::rename(&tmp, &self.state_path).map_err(|e| err("write", &e))
    }

    /// Applies every operation (or only those named in `only`), saving each
    /// prior value first. A value saved by an earlier `tune` is kept, so
    /// `reset` always returns to the state before the first `tune`.
    pub fn apply(&self, only: &[String]) -> Result<Vec<OpState>, MonitorError> {
        let mut state = self.load_state()?;
        let mut out = Vec::new();
        for op in self
            .ops
            .iter()
            .filter(|o| only.is_empty() || only.iter().any(|n| n == o.name))
        {
            let before = self.state_of(op);
            if before.status != "not tuned" {
                out.push(OpState {
                    message: if before.status == "tuned" {
                        "already set".into()
                    } else {
                        before.message.clone()
                    },
                    ..before
                });
                continue;
            }
            let (mut changed, mut failed) = (0, Vec::new());
            for f in &op.files {
                let Some(old) = read_value(&f.path, f.form) else {
                    continue;
                };
                if old == f.desired {
                    continue;
                }
                let key = f.path.display().to_string();
                state.saved.entry(key.clone()).or_insert(old.clone());
                // Save before writing: a crash after the write can still be reset.
                self.save_state(&state)?;
                match std::fs::write(&f.path, &f.desired) {
                    Ok(()) => changed += 1,
                    Err(e) => {
                        failed.push(format!("{}: {}", f.path.display(), write_error_text(&e)));
                        // Nothing changed, so there is nothing to restore.
                        if state.saved.get(&key) == Some(&old) {
                            state.saved.remove(&key);
                            self.save_state(&state)?;
                        }
                    }
                }
            }
            let mut after = self.state_of(op);
            after.message = if failed.is_empty() {
                format!("applied ({changed} file(s))")
            } else {
                format!(
                    "skipped what cannot be changed on this machine: {}",
                    failed.join("; ")
                )
            };
            out.push(after);
        }
        Ok(out)
    }

    /// Writes `value` to one file, saving the file's current value in the
    /// state file first (a value saved earlier is kept), so that
    /// [`reset`](Self::reset) — in this process or, after a crash, in the
    /// next one — writes it back. Selector files (`always [madvise] never`)
    /// are saved as their bracketed word.
    pub fn set_saving(&self, file: &Path, value: &str) -> Result<SetOutcome, MonitorError> {
        let form = match read_trim(file) {
            Some(v) if bracketed(&v).is_some() => Form::Selector,
            Some(_) => Form::Plain,
            None => {
                return Ok(SetOutcome::Refused {
                    why: format!("{} does not exist or cannot be read", file.display()),
                })
            }
        };
        let Some(old) = read_value(file, form) else {
            return Ok(SetOutcome::Refused {
                why: format!("{} cannot be read", file.display()),
            });
        };
        if old == value {
            return Ok(SetOutcome::Unchanged);
        }
        let mut state = self.load_state()?;
        let key = file.display().to_string();
        let fresh = !state.saved.contains_key(&key);
        state.saved.entry(key.clone()).or_insert(old.clone());
        // Save before writing: a crash after the write can still be reset.
        self.save_state(&state)?;
        match std::fs::write(file, value) {
            Ok(()) => Ok(SetOutcome::Changed { old }),
            Err(e) => {
                if fresh {
                    state.saved.remove(&key);
                    self.save_state(&state)?;
                }
                Ok(SetOutcome::Refused {
                    why: format!("{}: {}", file.display(), write_error_text(&e)),
                })
            }
        }
    }

    /// The state file this tuner saves prior values in.
    pub fn state_path(&self) -> &Path {
        &self.state_path
    }

    /// Writes back every value saved by `apply` and deletes the state file.
    /// Values that cannot be written back stay in the file and are reported
    /// (their lines are [`ResetLine::failed`]).
    pub fn reset(&self) -> Result<Vec<ResetLine>, MonitorError> {
        let mut state = self.load_state()?;
        let mut msgs = Vec::new();
        if state.saved.is_empty() {
            msgs.push(ResetLine::done(format!(
                "nothing to reset: no saved values in {}",
                self.state_path.display()
            )));
            return Ok(msgs);
        }
        let mut left = BTreeMap::new();
        for (path, value) in std::mem::take(&mut state.saved) {
            // Already back (a kdamond turned on again by its platform refuses "on" with EBUSY).
            let now = read_trim(Path::new(&path)).map(|v| bracketed(&v).unwrap_or(v));
            if now.as_deref() == Some(value.as_str()) {
                msgs.push(ResetLine::done(format!(
                    "restored {path} = {value} (it already was)"
                )));
                continue;
            }
            match std::fs::write(&path, &value) {
                Ok(()) => msgs.push(ResetLine::done(format!("restored {path} = {value}"))),
                Err(e) => {
                    msgs.push(ResetLine {
                        text: format!(
                            "could not restore {path} = {value}: {}",
                            write_error_text(&e)
                        ),
                        failed: true,
                    });
                    left.insert(path, value);
                }
            }
        }
        if left.is_empty() {
            std::fs::remove_file(&self.state_path).map_err(|e| MonitorError::State {
                action: "remove",
                path: self.state_path.clone(),
                why: e.to_string(),
            })?;
        } else {
            state.saved = left;
            self.save_state(&state)?;
        }
        Ok(msgs)
    }
}

/// One line of [`Tuner::reset`]: a setting written back (or already
/// back), or one that could not be, which stays in the state file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetLine {
    /// What was done, as printed (`restored /sys/... = madvise`).
    pub text: String,
    /// The value could not be written back.
    pub failed: bool,
}

impl ResetLine {
    pub(super) fn done(text: String) -> Self {
        ResetLine {
            text,
            failed: false,
        }
    }
}

impl fmt::Display for ResetLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
