"""Fit measured service times with a mixture of log-normal components (TailWAG's first step).

A workload generator stands in for an app only if its service times have the app's
distribution. Real service times are skewed and often multi-modal (a fast path and a slow
path, a rare very slow request), so we fit a *mixture of log-normals*: the logarithm of the
service time is a mixture of Gaussians, which maximum likelihood fits well with EM. We use
scikit-learn's ``GaussianMixture`` on ln(ns) for k = 1..5 components and keep the k with the
lowest BIC (Bayesian information criterion: log-likelihood penalised by 3 parameters per
component times ln n / 2), so a second mode is added only when the data carry it.

Data: a run's per-request records (``requests.csv``, measured requests only) when every run
of the point has them, else its service histogram (``hist/service.hlog``), whose buckets are
at most 0.1 % wide. Both become a sparse histogram; EM sees up to ``max_samples`` draws from
it, each spread uniformly over its bucket (an integer ns record stands for [v, v+1)), so
discrete values cannot attract a degenerate zero-width component. Goodness of fit is measured
on *all* the data: the Kolmogorov–Smirnov distance between the measured and fitted CDFs, and
the relative error of the fitted mean, p50, p95, p99 and p99.9.

Each component is reported as TailWAG's Table 2 does — weight, mean and variance — where the
variance is that of ln(service time) (σ²): Table 2's values (e.g. 0.007 for an img-dnn whose
service times all lie within 0.35–0.45 ms) only make sense in log space. We add the
component's mean and median in ns and its coefficient of variation √(e^σ² − 1). The synth
spec writes each component as ``lognormal:MEAN,cv=CV``, the form ``taillab_core::dist``
parses, with 4 significant digits (≤ 0.05 % rounding).

Order. A mixture draws every request independently; an app need not. Two checks use the
per-request records (when every run saved them):

* ``order``: the run's own service times replayed, in their order and then shuffled, through
  a FCFS queue with the run's worker count at the run's intended arrival times. If the
  shuffled replay queues differently from the one in order, no independent draw can match
  the app, however good the fitted distribution (oltp-disk: shuffling its service times
  raised the replayed p99 at 70 % load from 7.0 to 14.6 ms).
* ``periodic``: a rare component (at most 10 % of requests) whose requests come at regular
  gaps in the server's start order — a robust gap cv (interquartile range / 1.349 / median,
  gaps split by a stray member joined again) of at most 0.25, where independent draws give
  about 0.5 — is a checkpoint, a log rotation, a flush: work due every so many requests. It
  leaves the mixture and becomes synth's ``periodic=requests:N-M,for=DIST`` (gaps drawn
  uniformly in N..M: the uniform with the measured gaps' quartiles).

What a fit can and cannot see (for calibrating synth's locks and noise):

* The *queue/service split* of the run (mean sojourn = send lag + queue + service + the rest)
  is reported. Queueing is the harness's to reproduce; only service is fitted.
* Critical sections inside the app are part of its measured service time. At one worker they
  cost nothing extra; their contention shows only as service growth with the worker count,
  which a fit of one point cannot separate. Compare fits at 1 and N workers to size
  ``recv_lock``/``send_lock``.
* Disturbances that hit a worker while it served (interrupts, preemption) are inside the
  measured service times and so inside the fitted mixture (often as a small slow
  component). The run's environment section gives host-wide interrupt and preemption rates
  and CPU shares; they are reported as ``noise_hints`` (a ``noise=`` spec with the mean
  disturbance length they imply) for what-if studies. Adding them to a fitted spec counts
  them twice.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import html
from .errors import TaillabError
from .figures import service_fit
from .hlog import Dist
from .html import esc
from .mixture import Component, Mixture, duration_spec, lognormal_spec
from .results import (
    RUN_SCHEMA,
    Results,
    _read_requests,
    load,
    read_json,
    read_summary,
    requests_file,
)
from .units import fmt_ns

SCHEMA = "taillab.fit/1"
MIN_REQUESTS = 1000
MAX_COMPONENTS = 5
QUANTILES = {"p50": 0.5, "p95": 0.95, "p99": 0.99, "p999": 0.999}


class FitError(TaillabError):
    """The data cannot be fitted (too few requests, no service time); says why."""


# --- fitting -----------------------------------------------------------------------------


def _positive(dist: Dist) -> tuple[Dist, int]:
    """The histogram without zero-length service times (ln 0 is undefined), and their count."""
    keep = dist.hi > 0
    zeros = int(dist.count[~keep].sum())
    return Dist(dist.lo[keep], dist.hi[keep], dist.count[keep]), zeros


def _draw_log(dist: Dist, max_samples: int, rng: np.random.Generator) -> np.ndarray:
    """ln of up to ``max_samples`` values drawn from the histogram, spread over each bucket."""
    total = dist.total
    if total <= max_samples:
        idx = np.repeat(np.arange(len(dist.count)), dist.count)
    else:
        idx = rng.choice(len(dist.count), size=max_samples, p=dist.count / total)
    lo = np.maximum(dist.lo[idx].astype(float), 0.5)
    width = (dist.hi[idx] - dist.lo[idx] + 1).astype(float)
    return np.log(lo + rng.random(len(idx)) * width)


def fit_mixture(
    dist: Dist,
    *,
    components: int | None = None,
    max_components: int = MAX_COMPONENTS,
    max_samples: int = 50_000,
    seed: int = 0,
) -> tuple[Mixture, dict[int, float]]:
    """Maximum-likelihood mixture of log-normals for a histogram of positive ns values.

    ``components`` fixes k; otherwise k in 1..``max_components`` with the lowest BIC (the
    search stops after two k in a row that do not improve it). Returns the mixture and the
    BIC of every k tried.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    if not 1 <= (components or max_components) <= MAX_COMPONENTS:
        raise FitError(f"components must be 1..{MAX_COMPONENTS}")
    x = _draw_log(dist, max_samples, np.random.default_rng(seed))[:, None]
    ks = [components] if components else range(1, max_components + 1)
    # No more components than distinct buckets (a near-constant service time).
    ks = sorted({min(k, len(dist.count)) for k in ks})
    bics: dict[int, float] = {}
    best, worse = None, 0
    # EM here is small numpy work; k-means' thread pool on a shared 2-CPU host only thrashes.
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in ks:
            gm = GaussianMixture(k, n_init=3, max_iter=500, random_state=seed).fit(x)
            bics[k] = float(gm.bic(x))
            if best is None or bics[k] < bics[best[0]]:
                best, worse = (k, gm), 0
            else:
                worse += 1
                if worse == 2:
                    break
    assert best is not None
    gm = best[1]
    comps = sorted(
        (
            Component(float(w), float(m[0]), float(c.ravel()[0]))
            for w, m, c in zip(gm.weights_, gm.means_, gm.covariances_, strict=True)
        ),
        key=lambda c: c.mean_ns,
    )
    return Mixture(tuple(comps)), bics


def goodness(dist: Dist, mix: Mixture) -> dict[str, Any]:
    """KS distance and relative errors of mean and quantiles, fitted vs measured (all data).

    Each bucket [lo, hi] stands for the values in [lo, hi + 1): the empirical CDF is compared
    with the fitted one at both edges of every bucket.
    """
    total = dist.total
    after = np.cumsum(dist.count) / total
    before = after - dist.count / total
    d_hi = np.abs(after - mix.cdf(dist.hi + 1.0))
    d_lo = np.abs(before - mix.cdf(dist.lo.astype(float)))
    errors: dict[str, dict[str, float]] = {}
    rows = [("mean", dist.mean, mix.mean_ns)]
    rows += [(name, dist.quantile(q), mix.quantile(q)) for name, q in QUANTILES.items()]
    for name, measured, fitted in rows:
        errors[name] = {
            "measured_ns": float(measured),
            "fitted_ns": float(fitted),
            "rel_error": float(fitted / measured - 1) if measured else math.nan,
        }
    return {"ks": float(max(d_hi.max(), d_lo.max())), "errors": errors}


def _curves(dist: Dist, bins: int = 60) -> dict[str, list[float]]:
    """The measured density of ln(ns) on log-spaced bins and the CDF, for the fit figure."""
    lo_q, hi_q = dist.quantile(np.array([0.0005, 0.9995]))
    a, b = math.log(max(lo_q, 1.0)), math.log(max(hi_q, lo_q + 1.0))
    pad = 0.1 * (b - a) + 0.05
    edges = np.linspace(a - pad, b + pad, bins + 1)
    mid = np.log((dist.lo + dist.hi) / 2 + 0.5)
    dens, _ = np.histogram(mid, bins=edges, weights=dist.count)
    dens = dens / (dist.total * np.diff(edges))
    grid = np.exp(np.linspace(edges[0], edges[-1], 200))
    cum = np.concatenate([[0], np.cumsum(dist.count)]) / dist.total
    cdf = cum[np.searchsorted(dist.hi, grid, side="right")]
    return {
        "edges_ns": np.exp(edges).tolist(),
        "density": dens.tolist(),
        "cdf_ns": grid.tolist(),
        "cdf": cdf.tolist(),
    }


# --- reading a results folder --------------------------------------------------------------


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


def _split(runs) -> dict[str, float]:
    """Mean sojourn and its parts over the point's runs, weighted by measured requests."""
    n = np.asarray(runs.get("requests_measured"), dtype=float)
    n = np.where(np.isfinite(n) & (n > 0), n, 1.0)

    def mean(col: str) -> float:
        v = np.asarray(runs[col], dtype=float) if col in runs else np.full(len(runs), np.nan)
        ok = np.isfinite(v)
        return float(np.average(v[ok], weights=n[ok])) if ok.any() else math.nan

    out = {f"{m}_mean_ns": mean(f"{m}_mean") for m in ("sojourn", "service", "queue", "send_lag")}
    parts = [out[f"{m}_mean_ns"] for m in ("service", "queue", "send_lag")]
    # Rounded to 0.1 ns: in an integrated run the parts add up exactly, and the float
    # residue of the subtraction (1e-10 ns) is not a measurement.
    out["other_mean_ns"] = round(
        out["sojourn_mean_ns"] - sum(p for p in parts if math.isfinite(p)), 1
    )
    s = out["sojourn_mean_ns"]
    out["service_share"] = out["service_mean_ns"] / s if s else math.nan
    return out


