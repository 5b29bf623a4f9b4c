//! What a process used between two moments, from `/proc` (the columns of a
//! resource table: CPU, peak RSS, faults, context switches, I/O bytes).
//!
//! A [`UsageSnapshot`] reads each process once; [`UsageSnapshot::usage_since`]
//! subtracts an earlier snapshot. The parsers are the monitor's
//! ([`taillab_monitor::procfs`]), so these numbers and the `environment`
//! section's agree on what a field means. Notes on the figures:
//! - CPU is `utime + stime` of the whole process (all threads), in clock
//!   ticks, so its resolution is 10 ms at `USER_HZ` = 100.
//! - Context switches are summed over the process's threads (the leader's
//!   `status` counts only its own).
//! - Peak RSS is `VmHWM`, the high-water mark since the process started,
//!   not just the window.
//! - I/O: `read_bytes`/`write_bytes` are what reached the block layer;
//!   `read_chars`/`write_chars` (`rchar`/`wchar`) include sockets and the
//!   page cache, which is where loopback traffic shows.
//! - A pid is identified together with its start time, so a reused pid is a
//!   different process, never a negative difference.

use std::collections::BTreeMap;

pub use taillab_core::sections::planned::ProcessUsage;
use taillab_monitor::procfs::{self, PidIo};

/// One reading of a process's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcReading {
    /// The process id read.
    pub pid: i32,
    /// Parent pid (`/proc/PID/stat` field 4), for walking the process tree.
    pub ppid: i32,
    /// `comm` (at most 15 bytes).
    pub name: String,
    /// `Z` for a zombie, `R`, `S`, ... as in `/proc/PID/stat`.
    pub state: char,
    /// Start time in ticks after boot: with `pid`, the process's identity.
    pub starttime: u64,
    /// `utime + stime` of all threads, in clock ticks (`/proc/PID/stat` fields 14 and 15).
    pub cpu_ticks: u64,
    /// Minor page faults since start (`/proc/PID/stat` field 10).
    pub minflt: u64,
    /// Major page faults (read from disk) since start (`/proc/PID/stat` field 12).
    pub majflt: u64,
    /// Voluntary context switches since start, summed over the threads' `status`.
    pub vol_cs: u64,
    /// Involuntary context switches (preemptions) since start, summed over the threads.
    pub invol_cs: u64,
    /// Resident set now, bytes (`/proc/PID/stat` field 24 × page size).
    pub rss_bytes: u64,
    /// Peak resident set since start, bytes (`VmHWM` of `/proc/PID/status`; 0 if unreadable).
    pub hwm_bytes: u64,
    /// `None` when `/proc/PID/io` is not readable (another user's process).
    pub io: Option<PidIo>,
}

/// Reads one process, or `None` if it no longer exists.
pub fn read_process(pid: i32) -> Option<ProcReading> {
    let mut buf = String::new();
    procfs::read_into(format!("/proc/{pid}/stat").as_ref(), &mut buf).ok()?;
    let st = procfs::parse_pid_stat(&buf).ok()?;
    let mut r = ProcReading {
        pid,
        ppid: st.ppid,
        name: st.comm.clone(),
        state: st.state,
        starttime: st.starttime,
        cpu_ticks: st.cpu_ticks(),
        minflt: st.minflt,
        majflt: st.majflt,
        rss_bytes: st.rss_pages * procfs::page_size(),
        ..Default::default()
    };
    if procfs::read_into(format!("/proc/{pid}/status").as_ref(), &mut buf).is_ok() {
        let s = procfs::parse_pid_status(&buf);
        r.hwm_bytes = s.vm_hwm_kb.unwrap_or(0) * 1024;
    }
    if let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for ent in dir.flatten() {
            if procfs::read_into(&ent.path().join("status"), &mut buf).is_ok() {
                let s = procfs::parse_pid_status(&buf);
                r.vol_cs += s.voluntary_ctxt_switches.unwrap_or(0);
                r.invol_cs += s.nonvoluntary_ctxt_switches.unwrap_or(0);
            }
        }
    }
    if procfs::read_into(format!("/proc/{pid}/io").as_ref(), &mut buf).is_ok() {
        r.io = procfs::parse_pid_io(&buf).ok();
    }
    Some(r)
}

/// True when `pid` exists and is not a zombie (a zombie has exited: it
/// holds no memory and uses no CPU, it only waits to be reaped).
pub fn is_alive(pid: i32) -> bool {
    read_process(pid).is_some_and(|r| r.state != 'Z' && r.state != 'X')
}

/// Readings of several processes at one moment.
#[derive(Debug, Clone, Default)]
pub struct UsageSnapshot {
    /// `CLOCK_MONOTONIC` ns when the snapshot was taken.
    pub mono_ns: u64,
    /// One reading per pid that existed when read.
    pub readings: BTreeMap<i32, ProcReading>,
}

impl UsageSnapshot {
    /// Reads every pid that still exists.
    pub fn take(pids: &[i32]) -> UsageSnapshot {
        UsageSnapshot {
            mono_ns: procfs::mono_ns(),
            readings: pids
                .iter()
                .filter_map(|&p| read_process(p).map(|r| (p, r)))
                .collect(),
        }
    }

