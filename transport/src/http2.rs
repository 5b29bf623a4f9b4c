//! HTTP/2 on the load side: gRPC unary calls (`--app grpc`, [`crate::grpc`])
//! and HTTP/2 `GET`s (`--app http --set version=2`), on the `h2` crate.
//!
//! The open-loop contract is the TCP client's ([`crate::client`]): the same
//! sender thread runs the same [`taillab_core::harness::Schedule`], waits for
//! each intended time, stamps `sent` and hands the request to HTTP/2; it
//! never waits for a response. Handing over is `h2`'s `send_request` (and
//! `send_data` for gRPC's message): it queues the frames on the connection
//! and wakes the connection's task, which writes them. A request waits before
//! `sent` only when its connection has as many streams open as the server
//! allows (`SETTINGS_MAX_CONCURRENT_STREAMS`): that wait is send lag, charged
//! to the request like a full socket's.
//!
//! Everything else runs on one thread (`taillab-h2`, a one-worker tokio
//! runtime, placed on the CPU after the sender's under `--client-cpus`):
//! each connection's task reads and writes its socket, and each request's
//! task awaits its response and records it into its connection's shard.
//! Reads go through [`StampedIo`], which reads with `recvmsg` and keeps the
//! kernel's receive stamp of each read's last segment ([`crate::tstamp`]) and
//! a count of reads. A request's `completed` is the stamp of its
//! connection's last read when its task sees the response end (its last
//! frame came in that read or, when one poll of the connection read several
//! times, an earlier one: the stamp is then an upper bound, as for TCP
//! responses that share a read, and counted as `completed_shared` when two
//! responses end on the same read); the user-space stamp is taken then too,
//! so `recv_lag` is this thread's delay and the `client` check judges it.
//!
//! Before the run every connection proves it speaks HTTP/2: the client
//! sends a PING and waits for its answer. A server that answers the
//! connection preface in HTTP/1 (an HTTP/1-only server) is named as such;
//! with TLS, one that does not pick `h2` by ALPN is too.

use crate::client::{place, resolve, LoadOpts, Receiver, RecvOut, Shared, Streams};
use crate::tls::TlsSpec;
use crate::tstamp::{self, CmsgBuf, KernelStamp};
use crate::TransportError;
use bytes::Bytes;
use parking_lot::Mutex;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use taillab_core::clock::now_ns;
use taillab_core::config::Stamping;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// What each request of an HTTP/2 run is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum H2Kind {
    /// A gRPC unary call of this method (`/package.Service/Method`); the
    /// app's request bytes are the message.
    Grpc {
        /// The method path.
        method: String,
    },
    /// An HTTP `GET` of this path.
    Get {
        /// The path.
        path: String,
    },
}

/// An HTTP/2 run's requests and how to reach the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H2Spec {
    /// What each request is.
    pub kind: H2Kind,
    /// `:authority` (default: the target as given).
    pub authority: Option<String>,
    /// TLS with ALPN `h2` (`None`: cleartext HTTP/2 with prior knowledge, h2c).
    pub tls: Option<TlsSpec>,
}

/// What a connection's reads left for the requests' tasks: the kernel stamp
/// of the last read and the number of reads so far, and the first bytes the
/// server sent (to name a server that answered in HTTP/1).
#[derive(Default)]
struct ReadMark {
    last: Mutex<(Option<KernelStamp>, u64)>,
    first: Mutex<Vec<u8>>,
    /// Why the connection ended (`None` while it is up).
    ended: Mutex<Option<String>>,
}

impl ReadMark {
    fn note(&self, k: Option<KernelStamp>, bytes: &[u8]) {
        let mut l = self.last.lock();
        *l = (k, l.1 + 1);
        if l.1 == 1 {
            self.first.lock().extend_from_slice(&bytes[..bytes.len().min(80)]);
        }
    }
}

/// A TCP stream read with `recvmsg`, keeping each read's kernel stamp.
struct StampedIo {
    tcp: tokio::net::TcpStream,
    mark: Arc<ReadMark>,
    cm: CmsgBuf,
}

