//! A client's receive sides: one [`Receiver`] per connection matches responses to their
//! in-flight slots and records them, read by the lane's sender between sends ([`Polling`],
//! `net.receive = sender`) or by a thread of its own ([`receiver`], `net.receive = threads`).
//!
//! `completed` is the kernel's receive stamp of the last segment a read returned
//! ([`crate::tstamp`]; the user-space stamp after the read when the socket gives none, or
//! with `net.stamps = user`), so the reader's own delay is not the server's latency; that
//! delay is kept as `recv_lag` (user-space read − kernel arrival) and judged by the `client`
//! check.

use super::lane::{Shared, RING};
use super::stamps::ClientStamps;
use crate::epoll::Epoll;
use crate::tstamp::{self, CmsgBuf, KernelStamp, Tally};
use crate::wire::Wire;
use hdrhistogram::Histogram;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use taillab_core::clock::{now_ns, set_timer_slack_1ns, WaitMode};
use taillab_core::collector::{Shard, Stamps};
use taillab_core::RunSpec;

/// What one receive side measured: its shard, transport histogram and exact sum, stamp counts.
pub(crate) type RecvOut = (Shard, Histogram<u64>, u128, ClientStamps);

/// One connection's receive side: matches responses to their in-flight slots and records
/// them. Used by a receiver thread, by the polling sender, or by HTTP/2's driver.
pub(crate) struct Receiver {
    /// The connection's number within its lane.
    c: usize,
    /// The connection's number in the client (its shard's slot in the interval sink, the
    /// `worker` column of its records).
    pub(crate) slot: usize,
    shard: Shard,
    th: Histogram<u64>,
    tsum: u128,
    buf: Vec<u8>,
    cm: CmsgBuf,
    stamps: ClientStamps,
    /// The read that completed the last HTTP/2 response.
    last_read: Option<u64>,
}

