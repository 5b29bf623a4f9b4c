//! The fleet: starting the server and the clients through their launchers, the barrier, `go`,
//! collecting the shards and stopping the servers.

use super::*;

/// The configuration `taillab serve` starts with when given no flags.
pub fn serve_defaults() -> RunConfig {
    let mut c = RunConfig::default();
    c.net.listen = "127.0.0.1:7878".into();
    c
}

/// Starts `taillab serve` — one per leaf of a fan-out, the launcher's `{i}` the leaf; with
/// `--launcher slurm` each a step on its own node (`alloc`) — unless `net.target` names
/// running servers, and waits for their `listening ADDR` lines.
pub(super) fn start_server(
    cfg: &RunConfig,
    exe: &str,
    alloc: Option<&crate::slurm::Allocation>,
) -> Result<Fleet, TransportError> {
    let (_, client_lines) = mpsc::channel();
    let mut fleet = Fleet {
        kids: Children(Vec::new()),
        server_lines: Vec::new(),
        targets: Vec::new(),
        client_lines,
        stdins: vec![],
        target: String::new(),
    };
    let n = leaves(cfg);
    if let Some(t) = &cfg.net.target {
        fleet.targets = if n > 1 { crate::fanout::targets(t, n)? } else { vec![t.clone()] };
        fleet.target = t.clone();
        return Ok(fleet);
    }
    // The server's own configuration: its random discipline gets its own stream.
    let mut sc = cfg.clone();
    sc.load.seed = derive_seed(cfg.load.seed, 3);
    let mut argv = vec![exe.to_string(), "serve".into()];
    argv.extend(sc.flags_for(view::SERVE, &serve_defaults()));
    argv.push("--exit-on-eof".into());
    let mut waiting = Vec::new();
    for i in 0..n {
        let tpl = alloc.map_or_else(|| cfg.net.server_launcher.clone(), |a| a.server_step(cfg, i));
        let line = expand(&tpl, &argv, i)?;
        let mut child = spawn(&server_name(i, n), &line)?;
        let (stx, srx) = mpsc::channel();
        lines_of(&mut child, i, stx);
        fleet.kids.0.push((server_name(i, n), child));
        waiting.push((line, srx));
    }
    // Engines load before the port opens, so allow a slow app start.
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    for (line, srx) in waiting {
        fleet.targets.push(await_listening(&line, &srx, deadline)?);
        fleet.server_lines.push(srx);
    }
    fleet.target = fleet.targets.join(",");
    Ok(fleet)
}

/// `server`, or `server I` of a fan-out's leaves.
pub(super) fn server_name(i: usize, n: usize) -> String {
    if n > 1 {
        format!("server {i}")
    } else {
        "server".into()
    }
}

/// The address a server printed (`listening ADDR`).
pub(super) fn await_listening(
    line: &str,
    srx: &mpsc::Receiver<(usize, Option<String>)>,
    deadline: std::time::Instant,
) -> Result<String, TransportError> {
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match srx.recv_timeout(left) {
            Ok((_, Some(l))) => {
                if let Some(a) = l.strip_prefix("listening ") {
                    return Ok(a.trim().to_string());
                }
            }
            Ok((_, None)) => {
                return Err(TransportError::Launch(format!(
                    "the server (`{line}`) exited before listening; see its error above"
                )))
            }
            Err(_) => {
                return Err(TransportError::Launch(format!(
                    "the server (`{line}`) did not start listening within 300 s"
                )))
            }
        }
    }
}

/// Client `i`'s configuration: its share of the rate and of a request
/// count, its own seed (the base seed when alone, so one client sends what
/// an integrated run would), and the coordinator's target.
pub(super) fn client_config(cfg: &RunConfig, spec: &RunSpec, target: &str, i: usize) -> RunConfig {
    let mut k = cfg.clone();
    k.net.target = Some(target.to_string());
    // Each client (a fan-out's leaf too) serves its own live metrics, on the port after the
    // one before, and names the run's topology there, not its own `taillab load`'s.
    k.monitor.metrics_listen = cfg.monitor.metrics_listen.as_deref().map(|a| next_port(a, i));
    k.net.label.get_or_insert_with(|| cfg.net.topology.name().to_string());
    if leaves(cfg) > 1 {
        // A fan-out's leaf: the whole schedule (same seed, rate and counts at every leaf),
        // its rows kept for the join (crate::fanout), the record cap shared by the leaves.
        k.record.save_requests = true;
        k.net.request_stream = i as u64;
        k.record.max_record_mem.0 = cfg.record.max_record_mem.0 / leaves(cfg) as u64;
        return k;
    }
    let c = cfg.net.clients;
    k.load.qps = Some(spec.qps / c as f64);
    k.load.seed = if c == 1 { cfg.load.seed } else { derive_seed(cfg.load.seed, 1000 + i as u64) };
    if let Bound::Requests(n) = split_bound(spec.warmup, c, i) {
        k.load.warmup_requests = Some(n);
    }
    if let Bound::Requests(n) = split_bound(spec.measure, c, i) {
        k.load.requests = Some(n);
    }
    // The records of all clients meet in the coordinator: the cap is the run's.
    k.record.max_record_mem.0 = cfg.record.max_record_mem.0 / c as u64;
    k
}

