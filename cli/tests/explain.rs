//! `--explain` against planted causes, on real tracepoints: a CPU hog on the worker's CPU,
//! planted page faults, a lock with a holder, network interrupts steered to the worker's
//! CPU, and a quiet run; and the bad inputs that must stop a run before it starts.
//!
//! Each cause is planted where the join must find it, so a wrong join fails: the hog is a
//! thread of this test with a name and tid of its own, the faults fall on requests known
//! from the schedule alone, the lock's holder is the other worker, NET_RX is a softirq
//! vector. Runs are a few thousand requests (a second or two each).

mod common;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Whether this host can trace (root; the tool mounts tracefs itself): else the test is
/// skipped, or fails where `TAILLAB_REQUIRE` lists `tracefs`.
fn traceable() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip_without("tracefs", "--explain needs root");
        return false;
    }
    true
}

/// The CPU the tests pin the worker to (the last one: the first is the drainer's and the
/// sampler's), and another one for the test's own threads.
fn cpus() -> (usize, usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (n.saturating_sub(1), 0)
}

/// The nice value of the measured threads and the planted causes: on a shared host other
/// work runs at nice 0 or above, and at -20 each of ours outweighs such a task 87:1 on its
/// CPU, so the planted cause, not the neighbours, is what the join must find.
const NICE: &str = "-20";

/// `taillab run --app synth ARGS --explain --save-requests` at [`NICE`]; a host that cannot
/// trace skips. Returns the summary.
fn explained(args: &[&str], out: &Path) -> Option<Value> {
    explained_then(args, out, || {})
}

/// [`explained`], calling `before_reap` once the run has exited and before it is reaped.
/// The NET_RX test stops its flood there: reaping a process invalidates its `/proc`
/// dentries (`release_task` → `proc_invalidate_siblings_dcache` → `shrink_dcache_parent`),
/// and with the flood's two threads spinning on the other CPU that walk spun in the kernel
/// for minutes (seen on kernel 6.18 after another test of this binary had run: the test
/// thread in `wait4`, 95 % of a CPU, its stack in `shrink_dcache_parent`).
fn explained_then(args: &[&str], out: &Path, before_reap: impl FnOnce()) -> Option<Value> {
    use std::io::Read;
    let mut child = Command::new(bin())
        .args([
            "run",
            "--app",
            "synth",
            "--explain",
            "--save-requests",
            "-q",
            "--nice",
            NICE,
        ])
        .args(args)
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    // Wait for the exit without reaping (WNOWAIT), so `before_reap` runs first.
    // SAFETY: waitid fills the siginfo we own; the pid is our own unreaped child.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(
            libc::P_PID,
            child.id(),
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        );
    }
    before_reap();
    let status = child.wait().unwrap();
    if !status.success() {
        if err.contains("needs tracefs") || err.contains("lacks") {
            skip_without("tracefs", err.trim());
            return None;
        }
        panic!("taillab run --explain failed: {err}");
    }
    let s = read_summary(out);
    check_sums(&s);
    Some(s)
}

/// Every request's parts summed to its sojourn, and every request was checked.
fn check_sums(s: &Value) {
    let c = &s["anatomy"]["sum_check"];
    let n = s["requests"]["measured"].as_u64().unwrap() + s["requests"]["warmup"].as_u64().unwrap();
    assert_eq!(c["mismatched"], 0, "{c}");
    assert_eq!(c["requests"].as_u64(), Some(n), "{c}");
}

fn group<'a>(s: &'a Value, label: &str) -> &'a Value {
    s["anatomy"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["label"] == label)
        .unwrap_or_else(|| panic!("no {label} group: {}", s["anatomy"]))
}

fn share(g: &Value, part: &str) -> f64 {
    g["share"][part].as_f64().unwrap()
}

