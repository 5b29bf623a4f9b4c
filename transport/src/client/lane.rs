//! One sender's state: what its sender and its receive sides share, and nothing else.
//!
//! A client runs one lane per sender thread. A lane owns its connections, its share of the
//! schedule, its ring of in-flight requests and its counters; no field of a lane is written
//! by another lane's threads, so senders scale without sharing a cache line per request.
//! The only thing the lanes write in common is the run's [`IntervalSink`], once per interval
//! per connection.

use crossbeam_utils::CachePadded;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use taillab_core::collector::IntervalSink;
use taillab_core::harness::{Records, ScheduleStats};

/// Most requests of one lane in flight at once (slots of its in-flight ring). Beyond this
/// the run is hopelessly saturated: the sender waits for the oldest answer before it sends
/// (its lateness is the send lag), as it would for a full socket, so no answer is left
/// without its request.
pub(crate) const RING: usize = 1 << 18;

/// One request in flight: written by the sender before its bytes hit the socket, read and
/// freed by the receive side that takes its response.
pub(crate) struct Slot {
    pub(crate) intended: AtomicU64,
    pub(crate) sent: AtomicU64,
    /// `index + 1` with bit 63 = measured; 0 when free.
    pub(crate) tag: AtomicU64,
}

/// The requests sent on one connection of an in-order protocol (memcached, redis,
/// HTTP/1.1: responses carry no id), oldest first: the sender pushes each id as it writes
/// the request, the connection's receive side pops one per response. One producer and one
/// consumer, so two counters suffice.
pub(crate) struct Seq {
    ids: Box<[AtomicU64]>,
    head: CachePadded<AtomicU64>,
    tail: CachePadded<AtomicU64>,
}

impl Seq {
    fn new(cap: usize) -> Self {
        Seq {
            ids: (0..cap.next_power_of_two()).map(|_| AtomicU64::new(0)).collect(),
            head: CachePadded::new(AtomicU64::new(0)),
            tail: CachePadded::new(AtomicU64::new(0)),
        }
    }

    /// Whether `n` more ids fit (the sender waits for responses otherwise).
    pub(crate) fn room_for(&self, n: u64) -> bool {
        let (h, t) = (self.head.load(Ordering::Acquire), self.tail.load(Ordering::Relaxed));
        t - h + n <= self.ids.len() as u64
    }

    /// The sender: request `id` went out on this connection (after [`Seq::room`]).
    pub(crate) fn push(&self, id: u64) {
        let t = self.tail.load(Ordering::Relaxed);
        self.ids[t as usize & (self.ids.len() - 1)].store(id, Ordering::Relaxed);
        self.tail.store(t + 1, Ordering::Release);
    }

    /// The receive side: the id the next response answers; `None` when nothing is
    /// outstanding (a response for no request).
    pub(crate) fn pop(&self) -> Option<u64> {
        let h = self.head.load(Ordering::Relaxed);
        if h == self.tail.load(Ordering::Acquire) {
            return None;
        }
        let id = self.ids[h as usize & (self.ids.len() - 1)].load(Ordering::Relaxed);
        self.head.store(h + 1, Ordering::Release);
        Some(id)
    }
}

/// One connection of a lane: the order its answers come in (in-order protocols) and how
/// many of its requests are in flight (the capped mode, `net.max_in_flight`).
pub(crate) struct Conn {
    pub(crate) seq: Option<Seq>,
    /// Requests written on it (the sender's).
    pub(crate) sent: CachePadded<AtomicU64>,
    /// Responses taken from it (its receive side's).
    pub(crate) answered: CachePadded<AtomicU64>,
}

impl Conn {
    /// Requests written on it and not answered yet.
    pub(crate) fn in_flight(&self) -> u64 {
        self.sent.load(Ordering::Relaxed).saturating_sub(self.answered.load(Ordering::Acquire))
    }
}

