//! Planned background load: start the hogs, name every process they run,
//! measure what they used, and stop them so that none survives.
//!
//! A run starts its [`Interference`] before warmup and stops it after the
//! measured phase; [`Interference::pids`] are handed to the environment
//! monitor as the experiment's own processes, so their CPU is planned
//! interference and not foreign use, while anything else still fails the
//! environment check. [`Interference::stop`] returns an
//! [`InterferenceReport`], the `interference` section of `summary.json`.
//!
//! The network hog is iperf3 (server and client on 127.0.0.1, one client
//! with N parallel TCP streams) rather than a second taillab load: it needs
//! no second app or server configuration, its rate is one flag, and its
//! traffic is pure loopback TCP, which is the point of the hog.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::contain::{self, Cgroup, Watchdog};
use crate::preflight::{self, PreflightError};
use crate::signals;
use crate::spec::{Class, CpuList, InterfereSpec};
use crate::usage::{self, ProcessUsage, UsageSnapshot};
pub use taillab_core::sections::planned::{
    HogProcess, HogReport, InterferenceReport, INTERFERENCE_SCHEMA as REPORT_SCHEMA,
};

/// Why interference could not start. Nothing is left running when this is
/// returned.
#[derive(Debug, thiserror::Error)]
pub enum InterfereError {
    /// A check before starting failed (CPUs, nice value, program not installed).
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// The folder for logs and scratch files could not be created.
    #[error("cannot create the interference folder {path}: {source}")]
    Folder {
        /// The folder.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A hog's program could not be started.
    #[error("cannot start `{command}` for interference {spec}: {source}")]
    Spawn {
        /// The interference spec, as written in the configuration.
        spec: String,
        /// The command line that failed.
        command: String,
        /// The error `spawn` returned.
        source: std::io::Error,
    },
    /// A hog started but exited or failed before it settled; its log is kept.
    #[error("interference {spec} did not start: {why}; its log {log} ends with: {tail}")]
    NotStarted {
        /// The interference spec, as written in the configuration.
        spec: String,
        /// What was seen: an exit status, too few workers in time, or no iperf3 server.
        why: String,
        /// Path of the hog's log file.
        log: String,
        /// Its last three lines, joined by ` | `.
        tail: String,
    },
}

/// How long a hog's process tree must stop growing before it counts as started.
pub const SETTLE_QUIET: Duration = Duration::from_millis(150);

/// Where logs and scratch files go, and how long to wait for start-up.
#[derive(Debug, Clone)]
pub struct InterfereOptions {
    /// Folder for each hog's log (`interfere-<k>-<class>.log`) and the
    /// `io`/`hdd` scratch files. `None`: a fresh folder under the temp dir,
    /// deleted at stop unless a hog died early (then its logs are kept and
    /// the report names the folder).
    pub dir: Option<PathBuf>,
    /// How long a hog may take to start all its processes (default 10 s).
    pub settle_timeout: Duration,
    /// How long `stop` waits for SIGTERM before SIGKILL (default 3 s).
    pub term_grace: Duration,
    /// Use a cgroup-v2 group where the host allows one (default true;
    /// false tests or forces process-group containment alone).
    pub use_cgroup: bool,
}

impl Default for InterfereOptions {
    fn default() -> Self {
        InterfereOptions {
            dir: None,
            settle_timeout: Duration::from_secs(10),
            term_grace: Duration::from_secs(3),
            use_cgroup: true,
        }
    }
}

/// One direct child (stress-ng, or iperf3 server/client).
#[derive(Debug)]
struct Direct {
    role: &'static str,
    child: Child,
    /// Exit status if it ended before `stop` began.
    early_exit: Option<ExitStatus>,
    status: Option<ExitStatus>,
}

/// One process of a hog seen at some point.
#[derive(Debug, Clone)]
struct Seen {
    role: &'static str,
    name: String,
    starttime: u64,
}

#[derive(Debug)]
struct Hog {
    spec: InterfereSpec,
    command: Vec<String>,
    log: PathBuf,
    direct: Vec<Direct>,
    seen: BTreeMap<i32, Seen>,
}

/// Snapshots that bound the reported window.
#[derive(Debug, Default)]
struct Marks {
    start: Option<(UsageSnapshot, Option<u64>)>,
    end: Option<(UsageSnapshot, Option<u64>)>,
    measured: bool,
}

/// Running planned interference. Dropping it without [`stop`](Self::stop)
/// kills every hog at once.
#[derive(Debug)]
pub struct Interference {
    hogs: Mutex<Vec<Hog>>,
    cgroup: Option<Cgroup>,
    watchdog: Option<Watchdog>,
    dir: PathBuf,
    dir_is_temp: bool,
    marks: Mutex<Marks>,
    opts: InterfereOptions,
    /// Process group of every direct child ever spawned (its pid), shared
    /// with the emergency cleanup run from a signal.
    groups: Arc<Mutex<Vec<i32>>>,
    cleanup_id: Option<u64>,
    /// Keep the scratch folder (a hog failed to start: its log explains why).
    keep_dir: bool,
    stopped: bool,
}

mod report;
mod run;
mod spawn;

pub use report::*;
pub use spawn::*;
