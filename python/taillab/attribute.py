"""Attribution of the tail to its causes: ``taillab attribute``'s analysis and page.

The runs of a designed experiment (``design.json``: factors, cells, blocks) are read with
every request (``requests.csv``, through :mod:`taillab.results`). For each latency (sojourn,
service, queue) and quantile τ (p50, p95, p99, and p99.9 when every cell holds at least
20 000 requests), the requests' latencies are regressed on the factors' levels by quantile
regression, solved exactly as the linear program it is (HiGHS, through scipy):

* treatment coding: the first level of every factor is the base, and a level's coefficient
  is the change of the τ-quantile when that factor alone moves from its base level to it,
  the others at their base levels;
* two-factor interactions (a full factorial only: a fraction aliases them with each other);
* blocks as effect-coded columns, so a drift of the host between blocks is taken out and the
  intercept is the base cell averaged over blocks.

**Exact compression.** Every request of one run has the same regressors, so a stretch of a
run's sorted requests that lies wholly below (above) the fitted quantile enters the
check-function objective only through its count and its sum: it is replaced by one row at
its mean, weighted by its count. Each run keeps its requests near the fitted quantile and
cuts the rest into about 200 stretches. That objective equals the exact one wherever no
run's fit lies inside a stretch and is below it elsewhere (the check function is convex),
so a fit whose every run lies outside its stretches is the exact fit of all requests; where
one does not, that run keeps the requests around it too and the fit is redone (the tests
check the result against the program over every request: the same objective; where a
sparse tail leaves the optimum flat between two order statistics, the coefficients may sit
anywhere on that flat). An iterative solver (statsmodels' ``QuantReg``, used before) and a
coarser compression crawled on the long runs of a real attribution: the full run of an
attribution item spent more than half an hour in its bootstrap.

**Confidence intervals** come from a cluster bootstrap over runs: requests of one run share
its arrivals and its host's moment, so they are not independent; each resample draws every
cell's runs with replacement (stratified by cell, so every cell stays in the model) and
refits. With n runs per cell the bootstrap's spread is short by √((n−1)/n) (for n = 3, 18 %),
so the deviations are scaled by √(n/(n−1)) before the 2.5 and 97.5 % points are taken. Cells
of one block share their arrival seed (common random numbers): the bootstrap ignores that
pairing, which makes its intervals wider, not narrower.

**Run-to-run variance of p99**: each run's own sojourn p99, its variance across a cell's
runs, and per factor level the ratio of the geometric mean of those variances at that level
to the base level's (a main effect on log variance), with the same bootstrap.

Output: ``attribution.json`` (``taillab.attribution/1``), a text table, and a page
(:func:`write_page`) with the effects plot, interaction plots for the pairs that matter,
and the sojourn CCDF of the best and worst cells against their ideals.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import figures as F
from . import html
from .errors import SchemaError, TaillabError
from .html import esc
from .results import Results, load
from .units import fmt_ns

SCHEMA = "taillab.attribution/1"
DESIGN_SCHEMA = "taillab.design/1"
METRICS = ("sojourn", "service", "queue")
QUANTILES = (0.5, 0.95, 0.99)
#: p99.9 is fitted when every cell holds at least this many requests (20 above its p99.9).
P999_REQUESTS = 20_000
#: A run's retries of the compressed fit; after the last it keeps every request.
MAX_RETRIES = 5
#: A run's requests outside its kept ranges are cut into about this many stretches of equal
#: count, one row each: the compressed objective is then close to the exact one everywhere,
#: so the first fit lands near the optimum and one or two retries make it exact.
STRETCHES = 200
#: µs: how far past a kept range's ends a fit may lie and still count as in it (rounding;
#: the latencies' resolution is 1 ns).
_EPS = 1e-4
_LABEL = {0.5: "p50", 0.95: "p95", 0.99: "p99", 0.999: "p99.9"}


def qlabel(q: float) -> str:
    """A quantile's label (0.99 → p99)."""
    return _LABEL.get(q, f"p{q * 100:g}")


