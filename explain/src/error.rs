//! Why `--explain` cannot trace on this host: each says what is missing and how to enable it.

use std::path::PathBuf;

/// What stops the tracer, found before a run starts ([`crate::preflight`]) or while opening.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// Not root, and the kernel would refuse system-wide tracepoints.
    #[error("record.explain traces every task on the workers' CPUs: run as root (or with CAP_PERFMON and CAP_DAC_READ_SEARCH for tracefs), or set `sysctl -w kernel.perf_event_paranoid=-1` (now {paranoid}) and make tracefs readable; or run without --explain")]
    NotPermitted {
        /// `kernel.perf_event_paranoid`.
        paranoid: i64,
    },
    /// No tracefs mounted, and it could not be mounted.
    #[error("record.explain needs tracefs and none is mounted ({why}): mount it with `mount -t tracefs nodev /sys/kernel/tracing` (a kernel built with CONFIG_FTRACE), or run without --explain")]
    NoTracefs {
        /// What was tried.
        why: String,
    },
    /// A tracepoint the join needs is not in this kernel.
    #[error("record.explain needs the tracepoint {name}, which this kernel lacks ({path} is missing): a kernel with CONFIG_TRACEPOINTS and {config}, or run without --explain")]
    MissingTracepoint {
        /// `sys:name`.
        name: String,
        /// Its tracefs folder.
        path: PathBuf,
        /// The kernel option that provides it.
        config: &'static str,
    },
    /// A tracepoint's `format` file says something the decoder does not understand.
    #[error("tracepoint {name}: {why} (in {path}); this kernel's layout is not one record.explain can read")]
    Format {
        /// `sys:name`.
        name: String,
        /// The `format` file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// `perf_event_open` refused a tracepoint.
    #[error("perf_event_open refused tracepoint {name} on CPU {cpu}: {source}; check `sysctl kernel.perf_event_paranoid` (-1, or run as root) or run without --explain")]
    Open {
        /// `sys:name`.
        name: String,
        /// The CPU.
        cpu: usize,
        /// The kernel's error.
        source: std::io::Error,
    },
    /// Reading tracefs failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}