/// What a lane's sender and receive sides share.
pub(crate) struct Shared {
    /// This lane's number (its sender's), from 0.
    pub(crate) lane: usize,
    pub(crate) ring: Vec<Slot>,
    /// This lane's connections, by their number within the lane.
    pub(crate) conns: Vec<Conn>,
    /// The run's interval histograms (every lane's shards hand theirs in here).
    pub(crate) sink: Arc<IntervalSink>,
    /// Every request's stamps, by the lane's own request index.
    pub(crate) records: Option<Arc<Records>>,
    /// Latency counts from the actual send (`net.max_in_flight`: the other tools' method).
    pub(crate) from_send: bool,
    pub(crate) stop: AtomicBool,
    pub(crate) sender_done: AtomicBool,
    /// Requests written (warmup included): the sender's.
    pub(crate) sent: CachePadded<AtomicU64>,
    /// Requests whose response was recorded: the receive sides'.
    pub(crate) completed: CachePadded<AtomicU64>,
    /// Every response decoded, matched or not: the server is alive.
    pub(crate) replies: CachePadded<AtomicU64>,
    /// The intended send time of the last request sent.
    pub(crate) last_intended: AtomicU64,
    pub(crate) errors: AtomicU64,
    first_error: Mutex<Option<String>>,
    lost: Mutex<Option<String>>,
    pub(crate) sched: Mutex<Option<ScheduleStats>>,
}

impl Shared {
    /// A lane with `conns` connections; `ordered`: the protocol answers in order, so each
    /// connection keeps the order of its requests.
    pub(crate) fn new(
        lane: usize,
        conns: usize,
        ordered: bool,
        sink: Arc<IntervalSink>,
        records: Option<Arc<Records>>,
        from_send: bool,
    ) -> Self {
        // Room for every in-flight request on any one connection, up to what a connection
        // can hold before the run is hopeless anyway.
        let per_conn = (RING / conns.max(1)).clamp(1024, RING);
        Shared {
            lane,
            ring: (0..RING)
                .map(|_| Slot { intended: AtomicU64::new(0), sent: AtomicU64::new(0), tag: AtomicU64::new(0) })
                .collect(),
            conns: (0..conns)
                .map(|_| Conn {
                    seq: ordered.then(|| Seq::new(per_conn)),
                    sent: CachePadded::new(AtomicU64::new(0)),
                    answered: CachePadded::new(AtomicU64::new(0)),
                })
                .collect(),
            sink,
            records,
            from_send,
            stop: AtomicBool::new(false),
            sender_done: AtomicBool::new(false),
            sent: CachePadded::new(AtomicU64::new(0)),
            completed: CachePadded::new(AtomicU64::new(0)),
            replies: CachePadded::new(AtomicU64::new(0)),
            last_intended: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            first_error: Mutex::new(None),
            lost: Mutex::new(None),
            sched: Mutex::new(None),
        }
    }

    /// The server was lost (the first reason is kept; none once the run is stopping).
    pub(crate) fn lose(&self, why: String) {
        let mut l = self.lost.lock();
        if l.is_none() && !self.stop.load(Ordering::Acquire) {
            *l = Some(why);
        }
    }

    /// Why the server was lost, if it was.
    pub(crate) fn lost(&self) -> Option<String> {
        self.lost.lock().clone()
    }

    /// A failed request (an error response); the first message is kept.
    pub(crate) fn note_error(&self, e: String) {
        if self.errors.fetch_add(1, Ordering::Relaxed) == 0 {
            *self.first_error.lock() = Some(e);
        }
    }

    /// The first error response's message.
    pub(crate) fn first_error(&self) -> Option<String> {
        self.first_error.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_answers_its_requests_in_the_order_they_went_out() {
        let s = Seq::new(4);
        assert_eq!(s.pop(), None, "nothing outstanding");
        assert!(s.room_for(4) && !s.room_for(5), "room for four");
        for id in [7, 3, 11, 12] {
            assert!(s.room_for(1));
            s.push(id);
        }
        assert!(!s.room_for(1), "four fit, no fifth");
        assert_eq!(s.pop(), Some(7));
        assert!(s.room_for(1) && !s.room_for(2));
        s.push(20);
        assert_eq!([s.pop(), s.pop(), s.pop(), s.pop(), s.pop()], [Some(3), Some(11), Some(12), Some(20), None]);
    }
}