impl AsyncRead for StampedIo {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        loop {
            std::task::ready!(me.tcp.poll_read_ready(cx))?;
            let fd = me.tcp.as_raw_fd();
            let dst = buf.initialize_unfilled();
            let cm = &mut me.cm;
            match me.tcp.try_io(Interest::READABLE, || tstamp::recv(fd, dst, 0, cm)) {
                Ok((n, k)) => {
                    me.mark.note(k, &dst[..n]);
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for StampedIo {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.tcp.is_write_vectored()
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

/// One open HTTP/2 connection.
struct Conn {
    send: h2::client::SendRequest<Bytes>,
    mark: Arc<ReadMark>,
}

/// Open HTTP/2 connections and the thread that drives them, before a run.
pub struct Conns {
    rt: tokio::runtime::Runtime,
    conns: Vec<Conn>,
    req: Arc<Template>,
    /// Why reads are stamped in user space (`None`: the sockets give kernel stamps).
    fallback: Option<String>,
    /// Each connection's receive side, once a run has started.
    recv: Vec<Arc<Mutex<Option<Receiver>>>>,
}

/// A request's fixed parts.
struct Template {
    grpc: bool,
    uri: http::Uri,
}

impl Template {
    fn request(&self) -> http::Request<()> {
        let b = http::Request::builder().uri(self.uri.clone());
        let b = if self.grpc {
            b.method(http::Method::POST)
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .header("user-agent", "taillab")
        } else {
            b.method(http::Method::GET)
        };
        b.body(()).expect("a request from a checked URI")
    }
}

fn template(target: &str, spec: &H2Spec) -> Result<Template, TransportError> {
    let scheme = if spec.tls.is_some() { "https" } else { "http" };
    let authority = spec.authority.as_deref().unwrap_or(target);
    let (grpc, path) = match &spec.kind {
        H2Kind::Grpc { method } => (true, method),
        H2Kind::Get { path } => (false, path),
    };
    let uri = format!("{scheme}://{authority}{path}")
        .parse()
        .map_err(|e| TransportError::Invalid(format!("{scheme}://{authority}{path} is not a URI: {e}")))?;
    Ok(Template { grpc, uri })
}

/// Opens `opts.connections` HTTP/2 connections to `opts.target` and checks
/// that each speaks HTTP/2 (a PING answered).
pub fn connect(opts: &LoadOpts, spec: &H2Spec) -> Result<Conns, TransportError> {
    crate::client::check_connections(opts)?;
    let addr = resolve(&opts.target)?;
    let req = Arc::new(template(&opts.target, spec)?);
    let cpus = opts.cpus.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .thread_name("taillab-h2")
        .on_thread_start(move || place(&cpus, 1))
        .build()
        .map_err(|e| TransportError::Io { what: "starting the HTTP/2 thread".into(), source: e })?;
    let tls = match &spec.tls {
        Some(t) => Some(crate::tls::connector(t).map_err(TransportError::Invalid)?),
        None => None,
    };
    let host = req.uri.host().unwrap_or("localhost").to_string();
    let mut fallback = (opts.stamps == Stamping::User).then(|| "net.stamps = user".to_string());
    let mut conns = Vec::with_capacity(opts.connections);
    for _ in 0..opts.connections {
        let c = rt.block_on(open(
            addr,
            &opts.target,
            opts.stamps,
            tls.as_ref().map(|t| (t, host.as_str())),
            &mut fallback,
        ))?;
        conns.push(c);
    }
    Ok(Conns { rt, conns, req, fallback, recv: Vec::new() })
}

async fn open(
    addr: SocketAddr,
    target: &str,
    stamps: Stamping,
    tls: Option<(&tokio_rustls::TlsConnector, &str)>,
    fallback: &mut Option<String>,
) -> Result<Conn, TransportError> {
    let io_err = |what: &str| {
        let what = what.to_string();
        move |e| TransportError::Io { what: what.clone(), source: e }
    };
    let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(io_err(&format!("connecting to {addr} (is the server running there?)")))?;
    s.set_nodelay(true).map_err(io_err("setting TCP_NODELAY"))?;
    if stamps == Stamping::Kernel {
        if let Err(e) = tstamp::enable(s.as_raw_fd()) {
            fallback.get_or_insert_with(|| format!("SO_TIMESTAMPING refused: {e}"));
        }
    }
    s.set_nonblocking(true).map_err(io_err("making a socket non-blocking"))?;
    let tcp = tokio::net::TcpStream::from_std(s).map_err(io_err("registering a socket"))?;
    let mark = Arc::new(ReadMark::default());
    let io = StampedIo { tcp, mark: mark.clone(), cm: CmsgBuf::default() };
    let (send, ping) = match tls {
        None => handshake(io, &mark).await,
        Some((conn, host)) => {
            let name = rustls::pki_types::ServerName::try_from(host.to_string())
                .map_err(|e| TransportError::Invalid(format!("TLS server name {host}: {e}")))?;
            let t = conn.connect(name, io).await.map_err(|e| {
                TransportError::Protocol(format!(
                    "TLS with {target} failed: {e} (a cleartext server? then leave tls off)"
                ))
            })?;
            if t.get_ref().1.alpn_protocol() != Some(&b"h2"[..]) {
                return Err(TransportError::Protocol(format!(
                    "{target} did not choose HTTP/2 (ALPN h2) in the TLS handshake: it speaks HTTP/1 only"
                )));
            }
            handshake(t, &mark).await
        }
    }
    .map_err(|e| not_h2(target, &mark, e))?;
    prove_h2(target, &mark, ping).await?;
    Ok(Conn { send, mark })
}

/// The HTTP/2 handshake on `io`; the connection's task is spawned and notes
/// in `mark` why it ended.
async fn handshake<T>(io: T, mark: &Arc<ReadMark>) -> Result<(h2::client::SendRequest<Bytes>, h2::PingPong), String>
where
    T: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (send, mut conn) = h2::client::Builder::new()
        .initial_window_size(1 << 20)
        .initial_connection_window_size(1 << 24)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| e.to_string())?;
    let ping = conn.ping_pong().expect("a new connection's ping_pong");
    let mark = mark.clone();
    tokio::spawn(async move {
        let why = match conn.await {
            Ok(()) => "the server closed the connection".to_string(),
            Err(e) => e.to_string(),
        };
        mark.ended.lock().get_or_insert(why);
    });
    Ok((send, ping))
}

/// Waits up to 5 s for the server to answer a PING.
async fn prove_h2(target: &str, mark: &Arc<ReadMark>, mut ping: h2::PingPong) -> Result<(), TransportError> {
    match tokio::time::timeout(Duration::from_secs(5), ping.ping(h2::Ping::opaque())).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            // The connection's own error says more than the ping's.
            tokio::time::sleep(Duration::from_millis(10)).await;
            let why = mark.ended.lock().clone().unwrap_or_else(|| e.to_string());
            Err(not_h2(target, mark, why))
        }
        Err(_) => Err(TransportError::Protocol(format!(
            "{target} did not answer an HTTP/2 PING within 5 s: is it an HTTP/2 server?"
        ))),
    }
}

/// A server that did not speak HTTP/2, named by what it sent.
fn not_h2(target: &str, mark: &ReadMark, why: String) -> TransportError {
    let first = String::from_utf8_lossy(&mark.first.lock()).into_owned();
    let line = first.lines().next().unwrap_or("");
    if line.starts_with("HTTP/1") {
        TransportError::Protocol(format!(
            "{target} answered in HTTP/1 ({line:?}): it speaks HTTP/1 only; gRPC and --set version=2 need HTTP/2 (cleartext with prior knowledge, or with --set tls=true TLS with ALPN h2)"
        ))
    } else {
        TransportError::Protocol(format!("{target} did not speak HTTP/2: {why}"))
    }
}

/// How a request ended, when not with a response.
enum Fail {
    /// The server reset this stream: a failed request.
    Reset(String),
    /// The connection failed.
    Conn(String),
    /// The response is not the protocol asked for: the run stops.
    NotProtocol(String),
}

fn h2_fail(e: h2::Error) -> Fail {
    match e.reason() {
        Some(r) if e.is_reset() => Fail::Reset(format!("RST_STREAM {r:?}")),
        _ => Fail::Conn(e.to_string()),
    }
}

impl Conns {
    fn conn_lost(&self, c: usize, e: String) -> String {
        let why = self.conns[c].mark.ended.lock().clone().unwrap_or(e);
        format!("HTTP/2 connection {c} failed: {why}")
    }
}

impl Streams for Conns {
    fn len(&self) -> usize {
        self.conns.len()
    }

