"""Verdicts that hold: a 95 % interval for each statistic a rule judges, from its points'
repeated runs, and a three-valued comparison of that interval with the rule's threshold.

Why: a rule that compares one run's number with a threshold is only as steady as that run; one
stall of the host moves a p99 by tens of per cent and can flip a verdict between two full runs
of the same item. The full variant (``taillab reproduce ID``) runs each point at least three
times with fresh seeds (cli/src/reproduce.rs), and a condition

* **holds** when its whole interval is on the claimed side of the threshold,
* **fails** when its whole interval is on the other side,
* is **unresolved** otherwise: these runs cannot tell. A half-width shrinks about as 1/√runs,
  so about ``runs × (half-width ÷ distance to the threshold)²`` runs would resolve it
  (:func:`runs_to_resolve`).

The intervals:

* **A quantile of one point** (:meth:`Judge.quantile`): the runs' histograms added and the
  distribution-free order-statistic interval of the quantile (:func:`quantile_interval`, exact
  for independent requests), widened to the runs' bootstrap interval where that is wider: a
  queue's requests are not independent and a stall of the host moves a whole run, which only
  the spread between runs shows.
* **Any other statistic** (:meth:`Judge.estimate`: a ratio of two points' quantiles, a
  difference, a mean, the worst of several points): a percentile bootstrap over runs
  (:func:`bootstrap_interval`), each point's runs drawn with replacement, the statistic
  recomputed from each draw (2000 draws from a fixed seed: a page is the same each time it is
  written). With k runs the bootstrap's spread is short by √((k−1)/k) (the attribution's
  correction too) and its tails are the normal's where k runs leave Student's t with k − 1
  degrees of freedom, so both arms are stretched about the estimate by
  t₀.₉₇₅,ₖ₋₁ ÷ z₀.₉₇₅ × √(k/(k−1)) (2.69 at 3 runs, 1.33 at 10): for a mean, the width of its
  t-interval. A positive statistic is stretched on the log scale (most are ratios: their arms
  are multiplicative, and an interval of a ratio stays above 0), and its runs to resolve are
  reckoned there too; a statistic that is 0 when the claim is exact (an absolute error, whose
  runs may read 1 % and 4 %) is not a ratio and is stretched as it is (``log=False``): on
  the log scale its upper arm would grow as the estimate nears 0, so an error of 1 % would
  read as unresolved against a bound of 10 %. Coverage on data with a known truth:
  python/tests/test_reproduce_judge.py.

A point's statistic over its runs is that of their histograms added (quantiles, the maximum)
or of their requests together (the mean), else the mean of the runs' own values (what
summary.json alone gives: another number of the run, or a run without histograms).

With one run per point (the quick and smoke variants, or a folder from before the full
variant repeated its points) there is no spread to judge by: each statistic is the point's
number as before (:func:`value`) compared as a point, and the page calls the verdict
indicative. The quick variant is judged that way whatever its runs: its counts are too small
for an interval to mean much.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..hlog import Dist
from ..results import QUANTILE_OF, Results, read_summary

LEVEL = 0.95
# Bootstrap draws per statistic: the 2.5 and 97.5 % points of 2000 draws move by a few per cent
# of the interval's arm between seeds (a normal statistic's: 0.06 σ of its 1.96 σ), well
# inside the stretch below.
RESAMPLES = 2000
# The bootstrap's seed (with the points' ids mixed in, so each statistic draws its own stream
# and a page is the same each time it is written).
SEED = 56

# A condition's outcome.
HOLDS, FAILS, UNRESOLVED, NO_DATA = "holds", "fails", "unresolved", "no data"

# How an estimate's interval was made.
POINT = "point (no interval: one run, or --quick)"
BOOTSTRAP = "bootstrap over runs"
ORDER = "order statistics of the runs together, and their bootstrap"

# The comparisons a check makes, as the page writes them.
OPS = {">=": "≥", ">": ">", "<=": "≤", "<": "<", "within": "within", "factor": "within ×"}


def value(p: pd.Series | dict, metric: str, stat: str) -> float:
    """A point's estimate of ``metric`` ``stat`` (ns): the aggregate's estimate, else the
    statistic of the merged histograms (service times are not among the CI metrics)."""
    for col in (f"{metric}_{stat}", f"merged_{metric}_{stat}"):
        v = p.get(col) if hasattr(p, "get") else None
        try:
            v = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(v):
            return v
    return math.nan


@dataclass(frozen=True)
class Estimate:
    """A statistic's value and its 95 % interval (NaN ends: none, one run), the fewest runs of
    a point it rests on, and how the interval was made."""

    value: float
    lo: float = math.nan
    hi: float = math.nan
    runs: int = 1
    how: str = POINT
    # Whether its interval narrows on the log scale (a positive ratio) or as it is (an
    # absolute error: module doc); runs_to_resolve reckons on the same scale.
    log: bool = True

    @property
    def has_interval(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)

    def scaled(self, k: float) -> Estimate:
        """The estimate times ``k`` > 0 (a quantile ÷ the paper's number)."""
        return Estimate(self.value * k, self.lo * k, self.hi * k, self.runs, self.how, self.log)


@dataclass(frozen=True)
class Check:
    """A statistic compared with a threshold: ``op`` one of :data:`OPS` (``within``: ``bound``
    is (low, high); ``factor``: within ``bound`` times of 1 either way), the outcome, and for an
    unresolved one about how many more runs would resolve it (None: none would, the estimate
    sits on the threshold). ``fmt`` writes the statistic's numbers for the page."""

    est: Estimate
    op: str
    bound: float | tuple[float, float]
    outcome: str
    more_runs: int | None = None
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}"  # noqa: E731

    @property
    def ok(self) -> bool | None:
        """True when it holds, False when it fails, None when unresolved or without data."""
        return {HOLDS: True, FAILS: False}.get(self.outcome)

    def threshold_text(self) -> str:
        if self.op == "within":
            lo, hi = self.bound  # type: ignore[misc]
            return f"within {self.fmt(lo)} – {self.fmt(hi)}"
        if self.op == "factor":
            return f"within {self.fmt(float(self.bound))} either way"  # type: ignore[arg-type]
        return f"{OPS[self.op]} {self.fmt(float(self.bound))}"  # type: ignore[arg-type]

    def interval_text(self) -> str:
        e = self.est
        if not math.isfinite(e.value):
            return "–"
        if not e.has_interval:
            return self.fmt(e.value)
        return f"{self.fmt(e.value)} [{self.fmt(e.lo)}, {self.fmt(e.hi)}]"

    def doc(self) -> dict[str, Any]:
        """What verdict.json keeps of the check."""
        bound = list(self.bound) if isinstance(self.bound, tuple) else self.bound
        return {
            "outcome": self.outcome,
            "value": self.est.value,
            "ci_low": self.est.lo,
            "ci_high": self.est.hi,
            "op": self.op,
            "bound": bound,
            "runs": self.est.runs,
            "interval": self.est.how,
            "more_runs": self.more_runs,
        }


