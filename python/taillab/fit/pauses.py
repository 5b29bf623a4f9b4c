"""Stop-the-world pauses (synth's ``pause=``): from the app's own count and from the records."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..mixture import duration_spec
from ..results import read_summary
from .common import MIN_TO_COMPARE, NS_PER_MS, NS_PER_S, QUARTILES, _one, _range_of
from .config import current


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
    mean_ns = total_ms * NS_PER_MS / count
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
        "share": rate * mean_ns / NS_PER_S,
        "threshold_ns": mean_ns / 2,
        "setting": setting,
    }


def _times_of(runs: list[int]) -> tuple[int, int]:
    """How many times a cycle's term repeats: its runs' quartiles, as whole numbers >= 1."""
    q25, _, q75 = np.quantile(np.asarray(runs, dtype=float), QUARTILES)
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
    app's 13 953 (35 % too often; docs/tailwag.md). Pauses and clusters are
    counted alike wherever the blocks end (a cluster's short gap is rarely cut), so a cycle
    — from one cluster to the next — holds pauses / clusters gaps, of which the short ones
    are the clusters' own: ``per``. Its floor and ceiling, or the quartiles of the whole
    stretches (``whole``, between two clusters of one run) when at least
    ``pause_min_whole`` agree with it within ``pause_times_agree``: long records,
    where the stretches are exact counts and the ratio of a few clusters is not (three
    clusters in 200 000 requests of a cycle of four long gaps gave 5)."""
    per = max(per, 1.0)
    if (
        len(whole) >= current().pause_min_whole
        and abs(float(np.mean(whole)) / per - 1) <= current().pause_times_agree
    ):
        return _times_of(whole)
    lo = max(1, math.floor(per))
    return lo, max(lo, math.ceil(per))


def _requests_for(per_event: float) -> int:
    """The requests per point that give ``pause_target`` events ``per_event`` requests apart,
    rounded up to ``pause_round_requests``."""
    cfg = current()
    step = cfg.pause_round_requests
    return math.ceil(cfg.pause_target * per_event / step) * step


def _few_pauses(out: dict[str, Any], pause: dict[str, Any], points: int = 1) -> None:
    """Warns when a point's runs saw so few pauses that its tail cannot repeat: middleware
    with two pauses per 20 000 requests moved 20–90 % against itself from round to round.
    Counted per point over its runs together (their histograms are merged); ``pause``
    covers ``points`` points."""
    n = pause["pauses"] / max(1, points)
    if n < current().pause_min_per_point:
        need = _requests_for(pause["requests"] / max(1, pause["pauses"]))
        out["warnings"].append(
            f"the app paused {n:.1f} times per point: a tail set by so few pauses "
            f"does not repeat from run to run; measure about {need} requests per point "
            f"({current().pause_target} pauses)"
        )
        return
    # Pauses in clusters (a second before the first one's backlog drained) set the tail
    # more than single ones, and are rarer: middleware's mean sojourn moved 21–41 % from
    # round to round with 17 pauses but 3 clusters per point (apps/middleware/README.md).
    c = pause.get("clusters", 0) / max(1, points)
    if 0 < c < current().pause_min_per_point:
        need = _requests_for(pause["requests"] / pause["clusters"])
        out["warnings"].append(
            f"the app's pauses came in {c:.1f} clusters per point (pauses a few hundred "
            "requests apart, whose backlogs add up): a tail set by so few does not repeat "
            f"from run to run; measure about {need} requests per point "
            f"({current().pause_target} clusters)"
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
    than with the pauses as they were. So with at least ``pause_min_hits`` pauses the
    setting becomes ``requests:GAPS,for=lognormal:MEAN,cv=CV``: the gaps as one range (from
    their quartiles), or, when some are a cluster's (below ``pause_short_gap`` of the
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
    if len(lengths) < current().pause_min_hits or len(gaps) < current().pause_min_hits - 1:
        return pause
    lens = np.asarray(lengths)
    mean, cv = float(lens.mean()), float(lens.std() / lens.mean())
    length = (
        f"lognormal:{duration_spec(mean)},cv={cv:.3g}"
        if cv >= current().pause_min_cv
        else duration_spec(mean)
    )
    cut = current().pause_short_gap * np.median(gaps)
    short = gaps < cut
    if MIN_TO_COMPARE <= short.sum() <= len(gaps) - MIN_TO_COMPARE:
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
