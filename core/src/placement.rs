//! Where a run's threads run: the CPUs this process may use, the default placement of
//! workers, and pinning a thread (with its real-time priority or its nice value).
//!
//! By default (no `harness.cpus`), an integrated run with fewer workers than CPUs pins its
//! workers one per CPU and leaves the first CPU it may use to everything else — the main
//! thread, the environment sampler, the kernel's housekeeping: a worker that shares its
//! CPU with the sampler or with another worker is preempted by it, and a worker that
//! migrates loses its caches, both on the measured path. With as many workers as CPUs or
//! more, nothing is pinned (the kernel places them), and the run says so.

/// A CPU list or a thread's placement the host refuses; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// A CPU that is not online.
    #[error("{flag}: CPU {cpu} is offline (online CPUs: {online}; see `nproc` and /sys/devices/system/cpu/online)")]
    Offline {
        /// The setting that named it.
        flag: String,
        /// The CPU.
        cpu: usize,
        /// The online CPUs, as a list.
        online: String,
    },
    /// A CPU outside this process's affinity mask.
    #[error(
        "{flag}: CPU {cpu} is not available to this process (it may use {allowed}; see `nproc`)"
    )]
    Unavailable {
        /// The setting that named it.
        flag: String,
        /// The CPU.
        cpu: usize,
        /// The CPUs it may use, as a list.
        allowed: String,
    },
    /// The kernel refused to pin a thread.
    #[error("cannot pin a thread to CPU {cpu}: {why} (check --cpus against `nproc`)")]
    Pin {
        /// The CPU.
        cpu: usize,
        /// The kernel's answer.
        why: std::io::Error,
    },
    /// The kernel refused a SCHED_FIFO priority.
    #[error(
        "SCHED_FIFO priority {prio} refused: {why} (needs root or CAP_SYS_NICE; priorities 1..=99)"
    )]
    Priority {
        /// The priority asked for.
        prio: i32,
        /// The kernel's answer.
        why: std::io::Error,
    },
    /// The kernel refused a nice value.
    #[error(
        "nice value {nice} refused: {why} (a value below the current one needs root or CAP_SYS_NICE; values -20..=19)"
    )]
    Nice {
        /// The nice value asked for.
        nice: i32,
        /// The kernel's answer.
        why: std::io::Error,
    },
}

/// The CPUs this process may run on (its affinity mask), ascending; `None` if the kernel
/// does not say.
pub fn allowed_cpus() -> Option<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; we pass its true size.
    let (r, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let r = libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        (r, set)
    };
    if r != 0 {
        return None;
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET only reads the set, `i` is below its size.
    Some(
        (0..max)
            .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
            .collect(),
    )
}

/// The online CPUs (`/sys/devices/system/cpu/online`), ascending; `None` if unreadable.
pub fn online_cpus() -> Option<Vec<usize>> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").ok()?;
    parse_cpu_list(s.trim()).ok()
}

