//! What the hogs did, for `summary.json`'s `interference` section: leftovers and problems,
//! each hog's report, the spec check before a run, and the cleanup on drop.

use super::*;

/// Waits until no live process is left in `groups`, SIGKILLing again;
/// returns those that would not go.
pub(super) fn group_leftovers(groups: &[i32], timeout: Duration) -> Vec<i32> {
    let until = Instant::now() + timeout;
    loop {
        let left = contain::group_members(groups);
        if left.is_empty() || Instant::now() >= until {
            return left;
        }
        contain::signal_groups(groups, libc::SIGKILL);
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(super) fn hog_problems(hog: &mut Hog) -> Vec<String> {
    let mut out = Vec::new();
    for d in hog.direct.iter_mut() {
        if d.early_exit.is_none() && d.status.is_none() {
            if let Ok(Some(s)) = d.child.try_wait() {
                d.early_exit = Some(s);
                d.status = Some(s);
            }
        }
        if let Some(s) = d.early_exit {
            out.push(format!(
                "interference {}: {} {} (pid {}) ended before the run did ({}); see {}",
                hog.spec,
                hog.spec.class.program(),
                d.role,
                d.child.id(),
                describe_status(&s),
                hog.log.display()
            ));
        }
    }
    let directs: Vec<i32> = hog.direct.iter().map(|d| d.child.id() as i32).collect();
    for (pid, s) in &hog.seen {
        if directs.contains(pid) {
            continue;
        }
        let alive = usage::read_process(*pid)
            .is_some_and(|r| r.starttime == s.starttime && r.state != 'Z' && r.state != 'X');
        if !alive {
            out.push(format!(
                "interference {}: {} {} (pid {pid}) ended before the run did; see {}",
                hog.spec,
                s.role,
                s.name,
                hog.log.display()
            ));
        }
    }
    out
}

/// The checks [`Interference::start`] makes before starting anything
/// (programs installed, CPUs allowed, nice permitted), for a caller that
/// validates a whole configuration before any part of a run starts.
pub fn check_specs(specs: &[InterfereSpec]) -> Result<(), PreflightError> {
    for s in specs {
        preflight::require_program(
            s.class.program(),
            s.class.program(),
            &format!("interference {s}"),
        )?;
        if let Some(c) = &s.cpus {
            preflight::check_cpus(&format!("interference {s}"), c.cpus())?;
        }
        if let Some(n) = s.nice {
            preflight::check_nice(n)?;
        }
    }
    Ok(())
}

pub(super) fn scratch_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SEQ: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "taillab-interfere-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ))
}

impl Drop for Interference {
    fn drop(&mut self) {
        if let Some(id) = self.cleanup_id.take() {
            signals::unregister(id);
        }
        if self.stopped {
            return;
        }
        let mut hogs = std::mem::take(&mut *self.hogs.lock().unwrap_or_else(|e| e.into_inner()));
        let groups = self
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        self.kill_all(&groups, &mut hogs);
        let left = group_leftovers(&groups, Duration::from_secs(1));
        if let Some(cg) = &self.cgroup {
            cg.remove(Duration::from_secs(1));
        }
        if let Some(w) = self.watchdog.take() {
            w.finish(left.is_empty());
        }
        if self.dir_is_temp && !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub(super) fn hog_report(h: &Hog, usage: &[ProcessUsage], secs: f64) -> HogReport {
    let mut processes: Vec<HogProcess> = Vec::new();
    for (pid, s) in &h.seen {
        let u = usage
            .iter()
            .find(|u| u.pid == *pid)
            .cloned()
            .unwrap_or(ProcessUsage {
                pid: *pid,
                name: s.name.clone(),
                ..Default::default()
            });
        processes.push(HogProcess {
            role: s.role.into(),
            usage: u,
        });
    }
    let sum = |f: fn(&ProcessUsage) -> Option<u64>| -> u64 {
        processes.iter().filter_map(|p| f(&p.usage)).sum()
    };
    let cpu_s: f64 = processes.iter().map(|p| p.usage.cpu_s).sum();
    let died_early =
        h.direct.iter().any(|d| d.early_exit.is_some()) || processes.iter().any(|p| !p.usage.alive);
    HogReport {
        spec: h.spec.clone(),
        class: h.spec.class,
        command: h.command.clone(),
        pids: h.seen.keys().copied().collect(),
        cpus: h.spec.cpus.clone(),
        nice: h.spec.nice,
        cpu_s,
        cpu_pct: if secs > 0.0 {
            100.0 * cpu_s / secs
        } else {
            0.0
        },
        read_bytes: sum(|u| u.read_bytes),
        write_bytes: sum(|u| u.write_bytes),
        read_chars: sum(|u| u.read_chars),
        write_chars: sum(|u| u.write_chars),
        processes,
        died_early,
        exit: h
            .direct
            .iter()
            .map(|d| {
                let st = d
                    .status
                    .as_ref()
                    .map(describe_status)
                    .unwrap_or_else(|| "unknown".into());
                let when = if d.early_exit.is_some() {
                    "before stop"
                } else {
                    "after stop"
                };
                format!(
                    "{} {} (pid {}): {st} {when}",
                    h.spec.class.program(),
                    d.role,
                    d.child.id()
                )
            })
            .collect(),
        log: h.log.display().to_string(),
        log_tail: if died_early {
            tail_of(&h.log, 5)
        } else {
            Vec::new()
        },
    }
}

pub(super) struct AssembleArgs {
    pub(super) hogs: Vec<HogReport>,
    pub(super) window: &'static str,
    pub(super) seconds: f64,
    pub(super) containment: &'static str,
    pub(super) cgroup_cpu_s: Option<f64>,
    pub(super) problems: Vec<String>,
    pub(super) leftover: Vec<i32>,
    pub(super) log_dir: Option<String>,
}

pub(super) fn assemble(a: AssembleArgs) -> InterferenceReport {
    let cpu_s = a
        .cgroup_cpu_s
        .unwrap_or_else(|| a.hogs.iter().map(|h| h.cpu_s).sum());
    let mut problems = a.problems;
    if !a.leftover.is_empty() {
        problems.push(format!(
            "interference processes {:?} could not be killed; kill them by hand",
            a.leftover
        ));
    }
    InterferenceReport {
        schema: REPORT_SCHEMA.into(),
        specs: a.hogs.iter().map(|h| h.spec.clone()).collect(),
        window: a.window.into(),
        seconds: a.seconds,
        containment: a.containment.into(),
        cpu_s,
        cpu_pct: if a.seconds > 0.0 {
            100.0 * cpu_s / a.seconds
        } else {
            0.0
        },
        read_bytes: a.hogs.iter().map(|h| h.read_bytes).sum(),
        write_bytes: a.hogs.iter().map(|h| h.write_bytes).sum(),
        read_chars: a.hogs.iter().map(|h| h.read_chars).sum(),
        write_chars: a.hogs.iter().map(|h| h.write_chars).sum(),
        ok: problems.is_empty(),
        problems,
        leftover: a.leftover,
        log_dir: a.log_dir,
        hogs: a.hogs,
    }
}
