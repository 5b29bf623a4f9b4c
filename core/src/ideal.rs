//! The ideal of a run: its own arrivals and service times through a perfect
//! queue.
//!
//! A measured latency mixes two things: how long the server took (service)
//! and how long requests waited for it (queueing). Replaying the run's
//! *intended* arrival times and *measured* service times through an exact
//! discrete-event queue ([`crate::sim`]) with the run's worker count,
//! discipline and dispatch gives the sojourn times a server with those
//! service times would have given with no overhead at all: the `ideal`
//! section of `summary.json`. `excess = measured − ideal` per statistic is
//! then what the run added beyond queueing for those service times — the
//! harness's own dispatch and send lag in-process; over TCP (where service
//! times are the server's own report) also transport, socket buffers and
//! queues the model does not see. A slow server shows as long service
//! times and a large ideal; a badly behaved one as a large excess.
//!
//! The replay is exact for FIFO (shared or per worker, whose assignment it
//! takes from the run's records: the worker that served each request). For
//! LIFO and random order it replays the same discipline, but who is next
//! depends on the queue's contents at each instant, which differ between a
//! real run and the ideal by the run's own delays, and random order draws
//! its own choices: there the comparison is between distributions, not
//! request by request. Ties between an arrival and a completion at the same
//! nanosecond resolve completion-first (see [`crate::sim`]).
//!
//! The replay needs every scheduled request (warmup included, since it
//! builds the queue the measured phase starts with) in arrival order; it
//! streams, holding only the backlog, so `taillab model --from` can replay a
//! `requests.csv` larger than memory.

use crate::collector::MetricStats;
use crate::queue::{Discipline, Dispatch};
use crate::result::RunResult;
use crate::sim::{Done, Job, Sim, SimConfig};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Statistics compared between measured and ideal.
pub const COMPARED: [&str; 7] = ["mean", "p50", "p90", "p95", "p99", "p999", "max"];

/// Errors reading a run for a replay; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum IdealError {
    #[error("{dir} has no per-request records (requests.csv or requests.parquet): record them with --save-requests (they are kept in memory when they fit --max-record-mem) and replay that run")]
    /// The folder has no records file.
    NoRecords {
        /// The run folder.
        dir: PathBuf,
    },
    #[error("{path} line {line}: {why}")]
    /// A line of requests.csv cannot be read.
    Csv {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
    #[error("cannot read {path}: {source}")]
    /// Reading failed.
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The requests cannot be replayed (out of order).
    #[error("{0}")]
    Invalid(String),
    /// The run kept no per-request records.
    #[error(
        "no per-request records were kept (raise --max-record-mem, or --save-requests over TCP)"
    )]
    NotKept,
    /// The run was aborted: some requests were never served.
    #[error("the run stopped before serving everything: requests are missing")]
    Aborted,
    /// Some scheduled requests have no record.
    #[error("{missing} of {scheduled} scheduled requests have no record (unfinished, or beyond the records reserved): the replay needs every request")]
    Missing {
        /// Requests without a record.
        missing: u64,
        /// Requests scheduled, warmup included.
        scheduled: u64,
    },
    /// A fan-out run: its ideal is its model ([`fanout_ideal`]), not a replay.
    #[error(
        "a fan-out run's ideal is a model of its distribution, not a replay request by request"
    )]
    FanOut,
    /// A fan-out run measured no copy, so it has no model.
    #[error("no copy was measured")]
    NoCopy,
}

/// One request as the replay needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayReq {
    /// Request index.
    pub id: u64,
    /// Intended arrival, ns.
    pub intended: u64,
    /// Measured service time, ns.
    pub service: u64,
    /// The worker that served it.
    pub worker: usize,
    /// Measured phase (else warmup).
    pub measured: bool,
}