def read_design(root: Path) -> dict[str, Any]:
    """``design.json`` of an attribution, checked."""
    path = Path(root) / "design.json"
    if not path.is_file():
        raise TaillabError(f"{root} has no design.json: it is not a taillab attribute folder")
    d = json.loads(path.read_text())
    if d.get("schema") != DESIGN_SCHEMA:
        raise SchemaError(f"{path}: schema {d.get('schema')!r}, expected {DESIGN_SCHEMA!r}")
    if len(d.get("cell_ids", [])) != len(d.get("cells", [])):
        raise SchemaError(f"{path}: cell_ids and cells differ in length")
    return d


# ---------------------------------------------------------------------------- model


class Model:
    """The regressors of a design: term names and each (cell, block)'s row."""

    def __init__(self, design: dict, interactions: bool):
        self.factors = design["factors"]
        self.blocks = int(design["blocks"])
        self.terms: list[dict] = [{"kind": "intercept", "name": "base"}]
        for i, f in enumerate(self.factors):
            for lv in range(1, len(f["levels"])):
                self.terms.append(
                    {"kind": "main", "name": f"{f['key']}={f['levels'][lv]}", "f": [(i, lv)]}
                )
        if interactions:
            for i, fi in enumerate(self.factors):
                for j in range(i + 1, len(self.factors)):
                    fj = self.factors[j]
                    for a in range(1, len(fi["levels"])):
                        for b in range(1, len(fj["levels"])):
                            self.terms.append(
                                {
                                    "kind": "interaction",
                                    "name": f"{fi['key']}={fi['levels'][a]} × "
                                    f"{fj['key']}={fj['levels'][b]}",
                                    "f": [(i, a), (j, b)],
                                }
                            )
        self.n_effects = len(self.terms)
        for b in range(1, self.blocks):
            self.terms.append({"kind": "block", "name": f"block {b + 1}"})

    def row(self, cell: list[int], block: int) -> np.ndarray:
        x = np.zeros(len(self.terms))
        x[0] = 1.0
        for t, term in enumerate(self.terms[: self.n_effects]):
            if "f" in term and all(cell[i] == lv for i, lv in term["f"]):
                x[t] = 1.0
        for b in range(1, self.blocks):
            # Effect coding: the blocks' columns sum to zero, the intercept is their mean.
            x[self.n_effects + b - 1] = 1.0 if block == b else (-1.0 if block == 0 else 0.0)
        return x


class RunData:
    """One run's requests: its cell, block, regressors and sorted latencies (µs)."""

    def __init__(self, cell: int, block: int, x: np.ndarray, values: dict[str, np.ndarray]):
        self.cell, self.block, self.x = cell, block, x
        self.sorted = {m: np.sort(v) for m, v in values.items()}
        self.n = len(next(iter(values.values()))) if values else 0
        soj = self.sorted.get("sojourn")
        #: The run's own sojourn p99 (µs).
        self.p99 = float(np.quantile(soj, 0.99)) if soj is not None and len(soj) else math.nan


def _kept(y: np.ndarray, q: float, levels: list[float], retries: int) -> list[tuple[int, int]]:
    """The index ranges [a, b) of a run's sorted requests ``y`` that its rows keep, in order:
    around each of its ``levels`` (q, and every level where an earlier fit put the run), two
    standard errors of a q-quantile's level (at least 25 requests) each side, each range grown
    to whole runs of equal values (so a stretch never shares a value with a kept range) and
    overlapping ranges merged. Every request once the run has been retried MAX_RETRIES
    times."""
    n = len(y)
    if retries >= MAX_RETRIES:
        return [(0, n)]
    h = max(2 * math.sqrt(q * (1 - q) / n), 25 / n)
    out: list[tuple[int, int]] = []
    for lv in sorted(levels):
        a = min(n - 1, max(0, math.floor((lv - h) * n)))
        b = max(1, min(n, math.ceil((lv + h) * n)))
        a = int(np.searchsorted(y, y[a], "left"))
        b = int(np.searchsorted(y, y[b - 1], "right"))
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        elif b > a:
            out.append((a, b))
    return out


