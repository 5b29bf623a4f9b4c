//! The sections of `summary.json` that other parts add to a run's summary,
//! typed here so that [`Summary`](crate::summary::Summary) holds each as a field
//! and one JSON Schema (`docs/schema/run-2.json`, [`crate::summary::run_schema`])
//! describes the whole file. The crates that compute a section re-export its
//! types; this module holds only their data and how it reads (its table lines),
//! never how it is measured or judged.
//!
//! | key | type | written by | own version |
//! |---|---|---|---|
//! | `anatomy` | [`Anatomy`] | cli runner, from taillab-explain (`record.explain`) | [`ANATOMY_SCHEMA`] |
//! | `environment` | [`EnvSummary`] | cli runner, from taillab-monitor | `taillab.run` |
//! | `environment_redo` | [`EnvironmentRedo`] | cli experiment (disturbed runs redone) | `taillab.run` |
//! | `nodes` | `[`[`NodeReport`]`]` | transport's Slurm node monitors | `taillab.run` |
//! | `counters` | [`CountersReport`] | cli runner, from taillab-counters | [`COUNTERS_SCHEMA`] |
//! | `interference` | [`InterferenceReport`] | cli planned, from taillab-interfere | [`INTERFERENCE_SCHEMA`] |
//! | `profile` | [`ProfileOutcome`] | cli planned (`perf record`) | `taillab.run` |
//! | `tuning` | [`TuningRecord`] | cli planned (host knobs) | `taillab.run` |
//! | `transport` | [`TransportSection`] | transport's `load` and coordinator | `taillab.run` |
//! | `server` | [`ServeStats`] | transport's coordinator, from `taillab serve` | `taillab.run` |
//! | `roi` | [`RoiSection`] | cli runner (simulator markers) | `taillab.run` |
//! | `stalls` | [`Stalls`](crate::stalls::Stalls) | core (integrated runs) | `taillab.run` |
//! | `incomplete` | `String` | core ([`Summary::mark_incomplete`](crate::summary::Summary::mark_incomplete)) | `taillab.run` |
//!
//! A section without a version of its own changes only with the run schema
//! ([`crate::summary::RUN_SCHEMA`]); one with a version says so in its
//! `schema` key and changes it when its shape does.

pub mod anatomy;
pub mod counters;
pub mod environment;
pub mod planned;
pub mod transport;

pub use anatomy::{Anatomy, AnatomyRow, ANATOMY_SCHEMA};
pub use counters::{CountersReport, COUNTERS_SCHEMA};
pub use environment::{EnvSummary, EnvironmentRedo, NodeReport};
pub use planned::{InterferenceReport, ProfileOutcome, TuningRecord, INTERFERENCE_SCHEMA};
pub use transport::{ServeStats, TransportSection};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `roi`: the simulator markers a run issued (`record.roi`, docs/simulators.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RoiSection {
    /// The marker kind.
    pub mode: crate::roi::RoiMode,
    /// Markers issued during the run.
    pub issued: crate::roi::RoiCounts,
}
