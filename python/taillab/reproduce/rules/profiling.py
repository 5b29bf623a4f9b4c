"""The rules of the TailBench profiling report's items: Tables II, IV and VII, and the stress
tables as attributions.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ... import html, resources
from ...html import esc
from ...resources import point_table, resource_table
from ...results import Results
from ...units import fmt_bytes, fmt_ns
from ..items import Data
from ..judge import Check, Estimate, compare
from ..verdict import (
    Cond,
    Verdict,
    apps_of,
    as_float,
    at_least,
    bars,
    by_axis,
    finite_or,
    less_than,
    make_verdict,
    mult,
    no_data,
    ratio_check,
    ratio_of,
    status_of,
    value,
)
from .common import (
    attr_effects,
    attribution,
    attribution_links,
    ci_text,
    effect_check,
    excludes_zero,
    get_number,
    num_text,
)
from .registry import rule

# Profiling Tables VI-VIII: CPU stress raises service p95 by at least 1.5x (the report: ~2x);
# memory or disk stress alone changes it by less than 1.3x (the report: within ±7 %).
PROF_CPU, PROF_ALONE = 1.5, 1.3


# The profiling tables as attributions (kind = "attribute"): the same bars as their one-factor
# items (PROF_CPU, PROF_ALONE) applied to the cells the regression predicts (base + effects),
# and the effect the claim is about must also be one the design can tell from noise: its 95 %
# CI excludes zero. The quantile judged: service p95 (Table VII's SVC).
ATTR_PROF_Q = 0.95


# Profiling Tables III-IV: an app has a long tail for its size when its service p95 / mean is
# above the median of the apps measured: the report's own numbers put exactly its three
# long-tailed apps (sphinx, xapian, silo) there, and a rank is what survives the change of
# engines (our speech is not sphinx).
PROF_TAIL_RANK = 0.5


# ... judged on the report's app: it measured sphinx (our speech), whose second-long requests
# share the CPU with the hog for their whole length; kv's ~50 µs requests mostly finish
# between the hog's time slices (the report's own kv moved 0.96x under CPU stress), so kv is
# shown beside it, not judged.
PROF_APP = "speech"


_TAIL_STATS = ("mean", "p95", "p99", "max")


_RATIO_KEYS = ("svc_p95_mean", "svc_p99_mean", "e2e_p95_mean", "e2e_p99_mean")


def _tail_ratios(p: pd.Series) -> dict[str, float]:
    """A point's service and sojourn (end-to-end) mean/p95/p99/max (ns) and their p95/mean,
    p99/mean (Tables III-IV's columns)."""
    out = {}
    for metric, short in (("service", "svc"), ("sojourn", "e2e")):
        st = {s: value(p, metric, s) for s in _TAIL_STATS}
        out |= {f"{short}_{s}_ns": v for s, v in st.items()}
        out[f"{short}_p95_mean"] = ratio_of(st["p95"], st["mean"])
        out[f"{short}_p99_mean"] = ratio_of(st["p99"], st["mean"])
    return out


def _svc_tail(v) -> float:
    """A point's service p95 ÷ its mean (a view's)."""
    return ratio_of(v.stat("service", "p95"), v.stat("service", "mean"))


def _above_median(data: Any, light: dict[str, pd.Series], app: str) -> Check:
    """``app``'s service p95/mean over the median of every app's (PROF_TAIL_RANK), above 1."""
    if app not in light:
        return compare(Estimate(math.nan), ">", 1.0)
    names = list(light)
    i = names.index(app)

    def over_median(*views) -> float:
        r = [_svc_tail(v) for v in views]
        ranked = [x for x in r if math.isfinite(x)]
        cut = float(np.quantile(ranked, PROF_TAIL_RANK)) if ranked else math.nan
        return ratio_of(r[i], cut) if math.isfinite(r[i]) else math.nan

    return data.judge.check(list(light.values()), over_median, ">", 1.0, fmt=mult)


@rule
def profiling_table4(item: dict, data: Data, reuse: Data | None) -> Verdict:
    """Tables III-IV: every app's service and end-to-end mean/p95/p99/max at Table I's light
    load and its tail ratios; the report's long-tailed apps (``paper_long_tail``) must rank in
    the upper half by service p95 / mean (PROF_TAIL_RANK)."""
    src = reuse if reuse is not None else data
    apps = apps_of(src)
    if not apps:
        return no_data(src, "app results")
    light = {app: pts.sort_values("qps").iloc[0] for app, pts in apps.items()}
    nums = {app: _tail_ratios(p) for app, p in light.items()}
    ranked = [v["svc_p95_mean"] for v in nums.values() if math.isfinite(v["svc_p95_mean"])]
    cut = float(np.quantile(ranked, PROF_TAIL_RANK)) if ranked else math.nan
    conds = []
    for app in item.get("paper_long_tail", []):
        r = nums.get(app, {}).get("svc_p95_mean", math.nan)
        text = f"{app}'s service p95/mean {mult(r)} above the apps' median"
        conds.append(Cond.judged(text, _above_median(src, light, app)))
    top = sorted(nums, key=lambda a: -finite_or(nums[a]["svc_p95_mean"]))
    ranks = ", ".join(f"{a} {mult(nums[a]['svc_p95_mean'])}" for a in top)
    body = (
        f"service p95/mean ranks {ranks} (median {mult(cut)}); the report's long-tailed apps: "
        + ", ".join(item.get("paper_long_tail", []))
    )
    paper = item.get("paper_ratios", {})
    names = item.get("paper_apps", {})
    rows = [
        [a, *(fmt_ns(v[f"svc_{st}_ns"]) for st in _TAIL_STATS)] + [mult(v[k]) for k in _RATIO_KEYS]
        for a, v in sorted(nums.items(), key=lambda t: -finite_or(t[1]["svc_p95_mean"]))
    ]
    ratio_heads = ["p95/mean", "p99/mean", "end-to-end p95/mean", "p99/mean"]
    table = {
        "heads": ["app", "service mean", "p95", "p99", "max", *ratio_heads],
        "rows": rows,
        "paper": (
            ["app", "report's app", *ratio_heads],
            [
                [a, str(names.get(a, "")), *(mult(r[k]) for k in _RATIO_KEYS)]
                for a, r in paper.items()
            ],
        ),
    }
    return make_verdict(
        conds,
        body,
        {"apps": nums, "median_svc_p95_mean": cut},
        **table,
        figures=[
            (
                "tail_ratios",
                "Service p95 / mean per app at the light load, ours beside the report's "
                "Table IV; the dotted line is our apps' median.",
                lambda o: bars(
                    o,
                    top,
                    {
                        "ours": [nums[a]["svc_p95_mean"] for a in top],
                        "report (Table IV)": [
                            paper.get(a, {}).get("svc_p95_mean", math.nan) for a in top
                        ],
                    },
                    "service p95 / mean",
                    "Tail ratio at a light load",
                    log=False,
                    hlines=[(cut, "")],
                ),
            )
        ],
    )


STRESSES = ("cpu", "memory", "disk", "all")


def _paper_ratios(item: dict) -> dict[str, dict[str, float]]:
    """The paper's service-time ratios to `none` per stress, from ``paper_svc_ms``."""
    svc = item.get("paper_svc_ms") or {}
    base = svc.get("none") or {}
    return {
        case: {
            s: float(v[s]) / float(base[s])
            for s in ("mean", "p95", "p99")
            if s in v and base.get(s)
        }
        for case, v in svc.items()
        if case != "none"
    }


def _resource_rows(res: Results, stem: str) -> list[list[str]]:
    """Per case: the harness's CPU and involuntary switches, the stress processes' CPU and
    disk writes (from summary.json's environment and interference sections)."""
    table = point_table(resource_table(res))
    rows = []
    for point, g in table.groupby("point", sort=False):
        case = res.points.loc[res.points["point"] == point, "axis_case"]
        h, hog = g[g["kind"] == "harness"], g[g["kind"] == "interference"]
        rows.append(
            [
                stem,
                str(case.iloc[0]) if len(case) else point,
                num_text(h["cpu_pct"].sum(min_count=1), "{:.0f} %"),
                num_text(h["invol_cs"].sum(min_count=1), "{:,.0f}"),
                fmt_bytes(h["rss_max_bytes"].max()),
                num_text(hog["cpu_pct"].sum(min_count=1), "{:.0f} %"),
                fmt_bytes(hog["write_bytes"].sum(min_count=1)),
            ]
        )
    return rows


def _stress_ratios(pts: pd.DataFrame) -> dict[str, Any] | None:
    """One app's service p95/p99 per stress case ÷ under `none` (None without a `none`)."""
    by = by_axis(pts[pts["runs"] > 0], "case")
    if "none" not in by:
        return None
    base = {s: value(by["none"], "service", s) for s in ("p95", "p99")}
    rel = {c: {s: ratio_of(value(p, "service", s), base[s]) for s in base} for c, p in by.items()}
    return {"none_ns": base, "ratio": {c: r for c, r in rel.items() if c != "none"}}


def _stress_checks(data: Any, pts: pd.DataFrame, app: str) -> list[Cond]:
    """One app's stress conditions (as :func:`_stress_conds`) over each case's runs: service
    p95 under each stress ÷ under none (all ÷ cpu for "all ≥ cpu")."""
    by = by_axis(pts[pts["runs"] > 0], "case")

    def rel(case: str, to: str, op: str, bound: float) -> Check:
        return ratio_check(data, by.get(case), by.get(to), op, bound, "p95", "service")

    return [
        Cond.judged(f"{app}: cpu ≥ {PROF_CPU:g}×", rel("cpu", "none", ">=", PROF_CPU), True),
        Cond.judged(f"{app}: all ≥ cpu", rel("all", "cpu", ">=", 1.0)),
        Cond.judged(f"{app}: memory < {PROF_ALONE:g}×", rel("memory", "none", "<", PROF_ALONE)),
        Cond.judged(f"{app}: disk < {PROF_ALONE:g}×", rel("disk", "none", "<", PROF_ALONE)),
    ]


def _stress_conds(app: str, ratio: dict[str, dict[str, float]]) -> list[Cond]:
    p95 = {c: ratio.get(c, {}).get("p95", math.nan) for c in STRESSES}
    return [
        Cond(f"{app}: cpu ≥ {PROF_CPU:g}×", at_least(p95["cpu"], PROF_CPU), True),
        Cond(f"{app}: all ≥ cpu", at_least(p95["all"], p95["cpu"])),
        Cond(f"{app}: memory < {PROF_ALONE:g}×", less_than(p95["memory"], PROF_ALONE)),
        Cond(f"{app}: disk < {PROF_ALONE:g}×", less_than(p95["disk"], PROF_ALONE)),
    ]


def _stress_judged(data: Data, doc: dict, app: str, ratio: dict, effects: dict) -> list[Cond]:
    """The one-factor item's conditions (:func:`_stress_conds`) on an attribution: in the full
    variant each stress level's against its threshold by its effect's CI, as its cell ÷ the
    base cell (three-valued); "all ≥ cpu" compares two effects whose joint draws the
    attribution does not keep, so it stays a point comparison."""
    conds = _stress_conds(app, ratio)
    es = attr_effects(doc, "service", ATTR_PROF_Q)
    if "base" not in es:
        return conds
    base = float(es["base"]["estimate_us"])
    for i, (c, op, bound) in (
        (0, ("cpu", ">=", PROF_CPU)),
        (2, ("memory", "<", PROF_ALONE)),
        (3, ("disk", "<", PROF_ALONE)),
    ):
        check = effect_check(data, doc, effects.get(c, {}).get("p95"), op, bound, base=base)
        if check:
            conds[i] = Cond.judged(conds[i].text, check, conds[i].primary)
    return conds


def _stress_paper_table(item: dict, paper: dict) -> tuple[list[str], list[list[str]]]:
    svc = item.get("paper_svc_ms") or {}
    rows = []
    for c in ("none", *STRESSES):
        ms = [fmt_ns(1e6 * as_float(svc.get(c, {}).get(s))) for s in ("mean", "p95", "p99")]
        rel = [mult(paper.get(c, {}).get(s, math.nan)) for s in ("p95", "p99")]
        rows.append([c, *ms, *rel])
    return ["stress", "SVC mean", "SVC p95", "SVC p99", "p95 ÷ none", "p99 ÷ none"], rows


def _stress_p95(ratio: dict, c: str) -> float:
    """The p95 ratio of stress ``c`` in a per-stress ratio table (NaN when absent)."""
    return ratio.get(c, {}).get("p95", math.nan)


def _stress_body(lead: str, nums: dict, paper: dict) -> str:
    """The verdict sentence of a stress item: each app's p95 ratio per stress, then the
    report's (sphinx)."""
    ours = "; ".join(
        f"{a} " + ", ".join(f"{c} {mult(_stress_p95(v['ratio'], c))}" for c in STRESSES)
        for a, v in nums.items()
    )
    theirs = ", ".join(f"{c} {mult(_stress_p95(paper, c))}" for c in STRESSES)
    return f"{lead}: {ours} (report, sphinx: {theirs})"


@rule
def profiling_table7(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Service p95/p99 per stress relative to none, per app, beside the report's ratios;
    judged on PROF_APP (the report's app), the others shown beside it."""
    paper = _paper_ratios(item)
    nums, conds_by_app = {}, {}
    for stem in data.results:
        got = _stress_ratios(data.of(stem))
        if got is not None:
            app = str(data.of(stem)["app"].iloc[0])
            nums[app] = got
            conds_by_app[app] = _stress_checks(data, data.of(stem), app)
    if not nums:
        return no_data(data, "stress cases")
    # The report's app decides (PROF_APP); the others are shown beside it.
    judged = conds_by_app.get(PROF_APP) or _stress_conds(PROF_APP, {})
    beside = {a: status_of(c) for a, c in conds_by_app.items() if a != PROF_APP}

    p95 = _stress_p95
    body = _stress_body("service p95 ÷ none", nums, paper)
    rows = [
        [a, c]
        + [mult(v["ratio"].get(c, {}).get(s, math.nan)) for s in ("p95", "p99")]
        + [mult(paper.get(c, {}).get(s, math.nan)) for s in ("p95", "p99")]
        for a, v in nums.items()
        for c in STRESSES
    ]
    resource_rows = [r for s, res in data.results.items() for r in _resource_rows(res, s)]
    series = {
        "ours": [p95(nums[a]["ratio"], c) for a in nums for c in STRESSES],
        "report (sphinx)": [p95(paper, c) for _ in nums for c in STRESSES],
    }
    cats = [f"{a} {c}" for a in nums for c in STRESSES]
    body += f"; judged on {PROF_APP}, the report's app"
    if beside:
        body += " (beside it, not judged: " + ", ".join(f"{a} {s}" for a, s in beside.items())
        body += ")"
    return make_verdict(
        judged,
        body,
        {"apps": nums, "paper_ratio": paper, "judged_on": PROF_APP, "beside": beside},
        heads=["app", "stress", "p95 ÷ none", "p99 ÷ none", "report: p95", "report: p99"],
        rows=rows,
        paper=_stress_paper_table(item, paper),
        figures=[
            (
                "stress_ratios",
                "Service p95 under each stress ÷ without, ours per app beside the report's "
                "(sphinx, Table VII).",
                lambda o: bars(
                    o,
                    cats,
                    series,
                    "service p95 ÷ no stress",
                    "Service p95 under stress",
                    log=False,
                    hlines=[(1.0, "")],
                ),
            )
        ],
        sections=[lambda out: _resources_html(data, resource_rows, out)],
    )


def _resources_html(data: Data, rows: list[list[str]], out: Path) -> str:
    """The resource table per case, and each experiment's full per-process page."""
    links = []
    for stem, res in data.results.items():
        name = f"resources-{stem.replace('/', '-')}.html"
        (out / name).write_text(resources.page(res, out), encoding="utf-8")
        links.append(f'<a href="{esc(name)}">{esc(stem)}</a>')
    heads = [
        "experiment",
        "case",
        "harness CPU",
        "harness invol. cs",
        "harness max RSS",
        "stress CPU",
        "stress disk write",
    ]
    return (
        "<h2>Resources per case</h2><p class=muted>Mean over a case's runs; CPU in % of one "
        "CPU; the stress processes are the case's planned interference. Every process: "
        + " · ".join(links)
        + ".</p>"
        + html.table(heads, rows, left=2)
    )


def _stress_case(level: str) -> str:
    """The report's name of a stress level: none, cpu, memory, disk, all."""
    parts = [p.split(":")[0] for p in str(level).split("+")]
    if len(parts) > 1:
        return "all"
    return {"cpu": "cpu", "vm": "memory", "hdd": "disk", "io": "disk"}.get(parts[0], parts[0])


def _stress_effects(doc: dict) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, Any]]]:
    """An attribution's stress levels: each level's cell ÷ no stress and its main effect, on
    service p95 (ATTR_PROF_Q) and p99."""
    ratio: dict[str, dict[str, float]] = {}
    effects: dict[str, dict[str, Any]] = {}
    for q, label in ((ATTR_PROF_Q, "p95"), (0.99, "p99")):
        es = attr_effects(doc, "service", q)
        if "base" not in es:
            continue
        base = float(es["base"]["estimate_us"])
        for e in es.values():
            if e.get("kind") != "main":
                continue
            case = _stress_case(e["factors"][0]["level"])
            ratio.setdefault(case, {})[label] = ratio_of(base + float(e["estimate_us"]), base)
            effects.setdefault(case, {})[label] = e
    return ratio, effects


