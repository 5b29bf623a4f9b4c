"""The error table: measured against synthetic latency per matched point (threads, offered QPS),
with each error's standard error from resampling both sides' blocks; later rounds pooled
(the synthetic workload out of sample) and the app against itself, each point judged within
its floor, beyond it or unresolved.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import TaillabError
from ..hlog import Dist
from ..results import Results, load, numeric

STATS = ("mean", "p95", "p99")


# TailWAG's average validation error (Fig. 8: one worker, 20/50/70 % load).
TAILWAG_ERROR = {"mean": 0.062, "p95": 0.019, "p99": 0.073}


# This project's goal for the same comparison.
GOAL = {"mean": 0.03, "p95": 0.02, "p99": 0.05}


LOADS = (0.2, 0.5, 0.7)


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
            off = f"service mean {pct_text(svc)}"
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


def pct_text(v: float) -> str:
    return "–" if not math.isfinite(v) else f"{100 * v:+.1f}%"
