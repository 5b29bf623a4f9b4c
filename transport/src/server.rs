//! `taillab serve`: an app behind TCP.
//!
//! One reader thread per connection decodes frames and stamps `enqueued`
//! with the kernel's receive stamp of the segment that completed the frame
//! ([`crate::tstamp`]; the user-space stamp right after the `read` when the
//! socket gives none, or with `net.stamps = user`),
//! then pushes it into the one [`RequestQueue`] that all workers share — the
//! same queue and wait modes as the integrated configuration, so the server
//! is the M/G/n system the model describes. A worker stamps `started` when
//! it pops, `finished` when the app returns, and writes the response itself
//! (no hand-off back to the reader), carrying `queue = started − enqueued`,
//! `service = finished − started` and the receive lag (the read's
//! user-space stamp − `enqueued`) with the clock `enqueued` came from.
//!
//! Why a reader thread per connection rather than one epoll loop: a blocking
//! `read` wakes exactly the thread that owns the bytes, the readers share
//! nothing but the queue, and the number of connections in our
//! configurations is small (clients × connections, tens). An epoll loop
//! would serialize every connection's decoding behind one thread, which is
//! the bottleneck TailBench's single `select()` loop had.
//!
//! A connection that sends garbage or disconnects mid-frame is dropped with a log
//! line; the others keep being served. A frame whose header announces more than
//! `net.max_frame` is refused from its header, before any of its payload is
//! buffered (a reader holds at most one 64 KiB read beyond a frame).
//!
//! Connections: at most `net.max_connections` are open at once; one more is
//! accepted and closed at once (the client sees end of file), counted as
//! refused, and logged — the first refusal at once, then at most one line
//! per [`REFUSAL_LOG_EVERY`] with the count since, so a flood of connections
//! cannot flood the log. The soft limit on open files is raised to the hard
//! limit at start, as each connection takes two descriptors.
//!
//! Overload: requests read but not yet served are held to
//! [`MAX_QUEUED_BYTES`]; beyond it the server stops reading until its
//! workers catch up, so the backlog waits in the sockets and in the
//! clients (whose schedule stamps still count its age) instead of growing
//! the server without bound. A request whose connection is gone is not
//! served. SIGINT/SIGTERM (or EOF on stdin with
//! `--exit-on-eof`) stop it cleanly: no new connections, open ones shut
//! down, workers finish the request in hand and exit.

use crate::epoll::Epoll;
use crate::proto::{self, Kind};
use crate::tstamp::{self, CmsgBuf, KernelStamp, StampClock, StampCounts, Tally};
use crate::TransportError;
use parking_lot::Mutex;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use taillab_core::clock::{now_ns, set_timer_slack_1ns, WaitMode};
use taillab_core::config::{RunConfig, Stamping};
use taillab_core::queue::{Discipline, RequestQueue};
use taillab_core::{AppError, Server};

/// Most bytes of read, unserved requests (payload plus [`JOB_COST`] each)
/// the server holds before it stops reading.
pub const MAX_QUEUED_BYTES: u64 = 64 << 20;

/// What a queued request costs beyond its payload.
const JOB_COST: u64 = 128;

/// Least time between two log lines about refused connections.
pub const REFUSAL_LOG_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServeOpts {
    /// Address to listen on (`net.listen`).
    pub listen: SocketAddr,
    /// Worker threads (`harness.threads`).
    pub threads: usize,
    /// How workers wait for work (`net.server_wait`, resolved).
    pub wait: WaitMode,
    /// Hybrid workers spin this long for work before they block.
    pub spin_ns: u64,
    /// Order in which a queue is served.
    pub discipline: Discipline,
    /// Cap on a request's payload (bytes, 1..=1 GiB, `net.max_frame`); a larger frame
    /// drops the connection.
    pub max_frame: u32,
    /// Most connections open at once (`net.max_connections`); more are refused.
    pub max_connections: usize,
    /// Seeds the random-order queue (`load.seed`).
    pub seed: u64,
    /// Pin workers round-robin to these CPUs (empty: no pinning).
    pub cpus: Vec<usize>,
    /// SCHED_FIFO priority of the workers.
    pub rt_priority: Option<i32>,
    /// Nice value of the workers (`harness.nice`), under CFS.
    pub nice: Option<i32>,
    /// How requests reach workers.
    pub dispatch: Dispatch,
    /// Kernel or user-space receive stamps.
    pub stamps: Stamping,
    /// Why `wait` and `dispatch` are what they are (printed at start).
    pub choice: String,
}

