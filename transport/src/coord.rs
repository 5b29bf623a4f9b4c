//! `taillab run --topology loopback|networked`: one server, C client
//! processes, one ordinary result folder.
//!
//! The coordinator starts `taillab serve` and C × `taillab load` through
//! launcher templates (a plain local process by default; `ip netns exec NS
//! {cmd}` in the tests; `ssh HOST {cmdq}` across hosts). It talks to them
//! only over their stdin/stdout, which every launcher forwards:
//!
//! 1. the server prints `listening ADDR`; clients are told that target;
//! 2. each client connects, then prints `ready` (the barrier);
//! 3. when all are ready the coordinator writes `go DELAY_NS` to every
//!    client; each starts its schedule DELAY later on its own clock, so the
//!    clients start together within the pipes' latency without any clock
//!    synchronisation;
//!    while they run, a loopback run with live metrics and the environment
//!    monitor on writes each client `foreign PCT` once a second: other
//!    processes' CPU on the host over the last second, from the
//!    coordinator's sampler (the clients serve it, [`follow_coordinator`]);
//! 4. each client prints its histograms as one `shard {json}` line, with
//!    its times relative to its own schedule start;
//! 5. the coordinator adds the histograms (HdrHistogram add — percentiles
//!    are never averaged), sums counts and per-slice arrivals/completions,
//!    and writes the same `summary.json` and `hist/*.hlog` as integrated;
//! 6. closing the server's stdin stops it (`--exit-on-eof`).
//!
//! Splitting the rate: client i runs at qps/C with its own derived seed.
//! The superposition of C independent Poisson streams of rate λ/C is a
//! Poisson stream of rate λ, so the offered process is unchanged. With one
//! client the base seed is used as is, so `--clients 1` sends exactly the
//! requests `--config integrated` would.
//!
//! Any child still running when the coordinator returns (error or not) is
//! killed by `Children`'s `Drop`.

use crate::client::{new_hist, ClientStamps, LoadResult};
use crate::launch::{expand, lines_of, spawn};
use crate::TransportError;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;
use taillab_core::arrival::derive_seed;
use taillab_core::collector::{
    decode_hist, encode_hist, Hists, IntervalBlob, IntervalSink, MetricStats, Shard, N_METRICS,
};
use taillab_core::config::auto::TcpChoice;
use taillab_core::config::{view, RunConfig, Topology};
use taillab_core::reqfile::{self, RequestFormat, Sender};
use taillab_core::sections::transport::{CappedTiming, ClientShare, SenderShare, ServeStats, TransportSection};
use taillab_core::{Bound, RunResult, RunSpec, Summary};

/// One client's measurement as it crosses the pipe. Times are relative to
/// the client's own schedule start (clocks of different hosts never meet).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardDump {
    /// This client's share of the rate (requests/s): the run's rate / clients.
    pub qps: f64,
    /// This client's seed (derived from the run's; the run's own with one client).
    pub seed: u64,
    /// Connections the client used.
    pub connections: usize,
    /// The client's schedule start on its own clock (ns): its `req` rows are on that clock.
    #[serde(default)]
    pub t0: u64,
    /// Responses carried the server's queue and service times (a taillab server).
    pub server_timed: bool,
    /// Measured requests completed.
    pub measured: u64,
    /// Warmup requests completed.
    pub warmup: u64,
    /// Requests written, warmup included.
    pub sent: u64,
    /// Failed requests (error responses, bad or missing responses), warmup included.
    pub errors: u64,
    /// The first failure's message.
    pub first_error: Option<String>,
    /// The client stopped before every response came (drain deadline, server lost).
    pub aborted: bool,
    /// Why the server was lost mid-run, if it was (what was measured is kept).
    pub lost: Option<String>,
    /// Start of the measured phase (ns after the client's schedule start).
    pub measure_start: u64,
    /// Intended time of the first measured request (ns after the schedule start).
    pub first_measured_intended: u64,
    /// Intended time of the last measured request (ns after the schedule start).
    pub last_measured_intended: u64,
    /// Earliest completion of a measured request (ns after the schedule start;
    /// `u64::MAX` when there was none).
    pub first_completed: u64,
    /// Latest completion of a measured request (ns after the schedule start).
    pub last_completed: u64,
    /// Warmup requests the client's schedule drew.
    pub generated_warmup: u64,
    /// Measured requests the client's schedule drew.
    pub generated_measured: u64,
    /// Width of one saturation-check slice (ns).
    pub slice_ns: u64,
    /// Measured arrivals per slice, by intended time.
    pub arrivals_per_slice: Vec<u64>,
    /// Measured completions per slice, by completion time.
    pub slice_done: Vec<u64>,
    /// Exact sums of the metrics in `METRICS` order (decimal strings: u128).
    pub sums: [String; N_METRICS],
    /// HdrHistogram V2 deflate, base64, same metric order.
    pub hists: [String; N_METRICS],
    /// The `transport` histogram (ns; same encoding as `hists`).
    pub transport: String,
    /// Exact sum of `transport` (ns; a decimal string: u128).
    pub transport_sum: String,
    /// Interval histograms, in order.
    pub intervals: Vec<IntervalDump>,
    /// The clocks of the client's stamps and the responses it refused.
    pub stamps: ClientStamps,
    /// The TCP settings the client ran with (resolved).
    pub choice: TcpChoice,
    /// Each of the client's senders (its own `client` number is set by the coordinator).
    #[serde(default)]
    pub senders: Vec<SenderShare>,
    /// The capped mode's limit of requests in flight per connection (0: open loop).
    #[serde(default)]
    pub max_in_flight: usize,
}

