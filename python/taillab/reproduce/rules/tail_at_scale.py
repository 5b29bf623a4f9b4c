"""The rules of The Tail at Scale's items (Dean & Barroso, CACM 2013): fan-out's amplification
and hedged and tied requests.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pandas as pd

from ...hlog import Dist
from ...results import read_summary
from ...units import fmt_ns
from ..items import Data
from ..judge import HOLDS, UNRESOLVED, Estimate, compare
from ..verdict import (
    Cond,
    Verdict,
    bars,
    by_axis,
    make_verdict,
    mean_of,
    mult,
    no_data,
    pct,
    ratio_of,
    within_factor,
)
from .registry import rule

# The Tail at Scale, fan-out: the fraction of requests slower than a leaf's p99 within 3 points
# of 1 − 0.99^N (the paper's arithmetic for independent leaves; leaves that share a host wake
# through one scheduler and come out a little more alike), and the whole request's p99 within
# 10 % of the fan-out model of the same run (its arrivals, its measured service times). The
# amplification is the claim up to TAS_PRIMARY_LEAVES leaves; beyond, on a small host, many
# sleeping leaves wake together and correlate more than independent machines would.
TAS_POINTS, TAS_MODEL, TAS_PRIMARY_LEAVES = 0.03, 0.10, 10


# Hedging after the leaf's p95: p99.9 cut at least 5x (the paper: 24x) for at most 10 % more
# served copies (the paper: 2 %), the measured p99.9 within 10 % of its model.
TAS_HEDGE_CUT, TAS_HEDGE_LOAD = 5.0, 0.10


def _fanouts(data: Data, p: pd.Series) -> list[dict]:
    """The ``fanout`` sections of a point's runs (none for a point without fan-out)."""
    res = data.results.get(p.get("stem"))
    if res is None or res.runs.empty:
        return []
    runs = res.runs[res.runs["point"] == p["point"]]
    return [f for f in (read_summary(r).get("fanout") for r in runs["path"]) if f]


def _fan_value(fans: list[dict], *path: str) -> float:
    """The mean over runs of a nested number of their ``fanout`` sections (NaN if none)."""
    vals = []
    for f in fans:
        v: Any = f
        for k in path:
            v = v.get(k) if isinstance(v, dict) else None
        if isinstance(v, int | float):
            vals.append(float(v))
    return mean_of(vals)


def _pooled(data: Data, p: pd.Series, metric: str) -> Dist:
    """A point's ``metric`` over its runs, their histograms merged (empty without any)."""
    res = data.results.get(p.get("stem"))
    if res is None or res.runs.empty:
        return Dist.empty()
    return res.histogram(metric, point=p["point"])


def _interval_text(ci) -> str:
    lo, hi = ci
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "–"
    return f"{fmt_ns(lo)}–{fmt_ns(hi)}"


def _without(fan: dict, *names: str) -> float:
    """The whole request's p99.9 in a fan-out run's model with host costs taken out: the first
    of ``names`` its ``model_without`` lists (NaN for a run without them)."""
    parts = {w.get("without"): w for w in fan.get("model_without") or [] if isinstance(w, dict)}
    for n in names:
        v = (parts.get(n) or {}).get("e2e", {}).get("p999")
        if isinstance(v, int | float):
            return float(v)
    return math.nan


def _tas_fanout_case(data: Data, p: pd.Series, fs: list, n: int) -> tuple[dict, list, list[Cond]]:
    """One leaf count's numbers, its table row and its two conditions (the fraction above the
    leaf's p99 against 1 − 0.99^N, the p99 against the model), each over the point's runs."""
    above = _fan_value(fs, "measured", "above_leaf_p99")
    model = _fan_value(fs, "model", "above_leaf_p99")
    indep = 1.0 - 0.99**n
    ratio = _fan_value(fs, "ratio", "p99")
    v = {
        "above_leaf_p99": above,
        "model_above_leaf_p99": model,
        "independent": indep,
        "p99_ns": _fan_value(fs, "measured", "e2e", "p99"),
        "model_p99_ns": _fan_value(fs, "model", "e2e", "p99"),
        "ratio_p99": ratio,
    }
    row = [
        str(n),
        pct(above),
        pct(model),
        pct(indep),
        fmt_ns(v["p99_ns"]),
        fmt_ns(v["model_p99_ns"]),
        mult(ratio),
    ]
    judge = data.judge
    close = judge.check(
        [p],
        lambda v: v.number("fanout", "measured", "above_leaf_p99"),
        "within",
        (indep - TAS_POINTS, indep + TAS_POINTS),
        fmt=pct,
    )
    model = judge.check(
        [p], lambda v: v.number("fanout", "ratio", "p99"), "factor", 1 + TAS_MODEL, fmt=mult
    )
    conds = [
        Cond.judged(
            f"N = {n}: above the leaf p99 within {TAS_POINTS * 100:g} points of 1 − 0.99^N",
            close,
            n <= TAS_PRIMARY_LEAVES,
        ),
        Cond.judged(f"N = {n}: p99 within {TAS_MODEL * 100:g} % of the model", model),
    ]
    return v, row, conds


