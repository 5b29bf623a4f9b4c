"""Synthetic results folders in the harness's layout, for tests that need shapes the golden
folders in tests/data do not cover (bad schemas, many load points, failed checks).

Requests are simulated with the Lindley recursion of a FIFO queue fed by Poisson arrivals, so
the files hold plausible queueing behaviour (the tail grows with load), not constants.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram
from scipy import stats

from taillab.hlog import write_hlog

METRICS = ["sojourn", "service", "queue", "send_lag"]
HOST = {"cpu": "Synthetic CPU", "cores": 2, "kernel": "6.1.0", "taillab": "0.1.0", "git": "0000000"}


def _simulate(
    qps: float,
    threads: int,
    mean_service_ns: float,
    duration_s: float,
    seed: int,
    service_fn=None,
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = max(50, int(qps * duration_s))
    intended = np.cumsum(rng.exponential(1e9 / qps, n))
    send_lag = rng.exponential(2_000, n) + 500
    if service_fn is None:
        service = rng.exponential(mean_service_ns, n) + 1_000
    else:
        service = np.asarray(service_fn(rng, n), dtype=float)
    # c servers approximated by one server c times faster: enough for a fixture.
    eff = service / threads
    enq = intended + send_lag + 3_000
    start = np.empty(n)
    free = 0.0
    for i in range(n):
        start[i] = max(enq[i], free)
        free = start[i] + eff[i]
    finished = start + service
    completed = finished + 3_000
    return {
        "intended": intended,
        "sent": intended + send_lag,
        "enqueued": enq,
        "started": start,
        "finished": finished,
        "completed": completed,
    }


def _stats(v: np.ndarray) -> dict:
    q = np.percentile(v, [50, 90, 95, 99, 99.9])
    return {
        "count": int(len(v)),
        "mean": float(v.mean()),
        "stdev": float(v.std()),
        "min": float(v.min()),
        "p50": q[0],
        "p90": q[1],
        "p95": q[2],
        "p99": q[3],
        "p999": q[4],
        "max": float(v.max()),
    }


def make_run(
    run_dir: Path,
    *,
    app="synth",
    config="integrated",
    threads=1,
    qps=1000.0,
    seed=1,
    duration_s=3.0,
    mean_service_ns=200_000.0,
    save_requests=False,
    failed_checks=(),
    schema="taillab.run/1",
    extra=None,
    service_fn=None,
) -> dict:
    """Write one run folder; returns its summary dict.

    ``service_fn(rng, n)`` draws the n service times (ns) instead of the default exponential.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    t = _simulate(qps, threads, mean_service_ns, duration_s, seed, service_fn)
    m = {
        "sojourn": t["completed"] - t["intended"],
        "service": t["finished"] - t["started"],
        "queue": t["started"] - t["enqueued"],
        "send_lag": t["sent"] - t["intended"],
    }
    (run_dir / "hist").mkdir(exist_ok=True)
    sec = ((t["completed"] - t["intended"][0]) // 1e9).astype(int)
    for name, vals in m.items():
        ivs = []
        for s in range(int(sec.max()) + 1):
            h = HdrHistogram(1, 3600 * 10**9, 3)
            for v in vals[sec == s]:
                h.record_value(int(v))
            ivs.append((float(s), 1.0, h))
        write_hlog(run_dir / "hist" / f"{name}.hlog", ivs, name)
    if save_requests:
        with open(run_dir / "requests.csv", "w") as f:
            # Like the harness: warmup requests are saved too, marked measured=0.
            f.write("id,worker,intended,sent,enqueued,started,finished,completed,measured\n")
            for i in range(len(t["intended"])):
                stamps = ",".join(
                    str(int(t[k][i]))
                    for k in ("intended", "sent", "enqueued", "started", "finished", "completed")
                )
                f.write(f"{i},{i % threads},{stamps},1\n")
    n = len(t["intended"])
    achieved = n / ((t["intended"][-1] - t["intended"][0]) / 1e9)
    summary = {
        "schema": schema,
        "app": app,
        "params": {"spin_ns": 1000},
        "config": config,
        "threads": threads,
        "seed": seed,
        "arrival": "poisson",
        "wait": "hybrid",
        "shaper": "inline",
        "offered_qps": qps,
        "scheduled_qps": qps * 0.999,
        "achieved_qps": achieved,
        "duration_s": duration_s,
        "requests": {"warmup": 10, "measured": n, "unfinished": 0, "errors": 0},
        "discipline": "fifo",
        "spin_margin_ns": 50_000,
        "net_delay": None,
        "utilization": qps * m["service"].mean() * 1e-9 / threads,
        "latency_ns": {k: _stats(v) for k, v in m.items()},
        "checks": {
            "rate": {
                "ok": "rate" not in failed_checks,
                "verdict": "achieved within 1%",
                "offered": qps,
                "achieved": achieved,
            },
            "send_lag": {
                "ok": "send_lag" not in failed_checks,
                "threshold_ns": 50_000,
                "verdict": "p99 send lag 60 µs > 50 µs"
                if "send_lag" in failed_checks
                else "p99 send lag 10 µs",
            },
            "saturation": {"ok": "saturation" not in failed_checks, "verdict": "no backlog"},
        },
        "host": HOST,
        "started_at": "2026-11-22T02:00:00Z",
        "interval_s": 1.0,
        "future_section": {"ignored": True},
    }
    if extra:
        summary.update(extra)
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def _ci(values: list[float]) -> dict:
    v = np.asarray(values, dtype=float)
    est = float(v.mean())
    if len(v) < 2:
        return {"estimate": est, "ci_low": est, "ci_high": est, "rel_half_width": 0.0, "n": 1}
    hw = float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v)))
    return {
        "estimate": est,
        "ci_low": est - hw,
        "ci_high": est + hw,
        "rel_half_width": hw / est if est else 0.0,
        "n": int(len(v)),
    }


