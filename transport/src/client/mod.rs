//! `taillab load`: the open-loop client over TCP.
//!
//! Threads and why:
//! - **senders** (`net.senders`, one by default), each a *lane* ([`lane`]) with nothing shared
//!   per request: sender `j` owns the connections `c` with `c mod senders = j`, draws its share
//!   of the schedule ([`taillab_core::arrival::Share`]: an independent Poisson stream at
//!   rate/senders, any other process dealt in order, so the union is exactly the configured
//!   process; with one sender it is the integrated harness's own schedule, so a seed gives the
//!   same arrivals and requests in every configuration), waits for each intended time, stamps
//!   `sent` and writes ([`send`]). A sender never waits for a response, so a slow or stalled
//!   server can never hold the schedule back (no coordinated omission).
//! - responses are read one of two ways (`--receive`, [`receive`]):
//!   - **sender** (the default): each sender reads its own connections without blocking
//!     whenever it would otherwise wait for the next send time (spin: epoll without sleeping;
//!     hybrid: it sleeps in epoll until a response arrives or the spin margin before the next
//!     send). On a small host nothing has to be woken up to take a response, which is most of
//!     what a loopback round trip costs. Reading a burst of responses can delay the next send
//!     a little; that shows up as send lag, which is measured and charged.
//!   - **threads**: one receiver thread per connection blocks in `read`; costs a wake-up per
//!     response.
//!
//!   Either way `completed` is the kernel's receive stamp of the last segment the read
//!   returned, and each connection records into its own [`Shard`]; the shards' histograms are
//!   added after the run (never averaged), as are the lanes' schedules and records.
//! - the calling thread collects interval histograms, drives the progress callback, and
//!   watches for a dead server ([`watch`]).
//!
//! A lane's sender and receive sides meet only in its ring of in-flight slots indexed by the
//! lane's request id (intended, sent, tag), written before the request's bytes hit the socket
//! and read when the response comes back, and — for in-order protocols — each connection's
//! queue of ids in the order they went out.
//!
//! Stamps on the client host: `intended`, `sent`, `completed` (and the user-space
//! `completed_user`). The server's `queue`, `service` and receive lag come back as durations;
//! the client places them as `enqueued = sent`, `enqueued_user = enqueued + lag`, `started =
//! enqueued + queue`, `finished = started + service`, so every derived duration is exact and
//! `transport = completed − finished` is the network's (both directions') share. See
//! docs/protocol.md.
//!
//! Bad responses never become latencies: one for an id never sent, a second one for the same
//! request, or a frame cut short when the server closes are counted and named
//! (`transport.bad_responses`, the `errors` check); a kernel stamp outside `[finished,
//! completed_user]` is refused and counted, and the user-space stamp stands in.

mod lane;
mod merge;
mod receive;
mod send;
mod stamps;
mod watch;

pub use stamps::ClientStamps;

pub(crate) use lane::Shared;
pub(crate) use receive::{Receiver, RecvOut};

use crate::tstamp;
use crate::wire::Wire;
use crate::TransportError;
use hdrhistogram::Histogram;
use receive::Polling;
use send::{SelfCost, SendOpts, SendSide};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use taillab_core::arrival::Share;
use taillab_core::clock::{now_ns, WaitMode};
use taillab_core::collector::IntervalSink;
use taillab_core::config::auto::{self, TcpChoice};
use taillab_core::config::{RunConfig, Spread, Stamping};
use taillab_core::harness::{Progress, Records, Schedule};
use taillab_core::sections::transport::SenderShare;
use taillab_core::{Client, RunResult, RunSpec};

