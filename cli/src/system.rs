//! `taillab system show|tune|reset`: is this host fit for tail measurements
//! right now, and the settings that make it fitter (see taillab-monitor's
//! `system` module for what each setting does and why).

use anyhow::bail;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use taillab_monitor::{
    default_run_journal_path, default_state_path, SystemReport, Thresholds, Tuner,
};

#[derive(Subcommand, Debug)]
pub enum SystemCmd {
    /// Print host facts, steal and foreign CPU use measured now, warnings and tuning state.
    Show(ShowArgs),
    /// Apply the tuning operations (saving prior values for `reset`).
    Tune(TuneArgs),
    /// Restore the values saved by `tune`, and those a killed run left in its journal.
    Reset(StateArg),
}

#[derive(Args, Debug)]
pub struct StateArg {
    /// State file with the values `tune` replaced [default: $TAILLAB_STATE_DIR/system-tune.json or ~/.local/state/taillab/system-tune.json].
    #[arg(long)]
    pub state: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// How long to measure steal and foreign CPU use (e.g. 1s; 0 skips it).
    #[arg(long, default_value = "1s", value_parser = parse_window)]
    pub window: Duration,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit with status 1 when there are warnings.
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug)]
pub struct TuneArgs {
    /// Only these operations (repeatable): cpu_governor, turbo, sched_rt_runtime_us, numa_balancing, transparent_hugepage, damon, irq_affinity.
    #[arg(long)]
    pub only: Vec<String>,
    /// Worker CPUs: enables irq_affinity, which moves interrupts to the other CPUs.
    #[arg(long, value_delimiter = ',')]
    pub cpus: Vec<usize>,
    #[command(flatten)]
    pub state: StateArg,
}

fn parse_window(s: &str) -> Result<Duration, String> {
    let ns = match s.parse::<f64>() {
        Ok(v) => v * 1e9,
        Err(_) => taillab_core::dist::parse_duration_ns(s)?,
    };
    if !(0.0..=60e9).contains(&ns) {
        return Err(format!("{s} is outside 0..60s"));
    }
    Ok(Duration::from_nanos(ns as u64))
}

fn state_path(a: &StateArg) -> PathBuf {
    a.state.clone().unwrap_or_else(default_state_path)
}

pub fn run(cmd: SystemCmd) -> anyhow::Result<i32> {
    match cmd {
        SystemCmd::Show(a) => {
            let report = SystemReport::collect_with(std::path::Path::new("/"), a.window)?;
            let warnings = report.warnings(&Thresholds::default());
            let tuning = Tuner::new(default_state_path(), None).show();
            if a.json {
                let v =
                    serde_json::json!({ "system": report, "warnings": warnings, "tuning": tuning });
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                print!("{report}");
                println!("tuning:");
                for t in &tuning {
                    println!("  {t}");
                }
                if warnings.is_empty() {
                    println!("no warnings: this host looks fit for tail measurements now");
                } else {
                    println!("warnings ({}):", warnings.len());
                    for w in &warnings {
                        println!("  - {w}");
                    }
                }
            }
            Ok(if a.strict && !warnings.is_empty() {
                1
            } else {
                0
            })
        }
        SystemCmd::Tune(a) => {
            let cpus = (!a.cpus.is_empty()).then_some(a.cpus.as_slice());
            let tuner = Tuner::new(state_path(&a.state), cpus);
            let known: Vec<&str> = tuner.operations().iter().map(|o| o.name).collect();
            for o in &a.only {
                if !known.contains(&o.as_str()) {
                    bail!(
                        "--only {o}: unknown operation; use one of {}",
                        known.join(", ")
                    );
                }
            }
            for s in tuner.apply(&a.only)? {
                println!("{s}");
            }
            println!(
                "prior values saved in {} (`taillab system reset` restores them)",
                state_path(&a.state).display()
            );
            Ok(0)
        }
        SystemCmd::Reset(a) => {
            for m in Tuner::new(state_path(&a), None).reset()? {
                println!("{m}");
            }
            // Knobs a run changed for itself and could not restore (it was killed).
            let journal = default_run_journal_path();
            if journal.exists() {
                for m in Tuner::new(journal, None).reset()? {
                    println!("{m} (left by a killed run)");
                }
            }
            Ok(0)
        }
    }
}
