//! `taillab run`: one measurement (or one point repeated to a CI target),
//! one result folder.

use crate::args::{Output, Sources};
use crate::experiment::{
    describe, meta, point_bar, run_parameters, run_point, run_redoing_disturbed, table,
};
use crate::runner::{app_of, default_out, run_once, warn_if_saturating};
use anyhow::bail;
use clap::Args;
use std::path::{Path, PathBuf};
use taillab_core::config::experiment::{point_id, Point};
use taillab_core::config::flags::ConfigFlags;
use taillab_core::config::{read_toml, view, ConfigError, RunConfig};
use taillab_core::experiment::open_experiment;

/// `taillab run`: every configuration key is a flag (see `taillab config keys`).
#[derive(Args, Debug, Clone)]
pub struct RunCmd {
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::RUN }>,
    #[command(flatten)]
    pub src: Sources,
    #[command(flatten)]
    pub output: Output,
    /// With a CI target: continue an interrupted experiment in --out, skipping finished runs.
    #[arg(long)]
    pub resume: bool,
}

/// The configuration of `taillab run` (or `taillab config show`): defaults,
/// then `--from`'s config.toml, then `--file`, then the flags.
pub fn resolve(
    from: Option<&Path>,
    file: Option<&Path>,
    flags: &[(String, Vec<String>)],
) -> anyhow::Result<RunConfig> {
    let mut cfg = RunConfig::default();
    if let Some(dir) = from {
        let p = dir.join("config.toml");
        // Only a folder without it is "no config.toml"; one we may not read says why.
        if matches!(p.try_exists(), Ok(false)) {
            bail!(
                "{} has no config.toml: --from takes a run folder written by this taillab (older runs: pass their settings as flags)",
                dir.display()
            );
        }
        cfg = RunConfig::read(&p)?;
    }
    if let Some(f) = file {
        let doc = read_toml(f)?;
        if doc.contains_key("grid") || doc.contains_key("sweep") {
            bail!("{} is an experiment with axes ([grid]/[sweep]); run it with `taillab sweep --file`", f.display());
        }
        cfg.apply_toml(&doc, &f.display().to_string(), &[])
            .map_err(|e| anyhow::anyhow!("{e}{}", list_hint(&e)))?;
    }
    cfg.apply(flags, "flags")
        .map_err(|e| anyhow::anyhow!("{e}{}", list_hint(&e)))?;
    Ok(cfg)
}

/// The folders creating `out` would make, deepest first.
pub fn missing_dirs(out: &Path) -> Vec<PathBuf> {
    out.ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect()
}

/// Takes away a results folder this command created (`created`, from
/// [`missing_dirs`]) while it holds nothing but its config.toml — the
/// command failed before measuring — and the empty parents it created.
pub fn forget_unused(out: &Path, created: &[PathBuf]) {
    if created.is_empty() {
        return;
    }
    let only_config = std::fs::read_dir(out)
        .map(|d| d.flatten().all(|e| e.file_name() == "config.toml"))
        .unwrap_or(false);
    if only_config {
        let _ = std::fs::remove_file(out.join("config.toml"));
    }
    created.iter().try_for_each(std::fs::remove_dir).ok();
}

fn list_hint(e: &ConfigError) -> &'static str {
    if matches!(e, ConfigError::OneValue { .. }) {
        " — a list of values is a sweep axis: use `taillab sweep`"
    } else {
        ""
    }
}

pub fn run(a: RunCmd) -> anyhow::Result<i32> {
    let cfg = resolve(a.src.from.as_deref(), a.src.file.as_deref(), &a.cfg.pairs)?;
    cfg.validate()?;
    let app = app_of(&cfg)?;
    let out = a
        .output
        .out
        .clone()
        .unwrap_or_else(|| default_out(app.name()));
    if a.src.from.as_deref().is_some_and(|f| f == out) {
        bail!("--out is the folder --from reads: give the rerun its own --out");
    }
    cfg.ci_target()?;
    let created = missing_dirs(&out);
    taillab_core::summary::ensure_writable(&out)?;
    warn_if_saturating(&app, &cfg);
    // A run that fails before writing anything (e.g. a bad app setting found
    // when the app starts) leaves no empty results folder behind — nor the
    // empty parents it created (`results/`).
    let forget_empty = |e: anyhow::Error| {
        forget_unused(&out, &created);
        e
    };
    if cfg.ci.target.is_some() {
        return run_repeated(&a, &cfg, &out).map_err(forget_empty);
    }
    let summary = run_redoing_disturbed(cfg.ci.redo_disturbed, &out, |d| {
        run_once(&app, &cfg, d, !(a.output.quiet || a.output.json))
    })
    .map_err(forget_empty)?;
    if a.output.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", taillab_core::summary::human_table(&summary));
        print!("{}", crate::environment::env_lines(&summary));
        println!("results: {}", out.display());
    }
    Ok(if a.output.strict && !summary.ok() {
        1
    } else {
        0
    })
}

/// `taillab run --ci T`: one point, repeated to the target.
fn run_repeated(a: &RunCmd, cfg: &RunConfig, out: &Path) -> anyhow::Result<i32> {
    let ci = cfg.ci_target()?.expect("a CI target is set");
    let point = Point {
        id: point_id(cfg, &[]),
        config: cfg.clone(),
        coords: vec![],
    };
    let mut m = meta("run", run_parameters(cfg), cfg.load.seed, &ci);
    m.points = vec![crate::experiment::point_value(&point)];
    open_experiment(out, &m, a.resume)?;
    let bar = (!a.output.quiet).then(|| point_bar(ci.max_runs as u64));
    let agg = run_point(
        &point,
        &out.join("points").join(&point.id),
        &ci,
        a.resume,
        &mut |k, agg| {
            if let Some(b) = &bar {
                b.set_position(k as u64);
                b.set_message(describe(agg));
            }
        },
    )?;
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    print!("{}", table(&[agg]));
    println!("results: {}", out.display());
    Ok(0)
}
