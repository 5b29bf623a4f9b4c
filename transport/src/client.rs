//! `taillab load`: the open-loop client over TCP.
//!
//! Threads and why:
//! - one **sender** runs the same [`Schedule`] as the integrated harness (so
//!   a seed gives the same arrivals and requests in every configuration),
//!   waits for each intended time (spin, or hybrid: sleep, then spin the last
//!   `spin_margin`), stamps `sent` and writes. It never waits for a
//!   response, so a slow or stalled server can never hold the schedule back
//!   (no coordinated omission). When it is late it coalesces every request
//!   already due into one `write` per connection, so a burst costs one
//!   syscall per connection instead of one per request; each of those
//!   requests keeps its own `intended`, so lateness is still charged in full.
//! - responses are read one of two ways (`--receive`):
//!   - **sender** (default with `--wait spin`): the sender reads its connections without
//!     blocking whenever it would otherwise wait for the next send time
//!     (spin: a non-blocking `read` per turn; hybrid: it sleeps in epoll
//!     until a response arrives or the spin margin before the next send).
//!     One thread in all: on a small host nothing has to be woken up to
//!     take a response, which is most of what a loopback round trip costs.
//!     Reading never blocks the schedule, but the time spent reading a
//!     burst of responses can delay the next send a little; that shows up
//!     as send lag, which is measured and charged.
//!   - **threads** (default otherwise): one receiver thread per connection
//!     blocks in `read`.
//!     Sending and receiving share nothing but the in-flight ring; costs a
//!     wake-up per response.
//!
//!   Either way `completed` is the kernel's receive stamp of the last
//!   segment the read returned ([`crate::tstamp`]; the user-space stamp
//!   after the read when the socket gives none, or with `net.stamps = user`),
//!   so the reader's own delay is not the server's latency; that delay is
//!   kept as `recv_lag` (user-space read − kernel arrival) and judged by the
//!   `client` check. Each receive side records into its own [`Shard`]; the
//!   shards' histograms are added after the run.
//! - the calling thread collects interval histograms, drives the progress
//!   callback, and watches for a dead server.
//!
//! Requests go round-robin over the K connections, request `i` on
//! connection `i mod K`. Send and receive sides meet only in a ring of
//! in-flight slots indexed by request id (intended, sent, tag), written
//! before the request's bytes hit the socket and read when the response
//! comes back.
//!
//! Stamps on the client host: `intended`, `sent`, `completed` (and the
//! user-space `completed_user`). The server's `queue`, `service` and
//! receive lag come back as durations; the client places them as
//! `enqueued = sent`, `enqueued_user = enqueued + lag`,
//! `started = enqueued + queue`, `finished = started + service`, so every
//! derived duration is exact and `transport = completed − finished` is the network's (both
//! directions') share. See docs/protocol.md.
//!
//! Bad responses never become latencies: one for an id never sent, a
//! second one for the same request, or a frame cut short when the server
//! closes are counted and named (`transport.bad_responses`, the `errors`
//! check); a kernel stamp outside `[finished, completed_user]` is refused
//! and counted, and the user-space stamp stands in.

use crate::epoll::Epoll;
use crate::tstamp::{self, CmsgBuf, KernelStamp, StampCounts, Tally};
use crate::wire::Wire;
use crate::TransportError;
use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use taillab_core::clock::{now_ns, set_timer_slack_1ns, wait_until, WaitMode};
use taillab_core::collector::{IntervalSink, Shard, Stamps};
use taillab_core::config::auto::{self, TcpChoice};
use taillab_core::config::{RunConfig, Stamping};
use taillab_core::harness::{Progress, Records, Schedule, ScheduleStats};
use taillab_core::{Client, RunResult, RunSpec};

/// How the load client connects and when it gives up.
#[derive(Debug, Clone)]
pub struct LoadOpts {
    /// The server, `HOST:PORT` (`net.target`).
    pub target: String,
    /// TCP connections to open, 1..=4096 (`net.connections`).
    pub connections: usize,
    /// No response for this long while requests are outstanding: the server
    /// is declared dead.
    pub dead_after_ns: u64,
    /// Most requests coalesced into one write when the sender is late.
    pub max_batch: usize,
    /// Who reads responses: the sender while it waits, or receiver threads.
    pub receive: Receive,
    /// How the sender waits for send times (spin or hybrid).
    pub wait: WaitMode,
    /// Kernel or user-space receive stamps.
    pub stamps: Stamping,
    /// The client's threads go here: the sender on the first CPU, receiver
    /// threads on the next ones, round-robin (empty: not pinned).
    pub cpus: Vec<usize>,
    /// The resolved TCP settings and why (printed at start, recorded).
    pub choice: TcpChoice,
}

pub use taillab_core::config::Receive;

impl LoadOpts {
    /// The client side of `cfg` (`net.target` must be set). Settings left to
    /// the host are chosen here ([`auto::resolve`]); `server_affinity` is
    /// the CPUs of a server found on this host, if any.
    pub fn from_config(cfg: &RunConfig, server_affinity: Option<Vec<usize>>) -> Result<LoadOpts, TransportError> {
        let n = &cfg.net;
        let target = n.target.clone().ok_or_else(|| {
            TransportError::Invalid("say where the server is: --target HOST:PORT (net.target)".into())
        })?;
        let choice = auto::resolve(cfg, &auto::HostFacts::here(1, server_affinity));
        Ok(LoadOpts {
            target,
            connections: n.connections,
            dead_after_ns: n.dead_after.0,
            max_batch: n.max_batch,
            receive: choice.receive,
            wait: if choice.client_wait == WaitMode::Spin { WaitMode::Spin } else { WaitMode::Hybrid },
            stamps: n.stamps,
            cpus: n.client_cpus.0.clone(),
            choice,
        })
    }
}

