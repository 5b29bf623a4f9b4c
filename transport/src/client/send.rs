//! A lane's sender: runs its share of the open-loop schedule and writes each request when due.
//!
//! It waits for each intended time (spin, or hybrid: sleep, then spin the last
//! `spin_margin`), stamps `sent` and writes. It never waits for a response, so a slow or
//! stalled server can never hold the schedule back (no coordinated omission). Everything due
//! at one wake-up goes out at once (up to `net.max_batch`): with `net.spread = wakeup` (the
//! default) in one write on the next connection in turn, with `request` one write per
//! connection the requests were dealt to. Each request keeps its own `intended`, so lateness is
//! still charged in full: the batching only makes a late sender catch up with fewer syscalls.
//!
//! The capped mode (`net.max_in_flight`, the other load testers' method, for comparison): a
//! request due while its connection has that many in flight waits, untimed, in the
//! connection's queue and goes out when a response frees a place; its latency then counts
//! from that actual send.

use super::lane::{Shared, RING};
use super::receive::{Polling, RecvOut};
use super::Streams;
use crate::wire::Wire;
use std::collections::VecDeque;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use taillab_core::clock::{now_ns, set_timer_slack_1ns, wait_until, WaitMode};
use taillab_core::config::Spread;
use taillab_core::harness::{Item, Schedule};

/// How a lane's sender reaches its connections.
pub(crate) enum SendSide {
    /// Write-only clones; receiver threads read.
    Writers(Vec<TcpStream>),
    /// The sender reads responses itself (`net.receive = sender`).
    Polling(Polling),
    /// HTTP/2 connections, driven and read by their own thread.
    H2(Box<dyn Streams>),
}

impl SendSide {
    fn len(&self) -> usize {
        match self {
            SendSide::Writers(w) => w.len(),
            SendSide::Polling(p) => p.streams.len(),
            SendSide::H2(h) => h.len(),
        }
    }
}

/// A sender's settings.
#[derive(Debug, Clone)]
pub(crate) struct SendOpts {
    pub(crate) wait: WaitMode,
    pub(crate) spin_margin_ns: u64,
    pub(crate) max_batch: usize,
    pub(crate) spread: Spread,
    /// 0: open loop; else the capped mode's limit per connection.
    pub(crate) max_in_flight: usize,
    /// The CPU this sender is pinned to.
    pub(crate) cpu: Option<usize>,
}

/// What a sender measured about itself (the `transport.senders` figures).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SelfCost {
    /// Its thread's CPU time (ns) from its start until its schedule ended.
    pub(crate) cpu_ns: u64,
    /// Wall time (ns) over the same span.
    pub(crate) wall_ns: u64,
    /// Of that, time spent waiting with nothing to do (ns).
    pub(crate) idle_ns: u64,
    /// Writes made.
    pub(crate) writes: u64,
}

struct Sender<'a> {
    sh: &'a Arc<Shared>,
    wire: &'a dyn Wire,
    o: &'a SendOpts,
    io: SendSide,
    k: usize,
    /// Bytes to write, per connection, and which connections have some (in order).
    bufs: Vec<Vec<u8>>,
    dirty: Vec<usize>,
    /// The requests of the write being built, with their connections.
    batch: Vec<(Item, usize)>,
    /// `spread = wakeup`: the connection the next wake-up's requests go to.
    turn: usize,
    /// The capped mode's held requests per connection, oldest first.
    held: Vec<VecDeque<(Item, Vec<u8>)>>,
    held_n: usize,
    cost: SelfCost,
}