impl Receiver {
    /// The receive side of connection `c` of `sh`'s lane, the client's connection `slot`.
    pub(crate) fn new(
        sh: &Shared,
        spec: &RunSpec,
        c: usize,
        slot: usize,
        slice_ns: u64,
        fallback: &Option<String>,
    ) -> Self {
        Receiver {
            c,
            slot,
            shard: Shard::new(slot, &sh.sink, slice_ns, spec.interval_ns),
            th: super::new_hist(),
            tsum: 0,
            buf: Vec::with_capacity(64 * 1024),
            cm: CmsgBuf::default(),
            stamps: ClientStamps { fallback: fallback.clone(), ..Default::default() },
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

    /// Takes `bytes` that a read returned at `user` with the kernel stamp `k` of their last
    /// segment (every response they finish had arrived by then). `Err` is garbage from the
    /// server.
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
                Err(e) => break Err(format!("garbage from the server on connection {}: {e}", self.slot)),
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

    /// The lane-local id a response answers: its own, or (in-order protocols) the oldest
    /// request outstanding on this connection.
    fn id_of(&mut self, sh: &Shared, r: &crate::wire::Reply) -> Option<u64> {
        match (r.id, &sh.conns[self.c].seq) {
            (Some(id), _) => Some(id),
            (None, Some(seq)) => seq.pop(),
            (None, None) => None,
        }
    }

    /// Matches one response to its request and records it.
    fn complete(&mut self, sh: &Shared, r: &crate::wire::Reply, k: Option<KernelStamp>, user: u64) {
        let Some(id) = self.id_of(sh, r) else {
            self.stamps.unknown_id += 1;
            return;
        };
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
        sh.conns[self.c].answered.fetch_add(1, Ordering::Release);
        let measured = tag >> 63 == 1;
        let st = stamps(sent, intended, r, k, user, &mut self.stamps);
        if let Some(e) = &r.error {
            sh.note_error(e.clone());
        }
        if let Some(rec) = &sh.records {
            rec.set(id, &st, self.slot, measured);
        }
        if measured {
            let t = st.completed - st.finished;
            self.th.saturating_record(t);
            self.tsum += t as u128;
        }
        let mut d = st.durations();
        if sh.from_send {
            // The other tools' clock: from the actual send (the hold before it is kept as
            // send lag, where it shows).
            d[0] = st.completed.saturating_sub(st.sent);
        }
        self.shard.record_durations(&d, st.completed, measured, &sh.sink);
        sh.completed.fetch_add(1, Ordering::Release);
    }

    /// Records HTTP/2 request `index`, whose response ended with status `label` (and
    /// `error` if it failed) after the connection's read number `read`, stamped `k` by the
    /// kernel and `user` here.
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

/// A response's stamps on the client's clock. The server's `queue` and `service` come back as
/// durations, placed from `sent`: `enqueued = sent`, `started = enqueued + queue`, `finished =
/// started + service`, so every derived duration is exact and `transport = completed −
/// finished` is the network's (both directions') share. `completed` is the kernel's stamp when
/// it is believable (never before `finished`), else the user-space read.
fn stamps(
    sent: u64,
    intended: u64,
    r: &crate::wire::Reply,
    k: Option<KernelStamp>,
    user: u64,
    counts: &mut ClientStamps,
) -> Stamps {
    let started = sent + r.queue_ns;
    let finished = started + r.service_ns;
    // The server's durations are exact; placed from `sent`, `finished` is never later than
    // the true one, so a kernel stamp before it is wrong.
    let (completed, clock, fate) = tstamp::judge(k, user, finished);
    counts.completed.count(clock, fate, k.is_some_and(|k| k.hw_unsynced));
    let lag = match r.server_recv {
        Some((c, lag)) => {
            counts.enqueued.count_clock(c);
            lag.min(r.queue_ns)
        }
        None => 0,
    };
    Stamps {
        intended,
        sent,
        enqueued: sent,
        started,
        finished,
        completed: completed.max(finished),
        enqueued_user: sent + lag,
        completed_user: user.max(finished),
    }
}

/// What one `read` of a connection gave its [`Receiver`].
pub(crate) enum Got {
    /// This many bytes, taken.
    Bytes(usize),
    /// Nothing now (would block, timed out, interrupted).
    Nothing,
    /// The connection is over: closed, failed or sent garbage (the run is told why unless it
    /// is stopping anyway).
    Over,
}

/// Reads `s` once into `chunk` and feeds `r`: the one place that decides what a read result
/// means, for receiver threads and the polling sender.
pub(crate) fn read_once(sh: &Shared, wire: &dyn Wire, s: &TcpStream, r: &mut Receiver, chunk: &mut [u8]) -> Got {
    use std::io::ErrorKind;
    let c = r.slot;
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

/// A receiver thread (`net.receive = threads`): blocks in `read` on its connection, placed
/// on `cpu` when given.
pub(crate) fn receiver(sh: &Shared, cpu: Option<usize>, wire: &dyn Wire, s: TcpStream, mut r: Receiver) -> RecvOut {
    set_timer_slack_1ns();
    if let Some(c) = cpu {
        super::place(&[c], 0);
    }
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

/// Bytes one read of the polling sender takes. It reads everything its connections hold
/// whenever it polls: responses left in the sockets would fill them, and a server blocked on
/// its writes to us would be measured slower than it is.
const READ_CHUNK: usize = 64 * 1024;

/// `net.receive = sender`: a lane's connections, read without blocking whenever its sender
/// would otherwise wait.
pub(crate) struct Polling {
    pub(crate) streams: Vec<TcpStream>,
    recv: Vec<Receiver>,
    live: Vec<bool>,
    /// Which connections have bytes (also the sleep until a response or the next send time,
    /// hybrid).
    ep: Epoll,
    events: Vec<libc::epoll_event>,
    chunk: Vec<u8>,
}

impl Polling {
    /// Polls `streams`, whose receive sides are `recv` (in the same order).
    pub(crate) fn new(streams: Vec<TcpStream>, recv: Vec<Receiver>) -> std::io::Result<Self> {
        let ep = Epoll::new()?;
        for (c, s) in streams.iter().enumerate() {
            s.set_nonblocking(true)?;
            ep.add(s.as_raw_fd(), c as u64)?;
        }
        Ok(Polling {
            live: vec![true; streams.len()],
            recv,
            streams,
            ep,
            events: crate::epoll::events(),
            chunk: vec![0u8; READ_CHUNK],
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

    /// Reads every connection that has something, waiting up to `timeout_ns` for one to;
    /// true if anything arrived.
    ///
    /// Spinning asks epoll, not the socket: a `recvmsg` that finds nothing still takes the
    /// socket's lock, and a segment arriving meanwhile waits in the backlog until it is
    /// released.
    pub(crate) fn poll(&mut self, sh: &Shared, wire: &dyn Wire, timeout_ns: u64) -> bool {
        let n = self.ep.wait(&mut self.events, timeout_ns);
        let mut got = false;
        for i in 0..n {
            got |= self.read(sh, wire, crate::epoll::token(&self.events, i) as usize);
        }
        got
    }

    /// Writes `b` on connection `c`, reading responses while the socket is full (a server
    /// blocked on its own writes to us must be drained).
    pub(crate) fn write(&mut self, sh: &Shared, wire: &dyn Wire, c: usize, b: &[u8]) -> std::io::Result<()> {
        let mut off = 0;
        while off < b.len() {
            match crate::sys::send(self.streams[c].as_raw_fd(), &b[off..]) {
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

    /// Serves the stragglers until the run is over, then hands back every receive side.
    pub(crate) fn drain(mut self, sh: &Shared, wire: &dyn Wire, mode: WaitMode) -> Vec<RecvOut> {
        while !sh.stop.load(Ordering::Acquire) {
            let wait = if mode == WaitMode::Spin { 0 } else { 1_000_000 };
            if !self.poll(sh, wire, wait) {
                std::hint::spin_loop();
            }
        }
        self.recv.into_iter().map(|r| r.finish(sh)).collect()
    }
}