/// A load run's result: the run, the transport-time histogram, and why it
/// stopped early if the server went away.
pub struct LoadResult {
    /// The run as the client measured it (the server's durations from its responses).
    pub result: RunResult,
    /// `transport = sojourn − send_lag − queue − service` per measured request.
    pub transport: Histogram<u64>,
    /// Exact sum of `transport` over the measured requests (ns), for its mean.
    pub transport_sum: u128,
    /// The server was lost mid-run (what was measured is kept).
    pub lost: Option<String>,
    /// Requests written, warmup included.
    pub sent: u64,
    /// Responses carried the server's queue and service times (a taillab server);
    /// without them only sojourn and send lag mean anything.
    pub server_timed: bool,
    /// Connections the run used.
    pub connections: usize,
    /// Where the stamps came from, and the responses refused.
    pub stamps: ClientStamps,
    /// The TCP settings the client ran with.
    pub choice: TcpChoice,
}

/// The clocks of a client's stamps and the responses it refused
/// (`summary.json`, `transport.stamps` and `transport.bad_responses`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClientStamps {
    /// `completed`, one per response.
    pub completed: StampCounts,
    /// `enqueued`, as the server reported it (empty for external servers).
    pub enqueued: StampCounts,
    /// Responses completed by a read that also completed a later one: they
    /// carry that later segment's stamp (an upper bound).
    pub shared: u64,
    /// Why the client's sockets gave no kernel stamps (`None`: they did).
    pub fallback: Option<String>,
    /// Responses for an id never sent.
    pub unknown_id: u64,
    /// Second responses to one request.
    pub duplicate: u64,
    /// Connections the server closed in the middle of a response.
    pub truncated: u64,
    /// Responses by the status the protocol gave them (HTTP/2 runs: gRPC
    /// status names, HTTP status codes, `RST_STREAM` reasons), warmup included.
    #[serde(default)]
    pub statuses: std::collections::BTreeMap<String, u64>,
}

impl ClientStamps {
    /// Adds another receive side's counts.
    pub fn absorb(&mut self, o: &ClientStamps) {
        self.completed.absorb(&o.completed);
        self.enqueued.absorb(&o.enqueued);
        self.shared += o.shared;
        self.fallback = self.fallback.take().or_else(|| o.fallback.clone());
        self.unknown_id += o.unknown_id;
        self.duplicate += o.duplicate;
        self.truncated += o.truncated;
        for (k, n) in &o.statuses {
            *self.statuses.entry(k.clone()).or_insert(0) += n;
        }
    }

    /// The bad responses in one line, if there were any.
    pub fn bad_responses(&self) -> Option<String> {
        let parts: Vec<String> = [
            (self.unknown_id, "for an id never sent"),
            (self.duplicate, "duplicated"),
            (self.truncated, "cut short when the server closed the connection"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} responses {what}"))
        .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }

    /// Why `completed` is not a kernel stamp, when it mostly is not.
    pub fn user_only(&self) -> Option<String> {
        if self.completed.clock() != "user" {
            return None;
        }
        Some(self.fallback.clone().unwrap_or_else(|| {
            if self.completed.refused_late + self.completed.refused_early > 0 {
                "kernel receive stamps were refused (they fell outside the request's own stamps)".into()
            } else {
                "the sockets gave no kernel receive stamps".into()
            }
        }))
    }
}

/// Most requests in flight at once (slots of the in-flight ring). Beyond
/// this the run is hopelessly saturated: the sender waits for the oldest
/// answer before it sends (its lateness is the send lag), as it would for a
/// full socket, so no answer is left without its request.
const RING: usize = 1 << 18;

struct Slot {
    intended: AtomicU64,
    sent: AtomicU64,
    /// `index + 1` with bit 63 = measured; 0 when free.
    tag: AtomicU64,
}

pub(crate) struct Shared {
    ring: Vec<Slot>,
    sink: IntervalSink,
    records: Option<Arc<Records>>,
    pub(crate) stop: AtomicBool,
    sender_done: AtomicBool,
    sent: AtomicU64,
    completed: AtomicU64,
    /// Every response decoded, matched or not: the server is alive.
    pub(crate) replies: AtomicU64,
    /// The intended send time of the last request sent.
    last_intended: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
    lost: Mutex<Option<String>>,
    sched: Mutex<Option<ScheduleStats>>,
}

impl Shared {
    pub(crate) fn lose(&self, why: String) {
        let mut l = self.lost.lock();
        if l.is_none() && !self.stop.load(Ordering::Acquire) {
            *l = Some(why);
        }
    }
    fn note_error(&self, e: String) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_error.lock() = Some(e);
        }
    }
}

pub(crate) fn resolve(target: &str) -> Result<SocketAddr, TransportError> {
    target
        .to_socket_addrs()
        .map_err(|e| TransportError::Invalid(format!("--target {target}: {e} (give HOST:PORT)")))?
        .next()
        .ok_or_else(|| TransportError::Invalid(format!("--target {target} resolved to no address")))
}

