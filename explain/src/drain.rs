//! The tracer: rings opened on the traced CPUs and drained off the request path by one
//! thread on a spare CPU, into per-CPU event lists the join reads after the run.

use crate::decode::{self, Decoder, Event, Tracepoint};
use crate::error::ExplainError;
use crate::ring::{open_rings, CpuRing};
use crate::tracefs::Tracefs;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use taillab_core::clock::now_ns;

/// Bytes of ring per traced CPU: at ~200 k events/s of 40-byte records a ring holds
/// ~200 ms, far more than the drainer's 1 ms period.
pub const RING_BYTES: usize = 8 << 20;

/// Most events kept in memory (24 bytes each: 384 MiB); beyond it the rest of the run is
/// unknown and the section says so.
pub const MAX_EVENTS: usize = 16 << 20;

/// How the drainer waits between passes over the rings.
const PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// What to trace.
#[derive(Debug, Clone)]
pub struct TraceOptions {
    /// CPUs whose tasks, interrupts and faults are traced.
    pub cpus: Vec<usize>,
    /// Where the drainer runs (a CPU no measured thread uses), when there is one.
    pub drainer_cpu: Option<usize>,
    /// Ring bytes per traced CPU.
    pub ring_bytes: usize,
    /// Most events kept.
    pub max_events: usize,
    /// The drainer's nice value: the measured threads' (`harness.nice`), so that what
    /// outweighs other work on their CPUs does not starve the drainer on its own.
    pub nice: Option<i32>,
}

impl TraceOptions {
    /// Tracing `cpus` with the default ring and cap, the drainer on the first online CPU
    /// outside them.
    pub fn on(cpus: Vec<usize>) -> TraceOptions {
        let online = taillab_core::placement::allowed_cpus().unwrap_or_default();
        let drainer_cpu = online.iter().copied().find(|c| !cpus.contains(c));
        TraceOptions {
            cpus,
            drainer_cpu,
            ring_bytes: RING_BYTES,
            max_events: MAX_EVENTS,
            nice: None,
        }
    }
}

/// One ring's events, in time order.
#[derive(Debug, Clone, Default)]
pub struct CpuEvents {
    /// The CPU.
    pub cpu: usize,
    /// Whether everything on it was traced (else only wake-ups bound for traced CPUs).
    pub traced: bool,
    /// Its events.
    pub events: Vec<Event>,
}

/// Everything a run's tracer recorded.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The traced CPUs.
    pub cpus: Vec<usize>,
    /// Per ring.
    pub rings: Vec<CpuEvents>,
    /// Task names by tid.
    pub comms: HashMap<u32, String>,
    /// Interrupt names by number.
    pub irqs: HashMap<u32, String>,
    /// Each sampled task's process (tid → tgid).
    pub tgids: HashMap<u32, u32>,
    /// When recording began and ended (CLOCK_MONOTONIC ns).
    pub start_ns: u64,
    /// See `start_ns`.
    pub end_ns: u64,
    /// Records the kernel dropped.
    pub lost: u64,
    /// PERF_RECORD_LOST records (windows of loss).
    pub lost_windows: u64,
    /// The drainer's CPU time (ns).
    pub drainer_cpu_ns: u64,
    /// Events after this time were not kept (the memory cap).
    pub truncated_at: Option<u64>,
    /// Tracepoints opened.
    pub tracepoints: Vec<String>,
    /// Optional tracepoints missing.
    pub missing: Vec<String>,
    /// The options it ran with.
    pub ring_bytes: usize,
    /// The drainer's CPU.
    pub drainer_cpu: Option<usize>,
}

impl Trace {
    /// Events recorded.
    pub fn events(&self) -> u64 {
        self.rings.iter().map(|r| r.events.len() as u64).sum()
    }

    /// Every event as a line of text (`cpu ts kind tid a b`), for reading a join by hand:
    /// written where `TAILLAB_EXPLAIN_DUMP` names a file.
    pub fn dump(&self, path: &std::path::Path) -> std::io::Result<()> {
        use std::io::Write;
        let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
        for r in &self.rings {
            for e in &r.events {
                writeln!(
                    w,
                    "{} {} {:?} {} {} {}",
                    r.cpu, e.ts, e.kind, e.tid, e.a, e.b
                )?;
            }
        }
        w.flush()
    }
}

/// A running tracer.
pub struct Tracer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Trace>,
    /// The measured threads, once known, to the drainer (it owns the rings).
    workers: mpsc::Sender<Vec<u32>>,
}

/// The tracepoints of this host, checked: what [`Tracer::start`] opens.
pub fn host_tracepoints() -> Result<(Vec<Tracepoint>, Vec<String>), ExplainError> {
    decode::tracepoints(&Tracefs::find()?)
}