def make_sweep(
    root: Path,
    *,
    qps=(500.0, 1500.0, 2500.0),
    threads=(1,),
    configs=("integrated",),
    runs=3,
    app="synth",
    mean_service_ns=200_000.0,
    duration_s=2.0,
    failed=None,
    kind="sweep",
    aggregate=True,
    slowdown=1.0,
    seed0=1,
) -> Path:
    """Write an experiment folder with one point per (config, threads, qps).

    ``failed`` maps a point id to the checks its first run fails; ``slowdown`` scales service
    times (for before/after comparisons).
    """
    root.mkdir(parents=True, exist_ok=True)
    failed = failed or {}
    points = []
    for cfg in configs:
        for th in threads:
            for q in qps:
                pid = f"{cfg}-t{th}-q{int(q)}"
                pt = {
                    "id": pid,
                    "qps": q,
                    "threads": th,
                    "config": cfg,
                    "app": app,
                    "params": {"spin_ns": 1000},
                }
                points.append(pt)
                sums = []
                for k in range(runs):
                    extra_ns = 20_000.0 if cfg != "integrated" else 0.0
                    sums.append(
                        make_run(
                            root / "points" / pid / f"run-{k}",
                            app=app,
                            config=cfg,
                            threads=th,
                            qps=q,
                            seed=seed0 + 1000 * k + int(q) + th,
                            duration_s=duration_s,
                            mean_service_ns=mean_service_ns * slowdown + extra_ns,
                            failed_checks=failed.get(pid, ()) if k == 0 else (),
                        )
                    )
                if not aggregate:
                    continue
                metrics = {}
                for m in METRICS:
                    for st in ("mean", "p95", "p99"):
                        metrics[f"{m}.{st}"] = _ci([s["latency_ns"][m][st] for s in sums])
                agg = {
                    "schema": "taillab.aggregate/1",
                    "point": pt,
                    "runs": runs,
                    "target": 0.01,
                    "target_met": all(v["rel_half_width"] <= 0.01 for v in metrics.values()),
                    "metrics": metrics,
                    "merged": {m: sums[0]["latency_ns"][m] for m in METRICS},
                    "stopped": "run cap 2 reached before the ±1.00% target",
                }
                (root / "points" / pid / "aggregate.json").write_text(json.dumps(agg, indent=1))
    exp = {
        "schema": "taillab.experiment/1",
        "kind": kind,
        "parameters": {"runs_min": runs, "target": 0.01},
        "points": points,
        "host": HOST,
        "taillab": "0.1.0",
    }
    (root / "experiment.json").write_text(json.dumps(exp, indent=1))
    return root


