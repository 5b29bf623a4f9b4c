//! Per-CPU perf rings of tracepoint records, on CLOCK_MONOTONIC.
//!
//! Each traced CPU gets one ring: its first tracepoint is mmapped and every other one is
//! redirected into it (`PERF_EVENT_IOC_SET_OUTPUT`), so one CPU's events arrive in one
//! ordered stream. Wake-ups are opened on every online CPU with a kernel-side filter on the
//! target CPU (a worker may be woken from anywhere; only wake-ups bound for a traced CPU
//! are kept). `use_clockid` puts the records on the clock of the harness's own stamps.

use crate::decode::{Kind, Tracepoint};
use crate::error::ExplainError;
use perf_event::events::Tracepoint as PerfTracepoint;
use perf_event::{Builder, Clock, Counter, SampleFlag, Sampler};
use std::os::fd::AsRawFd;

/// One CPU's ring and the events that write into it.
pub struct CpuRing {
    /// The CPU.
    pub cpu: usize,
    /// The mmapped leader.
    pub sampler: Sampler,
    /// The other events, kept open (and enabled) for the ring's life.
    others: Vec<Counter>,
    /// Which of `others` is the page-fault tracepoint: enabled only once the measured
    /// threads are known and filtered to them ([`CpuRing::trace_faults_of`]), since a
    /// compiler sharing the CPU faults a million times a second.
    fault: Option<usize>,
}

fn builder(tp: &Tracepoint, cpu: usize) -> Builder<'static> {
    let mut b = Builder::new(PerfTracepoint::with_id(tp.format.id));
    b.one_cpu(cpu)
        .any_pid()
        .exclude_kernel(false)
        .exclude_hv(false)
        .sample_period(1)
        .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::RAW)
        .sample_id_all(true)
        .clockid(Clock::MONOTONIC);
    b
}

fn open(tp: &Tracepoint, cpu: usize) -> Result<Counter, ExplainError> {
    builder(tp, cpu)
        .build()
        .map_err(|source| ExplainError::Open {
            name: tp.format.name.clone(),
            cpu,
            source,
        })
}

/// The filter that keeps only wake-ups bound for `cpus`.
fn waking_filter(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| format!("target_cpu=={c}"))
        .collect::<Vec<_>>()
        .join("||")
}