impl Tracer {
    /// Opens the rings and starts the drainer; returns once recording has begun, or why it
    /// could not.
    pub fn start(opts: TraceOptions) -> Result<Tracer, ExplainError> {
        let (tps, mut missing) = host_tracepoints()?;
        let first = opts.cpus.first().copied().unwrap_or(0);
        let tps = crate::ring::usable(tps, first, &mut missing)?;
        let decoder = Decoder::new(&tps)?;
        let online = taillab_core::placement::online_cpus().unwrap_or_else(|| opts.cpus.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::sync_channel(1);
        let (wtx, wrx) = mpsc::channel();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("taillab-explain".into())
            .spawn(move || {
                if let Some(c) = opts.drainer_cpu {
                    let _ = taillab_core::placement::place_thread_on(&[c], None, 0);
                }
                if let Some(n) = opts.nice {
                    let _ = taillab_core::placement::set_thread_nice(n);
                }
                let rings = match open_rings(&tps, &opts.cpus, &online, opts.ring_bytes)
                    .and_then(|mut r| enable(&mut r).map(|_| r))
                {
                    Ok(r) => {
                        let _ = tx.send(Ok(()));
                        r
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return Trace::default();
                    }
                };
                let names = tps.iter().map(|t| t.format.name.clone()).collect();
                drain(rings, decoder, &opts, (&flag, &wrx), names, missing)
            })
            .map_err(|source| ExplainError::Io {
                path: "taillab-explain thread".into(),
                source,
            })?;
        match rx.recv() {
            Ok(Ok(())) => Ok(Tracer {
                stop,
                thread,
                workers: wtx,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(ExplainError::Io {
                path: "taillab-explain thread".into(),
                source: std::io::Error::other("the drainer ended before it opened its rings"),
            }),
        }
    }

    /// The measured threads are these: their page faults are traced from now on.
    pub fn trace_faults_of(&self, tids: Vec<u32>) {
        let _ = self.workers.send(tids);
    }

    /// Stops recording, drains what is left and returns the trace.
    pub fn stop(self) -> Trace {
        self.stop.store(true, Ordering::Release);
        self.thread
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    }
}

fn enable(rings: &mut [CpuRing]) -> Result<(), ExplainError> {
    for r in rings.iter_mut() {
        r.enable().map_err(|source| ExplainError::Open {
            name: "(enable)".into(),
            cpu: r.cpu,
            source,
        })?;
    }
    Ok(())
}

/// The drainer's loop: every [`PERIOD`], every ring read until empty.
fn drain(
    mut rings: Vec<CpuRing>,
    mut dec: Decoder,
    opts: &TraceOptions,
    (stop, workers): (&AtomicBool, &mpsc::Receiver<Vec<u32>>),
    tracepoints: Vec<String>,
    missing: Vec<String>,
) -> Trace {
    let mut out: Vec<CpuEvents> = rings
        .iter()
        .map(|r| CpuEvents {
            cpu: r.cpu,
            traced: opts.cpus.contains(&r.cpu),
            events: Vec::new(),
        })
        .collect();
    let mut t = Trace {
        cpus: opts.cpus.clone(),
        start_ns: now_ns(),
        tracepoints,
        missing,
        ring_bytes: opts.ring_bytes,
        drainer_cpu: opts.drainer_cpu,
        ..Trace::default()
    };
    let mut kept = 0usize;
    loop {
        if let Ok(tids) = workers.try_recv() {
            for r in rings.iter_mut() {
                if let Err(e) = r.trace_faults_of(&tids) {
                    t.missing.push(format!("{e}"));
                }
            }
        }
        let last = stop.load(Ordering::Acquire);
        if last {
            for r in rings.iter_mut() {
                let _ = r.disable();
            }
            t.end_ns = now_ns();
        }
        for (r, o) in rings.iter_mut().zip(out.iter_mut()) {
            while let Some(rec) = r.sampler.next_record() {
                let body = rec.to_contiguous();
                let e = match rec.ty() {
                    perf_event_open_sys::bindings::PERF_RECORD_SAMPLE => dec.sample(&body),
                    perf_event_open_sys::bindings::PERF_RECORD_LOST => decode::lost(&body),
                    _ => None,
                };
                let Some(mut e) = e else { continue };
                if e.kind == decode::Kind::Lost {
                    t.lost += e.a as u64;
                    t.lost_windows += 1;
                    e.ts = e.ts.max(o.events.last().map_or(0, |p| p.ts));
                }
                if kept >= opts.max_events {
                    t.truncated_at.get_or_insert(e.ts);
                    continue;
                }
                o.events.push(e);
                kept += 1;
            }
        }
        if last {
            break;
        }
        std::thread::sleep(PERIOD);
    }
    for o in &mut out {
        // One CPU's ring is in time order; a stable sort keeps it so where stamps tie.
        o.events.sort_by_key(|e| e.ts);
    }
    t.rings = out;
    t.comms = std::mem::take(&mut dec.comms);
    t.irqs = std::mem::take(&mut dec.irqs);
    t.tgids = std::mem::take(&mut dec.tgids);
    t.drainer_cpu_ns = thread_cpu_ns();
    t
}

/// The calling thread's CPU time (ns).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
