//! `taillab attribute`: what makes the tail long, and by how much — a designed experiment
//! over configuration keys, analysed by quantile regression (docs/attribute.md).
//!
//! 1. The factors (`--factor KEY=L1|L2…`, or `[attribute.factors]` in `--file`) and the
//!    base configuration are checked whole before anything runs: every key, every level
//!    against its key (an app setting against the app), every cell as a run.
//! 2. The design ([`taillab_core::design`]): the full factorial, or a resolution-IV
//!    fraction when asked (`--design fractional`) or when the full one would exceed
//!    `--max-runs`; replicated in `--blocks` blocks (default 3), each block's cells in
//!    an order shuffled from the seed and recorded in `OUT/design.json`.
//! 3. The runs: each cell is a point of an ordinary results tree
//!    (`OUT/points/<cell>/run-<block>/`, every request kept), made block by block in the
//!    recorded order, a disturbed run redone as in sweeps (`ci.redo_disturbed`, 2 unless
//!    given); `--resume` continues a killed one, `--executor slurm` runs the cells' runs
//!    as job arrays.
//! 4. The analysis (`python -m taillab attribute OUT`): `OUT/attribution/attribution.json`,
//!    its table and its page.

use crate::analysis::run_python;
use crate::args::ExperimentOut;
use crate::experiment::{meta, one_run, point_bar, point_value, table};
use crate::runner::{app_of, default_out};
use anyhow::{anyhow, bail, Context};
use clap::Args;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use taillab_core::config::experiment::{point_id, Plan, Point, Sweep};
use taillab_core::config::flags::{ConfigFlags, FieldFlags};
use taillab_core::config::{read_toml, resolve, toml_alternatives, view, Target};
use taillab_core::design::{plan as make_design, Design, Factor, Want};
use taillab_core::experiment::{check_experiment, open_experiment, Aggregate, CiTarget, PointRuns};
use taillab_core::summary::write_json_atomic;

/// Blocks when neither `--blocks` nor the file says.
pub const DEFAULT_BLOCKS: usize = 3;
/// The run cap when neither `--max-runs` nor the file says.
pub const DEFAULT_MAX_RUNS: usize = 200;
/// Bootstrap resamples of the analysis when not given.
pub const DEFAULT_BOOTSTRAP: usize = 200;
/// `--max-runs`'s help in `taillab attribute` (elsewhere it is `ci.max_runs`, the most runs
/// of one point with a CI target).
const MAX_RUNS_HELP: &str = "The most runs the design may take, cells × blocks (default 200, \
    or attribute.max_runs in --file): a full factorial over it becomes a resolution-IV fraction \
    when every factor has two levels (--design auto), else it is refused before anything runs";

/// `taillab attribute`: any run setting as in `taillab run` (fixed values: only the
/// factors vary), the factors, and the design's size. `--max-runs` is `ci.max_runs` among
/// the run flags; here it caps the design, and says so.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("ci.max_runs", |a| a
    .help(MAX_RUNS_HELP)
    .help_heading("Options")
    .value_name("N")))]
pub struct AttributeCmd {
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::SWEEP }>,
    /// Where the runs execute: --executor slurm and its --slurm-* keys (the other [sweep] keys do not apply).
    #[command(flatten)]
    pub sweep: FieldFlags<Sweep>,
    /// Experiment file (commented TOML): a base configuration and an [attribute] table (factors, blocks, design, max_runs, bootstrap); flags override it.
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// A factor: a configuration key and its levels, KEY=L1|L2|... (repeatable; the first level is the base).
    #[arg(long = "factor", value_name = "KEY=L1|L2")]
    pub factor: Vec<String>,
    /// Replicates of the whole design, each in its own shuffled order (default 3).
    #[arg(long)]
    pub blocks: Option<usize>,
    /// full, fractional (resolution IV, two levels per factor) or auto (default: full unless it exceeds --max-runs).
    #[arg(long)]
    pub design: Option<Want>,
    /// Bootstrap resamples of the analysis's CIs (default 200).
    #[arg(long)]
    pub bootstrap: Option<usize>,
    /// Print the design (cells, blocks, run order, aliases) and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Make the runs only; `python -m taillab attribute OUT` analyses them later.
    #[arg(long)]
    pub no_analysis: bool,
    #[command(flatten)]
    pub exp: ExperimentOut,
}