@rule
def tail_at_scale_fanout(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Per leaf count: the fraction above the leaf's p99 against 1 − 0.99^N, and the whole
    request's p99 against the fan-out model of the same run."""
    by = by_axis(data.points, "case")
    fans = {name: _fanouts(data, p) for name, p in by.items()}
    fans = {k: v for k, v in fans.items() if v}
    if not fans:
        return no_data(data, "fan-out points over [[case]]")
    nums, rows, conds = {}, [], []
    for name, fs in sorted(fans.items(), key=lambda kv: _fan_value(kv[1], "leaves")):
        n = int(_fan_value(fs, "leaves"))
        nums[str(n)], row, cs = _tas_fanout_case(data, by[name], fs, n)
        rows.append(row)
        conds += cs
    paper = item.get("paper_above_leaf_p99") or {}
    body = "requests slower than the leaves p99: " + ", ".join(
        f"N = {n} {pct(v['above_leaf_p99'])} (1 − 0.99^N {pct(v['independent'])})"
        for n, v in nums.items()
    )
    cats = list(nums)
    return make_verdict(
        conds,
        body,
        {"leaves": nums},
        heads=[
            "leaves",
            "above the leaf p99",
            "model",
            "1 − 0.99^N",
            "request p99",
            "model p99",
            "÷ model",
        ],
        rows=rows,
        paper=(
            ["leaves", "requests slower than a leaf's p99"],
            [[str(k), pct(float(v))] for k, v in paper.items()],
        )
        if paper
        else None,
        figures=[
            (
                "amplification",
                "The fraction of whole requests slower than a leaf's own p99, per number of "
                "leaves: measured, the fan-out model of the same run, and 1 − 0.99^N "
                "(independent leaves).",
                lambda o: bars(
                    o,
                    cats,
                    {
                        "measured": [nums[c]["above_leaf_p99"] for c in cats],
                        "model": [nums[c]["model_above_leaf_p99"] for c in cats],
                        "1 − 0.99^N": [nums[c]["independent"] for c in cats],
                    },
                    "fraction of requests",
                    "Fan-out amplification",
                    log=False,
                ),
            )
        ],
    )


_TAS_HEDGING_HEADS = [
    "copies",
    "p99",
    "p99.9",
    "p99.9 95 % interval",
    "model p99.9",
    "p99.9 from release",
    "model p99.9 without host costs",
    "served per sub-request",
    "cancelled",
]


def _tas_hedging_case(data: Data, pts: list, fs: list, name: str) -> tuple[dict, list]:
    """One case's numbers (its p99, p99.9 with its interval, its model's, from the release,
    without the host's costs, copies served and cancelled) and its table row."""
    # The whole requests' p99 and p99.9 from the point's runs' histograms merged (one run:
    # its own), with the p99.9's 95 % interval: how far its runs can tell it.
    e2e = _pooled(data, pts, "sojourn")
    ci = e2e.quantile_ci(0.999) if e2e.total else (math.nan, math.nan)
    v = {
        "p99_ns": e2e.quantile(0.99) if e2e.total else _fan_value(fs, "measured", "e2e", "p99"),
        "p999_ns": e2e.quantile(0.999) if e2e.total else _fan_value(fs, "measured", "e2e", "p999"),
        "p999_ci_ns": list(ci),
        "requests": e2e.total or None,
        "runs": len(fs),
        "model_p999_ns": _fan_value(fs, "model", "e2e", "p999"),
        "released_p999_ns": _fan_value(fs, "measured", "e2e_released", "p999"),
        "model_host_free_p999_ns": mean_of([_without(f, "all", "send lag") for f in fs]),
        "model_without_send_lag_p999_ns": mean_of([_without(f, "send lag") for f in fs]),
        "served_per_sub": _fan_value(fs, "measured", "served_per_sub"),
        "cancelled_per_sub": _fan_value(fs, "measured", "cancelled_per_sub"),
    }
    return v, (
        [
            name,
            fmt_ns(v["p99_ns"]),
            fmt_ns(v["p999_ns"]),
            _interval_text(ci),
            fmt_ns(v["model_p999_ns"]),
            fmt_ns(v["released_p999_ns"]),
            fmt_ns(v["model_host_free_p999_ns"]),
            f"{v['served_per_sub']:.3f}",
            f"{v['cancelled_per_sub']:.3f}",
        ]
    )


def _p999(v) -> float:
    """The whole request's p99.9 over a view's runs: their histograms added, else the mean of
    their fan-out sections' own."""
    q = v.pooled("sojourn", "p999")
    return q if math.isfinite(q) else v.number("fanout", "measured", "e2e", "p999")


def _released(v) -> float:
    return v.number("fanout", "measured", "e2e_released", "p999")


def _tas_hedging_conds(data: Data, by: dict, cut_released: float, model: Cond) -> list[Cond]:
    """The hedging item's conditions, each over its points' runs: the cut (and from the
    release, where recorded), the load the copies add, the model (``model``), the tied copies
    cancelled."""
    judge, none, hedged, tied = data.judge, *(by.get(k) for k in ("none", "hedged", "tied"))

    def check(points, fn, op, bound, fmt):
        if any(p is None for p in points):
            return compare(Estimate(math.nan), op, bound)
        return judge.check(points, fn, op, bound, fmt=fmt)

    def cut(fn):
        return check([none, hedged], lambda a, b: ratio_of(fn(a), fn(b)), ">=", TAS_HEDGE_CUT, mult)

    def served(v) -> float:
        return v.number("fanout", "measured", "served_per_sub") - 1.0

    def cancelled(v) -> float:
        return v.number("fanout", "measured", "cancelled_per_sub")

    release = f"from each request's release (the harness's send lag left out) ≥ {TAS_HEDGE_CUT:g}×"
    return [
        Cond.judged(f"hedging cuts p99.9 ≥ {TAS_HEDGE_CUT:g}×", cut(_p999), True),
        # Runs before the release's latency was recorded do not have it: no condition then.
        *([Cond.judged(release, cut(_released))] if math.isfinite(cut_released) else []),
        Cond.judged(
            f"for ≤ {TAS_HEDGE_LOAD * 100:g} % more served copies",
            check([hedged], served, "<=", TAS_HEDGE_LOAD, pct),
            True,
        ),
        model,
        Cond.judged("tied copies are cancelled", check([tied], cancelled, ">", 0.0, None)),
    ]


def _tas_model_cond(data: Data, hedged: pd.Series | None, nums: dict) -> Cond:
    """The hedged p99.9 against its model: within TAS_MODEL, or the model inside the measured
    p99.9's 95 % interval (a run's p99.9 rests on few requests: the model is not called wrong
    where the measured interval holds it). Over repeated runs: the measured ÷ model's interval
    (order statistics and the runs' spread) holds 1 or lies within TAS_MODEL: holds; wholly
    outside TAS_MODEL: fails."""
    text = (
        f"hedged p99.9 within {TAS_MODEL * 100:g} % of its model, or its model inside the "
        "measured p99.9's 95 % interval"
    )
    h = nums.get("hedged", {})
    mp = h.get("model_p999_ns", math.nan)
    if hedged is None or not math.isfinite(mp) or not data.judge.judged([hedged]):
        # One run: the point's p99.9 and its order-statistic interval, as before.
        lo, hi = h.get("p999_ci_ns") or (math.nan, math.nan)
        inside = bool(lo <= mp <= hi) if all(map(math.isfinite, (lo, hi, mp))) else False
        model_ok = within_factor(ratio_of(h.get("p999_ns", math.nan), mp), 1 + TAS_MODEL)
        return Cond(text, None if model_ok is None else bool(model_ok or inside))
    est = data.judge.quantile(hedged, "sojourn", "p999").scaled(1 / mp)
    check = compare(est, "factor", 1 + TAS_MODEL, fmt=mult)
    if check.outcome == UNRESOLVED and est.lo <= 1 <= est.hi:
        check = replace(check, outcome=HOLDS, more_runs=None)
    return Cond.judged(text, check)


def _tas_hedging_figure(nums: dict) -> tuple:
    """The p99.9 bars per way of sending copies, measured with its interval and modelled."""
    cats = list(nums)
    return (
        "hedging",
        "The whole request's p99.9 per way of sending copies, measured (whiskers: its "
        "95 % interval) and modelled (the load the copies add is in the table).",
        lambda o: bars(
            o,
            cats,
            {
                "measured": [nums[c]["p999_ns"] / 1e6 for c in cats],
                "model": [nums[c]["model_p999_ns"] / 1e6 for c in cats],
            },
            "p99.9 (ms, log scale)",
            "Hedged and tied requests",
            errs={"measured": [tuple(x / 1e6 for x in nums[c]["p999_ci_ns"]) for c in cats]},
        ),
    )


@rule
def tail_at_scale_hedging(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """No copies, hedged after the leaf's p95, tied: p99.9, its model, the load copies add."""
    by = by_axis(data.points, "case")
    fans = {name: _fanouts(data, p) for name, p in by.items()}
    fans = {k: v for k, v in fans.items() if v}
    if not fans:
        return no_data(data, "fan-out points over [[case]]")
    nums, rows = {}, []
    for name, fs in fans.items():
        nums[name], row = _tas_hedging_case(data, by[name], fs, name)
        rows.append(row)
    none, hedged, tied = (nums.get(k, {}) for k in ("none", "hedged", "tied"))
    cut = ratio_of(none.get("p999_ns", math.nan), hedged.get("p999_ns", math.nan))
    # The same cut without the harness's own lateness: each request from its release.
    cut_released = ratio_of(
        none.get("released_p999_ns", math.nan), hedged.get("released_p999_ns", math.nan)
    )
    extra = hedged.get("served_per_sub", math.nan) - 1.0
    lo, hi = hedged.get("p999_ci_ns") or (math.nan, math.nan)
    mp = hedged.get("model_p999_ns", math.nan)
    cancelled = tied.get("cancelled_per_sub", math.nan)
    # Can this host's client test the cut from the arrival? The run's model with its own
    # release lag (the dispatcher's lateness, recorded as send lag) says what cut this client
    # allows; the model without it what the leaves and copies allow. Where only the lag keeps
    # the cut under the claim, the run measured its client, not the hedging.
    model_cut = ratio_of(none.get("model_p999_ns", math.nan), hedged.get("model_p999_ns", math.nan))
    free_cut = ratio_of(
        none.get("model_without_send_lag_p999_ns", math.nan),
        hedged.get("model_without_send_lag_p999_ns", math.nan),
    )
    needs = None
    if model_cut < TAS_HEDGE_CUT <= free_cut:
        needs = (
            "a client that releases each request on time: this host's release lag alone holds "
            f"the run's model to a {mult(model_cut)} cut ({mult(free_cut)} without it)"
        )
    model = _tas_model_cond(data, by.get("hedged"), nums)
    conds = _tas_hedging_conds(data, by, cut_released, model)
    body = (
        f"hedged after the leaf's p95: p99.9 {fmt_ns(hedged.get('p999_ns', math.nan))} "
        f"from {fmt_ns(none.get('p999_ns', math.nan))} ({mult(cut)} shorter) for "
        f"{pct(extra)} more served copies ({mult(cut_released)} from each request's release); "
        f"its model {fmt_ns(mp)} (the measured p99.9's 95 % interval {_interval_text((lo, hi))}); "
        f"tied: {cancelled:.3f} copies cancelled per sub-request"
    )
    return make_verdict(
        conds,
        body,
        {
            "cases": nums,
            "cut_p999": cut,
            "cut_p999_released": cut_released,
            "extra_load": extra,
            "model_cut_p999": model_cut,
            "model_cut_p999_without_send_lag": free_cut,
        },
        needs=needs,
        heads=_TAS_HEDGING_HEADS,
        rows=rows,
        paper=(
            ["", "the paper"],
            [[k, str(v)] for k, v in (item.get("paper_hedging") or {}).items()],
        ),
        figures=[_tas_hedging_figure(nums)],
    )
