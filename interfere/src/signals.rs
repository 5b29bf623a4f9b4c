//! Ctrl-C and `kill`: restoring the host when the run is interrupted.
//!
//! Guards restore on `Drop`, but a signal's default action ends the process
//! without running any destructor. Every [`Interference`](crate::Interference)
//! and [`TuningGuard`](crate::TuningGuard) therefore registers an *emergency
//! cleanup* here while it lives (kill the hogs' groups and cgroup; write the
//! journal's saved values back). Two ways to run them:
//!
//! - [`install`]: the binary calls it once at start-up. SIGINT, SIGTERM and
//!   SIGHUP are then caught on a dedicated thread (signal-hook's self-pipe,
//!   so nothing unsafe runs in the handler), which runs every registered
//!   cleanup and then ends the process the way the signal would have
//!   (exit status 128 + signal number as seen by a shell).
//! - A binary with its own handler (one that ends the run early and still
//!   writes partial results) calls [`run_cleanups`] from it instead.
//!
//! SIGKILL cannot be caught: then the watchdog kills the hogs (see
//! [`crate::contain`]), the C-state limit ends with the process (the kernel
//! drops a `/dev/cpu_dma_latency` request when its file closes), and the
//! journal restores the other knobs at the next start or `taillab system
//! reset`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

type Cleanup = Box<dyn Fn() + Send + Sync>;

static REGISTRY: Mutex<Vec<(u64, Cleanup)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(1);
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Registers a cleanup; returns the id to [`unregister`] it with.
pub fn register(f: impl Fn() + Send + Sync + 'static) -> u64 {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((id, Box::new(f)));
    id
}

/// Removes a cleanup (its guard has restored normally).
pub fn unregister(id: u64) {
    REGISTRY
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(i, _)| *i != id);
}

/// Runs every registered cleanup, newest first (knobs applied last are
/// restored first), and removes them. Safe to call more than once.
pub fn run_cleanups() {
    let all = std::mem::take(&mut *REGISTRY.lock().unwrap_or_else(|e| e.into_inner()));
    for (_, f) in all.iter().rev() {
        // One cleanup that panics (say, printing to a stderr whose reader has gone) must
        // not stop the others.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    }
}

/// How many cleanups are registered now (for tests and diagnostics).
pub fn pending() -> usize {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner()).len()
}

/// Catches SIGINT, SIGTERM and SIGHUP on a background thread that runs the
/// cleanups and then ends the process as the signal would have. Call once,
/// early in `main`; later calls do nothing.
pub fn install() -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new()
        .name("taillab-signal".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                // Not eprintln!: it panics when stderr is a pipe whose reader has gone (a
                // parent script killed first), and this thread would die before ending the
                // process, leaving every later SIGTERM caught and ignored.
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "taillab: signal {sig}: stopping interference and restoring tuned settings"
                );
                run_cleanups();
                let _ = signal_hook::low_level::emulate_default_handler(sig);
                std::process::exit(128 + sig);
            }
        })?;
    Ok(())
}
