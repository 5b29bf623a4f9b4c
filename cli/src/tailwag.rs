//! `taillab tailwag APP`: TailWAG's workflow in one command — measure the
//! app, fit its service times, run the fitted synthetic workload at the same
//! absolute loads, and compare the two.
//!
//! 1. `OUT/measured/`: a sweep of the app over the thread counts and loads
//!    (fractions of each thread count's saturation rate, searched first),
//!    with every request kept for the fit. Each point's length (the app's
//!    own, or `--requests`/`--duration`) is split into [`DEFAULT_BLOCKS`] runs
//!    taken round robin over the points (`sweep.order = interleaved`), so the
//!    host's slow drift falls on every load alike; `--runs N` (or a CI target)
//!    sets the runs, `--order points` the old order. Every run warms up first
//!    (the app's own warmup, else [`DEFAULT_WARMUP_SECS`]). The synthetic side
//!    and later rounds run the same way.
//! 2. `OUT/measured/fit.json`: `taillab fit` of every measured point. Apps
//!    serve faster when busy (warm caches; on a shared VM, a host that has not
//!    descheduled an idle vCPU): img-dnn's mean service was 1.68 ms at 20 %
//!    load and 1.20 ms at 80 % on the test VM. By default (`--fit-at all`) one
//!    synthetic workload is fitted to all fewest-worker points at once (see
//!    below); `--fit-at highest` fits the point at the highest load only, so
//!    the synthetic saturates where the app does but is too fast at light
//!    load, and a fit at the lowest load (`lowest`) makes a synthetic workload
//!    that saturates near 70 % of the app's rate. `--fit-at each`
//!    gives every point its own fit and synthetic run: the error is then the
//!    synthetic model's alone, not the app's change of speed with load.
//!    `--fit-at all` fits one synthetic workload to every fewest-worker point
//!    at once: a mixture of their service times and each optional term —
//!    pauses, a cold start (synth's `cold=F,tau=D`: slower after idling), the
//!    host's speed of the moment (`speed=`), a periodic request — kept only
//!    where it lowers the error on held-out blocks of the records (`taillab fit
//!    --pooled`; `--fit-set KEY=VALUE` sets the fit's constants).
//! 3. `OUT/synthetic/`: the same points — same thread counts, the same
//!    absolute rates, the same seeds (so the same arrival times) — with
//!    `synth` and `service=<spec>` (plus `--synth-set` keys, e.g. locks).
//!    With `--fit-at each`, one folder per point: `OUT/synthetic/<point>/`.
//! 4. `OUT/round-K/measured/` and `OUT/round-K/synthetic/` (`--rounds N`, default 2): the
//!    app and the same synthetic workload again, in turn, at the same rates with fresh
//!    seeds — the synthetic workload out of sample, and the app against itself (on a shared
//!    VM kv's mean service moved 26 % in 20 s of back-to-back runs: no fit follows that).
//! 5. `OUT/validation/`: the error table of mean/p95/p99 per point (TailWAG
//!    Fig. 8 and 6), the fitted components beside TailWAG's Table 2, and the
//!    figures (measured solid, synthetic dashed).

use crate::analysis::run_python;
use crate::args::ExperimentOut;
use crate::runner::app_of;
use crate::sweep::{execute, Executed, Rates};
use anyhow::{bail, Context};
use clap::Args;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use taillab_core::config::experiment::{Plan, Point, Sweep};
use taillab_core::config::flags::{ConfigFlags, FieldFlags};
use taillab_core::config::{view, Dur};
use taillab_core::summary::write_json_atomic;
use taillab_core::App;

