//! Where an experiment's runs execute: on this host, one after another, or as Slurm jobs on a
//! cluster. `sweep`, `attribute` and `reproduce` hold one [`Executor`] and call it; none of
//! them asks which kind it holds.
//!
//! A local executor runs points in the order the caller chose (a sweep's point order or
//! round robin, an attribution's blocks, an SLO's one point): the caller hands that schedule
//! to [`Executor::run_points`] as `local`. A Slurm executor submits every point's runs as
//! jobs and gathers them itself, so it does not call `local`.

use crate::runner::{app_of, run_once};
use std::path::{Path, PathBuf};
use taillab_core::config::experiment::{Executor as Kind, Point, Sweep};
use taillab_core::config::RunConfig;
use taillab_core::experiment::{Aggregate, CiTarget};
use taillab_core::Summary;

/// Points and the folder each one's runs go into.
pub type PointDirs<'a> = [(&'a Point, PathBuf)];

/// How a caller runs its points on this host, in its own order.
pub type LocalRuns<'f> =
    dyn FnMut(&PointDirs<'_>, &CiTarget) -> anyhow::Result<Vec<Aggregate>> + 'f;

/// Where an experiment's runs execute (see the module docs).
pub trait Executor {
    /// One run of `cfg` into `dir` (a saturation or SLO probe); its summary.
    fn run_one(&self, cfg: &RunConfig, dir: &Path) -> anyhow::Result<Summary>;
    /// Every point's runs (into its folder) to the stopping rule `ci`; their aggregates in
    /// the points' order. On this host, `local` runs them.
    fn run_points(
        &self,
        points: &PointDirs<'_>,
        ci: &CiTarget,
        local: &mut LocalRuns<'_>,
    ) -> anyhow::Result<Vec<Aggregate>>;
}

/// Runs on this host, in the caller's order.
pub struct Local;

impl Executor for Local {
    fn run_one(&self, cfg: &RunConfig, dir: &Path) -> anyhow::Result<Summary> {
        run_once(&app_of(cfg)?, cfg, dir, false)
    }
    fn run_points(
        &self,
        points: &PointDirs<'_>,
        ci: &CiTarget,
        local: &mut LocalRuns<'_>,
    ) -> anyhow::Result<Vec<Aggregate>> {
        local(points, ci)
    }
}

impl Executor for crate::slurm::Slurm<'_> {
    fn run_one(&self, cfg: &RunConfig, dir: &Path) -> anyhow::Result<Summary> {
        crate::slurm::Slurm::run_one(self, cfg, dir)
    }
    fn run_points(
        &self,
        points: &PointDirs<'_>,
        ci: &CiTarget,
        _local: &mut LocalRuns<'_>,
    ) -> anyhow::Result<Vec<Aggregate>> {
        crate::slurm::Slurm::run_points(self, points, ci)
    }
}

/// The executor `sweep.executor` names, for an experiment writing into `out` (Slurm's client
/// commands are checked here, before anything runs).
pub fn of<'a>(sweep: &'a Sweep, out: &Path, quiet: bool) -> anyhow::Result<Box<dyn Executor + 'a>> {
    Ok(match sweep.executor {
        Kind::Local => Box::new(Local),
        Kind::Slurm => Box::new(crate::slurm::Slurm::new(sweep, out, quiet)?),
    })
}
