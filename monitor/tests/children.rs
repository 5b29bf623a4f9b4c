//! Processes that descend from the experiment (helpers an app starts, a
//! server's children) are the experiment's: reported under the process
//! they descend from, never as foreign CPU. About 2 s of wall time.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use taillab_monitor::{Sampler, SamplerConfig};

/// Kills a process group we started, even if an assertion fails.
struct Group(std::process::Child);
impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: plain syscall on the group we created (process_group(0)).
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.wait();
    }
}

/// `sh` whose child spins: returns the outer shell (in its own process
/// group) and the spinning child's pid.
fn spinning_grandchild() -> (Group, i32) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut c = Command::new("sh")
        .arg("-c")
        .arg("sh -c 'while :; do :; done' & echo $!; wait")
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn sh");
    let mut line = String::new();
    std::io::BufReader::new(c.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid = line.trim().parse().expect("pid of the spinning child");
    (Group(c), pid)
}

fn cpu_ticks(pid: i32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after `state`.
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

#[test]
fn descendants_are_reported_under_their_ancestor_not_as_foreign() {
    // One helper tree of this process (the harness), one of an extra
    // process (a server started by the experiment).
    let (_ours, ours_spin) = spinning_grandchild();
    let (server, server_spin) = spinning_grandchild();
    let server_pid = server.0.id() as i32;
    let sampler = Sampler::start(SamplerConfig {
        extra_pids: vec![server_pid],
        scan_period: Duration::from_millis(300),
        ..Default::default()
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (t0, a0, b0) = (Instant::now(), cpu_ticks(ours_spin), cpu_ticks(server_spin));
    sampler.mark_measured_start();
    std::thread::sleep(Duration::from_millis(1500));
    sampler.mark_measured_end();
    let secs = t0.elapsed().as_secs_f64();
    let tps = 100.0; // USER_HZ on Linux
    let own_a = 100.0 * (cpu_ticks(ours_spin) - a0) as f64 / tps / secs;
    let own_b = 100.0 * (cpu_ticks(server_spin) - b0) as f64 / tps / secs;
    let r = sampler.stop().unwrap();
    let s = &r.summary;

    for pid in [ours_spin, server_spin] {
        assert!(
            !s.top_foreign.iter().any(|f| f.pids.contains(&pid)),
            "descendant {pid} counted as foreign: {:?}",
            s.top_foreign
        );
    }
    let ours = s
        .harness
        .children
        .iter()
        .find(|c| c.pids.contains(&ours_spin))
        .unwrap_or_else(|| panic!("{ours_spin} not under the harness: {:?}", s.harness));
    assert_eq!(ours.name, "sh");
    let server = s.extra.iter().find(|e| e.pid == server_pid).unwrap();
    assert!(
        server
            .children
            .iter()
            .any(|c| c.pids.contains(&server_spin)),
        "{server_spin} not under the server: {server:?}"
    );
    assert!(
        !s.harness
            .children
            .iter()
            .any(|c| c.pids.contains(&server_spin)),
        "the server's child is under the harness: {:?}",
        s.harness
    );
    // The CPU credited matches what /proc says each used (the phase edges
    // are shared by overlap with the scans, hence the slack).
    for (credited, own) in [
        (s.harness.children_cpu_pct, own_a),
        (server.children_cpu_pct, own_b),
    ] {
        assert!(own > 5.0, "the spinner hardly ran ({own:.1} %)");
        assert!(
            (credited - own).abs() < 0.25 * own + 5.0,
            "credited {credited:.1} % vs measured {own:.1} %"
        );
    }
    // The per-sample series carries it too, so intervals agree with the summary.
    assert!(r.samples.iter().any(|x| x.harness.children_cpu_pct > 1.0));
}
