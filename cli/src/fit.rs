//! `taillab fit`: the measured service times of a run (or of each point of an
//! experiment) fitted with a mixture of log-normals, and the synth spec that
//! reproduces them. The fitting is the Python package's (`taillab.fit`:
//! scikit-learn's EM on ln of the service times, components chosen by BIC); this
//! is its door, as `report` is the report's.

use clap::{value_parser, Args};
use std::path::PathBuf;

/// The flags of `taillab fit`.
#[derive(Args, Debug)]
pub struct FitArgs {
    /// A run folder, or an experiment folder (one fit per point).
    pub results: PathBuf,
    /// Fit only this point of an experiment.
    #[arg(long, value_name = "ID")]
    pub point: Option<String>,
    /// Also fit one synthetic workload to the fewest-worker points together (entry
    /// `all`): a cold-start term (synth's `cold=F,tau=D`) from their per-request
    /// records, and a mixture of the service times it implies when warm.
    #[arg(long)]
    pub pooled: bool,
    /// Print the whole fit as JSON (what fit.json holds).
    #[arg(long)]
    pub json: bool,
    /// Write DIR/fit.json and DIR/fit-figures/ (measured vs fitted density and CDF);
    /// with DIR = the results folder, `taillab report` shows the fit.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Fix the number of components instead of choosing it by BIC.
    #[arg(long, value_name = "K", value_parser = value_parser!(u8).range(1..=5))]
    pub components: Option<u8>,
    /// The largest number of components BIC may choose.
    #[arg(long, value_name = "K", default_value_t = 5, value_parser = value_parser!(u8).range(1..=5))]
    pub max_components: u8,
}

impl FitArgs {
    /// The arguments of `python -m taillab fit`.
    pub fn python_args(&self) -> Vec<String> {
        let mut v = vec!["fit".to_string(), self.results.display().to_string()];
        if let Some(p) = &self.point {
            v.extend(["--point".into(), p.clone()]);
        }
        if self.pooled {
            v.push("--pooled".into());
        }
        if self.json {
            v.push("--json".into());
        }
        if let Some(o) = &self.out {
            v.extend(["--out".into(), o.display().to_string()]);
        }
        if let Some(k) = self.components {
            v.extend(["--components".into(), k.to_string()]);
        }
        v.extend(["--max-components".into(), self.max_components.to_string()]);
        v
    }
}

/// Runs the fit; exit code 0, or 2 when a point was refused (too few requests, no
/// service time) — the reason is printed by the package.
pub fn run(a: FitArgs) -> anyhow::Result<i32> {
    crate::analysis::run_python(&a.python_args())
}