/// Opens the connections and runs the preload; returns the connected streams.
/// Kernel receive stamps are asked for after the preload, so its responses
/// are not counted; a socket that refuses them is read with user-space
/// stamps (see [`enable_stamps`]).
pub fn connect(opts: &LoadOpts, wire: &dyn Wire) -> Result<Vec<TcpStream>, TransportError> {
    check_connections(opts)?;
    let addr = resolve(&opts.target)?;
    let mut v = Vec::new();
    for _ in 0..opts.connections {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).map_err(|e| TransportError::Io {
            what: format!("connecting to {addr} (is the server running there?)"),
            source: e,
        })?;
        s.set_nodelay(true).map_err(|e| TransportError::Io { what: "setting TCP_NODELAY".into(), source: e })?;
        v.push(s);
    }
    preload(&mut v[0], wire)?;
    Ok(v)
}

/// Refuses a connection count outside 1..=4096.
pub(crate) fn check_connections(opts: &LoadOpts) -> Result<(), TransportError> {
    if opts.connections == 0 || opts.connections > 4096 {
        return Err(TransportError::Invalid(format!("--connections must be in 1..=4096, got {}", opts.connections)));
    }
    Ok(())
}

/// A load's connections, opened before the run.
pub(crate) enum Conns {
    /// TCP streams: taillab frames or an external server's own protocol.
    Tcp(Vec<TcpStream>),
    /// Connections that a thread of their own drives and reads (HTTP/2).
    Streams(Box<dyn Streams>),
}

/// Connections that carry many requests at once and are driven and read by
/// a thread of their own (HTTP/2, `http2.rs`): the sender hands each request
/// over, and each connection records its responses into its own [`Receiver`].
pub(crate) trait Streams: Send {
    /// Connections.
    fn len(&self) -> usize;
    /// Why reads are stamped in user space (`None`: the sockets give kernel stamps).
    fn fallback(&self) -> Option<String>;
    /// Takes one receive side per connection, before the run.
    fn start(&mut self, recv: Vec<Receiver>);
    /// Waits until connection `c` takes another request; false if the run
    /// stops first or the connection failed (the run is told).
    fn ready(&mut self, sh: &Shared, c: usize) -> bool;
    /// Hands request `index` with `payload` to connection `c`; `Err` when it is gone.
    fn send(&mut self, sh: &Arc<Shared>, c: usize, index: u64, payload: &[u8]) -> Result<(), String>;
    /// After the run: stops the thread and hands back each connection's records.
    fn finish(self: Box<Self>, sh: &Shared) -> Vec<RecvOut>;
}

/// Turns on kernel receive stamps on every stream (`net.stamps = kernel`);
/// the reason when a socket refused (those reads are stamped in user space).
pub fn enable_stamps(opts: &LoadOpts, streams: &[TcpStream]) -> Option<String> {
    if opts.stamps == Stamping::User {
        return Some("net.stamps = user".into());
    }
    let mut why = None;
    for s in streams {
        if let Err(e) = tstamp::enable(s.as_raw_fd()) {
            why.get_or_insert_with(|| format!("SO_TIMESTAMPING refused: {e}"));
        }
    }
    why
}

