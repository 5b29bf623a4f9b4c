//! Parsers for the `/proc` files the monitor reads, and cheap readers for them.
//!
//! Every parser takes the file's text and returns a typed value or a
//! [`ParseError`] that names the file and the field, so a kernel that prints
//! something unexpected gives one clear message rather than a wrong number.
//! They are pure functions so that the tests can feed them captured files
//! (`tests/data`) from this machine and hand-made edge cases.
//!
//! Counters are kept raw (clock ticks, counts); rates are computed by the
//! sampler from two readings with [`counter_delta`], which is where the
//! awkward cases live: a `/proc/stat` `iowait` value that goes *backwards*
//! (documented kernel behaviour on tickless kernels) and 32-bit counters that
//! wrap on 32-bit kernels.

use std::fs::File;
use std::io::Read;
use std::path::Path;

/// A `/proc` file did not have the shape we expect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot parse {file}: {what} (is this a Linux /proc? please report the file's contents)")]
pub struct ParseError {
    /// Which file (e.g. `/proc/stat`).
    pub file: &'static str,
    /// What was missing or malformed.
    pub what: String,
}

fn perr(file: &'static str, what: impl Into<String>) -> ParseError {
    ParseError {
        file,
        what: what.into(),
    }
}

/// The difference between two readings of a monotonically increasing kernel
/// counter.
///
/// - `new >= old`: the plain difference.
/// - `new < old` where `old` was in the top half of the 32-bit range and
///   `new` in the bottom half: a 32-bit counter wrapped (`unsigned long` on a
///   32-bit kernel); the difference is taken modulo 2^32.
/// - any other decrease (the kernel documents that `iowait` in `/proc/stat`
///   may go backwards; a CPU going offline removes its ticks): no progress, 0.
///   Counting such a decrease as a wrap would invent billions of ticks.
pub fn counter_delta(old: u64, new: u64) -> u64 {
    const HALF32: u64 = 1 << 31;
    if new >= old {
        new - old
    } else if (HALF32..=u32::MAX as u64).contains(&old) && new < HALF32 {
        new + (1u64 << 32) - old
    } else {
        0
    }
}

/// One `cpu` line of `/proc/stat`, in clock ticks (`USER_HZ`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CpuTimes {
    /// User mode at normal priority (guest time included).
    pub user: u64,
    /// User mode at positive nice values (niced guest time included).
    pub nice: u64,
    /// Kernel mode, interrupts excluded.
    pub system: u64,
    /// Idle with no I/O outstanding.
    pub idle: u64,
    /// Idle while I/O was outstanding; may go backwards (see [`counter_delta`]).
    pub iowait: u64,
    /// Serving hardware interrupts.
    pub irq: u64,
    /// Serving softirqs (network receive, timers, RCU, ...).
    pub softirq: u64,
    /// Involuntary wait while the hypervisor ran something else on this vCPU.
    pub steal: u64,
}

impl CpuTimes {
    /// Ticks spent running something on this CPU (guest time is already
    /// included in `user`/`nice` by the kernel, so it is not added again).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }
    /// All ticks, steal included: the wall time the CPU existed for.
    pub fn total(&self) -> u64 {
        self.busy() + self.idle + self.iowait + self.steal
    }
    /// Field-wise [`counter_delta`].
    pub fn delta(&self, new: &CpuTimes) -> CpuTimes {
        CpuTimes {
            user: counter_delta(self.user, new.user),
            nice: counter_delta(self.nice, new.nice),
            system: counter_delta(self.system, new.system),
            idle: counter_delta(self.idle, new.idle),
            iowait: counter_delta(self.iowait, new.iowait),
            irq: counter_delta(self.irq, new.irq),
            softirq: counter_delta(self.softirq, new.softirq),
            steal: counter_delta(self.steal, new.steal),
        }
    }
}

/// The parts of `/proc/stat` the monitor uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostStat {
    /// The aggregate `cpu` line.
    pub cpu: CpuTimes,
    /// `cpuN` lines as (N, times), in file order (offline CPUs are absent).
    pub per_cpu: Vec<(usize, CpuTimes)>,
    /// Context switches since boot (`ctxt`), if printed.
    pub ctxt: Option<u64>,
    /// Interrupts since boot (first number of `intr`), if printed.
    pub intr: Option<u64>,
    /// Runnable tasks right now (`procs_running`), if printed.
    pub procs_running: Option<u64>,
    /// Tasks blocked on I/O right now (`procs_blocked`), if printed.
    pub procs_blocked: Option<u64>,
}

