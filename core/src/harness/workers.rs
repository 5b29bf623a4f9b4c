//! The workers' loops: the inline worker (claims, waits for, serves and stamps each request
//! itself), the thread shaper that hands requests over a queue, and the worker that serves from
//! that queue.

use super::*;

/// How long before an arrival an idle inline worker stops recording and generating ahead
/// (beyond twice what the last step took).
pub(super) const IDLE_GUARD_NS: u64 = 500;

/// An inline worker: claim the next request ([`Feed::claim`]); early, settle the books,
/// generate ahead and wait for its arrival; late, start at once (it has been queued since
/// it arrived); serve it; claim the next one; read the clock once for this one's
/// `finished` and (if it is due) the next one's `started`; keep the stamps for the books.
///
/// So between two requests of a backlog there is nothing: the claim (one atomic ticket,
/// tens of ns) falls inside the measured service time of the request before, where the
/// run's ideal — which replays the measured service times — sees it too, as a server's
/// own dequeue would be. A claim after the `finished` stamp was instead queueing that no
/// ideal has: 2–3 % of a 1 µs service, +15–20 % on the mean sojourn at ρ 0.8.
pub(super) fn inline_worker(
    sh: &Shared,
    w: usize,
    worker: &mut dyn crate::app::Worker,
) -> Option<Shard> {
    let spec = &sh.spec;
    let mut books = Books::new(sh, w);
    let mut req = Vec::with_capacity(256);
    let mut resp = Vec::with_capacity(256);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(spec.seed, 100 + w as u64));
    // Only LIFO and random order need the time: they pick among requests due by now.
    let timed = spec.discipline != Discipline::Fifo;
    let claim = |req: &mut Vec<u8>| {
        if sh.abort.load(Ordering::Relaxed) {
            return None;
        }
        let now = if timed { now_ns() } else { 0 };
        sh.feed.claim(w, now, req, &sh.sink)
    };
    let mut next = claim(&mut req);
    let mut now = now_ns();
    while let Some(item) = next {
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        // The request reaches the server after the simulated outbound delay.
        let arrive = item.intended + net_delay(&spec.net_delay, &mut rng);
        let (sent, started) = if now < arrive {
            // Early: record what was served, generate the next requests, then wait for the
            // arrival; any lateness of the wake-up is the harness's send lag, not queueing.
            books.settle(arrive);
            if !books.helped() {
                prefill(sh, w, arrive);
            }
            let t = wait_until(arrive, spec.wait, spec.spin_margin_ns);
            (t, t)
        } else {
            // Late: the request has been queued since it arrived.
            (arrive, now)
        };
        resp.clear();
        let r = worker.handle(&req, &mut resp);
        // The request is served (its payload no longer needed): claim the next one first.
        next = claim(&mut req);
        now = now_ns();
        let finished = now;
        if let Err(e) = r {
            count_error(sh, e);
        }
        let completed = finished + net_delay(&spec.net_delay, &mut rng);
        let stamps = Stamps::local(
            item.intended,
            sent - (arrive - item.intended),
            sent,
            started,
            finished,
            completed,
        );
        if books.defer(item, stamps) {
            now = now_ns(); // the next request's start is after the bookkeeping
        }
    }
    books.close()
}

pub(super) fn shaper_thread(sh: &Shared, q: &Queues) {
    let spec = &sh.spec;
    let mut buf = Vec::with_capacity(256);
    // The shaper is the client: it waits hybrid (or spins with --wait spin),
    // never blocks only, because its lateness is send lag.
    let mode = if spec.wait == WaitMode::Spin {
        WaitMode::Spin
    } else {
        WaitMode::Hybrid
    };
    loop {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let Some(item) = sh.feed.schedule().next(&mut buf, &sh.sink) else {
            break;
        };
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        let sent = wait_until(item.intended, mode, spec.spin_margin_ns);
        let payload = std::mem::replace(&mut buf, Vec::with_capacity(256));
        q.of(item.worker).push(Job {
            item,
            sent,
            released: sent,
            payload,
            primary: true,
        });
    }
    q.close();
}

pub(super) fn queue_worker(
    sh: &Shared,
    w: usize,
    worker: &mut dyn crate::app::Worker,
    q: &JobQueue,
) -> Shard {
    let spec = &sh.spec;
    let mut ledger = Ledger::new(sh, w);
    let mut resp = Vec::with_capacity(256);
    while let Some(Job {
        item,
        sent,
        payload,
        ..
    }) = q.pop(spec.wait)
    {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let started = now_ns();
        resp.clear();
        let r = worker.handle(&payload, &mut resp);
        let finished = now_ns();
        if let Err(e) = r {
            count_error(sh, e);
        }
        // In-process the push is the arrival and the return is the completion.
        let stamps = Stamps::local(item.intended, sent, sent, started, finished, finished);
        ledger.record(item.index, item.measured, &stamps);
        sh.completed[w].fetch_add(1, Ordering::Relaxed);
    }
    ledger.close()
}