/// `taillab tailwag`: the app's settings and any run setting as in `taillab
/// sweep` (`--threads 1,2` is an axis); loads with `--load` (default
/// 0.2,0.5,0.7 of saturation).
#[derive(Args, Debug, Clone)]
pub struct TailwagCmd {
    /// The app to measure (as `--app`): `taillab tailwag kv --load 0.2,0.5`.
    #[arg(value_name = "APP")]
    pub app: Option<String>,
    #[command(flatten)]
    pub cfg: ConfigFlags<{ view::SWEEP }>,
    #[command(flatten)]
    pub sweep: FieldFlags<Sweep>,
    /// Extra setting of the synthetic workload, KEY=VALUE (repeatable; e.g. recv_lock=fixed:2us).
    #[arg(long = "synth-set", value_name = "KEY=VALUE")]
    pub synth_set: Vec<String>,
    /// What the synthetic workload is fitted to: `all` (default: one fit across the
    /// fewest-worker points, with the optional terms — a cold start, synth's `cold=`, so it
    /// follows the app's change of speed with load, the host's speed, pauses, a periodic
    /// request — that lower the error on held-out blocks), `highest` (the
    /// fewest-worker point at the highest load), `lowest`, or `each` (every point its own
    /// fit and synthetic run: the error of the model alone, without the app's drift).
    #[arg(
        long = "fit-at",
        value_enum,
        default_value = "all",
        value_name = "WHICH"
    )]
    pub fit_at: FitAt,
    /// Rounds: the app and the fitted synthetic workload run in turn this many times at
    /// the same points, with fresh seeds (default 2; 1 with `--fit-at each` and for
    /// speech). The headline error is the later rounds' — the synthetic workload against
    /// fresh runs of the app, each side's histograms merged — judged against the app
    /// against itself in the same rounds (the host's floor); round 1's, against the runs
    /// it was fitted from (as TailWAG compares), stays on the page labelled in sample.
    #[arg(long, value_name = "N")]
    pub rounds: Option<usize>,
    /// A setting of the fit across loads, KEY=VALUE (repeatable), passed to `taillab fit
    /// --fit-set`; `taillab fit RESULTS --fit-set help` lists the keys with their reasons.
    #[arg(long = "fit-set", value_name = "KEY=VALUE")]
    pub fit_set: Vec<String>,
    #[command(flatten)]
    pub exp: ExperimentOut,
}

/// `--fit-at`: which measured service times the synthetic workload is fitted to.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FitAt {
    /// The fewest-worker point at the highest load.
    Highest,
    /// The fewest-worker point at the lowest load.
    Lowest,
    /// Every point its own fit and synthetic run.
    Each,
    /// One fit across the fewest-worker points: a mixture and the optional terms (a cold
    /// start, synth's `cold=`, among them) that lower the error on held-out blocks.
    All,
}

/// Rounds when `--rounds` is not given: two (the second is the out-of-sample check and
/// the noise floor), one with `--fit-at each` (a synthetic workload per point), or the
/// app's own ([`App::point_length`]: speech's three loads take hours).
fn default_rounds(app: &dyn App, fit_at: FitAt) -> usize {
    if fit_at == FitAt::Each {
        1
    } else {
        app.point_length().rounds.unwrap_or(DEFAULT_ROUNDS)
    }
}

