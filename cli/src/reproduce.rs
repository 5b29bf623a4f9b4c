//! `taillab reproduce`: one command per seed figure or table.
//!
//! The items live in `configs/reproduce/items.toml` (id, paper, figure,
//! claim, the experiment files that check it, the settings of the quick
//! variant, the paper's numbers); this runs an item's experiments into
//! `OUT/<id>/<experiment>/` (resumable), then asks the Python package for the
//! page: our figure, the paper's numbers beside it, and a verdict computed
//! from the data (`OUT/<id>/index.html`, `verdict.json`).

use crate::analysis::run_python;
use crate::args::ExperimentOut;
use crate::sweep::{execute, Rates};
use anyhow::{bail, Context};
use clap::Args;
use std::path::{Path, PathBuf};
use taillab_core::config::experiment::{Plan, Sweep};
use taillab_core::config::flags::{ConfigFlags, FieldFlags};
use taillab_core::config::read_toml;
use taillab_core::config::view;
use taillab_core::config::Dur;

/// `taillab reproduce`.
#[derive(Args, Debug, Clone)]
pub struct ReproduceCmd {
    /// The item to reproduce (see --list), or `all`.
    pub id: Option<String>,
    /// List every item: id, paper, figure, claim, how long it takes.
    #[arg(long)]
    pub list: bool,
    /// The short variant: tiny counts, for a first look or a test (verdicts are then indicative only).
    #[arg(long)]
    pub quick: bool,
    /// A check that the item's pipeline works, in seconds: the quick variant with each item's
    /// `smoke` settings on top (implies --quick; the verdict is computed but means nothing).
    #[arg(long)]
    pub smoke: bool,
    #[command(flatten)]
    pub exp: ExperimentOut,
    /// Folder holding items.toml and the experiment files (default: the repository's configs/reproduce).
    #[arg(long, value_name = "DIR")]
    pub configs: Option<PathBuf>,
    /// Where the runs execute (`--executor slurm` and its `--slurm-*` keys); the items set the rest of [sweep].
    #[command(flatten)]
    pub sweep: FieldFlags<Sweep>,
    /// Any run setting (`--seed 7`, `--requests 2000`, `--max-foreign 50`, `--set KEY=VALUE`, …),
    /// applied after the item's own settings (and its quick ones) to every run of it; the page
    /// says which were given. An item's worker axis is its paper's and cannot be set.
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::SWEEP }>,
}

/// Lays `top` (the command line's settings) over `base` (the item's): a key of `top` replaces
/// the same key in `base` and the other half of its either/or pair (`load.requests` replaces an
/// item's `load.duration`), as a later layer of an experiment does.
fn over(base: &mut Pairs, top: &Pairs) -> anyhow::Result<()> {
    use taillab_core::config::{resolve, Target};
    let canonical = |k: &str| -> anyhow::Result<(String, Vec<String>)> {
        Ok(match resolve(k)? {
            Target::Field(f) => (
                f.key(),
                f.opts
                    .clears
                    .iter()
                    .map(|c| format!("{}.{c}", f.section))
                    .collect(),
            ),
            Target::AppSetting(s) => (format!("app.{s}"), vec![]),
        })
    };
    for (k, v) in top {
        let (key, clears) = canonical(k)?;
        let mut keep = Vec::with_capacity(base.len());
        for (bk, bv) in base.drain(..) {
            let (bkey, _) = canonical(&bk)?;
            if bkey != key && !clears.contains(&bkey) {
                keep.push((bk, bv));
            }
        }
        *base = keep;
        base.push((k.clone(), v.clone()));
    }
    Ok(())
}

/// Refuses a setting of the command line that the item's worker axis sets (its rule compares
/// the paper's worker counts), before anything runs.
fn refuse_axis(item: &Item, a: &ReproduceCmd) -> anyhow::Result<()> {
    if let Some(s) = Scale::of(item)? {
        let axis =
            std::iter::once(s.key.as_str()).chain(s.per_worker.iter().map(|(k, _)| k.as_str()));
        for k in axis {
            let k = k.split('?').next().unwrap_or(k);
            if let Some((given, _)) = a.cfg.pairs.iter().find(|(g, _)| g == k) {
                bail!(
                    "{}: {given} is this item's worker axis (the paper's counts, capped at this host: scale in items.toml); it cannot be set from the command line",
                    item.id
                );
            }
        }
    }
    Ok(())
}