/// An `[attribute]` table (every key optional; flags override).
#[derive(Default)]
struct FileSettings {
    factors: Vec<Factor>,
    blocks: Option<usize>,
    design: Option<Want>,
    max_runs: Option<usize>,
    bootstrap: Option<usize>,
}

/// The keys of `[attribute.factors]` in the order the file writes them (a parsed
/// [`toml::Table`] sorts its keys; the design keeps the user's order: factor A is the
/// first one written). Empty when the file has no such table.
fn factor_order(path: &Path) -> Vec<String> {
    struct Keys(Vec<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("a table of factors")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut m: A,
                ) -> Result<Keys, A::Error> {
                    let mut k = Vec::new();
                    while let Some((key, _)) = m.next_entry::<String, serde::de::IgnoredAny>()? {
                        k.push(key);
                    }
                    Ok(Keys(k))
                }
            }
            d.deserialize_map(V)
        }
    }
    #[derive(serde::Deserialize)]
    struct Attr {
        factors: Option<Keys>,
    }
    #[derive(serde::Deserialize)]
    struct Doc {
        attribute: Option<Attr>,
    }
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| toml::from_str::<Doc>(&t).ok())
        .and_then(|d| d.attribute?.factors)
        .map(|k| k.0)
        .unwrap_or_default()
}

/// Reads `[attribute]` of an experiment file.
fn file_settings(path: &Path) -> anyhow::Result<FileSettings> {
    let doc = read_toml(path)?;
    let mut s = FileSettings::default();
    let Some(t) = doc.get("attribute") else {
        return Ok(s);
    };
    let t = t
        .as_table()
        .ok_or_else(|| anyhow!("{}: [attribute] must be a table", path.display()))?;
    let count = |k: &str, v: &toml::Value| -> anyhow::Result<usize> {
        v.as_integer()
            .filter(|n| *n >= 0)
            .map(|n| n as usize)
            .ok_or_else(|| anyhow!("{}: attribute.{k} must be a whole number", path.display()))
    };
    for (k, v) in t {
        match k.as_str() {
            "blocks" => s.blocks = Some(count(k, v)?),
            "max_runs" => s.max_runs = Some(count(k, v)?),
            "bootstrap" => s.bootstrap = Some(count(k, v)?),
            "design" => {
                let d = v.as_str().unwrap_or("");
                s.design = Some(
                    d.parse()
                        .map_err(|e| anyhow!("{}: attribute.{e}", path.display()))?,
                );
            }
            "factors" => {
                let f = v.as_table().ok_or_else(|| {
                    anyhow!(
                        "{}: [attribute.factors] is a table of \"KEY\" = [levels]",
                        path.display()
                    )
                })?;
                for (key, levels) in f {
                    let levels = toml_alternatives(levels).map_err(|why| anyhow!("{}: factor {key}: {why}", path.display()))?;
                    s.factors.push(Factor {
                        key: key.clone(),
                        levels,
                    });
                }
            }
            other => bail!(
                "{}: attribute.{other} is not a key of [attribute]: it takes factors, blocks, design, max_runs, bootstrap",
                path.display()
            ),
        }
    }
    let order = factor_order(path);
    s.factors
        .sort_by_key(|f| order.iter().position(|k| *k == f.key).unwrap_or(usize::MAX));
    Ok(s)
}

/// A factor's key as the configuration names it (`app.KEY` for an app setting).
fn canonical_key(key: &str) -> anyhow::Result<String> {
    Ok(
        match resolve(key).map_err(|e| anyhow!("--factor {key}: {e}"))? {
            Target::Field(f) => f.key(),
            Target::AppSetting(k) => format!("app.{k}"),
        },
    )
}

/// Everything checked before the first run: the base plan, the design, its cells.
struct Attribution {
    plan: Plan,
    design: Design,
    points: Vec<Point>,
    bootstrap: usize,
}

