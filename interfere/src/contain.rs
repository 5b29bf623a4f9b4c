//! Making sure no hog outlives the run, whatever ends the run.
//!
//! Three layers, because each covers a case the others miss:
//! 1. **Process groups and `PR_SET_PDEATHSIG`.** Every direct child gets its
//!    own process group (so a terminal's Ctrl-C reaches the harness, which
//!    stops the hogs in order, not the hogs themselves) and `SIGKILL` as its
//!    parent-death signal. stress-ng's workers in turn die when their
//!    stress-ng parent does (stress-ng sets a parent-death signal on them).
//!    `stop` and `Drop` signal whole groups.
//! 2. **A cgroup-v2 group** where the host lets us create one (root, or a
//!    delegated subtree): every hog process is born into it, `cgroup.kill`
//!    ends all of them at once including processes that left the process
//!    group, and `cpu.stat` counts the CPU of processes that have already
//!    exited. Without it (no cgroup2 mount, no permission) the process
//!    groups do the work alone; the report says which was used.
//! 3. **A watchdog**: a tiny `sh` in its own process group that reads a pipe
//!    only this process can write to. When this process dies in any way,
//!    SIGKILL included, the pipe reaches EOF and the watchdog kills the
//!    cgroup and the process groups and removes the cgroup directory. A
//!    normal stop writes `done` first, so the watchdog only tidies up.
//!
//! Parent-death signals fire when the *thread* that spawned the child ends,
//! so [`Interference::start`](crate::Interference::start) must be called on
//! a thread that lives until the interference is stopped (the main thread).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::usage;

const PREFIX: &str = "taillab-interfere-";

/// A cgroup-v2 directory holding every process of one [`Interference`](crate::Interference).
#[derive(Debug)]
pub(crate) struct Cgroup {
    pub dir: PathBuf,
    procs: File,
}

/// The cgroup2 mount point and this process's cgroup path below it.
fn own_cgroup_dir() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mounts.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        (post.split_whitespace().next() == Some("cgroup2"))
            .then(|| pre.split_whitespace().nth(4).map(PathBuf::from))
            .flatten()
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    Some(mount.join(rel.trim_start_matches('/')))
}

/// Starttime of a live process (its identity across pid reuse).
fn starttime(pid: i32) -> Option<u64> {
    usage::read_process(pid).map(|r| r.starttime)
}

impl Cgroup {
    /// Creates a fresh group below this process's own, or `None` when the
    /// host does not allow it.
    pub fn create() -> Option<Cgroup> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let base = own_cgroup_dir()?;
        let me = std::process::id() as i32;
        let name = format!(
            "{PREFIX}{me}-{}-{}",
            starttime(me)?,
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = base.join(name);
        std::fs::create_dir(&dir).ok()?;
        if !dir.join("cgroup.kill").exists() {
            // Kernels before 5.14 have no cgroup.kill; process groups must do.
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        match OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
        {
            Ok(procs) => Some(Cgroup { dir, procs }),
            Err(_) => {
                let _ = std::fs::remove_dir(&dir);
                None
            }
        }
    }

    /// The fd a child writes `0` to (in `pre_exec`) to move itself in.
    pub fn procs_fd(&self) -> i32 {
        self.procs.as_raw_fd()
    }

    /// Whether `pid` is in this group.
    pub fn contains(&self, pid: i32) -> bool {
        let Some(rel) = self.dir.file_name().and_then(|n| n.to_str()) else {
            return false;
        };
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|t| t.lines().any(|l| l.starts_with("0::") && l.ends_with(rel)))
    }