/// The run settings the command line gives an item, written to `OUT/<id>/flags.json` for its
/// page.
fn user_pairs(item: &Item, a: &ReproduceCmd, out: &Path) -> anyhow::Result<Pairs> {
    refuse_axis(item, a)?;
    let flags: Vec<String> = a
        .cfg
        .pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", v.join(",")))
        .collect();
    let path = out.join("flags.json");
    if flags.is_empty() {
        let _ = std::fs::remove_file(&path);
    } else {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&serde_json::json!({ "flags": flags }))?,
        )
        .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(a.cfg.pairs.clone())
}

/// The `[sweep]` keys a reproduction takes from its command line.
fn executor_pairs(a: &ReproduceCmd) -> anyhow::Result<Pairs> {
    for (k, _) in &a.sweep.pairs {
        if k != "executor" && !k.starts_with("slurm_") {
            bail!("taillab reproduce sets sweep.{k} from its items; of the [sweep] keys it takes --executor and --slurm-* only");
        }
    }
    Ok(a.sweep.pairs.clone())
}

/// One item of items.toml.
struct Item {
    id: String,
    table: toml::Table,
}

impl Item {
    fn str(&self, k: &str) -> &str {
        self.table.get(k).and_then(|v| v.as_str()).unwrap_or("")
    }
    fn list(&self, k: &str) -> Vec<String> {
        self.table
            .get(k)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    }
    /// A whole number the item sets (`quick_rounds`), if any.
    fn count(&self, k: &str) -> Option<usize> {
        self.table
            .get(k)
            .and_then(|v| v.as_integer())
            .and_then(|i| usize::try_from(i).ok())
    }
    fn minutes(&self, quick: bool) -> f64 {
        let v = self
            .table
            .get(if quick { "quick_minutes" } else { "minutes" });
        v.and_then(|v| v.as_float().or_else(|| v.as_integer().map(|i| i as f64)))
            .unwrap_or(0.0)
    }
    /// Whether the full variant's `minutes` is an estimate, not yet measured.
    fn minutes_estimated(&self) -> bool {
        self.table
            .get("minutes_estimated")
            .and_then(|v| v.as_bool())
            .unwrap_or(false)
    }
}

/// The repository's configs/reproduce, found from the binary's location.
fn default_configs() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("TAILLAB_CONFIGS") {
        return Ok(PathBuf::from(d).join("reproduce"));
    }
    let exe = std::env::current_exe()?;
    exe.ancestors()
        .map(|a| a.join("configs/reproduce"))
        .find(|d| d.join("items.toml").exists())
        .context("cannot find configs/reproduce/items.toml next to this binary; give --configs DIR (or set TAILLAB_CONFIGS)")
}

fn items(dir: &Path) -> anyhow::Result<Vec<Item>> {
    let doc = read_toml(&dir.join("items.toml"))?;
    let list = doc
        .get("item")
        .and_then(|v| v.as_array())
        .context("items.toml has no [[item]] tables")?;
    list.iter()
        .map(|t| {
            let table = t.as_table().context("each [[item]] is a table")?.clone();
            let id = table
                .get("id")
                .and_then(|v| v.as_str())
                .context("an [[item]] lacks its id")?
                .to_string();
            Ok(Item { id, table })
        })
        .collect()
}

/// The quick settings that apply to an experiment of `app`, split into
/// configuration pairs and `sweep.` pairs.
type Pairs = Vec<(String, Vec<String>)>;