impl Attribution {
    fn build(a: &AttributeCmd) -> anyhow::Result<Self> {
        let fs = match &a.file {
            Some(p) => file_settings(p)?,
            None => FileSettings::default(),
        };
        // Factors: the file's, each replaced by a flag for the same key.
        let canonical = |mut f: Factor| -> anyhow::Result<Factor> {
            f.key = canonical_key(&f.key)?;
            Ok(f)
        };
        let flags = a
            .factor
            .iter()
            .map(|s| canonical(Factor::parse(s).map_err(anyhow::Error::msg)?))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut factors = fs
            .factors
            .into_iter()
            .map(canonical)
            .collect::<anyhow::Result<Vec<_>>>()?;
        factors.retain(|g| !flags.iter().any(|f| f.key == g.key));
        factors.extend(flags);
        // --max-runs is ci.max_runs among the run flags: here it caps the design.
        let mut pairs = a.cfg.pairs.clone();
        let flag_max = match pairs.iter().position(|(k, _)| k == "ci.max_runs") {
            Some(i) => {
                let (_, v) = pairs.remove(i);
                Some(v.join("").parse::<usize>().map_err(|_| {
                    anyhow!("--max-runs takes a whole number (the design's most runs)")
                })?)
            }
            None => None,
        };
        let max_runs = flag_max.or(fs.max_runs).unwrap_or(DEFAULT_MAX_RUNS);
        let blocks = a.blocks.or(fs.blocks).unwrap_or(DEFAULT_BLOCKS);
        let want = a.design.or(fs.design).unwrap_or(Want::Auto);
        let bootstrap = a.bootstrap.or(fs.bootstrap).unwrap_or(DEFAULT_BOOTSTRAP);
        let file_redo = match &a.file {
            Some(p) => read_toml(p)?
                .get("ci")
                .and_then(|c| c.get("redo_disturbed"))
                .is_some(),
            None => false,
        };
        if !file_redo && !pairs.iter().any(|(k, _)| k.ends_with("redo_disturbed")) {
            // Cells are compared run against run: a run the environment check calls
            // disturbed is redone, at most twice, as tailwag does.
            pairs.push(("ci.redo_disturbed".into(), vec!["2".into()]));
        }
        for (k, _) in &a.sweep.pairs {
            if k != "executor" && !k.starts_with("slurm_") {
                bail!(
                    "taillab attribute runs each cell once per block: sweep.{k} does not apply \
                     (of the [sweep] keys it takes --executor and --slurm-*)"
                );
            }
        }
        let mut plan = Plan::build(a.file.as_deref(), &pairs, &a.sweep.pairs, &[])
            .map_err(|e| anyhow!("{e}"))?;
        if let Some(x) = plan.axes.first() {
            bail!(
                "`{}` has several values ({}): taillab attribute varies only its factors; \
                 give it as --factor {}={}",
                x.key,
                x.values.join(", "),
                x.key,
                x.values.join("|")
            );
        }
        if plan.of_saturation() || plan.sweep.slo.is_some() {
            bail!("taillab attribute runs every cell at one rate: give it with --qps (load.qps)");
        }
        if plan.base.ci.target.is_some() {
            bail!("taillab attribute runs each cell once per block (--blocks): drop --ci");
        }
        // The analysis reads every request.
        plan.base.record.save_requests = true;
        // Every level against its key, as the configuration parses it.
        for f in &factors {
            for l in &f.levels {
                plan.base
                    .clone()
                    .set(&f.key, &[l.as_str()])
                    .map_err(|e| anyhow!("--factor {}: level `{l}`: {e}", f.key))?;
            }
        }
        let seed = taillab_core::arrival::derive_seed(plan.base.load.seed, 4_242);
        let design =
            make_design(&factors, blocks, max_runs, want, seed).map_err(anyhow::Error::msg)?;
        let points = cells(&plan, &design)?;
        check_cells(&plan, &design, &points)?;
        Ok(Self {
            plan,
            design,
            points,
            bootstrap,
        })
    }
}

