//! Slurm through the real binary and a real Slurm: `scripts/slurm-local.sh`
//! starts munged, slurmctld and three slurmd "nodes" on this host (Debian's
//! slurm packages), the test submits to it and stops it. Where Slurm cannot
//! start (packages missing, not root) the Slurm test prints why and passes
//! without checking anything, unless `TAILLAB_REQUIRE` lists `slurm` (as `.ci/run`
//! does): then it fails with the reason.

mod common;
use common::{bin, json, skip_without, tmp};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A Slurm cluster of this test process, stopped on drop.
struct LocalSlurm {
    dir: PathBuf,
    conf: PathBuf,
    env: Vec<(String, String)>,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/slurm-local.sh")
}

impl LocalSlurm {
    /// Starts the cluster, or says why it cannot.
    fn start() -> Result<LocalSlurm, String> {
        let dir = tmp("slurm");
        // Ports of their own, so a cluster someone left running is not disturbed.
        let port = 20000 + (std::process::id() % 2000) * 8;
        let env = vec![
            ("TAILLAB_SLURM_DIR".to_string(), dir.display().to_string()),
            ("TAILLAB_SLURM_PORT".to_string(), port.to_string()),
            ("TAILLAB_SLURM_NODES".to_string(), "3".to_string()),
        ];
        let o = Command::new("bash")
            .arg(script())
            .arg("start")
            .envs(env.iter().cloned())
            .output();
        let o = o.map_err(|e| format!("cannot run bash: {e}"))?;
        let s = LocalSlurm {
            conf: dir.join("slurm.conf"),
            dir,
            env,
        };
        if !o.status.success() {
            // The script's reason, with the daemons' last log lines (gone with the folder).
            let mut why = String::from_utf8_lossy(&o.stderr).trim().to_string();
            for log in ["slurmctld.log", "slurmd-n1.log", "munge/munged.log"] {
                if let Ok(t) = std::fs::read_to_string(s.dir.join(log)) {
                    let tail: Vec<&str> = t.lines().rev().take(3).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    why.push_str(&format!("\n  {log}: {}", tail.join(" | ")));
                }
            }
            return Err(why);
        }
        Ok(s)
    }

    fn cmd(&self, prog: &str) -> Command {
        let mut c = Command::new(prog);
        c.env("SLURM_CONF", &self.conf);
        c
    }

    fn taillab(&self, args: &[&str]) -> Output {
        self.cmd(bin()).args(args).output().unwrap()
    }
}

impl Drop for LocalSlurm {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .envs(self.env.iter().cloned())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Every path under `dir` relative to it, without the executor's `slurm/`.
fn layout(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().display().to_string();
            if rel == "slurm" {
                continue;
            }
            if p.is_dir() {
                todo.push(p.clone());
            }
            out.push(rel);
        }
    }
    out.sort();
    out
}

const SWEEP: &[&str] = &[
    "sweep",
    "--app",
    "synth",
    "--set",
    "service=exp:50us",
    "--qps",
    "1000,2000",
    "--threads",
    "1,2",
    "--requests",
    "200",
    "--warmup-requests",
    "50",
    // Never met: every point makes min_runs in its first Slurm round, then one more.
    "--ci",
    "0.000001",
    "--min-runs",
    "2",
    "--max-runs",
    "3",
    "-q",
];

/// The same sweep locally and through Slurm: the same results tree, the
/// same runs and seeds, both aggregated.
fn sweep_matches_local(slurm: &LocalSlurm, root: &Path) {
    let (local, remote) = (root.join("local"), root.join("slurm"));
    let o = slurm.taillab(&[SWEEP, &["--out", local.to_str().unwrap()]].concat());
    ok(&o, "local sweep");
    let o = slurm.taillab(
        &[
            SWEEP,
            &["--out", remote.to_str().unwrap(), "--executor", "slurm"],
        ]
        .concat(),
    );
    ok(&o, "slurm sweep");
    assert_eq!(layout(&local), layout(&remote), "results trees differ");
    let points: Vec<String> = layout(&local)
        .into_iter()
        .filter(|p| p.ends_with("aggregate.json"))
        .collect();
    assert_eq!(points.len(), 4, "{points:?}");
    for p in points {
        let (a, b) = (json(&local.join(&p)), json(&remote.join(&p)));
        for k in ["runs", "seeds", "point", "target"] {
            assert_eq!(a[k], b[k], "{p}: {k}");
        }
        assert_eq!(a["runs"], 3, "{p}");
        // Every request of every run is in the merged histograms.
        assert_eq!(b["merged"]["sojourn"]["count"], 600, "{p}");
    }
    assert!(remote.join("slurm/jobs").exists());
}