fn quick_pairs(item: &Item, app: &str, smoke: bool) -> anyhow::Result<(Pairs, Pairs)> {
    let (mut cfg, mut sweep): (Pairs, Pairs) = (Vec::new(), Vec::new());
    let lists: &[&str] = if smoke {
        &["quick", "smoke"]
    } else {
        &["quick"]
    };
    for list in lists {
        for q in item.list(list) {
            let (kv, only) = match q.rsplit_once('?') {
                Some((kv, a)) => (kv.to_string(), Some(a.to_string())),
                None => (q.clone(), None),
            };
            if only.is_some_and(|a| a != app) {
                continue;
            }
            let (k, v) = kv
                .split_once('=')
                .with_context(|| format!("{}: {list} setting `{q}` is not KEY=VALUE", item.id))?;
            let (to, k) = match k.strip_prefix("sweep.") {
                Some(s) => (&mut sweep, s),
                None => (&mut cfg, k),
            };
            // A later setting of the same key (smoke over quick, app-only over all) wins.
            to.retain(|(have, _)| have != k);
            to.push((k.to_string(), vec![v.to_string()]));
        }
    }
    Ok((cfg, sweep))
}

fn app_of_file(file: &Path) -> anyhow::Result<String> {
    let doc = read_toml(file)?;
    Ok(doc
        .get("app")
        .and_then(|a| a.get("name"))
        .and_then(|n| n.as_str())
        .with_context(|| format!("{} names no app", file.display()))?
        .to_string())
}

/// The folder an experiment file's results go to: `apps/kv.toml` → `apps-kv`, and a file of
/// another configs folder (`../tailwag/middleware-gc.toml`) → `tailwag-middleware-gc`.
fn stem(p: &str) -> String {
    let mut p = p.trim_end_matches(".toml");
    while let Some(rest) = p.strip_prefix("../") {
        p = rest;
    }
    p.replace('/', "-")
}

/// An item's worker axis as its paper wrote it, capped at this host (`scale` in items.toml):
/// `key` (the config key, e.g. `harness.threads`), `paper` (the paper's values), `reserve`
/// (CPUs the item needs besides its workers: the load generator and the monitor), `least`
/// (the fewest workers at which the run still tests the claim), `per_worker` (keys whose value
/// is given per worker, e.g. `load.qps`, for an item that runs one worker count; `KEY?APP`:
/// for that app's experiments only, as in the quick settings).
struct Scale {
    key: String,
    paper: Vec<u64>,
    reserve: u64,
    least: u64,
    per_worker: Vec<(String, f64)>,
}

impl Scale {
    fn of(item: &Item) -> anyhow::Result<Option<Scale>> {
        let Some(t) = item.table.get("scale") else {
            return Ok(None);
        };
        let t = t
            .as_table()
            .with_context(|| format!("{}: scale must be a table", item.id))?;
        let int = |k: &str| -> anyhow::Result<u64> {
            t.get(k)
                .and_then(|v| v.as_integer())
                .and_then(|i| u64::try_from(i).ok())
                .with_context(|| format!("{}: scale.{k} must be a whole number ≥ 0", item.id))
        };
        let paper: Vec<u64> = t
            .get("paper")
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_integer())
                    .filter(|&i| i >= 1)
                    .map(|i| i as u64)
                    .collect()
            })
            .unwrap_or_default();
        if paper.is_empty() {
            bail!(
                "{}: scale.paper must list the paper's worker counts (≥ 1)",
                item.id
            );
        }
        let mut per_worker = Vec::new();
        if let Some(pw) = t.get("per_worker") {
            let pw = pw
                .as_table()
                .with_context(|| format!("{}: scale.per_worker must be a table", item.id))?;
            for (k, v) in pw {
                let v = v
                    .as_float()
                    .or_else(|| v.as_integer().map(|i| i as f64))
                    .with_context(|| {
                        format!("{}: scale.per_worker.{k} must be a number", item.id)
                    })?;
                per_worker.push((k.clone(), v));
            }
        }
        Ok(Some(Scale {
            key: t
                .get("key")
                .and_then(|v| v.as_str())
                .with_context(|| format!("{}: scale.key names the worker key", item.id))?
                .to_string(),
            paper,
            reserve: int("reserve")?,
            least: int("least")?,
            per_worker,
        }))
    }

    /// The values to run on a host of `cpus` CPUs: the paper's up to `cpus - reserve` (at
    /// least one worker) and that cap where the paper goes past it, the configuration pairs
    /// that set them, and what the page says.
    fn on(&self, cpus: u64) -> anyhow::Result<(Pairs, serde_json::Value)> {
        let cap = cpus.saturating_sub(self.reserve).max(1);
        // The paper's counts that fit, and the cap itself where the paper goes past it (its
        // 1–4 on 3 CPUs: 1, 2; its 1 and 4 on 4 CPUs: 1, 3).
        let mut ran: Vec<u64> = self.paper.iter().copied().filter(|&v| v <= cap).collect();
        if self.paper.iter().any(|&v| v > cap) && !ran.contains(&cap) {
            ran.push(cap);
        }
        let top = *ran.iter().max().expect("one value at least");
        let mut pairs: Pairs = vec![(self.key.clone(), ran.iter().map(u64::to_string).collect())];
        if !self.per_worker.is_empty() && ran.len() > 1 {
            bail!("scale.per_worker needs one worker count, not the axis {ran:?}");
        }
        for (k, v) in &self.per_worker {
            pairs.push((k.clone(), vec![format!("{}", v * top as f64)]));
        }
        let needs = (top < self.least).then_some(self.reserve + self.least);
        let doc = serde_json::json!({
            "key": self.key,
            "paper": self.paper,
            "ran": ran,
            "cpus": cpus,
            "reserve": self.reserve,
            "cap": cap,
            "least": self.least,
            "capped": ran != self.paper,
            "needs_cpus": needs,
            "per_worker": self.per_worker.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        });
        Ok((pairs, doc))
    }
}