/// The one CPU-list grammar, the kernel's (`0-3,8,10-11`), for every list taillab reads: a
/// setting (`harness.cpus`, `net.client_cpus`), sysfs and procfs files, synth's `cpus=`.
/// Numbers and ranges `a-b` separated by commas, spaces around them and empty parts ignored,
/// in the order given (a setting's order is its placement: sender `j` on the `j`-th CPU). A
/// reversed range (`3-1`) is refused, not read as empty or turned around; CPUs go up to
/// 65535. Whether the CPUs exist or are online is the caller's to check
/// ([`crate::harness::check_cpus`]).
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, crate::ValueError> {
    const FORM: &str = "a CPU number or a range like 0-3";
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let num = |x: &str| {
            x.trim()
                .parse::<usize>()
                .map_err(|_| crate::ValueError::not(part, FORM))
        };
        let (a, b) = (num(a)?, num(b)?);
        if a > b {
            return Err(
                crate::ValueError::new(part, format!("`{part}` is a reversed range"))
                    .with_fix(format!("write it low to high: {b}-{a}")),
            );
        }
        if b > 65535 {
            return Err(crate::ValueError::new(
                part,
                format!("CPU {b} is beyond 65535"),
            ));
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// A CPU list in the kernel's format (`0-3,8`).
pub fn show_cpus(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// Checks that every CPU in `cpus` (given with `flag`) is online and one this process may
/// run on, so a bad list is refused before a run starts rather than inside a thread.
pub fn check_cpus(flag: &str, cpus: &[usize]) -> Result<(), PlacementError> {
    if cpus.is_empty() {
        return Ok(());
    }
    if let Some(online) = online_cpus() {
        if let Some(&cpu) = cpus.iter().find(|c| !online.contains(c)) {
            return Err(PlacementError::Offline {
                flag: flag.into(),
                cpu,
                online: show_cpus(&online),
            });
        }
    }
    // Cannot tell: pinning the thread will say what is wrong.
    let Some(allowed) = allowed_cpus() else {
        return Ok(());
    };
    match cpus.iter().find(|c| !allowed.contains(c)) {
        None => Ok(()),
        Some(&cpu) => Err(PlacementError::Unavailable {
            flag: flag.into(),
            cpu,
            allowed: show_cpus(&allowed),
        }),
    }
}

/// Pins the calling thread to `cpus[w % len]` (the last CPU for `w == usize::MAX`) and
/// puts it under SCHED_FIFO at `rt_priority`; either may be absent. Used by integrated
/// workers and by `taillab serve`'s.
pub fn place_thread_on(
    cpus: &[usize],
    rt_priority: Option<i32>,
    w: usize,
) -> Result<(), PlacementError> {
    if !cpus.is_empty() {
        let cpu = if w == usize::MAX {
            *cpus.last().expect("non-empty")
        } else {
            cpus[w % cpus.len()]
        };
        // SAFETY: cpu_set_t is plain data; we pass its true size.
        let r = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        if r != 0 {
            return Err(PlacementError::Pin {
                cpu,
                why: std::io::Error::last_os_error(),
            });
        }
    }
    if let Some(prio) = rt_priority {
        let p = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: plain syscall on the calling thread with a valid param struct.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } != 0 {
            return Err(PlacementError::Priority {
                prio,
                why: std::io::Error::last_os_error(),
            });
        }
    }
    Ok(())
}

/// Sets the calling thread's nice value (`harness.nice`): `setpriority` on its thread id, so
/// only this thread changes (on Linux a nice value belongs to a thread, not the process).
/// Under CFS a worker at nice −20 gets about 87 times the share of a nice-0 hog, yet the two
/// stay in one class: the worker cannot preempt the hog at once, as a SCHED_FIFO one can.
pub fn set_thread_nice(nice: i32) -> Result<(), PlacementError> {
    // SAFETY: gettid takes no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::id_t;
    // SAFETY: plain syscall on the calling thread's id.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, nice) } != 0 {
        return Err(PlacementError::Nice {
            nice,
            why: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Where an integrated run's threads ran: `placement` in summary.json.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct PlacementSummary {
    /// Worker `i` was pinned to `workers[i % len]`; empty: unpinned.
    pub workers: Vec<usize>,
    /// Each helper thread's CPU (`null`: unpinned); empty: the workers kept their own books.
    pub helpers: Vec<Option<usize>>,
    /// Times a worker found its outbox full and waited for its helper (helpers too slow).
    pub outbox_full_waits: u64,
    /// Producers of the schedule (each a dealt share of the one arrival stream); 1: one.
    #[serde(default = "one")]
    pub producers: usize,
}

fn one() -> usize {
    1
}

impl PlacementSummary {
    /// One line for the run's table: `workers on CPU 1-4 · 1 helper on CPU 0`.
    pub fn describe(&self) -> String {
        let mut s = if self.workers.is_empty() {
            "workers unpinned".to_string()
        } else {
            format!("workers on CPU {}", show_cpus(&self.workers))
        };
        if !self.helpers.is_empty() {
            let on: Vec<String> = self
                .helpers
                .iter()
                .map(|c| c.map_or("unpinned".into(), |c| format!("CPU {c}")))
                .collect();
            s += &format!(" · {} helper(s) on {}", self.helpers.len(), on.join(", "));
        }
        if self.producers > 1 {
            s += &format!(" · {} producers", self.producers);
        }
        if self.outbox_full_waits > 0 {
            s += &format!(
                " · workers waited {} times for a helper",
                self.outbox_full_waits
            );
        }
        s
    }
}

/// Where a run's workers go when `harness.cpus` does not say (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Worker `i` on `cpus[i]`, then the shaper thread if there is one; empty: unpinned.
    pub cpus: Vec<usize>,
    /// CPUs left to the main thread and the sampler (empty when unpinned).
    pub housekeeping: Vec<usize>,
    /// One line for the run's output: where everything went, or why nothing was pinned.
    pub line: String,
    /// More workers than CPUs: the line is a warning.
    pub oversubscribed: bool,
}

/// The default placement of `workers` worker threads and `extra` more threads of the run's
/// own (the thread shaper) on the CPUs `allowed` (this process's, see [`allowed_cpus`]).
pub fn default_placement(workers: usize, extra: usize, allowed: &[usize]) -> Placement {
    let n = allowed.len();
    let need = workers + extra;
    let what = if extra > 0 {
        format!("{workers} worker(s) and the shaper")
    } else {
        format!("{workers} worker(s)")
    };
    if need < n {
        let cpus = allowed[1..=need].to_vec();
        let housekeeping: Vec<usize> = allowed
            .iter()
            .copied()
            .filter(|c| !cpus.contains(c))
            .collect();
        let line = format!(
            "placement: {what} on CPU {}, one each; CPU {} left to the sampler and the main thread",
            show_cpus(&cpus),
            show_cpus(&housekeeping)
        );
        return Placement {
            cpus,
            housekeeping,
            line,
            oversubscribed: false,
        };
    }
    let oversubscribed = need > n;
    let line = if oversubscribed {
        format!(
            "warning: {what} on {n} CPU(s) ({}): more threads than CPUs, so they share them unpinned (the kernel places them) and this run measures {n} CPU(s), not {need}; harness.cpus pins them anyway",
            show_cpus(allowed)
        )
    } else {
        format!(
            "placement: {what} on {n} CPU(s) ({}): unpinned, no CPU would be left to the sampler and the main thread (fewer workers, or harness.cpus, pins them)",
            show_cpus(allowed)
        )
    };
    Placement {
        cpus: Vec::new(),
        housekeeping: Vec::new(),
        line,
        oversubscribed,
    }
}

/// The CPUs of an inline run's helper threads (one entry each; `None`: unpinned). `asked`
/// is `harness.helpers` (`None`: one per 4 workers, at most one per free CPU — CPUs of
/// `allowed` that no worker is pinned to — and none when the workers are not pinned: a
/// helper would then compete with them). Helpers take the free CPUs from the last down, so
/// the first (the sampler's and the main thread's) is shared last.
pub fn helper_cpus(
    workers: &[usize],
    threads: usize,
    asked: Option<usize>,
    allowed: &[usize],
) -> Vec<Option<usize>> {
    let free: Vec<usize> = if workers.is_empty() {
        Vec::new()
    } else {
        allowed
            .iter()
            .copied()
            .filter(|c| !workers.contains(c))
            .collect()
    };
    let n = asked.unwrap_or_else(|| free.len().min(threads.div_ceil(4)));
    (0..n)
        .map(|k| free.len().checked_sub(k + 1).map(|i| free[i]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Ok(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(show_cpus(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(parse_cpu_list("0"), Ok(vec![0]));
        assert_eq!(
            parse_cpu_list(" 2, 0 ,"),
            Ok(vec![2, 0]),
            "the order given; blanks ignored"
        );
        assert_eq!(parse_cpu_list(""), Ok(vec![]));
        assert!(parse_cpu_list("a-1")
            .unwrap_err()
            .to_string()
            .contains("a CPU number"));
        let e = parse_cpu_list("0,3-1").unwrap_err().to_string();
        assert!(e.contains("reversed") && e.contains("1-3"), "{e}");
        assert!(parse_cpu_list("70000").is_err());
    }

    #[test]
    fn workers_go_one_per_cpu_after_the_first() {
        let all: Vec<usize> = (0..16).collect();
        let p = default_placement(14, 0, &all);
        assert_eq!(p.cpus, (1..15).collect::<Vec<_>>());
        assert_eq!(p.housekeeping, vec![0, 15]);
        assert!(
            p.line.contains("1-14") && p.line.contains("0,15"),
            "{}",
            p.line
        );
        let p = default_placement(2, 1, &all);
        assert_eq!(p.cpus, vec![1, 2, 3], "the shaper after the workers");
        // A process limited to some CPUs places within them.
        let p = default_placement(1, 0, &[4, 6]);
        assert_eq!(p.cpus, vec![6]);
        // As many workers as CPUs: nothing pinned; more: a warning naming the fallback.
        let p = default_placement(2, 0, &[0, 1]);
        assert!(p.cpus.is_empty() && !p.oversubscribed, "{}", p.line);
        let p = default_placement(3, 0, &[0, 1]);
        assert!(p.oversubscribed && p.line.starts_with("warning:") && p.line.contains("unpinned"));
    }

    #[test]
    fn helpers_take_free_cpus_from_the_last() {
        let all: Vec<usize> = (0..16).collect();
        let w: Vec<usize> = (1..15).collect();
        assert_eq!(helper_cpus(&w, 14, None, &all), vec![Some(15), Some(0)]);
        assert_eq!(helper_cpus(&w[..4], 4, None, &all), vec![Some(15)]);
        assert_eq!(helper_cpus(&[1], 1, None, &[0, 1]), vec![Some(0)]);
        assert!(
            helper_cpus(&[], 2, None, &[0, 1]).is_empty(),
            "unpinned workers: no helper"
        );
        assert_eq!(helper_cpus(&[1], 1, Some(2), &[0, 1]), vec![Some(0), None]);
        assert!(helper_cpus(&[1], 1, Some(0), &[0, 1]).is_empty());
    }

    #[test]
    fn an_offline_or_foreign_cpu_is_named() {
        let e = check_cpus("--cpus", &[4000]).unwrap_err().to_string();
        assert!(e.contains("CPU 4000") && e.contains("--cpus"), "{e}");
        assert!(check_cpus("--cpus", &allowed_cpus().unwrap()[..1]).is_ok());
    }
}