def noise_hints(run_dirs: list[Path]) -> list[dict[str, Any]]:
    """``noise=`` specs implied by the runs' environment sections (host-wide averages).

    Interrupts: the per-CPU rate is intr/s over the CPUs, the mean length is the irq+softirq
    CPU time per interrupt. Preemption: each worker's involuntary switches per second, and
    its run-queue wait per switch. Both are averages over the measured phase, not traces.
    """
    envs = []
    for d in run_dirs:
        env = read_json(d / "summary.json", RUN_SCHEMA).get("environment")
        if isinstance(env, dict):
            envs.append(env)
    if not envs:
        return []

    def avg(f) -> float:
        v = [f(e) for e in envs]
        v = [x for x in v if isinstance(x, (int, float)) and math.isfinite(x)]
        return float(np.mean(v)) if v else math.nan

    hints = []
    intr = avg(lambda e: e.get("intr_per_s"))
    ncpu = avg(lambda e: e.get("ncpu"))
    irq = avg(lambda e: (e.get("host_irq_pct") or 0.0) + (e.get("host_softirq_pct") or 0.0))
    if intr > 0 and ncpu > 0 and math.isfinite(irq):
        length_ns = irq / 100 / intr * 1e9
        hints.append(_hint("interrupts", intr / ncpu, length_ns, "host intr/s per CPU"))

    def workers(e, key):
        w = [t.get(key) for t in e.get("workers") or [] if isinstance(t, dict)]
        w = [x for x in w if isinstance(x, (int, float))]
        return float(np.mean(w)) if w else math.nan

    invol = avg(lambda e: workers(e, "invol_per_s"))
    wait = avg(lambda e: workers(e, "runq_wait_pct"))
    if invol > 0 and math.isfinite(wait):
        hints.append(
            _hint("preemption", invol, wait / 100 / invol * 1e9, "worker involuntary switches")
        )
    return hints


def _hint(source: str, rate: float, length_ns: float, basis: str) -> dict[str, Any]:
    spec = f"poisson:rate={rate:.4g},for=exp:{duration_spec(max(length_ns, 1.0))}"
    return {
        "source": source,
        "rate_per_s": rate,
        "mean_ns": length_ns,
        "basis": basis,
        "spec": spec,
    }


# --- stop-the-world pauses ----------------------------------------------------------------


def pauses(run_dirs: list[Path]) -> dict[str, Any] | None:
    """The stop-the-world pauses the runs' app reported, as synth's ``pause=`` setting.

    An app that knows its own pauses (middleware: the JVM's collector) reports their number
    and total length over the measured phase in ``app_stats`` (``pauses``, ``pause_ms``).
    A pause stops every worker, idle or not, and is as rare as it is long (2 of 27 ms in a
    second against 10 µs requests): a mixture of service times cannot carry it, yet it sets
    the tail of every request that waits behind it. So the fit models it apart: a pause every
    N requests (a collector runs when allocation has filled its young generation — so many
    requests apart, not so many seconds: middleware paused twice per 20 000 requests at 20,
    50 and 70 % load alike), each of their mean length, and leaves the requests a pause hit
    (service at least half a mean pause) out of the mixture. None when no run reports one.
    """
    count = total_ms = seconds = requests = 0.0
    for d in run_dirs:
        summ = read_summary(d)
        st = summ.get("app_stats") or {}
        if not isinstance(st, dict) or "pauses" not in st:
            continue
        count += float(st.get("pauses") or 0)
        total_ms += float(st.get("pause_ms") or 0)
        seconds += float(summ.get("duration_s") or 0)
        requests += float((summ.get("requests") or {}).get("measured") or 0)
    if count <= 0 or total_ms <= 0 or seconds <= 0 or requests <= 0:
        return None
    mean_ns = total_ms * 1e6 / count
    rate = count / seconds
    every = max(1, round(requests / count))
    setting = f"requests:{every},for={duration_spec(mean_ns)}"
    return {
        "source": "app",
        "pauses": int(count),
        "seconds": seconds,
        "requests": int(requests),
        "requests_per_pause": every,
        "rate_per_s": rate,
        "mean_ns": mean_ns,
        "app_mean_ns": mean_ns,
        "share": rate * mean_ns / 1e9,
        "threshold_ns": mean_ns / 2,
        "setting": setting,
    }


#: A pause sequence from the records needs at least this many pauses (else the mean of the
#: app's own count and total stands for every pause, as ``requests:N,for=D``).
PAUSE_MIN_HITS = 5
#: Gaps shorter than this share of the median gap are a cluster's (a pause soon after the
#: previous one), fitted as their own range.
PAUSE_SHORT_GAP = 0.25


def _one(lo: int, hi: int) -> str:
    """``N`` or ``N-M``, as synth's gaps and counts are written."""
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _times_of(runs: list[int]) -> tuple[int, int]:
    """How many times a cycle's term repeats: its runs' quartiles, as whole numbers >= 1."""
    q25, q75 = np.quantile(np.asarray(runs, dtype=float), [0.25, 0.75])
    lo = max(1, math.floor(q25))
    return lo, max(lo, math.ceil(q75))


def _long_times(whole: list[int], per: float) -> tuple[int, int]:
    """How many long gaps come between two clusters of a pause cycle; ``per``: the pauses
    per cluster less the short gaps per cluster (see below).

    Short runs cut a cycle: a block of 50 000 requests holds three or four of middleware's
    pauses, 15 000 requests apart, so a whole stretch of a dozen long gaps between two
    clusters never fits in one, and the gap across each pair of neighbouring blocks is lost.
    Counting the long gaps the runs hold (or the quartiles of the stretches that fit whole)
    made middleware's pooled cycle ``x2`` where its runs held one cluster in about eight
    pauses (now ``x6-7``): the synthetic workload paused once per 10 346 requests against the
    app's 13 953 (35 % too often; tailwag of 2026-11-25 00:56). Pauses and clusters are
    counted alike wherever the blocks end (a cluster's short gap is rarely cut), so a cycle
    — from one cluster to the next — holds pauses / clusters gaps, of which the short ones
    are the clusters' own: ``per``. Its floor and ceiling, or the quartiles of the whole
    stretches (``whole``, between two clusters of one run) when at least
    :data:`PAUSE_MIN_WHOLE` agree with it within :data:`PAUSE_TIMES_AGREE`: long records,
    where the stretches are exact counts and the ratio of a few clusters is not (three
    clusters in 200 000 requests of a cycle of four long gaps gave 5)."""
    per = max(per, 1.0)
    if len(whole) >= PAUSE_MIN_WHOLE and abs(float(np.mean(whole)) / per - 1) <= PAUSE_TIMES_AGREE:
        return _times_of(whole)
    lo = max(1, math.floor(per))
    return lo, max(lo, math.ceil(per))


#: See :func:`_long_times`.
PAUSE_TIMES_AGREE = 0.3
PAUSE_MIN_WHOLE = 2


def _range_of(g: np.ndarray) -> tuple[int, int]:
    """A uniform range of request counts from the quartiles of ``g`` (robust to strays):
    the uniform with these quartiles, its ends half an interquartile range out."""
    q25, q75 = np.quantile(g, [0.25, 0.75])
    lo = max(1, math.floor(q25 - (q75 - q25) / 2))
    return lo, max(lo, math.ceil(q75 + (q75 - q25) / 2))


#: Fewer pauses than this per point (over its runs) set its tail by too few events to repeat.
PAUSE_MIN_PER_POINT = 10


def _few_pauses(out: dict[str, Any], pause: dict[str, Any], points: int = 1) -> None:
    """Warns when a point's runs saw so few pauses that its tail cannot repeat: middleware
    with two pauses per 20 000 requests moved 20–90 % against itself from round to round.
    Counted per point over its runs together (their histograms are merged); ``pause``
    covers ``points`` points."""
    n = pause["pauses"] / max(1, points)
    if n < PAUSE_MIN_PER_POINT:
        need = math.ceil(20 * pause["requests"] / max(1, pause["pauses"]) / 10_000) * 10_000
        out["warnings"].append(
            f"the app paused {n:.1f} times per point: a tail set by so few pauses "
            f"does not repeat from run to run; measure about {need} requests per point "
            "(20 pauses)"
        )
        return
    # Pauses in clusters (a second before the first one's backlog drained) set the tail
    # more than single ones, and are rarer: middleware's mean sojourn moved 21–41 % from
    # round to round with 17 pauses but 3 clusters per point (tailwag, 2026-11-25 03:47).
    c = pause.get("clusters", 0) / max(1, points)
    if 0 < c < PAUSE_MIN_PER_POINT:
        need = math.ceil(20 * pause["requests"] / pause["clusters"] / 10_000) * 10_000
        out["warnings"].append(
            f"the app's pauses came in {c:.1f} clusters per point (pauses a few hundred "
            "requests apart, whose backlogs add up): a tail set by so few does not repeat "
            f"from run to run; measure about {need} requests per point (20 clusters)"
        )