pub use taillab_core::config::Dispatch;

impl ServeOpts {
    /// The server side of `cfg`; the listen address must parse. Settings
    /// left to the host are chosen here ([`taillab_core::config::auto`]),
    /// counting one client on this host when it listens on loopback.
    pub fn from_config(cfg: &RunConfig) -> Result<ServeOpts, TransportError> {
        let h = &cfg.harness;
        let listen: SocketAddr = cfg.net.listen.parse().map_err(|_| {
            TransportError::Invalid(format!("net.listen `{}` is not an address like 127.0.0.1:7878", cfg.net.listen))
        })?;
        use taillab_core::config::auto;
        let local_clients = usize::from(listen.ip().is_loopback());
        let choice = auto::resolve(cfg, &auto::HostFacts::here(local_clients, None));
        let why: Vec<&str> = choice
            .why
            .iter()
            .filter(|w| w.starts_with("dispatch") || w.starts_with("server-wait"))
            .map(|w| w.as_str())
            .collect();
        Ok(ServeOpts {
            listen,
            threads: h.threads,
            wait: choice.server_wait,
            spin_ns: h.spin_margin.0,
            discipline: h.discipline,
            max_frame: match cfg.net.max_frame.0 {
                b @ 1..=0x4000_0000 => b as u32,
                b => {
                    return Err(TransportError::Invalid(format!(
                        "--max-frame {b} bytes is out of range 1B..=1GiB (net.max_frame)"
                    )))
                }
            },
            max_connections: cfg.net.max_connections,
            seed: cfg.load.seed,
            cpus: h.cpus.0.clone(),
            rt_priority: (h.rt_priority > 0).then_some(h.rt_priority as i32),
            nice: h.nice,
            dispatch: choice.dispatch,
            stamps: cfg.net.stamps,
            choice: why.join("; "),
        })
    }
}

pub use taillab_core::sections::transport::ServeStats;

struct Conn {
    w: Mutex<TcpStream>,
    peer: SocketAddr,
    dead: AtomicBool,
}

struct Job {
    conn: Arc<Conn>,
    id: u64,
    /// Kernel arrival (or the user-space read when there is no kernel stamp).
    enqueued: u64,
    /// The user-space read that completed the frame.
    read_at: u64,
    clock: StampClock,
    payload: Vec<u8>,
}

struct State {
    q: RequestQueue<Job>,
    conns: Mutex<Vec<Arc<Conn>>>,
    stop: Arc<AtomicBool>,
    max_frame: u32,
    connections: AtomicU64,
    dropped: AtomicU64,
    requests: AtomicU64,
    app_errors: AtomicU64,
    /// Bytes of read, unserved requests (see [`MAX_QUEUED_BYTES`]).
    queued: AtomicU64,
    kernel_stamps: bool,
    stamps: Mutex<StampCounts>,
}