def _stretches(y: np.ndarray, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted requests ``y`` cut into stretches of ``chunk`` (the last shorter), each as one
    row at its mean weighted by its count. For a fit below a stretch (every residual positive)
    or above it (every one negative) the check function sums to the same as over the
    stretch's requests, exactly; for a fit inside it, to less (the check function is
    convex)."""
    starts = np.arange(0, len(y), chunk)
    counts = np.diff(np.append(starts, len(y))).astype(float)
    return np.add.reduceat(y, starts) / counts, counts


def _compressed(
    runs: list[RunData],
    metric: str,
    q: float,
    mult: np.ndarray,
    levels: list[list[float]],
    retries: list[int],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[list[tuple[float, float]]]]:
    """Rows (y, weight, x) of every run with multiplicity > 0: the distinct values of the
    requests it keeps (:func:`_kept`), weighted by their counts, and the requests between
    those ranges as :func:`_stretches`' rows (about STRETCHES a run). The compressed objective
    is then the exact one wherever no run's fit lies inside a stretch, and below it elsewhere;
    so a minimum of it whose fits all lie outside the stretches is a minimum of the exact one
    too. Also per run the closed ranges its fit must lie in for that: each kept range out to
    the nearest request on either side that a stretch holds."""
    ys, ws, xs, limits = [], [], [], []
    for r, m, lv, tries in zip(runs, mult, levels, retries, strict=True):
        y = r.sorted[metric]
        n = len(y)
        if m == 0 or n == 0:
            limits.append([(-math.inf, math.inf)])
            continue
        parts_y, parts_w, allowed = [], [], []
        edge, chunk = 0, max(1, -(-n // STRETCHES))
        for a, b in _kept(y, q, lv, tries) + [(n, n)]:
            if a > edge:
                sy, sw = _stretches(y[edge:a], chunk)
                parts_y.append(sy)
                parts_w.append(m * sw)
            if b > a:
                vals, counts = np.unique(y[a:b], return_counts=True)
                parts_y.append(vals)
                parts_w.append(m * counts.astype(float))
                allowed.append((y[a - 1] if a > 0 else -math.inf, y[b] if b < n else math.inf))
            edge = b
        yy, ww = np.concatenate(parts_y), np.concatenate(parts_w)
        ys.append(yy)
        ws.append(ww)
        xs.append(np.repeat(r.x[None, :], len(yy), axis=0))
        limits.append(allowed)
    return np.concatenate(ys), np.concatenate(ws), np.vstack(xs), limits


def _lp(y: np.ndarray, w: np.ndarray, x: np.ndarray, q: float) -> np.ndarray:
    """The weighted quantile regression min Σ w·ρ_q(y − xβ), solved exactly as the dual of
    its linear program (HiGHS through scipy): maximise y·d subject to xᵀd = 0 and
    −(1 − q)·w ≤ d ≤ q·w, one variable per row and one constraint per coefficient. β is the
    negated marginal of those constraints: a vertex of the primal's optimal set."""
    from scipy import optimize

    bounds = np.column_stack([-(1.0 - q) * w, q * w])
    sol = optimize.linprog(
        -y, A_eq=x.T, b_eq=np.zeros(x.shape[1]), bounds=bounds, method="highs-ds"
    )
    if sol.status != 0:
        raise TaillabError(f"quantile regression at q={q}: the LP solver failed: {sol.message}")
    return -np.asarray(sol.eqlin.marginals, dtype=float)


def quantreg(
    runs: list[RunData], metric: str, q: float, mult: np.ndarray, compress: bool = True
) -> np.ndarray:
    """The quantile-regression coefficients of ``metric`` at ``q`` over ``runs`` (each
    counted ``mult`` times), exactly (:func:`_lp`) on the compressed rows (``compress=False``:
    on every request). A run whose fit fell in one of its stretches keeps the requests around
    that fit too, and the fit is redone (the compressed objective is below the exact one, so
    its optimum finds where the exact one's lies: one or two retries on real attributions).
    Each retry adds to at least one run and a run retried ``MAX_RETRIES`` times keeps every
    request, so the retries end. (Widening every run's window at once, around stretches
    globbed to their extremes, grew a real attribution's program to every request within
    four tries, minutes a fit.)"""
    levels = [[q] for _ in runs]
    retries = [0 if compress else MAX_RETRIES] * len(runs)
    while True:
        y, w, x, limits = _compressed(runs, metric, q, mult, levels, retries)
        beta = _lp(y, w, x, q)
        fitted = [float(r.x @ beta) for r in runs]
        # Exact when every used run's fit lies in a range it kept (to a tenth of a
        # nanosecond, the latencies' resolution being one).
        outside = [
            i
            for i, (f, allowed, m) in enumerate(zip(fitted, limits, mult, strict=True))
            if m > 0 and not any(lo - _EPS <= f <= hi + _EPS for lo, hi in allowed)
        ]
        if not outside:
            return beta
        for i in outside:
            ys = runs[i].sorted[metric]
            levels[i].append(float(np.searchsorted(ys, fitted[i]) / len(ys)))
            retries[i] += 1


