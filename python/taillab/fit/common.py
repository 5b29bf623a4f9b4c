"""What the parts of the fit share: its error, reading a point's records, the FCFS replay."""

from __future__ import annotations

import heapq
import math
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TaillabError
from ..hlog import Dist
from ..mixture import Component
from ..results import Results, _read_requests, read_summary, requests_file

SCHEMA = "taillab.fit/1"
#: Fewer measured requests than this are too few to fit (the CLI's message says so).
MIN_REQUESTS = 1000
#: The most components a mixture may have (synth's specs and the CLI's 1..5).
MAX_COMPONENTS = 5
#: The quantiles a fit's goodness reports.
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "p999": 0.999}
#: The sojourn tails every replay compares, beside the mean.
TAILS = (0.95, 0.99)
#: The lower quartile, median and upper quartile: the fit's robust spreads.
QUARTILES = (0.25, 0.5, 0.75)
#: A normal distribution's interquartile range is 1.349 standard deviations: IQR / 1.349 is
#: a robust sd (and over the median, a robust cv).
NORMAL_IQR_SD = 1.349
#: The least log-variance of a component: a constant service time has none, which no
#: density has.
MIN_LOG_VAR = 1e-6
#: The fewest of anything (points, groups, runs, blocks, components, short or long gaps) that a
#: spread, a line or a comparison can be drawn from.
MIN_TO_COMPARE = 2
#: Nanoseconds per millisecond and per second.
NS_PER_MS, NS_PER_S = 1e6, 1e9


class FitError(TaillabError):
    """The data cannot be fitted (too few requests, no service time); says why."""


def _positive(dist: Dist) -> tuple[Dist, int]:
    """The histogram without zero-length service times (ln 0 is undefined), and their count."""
    keep = dist.hi > 0
    zeros = int(dist.count[~keep].sum())
    return Dist(dist.lo[keep], dist.hi[keep], dist.count[keep]), zeros


def _point_records(res: Results, point: str) -> list[pd.DataFrame] | None:
    """The per-request records of every run of the point; None unless every run saved them."""
    runs = res.runs[res.runs["point"] == point]
    paths = [requests_file(Path(p)) for p in runs["path"]]
    if paths and all(p is not None for p in paths):
        return [_read_requests(p) for p in paths]
    return None


def measured_service(
    res: Results, point: str, dfs: list[pd.DataFrame] | None = None
) -> tuple[Dist, str]:
    """The point's measured service times and where they came from ("requests"/"histogram").

    Per-request records (``dfs``, read here when not given) are used only when every run of
    the point saved them, so a point never mixes exact values with histogram buckets.
    """
    dfs = dfs if dfs is not None else _point_records(res, point)
    if dfs is not None:
        vals = [
            (df[df["measured"] == 1] if "measured" in df else df)["service"].to_numpy()
            for df in dfs
        ]
        return Dist.from_values(np.concatenate(vals)), "requests"
    return res.histogram("service", point=point), "histogram"


def _one(lo: int, hi: int) -> str:
    """``N`` or ``N-M``, as synth's gaps and counts are written."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _range_of(g: np.ndarray) -> tuple[int, int]:
    """A uniform range of request counts from the quartiles of ``g`` (robust to strays):
    the uniform with these quartiles, its ends half an interquartile range out."""
    q25, _, q75 = np.quantile(g, QUARTILES)
    lo = max(1, math.floor(q25 - (q75 - q25) / 2))
    return lo, max(lo, math.ceil(q75 + (q75 - q25) / 2))


def _lognormal_of(x: np.ndarray) -> Component:
    """A log-normal component (weight 1) with the log-mean and log-variance of ``x``."""
    lx = np.log(np.maximum(x, 1.0))
    return Component(1.0, float(lx.mean()), max(float(lx.var()), MIN_LOG_VAR))


def _fcfs(arrivals: np.ndarray, service: np.ndarray, workers: int) -> np.ndarray:
    """Sojourn times of a FCFS queue with ``workers`` servers (arrivals sorted)."""
    if workers <= 1:
        # Lindley's recursion finish_i = max(a_i, finish_(i-1)) + s_i, unrolled: with S the
        # running sum of service, finish_i = S_i + max over j <= i of (a_j - S_(j-1)).
        a = np.asarray(arrivals, dtype=float)
        total = np.cumsum(np.asarray(service, dtype=float))
        before = np.concatenate(([0.0], total[:-1]))
        return total + np.maximum.accumulate(a - before) - a
    out = np.empty(len(arrivals))
    heap = [-math.inf] * workers
    for i, (a, s) in enumerate(zip(arrivals.tolist(), service.tolist(), strict=True)):
        start = max(a, heapq.heappop(heap))
        heapq.heappush(heap, start + s)
        out[i] = start + s - a
    return out


def _stats3(x: np.ndarray) -> np.ndarray:
    """Mean, p95 and p99 of ``x``."""
    return np.array([x.mean(), *np.quantile(x, TAILS)])


def _by_send_time(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A run's intended send times (sorted), service times and measured mask in that order."""
    g = df.sort_values("intended", kind="stable")
    m = (g["measured"] == 1).to_numpy() if "measured" in g else np.ones(len(g), bool)
    return (
        g["intended"].to_numpy(dtype=float),
        (g["finished"] - g["started"]).to_numpy(dtype=float),
        m,
    )


def _in_order(df: pd.DataFrame, a: np.ndarray, s: np.ndarray, m: np.ndarray, workers: int):
    """The measured requests' sojourns with the run's service times replayed in their order
    through a shared FCFS queue of ``workers`` (``a``, ``s``, ``m`` from
    :func:`_by_send_time`): the run's own ideal, which the harness recorded per request
    (``ideal_completed``, from ``taillab_core::ideal``) and is used when present."""
    if "ideal_completed" in df:
        ideal = df.sort_values("intended", kind="stable")["ideal_completed"].to_numpy(dtype=float)
        if (ideal >= a).all():
            return (ideal - a)[m]
    return _fcfs(a, s, workers)[m]


def _below(dist: Dist, limit_ns: float) -> tuple[Dist, int]:
    """``dist`` without its buckets at or above ``limit_ns``, and how many were dropped."""
    keep = dist.hi < limit_ns
    return Dist(dist.lo[keep], dist.hi[keep], dist.count[keep]), int(dist.count[~keep].sum())


def _queue_of(run_dir: Path) -> tuple[str, str]:
    """(discipline, dispatch) of a run, from its summary (defaults: fifo, shared)."""
    doc = read_summary(run_dir)
    return str(doc.get("discipline", "fifo")), str(doc.get("dispatch", "shared"))


def _records(res: Results, points: list[str]) -> list[tuple[str, list[pd.DataFrame]]]:
    """Per point, the runs' request records (all requests, warmup included: it warms too)."""
    out = []
    for pid in points:
        runs = res.runs[res.runs["point"] == pid]
        paths = [requests_file(Path(p)) for p in runs["path"]]
        if not paths or not all(p is not None for p in paths):
            raise FitError(
                f"point {pid} has no per-request records; a fit across loads needs them "
                "(re-run with --save-requests)"
            )
        out.append((pid, [_read_requests(p) for p in paths]))
    return out


def _plain(v):
    """numpy/pandas scalars as JSON-able Python values (NaN as None)."""
    if v is None:
        return None
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return None if not math.isfinite(float(v)) else float(v)
    return v


def _clean(v):
    """JSON-safe: NaN and infinities (a metric the runs lack) become null."""
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(name))
