"""The fit of one point of a results folder."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..mixture import duration_spec
from ..results import RUN_SCHEMA, Results, read_json
from .common import (
    MIN_REQUESTS,
    NS_PER_S,
    FitError,
    _below,
    _plain,
    _point_records,
    _positive,
    _queue_of,
    measured_service,
)
from .mixfit import _mixture_entry, fit_mixture
from .order import order_effect
from .pauses import _few_pauses, pause_sequence, pauses
from .periodic import _server_order, _with_periodic, periodic


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
        length_ns = irq / 100 / intr * NS_PER_S
        hints.append(_hint("interrupts", intr / ncpu, length_ns, "host intr/s per CPU"))

    def workers(e, key):
        w = [t.get(key) for t in e.get("workers") or [] if isinstance(t, dict)]
        w = [x for x in w if isinstance(x, (int, float))]
        return float(np.mean(w)) if w else math.nan

    invol = avg(lambda e: workers(e, "invol_per_s"))
    wait = avg(lambda e: workers(e, "runq_wait_pct"))
    if invol > 0 and math.isfinite(wait):
        hints.append(
            _hint("preemption", invol, wait / 100 / invol * NS_PER_S, "worker involuntary switches")
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


def fewest_thread_points(res: Results) -> list[str]:
    """The points with the fewest workers (a fit across loads pools them)."""
    pts = res.points
    if "threads" not in pts or pts["threads"].isna().all():
        return [str(p) for p in pts["point"]]
    t = pts["threads"].min()
    return [str(p) for p in pts[pts["threads"] == t]["point"]]
