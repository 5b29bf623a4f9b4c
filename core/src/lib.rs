//! taillab-core: the harness as a library.
//!
//! A run is an open-loop schedule of requests (from an [`arrival`] process),
//! served by N worker threads ([`harness`]) through a request queue
//! ([`queue`]: shared or per worker, FIFO, LIFO or random order) or by
//! workers that claim scheduled arrivals directly, with every request's six
//! stamps turned into histograms by the [`collector`] and into a [`summary`]
//! with self-checks and the run's [`ideal`]: its own arrivals and service
//! times replayed through the exact queue of [`sim`] (the stamps:
//! docs/design.md). A run is configured by one [`config::RunConfig`]; the
//! experiment logic over runs is in [`search`].

#![warn(missing_docs)]

pub mod app;
pub mod arrival;
pub mod clock;
pub mod collector;
#[macro_use]
mod macros;
pub mod config;
pub mod design;
pub mod dist;
pub mod drain;
pub mod empirical;
pub mod error;
pub mod experiment;
pub mod fanout;
pub mod feed;
pub mod harness;
pub mod ideal;
pub mod model;
pub mod outbox;
pub mod pages;
pub mod placement;
pub mod queue;
pub mod records;
pub mod reqfile;
pub mod result;
pub mod roi;
pub mod schedule;
pub mod search;
pub mod sections;
pub mod sim;
mod slotbits;
pub mod spec;
pub mod stalls;
pub mod stats;
pub mod summary;

pub use app::{App, AppError, Client, DataCtx, KeySpec, Params, PointLength, Server, Worker};
pub use error::{Invalid, ValueError};
pub use harness::{run_integrated, run_integrated_with, Bound, RunError, RunSpec, ShaperMode};
pub use result::RunResult;
pub use summary::{summarize, write_run, Summary};