def _range_of(op: str, bound) -> tuple[float, float]:
    """The values a statistic may take for the condition to hold, as a closed range (a strict
    comparison's edge does not matter to an interval)."""
    if op in (">=", ">"):
        return float(bound), math.inf
    if op in ("<=", "<"):
        return -math.inf, float(bound)
    if op == "factor":
        return 1 / float(bound), float(bound)
    if op == "within":
        return float(bound[0]), float(bound[1])
    raise ValueError(f"unknown comparison {op!r}; one of {', '.join(OPS)}")


def _point_holds(v: float, op: str, bound) -> bool:
    """The comparison of one number, as the rules made it before intervals (strict where the
    rule was)."""
    if op == ">=":
        return v >= bound
    if op == ">":
        return v > bound
    if op == "<=":
        return v <= bound
    if op == "<":
        return v < bound
    lo, hi = _range_of(op, bound)
    return lo <= v <= hi


def _log(x: float) -> float:
    return math.log(x) if math.isfinite(x) else x


def _on_scale(est: Estimate, lo: float, hi: float) -> tuple[Estimate, float, float]:
    """The estimate and the allowed range on the scale its interval narrows on: the log of a
    positive statistic against positive bounds (a ratio's arms are multiplicative, as the
    bootstrap stretched them), else as they are."""
    if est.log and est.lo > 0 and all(e > 0 for e in (lo, hi) if math.isfinite(e)):
        logged = Estimate(_log(est.value), _log(est.lo), _log(est.hi), est.runs, est.how)
        return logged, _log(lo) if lo > 0 else lo, _log(hi)
    return est, lo, hi