    /// Processes in the group now.
    pub fn pids(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|t| t.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// CPU used by every process ever in the group, in µs (`cpu.stat`).
    pub fn cpu_usage_us(&self) -> Option<u64> {
        let t = std::fs::read_to_string(self.dir.join("cpu.stat")).ok()?;
        t.lines()
            .find_map(|l| l.strip_prefix("usage_usec "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// SIGKILLs every process in the group.
    pub fn kill(&self) {
        let _ = std::fs::write(self.dir.join("cgroup.kill"), "1");
    }

    /// Waits (up to `timeout`) until the group is empty, then removes it.
    /// Returns the pids still inside if it could not.
    pub fn remove(&self, timeout: Duration) -> Vec<i32> {
        let until = Instant::now() + timeout;
        loop {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return Vec::new();
            }
            if Instant::now() >= until {
                return self.pids();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Kills and removes groups left by taillab processes that no longer exist
/// (a watchdog that was itself killed). Returns what was cleaned.
pub fn sweep_orphans() -> Vec<String> {
    let Some(base) = own_cgroup_dir() else {
        return Vec::new();
    };
    let Ok(dir) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for ent in dir.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let mut it = rest.split('-');
        let (Some(pid), Some(st)) = (
            it.next().and_then(|p| p.parse::<i32>().ok()),
            it.next().and_then(|s| s.parse::<u64>().ok()),
        ) else {
            continue;
        };
        if starttime(pid) == Some(st) {
            continue; // its owner is alive and responsible for it
        }
        let _ = std::fs::write(ent.path().join("cgroup.kill"), "1");
        let cg = Cgroup {
            dir: ent.path(),
            procs: match File::open(ent.path().join("cgroup.procs")) {
                Ok(f) => f,
                Err(_) => continue,
            },
        };
        let left = cg.remove(Duration::from_secs(2));
        out.push(if left.is_empty() {
            format!("removed the interference group left by dead process {pid}")
        } else {
            format!(
                "could not empty the interference group left by process {pid}: {left:?} remain in {}",
                ent.path().display()
            )
        });
    }
    out
}

const WATCHDOG: &str = r#"trap '' INT HUP QUIT
pgs=''
clean=''
while read -r line; do
  case "$line" in
    done) clean=1 ;;
    *) pgs="$pgs -$line" ;;
  esac
done
if [ -z "$clean" ]; then
  [ -n "$1" ] && echo 1 > "$1/cgroup.kill" 2>/dev/null
  [ -n "$pgs" ] && kill -KILL -- $pgs 2>/dev/null
fi
i=0
while [ -n "$1" ] && [ -d "$1" ] && ! rmdir "$1" 2>/dev/null && [ $i -lt 200 ]; do
  sleep 0.05; i=$((i+1))
done
[ -z "$clean" ] && [ -n "$2" ] && rm -rf -- "$2"
"#;

/// The watchdog process (layer 3).
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
    pipe: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts the watchdog for `cgroup` (if any); `scratch` is a folder it
    /// deletes if this process dies without stopping the hogs.
    pub fn start(cgroup: Option<&Path>, scratch: Option<&Path>) -> std::io::Result<Watchdog> {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c")
            .arg(WATCHDOG)
            .arg("taillab-watchdog")
            .arg(cgroup.map(|p| p.as_os_str()).unwrap_or_default())
            .arg(scratch.map(|p| p.as_os_str()).unwrap_or_default())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: setpgid is async-signal-safe; own group keeps a terminal's
        // Ctrl-C away from the watchdog.
        unsafe {
            cmd.pre_exec(|| {
                libc::setpgid(0, 0);
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        let pipe = child.stdin.take();
        Ok(Watchdog { child, pipe })
    }

    /// Tells the watchdog about one more process group to kill.
    pub fn watch_group(&mut self, pgid: i32) {
        if let Some(p) = self.pipe.as_mut() {
            let _ = writeln!(p, "{pgid}");
            let _ = p.flush();
        }
    }

    /// Ends the watchdog: `clean` says everything is already stopped.
    pub fn finish(mut self, clean: bool) {
        if let Some(mut p) = self.pipe.take() {
            if clean {
                let _ = writeln!(p, "done");
            }
        }
        let _ = self.child.wait();
    }

    /// The watchdog's pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Closing the pipe without `done` makes it kill whatever is left.
        self.pipe.take();
        let _ = self.child.wait();
    }
}

/// Sends `sig` to every group in `pgids`.
pub(crate) fn signal_groups(pgids: &[i32], sig: i32) {
    for &g in pgids {
        if g > 1 {
            // SAFETY: kill has no memory effects; a negative pid is a group.
            unsafe { libc::kill(-g, sig) };
        }
    }
}

/// Live (non-zombie) processes whose process group is one of `pgids`.
pub(crate) fn group_members(pgids: &[i32]) -> Vec<i32> {
    let mut buf = String::new();
    usage::process_table()
        .into_iter()
        .filter_map(|(pid, _)| {
            taillab_monitor::procfs::read_into(format!("/proc/{pid}/stat").as_ref(), &mut buf)
                .ok()?;
            // Field 5 (pgrp) follows state and ppid after the name.
            let rest = &buf[buf.rfind(')')? + 1..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let (state, pgrp) = (f.first()?, f.get(2)?.parse::<i32>().ok()?);
            (pgids.contains(&pgrp) && *state != "Z" && *state != "X").then_some(pid)
        })
        .collect()
}
