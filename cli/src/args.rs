//! Flag groups several commands share (besides the configuration's own
//! flags, which come from its field declarations).

use clap::Args;
use std::path::PathBuf;

/// Where a run's configuration starts before the flags: a past run's
/// `config.toml`, then a file.
#[derive(Args, Debug, Clone, Default)]
pub struct Sources {
    /// A configuration file (commented TOML, see configs/); flags override its keys.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// Start from a run folder's config.toml (a rerun), then --file, then flags.
    #[arg(long, value_name = "RUN_DIR")]
    pub from: Option<PathBuf>,
}

/// What one measurement writes and prints.
#[derive(Args, Debug, Clone, Default)]
pub struct Output {
    /// Results folder (default: under results/, named after the app and the time).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print summary.json to stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
    /// Exit with status 1 when a check failed.
    #[arg(long)]
    pub strict: bool,
}

/// An experiment's results folder (many runs).
#[derive(Args, Debug, Clone, Default)]
pub struct ExperimentOut {
    /// Results folder (default: under results/, named after the command, the app and the time).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue an interrupted experiment in --out: finished runs are kept as they are.
    #[arg(long)]
    pub resume: bool,
    /// No progress bars.
    #[arg(long, short)]
    pub quiet: bool,
}
