//! taillab-explain: why was each slow request slow? (`record.explain`, `--explain`)
//!
//! `taillab attribute` explains the tail across designed runs; this explains one run,
//! request by request. While the run measures, kernel tracepoints record on the CPUs of
//! the measured threads what the scheduler and the interrupts did: every switch with the
//! state the previous task left in, every wake-up bound for those CPUs (and who woke),
//! hard and soft interrupts by number and vector, the local timer and IPIs, and user page
//! faults. They are opened through `perf_event_open` with `use_clockid = CLOCK_MONOTONIC`,
//! so every event is on the clock of the harness's own stamps
//! ([`taillab_core::clock::now_ns`]) and a request's stamps cut the events directly.
//!
//! - [`tracefs`] finds (as root, mounts) tracefs and reads each tracepoint's id and layout;
//!   [`decode`] reads the raw records at the offsets the `format` files give.
//! - [`ring`] opens one perf ring per traced CPU; [`drain`] reads them every millisecond
//!   from a thread on a CPU no measured thread uses, counting lost records.
//! - [`timeline`] turns each CPU's events into who held it when, and each measured
//!   thread's switches and wake-ups into its timeline; [`join`] cuts that timeline with
//!   every request's stamps into the parts of its sojourn, which sum to it, and makes the
//!   `anatomy` section ([`taillab_core::sections::Anatomy`]).
//!
//! # What it cannot see
//! Time the hypervisor takes (steal, a frozen VM) is invisible to the guest's tracepoints:
//! it shows as the request's own CPU time (the environment monitor's steal and dispatch
//! gaps are the cross-check). A page fault is counted, its time estimated from the host's
//! measured cost of one ([`fault`]). Lost records make their window unknown, never guessed.
//! docs/explain.md has the method, the cost and a worked example.

#![warn(missing_docs)]

pub mod decode;
pub mod drain;
pub mod error;
pub mod fault;
pub mod join;
pub mod ring;
pub mod timeline;
pub mod tracefs;

pub use drain::{Trace, TraceOptions, Tracer};
pub use error::ExplainError;
pub use join::{join, Joined, Request};

/// `kernel.perf_event_paranoid`, or 2 (Debian's 3 and others alike refuse) when unreadable.
pub fn paranoid() -> i64 {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2)
}

/// Everything checkable before a run: permission, tracefs (mounted here as root when it is
/// not), every required tracepoint, and that the kernel opens one on `cpu`. Each failure is
/// one line naming what is missing and how to enable it.
pub fn preflight(cpu: usize) -> Result<(), ExplainError> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let paranoid = paranoid();
    if !root && paranoid > -1 {
        return Err(ExplainError::NotPermitted { paranoid });
    }
    let (tps, _) = drain::host_tracepoints()?;
    decode::Decoder::new(&tps)?;
    // A trial open: a kernel that refuses (lockdown, a seccomp filter) says so now.
    ring::open_rings(&tps[..1], &[cpu], &[cpu], 4096).map(drop)
}

/// This process's worker threads (`taillab-wrk-N`): (worker index, tid).
pub fn worker_tids() -> Vec<(usize, u32)> {
    threads_named("self", "taillab-wrk-")
}

/// Process `pid`'s (`self`: this one's) threads named `PREFIX` and a number N: (N, tid).
pub fn threads_named(pid: &str, prefix: &str) -> Vec<(usize, u32)> {
    let mut v = Vec::new();
    let dir = format!("/proc/{pid}/task");
    for t in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Some(w) = comm.trim().strip_prefix(prefix) else {
            continue;
        };
        if let (Ok(w), Some(tid)) = (
            w.parse(),
            t.file_name().to_str().and_then(|n| n.parse().ok()),
        ) {
            v.push((w, tid));
        }
    }
    v.sort_unstable();
    v
}

/// A run being explained: the tracer, the fault cost measured before it, the threads.
pub struct Explainer {
    tracer: Tracer,
    fault_ns: f64,
    workers: Vec<(usize, u32)>,
}

impl Explainer {
    /// Measures the fault cost, then starts tracing `cpus`, the drainer at `nice` (the
    /// measured threads').
    pub fn start(cpus: Vec<usize>, nice: Option<i32>) -> Result<Explainer, ExplainError> {
        let fault_ns = fault::fault_cost_ns();
        Ok(Explainer {
            tracer: Tracer::start(TraceOptions {
                nice,
                ..TraceOptions::on(cpus)
            })?,
            fault_ns,
            workers: Vec::new(),
        })
    }

    /// Looks for the worker threads until all `n` are known (call while they run); then
    /// their page faults are traced.
    pub fn note_workers(&mut self, n: usize) {
        if self.workers.len() < n {
            let w = worker_tids();
            if w.len() >= n {
                self.set_workers(w);
            }
        }
    }

    /// The measured threads (a TCP server's, found otherwise); their page faults are traced
    /// from now on.
    pub fn set_workers(&mut self, workers: Vec<(usize, u32)>) {
        self.tracer
            .trace_faults_of(workers.iter().map(|w| w.1).collect());
        self.workers = workers;
    }

    /// Stops tracing and joins the trace with `requests`.
    pub fn finish(self, requests: &[Request]) -> Joined {
        let workers = self.workers.clone();
        let (trace, fault_ns) = self.stop();
        join(&trace, &workers, requests, fault_ns)
    }

    /// Stops tracing: the trace and the fault cost, for a join the caller makes (a TCP run's
    /// threads are found in the trace itself).
    pub fn stop(self) -> (Trace, f64) {
        let trace = self.tracer.stop();
        if let Some(p) = std::env::var_os("TAILLAB_EXPLAIN_DUMP") {
            if let Err(e) = trace.dump(std::path::Path::new(&p)) {
                eprintln!("warning: TAILLAB_EXPLAIN_DUMP: {e}");
            }
        }
        (trace, self.fault_ns)
    }
}