/// How to replay: the queueing system, and whether per-worker queues take
/// each request's worker from the records (a run's own replay) or assign
/// afresh (a what-if with other settings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IdealConfig {
    /// The queueing system.
    pub sim: SimConfig,
    /// Per-worker queues use each request's recorded worker.
    pub recorded_workers: bool,
    /// Stretches arrival distances from the first arrival (< 1: denser,
    /// i.e. a higher rate); 1 replays the run's own times.
    pub time_scale: f64,
}

/// The `ideal` section of `summary.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct IdealSummary {
    /// "replay": the run's own arrivals and service times, exact queue.
    pub method: String,
    /// Workers replayed.
    pub servers: usize,
    /// `fifo`, `lifo` or `random`.
    pub discipline: String,
    /// `shared` or `per-worker:…`.
    pub dispatch: String,
    /// Requests replayed (warmup included).
    pub replayed: u64,
    /// Sojourn statistics of the measured requests, as `latency_ns.sojourn`.
    pub sojourn: MetricStats,
    /// measured − ideal per statistic, ns; a statistic that either side lacks (a run with
    /// no measured request) is left out.
    pub excess: BTreeMap<String, f64>,
    /// measured ÷ ideal per statistic; left out where either side lacks it or the ideal is 0.
    pub ratio: BTreeMap<String, f64>,
}

/// What a replay measured: the ideal's sojourn histogram and exact sum over
/// measured requests.
pub struct ReplayStats {
    /// Ideal sojourns of measured requests, ns.
    pub hist: Histogram<u64>,
    /// Their exact sum, ns.
    pub sum: u128,
    /// Requests replayed (warmup included).
    pub replayed: u64,
}

impl std::fmt::Debug for ReplayStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ReplayStats {{ replayed: {}, measured: {}, sum: {} }}",
            self.replayed,
            self.hist.len(),
            self.sum
        )
    }
}

impl ReplayStats {
    /// Statistics of the ideal sojourn, as the collector reports them.
    pub fn stats(&self) -> MetricStats {
        MetricStats::from_hist(&self.hist, Some(self.sum))
    }
}

/// A histogram like the collector's (3 significant digits, auto-resizing).
pub fn new_hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// Replays `reqs` (in arrival order); `each` sees every request's result
/// (its `id` is the request's). Fails when arrivals go backwards.
pub fn replay(
    reqs: impl IntoIterator<Item = ReplayReq>,
    cfg: &IdealConfig,
    mut each: impl FnMut(&Done),
) -> Result<ReplayStats, IdealError> {
    let mut sim = Sim::new(cfg.sim);
    let mut st = ReplayStats {
        hist: new_hist(),
        sum: 0,
        replayed: 0,
    };
    let mut first = None;
    let mut last = 0;
    let rec = |d: Done, st: &mut ReplayStats, each: &mut dyn FnMut(&Done)| {
        let measured = d.id & 1 == 1;
        let d = Done { id: d.id >> 1, ..d };
        if measured {
            st.hist.saturating_record(d.sojourn());
            st.sum += d.sojourn() as u128;
        }
        each(&d);
    };
    for r in reqs {
        if r.intended < last {
            return Err(IdealError::Invalid(format!(
                "request {} arrives at {} ns, before the previous one ({last} ns): the replay needs requests in order of intended time",
                r.id, r.intended
            )));
        }
        last = r.intended;
        let t0 = *first.get_or_insert(r.intended);
        let arrival = if cfg.time_scale == 1.0 {
            r.intended
        } else {
            t0 + ((r.intended - t0) as f64 * cfg.time_scale).round() as u64
        };
        let job = Job {
            id: (r.id << 1) | u64::from(r.measured),
            arrival,
            service: r.service,
            worker: cfg.recorded_workers.then_some(r.worker),
        };
        st.replayed += 1;
        sim.push(job, &mut |d| rec(d, &mut st, &mut each));
    }
    sim.finish(&mut |d| rec(d, &mut st, &mut each));
    Ok(st)
}