    fn fallback(&self) -> Option<String> {
        self.fallback.clone()
    }

    fn start(&mut self, recv: Vec<Receiver>) {
        self.recv = recv.into_iter().map(|r| Arc::new(Mutex::new(Some(r)))).collect();
    }

    /// A stream slot: `h2` opens a stream once the connection has fewer open
    /// than the server allows.
    fn ready(&mut self, sh: &Shared, c: usize) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            match self.conns[c].send.poll_ready(&mut cx) {
                Poll::Ready(Ok(())) => return true,
                Poll::Ready(Err(e)) => {
                    sh.lose(self.conn_lost(c, e.to_string()));
                    return false;
                }
                Poll::Pending if sh.stop.load(Ordering::Acquire) => return false,
                Poll::Pending => std::thread::sleep(Duration::from_micros(20)),
            }
        }
    }

    /// The request's frames are queued for the connection's task; its
    /// response is left to a task of its own.
    fn send(&mut self, sh: &Arc<Shared>, c: usize, index: u64, payload: &[u8]) -> Result<(), String> {
        let grpc = self.req.grpc;
        let (resp, mut body) =
            self.conns[c].send.send_request(self.req.request(), !grpc).map_err(|e| self.conn_lost(c, e.to_string()))?;
        if grpc {
            // A server may answer from the headers alone (UNIMPLEMENTED for a method it lacks)
            // and close the stream before the message is queued: then the message has nowhere
            // to go, and the response, already on its way, says how the call ended.
            let _ = body.send_data(crate::grpc::frame(payload), true);
        }
        let (sh, recv, mark) = (sh.clone(), self.recv[c].clone(), self.conns[c].mark.clone());
        self.rt.spawn(async move {
            let got = read_response(grpc, resp).await;
            let user = now_ns();
            let (k, seq) = *mark.last.lock();
            let (label, error) = match got {
                Ok(x) => x,
                Err(Fail::Reset(r)) => (r.clone(), Some(format!("the server reset the stream: {r}"))),
                Err(Fail::NotProtocol(why)) => return sh.lose(why),
                Err(Fail::Conn(e)) => {
                    let why = mark.ended.lock().clone().unwrap_or(e);
                    return sh.lose(format!("HTTP/2 connection {c} failed: {why}"));
                }
            };
            if let Some(r) = recv.lock().as_mut() {
                r.complete_h2(&sh, index, label, error, k, user, seq);
            }
            sh.replies.fetch_add(1, Ordering::Release);
        });
        Ok(())
    }

    fn finish(self: Box<Self>, sh: &Shared) -> Vec<RecvOut> {
        let me = *self;
        me.rt.shutdown_timeout(Duration::from_millis(200));
        drop(me.conns);
        me.recv.into_iter().filter_map(|r| r.lock().take()).map(|r| r.finish(sh)).collect()
    }
}