/// The measured plan: the user's settings, loads relative to saturation,
/// every request kept (the fit reads them), and the app's own length per point
/// ([`App::point_length`]) where the user gave none.
fn measured_plan(a: &TailwagCmd) -> anyhow::Result<Plan> {
    let mut pairs = a.cfg.pairs.clone();
    if let Some(app) = &a.app {
        match pairs.iter().find(|(k, _)| k == "app.name") {
            Some((_, flag)) if flag.as_slice() != [app.as_str()] => bail!(
                "tailwag {app} --app {}: two different apps; give one (the positional APP or --app)",
                flag.join(",")
            ),
            Some(_) => {}
            None => pairs.push(("app.name".into(), vec![app.clone()])),
        }
    }
    pairs.push(("record.save_requests".into(), vec!["true".into()]));
    let probe = Plan::parse(None, &pairs, &a.sweep.pairs, &[])?;
    let on_axis = |k: &str| probe.axes.iter().any(|x| x.key.ends_with(k));
    let l = &probe.base.load;
    let length_given =
        l.requests.is_some() || l.duration.is_some() || on_axis("requests") || on_axis("duration");
    let warmup_given = l.warmup.is_some()
        || l.warmup_requests.is_some()
        || on_axis("warmup")
        || on_axis("warmup_requests");
    let redo_given = pairs.iter().any(|(p, _)| p.ends_with("redo_disturbed"));
    let mut sweep = a.sweep.pairs.clone();
    let sweep_given = |k: &str| a.sweep.pairs.iter().any(|(x, _)| x == k);
    let ci_given = probe.base.ci.target.is_some() || on_axis("ci.target");
    // Each point in blocks, the blocks of all points taken in turn: the host's slow drift
    // falls on every load alike instead of on whichever ran last.
    if !ci_given && !sweep_given("runs") {
        sweep.push(("runs".into(), vec![DEFAULT_BLOCKS.to_string()]));
    }
    if !sweep_given("order") {
        sweep.push(("order".into(), vec!["interleaved".into()]));
    }
    let mem_given = pairs.iter().any(|(p, _)| p.ends_with("max_record_mem"));
    let own = app_of(&probe.base)?.point_length();
    // Every block warms up unless the user says otherwise, whatever length it has: a
    // length given without a warmup once left every block cold (oltp-disk's first ~100
    // requests on a fresh copy of its database take 1.8x the rest, which at 70 % load is
    // an overload; one such block in 48 set the point's p99, -20 % to -38 % for the
    // synthetic workload).
    if !warmup_given {
        if let Some(n) = own.warmup_requests {
            pairs.push(("load.warmup_requests".into(), vec![n.to_string()]));
        } else {
            let t = own.warmup_secs.unwrap_or(DEFAULT_WARMUP_SECS);
            pairs.push(("load.warmup".into(), vec![format!("{t}s")]));
        }
    }
    if !length_given {
        match own.secs {
            Some(t) => pairs.push(("load.duration".into(), vec![format!("{t}s")])),
            None => pairs.push(("load.requests".into(), vec![own.requests.to_string()])),
        }
        // The fit reads every request: an app whose tail needs a million of them
        // (middleware) keeps them all, over the default cap. The saturation search runs
        // a whole point's length at once; a quarter more leaves room for its warmup.
        let need = (own.requests + own.requests / 4) * taillab_core::harness::RECORD_BYTES;
        if !mem_given && own.secs.is_none() && need > probe.base.record.max_record_mem.0 {
            pairs.push((
                "record.max_record_mem".into(),
                vec![format!("{}MiB", need.div_ceil(1 << 20))],
            ));
        }
    }
    if !redo_given {
        // An app run and its synthetic twin are compared one to one: a run the
        // environment check calls disturbed (a stall of the VM moves a
        // light-load mean by tens of percent) is redone, at most twice.
        pairs.push(("ci.redo_disturbed".into(), vec!["2".into()]));
    }
    if !sweep.iter().any(|(k, _)| k == "load") {
        sweep.push(("load".into(), vec!["0.2,0.5,0.7".into()]));
    }
    let mut plan = Plan::build(None, &pairs, &sweep, &[])?;
    // A point's length is split over its runs (the blocks): `--requests`/`--duration` and
    // the app's own length say how much one point measures in all.
    let runs = plan.sweep.runs as u64;
    let l = &mut plan.base.load;
    if !on_axis("requests") {
        l.requests = l.requests.map(|n| n.div_ceil(runs));
    }
    if !on_axis("duration") {
        l.duration = l.duration.map(|d| Dur(d.0.div_ceil(runs)));
    }
    if !plan.of_saturation() {
        bail!(
            "tailwag compares at loads relative to saturation: give them with --load (not --qps)"
        );
    }
    if let Some(x) = plan
        .axes
        .iter()
        .find(|x| x.key.starts_with("app.") || x.key == "net.topology")
    {
        bail!(
            "tailwag fits one app configuration; `{}` is an axis: run one tailwag per value",
            x.key
        );
    }
    Ok(plan)
}

/// The synthetic plan: the measured one with `synth` and the fitted settings
/// (`service=SPEC`, and `cold=` for a fit across loads).
fn synthetic_plan(m: &Plan, fitted: &[String], extra: &[String]) -> anyhow::Result<Plan> {
    let mut p = m.clone();
    p.base.app.name = Some("synth".into());
    p.base.settings = taillab_core::Params::new();
    for kv in fitted.iter().chain(extra) {
        let (k, v) = kv
            .split_once('=')
            .with_context(|| format!("--synth-set `{kv}`: write KEY=VALUE"))?;
        p.base.settings.insert(k.trim(), v.trim());
    }
    p.base.record.save_requests = false;
    app_of(&p.base)?;
    Ok(p)
}

/// Runs ("blocks") per point when neither `--runs` nor a CI target is given: the app's
/// point length ([`App::point_length`]) is split into this many runs, which
/// `sweep.order = interleaved` takes in turn over the loads, so a slow drift of the host
/// (kv's service moved 26 % in 20 s of back-to-back runs on the test VM) falls on every
/// load alike instead of on whichever load ran last — what one fit across the loads needs.
pub const DEFAULT_BLOCKS: usize = 4;

