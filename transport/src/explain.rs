//! `--explain` over loopback: the server's own stamps of each request, for the coordinator's
//! join. A client places the server's queue and service from its send time (it gets
//! durations, not times); the join needs when the server's worker really took and finished
//! each request, on the host's one monotonic clock. With `record.explain`, `taillab serve`
//! logs `(id, worker tid, enqueued, started, finished)` per request ([`record`]) and prints
//! them as `stamp` lines before its last line ([`emit`]); the coordinator keeps them as they
//! arrive ([`keep_line`]) for [`take`].

use parking_lot::Mutex;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request as the server saw it: id, the worker thread's tid, enqueued (the kernel's
/// receive stamp), started, finished.
pub type ServerStamp = [u64; 5];

static ON: AtomicBool = AtomicBool::new(false);
static LOG: Mutex<Vec<ServerStamp>> = Mutex::new(Vec::new());
static KEPT: Mutex<Vec<ServerStamp>> = Mutex::new(Vec::new());

thread_local! {
    static TID: u64 = {
        // SAFETY: gettid takes no arguments and cannot fail.
        unsafe { libc::syscall(libc::SYS_gettid) as u64 }
    };
}

/// The server logs its stamps from now on (`taillab serve --explain`).
pub fn enable() {
    ON.store(true, Ordering::Release);
}

/// Logs one served request, when enabled (a lock per request: only explained runs pay it).
#[inline]
pub fn record(id: u64, enqueued: u64, started: u64, finished: u64) {
    if ON.load(Ordering::Relaxed) {
        let tid = TID.with(|t| *t);
        LOG.lock().push([id, tid, enqueued, started, finished]);
    }
}

/// Prints the log as `stamp ID TID ENQUEUED STARTED FINISHED` lines.
pub fn emit() {
    let log = std::mem::take(&mut *LOG.lock());
    let mut o = std::io::BufWriter::new(std::io::stdout().lock());
    for s in log {
        let _ = writeln!(o, "stamp {} {} {} {} {}", s[0], s[1], s[2], s[3], s[4]);
    }
    let _ = o.flush();
}

/// Keeps a server's `stamp` line (the coordinator's side); whether it was one.
pub fn keep_line(l: &str) -> bool {
    let Some(rest) = l.strip_prefix("stamp ") else {
        return false;
    };
    let v: Vec<u64> = rest.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    if let Ok(s) = <ServerStamp>::try_from(v) {
        KEPT.lock().push(s);
    }
    true
}

/// The server stamps kept so far, taken.
pub fn take() -> Vec<ServerStamp> {
    std::mem::take(&mut *KEPT.lock())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp_lines_read_back_and_others_are_left_alone() {
        assert!(keep_line("stamp 7 4711 100 150 190"));
        assert!(!keep_line("stats {}"));
        assert!(keep_line("stamp 1 2"), "a cut line is one of ours, not kept");
        assert_eq!(take(), vec![[7, 4711, 100, 150, 190]]);
        assert!(take().is_empty());
    }
}
