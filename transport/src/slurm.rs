//! The `slurm` launcher of networked runs (`--launcher slurm`): the server
//! and the clients become `srun` steps on the nodes of one Slurm job, and a
//! monitor step on every node samples that node's environment.
//!
//! The coordinator keeps working as with any launcher (the steps forward
//! stdin and stdout, so the barrier, `go` and the shards cross them
//! unchanged); this module only writes the launch lines:
//!
//! - **The allocation.** Inside a Slurm job (a sweep's task, an `sbatch`
//!   script, `salloc`) the job's own nodes are used; elsewhere one job of
//!   `server_nodes + client_nodes` nodes is taken with `salloc --no-shell`
//!   and cancelled when the run ends, whatever happened.
//! - **The nodes.** The server gets the first node (with `server_nodes = 0`
//!   it shares the first client node); client i runs on client node
//!   i mod `client_nodes`. A fan-out (`--fanout N`) has N servers, its
//!   leaves, and one client per leaf: leaf j runs on server node
//!   j mod `server_nodes` (with `server_nodes = 0`, on its client's node). Steps run with `--overlap`, so server, clients
//!   and monitors may share a node's CPUs (the job owns the node anyway).
//! - **The address.** A server told to listen on a loopback address listens
//!   on all interfaces instead, and the clients are given the server node's
//!   `NodeAddr` with the port it reported.
//! - **Every node's environment.** Hypervisor steal and foreign load on a
//!   client node skew the tail as much as on the server, so each node runs
//!   `taillab slurm-node-monitor`, which samples `/proc` from before the
//!   start until the coordinator sends the measured window (wall-clock ns:
//!   nodes share no monotonic clock; NTP keeps their wall clocks within
//!   milliseconds, below the 100 ms sampling period). Processes of the same
//!   Slurm job count as the experiment's own. The summary lists each node
//!   (`nodes`) with its steal and foreign CPU, and the `nodes` check fails
//!   when any node's environment check failed.

use crate::TransportError;
use serde_json::json;
use std::io::Write;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};
use taillab_core::config::fields::Launcher;
use taillab_core::config::{Items, RunConfig, Topology};
use taillab_core::sections::environment::{NodeEnv, NodeOutcome, NodeReport};
use taillab_core::summary::{Check, Summary};

/// The hidden subcommand each node's monitor step runs.
pub const NODE_MONITOR_CMD: &str = "slurm-node-monitor";

fn invalid(s: impl Into<String>) -> TransportError {
    TransportError::Invalid(s.into())
}

/// Refuses slurm-launcher settings that cannot work, before anything starts.
pub fn check(cfg: &RunConfig) -> Result<(), TransportError> {
    let n = &cfg.net;
    if n.launcher != Launcher::Slurm {
        return Ok(());
    }
    if n.topology != Topology::Networked {
        return Err(invalid("--launcher slurm starts the parts of a networked run: add --topology networked"));
    }
    let (servers, clients) = (crate::fanout::leaves(cfg), crate::fanout::clients(cfg));
    if servers == 1 && n.server_nodes > 1 {
        return Err(invalid(format!(
            "--server-nodes {} : a run has one server; give 1 (its own node) or 0 (on the first client node)",
            n.server_nodes
        )));
    }
    if n.server_nodes > servers {
        return Err(invalid(format!(
            "--server-nodes {} : a fan-out has {servers} servers, its leaves; give at most {servers} (leaf j on server node j mod --server-nodes) or 0 (each leaf on its client's node)",
            n.server_nodes
        )));
    }
    if n.client_nodes == 0 || n.client_nodes > clients {
        let what = if servers > 1 { "one per leaf" } else { "--clients" };
        return Err(invalid(format!(
            "--client-nodes {} must be in 1..={clients} (the clients, {what}): each client node runs at least one client",
            n.client_nodes
        )));
    }
    if n.server_launcher != "{cmd}" || !n.client_launcher.0.is_empty() {
        return Err(invalid(
            "--launcher slurm writes its own srun lines: drop --server-launcher and --client-launcher",
        ));
    }
    Ok(())
}