def runs_to_resolve(est: Estimate, op: str, bound) -> int | None:
    """About how many more runs would put ``est``'s interval wholly on one side of the
    threshold, its arms shrinking as 1/√runs towards the value; None when the value sits on
    the threshold (no number of runs would) or there is no interval."""
    if not (est.has_interval and math.isfinite(est.value)):
        return None
    lo, hi = _range_of(op, bound)
    est, lo, hi = _on_scale(est, lo, hi)
    v = est.value
    if lo <= v <= hi:
        # It looks like holding: each edge of the allowed range inside the interval must
        # leave it, the arm facing it shrunk to the value's distance from it.
        arms = [
            (abs(v - edge), arm)
            for edge, arm in ((lo, v - est.lo), (hi, est.hi - v))
            if est.lo <= edge <= est.hi
        ]
    else:
        # It looks like failing: the interval must leave the allowed range on the near side.
        arms = [(lo - v, est.hi - v)] if v < lo else [(v - hi, v - est.lo)]
    if any(gap == 0 for gap, _ in arms):
        return None
    need = max((est.runs * (arm / gap) ** 2 for gap, arm in arms), default=est.runs)
    return max(1, math.ceil(need) - est.runs)


def compare(est: Estimate, op: str, bound, fmt: Callable[[float], str] | None = None) -> Check:
    """The three-valued comparison of an estimate with a threshold (module doc). Without an
    interval (one run) the value is compared as a point: holds or fails."""
    extra = {"fmt": fmt} if fmt is not None else {}
    lo, hi = _range_of(op, bound)
    v = est.value
    if not math.isfinite(v) or (op == "factor" and v <= 0):
        return Check(est, op, bound, NO_DATA, **extra)
    if not est.has_interval:
        return Check(est, op, bound, HOLDS if _point_holds(v, op, bound) else FAILS, **extra)
    if lo <= est.lo and est.hi <= hi:
        return Check(est, op, bound, HOLDS, **extra)
    if est.hi < lo or est.lo > hi:
        return Check(est, op, bound, FAILS, **extra)
    return Check(est, op, bound, UNRESOLVED, runs_to_resolve(est, op, bound), **extra)


def stretch(k: int, level: float = LEVEL) -> float:
    """How far a percentile bootstrap over k runs is stretched about its estimate (module
    doc): t over z at ``level``, times √(k/(k−1))."""
    from scipy.stats import norm, t

    if k < 2:
        return math.nan
    tail = (1 + level) / 2
    return float(t.ppf(tail, k - 1) / norm.ppf(tail) * math.sqrt(k / (k - 1)))


def bootstrap_interval(
    sizes: Sequence[int],
    stat: Callable[[tuple[tuple[int, ...], ...]], float],
    center: float,
    *,
    level: float = LEVEL,
    resamples: int = RESAMPLES,
    seed: int | Sequence[int] = SEED,
    log: bool = True,
) -> tuple[float, float]:
    """The stretched percentile bootstrap interval of a statistic of several groups of runs
    (``sizes``: each group's run count): ``stat(picks)`` computes it from one draw, ``picks[i]``
    the sorted indexes of group i's runs drawn with replacement; ``center`` is its value on
    every run. NaN ends when a group has one run or most draws give no number. ``log``
    False: stretched as it is even where positive (an absolute error: module doc)."""
    k = min(sizes, default=0)
    if k < 2 or not math.isfinite(center):
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = [np.sort(rng.integers(0, n, size=(resamples, n)), axis=1) for n in sizes]
    reps = np.array(
        [stat(tuple(tuple(int(i) for i in d[b]) for d in draws)) for b in range(resamples)]
    )
    reps = reps[np.isfinite(reps)]
    if len(reps) < resamples / 2:
        return math.nan, math.nan
    tail = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(reps, [tail, 1 - tail]))
    s = stretch(k, level)
    if log and center > 0 and lo > 0:
        # A positive statistic (most are ratios) is stretched on the log scale: its arms are
        # multiplicative, and a ratio's interval stays above 0.
        down, up = max(math.log(center / lo), 0.0), max(math.log(hi / center), 0.0)
        return center * math.exp(-s * down), center * math.exp(s * up)
    low = center - s * max(center - lo, 0.0)
    if not log and center >= 0 and reps.min() >= 0:
        # An absolute error is never below 0: its stretched arm stops there.
        low = max(low, 0.0)
    return low, center + s * max(hi - center, 0.0)


def quantile_interval(dists: Sequence[Dist], q: float, level: float = LEVEL) -> Estimate:
    """A quantile of the runs' histograms added, with its order-statistic interval."""
    pooled = Dist.merge(list(dists))
    if not pooled.total:
        return Estimate(math.nan, runs=len(dists))
    lo, hi = pooled.quantile_ci(q, level)
    return Estimate(float(pooled.quantile(q)), lo, hi, len(dists), ORDER)


