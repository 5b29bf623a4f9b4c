//! `taillab fit`: the measured service times of a run (or of each point of an
//! experiment) fitted with a mixture of log-normals, and the synth spec that
//! reproduces them. The fitting is the Python package's (`taillab.fit`:
//! scikit-learn's EM on ln of the service times, components chosen by BIC, the
//! optional terms of a fit across loads chosen on held-out blocks); this is its
//! door, as `report` is the report's. Its flags are declared once, there
//! (`taillab fit --help` prints them): this door passes every argument on.

use clap::Args;

/// The arguments of `taillab fit`, passed on whole to `python -m taillab fit`.
#[derive(Args, Debug)]
#[command(disable_help_flag = true)]
pub struct FitArgs {
    /// RESULTS [--point ID] [--pooled] [--json] [--out DIR] [--components K]
    /// [--max-components K] [--fit-set KEY=VALUE]... (`taillab fit --help` says more).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

impl FitArgs {
    /// The arguments of `python -m taillab fit`.
    pub fn python_args(&self) -> Vec<String> {
        std::iter::once("fit".to_string())
            .chain(self.args.iter().cloned())
            .collect()
    }
}

/// Runs the fit; exit code 0, or 2 when a point was refused (too few requests, no
/// service time) or an argument is bad — the reason is printed by the package.
pub fn run(a: FitArgs) -> anyhow::Result<i32> {
    crate::analysis::run_python(&a.python_args())
}
