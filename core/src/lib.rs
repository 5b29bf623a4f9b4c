//! taillab-core: the harness as a library.
//!
//! A run is an open-loop schedule of requests (from an [`arrival`] process),
//! served by N worker threads through a FIFO request queue (or by workers that
//! claim scheduled arrivals directly, see [`harness`]), with every request's
//! six stamps (see DESIGN.md) turned into histograms by the [`collector`] and
//! into a [`summary`] with self-checks.

pub mod app;
pub mod clock;

pub use app::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};