fn parse_cpu_fields<'a>(mut it: impl Iterator<Item = &'a str>) -> Result<CpuTimes, ParseError> {
    let mut v = [0u64; 8];
    let mut n = 0;
    for (i, tok) in it.by_ref().take(8).enumerate() {
        v[i] = tok.parse().map_err(|_| {
            perr(
                "/proc/stat",
                format!("cpu field {} is `{tok}`, not a number", i + 1),
            )
        })?;
        n = i + 1;
    }
    // Kernels before 2.6 printed only four fields; later fields default to 0.
    if n < 4 {
        return Err(perr(
            "/proc/stat",
            format!("cpu line has {n} fields, need at least 4"),
        ));
    }
    Ok(CpuTimes {
        user: v[0],
        nice: v[1],
        system: v[2],
        idle: v[3],
        iowait: v[4],
        irq: v[5],
        softirq: v[6],
        steal: v[7],
    })
}

/// Parses `/proc/stat`.
pub fn parse_stat(text: &str) -> Result<HostStat, ParseError> {
    let mut out = HostStat::default();
    let mut saw_cpu = false;
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(key) = it.next() else { continue };
        let first_num = |it: &mut std::str::SplitAsciiWhitespace| -> Option<u64> {
            it.next().and_then(|t| t.parse().ok())
        };
        match key {
            "cpu" => {
                out.cpu = parse_cpu_fields(it)?;
                saw_cpu = true;
            }
            k if k.starts_with("cpu") => {
                let Ok(n) = k[3..].parse::<usize>() else {
                    continue;
                };
                out.per_cpu.push((n, parse_cpu_fields(it)?));
            }
            "ctxt" => out.ctxt = first_num(&mut it),
            "intr" => out.intr = first_num(&mut it),
            "procs_running" => out.procs_running = first_num(&mut it),
            "procs_blocked" => out.procs_blocked = first_num(&mut it),
            _ => {}
        }
    }
    if !saw_cpu {
        return Err(perr("/proc/stat", "no aggregate `cpu` line"));
    }
    Ok(out)
}

/// `/proc/loadavg`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct LoadAvg {
    /// Runnable plus uninterruptible tasks, exponentially averaged over 1 minute.
    pub load1: f64,
    /// The same over 5 minutes.
    pub load5: f64,
    /// The same over 15 minutes.
    pub load15: f64,
    /// Runnable scheduling entities right now.
    pub running: u64,
    /// Scheduling entities (threads) that exist.
    pub total: u64,
}

/// Parses `/proc/loadavg` (`1.96 0.69 0.28 9/144 8194`).
pub fn parse_loadavg(text: &str) -> Result<LoadAvg, ParseError> {
    const F: &str = "/proc/loadavg";
    let mut it = text.split_ascii_whitespace();
    let mut num = |name: &str| -> Result<f64, ParseError> {
        let t = it
            .next()
            .ok_or_else(|| perr(F, format!("missing {name}")))?;
        t.parse()
            .map_err(|_| perr(F, format!("{name} is `{t}`, not a number")))
    };
    let (load1, load5, load15) = (num("load1")?, num("load5")?, num("load15")?);
    let (running, total) = match it.next().and_then(|t| t.split_once('/')) {
        Some((r, t)) => (r.parse().unwrap_or(0), t.parse().unwrap_or(0)),
        None => (0, 0),
    };
    Ok(LoadAvg {
        load1,
        load5,
        load15,
        running,
        total,
    })
}

/// The fields of `/proc/[pid]/stat` (or `/proc/[pid]/task/[tid]/stat`) the
/// monitor uses. Times are in clock ticks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PidStat {
    /// Field 1: the process (or thread) id.
    pub pid: i32,
    /// `comm`: the name, at most 15 bytes, which may contain spaces and
    /// parentheses.
    pub comm: String,
    /// Field 3: `R` running, `S` sleeping, `D` uninterruptible, `Z` zombie, ...
    pub state: char,
    /// Field 4: parent pid.
    pub ppid: i32,
    /// Field 10: minor page faults (no disk access) since start.
    pub minflt: u64,
    /// Field 12: major page faults (read from disk) since start.
    pub majflt: u64,
    /// Field 14: user-mode CPU time, in clock ticks.
    pub utime: u64,
    /// Field 15: kernel-mode CPU time, in clock ticks.
    pub stime: u64,
    /// Field 16: user-mode CPU time of children that have exited and been
    /// waited for, in clock ticks (0 if missing).
    pub cutime: u64,
    /// Field 17: kernel-mode CPU time of those children, in clock ticks (0 if missing).
    pub cstime: u64,
    /// Field 20: threads in the process (1 if missing).
    pub num_threads: u64,
    /// Field 22: start time in ticks after boot; with `pid` it identifies a
    /// process across pid reuse.
    pub starttime: u64,
    /// Field 24: resident set in pages.
    pub rss_pages: u64,
    /// CPU it last ran on (field 39), if the kernel printed it.
    pub processor: Option<u32>,
}

