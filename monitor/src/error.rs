//! The monitor's one error type. Each message says what to do about it.

use std::path::PathBuf;

use crate::procfs::ParseError;

#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("cannot read {path}: {source} (the monitor needs a Linux /proc; inside a container, mount it)")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("cannot start the sampler thread: {0} (too many threads or out of memory?)")]
    Spawn(std::io::Error),
    #[error(
        "the sampler thread panicked: {0}; this is a bug in taillab-monitor, please report it"
    )]
    SamplerPanicked(String),
    #[error("bad sampler setting `{key}`: {why}")]
    BadConfig { key: &'static str, why: String },
    #[error("cannot {action} the tuning state file {path}: {why} (pass another path, or delete a corrupt file after restoring the settings by hand)")]
    State {
        action: &'static str,
        path: PathBuf,
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