/// Sends the wire's preload requests (pipelined in chunks) and reads their
/// responses, failing on any server error.
fn preload(s: &mut TcpStream, wire: &dyn Wire) -> Result<(), TransportError> {
    let reqs = wire.preload();
    if reqs.is_empty() {
        return Ok(());
    }
    let io = |what: &str| {
        let what = what.to_string();
        move |e| TransportError::Io { what: what.clone(), source: e }
    };
    s.set_read_timeout(Some(Duration::from_secs(10))).map_err(io("setting a timeout"))?;
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    for part in reqs.chunks(256) {
        let mut out = Vec::new();
        for (i, r) in part.iter().enumerate() {
            wire.encode(i as u64, r, &mut out);
        }
        s.write_all(&out).map_err(io("sending the preload"))?;
        let mut left = part.len();
        while left > 0 {
            match wire.decode(&buf).map_err(TransportError::Protocol)? {
                Some(r) => {
                    if let Some(e) = r.error {
                        return Err(TransportError::Protocol(format!(
                            "the server refused a preload request: {e} (try --set preload=false)"
                        )));
                    }
                    buf.drain(..r.consumed);
                    left -= 1;
                }
                None => {
                    let n = s.read(&mut chunk).map_err(io("reading preload responses"))?;
                    if n == 0 {
                        return Err(TransportError::Protocol(
                            "the server closed the connection during the preload".into(),
                        ));
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
            }
        }
    }
    s.set_read_timeout(None).map_err(io("clearing a timeout"))?;
    Ok(())
}

/// Why a run stopped at a server that went silent: which server, for how long, and what it left
/// unanswered.
fn silent(target: &str, quiet_ns: u64, outstanding: u64, answered: u64) -> String {
    format!(
        "{target} did not answer: no response for {:.1} s with {outstanding} requests outstanding ({answered} answered before): the server is dead or hung",
        quiet_ns as f64 / 1e9
    )
}

/// Runs one load measurement over connections `conns`. `start_delay` is
/// called after everything is set up and returns how long from now the
/// schedule starts (the coordinator's barrier lives there).
pub(crate) fn run_load(
    spec: &RunSpec,
    opts: &LoadOpts,
    wire: Arc<dyn Wire>,
    client: Box<dyn Client>,
    conns: Conns,
    start_delay: &mut dyn FnMut() -> Result<u64, TransportError>,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadResult, TransportError> {
    spec.validate().map_err(|e| TransportError::Invalid(e.to_string()))?;
    let (k, fallback) = match &conns {
        Conns::Tcp(streams) => (streams.len(), enable_stamps(opts, streams)),
        Conns::Streams(c) => (c.len(), c.fallback()),
    };
    let slice_ns = spec.slice_ns();
    let sh = Arc::new(Shared {
        ring: (0..RING)
            .map(|_| Slot { intended: AtomicU64::new(0), sent: AtomicU64::new(0), tag: AtomicU64::new(0) })
            .collect(),
        sink: IntervalSink::new(k).watched(spec.live, spec.interval_ns),
        records: spec.keep_records.then(|| Arc::new(Records::new(spec.record_capacity()))),
        stop: AtomicBool::new(false),
        sender_done: AtomicBool::new(false),
        sent: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        replies: AtomicU64::new(0),
        last_intended: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        first_error: Mutex::new(None),
        lost: Mutex::new(None),
        sched: Mutex::new(None),
    });
    let (side, killers, receivers) = send_side(&sh, spec, opts, &wire, conns, k, &fallback)?;

    let delay = start_delay()?;
    let t0 = now_ns() + delay.max(1_000_000);
    sh.sink.start.store(t0, Ordering::Release);
    let wall_start = std::time::SystemTime::now() + Duration::from_nanos(t0.saturating_sub(now_ns()));
    let sched = Schedule::new(spec, client, t0);
    let sender = {
        let (sh, wire, spec, opts) = (sh.clone(), wire.clone(), spec.clone(), opts.clone());
        std::thread::Builder::new()
            .name("taillab-sender".into())
            .spawn(move || sender(&sh, &spec, &opts, wire.as_ref(), sched, side))
            .map_err(|e| TransportError::Io { what: "spawning the sender".into(), source: e })?
    };

    let aborted = watch_load(&sh, spec, opts, t0, progress);
    sh.stop.store(true, Ordering::Release);
    if aborted {
        // A sender blocked in a full socket buffer (hung server) or a
        // receiver mid-read wakes with an error once its socket is shut.
        for s in &killers {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    let mut outs = sender.join().unwrap_or_default();
    outs.extend(receivers.into_iter().filter_map(|r| r.join().ok()));
    let (totals, transport, transport_sum, stamps) = gather(outs, &fallback);
    let stats = sh.sched.lock().take().expect("the sender stores its schedule stats");
    let intervals = sh.sink.finish();
    let totals = totals.unwrap_or_else(|| Shard::new(0, &sh.sink, slice_ns, spec.interval_ns));
    let mut first_error = sh.first_error.lock().clone();
    let mut errors = sh.errors.load(Ordering::Relaxed);
    if let Some(bad) = stamps.bad_responses() {
        errors += stamps.unknown_id + stamps.duplicate + stamps.truncated;
        first_error = Some(match first_error {
            Some(e) => format!("{bad}; {e}"),
            None => bad,
        });
    }
    let result = RunResult {
        spec: spec.clone(),
        t0,
        measure_start: stats.measure_start.unwrap_or(t0),
        first_measured_intended: stats.first_measured_intended,
        last_measured_intended: stats.last_measured_intended,
        generated_warmup: stats.generated_warmup,
        generated_measured: stats.generated_measured,
        totals,
        intervals,
        slice_ns: stats.slice_ns,
        arrivals_per_slice: stats.arrivals_per_slice,
        errors,
        first_error,
        aborted,
        records: sh.records.clone(),
        wall_start,
        app_stats: serde_json::Value::Null,
        placement: None,
        fanout: None,
    };
    let lost = sh.lost.lock().clone();
    Ok(LoadResult {
        result,
        transport,
        transport_sum,
        lost,
        sent: sh.sent.load(Ordering::Relaxed),
        server_timed: wire.server_timed(),
        connections: k,
        stamps,
        choice: opts.choice.clone(),
    })
}

/// The sender's side of the connections: HTTP/2 streams, a polling sender, or
/// write-only clones with one receiver thread per connection (started here).
/// Also returns a clone of each TCP socket, to shut them on an abort.
#[allow(clippy::type_complexity)]
fn send_side(
    sh: &Arc<Shared>,
    spec: &RunSpec,
    opts: &LoadOpts,
    wire: &Arc<dyn Wire>,
    conns: Conns,
    k: usize,
    fallback: &Option<String>,
) -> Result<(SendSide, Vec<TcpStream>, Vec<std::thread::JoinHandle<RecvOut>>), TransportError> {
    let slice_ns = spec.slice_ns();
    let mut writers = Vec::with_capacity(k);
    let mut killers = Vec::with_capacity(k);
    let mut receivers = Vec::with_capacity(k);
    let clone =
        |s: &TcpStream| s.try_clone().map_err(|e| TransportError::Io { what: "cloning a socket".into(), source: e });
    let side = match conns {
        Conns::Streams(mut c) => {
            c.start((0..k).map(|c| Receiver::new(sh, spec, c, k, slice_ns, fallback)).collect());
            SendSide::H2(c)
        }
        Conns::Tcp(streams) => {
            for s in &streams {
                killers.push(clone(s)?);
            }
            match opts.receive {
                Receive::Sender => SendSide::Polling(
                    Polling::new(sh, spec, streams, slice_ns, fallback)
                        .map_err(|e| TransportError::Io { what: "setting up the polling sender".into(), source: e })?,
                ),
                Receive::Threads => {
                    for (c, s) in streams.into_iter().enumerate() {
                        writers.push(clone(&s)?);
                        // The timeout only lets an idle receiver notice the end of the run.
                        s.set_read_timeout(Some(Duration::from_millis(50)))
                            .map_err(|e| TransportError::Io { what: "setting a read timeout".into(), source: e })?;
                        let (sh, wire, spec, cpus) = (sh.clone(), wire.clone(), spec.clone(), opts.cpus.clone());
                        let r = Receiver::new(&sh, &spec, c, k, slice_ns, fallback);
                        receivers.push(
                            std::thread::Builder::new()
                                .name(format!("taillab-recv-{c}"))
                                .spawn(move || receiver(&sh, &cpus, wire.as_ref(), s, r))
                                .map_err(|e| TransportError::Io { what: "spawning a receiver".into(), source: e })?,
                        );
                    }
                    SendSide::Writers(writers)
                }
            }
        }
    };
    Ok((side, killers, receivers))
}

/// Reports progress every 20 ms until every sent request is answered; ends the
/// run early (returns `true`) when the connection is lost, the server stops
/// answering for `dead_after`, or the run is past its drain deadline or hopeless.
fn watch_load(sh: &Shared, spec: &RunSpec, opts: &LoadOpts, t0: u64, progress: &mut dyn FnMut(Progress)) -> bool {
    let expected = spec.expected_total_ns();
    let mut watch = spec.drain_watch(t0);
    let planned = spec.record_capacity();
    let (mut last_replies, mut last_progress_at) = (0u64, now_ns());
    loop {
        std::thread::sleep(Duration::from_millis(20));
        // Follows wall-clock steps: kernel stamps are on that clock.
        tstamp::refresh_offset();
        sh.sink.collect();
        let now = now_ns();
        let done = sh.completed.load(Ordering::Acquire);
        let sent = sh.sent.load(Ordering::Acquire);
        progress(Progress {
            completed: done,
            planned,
            elapsed_ns: now.saturating_sub(t0),
            expected_ns: expected,
            measuring: sh.sink.measuring(now),
            in_flight: spec.live.then(|| sent.saturating_sub(done)),
            interval: sh.sink.latest(),
            warmup_interval: sh.sink.latest_warmup(),
        });
        if sh.sender_done.load(Ordering::Acquire) && done >= sh.sent.load(Ordering::Acquire) {
            break;
        }
        if sh.lost.lock().is_some() {
            return true;
        }
        // Any response counts as a sign of life, also one whose slot a
        // later request took (a hopelessly saturated run).
        let replies = sh.replies.load(Ordering::Acquire);
        if replies != last_replies || sent == done {
            (last_replies, last_progress_at) = (replies, now);
        } else if now - last_progress_at > opts.dead_after_ns {
            sh.lose(silent(&opts.target, now - last_progress_at, sent - done, done));
            return true;
        }
        let backlog = || {
            let last = sh.last_intended.load(Ordering::Relaxed).saturating_sub(t0);
            spec.backlog(sent, last, done)
        };
        if now > watch.deadline() || watch.hopeless(now, done, backlog) {
            // The drain gives up on a backlog that is not being served. A server that answers
            // slowly is saturated (the run's verdict says so); one that has answered nothing
            // for a drain window is dead or hung, and that is an error, not a result, even
            // when the schedule ended before `net.dead_after` ran out.
            let quiet = now - last_progress_at;
            if sent > done && quiet >= taillab_core::drain::WINDOW_NS.min(opts.dead_after_ns) {
                sh.lose(silent(&opts.target, quiet, sent - done, done));
            }
            return true;
        }
    }
    false
}

/// Adds up what the sender and receivers measured: their shards, transport
/// histograms and sums, and kernel stamp counts.
fn gather(outs: Vec<RecvOut>, fallback: &Option<String>) -> (Option<Shard>, Histogram<u64>, u128, ClientStamps) {
    let mut totals: Option<Shard> = None;
    let mut transport = new_hist();
    let mut transport_sum = 0u128;
    let mut stamps = ClientStamps { fallback: fallback.clone(), ..Default::default() };
    for (shard, th, ts, st) in outs {
        transport.add(&th).expect("auto-resizing histograms add");
        transport_sum += ts;
        stamps.absorb(&st);
        match &mut totals {
            None => totals = Some(shard),
            Some(t) => t.absorb(&shard),
        }
    }
    (totals, transport, transport_sum, stamps)
}

/// An auto-resizing histogram of ns: 1 ns to 60 s at 3 significant digits,
/// as the collector's.
pub fn new_hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// `--client-cpus`: thread `i` (0 = the sender) on `cpus[i mod len]`. The
/// list was checked before the run, so a failure here is only reported.
pub(crate) fn place(cpus: &[usize], i: usize) {
    if let Err(e) = taillab_core::harness::place_thread_on(cpus, None, i) {
        eprintln!("taillab load: {e}");
    }
}

/// How the sender reaches its connections.
enum SendSide {
    /// Write-only clones; receiver threads read.
    Writers(Vec<TcpStream>),
    /// The sender reads responses itself (`--receive sender`).
    Polling(Polling),
    /// HTTP/2 connections, driven and read by their own thread.
    H2(Box<dyn Streams>),
}

fn sender(
    sh: &Arc<Shared>,
    spec: &RunSpec,
    opts: &LoadOpts,
    wire: &dyn Wire,
    mut sched: Schedule,
    mut io: SendSide,
) -> Vec<RecvOut> {
    set_timer_slack_1ns();
    place(&opts.cpus, 0);
    let k = match &io {
        SendSide::Writers(w) => w.len(),
        SendSide::Polling(p) => p.streams.len(),
        SendSide::H2(h) => h.len(),
    };
    // HTTP/2 coalesces frames itself: a request is handed over alone.
    let batch_cap = if matches!(io, SendSide::H2(_)) { 1 } else { opts.max_batch.max(1) };
    let (mode, max_batch) = (opts.wait, batch_cap);
    let mut bufs: Vec<Vec<u8>> = (0..k).map(|_| Vec::with_capacity(64 * 1024)).collect();
    let mut payload = Vec::with_capacity(4096);
    let mut pending: Option<(taillab_core::harness::Item, Vec<u8>)> = None;
    let mut batch: Vec<taillab_core::harness::Item> = Vec::with_capacity(max_batch);
    'run: loop {
        if sh.stop.load(Ordering::Relaxed) {
            break;
        }
        let (first, p) = match pending.take() {
            Some(x) => x,
            None => match sched.next(&mut payload, &sh.sink) {
                Some(it) => (it, std::mem::take(&mut payload)),
                None => break,
            },
        };
        match &mut io {
            SendSide::Writers(_) | SendSide::H2(_) => {
                wait_until(first.intended, mode, spec.spin_margin_ns);
            }
            SendSide::Polling(p) => p.wait_until(sh, wire, first.intended, mode, spec.spin_margin_ns),
        }
        batch.clear();
        wire.encode(first.index, &p, &mut bufs[(first.index % k as u64) as usize]);
        payload = p;
        batch.push(first);
        // Late? Everything already due goes out in this write too.
        while batch.len() < max_batch {
            let Some(it) = sched.next(&mut payload, &sh.sink) else {
                break;
            };
            if it.intended > now_ns() {
                pending = Some((it, std::mem::take(&mut payload)));
                break;
            }
            wire.encode(it.index, &payload, &mut bufs[(it.index % k as u64) as usize]);
            batch.push(it);
        }
        for it in &batch {
            if !await_slot(sh, wire, &mut io, it.index) {
                break 'run;
            }
        }
        if let SendSide::H2(h) = &mut io {
            if !h.ready(sh, (batch[0].index % k as u64) as usize) {
                break 'run;
            }
        }
        let sent = now_ns();
        for it in &batch {
            let slot = &sh.ring[it.index as usize % RING];
            slot.intended.store(it.intended, Ordering::Relaxed);
            slot.sent.store(sent, Ordering::Relaxed);
            slot.tag.store((it.index + 1) | ((it.measured as u64) << 63), Ordering::Release);
        }
        sh.last_intended.store(batch[batch.len() - 1].intended, Ordering::Relaxed);
        sh.sent.fetch_add(batch.len() as u64, Ordering::Release);
        for (c, b) in bufs.iter_mut().enumerate() {
            if b.is_empty() {
                continue;
            }
            let res = match &mut io {
                SendSide::Writers(w) => w[c].write_all(b),
                SendSide::Polling(p) => p.write(sh, wire, c, b),
                SendSide::H2(h) => h.send(sh, c, batch[0].index, b).map_err(std::io::Error::other),
            };
            if let Err(e) = res {
                sh.lose(format!("sending on connection {c} failed: {e} (the server closed it or died)"));
                break 'run;
            }
            b.clear();
        }
    }
    *sh.sched.lock() = Some(sched.stats());
    sh.sender_done.store(true, Ordering::Release);
    match io {
        SendSide::Writers(_) => Vec::new(),
        SendSide::H2(h) => {
            while !sh.stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(1));
            }
            h.finish(sh)
        }
        SendSide::Polling(mut p) => {
            // The stragglers, until the run is over.
            while !sh.stop.load(Ordering::Acquire) {
                let wait = if mode == WaitMode::Spin { 0 } else { 1_000_000 };
                if !p.poll(sh, wire, wait) {
                    std::hint::spin_loop();
                }
            }
            p.finish(sh)
        }
    }
}

/// Waits until request `index`'s in-flight slot is free (RING requests in
/// flight: the oldest one's answer frees it); false if the run stops first.
fn await_slot(sh: &Shared, wire: &dyn Wire, io: &mut SendSide, index: u64) -> bool {
    let slot = &sh.ring[index as usize % RING];
    while slot.tag.load(Ordering::Acquire) != 0 {
        if sh.stop.load(Ordering::Acquire) {
            return false;
        }
        match io {
            SendSide::Writers(_) | SendSide::H2(_) => std::thread::sleep(Duration::from_micros(50)),
            SendSide::Polling(p) => {
                p.poll(sh, wire, 100_000);
            }
        }
    }
    true
}

pub(crate) type RecvOut = (Shard, Histogram<u64>, u128, ClientStamps);

/// One connection's receive side: matches responses to their in-flight
/// slots and records them. Used by a receiver thread or by the polling
/// sender.
pub(crate) struct Receiver {
    c: usize,
    k: usize,
    shard: Shard,
    th: Histogram<u64>,
    tsum: u128,
    buf: Vec<u8>,
    cm: CmsgBuf,
    stamps: ClientStamps,
    /// In-order protocols answer request c, c+k, c+2k, … on this connection.
    next_in_order: u64,
    /// The read that completed the last HTTP/2 response.
    last_read: Option<u64>,
}

impl Receiver {
    pub(crate) fn new(
        sh: &Shared,
        spec: &RunSpec,
        c: usize,
        k: usize,
        slice_ns: u64,
        fallback: &Option<String>,
    ) -> Self {
        Receiver {
            c,
            k,
            shard: Shard::new(c, &sh.sink, slice_ns, spec.interval_ns),
            th: new_hist(),
            tsum: 0,
            buf: Vec::with_capacity(64 * 1024),
            cm: CmsgBuf::default(),
            stamps: ClientStamps { fallback: fallback.clone(), ..Default::default() },
            next_in_order: c as u64,
            last_read: None,
        }
    }

    /// The connection ended: a half frame still in the buffer was cut short.
    fn end(&mut self) {
        if !self.buf.is_empty() {
            self.stamps.truncated += 1;
            self.buf.clear();
        }
    }

    /// Takes `bytes` that a read returned at `user` with the kernel stamp
    /// `k` of their last segment (every response they finish had arrived
    /// by then). `Err` is garbage from the server.
    fn take(
        &mut self,
        sh: &Shared,
        wire: &dyn Wire,
        bytes: &[u8],
        k: Option<KernelStamp>,
        user: u64,
    ) -> Result<(), String> {
        self.buf.extend_from_slice(bytes);
        let mut off = 0;
        let mut done = 0u64;
        let res = loop {
            let r = match wire.decode(&self.buf[off..]) {
                Ok(Some(r)) => r,
                Ok(None) => break Ok(()),
                Err(e) => break Err(format!("garbage from the server on connection {}: {e}", self.c)),
            };
            off += r.consumed;
            done += 1;
            self.complete(sh, &r, k, user);
        };
        if k.is_some() && done > 1 {
            self.stamps.shared += done - 1;
        }
        sh.replies.fetch_add(done, Ordering::Release);
        self.buf.drain(..off);
        res
    }

    /// Matches one response to its request and records it.
    fn complete(&mut self, sh: &Shared, r: &crate::wire::Reply, k: Option<KernelStamp>, user: u64) {
        let id = r.id.unwrap_or_else(|| {
            let i = self.next_in_order;
            self.next_in_order += self.k as u64;
            i
        });
        let slot = &sh.ring[id as usize % RING];
        let tag = slot.tag.load(Ordering::Acquire);
        if tag & !(1 << 63) != id + 1 {
            // Every request's slot is filled before it is counted as sent.
            if id >= sh.sent.load(Ordering::Acquire) {
                self.stamps.unknown_id += 1;
            } else {
                self.stamps.duplicate += 1;
            }
            return;
        }
        let (intended, sent) = (slot.intended.load(Ordering::Relaxed), slot.sent.load(Ordering::Relaxed));
        slot.tag.store(0, Ordering::Release);
        let measured = tag >> 63 == 1;
        let started = sent + r.queue_ns;
        let finished = started + r.service_ns;
        // The server's durations are exact; placed from `sent`, `finished`
        // is never later than the true one, so a kernel stamp before it is wrong.
        let (completed, clock, fate) = tstamp::judge(k, user, finished);
        self.stamps.completed.count(clock, fate, k.is_some_and(|k| k.hw_unsynced));
        let lag = match r.server_recv {
            Some((c, lag)) => {
                self.stamps.enqueued.count_clock(c);
                lag.min(r.queue_ns)
            }
            None => 0,
        };
        let st = Stamps {
            intended,
            sent,
            enqueued: sent,
            started,
            finished,
            completed: completed.max(finished),
            enqueued_user: sent + lag,
            completed_user: user.max(finished),
        };
        if let Some(e) = &r.error {
            sh.note_error(e.clone());
        }
        if let Some(rec) = &sh.records {
            rec.set(id, &st, self.c, measured);
        }
        if measured {
            let t = st.completed - finished;
            self.th.saturating_record(t);
            self.tsum += t as u128;
        }
        self.shard.record(&st, measured, &sh.sink);
        sh.completed.fetch_add(1, Ordering::Release);
    }

    /// Records HTTP/2 request `index`, whose response ended with status
    /// `label` (and `error` if it failed) after the connection's read
    /// number `read`, stamped `k` by the kernel and `user` here.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn complete_h2(
        &mut self,
        sh: &Shared,
        index: u64,
        label: String,
        error: Option<String>,
        k: Option<KernelStamp>,
        user: u64,
        read: u64,
    ) {
        if k.is_some() && self.last_read == Some(read) {
            self.stamps.shared += 1;
        }
        self.last_read = Some(read);
        *self.stamps.statuses.entry(label).or_insert(0) += 1;
        let r =
            crate::wire::Reply { consumed: 0, id: Some(index), queue_ns: 0, service_ns: 0, server_recv: None, error };
        self.complete(sh, &r, k, user);
    }

    pub(crate) fn finish(mut self, sh: &Shared) -> RecvOut {
        self.shard.flush(&sh.sink);
        (self.shard, self.th, self.tsum, self.stamps)
    }
}

/// What one `read` of a connection gave its [`Receiver`].
enum Got {
    /// This many bytes, taken.
    Bytes(usize),
    /// Nothing now (would block, timed out, interrupted).
    Nothing,
    /// The connection is over: closed, failed or sent garbage (the run is
    /// told why unless it is stopping anyway).
    Over,
}

/// Reads `s` once into `chunk` and feeds `r`: the one place that decides
/// what a read result means, for receiver threads and the polling sender.
fn read_once(sh: &Shared, wire: &dyn Wire, s: &TcpStream, r: &mut Receiver, chunk: &mut [u8]) -> Got {
    use std::io::ErrorKind;
    let c = r.c;
    let why = match tstamp::recv(s.as_raw_fd(), chunk, 0, &mut r.cm) {
        Ok((0, _)) => {
            r.end();
            (!sh.stop.load(Ordering::Acquire)).then(|| format!("the server closed connection {c}"))
        }
        Ok((n, k)) => match r.take(sh, wire, &chunk[..n], k, now_ns()) {
            Ok(()) => return Got::Bytes(n),
            Err(e) => Some(e),
        },
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {
            return Got::Nothing
        }
        Err(e) => {
            // A server that closed while requests were still on their way answers them with
            // a reset, which can reach the socket before the half frame it left was read:
            // the frame was cut short all the same.
            r.end();
            Some(format!("reading connection {c} failed: {e}"))
        }
    };
    if let Some(why) = why {
        sh.lose(why);
    }
    Got::Over
}

/// A receiver thread: blocks in `read` on its connection.
fn receiver(sh: &Shared, cpus: &[usize], wire: &dyn Wire, s: TcpStream, mut r: Receiver) -> RecvOut {
    set_timer_slack_1ns();
    place(cpus, r.c + 1);
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        match read_once(sh, wire, &s, &mut r, &mut chunk) {
            Got::Bytes(_) => {}
            // The read timeout lets an idle receiver notice the end of the run.
            Got::Nothing if !sh.stop.load(Ordering::Acquire) => {}
            Got::Nothing | Got::Over => break,
        }
    }
    r.finish(sh)
}