fn set_filter(c: &Counter, filter: &str, tp: &Tracepoint, cpu: usize) -> Result<(), ExplainError> {
    let f = std::ffi::CString::new(filter).expect("no NUL in a filter");
    // SAFETY: a valid perf fd and a NUL-terminated string that outlives the call.
    let rc =
        unsafe { perf_event_open_sys::ioctls::SET_FILTER(c.as_raw_fd(), f.as_ptr() as *mut _) };
    if rc != 0 {
        return Err(ExplainError::Open {
            name: format!("{} (filter `{filter}`)", tp.format.name),
            cpu,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

fn redirect(c: &Counter, into: &Sampler, tp: &Tracepoint, cpu: usize) -> Result<(), ExplainError> {
    // SAFETY: two valid perf fds on the same CPU.
    let rc = unsafe {
        perf_event_open_sys::ioctls::SET_OUTPUT(c.as_raw_fd(), into.as_counter().as_raw_fd())
    };
    if rc != 0 {
        return Err(ExplainError::Open {
            name: format!("{} (into CPU {cpu}'s ring)", tp.format.name),
            cpu,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// The tracepoints the kernel lets us sample on `cpu`: every required one (an error names
/// the first refused) and those optional ones it allows, a system vector only with both its
/// entry and exit (some it refuses to sample: `irq_vectors:irq_work_exit`, whose records
/// perf's own irq work would emit). Adds the refused to `missing`.
pub fn usable(
    tps: Vec<Tracepoint>,
    cpu: usize,
    missing: &mut Vec<String>,
) -> Result<Vec<Tracepoint>, ExplainError> {
    let mut refused = Vec::new();
    for tp in &tps {
        match open(tp, cpu) {
            Ok(_) => {}
            Err(e) if tp.kind == Kind::VectorEntry || tp.kind == Kind::VectorExit => {
                missing.push(format!("{} (not sampled: {e})", tp.format.name));
                refused.push(tp.vector);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(tps
        .into_iter()
        .filter(|t| {
            !(matches!(t.kind, Kind::VectorEntry | Kind::VectorExit) && refused.contains(&t.vector))
        })
        .collect())
}

/// Opens the rings: every tracepoint on each of `traced` (a ring of `ring_bytes` each), and
/// the wake-ups of every other online CPU, filtered to those bound for `traced`.
pub fn open_rings(
    tps: &[Tracepoint],
    traced: &[usize],
    online: &[usize],
    ring_bytes: usize,
) -> Result<Vec<CpuRing>, ExplainError> {
    let filter = waking_filter(traced);
    let mut rings = Vec::new();
    for &cpu in online {
        let here: Vec<&Tracepoint> = if traced.contains(&cpu) {
            tps.iter().collect()
        } else {
            tps.iter().filter(|t| t.everywhere).collect()
        };
        let Some((first, rest)) = here.split_first() else {
            continue;
        };
        let lead = open(first, cpu)?;
        if first.everywhere {
            set_filter(&lead, &filter, first, cpu)?;
        }
        // Untraced CPUs see only the rare wake-ups bound for traced ones: a small ring.
        let bytes = if traced.contains(&cpu) {
            ring_bytes
        } else {
            64 << 10
        };
        let sampler = lead.sampled(bytes).map_err(|source| ExplainError::Open {
            name: format!("{} (mmap of {bytes} bytes)", first.format.name),
            cpu,
            source,
        })?;
        let mut others = Vec::new();
        let mut fault = None;
        for tp in rest {
            if tp.kind == Kind::Fault {
                fault = Some(others.len());
            }
            let c = open(tp, cpu)?;
            if tp.everywhere {
                set_filter(&c, &filter, tp, cpu)?;
            }
            redirect(&c, &sampler, tp, cpu)?;
            others.push(c);
        }
        rings.push(CpuRing {
            cpu,
            sampler,
            others,
            fault,
        });
    }
    Ok(rings)
}

impl CpuRing {
    /// Starts recording (page faults wait for [`CpuRing::trace_faults_of`]).
    pub fn enable(&mut self) -> std::io::Result<()> {
        for (i, c) in self.others.iter_mut().enumerate() {
            if Some(i) != self.fault {
                c.enable()?;
            }
        }
        self.sampler.enable()
    }

    /// Records the page faults of `tids` only, from now on.
    pub fn trace_faults_of(&mut self, tids: &[u32]) -> Result<(), ExplainError> {
        let Some(i) = self.fault else {
            return Ok(());
        };
        let filter = tids
            .iter()
            .map(|t| format!("common_pid=={t}"))
            .collect::<Vec<_>>()
            .join("||");
        let c = &mut self.others[i];
        let f = std::ffi::CString::new(filter.clone()).expect("no NUL in a filter");
        // SAFETY: a valid perf fd and a NUL-terminated string that outlives the call.
        let rc =
            unsafe { perf_event_open_sys::ioctls::SET_FILTER(c.as_raw_fd(), f.as_ptr() as *mut _) };
        let err = |source| ExplainError::Open {
            name: format!("exceptions:page_fault_user (filter `{filter}`)"),
            cpu: self.cpu,
            source,
        };
        if rc != 0 {
            return Err(err(std::io::Error::last_os_error()));
        }
        c.enable().map_err(err)
    }

    /// Stops recording (what is in the ring stays readable).
    pub fn disable(&mut self) -> std::io::Result<()> {
        self.sampler.disable()?;
        for c in &mut self.others {
            c.disable()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wake_up_filter_names_each_traced_cpu() {
        assert_eq!(waking_filter(&[1]), "target_cpu==1");
        assert_eq!(waking_filter(&[1, 3]), "target_cpu==1||target_cpu==3");
    }
}
