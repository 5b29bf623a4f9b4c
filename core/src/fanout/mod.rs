//! Fan-out: one request split over N leaves, answered when all of them (or the first K)
//! have; hedged and tied requests over R replicas of each leaf ("The Tail at Scale").
//!
//! A leaf that is slow with probability p makes a request that waits for N leaves slow with
//! probability 1 − (1 − p)^N: the tail of the whole is an order statistic of its leaves'.
//! Two remedies are modelled and measured:
//! - **hedged** requests (`hedge = after=D` or `after=pQ`): when a leaf's sub-request has not
//!   answered D after it was sent (or the running Q-quantile of a leaf's latency), a copy goes
//!   to the next replica; the first answer wins and the copy still queued is cancelled. The
//!   extra load is the copies served per sub-request.
//! - **tied** requests (`tied`): both replicas get the sub-request at once; the first to start
//!   it cancels the other's copy. A worker claims a tied sub-request atomically, so a copy
//!   that finds its twin started is dropped however soon after (two real servers would both
//!   run it within their cancellation message's delay): on idle replicas the primary runs and
//!   the twin is cancelled, and tying helps only where a copy would wait in a queue.
//!
//! [`FanoutSpec`] is the configuration (`[fanout]`), [`simulate`] the exact discrete-event
//! model: N×R servers with W workers each, FIFO, every copy its own service draw. It is
//! `taillab model --fanout` and the ideal of a fan-out run (the run's own arrivals, service
//! times drawn from the run's measured copies).

use crate::collector::MetricStats;
use crate::config::value::{ConfigValue, Dur};
use hdrhistogram::Histogram;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

mod model;
mod spec;
mod state;
mod stats;
#[cfg(test)]
mod tests;

pub use model::*;
pub use spec::*;
pub use state::*;
pub use stats::*;