/// One interval's histograms ([`IntervalBlob`]) as they cross the pipe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IntervalDump {
    /// Which interval: it starts `index` × `record.interval` after the measured
    /// phase began.
    pub index: u32,
    /// Measured requests completed in it.
    pub count: u64,
    /// Largest value of each metric in it (ns).
    pub max: [u64; N_METRICS],
    /// Each metric's histogram, same encoding as [`ShardDump::hists`].
    pub hists: [String; N_METRICS],
}

impl ShardDump {
    /// What client run `r` sends the coordinator; `qps` and `seed` are this client's.
    pub fn from_load(r: &LoadResult, qps: f64, seed: u64) -> Self {
        let x = &r.result;
        let t = &x.totals;
        let rel = |v: u64| v.saturating_sub(x.t0);
        ShardDump {
            qps,
            seed,
            connections: r.connections,
            t0: x.t0,
            server_timed: r.server_timed,
            measured: t.measured,
            warmup: t.warmup,
            sent: r.sent,
            errors: x.errors,
            first_error: x.first_error.clone(),
            aborted: x.aborted,
            lost: r.lost.clone(),
            measure_start: rel(x.measure_start),
            first_measured_intended: rel(x.first_measured_intended),
            last_measured_intended: rel(x.last_measured_intended),
            first_completed: if t.measured == 0 { u64::MAX } else { rel(t.first_completed) },
            last_completed: rel(t.last_completed),
            generated_warmup: x.generated_warmup,
            generated_measured: x.generated_measured,
            slice_ns: x.slice_ns,
            arrivals_per_slice: x.arrivals_per_slice.clone(),
            slice_done: t.slice_done.clone(),
            sums: std::array::from_fn(|i| t.sums[i].to_string()),
            hists: std::array::from_fn(|i| encode_hist(&t.totals.0[i])),
            transport: encode_hist(&r.transport),
            transport_sum: r.transport_sum.to_string(),
            intervals: x
                .intervals
                .iter()
                .map(|b| IntervalDump { index: b.index, count: b.count, max: b.max, hists: b.hist_b64.clone() })
                .collect(),
            stamps: r.stamps.clone(),
            choice: r.choice.clone(),
            senders: r.senders.iter().map(|s| s.share(0)).collect(),
            max_in_flight: r.max_in_flight,
        }
    }
}

fn bad_shard(why: &str) -> TransportError {
    TransportError::Protocol(format!(
        "a client's shard is corrupt ({why}); are client and coordinator the same taillab version?"
    ))
}

fn hist(b64: &str) -> Result<Histogram<u64>, TransportError> {
    let mut h = decode_hist(b64).ok_or_else(|| bad_shard("undecodable histogram"))?;
    h.auto(true);
    Ok(h)
}

fn add_vec(a: &mut Vec<u64>, b: &[u64]) {
    if b.len() > a.len() {
        a.resize(b.len(), 0);
    }
    for (x, y) in a.iter_mut().zip(b) {
        *x += y;
    }
}