# ---------------------------------------------------------------------------- data


def _run_table(res: Results, design: dict) -> pd.DataFrame:
    ids = {pid: i for i, pid in enumerate(design["cell_ids"])}
    runs = res.runs.copy()
    if runs.empty:
        raise TaillabError(f"{res.root} holds no finished run yet")
    runs["cell"] = runs["point"].map(ids)
    runs = runs[runs["cell"].notna()].copy()
    runs["cell"] = runs["cell"].astype(int)
    runs["block"] = runs["run"].astype(int)
    return runs


def collect(res: Results, design: dict, model: Model) -> list[RunData]:
    """Every finished run's requests (measured phase), as :class:`RunData`."""
    runs = _run_table(res, design)
    req = res.requests
    if req.empty:
        raise TaillabError(
            f"{res.root}: no run kept its requests (record.save_requests): the regression "
            "needs every request"
        )
    if "measured" in req:
        req = req[req["measured"] == 1]
    groups = {k: g for k, g in req.groupby(["point", "run"], sort=False)}
    out = []
    for _, r in runs.iterrows():
        g = groups.get((r["point"], r["run"]))
        if g is None or g.empty:
            continue
        vals = {m: g[m].to_numpy(dtype=float) / 1e3 for m in METRICS}
        cell = design["cells"][int(r["cell"])]
        out.append(RunData(int(r["cell"]), int(r["block"]), model.row(cell, int(r["block"])), vals))
    missing = sorted(set(range(len(design["cells"]))) - {r.cell for r in out})
    if missing:
        names = ", ".join(design["cell_ids"][i] for i in missing[:3])
        raise TaillabError(
            f"{res.root}: {len(missing)} cell(s) have no finished run with requests ({names}"
            f"{', …' if len(missing) > 3 else ''}): finish the runs with taillab attribute --resume"
        )
    return out


def _resample(runs: list[RunData], rng: np.random.Generator) -> np.ndarray:
    """Multiplicities of one stratified cluster-bootstrap draw: each cell's runs drawn with
    replacement."""
    mult = np.zeros(len(runs), dtype=int)
    by_cell: dict[int, list[int]] = {}
    for i, r in enumerate(runs):
        by_cell.setdefault(r.cell, []).append(i)
    for idx in by_cell.values():
        for j in rng.choice(idx, size=len(idx), replace=True):
            mult[j] += 1
    return mult


def _run_p99(r: RunData) -> float:
    return r.p99


def _variance_ratios(runs: list[RunData], mult: np.ndarray, design: dict) -> np.ndarray:
    """Per factor level (non-base): geometric mean over cells of the p99 variance across a
    cell's runs at that level ÷ at the base level."""
    cells: dict[int, list[float]] = {}
    for r, m in zip(runs, mult, strict=True):
        cells.setdefault(r.cell, []).extend([_run_p99(r)] * int(m))
    p99 = np.nanmean([v for vs in cells.values() for v in vs]) if cells else 1.0
    floor = (1e-3 * p99) ** 2
    logv = {
        c: math.log(max(np.var(v, ddof=1) if len(v) > 1 else 0.0, floor)) for c, v in cells.items()
    }
    out = []
    for i, f in enumerate(design["factors"]):
        base = [logv[c] for c in logv if design["cells"][c][i] == 0]
        for lv in range(1, len(f["levels"])):
            at = [logv[c] for c in logv if design["cells"][c][i] == lv]
            out.append(math.exp(np.mean(at) - np.mean(base)) if at and base else math.nan)
    return np.array(out)