/// `HOST:PORT` with the port moved up by `i` (0 stays 0: any free port); an address that
/// does not read stays as it is (the configuration's check refuses it).
pub(super) fn next_port(addr: &str, i: usize) -> String {
    match addr.rsplit_once(':').map(|(h, p)| (h, p.parse::<usize>())) {
        Some((h, Ok(p))) if p != 0 => format!("{h}:{}", p + i),
        _ => addr.to_string(),
    }
}

/// Starts the clients; each connects, then prints `ready`.
pub(super) fn start_clients(
    cfg: &RunConfig,
    spec: &RunSpec,
    exe: &str,
    fleet: &mut Fleet,
) -> Result<(), TransportError> {
    let (tx, rx) = mpsc::channel();
    let base = RunConfig::default();
    for i in 0..clients(cfg) {
        let mut argv = vec![exe.to_string(), "load".into()];
        let target = fleet.targets.get(i).unwrap_or(&fleet.target);
        argv.extend(client_config(cfg, spec, target, i).flags_for(view::LOAD, &base));
        argv.extend(["--barrier".into(), "--emit-shard".into()]);
        let tpl = match cfg.net.client_launcher.0.as_slice() {
            [] => "{cmd}",
            [one] => one.as_str(),
            many => many.get(i).map(String::as_str).ok_or_else(|| {
                TransportError::Invalid(format!(
                    "--client-launcher lists {} launchers for {} clients: give one (with {{i}}) or one per client",
                    many.len(),
                    clients(cfg)
                ))
            })?,
        };
        let line = expand(tpl, &argv, i)?;
        let mut child = spawn(&format!("client {i}"), &line)?;
        fleet.stdins.push(child.stdin.take());
        lines_of(&mut child, i, tx.clone());
        fleet.kids.0.push((format!("client {i}"), child));
    }
    fleet.client_lines = rx;
    Ok(())
}

pub(super) fn await_ready(fleet: &Fleet, c: usize) -> Result<(), TransportError> {
    let mut ready = 0;
    while ready < c {
        match fleet.client_lines.recv_timeout(Duration::from_secs(120)) {
            Ok((_, Some(l))) if l.trim() == "ready" => ready += 1,
            Ok((_, Some(_))) => {}
            Ok((i, None)) => {
                return Err(TransportError::Launch(format!(
                    "client {i} exited before the start barrier; see its error above"
                )))
            }
            Err(_) => {
                return Err(TransportError::Launch(format!(
                    "only {ready} of {c} clients reached the start barrier within 120 s"
                )))
            }
        }
    }
    Ok(())
}

/// Every client starts 200 ms from now on its own clock; returns that
/// origin on this host's clock and the wall time.
pub(super) fn go(fleet: &mut Fleet) -> Result<(u64, std::time::SystemTime), TransportError> {
    const START_DELAY_NS: u64 = 200_000_000;
    let origin_ns = taillab_core::clock::now_ns() + START_DELAY_NS;
    let wall_start = std::time::SystemTime::now() + Duration::from_nanos(START_DELAY_NS);
    for (i, s) in fleet.stdins.iter_mut().enumerate() {
        let s = s.as_mut().expect("stdin is piped");
        s.write_all(format!("go {START_DELAY_NS}\n").as_bytes())
            .and_then(|_| s.flush())
            .map_err(|e| TransportError::Io { what: format!("starting client {i}"), source: e })?;
    }
    Ok((origin_ns, wall_start))
}

impl Fleet {
    /// The clients' stdins stop blocking the coordinator: a client that does not read its
    /// `foreign` lines (stopped, or gone) loses them once its pipe is full, and the run goes on.
    pub(super) fn stdins_nonblocking(&mut self) {
        use std::os::fd::AsRawFd;
        for s in self.stdins.iter().flatten() {
            let fd = s.as_raw_fd();
            // SAFETY: fcntl on a pipe this process owns; F_GETFL/F_SETFL touch no memory.
            unsafe {
                let flags = libc::fcntl(fd, libc::F_GETFL);
                if flags >= 0 {
                    libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                }
            }
        }
    }

