"""The host's speed of the moment (synth's ``speed=``): the wander of the mean service."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..mixture import duration_spec
from .cold import _means_keep
from .common import _by_send_time, _fcfs, _in_order, _stats3
from .config import current

#: Decimal places of a written speed factor (0.1 % steps).
FACTOR_DIGITS = 3


def _stretches(series, every_ns: float) -> np.ndarray:
    """The stretch of every measured request (order of :func:`_served`): its start's
    ``every_ns``-long slice of its run's wall time, numbered across all runs."""
    out, base = [], 0
    for _, st, _, keep in series:
        w = ((st - st[0]) // every_ns).astype(np.int64)
        out.append(w[keep] + base)
        base += int(w[-1]) + 1 if len(w) else 0
    return np.concatenate(out) if out else np.zeros(0, np.int64)


@dataclass(frozen=True)
class _Stretches:
    """The stretches of one load (see :func:`_stretch_factors`)."""

    ids: np.ndarray  # stretch numbers with enough requests, sorted
    f: np.ndarray  # their mean over the load's
    n: np.ndarray  # their requests
    spread: float  # variance of f
    excess: float  # spread less sampling's (each stretch's variance / n), >= 0
    noise: float  # sampling's mean variance of f

    def shrink(self, cv: float | None = None) -> float:
        """The share of a factor's deviation that is the speed's (up to ``cv``)."""
        if self.spread <= 0 or self.excess <= 0:
            return 0.0
        wander = math.sqrt(self.excess) if cv is None else min(math.sqrt(self.excess), cv)
        return wander / math.sqrt(self.spread)

    def per_request(self, win: np.ndarray, shrink: float) -> np.ndarray:
        """Each request's stretch factor, shrunk towards 1; 1 in a stretch of too few."""
        if not len(self.ids):
            return np.ones(len(win))
        g = 1 + (self.f - self.f.mean()) * shrink
        pos = np.minimum(np.searchsorted(self.ids, win), len(self.ids) - 1)
        return np.where(self.ids[pos] == win, g[pos], 1.0)


def _bulk(x: np.ndarray, use: np.ndarray) -> np.ndarray:
    """``use`` without the load's slowest ``speed_trim`` of it (see there)."""
    if not use.any():
        return use
    return use & (x <= np.quantile(x[use], 1 - current().speed_trim))


def _stretch_factors(x: np.ndarray, win: np.ndarray, use: np.ndarray) -> _Stretches:
    """Per stretch ``win`` of one load with at least ``speed_min_requests`` requests in
    ``use`` (its slowest ``speed_trim`` left out): its mean of ``x`` over the load's, and
    how much of their spread sampling alone would give."""
    use = _bulk(x, use)
    ids, inv = np.unique(win[use], return_inverse=True)
    xs = x[use]
    n = np.bincount(inv)
    mean = np.bincount(inv, xs) / n
    var = np.maximum(np.bincount(inv, xs * xs) / n - mean**2, 0)
    ok = n >= current().speed_min_requests
    mu = xs.mean()
    f, noise = mean[ok] / mu, var[ok] / n[ok] / mu**2
    many = len(f) > 1
    spread = float(f.var()) if many else 0.0
    return _Stretches(
        ids[ok],
        f,
        n[ok],
        spread,
        max(spread - float(noise.mean()), 0.0) if many else 0.0,
        float(noise.mean()) if len(f) else 0.0,
    )


def fit_speed(
    k: np.ndarray,
    warm: np.ndarray,
    win: np.ndarray,
    use: np.ndarray,
    every_ns: float | None = None,
    heaviest: int | None = None,
):
    """The host's speed of the moment from the warm service times (synth's ``speed=``).

    On a shared host an app's mean service moves by tens of percent for seconds at a time
    (the memory system's speed: other guests), and the queue is convex in the load, so such
    an app queues more than a steady one with its mean service. Per point, each stretch's
    (``win``: ``every_ns`` long) mean warm service over the point's: the spread of these factors,
    less what sampling alone gives (each stretch's variance / n), is the speed's. The point
    with the most requests per stretch (the heaviest load, where the queue feels it) sets
    the factors: its stretches' factors shrunk towards 1 by the share of their spread that
    is the speed's, summarised as ``speed_factors`` quantiles of mean 1.
    ``use``: the requests the means are taken over (pause hits and the slowest few out).
    ``heaviest``: the point index that sets the factors (default: the one with the most
    requests per stretch). Returns the document and per request the factor that takes the
    speed the synthetic workload adds back out of the mixture's service times (at every
    point no more than its own wander; 1 where none).
    """
    every_ns = every_ns or current().speed_every_ns
    out: dict[str, Any] = {"every_ns": every_ns, "points": []}
    per = {}
    for i in np.unique(k):
        st = per[i] = _stretch_factors(warm, win, (k == i) & use)
        out["points"].append(
            {
                "index": int(i),
                "stretches": len(st.f),
                "requests_per_stretch": float(np.median(st.n)) if len(st.n) else 0.0,
                "cv": math.sqrt(st.excess),
                "noise_cv": math.sqrt(st.noise),
            }
        )
    i = (
        heaviest
        if heaviest in per
        else max(per, key=lambda j: np.median(per[j].n) if len(per[j].n) else 0.0)
    )
    heavy = per[i]
    cv = math.sqrt(heavy.excess)
    out["heaviest"] = int(i)
    out["cv"] = cv
    out["factors"] = None
    divide = np.ones(len(warm))
    if (
        len(heavy.f) < current().speed_min_stretches
        or cv < current().speed_min_cv
        or heavy.spread < current().speed_min_ratio * heavy.noise
    ):
        return out, divide
    g = 1 + (heavy.f - heavy.f.mean()) * heavy.shrink()
    n = current().speed_factors
    # Equal-weight quantiles: the middle of each n-th of the stretches.
    q = np.quantile(g, (np.arange(n) + 1 / 2) / n)
    out["factors"] = [round(float(v), FACTOR_DIGITS) for v in q / q.mean()]
    for j, st in per.items():
        m = k == j
        divide[m] = st.per_request(win[m], st.shrink(cv))
    return out, divide


def _deal(factors: np.ndarray, stretches: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per request, the factor of its stretch, dealt as synth deals them: shuffled cycles."""
    n = len(factors)
    count = int(stretches.max()) + 1 if len(stretches) else 0
    order = np.concatenate([rng.permutation(n) for _ in range(count // n + 1)])
    return factors[order[stretches]]


def speed_share(
    dfs: list[pd.DataFrame],
    factors: np.ndarray,
    workers: int,
    pause_ns: float | None = None,
    seed: int = 0,
    every_ns: float | None = None,
):
    """How much of the measured wander queues as the app's own order does.

    A wander the cold-start term already explains (a worker warm in a busy stretch serves
    faster: fast stretches are the busy ones, and the queue gains little from them) or one
    of requests that come at quiet moments does not lengthen the queue as much as the same
    wander laid on the host's clock would. So the point's runs are replayed through a FCFS
    queue at their send times with their service times taken out of their stretches' wander
    (``share`` of it), pooled, shuffled and multiplied by ``factors`` shrunk to ``share``
    and dealt per stretch as synth deals them; the share whose mean, p95 and p99 come
    closest to the runs replayed in their own order is the one modelled (of those within
    ``speed_tie`` of it, the least: replays are draws too). Requests a stop-the-world pause
    hit (``pause_ns``) serve the median of the others on both sides: the pause model's.
    The slowest ``speed_trim`` of the point (checkpoints, reclaimer sweeps) keep their
    places and only take the dealt factor: shuffled, regularly spaced slow requests come in
    clumps, which queue more than the app's order at every share.
    """
    every_ns = every_ns or current().speed_every_ns
    rng = np.random.default_rng(seed)
    runs = []
    for df in dfs:
        a, sv, m = _by_send_time(df)
        st = ((a - a[0]) // every_ns).astype(np.int64)
        if pause_ns:
            hit = sv >= pause_ns
            sv = np.where(hit, np.median(sv[~hit]), sv)
            own = _fcfs(a, sv, workers)[m]
        else:
            own = _in_order(df, a, sv, m, workers)
        runs.append((own, a, sv, m, st))
    target = _stats3(np.concatenate([own for own, *_ in runs]))
    # The stretches' wander as fit_speed measures it, over all the point's runs.
    base = np.cumsum([0] + [int(r[4].max()) + 1 for r in runs[:-1]])
    win = np.concatenate([r[4] + off for r, off in zip(runs, base, strict=True)])
    allsv = np.concatenate([r[2] for r in runs])
    measured = np.concatenate([r[3] for r in runs])
    use = measured & _means_keep(allsv)
    wand = _stretch_factors(allsv, win, use)
    wander = wand.per_request(win, wand.shrink())
    slow = allsv > np.quantile(allsv[use], 1 - current().speed_trim)
    cfg = current()
    need = math.ceil(cfg.speed_replayed / max(int(measured.sum()), 1))
    shuffles = int(np.clip(need, cfg.speed_min_shuffles, cfg.speed_max_shuffles))
    tried = []
    for share in current().speed_shares:
        q = 1 + (factors - 1) * share
        errs = []
        for _ in range(shuffles):
            steady = allsv / (1 + (wander - 1) * share)
            steady[~slow] = rng.permutation(steady[~slow])
            got, at = [], 0
            for _, a, sv, m, st in runs:
                draw = steady[at : at + len(sv)] * _deal(q, st, rng)
                at += len(sv)
                got.append(_fcfs(a, draw, workers)[m])
            errs.append(_stats3(np.concatenate(got)) / target - 1)
        e = np.mean(errs, axis=0)
        stats = dict(zip(("mean", "p95", "p99"), e.tolist(), strict=True))
        tried.append({"share": share, "error": stats})
    err = [float(np.mean(np.abs(list(t["error"].values())))) for t in tried]
    bound = min(err) * (1 + current().speed_tie) + current().speed_tie_points
    return next(t["share"] for t, e in zip(tried, err, strict=True) if e <= bound), tried


def _replay_error(sp: dict[str, Any]) -> float:
    """The mean |error| of mean, p95 and p99 of a speed's replay at its chosen share."""
    t = next(t for t in sp["replay"] if t["share"] == sp["share"])
    return float(np.mean(np.abs(list(t["error"].values()))))


def _speed_of_the_moment(k, warm, series, use, recs, points, workers, pause_ns):
    """:func:`fit_speed` and :func:`speed_share` at every stretch length of
    ``speed_everies_ns``; the length whose replay comes closest to the app's own order wins
    (``speed_every_ns`` unless another, at a share above 0, errs less by more than
    ``speed_tie``). Returns the
    chosen document (with ``every_tried``: each length's wander, share and replay error) and
    its per-request divide."""
    tried = {}
    # Every length is judged at the same load, the one with the most requests per second:
    # a stretch longer than a block holds one block's requests whatever its load.
    heaviest = _busiest(series)
    for every in current().speed_everies_ns:
        sp, divide = fit_speed(k, warm, _stretches(series, every), use, every, heaviest)
        if sp["factors"]:
            heavy = dict(recs)[points[sp["heaviest"]]]
            sp["share"], sp["replay"] = speed_share(
                heavy, np.array(sp["factors"]), workers, pause_ns, every_ns=every
            )
        tried[every] = (sp, divide)
    scored = {e: _replay_error(sp) for e, (sp, _) in tried.items() if sp["factors"]}
    chosen = current().speed_every_ns
    # Only a length whose replay keeps some of its wander is a model of its own: at share 0
    # every length replays the same independent draws, and their errors differ by chance.
    kept = {e: v for e, v in scored.items() if tried[e][0]["share"] > 0}
    if kept:
        best = min(kept, key=kept.get)
        own = kept.get(current().speed_every_ns, scored.get(current().speed_every_ns))
        if own is None or kept[best] * (1 + current().speed_tie) + current().speed_tie_points < own:
            chosen = best
    sp, divide = tried[chosen]
    sp["every_tried"] = [
        {
            "every_ns": e,
            "cv": t["cv"],
            "share": t.get("share"),
            "error": scored.get(e),
        }
        for e, (t, _) in tried.items()
    ]
    return sp, divide


def _busiest(series) -> int:
    """The point index whose runs served the most measured requests per second."""
    n: dict[int, float] = {}
    t: dict[int, float] = {}
    for i, st, _, keep in series:
        if keep.sum() > 1:
            n[i] = n.get(i, 0.0) + float(keep.sum())
            t[i] = t.get(i, 0.0) + float(st[keep].max() - st[keep].min())
    return max(n, key=lambda i: n[i] / t[i] if t[i] > 0 else 0.0) if n else 0


def _speed_setting(sp: dict[str, Any]) -> str:
    return "/".join(f"{v:g}" for v in sp["factors"]) + f",every={duration_spec(sp['every_ns'])}"
