//! Every request's stamps, kept in memory for `requests.csv`, the run's ideal and the
//! dispatch-gap check when they fit `record.max_record_mem`.

use crate::collector::Stamps;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bytes of memory one kept record costs.
pub const RECORD_BYTES: u64 = RECORD_WORDS as u64 * 8;

/// Per-request stamps kept for the whole run.
///
/// Two layouts behind one reader ([`Records::iter`], in request order):
/// - **indexed** ([`Records::new`]): slot `i` holds request `i`; for callers that fill it
///   after the fact (TCP clients, the coordinator's merge).
/// - **sharded** ([`Records::sharded`]): each integrated worker writes its own chunks of
///   slots through a [`RecordWriter`], in the order it served, so no two workers write one
///   cache line (request `i` and `i + 1` are usually served by different workers: in one
///   array they would share a line, and every record would move it between CPUs).
///
/// Every slot keeps its request's index, so a reader can order either layout. Atomics make
/// the slots safe to share without locks (relaxed stores are plain moves on x86).
pub struct Records {
    slots: Vec<[AtomicU64; RECORD_WORDS]>,
    /// Sharded: the start of the next chunk to hand out (`None`: indexed).
    next_chunk: Option<AtomicUsize>,
}

/// Words of one record: the eight stamps, the request's index and a tag.
const RECORD_WORDS: usize = 10;

/// Slots a worker takes at a time in the sharded layout.
pub const RECORD_CHUNK: usize = 512;

impl Records {
    /// Room for `n` requests' stamps ([`RunSpec::record_capacity`]), slot `i` for request
    /// `i`, its pages touched now so none faults in during the run.
    pub fn new(n: u64) -> Self {
        let slots: Vec<[AtomicU64; RECORD_WORDS]> = (0..n).map(|_| Default::default()).collect();
        // Written above, so the pages are resident before the run starts.
        Records {
            slots,
            next_chunk: None,
        }
    }

    /// Room for `n` requests served by `workers` workers, each writing its own chunks
    /// through [`Records::writer`] (one chunk each of slack, so load imbalance loses none).
    pub fn sharded(n: u64, workers: usize) -> Self {
        let mut r = Records::new(n + (workers * RECORD_CHUNK) as u64);
        r.next_chunk = Some(AtomicUsize::new(0));
        r
    }

    /// A worker's writer into a sharded layout (see [`Records::sharded`]).
    pub fn writer(&self) -> RecordWriter<'_> {
        RecordWriter {
            rec: self,
            pos: 0,
            end: 0,
        }
    }

    fn write(&self, pos: usize, i: u64, s: &Stamps, worker: usize, measured: bool) {
        let Some(slot) = self.slots.get(pos) else {
            return;
        };
        let v = [
            s.intended,
            s.sent,
            s.enqueued,
            s.started,
            s.finished,
            s.completed,
            s.enqueued_user,
            s.completed_user,
            i,
        ];
        for (a, x) in slot.iter().zip(v) {
            a.store(x, Ordering::Relaxed);
        }
        slot[RECORD_WORDS - 1].store(
            ((worker as u64) << 1) | measured as u64 | (1 << 63),
            Ordering::Release,
        );
    }

    /// Stores request `i`'s stamps, the worker that served it and its phase in slot `i`
    /// (indexed layout); an index beyond the capacity is dropped.
    #[inline]
    pub fn set(&self, i: u64, s: &Stamps, worker: usize, measured: bool) {
        debug_assert!(self.next_chunk.is_none(), "set() is for the indexed layout");
        self.write(i as usize, i, s, worker, measured);
    }

    /// The requests that completed, in request order:
    /// (index, worker, measured, stamps).
    pub fn iter(&self) -> impl Iterator<Item = (u64, usize, bool, Stamps)> + '_ {
        let read = |s: &[AtomicU64; RECORD_WORDS]| {
            let tag = s[RECORD_WORDS - 1].load(Ordering::Acquire);
            if tag >> 63 == 0 {
                return None;
            }
            let g = |k: usize| s[k].load(Ordering::Relaxed);
            Some((
                g(8),
                ((tag & !(1 << 63)) >> 1) as usize,
                tag & 1 == 1,
                Stamps {
                    intended: g(0),
                    sent: g(1),
                    enqueued: g(2),
                    started: g(3),
                    finished: g(4),
                    completed: g(5),
                    enqueued_user: g(6),
                    completed_user: g(7),
                },
            ))
        };
        // Sharded: the written slots, ordered by the index each keeps.
        let order: Option<Vec<(u64, u32)>> = self.next_chunk.as_ref().map(|_| {
            let mut o: Vec<(u64, u32)> = self
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s[RECORD_WORDS - 1].load(Ordering::Acquire) >> 63 == 1)
                .map(|(p, s)| (s[8].load(Ordering::Relaxed), p as u32))
                .collect();
            o.sort_unstable();
            o
        });
        let positions: Box<dyn Iterator<Item = usize> + '_> = match order {
            Some(o) => Box::new(o.into_iter().map(|(_, p)| p as usize)),
            None => Box::new(0..self.slots.len()),
        };
        positions.filter_map(move |p| read(&self.slots[p]))
    }

    /// Requests it has room for.
    pub fn capacity(&self) -> u64 {
        self.slots.len() as u64
    }
}

/// One worker's writer into a sharded [`Records`]: it takes [`RECORD_CHUNK`] slots at a
/// time (one atomic add per chunk) and fills them in the order it served; when the records
/// are full the rest is dropped, as [`Records::set`] drops an index beyond the capacity.
pub struct RecordWriter<'a> {
    rec: &'a Records,
    pos: usize,
    end: usize,
}

impl RecordWriter<'_> {
    /// Stores request `i`'s stamps, the worker that served it and its phase.
    #[inline]
    pub fn push(&mut self, i: u64, s: &Stamps, worker: usize, measured: bool) {
        if self.pos == self.end {
            let next = self.rec.next_chunk.as_ref().expect("a sharded layout");
            let start = next.fetch_add(RECORD_CHUNK, Ordering::Relaxed);
            self.pos = start.min(self.rec.slots.len());
            self.end = (start + RECORD_CHUNK).min(self.rec.slots.len());
            if self.pos == self.end {
                return;
            }
        }
        self.rec.write(self.pos, i, s, worker, measured);
        self.pos += 1;
    }
}