/// A networked run whose server and two clients are srun steps on three
/// Slurm nodes: the clients' histograms are added, every node is named.
fn networked_run_merges_clients(slurm: &LocalSlurm, root: &Path) {
    let out = root.join("net");
    let o = slurm.taillab(&[
        "run",
        "--app",
        "synth",
        "--set",
        "service=exp:50us",
        "--qps",
        "1000",
        "--requests",
        "600",
        "--warmup-requests",
        "60",
        "--topology",
        "networked",
        "--launcher",
        "slurm",
        "--server-nodes",
        "1",
        "--client-nodes",
        "2",
        "--clients",
        "2",
        "--out",
        out.to_str().unwrap(),
        "-q",
    ]);
    ok(&o, "networked run through Slurm");
    let s = json(&out.join("summary.json"));
    let per: Vec<u64> = s["transport"]["per_client"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["measured"].as_u64().unwrap())
        .collect();
    assert_eq!(per, vec![300, 300]);
    assert_eq!(s["latency_ns"]["sojourn"]["count"], 600);
    let nodes = s["nodes"].as_array().expect("the nodes section");
    let named: Vec<(String, Value)> = nodes
        .iter()
        .map(|n| (n["node"].as_str().unwrap().to_string(), n["roles"].clone()))
        .collect();
    assert_eq!(
        named,
        vec![
            ("n1".to_string(), serde_json::json!(["server"])),
            ("n2".to_string(), serde_json::json!(["client 0"])),
            ("n3".to_string(), serde_json::json!(["client 1"])),
        ]
    );
    for n in nodes {
        assert!(
            n["steal_pct"].is_number() && n["foreign_cpu_pct"].is_number(),
            "{n}"
        );
    }
    assert!(s["checks"]["nodes"]["verdict"]
        .as_str()
        .unwrap()
        .contains("n3 (client 1): steal"));
    // The salloc'd job is gone once the run ends.
    let q = slurm
        .cmd("squeue")
        .args(["-h", "-t", "running,pending", "-n", "taillab-net"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&q.stdout).trim().is_empty(),
        "left running: {:?}",
        q
    );
}

/// A fan-out through Slurm: each leaf's server a step on its own node, both leaves' clients
/// on the third; the whole requests are joined from both leaves' answers.
fn fanout_leaves_on_nodes(slurm: &LocalSlurm, root: &Path) {
    let out = root.join("fanout");
    #[rustfmt::skip]
    let o = slurm.taillab(&[
        "run", "--app", "synth", "--set", "service=exp:200us", "--set", "spin=sleep",
        "--wait", "block", "--qps", "200", "--requests", "600", "--warmup-requests", "60",
        "--topology", "networked", "--launcher", "slurm", "--fanout", "2",
        "--server-nodes", "2", "--client-nodes", "1", "--out", out.to_str().unwrap(), "-q",
    ]);
    ok(&o, "fan-out through Slurm");
    let s = json(&out.join("summary.json"));
    assert_eq!(s["fanout"]["leaves"], 2);
    assert_eq!(s["transport"]["clients"], 2, "one client per leaf");
    assert_eq!(s["latency_ns"]["sojourn"]["count"], 600);
    let per_leaf = s["fanout"]["per_leaf"].as_array().unwrap();
    assert!(
        per_leaf.iter().all(|l| l["count"] == 600),
        "every leaf answered every request: {per_leaf:?}"
    );
    let nodes: Vec<(String, Value)> = s["nodes"]
        .as_array()
        .expect("the nodes section")
        .iter()
        .map(|n| (n["node"].as_str().unwrap().to_string(), n["roles"].clone()))
        .collect();
    assert_eq!(
        nodes,
        vec![
            ("n1".to_string(), serde_json::json!(["server 0"])),
            ("n2".to_string(), serde_json::json!(["server 1"])),
            (
                "n3".to_string(),
                serde_json::json!(["client 0", "client 1"])
            ),
        ]
    );
    // Each leaf's address is its node's: two servers, two targets.
    let targets = s["transport"]["target"].as_str().unwrap();
    assert_eq!(targets.split(',').count(), 2, "{targets}");
}

/// A two-point synth sweep through Slurm into `out`, `duration` per run.
fn two_point_sweep(out: &Path, duration: &str) -> Vec<String> {
    #[rustfmt::skip]
    let a = ["sweep", "--app", "synth", "--qps", "500,1000", "--duration", duration,
             "--warmup-requests", "20", "--executor", "slurm", "-q", "--out"];
    let mut v: Vec<String> = a.iter().map(|s| s.to_string()).collect();
    v.push(out.to_str().unwrap().to_string());
    v
}

