//! The PMU-present path, on a host without a PMU: perf-event2's syscall
//! hooks stand in for the kernel. `perf_event_open` checks what is asked
//! (event type and config, the thread, kernel mode) and answers with a
//! file holding recorded readings (`tests/data/pmu-readings.json`), which
//! the crate then reads like a real counter. Kernel-mode events are
//! refused with EACCES, as under `perf_event_paranoid = 2`, so the
//! fallback to user-mode counting is exercised too.

use std::collections::BTreeMap;
use std::io::{Seek, Write};
use std::os::fd::IntoRawFd;
use std::os::raw::{c_int, c_ulong};

use perf_event::hooks::sys::bindings as b;
use perf_event::hooks::{clear_thread_hooks, set_thread_hooks, Hooks};
use taillab_counters::{CounterMode, Counters, Target};

type Readings = BTreeMap<i32, BTreeMap<String, [u64; 3]>>;

fn readings() -> Readings {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/pmu-readings.json"
    ))
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    serde_json::from_value::<BTreeMap<String, BTreeMap<String, [u64; 3]>>>(v["threads"].clone())
        .unwrap()
        .into_iter()
        .map(|(k, v)| (k.parse().unwrap(), v))
        .collect()
}

/// The event a `perf_event_attr` asks for, by the crate's names.
fn event_name(t: u32, config: u64) -> Option<&'static str> {
    let cache = |id: u32| {
        id as u64
            | ((b::PERF_COUNT_HW_CACHE_OP_READ as u64) << 8)
            | ((b::PERF_COUNT_HW_CACHE_RESULT_MISS as u64) << 16)
    };
    Some(match (t, config) {
        (b::PERF_TYPE_HARDWARE, c) if c == b::PERF_COUNT_HW_INSTRUCTIONS as u64 => "instructions",
        (b::PERF_TYPE_HARDWARE, c) if c == b::PERF_COUNT_HW_CPU_CYCLES as u64 => "cycles",
        (b::PERF_TYPE_HARDWARE, c) if c == b::PERF_COUNT_HW_BRANCH_MISSES as u64 => "branch_misses",
        (b::PERF_TYPE_HW_CACHE, c) if c == cache(b::PERF_COUNT_HW_CACHE_L1I) => "l1i_misses",
        (b::PERF_TYPE_HW_CACHE, c) if c == cache(b::PERF_COUNT_HW_CACHE_L1D) => "l1d_misses",
        (b::PERF_TYPE_HW_CACHE, c) if c == cache(b::PERF_COUNT_HW_CACHE_LL) => "llc_misses",
        (b::PERF_TYPE_SOFTWARE, c) if c == b::PERF_COUNT_SW_TASK_CLOCK as u64 => "task_clock_ns",
        (b::PERF_TYPE_SOFTWARE, c) if c == b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64 => {
            "context_switches"
        }
        (b::PERF_TYPE_SOFTWARE, c) if c == b::PERF_COUNT_SW_CPU_MIGRATIONS as u64 => {
            "cpu_migrations"
        }
        (b::PERF_TYPE_SOFTWARE, c) if c == b::PERF_COUNT_SW_PAGE_FAULTS as u64 => "page_faults",
        _ => return None,
    })
}