/// Runs a Slurm client command and returns its stdout, or an error naming
/// the command and what it printed.
fn slurm_cmd(prog: &str, args: &[String]) -> Result<String, TransportError> {
    let o = Command::new(prog).args(args).stdin(Stdio::null()).output().map_err(|e| {
        TransportError::Launch(format!(
            "cannot run `{prog}` ({e}): --launcher slurm needs Slurm's client commands on PATH (Debian: slurm-client)"
        ))
    })?;
    if !o.status.success() {
        return Err(TransportError::Launch(format!(
            "`{prog} {}` failed ({}): {}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// A Slurm hostlist (`n[1-3],gpu7`) as node names.
pub fn hostnames(list: &str) -> Result<Vec<String>, TransportError> {
    let out = slurm_cmd("scontrol", &["show".into(), "hostnames".into(), list.into()])?;
    Ok(out.split_whitespace().map(String::from).collect())
}

/// Minutes a run's own allocation may last: the run's expected length and
/// drain timeout, plus 10 minutes for the app's start and the steps'.
fn salloc_minutes(cfg: &RunConfig) -> u64 {
    let ns = cfg.spec().map(|s| s.expected_total_ns() + s.drain_timeout_ns).unwrap_or(0);
    ns.div_ceil(60_000_000_000) + 10
}

/// The nodes of a networked run: one Slurm job's, cancelled on drop when
/// this run took the job itself.
pub struct Allocation {
    /// The job id.
    pub job: String,
    /// Its nodes, in Slurm's order.
    pub nodes: Vec<String>,
    owned: bool,
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if self.owned {
            let _ = Command::new("scancel").arg(&self.job).stderr(Stdio::null()).status();
        }
    }
}

impl Allocation {
    /// The allocation of a run with `--launcher slurm` (`None` for other
    /// launchers): the current job's, or a new one.
    pub fn for_run(cfg: &RunConfig, quiet: bool) -> Result<Option<Allocation>, TransportError> {
        if cfg.net.launcher != Launcher::Slurm {
            return Ok(None);
        }
        let need = cfg.net.server_nodes + cfg.net.client_nodes;
        let a = match std::env::var("SLURM_JOB_ID") {
            Ok(job) if !job.is_empty() => {
                let list = std::env::var("SLURM_JOB_NODELIST").unwrap_or_default();
                Allocation { job, nodes: hostnames(&list)?, owned: false }
            }
            _ => Self::salloc(cfg, need, quiet)?,
        };
        if a.nodes.len() < need {
            return Err(invalid(format!(
                "Slurm job {} has {} node(s) ({}); --server-nodes {} and --client-nodes {} need {need}: ask for --nodes={need}",
                a.job,
                a.nodes.len(),
                a.nodes.join(","),
                cfg.net.server_nodes,
                cfg.net.client_nodes
            )));
        }
        Ok(Some(a))
    }

    /// Takes a job of `need` nodes with `salloc --no-shell` (waits while it is queued).
    fn salloc(cfg: &RunConfig, need: usize, quiet: bool) -> Result<Allocation, TransportError> {
        let mut args = vec!["--no-shell".to_string(), format!("--nodes={need}"), "--job-name=taillab-net".into()];
        let given = &cfg.net.salloc_args.0;
        if !given.iter().any(|a| a.starts_with("--time") || a.starts_with("-t")) {
            // A limit of its own, so a job left behind by a killed coordinator ends.
            args.push(format!("--time={}", salloc_minutes(cfg)));
        }
        args.extend(given.iter().cloned());
        if !quiet {
            eprintln!("slurm: salloc {}", args.join(" "));
        }
        let o = Command::new("salloc").args(&args).stdin(Stdio::null()).output().map_err(|e| {
            TransportError::Launch(format!(
                "cannot run `salloc` ({e}): --launcher slurm needs Slurm's client commands on PATH (Debian: slurm-client)"
            ))
        })?;
        let err = String::from_utf8_lossy(&o.stderr);
        let job = err
            .lines()
            .filter_map(|l| l.split("Granted job allocation ").nth(1))
            .map(|j| j.trim().to_string())
            .next_back();
        let Some(job) = job.filter(|_| o.status.success()) else {
            return Err(TransportError::Launch(format!(
                "`salloc {}` gave no allocation: {}",
                args.join(" "),
                err.trim()
            )));
        };
        // Owned from here: cancelled on any error below.
        let mut a = Allocation { job, nodes: vec![], owned: true };
        let list = slurm_cmd("squeue", &["-h".into(), "-j".into(), a.job.clone(), "-o".into(), "%N".into()])?;
        a.nodes = hostnames(list.trim())?;
        Ok(a)
    }

    /// Each server's node (a fan-out's leaves, or the one) and each client's node.
    fn placement(&self, cfg: &RunConfig) -> (Vec<String>, Vec<String>) {
        let s = cfg.net.server_nodes;
        let client_nodes = &self.nodes[s..s + cfg.net.client_nodes];
        let clients: Vec<String> =
            (0..crate::fanout::clients(cfg)).map(|i| client_nodes[i % client_nodes.len()].clone()).collect();
        let servers = (0..crate::fanout::leaves(cfg))
            .map(|j| if s == 0 { clients[j % clients.len()].clone() } else { self.nodes[j % s].clone() })
            .collect();
        (servers, clients)
    }

    /// The launch line of server `i` (a fan-out's leaf `i`): a step on its node.
    pub fn server_step(&self, cfg: &RunConfig, i: usize) -> String {
        let (servers, _) = self.placement(cfg);
        self.step(&servers[i % servers.len()])
    }

    /// The launch line of one step on `node` (a launcher template).
    fn step(&self, node: &str) -> String {
        format!(
            "srun --jobid={} --nodes=1 --ntasks=1 --nodelist={node} --overlap --quiet --kill-on-bad-exit=1 {{cmd}}",
            self.job
        )
    }

    /// `cfg` with its launchers set to steps on the allocation's nodes and a
    /// loopback listen address widened to every interface.
    pub fn configure(&self, cfg: &RunConfig) -> RunConfig {
        let mut c = cfg.clone();
        let (servers, clients) = self.placement(cfg);
        c.net.server_launcher = self.step(&servers[0]);
        c.net.client_launcher = Items(clients.iter().map(|n| self.step(n)).collect());
        if let Some((host, port)) = c.net.listen.rsplit_once(':') {
            let ip = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>();
            if ip.is_ok_and(|ip| ip.is_loopback()) {
                c.net.listen = format!("0.0.0.0:{port}");
            }
        }
        c
    }

    /// The address clients reach server `i` at (a fan-out's leaf `i`), from the one it
    /// printed: an unspecified host (`0.0.0.0`) becomes its node's address.
    pub fn reachable(&self, cfg: &RunConfig, printed: &str, i: usize) -> Result<String, TransportError> {
        let Some((host, port)) = printed.rsplit_once(':') else { return Ok(printed.to_string()) };
        let ip = host.trim_matches(['[', ']']).parse::<std::net::IpAddr>();
        if !ip.is_ok_and(|ip| ip.is_unspecified()) {
            return Ok(printed.to_string());
        }
        let (servers, _) = self.placement(cfg);
        let server = servers[i % servers.len()].clone();
        let show = slurm_cmd("scontrol", &["show".into(), "node".into(), server.clone(), "-o".into()])?;
        let addr =
            show.split_whitespace().find_map(|w| w.strip_prefix("NodeAddr=")).map(String::from).unwrap_or(server);
        Ok(format!("{addr}:{port}"))
    }

    /// Starts one monitor step per node of the run and waits until each
    /// samples. A node whose monitor does not start is reported, not fatal.
    pub fn start_monitors(&self, cfg: &RunConfig, exe: &str) -> NodeMonitors {
        let (servers, clients) = self.placement(cfg);
        let mut roles: Vec<(String, Vec<String>)> = Vec::new();
        let mut add = |node: &str, role: String| match roles.iter_mut().find(|(n, _)| n == node) {
            Some((_, r)) => r.push(role),
            None => roles.push((node.to_string(), vec![role])),
        };
        if cfg.net.target.is_none() {
            for (j, n) in servers.iter().enumerate() {
                add(n, if servers.len() > 1 { format!("server {j}") } else { "server".into() });
            }
        }
        for (i, n) in clients.iter().enumerate() {
            add(n, format!("client {i}"));
        }
        let argv = [
            exe.to_string(),
            NODE_MONITOR_CMD.into(),
            "--period".into(),
            cfg.monitor.period.to_string(),
            "--max-steal".into(),
            cfg.monitor.max_steal.to_string(),
            "--max-foreign".into(),
            cfg.monitor.max_foreign.to_string(),
        ];
        let (tx, rx) = mpsc::channel();
        let mut m = NodeMonitors { nodes: vec![], lines: rx, failed: vec![] };
        for (i, (node, roles)) in roles.into_iter().enumerate() {
            match self.spawn_monitor(&node, &argv, i, tx.clone()) {
                Ok((child, stdin)) => m.nodes.push(NodeMon { node, roles, child, stdin: Some(stdin), result: None }),
                Err(e) => {
                    m.failed.push(NodeReport { node, roles, outcome: NodeOutcome::Error { error: e.to_string() } })
                }
            }
        }
        m.await_started();
        m
    }

    fn spawn_monitor(
        &self,
        node: &str,
        argv: &[String],
        tag: usize,
        tx: mpsc::Sender<(usize, Option<String>)>,
    ) -> Result<(Child, ChildStdin), TransportError> {
        let line = crate::launch::expand(&self.step(node), argv, tag)?;
        let mut child = crate::launch::spawn(&format!("monitor of node {node}"), &line)?;
        crate::launch::lines_of(&mut child, tag, tx);
        let stdin = child.stdin.take().expect("stdin is piped");
        Ok((child, stdin))
    }
}

struct NodeMon {
    node: String,
    roles: Vec<String>,
    child: Child,
    stdin: Option<ChildStdin>,
    result: Option<NodeOutcome>,
}

/// The running monitor steps of a run's nodes.
pub struct NodeMonitors {
    nodes: Vec<NodeMon>,
    lines: mpsc::Receiver<(usize, Option<String>)>,
    /// Nodes whose monitor could not be started or did not report.
    failed: Vec<NodeReport>,
}

impl Drop for NodeMonitors {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Ok(None) = n.child.try_wait() {
                let _ = n.child.kill();
            }
            let _ = n.child.wait();
        }
    }
}

impl NodeMonitors {
    /// Waits (up to 60 s) for each monitor's `monitoring` line.
    fn await_started(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut waiting: Vec<usize> = (0..self.nodes.len()).collect();
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((i, Some(l))) if l.trim() == "monitoring" => waiting.retain(|w| *w != i),
                Ok((_, Some(_))) => {}
                Ok((i, None)) => {
                    waiting.retain(|w| *w != i);
                    self.nodes[i].result = Some(gone("the monitor exited before sampling; see its error above"));
                }
                Err(_) => break,
            }
        }
        for i in waiting {
            self.nodes[i].result = Some(gone("the monitor did not start within 60 s"));
        }
    }

    /// Sends every monitor the measured window (wall clock), reads each
    /// node's figures, and adds `nodes` and `checks.nodes` to `summary`.
    pub fn finish(mut self, window: (SystemTime, SystemTime), summary: &mut Summary) {
        let ns = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        let msg = format!("window {} {}\n", ns(window.0), ns(window.1));
        for n in self.nodes.iter_mut().filter(|n| n.result.is_none()) {
            if let Some(s) = n.stdin.as_mut() {
                let _ = s.write_all(msg.as_bytes()).and_then(|_| s.flush());
            }
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.nodes.iter().any(|n| n.result.is_none()) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((i, Some(l))) => {
                    if let Some(j) = l.strip_prefix("env ") {
                        self.nodes[i].result = Some(match serde_json::from_str::<NodeEnv>(j) {
                            Ok(env) => NodeOutcome::Env(env),
                            Err(e) => NodeOutcome::Error { error: format!("bad report: {e}") },
                        });
                    }
                }
                Ok((i, None)) => {
                    if self.nodes[i].result.is_none() {
                        self.nodes[i].result = Some(gone("the monitor exited without a report"));
                    }
                }
                Err(_) => break,
            }
        }
        let mut list: Vec<NodeReport> = self
            .nodes
            .iter()
            .map(|n| NodeReport {
                node: n.node.clone(),
                roles: n.roles.clone(),
                outcome: n.result.clone().unwrap_or_else(|| gone("no report within 30 s")),
            })
            .collect();
        list.append(&mut self.failed);
        attach(summary, list);
    }
}

