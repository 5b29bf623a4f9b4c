"""Validation of a synthetic workload against the app it stands for (TailWAG §4).

TailWAG (Zhuo & Lipasti, BID 2023) measures an app, fits its service times, runs a
synthetic workload with the fitted parameters at the *same absolute loads*, and compares the
round-trip latency: mean, p95 and p99 at 20 %, 50 % and 70 % of the app's saturation rate
with one worker (its Fig. 8; average errors 6.2 % / 1.9 % / 7.3 %), and p95 against load for
1, 2 and 4 workers (its Fig. 6). This module is that comparison over two results folders
(experiments or run collections) whose points match on (threads, offered QPS):

* :func:`error_table` — one row per matched point: measured and synthetic sojourn mean,
  p95, p99 and the relative error (synthetic / measured − 1);
* :func:`summary` — mean absolute error per statistic over the one-worker rows, next to
  TailWAG's and this project's goal; with later rounds, the headline out of sample
  (:func:`out_of_sample`): their errors, each point within the floor of the same rounds,
  beyond it (named) or unresolved, round 1 kept as in sample;
* :func:`write_validation` — ``validation.csv``, ``validation.json``, the figures
  (measured solid, synthetic dashed) and ``index.html``, with the fitted components next to
  TailWAG's Table 2 row for the app's counterpart.

Table 2 is transcribed from the paper as printed. Its "variance" is read as the variance of
ln(service time): values such as 0.007 for an img-dnn whose service times all lie within
0.35–0.45 ms are impossible in µs² and fit exactly in log space. Whether its "mean" is the
arithmetic mean or e^μ the paper does not say (they differ by e^(σ²/2), 0.4 % to 29 % for its
rows); the page shows both of ours.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import figures as F
from . import html
from .errors import TaillabError
from .fit import periodic_sentence, selection_lines, speed_sentence
from .hlog import Dist
from .html import esc
from .results import Results, load, numeric
from .units import fmt_ns

STATS = ("mean", "p95", "p99")
# TailWAG's average validation error (Fig. 8: one worker, 20/50/70 % load).
TAILWAG_ERROR = {"mean": 0.062, "p95": 0.019, "p99": 0.073}
# This project's goal for the same comparison.
GOAL = {"mean": 0.03, "p95": 0.02, "p99": 0.05}
LOADS = (0.2, 0.5, 0.7)


@dataclass(frozen=True)
class SeedApp:
    """One row of TailWAG's Table 2, as printed (µs; variances of ln(service time)).

    ``first`` is Distribution 1 (mean, variance), whose probability the paper leaves
    implied (1 − the others); ``others`` are (probability, mean, variance) with None where
    the paper prints NA; ``critical`` are Critical Sections 1 and 2 (mean, variance).
    """

    name: str
    first: tuple[float, float]
    others: tuple[tuple[float, float | None, float | None], ...] = ()
    critical: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 0.0), (0.0, 0.0))
    note: str = field(default="")

    def components(self) -> list[dict[str, Any]]:
        """Every distribution with its probability (Distribution 1's implied)."""
        p1 = 1.0 - sum(p for p, _, _ in self.others)
        rows = [{"weight": p1, "mean_us": self.first[0], "log_var": self.first[1]}]
        rows += [{"weight": p, "mean_us": m, "log_var": v} for p, m, v in self.others]
        return rows


TABLE2: dict[str, SeedApp] = {
    a.name: a
    for a in [
        SeedApp("silo", (16.14, 0.288), ((0.001, 59.6, 0.085),), ((3.5, 0.15), (3.5, 0.15))),
        SeedApp(
            "specjbb",
            (11.1, 0.39),
            ((0.03, 30.73, 0.066), (0.03, 200.0, 0.049)),
            ((3.9, 0.1), (3.9, 0.1)),
        ),
        SeedApp("masstree", (105.0, 0.06), ((0.00001, 1400.0, 0.05),), ((3.5, 0.2), (3.5, 0.2))),
        SeedApp("img-dnn", (395.0, 0.007), (), ((6.4, 0.5), (6.4, 0.5))),
        SeedApp(
            "shore",
            (92.8, 0.163),
            ((0.45, 432.0, 0.24), (0.042, 1900.0, 0.124)),
            ((3.9, 0.1), (3.9, 0.1)),
        ),
        SeedApp("xapian", (532.0, 0.3), ((0.378, 1800.0, 0.35),), ((4.2, 0.1), (4.2, 0.1))),
        SeedApp(
            "moses",
            (840.0, 0.133),
            ((0.857, 1525.0, 0.14), (0.0005, 11450.0, 0.54)),
            ((4.9, 0.1), (4.0, 0.1)),
        ),
        SeedApp(
            "sphinx",
            (624_280.0, 0.510),
            ((0.03, None, None),),
            ((50.0, 0.6), (50.0, 0.6)),
            note="Distribution 2 is printed as '3%, NA': its mean and variance are not given.",
        ),
    ]
}

# Which TailBench app each of ours plays the role of (see each app's README).
SEED_APP = {
    "oltp-mem": "silo",
    "middleware": "specjbb",
    "kv": "masstree",
    "img-dnn": "img-dnn",
    "oltp-disk": "shore",
    "search": "xapian",
    "translate": "moses",
    "speech": "sphinx",
}


class ValidationError(TaillabError):
    """The two folders cannot be compared (no matching points, missing estimates)."""


def _points(res: Results, metric: str) -> pd.DataFrame:
    pts = res.points[res.points["runs"] > 0].copy()
    cols = [f"{metric}_{s}" for s in STATS]
    missing = [c for c in cols if c not in pts]
    if missing:
        raise ValidationError(f"{res.root} has no {missing} estimates; are its runs finished?")
    pts["qps"] = numeric(pts, "qps")
    pts["threads"] = numeric(pts, "threads")
    runs = res.runs
    of_point = runs["point"].astype(str) if len(runs) else None
    rse = {st: [] for st in STATS}
    for p in pts["point"]:
        paths = runs[of_point == str(p)]["path"] if of_point is not None else []
        got = _block_rse([res._run_dist(Path(x), metric) for x in paths])
        for st in STATS:
            rse[st].append(got[st])
    for st in STATS:
        pts[f"{metric}_{st}_rse"] = rse[st]
    return pts


#: Resamples of a point's blocks for :func:`_block_rse`.
BOOT_REPS = 400


def _block_rse(dists: list[Dist], reps: int = BOOT_REPS) -> dict[str, float]:
    """The relative standard error of a point's mean, p95 and p99 over its runs' merged
    histogram, by resampling the runs (blocks) with replacement: each resample merges the
    drawn runs' histograms and takes the statistic; the sd over ``reps`` resamples over the
    statistic of all runs, times sqrt(n / (n - 1)) (the bootstrap's variance is short by
    that factor). For the mean of equal blocks this is the runs' sd / mean / sqrt(n). For a
    tail it is what the merged value really rests on: near saturation a few slow blocks
    hold a point's p99, and the runs' own p99s spread far less than the merged p99 moves
    with them (oltp-disk's 70 % point in 48 blocks: 4 % from the runs' p99s, 18 % by
    resampling). NaN with fewer than two runs that have requests. Seeded: the same runs
    give the same value."""
    dists = [d for d in dists if d.total]
    n = len(dists)
    if n < 2:
        return {st: math.nan for st in STATS}
    merged = Dist.merge(dists)
    counts = np.zeros((n, len(merged.lo)))
    for i, d in enumerate(dists):
        np.add.at(counts[i], np.searchsorted(merged.lo, d.lo), d.count)
    rng = np.random.default_rng(0)
    drawn = rng.multinomial(n, np.full(n, 1.0 / n), size=reps) @ counts
    total = drawn.sum(axis=1)
    cum = np.cumsum(drawn, axis=1)
    full = {"mean": merged.mean}
    values = {"mean": drawn @ merged._mid() / total}
    for st, q in (("p95", 0.95), ("p99", 0.99)):
        # Nearest rank, as Dist.quantile takes it.
        target = np.maximum(1, np.ceil(np.round(q * total, 9)))
        at = np.minimum((cum < target[:, None]).sum(axis=1), len(merged.hi) - 1)
        values[st] = merged.hi[at].astype(float)
        full[st] = float(merged.quantile(q))
    return {
        st: float(np.std(values[st]) / full[st] * math.sqrt(n / (n - 1))) if full[st] else math.nan
        for st in STATS
    }


def _load_of(p: pd.Series, saturation_qps) -> float:
    if saturation_qps is None:
        return float(p.get("utilization", math.nan))
    sat = (
        saturation_qps.get(int(p["threads"]), math.nan)
        if isinstance(saturation_qps, dict)
        else float(saturation_qps)
    )
    return float(p["qps"]) / sat if sat else math.nan


Folders = Results | str | Path


def _synthetic_points(
    synthetic: Folders | list[Folders], metric: str
) -> tuple[pd.DataFrame, str, dict[str, tuple[Results, str]]]:
    """The points of one synthetic folder, or of several (``--fit-at each``: one folder per
    measured point, named after it); with several, point names get their folder's name.
    Also the folder and own name of every point, by the name it gets here."""
    many = isinstance(synthetic, list | tuple)
    folders = synthetic if many else [synthetic]
    loaded = [x if isinstance(x, Results) else load(x) for x in folders]
    if not loaded:
        raise ValidationError("no synthetic results folder was given")
    frames, owner = [], {}
    for r in loaded:
        pts = _points(r, metric)
        own = [str(x) for x in pts["point"]]
        if many:
            pts["point"] = [f"{Path(r.root).name}/{x}" for x in own]
        owner.update({str(k): (r, x) for k, x in zip(pts["point"], own, strict=True)})
        frames.append(pts)
    root = str(loaded[0].root) if not many else str(Path(loaded[0].root).parent)
    return pd.concat(frames, ignore_index=True), root, owner


def _stat(p: pd.Series, metric: str, st: str) -> float:
    """A point's ``st`` of ``metric`` over its runs' merged histograms (``taillab tailwag``
    measures each point in interleaved blocks; a tail is the tail of all its requests, never
    an average of the runs' percentiles; one run's are its own), else the estimate."""
    v = p.get(f"merged_{metric}_{st}")
    return float(v) if v is not None and not pd.isna(v) else float(p[f"{metric}_{st}"])


def _service_mean(p: pd.Series) -> float:
    """A point's mean service time: the estimate over its runs, else the runs' merged
    histogram (experiments report the latter when no CI target was set)."""
    for col in ("service_mean", "merged_service_mean"):
        v = p.get(col)
        if v is not None and not pd.isna(v):
            return float(v)
    return math.nan


def error_table(
    measured: Folders,
    synthetic: Folders | list[Folders],
    *,
    saturation_qps: float | dict[int, float] | None = None,
    metric: str = "sojourn",
    rel_tol: float = 1e-3,
    rounds: list[tuple[Folders, Folders]] | None = None,
    slow_ns: float | None = None,
) -> pd.DataFrame:
    """Measured vs synthetic latency per matched point (same threads, offered QPS ±0.1 %).

    ``rounds`` are further (measured, synthetic) pairs of folders at the same points, as
    ``taillab tailwag --rounds N`` writes them (the app and its synthetic twin in turn, fresh
    seeds, the fit of the first round). The columns above stay round 1's — the synthetic
    workload against the runs it was fitted from, as TailWAG compares — and each row gains
    ``rounds``, ``later_runs_failed``, every round's ``error_<s>_r<k>``,
    ``later_measured_<s>``/``later_synthetic_<s>``/``later_error_<s>`` (the later rounds,
    each side's run histograms merged: the synthetic workload out of sample) and
    ``repeat_<s>`` (the app's later rounds merged against its first: what the host's drift
    alone does to a comparison — its noise floor).

    Columns: ``threads``, ``qps``, ``load`` (qps / ``saturation_qps`` — one rate, or one
    per thread count — else the measured point's utilization), ``measured_point``,
    ``synthetic_point``, ``runs_failed`` (runs of either point with a failed self-check),
    ``measured_service_mean`` and ``synthetic_service_mean`` (ns, what each side's worker
    spent per request), and per statistic s in mean, p95, p99: ``measured_<s>``,
    ``synthetic_<s>`` (ns) and ``error_<s>`` (synthetic / measured − 1). Points of either
    folder without a partner are listed in ``table.attrs["unmatched"]``. ``synthetic`` may
    be a list of folders (one per measured point, as ``taillab tailwag --fit-at each`` writes).

    With ``slow_ns`` (the fit's pause threshold: a service time this long is a pause's), each
    row also has ``measured_slow``/``synthetic_slow`` (such requests per 100 000, from each
    side's merged service histogram) and ``measured_slow_mean``/``synthetic_slow_mean``
    (their mean service, ns): whether the synthetic workload paused as often and as long as
    the app at this load. A fit pooled over the loads draws one pause rate for all of them;
    in one tailwag, middleware's collector ran 22 % more often per request at 70 % load
    than at 20 %.
    """
    if rounds:
        return _pooled_table(
            [(measured, synthetic), *rounds],
            saturation_qps=saturation_qps,
            metric=metric,
            rel_tol=rel_tol,
            slow_ns=slow_ns,
        )
    m = measured if isinstance(measured, Results) else load(measured)
    pm = _points(m, metric)
    ps, s_root, owner = _synthetic_points(synthetic, metric)
    rows, used = [], set()
    for _, a in pm.sort_values(["threads", "qps"]).iterrows():
        cand = ps[(ps["threads"] == a["threads"]) & np.isclose(ps["qps"], a["qps"], rtol=rel_tol)]
        cand = cand[~cand["point"].isin(used)]
        if cand.empty:
            continue
        b = cand.iloc[0]
        used.add(b["point"])
        row = _error_row(a, b, metric, saturation_qps)
        if slow_ns:
            row.update(_slow(m, a["point"], slow_ns, "measured"))
            row.update(_slow(*owner[str(b["point"])], slow_ns, "synthetic"))
        rows.append(row)
    if not rows:
        raise ValidationError(
            f"no point of {s_root} matches one of {m.root} in threads and offered QPS; run the "
            "synthetic workload at the measured points' absolute rates"
        )
    table = pd.DataFrame(rows)
    table.attrs["unmatched"] = sorted(
        set(map(str, pm["point"])) - set(map(str, table["measured_point"]))
    ) + sorted(set(map(str, ps["point"])) - used)
    return table


def _error_row(a: pd.Series, b: pd.Series, metric: str, saturation_qps) -> dict[str, Any]:
    """One matched point's row of :func:`error_table`: measured point ``a`` against synthetic
    point ``b``, each statistic's error and its standard error."""
    row = {
        "threads": int(a["threads"]),
        "qps": float(a["qps"]),
        "load": _load_of(a, saturation_qps),
        "measured_point": a["point"],
        "synthetic_point": b["point"],
        # Runs with a failed self-check (a disturbed host, a saturated server): the
        # comparison is kept and marked, never dropped.
        "runs_failed": int(a.get("runs_failed", 0) or 0) + int(b.get("runs_failed", 0) or 0),
        # Runs (blocks) per side, the fewer of the two: what the standard errors rest on.
        "runs": int(min(a["runs"], b["runs"])),
    }
    # Where a sojourn error comes from: the service the synthetic workload actually
    # ran vs the app's at this load (a fit from one load misses load-dependent service).
    for side, p in (("measured", a), ("synthetic", b)):
        row[f"{side}_service_mean"] = _service_mean(p)
    for st in STATS:
        x, y = _stat(a, metric, st), _stat(b, metric, st)
        row.update({f"measured_{st}": x, f"synthetic_{st}": y})
        row[f"error_{st}"] = y / x - 1 if x else math.nan
        # The error's standard error from both sides' run-to-run spread (a ratio's
        # relative errors add in quadrature): what the error would be ± with no error
        # of the model's own.
        rse = math.hypot(a[f"{metric}_{st}_rse"], b[f"{metric}_{st}_rse"])
        row[f"error_{st}_se"] = (y / x) * rse if x else math.nan
    return row


def _slow(res: Results, point: str, slow_ns: float, side: str) -> dict[str, float]:
    """Requests of ``point`` whose service took at least ``slow_ns``: per 100 000, and
    their mean service (ns; NaN without any)."""
    d = _point_dist(res, point, "service")
    hit = d.lo >= slow_ns
    n = float(d.count[hit].sum())
    mean = float(d.count[hit] @ d._mid()[hit]) / n if n else math.nan
    return {f"{side}_slow": 1e5 * n / d.total if d.total else math.nan, f"{side}_slow_mean": mean}


def _run_dists(res: Results, point: str, metric: str) -> list[Dist]:
    """The histogram of ``metric`` of every run (block) of ``point``."""
    runs = res.runs[res.runs["point"].astype(str) == str(point)]
    return [res._run_dist(Path(p), metric) for p in runs["path"]]


def _point_dist(res: Results, point: str, metric: str) -> Dist:
    """The merged histogram of ``metric`` over every run of ``point``."""
    dists = _run_dists(res, point, metric)
    if not dists:
        raise ValidationError(f"{res.root}: point {point} has no finished run")
    return Dist.merge(dists)


def _pooled_table(
    pairs: list[tuple[Folders, Folders]],
    *,
    saturation_qps: float | dict[int, float] | None,
    metric: str,
    rel_tol: float,
    slow_ns: float | None = None,
) -> pd.DataFrame:
    """:func:`error_table` over several rounds (see ``rounds`` there): round 1's table, with
    each round's own errors, the later rounds merged, and the app against itself."""
    loaded = []
    for m, s in pairs:
        if isinstance(s, list | tuple):
            raise ValidationError(
                "rounds compare one synthetic folder per round (not --fit-at each's one per point)"
            )
        loaded.append(
            (m if isinstance(m, Results) else load(m), s if isinstance(s, Results) else load(s))
        )
    tables = [
        error_table(
            m, s, saturation_qps=saturation_qps, metric=metric, rel_tol=rel_tol, slow_ns=slow_ns
        )
        for m, s in loaded
    ]
    table = tables[0].copy()
    extra: list[dict[str, Any]] = []
    for _, first in table.iterrows():
        mates = []  # (round index, its row) for the later rounds that have this point
        for k, t in enumerate(tables[1:], start=1):
            hit = t[
                (t["threads"] == first["threads"])
                & np.isclose(t["qps"], first["qps"], rtol=rel_tol)
            ]
            if len(hit):
                mates.append((k, hit.iloc[0]))
        row: dict[str, Any] = {"rounds": 1 + len(mates)}
        row["later_runs_failed"] = int(sum(r["runs_failed"] for _, r in mates))
        for st in STATS:
            row[f"error_{st}_r1"] = first[f"error_{st}"]
        for k, r in mates:
            for st in STATS:
                row[f"error_{st}_r{k + 1}"] = r[f"error_{st}"]
            for side in ("measured", "synthetic") if slow_ns else ():
                row[f"{side}_slow_r{k + 1}"] = r[f"{side}_slow"]
                row[f"{side}_slow_mean_r{k + 1}"] = r[f"{side}_slow_mean"]
        if mates:
            row.update(_later(loaded, first, mates, metric))
        extra.append(row)
    table = pd.concat([table, pd.DataFrame(extra, index=table.index)], axis=1)
    table.attrs["unmatched"] = sorted({u for t in tables for u in t.attrs.get("unmatched", [])})
    table.attrs["rounds"] = len(pairs)
    return table


def _later(loaded, first: pd.Series, mates, metric: str) -> dict[str, Any]:
    """The columns of one point's later rounds (see :func:`error_table`): each side's runs
    of those rounds merged (never averaged percentiles) — the synthetic workload out of the
    sample it was fitted from — with the error's standard error from resampling those
    runs, the app's later rounds against its first with theirs, and the verdict
    (:func:`_judge`)."""
    blocks = {
        side: [d for k, r in mates for d in _run_dists(loaded[k][i], r[f"{side}_point"], metric)]
        for i, side in enumerate(("measured", "synthetic"))
    }
    first_blocks = _run_dists(loaded[0][0], first["measured_point"], metric)
    later = {side: Dist.merge(b).stats() for side, b in blocks.items()}
    rse = {side: _block_rse(b) for side, b in blocks.items()}
    rse_first = _block_rse(first_blocks)
    first_m = Dist.merge(first_blocks).stats()
    row: dict[str, Any] = {"later_runs": min(len(b) for b in blocks.values())}
    for st in STATS:
        x, y = later["measured"][st], later["synthetic"][st]
        row[f"later_measured_{st}"] = x
        row[f"later_synthetic_{st}"] = y
        row[f"later_error_{st}"] = y / x - 1 if x else math.nan
        row[f"later_error_{st}_se"] = (
            (y / x) * math.hypot(rse["measured"][st], rse["synthetic"][st]) if x else math.nan
        )
        # The app against itself: its later rounds vs its first.
        r = x / first_m[st] - 1 if first_m[st] else math.nan
        row[f"repeat_{st}"] = r
        row[f"repeat_{st}_se"] = (1 + r) * math.hypot(rse["measured"][st], rse_first[st])
    svc = {
        side: float(np.mean([r[f"{side}_service_mean"] for _, r in mates]))
        for side in ("measured", "synthetic")
    }
    row["later_service_error"] = svc["synthetic"] / svc["measured"] - 1
    row.update(_judge(row))
    return row


#: Verdicts of a point's out-of-sample error (see :func:`_judge`).
WITHIN, BEYOND, UNRESOLVED = "within the floor", "beyond it", "unresolved"


def _judge(row: dict[str, Any]) -> dict[str, Any]:
    """Each statistic's verdict on a point's out-of-sample error against the floor of the
    same rounds: ``floor_<s>`` is the larger of twice the error's standard error (the
    blocks' spread on both sides) and the app against itself between rounds (|repeat|: the
    host's drift, which the blocks of one round do not show). Beyond the floor the model
    errs (``BEYOND``; ``term_<s>`` says where: the service time the synthetic workload ran
    against the app's — the mixture, cold start and speed — or, with the service mean
    close, the queueing its order makes — periodic requests, pauses, the speed's pattern).
    Within a floor above the goal the runs cannot tell whether the goal is met
    (``UNRESOLVED``; ``runs_to_resolve_<s>``: the blocks per point that would bring twice the
    se to the goal — the drift between rounds does not shrink with blocks). Else
    ``WITHIN``."""
    out: dict[str, Any] = {}
    for st in STATS:
        err, se = row[f"later_error_{st}"], row[f"later_error_{st}_se"]
        drift = abs(row.get(f"repeat_{st}", math.nan))
        parts = [v for v in (2 * se, drift) if math.isfinite(v)]
        floor = max(parts) if parts else math.nan
        out[f"floor_{st}"] = floor
        if math.isfinite(err) and math.isfinite(floor) and abs(err) > floor:
            out[f"verdict_{st}"] = BEYOND
            svc = row.get("later_service_error", math.nan)
            off = f"service mean {_pct(svc)}"
            out[f"term_{st}"] = (
                f"service time (mixture, cold start, speed: {off})"
                if math.isfinite(svc) and abs(svc) >= abs(err) / 2
                else f"queueing (order: periodic requests, pauses, the speed's pattern; {off})"
            )
        elif not math.isfinite(floor) or floor > GOAL[st]:
            out[f"verdict_{st}"] = UNRESOLVED
            if math.isfinite(se) and se > 0:
                runs = row.get("later_runs", 1)
                out[f"runs_to_resolve_{st}"] = int(math.ceil(runs * (2 * se / GOAL[st]) ** 2))
        else:
            out[f"verdict_{st}"] = WITHIN
    return out


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


def table2_rows(app: str | None, fit: dict[str, Any] | None) -> list[list[str]]:
    """Rows of the page's parameter table: our fitted components beside TailWAG's for the
    app's counterpart (``app`` is ours, e.g. "oltp-mem", or a Table 2 name)."""
    seed = TABLE2.get(SEED_APP.get(app or "", app or ""))
    ours = (fit or {}).get("components", [])
    theirs = seed.components() if seed else []

    def num(v, fmt):
        return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt(v)

    rows = []
    for i in range(max(len(ours), len(theirs))):
        o = ours[i] if i < len(ours) else {}
        t = theirs[i] if i < len(theirs) else {}
        rows.append(
            [
                f"distribution {i + 1}",
                num(o.get("weight"), lambda v: f"{100 * v:.3g}%"),
                num(o.get("mean_ns"), fmt_ns),
                num(o.get("median_ns"), fmt_ns),
                num(o.get("log_var"), lambda v: f"{v:.3g}"),
                num(t.get("weight"), lambda v: f"{100 * v:.3g}%"),
                num(t.get("mean_us"), lambda v: fmt_ns(1e3 * v)),
                num(t.get("log_var"), lambda v: f"{v:.3g}"),
            ]
        )
    if seed:
        for k, (m, v) in enumerate(seed.critical, start=1):
            rows.append([f"critical section {k}", "", "", "", "", "", fmt_ns(1e3 * m), f"{v:.3g}"])
    return rows


def _figures(table: pd.DataFrame, fig_dir: Path) -> list[tuple[str, str, str]]:
    return F.draw(
        [
            (
                "validation_load",
                "Sojourn mean, p95 and p99 vs load: measured solid, synthetic dashed, one "
                "panel per worker count (TailWAG Fig. 8).",
                lambda o: F.validation_load(table, o),
            ),
            (
                "validation_threads",
                "Sojourn p95 vs load per worker count: measured solid, synthetic dashed "
                "(TailWAG Fig. 6).",
                lambda o: F.validation_threads(table, o),
            ),
        ],
        fig_dir,
    )


def section(res: Results, out_dir: Path) -> str | None:
    """The report's TailWAG section when ``res`` is ``taillab tailwag``'s ``OUT/measured/``
    beside its synthetic twin's ``OUT/validation/``: the average errors and the validation
    figures, redrawn from ``OUT/validation/validation.csv`` into ``out_dir/figures``; None
    for any other results folder."""
    validation_dir = res.root.parent / "validation"
    if res.root.name != "measured" or not (validation_dir / "validation.csv").exists():
        return None
    fig_dir = out_dir / "figures"
    table = pd.read_csv(validation_dir / "validation.csv")
    summ = summary(table, loads=LOADS)
    page = validation_dir / "index.html"
    parts = [
        "<h2>TailWAG validation</h2><p class=muted>The synthetic workload fitted to these runs "
        "against them: mean |synthetic / measured − 1| of sojourn over the one-worker points "
        f"({summ['points']}); the full page: "
        f'<a href="{esc(html.rel(page, out_dir))}">{esc(page.name)}</a>.</p>'
    ]
    parts += _headline(summ)
    rows = []
    for st, v in summ["stats"].items():
        rows.append(
            [st, _pct(v["mean_abs_error"]).lstrip("+"), f"≤ {v['goal']:.0%}"]
            + [f"{100 * v['tailwag']:.1f}%"]
            + [_pct(v.get("noise_floor", math.nan)).lstrip("+")]
        )
    heads = ["statistic", "round 1 (in sample)", "goal", "TailWAG", "noise floor"]
    parts.append(html.table(heads, rows))
    parts += html.figures(fig_dir, _figures(table, fig_dir))
    return "\n".join(parts)


def _pct(v: float) -> str:
    return "–" if not math.isfinite(v) else f"{100 * v:+.1f}%"


def _per_point_out_of_sample(table: pd.DataFrame) -> list[str]:
    """Each point's out-of-sample error ± its standard error, floor and verdict."""
    if "later_error_mean" not in table:
        return []
    rows = []
    for _, r in table[table["later_error_mean"].notna()].iterrows():
        row = [esc(r["threads"]), f"{r['qps']:,.4g}", f"{r['load']:.0%}"]
        for st in STATS:
            row += [
                f"{_pct(r[f'later_error_{st}'])} ± {100 * r[f'later_error_{st}_se']:.1f}",
                _pct(r[f"floor_{st}"]).lstrip("+"),
                esc(r[f"verdict_{st}"]),
            ]
        rows.append(row)
    heads = ["threads", "QPS", "load"]
    for st in STATS:
        heads += [f"{st} error ± se", "floor", "verdict"]
    return ["<h2>Per point, out of sample</h2>", html.table(heads, rows, left=0)]


def _headline(summ: dict[str, Any]) -> list[str]:
    """The page's headline: the out-of-sample errors against the floor of the same rounds,
    with every point beyond it named and every unresolved one with the runs it needs."""
    oos = summ.get("out_of_sample")
    if not oos:
        return [
            "<p class=note>One round only: every error below is in sample (the synthetic "
            "workload against the runs it was fitted to); run <code>--rounds 2</code> or more "
            "for the out-of-sample headline.</p>"
        ]
    rows = [
        [
            st,
            _pct(v["mean_abs_error"]).lstrip("+"),
            _pct(v["floor"]).lstrip("+"),
            _pct(v["app_repeat"]).lstrip("+"),
            f"≤ {v['goal']:.0%}",
            f"{v[WITHIN]} / {v[BEYOND]} / {v[UNRESOLVED]}",
            _pct(summ["stats"][st]["mean_abs_error"]).lstrip("+"),
        ]
        for st, v in oos["stats"].items()
    ]
    heads = ["statistic", "out of sample", "floor", "app vs itself", "goal"]
    heads += ["points within / beyond / unresolved", "round 1 (in sample)"]
    parts = [
        "<h2>Out of sample</h2><p class=muted>The synthetic workload against the app's later "
        f"rounds (fresh runs of both, {oos['points']} one-worker point(s)): mean |synthetic / "
        "measured − 1|, each side's runs of those rounds merged. A point's <i>floor</i> is "
        "the larger of twice its error's standard error (resampling both sides' blocks) and "
        "the app against itself between its rounds (the host's drift); within it the error "
        "cannot be told from zero, beyond it the model errs, and where the floor is above the "
        "goal the runs cannot tell whether the goal is met (unresolved).</p>",
        html.table(heads, rows),
    ]
    for b in oos["beyond"]:
        parts.append(
            f"<p class=fail>beyond the floor: {esc(b['point'])} ({b['load']:.0%} load) "
            f"{b['stat']} {_pct(b['error'])} ± {100 * b['se']:.1f} (floor "
            f"{100 * b['floor']:.1f} %): {esc(b['term'])}</p>"
        )
    for u in oos["unresolved"]:
        runs = f"; about {u['runs']} blocks per point would resolve it" if u["runs"] else ""
        parts.append(
            f"<p class=muted>unresolved: {esc(u['point'])} {u['stat']} (floor "
            f"{100 * u['floor']:.1f} % above the goal{runs})</p>"
        )
    return parts


def render(
    table: pd.DataFrame,
    out_dir: Path,
    *,
    app: str | None = None,
    fit: dict[str, Any] | None = None,
    measured_root: Path | None = None,
    synthetic_root: Path | None = None,
    point_fits: list[dict[str, Any]] | None = None,
) -> str:
    """The validation page (HTML) for an error table; draws its figures into out_dir.

    ``point_fits``: the fit.json entries of the measured points; their order checks (the
    run's service times replayed in order and shuffled) get a table of their own.
    """
    fig_dir = out_dir / "figures"
    summ = summary(table, loads=LOADS)
    title = f"TailWAG validation{': ' + app if app else ''}"
    parts = []
    if measured_root or synthetic_root:
        parts.append(
            f'<p class="muted">measured <code>{esc(measured_root)}</code> · synthetic '
            f"<code>{esc(synthetic_root)}</code></p>"
        )
    parts += _headline(summ)
    parts += _round1_section(summ, table)
    parts += _per_point_section(table)
    parts += _order_section(point_fits)
    parts.append("<h2>Figures</h2>")
    parts += html.figures(fig_dir, _figures(table, fig_dir))
    parts += _params_section(app, fit)
    return html.document(title, parts)


def _round1_section(summ: dict[str, Any], table: pd.DataFrame) -> list[str]:
    """Round 1's errors against TailWAG's and the goal, the noise floor's and the later
    rounds' columns where there are any, and the later rounds' per-point table."""
    parts: list[str] = []
    parts.append(
        "<h2>Round 1 (in sample)</h2><p class=muted>Mean |synthetic / measured − 1| of sojourn "
        f"time over the one-worker points at {', '.join(f'{x:.0%}' for x in LOADS)} load "
        f"({summ['points']} point(s)), next to TailWAG's (its Fig. 8) and our goal: the "
        "synthetic workload against the very runs it was fitted to, which a flexible enough "
        "model matches whatever it has learnt"
        + (" (the headline above is out of sample)" if "out_of_sample" in summ else "")
        + ".</p>"
    )
    rows = []
    repeat = any("app_repeat" in v for v in summ["stats"].values())
    floor = any("noise_floor" in v for v in summ["stats"].values())
    for st, v in summ["stats"].items():
        verdict = '<span class="ok">met</span>' if v["met"] else '<span class="fail">not met</span>'
        if not v["met"] and v.get("resolvable") is False:
            verdict += " (this host's noise alone is above the goal" + (
                f"; about {v['runs_to_resolve']} runs per point would resolve it)"
                if v.get("runs_to_resolve")
                else ")"
            )
        rows.append(
            [st, _pct(v["mean_abs_error"]).lstrip("+"), f"≤ {v['goal']:.0%}", verdict]
            + [f"{100 * v['tailwag']:.1f}%"]
            + (
                [
                    _pct(v.get("noise_floor", math.nan)).lstrip("+"),
                    f"{v.get('beyond_noise', '–')} of {summ['points']}",
                ]
                if floor
                else []
            )
            + (
                [_pct(v.get(k, math.nan)).lstrip("+") for k in ("later", "app_repeat")]
                if repeat
                else []
            )
        )
    heads = (
        ["statistic", "ours", "goal", "", "TailWAG"]
        + (["noise floor", "points beyond noise"] if floor else [])
        + (["later rounds", "app vs itself"] if repeat else [])
    )
    parts.append(html.table(heads, rows))
    if floor:
        parts.append(
            "<p class=muted><i>Noise floor</i>: the average error a synthetic workload with no "
            "error of its own would show here, from the spread of each side's runs (each "
            "point's error has standard error (1 + error) · √(rse² of the measured side + "
            "rse² of the synthetic side), where a side's rse comes from resampling its runs: "
            "merge a draw of them with replacement, take the statistic, its sd over the "
            "draws; a normal error's mean size is √(2/π) of that). <i>Points beyond "
            "noise</i>: those whose |error| is more than twice its standard error — there the "
            "model, not the host, is off. With a few runs per point the spread is itself "
            "rough (±40 % at four runs).</p>"
        )
    if summ.get("rounds", 1) > 1:
        parts.append(
            f"<p class=muted>{summ['rounds']} rounds: the app and the synthetic workload ran in "
            "turn with fresh seeds. <i>Ours</i> is round 1, the synthetic workload against the "
            "app runs it was fitted from (as TailWAG compares: in sample); <i>later rounds</i> "
            "is the same synthetic workload against later runs of the app, each side's "
            "histograms merged over those rounds (out of sample: the headline); <i>app vs "
            "itself</i> is the app's later rounds against its first: what this host's drift "
            "alone does to a comparison.</p>"
        )
        parts += _per_point_out_of_sample(table)
    return parts


def _per_point_section(table: pd.DataFrame) -> list[str]:
    """Round 1 per point: each statistic measured, synthetic and its error, the pauses."""
    parts: list[str] = []
    parts.append("<h2>Per point, round 1 (in sample)</h2>")
    rows = []
    for _, r in table.iterrows():
        row = [esc(r["threads"]), f"{r['qps']:,.4g}", f"{r['load']:.0%}"]
        row.append(
            '<span class="ok">ok</span>'
            if not r["runs_failed"]
            else f'<span class="fail">{r["runs_failed"]} run(s) failed</span>'
        )
        row.append(f"{fmt_ns(r['measured_service_mean'])} / {fmt_ns(r['synthetic_service_mean'])}")
        for st in STATS:
            se = r.get(f"error_{st}_se", math.nan)
            row += [
                fmt_ns(r[f"measured_{st}"]),
                fmt_ns(r[f"synthetic_{st}"]),
                _pct(r[f"error_{st}"])
                + (f" ± {100 * se:.1f}" if se is not None and math.isfinite(se) else ""),
            ]
        rows.append(row)
    heads = ["threads", "QPS", "load", "checks", "service mean measured / synthetic"]
    for st in STATS:
        heads += [f"{st} measured", f"{st} synthetic", "error ± se"]
    slow = "measured_slow" in table
    if slow:
        heads.append("pauses per 100 000 measured / synthetic (mean length)")
        for row, (_, r) in zip(rows, table.iterrows(), strict=True):
            row.append(
                " / ".join(
                    f"{r[f'{side}_slow']:.3g} ({fmt_ns(r[f'{side}_slow_mean'])})"
                    for side in ("measured", "synthetic")
                )
            )
    parts.append(html.table(heads, rows, left=0))
    if slow:
        parts.append(
            "<p class=muted><i>Pauses</i>: requests whose service took at least the fit's "
            "pause threshold, per 100 000 requests of each side's runs, and their mean "
            "service. The synthetic workload draws its pauses every so many requests at every "
            "load alike; where the app's count moves with the load (a collector that runs "
            "more often under load), the fit pooled over the loads is off at both ends.</p>"
        )
    if table.attrs.get("unmatched"):
        parts.append(
            "<p class=note>Points without a partner (not compared): "
            + ", ".join(esc(p) for p in table.attrs["unmatched"])
            + "</p>"
        )
    return parts


def _order_section(point_fits: list[dict[str, Any]] | None) -> list[str]:
    """The measured runs' order checks: in order, shuffled, and within windows."""
    parts: list[str] = []
    order = [f for f in point_fits or [] if f.get("order")]
    if not order:
        return parts
    parts.append(
        "<h2>Order</h2><p class=muted>Each measured run's own service times replayed "
        "through a FCFS queue at its arrival times, in their order and shuffled: the "
        "synthetic workload draws every request independently, so it can follow the app "
        "only where the two agree. Far apart, the app's order (slow requests in bursts, or "
        "regularly spaced) sets its queueing, not its distribution. The last column "
        "shuffles only among requests sent in the same window: the part of the p99 effect "
        "made by clustering shorter than the window (a wander slower than the longest "
        "window shows only in the whole-run effect).</p>"
    )
    rows = []
    for f in order:
        o = f["order"]
        row = [esc(f["point"])]
        for st in STATS:
            row += [
                fmt_ns(o["in_order"][f"{st}_ns"]),
                fmt_ns(o["shuffled"][f"{st}_ns"]),
                _pct(o["effect"][st]),
            ]
        wins = o.get("windows", [])
        row.append(" / ".join(_pct(w["effect"]["p99"]) for w in wins) or "–")
        rows.append(row)
    heads = ["point"]
    for st in STATS:
        heads += [f"{st} in order", "shuffled", "effect"]
    wins = order[0]["order"].get("windows", [])
    heads.append(
        "p99 effect within " + " / ".join(fmt_ns(w["window_ns"]) for w in wins)
        if wins
        else "p99 effect within windows"
    )
    parts.append(html.table(heads, rows, left=0))
    return parts


def _params_section(app: str | None, fit: dict[str, Any] | None) -> list[str]:
    """The fitted parameters next to TailWAG's Table 2, the cold start, the terms chosen,
    the host's speed, a periodic component and the synthetic workload's settings."""
    parts: list[str] = []
    seed = SEED_APP.get(app or "", app if app in TABLE2 else None)
    if fit or seed:
        parts.append(
            f"<h2>Parameters next to TailWAG's Table 2 ({esc(seed or 'no counterpart')})</h2>"
            "<p class=muted>Variance is that of ln(service time). Ours: weight, arithmetic "
            "mean and median per fitted component; the paper does not say which mean it "
            "prints.</p>"
        )
        parts.append(
            html.table(
                ["", "weight", "mean", "median", "variance", "TailWAG prob.", "mean", "variance"],
                table2_rows(app, fit),
            )
        )
        if seed and TABLE2[seed].note:
            parts.append(f"<p class=muted>{esc(TABLE2[seed].note)}</p>")
        if fit and fit.get("cold"):
            c = fit["cold"]
            parts.append(
                f"<p>Fitted across {len(fit.get('points', []))} loads with a cold start: a worker "
                f"serves up to {1 + c['extra']:.3g}× slower after idling, warming and cooling "
                f"with a time constant of {fmt_ns(c['tau_ns'])} (R² {c['r2']:.3f} over every "
                "request); the components above are of the warm service times. Mean service "
                "per load, measured vs the model: "
                + "; ".join(
                    f"{esc(b['point'])} {fmt_ns(b['measured_service_mean_ns'])} vs "
                    f"{fmt_ns(b['model_service_mean_ns'])}"
                    for b in fit.get("by_point", [])
                )
                + ".</p>"
            )
        if fit and fit.get("selection"):
            lines = [x.strip() for x in selection_lines(fit["selection"])]
            parts.append(
                f"<p>{esc(lines[0][0].upper() + lines[0][1:])}:</p><ul>"
                + "".join(f"<li>{esc(x)}</li>" for x in lines[1:])
                + "</ul>"
            )
        if fit and fit.get("speed"):
            text = speed_sentence(fit["speed"])
            parts.append(f"<p>The host's speed: {esc(text)}.</p>")
        if fit and fit.get("periodic"):
            text = periodic_sentence(fit["periodic"])
            parts.append(f"<p>{esc(text[0].upper() + text[1:])}</p>")
        if fit and fit.get("synth_set"):
            sets = fit.get("synth_settings") or [fit["synth_set"]]
            parts.append(
                "<p>Synthetic workload: "
                + " ".join(f"<code>--set '{esc(x)}'</code>" for x in sets)
                + "</p>"
            )
    return parts


def write_validation(
    measured: Folders,
    synthetic: Folders | list[Folders],
    out: str | Path,
    *,
    app: str | None = None,
    fit: dict[str, Any] | None = None,
    saturation_qps: float | dict[int, float] | None = None,
    rounds: list[tuple[Folders, Folders]] | None = None,
    point_fits: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``out/index.html``, ``validation.csv``, ``validation.json`` and the figures.
    ``rounds``: further (measured, synthetic) folders, pooled as :func:`error_table` says.

    ``fit`` is the fit.json entry the synthetic workload was made from (its components
    go beside TailWAG's Table 2 row for ``app``'s counterpart); ``point_fits`` the fit.json
    entries of the measured points (their order checks). Returns index.html's path.
    """
    m = measured if isinstance(measured, Results) else load(measured)
    if isinstance(synthetic, list | tuple) and len(synthetic) == 1:
        synthetic = synthetic[0]
    many = isinstance(synthetic, list | tuple)
    s = (
        [x if isinstance(x, Results) else load(x) for x in synthetic]
        if many
        else (synthetic if isinstance(synthetic, Results) else load(synthetic))
    )
    s_root = Path(s[0].root).parent if many else s.root
    # The fit's pause threshold: the page counts each side's pauses per point.
    slow_ns = ((fit or {}).get("pause") or {}).get("threshold_ns")
    table = error_table(m, s, saturation_qps=saturation_qps, rounds=rounds, slow_ns=slow_ns)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    table.to_csv(out_dir / "validation.csv", index=False)
    doc = {
        "schema": "taillab.validation/1",
        "app": app,
        "measured": str(m.root),
        "synthetic": str(s_root),
        "rounds": [[str(a), str(b)] for a, b in rounds or []],
        "summary": summary(table, loads=LOADS),
        "points": json.loads(table.to_json(orient="records")),
        "unmatched": table.attrs.get("unmatched", []),
    }
    (out_dir / "validation.json").write_text(
        json.dumps(_finite(doc), indent=1, allow_nan=False), encoding="utf-8"
    )
    page = out_dir / "index.html"
    text = render(
        table,
        out_dir,
        app=app,
        fit=fit,
        measured_root=m.root,
        synthetic_root=s_root,
        point_fits=point_fits,
    )
    page.write_text(text, encoding="utf-8")
    return page


def _finite(v: Any) -> Any:
    """NaN and infinities as null: JSON has no such numbers."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