/// The share of a group's excess that tasks other than `planted` and the run's own took
/// (preempting or waking): the host's neighbours, which the join names too.
fn others(g: &Value, planted: &[&str]) -> f64 {
    let total: f64 = g["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["how"] == "preempted" || c["how"] == "woke")
        .filter(|c| !planted.contains(&c["name"].as_str().unwrap_or("")) && c["own"] != true)
        .map(|c| c["total_ns"].as_f64().unwrap())
        .sum();
    let excess = g["excess_ns"].as_f64().unwrap() * g["requests"].as_f64().unwrap();
    total / excess.max(1.0)
}

/// The share of a group's excess that tasks not of the run preempted it for.
fn preempted_by_others(g: &Value) -> f64 {
    let total: f64 = g["culprits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["how"] == "preempted" && c["own"] != true)
        .map(|c| c["total_ns"].as_f64().unwrap())
        .sum();
    let excess = g["excess_ns"].as_f64().unwrap() * g["requests"].as_f64().unwrap();
    (total / excess.max(1.0)).min(1.0)
}

/// A try is disturbed (not counted) when the neighbours took more than a quarter of the
/// tail's excess: the cause planted was then not the tail's main one.
fn disturbed(g: &Value, planted: &[&str]) -> Option<String> {
    let o = others(g, planted);
    (o > 0.25).then(|| format!("other tasks took {:.0} % of the p99 excess", 100.0 * o))
}

/// Runs `attempt` up to three times (a disturbed try is not counted: [`disturbed`]).
/// `None` from `attempt`: the host cannot trace (skipped already).
fn tries(name: &str, mut attempt: impl FnMut(u64) -> Option<Result<(), (String, Option<String>)>>) {
    within_tries(name, 3, 2, |k| attempt(k).unwrap_or(Ok(())));
}

/// Pins the calling thread to `cpu` at nice value `nice`.
fn pin(cpu: usize, nice: i32) {
    // SAFETY: plain syscalls on the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as u32, nice);
    }
}

/// Threads of this test, each pinned to a CPU at [`NICE`], running their body over and over
/// until dropped: the planted hog and the loopback flood.
#[derive(Default)]
struct Background {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Background {
    /// Starts thread `name` on `cpu` at [`NICE`]; its tid.
    fn spawn(&mut self, name: &str, cpu: usize, body: impl FnMut() + Send + 'static) -> i32 {
        self.spawn_at(name, cpu, NICE.parse().unwrap(), body)
    }

    /// Starts thread `name` on `cpu` at nice value `nice`; its tid.
    fn spawn_at(
        &mut self,
        name: &str,
        cpu: usize,
        nice: i32,
        mut body: impl FnMut() + Send + 'static,
    ) -> i32 {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = self.stop.clone();
        let t = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                pin(cpu, nice);
                // SAFETY: gettid has no preconditions.
                tx.send(unsafe { libc::gettid() }).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    body();
                }
            })
            .unwrap();
        self.threads.push(t);
        rx.recv().unwrap()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The hog: a thread spinning on `cpu`, `hog-of-explain` (not `taillab…`: the test must
/// tell it from the harness's own threads); its tid.
fn hog(bg: &mut Background, cpu: usize) -> i32 {
    bg.spawn("hog-of-explain", cpu, std::hint::spin_loop)
}

/// (a) A hog on the worker's CPU: the p99 requests are slow because the worker was
/// preempted, and the hog is named. A spinning worker is always runnable, so CFS gives the
/// two alternate slices (ms) and a request that arrives in the hog's slice waits for it.
#[test]
fn a_cpu_hog_on_the_workers_cpu_is_named_as_what_preempted_the_slow_requests() {
    let _g = serial();
    if !traceable() {
        return;
    }
    let (cpu, _) = cpus();
    let out = tmp("explain-hog");
    let c = cpu.to_string();
    let args = [
        "--qps",
        "2000",
        "--requests",
        "4000",
        "--warmup-requests",
        "500",
        "--wait",
        "spin",
        "--cpus",
        &c,
        "--set",
        "service=fixed:50us",
    ];
    tries("explain hog", |_| {
        let mut bg = Background::default();
        let tid = hog(&mut bg, cpu);
        let s = explained(&args, &out)?;
        drop(bg);
        let g = group(&s, "p99");
        if let Some(why) = disturbed(g, &["hog-of-explain"]) {
            return Some(Err((format!("{g}"), Some(why))));
        }
        // Half the CPU is the hog's, in slices longer than a request: almost all of the
        // tail's excess is the hog's. 0.5 leaves room for a host that also preempts; a join
        // that cut the wrong thread's or the wrong times' pieces finds no preemption at all.
        let top = &g["culprits"][0];
        let ok = share(g, "preempted") > 0.5
            && top["how"] == "preempted"
            && top["name"] == "hog-of-explain"
            && top["pid"].as_i64() == Some(tid as i64);
        if !ok {
            return Some(Err((
                format!("the hog (tid {tid}) is not the p99's culprit: {g}"),
                None,
            )));
        }
        // Per request: the culprit column of most p99 requests names the hog too (a
        // neighbour may have taken one request's time: not most of them).
        let thr = g["threshold_ns"].as_u64().unwrap();
        let rows = records(&out);
        let tail: Vec<_> = rows
            .iter()
            .filter(|r| r["measured"] == 1 && r["sojourn"] > thr)
            .collect();
        let named = tail
            .iter()
            .filter(|r| r["x_culprit_pid"] == tid as u64)
            .count();
        if named * 2 <= tail.len() {
            let why = format!("{named} of {} p99 requests name the hog", tail.len());
            return Some(Err((why, None)));
        }
        Some(Ok(()))
    });
    let _ = std::fs::remove_dir_all(&out);
}

/// `requests.csv` as maps of column → value, with `sojourn` added.
fn records(dir: &Path) -> Vec<std::collections::HashMap<String, u64>> {
    let text = std::fs::read_to_string(dir.join("requests.csv")).unwrap();
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    lines
        .map(|l| {
            let mut m: std::collections::HashMap<String, u64> = head
                .iter()
                .cloned()
                .zip(l.split(',').map(|v| v.parse().unwrap()))
                .collect();
            let s = m["completed"] - m["intended"];
            m.insert("sojourn".into(), s);
            m
        })
        .collect()
}

/// (b) Planted faults: the requests synth faults (every 50th of the schedule) show 64
/// faults each, the others about none.
#[test]
fn planted_page_faults_are_counted_on_the_requests_that_took_them() {
    let _g = serial();
    if !traceable() {
        return;
    }
    let (cpu, _) = cpus();
    let out = tmp("explain-faults");
    let c = cpu.to_string();
    let args = [
        "--qps",
        "2000",
        "--requests",
        "3000",
        "--warmup-requests",
        "300",
        "--cpus",
        &c,
        "--set",
        "service=fixed:20us",
        "--set",
        "faults=64,every=50",
    ];
    let Some(s) = explained(&args, &out) else {
        return;
    };
    let rows = records(&out);
    let (marked, other): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r["id"] % 50 == 0);
    // Each marked request drops and touches 64 pages: 64 faults, a few more where the
    // harness itself faulted meanwhile. One request off (a join that shifted the stamps)
    // puts them on the neighbours instead.
    let hit = marked
        .iter()
        .filter(|r| (64..=72).contains(&r["x_faults"]))
        .count();
    assert!(
        hit * 100 >= marked.len() * 95,
        "{hit} of {} marked requests took 64 faults",
        marked.len()
    );
    let quiet = other.iter().filter(|r| r["x_faults"] <= 2).count();
    assert!(
        quiet * 100 >= other.len() * 99,
        "{quiet} of {} unmarked requests took none",
        other.len()
    );
    // The estimate is the count times the host's cost of one, inside the service.
    let fault_ns = s["anatomy"]["fault_ns"].as_f64().unwrap();
    let r = marked.iter().find(|r| r["x_faults"] == 64).unwrap();
    assert_eq!(
        r["x_fault"],
        ((64.0 * fault_ns) as u64).min(r["x_fault"] + r["x_run"])
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// (c) synth's lock with a holder: two workers, every request 300 µs under one lock that
/// parks its waiters at once; a request's worker that finds the lock taken sleeps until the
/// other worker, the holder, wakes it.
#[test]
fn a_lock_holder_is_named_as_who_woke_the_blocked_requests() {
    let _g = serial();
    if !traceable() {
        return;
    }
    let (cpu, other) = cpus();
    if cpu == other {
        return skip_without("irq", "the lock test needs two CPUs for its two workers");
    }
    let out = tmp("explain-lock");
    let pins = format!("{other},{cpu}");
    let args = [
        "--qps",
        "1000",
        "--requests",
        "3000",
        "--warmup-requests",
        "300",
        "--threads",
        "2",
        "--cpus",
        &pins,
        "--set",
        "service=fixed:10us",
        "--set",
        "recv_lock=fixed:300us",
        "--set",
        "lock_spin=0ns",
    ];
    tries("explain lock", |_| {
        let s = explained(&args, &out)?;
        let g = group(&s, "p99");
        if let Some(why) = disturbed(g, &[]) {
            return Some(Err((format!("{g}"), Some(why))));
        }
        // The lock serialises 310 µs requests at ρ 0.3: a slow request waited for the lock
        // asleep (its own worker blocked, or the worker it queued for), then for its CPU
        // after the holder's wake-up: both parts are the lock's (on this VM the blocked part
        // alone was 0.43-0.47 of the excess, the wake-up's 0.22-0.28).
        let workers: Vec<i64> = s["anatomy"]["traced"]["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["tid"].as_i64().unwrap())
            .collect();
        // Who woke them: the first waker named is the other worker. (The CPU's own wake-up
        // from idle is a culprit of another kind, `wakeup`, and may rank above it: a quiet
        // fresh clone's CI had "idle CPU waking" first, 50 ms over 23 requests, then the
        // workers as wakers, 2026-12-02.)
        // A waker the trace did not see ("unseen": its records were lost) names nobody, so
        // the first one named is judged (a CI try had "unseen" first, 17 ms over 9 requests,
        // then a worker, 2026-12-02).
        let waker = g["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["how"] == "woke" && c["name"] != "unseen");
        // The lock's parts are most of the excess that the host left: a CI host's kernel
        // thread (kdamond) preempted 15 % of one try's excess, leaving the lock 0.49 of the
        // whole (0.58 of the rest), 2026-12-02. The host's interrupts and the release lag are
        // not the lock's either: a CI try's timer interrupts took 0.19 of the excess (321 µs
        // a slow request, a vCPU stalled in the handler) and the release lag 0.08, leaving the
        // lock 0.36 of the whole (0.59 of the rest), 2026-12-06.
        let lock = share(g, "blocked") + share(g, "wakeup");
        let host = preempted_by_others(g) + share(g, "irq") + share(g, "lag").max(0.0);
        let ok = lock > 0.5 * (1.0 - host.min(1.0))
            && waker.is_some_and(|top| {
                top["name"].as_str().unwrap().starts_with("taillab-wrk-")
                    && workers.contains(&top["pid"].as_i64().unwrap_or(-1))
            });
        if !ok {
            return Some(Err((
                format!("the waker is not the other worker: {g}"),
                None,
            )));
        }
        Some(Ok(()))
    });
    let _ = std::fs::remove_dir_all(&out);
}

/// Steers loopback's receive processing to `cpu` (RPS on `lo`) until dropped.
struct Steer {
    path: &'static str,
    was: String,
}

impl Steer {
    fn to(cpu: usize) -> Option<Steer> {
        let path = "/sys/class/net/lo/queues/rx-0/rps_cpus";
        let was = std::fs::read_to_string(path).ok()?;
        std::fs::write(path, format!("{:x}", 1u64 << cpu)).ok()?;
        Some(Steer {
            path,
            was: was.trim().to_string(),
        })
    }
}

impl Drop for Steer {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path, &self.was);
    }
}

/// UDP datagrams over loopback from a thread on `cpu` until `bg` drops (a receiver there
/// drains them).
fn flood(bg: &mut Background, cpu: usize) {
    let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(std::time::Duration::from_millis(50)))
        .unwrap();
    let to = rx.local_addr().unwrap();
    let mut buf = [0u8; 2048];
    // At nice 0: the flood's effect is the softirqs it raises on the worker's CPU, not its
    // own weight; at the workers' -20 its two busy threads starved the run's nice-0 helper
    // and coordinator on this CPU (a 2-second run took minutes).
    bg.spawn_at("flood-rx", cpu, 0, move || {
        let _ = rx.recv(&mut buf);
    });
    let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    // About 50 000 datagrams a second: a NET_RX softirq and its IPI on the worker's CPU
    // every 20 µs, not so many that the rings (four events a packet) overflow.
    bg.spawn_at("flood-tx", cpu, 0, move || {
        let _ = tx.send_to(&[7u8; 1024], to);
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_micros(20) {
            std::hint::spin_loop();
        }
    });
}

/// (d) Loopback traffic whose receive processing is steered to the worker's CPU: the slow
/// requests lost their time to the NET_RX softirq, in the worker's own context.
#[test]
fn network_interrupts_steered_to_the_workers_cpu_show_as_net_rx() {
    let _g = serial();
    if !traceable() {
        return;
    }
    let (cpu, other) = cpus();
    if cpu == other {
        return skip_without("irq", "steering NET_RX needs a second CPU to send from");
    }
    let Some(steer) = Steer::to(cpu) else {
        return skip_without("irq", "this kernel has no RPS on lo (rx-0/rps_cpus)");
    };
    let out = tmp("explain-netrx");
    let c = cpu.to_string();
    let args = [
        "--qps",
        "2000",
        "--requests",
        "3000",
        "--warmup-requests",
        "300",
        "--wait",
        "spin",
        "--cpus",
        &c,
        "--set",
        "service=fixed:50us",
    ];
    tries("explain NET_RX", |_| {
        let mut bg = Background::default();
        flood(&mut bg, other);
        let s = explained_then(&args, &out, move || drop(bg))?;
        let g = group(&s, "p99");
        // Each datagram is received on the worker's CPU (RPS), in NET_RX: every request
        // pays for the ~3 datagrams that arrive while it runs (the median request's soft
        // interrupts were ~10 µs here, ~0.1 µs in a run without the flood), and NET_RX is the
        // softirq that took the most from the slow ones. That holds whatever the neighbours
        // did; where they took little of the tail, most of the tail's excess is soft
        // interrupts too (a neighbour's 1-2 ms preemption otherwise outweighs them).
        let net_rx = g["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["how"] == "softirq");
        let median_softirq = g["median_ns"]["softirq"].as_f64().unwrap();
        let named = net_rx.is_some_and(|c| c["name"] == "NET_RX") && median_softirq > 2_000.0;
        if !named {
            return Some(Err((
                format!("NET_RX is not the softirq of every request and of the p99's: {g}"),
                None,
            )));
        }
        if disturbed(g, &[]).is_none() && share(g, "softirq") <= 0.3 {
            return Some(Err((
                format!("soft interrupts are not the p99's excess: {g}"),
                None,
            )));
        }
        Some(Ok(()))
    });
    drop(steer);
    let _ = std::fs::remove_dir_all(&out);
}

/// (e) A quiet run: its p99's excess is queueing and the requests' own service (the
/// ideal's causes); little is unknown, and nothing is a cause that was not there.
#[test]
fn a_quiet_run_leaves_little_of_the_tail_unexplained() {
    let _g = serial();
    if !traceable() {
        return;
    }
    let (cpu, _) = cpus();
    let out = tmp("explain-quiet");
    let c = cpu.to_string();
    let args = [
        "--qps",
        "5000",
        "--requests",
        "5000",
        "--warmup-requests",
        "500",
        "--wait",
        "spin",
        "--cpus",
        &c,
        "--set",
        "service=exp:50us",
    ];
    tries("explain quiet", |_| {
        let s = explained(&args, &out)?;
        let g = group(&s, "p99");
        if let Some(why) = disturbed(g, &[]) {
            return Some(Err((format!("{g}"), Some(why))));
        }
        // Nothing lost on a ring drained every millisecond at this rate; a join that left
        // stretches uncut (or cut outside the trace) would show them as unknown.
        // M/M/1 at ρ 0.25: the tail waits behind long services and is long itself. A
        // shared VM preempts now and then, so 0.6, not 1.
        let ideal = share(g, "queue") + share(g, "run");
        let lost = &s["anatomy"]["cost"]["lost"];
        if share(g, "unknown") >= 0.05 || *lost != 0 || ideal <= 0.6 {
            return Some(Err((format!("lost {lost}: {g}"), None)));
        }
        Some(Ok(()))
    });
    // `taillab explain` prints it.
    let o = Command::new(bin())
        .arg("explain")
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("above p99") && text.contains("slowest request"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Over loopback the server's own stamps cut its worker's timeline, and the client's
/// sender's timeline cuts its lateness: a request's `run` is its service as the server's
/// worker ran it, and little of any request is unknown.
#[test]
fn a_loopback_run_is_explained_by_the_servers_workers_and_the_clients_sender() {
    let _g = serial();
    if !traceable() {
        return;
    }
    let out = tmp("explain-loopback");
    let args = [
        "--topology",
        "loopback",
        "--qps",
        "1000",
        "--requests",
        "2000",
        "--warmup-requests",
        "200",
        "--set",
        "service=fixed:100us",
    ];
    // Retried like the other accuracy tests: one try of a fresh clone's suite (2026-12-01)
    // had a median run/service of 0 (the server's worker's time not found), every local try
    // ~1.0; two such tries fail the test.
    let mut kept = None;
    tries("explain loopback", |_| {
        let s = explained(&args, &out)?;
        let rows = records(&out);
        let m: Vec<_> = rows.iter().filter(|r| r["measured"] == 1).collect();
        // The server's 100 µs spin is `run` where its worker held the CPU throughout, which
        // on a shared host most requests' did; placed from the client's stamps instead (a
        // join that ignored the server's), `run` would be spread over the wire and queue.
        // A try whose tracer lost records left part of the spin unknown: disturbed (a CI
        // host's try had a median run/service of 0.79, 2026-12-02; every local one ~1.0).
        let lost = s["anatomy"]["cost"]["lost"].as_u64().unwrap_or(0);
        let why = (lost > 0).then(|| format!("the tracer lost {lost} records"));
        let mut ratio: Vec<f64> = m
            .iter()
            .map(|r| (r["x_run"] + r["x_fault"]) as f64 / (r["finished"] - r["started"]) as f64)
            .collect();
        ratio.sort_by(f64::total_cmp);
        let q = |p: f64| ratio[((ratio.len() - 1) as f64 * p) as usize];
        let median = q(0.5);
        if !(0.9..=1.1).contains(&median) {
            let e = format!(
                "median run/service {median:.3} (p10 {:.3}, p90 {:.3}); {}",
                q(0.1),
                q(0.9),
                s["anatomy"]["cost"]
            );
            return Some(Err((e, why)));
        }
        // Both threads were found: nothing but the stretches before the trace is unknown.
        let unknown: u64 = m.iter().map(|r| r["x_unknown"]).sum();
        let sojourn: u64 = m.iter().map(|r| r["sojourn"]).sum();
        if unknown * 20 >= sojourn {
            let e = format!(
                "{unknown} of {sojourn} ns unknown; {}",
                s["anatomy"]["cost"]
            );
            return Some(Err((e, why)));
        }
        kept = Some(s);
        Some(Ok(()))
    });
    let Some(s) = kept else {
        return;
    };
    let names: Vec<&str> = s["anatomy"]["traced"]["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            if w["worker"].as_u64() < Some(1 << 20) {
                "server"
            } else {
                "sender"
            }
        })
        .collect();
    assert_eq!(names, ["server", "sender"], "{}", s["anatomy"]["traced"]);
    let o = Command::new(bin())
        .arg("explain")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("slowest request"));
    assert!(report_html(&out).contains("Anatomy of the slow requests"));
    let _ = std::fs::remove_dir_all(&out);
}

/// Bad input stops the run before it starts with one line that says what to enable.
#[test]
fn explain_refuses_a_host_that_cannot_trace_with_one_line() {
    let _g = serial();
    let empty = tmp("explain-notracefs");
    std::fs::create_dir_all(&empty).unwrap();
    let partial = tmp("explain-partial");
    std::fs::create_dir_all(partial.join("events/sched/sched_switch")).unwrap();
    let out = tmp("explain-refused");
    let run = |env: Option<&Path>, uid: Option<u32>| {
        use std::os::unix::process::CommandExt;
        let mut c = Command::new(bin());
        c.args([
            "run",
            "--app",
            "synth",
            "--qps",
            "100",
            "--requests",
            "10",
            "--explain",
            "-q",
        ])
        .arg("--out")
        .arg(&out);
        if let Some(e) = env {
            c.env("TAILLAB_TRACEFS", e);
        }
        if let Some(u) = uid {
            c.uid(u);
        }
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).trim().to_string();
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            !out.join("summary.json").exists(),
            "nothing measured: {err}"
        );
        err
    };
    let e = run(Some(&empty), None);
    assert!(
        e.contains("needs tracefs") && e.contains("mount -t tracefs"),
        "{e}"
    );
    std::fs::write(
        partial.join("events/sched/sched_switch/format"),
        "ID: 1\nformat:\n\tfield:int next_pid;\toffset:8;\tsize:4;\tsigned:1;\n",
    )
    .unwrap();
    let e = run(Some(&partial), None);
    assert!(
        e.contains("sched:sched_waking") && e.contains("lacks"),
        "{e}"
    );
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // As nobody (perf_event_paranoid above -1 on any distribution's default).
        let p: i64 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map_or(2, |s| s.trim().parse().unwrap_or(2));
        if p > -1 {
            let e = run(None, Some(65534));
            assert!(
                e.contains("run as root") && e.contains("perf_event_paranoid"),
                "{e}"
            );
        }
    } else {
        skip_without(
            "root",
            "the not-root case runs as another user, which needs root",
        );
    }
    // Without --explain nothing traces and the records have no anatomy.
    let plain = tmp("explain-plain");
    let s = run_env(
        &[
            "--app",
            "synth",
            "--qps",
            "500",
            "--requests",
            "200",
            "--save-requests",
        ],
        &plain,
        &[("TAILLAB_TRACEFS", empty.as_path())],
    );
    assert!(s.get("anatomy").is_none());
    let head = std::fs::read_to_string(plain.join("requests.csv")).unwrap();
    assert!(!head.lines().next().unwrap().contains("x_"), "{head}");
    for d in [&empty, &partial, &out, &plain] {
        let _ = std::fs::remove_dir_all(d);
    }
}