# ---------------------------------------------------------------------------- analysis


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
    var_point = _variance_ratios(runs, ones, design)
    rng = np.random.default_rng(seed)
    mults = [_resample(runs, rng) for _ in range(bootstrap)]
    keys = list(point)
    draws: dict[tuple[str, float], list[np.ndarray]] = {k: [] for k in keys}
    for betas in _refits(runs, keys, mults, procs):
        for k, beta in zip(keys, betas, strict=True):
            draws[k].append(beta)
    var_draws = [_variance_ratios(runs, mult, design) for mult in mults]
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
    table = _run_table(res, design)
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
                "run_p99_us": [_run_p99(r) for r in rs],
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


# ---------------------------------------------------------------------------- text


def _us(v: float) -> str:
    return fmt_ns(v * 1e3) if math.isfinite(v) else "–"


def _signed(v: float) -> str:
    return ("+" if v >= 0 else "−") + _us(abs(v))


def text_table(doc: dict) -> str:
    """The effects on sojourn at every quantile, the interactions that matter and what to
    change, as plain text."""
    lines = []
    for q in doc["quantiles"]:
        es = [e for e in doc["effects"] if e["metric"] == "sojourn" and e["quantile"] == q]
        base = next(e for e in es if e["kind"] == "intercept")
        lines.append(f"sojourn {qlabel(q)}: base cell {_us(base['estimate_us'])}")
        lines.append(f"  {'term':<52} {'effect':>10} {'% base':>8}  {'95 % CI':<24} excl. 0")
        for e in es:
            if e["kind"] == "intercept":
                continue
            ci = f"[{_signed(e['ci_low_us'])}, {_signed(e['ci_high_us'])}]"
            pct = f"{e['pct_of_base']:+.1f}%" if e["pct_of_base"] is not None else "–"
            lines.append(
                f"  {e['term'][:52]:<52} {_signed(e['estimate_us']):>10} {pct:>8}  {ci:<24} "
                f"{'yes' if e['excludes_zero'] else 'no'}"
            )
    sat = [c for c in doc["cells"] if c.get("saturated_runs")]
    if sat:
        lines.append(
            f"saturated: {sum(c['saturated_runs'] for c in sat)} run(s) in {len(sat)} cell(s) "
            f"({', '.join(c['id'] for c in sat[:3])}{', …' if len(sat) > 3 else ''}) had a queue "
            "that grew through the run: their quantiles grow with the run's length, not only "
            "with the factors, and they make the fits slow; lower the load"
        )
    inter = doc["interactions"]
    lines.append(
        "interactions that matter (sojourn, CI excludes 0): "
        + (
            "; ".join(f"{e['term']} at {e['label']} {_signed(e['estimate_us'])}" for e in inter)
            or "none"
        )
    )
    if doc["design"]["aliases"]:
        lines.append(
            "aliased two-factor interactions (not estimated): "
            + "; ".join(
                f"{' = '.join(c)} ({' = '.join(n)})"
                for c, n in zip(doc["design"]["aliases"], named_aliases(doc["design"]), strict=True)
            )
        )
    lines.append("what to change, by sojourn p99 gain from the base configuration:")
    for i, w in enumerate(doc["what_to_change"], 1):
        sure = "" if w["sure"] else " (CI includes 0)"
        lines.append(
            f"  {i}. {w['key']}={w['level']}: {_signed(-w['p99_gain_us'])} "
            f"({-w['pct_of_base']:+.1f}%) "
            f"[{_signed(-w['ci_high_us'])}, {_signed(-w['ci_low_us'])}]{sure}"
        )
    p = doc.get("precision") or {}
    if p:
        need = ", ".join(
            f"±{_us(float(t))} in about {n} blocks"
            for t, n in p["blocks_for_half_width_us"].items()
        )
        lines.append(
            f"precision: the main effects on sojourn p99 are ±{_us(p['median_half_width_us'])} "
            f"(median half-width) with {p['blocks']} blocks; {need}"
        )
    for v in doc["variance_p99"]:
        lines.append(
            f"  run-to-run variance of p99, {v['key']}={v['level']} vs {v['base']}: "
            f"×{v['ratio']:.2g} [{v['ci_low']:.2g}, {v['ci_high']:.2g}]"
        )
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- figures