/// Adds the clients' shards into one run (t0 = 0 on the merged time axis).
pub fn merge(
    spec: &RunSpec,
    dumps: &[ShardDump],
    wall_start: std::time::SystemTime,
) -> Result<(RunResult, Histogram<u64>, u128), TransportError> {
    let slice_ns = dumps.first().map(|d| d.slice_ns).unwrap_or_else(|| spec.slice_ns());
    let sink = IntervalSink::new(1);
    let mut totals = Shard::new(0, &sink, slice_ns, spec.interval_ns);
    totals.first_completed = u64::MAX;
    let mut transport = new_hist();
    let mut transport_sum = 0u128;
    let mut intervals: std::collections::BTreeMap<u32, (Hists, u64, [u64; N_METRICS])> = Default::default();
    let (mut arrivals, mut errors, mut first_error, mut aborted) = (Vec::new(), 0, None, false);
    let (mut gw, mut gm) = (0, 0);
    let (mut ms, mut fmi, mut lmi) = (u64::MAX, u64::MAX, 0);
    for d in dumps {
        for i in 0..N_METRICS {
            totals.totals.0[i].add(hist(&d.hists[i])?).map_err(|_| bad_shard("histogram add"))?;
            totals.sums[i] += d.sums[i].parse::<u128>().map_err(|_| bad_shard("sum"))?;
        }
        totals.measured += d.measured;
        totals.warmup += d.warmup;
        totals.first_completed = totals.first_completed.min(d.first_completed);
        totals.last_completed = totals.last_completed.max(d.last_completed);
        add_vec(&mut totals.slice_done, &d.slice_done);
        add_vec(&mut arrivals, &d.arrivals_per_slice);
        transport.add(hist(&d.transport)?).map_err(|_| bad_shard("histogram add"))?;
        transport_sum += d.transport_sum.parse::<u128>().map_err(|_| bad_shard("sum"))?;
        for iv in &d.intervals {
            let e = intervals.entry(iv.index).or_insert_with(|| (Hists::new(), 0, [0; N_METRICS]));
            for m in 0..N_METRICS {
                e.0 .0[m].add(hist(&iv.hists[m])?).map_err(|_| bad_shard("histogram add"))?;
                e.2[m] = e.2[m].max(iv.max[m]);
            }
            e.1 += iv.count;
        }
        errors += d.errors;
        if first_error.is_none() {
            first_error = d.first_error.clone().or_else(|| d.lost.clone());
        }
        aborted |= d.aborted;
        gw += d.generated_warmup;
        gm += d.generated_measured;
        ms = ms.min(d.measure_start);
        if d.generated_measured > 0 {
            fmi = fmi.min(d.first_measured_intended);
            lmi = lmi.max(d.last_measured_intended);
        }
    }
    let intervals = intervals
        .into_iter()
        .map(|(index, (h, count, max))| IntervalBlob {
            index,
            count,
            max,
            hist_b64: std::array::from_fn(|m| encode_hist(&h.0[m])),
        })
        .collect();
    let r = RunResult {
        spec: spec.clone(),
        t0: 0,
        measure_start: if ms == u64::MAX { 0 } else { ms },
        first_measured_intended: if fmi == u64::MAX { 0 } else { fmi },
        last_measured_intended: lmi,
        generated_warmup: gw,
        generated_measured: gm,
        totals,
        intervals,
        slice_ns,
        arrivals_per_slice: arrivals,
        errors,
        first_error,
        aborted,
        records: None,
        wall_start,
        app_stats: Value::Null,
        placement: None,
        fanout: None,
    };
    Ok((r, transport, transport_sum))
}

/// A fan-out's run from its leaves' clients ([`crate::fanout`]): the schedule of the first
/// leaf that reported (every leaf's), the whole requests joined from all leaves' rows, the
/// transport times and failures of all of them.
fn join_leaves(
    spec: &RunSpec,
    f: &taillab_core::fanout::FanoutSpec,
    shards: &[Option<ShardDump>],
    reqs: &[Vec<ReqRow>],
    wall_start: std::time::SystemTime,
) -> Result<(RunResult, Histogram<u64>, u128), TransportError> {
    let dumps: Vec<ShardDump> = shards.iter().flatten().cloned().collect();
    let (mut r, _, _) = merge(spec, &dumps[..1], wall_start)?;
    let (all, th, tsum) = merge(spec, &dumps, wall_start)?;
    let t0s: Vec<u64> = shards.iter().map(|d| d.as_ref().map_or(0, |d| d.t0)).collect();
    let axis =
        crate::fanout::Axis { measure_start: r.measure_start, slice_ns: r.slice_ns, interval_ns: spec.interval_ns };
    let j = crate::fanout::join(f, &t0s, reqs, &axis, spec.threads);
    r.totals = j.totals;
    r.intervals = j.intervals;
    r.records = Some(std::sync::Arc::new(j.records));
    r.fanout = Some(j.fanout);
    (r.errors, r.first_error, r.aborted) = (all.errors, all.first_error, all.aborted);
    Ok((r, th, tsum))
}

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
struct Children(Vec<(String, Child)>);

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