class PointRuns:
    """One point's runs, for statistics over any multiset of them (a bootstrap draw): their
    histograms added, their requests' mean, or the mean of a number each run's summary.json
    gives. Values are cached per multiset (three runs have ten)."""

    def __init__(self, res: Results | None, row: pd.Series | dict):
        self.row = row
        runs = res.runs[res.runs["point"] == row.get("point")] if res is not None else None
        self.res, self.runs = res, runs if runs is not None else pd.DataFrame()
        self._cache: dict[tuple, float] = {}
        self._summaries: list[dict] | None = None

    def __len__(self) -> int:
        return len(self.runs)

    def summaries(self) -> list[dict]:
        if self._summaries is None:
            paths = self.runs["path"] if "path" in self.runs else []
            self._summaries = [read_summary(p) for p in paths]
        return self._summaries

    def _column(self, col: str, pick: tuple[int, ...]) -> np.ndarray:
        """The picked runs' values of a column of ``Results.runs`` (NaN where it has none)."""
        if col not in self.runs:
            return np.full(len(pick), np.nan)
        return pd.to_numeric(self.runs[col], errors="coerce").to_numpy(float)[list(pick)]

    def _dist(self, metric: str, pick: tuple[int, ...]) -> Dist:
        ks = self.runs["run"].to_numpy()
        dists = [self.res.histogram(metric, point=self.row["point"], run=ks[i]) for i in pick]
        return Dist.merge(dists) if all(d.total for d in dists) else Dist.empty()

    def stat(self, metric: str, stat: str, pick: tuple[int, ...]) -> float:
        key = ("stat", metric, stat, pick)
        if key not in self._cache:
            self._cache[key] = self._stat(metric, stat, pick)
        return self._cache[key]

    def _stat(self, metric: str, stat: str, pick: tuple[int, ...]) -> float:
        own = self._column(f"{metric}_{stat}", pick)
        if stat == "mean":
            w = self._column(f"{metric}_count", pick)
            if np.isfinite(w).all() and w.sum() > 0:
                return float(np.sum(own * w) / w.sum())
        elif stat in QUANTILE_OF or stat in ("max", "min"):
            d = self._dist(metric, pick)
            if d.total:
                if stat in QUANTILE_OF:
                    return float(d.quantile(QUANTILE_OF[stat]))
                return d.max if stat == "max" else d.min
        return float(np.mean(own)) if np.isfinite(own).all() else math.nan

    def pooled(self, metric: str, stat: str, pick: tuple[int, ...]) -> float:
        """A quantile (or the max) of the picked runs' histograms added; NaN without them."""
        key = ("pooled", metric, stat, pick)
        if key not in self._cache:
            d = self._dist(metric, pick) if pick else Dist.empty()
            v = math.nan
            if d.total and stat in QUANTILE_OF:
                v = float(d.quantile(QUANTILE_OF[stat]))
            elif d.total and stat == "max":
                v = d.max
            self._cache[key] = v
        return self._cache[key]

    def number(self, path: tuple[str, ...], pick: tuple[int, ...]) -> float:
        """The mean over the picked runs that give it of a number of their summary.json."""
        key = ("number", path, pick)
        if key not in self._cache:
            sums = self.summaries()
            vals = [_at(sums[i], path) for i in pick]
            vals = [v for v in vals if math.isfinite(v)]
            self._cache[key] = float(np.mean(vals)) if vals else math.nan
        return self._cache[key]


def _at(doc: Any, path: tuple[str, ...]) -> float:
    for k in path:
        doc = doc.get(k) if isinstance(doc, dict) else None
    return float(doc) if isinstance(doc, int | float) and not isinstance(doc, bool) else math.nan