def pause_sequence(pause: dict[str, Any], dfs: list[pd.DataFrame]) -> dict[str, Any]:
    """``pause`` (from :func:`pauses`) refined from the runs' per-request records.

    The app's own count says how many pauses and how long in total, not how they are spread.
    The records do: a request a pause hit serves at least ``threshold_ns``, so the measured
    requests in start order give every pause's place and length. A collector's pauses vary
    (middleware's G1: 3–54 ms, cv about 0.25) and come in clusters (most a young
    generation's fill apart, then one or two a few hundred requests after the previous:
    the pauses of a marking cycle), and both set the tail: a second pause before the
    backlog of the first has drained adds to it. Replayed through a FCFS queue, middleware's
    own service times with every pause at its mean length queued 19 % less at 50 % load
    than with the pauses as they were. So with at least :data:`PAUSE_MIN_HITS` pauses the
    setting becomes ``requests:GAPS,for=lognormal:MEAN,cv=CV``: the gaps as one range (from
    their quartiles), or, when some are a cluster's (below :data:`PAUSE_SHORT_GAP` of the
    median gap), a cycle: the long gaps' range as many times as there are long gaps per
    cluster (:func:`_long_times`: a number drawn each turn), then the short gaps'
    range as many times as the runs of short ones (middleware:
    ``12857-15952x4+1-2248x1-2``). Independent draws of the same two ranges make clusters
    of three half as often, and queued 24 % less at 70 % load.
    """
    lengths, seqs = [], []
    for df in dfs:
        g = df[df["measured"] == 1] if "measured" in df else df
        g = g.sort_values("started", kind="stable")
        svc = (g["finished"] - g["started"]).to_numpy(dtype=float)
        hit = np.flatnonzero(svc >= pause["threshold_ns"])
        if len(hit) == 0:
            continue
        rest = svc[svc < pause["threshold_ns"]]
        base = float(np.median(rest)) if len(rest) else 0.0
        lengths.extend(np.maximum(svc[hit] - base, 0.0).tolist())
        seqs.append(np.diff(hit).astype(float))
    gaps = np.concatenate(seqs) if seqs else np.zeros(0)
    if len(lengths) < PAUSE_MIN_HITS or len(gaps) < PAUSE_MIN_HITS - 1:
        return pause
    lens = np.asarray(lengths)
    mean, cv = float(lens.mean()), float(lens.std() / lens.mean())
    length = f"lognormal:{duration_spec(mean)},cv={cv:.3g}" if cv >= 0.05 else duration_spec(mean)
    cut = PAUSE_SHORT_GAP * np.median(gaps)
    short = gaps < cut
    if 2 <= short.sum() <= len(gaps) - 2:
        # A cycle: the long gaps' range so many times (the median run of long gaps between
        # clusters), then the short ones' (the median run of short gaps in a cluster).
        s_runs, l_runs = [], []
        for seq in seqs:
            flags = (seq < cut).tolist()
            runs = [(k, len(list(r))) for k, r in itertools.groupby(flags)]
            s_runs += [n for k, n in runs if k]
            l_runs += [n for k, n in runs[1:-1] if not k]
        clusters = len(s_runs)
        per = len(lens) / clusters - float(np.mean(s_runs))
        times = [_long_times(l_runs, per), _times_of(s_runs)]
        groups = (gaps[~short], gaps[short])
        terms = [(*t, *_range_of(g)) for t, g in zip(times, groups, strict=True)]
        spec = "+".join(f"{_one(lo, hi)}x{_one(a, b)}" for a, b, lo, hi in terms)
    else:
        lo, hi = _range_of(gaps)
        terms = [(1, 1, lo, hi)]
        spec = _one(lo, hi)
        clusters = int(short.sum())
    weight = [(a + b) / 2 for a, b, _, _ in terms]
    mean_gap = sum(w * (lo + hi) / 2 for w, (_, _, lo, hi) in zip(weight, terms, strict=True))
    mean_gap /= sum(weight)
    return {
        **pause,
        "source": "records",
        "hits": len(lens),
        "mean_ns": mean,
        "cv": cv,
        "gaps": [{"times": _one(a, b), "lo": lo, "hi": hi} for a, b, lo, hi in terms],
        "clusters": clusters,
        "requests_per_pause": mean_gap,
        "setting": f"requests:{spec},for={length}",
    }


# --- order: regular slow requests, and what independent draws would change ---------------

#: A component can be periodic when it is at most this share of requests ...
PERIODIC_MAX_WEIGHT = 0.1
#: ... and the gaps between its requests, stray members joined out, have at most this
#: robust cv (interquartile range / 1.349 / median; independent draws, joined so, about 0.5;
#: oltp-disk's checkpoints 0.1, kv's reclaimer 0) ...
PERIODIC_MAX_CV = 0.25
#: ... over at least this many gaps, and is at least this many times slower on average
#: than the rest of the mixture (deferred work, not a slightly slower kind of request).
PERIODIC_MIN_GAPS = 10
PERIODIC_MIN_RATIO = 2.0
#: Shuffles averaged for the order check.
ORDER_SHUFFLES = 10
#: Windows of send time the order check also shuffles within (ns): what is left of the
#: effect within a window is the clustering at time scales shorter than it.
ORDER_WINDOWS_NS = (10e6, 100e6, 1e9)