/// This host's CPUs, as the runs' summaries count them.
fn host_cpus() -> u64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u64)
}

/// The scaled pairs that apply to an experiment of `app`: a `KEY?APP` pair only to that app's
/// (as KEY), the others to every experiment.
fn for_app(scaled: &[(String, Vec<String>)], app: &str) -> Pairs {
    scaled
        .iter()
        .filter_map(|(k, v)| match k.rsplit_once('?') {
            Some((k, only)) => (only == app).then(|| (k.to_string(), v.clone())),
            None => Some((k.clone(), v.clone())),
        })
        .collect()
}

/// Runs per point of the full variant where items.toml does not say (an item's `runs`). Three
/// is the fewest whose spread tells a rule much: with two, a 95 % interval is 9× the runs'
/// spread (Student's t with one degree of freedom is 12.7), with three 2.7×.
const FULL_RUNS: usize = 3;

/// The item's runs per point in the full variant (`runs` in items.toml, else [`FULL_RUNS`]).
fn full_runs(item: &Item) -> anyhow::Result<usize> {
    let Some(v) = item.table.get("runs") else {
        return Ok(FULL_RUNS);
    };
    v.as_integer()
        .filter(|&n| n >= 1)
        .and_then(|n| usize::try_from(n).ok())
        .with_context(|| {
            format!(
                "{}: runs = {v} in items.toml: give the full variant's runs per point, a whole number ≥ 1",
                item.id
            )
        })
}

/// The full variant's repeats: each point of an experiment without a CI target runs `runs`
/// times with fresh seeds, its measured length (the item's `load.requests` or
/// `load.duration`, or the command line's) split over them, so the item measures what one run
/// did (each run warms up on its own); a point with a CI target runs at least `runs` (its
/// `ci.min_runs`). Why: a verdict read from one run per point has nothing to judge its noise
/// by, and a stall of the host in that run can flip it; the runs' spread is what the rules
/// judge against (python/taillab/reproduce/judge.py). Returns what `variant.json` records.
fn split_runs(plan: &mut Plan, runs: usize) -> anyhow::Result<serde_json::Value> {
    let per_point = |k: &str| {
        plan.axes.iter().any(|x| x.key == k)
            || plan
                .cases
                .iter()
                .any(|c| c.pairs.iter().any(|(ck, _)| ck == k))
    };
    for k in ["load.requests", "load.duration", "ci.target", "ci.min_runs"] {
        if per_point(k) {
            bail!("{k} differs between its points: the full variant splits one measured length over each point's runs, so set it for the whole experiment");
        }
    }
    let ci = &mut plan.base.ci;
    if ci.target.is_some() {
        ci.min_runs = ci.min_runs.max(runs);
        ci.max_runs = ci.max_runs.max(ci.min_runs);
        return Ok(serde_json::json!({
            "runs": ci.min_runs, "max_runs": ci.max_runs, "ci_target": ci.target,
        }));
    }
    let n = plan.sweep.runs.max(runs);
    plan.sweep.runs = n;
    let l = &mut plan.base.load;
    l.requests = l.requests.map(|r| r.div_ceil(n as u64));
    l.duration = l.duration.map(|d| Dur(d.0.div_ceil(n as u64)));
    Ok(serde_json::json!({
        "runs": n, "requests_per_run": l.requests, "duration_s_per_run": l.duration.map(|d| d.secs()),
    }))
}

