//! `taillab run --topology loopback|networked`: one server, C client
//! processes, one ordinary result folder.
//!
//! The coordinator starts `taillab serve` and C × `taillab load` through
//! launcher templates (a plain local process by default; `ip netns exec NS
//! {cmd}` in the tests; `ssh HOST {cmdq}` across hosts). It talks to them
//! only over their stdin/stdout, which every launcher forwards:
//!
//! 1. the server prints `listening ADDR`; clients are told that target;
//! 2. each client connects, then prints `ready` (the barrier);
//! 3. when all are ready the coordinator writes `go DELAY_NS` to every
//!    client; each starts its schedule DELAY later on its own clock, so the
//!    clients start together within the pipes' latency without any clock
//!    synchronisation;
//!    while they run, a loopback run with live metrics and the environment
//!    monitor on writes each client `foreign PCT` once a second: other
//!    processes' CPU on the host over the last second, from the
//!    coordinator's sampler (the clients serve it, [`follow_coordinator`]);
//! 4. each client prints its histograms as one `shard {json}` line, with
//!    its times relative to its own schedule start;
//! 5. the coordinator adds the histograms (HdrHistogram add — percentiles
//!    are never averaged), sums counts and per-slice arrivals/completions,
//!    and writes the same `summary.json` and `hist/*.hlog` as integrated;
//! 6. closing the server's stdin stops it (`--exit-on-eof`).
//!
//! Splitting the rate: client i runs at qps/C with its own derived seed.
//! The superposition of C independent Poisson streams of rate λ/C is a
//! Poisson stream of rate λ, so the offered process is unchanged. With one
//! client the base seed is used as is, so `--clients 1` sends exactly the
//! requests `--config integrated` would.
//!
//! Any child still running when the coordinator returns (error or not) is
//! killed by `Children`'s `Drop`.

use crate::client::{new_hist, ClientStamps, LoadResult};
use crate::fanout::{clients, leaves, ReqRow};
use crate::launch::{expand, lines_of, spawn};
use crate::TransportError;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc;
use std::time::Duration;
use taillab_core::arrival::derive_seed;
use taillab_core::collector::{
    decode_hist, encode_hist, Hists, IntervalBlob, IntervalSink, MetricStats, Shard, N_METRICS,
};
use taillab_core::config::auto::TcpChoice;
use taillab_core::config::{view, RunConfig, Topology};
use taillab_core::reqfile::{self, RequestFormat, Sender};
use taillab_core::schedule::ScheduleStats;
use taillab_core::sections::transport::{CappedTiming, ClientShare, SenderShare, ServeStats, TransportSection};
use taillab_core::{Bound, RunResult, RunSpec, Summary};

mod fleet;
mod merge;
mod peer;
mod run;
mod shard;
#[cfg(test)]
mod tests;

pub use fleet::*;
pub use merge::*;
pub use peer::*;
pub use run::*;
pub use shard::*;