/// Warmup of every run (block) in seconds for an app whose [`App::point_length`] gives
/// none, when the user gives no warmup. The fitted synthetic workload starts each block
/// cold (synth's `cold=`: warmth 0, warming with a time constant of up to 1 s), as the fit
/// takes the app's runs to; both are compared once warm. Without a warmup, oltp-mem's
/// synthetic blocks at 70 % load served their first second 20 % slower than the rest (the
/// app's 11 %) and one queued 20 ms on average in it: p99 +297 % (2026-11-25).
pub const DEFAULT_WARMUP_SECS: f64 = 3.0;

/// Rounds when `--rounds` is not given (see [`default_rounds`]).
pub const DEFAULT_ROUNDS: usize = 2;

/// Runs TailWAG: 1. the app's sweep, 2. the fit of its measured runs, 3. the
/// synthetic workload at the same absolute rates and seeds, 4. further rounds of
/// both with fresh seeds, 5. the comparison (`taillab validate`), then writes
/// tailwag.json. Returns the comparison's exit code.
pub fn tailwag(a: TailwagCmd) -> anyhow::Result<i32> {
    let plan = measured_plan(&a)?;
    let app = app_of(&plan.base)?;
    let rounds = rounds_of(&a, app.as_ref())?;
    crate::planned::preflight(&plan.base)?;
    let out = a
        .exp
        .out
        .clone()
        .unwrap_or_else(|| crate::runner::default_out(&format!("tailwag-{}", app.name())));
    // 1. The app.
    let mdir = out.join("measured");
    let measured = execute(&plan, &mdir, a.exp.resume, a.exp.quiet, &Rates::Search)?;
    let sat_by_threads: BTreeMap<usize, f64> = plan
        .groups()?
        .iter()
        .zip(&measured.saturation)
        .map(|(g, (_, q))| (g.config.harness.threads, *q))
        .collect();
    // 2. The fits: every point (the synthetic uses one, or each its own).
    let fit_point = fit_measured(&a, &measured, &mdir)?;
    let fit_json = mdir.join("fit.json");
    let fitted = fitted_settings(&fit_json, &fit_point)?;
    eprintln!("fitted {fit_point}: {}", fitted.join(" "));
    // The measured saturation rate of a group's thread count: the synthetic runs (and the
    // app's later rounds) go at the same absolute rates.
    let given = |g: &taillab_core::config::experiment::Group| -> anyhow::Result<f64> {
        sat_by_threads
            .get(&g.config.harness.threads)
            .copied()
            .with_context(|| {
                format!(
                    "no measured saturation rate for {} threads",
                    g.config.harness.threads
                )
            })
    };
    // 3. The synthetic workload at the same absolute rates and seeds.
    let sdir = out.join("synthetic");
    let mut specs = BTreeMap::new();
    let synthetic: Vec<String> = if a.fit_at == FitAt::Each {
        synthetic_each(&a, &plan, &measured.points, &fit_json, &sdir, &mut specs)?
    } else {
        let synth = synthetic_plan(&plan, &fitted, &a.synth_set)?;
        execute(
            &synth,
            &sdir,
            a.exp.resume,
            a.exp.quiet,
            &Rates::Given(&given),
        )
        .map_err(|e| refit_hint(e, &sdir))?;
        vec![sdir.display().to_string()]
    };
    // 4. Further rounds: the app, then its synthetic twin.
    let round_dirs = further_rounds(&a, &plan, rounds, &fitted, &given, &out)?;
    // 5. The comparison.
    let sat_arg: Vec<String> = sat_by_threads
        .iter()
        .map(|(t, q)| format!("{t}={q}"))
        .collect();
    let mut args = vec!["validate".to_string(), mdir.display().to_string()];
    args.extend(synthetic);
    args.extend([
        "--out".into(),
        out.join("validation").display().to_string(),
        "--app".into(),
        app.name().into(),
        "--fit".into(),
        fit_json.display().to_string(),
        "--fit-point".into(),
        fit_point.clone(),
        "--saturation".into(),
        sat_arg.join(","),
    ]);
    for (rm, rs) in &round_dirs {
        args.extend([
            "--round".into(),
            rm.display().to_string(),
            rs.display().to_string(),
        ]);
    }
    let code = run_python(&args)?;
    write_json_atomic(
        &out.join("tailwag.json"),
        &json!({
            "schema": "taillab.tailwag/1",
            "app": app.name(),
            "settings": plan.base.settings,
            "saturation_qps": sat_by_threads,
            "fit_at": clap::ValueEnum::to_possible_value(&a.fit_at).map(|v| v.get_name().to_string()),
            "fit_point": fit_point,
            "spec": fitted.iter().find_map(|s| s.strip_prefix("service=")),
            "settings_fitted": fitted,
            "specs": specs,
            "synth_set": a.synth_set,
            "rounds": rounds,
            "fit_set": a.fit_set,
        }),
    )?;
    println!(
        "results: {} (validation: {})",
        out.display(),
        out.join("validation/index.html").display()
    );
    Ok(code)
}