    /// Writes `line` to every client still listening (one that is not loses it).
    pub(super) fn tell_clients(&mut self, line: &str) {
        for s in self.stdins.iter_mut().flatten() {
            let _ = s.write_all(line.as_bytes());
        }
    }

    /// Why client `i` sent no shard: how it ended, as far as we can tell.
    pub(super) fn why_silent(&mut self, i: usize) -> String {
        let name = format!("client {i}");
        let mut status = None;
        if let Some((_, k)) = self.kids.0.iter_mut().find(|(n, _)| *n == name) {
            // Its pipe closes a moment before its exit status is there.
            for _ in 0..50 {
                status = k.try_wait().ok().flatten();
                if status.is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        match status {
            Some(st) => format!("ended without reporting its histograms ({st}); see its error above"),
            None => "did not finish in time and was stopped".to_string(),
        }
    }
}

/// Each client's shard (`None` for a client that died or hung) and request rows.
pub(super) type Collected = (Vec<Option<ShardDump>>, Vec<Vec<ReqRow>>);

/// Reads each client's `shard` line (and `req` lines) until all exit or
/// their time is up; a client that died or hung has no shard (`None`) and
/// the others' are kept. Fails only when no client reported. Meanwhile, with
/// `relay`, tells the clients its foreign CPU once a second.
pub(super) fn collect_shards(
    fleet: &mut Fleet,
    spec: &RunSpec,
    c: usize,
    relay: Option<&dyn RunObserver>,
) -> Result<Collected, TransportError> {
    let mut dumps: Vec<Option<ShardDump>> = vec![None; c];
    let mut reqs: Vec<Vec<ReqRow>> = vec![Vec::new(); c];
    let mut open = c;
    let limit = Duration::from_nanos(spec.expected_total_ns() + spec.drain_timeout_ns) + Duration::from_secs(30);
    let start = std::time::Instant::now();
    let deadline = start + limit;
    let mut next_relay = start + Duration::from_secs(1);
    if relay.is_some() {
        fleet.stdins_nonblocking();
    }
    while open > 0 {
        let now = std::time::Instant::now();
        if now >= deadline {
            break;
        }
        let mut wait = deadline - now;
        if let Some(o) = relay {
            if now >= next_relay {
                if let Some(pct) = o.foreign_cpu_pct() {
                    fleet.tell_clients(&format!("foreign {pct}\n"));
                }
                next_relay += Duration::from_secs(1);
            }
            wait = wait.min(next_relay.saturating_duration_since(now));
        }
        match fleet.client_lines.recv_timeout(wait) {
            Ok((i, Some(l))) => {
                if let Some(r) = l.strip_prefix("req ") {
                    reqs[i].push(parse_req(r)?);
                } else if let Some(j) = l.strip_prefix("shard ") {
                    dumps[i] = Some(serde_json::from_str(j).map_err(|e| bad_shard(&e.to_string()))?);
                }
            }
            Ok((_, None)) => open -= 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    if dumps.iter().all(Option::is_none) {
        return Err(TransportError::Launch(format!(
            "no client reported its histograms within {} s; see their errors above",
            limit.as_secs()
        )));
    }
    Ok((dumps, reqs))
}

/// EOF on the server's stdin, then its last line: what it and the app saw
/// (killed by `Children`'s drop if stuck).
/// Stops every server (a fan-out's leaves, or the one), in leaf order: their stdins
/// closed together, then each one's last line.
pub(super) fn stop_servers(fleet: &mut Fleet) -> Vec<Value> {
    let servers: Vec<usize> = (0..fleet.kids.0.len()).filter(|&i| fleet.kids.0[i].0.starts_with("server")).collect();
    for &i in &servers {
        drop(fleet.kids.0[i].1.stdin.take());
    }
    let until = std::time::Instant::now() + Duration::from_secs(5);
    let mut all = Vec::new();
    for (srx, &i) in fleet.server_lines.iter().zip(&servers) {
        let mut stats = Value::Null;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            match srx.recv_timeout(left) {
                Ok((_, Some(l))) => {
                    if let Some(j) = l.strip_prefix("stats ") {
                        stats = serde_json::from_str(j).unwrap_or(Value::Null);
                    } else {
                        crate::explain::keep_line(&l);
                    }
                }
                _ => break,
            }
        }
        let _ = fleet.kids.0[i].1.try_wait();
        all.push(stats);
    }
    all
}