/// `--receive sender`: the sender's connections, read without blocking
/// whenever the sender would otherwise wait.
struct Polling {
    streams: Vec<TcpStream>,
    recv: Vec<Receiver>,
    live: Vec<bool>,
    /// Which connections have bytes (also the sleep until a response or
    /// the next send time, hybrid).
    ep: Epoll,
    events: Vec<libc::epoll_event>,
    chunk: Vec<u8>,
}

impl Polling {
    fn new(
        sh: &Shared,
        spec: &RunSpec,
        streams: Vec<TcpStream>,
        slice_ns: u64,
        fallback: &Option<String>,
    ) -> std::io::Result<Self> {
        let k = streams.len();
        let ep = Epoll::new()?;
        for (c, s) in streams.iter().enumerate() {
            s.set_nonblocking(true)?;
            ep.add(s.as_raw_fd(), c as u64)?;
        }
        Ok(Polling {
            recv: (0..k).map(|c| Receiver::new(sh, spec, c, k, slice_ns, fallback)).collect(),
            live: vec![true; k],
            streams,
            ep,
            events: crate::epoll::events(),
            chunk: vec![0u8; 64 * 1024],
        })
    }

    /// Reads what connection `c` has; true if anything arrived.
    fn read(&mut self, sh: &Shared, wire: &dyn Wire, c: usize) -> bool {
        let mut got = false;
        while self.live[c] {
            match read_once(sh, wire, &self.streams[c], &mut self.recv[c], &mut self.chunk) {
                // A short read emptied the socket.
                Got::Bytes(n) if n < self.chunk.len() => return true,
                Got::Bytes(_) => got = true,
                Got::Nothing => return got,
                Got::Over => {
                    self.live[c] = false;
                    self.ep.del(self.streams[c].as_raw_fd());
                }
            }
        }
        got
    }

