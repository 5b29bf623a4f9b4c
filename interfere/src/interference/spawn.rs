//! Starting a hog: stress-ng's arguments, the CPU set and the child's own setup (cgroup, nice,
//! affinity), the end of its log, and iperf3's port.

use super::*;

pub(super) fn stress_args(spec: &InterfereSpec, dir: &Path) -> Vec<String> {
    let n = spec.count.to_string();
    let mut a: Vec<String> = Vec::new();
    let mut push = |s: &[&str]| a.extend(s.iter().map(|x| x.to_string()));
    match spec.class {
        Class::Cpu => {
            push(&["--cpu", &n]);
            if let Some(l) = spec.param("load") {
                push(&["--cpu-load", l]);
            }
            if let Some(m) = spec.param("method") {
                push(&["--cpu-method", m]);
            }
        }
        Class::Vm => {
            push(&["--vm", &n, "--vm-keep"]);
            if let Some(b) = spec.param("bytes") {
                push(&["--vm-bytes", b]);
            }
        }
        Class::Io => {
            push(&["--iomix", &n]);
            if let Some(b) = spec.param("bytes") {
                push(&["--iomix-bytes", b]);
            }
        }
        Class::Hdd => {
            push(&["--hdd", &n]);
            if let Some(b) = spec.param("bytes") {
                push(&["--hdd-bytes", b]);
            }
        }
        Class::Cache => push(&["--cache", &n]),
        Class::Net => unreachable!("net runs iperf3"),
    }
    // `--timeout 0`: run until stopped.
    push(&["--timeout", "0", "--temp-path", &dir.display().to_string()]);
    a
}

/// A cpu_set_t for `pre_exec` (built before fork: no allocation after it).
pub(super) fn cpu_set(cpus: &CpuList) -> libc::cpu_set_t {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus.cpus() {
        // SAFETY: CPU_SET on our own set; c < CPU_SETSIZE was checked by preflight.
        unsafe { libc::CPU_SET(c, &mut set) };
    }
    set
}

pub(super) struct ChildSetup {
    pub(super) cpus: Option<libc::cpu_set_t>,
    pub(super) nice: Option<i32>,
    pub(super) cgroup_fd: Option<i32>,
    pub(super) parent: i32,
}

impl ChildSetup {
    /// Runs in the child between fork and exec: only async-signal-safe calls.
    pub(super) fn apply(&self) -> std::io::Result<()> {
        // SAFETY: plain syscalls on the calling (child) process.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // The parent may have died before the prctl: then nobody will kill us.
            if libc::getppid() != self.parent {
                libc::_exit(1);
            }
            if let Some(fd) = self.cgroup_fd {
                // A failure leaves the child outside the group; checked after spawn.
                libc::write(fd, b"0".as_ptr().cast(), 1);
            }
            if let Some(set) = &self.cpus {
                if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            if let Some(n) = self.nice {
                if libc::setpriority(libc::PRIO_PROCESS, 0, n) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

pub(super) fn tail_of(path: &Path, lines: usize) -> Vec<String> {
    let t = std::fs::read_to_string(path).unwrap_or_default();
    let v: Vec<String> = t.lines().map(str::to_string).collect();
    v[v.len().saturating_sub(lines)..].to_vec()
}

/// Describes an exit status in words.
pub fn describe_status(s: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        _ => "ended".into(),
    }
}

/// A free TCP port on 127.0.0.1 (the kernel's choice, released at once).
pub(super) fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Whether something listens on 127.0.0.1:`port` (from /proc/net/tcp, so
/// that checking does not use up iperf3's test connection).
pub(super) fn listening(port: u16) -> bool {
    let want = format!("0100007F:{port:04X}");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| {
        t.lines().skip(1).any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&want.as_str()) && f.get(3) == Some(&"0A")
        })
    })
}