#: The planted causes of :func:`make_attribution`: key, levels, and what the second level
#: does to a service time (ns) drawn from ``base_ns + Exp(jitter_ns)``.
ATTRIBUTION_FACTORS = [
    {"key": "app.scale", "levels": ["1", "1.5"]},  # +20 µs to every service
    {"key": "app.noise", "levels": ["none", "slow"]},  # 3 % of services +300 µs
    {"key": "app.lock_spin", "levels": ["10us", "20us"]},  # nothing
]


def attribution_service(cell: list[int], base_ns=100_000.0, jitter_ns=5_000.0):
    """The service draw of a cell of :data:`ATTRIBUTION_FACTORS`."""

    def draw(rng, n):
        s = base_ns + rng.exponential(jitter_ns, n)
        if cell[0]:
            s = s + 20_000.0
        if cell[1]:
            s = s + np.where(rng.random(n) < 0.03, 300_000.0, 0.0)
        return s

    return draw


#: The fourth factor of :func:`make_attribution`'s fraction (no effect: services ignore it).
FRACTION_FACTOR = {"key": "harness.wait", "levels": ["hybrid", "spin"]}


def make_attribution(root: Path, *, blocks=3, duration_s=1.5, qps=1000.0, fraction=False) -> Path:
    """A ``taillab attribute`` folder over :data:`ATTRIBUTION_FACTORS` (full factorial): the
    design.json and experiment.json the command writes, every cell's run per block with its
    requests, services drawn by :func:`attribution_service`. ``fraction``: the four factors
    ATTRIBUTION_FACTORS + FRACTION_FACTOR in the resolution-IV half fraction taillab makes
    (8 cells, D = ABC, its two-factor interactions aliased in pairs)."""
    root.mkdir(parents=True, exist_ok=True)
    factors = ATTRIBUTION_FACTORS + [FRACTION_FACTOR] if fraction else ATTRIBUTION_FACTORS
    cells = [[a, b, c] for a in (0, 1) for b in (0, 1) for c in (0, 1)]
    if fraction:
        cells = [[a, b, c, a ^ b ^ c] for a, b, c in cells]
    ids = [
        f"integrated-t1-q{qps:g}-"
        + "-".join(
            f"{f['key'].split('.')[-1]}-{f['levels'][lv]}"
            for f, lv in zip(factors, cell, strict=True)
        )
        for cell in cells
    ]
    rng = np.random.default_rng(5)
    design = {
        "schema": "taillab.design/1",
        "factors": factors,
        "kind": "fractional" if fraction else "full",
        "resolution": 4 if fraction else None,
        "generators": ["D = ABC"] if fraction else [],
        "aliases": [["A×B", "C×D"], ["A×C", "B×D"], ["A×D", "B×C"]] if fraction else [],
        "cells": cells,
        "blocks": blocks,
        "seed": 5,
        "order": [list(rng.permutation(len(cells)).tolist()) for _ in range(blocks)],
        "cell_ids": ids,
    }
    (root / "design.json").write_text(json.dumps(design, indent=1))
    for b in range(blocks):
        for i in design["order"][b]:
            make_run(
                root / "points" / ids[i] / f"run-{b}",
                qps=qps,
                seed=100 * b + i + 1,
                duration_s=duration_s,
                save_requests=True,
                service_fn=attribution_service(cells[i]),
            )
    exp = {
        "schema": "taillab.experiment/1",
        "kind": "attribute",
        "parameters": {"attribute": {"factors": factors, "blocks": blocks}},
        "points": [{"id": pid, "qps": qps, "threads": 1, "config": "integrated"} for pid in ids],
        "host": HOST,
        "taillab": "0.1.0",
    }
    (root / "experiment.json").write_text(json.dumps(exp, indent=1))
    return root
