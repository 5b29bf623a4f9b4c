//! The configuration's flags, generated from the field declarations.
//!
//! `ConfigFlags<V>` is a clap `Args` group: each command flattens it with its
//! view ([`view`] bits), so `run`, `sweep`, `serve` and `load` take exactly
//! the fields declared for them, with the same names, help and value checks.
//! Parsing yields `(key, items)` pairs — one layer for
//! [`RunConfig::apply`](super::RunConfig::apply) (or, in a sweep, values that
//! may be axes).

use super::fields::{view, Field};
use super::{fields, value::one_of};
use clap::{Arg, ArgAction, ArgMatches, Command};

/// The flags of view `V`, parsed into `(key, items)` pairs in declaration order.
#[derive(Debug, Clone, Default)]
pub struct ConfigFlags<const V: u8> {
    /// `section.field` (or `app.KEY` from `--set`) and the value items given.
    pub pairs: Vec<(String, Vec<String>)>,
}

fn heading(section: &str) -> &'static str {
    match section {
        "load" => "Load [load]",
        "harness" => "Harness [harness]",
        "net" => "Network [net]",
        "record" => "Records [record]",
        "monitor" => "Monitor [monitor]",
        "ci" => "Repeats [ci]",
        "fanout" => "Fan-out [fanout]",
        "interference" => "Interference [interference]",
        "tuning" => "Host tuning [tuning]",
        _ => "App [app]",
    }
}

/// The clap argument of field `f` in view `v`.
pub fn arg_of(f: &Field, v: u8) -> Arg {
    let mut help = f.help();
    let default = (f.default)();
    if let Some(p) = f.possible {
        help.push_str(&format!(" [one of: {}]", p.join(", ")));
    }
    if !f.switch && default != "none" {
        help.push_str(&format!(" [default: {default}]"));
    }
    help.push_str(&format!(" [{}]", f.key()));
    let mut a = Arg::new(f.key())
        .long(f.flag())
        .help(help)
        .help_heading(heading(f.section));
    for al in f.opts.aliases {
        a = a.alias(*al);
    }
    if f.switch {
        return a.action(ArgAction::SetTrue);
    }
    a = a
        .action(if f.repeated {
            ArgAction::Append
        } else {
            ArgAction::Set
        })
        .value_name(value_name(f))
        // `--qps -5` reaches the value check ("must be positive") instead of
        // being read as an unknown flag `-5`.
        .allow_negative_numbers(true);
    if v & view::SWEEP != 0 {
        // A sweep's value may be several (an axis): checked when the plan is built.
        return a;
    }
    let check = f.check;
    a.value_parser(move |s: &str| check(s).map(|_| s.to_string()))
}

fn value_name(f: &Field) -> String {
    match f.possible {
        Some(p) if p.len() <= 4 => p.join("|"),
        _ => f.name.to_uppercase(),
    }
}

impl<const V: u8> clap::FromArgMatches for ConfigFlags<V> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut pairs = Vec::new();
        for f in fields().iter().filter(|f| f.in_view(V)) {
            let id = f.key();
            if f.switch {
                if m.get_flag(&id) {
                    pairs.push((id, vec![(!f.opts.negate).to_string()]));
                }
            } else if let Some(vals) = m.get_many::<String>(&id) {
                pairs.push((id, vals.cloned().collect()));
            }
        }
        for s in m.get_many::<String>("set").into_iter().flatten() {
            let (k, v) = s.split_once('=').ok_or_else(|| {
                clap::Error::raw(
                    clap::error::ErrorKind::ValueValidation,
                    format!("--set `{s}`: write KEY=VALUE, e.g. --set service=exp:200us\n"),
                )
            })?;
            pairs.push((format!("app.{}", k.trim()), vec![v.trim().to_string()]));
        }
        Ok(ConfigFlags { pairs })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<const V: u8> clap::Args for ConfigFlags<V> {
    fn augment_args(mut cmd: Command) -> Command {
        for f in fields().iter().filter(|f| f.in_view(V)) {
            cmd = cmd.arg(arg_of(f, V));
        }
        cmd.arg(
            Arg::new("set")
                .long("set")
                .value_name("KEY=VALUE")
                .action(ArgAction::Append)
                .help("App setting, as key=value (repeatable; `taillab apps` lists each app's keys) [app.KEY]")
                .help_heading(heading("app")),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A set of declared fields (a section).
pub trait FieldSource {
    /// Its fields.
    fn fields() -> Vec<Field>;
}

/// The flags of one section's fields (e.g. a sweep's own `[sweep]` keys),
/// parsed into `(name, items)` pairs.
#[derive(Debug, Clone)]
pub struct FieldFlags<S> {
    /// Field name and the value items given.
    pub pairs: Vec<(String, Vec<String>)>,
    _s: std::marker::PhantomData<S>,
}

impl<S> FieldFlags<S> {
    /// Pairs given directly (a command built by another command).
    pub fn from_pairs(pairs: Vec<(String, Vec<String>)>) -> Self {
        FieldFlags {
            pairs,
            _s: std::marker::PhantomData,
        }
    }
}

impl<S: FieldSource> clap::FromArgMatches for FieldFlags<S> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut pairs = Vec::new();
        for f in S::fields() {
            let id = f.key();
            if f.switch {
                if m.get_flag(&id) {
                    pairs.push((f.name.to_string(), vec![(!f.opts.negate).to_string()]));
                }
            } else if let Some(vals) = m.get_many::<String>(&id) {
                pairs.push((f.name.to_string(), vals.cloned().collect()));
            }
        }
        Ok(FieldFlags {
            pairs,
            _s: std::marker::PhantomData,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<S: FieldSource> clap::Args for FieldFlags<S> {
    fn augment_args(mut cmd: Command) -> Command {
        for f in S::fields() {
            cmd = cmd.arg(arg_of(&f, 0).help_heading("Sweep [sweep]"));
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Every key with its form, default and help, one per line (`taillab config keys`).
pub fn describe_keys() -> String {
    let mut o = String::new();
    for f in fields() {
        let views: Vec<&str> = [
            (view::RUN, "run"),
            (view::SWEEP, "sweep"),
            (view::SERVE, "serve"),
            (view::LOAD, "load"),
        ]
        .iter()
        .filter(|(b, _)| f.in_view(*b))
        .map(|(_, n)| *n)
        .collect();
        o.push_str(&format!(
            "{:<26} --{:<18} default {:<12} {}\n{:<26} {} (flag of: {})\n",
            f.key(),
            f.flag(),
            (f.default)(),
            f.help(),
            "",
            match f.possible {
                Some(p) => format!("one of {}", one_of(p)),
                None => f.form.to_string(),
            },
            if views.is_empty() {
                "none".to_string()
            } else {
                views.join(", ")
            }
        ));
    }
    o.push_str(&format!(
        "{:<26} --{:<18} {:<20} {}\n",
        "app.KEY", "set KEY=VALUE", "", "the app's own settings (`taillab apps`)"
    ));
    o
}
