"""The analysis (:func:`analyse`): the effects at every metric and quantile with their
cluster-bootstrap intervals (refits in worker processes), the run-to-run variance of p99, the
cells, the precision the design reached and what to change.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..results import Results, load
from .data import collect, resample, run_p99, run_table, variance_ratios
from .model import METRICS, QUANTILES, Model, RunData, qlabel, quantreg, read_design

SCHEMA = "taillab.attribution/1"


#: p99.9 is fitted when every cell holds at least this many requests (20 above its p99.9).
P999_REQUESTS = 20_000


def analyse(
    root: str | Path,
    bootstrap: int = 200,
    seed: int = 1,
    res: Results | None = None,
    procs: int | None = None,
) -> dict[str, Any]:
    """The attribution of an attribute folder: every effect with its CI (see module doc). The
    bootstrap's refits run in ``procs`` processes (None: one per usable CPU, at most 4)."""
    root = Path(root)
    design = read_design(root)
    res = res or load(root)
    model = Model(design, interactions=design["kind"] == "full")
    runs = collect(res, design, model)
    per_cell: dict[int, int] = {}
    for r in runs:
        per_cell[r.cell] = per_cell.get(r.cell, 0) + r.n
    with _one_thread():
        return _analyse(root, design, res, runs, per_cell, model, bootstrap, seed, procs)


def _one_thread():
    """One BLAS thread: the fits are many and small, and threads that spin for each of
    them made them 5× slower on a busy 2-CPU host."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # scikit-learn brings it; without it, BLAS's own threads
        import contextlib

        return contextlib.nullcontext()
    return threadpool_limits(1)


#: What the bootstrap's worker processes share (set before the fork, read in the children).
_SHARED: tuple[list[RunData], list[tuple[str, float]]] | None = None


def _refit(mult: np.ndarray) -> list[np.ndarray]:
    runs, keys = _SHARED
    return [quantreg(runs, m, q, mult) for m, q in keys]


def _refits(
    runs: list[RunData], keys: list[tuple[str, float]], mults: list[np.ndarray], procs: int | None
) -> list[list[np.ndarray]]:
    """Every resample's coefficients per (metric, quantile), in resample order: the same
    numbers whatever ``procs`` (the fits are deterministic; only who makes them changes). The
    resamples are shared among ``procs`` forked processes (None: one per CPU this process may
    use, at most 4), since the fits are CPU-bound Python and each takes one CPU."""
    global _SHARED
    if procs is None:
        procs = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
    procs = max(1, min(procs, len(mults) // 4))
    _SHARED = (runs, keys)
    try:
        if procs == 1:
            return [_refit(m) for m in mults]
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(procs) as pool:
            return pool.map(_refit, mults, chunksize=max(1, len(mults) // (4 * procs)))
    finally:
        _SHARED = None


def _analyse(
    root, design, res, runs, per_cell, model, bootstrap, seed, procs=None
) -> dict[str, Any]:
    quantiles = list(QUANTILES)
    if min(per_cell.values()) >= P999_REQUESTS:
        quantiles.append(0.999)
    ones = np.ones(len(runs), dtype=int)
    point = {(m, q): quantreg(runs, m, q, ones) for m in METRICS for q in quantiles}
    var_point = variance_ratios(runs, ones, design)
    rng = np.random.default_rng(seed)
    mults = [resample(runs, rng) for _ in range(bootstrap)]
    keys = list(point)
    draws: dict[tuple[str, float], list[np.ndarray]] = {k: [] for k in keys}
    for betas in _refits(runs, keys, mults, procs):
        for k, beta in zip(keys, betas, strict=True):
            draws[k].append(beta)
    var_draws = [variance_ratios(runs, mult, design) for mult in mults]
    n_runs = min(sum(1 for r in runs if r.cell == c) for c in per_cell)
    scale = math.sqrt(n_runs / (n_runs - 1)) if n_runs > 1 else math.nan
    effects = []
    for (m, q), beta in point.items():
        boot = np.array(draws[(m, q)]) if bootstrap else np.empty((0, len(beta)))
        base = float(beta[0])
        for t, term in enumerate(model.terms[: model.n_effects]):
            est = float(beta[t])
            lo, hi = _ci(est, boot[:, t] if len(boot) else None, scale)
            e = {
                "metric": m,
                "quantile": q,
                "label": qlabel(q),
                "kind": term["kind"],
                "term": term["name"],
                "estimate_us": est,
                "ci_low_us": lo,
                "ci_high_us": hi,
                "excludes_zero": bool(lo > 0 or hi < 0) if term["kind"] != "intercept" else None,
                "pct_of_base": 100 * est / base if base and term["kind"] != "intercept" else None,
            }
            if "f" in term:
                e["factors"] = [
                    {
                        "key": design["factors"][i]["key"],
                        "level": design["factors"][i]["levels"][lv],
                    }
                    for i, lv in term["f"]
                ]
            effects.append(e)
    variance = _variance_table(design, var_point, np.array(var_draws), scale)
    doc = {
        "schema": SCHEMA,
        "root": str(root),
        "design": {
            k: design[k]
            for k in ("kind", "resolution", "generators", "aliases", "blocks", "seed", "factors")
        },
        "quantiles": quantiles,
        "metrics": list(METRICS),
        "bootstrap": {
            "resamples": bootstrap,
            "method": "cluster bootstrap over runs, stratified by cell, percentile interval",
            "scale": scale,
            "runs_per_cell": n_runs,
        },
        "requests": {"runs": len(runs), "min_per_run": min(r.n for r in runs)},
        "effects": effects,
        "variance_p99": variance,
        "cells": _cells(res, design, runs),
    }
    doc["aliases"] = named_aliases(design)
    doc["interactions"] = [
        e
        for e in effects
        if e["kind"] == "interaction" and e["metric"] == "sojourn" and e["excludes_zero"]
    ]
    doc["what_to_change"] = _what_to_change(effects)
    doc["precision"] = _precision(effects, n_runs)
    return doc


def letter(i: int) -> str:
    """Factor ``i``'s letter in generators and alias chains, as design.json writes them (A…Z,
    then F27, …)."""
    return chr(ord("A") + i) if i < 26 else f"F{i + 1}"


def named_aliases(design: dict) -> list[list[str]]:
    """The aliased two-factor interactions of a fraction, each chain with the factors' keys
    (``["app.scale × app.noise", "app.lock_spin × harness.wait"]``): what a fraction confounds
    and so does not estimate."""
    keys = {letter(i): f["key"] for i, f in enumerate(design["factors"])}
    return [
        [" × ".join(keys.get(x, x) for x in pair.split("×")) for pair in chain]
        for chain in design.get("aliases") or []
    ]


def _precision(effects: list[dict], blocks: int) -> dict:
    """How wide the main effects' CIs on sojourn p99 are, and the blocks a design needs for
    a half-width of a given size (it shrinks as one over the root of the blocks)."""
    hw = [
        (e["ci_high_us"] - e["ci_low_us"]) / 2
        for e in effects
        if e["kind"] == "main" and e["metric"] == "sojourn" and e["quantile"] == 0.99
    ]
    hw = [h for h in hw if math.isfinite(h)]
    if not hw:
        return {}
    h = float(np.median(hw))
    return {
        "metric": "sojourn p99 main effects",
        "median_half_width_us": h,
        "blocks": blocks,
        "blocks_for_half_width_us": {
            f"{t:g}": math.ceil(blocks * (h / t) ** 2) for t in (h / 2, h / 4) if t > 0
        },
    }


def _ci(est: float, boot: np.ndarray | None, scale: float) -> tuple[float, float]:
    if boot is None or len(boot) < 2 or not math.isfinite(scale):
        return math.nan, math.nan
    dev = (boot - est) * scale
    return float(est + np.quantile(dev, 0.025)), float(est + np.quantile(dev, 0.975))


def _variance_table(design, point, draws, scale) -> list[dict]:
    out, k = [], 0
    for f in design["factors"]:
        for lv in range(1, len(f["levels"])):
            est = float(point[k])
            lo = hi = math.nan
            if len(draws) > 1 and math.isfinite(est) and est > 0:
                # On the log scale: a ratio's interval is multiplicative.
                logs = np.log(np.clip(draws[:, k], 1e-12, None))
                dev = (logs - math.log(est)) * scale
                lo = float(est * math.exp(np.quantile(dev, 0.025)))
                hi = float(est * math.exp(np.quantile(dev, 0.975)))
            out.append(
                {
                    "key": f["key"],
                    "level": f["levels"][lv],
                    "base": f["levels"][0],
                    "ratio": est,
                    "ci_low": lo,
                    "ci_high": hi,
                    "excludes_one": bool(lo > 1 or hi < 1),
                }
            )
            k += 1
    return out


def _failed(table: pd.DataFrame, check: str) -> int:
    """How many of ``table``'s runs failed the self-check ``check`` (0 where none has it)."""
    col = f"check_{check}"
    return int((~table[col].astype(bool)).sum()) if col in table else 0