def _server_order(dfs: list[pd.DataFrame], cold: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Per run, every request's service time (ns), warmup included, in start order.

    With ``cold`` (a :func:`fit_cold` result) each is divided by its cold-start factor, as
    the pooled mixture's service times were: what the request would have taken warm.
    """
    out = []
    for df in dfs:
        g = df.sort_values("started", kind="stable")
        svc = (g["finished"] - g["started"]).to_numpy(dtype=float)
        if cold and cold["extra"] > 0:
            factor = np.empty(len(g))
            for _, idx in g.groupby("worker").indices.items():
                st = g["started"].to_numpy(dtype=float)[idx]
                fi = g["finished"].to_numpy(dtype=float)[idx]
                w = _warmth(st, fi, cold["tau_ns"])
                factor[idx] = _cold_factor(cold, w)
            svc = svc / factor
        out.append(svc)
    return out


def _merge_short_gaps(gaps: np.ndarray) -> np.ndarray:
    """Gaps with the stray members taken out (see :func:`_in_rhythm`)."""
    pos = np.concatenate([[0], np.cumsum(np.asarray(gaps, dtype=np.int64))])
    return np.diff(_in_rhythm(pos))


def _in_rhythm(member: np.ndarray) -> np.ndarray:
    """The members (positions, sorted) left when the strays are taken out: each gap shorter
    than half the upper quartile joins its shorter neighbour (the member between them goes),
    until none is left.

    A stray member — an ordinary request preempted into the slow component — splits one
    true gap in two short ones; joining puts the true gap back. Independent draws, joined
    so, still vary (robust cv about 0.5); regular ones with strays come out regular.
    """
    m = [int(x) for x in member]
    if len(m) < 3:
        return np.array(m, dtype=np.int64)
    g = [b - a for a, b in zip(m, m[1:], strict=False)]
    ref = float(np.quantile(g, 0.75)) / 2
    i = 0
    while i < len(g) and len(g) > 1:
        if g[i] >= ref:
            i += 1
            continue
        if i == 0:
            j = 1
        elif i == len(g) - 1:
            j = i - 1
        else:
            j = i - 1 if g[i - 1] <= g[i + 1] else i + 1
        a, b = min(i, j), max(i, j)
        g[a] += g[b]
        del g[b]
        del m[b]  # the member between gaps a and b
        i = max(a - 1, 0)
    return np.array(m, dtype=np.int64)


def _independent_cv(p: float) -> float:
    """The robust gap cv that independent draws of share p give, joined as the data are:
    2 000 geometric gaps (seeded), through :func:`_merge_short_gaps`."""
    p = min(max(p, 1e-6), 0.5)
    g = _merge_short_gaps(np.random.default_rng(0).geometric(p, 2000))
    q25, med, q75 = np.quantile(g, [0.25, 0.5, 0.75])
    return float((q75 - q25) / 1.349 / med)


def _lognormal_of(x: np.ndarray) -> Component:
    """A log-normal component (weight 1) with the log-mean and log-variance of ``x``."""
    lx = np.log(np.maximum(x, 1.0))
    return Component(1.0, float(lx.mean()), max(float(lx.var()), 1e-6))


def _rhythm(runs, dens, totals, k: int, c: Component, strict: bool):
    """The regular gaps of component ``k``'s members, or None if they have none.

    A member is a request whose posterior for ``k`` is over one half; ``strict`` keeps
    only those above the component's log-mean less one log-sd (a broad component's left
    tail holds ordinary requests a slow host stretched: kv's pooled fit on a busy host
    swept in as many of them as reclaimer sweeps, and its gaps looked random). The strays
    are taken out by :func:`_in_rhythm`. Returns (joined gaps, their median, robust cv,
    members in rhythm per run, the strays' service times: every member not in rhythm)
    when the gaps are regular and one in ``median`` requests is about the share of
    requests in rhythm (not a run of cold-start requests the posterior swept in).
    """
    gaps, kept, strays = [], [], []
    cut = c.mu - math.sqrt(c.s2)
    for s, d, total in zip(runs, dens, totals, strict=True):
        post = (total > 0) & (d[:, k] > total / 2)
        member = np.flatnonzero(post & (np.log(np.maximum(s, 1.0)) > cut) if strict else post)
        beat = _in_rhythm(member)
        off = post.copy()
        off[beat] = False
        kept.append(beat)
        strays.append(s[off])
        gaps.append(np.diff(beat))
    g = np.concatenate(gaps) if gaps else np.array([])
    if len(g) < PERIODIC_MIN_GAPS:
        return None
    q25, med, q75 = np.quantile(g, [0.25, 0.5, 0.75])
    cv = (q75 - q25) / 1.349 / med if med > 0 else math.inf
    share_kept = sum(len(b) for b in kept) / max(sum(len(r) for r in runs), 1)
    share = 1.0 / med if med > 0 else math.inf
    if cv > PERIODIC_MAX_CV or med < 2 or not 0.5 * share_kept <= share <= 2.0 * share_kept:
        return None
    return g, med, cv, kept, np.concatenate(strays)


def periodic(runs: list[np.ndarray], mix: Mixture) -> dict[str, Any] | None:
    """The mixture's rare component whose requests come at regular gaps, if one does.

    ``runs``: per run, service times in the server's start order (:func:`_server_order`).
    A request belongs to a component when that component's posterior is over one half.
    Components of at most ``PERIODIC_MAX_WEIGHT``, at least ``PERIODIC_MIN_RATIO`` times the
    rest's mean, are tried slowest first; the first whose gaps (in requests, within each
    run, stray members joined out by :func:`_merge_short_gaps`) have a robust cv
    (interquartile range / 1.349 / median) of at most ``PERIODIC_MAX_CV`` and whose median
    gap matches the share of its members that are not strays (1 / gap within a factor 2 of
    it) is returned with synth's ``periodic=`` setting — gaps uniform, with the measured
    gaps' quartiles — and the rest of the mixture (``rest``, a :class:`Mixture`, not JSON):
    the other components and the strays, renormalised. Independent draws of a share p have
    geometric gaps: robust cv about 1.2, about 0.5 once joined (``gap_cv_if_independent``,
    by simulation).

    The strays are the component's members that do not keep its rhythm: on a busy host,
    ordinary requests a preemption made slow (kv's 70 % point on a slow host: 630 strays
    to 925 reclaimer sweeps). The periodic length is a log-normal of the members in rhythm;
    the strays stay in the mixture as a log-normal component of their own share and times,
    drawn independently — without them the synthetic workload would lose that share of its
    slow requests, and with the periodic length they would be too slow.
    """
    comps = mix.components
    if len(comps) < 2 or not runs:
        return None
    # Each request's weighted density under each component, once per run.
    dens = [mix.log_pdf_components(np.log(np.maximum(s, 1.0))) for s in runs]
    totals = [d.sum(axis=1) for d in dens]
    for k in sorted(range(len(comps)), key=lambda i: -comps[i].mean_ns):
        c = comps[k]
        if c.weight > PERIODIC_MAX_WEIGHT:
            continue
        rest_mean = sum(x.weight * x.mean_ns for i, x in enumerate(comps) if i != k)
        if c.mean_ns * (1 - c.weight) < PERIODIC_MIN_RATIO * rest_mean:
            continue
        found = None
        for strict in (False, True):
            found = _rhythm(runs, dens, totals, k, c, strict)
            if found is not None:
                break
        if found is None:
            continue
        g, med, cv, members, stray_ns = found
        n = sum(len(r) for r in runs)
        hits = sum(len(m) for m in members)
        gap = _one(*_range_of(g))
        rest = [x for i, x in enumerate(comps) if i != k]
        # The periodic length from the members in rhythm; the strays (as slow, off the
        # rhythm) stay in the mixture with their own length, drawn independently.
        beat = np.concatenate([r[m] for r, m in zip(runs, members, strict=True)])
        own = _lognormal_of(beat) if len(beat) >= PERIODIC_MIN_GAPS else c
        stray_weight = len(stray_ns) / n
        if len(stray_ns) >= PERIODIC_MIN_GAPS:
            lone = _lognormal_of(stray_ns)
            rest.append(Component(stray_weight, lone.mu, lone.s2))
        left = sum(x.weight for x in rest)
        return {
            "component": k,
            "weight": c.weight,
            "mean_ns": own.mean_ns,
            "cv": own.cv,
            "hits": hits,
            "strays": len(stray_ns),
            "stray_weight": stray_weight,
            "stray_mean_ns": float(stray_ns.mean()) if len(stray_ns) else None,
            "strict": strict,
            "gap_mean": float(g.mean()),
            "gap_median": float(med),
            "gap_cv": cv,
            "gap_cv_if_independent": _independent_cv(c.weight),
            "gap": gap,
            "setting": f"requests:{gap},for={lognormal_spec(own)}",
            "rest": Mixture(tuple(Component(x.weight / left, x.mu, x.s2) for x in rest)),
            "members": members,
        }
    return None


def periodic_cold(
    per: dict[str, Any], raw: list[np.ndarray], warm: list[np.ndarray], point_of: list[str]
) -> None:
    """Whether a pooled fit's periodic requests slow down with the cold-start term.

    The pooled fit divides every service time by its cold-start factor, and synth multiplies
    every draw by it, the periodic requests' included. A checkpoint's I/O or a reclaimer's
    sweep through memory need not follow: oltp-disk's checkpoints took 6.2–6.5 ms at 20, 50
    and 70 % load while its other requests sped up 12 %. Per point, the members' mean is taken
    as measured (``raw``, per run) and as the fit sees it (``warm``, divided by the factor);
    whichever varies less across the points is the periodic request's own length. When that
    is the measured one, the length becomes a log-normal of the members' measured times and
    the setting gets ``cold=no`` (synth then serves it at its drawn length).
    """
    members = per["members"]
    by: dict[str, list[list[np.ndarray]]] = {}
    for r, w, pid, m in zip(raw, warm, point_of, members, strict=True):
        if len(m):
            by.setdefault(pid, [[], []])
            by[pid][0].append(r[m])
            by[pid][1].append(w[m])
    if len(by) < 2:
        return
    means = {
        side: [float(np.concatenate(v[i]).mean()) for v in by.values()]
        for i, side in enumerate(("measured", "warm"))
    }
    spread = {side: max(x) / min(x) - 1.0 for side, x in means.items()}
    cold = spread["warm"] <= spread["measured"]
    per["cold_check"] = {"points": list(by), "mean_ns": means, "spread": spread, "cold": cold}
    if cold:
        return
    own = _lognormal_of(np.concatenate([r[m] for r, m in zip(raw, members, strict=True)]))
    per["mean_ns"], per["cv"] = own.mean_ns, own.cv
    per["setting"] = f"requests:{per['gap']},for={lognormal_spec(own)},cold=no"


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
    return np.array([x.mean(), np.quantile(x, 0.95), np.quantile(x, 0.99)])


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


def order_effect(dfs: list[pd.DataFrame], workers: int, seed: int = 0) -> dict[str, Any]:
    """The runs' service times replayed in order and shuffled (see the module's docs).

    Each run's requests (warmup included, so the queue starts as the run's did) are fed to
    a shared FCFS queue of ``workers`` at their intended send times; the statistics are over
    the measured requests of all runs. In order, that replay is the run's own ideal, which
    the harness already recorded per request (``ideal_completed``, from
    ``taillab_core::ideal``): it is used when present, and only the shuffles are replayed
    here. ``effect`` is in-order / shuffled − 1: positive when the app's order makes the
    queue longer than independent draws would (bursts of slow requests), negative when
    shorter (regularly spaced slow ones). ``windows``: the same against the service times
    shuffled only among the requests sent in the same window of ``ORDER_WINDOWS_NS`` — the
    part of the effect made by clustering at time scales shorter than the window (a burst
    of slow requests within 100 ms shows at 100 ms and 1 s; a slow second of the host only
    at 1 s and in the whole-run ``effect``).
    """
    rng = np.random.default_rng(seed)
    inorder = []
    shuffled = {w: [[] for _ in range(ORDER_SHUFFLES)] for w in (None, *ORDER_WINDOWS_NS)}
    for df in dfs:
        a, s, m = _by_send_time(df)
        inorder.append(_in_order(df, a, s, m, workers))
        for w, runs in shuffled.items():
            for k in range(ORDER_SHUFFLES):
                runs[k].append(_fcfs(a, _shuffle_within(a, s, w, rng), workers)[m])

    def stats(x: np.ndarray) -> dict[str, float]:
        return dict(zip(("mean_ns", "p95_ns", "p99_ns"), _stats3(x).tolist(), strict=True))

    rep = stats(np.concatenate(inorder))

    def effect(runs: list[list[np.ndarray]]) -> tuple[dict[str, float], dict[str, float]]:
        sh = [stats(np.concatenate(x)) for x in runs]
        shuf = {k: float(np.mean([x[k] for x in sh])) for k in rep}
        return shuf, {k[:-3]: rep[k] / shuf[k] - 1 if shuf[k] else math.nan for k in rep}

    shuf, eff = effect(shuffled[None])
    return {
        "workers": workers,
        "shuffles": ORDER_SHUFFLES,
        "in_order": rep,
        "shuffled": shuf,
        "effect": eff,
        "windows": [{"window_ns": w, "effect": effect(shuffled[w])[1]} for w in ORDER_WINDOWS_NS],
    }


def _shuffle_within(
    a: np.ndarray, s: np.ndarray, window_ns: float | None, rng: np.random.Generator
) -> np.ndarray:
    """``s`` shuffled over the whole run (``window_ns`` None) or only among the requests
    sent in the same ``window_ns`` of time (``a`` sorted)."""
    if window_ns is None:
        return rng.permutation(s)
    w = ((a - a[0]) // window_ns).astype(np.int64)
    # Sorting by (window, random key) permutes within each window and keeps the windows.
    return s[np.lexsort((rng.random(len(s)), w))]


def _with_periodic(out: dict[str, Any], per: dict[str, Any] | None) -> None:
    """Puts a periodic component into a fit entry: the rest of the mixture for service=."""
    if per is None:
        return
    rest = per.pop("rest")
    per.pop("members", None)
    spec = rest.spec()
    sets = out.get("synth_settings") or [out["synth_set"]]
    out["synth_set"] = f"service={spec}"
    out["synth_settings"] = [out["synth_set"], *sets[1:], f"periodic={per['setting']}"]
    out["periodic"] = per


def _below(dist: Dist, limit_ns: float) -> tuple[Dist, int]:
    """``dist`` without its buckets at or above ``limit_ns``, and how many were dropped."""
    keep = dist.hi < limit_ns
    return Dist(dist.lo[keep], dist.hi[keep], dist.count[keep]), int(dist.count[~keep].sum())


def fit_point(res: Results, point: str, **kw) -> dict[str, Any]:
    """The fit of one point, as a JSON-able dict (an entry of fit.json's ``fits``)."""
    dfs = _point_records(res, point)
    raw, source = measured_service(res, point, dfs)
    runs = res.runs[res.runs["point"] == point]
    if raw.total < MIN_REQUESTS:
        raise FitError(
            f"point {point} has {raw.total} measured requests; a fit needs at least "
            f"{MIN_REQUESTS} (re-run with --requests {MIN_REQUESTS} or more)"
        )
    dist, zeros = _positive(raw)
    if dist.total == 0:
        raise FitError(
            f"point {point}: every service time is zero — the app only measures transport "
            "(e.g. memcached, redis); there is no service distribution to fit"
        )
    if dist.total < MIN_REQUESTS:
        raise FitError(
            f"point {point} has only {dist.total} non-zero service times of {raw.total}; "
            f"a fit needs at least {MIN_REQUESTS}"
        )
    pause = pauses([Path(p) for p in runs["path"]])
    if pause:
        dist, pause["dropped"] = _below(dist, pause["threshold_ns"])
        if dfs is not None:
            pause = pause_sequence(pause, dfs)
    mix, bics = fit_mixture(dist, **kw)
    prow = res.points[res.points["point"] == point].iloc[0]
    entry = _mixture_entry(dist, zeros, mix, bics, kw)
    out = {
        "point": point,
        "app": _plain(prow.get("app")),
        "threads": _plain(prow.get("threads")),
        "qps": _plain(prow.get("qps")),
        "runs": len(runs),
        "source": source,
        **entry,
        "split": _split(runs),
        "noise_hints": noise_hints([Path(p) for p in runs["path"]]),
    }
    if pause:
        out["pause"] = pause
        out["synth_settings"] = [entry["synth_set"], f"pause={pause['setting']}"]
        _few_pauses(out, pause)
    if dfs is not None:
        _with_periodic(out, periodic(_server_order(dfs), mix))
        queues = {_queue_of(Path(p)) for p in runs["path"]}
        if queues == {("fifo", "shared")}:
            workers = int(out["threads"]) if out["threads"] else 1
            out["order"] = order_effect(dfs, workers)
        else:
            out["order_skipped"] = (
                f"the runs' queues are {sorted(queues)}; the shuffled replay models one "
                "shared FIFO queue"
            )
    return out


def _queue_of(run_dir: Path) -> tuple[str, str]:
    """(discipline, dispatch) of a run, from its summary (defaults: fifo, shared)."""
    doc = read_summary(run_dir)
    return str(doc.get("discipline", "fifo")), str(doc.get("dispatch", "shared"))


def _mixture_entry(dist: Dist, zeros: int, mix: Mixture, bics, kw) -> dict[str, Any]:
    """The keys of a fit.json entry that describe the mixture fitted to ``dist``."""
    spec = mix.spec()
    warn = []
    if zeros:
        warn.append(f"{zeros} zero-length service times left out (ln 0 is undefined)")
    return {
        "n": dist.total,
        "zero_dropped": zeros,
        "bic": {str(k): v for k, v in bics.items()},
        "chosen_by": "fixed" if kw.get("components") else "bic",
        "components": [c.to_json() for c in mix.components],
        "spec": spec,
        "synth_set": f"service={spec}",
        **goodness(dist, mix),
        "warnings": warn,
        "curves": _curves(dist),
    }


# --- one fit across loads, with a cold-start term -----------------------------------------

#: Time constants tried for the cold-start term (ns): 0.1 ms to 1 s.
COLD_TAUS_NS = (0.1e6, 0.3e6, 1e6, 3e6, 10e6, 30e6, 100e6, 300e6, 1e9)
#: Replay errors within this fraction (+0.2 points) of the least count as a tie, broken by R².
COLD_SIM_TIE = 0.1
#: Requests per point the simulated choice of tau replays at most (the first runs, whole).
COLD_SIM_MAX_REQUESTS = 150_000


def _warmth(started: np.ndarray, finished: np.ndarray, tau_ns: float) -> np.ndarray:
    """Warmth of one worker at the start of each of its requests (sorted by start).

    The model of synth's ``cold=F,tau=D``: warmth decays as exp(-idle/tau) while the worker
    waits and grows as 1 - (1 - w) exp(-busy/tau) while it serves; a worker starts cold.
    """
    idle = np.maximum(started[1:] - finished[:-1], 0) / tau_ns
    busy = np.maximum(finished - started, 0) / tau_ns
    w = np.empty(len(started))
    cur = 0.0
    e_idle = np.exp(-idle).tolist()
    e_busy = np.exp(-busy).tolist()
    for i in range(len(started)):
        if i:
            cur *= e_idle[i - 1]
        w[i] = cur
        cur = 1.0 - (1.0 - cur) * e_busy[i]
    return w


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


def _series(recs) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(point index, started, finished, measured mask) per worker of every run, by start."""
    out = []
    for k, (_, dfs) in enumerate(recs):
        for df in dfs:
            for _, g in df.groupby("worker"):
                g = g.sort_values("started")
                keep = (g["measured"] == 1).to_numpy() if "measured" in g else np.ones(len(g), bool)
                st = g["started"].to_numpy(dtype=float)
                out.append((k, st, g["finished"].to_numpy(dtype=float), keep))
    return out


def _warmth_at(series, tau_ns: float) -> np.ndarray:
    """Warmth at the start of every measured request, in the order of :func:`_served`."""
    return np.concatenate([_warmth(st, fi, tau_ns)[keep] for _, st, fi, keep in series])


def _served(series) -> tuple[np.ndarray, np.ndarray]:
    """(point index, service time) of every measured request."""
    k = np.concatenate([np.full(int(keep.sum()), i) for i, _, _, keep in series])
    s = np.concatenate([(fi - st)[keep] for _, st, fi, keep in series])
    return k, s


#: The largest cold-start slowdown F a fit across loads writes (a cold request ≤ 5× warm).
COLD_MAX_EXTRA = 4.0
#: Spread of the points' mean coldness (1 - warmth) below which their means cannot tell F.
COLD_MIN_SPREAD = 0.05


def fit_cold(series, recs=None, pause_ns: float | None = None) -> dict[str, Any]:
    """The cold-start term service = base * (1 + F (1 - warmth)) from every measured request.

    tau: for each tau in ``COLD_TAUS_NS``, a linear regression of service on (1 - warmth)
    over the requests, the slowest 1 % left out (rare slow requests are the mixture's job,
    not the trend's); the tau with the largest R² wins. F: from the points' means at that tau
    — each point's mean service against its mean coldness (1 - warmth), a line through the
    points (``method: "point means"``; their slowest :data:`COLD_MEANS_TRIM` left out, and
    the coldness raised to a power where the loads ask for it: :func:`_means_extra`). A
    request's warmth is a noisy stand-in for what
    slows it (caches, the host's state), and a regression on a noisy regressor shrinks its
    slope (regression dilution: on kv, F 0.18 per request against 0.75 from the means, whose
    model then missed the 20 % load's mean service by 10 %); the means are what a
    validation compares.

    With ``recs`` (the points' records, one worker, with their intended send times) tau is
    instead the one whose model *queues* like the app (``tau_method: "simulated"``, see
    :func:`_simulated_taus`): R² rewards a short tau whenever a request's idle gap explains a
    little of its service, but a short tau makes every request that queued (its worker warm)
    fast and every one that found the worker idle slow — img-dnn's fit took 3 ms, F 0.53, so
    its model served queued requests ~10 % faster than idle arrivals where the app served
    them 3 % faster, and at 70 % load the synthetic workload queued 14 / 26 / 32 % less (mean
    / p95 / p99) than the app with the same mean service. When the points' mean coldness
    spreads less than
    ``COLD_MIN_SPREAD`` (loads too alike to tell) the per-request F is kept (``method:
    "requests"``). F < 0 (faster when cold) is set to 0: no cold term; F is capped at
    ``COLD_MAX_EXTRA``. The result holds the winning tau's warmth per measured request
    (``warmth``, not JSON). ``series`` is :func:`_series` of the points' records;
    ``pause_ns``: requests at least this slow were hit by a stop-the-world pause (the replay
    leaves them to the pause model).
    """
    k, s = _served(series)
    keep = (s > 0) & (s <= np.quantile(s, 0.99))
    y = s[keep]
    tried = {}
    warmth = {}  # per tau, every measured request's (a loop per request: computed once)
    best = None
    for tau in COLD_TAUS_NS:
        w = warmth[tau] = _warmth_at(series, tau)
        x = 1.0 - w[keep]
        a = np.vstack([np.ones_like(x), x]).T
        (base, slope), *_ = np.linalg.lstsq(a, y, rcond=None)
        resid = y - a @ np.array([base, slope])
        r2 = 1.0 - float((resid**2).sum() / ((y - y.mean()) ** 2).sum())
        extra = max(float(slope / base), 0.0) if base > 0 else 0.0
        tried[str(int(tau))] = {"extra": extra, "r2": r2}
        if best is None or r2 > best["r2"]:
            best = {"extra": extra, "tau_ns": tau, "r2": r2, "warmth": w}
    assert best is not None
    best["tau_method"] = "r2"
    mk = _means_keep(s)
    if recs is not None:
        sim = _simulated_taus(recs, warmth, k, s, mk, tried, pause_ns)
        if sim is not None:
            r2 = tried[str(int(sim["tau_ns"]))]["r2"]
            best = {**sim, "r2": r2, "tau_method": "simulated"}
    best["extra"] = best["extra_requests"] = tried[str(int(best["tau_ns"]))]["extra"]
    best["method"] = "requests"
    _means_extra(best, k[mk], s[mk], 1.0 - best["warmth"][mk])
    return {**best, "tried": tried}


#: The point means leave out the slowest this share of all requests: rare stop-the-world
#: pauses (middleware's 30 ms among 15 µs requests) would set them by their count. Not the
#: slowest 1 % the per-request regression leaves out: that was more of the light load's
#: requests than of the others', and put the model's mean service 1–7 % under the app's at
#: 20 % load in every app of 2026-11-24/25's runs.
COLD_MEANS_TRIM = 0.001


def _means_keep(s: np.ndarray) -> np.ndarray:
    """The requests the point means are taken over (see :data:`COLD_MEANS_TRIM`)."""
    return (s > 0) & (s <= np.quantile(s, 1 - COLD_MEANS_TRIM))


#: Powers of the coldness the point means may follow (see :func:`_means_extra`) ...
COLD_POWERS = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0)
#: ... tried only when the line through the point means misses one by at least this much
#: (relative) and by three standard errors of that point's mean, and kept only when it at
#: least halves the worst miss.
COLD_POWER_MIN_MISS = 0.01


def _means_extra(best: dict[str, Any], kk: np.ndarray, y: np.ndarray, x: np.ndarray) -> None:
    """F from the points' means (see :func:`fit_cold`): a line through each point's (mean
    coldness ``x``, mean service ``y``); sets ``extra``, ``power``, ``method`` and
    ``point_means`` in ``best`` when the points spread enough to tell.

    The apps' mean service does not fall in a line with their coldness: it drops from the
    lightest load to the middle one and then hardly moves (translate 922, 826, 825 µs at 20,
    50 and 70 %; oltp-disk 267, 248, 253), so a line through three loads misses the middle
    one by about 3 % and the outer ones by 1–2 % the other way — and at 70 % load 2 % less
    service is about 8 % less queueing. With three or more points whose line misses one by
    :data:`COLD_POWER_MIN_MISS` (and three standard errors: few requests, noisy means), the
    factor becomes 1 + F (1 - w)^p (synth's ``power=``) with
    the p of :data:`COLD_POWERS` whose line through (mean (1 - w)^p, mean service) misses
    least, if that halves the worst miss; each point's ``fitted_ns`` is the model's mean."""
    groups = [kk == p for p in np.unique(kk)]  # each point's requests, found once
    xm = np.array([x[g].mean() for g in groups])
    ym = np.array([y[g].mean() for g in groups])
    if len(groups) < 2 or float(xm.max() - xm.min()) < COLD_MIN_SPREAD:
        return

    def line(power: float):
        xp = np.array([(x[g] ** power).mean() for g in groups]) if power != 1 else xm
        a = np.vstack([np.ones_like(xp), xp]).T
        (base, slope), *_ = np.linalg.lstsq(a, ym, rcond=None)
        fitted = a @ np.array([base, slope])
        return base, slope, fitted, float(np.max(np.abs(fitted / ym - 1)))

    power = 1.0
    base, slope, fitted, miss = line(1.0)
    se = max(float(y[g].std() / math.sqrt(g.sum())) / m for g, m in zip(groups, ym, strict=True))
    if len(groups) >= 3 and miss >= max(COLD_POWER_MIN_MISS, 3 * se):
        fits = [(line(p), p) for p in COLD_POWERS[1:]]
        (b, sl, f, m), p = min(fits, key=lambda t: t[0][3])
        if m <= miss / 2 and b > 0 and sl >= 0:
            power, base, slope, fitted = p, b, sl, f
    if base > 0:
        best["extra"] = min(max(float(slope / base), 0.0), COLD_MAX_EXTRA)
        best["power"] = power
        best["method"] = "point means"
        best["point_means"] = [
            {"coldness": float(c), "service_ns": float(v), "fitted_ns": float(f)}
            for c, v, f in zip(xm, ym, fitted, strict=True)
        ]


def _cold_factor(cold: dict[str, Any], w):
    """Synth's cold-start factor 1 + F (1 - w)^p at warmth ``w`` (a number or an array)."""
    return 1.0 + cold["extra"] * (1.0 - w) ** cold.get("power", 1.0)


def _cold_queue(
    arrivals: np.ndarray, draws: np.ndarray, extra: float, tau_ns: float, power: float = 1.0
) -> np.ndarray:
    """Sojourns of one worker serving ``draws`` (warm service times) FCFS at ``arrivals`` under
    synth's ``cold=extra,tau=tau_ns,power=power``: a request that starts at warmth w takes
    draw × (1 + extra (1 - w)^power); the worker starts cold, as synth's does at every run's
    start."""
    out = np.empty(len(arrivals))
    free, last, w = -math.inf, None, 0.0
    for i, (a, d) in enumerate(zip(arrivals.tolist(), draws.tolist(), strict=True)):
        start = a if a > free else free
        if last is not None:
            w *= math.exp(-(start - last) / tau_ns)
        sv = d * (1.0 + extra * (1.0 - w) ** power)
        w = 1.0 - (1.0 - w) * math.exp(-sv / tau_ns)
        free = last = start + sv
        out[i] = free - a
    return out


def _simulated_taus(recs, warmth, k, s, keep, tried, pause_ns) -> dict[str, Any] | None:
    """The tau whose cold-start model queues most like the app.

    For each tau: F from the points' means (as :func:`fit_cold`), every measured service time
    divided by its factor (what it would have taken warm), and the model — draws from those
    warm times, slowed by the cold term — replayed through one FCFS worker at each point's
    own intended send times (up to ``COLD_SIM_MAX_REQUESTS`` per point, whole runs). Its
    mean / p95 / p99 sojourn per point is compared with the app's own service times replayed
    in their order (:func:`_in_order`: the app's queue, less the harness). The order matters:
    shuffled, a load's service times lose the very thing that tells the taus apart — whether
    the requests that queued (worker warm) were faster than those that found it idle. The
    tau with the least mean |relative error| over the points and the three statistics wins —
    of those within ``COLD_SIM_TIE`` of it (replays are draws too), the one with the best R²;
    every tau's error is in ``tried[tau]["sim_error"]``.
    None when the records lack send times or have several workers (a shared queue's warmth
    is per worker; the R² choice stands)."""
    runs, target = [], []  # per point: [(send times, measured mask)]; the app's statistics
    for _, dfs in recs:
        got, soj, n = [], [], 0
        for df in dfs:
            if "intended" not in df or df["worker"].nunique() > 1:
                return None
            if n >= COLD_SIM_MAX_REQUESTS:
                break
            a, s_ordered, m = _by_send_time(df)
            if pause_ns:
                # The app's queue without its pauses (the model's draws have none): a request
                # a pause hit serves the median of the others.
                hit = s_ordered >= pause_ns
                s_ordered = np.where(hit, np.median(s_ordered[~hit]), s_ordered)
                soj.append(_fcfs(a, s_ordered, 1)[m])
            else:
                soj.append(_in_order(df, a, s_ordered, m, 1))
            got.append((a, m))
            n += len(a)
        runs.append(got)
        target.append(_stats3(np.concatenate(soj)))
    y = s[keep]
    for tau in COLD_TAUS_NS:
        w = warmth[tau]
        trial: dict[str, Any] = {"extra": tried[str(int(tau))]["extra"]}
        _means_extra(trial, k[keep], y, 1.0 - w[keep])
        extra, power = trial["extra"], trial.get("power", 1.0)
        tried[str(int(tau))]["power"] = power
        # Stop-the-world pauses are the pause model's, here and in the app's replay above:
        # drawn at random as service times they would queue like no app does (middleware's
        # replays erred 600–1 100 %).
        warm = (s / _cold_factor(trial, w))[(s > 0) & (s < (pause_ns or math.inf))]
        draw = np.random.default_rng(1)
        errs = []
        for i, got in enumerate(runs):
            soj = [_cold_queue(a, draw.choice(warm, len(a)), extra, tau, power)[m] for a, m in got]
            errs.extend(np.abs(_stats3(np.concatenate(soj)) / target[i] - 1).tolist())
        tried[str(int(tau))]["sim_error"] = float(np.mean(errs))
    # Replays are draws too: taus within COLD_SIM_TIE of the best are as good, and among
    # them the per-request evidence (R²) decides.
    least = min(v["sim_error"] for v in tried.values())
    bound = least * (1 + COLD_SIM_TIE) + 0.002
    tie = [t for t in COLD_TAUS_NS if tried[str(int(t))]["sim_error"] <= bound]
    tau = max(tie, key=lambda t: tried[str(int(t))]["r2"])
    return {"tau_ns": tau, "warmth": warmth[tau], "sim_error": tried[str(int(tau))]["sim_error"]}


def _cold_setting(c: dict[str, Any]) -> str:
    p = c.get("power", 1.0)
    return f"{c['extra']:.4g},tau={duration_spec(c['tau_ns'])}" + (
        f",power={p:g}" if p != 1 else ""
    )


#: Length of the stretches of wall time over which the host's speed is measured and played
#: (synth's ``speed=...,every=``): much longer than a queue takes to settle at these loads
#: (milliseconds), shorter than the runs.
SPEED_EVERY_NS = 500e6
#: Stretch lengths the replay also tries: a host's slow moments last from a tenth of a second
#: to seconds. All are longer than a queue takes to settle, so the replay picks the length
#: whose factors queue like the app's order rather than telling the wander's time scale.
#: Another length replaces ``SPEED_EVERY_NS`` only where its replay keeps some of its wander
#: and errs less by more than ``SPEED_TIE`` (the replays are draws too).
SPEED_EVERIES_NS = (100e6, 250e6, SPEED_EVERY_NS, 1e9)
#: The speed is written as this many factors: equal-weight quantiles of the stretches'.
SPEED_FACTORS = 9
#: The least wander of the speed (cv over stretches, sampling noise taken out) written ...
SPEED_MIN_CV = 0.03
#: ... when the stretches' means spread at least this many times as much as sampling alone
#: would make them (variance ratio).
SPEED_MIN_RATIO = 2.0
#: Stretches with fewer measured requests than this tell no speed; the heaviest point
#: needs this many stretches that do.
SPEED_MIN_REQUESTS = 50
SPEED_MIN_STRETCHES = 6
#: The stretches' means leave out each load's slowest 2 %: the speed is the pace of the
#: bulk of the requests, and a rare slow one (oltp-disk's 8 ms checkpoints, 1.1 % of its
#: requests at 25x the mean) makes a stretch's mean so noisy that it hides the wander —
#: a 500 ms stretch's sampling noise was 8-14 % with them, 2 % without, and the 6.7 %
#: wander between oltp-disk's blocks went unseen (2026-11-26). The host's speed stretches
#: them too (synth's ``speed=`` multiplies every request); they are only left out of the
#: estimate, and the share replay keeps them in their places.
SPEED_TRIM = 0.02
#: Shares of the measured wander tried by the replay that sets how much of it to model. Above
#: 1: the measured wander is a lower bound (the slowest few requests are left out of the
#: stretches' means, and the spread is shrunk by sampling's share and summarised as quantiles),
#: and a search point whose replay at 1 still queued 5 / 9 / 20 % short of its own order came
#: within 1 / 2 / 16 % at 1.25.
SPEED_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5)
#: Shares whose replay errs within this fraction (+0.5 points) of the least count as a tie,
#: which the least share wins.
SPEED_TIE = 0.1
#: The replay shuffles each share's draws until it has replayed this many requests (at least
#: two shuffles, at most eight): a point of 20 000 requests at 70 % load sets its p99 by a
#: few bursts.
SPEED_REPLAYED = 200_000


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
    """``use`` without the load's slowest ``SPEED_TRIM`` of it (see there)."""
    if not use.any():
        return use
    return use & (x <= np.quantile(x[use], 1 - SPEED_TRIM))


def _stretch_factors(x: np.ndarray, win: np.ndarray, use: np.ndarray) -> _Stretches:
    """Per stretch ``win`` of one load with at least ``SPEED_MIN_REQUESTS`` requests in
    ``use`` (its slowest ``SPEED_TRIM`` left out): its mean of ``x`` over the load's, and
    how much of their spread sampling alone would give."""
    use = _bulk(x, use)
    ids, inv = np.unique(win[use], return_inverse=True)
    xs = x[use]
    n = np.bincount(inv)
    mean = np.bincount(inv, xs) / n
    var = np.maximum(np.bincount(inv, xs * xs) / n - mean**2, 0)
    ok = n >= SPEED_MIN_REQUESTS
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
    every_ns: float = SPEED_EVERY_NS,
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
    is the speed's, summarised as ``SPEED_FACTORS`` quantiles of mean 1.
    ``use``: the requests the means are taken over (pause hits and the slowest few out).
    ``heaviest``: the point index that sets the factors (default: the one with the most
    requests per stretch). Returns the document and per request the factor that takes the
    speed the synthetic workload adds back out of the mixture's service times (at every
    point no more than its own wander; 1 where none).
    """
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
        len(heavy.f) < SPEED_MIN_STRETCHES
        or cv < SPEED_MIN_CV
        or heavy.spread < SPEED_MIN_RATIO * heavy.noise
    ):
        return out, divide
    g = 1 + (heavy.f - heavy.f.mean()) * heavy.shrink()
    q = np.quantile(g, (np.arange(SPEED_FACTORS) + 0.5) / SPEED_FACTORS)
    out["factors"] = [round(float(v), 3) for v in q / q.mean()]
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
    every_ns: float = SPEED_EVERY_NS,
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
    ``SPEED_TIE`` of it, the least: replays are draws too). Requests a stop-the-world pause
    hit (``pause_ns``) serve the median of the others on both sides: the pause model's.
    The slowest ``SPEED_TRIM`` of the point (checkpoints, reclaimer sweeps) keep their
    places and only take the dealt factor: shuffled, regularly spaced slow requests come in
    clumps, which queue more than the app's order at every share.
    """
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
    slow = allsv > np.quantile(allsv[use], 1 - SPEED_TRIM)
    shuffles = int(np.clip(math.ceil(SPEED_REPLAYED / max(int(measured.sum()), 1)), 2, 8))
    tried = []
    for share in SPEED_SHARES:
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
    err = [sum(abs(v) for v in t["error"].values()) / 3 for t in tried]
    bound = min(err) * (1 + SPEED_TIE) + 0.005
    return next(t["share"] for t, e in zip(tried, err, strict=True) if e <= bound), tried


def _replay_error(sp: dict[str, Any]) -> float:
    """The mean |error| of mean, p95 and p99 of a speed's replay at its chosen share."""
    t = next(t for t in sp["replay"] if t["share"] == sp["share"])
    return sum(abs(v) for v in t["error"].values()) / 3


def _speed_of_the_moment(k, warm, series, use, recs, points, workers, pause_ns):
    """:func:`fit_speed` and :func:`speed_share` at every stretch length of
    ``SPEED_EVERIES_NS``; the length whose replay comes closest to the app's own order wins
    (``SPEED_EVERY_NS`` unless another, at a share above 0, errs less by more than
    ``SPEED_TIE``). Returns the
    chosen document (with ``every_tried``: each length's wander, share and replay error) and
    its per-request divide."""
    tried = {}
    # Every length is judged at the same load, the one with the most requests per second:
    # a stretch longer than a block holds one block's requests whatever its load.
    heaviest = _busiest(series)
    for every in SPEED_EVERIES_NS:
        sp, divide = fit_speed(k, warm, _stretches(series, every), use, every, heaviest)
        if sp["factors"]:
            heavy = dict(recs)[points[sp["heaviest"]]]
            sp["share"], sp["replay"] = speed_share(
                heavy, np.array(sp["factors"]), workers, pause_ns, every_ns=every
            )
        tried[every] = (sp, divide)
    scored = {e: _replay_error(sp) for e, (sp, _) in tried.items() if sp["factors"]}
    chosen = SPEED_EVERY_NS
    # Only a length whose replay keeps some of its wander is a model of its own: at share 0
    # every length replays the same independent draws, and their errors differ by chance.
    kept = {e: v for e, v in scored.items() if tried[e][0]["share"] > 0}
    if kept:
        best = min(kept, key=kept.get)
        own = kept.get(SPEED_EVERY_NS, scored.get(SPEED_EVERY_NS))
        if own is None or kept[best] * (1 + SPEED_TIE) + 0.005 < own:
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


def fewest_thread_points(res: Results) -> list[str]:
    """The points with the fewest workers (a fit across loads pools them)."""
    pts = res.points
    if "threads" not in pts or pts["threads"].isna().all():
        return [str(p) for p in pts["point"]]
    t = pts["threads"].min()
    return [str(p) for p in pts[pts["threads"] == t]["point"]]


def fit_pooled(res: Results, points: list[str] | None = None, **kw) -> dict[str, Any]:
    """One synthetic workload for several loads: a cold-start term and a mixture.

    An app often serves faster when busy (warm caches; on a VM, a vCPU the host has not
    descheduled). A spinning synthetic workload does not, so one fitted at one load misses
    the others. Here the cold-start term (synth's ``cold=F,tau=D``) is fitted to the
    per-request records of all ``points`` (default: those with the fewest workers), then
    every service time is divided by its fitted factor 1 + F (1 - warmth) — what the request
    would have taken warm — and the mixture is fitted to those, pooled. Entry ``point`` is
    ``"all"``; ``by_point`` compares each point's measured mean service with the model's.
    """
    points = points or fewest_thread_points(res)
    if len(points) < 2:
        raise FitError(
            f"a fit across loads needs at least two points, got {points}; "
            "run the app at several loads (e.g. --load 0.2,0.5,0.7)"
        )
    recs = _records(res, points)
    series = _series(recs)
    runs = res.runs[res.runs["point"].isin(points)]
    pause = pauses([Path(p) for p in runs["path"]])
    cold = fit_cold(series, recs, pause["threshold_ns"] if pause else None)
    k, s = _served(series)
    w = cold.pop("warmth")
    factor = _cold_factor(cold, w)
    warm = s / factor
    if (warm > 0).sum() < MIN_REQUESTS:
        raise FitError(
            f"points {points} have {int((warm > 0).sum())} non-zero service times; "
            f"a fit needs at least {MIN_REQUESTS}"
        )
    hit = s >= pause["threshold_ns"] if pause else np.zeros(len(s), bool)
    prow = res.points[res.points["point"] == points[0]].iloc[0]
    speed, divide = _speed_of_the_moment(
        k,
        warm,
        series,
        ~hit & _means_keep(warm),
        recs,
        points,
        int(_plain(prow.get("threads")) or 1),
        pause["threshold_ns"] if pause else None,
    )
    if speed["factors"]:
        share = speed["share"]
        if share > 0:
            q = 1 + (np.array(speed["factors"]) - 1) * share
            speed["factors"] = [round(float(v), 3) for v in q / q.mean()]
            # The synthetic workload adds the host's wander back (speed=).
            warm = warm / (1 + (divide - 1) * share)
        else:
            speed["factors"] = None
    for sp in speed["points"]:
        sp["point"] = points[sp.pop("index")]
    speed["heaviest"] = points[speed["heaviest"]]
    if pause:
        # Requests a pause hit are the pause's, not the mixture's.
        pause["dropped"] = int(hit.sum())
        warm = warm[~hit]
        pause = pause_sequence(pause, [df for _, dfs in recs for df in dfs])
    dist, zeros = _positive(Dist.from_values(np.rint(warm).astype(np.int64)))
    mix, bics = fit_mixture(dist, **kw)
    by_point = []
    for i, pid in enumerate(points):
        m = k == i
        by_point.append(
            {
                "point": pid,
                "measured_service_mean_ns": float(s[m].mean()),
                "model_service_mean_ns": float(mix.mean_ns * factor[m].mean()),
                "mean_factor": float(factor[m].mean()),
            }
        )
    entry = _mixture_entry(dist, zeros, mix, bics, kw)
    setting = _cold_setting(cold)
    if cold["extra"] == 0:
        entry["warnings"].append(
            "no cold-start slowdown found (the app is not slower after idling)"
        )
    settings = [entry["synth_set"], f"cold={setting}"]
    if speed["factors"]:
        speed["setting"] = _speed_setting(speed)
        settings.append(f"speed={speed['setting']}")
    if pause:
        settings.append(f"pause={pause['setting']}")
    out = {
        "point": "all",
        "points": points,
        "app": _plain(prow.get("app")),
        "threads": _plain(prow.get("threads")),
        "qps": None,
        "runs": len(runs),
        "source": "requests",
        **entry,
        "cold": {**cold, "setting": setting},
        "synth_settings": settings,
        "speed": speed,
        **({"pause": pause} if pause else {}),
        "by_point": by_point,
        "split": _split(runs),
        "noise_hints": [],
    }
    if pause:
        _few_pauses(out, pause, len(recs))
    runs_in_order = [x for _, dfs in recs for x in _server_order(dfs, cold)]
    per = periodic(runs_in_order, mix)
    if per is not None and cold["extra"] > 0:
        raw = [x for _, dfs in recs for x in _server_order(dfs)]
        periodic_cold(per, raw, runs_in_order, [pid for pid, dfs in recs for _ in dfs])
    _with_periodic(out, per)
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


def fit_results(
    path: str | Path | Results, point: str | None = None, pooled: bool = False, **kw
) -> dict[str, Any]:
    """Fit every point of a results folder (or only ``point``): the fit.json document.

    A point that cannot be fitted gets an entry ``{"point", "error"}`` instead of a fit;
    with ``point`` given, its error is raised. ``pooled`` adds the entry ``"all"``: one fit
    across the fewest-worker points with a cold-start term (:func:`fit_pooled`).
    """
    res = path if isinstance(path, Results) else load(path)
    ids = [str(p) for p in res.points["point"] if p is not None]
    if point is not None:
        if point not in ids:
            raise FitError(f"no point {point!r} in {res.root}; its points are {ids}")
        ids = [point]
    fits = []
    for pid in ids:
        try:
            fits.append(fit_point(res, pid, **kw))
        except FitError as e:
            if point is not None:
                raise
            fits.append({"point": pid, "error": str(e)})
    if pooled:
        try:
            fits.append(fit_pooled(res, **kw))
        except FitError as e:
            fits.append({"point": "all", "error": str(e)})
    return _clean({"schema": SCHEMA, "results": str(res.root), "fits": fits})


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


def read_fit(path: str | Path) -> dict[str, Any]:
    """Read a fit.json (a file or the folder holding it), checking its schema."""
    p = Path(path)
    p = p / "fit.json" if p.is_dir() else p
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise FitError(
            f"cannot read {p}: {e}; write it with `taillab fit RESULTS --out DIR`"
        ) from e
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise FitError(f"{p} is not a {SCHEMA} document; rewrite it with `taillab fit`")
    return doc


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(name))


def write_fit(doc: dict[str, Any], out: str | Path) -> Path:
    """Write ``out/fit.json`` and ``out/fit-figures/<point>.png|svg``; returns fit.json's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in doc["fits"]:
        if "error" not in f:
            service_fit(f, out / "fit-figures" / _safe(f["point"]))
    path = out / "fit.json"
    path.write_text(json.dumps(doc, indent=1, allow_nan=False, default=_plain), encoding="utf-8")
    return path


# --- text and HTML -------------------------------------------------------------------------


def _pct(v: float) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{100 * v:+.1f}%"


def periodic_sentence(p: dict[str, Any]) -> str:
    """A fit's periodic component in words (the CLI's summary, the report, the validation)."""
    return (
        f"component {p['component'] + 1} ({fmt_ns(p['mean_ns'])}, {p['hits']} requests) came every "
        f"{p['gap_median']:.0f} requests (robust gap cv {p['gap_cv']:.2f}; independent draws "
        f"would give {p['gap_cv_if_independent']:.2f}): served regularly, "
        f"periodic={p['setting']}, not drawn from the mixture."
        + (
            f" Its {p['strays']} strays (slow, off the rhythm; {fmt_ns(p['stray_mean_ns'])} on "
            f"average) stay in the mixture, a component of {100 * p['stray_weight']:.2f} %."
            if p.get("strays", 0) >= PERIODIC_MIN_GAPS and p.get("stray_mean_ns")
            else ""
        )
        + (
            " Its measured mean held across the loads (within "
            f"{100 * p['cold_check']['spread']['measured']:.0f} %) where the cold-start term "
            f"would have it vary {100 * p['cold_check']['spread']['warm']:.0f} %: cold=no."
            if p.get("cold_check", {}).get("cold") is False
            else ""
        )
    )


def order_sentence(o: dict[str, Any]) -> str:
    """A fit's order check in words."""
    eff = ", ".join(f"{k} {_pct(v)}" for k, v in o["effect"].items())
    scales = "; ".join(
        f"within {fmt_ns(w['window_ns'])} {_pct(w['effect']['mean'])} / {_pct(w['effect']['p99'])}"
        for w in o.get("windows", [])
    )
    return (
        f"the run's own service times replayed through a FCFS queue of {o['workers']} "
        f"worker(s) at its arrival times, in their order against shuffled ({o['shuffles']} "
        f"shuffles): {eff}"
        + (
            f"; against shuffled only among requests sent in the same window (mean / p99, "
            f"the part of it from clustering shorter than the window): {scales}"
            if scales
            else ""
        )
        + ". Far from zero, no synthetic workload that draws each request "
        "independently can match this run."
    )


def speed_sentence(sp: dict[str, Any]) -> str:
    """The host's speed of the moment, as the fit saw it."""
    per = ", ".join(f"{p['point']} {100 * p['cv']:.1f} %" for p in sp["points"])
    head = (
        f"mean service per {fmt_ns(sp['every_ns'])} stretch wandered (cv, sampling noise out) {per}"
    )
    if not sp["factors"] and sp.get("share") == 0:
        return head + "; replayed, no share of it queued closer to the app's order than none"
    if not sp["factors"]:
        return head + "; too little at the heaviest load to model"
    tried = [t for t in sp.get("every_tried", []) if t["error"] is not None]
    why = (
        " (the stretch length whose replay came closest to the app's order: "
        + ", ".join(f"{fmt_ns(t['every_ns'])} {100 * t['error']:.1f} %" for t in tried)
        + ")"
        if len(tried) > 1
        else ""
    )
    return head + f"; modelled from {sp['heaviest']} as speed={sp['setting']}" + why


def pause_sentence(p: dict[str, Any]) -> str:
    """A fit's stop-the-world pauses in words."""
    own = (
        f"the app reported {p['pauses']} ({fmt_ns(p['app_mean_ns'])} "
        f"on average) in {p['requests']} requests"
    )
    if p.get("source") != "records":
        return f"{own}; one every {p['requests_per_pause']} requests, each the mean length"
    gaps = ", then ".join(f"{g['times']} × {g['lo']}–{g['hi']}" for g in p["gaps"])
    return (
        f"{own}; the records show {p['hits']} (mean {fmt_ns(p['mean_ns'])}, cv {p['cv']:.2f}), "
        f"requests between them: {gaps}" + (", again and again" if len(p["gaps"]) > 1 else "")
    )


def _tau_basis(c: dict[str, Any]) -> str:
    """Why the cold-start term's tau: its replay error or its R²."""
    if c.get("tau_method") == "simulated":
        return f"replay error {100 * c['sim_error']:.1f} %, R² {c['r2']:.3f}"
    return f"R² {c['r2']:.3f}"


def text_summary(doc: dict[str, Any]) -> str:
    """The human-readable fit: one block per point."""
    lines = []
    for f in doc["fits"]:
        if "error" in f:
            lines.append(f"point {f['point']}: not fitted: {f['error']}")
            continue
        lines.append(
            f"point {f['point']}: {f['n']} service times ({f['source']}), "
            f"{len(f['components'])} component(s) by {f['chosen_by'].upper()}, KS {f['ks']:.4f}"
        )
        lines.append(f"  {'weight':>8} {'mean':>10} {'median':>10} {'log var':>8} {'cv':>7}")
        for c in f["components"]:
            lines.append(
                f"  {c['weight']:8.4f} {fmt_ns(c['mean_ns']):>10} {fmt_ns(c['median_ns']):>10} "
                f"{c['log_var']:8.4f} {c['cv']:7.3f}"
            )
        err = "  ".join(f"{k} {_pct(v['rel_error'])}" for k, v in f["errors"].items())
        lines.append(f"  fitted vs measured: {err}")
        s = f["split"]
        lines.append(
            f"  sojourn mean {fmt_ns(s['sojourn_mean_ns'])} "
            f"= service {fmt_ns(s['service_mean_ns'])} + queue {fmt_ns(s['queue_mean_ns'])} "
            f"+ send lag {fmt_ns(s['send_lag_mean_ns'])} "
            f"+ other {fmt_ns(s['other_mean_ns'])}"
        )
        if "cold" in f:
            c = f["cold"]
            lines.append(
                f"  across {', '.join(f['points'])}: cold start x{1 + c['extra']:.3f} "
                f"(tau {fmt_ns(c['tau_ns'])}, {_tau_basis(c)}); "
                "the mixture is of warm service times"
            )
            for b in f["by_point"]:
                lines.append(
                    f"    {b['point']}: service mean {fmt_ns(b['measured_service_mean_ns'])} "
                    f"measured, {fmt_ns(b['model_service_mean_ns'])} modelled"
                )
        if "speed" in f:
            lines.append(f"  host speed: {speed_sentence(f['speed'])}")
        if "pause" in f:
            lines.append(f"  pauses: {pause_sentence(f['pause'])}")
        if "periodic" in f:
            lines.append(f"  periodic: {periodic_sentence(f['periodic'])}")
        if "order" in f:
            lines.append(f"  order: {order_sentence(f['order'])}")
        for h in f["noise_hints"]:
            lines.append(f"  noise hint ({h['source']}, {h['basis']}): noise={h['spec']}")
        for w in f["warnings"]:
            lines.append(f"  warning: {w}")
        sets = f.get("synth_settings") or [f["synth_set"]]
        lines.append("  synth: " + " ".join(f"--set '{x}'" for x in sets))
    return "\n".join(lines)


def section(res: Results, out_dir: Path) -> str | None:
    """The report's section: per point, the fit table and the figure (drawn into
    ``out_dir/figures``), from the results folder's ``fit.json`` (``taillab fit RESULTS --out
    RESULTS`` writes it there); None without one."""
    fit_json = res.root / "fit.json"
    if not fit_json.exists():
        return None
    fig_dir = out_dir / "figures"
    try:
        doc = read_fit(fit_json)
    except FitError as e:
        return f"<h2>Service-time fit</h2><p class=note>{esc(e)}</p>"
    parts = [
        "<h2>Service-time fit</h2><p class=muted>Mixture of log-normals fitted by maximum "
        "likelihood (EM on ln of service time, components chosen by BIC), from "
        "<code>fit.json</code>. Variance is that of ln(service time), as in TailWAG's "
        "Table 2.</p>"
    ]
    for f in doc["fits"]:
        if "error" in f:
            parts.append(
                f"<p class=note>point {esc(f['point'])}: not fitted: {esc(f['error'])}</p>"
            )
            continue
        rows = [
            [
                str(i + 1),
                f"{c['weight']:.4f}",
                fmt_ns(c["mean_ns"]),
                fmt_ns(c["median_ns"]),
                f"{c['log_var']:.4f}",
                f"{c['cv']:.3f}",
            ]
            for i, c in enumerate(f["components"])
        ]
        parts.append(f"<h3>point {esc(f['point'])}</h3>")
        parts.append(
            html.table(["component", "weight", "mean", "median", "variance (ln)", "cv"], rows)
        )
        err = [
            [k, fmt_ns(v["measured_ns"]), fmt_ns(v["fitted_ns"]), _pct(v["rel_error"])]
            for k, v in f["errors"].items()
        ]
        parts.append(html.table(["statistic", "measured", "fitted", "error"], err))
        sets = f.get("synth_settings") or [f["synth_set"]]
        parts.append(
            f"<p>KS distance {f['ks']:.4f} over {f['n']} service times ({esc(f['source'])}). "
            "Synth: " + " ".join(f"<code>--set '{esc(x)}'</code>" for x in sets) + "</p>"
        )
        if "periodic" in f:
            parts.append(f"<p>{esc(periodic_sentence(f['periodic']))}</p>")
        if "order" in f:
            parts.append(f"<p>Order: {esc(order_sentence(f['order']))}</p>")
        name = "fit_" + _safe(f["point"])
        service_fit(f, fig_dir / name)
        parts.append(
            html.figure_tag(
                fig_dir,
                name,
                "Measured (bars, steps) vs fitted (line; components dashed) density of "
                "ln(service time) and CDF (TailWAG Fig. 5).",
            )
        )
    return "\n".join(parts)