/// Serves `server` until `stop` is set. `on_listening` gets the bound
/// address (the port is chosen by the kernel when `listen` has port 0).
pub fn serve(
    server: Arc<dyn Server>,
    opts: &ServeOpts,
    stop: Arc<AtomicBool>,
    on_listening: impl FnOnce(SocketAddr),
) -> Result<ServeStats, TransportError> {
    if opts.threads == 0 || opts.threads > 1024 {
        return Err(TransportError::Invalid(format!("--threads must be in 1..=1024, got {}", opts.threads)));
    }
    raise_open_files();
    let st = Arc::new(State {
        q: RequestQueue::new(opts.discipline, 4096, opts.spin_ns, opts.seed),
        conns: Mutex::new(Vec::new()),
        stop: stop.clone(),
        max_frame: opts.max_frame,
        connections: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        requests: AtomicU64::new(0),
        app_errors: AtomicU64::new(0),
        queued: AtomicU64::new(0),
        kernel_stamps: opts.stamps == Stamping::Kernel,
        stamps: Mutex::new(StampCounts::default()),
    });
    // Workers load their engines before the port opens, so the first
    // request never pays an engine's start-up.
    let (init_tx, init_rx) = std::sync::mpsc::channel::<Result<(), AppError>>();
    // Per-worker dispatch: each worker's epoll set and its inbox of new connections.
    let mut polls: Vec<Option<Arc<Poller>>> = Vec::new();
    for _ in 0..opts.threads {
        polls.push(if opts.dispatch.is_per_worker() { Some(Arc::new(Poller::new()?)) } else { None });
    }
    let workers = start_workers(&server, opts, &st, &polls, init_tx, init_rx)?;
    let listener = TcpListener::bind(opts.listen).map_err(|e| TransportError::Io {
        what: format!("binding {} (is the port free? use port 0 to let the kernel pick)", opts.listen),
        source: e,
    })?;
    let local = listener
        .local_addr()
        .map_err(|e| TransportError::Io { what: "reading the bound address".into(), source: e })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| TransportError::Io { what: "setting the listener non-blocking".into(), source: e })?;
    on_listening(local);

    let mut readers = Vec::new();
    let mut refusals = Refusals::default();
    while !stop.load(Ordering::Acquire) {
        // Follows wall-clock steps: kernel stamps are on that clock.
        tstamp::refresh_offset();
        match listener.accept() {
            Ok((s, peer)) => accept(&st, opts, &polls, s, peer, &mut readers, &mut refusals),
            // Polling accept every 10 ms only delays new connections, never requests.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!("taillab serve: accept failed: {e}; still serving open connections");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
    // Stop: wake every reader by shutting its socket, then let workers
    // drain (skipping the requests of the connections now gone).
    for c in st.conns.lock().iter() {
        c.dead.store(true, Ordering::Release);
        let _ = c.w.lock().shutdown(Shutdown::Both);
    }
    for h in readers {
        let _ = h.join();
    }
    st.q.close();
    for h in workers {
        let _ = h.join();
    }
    refusals.flush(opts.max_connections);
    let enqueued_stamps = st.stamps.lock().clone();
    Ok(ServeStats {
        connections: st.connections.load(Ordering::Relaxed),
        dropped: st.dropped.load(Ordering::Relaxed),
        refused: refusals.total,
        requests: st.requests.load(Ordering::Relaxed),
        app_errors: st.app_errors.load(Ordering::Relaxed),
        dispatch: opts.dispatch.to_string(),
        wait: opts.wait.to_string(),
        enqueued_stamps,
    })
}

/// Starts one worker thread per `--threads`, each placed and with its app
/// worker built, and waits until all have started (the first failure is the error).
fn start_workers(
    server: &Arc<dyn Server>,
    opts: &ServeOpts,
    st: &Arc<State>,
    polls: &[Option<Arc<Poller>>],
    init_tx: std::sync::mpsc::Sender<Result<(), AppError>>,
    init_rx: std::sync::mpsc::Receiver<Result<(), AppError>>,
) -> Result<Vec<std::thread::JoinHandle<()>>, TransportError> {
    let mut workers = Vec::new();
    for (w, poll) in polls.iter().cloned().enumerate() {
        let spin_ns = opts.spin_ns;
        let (st, server, tx, wait) = (st.clone(), server.clone(), init_tx.clone(), opts.wait);
        let (cpus, rt, nice) = (opts.cpus.clone(), opts.rt_priority, opts.nice);
        workers.push(
            std::thread::Builder::new()
                .name(format!("taillab-srv-{w}"))
                .spawn(move || {
                    set_timer_slack_1ns();
                    let placed = taillab_core::harness::place_thread_on(&cpus, rt, w)
                        .and_then(|()| nice.map_or(Ok(()), taillab_core::placement::set_thread_nice));
                    if let Err(e) = placed {
                        let _ =
                            tx.send(Err(AppError::Engine { engine: "placing a worker".into(), why: e.to_string() }));
                        return;
                    }
                    let mut worker = match server.worker(w) {
                        Ok(x) => {
                            let _ = tx.send(Ok(()));
                            x
                        }
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    match &poll {
                        None => worker_loop(&st, worker.as_mut(), wait),
                        Some(p) => per_worker_loop(&st, worker.as_mut(), wait, spin_ns, p),
                    }
                })
                .map_err(|e| TransportError::Io { what: "spawning a worker".into(), source: e })?,
        );
    }
    drop(init_tx);
    for _ in 0..opts.threads {
        match init_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                st.q.close();
                return Err(e.into());
            }
            Err(_) => {
                st.q.close();
                return Err(TransportError::Invalid("a worker thread died while starting".into()));
            }
        }
    }
    Ok(workers)
}