/// The replay settings of a run's own ideal.
pub fn config_of(r: &RunResult) -> IdealConfig {
    let s = &r.spec;
    IdealConfig {
        sim: SimConfig {
            servers: s.threads,
            discipline: s.discipline,
            dispatch: s.dispatch,
            seed: crate::arrival::derive_seed(s.seed, 6),
        },
        recorded_workers: true,
        time_scale: 1.0,
    }
}

/// The run's requests for a replay, in arrival order; an error says why
/// the run cannot be replayed (records not kept, requests missing).
pub fn requests_of(r: &RunResult) -> Result<Vec<ReplayReq>, IdealError> {
    let Some(rec) = &r.records else {
        return Err(IdealError::NotKept);
    };
    if r.aborted {
        return Err(IdealError::Aborted);
    }
    let mut v: Vec<ReplayReq> = rec
        .iter()
        .map(|(id, w, measured, st)| ReplayReq {
            id,
            intended: st.intended,
            service: st.finished.saturating_sub(st.started),
            worker: w,
            measured,
        })
        .collect();
    let scheduled = r.generated_warmup + r.generated_measured;
    if (v.len() as u64) < scheduled {
        return Err(IdealError::Missing {
            missing: scheduled - v.len() as u64,
            scheduled,
        });
    }
    if v.windows(2).any(|w| w[1].intended < w[0].intended) {
        v.sort_by_key(|q| (q.intended, q.id));
    }
    Ok(v)
}

/// The run's ideal, measured against `measured` (the run's sojourn
/// statistics); `completions`, when given, receives each request's ideal
/// completion time by request index.
pub fn ideal_of_run(
    r: &RunResult,
    measured: &MetricStats,
    mut completions: Option<&mut Vec<u64>>,
) -> Result<IdealSummary, IdealError> {
    if r.fanout.is_some() {
        // summarize() takes a fan-out run's ideal from its model (fanout_summary, fanout_ideal).
        return Err(IdealError::FanOut);
    }
    let reqs = requests_of(r)?;
    if let Some(c) = completions.as_deref_mut() {
        let n = reqs.iter().map(|q| q.id + 1).max().unwrap_or(0);
        c.clear();
        c.resize(n as usize, 0);
    }
    let cfg = config_of(r);
    let st = replay(reqs, &cfg, |d| {
        if let Some(c) = completions.as_deref_mut() {
            c[d.id as usize] = d.end;
        }
    })?;
    Ok(summary_of(&cfg, &st, measured))
}

/// A fan-out run's `fanout` section: what it measured and its model — the run's own arrivals,
/// released when the run released them, through N×R exact FIFO queues
/// ([`crate::fanout::simulate_with`]), every copy's service, every hedge's lateness and every
/// idle worker's wake-up drawn from the run's own measurements (seeded from the run's seed).
/// The model is run again with each of those host costs taken out, then all of them
/// ([`crate::fanout::ModelWithout`]), with the same seeds: what each adds to the tail (for
/// runs of up to [`PARTS_SUBS`] sub-requests).
pub fn fanout_summary(f: &crate::fanout::FanoutRun, seed: u64) -> crate::fanout::FanoutSummary {
    let has = |h: &hdrhistogram::Histogram<u64>| !h.is_empty();
    let late = f.arrivals.iter().zip(&f.released).any(|(a, r)| r > a);
    let out = |send_lag, hedge_lag, wake| Out {
        send_lag,
        hedge_lag,
        wake,
    };
    let model = fanout_model(f, seed, out(false, false, false));
    let mut parts = Vec::new();
    let subs = f.arrivals.len() as u64 * f.spec.leaves as u64;
    if model.is_some() && subs <= PARTS_SUBS {
        let costs = [
            ("send lag", late, out(true, false, false)),
            (
                "hedge lag",
                has(&f.hists.hedge_lag),
                out(false, true, false),
            ),
            ("wake-ups", has(&f.hists.wake), out(false, false, true)),
        ];
        let mut had: Vec<_> = costs.into_iter().filter(|c| c.1).collect();
        if had.len() > 1 {
            had.push(("all", true, out(true, true, true)));
        }
        for (name, _, o) in had {
            parts.extend(
                fanout_model(f, seed, o).map(|m| crate::fanout::ModelWithout {
                    without: name.into(),
                    e2e: m.e2e,
                }),
            );
        }
    }
    let mut s = crate::fanout::FanoutSummary::new(
        &f.spec,
        f.workers_per_replica,
        f.hists.stats(),
        f.per_leaf.clone(),
        model,
    );
    s.model_without = parts;
    s
}

