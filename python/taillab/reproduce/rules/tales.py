"""The rules of Tales of the Tail's items (Li et al., SoCC 2014): Figs. 1–5, 7 and 10, with Fig. 5
as an attribution too. The host-mechanism figures (6, 8, 9: scheduling class, interrupts, NUMA)
are in :mod:`.tales_host`.

Every rule takes ``(item, data, reuse)`` as :data:`taillab.reproduce.RULES` says; ``data`` is
the item's :class:`taillab.reproduce.Data`.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from ...units import fmt_ns
from ..items import Data
from ..judge import Check, Estimate, compare
from ..verdict import (
    Cond,
    Verdict,
    at_least,
    bars,
    below,
    by_axis,
    finite_or,
    ideal_fig_plan,
    in_unit,
    make_verdict,
    mult,
    no_data,
    ok_mark,
    p99_table,
    pct,
    ratio_check,
    ratio_of,
    value,
    with_ideal,
)
from .common import (
    attr_effects,
    attribution,
    attribution_links,
    ci_text,
    effect_check,
    excludes_zero,
    num_text,
    paper_text,
)
from .registry import rule

# Tales Fig. 2: a good system stays within 15 % of the ideal queue's p99 up to ρ = 0.7, the
# load Tales's well-tuned server reaches before its curve departs from the model.
TALES2_CLOSE, TALES2_RHO = 1.15, 0.7


# ... the measured ρ includes the worker's own per-request overhead (a few %), so the point
# meant as 0.7 reads slightly above it.
RHO_SLACK = 0.05


# Tales Fig. 5: a hog sharing the core at least doubles p99 (it takes half the CPU); a remedy
# works if p99 is back within 1.5x of the undisturbed run.
TALES5_HOG, TALES5_REMEDY = 2.0, 1.5


# Tales Fig. 10: at 10 % load a worker that sleeps until each request (its CPU idles and
# wakes) has a p99 at least 1.2x that of one that spins (the wake-up, tens of µs on a VM, is
# a fifth of a 20 µs service's p99 or more); a C-state limit works if it takes back at least
# half of that difference.
TALES10_IDLE, TALES10_LIMIT = 1.2, 0.5


# Tales Fig. 5 as an attribution (kind = "attribute"): the same bars as its one-factor item
# (TALES5_HOG, TALES5_REMEDY) applied to the cells the regression predicts (base + effects),
# and the effect the claim is about must also be one the design can tell from noise: its 95 %
# CI excludes zero. The quantile judged: sojourn p99 (its Fig. 5 plots the sojourn CCDF).
ATTR_TALES_Q = 0.99


def _p99_bars(name: str, caption: str, nums: dict, title: str):
    cats = list(nums)
    series, unit = in_unit(
        {
            "measured": [nums[c]["p99_ns"] for c in cats],
            "ideal (replay)": [nums[c]["ideal_p99_ns"] for c in cats],
        }
    )
    return (
        name,
        caption,
        lambda o: bars(o, cats, series, f"sojourn p99 ({unit}, log scale)", title),
    )


def largest(data: Data, by: dict[str, pd.Series], name: str, stat: str = "p99") -> Check:
    """``name``'s sojourn ``stat`` above every other point's of ``by``: its ratio to the
    largest of the others > 1, over all their runs."""
    names = list(by)
    i = names.index(name)

    def over_rest(*views) -> float:
        vals = [v.stat("sojourn", stat) for v in views]
        rest = [x for j, x in enumerate(vals) if j != i and math.isfinite(x)]
        return ratio_of(vals[i], max(rest)) if rest else math.nan

    return data.judge.check(list(by.values()), over_rest, ">", 1.0, fmt=mult)


@rule
def tales_fig1(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """p99 per arrival process at one load: fixed < poisson < lognormal, mmpp the largest."""
    by = by_axis(with_ideal(data), "load.arrival")
    if not by:
        return no_data(data, "points over load.arrival")
    nums, rows = p99_table(by)
    p99 = {k: v["p99_ns"] for k, v in nums.items()}
    mmpp = next((k for k in p99 if k.startswith("mmpp")), None)
    logn = next((k for k in p99 if k.startswith("lognormal")), "lognormal:cv=2")
    conds = [
        Cond.judged("fixed < poisson", below(data, by.get("fixed"), by.get("poisson")), True),
        Cond.judged(f"poisson < {logn}", below(data, by.get("poisson"), by.get(logn))),
        Cond("mmpp has the largest p99", None)
        if mmpp is None
        else Cond.judged("mmpp has the largest p99", largest(data, by, mmpp)),
    ]
    body = "p99 " + ", ".join(
        f"{k} {fmt_ns(v)}" for k, v in sorted(p99.items(), key=lambda t: finite_or(t[1]))
    )
    body += "; measured ÷ ideal p99 " + ", ".join(
        f"{k} {mult(v['ratio'], 2)}" for k, v in nums.items()
    )
    return make_verdict(
        conds,
        body,
        {"arrival": nums},
        heads=["arrival", "p99", "ideal p99", "measured ÷ ideal"],
        rows=rows,
        figures=[
            _p99_bars(
                "p99_by_arrival",
                "Sojourn p99 per arrival process at the same load, measured and the ideal replay "
                "of the same arrivals and service times (Tales of the Tail Fig. 1).",
                nums,
                "p99 by arrival process",
            )
        ],
    )


def _rho(p: pd.Series) -> tuple[float, float]:
    """(ρ to judge by, with its slack): the planned utilization when the service spec gives
    it, else the measured one (which carries the worker's own overhead)."""
    nominal = float(p.get("nominal_rho", math.nan))
    if math.isfinite(nominal):
        return nominal, 1e-6
    return float(p.get("utilization", math.nan)), RHO_SLACK


def _rising(data: Data, points: list[pd.Series]) -> Check:
    """p99 rises from each load to the next: the smallest step's ratio > 1."""

    def step(*views) -> float:
        p99 = [v.stat("sojourn", "p99") for v in views]
        steps = [ratio_of(b, a) for a, b in zip(p99, p99[1:], strict=False)]
        return min(steps) if all(map(math.isfinite, steps)) else math.nan

    return data.judge.check(points, step, ">", 1.0, fmt=mult)


def worst_to_ideal(data: Data, points: list, op: str, bound: float, stat: str = "p99") -> Check:
    """The largest measured ÷ ideal ``stat`` (each run's own ratio, averaged over a point's
    runs) of ``points`` compared with ``bound``."""

    def worst(*views) -> float:
        r = [v.number("ideal", "ratio", stat) for v in views]
        r = [x for x in r if math.isfinite(x)]
        return max(r) if r else math.nan

    return data.judge.check(points, worst, op, bound, fmt=mult)


@rule
def tales_fig2(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """p99 and measured ÷ ideal p99 per utilization: rising, close to ideal up to ρ 0.7."""
    pts = with_ideal(data)
    if pts.empty:
        return no_data(data, "points")
    pts = pts.sort_values("qps")
    p99 = [value(p, "sojourn", "p99") for _, p in pts.iterrows()]
    nums, rows, close = {}, [], []
    for (_, p), v in zip(pts.iterrows(), p99, strict=True):
        (rho, slack), r = _rho(p), float(p.get("ratio_p99", math.nan))
        measured = float(p.get("utilization", math.nan))
        label = f"ρ {rho:.2f}"
        nums[label] = {
            "qps": float(p["qps"]),
            "utilization": rho,
            "measured_utilization": measured,
            "p99_ns": v,
            "ratio": r,
        }
        if math.isfinite(rho) and rho <= TALES2_RHO + slack and math.isfinite(r):
            close.append(p)
        rows.append(
            [
                label,
                f"{float(p['qps']):,.0f}",
                num_text(measured, "{:.2f}"),
                fmt_ns(v),
                fmt_ns(p.get("ideal_p99")),
                mult(r),
            ]
        )
    points = [p for _, p in pts.iterrows()]
    conds = [
        Cond("p99 rises with load", None, True)
        if len(points) < 2
        else Cond.judged("p99 rises with load", _rising(data, points), True),
        Cond(
            f"measured ÷ ideal p99 ≤ {TALES2_CLOSE:g} up to ρ {TALES2_RHO:g}",
            None,
        )
        if not close
        else Cond.judged(
            f"measured ÷ ideal p99 ≤ {TALES2_CLOSE:g} up to ρ {TALES2_RHO:g}",
            worst_to_ideal(data, close, "<=", TALES2_CLOSE),
        ),
    ]
    body = "p99 " + ", ".join(f"{k} {fmt_ns(v['p99_ns'])}" for k, v in nums.items())
    body += "; measured ÷ ideal " + ", ".join(f"{mult(v['ratio'], 3)}" for v in nums.values())
    res = data.combined()
    return make_verdict(
        conds,
        body,
        {"utilization": nums},
        heads=["ρ", "offered QPS", "measured ρ", "p99", "ideal p99", "measured ÷ ideal"],
        rows=rows,
        figures=[
            (
                "ideal_ccdf",
                "Sojourn CCDF per load, measured (solid) and the ideal replay (dashed) "
                "(Tales of the Tail Fig. 2).",
                lambda o: ideal_fig_plan("ideal_ccdf", res, o, max_lines=5),
            ),
            (
                "p99_vs_load",
                "Sojourn p99 vs load, measured with CI bars and the ideal dashed.",
                lambda o: ideal_fig_plan(
                    "latency_vs_load_ideal", res, o, stat="p99", x="utilization"
                ),
            ),
        ],
    )


@rule
def tales_fig3(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """At each utilization: p99 with 2 workers below p99 with 1."""
    pts = with_ideal(data)
    if pts.empty:
        return no_data(data, "points")
    nums, conds, rows = {}, [], []
    for frac, g in pts.groupby("load_frac", sort=True):
        by = {int(p["threads"]): p for _, p in g.iterrows()}
        lo, hi = min(by), max(by)
        a, b = value(by[lo], "sojourn", "p99"), value(by[hi], "sojourn", "p99")
        label = f"{100 * frac:.0f} % load"
        nums[label] = {f"p99_ns_{t}": value(p, "sojourn", "p99") for t, p in by.items()}
        text = f"{hi} workers < {lo} at {label}"
        conds.append(
            Cond.judged(text, below(data, by[hi], by[lo])) if hi > lo else Cond(text, None)
        )
        rows.append([label, fmt_ns(a), fmt_ns(b), mult(ratio_of(b, a)), ok_mark(conds[-1].ok)])
    body = "p99 " + "; ".join(
        f"{k}: " + ", ".join(f"{t.split('_')[-1]} worker(s) {fmt_ns(v)}" for t, v in n.items())
        for k, n in nums.items()
    )
    workers = sorted({int(k.split("_")[-1]) for n in nums.values() for k in n})
    series, unit = in_unit(
        {f"{t} worker(s)": [n.get(f"p99_ns_{t}", math.nan) for n in nums.values()] for t in workers}
    )
    return make_verdict(
        conds,
        body,
        {"utilization": nums},
        heads=["load", "p99, fewest workers", "p99, most workers", "ratio", "shorter"],
        rows=rows,
        figures=[
            (
                "p99_by_workers",
                "Sojourn p99 per worker count at the same fraction of each one's saturation "
                "rate (≈ utilization).",
                lambda o: bars(
                    o,
                    list(nums),
                    series,
                    f"sojourn p99 ({unit}, log scale)",
                    "p99 by worker count",
                ),
            ),
            (
                "ccdf_by_workers",
                "Sojourn CCDF per worker count at each utilization, measured (solid) and ideal "
                "(dashed) (Tales of the Tail Fig. 3).",
                lambda o: ideal_fig_plan(
                    "tales_panels", data.combined(planned_rho=True), o, by="threads"
                ),
            ),
        ],
    )


@rule
def tales_fig4(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """p99 per (discipline, dispatch): FIFO from one shared queue the smallest."""
    pts = with_ideal(data)
    if pts.empty or "axis_harness.discipline" not in pts:
        return no_data(data, "points over harness.discipline")
    by = {}
    for _, p in pts.iterrows():
        disp = p.get("axis_harness.dispatch", "shared")
        by[f"{p['axis_harness.discipline']}+{disp if isinstance(disp, str) else 'shared'}"] = p
    nums, rows = p99_table(by)
    conds = [
        Cond.judged(f"{k} > fifo+shared", below(data, by.get("fifo+shared"), by[k]))
        for k in nums
        if k != "fifo+shared"
    ]
    body = "p99 " + ", ".join(
        f"{k} {fmt_ns(v['p99_ns'])}"
        for k, v in sorted(nums.items(), key=lambda t: finite_or(t[1]["p99_ns"]))
    )
    return make_verdict(
        conds,
        body,
        {"cases": nums},
        heads=["discipline+dispatch", "p99", "ideal p99", "measured ÷ ideal"],
        rows=rows,
        figures=[
            _p99_bars(
                "p99_by_discipline",
                "Sojourn p99 per queue discipline and dispatch at the same load, measured and "
                "ideal (Tales of the Tail Fig. 4).",
                nums,
                "p99 by discipline and dispatch",
            )
        ],
    )


@rule
def tales_fig5(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """p99 per interference case: the hog doubles it, both remedies bring it back."""
    by = by_axis(with_ideal(data), "case")
    if not by:
        return no_data(data, "points over [[case]]")
    nums, rows = p99_table(by)
    none = nums.get("none", {}).get("p99_ns", math.nan)
    rel = {k: ratio_of(v["p99_ns"], none) for k, v in nums.items()}
    for k, r in zip(nums, rows, strict=True):
        nums[k]["vs_none"] = rel[k]
        r.append(mult(rel[k]))
    hog = ratio_check(data, by.get("hog"), by.get("none"), ">=", TALES5_HOG)
    conds = [Cond.judged(f"hog ≥ {TALES5_HOG:g}× none", hog, True)]
    for k in ("hog + RT", "hog elsewhere"):
        r = ratio_check(data, by.get(k), by.get("none"), "<=", TALES5_REMEDY)
        conds.append(Cond.judged(f"{k} ≤ {TALES5_REMEDY:g}× none", r))
    body = (
        "p99 ÷ p99 with nothing else running: "
        + ", ".join(f"{k} {mult(v, 3)}" for k, v in rel.items() if k != "none")
        + f" (none: {fmt_ns(none)})"
    )
    caption = (
        "Sojourn p99 per case: nothing else, a CPU hog on the worker's core, the same "
        "with the worker at real-time priority, the hog on the other core (Tales Fig. 5)."
    )
    bars_ = _p99_bars("p99_by_case", caption, nums, "p99 under interference")
    return _case_verdict(conds, body, {"cases": nums}, rows, "none", bars_)


def _case_verdict(conds, body: str, numbers: dict, rows, base: str, figure) -> Verdict:
    """A verdict over [[case]] points: the p99 table (each case ÷ the ``base`` case) and one
    figure."""
    heads = ["case", "p99", "ideal p99", "measured ÷ ideal", f"÷ {base}"]
    return make_verdict(conds, body, numbers, heads=heads, rows=rows, figures=[figure])


def _cpuidle_driver(data: Data) -> str | None:
    """The cpuidle driver the item's host ran (experiment.json's system report), if known."""
    for res in data.results.values():
        try:
            doc = json.loads((res.root / "experiment.json").read_text())
        except (OSError, ValueError):
            continue
        driver = (doc.get("system") or {}).get("cpuidle_driver")
        if driver:
            return str(driver)
    return None


@rule
def tales_fig10(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """p99 per wait case at 10 % load: sleeping until each request (the CPU idles) against
    spinning, and what a C-state limit takes back (needs a cpuidle driver to mean anything)."""
    by = by_axis(with_ideal(data), "case")
    if not by:
        return no_data(data, "points over [[case]]")
    nums, rows = p99_table(by)
    p99 = {k: v["p99_ns"] for k, v in nums.items()}
    spin, block = p99.get("spin", math.nan), p99.get("block", math.nan)
    limit = p99.get("block + C-state limit", math.nan)
    for k, r in zip(nums, rows, strict=True):
        nums[k]["vs_spin"] = ratio_of(p99[k], spin)
        r.append(mult(nums[k]["vs_spin"]))
    driver = _cpuidle_driver(data)
    taken = ratio_of(block - limit, block - spin)
    limited = f"a C-state limit takes back ≥ {TALES10_LIMIT:.0%} of it"
    conds = [
        Cond.judged(
            f"block ≥ {TALES10_IDLE:g}× spin (a CPU that idles wakes late)",
            ratio_check(data, by.get("block"), by.get("spin"), ">=", TALES10_IDLE),
            True,
        ),
        Cond(limited, None)
        if driver in (None, "none")
        else Cond.judged(limited, _taken_back(data, by)),
    ]
    body = "p99 ÷ p99 spinning: " + ", ".join(
        f"{k} {mult(v['vs_spin'], 3)}" for k, v in nums.items() if k != "spin"
    )
    body += f" (spin: {fmt_ns(spin)}; idle wake-up cost ≈ {fmt_ns(block - spin)}"
    body += f", theirs ≈ {item.get('paper_wakeup_us', '?')} µs from C3)"
    if driver in (None, "none"):
        body += "; needs: a cpuidle driver for the C-state limit to act (this host has none)"
    caption = (
        "Sojourn p99 at 10 % load per way the worker waits: spinning (its CPU never idles), the "
        "default (sleep, then spin the last margin), sleeping until each request, and the same "
        "with a C-state limit of 0 (Tales Fig. 10)."
    )
    numbers = {"cases": nums, "cpuidle_driver": driver, "limit_takes_back": taken}
    bars_ = _p99_bars("p99_by_wait", caption, nums, "p99 at 10 % load")
    return _case_verdict(conds, body, numbers, rows, "spin", bars_)


def _taken_back(data: Data, by: dict[str, pd.Series]) -> Check:
    """The share of blocking's extra p99 over spinning that a C-state limit takes back."""
    cases = ("block", "block + C-state limit", "spin")
    if any(c not in by for c in cases):
        return compare(Estimate(math.nan), ">=", TALES10_LIMIT)

    def share(block, limit, spin) -> float:
        b, lim, s = (v.stat("sojourn", "p99") for v in (block, limit, spin))
        return ratio_of(b - lim, b - s)

    return data.judge.check([by[c] for c in cases], share, ">=", TALES10_LIMIT, fmt=pct)


def _attr_term(es: dict[str, dict], *levels: tuple[str, str]) -> dict | None:
    """The main effect (one level) or two-factor interaction (two) of ``(key, level)``s."""
    want = sorted(levels)
    for e in es.values():
        fs = e.get("factors") or []
        if sorted((f["key"], f["level"]) for f in fs) == want:
            return e
    return None


def _attr_cell(es: dict[str, dict], levels: list[tuple[str, str]]) -> float:
    """The model's quantile (µs) of the cell with ``levels`` away from base: the intercept, each
    level's main effect and each pair's interaction (a term the design lacks counts as 0 only
    where it is not estimated at all: a fraction)."""
    base = es.get("base")
    if base is None:
        return math.nan
    v = float(base["estimate_us"])
    for i, a in enumerate(levels):
        m = _attr_term(es, a)
        v += float(m["estimate_us"]) if m else math.nan
        for b in levels[i + 1 :]:
            x = _attr_term(es, a, b)
            v += float(x["estimate_us"]) if x else 0.0
    return v


TALES5_HOG_LEVEL = ("interference.hogs", "cpu:1@cpus=0")


TALES5_REMEDIES = {
    "hog + RT": ("harness.rt_priority", "50"),
    "hog, dedicated core": ("harness.cpus", "1"),
}


def _tales5_conds(data: Data, doc: dict, es: dict, inter: dict) -> list[Cond]:
    """Tales Fig. 5's conditions: the hog's effect, each remedy's cell back near the base and
    its interaction with the hog negative. In the full variant the hog's and the interactions'
    are judged by their CIs (three-valued); a remedy's cell sums several effects whose joint
    draws the attribution does not keep, so it is compared as a point."""
    base = float(es["base"]["estimate_us"])
    hog = _attr_term(es, TALES5_HOG_LEVEL)
    rel = {k: ratio_of(_attr_cell(es, lv), base) for k, lv in _tales5_cells().items()}
    text = f"hog ≥ {TALES5_HOG:g}× base p99, CI excludes 0"
    check = effect_check(data, doc, hog, ">=", TALES5_HOG, base=base)
    conds = [
        Cond.judged(text, check, True)
        if check
        else Cond(
            text,
            None
            if excludes_zero(hog) is None
            else bool(excludes_zero(hog) and (at_least(rel["hog"], TALES5_HOG) or False)),
            True,
        )
    ]
    for name in TALES5_REMEDIES:
        r = rel[name]
        conds.append(
            Cond(
                f"{name} ≤ {TALES5_REMEDY:g}× base",
                None if not math.isfinite(r) else bool(r <= TALES5_REMEDY),
            )
        )
        x = inter[name]
        text = f"{name}: the interaction takes the hog's effect back (< 0, CI excludes 0)"
        check = effect_check(data, doc, x, "<", 0.0)
        conds.append(
            Cond.judged(text, check)
            if check
            else Cond(
                text,
                None
                if excludes_zero(x) is None
                else bool(excludes_zero(x) and float(x["estimate_us"]) < 0),
            )
        )
    return conds


def _tales5_cells() -> dict[str, list[tuple[str, str]]]:
    """The cells Tales Fig. 5's conditions read, by name: the hog alone, each remedy with it."""
    return {
        "hog": [TALES5_HOG_LEVEL],
        **{n: [TALES5_HOG_LEVEL, lv] for n, lv in TALES5_REMEDIES.items()},
    }


def _tales5_rows(es: dict, hog: dict, rel: dict, inter: dict, paper: dict) -> list[list]:
    """Tales Fig. 5's table: the hog, each remedy alone and its interaction with the hog."""
    rows = [
        [
            "hog on the worker's CPU",
            ci_text(hog),
            mult(rel["hog"]),
            paper.get("background processes", ""),
        ],
    ]
    for name, lv in TALES5_REMEDIES.items():
        alone = name.replace("hog + ", "").replace("hog, ", "") + " alone"
        rows.append(
            [
                f"{lv[0]}={lv[1]} alone",
                ci_text(_attr_term(es, lv)),
                mult(rel[alone]),
                "",
            ]
        )
        rows.append(
            [
                f"hog × {lv[0]}={lv[1]} (interaction)",
                ci_text(inter[name]),
                f"{name}: {mult(rel[name])}",
                paper.get("real-time priority" if "RT" in name else "dedicated core", ""),
            ]
        )
    return rows


@rule
def tales_fig5_attribution(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Tales Fig. 5 as an attribution: the hog's main effect on sojourn p99 (at least doubles
    it, CI excluding 0), and each remedy's cell (hog + remedy, from the model) back within
    TALES5_REMEDY of the base cell, its interaction with the hog negative."""
    stem = next(iter(data.results), None)
    doc = attribution(data, stem) if stem else {}
    es = attr_effects(doc, "sojourn", ATTR_TALES_Q)
    if "base" not in es:
        return no_data(data, "attribution.json")
    base = float(es["base"]["estimate_us"])
    hog = _attr_term(es, TALES5_HOG_LEVEL)
    cells = {"hog": _attr_cell(es, [TALES5_HOG_LEVEL])}
    inter = {}
    for name, lv in TALES5_REMEDIES.items():
        cells[name] = _attr_cell(es, [TALES5_HOG_LEVEL, lv])
        cells[name.replace("hog + ", "").replace("hog, ", "") + " alone"] = _attr_cell(es, [lv])
        inter[name] = _attr_term(es, TALES5_HOG_LEVEL, lv)
    rel = {k: ratio_of(v, base) for k, v in cells.items()}
    conds = _tales5_conds(data, doc, es, inter)
    body = (
        f"sojourn p99 ÷ base cell ({fmt_ns(base * 1e3)}), from the model: "
        + ", ".join(f"{k} {mult(v)}" for k, v in rel.items())
        + f"; hog effect {ci_text(hog)}"
    )
    paper = item.get("paper_fig5") or {}
    rows = _tales5_rows(es, hog, rel, inter, paper)
    nums = {
        "base_p99_us": base,
        "cells_vs_base": rel,
        "hog_effect": hog,
        "interactions": inter,
        "quantile": ATTR_TALES_Q,
    }
    return make_verdict(
        conds,
        body,
        nums,
        heads=["term", "effect on sojourn p99 [95 % CI]", "cell ÷ base", "paper (Section 4.1)"],
        rows=rows,
        paper=(["what", "the paper says"], [[k, v] for k, v in paper.items()]),
        figures=[
            (
                "p99_by_cell",
                "Sojourn p99 of each cell ÷ the base cell (no hog, normal priority, worker on "
                "CPU 0), from the quantile regression: the hog's effect and what each remedy "
                "leaves of it.",
                lambda o: bars(
                    o,
                    list(rel),
                    {"ours (model)": list(rel.values())},
                    "sojourn p99 ÷ base",
                    "Hog × RT priority × dedicated core",
                    hlines=[(1.0, ""), (TALES5_REMEDY, f"remedy bar {TALES5_REMEDY:g}×")],
                ),
            )
        ],
        sections=[lambda out: attribution_links(data, out)],
    )


# Tales Fig. 7: per-worker queues leave the tail "essentially unchanged from the single-core
# case": their p99 within 1.5× of their ideal, n independent M/M/1 queues at the same ρ —
# one worker's distribution (the bar tales-fig5 sets a remedy's p99 against the undisturbed
# run).
TALES7_SAME = 1.5


def _tales7_conds(data: Any, one: pd.Series, each: pd.Series) -> list[Cond]:
    """Tales Fig. 7's conditions: the shared queue's p99 below the per-worker queues' and
    below their ideal (the single-core ideal), theirs within TALES7_SAME of it."""

    def under_ideal(a, b) -> float:
        return ratio_of(b.number("ideal", "sojourn", "p99"), a.stat("sojourn", "p99"))

    def to_ideal(v) -> float:
        return v.number("ideal", "ratio", "p99")

    judge = data.judge
    return [
        Cond.judged("one shared queue < a queue per worker", below(data, one, each), True),
        Cond.judged(
            "one shared queue < the single-core ideal",
            judge.check([one, each], under_ideal, ">", 1.0, fmt=mult),
        ),
        Cond.judged(
            f"a queue per worker within {TALES7_SAME:g}× of the single-core ideal",
            judge.check([each], to_ideal, "factor", TALES7_SAME, fmt=mult),
        ),
    ]


@rule
def tales_fig7(item: dict, data: Any, _reuse: Any) -> Verdict:
    """n workers at the same load from one shared queue and from a queue each: the shared
    queue's p99 below the per-worker queues' and below their ideal (n × M/M/1, one worker's
    distribution: the single-core ideal), the per-worker p99 within TALES7_SAME of it."""
    by = by_axis(with_ideal(data), "harness.dispatch")
    shared = next((k for k in by if k == "shared"), None)
    multi = next((k for k in by if k.startswith("per-worker")), None)
    if shared is None or multi is None:
        return no_data(data, "points with harness.dispatch shared and per-worker")
    nums, rows = p99_table({"one shared queue": by[shared], "a queue per worker": by[multi]})
    one, each = nums["one shared queue"], nums["a queue per worker"]
    single_core = each["ideal_p99_ns"]
    conds = _tales7_conds(data, by[shared], by[multi])
    workers = int(by[shared].get("threads", 0) or 0)
    rho = float(by[shared].get("nominal_rho", math.nan))
    at = f" at ρ {rho:.2f}" if math.isfinite(rho) else ""
    body = (
        f"p99 with {workers} worker(s){at}: one shared queue {fmt_ns(one['p99_ns'])} "
        f"(its ideal M/M/{workers}: {fmt_ns(one['ideal_p99_ns'])}), a queue per worker "
        f"{fmt_ns(each['p99_ns'])} (the single-core ideal, {workers} × M/M/1: "
        f"{fmt_ns(single_core)})"
    )
    numbers = {
        "cases": nums,
        "workers": workers,
        "rho": rho,
        "single_core_ideal_p99_ns": single_core,
        "gap_to_multi_core_ideal": one["ratio"],
    }
    series, unit = in_unit(
        {
            "measured": [one["p99_ns"], each["p99_ns"]],
            f"ideal (M/M/{workers} | {workers} × M/M/1)": [one["ideal_p99_ns"], single_core],
        }
    )
    return make_verdict(
        conds,
        body,
        numbers,
        heads=["queues", "p99", "ideal p99", "measured ÷ ideal"],
        rows=rows,
        paper=paper_text(item, "paper_fig7"),
        figures=[
            (
                "p99_by_queues",
                f"Sojourn p99 of {workers} worker(s) at the same load from one shared queue and "
                "from a queue each (a random worker per request), measured and each one's ideal "
                "replay: M/M/n for the shared queue, n independent M/M/1 queues — one worker's "
                "distribution, the single-core ideal — for the others (Tales of the Tail Fig. 7).",
                lambda o: bars(
                    o, list(nums), series, f"sojourn p99 ({unit}, log scale)", "p99 by queues"
                ),
            ),
            (
                "ideal_ccdf",
                "Sojourn CCDF per dispatch, measured (solid) and ideal (dashed).",
                lambda o: ideal_fig_plan("ideal_ccdf", data.combined(), o),
            ),
        ],
    )