/// Processes of Slurm job `job` on this host (they carry its id in their
/// environment): the experiment's own, never foreign load.
pub fn job_pids(job: &str) -> Vec<i32> {
    let me = std::process::id() as i32;
    let want = format!("SLURM_JOB_ID={job}");
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|v| v == want.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// A node without a report, and why.
fn gone(why: &str) -> NodeOutcome {
    NodeOutcome::Error { error: why.into() }
}

/// One node's line of the `nodes` check.
fn node_line(v: &NodeReport) -> String {
    let who = format!("{} ({})", v.node, v.roles.join(", "));
    match &v.outcome {
        NodeOutcome::Error { error } => format!("{who}: not monitored: {error}"),
        NodeOutcome::Env(e) => format!(
            "{who}: steal {:.2} %, other processes {:.1} % of a CPU{}",
            e.steal_pct,
            e.foreign_cpu_pct,
            if e.ok { "" } else { " — disturbed" }
        ),
    }
}

/// Adds the nodes' reports to a summary: `nodes` (one object per node) and
/// the `nodes` check, failed when a node was disturbed or not monitored.
pub fn attach(summary: &mut Summary, nodes: Vec<NodeReport>) {
    summary.checks.insert("nodes".into(), nodes_check(&nodes));
    summary.nodes = Some(nodes);
}

/// The `nodes` check: every node named with its steal and foreign load.
pub fn nodes_check(nodes: &[NodeReport]) -> Check {
    let ok = nodes.iter().all(NodeReport::ok);
    let verdict = nodes.iter().map(node_line).collect::<Vec<_>>().join("; ");
    Check::new(ok, verdict, json!({ "nodes": nodes.len() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> RunConfig {
        let mut c = RunConfig::default();
        for (k, v) in pairs {
            c.set(k, &[v]).unwrap();
        }
        c
    }

    #[test]
    fn bad_settings_are_refused_with_the_flag_named() {
        let base = [("net.launcher", "slurm"), ("net.topology", "networked"), ("net.clients", "2")];
        check(&cfg(&base)).unwrap();
        for (extra, needle) in [
            (("net.topology", "loopback"), "--topology networked"),
            (("net.server_nodes", "2"), "--server-nodes"),
            (("net.client_nodes", "3"), "--client-nodes"),
            (("net.server_launcher", "ssh h {cmdq}"), "drop --server-launcher"),
        ] {
            let mut p = base.to_vec();
            p.push(extra);
            let e = check(&cfg(&p)).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn clients_spread_over_client_nodes_and_the_listen_address_widens() {
        let a = Allocation { job: "7".into(), nodes: vec!["a".into(), "b".into(), "c".into()], owned: false };
        let c = cfg(&[("net.launcher", "slurm"), ("net.clients", "3"), ("net.client_nodes", "2")]);
        let (s, cl) = a.placement(&c);
        assert_eq!((s, cl), (vec!["a".to_string()], vec!["b".to_string(), "c".into(), "b".into()]));
        let c0 = cfg(&[("net.server_nodes", "0"), ("net.clients", "2"), ("net.client_nodes", "2")]);
        assert_eq!(a.placement(&c0).1, vec!["a".to_string(), "b".into()]);
        let k = a.configure(&c);
        assert!(k.net.server_launcher.contains("--jobid=7") && k.net.server_launcher.contains("--nodelist=a"));
        assert!(k.net.client_launcher.0[2].contains("--nodelist=b"));
        assert_eq!(k.net.listen, "0.0.0.0:0");
        // A routable address is the user's choice and kept.
        let k = a.configure(&cfg(&[("net.listen", "10.0.0.5:7000")]));
        assert_eq!(k.net.listen, "10.0.0.5:7000");
        assert_eq!(a.reachable(&c, "10.1.2.3:555", 0).unwrap(), "10.1.2.3:555");
    }

    /// A fan-out's leaves spread over the server nodes (or sit on their clients' nodes), one
    /// client per leaf over the client nodes; its settings are checked against its leaves.
    #[test]
    fn a_fanouts_leaves_are_placed_on_nodes() {
        let a = Allocation { job: "7".into(), nodes: vec!["a".into(), "b".into(), "c".into()], owned: false };
        let slurm = [("net.launcher", "slurm"), ("net.topology", "networked"), ("fanout.leaves", "3")];
        let with = |extra: &[(&'static str, &'static str)]| {
            let mut p = slurm.to_vec();
            p.extend_from_slice(extra);
            cfg(&p)
        };
        let c = with(&[("net.server_nodes", "2"), ("net.client_nodes", "1")]);
        check(&c).unwrap();
        let (s, cl) = a.placement(&c);
        assert_eq!(s, vec!["a".to_string(), "b".into(), "a".into()]);
        assert_eq!(cl, vec!["c".to_string(); 3]);
        assert!(a.server_step(&c, 1).contains("--nodelist=b"));
        let c0 = with(&[("net.server_nodes", "0"), ("net.client_nodes", "2")]);
        check(&c0).unwrap();
        let (s, cl) = a.placement(&c0);
        assert_eq!((s.clone(), cl), (vec!["a".to_string(), "b".into(), "a".into()], s));
        for (extra, needle) in [(("net.server_nodes", "4"), "at most 3"), (("net.client_nodes", "4"), "one per leaf")] {
            let e = check(&with(&[extra])).unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
    }

    #[test]
    fn an_own_allocation_lasts_the_run_plus_a_margin() {
        let c = cfg(&[("load.qps", "1000"), ("load.duration", "150s"), ("load.warmup", "10s")]);
        // 160 s of schedule and a 10 s drain: 3 minutes, then the margin.
        assert_eq!(salloc_minutes(&c), 13);
    }

    #[test]
    fn every_node_is_named_and_one_bad_node_fails_the_check() {
        let node =
            |name: &str, role: &str, outcome| NodeReport { node: name.into(), roles: vec![role.into()], outcome };
        let env = |ok, steal_pct, foreign_cpu_pct| {
            NodeOutcome::Env(NodeEnv { ok, steal_pct, foreign_cpu_pct, ..Default::default() })
        };
        let good = node("n1", "server", env(true, 0.1, 2.0));
        let bad = node("n2", "client 0", env(false, 4.0, 0.5));
        let gone = node("n3", "client 1", super::gone("the monitor did not start within 60 s"));
        let c = nodes_check(&[good.clone(), bad]);
        assert!(!c.ok);
        assert!(
            c.verdict.contains("n1 (server): steal 0.10 %") && c.verdict.contains("n2 (client 0)"),
            "{}",
            c.verdict
        );
        assert!(nodes_check(std::slice::from_ref(&good)).ok);
        let c = nodes_check(&[good, gone]);
        assert!(!c.ok && c.verdict.contains("n3 (client 1): not monitored"), "{}", c.verdict);
    }
}
