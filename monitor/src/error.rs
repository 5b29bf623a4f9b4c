//! The monitor's one error type. Each message says what to do about it.

use std::path::PathBuf;

use crate::procfs::ParseError;

/// What can go wrong sampling the host, reading it, or tuning it.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// A `/proc` or `/sys` file could not be read.
    #[error("cannot read {path}: {source} (the monitor needs a Linux /proc; inside a container, mount it)")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A `/proc` file had an unexpected shape.
    #[error(transparent)]
    Parse(#[from] ParseError),
    /// The sampler thread could not be created.
    #[error("cannot start the sampler thread: {0} (too many threads or out of memory?)")]
    Spawn(std::io::Error),
    /// The sampler thread panicked (a bug); the value is the panic message.
    #[error(
        "the sampler thread panicked: {0}; this is a bug in taillab-monitor, please report it"
    )]
    SamplerPanicked(String),
    /// A [`SamplerConfig`](crate::SamplerConfig) value, or a measured window, is out of range.
    #[error("bad sampler setting `{key}`: {why}")]
    BadConfig {
        /// The setting (`period`, `nice`, `measured window`, ...).
        key: &'static str,
        /// What is wrong with its value.
        why: String,
    },
    /// The tuning state file could not be read, parsed, written or removed.
    #[error("cannot {action} the tuning state file {path}: {why} (pass another path, or delete a corrupt file after restoring the settings by hand)")]
    State {
        /// The verb of the message (`read`, `parse`, `write`, `remove`, ...).
        action: &'static str,
        /// The state file.
        path: PathBuf,
        /// The underlying error.
        why: String,
    },
}

impl MonitorError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        MonitorError::Io {
            path: path.into(),
            source,
        }
    }
}
