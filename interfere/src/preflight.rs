//! Checks made before anything starts, so that bad input stops a run while
//! nothing is running yet: CPUs outside the allowed set, an RT priority or
//! a negative nice value without permission, a program that is not
//! installed. Permission is tested by trying on a scratch thread that exits
//! right after, so the calling thread and process are never changed.

use std::path::PathBuf;

/// Why a run cannot start. Each message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreflightError {
    #[error("{what} CPU(s) {bad} are not available to this process (allowed: {allowed}); pick CPUs from the allowed list")]
    /// Some requested CPUs are outside this process's affinity mask (or do not exist).
    Cpus {
        /// The setting that asked for them (`worker`, `interference cpu:1@cpus=5`, ...).
        what: String,
        /// The CPUs not allowed, as a CPU list.
        bad: String,
        /// The CPUs this process may use, as a CPU list.
        allowed: String,
    },
    /// A SCHED_FIFO priority outside Linux's 1..=99.
    #[error("RT priority {0} is outside 1..=99")]
    RtRange(i32),
    #[error("RT priority {prio} refused: {why} (run as root, or give the binary CAP_SYS_NICE, or raise `ulimit -r`)")]
    /// The kernel refused SCHED_FIFO at this priority (no privilege, or `ulimit -r` too low).
    RtPermission {
        /// The priority asked for.
        prio: i32,
        /// The OS error `sched_setscheduler` returned.
        why: String,
    },
    #[error("nice {nice} refused: {why} (negative nice values need root or CAP_SYS_NICE)")]
    /// The kernel refused this nice value (lowering it needs privilege).
    Nice {
        /// The nice value asked for, -20..=19.
        nice: i32,
        /// The OS error `setpriority` returned.
        why: String,
    },
    #[error("{program} is not installed (needed for {what}): apt-get install {package}, or `make setup`")]
    /// A program the run needs is not on `$PATH`.
    Missing {
        /// The executable looked for.
        program: String,
        /// The Debian package that provides it.
        package: String,
        /// What needs it (named in the message).
        what: String,
    },
}

/// The CPUs this process may run on (`sched_getaffinity`).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; getaffinity fills it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn list(v: &[usize]) -> String {
    crate::spec::CpuList(v.to_vec()).to_string()
}

/// Fails unless every CPU in `cpus` is one this process may use; `what`
/// names the setting in the message (`worker`, `interference cpu:1@cpus=5`).
pub fn check_cpus(what: &str, cpus: &[usize]) -> Result<(), PreflightError> {
    let allowed = allowed_cpus();
    let bad: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !allowed.contains(c))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(PreflightError::Cpus {
            what: what.into(),
            bad: list(&bad),
            allowed: list(&allowed),
        })
    }
}

fn on_scratch_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(f)
        .join()
        .expect("scratch thread does not panic")
}

/// Fails unless a thread of this process may run under SCHED_FIFO at
/// `prio`.
pub fn check_rt_priority(prio: i32) -> Result<(), PreflightError> {
    if !(1..=99).contains(&prio) {
        return Err(PreflightError::RtRange(prio));
    }
    on_scratch_thread(move || {
        let p = libc::sched_param {
            sched_priority: prio,
        };
        // SAFETY: changes only this scratch thread, which exits next.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } == 0 {
            Ok(())
        } else {
            Err(PreflightError::RtPermission {
                prio,
                why: std::io::Error::last_os_error().to_string(),
            })
        }
    })
}

/// Fails unless this process may set nice value `nice` (raising it is
/// always allowed; lowering below the current value needs privilege).
pub fn check_nice(nice: i32) -> Result<(), PreflightError> {
    on_scratch_thread(move || {
        let tid = taillab_monitor::procfs::gettid();
        // SAFETY: a per-thread nice value on the scratch thread only.
        if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) } == 0 {
            Ok(())
        } else {
            Err(PreflightError::Nice {
                nice,
                why: std::io::Error::last_os_error().to_string(),
            })
        }
    })
}

/// The full path of `program` on `$PATH`, if it is there and executable.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// [`find_program`] or an error naming the Debian package to install.
pub fn require_program(
    program: &str,
    package: &str,
    what: &str,
) -> Result<PathBuf, PreflightError> {
    find_program(program).ok_or_else(|| PreflightError::Missing {
        program: program.into(),
        package: package.into(),
        what: what.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_outside_the_allowed_set_are_named() {
        let allowed = allowed_cpus();
        assert!(!allowed.is_empty());
        check_cpus("worker", &allowed).unwrap();
        let e = check_cpus("worker", &[allowed[0], 4000]).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("4000") && m.contains("allowed"), "{m}");
    }

    #[test]
    fn rt_range_and_missing_programs() {
        assert_eq!(check_rt_priority(0), Err(PreflightError::RtRange(0)));
        assert_eq!(check_rt_priority(100), Err(PreflightError::RtRange(100)));
        check_nice(5).unwrap();
        assert!(find_program("sh").is_some());
        let e = require_program("no-such-prog-xyz", "no-such-pkg", "a test").unwrap_err();
        assert!(e.to_string().contains("apt-get install no-such-pkg"));
    }
}