/// Which of a run's measured costs its fan-out model leaves out.
#[derive(Clone, Copy)]
struct Out {
    send_lag: bool,
    hedge_lag: bool,
    wake: bool,
}

/// Sub-requests the fan-out model of a run simulates at least: it replays the run's arrivals
/// with fresh draws until it has (up to [`MODEL_ROUNDS`] times), so that its p99.9 rests on
/// more than the run's own few requests above it.
const MODEL_SUBS: u64 = 200_000;
/// The most times the model replays a run's arrivals.
const MODEL_ROUNDS: u64 = 10;
/// Sub-requests of the largest run whose model is also run without each host cost: up to four
/// more models, which for a run of millions of sub-requests would take minutes to summarise.
const PARTS_SUBS: u64 = 5_000_000;

/// The fan-out model of a run (see [`fanout_summary`]) without the costs in `out`, its
/// arrivals replayed `rounds` times (each with its own draws; round 0 with the run's seeds),
/// the rounds' histograms added; `None` when no copy's service was measured.
fn fanout_model(
    f: &crate::fanout::FanoutRun,
    seed: u64,
    out: Out,
) -> Option<crate::fanout::FanoutStats> {
    use crate::empirical::Empirical;
    use rand::SeedableRng;
    let emp = Empirical::from_hist(&f.hists.service).ok()?;
    let subs = (f.arrivals.len() as u64 * f.spec.leaves as u64).max(1);
    let rounds = MODEL_SUBS.div_ceil(subs).clamp(1, MODEL_ROUNDS);
    let mut all = crate::fanout::FanoutHists::default();
    for round in 0..rounds {
        let rng = |k: u64| {
            rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(crate::arrival::derive_seed(
                seed,
                k + 100 * round,
            ))
        };
        // A cost the run measured is drawn from its measurements; one it never saw adds nothing.
        let cost =
            |h: &hdrhistogram::Histogram<u64>, k, off: bool| -> Option<Box<dyn FnMut() -> u64>> {
                if off {
                    return None;
                }
                let emp = Empirical::from_hist(h).ok()?;
                let mut rng = rng(k);
                Some(Box::new(move || emp.sample(&mut rng)))
            };
        let mut srng = rng(9);
        let mut draw = || emp.sample(&mut srng);
        let costs = crate::fanout::Costs {
            hedge_lag: cost(&f.hists.hedge_lag, 10, out.hedge_lag),
            wake: cost(&f.hists.wake, 11, out.wake),
        };
        let released = f.arrivals.iter().enumerate().map(|(i, &a)| {
            let r = f.released.get(i).copied().unwrap_or(a);
            (a, if out.send_lag { a } else { r })
        });
        all.absorb(&crate::fanout::simulate_with(
            &f.spec,
            released,
            &mut draw,
            f.workers_per_replica,
            f.warmup,
            costs,
        ));
    }
    Some(all.stats())
}