def _cells(res: Results, design: dict, runs: list[RunData]) -> list[dict]:
    table = run_table(res, design)
    out = []
    for c, cid in enumerate(design["cell_ids"]):
        rs = [r for r in runs if r.cell == c]
        soj = np.concatenate([r.sorted["sojourn"] for r in rs]) if rs else np.array([])
        tr = table[table["cell"] == c]
        out.append(
            {
                "id": cid,
                "levels": {
                    f["key"]: f["levels"][lv]
                    for f, lv in zip(design["factors"], design["cells"][c], strict=True)
                },
                "runs": len(rs),
                "requests": int(len(soj)),
                "disturbed_runs": _failed(tr, "environment"),
                "saturated_runs": _failed(tr, "saturation"),
                "sojourn_p99_us": float(np.quantile(soj, 0.99)) if len(soj) else math.nan,
                "run_p99_us": [run_p99(r) for r in rs],
            }
        )
    return out


def _what_to_change(effects: list[dict]) -> list[dict]:
    """Single changes from the base configuration, ranked by how much they cut sojourn p99
    (a negative effect is a gain)."""
    rows = [
        {
            "key": e["factors"][0]["key"],
            "level": e["factors"][0]["level"],
            "p99_gain_us": -e["estimate_us"],
            "ci_low_us": -e["ci_high_us"],
            "ci_high_us": -e["ci_low_us"],
            "pct_of_base": -(e["pct_of_base"] or 0.0),
            "sure": bool(e["excludes_zero"]),
        }
        for e in effects
        if e["kind"] == "main" and e["metric"] == "sojourn" and e["quantile"] == 0.99
    ]
    return sorted(rows, key=lambda r: -r["p99_gain_us"])