def effects_plot(doc: dict, out=None, metric: str = "sojourn"):
    """Each term's effect with its 95 % CI, one panel per quantile (Treadmill's effects plot)."""
    qs = doc["quantiles"]
    terms = [
        e["term"]
        for e in doc["effects"]
        if e["metric"] == metric and e["quantile"] == qs[0] and e["kind"] != "intercept"
    ]
    if not terms:
        raise F.FigureError("no effect to draw")
    fig, axes = F._new(w=3.2 * len(qs) + 2.5, h=0.35 * len(terms) + 1.6, ncols=len(qs), sharey=True)
    for k, q in enumerate(qs):
        ax = axes[0, k]
        es = {
            e["term"]: e
            for e in doc["effects"]
            if e["metric"] == metric and e["quantile"] == q and e["kind"] != "intercept"
        }
        for y, t in enumerate(terms):
            e = es[t]
            color = "C3" if e["excludes_zero"] else "C0"
            lo, hi = e["ci_low_us"], e["ci_high_us"]
            if math.isfinite(lo) and math.isfinite(hi):
                ax.plot([lo, hi], [y, y], color=color, lw=2)
            ax.plot([e["estimate_us"]], [y], "o", color=color)
        ax.axvline(0, color="#888", lw=0.8)
        ax.set_title(f"{metric} {qlabel(q)}", fontsize="medium")
        ax.set_xlabel("effect (µs)")
        ax.grid(True, axis="x", alpha=0.3)
    axes[0, 0].set_yticks(range(len(terms)))
    axes[0, 0].set_yticklabels(
        [t if len(t) < 48 else t[:45] + "…" for t in terms], fontsize="small"
    )
    axes[0, 0].invert_yaxis()
    return F.save(fig, out)


def interaction_plot(doc: dict, a: dict, b: dict, out=None):
    """Measured sojourn p99 of each level of factor ``a`` (x) with one line per level of
    ``b``, pooled over the cells and runs at those levels: parallel lines, no interaction."""
    cells = doc["cells"]
    fig, ax = F._new(w=5.2, h=3.8)
    ax = ax[0, 0]
    for j, lb in enumerate(b["levels"]):
        ys = []
        for la in a["levels"]:
            v = [
                c["sojourn_p99_us"]
                for c in cells
                if c["levels"][a["key"]] == la and c["levels"][b["key"]] == lb
            ]
            ys.append(float(np.mean(v)) if v else math.nan)
        ax.plot(range(len(a["levels"])), ys, "o-", color=f"C{j}", label=f"{b['key']}={lb}")
    ax.set_xticks(range(len(a["levels"])))
    ax.set_xticklabels(a["levels"], fontsize="small")
    ax.set_xlabel(a["key"])
    ax.set_ylabel("sojourn p99 (µs), mean over cells")
    ax.legend(fontsize="x-small")
    ax.grid(True, alpha=0.3)
    return F.save(fig, out)


