//! `taillab config`: the keys of the one run configuration, and a resolved
//! configuration as `config.toml`.

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
    }
    Ok(0)
}
