//! `taillab config`: the keys of the one run configuration, a resolved
//! configuration as `config.toml`, and the JSON Schema of the result files.

use crate::args::Sources;
use clap::{Args, Subcommand};
use taillab_core::config::flags::{describe_keys, ConfigFlags};
use taillab_core::config::view;

/// `taillab config`.
#[derive(Subcommand, Debug, Clone)]
pub enum ConfigCmd {
    /// Every configuration key: its flag, default, form and help.
    Keys,
    /// The resolved configuration of these flags (and --from / --file) as config.toml.
    Show(ShowArgs),
    /// The JSON Schema of a result file, generated from the types that write it
    /// (`run`: summary.json, checked in as docs/schema/run-2.json).
    Schema {
        /// Which file: `run` (summary.json).
        #[arg(value_enum)]
        file: SchemaFile,
    },
}

/// The result files `taillab config schema` describes.
#[derive(clap::ValueEnum, Debug, Clone, Copy)]
pub enum SchemaFile {
    /// A run's summary.json (`taillab.run/2`).
    Run,
}

/// `taillab config show`.
#[derive(Args, Debug, Clone)]
pub struct ShowArgs {
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::RUN }>,
    #[command(flatten)]
    pub src: Sources,
}

pub fn run(c: ConfigCmd) -> anyhow::Result<i32> {
    match c {
        ConfigCmd::Keys => {
            print!("{}", describe_keys());
            println!(
                "\nSweep-only keys ([sweep] of an experiment file, flags of `taillab sweep`):"
            );
            for f in taillab_core::config::experiment::sweep_fields() {
                println!("  sweep.{:<18} --{:<14} {}", f.name, f.flag(), f.help());
            }
        }
        ConfigCmd::Show(a) => {
            let cfg =
                crate::run::resolve(a.src.from.as_deref(), a.src.file.as_deref(), &a.cfg.pairs)?;
            print!("{}", cfg.to_toml());
        }
        ConfigCmd::Schema {
            file: SchemaFile::Run,
        } => {
            let s = taillab_core::summary::run_schema();
            println!("{}", serde_json::to_string_pretty(&s)?);
        }
    }
    Ok(0)
}
