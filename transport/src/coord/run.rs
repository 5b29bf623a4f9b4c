//! The coordinator's run: the settings checked and resolved, the fleet started, the load
//! split over the clients, and the result folder written with the `transport` and `server`
//! sections.

use super::*;

/// What the `transport` section of summary.json says about how the load
/// crossed the wire, before the histogram is summarised.
pub struct TransportFacts<'a> {
    /// Client processes.
    pub clients: usize,
    /// Connections per client.
    pub connections: usize,
    /// The server address.
    pub target: &'a str,
    /// Why the server was lost, if it was.
    pub lost: Option<String>,
    /// Per-client counts and histograms (coordinated runs).
    pub per_client: Option<Vec<ClientShare>>,
    /// Every client's senders.
    pub senders: Vec<SenderShare>,
    /// The capped mode's limit (0: the run was open loop).
    pub max_in_flight: usize,
}

impl TransportFacts<'_> {
    /// The section, with the transport-time histogram `h` (exact sum `sum`);
    /// [`crate::report::annotate`] adds the stamps' clocks and the TCP choice.
    pub fn section(self, h: &Histogram<u64>, sum: u128, server_timed: bool) -> TransportSection {
        TransportSection {
            clients: self.clients,
            connections_per_client: self.connections,
            target: self.target.to_string(),
            server_timed,
            transport_ns: MetricStats::from_hist(h, Some(sum)),
            server_lost: self.lost,
            per_client: self.per_client,
            stamps: None,
            bad_responses: None,
            choice: None,
            statuses: None,
            senders: (!self.senders.is_empty()).then_some(self.senders),
            capped: (self.max_in_flight > 0).then(|| CappedTiming {
                max_in_flight: self.max_in_flight,
                timed_from: "sent".into(),
                note: format!(
                    "at most {} requests in flight per connection, each timed from its actual send: a request held back while its connection was full is not charged for the wait (coordinated omission) — the other load testers' method, for comparison; the open-loop default times from the intended send",
                    self.max_in_flight
                ),
            }),
        }
    }
}

