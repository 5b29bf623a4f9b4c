"""The order check: a run's service times replayed in order and shuffled."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from .common import _by_send_time, _fcfs, _in_order, _stats3
from .config import current


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
    shuffled only among the requests sent in the same window of ``order_windows_ns`` — the
    part of the effect made by clustering at time scales shorter than the window (a burst
    of slow requests within 100 ms shows at 100 ms and 1 s; a slow second of the host only
    at 1 s and in the whole-run ``effect``).
    """
    rng = np.random.default_rng(seed)
    inorder = []
    shuffled = {
        w: [[] for _ in range(current().order_shuffles)]
        for w in (None, *current().order_windows_ns)
    }
    for df in dfs:
        a, s, m = _by_send_time(df)
        inorder.append(_in_order(df, a, s, m, workers))
        for w, runs in shuffled.items():
            for k in range(current().order_shuffles):
                runs[k].append(_fcfs(a, _shuffle_within(a, s, w, rng), workers)[m])

    def stats(x: np.ndarray) -> dict[str, float]:
        return dict(zip(("mean_ns", "p95_ns", "p99_ns"), _stats3(x).tolist(), strict=True))

    rep = stats(np.concatenate(inorder))

    def effect(runs: list[list[np.ndarray]]) -> tuple[dict[str, float], dict[str, float]]:
        sh = [stats(np.concatenate(x)) for x in runs]
        shuf = {k: float(np.mean([x[k] for x in sh])) for k in rep}
        return shuf, {
            k.removesuffix("_ns"): rep[k] / shuf[k] - 1 if shuf[k] else math.nan for k in rep
        }

    shuf, eff = effect(shuffled[None])
    return {
        "workers": workers,
        "shuffles": current().order_shuffles,
        "in_order": rep,
        "shuffled": shuf,
        "effect": eff,
        "windows": [
            {"window_ns": w, "effect": effect(shuffled[w])[1]} for w in current().order_windows_ns
        ],
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
