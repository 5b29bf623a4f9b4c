//! Opening the counters on the worker threads and reading them.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use perf_event::Counter;

use crate::events::Event;
use crate::report::{with_readings, CountersReport, Reading, Target, COUNTERS_SCHEMA};
use crate::{CounterMode, CountersError};

/// Why this host cannot count hardware events, or `None` when it can: it
/// tries to open an instructions counter on the calling thread and explains
/// the failure.
pub fn hardware_unavailable() -> Option<String> {
    let mut kernel = true;
    open(Event::Instructions, 0, &mut kernel)
        .err()
        .map(|e| explain(&e))
}

fn explain(e: &io::Error) -> String {
    let pmu = ["cpu", "cpu_core", "cpu_atom", "armv8_pmuv3_0"]
        .iter()
        .any(|d| Path::new("/sys/bus/event_source/devices").join(d).exists());
    match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => format!(
            "perf_event_open refused a hardware counter ({e}); kernel.perf_event_paranoid is {}: lower it (sysctl kernel.perf_event_paranoid=1) or run as root",
            std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into())
        ),
        _ if !pmu => format!(
            "this host has no hardware PMU: /sys/bus/event_source/devices/cpu is missing and perf_event_open(instructions) fails ({e}); typical of a VM without a virtual PMU (give the guest one, e.g. QEMU/KVM `-cpu host,pmu=on`, or use a bare-metal host)"
        ),
        _ => format!("the PMU did not open a hardware counter: {e}"),
    }
}

/// Opens `event` on thread `tid` (0: the calling thread), counting kernel
/// mode too while `kernel` is true; on a permission error it turns
/// `kernel` off and counts user mode only.
fn open(event: Event, tid: i32, kernel: &mut bool) -> io::Result<Counter> {
    let mut b = event.builder();
    if tid == 0 {
        b.observe_self();
    } else {
        b.observe_pid(tid);
    }
    b.any_cpu().enabled(true);
    if *kernel {
        b.include_kernel();
        match b.build() {
            Ok(c) => return Ok(c),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM)) => {
                *kernel = false;
            }
            Err(e) => return Err(e),
        }
    }
    b.exclude_kernel(true);
    b.build()
}

struct Opened {
    target: Target,
    counters: Vec<(Event, Counter)>,
}

/// Counters open on the worker threads (see the crate docs).
pub struct Counters {
    requested: CounterMode,
    hardware: bool,
    note: Option<String>,
    kernel: bool,
    threads: Vec<Opened>,
    missing: BTreeMap<String, String>,
    started: std::time::Instant,
}

impl Counters {
    /// Opens and enables the counters of `mode` on every target thread;
    /// `None` for [`CounterMode::None`]. Hardware events are counted when
    /// the mode wants them and the host can ([`hardware_unavailable`]);
    /// software events always. An event that fails on some thread is
    /// listed in the report's `missing`; only when nothing opens is it an
    /// error.
    pub fn start(mode: CounterMode, targets: &[Target]) -> Result<Option<Counters>, CountersError> {
        if mode == CounterMode::None {
            return Ok(None);
        }
        if targets.is_empty() {
            return Err(CountersError::NoThreads);
        }
        let wants_hw = matches!(mode, CounterMode::Auto | CounterMode::Hardware);
        let note = if wants_hw {
            hardware_unavailable()
        } else {
            None
        };
        let hardware = wants_hw && note.is_none();
        let events: Vec<Event> = if hardware {
            Event::HARDWARE
                .iter()
                .chain(&Event::SOFTWARE)
                .copied()
                .collect()
        } else {
            Event::SOFTWARE.to_vec()
        };
        let mut kernel = true;
        let mut missing = BTreeMap::new();
        let mut threads = Vec::new();
        for t in targets {
            let mut counters = Vec::new();
            for &ev in &events {
                match open(ev, t.tid, &mut kernel) {
                    Ok(c) => counters.push((ev, c)),
                    Err(e) => {
                        missing
                            .entry(ev.name().to_string())
                            .or_insert_with(|| format!("thread {} ({}): {e}", t.tid, t.name));
                    }
                }
            }
            threads.push(Opened {
                target: t.clone(),
                counters,
            });
        }
        if threads.iter().all(|t| t.counters.is_empty()) {
            let why = missing.values().next().cloned().unwrap_or_default();
            return Err(CountersError::Unavailable(why));
        }
        Ok(Some(Counters {
            requested: mode,
            hardware,
            note,
            kernel,
            threads,
            missing,
            started: std::time::Instant::now(),
        }))
    }

    /// Why hardware counters were wanted but are not counted.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    /// `hardware` or `software`: what is counted.
    pub fn kind(&self) -> &'static str {
        if self.hardware {
            "hardware"
        } else {
            "software"
        }
    }

    /// Reads every counter (threads that already ended keep their final
    /// counts) and closes them; `requests` is the number of measured
    /// requests, for per-request figures. The counted time is the wall time
    /// since [`Counters::start`] (a per-thread event's own enabled time
    /// grows only while its thread runs, so it cannot tell the phase's length).
    pub fn finish(self, requests: u64) -> CountersReport {
        let phase = self.started.elapsed();
        self.finish_over(requests, phase)
    }

    /// [`finish`](Self::finish) with the counted time given.
    pub fn finish_over(mut self, requests: u64, phase: std::time::Duration) -> CountersReport {
        let mut readings = Vec::new();
        for t in &mut self.threads {
            let mut per_event = BTreeMap::new();
            for (ev, c) in &mut t.counters {
                match c.read_count_and_time() {
                    Ok(r) => {
                        per_event.insert(*ev, (r.count, r.time_enabled, r.time_running));
                    }
                    Err(e) => {
                        self.missing
                            .entry(ev.name().to_string())
                            .or_insert_with(|| format!("reading thread {}: {e}", t.target.tid));
                    }
                }
            }
            readings.push(Reading {
                target: t.target.clone(),
                per_event,
            });
        }
        let head = CountersReport {
            schema: COUNTERS_SCHEMA.into(),
            requested: self.requested.name().into(),
            kind: self.kind().into(),
            note: self.note.clone(),
            scope: if self.kernel { "user+kernel" } else { "user" }.into(),
            requests,
            phase_s: phase.as_secs_f64(),
            missing: std::mem::take(&mut self.missing),
            ..Default::default()
        };
        with_readings(head, readings)
    }
}