/// How the load client connects and when it gives up.
#[derive(Debug, Clone)]
pub struct LoadOpts {
    /// The server, `HOST:PORT` (`net.target`).
    pub target: String,
    /// TCP connections to open, 1..=4096 (`net.connections`).
    pub connections: usize,
    /// Sender threads, each with its own connections and share of the schedule (`net.senders`).
    pub senders: usize,
    /// Which connection a request goes out on (`net.spread`).
    pub spread: Spread,
    /// The capped mode's limit of requests in flight per connection (0: open loop).
    pub max_in_flight: usize,
    /// No response for this long while requests are outstanding: the server is declared dead.
    pub dead_after_ns: u64,
    /// Most requests coalesced into one write when a sender is late.
    pub max_batch: usize,
    /// Who reads responses: the senders while they wait, or receiver threads.
    pub receive: Receive,
    /// How the senders wait for send times (spin or hybrid).
    pub wait: WaitMode,
    /// Kernel or user-space receive stamps.
    pub stamps: Stamping,
    /// The client's threads go here: sender `j` on the `j`-th CPU, receiver threads on the
    /// next ones, round-robin (empty: not pinned).
    pub cpus: Vec<usize>,
    /// The resolved TCP settings and why (printed at start, recorded).
    pub choice: TcpChoice,
}

pub use taillab_core::config::Receive;

impl LoadOpts {
    /// The client side of `cfg` (`net.target` must be set). Settings left to the host are
    /// chosen here ([`auto::resolve`]); `server_affinity` is the CPUs of a server found on
    /// this host, if any.
    pub fn from_config(cfg: &RunConfig, server_affinity: Option<Vec<usize>>) -> Result<LoadOpts, TransportError> {
        let n = &cfg.net;
        let target = n.target.clone().ok_or_else(|| {
            TransportError::Invalid("say where the server is: --target HOST:PORT (net.target)".into())
        })?;
        taillab_core::config::check_senders(n).map_err(|e| TransportError::Invalid(e.to_string()))?;
        let choice = auto::resolve(cfg, &auto::HostFacts::here(1, server_affinity));
        if n.max_in_flight > 0 && choice.receive != Receive::Sender {
            return Err(TransportError::Invalid(
                "net.max_in_flight (the capped mode) needs the senders to read their own responses: --receive sender"
                    .into(),
            ));
        }
        Ok(LoadOpts {
            target,
            connections: n.connections,
            senders: n.senders,
            spread: n.spread,
            max_in_flight: n.max_in_flight,
            dead_after_ns: n.dead_after.0,
            max_batch: n.max_batch,
            receive: choice.receive,
            wait: if choice.client_wait == WaitMode::Spin { WaitMode::Spin } else { WaitMode::Hybrid },
            stamps: n.stamps,
            cpus: n.client_cpus.0.clone(),
            choice,
        })
    }

    /// Where the senders run, in one line, when there are more of them than CPUs to pin them
    /// to one each (they then share CPUs and delay each other's sends).
    pub fn placement_warning(&self) -> Option<String> {
        let cpus = if self.cpus.is_empty() { auto::affinity(0).map_or(0, |c| c.len()) } else { self.cpus.len() };
        (self.senders > cpus.max(1)).then(|| {
            let place = if self.cpus.is_empty() {
                format!("unpinned, on the {cpus} CPUs this process may use")
            } else {
                let list: Vec<String> = (0..self.senders).map(|j| format!("{j}→{}", self.cpus[j % self.cpus.len()])).collect();
                format!("sender→CPU {}", list.join(" "))
            };
            format!(
                "warning: {} senders on {cpus} CPU(s) ({place}): senders that share a CPU delay each other's sends; give --client-cpus one CPU per sender",
                self.senders
            )
        })
    }

    /// The CPU sender `j` is pinned to.
    fn sender_cpu(&self, j: usize) -> Option<usize> {
        (!self.cpus.is_empty()).then(|| self.cpus[j % self.cpus.len()])
    }

    /// The CPU receiver thread `r` (counted over the whole client) is pinned to: the CPUs
    /// after the senders', round-robin.
    fn receiver_cpu(&self, r: usize) -> Option<usize> {
        (!self.cpus.is_empty()).then(|| self.cpus[(self.senders + r) % self.cpus.len()])
    }
}

/// What one sender did: its lane's figures for `transport.senders`.
#[derive(Debug, Clone)]
pub struct SenderReport {
    /// The sender's number.
    pub sender: usize,
    /// Where it was pinned.
    pub cpu: Option<usize>,
    /// Its connections.
    pub connections: usize,
    /// Requests it wrote (warmup included).
    pub sent: u64,
    /// Its own cost.
    cost: SelfCost,
    /// Its receive sides' measurements added up.
    measured: u64,
    send_lag: taillab_core::collector::MetricStats,
    recv_lag: taillab_core::collector::MetricStats,
}