def _stress_row(app: str, c: str, ratio: dict, effects: dict, paper: dict) -> list:
    """One app's stress level: its p95 effect's CI, p95 and p99 ÷ none, the report's."""
    return [
        app,
        c,
        ci_text(effects.get(c, {}).get("p95")),
        mult(ratio.get(c, {}).get("p95", math.nan)),
        mult(ratio.get(c, {}).get("p99", math.nan)),
        mult(paper.get(c, {}).get("p95", math.nan)),
        mult(paper.get(c, {}).get("p99", math.nan)),
    ]


def _stress_figure(nums: dict, paper: dict) -> tuple:
    """Service p95 under each stress ÷ without, per app's attribution, beside the report's."""
    p95 = _stress_p95
    cats = [f"{a} {c}" for a in nums for c in STRESSES]
    series = {
        "ours (model)": [p95(nums[a]["ratio"], c) for a in nums for c in STRESSES],
        "report (sphinx)": [p95(paper, c) for _ in nums for c in STRESSES],
    }
    return (
        "stress_ratios",
        "Service p95 under each stress ÷ without, from each app's attribution, beside "
        "the report's (sphinx, Table VII).",
        lambda o: bars(
            o,
            cats,
            series,
            "service p95 ÷ no stress",
            "Service p95 under stress (attribution)",
            log=False,
            hlines=[(1.0, "")],
        ),
    )


