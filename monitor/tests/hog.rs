//! A CPU hog running next to a "worker" while the sampler samples: the
//! report must name the hog as a foreign consumer and the check must fail.
//! About 2 s of wall time.

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use taillab_monitor::procfs::gettid;
use taillab_monitor::{EnvCheck, Phase, Sampler, SamplerConfig, Thresholds};

fn pin_current_thread(cpu: usize) {
    // SAFETY: plain data, bounded CPU index.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Kills the hog even if an assertion fails.
struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process that is not ours: killed by pid at the end.
struct Orphan(i32);
impl Drop for Orphan {
    fn drop(&mut self) {
        // SAFETY: plain syscall on a pid we started.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

#[test]
fn hog_on_the_workers_cpu_is_named_and_fails_the_check() {
    let cpu = 0;
    // The hog: a shell busy loop pinned to the worker's CPU, started in the
    // background by a shell that exits at once, so that it is reparented
    // and is no descendant of this process (descendants are the
    // experiment's, not foreign). Identified by its pid: other `sh`
    // processes may run on the host.
    let out = unsafe {
        Command::new("sh")
            .arg("-c")
            .arg("sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!")
            .stdout(Stdio::piped())
            .pre_exec(move || {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(cpu, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                Ok(())
            })
            .output()
            .expect("spawn sh")
    };
    let hog_pid: i32 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("the hog's pid");
    let _hog = Orphan(hog_pid);

    // A spinning "worker" pinned to the same CPU.
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let st = stop.clone();
    let worker = std::thread::Builder::new()
        .name("worker-0".into())
        .spawn(move || {
            pin_current_thread(cpu);
            tx.send(gettid()).unwrap();
            while !st.load(Ordering::Relaxed) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let worker_tid = rx.recv().unwrap();

    let sampler = Sampler::start(SamplerConfig {
        worker_tids: vec![worker_tid],
        scan_period: Duration::from_millis(500),
        ..Default::default()
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    sampler.mark_measured_start();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    sampler.mark_measured_end();
    let measured = t0.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(100));
    let report = sampler.stop().unwrap();
    stop.store(true, Ordering::Relaxed);
    worker.join().unwrap();

    let s = &report.summary;
    assert!(s.phase_marked);
    assert!(
        (s.measured_s - measured).abs() < 0.2,
        "measured {} vs {measured}",
        s.measured_s
    );
    // Samples exist for all three phases and are in time order.
    assert!(report
        .samples
        .iter()
        .any(|x| x.phase == Some(Phase::Warmup)));
    assert!(report.samples.iter().any(|x| x.phase == Some(Phase::After)));
    assert!(report
        .samples
        .windows(2)
        .all(|w| w[0].t_mono_ns < w[1].t_mono_ns));

    // The hog shares CPU 0 with the worker at the same priority, so it gets
    // a share comparable to the worker's (absolute shares depend on how busy
    // the host is: with a load average of 11 on 2 CPUs each got ~18 %).
    let hog_entry = s
        .top_foreign
        .iter()
        .find(|f| f.pids.contains(&hog_pid))
        .unwrap_or_else(|| {
            panic!(
                "hog pid {hog_pid} not among top foreign: {:?}",
                s.top_foreign
            )
        });
    let w = s
        .workers
        .iter()
        .find(|w| w.tid == worker_tid)
        .expect("worker in summary");
    assert!(
        hog_entry.cpu_pct > 0.3 * w.cpu_pct && hog_entry.cpu_pct > 5.0,
        "{hog_entry:?} vs {w:?}"
    );
    assert!(
        s.foreign_cpu_pct >= 0.8 * hog_entry.cpu_pct,
        "foreign {}",
        s.foreign_cpu_pct
    );
    // The worker was kept waiting by it.
    assert_eq!(w.name, "worker-0");
    assert!(w.runq_wait_pct > 5.0, "{w:?}");
    assert!(w.cpus == vec![cpu as u32], "{w:?}");
    // The harness's own CPU includes the spinning worker.
    assert!(
        s.harness.cpu_pct >= 0.8 * w.cpu_pct,
        "{:?} vs {w:?}",
        s.harness
    );

    let check = EnvCheck::of(s, &Thresholds::default());
    assert!(!check.ok);
    let text = check.reasons.join("\n");
    // Named, with its pid (a busy host may run other `sh` processes too).
    assert!(
        text.contains(&format!("{} ", hog_entry.name)) && text.contains(&hog_pid.to_string()),
        "{text}"
    );
    assert!(text.contains("worker thread"), "{text}");

    // The series can be re-bucketed to 1 s intervals from the measured start.
    let iv = report.intervals(report.measured_start_mono_ns.unwrap(), 1_000_000_000);
    assert!(iv.len() >= 2 && iv[0].foreign_cpu_pct > 5.0, "{iv:?}");
    // And the whole report serialises.
    let json = serde_json::to_string(&report).unwrap();
    assert!(json.contains("\"steal_pct\""));
}

#[test]
fn extra_pid_is_not_foreign() {
    // The same kind of hog, declared as part of the experiment (a server).
    let hog = Child(
        Command::new("sh")
            .arg("-c")
            .arg("while :; do :; done")
            .spawn()
            .expect("spawn sh"),
    );
    let pid = hog.0.id() as i32;
    let sampler = Sampler::start(SamplerConfig {
        extra_pids: vec![pid],
        ..Default::default()
    })
    .unwrap();
    sampler.mark_measured_start();
    std::thread::sleep(Duration::from_millis(1000));
    sampler.mark_measured_end();
    let r = sampler.stop().unwrap();
    drop(hog);
    let s = &r.summary;
    assert!(
        !s.top_foreign.iter().any(|f| f.pids.contains(&pid)),
        "{:?}",
        s.top_foreign
    );
    let e = s
        .extra
        .iter()
        .find(|e| e.pid == pid)
        .expect("extra pid reported");
    assert!(e.cpu_pct > 5.0, "{e:?}");
}

#[test]
fn bad_config_names_the_key() {
    let e = Sampler::start(SamplerConfig {
        period: Duration::from_millis(1),
        ..Default::default()
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("`period`"), "{e}");
}