impl SenderReport {
    /// The `transport.senders` row of client `client`.
    pub fn share(&self, client: usize) -> SenderShare {
        let wall = self.cost.wall_ns.max(1) as f64;
        SenderShare {
            client,
            sender: self.sender,
            cpu: self.cpu,
            connections: self.connections,
            sent: self.sent,
            measured: self.measured,
            writes: self.cost.writes,
            cpu_pct: 100.0 * self.cost.cpu_ns as f64 / wall,
            busy_pct: 100.0 * (1.0 - self.cost.idle_ns as f64 / wall).clamp(0.0, 1.0),
            send_lag_ns: self.send_lag.clone(),
            recv_lag_ns: self.recv_lag.clone(),
        }
    }
}

/// A load run's result: the run, the transport-time histogram, and why it stopped early if
/// the server went away.
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
    /// Responses carried the server's queue and service times (a taillab server); without
    /// them only sojourn and send lag mean anything.
    pub server_timed: bool,
    /// Connections the run used.
    pub connections: usize,
    /// Where the stamps came from, and the responses refused.
    pub stamps: ClientStamps,
    /// The TCP settings the client ran with.
    pub choice: TcpChoice,
    /// Each sender's share of the work and its cost.
    pub senders: Vec<SenderReport>,
    /// The capped mode's limit (0: the run was open loop).
    pub max_in_flight: usize,
}

pub(crate) fn resolve(target: &str) -> Result<SocketAddr, TransportError> {
    target
        .to_socket_addrs()
        .map_err(|e| TransportError::Invalid(format!("--target {target}: {e} (give HOST:PORT)")))?
        .next()
        .ok_or_else(|| TransportError::Invalid(format!("--target {target} resolved to no address")))
}

/// Opens the connections and runs the preload; returns the connected streams. Kernel receive
/// stamps are asked for after the preload, so its responses are not counted; a socket that
/// refuses them is read with user-space stamps (see [`enable_stamps`]).
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

/// Connections that carry many requests at once and are driven and read by a thread of their
/// own (HTTP/2, `http2.rs`): the sender hands each request over, and each connection records
/// its responses into its own [`Receiver`].
pub(crate) trait Streams: Send {
    /// Connections.
    fn len(&self) -> usize;
    /// Why reads are stamped in user space (`None`: the sockets give kernel stamps).
    fn fallback(&self) -> Option<String>;
    /// Takes one receive side per connection, before the run.
    fn start(&mut self, recv: Vec<Receiver>);
    /// Waits until connection `c` takes another request; false if the run stops first or the
    /// connection failed (the run is told).
    fn ready(&mut self, sh: &Shared, c: usize) -> bool;
    /// Hands request `index` with `payload` to connection `c`; `Err` when it is gone.
    fn send(&mut self, sh: &Arc<Shared>, c: usize, index: u64, payload: &[u8]) -> Result<(), String>;
    /// After the run: stops the thread and hands back each connection's records.
    fn finish(self: Box<Self>, sh: &Shared) -> Vec<RecvOut>;
}

/// Turns on kernel receive stamps on every stream (`net.stamps = kernel`); the reason when a
/// socket refused (those reads are stamped in user space).
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

/// Sends the wire's preload requests (pipelined in chunks) and reads their responses,
/// failing on any server error.
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
                    let n = s.read(&mut chunk).map_err(|e| match e.kind() {
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => TransportError::Protocol(format!(
                            "the server accepted the connection but did not answer the preload ({} requests that fill it before the run) within 10 s: is it the server --app names (`{}`)? (--set preload=false skips the preload)",
                            reqs.len(),
                            wire.name()
                        )),
                        _ => io("reading preload responses")(e),
                    })?;
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

/// The request stream sender `j` draws from, given the client's `stream`: the client's own
/// for sender 0 (so one sender sends exactly what an integrated run would), a derived one for
/// the others.
pub fn sender_stream(stream: u64, j: usize) -> u64 {
    if j == 0 {
        stream
    } else {
        taillab_core::arrival::derive_seed(stream, 0x5E4D_0000 + j as u64)
    }
}