/// The rounds to run: `--rounds` (at least 1; only 1 with `--fit-at each`) or the
/// app's default.
fn rounds_of(a: &TailwagCmd, app: &dyn App) -> anyhow::Result<usize> {
    Ok(match (a.rounds, a.fit_at) {
        (Some(0), _) => {
            bail!("--rounds 0: give at least 1 (one measured and one synthetic sweep)")
        }
        (Some(n), FitAt::Each) if n > 1 => bail!(
            "--rounds {n} with --fit-at each: rounds compare one synthetic workload with the \
             app; use --fit-at all, highest or lowest"
        ),
        (Some(n), _) => n,
        (None, fit_at) => default_rounds(app, fit_at),
    })
}

/// Fits the measured runs in `mdir` (`taillab fit`, pooled with `--fit-at all`) and
/// returns the point whose fit the synthetic workload uses (`all` when pooled).
fn fit_measured(a: &TailwagCmd, measured: &Executed, mdir: &Path) -> anyhow::Result<String> {
    let by_load = |x: &Point| (x.config.harness.threads, x.config.load.qps.unwrap_or(0.0));
    let fewest = measured
        .points
        .iter()
        .map(|p| p.config.harness.threads)
        .min()
        .context("the measured sweep has no points")?;
    let of_fewest = measured
        .points
        .iter()
        .filter(|p| p.config.harness.threads == fewest);
    let cmp = |x: &&Point, y: &&Point| {
        by_load(x)
            .partial_cmp(&by_load(y))
            .expect("rates are numbers")
    };
    let fit_point = match a.fit_at {
        FitAt::Lowest => of_fewest.min_by(cmp).map(|p| p.id.clone()),
        FitAt::Highest | FitAt::Each => of_fewest.max_by(cmp).map(|p| p.id.clone()),
        FitAt::All => Some("all".to_string()),
    }
    .context("the measured sweep has no points")?;
    let mut fit_args = vec![
        "fit".to_string(),
        mdir.display().to_string(),
        "--out".into(),
        mdir.display().to_string(),
    ];
    if a.fit_at == FitAt::All {
        fit_args.push("--pooled".into());
    }
    for kv in &a.fit_set {
        fit_args.extend(["--fit-set".to_string(), kv.clone()]);
    }
    let code = run_python(&fit_args)?;
    if code != 0 {
        bail!(
            "the fit of {} failed (see above); nothing synthetic was run",
            mdir.display()
        );
    }
    Ok(fit_point)
}

/// `--fit-at each`: one synthetic workload per measured point, fitted to that point,
/// into `sdir/<point>`; records each point's settings in `specs`. Returns the folders.
fn synthetic_each(
    a: &TailwagCmd,
    plan: &Plan,
    points: &[Point],
    fit_json: &Path,
    sdir: &Path,
    specs: &mut BTreeMap<String, String>,
) -> anyhow::Result<Vec<String>> {
    let mut dirs = Vec::new();
    for p in points {
        let fitted = fitted_settings(fit_json, &p.id)?;
        let one = Plan {
            base: p.config.clone(),
            axes: Vec::new(),
            sweep: Sweep {
                load: None,
                ..plan.sweep.clone()
            },
            cases: Vec::new(),
        };
        let dir = sdir.join(&p.id);
        execute(
            &synthetic_plan(&one, &fitted, &a.synth_set)?,
            &dir,
            a.exp.resume,
            a.exp.quiet,
            &Rates::Search,
        )?;
        specs.insert(p.id.clone(), fitted.join(" "));
        dirs.push(dir.display().to_string());
    }
    Ok(dirs)
}