/// Runs `sched` over the lane's connections `io` until the schedule ends or the run stops;
/// returns what the polling sender's receive sides measured (empty with receiver threads) and
/// its own cost.
pub(crate) fn sender(
    sh: &Arc<Shared>,
    o: &SendOpts,
    wire: &dyn Wire,
    mut sched: Schedule,
    io: SendSide,
) -> (Vec<RecvOut>, SelfCost) {
    set_timer_slack_1ns();
    if let Some(c) = o.cpu {
        super::place(&[c], 0);
    }
    let (t_start, cpu_start) = (now_ns(), thread_cpu_ns());
    let k = io.len();
    // HTTP/2 coalesces frames itself: a request is handed over alone.
    let max_batch = if matches!(io, SendSide::H2(_)) { 1 } else { o.max_batch.max(1) };
    let mut s = Sender {
        sh,
        wire,
        o,
        io,
        k,
        bufs: (0..k).map(|_| Vec::with_capacity(64 * 1024)).collect(),
        dirty: Vec::with_capacity(k),
        batch: Vec::with_capacity(max_batch),
        turn: 0,
        held: (0..if o.max_in_flight > 0 { k } else { 0 }).map(|_| VecDeque::new()).collect(),
        held_n: 0,
        cost: SelfCost::default(),
    };
    let mut payload = Vec::with_capacity(4096);
    let mut pending: Option<(Item, Vec<u8>)> = None;
    'run: while !sh.stop.load(Ordering::Relaxed) {
        let (first, p) = match pending.take() {
            Some(x) => x,
            None => match sched.next(&mut payload, &sh.sink) {
                Some(it) => (it, std::mem::take(&mut payload)),
                None => break,
            },
        };
        if !s.wait_for(first.intended) {
            break;
        }
        let conn = s.conn_of(&first);
        s.add(first, &p, conn);
        payload = p;
        // Late? Everything already due goes out at once too.
        let mut taken = 1;
        while taken < max_batch {
            let Some(it) = sched.next(&mut payload, &sh.sink) else { break };
            if it.intended > now_ns() {
                pending = Some((it, std::mem::take(&mut payload)));
                break;
            }
            let c = if o.spread == Spread::Wakeup { conn } else { s.conn_of(&it) };
            s.add(it, &payload, c);
            taken += 1;
        }
        if o.spread == Spread::Wakeup {
            s.turn = (s.turn + 1) % k;
        }
        if !s.flush() {
            break 'run;
        }
    }
    // Capped: what the schedule left waiting for room goes out as room frees.
    while s.held_n > 0 && !sh.stop.load(Ordering::Acquire) {
        if !s.release() || !s.wait_for(now_ns() + 100_000) {
            break;
        }
    }
    *sh.sched.lock() = Some(sched.stats());
    s.cost.wall_ns = now_ns() - t_start;
    s.cost.cpu_ns = thread_cpu_ns().saturating_sub(cpu_start);
    sh.sender_done.store(true, Ordering::Release);
    let outs = s.finish();
    (outs, s.cost)
}