/// One lane as it runs: its shared state, its sender thread and its receiver threads.
struct Running {
    sh: Arc<Shared>,
    sender: std::thread::JoinHandle<(Vec<RecvOut>, SelfCost)>,
    receivers: Vec<std::thread::JoinHandle<RecvOut>>,
    connections: usize,
}

/// Runs one load measurement over connections `conns` with one request source per sender
/// (`clients`, `opts.senders` of them). `start_delay` is called after everything is set up
/// and returns how long from now the schedule starts (the coordinator's barrier lives there).
pub(crate) fn run_load(
    spec: &RunSpec,
    opts: &LoadOpts,
    wire: Arc<dyn Wire>,
    clients: Vec<Box<dyn Client>>,
    conns: Conns,
    start_delay: &mut dyn FnMut() -> Result<u64, TransportError>,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadResult, TransportError> {
    spec.validate().map_err(|e| TransportError::Invalid(e.to_string()))?;
    let m = clients.len();
    let (k, fallback) = match &conns {
        Conns::Tcp(streams) => (streams.len(), enable_stamps(opts, streams)),
        Conns::Streams(c) => (c.len(), c.fallback()),
    };
    if m == 0 || k < m || (m > 1 && matches!(conns, Conns::Streams(_))) {
        return Err(TransportError::Invalid(format!(
            "{m} senders over {k} connections: each sender needs connections of its own (HTTP/2 and gRPC runs have one sender)"
        )));
    }
    let sink = Arc::new(IntervalSink::new(k).watched(spec.live, spec.interval_ns));
    let (lanes, killers) = lanes(spec, opts, &wire, conns, m, &sink, &fallback)?;
    let delay = start_delay()?;
    let t0 = now_ns() + delay.max(1_000_000);
    sink.start.store(t0, Ordering::Release);
    let wall_start = std::time::SystemTime::now() + Duration::from_nanos(t0.saturating_sub(now_ns()));
    let mut running = Vec::with_capacity(m);
    for (j, ((sh, side, receivers), client)) in lanes.into_iter().zip(clients).enumerate() {
        let share = Share::new(j, m).expect("j < m");
        let sched = Schedule::share(spec, client, t0, share);
        let o = SendOpts {
            wait: opts.wait,
            spin_margin_ns: spec.spin_margin_ns,
            max_batch: opts.max_batch,
            spread: opts.spread,
            max_in_flight: opts.max_in_flight,
            cpu: opts.sender_cpu(j),
        };
        let (sh2, wire2) = (sh.clone(), wire.clone());
        let connections = sh.conns.len();
        let sender = std::thread::Builder::new()
            .name(if m == 1 { "taillab-sender".into() } else { format!("taillab-sender-{j}") })
            .spawn(move || send::sender(&sh2, &o, wire2.as_ref(), sched, side))
            .map_err(|e| TransportError::Io { what: "spawning a sender".into(), source: e })?;
        running.push(Running { sh, sender, receivers, connections });
    }
    let shs: Vec<Arc<Shared>> = running.iter().map(|r| r.sh.clone()).collect();
    let aborted = watch::watch_load(&shs, spec, opts, t0, progress);
    for sh in &shs {
        sh.stop.store(true, Ordering::Release);
    }
    if aborted {
        // A sender blocked in a full socket buffer (hung server) or a receiver mid-read wakes
        // with an error once its socket is shut.
        for s in &killers {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
    let done = running.into_iter().map(|r| merge::Lane::join(r.sh, r.sender, r.receivers, r.connections)).collect();
    Ok(merge::result(spec, opts, &wire, done, &sink, t0, wall_start, aborted, &fallback, k))
}

/// A lane before it runs: its state, its sender's side of its connections and its receiver
/// threads (started here).
type LaneParts = (Arc<Shared>, SendSide, Vec<std::thread::JoinHandle<RecvOut>>);

/// Splits the connections over `m` lanes (connection `c` to lane `c mod m`) and sets each up:
/// HTTP/2 streams (one lane), a polling sender, or write-only clones with one receiver thread
/// per connection. Also returns a clone of every TCP socket, to shut them on an abort.
fn lanes(
    spec: &RunSpec,
    opts: &LoadOpts,
    wire: &Arc<dyn Wire>,
    conns: Conns,
    m: usize,
    sink: &Arc<IntervalSink>,
    fallback: &Option<String>,
) -> Result<(Vec<LaneParts>, Vec<TcpStream>), TransportError> {
    let slice_ns = spec.slice_ns();
    let cap = spec.record_capacity();
    let io = |what: &str| {
        let what = what.to_string();
        move |e| TransportError::Io { what: what.clone(), source: e }
    };
    let new_lane = |j: usize, n: usize| {
        let share = Share::new(j, m).expect("j < m");
        // The lane's share of the records, with room for its own count's spread.
        let records = spec.keep_records.then(|| {
            let margin = if m == 1 { 0 } else { 10 * (cap as f64).sqrt() as u64 + 64 };
            Arc::new(Records::new(share.requests(cap) + margin))
        });
        Arc::new(Shared::new(j, n, wire.ordered(), sink.clone(), records, opts.max_in_flight > 0))
    };
    match conns {
        Conns::Streams(mut c) => {
            let sh = new_lane(0, c.len());
            c.start((0..c.len()).map(|i| Receiver::new(&sh, spec, i, i, slice_ns, fallback)).collect());
            Ok((vec![(sh, SendSide::H2(c), Vec::new())], Vec::new()))
        }
        Conns::Tcp(streams) => {
            let mut killers = Vec::with_capacity(streams.len());
            let mut per: Vec<Vec<(usize, TcpStream)>> = (0..m).map(|_| Vec::new()).collect();
            for (c, s) in streams.into_iter().enumerate() {
                killers.push(s.try_clone().map_err(io("cloning a socket"))?);
                per[c % m].push((c, s));
            }
            let mut out = Vec::with_capacity(m);
            let mut threads = 0;
            for (j, mine) in per.into_iter().enumerate() {
                let sh = new_lane(j, mine.len());
                let (slots, streams): (Vec<usize>, Vec<TcpStream>) = mine.into_iter().unzip();
                let recv: Vec<Receiver> = slots
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| Receiver::new(&sh, spec, i, c, slice_ns, fallback))
                    .collect();
                let (side, handles) = match opts.receive {
                    Receive::Sender => (
                        SendSide::Polling(Polling::new(streams, recv).map_err(io("setting up the polling sender"))?),
                        vec![],
                    ),
                    Receive::Threads => {
                        let mut writers = Vec::with_capacity(streams.len());
                        let mut handles = Vec::with_capacity(streams.len());
                        for (s, r) in streams.into_iter().zip(recv) {
                            writers.push(s.try_clone().map_err(io("cloning a socket"))?);
                            // The timeout only lets an idle receiver notice the end of the run.
                            s.set_read_timeout(Some(Duration::from_millis(50)))
                                .map_err(io("setting a read timeout"))?;
                            let (sh, wire, cpu) = (sh.clone(), wire.clone(), opts.receiver_cpu(threads));
                            threads += 1;
                            let name = format!("taillab-recv-{}", r.slot);
                            handles.push(
                                std::thread::Builder::new()
                                    .name(name)
                                    .spawn(move || receive::receiver(&sh, cpu, wire.as_ref(), s, r))
                                    .map_err(io("spawning a receiver"))?,
                            );
                        }
                        (SendSide::Writers(writers), handles)
                    }
                };
                out.push((sh, side, handles));
            }
            Ok((out, killers))
        }
    }
}

/// An auto-resizing histogram of ns: 1 ns to 60 s at 3 significant digits, as the
/// collector's.
pub fn new_hist() -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
    h.auto(true);
    h
}

/// Pins the calling thread to `cpus[i mod len]` (not at all when `cpus` is empty). The list
/// was checked before the run, so a failure here is only reported.
pub(crate) fn place(cpus: &[usize], i: usize) {
    if let Err(e) = taillab_core::harness::place_thread_on(cpus, None, i) {
        eprintln!("taillab load: {e}");
    }
}
