//! taillab-transport: how a request reaches the queue across a socket.
//!
//! - [`proto`]: the taillab wire protocol (length-prefixed frames whose
//!   responses carry the server's queue and service durations);
//! - [`server`]: `taillab serve`, an app behind TCP with the same request
//!   queue and workers as the integrated configuration;
//! - [`client`]: `taillab load`, the open-loop client (same schedule and
//!   collector as integrated, separate send and receive paths);
//! - [`wire`]: client-side protocols, the taillab one and the external
//!   servers' (memcached text, redis RESP, HTTP/1.1);
//! - [`http2`], [`grpc`], [`tls`]: HTTP/2 on the load side (gRPC unary
//!   calls with a raw-bytes codec, HTTP/2 GETs; h2c or TLS with ALPN);
//! - [`apps`](mod@apps): `null` (echo) and the external-server adapter apps;
//! - [`coord`]: `taillab run --topology loopback|networked`, which launches a
//!   server and C clients, starts them behind a barrier and merges their
//!   histograms into one ordinary result folder;
//! - [`fanout`]: a fan-out over N leaf servers, one client per leaf, their
//!   answers joined by request id into whole requests;
//! - [`load`]: `taillab load` as a library (a result folder, or a shard for
//!   the coordinator);
//! - [`epoll`]: the epoll set behind per-worker dispatch and the polling
//!   client;
//! - [`tstamp`]: kernel receive stamps (SO_TIMESTAMPING) and their clock;
//! - [`slurm`]: the `slurm` launcher: server and clients as `srun` steps on
//!   the nodes of a Slurm job, and every node's environment.
//!
//! The binary (cli/) parses flags into a [`taillab_core::config::RunConfig`]
//! and decides exit codes; nothing here exits or parses a command line.

#![warn(missing_docs)]

pub mod apps;
pub mod client;
pub mod coord;
pub mod epoll;
pub mod explain;
pub mod fanout;
pub mod grpc;
pub mod http2;
pub mod launch;
pub mod load;
pub mod proto;
pub mod report;
pub mod server;
pub mod slurm;
pub mod sys;
pub mod tls;
pub mod tstamp;
pub mod wire;

pub use apps::apps;

/// Errors of the transport layer; each says what to change.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// A setting out of range or missing; the message names the flag.
    #[error("{0}")]
    Invalid(String),
    /// A socket, file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, e.g. `starting client 2`.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The peer sent what is not a valid response (a bad frame, an unknown id).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The app refused its settings or could not start.
    #[error(transparent)]
    App(#[from] taillab_core::AppError),
    /// A harness error: an invalid run, a thread placement refused, a worker panicked.
    #[error(transparent)]
    Run(#[from] taillab_core::RunError),
    /// A result file could not be written or read.
    #[error(transparent)]
    Result(#[from] taillab_core::summary::ResultError),
    /// Coordinating server and clients failed: a part died, did not answer in time
    /// or reported a failure.
    #[error("{0}")]
    Launch(String),
}