class View:
    """A statistic's window on one point: all its runs (``pick`` None: the point's numbers as
    the rules read them before intervals) or a bootstrap's draw of them."""

    def __init__(self, runs: PointRuns, pick: tuple[int, ...] | None):
        self._runs, self.pick = runs, pick

    @property
    def row(self) -> pd.Series | dict:
        """The point's own row (its load, rate, axes): not resampled."""
        return self._runs.row

    def run_ids(self) -> list:
        """The view's runs as ``Results.runs`` names them (its ``run`` column; a run drawn
        twice, twice): for a number a rule reads per run from elsewhere (the resource table)."""
        runs = self._runs.runs
        ids = runs["run"].tolist() if "run" in runs else []
        pick = self.pick if self.pick is not None else range(len(ids))
        return [ids[i] for i in pick]

    def stat(self, metric: str, stat: str) -> float:
        """``metric``'s ``stat`` (ns) over the view's runs (module doc)."""
        if self.pick is None:
            return value(self._runs.row, metric, stat)
        return self._runs.stat(metric, stat, self.pick)

    def pooled(self, metric: str, stat: str) -> float:
        """``metric``'s ``stat`` of the view's runs' histograms added, as a rule that reads
        the histograms reads it with one run too (NaN without histograms)."""
        pick = self.pick if self.pick is not None else tuple(range(len(self._runs)))
        return self._runs.pooled(metric, stat, pick)

    def number(self, *path: str) -> float:
        """A number of the runs' summary.json (``"ideal", "ratio", "p99"``), averaged over
        the view's runs that give it."""
        pick = self.pick if self.pick is not None else tuple(range(len(self._runs)))
        return self._runs.number(tuple(path), pick)

    def mean_of(self, fn: Callable[[dict], float]) -> float:
        """``fn`` of each of the view's runs' summary.json, averaged over those it gives a
        number for (NaN: none)."""
        pick = self.pick if self.pick is not None else tuple(range(len(self._runs)))
        sums = self._runs.summaries()
        vals = [_num(fn(sums[i])) for i in pick]
        vals = [v for v in vals if math.isfinite(v)]
        return float(np.mean(vals)) if vals else math.nan


class Judge:
    """An item's statistics with their intervals, from its points' runs (module doc).
    ``repeated`` False (the quick variant): every statistic as a point."""

    def __init__(self, results: dict[str, Results], repeated: bool = True):
        self.results, self.repeated = results, repeated
        self._runs: dict[tuple[str, str], PointRuns] = {}

    def runs(self, p: pd.Series | dict) -> PointRuns:
        key = (str(p.get("stem")), str(p.get("point")))
        if key not in self._runs:
            self._runs[key] = PointRuns(self.results.get(key[0]), p)
        return self._runs[key]

    def _fewest(self, points: Sequence) -> int:
        return min((len(self.runs(p)) for p in points), default=0)

    def judged(self, points: Sequence) -> bool:
        """Whether statistics of these points get an interval (repeated runs, full variant)."""
        return self.repeated and self._fewest(points) >= 2

    def estimate(self, points: Sequence, fn: Callable[..., float], log: bool = True) -> Estimate:
        """``fn(*views)`` — one :class:`View` per point — with its bootstrap interval (``log``
        False: an absolute error's, stretched as it is; module doc)."""
        runs = [self.runs(p) for p in points]
        k = self._fewest(points)
        if not self.judged(points):
            return Estimate(_num(fn(*(View(r, None) for r in runs))), runs=max(k, 1), log=log)
        every = [View(r, tuple(range(len(r)))) for r in runs]
        center = _num(fn(*every))
        ids = "|".join(f"{r.row.get('stem')}/{r.row.get('point')}" for r in runs)

        def stat(picks):
            return _num(fn(*(View(r, pk) for r, pk in zip(runs, picks, strict=True))))

        seed = (SEED, zlib.crc32(ids.encode()))
        lo, hi = bootstrap_interval([len(r) for r in runs], stat, center, seed=seed, log=log)
        return Estimate(center, lo, hi, k, BOOTSTRAP if math.isfinite(lo) else POINT, log)

    def quantile(self, p: pd.Series | dict, metric: str, stat: str) -> Estimate:
        """One point's quantile: order statistics of its runs together, widened to their
        bootstrap (module doc)."""
        boot = self.estimate([p], lambda v: v.stat(metric, stat))
        r = self.runs(p)
        if not self.judged([p]) or stat not in QUANTILE_OF:
            return boot
        every = tuple(range(len(r)))
        dists = [r._dist(metric, (i,)) for i in every]
        order = quantile_interval(dists, QUANTILE_OF[stat])
        if not order.has_interval:
            return boot
        lo, hi = np.nanmin([order.lo, boot.lo]), np.nanmax([order.hi, boot.hi])
        return Estimate(order.value, float(lo), float(hi), len(r), ORDER)

    def check(
        self,
        points: Sequence,
        fn: Callable[..., float],
        op: str,
        bound,
        fmt: Callable[[float], str] | None = None,
        log: bool = True,
    ) -> Check:
        """:meth:`estimate` compared with a threshold (:func:`compare`)."""
        return compare(self.estimate(points, fn, log), op, bound, fmt)


def _num(v: Any) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan
