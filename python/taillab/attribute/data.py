"""An attribution's data: every finished run's requests, its cell and block (:func:`collect`),
the cluster bootstrap's draws over runs, and the runs' own p99 variance ratios.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..errors import TaillabError
from ..results import Results
from .model import METRICS, Model, RunData


def run_table(res: Results, design: dict) -> pd.DataFrame:
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
    runs = run_table(res, design)
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


def resample(runs: list[RunData], rng: np.random.Generator) -> np.ndarray:
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


def run_p99(r: RunData) -> float:
    return r.p99


def variance_ratios(runs: list[RunData], mult: np.ndarray, design: dict) -> np.ndarray:
    """Per factor level (non-base): geometric mean over cells of the p99 variance across a
    cell's runs at that level ÷ at the base level."""
    cells: dict[int, list[float]] = {}
    for r, m in zip(runs, mult, strict=True):
        cells.setdefault(r.cell, []).extend([run_p99(r)] * int(m))
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