def cells_ccdf(res: Results, doc: dict, out=None):
    """Sojourn CCDF of the best and the worst cell (by measured p99), each with its ideal
    (the same runs' arrivals and service times through an exact queue) dashed."""
    from .hlog import Dist

    cells = sorted(
        (c for c in doc["cells"] if math.isfinite(c["sojourn_p99_us"])),
        key=lambda c: c["sojourn_p99_us"],
    )
    if not cells:
        raise F.FigureError("no cell has sojourn samples")
    pick = [("best", cells[0]), ("worst", cells[-1])] if len(cells) > 1 else [("only", cells[0])]
    req = res.requests
    if "measured" in req:
        req = req[req["measured"] == 1]
    fig, ax = F._new()
    ax = ax[0, 0]
    floor = 1.0
    for i, (name, c) in enumerate(pick):
        sel = req[req["point"] == c["id"]]
        d = Dist.from_values(sel["sojourn"].to_numpy())
        x, cdf = d.cdf()
        keep = (1 - cdf) > 0
        label = f"{name}: " + ", ".join(f"{k.split('.')[-1]}={v}" for k, v in c["levels"].items())
        ax.step(x[keep] / 1e3, (1 - cdf)[keep], where="post", color=f"C{i}", label=label[:70])
        floor = min(floor, 0.5 / max(d.total, 1))
        if "ideal_completed" in sel and sel["ideal_completed"].notna().any():
            v = (sel["ideal_completed"] - sel["intended"]).to_numpy()
            di = Dist.from_values(v[v >= 0])
            x, cdf = di.cdf()
            keep = (1 - cdf) > 0
            ax.step(
                x[keep] / 1e3,
                (1 - cdf)[keep],
                where="post",
                color=f"C{i}",
                ls="--",
                label=f"{name}: ideal",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(max(floor, 1e-5), 1)
    ax.set_xlabel("sojourn (µs)")
    ax.set_ylabel("fraction of requests slower than x")
    ax.legend(fontsize="x-small")
    ax.grid(True, which="major", alpha=0.3)
    return F.save(fig, out)


# ---------------------------------------------------------------------------- page


def _effects_html(doc: dict, metric: str) -> str:
    rows = []
    for q in doc["quantiles"]:
        es = [e for e in doc["effects"] if e["metric"] == metric and e["quantile"] == q]
        for e in es:
            if e["kind"] == "intercept":
                rows.append([f"<b>{qlabel(q)}</b> base cell", _us(e["estimate_us"]), "", "", ""])
                continue
            mark = (
                '<span class="fail">yes</span>'
                if e["excludes_zero"]
                else '<span class="muted">no</span>'
            )
            pct = f"{e['pct_of_base']:+.1f} %" if e["pct_of_base"] is not None else "–"
            rows.append(
                [
                    esc(e["term"]),
                    esc(_signed(e["estimate_us"])),
                    esc(pct),
                    esc(f"[{_signed(e['ci_low_us'])}, {_signed(e['ci_high_us'])}]"),
                    mark,
                ]
            )
    return html.table(["term", "effect", "% of base", "95 % CI", "excludes 0"], rows)


def _precision_html(doc: dict) -> str:
    p = doc.get("precision") or {}
    if not p:
        return ""
    need = ", ".join(
        f"±{_us(float(t))} in about {n} blocks" for t, n in p["blocks_for_half_width_us"].items()
    )
    return (
        f'<p class="muted">Precision: the main effects on sojourn p99 are '
        f"±{esc(_us(p['median_half_width_us']))} (median 95 % half-width) with {p['blocks']} "
        f"blocks; the half-width shrinks as one over the root of the blocks: {esc(need)}.</p>"
    )


def _page_plans(doc: dict, res: Results) -> list:
    """The page's figures: the effects per metric, one interaction plot per pair of factors
    that interact, and the best and worst cells' CCDFs (last)."""
    factors = doc["design"]["factors"]
    plans = [
        (
            f"effects-{m}",
            f"Effects on {m} (µs) with 95 % CIs; red: the CI excludes 0.",
            lambda p, m=m: effects_plot(doc, p, m),
        )
        for m in doc["metrics"]
    ]
    seen = set()
    for e in doc["interactions"]:
        fa = next(f for f in factors if f["key"] == e["factors"][0]["key"])
        fb = next(f for f in factors if f["key"] == e["factors"][1]["key"])
        if (fa["key"], fb["key"]) in seen:
            continue
        seen.add((fa["key"], fb["key"]))
        plans.append(
            (
                f"interaction-{len(seen)}",
                esc(
                    f"{fa['key']} × {fb['key']}: sojourn p99 per level "
                    "(non-parallel lines: they interact)."
                ),
                lambda p, a=fa, b=fb: interaction_plot(doc, a, b, p),
            )
        )
    plans.append(
        (
            "cells-ccdf",
            "Sojourn CCDF of the best and the worst cell, each against its ideal (dashed).",
            lambda p: cells_ccdf(res, doc, p),
        )
    )
    return plans


def _page_tables(doc: dict) -> tuple[str, str, str, str]:
    """The page's tables: the factors, what to change, the p99's variance ratios, the cells."""
    factors = doc["design"]["factors"]
    facts = html.table(
        ["factor", "levels (base first)"],
        [[esc(f["key"]), esc(" | ".join(f["levels"]))] for f in factors],
    )
    change = html.table(
        ["", "change", "sojourn p99 gain", "% of base", "95 % CI", ""],
        [
            [
                str(i),
                esc(f"{w['key']} = {w['level']}"),
                esc(_signed(w["p99_gain_us"])),
                esc(f"{w['pct_of_base']:+.1f} %"),
                esc(f"[{_signed(w['ci_low_us'])}, {_signed(w['ci_high_us'])}]"),
                "" if w["sure"] else '<span class="muted">CI includes 0</span>',
            ]
            for i, w in enumerate(doc["what_to_change"], 1)
        ],
    )
    var = html.table(
        ["factor", "level vs base", "variance ratio", "95 % CI"],
        [
            [
                esc(v["key"]),
                esc(f"{v['level']} vs {v['base']}"),
                esc(f"×{v['ratio']:.3g}"),
                esc(f"[{v['ci_low']:.3g}, {v['ci_high']:.3g}]"),
            ]
            for v in doc["variance_p99"]
        ],
    )
    cells = html.table(
        ["cell", "runs", "disturbed", "saturated", "requests", "sojourn p99 (pooled)"],
        [
            [
                esc(c["id"]),
                str(c["runs"]),
                str(c["disturbed_runs"]),
                str(c.get("saturated_runs", 0)),
                str(c["requests"]),
                esc(_us(c["sojourn_p99_us"])),
            ]
            for c in doc["cells"]
        ],
    )
    return facts, change, var, cells


def write_page(
    root: str | Path, doc: dict, out_dir: str | Path | None = None, res: Results | None = None
) -> Path:
    """``OUT/attribution/index.html`` with its figures (and attribution.json beside it)."""
    root = Path(root)
    out = Path(out_dir) if out_dir else root / "attribution"
    fig_dir = out / "figures"
    out.mkdir(parents=True, exist_ok=True)
    res = res or load(root)
    factors = doc["design"]["factors"]
    drawn = F.draw(_page_plans(doc, res), fig_dir)
    d = doc["design"]
    kind = (
        f"resolution-{d['resolution']} fraction" if d["kind"] == "fractional" else "full factorial"
    )
    facts, change, var, cells = _page_tables(doc)
    alias = (
        f'<p class="note">Aliased two-factor interactions (a fraction cannot tell them apart; '
        f"not estimated): {esc('; '.join(' = '.join(c) for c in named_aliases(d)))}</p>"
        if d["aliases"]
        else ""
    )
    bs = doc["bootstrap"]
    body = [
        f"<p>{esc(kind)}, {len(factors)} factors, {len(doc['cells'])} cells × {d['blocks']} blocks "
        f"({doc['requests']['runs']} runs, at least {doc['requests']['min_per_run']} "
        "requests each). "
        "Quantile regression (exact: a linear program, solved by HiGHS) of every request's "
        "latency on the factors' levels"
        f"{' and their two-way interactions' if d['kind'] == 'full' else ''}, blocks "
        f"effect-coded; 95 % CIs from {bs['resamples']} cluster-bootstrap resamples over runs "
        f"(docs/attribute.md).</p>",
        facts,
        alias,
        "<h2>What to change</h2>",
        change,
        _precision_html(doc),
        "<h2>Effects</h2>",
        *html.figures(fig_dir, drawn[: len(doc["metrics"])]),
        *(f"<h3>{esc(m)}</h3>" + _effects_html(doc, m) for m in doc["metrics"]),
        "<h2>Interactions that matter</h2>",
        *(
            html.figures(fig_dir, drawn[len(doc["metrics"]) : -1])
            or ['<p class="muted">none: no interaction\'s CI excludes 0</p>']
        ),
        "<h2>Run-to-run variance of sojourn p99</h2>",
        var,
        "<h2>Best and worst cells</h2>",
        *html.figures(fig_dir, drawn[-1:]),
        cells,
    ]
    page = out / "index.html"
    page.write_text(html.document("Attribution of the tail", body))
    return page


def run(root: str | Path, bootstrap: int = 200, out_dir: str | Path | None = None) -> dict:
    """Analyse, write attribution.json and the page; returns the attribution."""
    res = load(root)
    doc = analyse(root, bootstrap=bootstrap, res=res)
    out = Path(out_dir) if out_dir else Path(root) / "attribution"
    out.mkdir(parents=True, exist_ok=True)
    (out / "attribution.json").write_text(json.dumps(_clean(doc), indent=1, allow_nan=False))
    write_page(root, doc, out, res=res)
    return doc


def _clean(v):
    """NaN and infinities as null (JSON has neither)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v