fn split_bound(b: Bound, c: usize, i: usize) -> Bound {
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
struct Fleet {
    kids: Children,
    /// The servers' stdout lines (tag: the leaf), when this run started them.
    server_lines: Vec<mpsc::Receiver<(usize, Option<String>)>>,
    /// Each server's address (one per leaf of a fan-out).
    targets: Vec<String>,
    /// The clients' stdout lines, tagged by client number.
    client_lines: mpsc::Receiver<(usize, Option<String>)>,
    stdins: Vec<Option<ChildStdin>>,
    target: String,
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
fn facts<'a>(
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
fn client_shares(shards: &[Option<ShardDump>], missing: &[(usize, String)], each_qps: f64) -> Vec<ClientShare> {
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
fn server_section(stats: &Value) -> Option<ServeStats> {
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
fn wall_window(
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
fn resolve_here(cfg: &RunConfig, quiet: bool) -> (RunConfig, Option<taillab_core::config::auto::TcpChoice>) {
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
fn check(cfg: &RunConfig) -> Result<RunSpec, TransportError> {
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

fn taillab_exe(cfg: &RunConfig) -> Result<String, TransportError> {
    Ok(match &cfg.net.remote_taillab {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| TransportError::Io { what: "locating the taillab binary".into(), source: e })?
            .to_string_lossy()
            .into_owned(),
    })
}

/// The configuration `taillab serve` starts with when given no flags.
pub fn serve_defaults() -> RunConfig {
    let mut c = RunConfig::default();
    c.net.listen = "127.0.0.1:7878".into();
    c
}

/// Starts `taillab serve` — one per leaf of a fan-out, the launcher's `{i}` the leaf; with
/// `--launcher slurm` each a step on its own node (`alloc`) — unless `net.target` names
/// running servers, and waits for their `listening ADDR` lines.
fn start_server(cfg: &RunConfig, exe: &str, alloc: Option<&crate::slurm::Allocation>) -> Result<Fleet, TransportError> {
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
fn server_name(i: usize, n: usize) -> String {
    if n > 1 {
        format!("server {i}")
    } else {
        "server".into()
    }
}

/// The address a server printed (`listening ADDR`).
fn await_listening(
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
fn client_config(cfg: &RunConfig, spec: &RunSpec, target: &str, i: usize) -> RunConfig {
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
fn next_port(addr: &str, i: usize) -> String {
    match addr.rsplit_once(':').map(|(h, p)| (h, p.parse::<usize>())) {
        Some((h, Ok(p))) if p != 0 => format!("{h}:{}", p + i),
        _ => addr.to_string(),
    }
}

/// Starts the clients; each connects, then prints `ready`.
fn start_clients(cfg: &RunConfig, spec: &RunSpec, exe: &str, fleet: &mut Fleet) -> Result<(), TransportError> {
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

fn await_ready(fleet: &Fleet, c: usize) -> Result<(), TransportError> {
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
fn go(fleet: &mut Fleet) -> Result<(u64, std::time::SystemTime), TransportError> {
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
    fn stdins_nonblocking(&mut self) {
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
    fn tell_clients(&mut self, line: &str) {
        for s in self.stdins.iter_mut().flatten() {
            let _ = s.write_all(line.as_bytes());
        }
    }

    /// Why client `i` sent no shard: how it ended, as far as we can tell.
    fn why_silent(&mut self, i: usize) -> String {
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
type Collected = (Vec<Option<ShardDump>>, Vec<Vec<ReqRow>>);

/// Reads each client's `shard` line (and `req` lines) until all exit or
/// their time is up; a client that died or hung has no shard (`None`) and
/// the others' are kept. Fails only when no client reported. Meanwhile, with
/// `relay`, tells the clients its foreign CPU once a second.
fn collect_shards(
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
fn stop_servers(fleet: &mut Fleet) -> Vec<Value> {
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

/// A coordinated client's start: print `ready`, read `go DELAY_NS`.
pub fn barrier() -> Result<u64, TransportError> {
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| TransportError::Io { what: "reading the coordinator's go".into(), source: e })?;
    line.trim().strip_prefix("go ").and_then(|d| d.parse::<u64>().ok()).ok_or_else(|| {
        TransportError::Launch(format!("expected `go DELAY_NS` from the coordinator, got {:?}", line.trim()))
    })
}

/// A coordinated client's further lines from the coordinator, read on a thread of its own
/// until the coordinator closes its stdin; call it after [`barrier`] returned (it would take
/// the `go` line). Each `foreign PCT` (a loopback run with live metrics: other processes' CPU
/// on the host over the last second, % of one CPU) goes to `on_foreign`.
pub fn follow_coordinator(on_foreign: impl Fn(f64) + Send + 'static) {
    let follow = move || {
        for line in std::io::stdin().lines() {
            let Ok(l) = line else { break };
            if let Some(pct) = l.trim().strip_prefix("foreign ").and_then(|v| v.parse::<f64>().ok()) {
                on_foreign(pct);
            }
        }
    };
    // Without the thread the endpoint only lacks the figure; the run does not depend on it.
    let _ = std::thread::Builder::new().name("taillab-coord-in".into()).spawn(follow);
}

/// A coordinated client's report: one `shard {json}` line, then one `req`
/// line per kept record (this client's clock and ids).
pub fn emit_shard(r: &LoadResult, qps: f64, seed: u64) {
    let d = ShardDump::from_load(r, qps, seed);
    println!("shard {}", serde_json::to_string(&d).expect("shards serialize"));
    {
        if let Some(rec) = &r.result.records {
            let mut o = std::io::BufWriter::new(std::io::stdout().lock());
            for (i, wk, measured, st) in rec.iter() {
                let _ = write!(o, "req ")
                    .and_then(|_| taillab_core::summary::write_request_row(&mut o, i, wk, measured, &st))
                    .and_then(|_| writeln!(o));
            }
        }
    }
    let _ = std::io::stdout().flush();
}

/// A server's last line for the coordinator: what it and the app saw.
pub fn emit_server_stats(stats: &crate::server::ServeStats, app_report: Value) {
    // Nobody may be reading any more (a script took the port and left): ignore EPIPE.
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "stats {}", json!({"serve": stats, "app": app_report}));
    let _ = o.flush();
}

/// One `req` line's numbers, in `requests.csv` order. Kept as numbers the
/// moment they arrive: a million requests are 88 MB so, several times that
/// as lines of text.
use crate::fanout::{clients, leaves, ReqRow};

fn parse_req(line: &str) -> Result<ReqRow, TransportError> {
    let mut row = [0u64; 11];
    let mut fields = line.split(',');
    for x in row.iter_mut() {
        *x = fields.next().and_then(|f| f.parse().ok()).ok_or_else(|| bad_shard("req line"))?;
    }
    if fields.next().is_some() {
        return Err(bad_shard("req line"));
    }
    Ok(row)
}

/// The clients' request rows as records. One client's keep their ids (a
/// request that never completed has no line and leaves a hole); several
/// clients' are merged in order of intended send time and numbered 0, 1, …
/// in that order.
fn records_of(clients: &[Vec<ReqRow>]) -> taillab_core::harness::Records {
    // (intended, client, row): sorted for several clients, as they came for one.
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    for (i, rows) in clients.iter().enumerate() {
        order.extend(rows.iter().enumerate().map(|(j, v)| (v[2], i as u32, j as u32)));
    }
    if clients.len() > 1 {
        order.sort_unstable();
    }
    let id = |n: usize, v: &ReqRow| if clients.len() > 1 { n as u64 } else { v[0] };
    let len = order.iter().enumerate().map(|(n, o)| id(n, &clients[o.1 as usize][o.2 as usize]) + 1).max();
    let rec = taillab_core::harness::Records::new(len.unwrap_or(0));
    for (n, (_, i, j)) in order.into_iter().enumerate() {
        let v = &clients[i as usize][j as usize];
        let r = reqfile::Row::from_base(v);
        rec.set(id(n, v), &r.stamps, r.worker as usize, r.measured);
    }
    rec
}

/// The records file (`record.format`) of a run with several clients: the integrated columns
/// plus the [`Sender`] column, `client` (ids and clocks are each client's own) or, in a
/// fan-out, `leaf` (a row per leaf's answer, ids the run's).
fn write_requests(
    out: &Path,
    format: RequestFormat,
    reqs: &[Vec<ReqRow>],
    sender: Sender,
) -> Result<(), TransportError> {
    let path = out.join(reqfile::file_name(format));
    let io = |e| TransportError::Io { what: format!("writing {}", path.display()), source: e };
    std::fs::create_dir_all(out).map_err(io)?;
    let extra = reqfile::Extra { sender: Some(sender), ..Default::default() };
    let mut w = reqfile::RowWriter::create(out, format, extra).map_err(io)?;
    for (i, rows) in (0u64..).zip(reqs) {
        for r in rows {
            w.push(&reqfile::Row { sender: Some(i), ..reqfile::Row::from_base(r) }).map_err(io)?;
        }
    }
    w.finish().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_clients_records_merge_in_intended_order() {
        // id,worker,intended,sent,enqueued,started,finished,completed,measured
        let line = |id: u64, t: u64, m: u64| {
            format!("{id},0,{t},{},{},{},{},{},{m},{},{}", t + 1, t + 1, t + 2, t + 3, t + 9, t + 1, t + 9)
        };
        let a = vec![line(0, 100, 0), line(1, 300, 1), line(2, 500, 1)];
        let b = vec![line(0, 200, 0), line(1, 400, 1)];
        let rows = |v: &[String]| v.iter().map(|l| parse_req(l).unwrap()).collect::<Vec<_>>();
        let rec = records_of(&[rows(&a), rows(&b)]);
        let got: Vec<(u64, u64, bool)> = rec.iter().map(|x| (x.0, x.3.intended, x.2)).collect();
        assert_eq!(got, vec![(0, 100, false), (1, 200, false), (2, 300, true), (3, 400, true), (4, 500, true)]);
        // One client keeps its ids, holes included.
        let rec = records_of(&[rows(&[a[0].clone(), a[2].clone()])]);
        let ids: Vec<u64> = rec.iter().map(|x| x.0).collect();
        assert_eq!(ids, vec![0, 2]);
        assert!(parse_req("1,2,3").is_err());
        assert!(parse_req(&format!("{},12", a[0])).is_err());
    }

    /// Several clients' rows (a fan-out's leaves') go to either format as the same rows, and
    /// the CSV is the lines it always was: the client's own values, then its number.
    #[test]
    fn several_clients_rows_are_the_same_in_csv_and_parquet() {
        let row = |id: u64, t: u64| -> ReqRow { [id, 1, t, t + 1, t + 2, t + 3, t + 5, t + 9, id % 2, t + 2, t + 10] };
        let reqs = vec![vec![row(0, 100), row(1, 300)], vec![row(0, 200)]];
        let dir = std::env::temp_dir().join(format!("taillab-coord-req-{}", std::process::id()));
        for sender in [Sender::Client, Sender::Leaf] {
            let mut read = Vec::new();
            for f in [RequestFormat::Csv, RequestFormat::Parquet] {
                let _ = std::fs::remove_dir_all(&dir);
                write_requests(&dir, f, &reqs, sender).unwrap();
                read.push(reqfile::read_all(&dir.join(reqfile::file_name(f))).unwrap());
                if f == RequestFormat::Csv {
                    let mut want = format!("{},{sender}\n", taillab_core::summary::REQUESTS_CSV_HEADER);
                    for (i, rows) in reqs.iter().enumerate() {
                        for r in rows {
                            let v: Vec<String> = r.iter().map(u64::to_string).collect();
                            want += &format!("{},{i}\n", v.join(","));
                        }
                    }
                    assert_eq!(std::fs::read_to_string(dir.join("requests.csv")).unwrap(), want);
                }
            }
            assert_eq!(read[0], read[1], "{sender}");
            let (extra, rows) = &read[0];
            assert_eq!(extra.sender, Some(sender));
            let got: Vec<(u64, u64, Option<u64>)> = rows.iter().map(|r| (r.id, r.stamps.intended, r.sender)).collect();
            assert_eq!(got, vec![(0, 100, Some(0)), (1, 300, Some(0)), (0, 200, Some(1))]);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn bounds_split_exactly() {
        let total: u64 = (0..3)
            .map(|i| match split_bound(Bound::Requests(10), 3, i) {
                Bound::Requests(n) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 10);
        assert_eq!(split_bound(Bound::Seconds(2.0), 3, 1), Bound::Seconds(2.0));
    }
}