/// Takes in an accepted connection: refused over `max_connections`, else
/// configured (no delay, kernel stamps) and handed to a worker's poller
/// (per-worker dispatch) or to a reader thread of its own.
fn accept(
    st: &Arc<State>,
    opts: &ServeOpts,
    polls: &[Option<Arc<Poller>>],
    s: TcpStream,
    peer: SocketAddr,
    readers: &mut Vec<std::thread::JoinHandle<()>>,
    refusals: &mut Refusals,
) {
    if st.conns.lock().len() >= opts.max_connections {
        refusals.refuse(s, opts.max_connections);
        return;
    }
    if let Err(e) = s.set_nonblocking(false).and_then(|_| s.set_nodelay(true)) {
        eprintln!("taillab serve: dropping {peer}: cannot configure socket: {e}");
        return;
    }
    if st.kernel_stamps {
        // Without them the reads are stamped in user space (and counted so).
        if let Err(e) = tstamp::enable(s.as_raw_fd()) {
            eprintln!("taillab serve: {peer}: no kernel receive stamps ({e}); stamping reads in user space");
        }
    }
    let w = match s.try_clone() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("taillab serve: dropping {peer}: {e}");
            return;
        }
    };
    let conn = Arc::new(Conn { w: Mutex::new(w), peer, dead: AtomicBool::new(false) });
    st.conns.lock().push(conn.clone());
    st.connections.fetch_add(1, Ordering::Relaxed);
    if opts.dispatch.is_per_worker() {
        let k = (st.connections.load(Ordering::Relaxed) - 1) as usize % polls.len();
        let p = polls[k].as_ref().expect("per-worker pollers exist");
        if let Err(e) = p.add(s, conn) {
            eprintln!("taillab serve: dropping {peer}: {e}");
        }
        return;
    }
    let st2 = st.clone();
    readers.retain(|h: &std::thread::JoinHandle<()>| !h.is_finished());
    match std::thread::Builder::new().name(format!("taillab-read-{peer}")).spawn(move || reader(&st2, s, conn)) {
        Ok(h) => readers.push(h),
        Err(e) => eprintln!("taillab serve: dropping {peer}: cannot start a reader thread: {e}"),
    }
}