/// A fan-out run's ideal: its model ([`fanout_summary`]) — a comparison of distributions,
/// as for LIFO and random order; `Err` when no copy was measured.
pub fn fanout_ideal(
    r: &RunResult,
    f: &crate::fanout::FanoutSummary,
    measured: &MetricStats,
) -> Result<IdealSummary, IdealError> {
    let model = f.model.as_ref().ok_or(IdealError::NoCopy)?;
    let (mut excess, mut ratio) = (BTreeMap::new(), BTreeMap::new());
    for k in COMPARED {
        let (m, i) = (
            measured.get(k).unwrap_or(f64::NAN),
            model.e2e.get(k).unwrap_or(f64::NAN),
        );
        compare(&mut excess, &mut ratio, k, m, i);
    }
    Ok(IdealSummary {
        method: "fan-out model (the run's arrivals and releases; service times, hedges' lateness and workers' wake-ups drawn from its measured copies)"
            .into(),
        servers: f.leaves * f.replicas * f.workers_per_replica,
        discipline: "fifo".into(),
        dispatch: format!("fan-out {}×{}", f.leaves, f.replicas),
        replayed: r.generated_warmup + r.generated_measured,
        sojourn: model.e2e.clone(),
        excess,
        ratio,
    })
}

/// Puts `m − i` and `m ÷ i` under `k` where they are numbers: JSON has no NaN, and a null
/// would break the summary's schema.
fn compare(
    excess: &mut BTreeMap<String, f64>,
    ratio: &mut BTreeMap<String, f64>,
    k: &str,
    m: f64,
    i: f64,
) {
    if (m - i).is_finite() {
        excess.insert(k.to_string(), m - i);
    }
    if i > 0.0 && (m / i).is_finite() {
        ratio.insert(k.to_string(), m / i);
    }
}

/// The `ideal` section from a replay's statistics and the measured ones.
pub fn summary_of(cfg: &IdealConfig, st: &ReplayStats, measured: &MetricStats) -> IdealSummary {
    let ideal = st.stats();
    let (mut excess, mut ratio) = (BTreeMap::new(), BTreeMap::new());
    for k in COMPARED {
        let (m, i) = (
            measured.get(k).unwrap_or(f64::NAN),
            ideal.get(k).unwrap_or(f64::NAN),
        );
        compare(&mut excess, &mut ratio, k, m, i);
    }
    IdealSummary {
        method: "replay".into(),
        servers: cfg.sim.servers,
        discipline: cfg.sim.discipline.to_string(),
        dispatch: cfg.sim.dispatch.to_string(),
        replayed: st.replayed,
        sojourn: ideal,
        excess,
        ratio,
    }
}

/// A `requests.csv` read row by row (ids, workers, intended, service,
/// measured), for replays that need not fit in memory.
pub struct CsvRequests {
    path: PathBuf,
    lines: std::io::Lines<std::io::BufReader<std::fs::File>>,
    line: usize,
    col: [usize; 6],
}

impl CsvRequests {
    /// Opens `RUN_DIR/requests.csv`; a folder without one gets the error
    /// that says how to record it.
    pub fn open(run_dir: &Path) -> Result<Self, IdealError> {
        let path = run_dir.join("requests.csv");
        if !path.exists() {
            return Err(IdealError::NoRecords {
                dir: run_dir.to_path_buf(),
            });
        }
        let io = |e| IdealError::Io {
            path: path.clone(),
            source: e,
        };
        let f = std::fs::File::open(&path).map_err(io)?;
        let mut lines = std::io::BufReader::new(f).lines();
        let header = lines.next().transpose().map_err(io)?.unwrap_or_default();
        let names: Vec<&str> = header.split(',').map(str::trim).collect();
        let mut col = [0; 6];
        for (k, want) in [
            "id", "worker", "intended", "started", "finished", "measured",
        ]
        .iter()
        .enumerate()
        {
            col[k] = names
                .iter()
                .position(|n| n == want)
                .ok_or_else(|| IdealError::Csv {
                    path: path.clone(),
                    line: 1,
                    why: format!("no `{want}` column: not a taillab requests.csv"),
                })?;
        }
        Ok(CsvRequests {
            path,
            lines,
            line: 1,
            col,
        })
    }
}