/// Children that are killed (by their own pid) if still running on drop.
pub(super) struct Children(pub(super) Vec<(String, Child)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (_, c) in &mut self.0 {
            if let Ok(None) = c.try_wait() {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

pub(super) fn split_bound(b: Bound, c: usize, i: usize) -> Bound {
    match b {
        Bound::Requests(n) => {
            let c = c as u64;
            Bound::Requests(n / c + u64::from((i as u64) < n % c))
        }
        s => s,
    }
}

/// Runs `spec` as server + `net.clients` client processes and writes the
/// merged result into `out`. Returns the summary (written already).
/// Watches a coordinated run from this host (the CLI's environment monitor).
pub trait RunObserver {
    /// The experiment's local processes (the server unless `--target` was
    /// given, and the clients, or their launchers) are up, before the start.
    fn started(&mut self, pids: &[i32]);
    /// The merged result and its summary, before they are written.
    /// `origin_ns` is the clients' time zero on this host's clock
    /// ([`taillab_core::clock::now_ns`]); result times are relative to it.
    fn finished(&mut self, r: &RunResult, origin_ns: u64, summary: &mut Summary, out: &Path) -> Result<(), String>;
    /// Each request's anatomy (`record.explain`), by request id, for the records' `x_*`
    /// columns (after `finished`).
    fn anatomy_rows(&mut self) -> Option<Vec<taillab_core::sections::AnatomyRow>> {
        None
    }
    /// Lines it adds to the human run table (after `finished`).
    fn table_lines(&self, _summary: &Summary) -> String {
        String::new()
    }
    /// Other processes' CPU on this host over the last second (% of one CPU), while the run
    /// goes on, when it samples that.
    fn foreign_cpu_pct(&self) -> Option<f64> {
        None
    }
}

/// The server and clients of a coordinated run, and their output lines.
pub(super) struct Fleet {
    pub(super) kids: Children,
    /// The servers' stdout lines (tag: the leaf), when this run started them.
    pub(super) server_lines: Vec<mpsc::Receiver<(usize, Option<String>)>>,
    /// Each server's address (one per leaf of a fan-out).
    pub(super) targets: Vec<String>,
    /// The clients' stdout lines, tagged by client number.
    pub(super) client_lines: mpsc::Receiver<(usize, Option<String>)>,
    pub(super) stdins: Vec<Option<ChildStdin>>,
    pub(super) target: String,
}

/// Runs `cfg` (topology loopback or networked) as a server and
/// `net.clients` client processes, and writes the merged result into `out`.
/// Returns the summary (written already).
pub fn run_config(
    cfg: &RunConfig,
    out: &Path,
    quiet: bool,
    mut obs: Option<&mut dyn RunObserver>,
) -> Result<Summary, TransportError> {
    let app = cfg.app_name().map_err(|e| TransportError::Invalid(e.to_string()))?;
    let spec = check(cfg)?;
    let exe = taillab_exe(cfg)?;
    let (cfg, here) = resolve_here(cfg, quiet);
    // --launcher slurm: the launchers become srun steps on a job's nodes.
    let alloc = crate::slurm::Allocation::for_run(&cfg, quiet)?;
    let cfg = &alloc.as_ref().map_or(cfg.clone(), |a| a.configure(&cfg));
    // 1. The server, unless one is given; 2. the clients, up to the barrier.
    let mut fleet = start_server(cfg, &exe, alloc.as_ref())?;
    if let Some(a) = &alloc {
        let targets = fleet.targets.iter().enumerate().map(|(i, t)| a.reachable(cfg, t, i));
        fleet.targets = targets.collect::<Result<_, _>>()?;
        fleet.target = fleet.targets.join(",");
    }
    start_clients(cfg, &spec, &exe, &mut fleet)?;
    await_ready(&fleet, clients(cfg))?;
    let monitors = alloc.as_ref().filter(|_| cfg.monitor.enabled).map(|a| a.start_monitors(cfg, &exe));
    if let Some(o) = obs.as_deref_mut() {
        let mut pids: Vec<i32> = fleet.kids.0.iter().map(|(_, k)| k.id() as i32).collect();
        // Slurm steps on this host are children of slurmd, not ours.
        pids.extend(alloc.iter().flat_map(|a| crate::slurm::job_pids(&a.job)));
        o.started(&pids);
    }
    // 3. Go; 4. one shard per client; 5. stop the server.
    let (origin_ns, wall_start) = go(&mut fleet)?;
    if !quiet {
        eprintln!(
            "{}: {} client(s) × {} connection(s) → {}",
            cfg.net.topology, cfg.net.clients, cfg.net.connections, fleet.target
        );
    }
    // The clients of a loopback run share this host: its sampler's figure is theirs to serve.
    let relay =
        obs.as_deref().filter(|_| cfg.net.topology == Topology::Loopback && cfg.monitor.metrics_listen.is_some());
    let (shards, reqs) = collect_shards(&mut fleet, &spec, clients(cfg), relay)?;
    let server_stats = stop_servers(&mut fleet).into_iter().next().unwrap_or(Value::Null);
    // 6. Merge into one result folder: the clients that reported, and why
    // the others did not (a client that died takes only its own part).
    let missing: Vec<(usize, String)> =
        shards.iter().enumerate().filter(|(_, d)| d.is_none()).map(|(i, _)| (i, fleet.why_silent(i))).collect();
    let dumps: Vec<ShardDump> = shards.iter().flatten().cloned().collect();
    let lost = missing.first().map(|(i, why)| format!("client {i} {why}")).or_else(|| {
        shards.iter().enumerate().find_map(|(i, d)| d.as_ref()?.lost.as_ref().map(|l| format!("client {i}: {l}")))
    });
    let fan = spec.fanout.clone().filter(|_| leaves(cfg) > 1);
    let (mut result, th, tsum) = match &fan {
        None => merge(&spec, &dumps, wall_start)?,
        Some(f) => join_leaves(&spec, f, &shards, &reqs, wall_start)?,
    };
    let many = cfg.net.clients > 1;
    // Kept stamps feed the sequence checks (inter-arrival fit, independence)
    // as in an integrated run: one client's as they are; several loopback
    // clients' merged into one stream (they share this host's monotonic
    // clock, and independent Poisson streams superpose to a Poisson stream
    // of the total rate). Networked clients' clocks are their hosts' own,
    // so their streams are not merged.
    let kept = reqs.iter().any(|r| !r.is_empty());
    if fan.is_none() && kept && (!many || cfg.net.topology == Topology::Loopback) {
        result.records = Some(std::sync::Arc::new(records_of(&reqs)));
    }
    // The server's app statistics cover its whole life (warmup included):
    // it does not know where the clients' measured phase starts.
    result.app_stats = server_stats.get("app").cloned().unwrap_or(Value::Null);
    let mut summary = taillab_core::summarize(&result, app, &cfg.settings, cfg.net.topology.name());
    if let Some(l) = &lost {
        summary.mark_incomplete(l);
    }
    // A fan-out's clients each send the whole rate; others share it.
    let each_qps = if fan.is_some() { spec.qps } else { spec.qps / cfg.net.clients as f64 };
    let per_client = client_shares(&shards, &missing, each_qps);
    let server_timed = dumps.iter().all(|d| d.server_timed);
    let section = facts(cfg, &fleet.target, lost.clone(), &shards, per_client);
    summary.transport = Some(section.section(&th, tsum, server_timed));
    if !server_timed {
        summary.drop_ideal_of_external_server();
    }
    let mut stamps = ClientStamps::default();
    dumps.iter().for_each(|d| stamps.absorb(&d.stamps));
    let choice = here.clone().or_else(|| dumps.first().map(|d| d.choice.clone()));
    crate::report::annotate(&mut summary, cfg, &stamps, choice);
    summary.server = server_section(&server_stats);
    if let Some(m) = monitors {
        m.finish(wall_window(&result, &summary, wall_start), &mut summary);
    }
    let mut anatomy = None;
    if let Some(o) = obs {
        o.finished(&result, origin_ns, &mut summary, out).map_err(TransportError::Launch)?;
        anatomy = o.anatomy_rows();
    }
    // One client's records are the run's (written by write_run as in
    // integrated); several clients' rows get a `client` column.
    let save = cfg.record.save_requests && kept;
    // A fan-out's rows are its leaves' (column `leaf`); its whole requests are in the histograms.
    let apart = many || fan.is_some();
    if save && apart {
        let sender = if fan.is_some() { Sender::Leaf } else { Sender::Client };
        write_requests(out, cfg.record.format, &reqs, sender)?;
    }
    taillab_core::summary::write_run_explained(out, &summary, &result, save && !apart, anatomy.as_deref())?;
    drop(fleet);
    if let Some(l) = lost {
        return Err(TransportError::Launch(format!("{l}; the measured part was written to {}", out.display())));
    }
    Ok(summary)
}

/// The transport facts of a run whose clients sent `shards` (`None`: a client that did not).
pub(super) fn facts<'a>(
    cfg: &RunConfig,
    target: &'a str,
    lost: Option<String>,
    shards: &[Option<ShardDump>],
    per_client: Vec<ClientShare>,
) -> TransportFacts<'a> {
    TransportFacts {
        clients: clients(cfg),
        connections: cfg.net.connections,
        target,
        lost,
        per_client: Some(per_client),
        senders: shards
            .iter()
            .enumerate()
            .filter_map(|(i, d)| d.as_ref().map(|d| (i, d)))
            .flat_map(|(i, d)| d.senders.iter().map(move |s| SenderShare { client: i, ..s.clone() }))
            .collect(),
        max_in_flight: shards.iter().flatten().next().map_or(0, |d| d.max_in_flight),
    }
}

/// Each client's share of the run (`each_qps`: the rate one was asked for); a client that
/// sent no shard has only its rate and why it is `missing`.
pub(super) fn client_shares(
    shards: &[Option<ShardDump>],
    missing: &[(usize, String)],
    each_qps: f64,
) -> Vec<ClientShare> {
    shards
        .iter()
        .zip(0..)
        .map(|(d, i)| match d {
            Some(d) => ClientShare {
                seed: Some(d.seed),
                qps: d.qps,
                measured: d.measured,
                warmup: d.warmup,
                errors: Some(d.errors),
                lost: d.lost.clone(),
                sojourn_hist: Some(d.hists[0].clone()),
            },
            None => ClientShare {
                qps: each_qps,
                lost: missing.iter().find(|m| m.0 == i).map(|m| m.1.clone()),
                ..Default::default()
            },
        })
        .collect()
}

/// The `server` section from the server's last line. Same binary on both ends: a report that
/// does not read is a version mismatch, said here rather than kept as an unread blob.
pub(super) fn server_section(stats: &Value) -> Option<ServeStats> {
    let serve = stats.get("serve")?;
    match serde_json::from_value::<ServeStats>(serve.clone()) {
        Ok(s) => Some(s),
        Err(e) => {
            eprintln!(
                "warning: the server's report does not read ({e}); summary.json has no `server` section (are server and coordinator the same taillab version?)"
            );
            None
        }
    }
}

/// The measured phase in wall-clock time (for monitors on other hosts):
/// from its start until the last request completed.
pub(super) fn wall_window(
    r: &RunResult,
    summary: &Summary,
    wall_start: std::time::SystemTime,
) -> (std::time::SystemTime, std::time::SystemTime) {
    let start = r.measure_start;
    let end = if r.totals.last_completed > start {
        r.totals.last_completed
    } else {
        start + (summary.duration_s * 1e9) as u64
    };
    (wall_start + Duration::from_nanos(start), wall_start + Duration::from_nanos(end.max(start + 1)))
}

/// A loopback run's server and clients share this host: its TCP settings
/// left to the host are chosen once here and handed to every process as
/// flags. Networked parts (and clients of a `--target`, which look for the
/// server's CPUs themselves) choose on their own hosts.
pub(super) fn resolve_here(cfg: &RunConfig, quiet: bool) -> (RunConfig, Option<taillab_core::config::auto::TcpChoice>) {
    use taillab_core::config::auto;
    let mut c = cfg.clone();
    if cfg.net.topology != Topology::Loopback || cfg.net.target.is_some() {
        return (c, None);
    }
    let choice = auto::resolve(cfg, &auto::HostFacts::here(cfg.net.clients, None));
    if !quiet {
        eprintln!("loopback: {}", choice.line());
    }
    choice.apply(&mut c);
    (c, Some(choice))
}

/// What can be refused before any process starts; the harness spec.
pub(super) fn check(cfg: &RunConfig) -> Result<RunSpec, TransportError> {
    let invalid = |e: taillab_core::config::ConfigError| TransportError::Invalid(e.to_string());
    cfg.validate().map_err(invalid)?;
    if cfg.net.topology == Topology::Integrated {
        return Err(TransportError::Invalid("run_config runs loopback or networked topologies".into()));
    }
    let app = cfg.app_name().map_err(invalid)?;
    if crate::apps::is_external(app) && cfg.net.target.is_none() {
        return Err(TransportError::Invalid(format!(
            "`{app}` is an external server: start it and pass --target HOST:PORT (taillab cannot serve it)"
        )));
    }
    crate::slurm::check(cfg)?;
    if let Some(f) = cfg.spec().map_err(invalid)?.fanout {
        crate::fanout::check(&f, cfg.net.clients)?;
    }
    taillab_core::harness::check_cpus("--client-cpus", &cfg.net.client_cpus.0)?;
    if cfg.net.clients > 1 && cfg.load.arrival.own_rate().is_some() {
        return Err(TransportError::Invalid(format!(
            "load.arrival `{}` sets the whole run's schedule: give it one client (--clients 1)",
            cfg.load.arrival
        )));
    }
    cfg.spec().map_err(invalid)
}

pub(super) fn taillab_exe(cfg: &RunConfig) -> Result<String, TransportError> {
    Ok(match &cfg.net.remote_taillab {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| TransportError::Io { what: "locating the taillab binary".into(), source: e })?
            .to_string_lossy()
            .into_owned(),
    })
}