@rule
def profiling_attribution(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """The report's stress tables as attributions: per app, each stress level's effect on
    service p95 and p99 (CI from the runs), the cell ÷ no stress beside the report's ratio; the
    same conditions as the one-factor item (in the full variant judged by the effects' CIs),
    judged on the same app (PROF_APP), and the CPU stress's effect must exclude 0."""
    paper = _paper_ratios(item)
    nums: dict[str, Any] = {}
    rows = []
    conds_by_app = {}
    for stem in data.results:
        doc = attribution(data, stem)
        if not doc:
            continue
        app = str(data.of(stem)["app"].iloc[0]) if len(data.of(stem)) else stem
        ratio, effects = _stress_effects(doc)
        if not ratio:
            continue
        nums[app] = {"ratio": ratio, "effects": effects}
        conds = _stress_judged(data, doc, app, ratio, effects)
        cpu = effects.get("cpu", {}).get("p95")
        text = f"{app}: cpu's effect on p95 excludes 0"
        check = effect_check(data, doc, cpu, ">", 0.0)
        conds.append(
            Cond.judged(text, check, True) if check else Cond(text, excludes_zero(cpu), True)
        )
        conds_by_app[app] = conds
        rows += [_stress_row(app, c, ratio, effects, paper) for c in STRESSES]
    if not nums:
        return no_data(data, "attribution.json")
    # As the one-factor item: the report's app decides (PROF_APP), the others beside it.
    judged = conds_by_app.get(PROF_APP) or [
        *_stress_conds(PROF_APP, {}),
        Cond(f"{PROF_APP}: cpu's effect on p95 excludes 0", None, True),
    ]
    beside = {a: status_of(c) for a, c in conds_by_app.items() if a != PROF_APP}
    body = _stress_body("service p95 ÷ none, from the model", nums, paper)
    return make_verdict(
        judged,
        body
        + f"; judged on {PROF_APP}, the report's app"
        + (
            " (beside it, not judged: " + ", ".join(f"{a} {st}" for a, st in beside.items()) + ")"
            if beside
            else ""
        ),
        {
            "apps": nums,
            "paper_ratio": paper,
            "judged_on": PROF_APP,
            "beside": beside,
            "quantile": ATTR_PROF_Q,
        },
        heads=[
            "app",
            "stress",
            "effect on service p95 [95 % CI]",
            "p95 ÷ none",
            "p99 ÷ none",
            "report: p95",
            "report: p99",
        ],
        rows=rows,
        paper=_stress_paper_table(item, paper),
        figures=[_stress_figure(nums, paper)],
        sections=[lambda out: attribution_links(data, out)],
    )


# The report calls img-dnn, moses, sphinx and xapian CPU intensive (99 % of a CPU) and
# masstree, specjbb, shore and silo memory intensive (huge RSS). Read in our terms: the
# memory-intensive apps' median peak RSS above the CPU-intensive apps' median, and the
# CPU-intensive apps' median CPU time per request above the memory-intensive apps'. The RSS
# ranks across the apps (Spearman's rho against the report's) are shown beside, not judged:
# our engines and data sets are not theirs, only the division is comparable.
T2_CPU_APPS = ("img-dnn", "translate", "speech", "search")


T2_MEM_APPS = ("kv", "middleware", "oltp-disk", "oltp-mem")


# Table II's columns as items.toml gives them, and ours.
T2_COLUMNS = ("cpu_pct", "rss_kb", "minflt", "majflt", "vol_cs", "invol_cs")


_T2_HEADS = ["minor faults", "major faults", "voluntary cs", "involuntary cs"]


def _resources_per_run(res: Any, p: pd.Series) -> pd.DataFrame:
    """Per run of one point (indexed by its run): the harness and its helper processes' CPU
    %, peak RSS, faults and switches, and CPU time per measured request."""
    t = resource_table(res)
    t = t[(t["point"] == p["point"]) & t["kind"].isin(["harness", "harness child"])]
    if t.empty:
        return pd.DataFrame()
    per_run = t.groupby("run").agg(
        cpu_pct=("cpu_pct", "sum"),
        rss=("rss_max_bytes", "sum"),
        minflt=("minflt", "sum"),
        majflt=("majflt", "sum"),
        vol_cs=("vol_cs", "sum"),
        invol_cs=("invol_cs", "sum"),
    )
    runs = res.runs[res.runs["point"] == p["point"]].set_index("run")
    reqs = pd.to_numeric(runs["requests_measured"], errors="coerce").reindex(per_run.index)
    secs = pd.to_numeric(runs["duration_s"], errors="coerce").reindex(per_run.index)
    per_run["cpu_per_request_ns"] = per_run["cpu_pct"] / 100 * secs / reqs * 1e9
    return per_run


def _resources_of(per_run: pd.DataFrame) -> dict[str, float]:
    """A point's resources, its runs averaged (the peak RSS too: each run's peak)."""
    return {k: float(per_run[k].mean()) for k in per_run.columns} if not per_run.empty else {}


def _t2_ratio(per_run: dict[str, pd.DataFrame], col: str, top: tuple, bottom: tuple):
    """The statistic of a Table II condition: the median over ``top``'s apps of ``col`` (each
    app's runs in the view averaged) ÷ the median over ``bottom``'s (views one per app of
    ``per_run``, in its order)."""
    apps = list(per_run)

    def stat(*views) -> float:
        mean = {}
        for app, v in zip(apps, views, strict=True):
            x = pd.to_numeric(per_run[app][col].reindex(v.run_ids()), errors="coerce")
            mean[app] = float(x.mean()) if x.notna().any() else math.nan
        med = {
            g: _median([mean.get(a, math.nan) for a in grp])
            for g, grp in (("t", top), ("b", bottom))
        }
        return ratio_of(med["t"], med["b"])

    return stat


def _median(vals: list[float]) -> float:
    v = [x for x in vals if math.isfinite(x)]
    return float(np.median(v)) if v else math.nan


def _table2_rows(nums: dict, paper: dict, names: dict) -> tuple[list, list]:
    """Table II's rows, ours (largest peak RSS first) and the report's."""
    rows = [
        [
            a,
            str(names.get(a, "")),
            f"{v['cpu_pct']:.0f} %",
            fmt_ns(v["cpu_per_request_ns"]),
            fmt_bytes(v["rss"]),
            f"{v['minflt']:,.0f}",
            f"{v['majflt']:,.0f}",
            f"{v['vol_cs']:,.0f}",
            f"{v['invol_cs']:,.0f}",
        ]
        for a, v in sorted(nums.items(), key=lambda t: -t[1]["rss"])
    ]
    paper_rows = [
        [a, str(names.get(a, "")), *(f"{float(r.get(k, math.nan)):,.0f}" for k in T2_COLUMNS)]
        for a, r in paper.items()
    ]
    return rows, paper_rows


def _t2_conds(src: Any, per_run: dict[str, pd.DataFrame], pts: list) -> list[Cond]:
    """Table II's two conditions, each judged as a ratio of the two groups' medians, its
    interval a bootstrap over each app's runs (one run a point: the point comparison it
    was); ``pts``: each app's light point, in ``per_run``'s order."""
    return [
        Cond.judged(
            "the report's memory-intensive apps: median peak RSS above its CPU-intensive apps'",
            src.judge.check(
                pts, _t2_ratio(per_run, "rss", T2_MEM_APPS, T2_CPU_APPS), ">", 1.0, fmt=mult
            ),
            True,
        ),
        Cond.judged(
            "the report's CPU-intensive apps: median CPU per request above its "
            "memory-intensive apps'",
            src.judge.check(
                pts,
                _t2_ratio(per_run, "cpu_per_request_ns", T2_CPU_APPS, T2_MEM_APPS),
                ">",
                1.0,
                fmt=mult,
            ),
        ),
    ]


@rule
def profiling_table2(item: dict, data: Any, reuse: Any) -> Verdict:
    """Table II from Table I's runs: each app's CPU, peak RSS, page faults and context switches
    at the light load (the harness and its helper processes), the report's beside; the
    report's division into memory- and CPU-intensive apps judged on peak RSS and CPU time per
    request."""
    from scipy import stats as sps

    src = reuse if reuse is not None else data
    apps = apps_of(src)
    if not apps:
        return no_data(src, "app results")
    nums: dict[str, dict[str, float]] = {}
    per_run: dict[str, pd.DataFrame] = {}
    light: dict[str, pd.Series] = {}
    for app, pts in apps.items():
        p = pts.sort_values("qps").iloc[0]
        runs = _resources_per_run(src.results[p["stem"]], p)
        if not runs.empty:
            nums[app], per_run[app], light[app] = _resources_of(runs), runs, p
    if not nums:
        return no_data(src, "resource sections (environment.harness) in Table I's runs")
    paper = item.get("paper_table2") or {}
    names = item.get("paper_apps") or {}
    groups = (("cpu", T2_CPU_APPS), ("mem", T2_MEM_APPS))
    rss = {g: _median([get_number(nums, a, "rss") for a in members]) for g, members in groups}
    cpu = {
        g: _median([get_number(nums, a, "cpu_per_request_ns") for a in members])
        for g, members in groups
    }
    both = [a for a in nums if a in paper and math.isfinite(nums[a]["rss"])]
    rho = math.nan
    if len(both) >= 3:
        ours, theirs = [nums[a]["rss"] for a in both], [paper[a]["rss_kb"] for a in both]
        rho = float(sps.spearmanr(ours, theirs)[0])
    conds = _t2_conds(src, per_run, list(light.values()))
    body = (
        f"median peak RSS {fmt_bytes(rss['mem'])} for the report's memory-intensive apps "
        f"({', '.join(T2_MEM_APPS)}) against {fmt_bytes(rss['cpu'])} for its CPU-intensive "
        f"ones; median CPU per request {fmt_ns(cpu['cpu'])} against {fmt_ns(cpu['mem'])}; "
        f"RSS ranks against the report's: Spearman's ρ {rho:.2f} over {len(both)} apps"
    )
    rows, paper_rows = _table2_rows(nums, paper, names)
    cats = [a for a in nums if a in paper]
    series = {
        "ours (MiB)": [nums[a]["rss"] / 2**20 for a in cats],
        "report (MiB)": [paper[a]["rss_kb"] / 1024 for a in cats],
    }
    return make_verdict(
        conds,
        body,
        {
            "apps": nums,
            "median_rss": rss,
            "median_cpu_per_request_ns": cpu,
            "rss_spearman": rho,
        },
        heads=["app", "report's app", "CPU", "CPU per request", "peak RSS", *_T2_HEADS],
        rows=rows,
        paper=(["app", "report's app", "CPU %", "RSS (kB)", *_T2_HEADS], paper_rows),
        figures=[
            (
                "rss",
                "Peak RSS per app while it serves its light load, ours (the harness and its "
                "helper processes, over the measured phase) beside the report's Table II.",
                lambda o: bars(o, cats, series, "peak RSS (MiB, log scale)", "Memory per app"),
            )
        ],
    )
