//! The calling thread of a load: progress, interval histograms, and the end of the run —
//! every response in, the server lost or silent, or the drain given up.

use super::lane::Shared;
use super::LoadOpts;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use taillab_core::clock::now_ns;
use taillab_core::harness::Progress;
use taillab_core::RunSpec;

/// The lanes' counters added up.
#[derive(Default)]
struct Totals {
    sent: u64,
    done: u64,
    replies: u64,
    senders_done: bool,
    lost: bool,
    last_intended: u64,
}

fn totals(lanes: &[Arc<Shared>]) -> Totals {
    let mut t = Totals { senders_done: true, ..Default::default() };
    for sh in lanes {
        t.done += sh.completed.load(Ordering::Acquire);
        t.sent += sh.sent.load(Ordering::Acquire);
        t.replies += sh.replies.load(Ordering::Acquire);
        t.senders_done &= sh.sender_done.load(Ordering::Acquire);
        t.lost |= sh.lost().is_some();
        t.last_intended = t.last_intended.max(sh.last_intended.load(Ordering::Relaxed));
    }
    t
}

/// Why a run stopped at a server that went silent: which server, for how long, and what it
/// left unanswered.
pub(crate) fn silent(target: &str, quiet_ns: u64, outstanding: u64, answered: u64) -> String {
    format!(
        "{target} did not answer: no response for {:.1} s with {outstanding} requests outstanding ({answered} answered before): the server is dead or hung",
        quiet_ns as f64 / 1e9
    )
}

/// Reports progress every 20 ms until every sent request is answered; ends the run early
/// (returns `true`) when a connection is lost, the server stops answering for `dead_after`,
/// or the run is past its drain deadline or hopeless.
pub(crate) fn watch_load(
    lanes: &[Arc<Shared>],
    spec: &RunSpec,
    opts: &LoadOpts,
    t0: u64,
    progress: &mut dyn FnMut(Progress),
) -> bool {
    let sink = &lanes[0].sink;
    let expected = spec.expected_total_ns();
    let mut watch = spec.drain_watch(t0);
    let planned = spec.record_capacity();
    let (mut last_replies, mut last_progress_at) = (0u64, now_ns());
    loop {
        std::thread::sleep(Duration::from_millis(20));
        // Follows wall-clock steps: kernel stamps are on that clock.
        crate::tstamp::refresh_offset();
        sink.collect();
        let now = now_ns();
        let t = totals(lanes);
        progress(Progress {
            completed: t.done,
            planned,
            elapsed_ns: now.saturating_sub(t0),
            expected_ns: expected,
            measuring: sink.measuring(now),
            in_flight: spec.live.then(|| t.sent.saturating_sub(t.done)),
            interval: sink.latest(),
            warmup_interval: sink.latest_warmup(),
        });
        if t.senders_done && t.done >= t.sent {
            break;
        }
        if t.lost {
            return true;
        }
        // Any response counts as a sign of life, also one whose slot a later request took
        // (a hopelessly saturated run).
        if t.replies != last_replies || t.sent == t.done {
            (last_replies, last_progress_at) = (t.replies, now);
        } else if now - last_progress_at > opts.dead_after_ns {
            lanes[0].lose(silent(&opts.target, now - last_progress_at, t.sent - t.done, t.done));
            return true;
        }
        let backlog = || spec.backlog(t.sent, t.last_intended.saturating_sub(t0), t.done);
        if now > watch.deadline() || watch.hopeless(now, t.done, backlog) {
            // The drain gives up on a backlog that is not being served. A server that answers
            // slowly is saturated (the run's verdict says so); one that has answered nothing
            // for a drain window is dead or hung, and that is an error, not a result, even
            // when the schedule ended before `net.dead_after` ran out.
            let quiet = now - last_progress_at;
            if t.sent > t.done && quiet >= taillab_core::drain::WINDOW_NS.min(opts.dead_after_ns) {
                lanes[0].lose(silent(&opts.target, quiet, t.sent - t.done, t.done));
            }
            return true;
        }
    }
    false
}