impl Sender<'_> {
    /// The connection request `it` goes to: the wake-up's (`spread = wakeup`) or its own.
    fn conn_of(&self, it: &Item) -> usize {
        match self.o.spread {
            Spread::Wakeup => self.turn,
            Spread::Request => (it.index % self.k as u64) as usize,
        }
    }

    /// Queues request `it` (payload `p`) on connection `c` for the next write, or holds it
    /// (capped mode) while its connection is full.
    fn add(&mut self, it: Item, p: &[u8], c: usize) {
        if self.o.max_in_flight > 0 && (!self.held[c].is_empty() || !self.has_room(c)) {
            self.held[c].push_back((it, p.to_vec()));
            self.held_n += 1;
            return;
        }
        self.encode(it, p, c);
    }

    fn encode(&mut self, it: Item, p: &[u8], c: usize) {
        if self.bufs[c].is_empty() {
            self.dirty.push(c);
        }
        self.wire.encode(it.index, p, &mut self.bufs[c]);
        self.batch.push((it, c));
    }

    /// Capped mode: whether connection `c` takes another request, counting those already in
    /// the write being built.
    fn has_room(&self, c: usize) -> bool {
        let queued = self.batch.iter().filter(|(_, x)| *x == c).count() as u64;
        self.sh.conns[c].in_flight() + queued < self.o.max_in_flight as u64
    }

    /// Capped mode: sends the held requests whose connections have room again; false if
    /// the run is over.
    fn release(&mut self) -> bool {
        for c in 0..self.k {
            while !self.held[c].is_empty() && self.has_room(c) {
                let (it, p) = self.held[c].pop_front().expect("not empty");
                self.held_n -= 1;
                self.encode(it, &p, c);
            }
        }
        self.batch.is_empty() || self.flush()
    }

    /// Waits until `t`, reading responses meanwhile when it reads them itself (and, capped,
    /// sending what they free); false if the run is over.
    fn wait_for(&mut self, t: u64) -> bool {
        let (mode, margin) = (self.o.wait, self.o.spin_margin_ns);
        let SendSide::Polling(_) = &self.io else {
            let now = now_ns();
            self.cost.idle_ns += t.saturating_sub(now);
            wait_until(t, mode, margin);
            return true;
        };
        let mut prev = now_ns();
        // Late, with requests held (capped mode): read what came back before going on all the
        // same, so that room frees and the held requests go out. Without this a sender behind
        // its schedule only held request after request, its answers unread and its
        // connections full, until the schedule ended (seconds at a rate far above the
        // server's): the watcher then took the silence for a dead server.
        if prev >= t && self.held_n > 0 && self.read_back(0).is_none() {
            return false;
        }
        while prev < t {
            let sleep = if mode == WaitMode::Spin { 0 } else { (t - prev).saturating_sub(margin) };
            let Some(got) = self.read_back(sleep) else { return false };
            let now = now_ns();
            if !got {
                self.cost.idle_ns += now - prev;
                std::hint::spin_loop();
            }
            prev = now;
        }
        true
    }

    /// Polls the sender's connections once, waiting up to `sleep_ns` for an answer, and
    /// (capped) sends the held requests the answers made room for; whether anything came
    /// back, `None` if the run is over. Only a sender that reads its own answers polls.
    fn read_back(&mut self, sleep_ns: u64) -> Option<bool> {
        let SendSide::Polling(p) = &mut self.io else { unreachable!() };
        let got = p.poll(self.sh, self.wire, sleep_ns);
        if got && self.held_n > 0 && !self.release() {
            return None;
        }
        Some(got)
    }

    /// Waits until request `index`'s in-flight slot is free (RING requests in flight: the
    /// oldest one's answer frees it) and, for an in-order protocol, until connection `c` can
    /// keep the order of `ahead` requests of this write before it and this one; false if the
    /// run stops first.
    fn await_room(&mut self, index: u64, c: usize, ahead: u64) -> bool {
        let slot = &self.sh.ring[index as usize % RING];
        let seq_full = |sh: &Shared| sh.conns[c].seq.as_ref().is_some_and(|s| !s.room_for(ahead + 1));
        while slot.tag.load(Ordering::Acquire) != 0 || seq_full(self.sh) {
            if self.sh.stop.load(Ordering::Acquire) {
                return false;
            }
            match &mut self.io {
                SendSide::Writers(_) | SendSide::H2(_) => std::thread::sleep(Duration::from_micros(50)),
                SendSide::Polling(p) => {
                    p.poll(self.sh, self.wire, 100_000);
                }
            }
        }
        true
    }

    /// Stamps `sent` on the write being built and writes it (one write per connection with
    /// bytes); false if the run is over.
    fn flush(&mut self) -> bool {
        let sh = self.sh;
        if self.batch.is_empty() {
            return true; // everything held (capped mode)
        }
        for i in 0..self.batch.len() {
            let (it, c) = self.batch[i];
            // The write's earlier requests on this connection take their places first.
            let ahead = self.batch[..i].iter().filter(|(_, x)| *x == c).count() as u64;
            if !self.await_room(it.index, c, ahead) {
                return false;
            }
        }
        if let SendSide::H2(h) = &mut self.io {
            if !h.ready(sh, self.batch[0].1) {
                return false;
            }
        }
        let sent = now_ns();
        let mut last = 0;
        for &(it, c) in &self.batch {
            let slot = &sh.ring[it.index as usize % RING];
            slot.intended.store(it.intended, Ordering::Relaxed);
            slot.sent.store(sent, Ordering::Relaxed);
            slot.tag.store((it.index + 1) | ((it.measured as u64) << 63), Ordering::Release);
            let conn = &sh.conns[c];
            if let Some(seq) = &conn.seq {
                seq.push(it.index);
            }
            conn.sent.store(conn.sent.load(Ordering::Relaxed) + 1, Ordering::Release);
            last = last.max(it.intended);
        }
        sh.last_intended.store(last, Ordering::Relaxed);
        sh.sent.fetch_add(self.batch.len() as u64, Ordering::Release);
        let first_index = self.batch[0].0.index;
        self.batch.clear();
        let dirty = std::mem::take(&mut self.dirty);
        let mut ok = true;
        for &c in &dirty {
            if ok {
                ok = self.write(c, first_index);
            }
            self.bufs[c].clear();
        }
        self.dirty = dirty;
        self.dirty.clear();
        ok
    }

    /// Writes connection `c`'s bytes; false (and the run told why) if it failed.
    fn write(&mut self, c: usize, first_index: u64) -> bool {
        let b = &self.bufs[c];
        self.cost.writes += 1;
        let res = match &mut self.io {
            SendSide::Writers(w) => crate::sys::send_all(w[c].as_raw_fd(), b),
            SendSide::Polling(p) => p.write(self.sh, self.wire, c, b),
            SendSide::H2(h) => h.send(self.sh, c, first_index, b).map_err(std::io::Error::other),
        };
        if let Err(e) = res {
            self.sh.lose(format!("sending on connection {c} failed: {e} (the server closed it or died)"));
            return false;
        }
        true
    }

    /// After the schedule: hands back what the polling receive sides measured (serving the
    /// stragglers until the run is over first).
    fn finish(&mut self) -> Vec<RecvOut> {
        let sh = self.sh;
        match std::mem::replace(&mut self.io, SendSide::Writers(Vec::new())) {
            SendSide::Writers(_) => Vec::new(),
            SendSide::H2(h) => {
                while !sh.stop.load(Ordering::Acquire) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                h.finish(sh)
            }
            SendSide::Polling(p) => p.drain(sh, self.wire, self.o.wait),
        }
    }
}

/// This thread's CPU time (ns).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid clock id and a timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