impl PidStat {
    /// CPU time of this task itself (not of reaped children), in ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.utime + self.stime
    }
}

/// Parses `/proc/[pid]/stat`. The name is taken between the first `(` and the
/// *last* `)`, because a process may call itself `a) b (c` and the numeric
/// fields only start after the final parenthesis.
pub fn parse_pid_stat(text: &str) -> Result<PidStat, ParseError> {
    const F: &str = "/proc/[pid]/stat";
    let open = text
        .find('(')
        .ok_or_else(|| perr(F, "no `(` before the process name"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| perr(F, "no `)` after the process name"))?;
    if close < open {
        return Err(perr(F, "`)` before `(`"));
    }
    let pid = text[..open]
        .trim()
        .parse()
        .map_err(|_| perr(F, "pid is not a number"))?;
    let comm = text[open + 1..close].to_string();
    // Fields after the name, numbered as in proc(5): index 0 here is field 3.
    let rest: Vec<&str> = text[close + 1..].split_ascii_whitespace().collect();
    let field = |n: usize| -> Result<u64, ParseError> {
        let t = rest
            .get(n - 3)
            .ok_or_else(|| perr(F, format!("field {n} is missing")))?;
        t.parse()
            .map_err(|_| perr(F, format!("field {n} is `{t}`, not a number")))
    };
    let state = rest
        .first()
        .and_then(|s| s.chars().next())
        .ok_or_else(|| perr(F, "state is missing"))?;
    let ppid = rest
        .get(1)
        .and_then(|t| t.parse::<i32>().ok())
        .ok_or_else(|| perr(F, "field 4 (ppid) is missing or not a number"))?;
    Ok(PidStat {
        pid,
        comm,
        state,
        ppid,
        minflt: field(10)?,
        majflt: field(12)?,
        utime: field(14)?,
        stime: field(15)?,
        // cutime/cstime are signed in the kernel's format; never negative in practice.
        cutime: field(16).unwrap_or(0),
        cstime: field(17).unwrap_or(0),
        num_threads: field(20).unwrap_or(1),
        starttime: field(22)?,
        rss_pages: field(24)?,
        processor: field(39).ok().map(|v| v as u32),
    })
}

/// The fields of `/proc/[pid]/status` the monitor uses (all optional: a
/// kernel thread has no `VmRSS`, old kernels lack the context-switch lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PidStatus {
    /// `Name`: the same 15-byte name as `comm`.
    pub name: Option<String>,
    /// `VmRSS`: resident set now, kB.
    pub vm_rss_kb: Option<u64>,
    /// `VmHWM`: peak resident set since start, kB.
    pub vm_hwm_kb: Option<u64>,
    /// `voluntary_ctxt_switches`: times this task blocked (I/O, locks, sleeps).
    /// For a process's leader these are the leader thread's only.
    pub voluntary_ctxt_switches: Option<u64>,
    /// `nonvoluntary_ctxt_switches`: times this task was preempted while runnable.
    pub nonvoluntary_ctxt_switches: Option<u64>,
}

/// Parses `/proc/[pid]/status`.
pub fn parse_pid_status(text: &str) -> PidStatus {
    let mut out = PidStatus::default();
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let num = || {
            v.split_ascii_whitespace()
                .next()
                .and_then(|t| t.parse().ok())
        };
        match k {
            "Name" => out.name = Some(v.to_string()),
            "VmRSS" => out.vm_rss_kb = num(),
            "VmHWM" => out.vm_hwm_kb = num(),
            "voluntary_ctxt_switches" => out.voluntary_ctxt_switches = num(),
            "nonvoluntary_ctxt_switches" => out.nonvoluntary_ctxt_switches = num(),
            _ => {}
        }
    }
    out
}

/// `/proc/[pid]/io`: bytes a process moved through `read`/`write`-like
/// calls (`rchar`/`wchar`, sockets and page cache included) and bytes it
/// made the block layer fetch or send (`read_bytes`/`write_bytes`, storage
/// only). Reading it needs the same permission as ptrace (own or child
/// processes, or root).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct PidIo {
    /// Bytes returned by read-like calls (sockets and page-cache hits included).
    pub rchar: u64,
    /// Bytes passed to write-like calls (sockets and page cache included).
    pub wchar: u64,
    /// Read-like system calls made.
    pub syscr: u64,
    /// Write-like system calls made.
    pub syscw: u64,
    /// Bytes this process caused to be fetched from storage.
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to storage (counted when dirtied).
    pub write_bytes: u64,
    /// Dirty page-cache bytes this process truncated before they were written.
    pub cancelled_write_bytes: u64,
}