struct RecordedPmu {
    readings: Readings,
    opened: Vec<(i32, &'static str)>,
    log: std::sync::Arc<std::sync::Mutex<Vec<(i32, &'static str)>>>,
}

fn fail(errno: c_int) -> c_int {
    // SAFETY: errno is thread-local and writable.
    unsafe { *libc::__errno_location() = errno };
    -1
}

impl Hooks for RecordedPmu {
    unsafe fn perf_event_open(
        &mut self,
        attrs: *mut b::perf_event_attr,
        pid: libc::pid_t,
        cpu: c_int,
        _group: c_int,
        _flags: c_ulong,
    ) -> c_int {
        let a = &*attrs;
        let Some(name) = event_name(a.type_, a.config) else {
            return fail(libc::ENOENT);
        };
        assert_eq!(cpu, -1, "a thread is counted on any CPU");
        assert_eq!(a.disabled(), 0, "counters start enabled");
        if a.exclude_kernel() == 0 {
            return fail(libc::EACCES); // perf_event_paranoid = 2
        }
        // pid 0: the probe on the calling thread; it reads as thread 101.
        let tid = if pid == 0 { 101 } else { pid };
        let Some(r) = self.readings.get(&tid).and_then(|t| t.get(name)) else {
            return fail(libc::ESRCH);
        };
        self.opened.push((pid, name));
        self.log.lock().unwrap().push((pid, name));
        // What read() returns with TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING.
        let mut f = tempfile();
        for w in r {
            f.write_all(&w.to_ne_bytes()).unwrap();
        }
        f.rewind().unwrap();
        f.into_raw_fd()
    }

    unsafe fn ID(&mut self, _fd: c_int, id: *mut u64) -> c_int {
        *id = self.opened.len() as u64;
        0
    }
}

fn tempfile() -> std::fs::File {
    let dir = std::env::temp_dir();
    let p = dir.join(format!(
        "taillab-pmu-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&p)
        .unwrap();
    std::fs::remove_file(&p).unwrap();
    f
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

#[test]
fn a_host_with_a_pmu_gets_ipc_and_mpki_per_thread_and_in_all() {
    let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    // SAFETY: hooks for this thread only; cleared before the test ends.
    unsafe {
        set_thread_hooks(Box::new(RecordedPmu {
            readings: readings(),
            opened: Vec::new(),
            log: log.clone(),
        }))
    };
    let targets = [
        Target {
            tid: 101,
            name: "taillab-wrk-0".into(),
        },
        Target {
            tid: 102,
            name: "taillab-wrk-1".into(),
        },
    ];
    let c = Counters::start(CounterMode::Auto, &targets)
        .unwrap()
        .expect("counters");
    assert_eq!(c.kind(), "hardware");
    assert_eq!(c.note(), None);
    let r = c.finish_over(2000, std::time::Duration::from_secs(2));
    unsafe { clear_thread_hooks() };

    // Every event on each worker thread, by its tid (plus the probe on pid 0).
    let opened = log.lock().unwrap().clone();
    for tid in [101, 102] {
        assert_eq!(
            opened.iter().filter(|o| o.0 == tid).count(),
            10,
            "{opened:?}"
        );
    }
    assert_eq!(r.kind, "hardware");
    assert_eq!(r.scope, "user", "kernel mode refused, so user mode only");
    assert!(r.missing.is_empty(), "{:?}", r.missing);
    let d = &r.derived;
    let close = |a: Option<f64>, b: f64| (a.unwrap() - b).abs() < 1e-9 * b.abs().max(1.0);
    assert!(close(d.ipc, 4e9 / 2.5e9), "{d:?}");
    assert!(close(d.l1i_mpki, 1000.0 * 8e6 / 4e9));
    assert!(close(d.l1d_mpki, 1000.0 * 4e7 / 4e9));
    // Thread 102's LLC misses were on the PMU half the time: 5e5 scaled to 1e6.
    assert!(close(d.llc_mpki, 1000.0 * 2e6 / 4e9));
    assert!(close(d.branch_mpki, 1000.0 * 1e7 / 4e9));
    assert!(close(d.instructions_per_request, 4e9 / 2000.0));
    // 2.5 s of task clock over 2 threads × 2 s; 100 switches over the 2 s phase.
    assert!(close(d.cpu_utilization, 2.5 / 4.0));
    assert!(close(d.context_switches_per_s, 50.0));
    let t1 = &r.threads[1];
    assert_eq!(t1.tid, 102);
    assert_eq!(t1.counts["llc_misses"], 1e6);
    assert_eq!(t1.running_fraction["llc_misses"], 0.5);
    assert_eq!(
        r.threads[0].counts["instructions"] / r.threads[0].counts["cycles"],
        2.0
    );
    assert!(r.line().contains("IPC 1.60"), "{}", r.line());
    // The report round-trips through JSON (summary.json).
    let back: taillab_counters::CountersReport =
        serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    assert_eq!(back, r);
}