/// Rounds 2..=`rounds`: the app, then its synthetic twin, at the same absolute rates
/// with fresh seeds (round 1 is measured/ and synthetic/). Returns each round's
/// (measured, synthetic) folders.
fn further_rounds(
    a: &TailwagCmd,
    plan: &Plan,
    rounds: usize,
    fitted: &[String],
    given: &dyn Fn(&taillab_core::config::experiment::Group) -> anyhow::Result<f64>,
    out: &Path,
) -> anyhow::Result<Vec<(PathBuf, PathBuf)>> {
    let mut round_dirs = Vec::new();
    for r in 2..=rounds {
        let mut again = plan.clone();
        again.base.load.seed =
            taillab_core::arrival::derive_seed(plan.base.load.seed, 2000 + r as u64);
        // The fit read round 1's requests; later rounds need only the histograms.
        again.base.record.save_requests = false;
        let rdir = out.join(format!("round-{r}"));
        let (rm, rs) = (rdir.join("measured"), rdir.join("synthetic"));
        eprintln!("round {r} of {rounds}: the app");
        execute(&again, &rm, a.exp.resume, a.exp.quiet, &Rates::Given(given))?;
        eprintln!("round {r} of {rounds}: the synthetic workload");
        execute(
            &synthetic_plan(&again, fitted, &a.synth_set)?,
            &rs,
            a.exp.resume,
            a.exp.quiet,
            &Rates::Given(given),
        )
        .map_err(|e| refit_hint(e, &rs))?;
        round_dirs.push((rm, rs));
    }
    Ok(round_dirs)
}

/// On `--resume`, a synthetic folder run with other settings than this fit's (the fit
/// changed: new code, other measured runs) is refused by the sweep; say what to do.
fn refit_hint(e: anyhow::Error, dir: &Path) -> anyhow::Error {
    let refit = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<taillab_core::experiment::ResumeError>(),
            Some(taillab_core::experiment::ResumeError::Parameters { .. })
        )
    });
    if refit {
        e.context(format!(
            "the synthetic workload's settings (the fit, or --synth-set) differ from those {} \
             was run with: remove that folder (and OUT/round-* after it) and --resume again",
            dir.display()
        ))
    } else {
        e
    }
}