    /// Usage of each process of `earlier` (and of processes born since)
    /// between `earlier` and `self`. A process in `earlier` but gone now is
    /// reported with `alive: false` and zero counters: what it used after
    /// `earlier` went with it (its parent's `cutime` holds it once reaped).
    pub fn usage_since(&self, earlier: &UsageSnapshot) -> Vec<ProcessUsage> {
        let secs = (self.mono_ns.saturating_sub(earlier.mono_ns)) as f64 / 1e9;
        let mut pids: Vec<i32> = earlier.readings.keys().copied().collect();
        pids.extend(
            self.readings
                .keys()
                .filter(|p| !earlier.readings.contains_key(p)),
        );
        pids.iter()
            .map(|p| usage_between(earlier.readings.get(p), self.readings.get(p), secs))
            .collect()
    }
}

/// The difference of two readings of one process over `secs` seconds. With
/// no earlier reading (born during the window) everything it used counts;
/// with no later one (exited) nothing can be said beyond its identity.
pub fn usage_between(a: Option<&ProcReading>, b: Option<&ProcReading>, secs: f64) -> ProcessUsage {
    let zero = ProcReading::default();
    let (pid, name) = match (a, b) {
        (_, Some(r)) | (Some(r), None) => (r.pid, r.name.clone()),
        (None, None) => (0, String::new()),
    };
    let Some(b) = b.filter(|b| !matches!(a, Some(a) if a.starttime != b.starttime)) else {
        return ProcessUsage {
            pid,
            name,
            alive: false,
            ..Default::default()
        };
    };
    let a = a.unwrap_or(&zero);
    let d = procfs::counter_delta;
    let cpu_s = d(a.cpu_ticks, b.cpu_ticks) as f64 / procfs::clock_ticks_per_s();
    let io = |f: fn(&PidIo) -> u64| match (a.io.as_ref().or(Some(&PidIo::default())), &b.io) {
        (Some(x), Some(y)) => Some(d(f(x), f(y))),
        _ => None,
    };
    ProcessUsage {
        pid,
        name,
        alive: b.state != 'Z' && b.state != 'X',
        cpu_s,
        cpu_pct: if secs > 0.0 {
            100.0 * cpu_s / secs
        } else {
            0.0
        },
        rss_max_bytes: b.hwm_bytes.max(b.rss_bytes),
        minflt: d(a.minflt, b.minflt),
        majflt: d(a.majflt, b.majflt),
        vol_cs: d(a.vol_cs, b.vol_cs),
        invol_cs: d(a.invol_cs, b.invol_cs),
        read_bytes: io(|x| x.read_bytes),
        write_bytes: io(|x| x.write_bytes),
        read_chars: io(|x| x.rchar),
        write_chars: io(|x| x.wchar),
    }
}

/// Every process as `(pid, ppid)` from one pass over `/proc`.
pub fn process_table() -> Vec<(i32, i32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut buf = String::new();
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            procfs::read_into(format!("/proc/{pid}/stat").as_ref(), &mut buf).ok()?;
            let s = procfs::parse_pid_stat(&buf).ok()?;
            Some((pid, s.ppid))
        })
        .collect()
}

/// `root` and all its descendants that exist now, root first, then in
/// breadth-first order.
pub fn descendants(root: i32, table: &[(i32, i32)]) -> Vec<i32> {
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        let mut kids: Vec<i32> = table
            .iter()
            .filter(|(_, pp)| *pp == p)
            .map(|(c, _)| *c)
            .collect();
        kids.sort_unstable();
        out.extend(kids);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_reads_and_differences() {
        let me = std::process::id() as i32;
        let a = UsageSnapshot::take(&[me]);
        // Burn a little CPU and fault in fresh pages so the difference moves.
        let mut v = vec![0u8; 8 << 20];
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < 120 {
            for (i, b) in v.iter_mut().enumerate().step_by(4096) {
                // Never 0: storing what a fresh page holds could be optimised out.
                *b = b.wrapping_add((i >> 12) as u8 | 1);
                x = x.wrapping_add(*b as u64);
            }
        }
        std::hint::black_box(x);
        let b = UsageSnapshot::take(&[me]);
        std::hint::black_box(&v);
        let u = b.usage_since(&a);
        assert_eq!(u.len(), 1);
        let u = &u[0];
        assert!(u.alive && u.pid == me);
        assert!(u.cpu_s > 0.0, "{u:?}");
        assert!(u.minflt >= 1000, "8 MiB of fresh pages: {u:?}");
        assert!(u.rss_max_bytes >= 8 << 20, "{u:?}");
        assert!(u.read_chars.is_some(), "own /proc/self/io is readable");
    }

    #[test]
    fn gone_and_reused_pids_are_not_differences() {
        let a = ProcReading {
            pid: 7,
            starttime: 100,
            cpu_ticks: 50,
            ..Default::default()
        };
        let reused = ProcReading {
            pid: 7,
            starttime: 200,
            cpu_ticks: 5,
            state: 'R',
            ..Default::default()
        };
        let u = usage_between(Some(&a), Some(&reused), 1.0);
        assert!(!u.alive && u.cpu_s == 0.0);
        let u = usage_between(Some(&a), None, 1.0);
        assert!(!u.alive && u.pid == 7);
    }

    #[test]
    fn descendants_walk_the_tree() {
        let t = [(1, 0), (10, 1), (11, 10), (12, 10), (13, 11), (20, 1)];
        assert_eq!(descendants(10, &t), vec![10, 11, 12, 13]);
        assert_eq!(descendants(20, &t), vec![20]);
    }
}