impl Iterator for CsvRequests {
    type Item = Result<ReplayReq, IdealError>;
    fn next(&mut self) -> Option<Self::Item> {
        let l = match self.lines.next()? {
            Ok(l) => l,
            Err(e) => {
                return Some(Err(IdealError::Io {
                    path: self.path.clone(),
                    source: e,
                }))
            }
        };
        self.line += 1;
        let f: Vec<&str> = l.split(',').collect();
        let get = |k: usize| -> Result<u64, IdealError> {
            f.get(self.col[k])
                .and_then(|x| x.trim().parse().ok())
                .ok_or_else(|| IdealError::Csv {
                    path: self.path.clone(),
                    line: self.line,
                    why: "expected integer stamps (a truncated or hand-edited file?)".into(),
                })
        };
        let row = (|| {
            Ok(ReplayReq {
                id: get(0)?,
                worker: get(1)? as usize,
                intended: get(2)?,
                service: get(4)?.saturating_sub(get(3)?),
                measured: get(5)? == 1,
            })
        })();
        Some(row)
    }
}

/// A run folder's records for a replay, row by row: `requests.csv`, or `requests.parquet`
/// (read a row group at a time).
fn saved_requests(
    run_dir: &Path,
) -> Result<Box<dyn Iterator<Item = Result<ReplayReq, IdealError>>>, IdealError> {
    let path = run_dir.join(crate::reqfile::file_name(
        crate::reqfile::RequestFormat::Parquet,
    ));
    if run_dir.join("requests.csv").exists() || !path.exists() {
        return Ok(Box::new(CsvRequests::open(run_dir)?));
    }
    let io = |p: &Path| {
        let p = p.to_path_buf();
        move |e| IdealError::Io { path: p, source: e }
    };
    let rows = crate::reqfile::Rows::open(&path).map_err(io(&path))?;
    Ok(Box::new(rows.map(move |r| {
        r.map_err(io(&path)).map(|r| ReplayReq {
            id: r.id,
            worker: r.worker as usize,
            intended: r.stamps.intended,
            service: r.stamps.finished.saturating_sub(r.stamps.started),
            measured: r.measured,
        })
    })))
}

/// Replays a saved run (`RUN_DIR/requests.csv` or `requests.parquet`) under `cfg`, streaming;
/// a file not in arrival order (several clients' rows) is sorted in memory.
pub fn replay_dir(run_dir: &Path, cfg: &IdealConfig) -> Result<ReplayStats, IdealError> {
    let mut bad = None;
    let stream = saved_requests(run_dir)?.map_while(|r| match r {
        Ok(q) => Some(q),
        Err(e) => {
            bad = Some(e);
            None
        }
    });
    match replay(stream, cfg, |_| {}) {
        Ok(st) if bad.is_none() => return Ok(st),
        Err(IdealError::Invalid(_)) if bad.is_none() => {}
        Err(e) => return Err(e),
        Ok(_) => return Err(bad.expect("checked")),
    }
    let mut all = saved_requests(run_dir)?.collect::<Result<Vec<_>, _>>()?;
    all.sort_by_key(|q| (q.intended, q.id));
    replay(all, cfg, |_| {})
}

/// Whether a replay under `sim` may take workers from a run recorded with
/// `threads`, `discipline` and `dispatch` (its own per-worker assignment).
pub fn same_assignment(sim: &SimConfig, threads: usize, dispatch: Dispatch) -> bool {
    sim.dispatch.is_per_worker() && sim.dispatch == dispatch && sim.servers == threads
}

/// Default discipline text for messages.
pub fn describe(sim: &SimConfig) -> String {
    let d = match sim.discipline {
        Discipline::Fifo => "FIFO",
        Discipline::Lifo => "LIFO",
        Discipline::Random => "random-order",
    };
    format!("{d}, {} server(s), {} dispatch", sim.servers, sim.dispatch)
}

#[cfg(test)]
mod tests;