/// The design's cells as points: the base configuration with each factor at its level.
fn cells(plan: &Plan, d: &Design) -> anyhow::Result<Vec<Point>> {
    let mut points: Vec<Point> = Vec::new();
    for cell in &d.cells {
        let mut c = plan.base.clone();
        let mut coords = Vec::new();
        for (f, &l) in d.factors.iter().zip(cell) {
            c.set(&f.key, &[f.levels[l].as_str()])
                .map_err(|e| anyhow!("--factor {}: level `{}`: {e}", f.key, f.levels[l]))?;
            coords.push((f.key.clone(), f.levels[l].clone()));
        }
        let mut id = point_id(&c, &coords);
        // Two levels that differ only in characters a folder name cannot hold.
        if points.iter().any(|p| p.id == id) {
            id = format!("{id}-cell{}", points.len());
        }
        points.push(Point {
            id,
            config: c,
            coords,
        });
    }
    Ok(points)
}

/// Every level its key's app accepts, and every cell a valid run whose hogs and knobs
/// this host can apply: one line for the first that is not.
fn check_cells(plan: &Plan, d: &Design, points: &[Point]) -> anyhow::Result<()> {
    let app = app_of(&plan.base)?;
    for f in d.factors.iter().filter(|f| f.key.starts_with("app.")) {
        let k = &f.key["app.".len()..];
        for l in &f.levels {
            let mut s = plan.base.settings.clone();
            s.insert(k, l);
            app.check_params(&s).map_err(|e| {
                anyhow!(
                    "--factor {}: level `{l}` is refused by {}: {e}",
                    f.key,
                    app.name()
                )
            })?;
        }
    }
    for p in points {
        p.config
            .validate()
            .map_err(|e| anyhow!("cell {}: {e}", p.id))?;
        let app = app_of(&p.config).with_context(|| format!("cell {}", p.id))?;
        app.check_params(&p.config.settings)
            .map_err(|e| anyhow!("cell {}: {e}", p.id))?;
        crate::planned::preflight(&p.config).with_context(|| format!("cell {}", p.id))?;
    }
    Ok(())
}

pub fn attribute(a: AttributeCmd) -> anyhow::Result<i32> {
    let at = Attribution::build(&a)?;
    if a.dry_run {
        print!("{}", describe_design(&at.design, &at.points));
        return Ok(0);
    }
    let name = at
        .plan
        .base
        .app
        .name
        .clone()
        .unwrap_or_else(|| "app".into());
    let out = a
        .exp
        .out
        .clone()
        .unwrap_or_else(|| default_out(&format!("attribute-{name}")));
    let created = crate::run::missing_dirs(&out);
    eprint!("{}", describe_design(&at.design, &[]));
    let aggs = execute(&at, &out, a.exp.resume, a.exp.quiet).inspect_err(|_| {
        // Failed before any run finished: leave nothing behind.
        if !created.is_empty() && !crate::sweep::holds_a_run(&out) {
            let _ = std::fs::remove_dir_all(&out);
            created
                .iter()
                .skip(1)
                .try_for_each(std::fs::remove_dir)
                .ok();
        }
    })?;
    print!("{}", table(&aggs));
    println!("results: {}", out.display());
    if a.no_analysis {
        return Ok(0);
    }
    run_python(&[
        "attribute".into(),
        out.display().to_string(),
        "--bootstrap".into(),
        at.bootstrap.to_string(),
    ])
}

/// The design in words: factors and levels, size, generators and aliases; with `points`,
/// every cell and each block's order.
fn describe_design(d: &Design, points: &[Point]) -> String {
    let kind = match d.kind.as_str() {
        "fractional" => format!(
            "resolution-{} fraction",
            roman(d.resolution.unwrap_or(4) as usize)
        ),
        _ => "full factorial".into(),
    };
    let mut o = format!(
        "design: {kind}, {} factors, {} cells × {} blocks = {} runs (order seed {})\n",
        d.factors.len(),
        d.cells.len(),
        d.blocks,
        d.runs(),
        d.seed
    );
    for (i, f) in d.factors.iter().enumerate() {
        o.push_str(&format!(
            "  {} {}: {}\n",
            Design::letter(i),
            f.key,
            f.levels.join(" | ")
        ));
    }
    if !d.generators.is_empty() {
        o.push_str(&format!("  generators: {}\n", d.generators.join(", ")));
    }
    if !d.aliases.is_empty() {
        let chains: Vec<String> = d.aliases.iter().map(|c| c.join(" = ")).collect();
        o.push_str(&format!(
            "  aliased two-factor interactions (not estimated): {}\n",
            chains.join("; ")
        ));
    }
    if !points.is_empty() {
        for (i, p) in points.iter().enumerate() {
            o.push_str(&format!("  cell {i:>3} {}\n", p.id));
        }
        for (b, order) in d.order.iter().enumerate() {
            let o2: Vec<String> = order.iter().map(|i| i.to_string()).collect();
            o.push_str(&format!("  block {} order: {}\n", b + 1, o2.join(" ")));
        }
    }
    o
}