/// Raises the soft limit on open files to the hard limit: each connection
/// holds two descriptors, and the usual soft limit (1024) would refuse
/// connections with EMFILE long before `max_connections`.
fn raise_open_files() {
    // SAFETY: getrlimit/setrlimit on plain structs owned here.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Connections refused at accept, and the log lines about them.
#[derive(Default)]
struct Refusals {
    total: u64,
    /// Refused since the last log line.
    unlogged: u64,
    logged_at: Option<std::time::Instant>,
}

impl Refusals {
    /// Closes `s` (one connection too many) and logs it, paced.
    fn refuse(&mut self, s: TcpStream, max: usize) {
        drop(s);
        self.total += 1;
        self.unlogged += 1;
        if self.logged_at.is_none_or(|t| t.elapsed() >= REFUSAL_LOG_EVERY) {
            self.flush(max);
        }
    }

    /// Logs the refusals not yet logged.
    fn flush(&mut self, max: usize) {
        if self.unlogged > 0 {
            eprintln!(
                "taillab serve: refused {} connection(s) ({} in all): {max} already open, the limit; raise --max-connections (net.max_connections)",
                self.unlogged, self.total
            );
            self.unlogged = 0;
            self.logged_at = Some(std::time::Instant::now());
        }
    }
}

/// Closes a connection. `why` is `None` for a clean disconnect (the client
/// closed between frames), which is neither logged nor counted as dropped.
fn close_conn(st: &State, conn: &Conn, why: Option<&str>) {
    if !conn.dead.swap(true, Ordering::AcqRel) {
        if let Some(why) = why {
            if !st.stop.load(Ordering::Acquire) {
                eprintln!("taillab serve: dropping {}: {why}", conn.peer);
            }
            st.dropped.fetch_add(1, Ordering::Relaxed);
        }
        let _ = conn.w.lock().shutdown(Shutdown::Both);
    }
    st.conns.lock().retain(|c| !std::ptr::eq(&**c, conn));
}

/// Whether the server holds as many unserved requests as it may (and is not stopping).
fn full(st: &State) -> bool {
    st.queued.load(Ordering::Relaxed) >= MAX_QUEUED_BYTES && !st.stop.load(Ordering::Relaxed)
}

fn reader(st: &State, s: TcpStream, conn: Arc<Conn>) {
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut chunk = vec![0u8; 64 * 1024];
    let mut cm = CmsgBuf::default();
    loop {
        while full(st) {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let (n, k) = match tstamp::recv(s.as_raw_fd(), &mut chunk, 0, &mut cm) {
            Ok((0, _)) => {
                let why = (!buf.is_empty()).then_some("client disconnected in the middle of a frame");
                return close_conn(st, &conn, why);
            }
            Ok(x) => x,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return close_conn(st, &conn, Some(&format!("read failed: {e}"))),
        };
        if let Err(e) = take_frames(st, &conn, &mut buf, &chunk[..n], k, |job| st.q.push(job)) {
            return close_conn(st, &conn, Some(&e));
        }
    }
}

/// Appends `bytes` (just read, kernel stamp `k`) to the connection's `buf`
/// and hands every frame they complete to `push`, stamped `enqueued` with
/// the kernel's arrival of the last segment read (every frame one read
/// completed was whole by then), or now when there is none. `Err` is a
/// protocol error.
fn take_frames(
    st: &State,
    conn: &Arc<Conn>,
    buf: &mut Vec<u8>,
    bytes: &[u8],
    k: Option<KernelStamp>,
    mut push: impl FnMut(Job),
) -> Result<(), String> {
    let read_at = now_ns();
    let (enqueued, clock, fate) = tstamp::judge(k, read_at, 0);
    buf.extend_from_slice(bytes);
    let mut off = 0;
    let res = loop {
        match proto::parse(&buf[off..], st.max_frame, Kind::Request) {
            Ok(Some(h)) => {
                let payload = buf[off + h.header_len()..off + h.frame_len()].to_vec();
                st.queued.fetch_add(payload.len() as u64 + JOB_COST, Ordering::Relaxed);
                push(Job { conn: conn.clone(), id: h.id, enqueued, read_at, clock, payload });
                off += h.frame_len();
            }
            Ok(None) => break Ok(()),
            Err(e) => break Err(e.to_string()),
        }
    };
    if off > 0 {
        st.stamps.lock().count(clock, fate, k.is_some_and(|k| k.hw_unsynced));
    }
    buf.drain(..off);
    res
}

fn worker_loop(st: &State, worker: &mut dyn taillab_core::Worker, wait: WaitMode) {
    let mut resp = Vec::with_capacity(4096);
    let mut frame = Vec::with_capacity(4096);
    while let Some(job) = st.q.pop(wait) {
        if let Some((conn, _)) = serve_one(st, worker, job, &mut resp, &mut frame) {
            write_out(st, &conn, &mut frame);
        }
    }
}

/// Runs one request and appends its response frame to `frame`; the connection to write it
/// to and when the request finished, or `None` when nobody is left to answer. The worker writes responses itself (no
/// hand-off back to a reader).
fn serve_one(
    st: &State,
    worker: &mut dyn taillab_core::Worker,
    job: Job,
    resp: &mut Vec<u8>,
    frame: &mut Vec<u8>,
) -> Option<(Arc<Conn>, u64)> {
    st.queued.fetch_sub(job.payload.len() as u64 + JOB_COST, Ordering::Relaxed);
    if job.conn.dead.load(Ordering::Acquire) {
        return None; // nobody to answer: the client is gone or the server stopping
    }
    let started = now_ns();
    resp.clear();
    let r = worker.handle(&job.payload, resp);
    let finished = now_ns();
    crate::explain::record(job.id, job.enqueued, started, finished);
    st.requests.fetch_add(1, Ordering::Relaxed);
    let (q, svc) = (started.saturating_sub(job.enqueued), finished - started);
    let recv = proto::pack_recv(job.clock, job.read_at - job.enqueued);
    match r {
        Ok(()) => proto::encode_response(Kind::Response, job.id, q, svc, recv, resp, frame),
        Err(e) => {
            st.app_errors.fetch_add(1, Ordering::Relaxed);
            proto::encode_response(Kind::Error, job.id, q, svc, recv, e.to_string().as_bytes(), frame);
        }
    }
    Some((job.conn, finished))
}

/// Writes the response frames in `frame` to `conn` and empties it.
fn write_out(st: &State, conn: &Conn, frame: &mut Vec<u8>) {
    if !conn.dead.load(Ordering::Acquire) {
        let res = crate::sys::send_all(conn.w.lock().as_raw_fd(), frame);
        if let Err(e) = res {
            close_conn(st, conn, Some(&format!("write failed: {e}")));
        }
    }
    frame.clear();
}

/// A per-worker server's responses not written yet: those of one connection, written
/// together (one syscall) when the worker's next request is on the same connection and the
/// first of them has waited less than one write costs. A response thus waits at most about
/// the time its own write would have taken away from the requests queued behind it; with
/// nothing queued behind it (every load the server holds with room), it is written at once.
struct Outbox {
    frame: Vec<u8>,
    conn: Option<Arc<Conn>>,
    /// When the first unwritten response was finished.
    since: u64,
    /// What a write has cost lately (ns, a moving average of measured writes).
    write_ns: u64,
}

impl Outbox {
    fn new() -> Self {
        Outbox { frame: Vec::with_capacity(64 * 1024), conn: None, since: 0, write_ns: 2_000 }
    }

    /// Takes the response of `conn` encoded in `one` (emptied), finished at `now`; writes
    /// what is held now unless `next_same` (the worker's next request is on this connection)
    /// and there is time to hold it.
    fn take(&mut self, st: &State, conn: Arc<Conn>, one: &mut Vec<u8>, next_same: bool, now: u64) {
        if self.conn.as_ref().is_some_and(|c| !Arc::ptr_eq(c, &conn)) {
            self.flush(st);
        }
        if self.frame.is_empty() {
            self.since = now;
        }
        self.frame.extend_from_slice(one);
        one.clear();
        self.conn = Some(conn);
        if !next_same || now - self.since >= self.write_ns {
            self.flush(st);
        }
    }

    /// Writes what is held.
    fn flush(&mut self, st: &State) {
        let Some(conn) = self.conn.take() else { return };
        let t = now_ns();
        write_out(st, &conn, &mut self.frame);
        // Weight 1/8: a few writes' worth of memory, so one slow write moves it little.
        self.write_ns = (7 * self.write_ns + (now_ns() - t)) / 8;
    }
}

/// A connection owned by one worker (per-worker dispatch).
struct Owned {
    s: TcpStream,
    conn: Arc<Conn>,
    buf: Vec<u8>,
    cm: CmsgBuf,
}

/// One worker's epoll set and the connections the acceptor handed it.
struct Poller {
    ep: Epoll,
    inbox: Mutex<Vec<(u64, Owned)>>,
    next_token: AtomicU64,
}

impl Poller {
    fn new() -> Result<Self, TransportError> {
        let ep = Epoll::new().map_err(|e| TransportError::Io { what: "creating an epoll set".into(), source: e })?;
        Ok(Poller { ep, inbox: Mutex::new(Vec::new()), next_token: AtomicU64::new(0) })
    }

    /// Called by the acceptor: the worker picks the connection up at its next event.
    fn add(&self, s: TcpStream, conn: Arc<Conn>) -> std::io::Result<()> {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let fd = s.as_raw_fd();
        self.inbox.lock().push((token, Owned { s, conn, buf: Vec::with_capacity(64 * 1024), cm: CmsgBuf::default() }));
        if let Err(e) = self.ep.add(fd, token) {
            self.inbox.lock().retain(|(t, _)| *t != token);
            return Err(e);
        }
        Ok(())
    }
}

/// Per-worker dispatch: this worker reads its own connections, keeps a
/// local FIFO of whole frames and serves it. A frame is stamped `enqueued`
/// with the kernel's arrival of its last segment, so a frame that arrived
/// while the worker was busy still counts its wait as `queue`; only with
/// user-space stamps is it stamped when the worker next reads (before each
/// request it polls once without waiting, to keep that delay short).
fn per_worker_loop(st: &State, worker: &mut dyn taillab_core::Worker, wait: WaitMode, spin_ns: u64, p: &Poller) {
    use std::collections::{HashMap, VecDeque};
    let mut conns: HashMap<u64, Owned> = HashMap::new();
    let mut local: VecDeque<Job> = VecDeque::new();
    let mut events = crate::epoll::events();
    let mut chunk = vec![0u8; 64 * 1024];
    let (mut resp, mut frame) = (Vec::with_capacity(4096), Vec::with_capacity(4096));
    let mut out = Outbox::new();
    let mut idle_since = now_ns();
    // Jobs read at the last poll and not served yet. With kernel stamps a frame's arrival is
    // the kernel's, however late it is read, so the worker polls again once it has served
    // what it read (one epoll call per batch); with user-space stamps it polls before every
    // request, to keep the delay inside `enqueued` short.
    let mut left = 0usize;
    loop {
        let stopping = st.stop.load(Ordering::Acquire);
        if stopping && local.is_empty() {
            return out.flush(st);
        }
        if left > 0 && st.kernel_stamps {
            left -= 1;
            if let Some(t) = serve_next(st, worker, &mut local, &mut resp, &mut frame, &mut out) {
                idle_since = t;
            }
            continue;
        }
        // Wait only when there is nothing to serve: spin polls, block sleeps
        // in epoll_wait, hybrid polls for `spin_ns` and then sleeps. Sleeps
        // are capped so a stop is noticed.
        let timeout = if !local.is_empty() || stopping {
            0
        } else {
            match wait {
                WaitMode::Spin => 0,
                WaitMode::Block => 100_000_000,
                WaitMode::Hybrid if now_ns() < idle_since + spin_ns => 0,
                WaitMode::Hybrid => 100_000_000,
            }
        };
        let n = p.ep.wait(&mut events, timeout);
        // Full: serve before reading more (the sockets hold the rest).
        let n = if full(st) && !local.is_empty() { 0 } else { n };
        for i in 0..n {
            let token = crate::epoll::token(&events, i);
            if !conns.contains_key(&token) {
                for (t, o) in p.inbox.lock().drain(..) {
                    conns.insert(t, o);
                }
            }
            let Some(o) = conns.get_mut(&token) else { continue };
            if let Some(why) = read_ready(st, o, &mut chunk, &mut local) {
                let o = conns.remove(&token).expect("present");
                use std::os::fd::AsRawFd;
                // The writer's dup keeps the socket open: leave the set now.
                p.ep.del(o.s.as_raw_fd());
                close_conn(st, &o.conn, why.as_deref());
            }
        }
        if local.is_empty() {
            out.flush(st);
            if timeout == 0 && n == 0 && wait != WaitMode::Hybrid {
                std::hint::spin_loop();
            }
            continue;
        }
        left = local.len() - 1;
        if let Some(t) = serve_next(st, worker, &mut local, &mut resp, &mut frame, &mut out) {
            idle_since = t;
        }
    }
}

/// Serves the first of `local` (a per-worker server's read requests) and hands its response
/// to `out`; the time it finished, if it was served.
fn serve_next(
    st: &State,
    worker: &mut dyn taillab_core::Worker,
    local: &mut std::collections::VecDeque<Job>,
    resp: &mut Vec<u8>,
    frame: &mut Vec<u8>,
    out: &mut Outbox,
) -> Option<u64> {
    let job = local.pop_front()?;
    let (conn, finished) = serve_one(st, worker, job, resp, frame)?;
    let next_same = local.front().is_some_and(|j| Arc::ptr_eq(&j.conn, &conn));
    out.take(st, conn, frame, next_same, finished);
    Some(finished)
}

/// Reads what `o` has without blocking and queues its whole frames.
/// `Some(reason)` closes the connection (`Some(None)`: a clean disconnect).
fn read_ready(
    st: &State,
    o: &mut Owned,
    chunk: &mut [u8],
    local: &mut std::collections::VecDeque<Job>,
) -> Option<Option<String>> {
    loop {
        let (r, k) = match tstamp::recv(o.s.as_raw_fd(), chunk, libc::MSG_DONTWAIT, &mut o.cm) {
            Ok((0, _)) => {
                return Some((!o.buf.is_empty()).then(|| "client disconnected in the middle of a frame".to_string()))
            }
            Ok(x) => x,
            Err(e) => {
                return match e.kind() {
                    std::io::ErrorKind::WouldBlock => None,
                    std::io::ErrorKind::Interrupted => continue,
                    _ => Some(Some(format!("read failed: {e}"))),
                }
            }
        };
        if let Err(e) = take_frames(st, &o.conn, &mut o.buf, &chunk[..r], k, |job| local.push_back(job)) {
            return Some(Some(e));
        }
        // A short read emptied the socket: skip the read that would only
        // say so (the set is level-triggered, so later bytes still wake us).
        if r < chunk.len() {
            return None;
        }
    }
}