/// The synth settings (KEY=VALUE) fitted for `point` in a fit.json: `service=SPEC`,
/// and the kept terms (`cold=F,tau=D`, …) for the fit across loads (`all`).
fn fitted_settings(path: &Path, point: &str) -> anyhow::Result<Vec<String>> {
    let doc: Value = serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    let fit = doc["fits"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["point"] == point)
        .with_context(|| format!("{} has no fit of point {point}", path.display()))?;
    if let Some(e) = fit["error"].as_str() {
        bail!("point {point} was not fitted: {e}");
    }
    if let Some(list) = fit["synth_settings"].as_array() {
        return Ok(list
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect());
    }
    fit["spec"]
        .as_str()
        .map(|s| vec![format!("service={s}")])
        .with_context(|| format!("{} has no spec for point {point}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use taillab_core::config::experiment::Order;

    #[derive(Parser)]
    struct Cmd {
        #[command(flatten)]
        a: TailwagCmd,
    }

    fn try_plan(args: &[&str]) -> anyhow::Result<Plan> {
        let c = Cmd::try_parse_from(std::iter::once("tailwag").chain(args.iter().copied()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        measured_plan(&c.a)
    }

    fn plan(args: &[&str]) -> Plan {
        try_plan(args).unwrap_or_else(|e| panic!("{args:?}: {e:#}"))
    }

    /// The app as the README writes it (`taillab tailwag kv --load …`) or as `--app`; both
    /// only when they agree.
    #[test]
    fn the_app_is_positional_or_a_flag() {
        let name = |args: &[&str]| plan(args).base.app.name;
        let kv = Some("kv".to_string());
        assert_eq!(name(&["kv", "--load", "0.2,0.5"]), kv);
        assert_eq!(name(&["--app", "kv"]), kv);
        assert_eq!(name(&["kv", "--app", "kv"]), kv);
        let e = try_plan(&["kv", "--app", "search"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("two different apps"), "{e}");
    }

    /// Without --requests/--duration each app gets its own length per point: middleware
    /// enough requests for ~17 clusters of collector pauses after a warmup; what the user gives wins.
    /// Either is split over the point's runs (DEFAULT_BLOCKS unless --runs or a CI
    /// target), taken interleaved; every run warms up.
    #[test]
    fn each_app_gets_its_own_length_unless_one_is_given() {
        let b = DEFAULT_BLOCKS as u64;
        let p = plan(&["--app", "middleware"]);
        assert_eq!(p.sweep.runs, DEFAULT_BLOCKS);
        assert_eq!(p.sweep.order, Order::Interleaved);
        assert_eq!(p.base.load.requests, Some(1_000_000 / b));
        assert_eq!(p.base.load.warmup.map(|d| d.secs()), Some(5.0));
        // Every one of its requests is kept for the fit: the cap on records grows to hold
        // them (the saturation search runs a whole point's length at once); other apps
        // keep the default, and a cap the user gives wins.
        let need = 1_000_000 * taillab_core::harness::RECORD_BYTES;
        assert!(p.base.record.max_record_mem.0 >= need);
        assert_eq!(
            plan(&["--app", "search"]).base.record.max_record_mem.0,
            64 << 20
        );
        let p = plan(&["--app", "middleware", "--max-record-mem", "1GiB"]);
        assert_eq!(p.base.record.max_record_mem.0, 1 << 30);
        // An app without a warmup of its own: every block warms up DEFAULT_WARMUP_SECS.
        let l = plan(&["--app", "search"]).base.load;
        assert_eq!(
            (l.requests, l.warmup.map(|d| d.secs()), l.warmup_requests),
            (Some(20_000 / b), Some(DEFAULT_WARMUP_SECS), None)
        );
        // kv's µs requests: 30 s per point, a quarter in each block.
        let l = plan(&["--app", "kv"]).base.load;
        assert_eq!(
            (
                l.requests,
                l.duration.map(|d| d.secs()),
                l.warmup.map(|d| d.secs())
            ),
            (None, Some(30.0 / b as f64), Some(DEFAULT_WARMUP_SECS))
        );
        let l = plan(&["--app", "oltp-disk"]).base.load;
        assert_eq!(
            (l.requests, l.warmup_requests),
            (Some(3_000 / b), Some(200))
        );
        // A length the user gives keeps the app's warmup (or the default one).
        let l = plan(&["--app", "middleware", "--requests", "5000"])
            .base
            .load;
        assert_eq!(
            (l.requests, l.warmup.map(|d| d.secs())),
            (Some(5_000 / b), Some(5.0))
        );
        let l = plan(&["--app", "middleware", "--duration", "8s"]).base.load;
        assert_eq!(
            (l.requests, l.duration.map(|d| d.secs())),
            (None, Some(8.0 / b as f64))
        );
        let l = plan(&["--app", "oltp-disk", "--requests", "36000"])
            .base
            .load;
        assert_eq!(
            (l.requests, l.warmup_requests),
            (Some(36_000 / b), Some(200))
        );
        let l = plan(&["--app", "search", "--duration", "8s"]).base.load;
        assert_eq!(l.warmup.map(|d| d.secs()), Some(DEFAULT_WARMUP_SECS));
        // --warmup-requests 0 leaves the blocks cold.
        let l = plan(&[
            "--app",
            "search",
            "--requests",
            "800",
            "--warmup-requests",
            "0",
        ])
        .base
        .load;
        assert_eq!((l.warmup, l.warmup_requests), (None, Some(0)));
        // A warmup the user gives is kept with the app's own request count.
        let l = plan(&["--app", "middleware", "--warmup-requests", "7"])
            .base
            .load;
        assert_eq!(
            (l.requests, l.warmup, l.warmup_requests),
            (Some(1_000_000 / b), None, Some(7))
        );
        // Runs and order the user gives win; with a CI target the target decides the
        // runs, and the point's length is each run's.
        let p = plan(&["--app", "search", "--runs", "2", "--order", "points"]);
        assert_eq!(
            (p.sweep.runs, p.sweep.order, p.base.load.requests),
            (2, Order::Points, Some(10_000))
        );
        let p = plan(&["--app", "search", "--ci", "0.05"]);
        assert_eq!((p.sweep.runs, p.base.load.requests), (1, Some(20_000)));
        let app = |n: &str| {
            let c = Cmd::try_parse_from(["tailwag", "--app", n]).unwrap();
            app_of(&measured_plan(&c.a).unwrap().base).unwrap()
        };
        assert_eq!(default_rounds(app("speech").as_ref(), FitAt::All), 1);
        assert_eq!(
            default_rounds(app("kv").as_ref(), FitAt::All),
            DEFAULT_ROUNDS
        );
        assert_eq!(default_rounds(app("kv").as_ref(), FitAt::Each), 1);
    }
}
