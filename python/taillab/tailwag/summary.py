"""The headline of a validation: the mean absolute error per statistic over the one-worker points
against TailWAG's and the goal, and with later rounds the out-of-sample errors and verdicts.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .table import BEYOND, GOAL, STATS, TAILWAG_ERROR, UNRESOLVED, WITHIN


def out_of_sample(rows: pd.DataFrame) -> dict[str, Any] | None:
    """The headline: the later rounds' errors (the synthetic workload on runs it was not
    fitted to) per statistic — mean |error|, the mean floor of the same rounds, the app
    against itself, how many points are within the floor, beyond it or unresolved — and
    every point beyond it (named, with its term) or unresolved (with the runs that would
    resolve it). None without later rounds."""
    if "later_error_mean" not in rows or not rows["later_error_mean"].notna().any():
        return None
    rows = rows[rows["later_error_mean"].notna()]
    stats, beyond, unresolved = {}, [], []
    for st in STATS:
        verdicts = rows[f"verdict_{st}"].tolist()
        stats[st] = {
            "mean_abs_error": float(np.mean(np.abs(rows[f"later_error_{st}"]))),
            "floor": float(np.nanmean(rows[f"floor_{st}"])),
            "app_repeat": float(np.nanmean(np.abs(rows[f"repeat_{st}"]))),
            "goal": GOAL[st],
            **{v: verdicts.count(v) for v in (WITHIN, BEYOND, UNRESOLVED)},
        }
        for _, r in rows.iterrows():
            at = {"point": str(r["measured_point"]), "load": float(r["load"]), "stat": st}
            if r[f"verdict_{st}"] == BEYOND:
                beyond.append(
                    at
                    | {
                        "error": float(r[f"later_error_{st}"]),
                        "se": float(r[f"later_error_{st}_se"]),
                        "floor": float(r[f"floor_{st}"]),
                        "term": r[f"term_{st}"],
                    }
                )
            elif r[f"verdict_{st}"] == UNRESOLVED:
                runs = r.get(f"runs_to_resolve_{st}")
                ok = runs is not None and not pd.isna(runs)
                unresolved.append(
                    at | {"floor": float(r[f"floor_{st}"]), "runs": int(runs) if ok else None}
                )
    return {"points": len(rows), "stats": stats, "beyond": beyond, "unresolved": unresolved}


def summary(
    table: pd.DataFrame, threads: int = 1, loads: tuple[float, ...] | None = None, tol=0.05
) -> dict[str, Any]:
    """Mean |error| per statistic over the rows with ``threads`` workers (and, with
    ``loads``, only those within ``tol`` of one of them — or all of them when none is, e.g. a
    short test at other loads: ``loads_used`` says which), with TailWAG's and our goal.

    Where the rows have their errors' standard errors (``error_<s>_se``, from the runs'
    spread), ``noise_floor`` is the mean |error| a model with no error of its own would
    show (se · sqrt(2/π) averaged) and ``beyond_noise`` counts the points whose |error|
    exceeds twice its se (``runs_to_resolve``: the runs per point that would bring a floor
    above the goal down to it); ``resolvable`` is False when that floor is above the goal
    (the host's noise alone would miss it) — without per-run spread, when the app against
    itself over later rounds (``app_repeat``) is. The drift between rounds bears on the later
    rounds' comparison, not on round 1's.

    ``stats`` is round 1's, in sample. Where later rounds ran, ``out_of_sample`` is the
    headline (:func:`out_of_sample`: their errors judged against the floor of the same
    rounds); ``headline`` says which of the two leads."""
    rows = table[table["threads"] == threads]
    used = "all"
    if loads and len(rows):
        near = np.zeros(len(rows), dtype=bool)
        for x in loads:
            near |= np.abs(rows["load"].to_numpy(dtype=float) - x) <= tol
        if near.any():
            rows, used = rows[near], ",".join(f"{x:g}" for x in loads)
    out: dict[str, Any] = {"threads": threads, "points": len(rows), "loads_used": used, "stats": {}}
    for st in STATS:
        err = float(np.mean(np.abs(rows[f"error_{st}"]))) if len(rows) else math.nan
        out["stats"][st] = {
            "mean_abs_error": err,
            "goal": GOAL[st],
            "tailwag": TAILWAG_ERROR[st],
            "met": bool(err <= GOAL[st]) if math.isfinite(err) else False,
        }
        for col, name in ((f"later_error_{st}", "later"), (f"repeat_{st}", "app_repeat")):
            # The synthetic workload out of sample, and the app against itself: how far a
            # comparison on this host can resolve.
            if col in rows and rows[col].notna().any():
                out["stats"][st][name] = float(np.nanmean(np.abs(rows[col])))
        se = rows[f"error_{st}_se"].to_numpy(dtype=float) if f"error_{st}_se" in rows else []
        if len(se) and np.isfinite(se).all():
            # What a model without error of its own would show on average: |N(0, se)| has
            # mean se * sqrt(2 / pi). And the points whose error is beyond twice its se:
            # there the model's own error shows through the runs' spread.
            out["stats"][st]["noise_floor"] = float(np.mean(se) * math.sqrt(2 / math.pi))
            err_pts = np.abs(rows[f"error_{st}"].to_numpy(dtype=float))
            out["stats"][st]["beyond_noise"] = int(np.sum(err_pts > 2 * se))
            if "runs" in rows and out["stats"][st]["noise_floor"] > GOAL[st]:
                # The se falls as 1/sqrt(runs) while the runs' spread is the host's
                # run-to-run noise: this many runs per point would bring the floor to the goal.
                runs = float(rows["runs"].min())
                out["stats"][st]["runs_to_resolve"] = int(
                    math.ceil(runs * (out["stats"][st]["noise_floor"] / GOAL[st]) ** 2)
                )
        # An error below the runs' spread cannot be told from noise on this host. Round 1 is
        # judged by its own runs' spread; without it (one run per point), by the app's drift
        # against itself over later rounds.
        floor = out["stats"][st].get("noise_floor", out["stats"][st].get("app_repeat"))
        if floor is not None:
            out["stats"][st]["resolvable"] = bool(floor <= GOAL[st])
    if "rounds" in rows and len(rows):
        out["rounds"] = int(rows["rounds"].max())
    # The headline: out of sample where later rounds ran; round 1 (``stats``) is in-sample.
    oos = out_of_sample(rows) if len(rows) else None
    out["headline"] = "out_of_sample" if oos else "in_sample"
    if oos:
        out["out_of_sample"] = oos
    return out
