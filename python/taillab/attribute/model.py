"""The model of an attribution: its design (``design.json``), the regressors of a cell and block
(:class:`Model`), a run's sorted requests (:class:`RunData`), and the exact quantile regression
on compressed rows (:func:`quantreg`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SchemaError, TaillabError

DESIGN_SCHEMA = "taillab.design/1"


METRICS = ("sojourn", "service", "queue")


QUANTILES = (0.5, 0.95, 0.99)


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