    /// Reads every connection that has something, waiting up to
    /// `timeout_ns` for one to; true if anything arrived.
    ///
    /// Spinning asks epoll, not the socket: a `recvmsg` that finds nothing
    /// still takes the socket's lock, and a segment arriving meanwhile
    /// waits in the backlog until it is released.
    fn poll(&mut self, sh: &Shared, wire: &dyn Wire, timeout_ns: u64) -> bool {
        let n = self.ep.wait(&mut self.events, timeout_ns);
        let mut got = false;
        for i in 0..n {
            got |= self.read(sh, wire, crate::epoll::token(&self.events, i) as usize);
        }
        got
    }

    /// Serves responses until `t`: spin polls; hybrid sleeps in epoll until
    /// a response or `t − margin`, then polls.
    fn wait_until(&mut self, sh: &Shared, wire: &dyn Wire, t: u64, mode: WaitMode, margin: u64) {
        loop {
            let now = now_ns();
            if now >= t {
                return;
            }
            let sleep = if mode == WaitMode::Spin { 0 } else { (t - now).saturating_sub(margin) };
            if !self.poll(sh, wire, sleep) {
                std::hint::spin_loop();
            }
        }
    }

    /// Writes `b` on connection `c`, reading responses while the socket is
    /// full (a server blocked on its own writes to us must be drained).
    fn write(&mut self, sh: &Shared, wire: &dyn Wire, c: usize, b: &[u8]) -> std::io::Result<()> {
        let mut off = 0;
        while off < b.len() {
            match self.streams[c].write(&b[off..]) {
                Ok(n) => off += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if sh.stop.load(Ordering::Acquire) {
                        return Err(e);
                    }
                    self.poll(sh, wire, 100_000);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn finish(self, sh: &Shared) -> Vec<RecvOut> {
        self.recv.into_iter().map(|r| r.finish(sh)).collect()
    }
}