/// Awaits one response whole: its status label (gRPC status name, or HTTP
/// status code) and its error, if it failed.
async fn read_response(grpc: bool, resp: h2::client::ResponseFuture) -> Result<(String, Option<String>), Fail> {
    let resp = resp.await.map_err(h2_fail)?;
    let status = resp.status().as_u16();
    let (head, mut body) = resp.into_parts();
    let early = if grpc { crate::grpc::check_head(status, &head.headers).map_err(Fail::NotProtocol)? } else { None };
    let mut check = crate::grpc::BodyCheck::default();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(h2_fail)?;
        let _ = body.flow_control().release_capacity(chunk.len());
        check.feed(&chunk);
    }
    if !grpc {
        return Ok((status.to_string(), (status >= 400).then(|| format!("HTTP status {status}"))));
    }
    let trailers = body.trailers().await.map_err(h2_fail)?;
    let st = match early {
        Some(s) => s,
        None => {
            check.finish().map_err(Fail::NotProtocol)?;
            let found = match &trailers {
                Some(t) => crate::grpc::status_in(t).map_err(Fail::NotProtocol)?,
                None => None,
            };
            found.ok_or_else(|| Fail::NotProtocol("not a gRPC response: no grpc-status in its trailers".into()))?
        }
    };
    Ok((crate::grpc::status_name(st.code), st.error()))
}

/// The [`crate::wire::Wire`] of an HTTP/2 run: requests pass through to
/// the HTTP/2 connections (which frame them); responses never reach `decode`,
/// since the HTTP/2 thread reads them.
pub struct H2Wire {
    /// `grpc` or `http2`, for messages.
    pub name: &'static str,
}

impl crate::wire::Wire for H2Wire {
    fn name(&self) -> &'static str {
        self.name
    }
    fn encode(&self, _id: u64, payload: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(payload);
    }
    fn decode(&self, _buf: &[u8]) -> Result<Option<crate::wire::Reply>, String> {
        Err("HTTP/2 responses are read by the HTTP/2 thread".into())
    }
}

/// An HTTP/2 run's receive side is its one HTTP/2 thread, whatever
/// `net.receive` says: the choice (printed, and kept in summary.json) says so.
pub fn fix_choice(choice: &mut taillab_core::config::auto::TcpChoice) {
    choice.receive = taillab_core::config::Receive::Threads;
    for w in &mut choice.why {
        if w.starts_with("receive ") {
            *w = "receive threads (HTTP/2: one thread drives and reads every connection)".into();
        }
    }
}