/// `OUT/<id>/variant.json`: the variant that ran and, per experiment, the runs each point was
/// planned to have (the page counts the runs it finds).
fn write_variant(
    out: &Path,
    a: &ReproduceCmd,
    planned: &serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let variant = match (a.smoke, a.quick) {
        (true, _) => "smoke",
        (false, true) => "quick",
        _ => "full",
    };
    let doc = serde_json::json!({ "variant": variant, "experiments": planned });
    let path = out.join("variant.json");
    std::fs::write(&path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// A `kind = "tailwag"` item: `taillab tailwag` of each app into `OUT/<id>/<app>/` with the
/// item's settings and loads, and its worker axis (`scaled`), which goes over the app and its
/// synthetic twin alike (the fit is made at the fewest workers).
fn run_tailwags(
    item: &Item,
    scaled: &[(String, Vec<String>)],
    out: &Path,
    a: &ReproduceCmd,
) -> anyhow::Result<()> {
    for app in item.list("apps") {
        let (mut cfg, mut sweep) = (
            vec![("app.name".to_string(), vec![app.clone()])],
            Vec::new(),
        );
        cfg.extend(for_app(scaled, &app));
        for s in item.list("settings") {
            let (k, v) = s
                .split_once('=')
                .with_context(|| format!("{}: setting `{s}` is not KEY=VALUE", item.id))?;
            cfg.push((k.into(), vec![v.into()]));
        }
        sweep.push(("load".to_string(), vec![item.str("loads").to_string()]));
        if a.quick {
            let (c, s) = quick_pairs(item, &app, a.smoke)?;
            cfg.extend(c);
            sweep.extend(s);
        }
        over(&mut cfg, &user_pairs(item, a, out)?)?;
        sweep.extend(executor_pairs(a)?);
        let cmd = crate::tailwag::TailwagCmd {
            app: None,
            cfg: ConfigFlags { pairs: cfg },
            sweep: FieldFlags::<Sweep>::from_pairs(sweep),
            synth_set: vec![],
            fit_at: crate::tailwag::FitAt::All,
            // The quick variant's own rounds (`quick_rounds`), else the app's default.
            rounds: if a.quick {
                item.count("quick_rounds")
            } else {
                None
            },
            fit_set: vec![],
            exp: ExperimentOut {
                out: Some(out.join(&app)),
                resume: a.exp.resume,
                quiet: a.exp.quiet,
            },
        };
        crate::tailwag::tailwag(cmd).with_context(|| format!("{}: tailwag of {app}", item.id))?;
    }
    Ok(())
}

/// Runs one item's experiments into `out` (OUT/<id>).
fn run_item(item: &Item, dir: &Path, out: &Path, a: &ReproduceCmd) -> anyhow::Result<()> {
    // Worker counts as the paper's, capped at this host; the page says what was capped.
    let scaled = match Scale::of(item)? {
        Some(s) => {
            let (pairs, doc) = s.on(host_cpus())?;
            std::fs::write(out.join("scale.json"), serde_json::to_string_pretty(&doc)?)
                .with_context(|| format!("writing {}", out.join("scale.json").display()))?;
            if doc["capped"] == true {
                eprintln!(
                    "{}: {} {:?} of the paper's {:?} (this host: {} CPUs, {} for the client and the monitor)",
                    item.id, s.key, doc["ran"], s.paper, doc["cpus"], s.reserve
                );
            }
            pairs
        }
        None => vec![],
    };
    // A tailwag's blocks and an attribution's replicated cells are its repeated runs already.
    let own = serde_json::Map::new();
    if item.str("kind") == "tailwag" {
        run_tailwags(item, &scaled, out, a)?;
        return write_variant(out, a, &own);
    }
    if item.str("kind") == "attribute" {
        run_attributions(item, dir, out, a)?;
        return write_variant(out, a, &own);
    }
    let runs = full_runs(item)?;
    let mut planned = serde_json::Map::new();
    for e in item.list("experiments") {
        let file = dir.join(&e);
        let app = app_of_file(&file)?;
        let (mut cfg, mut sweep) = if a.quick {
            quick_pairs(item, &app, a.smoke)?
        } else {
            (vec![], vec![])
        };
        cfg.splice(0..0, for_app(&scaled, &app));
        over(&mut cfg, &user_pairs(item, a, out)?)?;
        sweep.extend(executor_pairs(a)?);
        let mut plan = Plan::build(Some(&file), &cfg, &sweep, &[])
            .with_context(|| format!("{}: {e}", item.id))?;
        if !a.quick {
            let doc = split_runs(&mut plan, runs).with_context(|| format!("{}: {e}", item.id))?;
            planned.insert(stem(&e), doc);
        }
        for g in plan.groups()? {
            crate::planned::preflight(&g.config)?;
        }
        eprintln!("{}: {e} ({} points)", item.id, plan.count());
        execute(
            &plan,
            &out.join(stem(&e)),
            a.exp.resume,
            a.exp.quiet,
            &Rates::Search,
        )
        .with_context(|| format!("{}: {e}", item.id))?;
    }
    write_variant(out, a, &planned)
}

/// A `kind = "attribute"` item: each experiment file is a `taillab attribute --file`
/// (its `[attribute]` table the design) into `OUT/<id>/<stem>/`, analysed there
/// (`attribution/attribution.json`). Quick settings `attribute.blocks=N` and
/// `attribute.bootstrap=N` set the design's blocks and resamples; the others are run
/// settings, as for every item.
fn run_attributions(item: &Item, dir: &Path, out: &Path, a: &ReproduceCmd) -> anyhow::Result<()> {
    for e in item.list("experiments") {
        let file = dir.join(&e);
        let app = app_of_file(&file)?;
        let (mut cfg, sweep) = if a.quick {
            quick_pairs(item, &app, a.smoke)?
        } else {
            (vec![], vec![])
        };
        if let Some((k, _)) = sweep.first() {
            bail!("{}: sweep.{k} does not apply to an attribution", item.id);
        }
        let mut count = |k: &str| -> anyhow::Result<Option<usize>> {
            let Some(i) = cfg.iter().position(|(have, _)| have == k) else {
                return Ok(None);
            };
            let (_, v) = cfg.remove(i);
            let v = v.join("");
            v.parse()
                .map(Some)
                .with_context(|| format!("{}: {k}={v} is not a whole number", item.id))
        };
        let blocks = count("attribute.blocks")?;
        let bootstrap = count("attribute.bootstrap")?;
        over(&mut cfg, &user_pairs(item, a, out)?)?;
        let cmd = crate::attribute::AttributeCmd {
            cfg: ConfigFlags { pairs: cfg },
            sweep: FieldFlags::<Sweep>::from_pairs(executor_pairs(a)?),
            file: Some(file),
            factor: vec![],
            blocks,
            design: None,
            bootstrap,
            dry_run: false,
            no_analysis: false,
            exp: ExperimentOut {
                out: Some(out.join(stem(&e))),
                resume: a.exp.resume,
                quiet: a.exp.quiet,
            },
        };
        eprintln!("{}: {e} (attribution)", item.id);
        let code = crate::attribute::attribute(cmd).with_context(|| format!("{}: {e}", item.id))?;
        if code != 0 {
            bail!(
                "{}: {e}: the attribution's analysis failed (exit {code})",
                item.id
            );
        }
    }
    Ok(())
}

fn page(item: &Item, dir: &Path, root: &Path, quick: bool) -> anyhow::Result<i32> {
    let mut args = vec![
        "reproduce-page".to_string(),
        item.id.clone(),
        root.join(&item.id).display().to_string(),
        "--items".into(),
        dir.join("items.toml").display().to_string(),
    ];
    if !item.str("reuse").is_empty() {
        args.extend([
            "--reuse".into(),
            root.join(item.str("reuse")).display().to_string(),
        ]);
    }
    if quick {
        args.push("--quick".into());
    }
    run_python(&args)
}

pub fn reproduce(mut a: ReproduceCmd) -> anyhow::Result<i32> {
    a.quick |= a.smoke;
    let dir = match &a.configs {
        Some(d) => d.clone(),
        None => default_configs()?,
    };
    let all = items(&dir)?;
    if a.list || a.id.is_none() {
        println!(
            "{:<18} {:<12} {:>6} {:>7}  paper — claim",
            "id", "figure", "full", "--quick"
        );
        for i in &all {
            println!(
                "{:<18} {:<12} {:>5.0}m {:>6.1}m  {} — {}",
                i.id,
                i.str("figure"),
                i.minutes(false),
                i.minutes(true),
                i.str("paper"),
                i.str("claim")
            );
        }
        let total = |quick| all.iter().map(|i| i.minutes(quick)).sum::<f64>();
        // Full minutes are measured, item by item, except where items.toml says otherwise.
        let guessed: Vec<&str> = all
            .iter()
            .filter(|i| i.minutes_estimated())
            .map(|i| i.id.as_str())
            .collect();
        let full = if guessed.is_empty() {
            "full as measured".to_string()
        } else {
            format!("full as measured, estimated for {}", guessed.join(", "))
        };
        println!(
            "{:<31} {:>5.0}m {:>6.1}m  (on a 2-vCPU VM, each item alone: --quick and {full}; `all` runs every item)",
            "all",
            total(false),
            total(true)
        );
        if a.id.is_none() && !a.list {
            bail!("say which item to reproduce (an id above, or `all`)");
        }
        return Ok(0);
    }
    let id = a.id.clone().expect("checked above");
    let chosen: Vec<&Item> = if id == "all" {
        all.iter().collect()
    } else {
        match all.iter().find(|i| i.id == id) {
            Some(i) => {
                let mut v: Vec<&Item> = Vec::new();
                // An item that reads another's results runs that one first.
                if let Some(r) = all.iter().find(|r| r.id == i.str("reuse")) {
                    v.push(r);
                }
                v.push(i);
                v
            }
            None => {
                let ids: Vec<&str> = all.iter().map(|i| i.id.as_str()).collect();
                bail!(
                    "unknown item `{id}`; the items are: {} (or `all`)",
                    ids.join(", ")
                );
            }
        }
    };
    let root = a.exp.out.clone().unwrap_or_else(|| {
        PathBuf::from(if a.smoke {
            "results/reproduce-smoke"
        } else if a.quick {
            "results/reproduce-quick"
        } else {
            "results/reproduce"
        })
    });
    // An item whose reused results are already in ROOT reads them as they are.
    let chosen: Vec<&Item> = chosen
        .into_iter()
        .filter(|r| {
            let reused_here = id != "all" && r.id != id;
            let done = root.join(&r.id).join("verdict.json").exists();
            if reused_here && done {
                eprintln!("{id}: using the results of {} in {}", r.id, root.display());
            }
            !(reused_here && done)
        })
        .collect();
    for item in &chosen {
        refuse_axis(item, &a)?;
    }
    let mut worst = 0;
    for item in chosen {
        let out = root.join(&item.id);
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        run_item(item, &dir, &out, &a)?;
        let code = page(item, &dir, &root, a.quick)?;
        worst = worst.max(code);
        println!("{}: {}", item.id, out.join("index.html").display());
    }
    if id == "all" {
        worst = worst.max(run_python(&[
            "reproduce-index".into(),
            root.display().to_string(),
            "--items".into(),
            dir.join("items.toml").display().to_string(),
        ])?);
    }
    Ok(worst)
}