fn roman(n: usize) -> &'static str {
    ["0", "I", "II", "III", "IV", "V", "VI", "VII", "VIII"]
        .get(n)
        .copied()
        .unwrap_or("IX+")
}

/// Writes experiment.json and design.json, then makes (or, on resume, reads) every run.
fn execute(
    at: &Attribution,
    out: &Path,
    resume: bool,
    quiet: bool,
) -> anyhow::Result<Vec<Aggregate>> {
    let d = &at.design;
    let ci = CiTarget::fixed(d.blocks);
    let parameters = json!({
        "base": at.plan.base.to_json(),
        "attribute": {
            "factors": d.factors.iter().map(|f| json!({"key": f.key, "levels": f.levels})).collect::<Vec<_>>(),
            "design": d.kind, "blocks": d.blocks, "seed": d.seed, "cells": d.cells.len(),
        },
    });
    let exec = crate::executor::of(&at.plan.sweep, out, quiet)?;
    let mut m = meta("attribute", parameters, at.plan.base.load.seed, &ci);
    open_experiment(out, &m, resume).map_err(anyhow::Error::msg)?;
    m.points = at.points.iter().map(point_value).collect();
    if !resume || !out.join("points").exists() {
        write_json_atomic(&out.join("experiment.json"), &m)?;
    }
    write_json_atomic(&out.join("design.json"), &design_json(d, &at.points))?;
    let dirs: Vec<(&Point, PathBuf)> = at
        .points
        .iter()
        .map(|p| (p, out.join("points").join(&p.id)))
        .collect();
    exec.run_points(&dirs, &ci, &mut |dirs, ci| {
        run_blocks(dirs, d, ci, out, resume, quiet)
    })
}

/// design.json: the design and each cell's point id.
fn design_json(d: &Design, points: &[Point]) -> Value {
    let mut v = serde_json::to_value(d).expect("a design serializes");
    v["cell_ids"] = json!(points.iter().map(|p| p.id.clone()).collect::<Vec<_>>());
    v
}

/// Block by block, each block's cells in the design's order: run `b` of every cell is
/// made in block `b`.
fn run_blocks(
    dirs: &[(&Point, PathBuf)],
    d: &Design,
    ci: &CiTarget,
    out: &Path,
    resume: bool,
    quiet: bool,
) -> anyhow::Result<Vec<Aggregate>> {
    let apps = dirs
        .iter()
        .map(|(p, _)| app_of(&p.config))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let values: Vec<Value> = dirs.iter().map(|(p, _)| point_value(p)).collect();
    let mut open = dirs
        .iter()
        .zip(&values)
        .map(|((p, dir), v)| PointRuns::open(dir, v, p.config.load.seed, ci, resume))
        .collect::<Result<Vec<_>, _>>()?;
    let bar = (!quiet).then(|| point_bar(d.runs() as u64));
    let mut done = 0u64;
    for (b, order) in d.order.iter().enumerate() {
        for &i in order {
            check_experiment(out)?;
            let (p, _) = &dirs[i];
            open[i]
                .step(&mut one_run(p, &apps[i]))
                .with_context(|| format!("cell {}", p.id))?;
            done += 1;
            if let Some(bar) = &bar {
                bar.set_position(done);
                bar.set_message(format!("block {}/{} cell {}", b + 1, d.blocks, p.id));
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    open.into_iter()
        .zip(dirs)
        .map(|(pr, (p, _))| pr.finish().with_context(|| format!("cell {}", p.id)))
        .collect()
}
