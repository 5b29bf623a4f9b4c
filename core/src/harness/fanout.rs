//! A fan-out run's threads: the dispatcher that releases each request as its sub-requests and
//! sends the hedges' copies when due, and the leaf workers that serve and cancel copies.

use super::*;

/// A hedge's copy due at `at` for `leaf` of request `item`, released at `released` (ordered
/// by time, soonest first).
pub(super) struct HedgeAt {
    pub(super) at: u64,
    pub(super) leaf: usize,
    pub(super) item: Item,
    pub(super) released: u64,
}

impl PartialEq for HedgeAt {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == std::cmp::Ordering::Equal
    }
}

impl Eq for HedgeAt {}

impl Ord for HedgeAt {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (o.at, o.item.index, o.leaf).cmp(&(self.at, self.item.index, self.leaf))
    }
}

impl PartialOrd for HedgeAt {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

/// A fan-out's dispatcher: releases each request at its intended time as one sub-request per
/// leaf (to replica `request mod R`, and with `tied` a copy to the next replica at once),
/// and sends a hedge's copy to the next replica when a sub-request has not answered by its
/// deadline. Every copy is a fresh draw of the app's requests (see [`crate::fanout`]).
///
/// It waits for its deadlines as the workers wait for work (`harness.wait`): with `block` it
/// sleeps to each one and is late by the host's wake-up delay (the requests' `send_lag`, the
/// hedges' `hedge_lag`, both in the model); it does not spin the last `spin_margin` before
/// each, on a CPU that a worker woken by the last release or by its service's end needs (on
/// two CPUs that held workers back by up to the margin, a cost neither recorded nor modelled).
pub(super) fn fanout_dispatcher(sh: &Shared, q: &Queues) {
    let fan = sh.fan.as_ref().expect("a fan-out run");
    let (spec, f) = (&sh.spec, &fan.spec);
    let (n, r) = (f.leaves, f.replicas);
    let mode = spec.wait;
    let mut hedge_lag = FanoutHists::default().hedge_lag;
    let mut hedges = std::collections::BinaryHeap::<HedgeAt>::new();
    let mut next: Option<(Item, Vec<Vec<u8>>)> = None;
    let mut ended = false;
    let t0 = sh.feed.schedule().stats().t0;
    let copy = |to: usize, item: Item, sent: u64, released: u64, primary: bool| {
        let mut payload = Vec::with_capacity(64);
        sh.feed.schedule().extra_request(&mut payload);
        q.0[to].push(Job {
            item,
            sent,
            released,
            payload,
            primary,
        });
        if item.measured {
            fan.sent.fetch_add(1, Ordering::Relaxed);
        }
    };
    loop {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        if next.is_none() && !ended {
            let mut s = sh.feed.schedule();
            let mut first = Vec::with_capacity(64);
            match s.next(&mut first, &sh.sink) {
                Some(item) if item.index < fan.capacity() => {
                    let mut ps = vec![first];
                    for _ in 1..n {
                        let mut b = Vec::with_capacity(64);
                        s.extra_request(&mut b);
                        ps.push(b);
                    }
                    next = Some((item, ps));
                }
                _ => ended = true,
            }
        }
        let t_next = next.as_ref().map_or(u64::MAX, |(it, _)| it.intended);
        let t_hedge = hedges.peek().map_or(u64::MAX, |h| h.at);
        if t_next == u64::MAX && t_hedge == u64::MAX {
            break;
        }
        let now = wait_until(t_next.min(t_hedge), mode, spec.spin_margin_ns);
        while hedges.peek().is_some_and(|h| h.at <= now) {
            let h = hedges.pop().expect("peeked");
            if !fan.answered(h.item.index, h.leaf) {
                let rep = (h.item.index as usize % r + 1) % r;
                copy(h.leaf * r + rep, h.item, now, h.released, false);
                if h.item.measured {
                    hedge_lag.saturating_record(now - h.at);
                }
            }
        }
        if t_next > now {
            continue;
        }
        let (item, payloads) = next.take().expect("due");
        fan.arrivals.lock().push(item.intended - t0);
        fan.released.lock().push(now.max(item.intended) - t0);
        if item.first_measured {
            crate::roi::begin(spec.roi);
            sh.server
                .begin_measurement(sh.sink.measure_start.load(Ordering::Acquire));
        }
        let rep = item.index as usize % r;
        let delay = fan.hedge.lock().delay();
        for (leaf, payload) in payloads.into_iter().enumerate() {
            q.0[leaf * r + rep].push(Job {
                item,
                sent: now,
                released: now,
                payload,
                primary: true,
            });
            if f.tied {
                copy(leaf * r + (rep + 1) % r, item, now, now, false);
            } else if let Some(d) = delay {
                hedges.push(HedgeAt {
                    at: now + d,
                    leaf,
                    item,
                    released: now,
                });
            }
        }
        if item.measured {
            fan.sent.fetch_add(n as u64, Ordering::Relaxed);
            fan.subs_measured.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
    fan.hists
        .lock()
        .hedge_lag
        .add(&hedge_lag)
        .expect("auto-resizing histograms add");
    q.close();
}

/// A worker of one leaf replica: serves the copies of its queue; a copy whose sub-request
/// already answered (or, tied, whose twin started) is dropped and counted; the answer that
/// completes a request (its K-th) records the request, its stamps those of the request's
/// release and of the copy that completed it.
pub(super) fn fanout_worker(
    sh: &Shared,
    w: usize,
    worker: &mut dyn crate::app::Worker,
    q: &JobQueue,
) -> Shard {
    let fan = sh.fan.as_ref().expect("a fan-out run");
    let leaf = w / fan.workers_per_server / fan.spec.replicas;
    let k = fan.spec.needed() as u32;
    let learns = matches!(fan.spec.hedge, crate::fanout::Hedge::Quantile(_));
    let mut ledger = Ledger::new(sh, w);
    let mut h = FanoutHists::default();
    let mut resp = Vec::with_capacity(256);
    // Since when this worker has had nothing to do: a copy sent after it found the worker
    // idle, and the time to its start is the worker's wake-up.
    let mut idle_since = now_ns();
    while let Some(job) = q.pop(sh.spec.wait) {
        if sh.abort.load(Ordering::Relaxed) {
            break;
        }
        let (req, m) = (job.item.index, job.item.measured);
        if !fan.take(req, leaf) {
            h.cancelled += u64::from(m);
            idle_since = now_ns();
            continue;
        }
        let started = now_ns();
        if m && job.sent >= idle_since {
            h.wake.saturating_record(started - job.sent);
        }
        resp.clear();
        let r = worker.handle(&job.payload, &mut resp);
        let finished = now_ns();
        idle_since = finished;
        if let Err(e) = r {
            count_error(sh, e);
        }
        if m {
            h.served += 1;
            h.copy.saturating_record(finished - job.sent);
            h.service.saturating_record(finished - started);
        }
        if job.primary && learns {
            fan.hedge.lock().observe(finished - job.sent);
        }
        let Some(answers) = fan.answer(req, leaf) else {
            continue;
        };
        let intended = job.item.intended;
        if m {
            h.leaf.saturating_record(finished - intended);
        }
        if answers == k {
            if m {
                h.e2e.saturating_record(finished - intended);
                h.e2e_released.saturating_record(finished - job.released);
            }
            // Sent when the request was released; enqueued when this copy was (a hedge's
            // later), so `queue` is the completing copy's own wait.
            let stamps = Stamps::local(
                intended,
                job.released,
                job.sent,
                started,
                finished,
                finished,
            );
            ledger.record(req, m, &stamps);
            sh.completed[w].fetch_add(1, Ordering::Relaxed);
        }
    }
    fan.per_leaf.lock()[leaf]
        .add(&h.leaf)
        .expect("auto-resizing histograms add");
    fan.hists.lock().absorb(&h);
    ledger.close()
}

/// What a fan-out run measured (its model is made when it is summarised).
pub(super) fn fanout_run(fan: &FanState, warmup: u64) -> crate::fanout::FanoutRun {
    let mut hists = std::mem::take(&mut *fan.hists.lock());
    hists.subs = fan.subs_measured.load(Ordering::Relaxed);
    hists.sent = fan.sent.load(Ordering::Relaxed);
    crate::fanout::FanoutRun {
        spec: fan.spec.clone(),
        workers_per_replica: fan.workers_per_server,
        hists,
        per_leaf: fan
            .per_leaf
            .lock()
            .iter()
            .map(|h| crate::collector::MetricStats::from_hist(h, None))
            .collect(),
        arrivals: std::mem::take(&mut *fan.arrivals.lock()),
        released: std::mem::take(&mut *fan.released.lock()),
        warmup,
    }
}