/// Parses `/proc/[pid]/io` (`rchar: 2012` lines). Missing lines stay 0: the
/// storage lines are absent when the kernel has no task I/O accounting.
pub fn parse_pid_io(text: &str) -> Result<PidIo, ParseError> {
    const F: &str = "/proc/[pid]/io";
    let mut out = PidIo::default();
    let mut seen = 0;
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let slot = match k.trim() {
            "rchar" => &mut out.rchar,
            "wchar" => &mut out.wchar,
            "syscr" => &mut out.syscr,
            "syscw" => &mut out.syscw,
            "read_bytes" => &mut out.read_bytes,
            "write_bytes" => &mut out.write_bytes,
            "cancelled_write_bytes" => &mut out.cancelled_write_bytes,
            _ => continue,
        };
        *slot = v
            .trim()
            .parse()
            .map_err(|_| perr(F, format!("{} is `{}`, not a number", k.trim(), v.trim())))?;
        seen += 1;
    }
    if seen == 0 {
        return Err(perr(F, "no `rchar:`-style lines"));
    }
    Ok(out)
}

/// `/proc/[pid]/task/[tid]/schedstat`: nanoseconds on the CPU, nanoseconds
/// *runnable but waiting* for a CPU (run-queue delay), and timeslices.
/// The wait time is the most direct evidence that something else took a
/// worker's CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedStat {
    /// Time spent on a CPU, ns.
    pub run_ns: u64,
    /// Time runnable but waiting in a run queue, ns.
    pub wait_ns: u64,
    /// Times it was scheduled onto a CPU (0 when the kernel printed only two numbers).
    pub timeslices: u64,
}

/// Parses a `schedstat` file (`112199878 7933760 420`).
pub fn parse_schedstat(text: &str) -> Result<SchedStat, ParseError> {
    const F: &str = "/proc/[pid]/schedstat";
    let v: Vec<u64> = text
        .split_ascii_whitespace()
        .map_while(|t| t.parse().ok())
        .collect();
    if v.len() < 2 {
        return Err(perr(F, format!("need 2–3 numbers, got `{}`", text.trim())));
    }
    Ok(SchedStat {
        run_ns: v[0],
        wait_ns: v[1],
        timeslices: v.get(2).copied().unwrap_or(0),
    })
}

/// Reads a small `/proc` file into `buf` (cleared first), reusing its
/// allocation: the sampler reads hundreds of these per second and should not
/// allocate for each.
pub fn read_into(path: &Path, buf: &mut String) -> std::io::Result<()> {
    buf.clear();
    File::open(path)?.read_to_string(buf)?;
    Ok(())
}

/// `/proc` files kept open between reads. Reading one again is a `pread` from offset 0
/// (procfs writes the text afresh for every read from the start), not the open, stat, read,
/// read and close of [`read_into`] with its path walk: on a VM whose system calls are traced
/// (this project's has a BPF hook on each) that was most of a 100 ms sample's 0.26 ms.
/// A file that fails to read is closed (its thread or process is gone); [`ProcFiles::sweep`]
/// closes those not read since the last sweep.
#[derive(Default)]
pub struct ProcFiles {
    open: std::collections::HashMap<std::path::PathBuf, (File, u64)>,
    /// The current sweep round; each file remembers the last round it was read in.
    round: u64,
    bytes: Vec<u8>,
}

impl ProcFiles {
    /// Reads `path` into `buf` (cleared first), opening it the first time.
    pub fn read(&mut self, path: &Path, buf: &mut String) -> std::io::Result<()> {
        buf.clear();
        let round = self.round;
        let f = match self.open.entry(path.to_path_buf()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => v.insert((File::open(path)?, round)),
        };
        f.1 = round;
        let got = read_from_start(&f.0, &mut self.bytes).and_then(|_| {
            std::str::from_utf8(&self.bytes)
                .map(|s| buf.push_str(s))
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        });
        if got.is_err() {
            self.open.remove(path);
        }
        got
    }

    /// Closes the files not read since the last sweep (threads and processes that went
    /// away, or are no longer watched).
    pub fn sweep(&mut self) {
        let round = self.round;
        self.open.retain(|_, (_, last)| *last == round);
        self.round += 1;
    }