/// Starts `taillab ARGS` in the background, its stderr piped.
fn start_sweep(slurm: &LocalSlurm, args: &[String]) -> std::process::Child {
    slurm
        .cmd(bin())
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// `taillab ARGS --resume`, which must succeed.
fn resume(slurm: &LocalSlurm, args: &[String]) {
    let a: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .chain(["--resume"])
        .collect();
    ok(&slurm.taillab(&a), "resumed sweep");
}

/// A task killed under Slurm: the sweep names the run, Slurm's state and
/// the task's stderr, keeps the other point, and --resume finishes.
fn cancelled_task_is_reported_and_resumed(slurm: &LocalSlurm, root: &Path) {
    let out = root.join("fail");
    // Long enough that the cancel lands inside the run even when slurmctld, on a busy
    // host, lists the task as running seconds after it started (a 3 s run once
    // finished before its scancel did).
    let args = two_point_sweep(&out, "15s");
    let child = start_sweep(slurm, &args);
    let until = Instant::now() + Duration::from_secs(30);
    let task = loop {
        let q = slurm
            .cmd("squeue")
            .args(["-h", "-r", "-t", "running", "-o", "%i %j"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&q.stdout).into_owned();
        if let Some(l) = text.lines().find(|l| l.ends_with("q1000")) {
            break l.split_whitespace().next().unwrap().to_string();
        }
        assert!(Instant::now() < until, "the q1000 task never ran: {text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let seen = Instant::now();
    slurm.cmd("scancel").arg(&task).status().unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(2),
        "the sweep ended {:.1} s after task {task} was seen running and cancelled: {err}",
        seen.elapsed().as_secs_f64()
    );
    assert!(
        err.contains("integrated-t1-q1000 run-0") && err.contains("CANCELLED"),
        "{err}"
    );
    assert!(
        err.contains("run-0.err") && err.contains("--resume"),
        "{err}"
    );
    assert!(
        out.join("points/integrated-t1-q500/aggregate.json")
            .exists(),
        "the finished point is kept"
    );
    resume(slurm, &args);
    assert!(out
        .join("points/integrated-t1-q1000/aggregate.json")
        .exists());
    // One job per point, then one for the missing run.
    let jobs = std::fs::read_to_string(out.join("slurm/jobs")).unwrap();
    assert_eq!(jobs.lines().count(), 3, "{jobs}");
}

/// Ctrl-C (SIGINT) while the sweep waits for its jobs: the jobs it submitted are
/// cancelled (none left queued or running), it says so and how to go on, and --resume
/// finishes the sweep.
fn interrupted_sweep_cancels_its_jobs(slurm: &LocalSlurm, root: &Path) {
    let out = root.join("interrupted");
    let args = two_point_sweep(&out, "3s");
    let child = start_sweep(slurm, &args);
    let until = Instant::now() + Duration::from_secs(30);
    let jobs = loop {
        let listed = std::fs::read_to_string(out.join("slurm/jobs")).unwrap_or_default();
        let q = slurm
            .cmd("squeue")
            .args(["-h", "-r", "-t", "running", "-o", "%i"])
            .output()
            .unwrap();
        if listed.lines().count() == 2 && !q.stdout.is_empty() {
            break listed;
        }
        assert!(Instant::now() < until, "no task ran: {listed}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("taillab: interrupted: cancelled Slurm job(s)") && err.contains("--resume"),
        "{err}"
    );
    // Nothing of this sweep is left queued or running.
    let ids: Vec<&str> = jobs.lines().map(str::trim).collect();
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let q = slurm
            .cmd("squeue")
            .args(["-h", "-r", "-o", "%A %T", "-j", &ids.join(",")])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&q.stdout).into_owned();
        let open: Vec<&str> = text
            .lines()
            .filter(|l| l.contains("PENDING") || l.contains("RUNNING") || l.contains("CONFIGURING"))
            .collect();
        if open.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "left running after Ctrl-C: {open:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    resume(slurm, &args);
    for p in ["integrated-t1-q500", "integrated-t1-q1000"] {
        assert!(
            out.join("points").join(p).join("aggregate.json").exists(),
            "{p}"
        );
    }
}

#[test]
fn slurm_sweeps_and_networked_runs_on_a_local_cluster() {
    let slurm = match LocalSlurm::start() {
        Ok(s) => s,
        Err(why) => return skip_without("slurm", &why),
    };
    let root = tmp("slurm-results");
    sweep_matches_local(&slurm, &root);
    networked_run_merges_clients(&slurm, &root);
    fanout_leaves_on_nodes(&slurm, &root);
    cancelled_task_is_reported_and_resumed(&slurm, &root);
    interrupted_sweep_cancels_its_jobs(&slurm, &root);
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn executor_slurm_without_sbatch_says_what_to_install() {
    let out = tmp("no-sbatch");
    let o = Command::new(bin())
        .args([
            "sweep",
            "--app",
            "synth",
            "--qps",
            "500",
            "--requests",
            "50",
            "--executor",
            "slurm",
            "-q",
            "--out",
        ])
        .arg(&out)
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("`sbatch` not found") && err.contains("slurm-client"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written before Slurm is found");
}