    /// Files kept open now.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// No file kept open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// The whole of an open file, read with `pread` from offset 0 into `out` (cleared first).
fn read_from_start(f: &File, out: &mut Vec<u8>) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    out.clear();
    loop {
        let len = out.len();
        out.resize(len + 4096, 0);
        let n = f.read_at(&mut out[len..], len as u64)?;
        out.truncate(len + n);
        if n == 0 {
            return Ok(());
        }
    }
}

/// Kernel clock ticks per second (`USER_HZ`), the unit of `/proc` CPU times.
pub fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no memory side effects.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as f64
    } else {
        100.0
    }
}

/// Page size in bytes, the unit of `rss` in `/proc/[pid]/stat`.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no memory side effects.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// The calling thread's kernel thread id.
pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Nanoseconds on `CLOCK_MONOTONIC`, the clock every harness stamp uses, so
/// samples line up with request stamps and interval histograms.
pub fn mono_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// Nanoseconds on `CLOCK_BOOTTIME`, the clock `starttime` in
/// `/proc/[pid]/stat` counts on.
pub fn boot_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// CPU time consumed by the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the Unix epoch (wall clock), for lining samples up with
/// logs written by other tools.
pub fn wall_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delta_plain_wrap_and_backwards() {
        assert_eq!(counter_delta(10, 25), 15);
        // 32-bit wrap: from 2^32 - 5 to 3 is 8 ticks.
        assert_eq!(counter_delta(u32::MAX as u64 - 4, 3), 8);
        // A small decrease (iowait going backwards) is no progress, not a wrap.
        assert_eq!(counter_delta(1000, 990), 0);
        // A decrease of a 64-bit counter is not a 32-bit wrap either.
        assert_eq!(counter_delta(1 << 40, 5), 0);
    }

    #[test]
    fn pid_io_fields_and_garbage() {
        let t = "rchar: 2012\nwchar: 77\nsyscr: 5\nsyscw: 3\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        let io = parse_pid_io(t).unwrap();
        assert_eq!((io.rchar, io.wchar, io.syscr, io.syscw), (2012, 77, 5, 3));
        assert_eq!((io.read_bytes, io.write_bytes), (4096, 8192));
        assert!(parse_pid_io("rchar: x\n").is_err());
        assert!(parse_pid_io("").is_err());
    }

    #[test]
    fn pid_stat_name_with_parens_and_spaces() {
        let s = "42 (a) b (c) S 1 42 42 0 -1 4194304 7 0 3 0 11 12 13 14 20 0 2 0 999 3133440 388 1 2 3 4 5 6 7 8 9 0 0 0 0 17 1 0";
        let p = parse_pid_stat(s).unwrap();
        assert_eq!(p.comm, "a) b (c");
        assert_eq!((p.pid, p.state, p.ppid), (42, 'S', 1));
        assert_eq!((p.minflt, p.majflt, p.utime, p.stime), (7, 3, 11, 12));
        assert_eq!((p.num_threads, p.starttime, p.rss_pages), (2, 999, 388));
        assert_eq!(p.processor, Some(1));
    }

    /// A kept file reads what it holds now, whole (past 4 KiB too); a thread's file fails
    /// once the thread is gone and is closed; a sweep closes what was not read since the last.
    #[test]
    fn kept_files_read_afresh_and_close_when_gone() {
        let mut files = ProcFiles::default();
        let mut buf = String::new();
        let path = std::env::temp_dir().join(format!("taillab-procfiles-{}", std::process::id()));
        std::fs::write(&path, "first").unwrap();
        files.read(&path, &mut buf).unwrap();
        assert_eq!(buf, "first");
        let long = "x".repeat(10_000);
        std::fs::write(&path, &long).unwrap();
        files.read(&path, &mut buf).unwrap();
        assert_eq!(buf, long, "the same open file, read from its start");
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(gettid()).unwrap();
            done_rx.recv().unwrap();
        });
        let task = std::path::PathBuf::from(format!("/proc/self/task/{}/stat", rx.recv().unwrap()));
        files.read(&task, &mut buf).unwrap();
        assert!(parse_pid_stat(&buf).is_ok(), "{buf}");
        assert_eq!(files.len(), 2);
        done_tx.send(()).unwrap();
        t.join().unwrap();
        // The kernel may keep a dead thread's entry readable for a moment: wait for the error.
        let gone = (0..200).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(5));
            files.read(&task, &mut buf).is_err()
        });
        assert!(gone, "a gone thread's stat still read");
        assert_eq!(files.len(), 1, "a file that failed is closed");
        files.sweep();
        files.sweep();
        assert!(
            files.is_empty(),
            "a file not read since the last sweep is closed"
        );
        let _ = std::fs::remove_file(&path);
    }
}
