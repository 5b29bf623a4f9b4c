"""The ideal's tables, figures and report section, on results whose ``ideal`` sections come
from a real replay of each run's saved requests (a FIFO queue with the run's workers)."""

from __future__ import annotations

import csv
import heapq
import json
from pathlib import Path

import fixtures
import numpy as np
import pytest

import taillab
from taillab import ideal as I
from taillab.report import write_report

STATS = ["mean", "p50", "p90", "p95", "p99", "p999", "max"]


def _replay(run: Path, threads: int, lifo: bool) -> None:
    """Add ``ideal`` to summary.json and ``ideal_completed`` to requests.csv, as the harness
    does: the run's intended times and measured service times through an exact queue."""
    with open(run / "requests.csv") as f:
        rows = list(csv.DictReader(f))
    a = np.array([int(r["intended"]) for r in rows])
    s = np.array([int(r["finished"]) - int(r["started"]) for r in rows])
    end = np.zeros(len(rows), dtype=np.int64)
    if not lifo:
        free = [0] * threads
        for i in range(len(rows)):
            f0 = heapq.heappop(free)
            end[i] = max(a[i], f0) + s[i]
            heapq.heappush(free, int(end[i]))
    else:
        # One server, newest waiting request first.
        t, i, stack = 0, 0, []
        while i < len(rows) or stack:
            while i < len(rows) and a[i] <= t:
                stack.append(i)
                i += 1
            if not stack:
                t = a[i]
                continue
            j = stack.pop()
            t = t + s[j]
            end[j] = t
    soj = (end - a)[[r["measured"] == "1" for r in rows]]
    doc = json.loads((run / "summary.json").read_text())
    q = np.percentile(soj, [50, 90, 95, 99, 99.9], method="inverted_cdf")
    ideal = {
        "mean": float(soj.mean()),
        **dict(zip(["p50", "p90", "p95", "p99", "p999"], map(float, q), strict=True)),
        "max": float(soj.max()),
    }
    meas = doc["latency_ns"]["sojourn"]
    doc["ideal"] = {
        "method": "replay",
        "servers": threads,
        "discipline": doc["discipline"],
        "dispatch": "shared",
        "replayed": len(rows),
        "sojourn": {"count": int(len(soj)), **ideal},
        "excess": {k: meas[k] - ideal[k] for k in STATS},
        "ratio": {k: meas[k] / ideal[k] for k in STATS},
    }
    (run / "summary.json").write_text(json.dumps(doc))
    with open(run / "requests.csv", "w") as f:
        f.write(",".join(rows[0].keys()) + ",ideal_completed\n")
        for r, e in zip(rows, end, strict=True):
            f.write(",".join(r.values()) + f",{e}\n")


@pytest.fixture(scope="module")
def ideal_sweep(tmp_path_factory) -> Path:
    """Points over load x threads x discipline, 3 runs each, every run with its ideal."""
    root = tmp_path_factory.mktemp("ideal") / "s"
    points = []
    for th, disc in ((1, "fifo"), (2, "fifo"), (1, "lifo")):
        for q in (800.0, 2400.0):
            pid = f"t{th}-{disc}-q{int(q * th)}"
            pt = {"id": pid, "qps": q * th, "threads": th, "config": "integrated", "app": "synth"}
            points.append(pt)
            for k in range(3):
                run = root / "points" / pid / f"run-{k}"
                fixtures.make_run(
                    run,
                    threads=th,
                    qps=q * th,
                    seed=10 * k + th + int(q),
                    duration_s=1.5,
                    save_requests=True,
                    extra={"discipline": disc, "dispatch": "shared"},
                )
                _replay(run, th, disc == "lifo")
    (root / "experiment.json").write_text(
        json.dumps(
            {
                "schema": "taillab.experiment/1",
                "kind": "sweep",
                "points": points,
                "host": fixtures.HOST,
                "parameters": {},
            }
        )
    )
    return root


@pytest.fixture(scope="module")
def res(ideal_sweep):
    return taillab.load(ideal_sweep)


def test_runs_and_points_tables(res):
    runs = I.ideal_runs(res)
    assert len(runs) == 18
    # The fixture's measured queue differs from the exact one, so excess = measured - ideal.
    for s in ("mean", "p99"):
        np.testing.assert_allclose(
            runs[f"excess_{s}"], runs[f"measured_{s}"] - runs[f"ideal_{s}"], rtol=1e-9
        )
    pts = I.ideal_points(res)
    assert len(pts) == 6 and set(pts["discipline"]) == {"fifo", "lifo"}
    row = pts.iloc[0]
    vals = runs[runs["point"] == row["point"]]["ideal_p99"]
    assert row["ideal_p99"] == pytest.approx(vals.mean())
    assert row["ideal_p99_ci_low"] < row["ideal_p99"] < row["ideal_p99_ci_high"]
    # Higher load queues more: the ideal itself grows with load at each thread count.
    t1 = pts[(pts["threads"] == 1) & (pts["discipline"] == "fifo")].sort_values("qps")
    assert t1["ideal_p99"].is_monotonic_increasing


def test_latency_vs_load_ideal(res, tmp_path):
    fig = I.latency_vs_load_ideal(res, tmp_path / "lvl")
    assert (tmp_path / "lvl.png").exists()
    ax = [a for a in fig.axes if a.get_visible()][0]
    ideal_lines = [ln for ln in ax.get_lines() if ln.get_label().endswith("ideal")]
    # Lines per thread count and, since the sweep varies it, per discipline.
    assert {ln.get_label() for ln in ideal_lines} == {
        "1 thr, fifo ideal",
        "1 thr, lifo ideal",
        "2 thr, fifo ideal",
    }
    assert ax.collections, "no CI band for the ideal"
    fig = I.latency_vs_load_ideal(res, None, stat="p95", normalize=True)
    ax = [a for a in fig.axes if a.get_visible()][0]
    # Normalized to the 1-thread measured value at the lowest load: that point is exactly 1.
    (one,) = [c for c in ax.containers if c.get_label() == "1 thr, fifo measured"]
    assert one.lines[0].get_ydata()[0] == pytest.approx(1.0)


def test_ideal_ccdf_draws_both_curves(res, tmp_path):
    fig = I.ideal_ccdf(res, tmp_path / "cc", max_lines=2)
    ax = fig.axes[0]
    labels = [ln.get_label() for ln in ax.get_lines()]
    assert sum(lab.endswith("measured") for lab in labels) == 2
    assert sum(lab.endswith(" ideal") for lab in labels) == 2
    for ln in ax.get_lines():
        y = ln.get_ydata()
        assert np.all(np.diff(y) <= 1e-12) and y.max() <= 1.0  # a CCDF never rises


def test_tales_panels_by_threads_and_discipline(res, tmp_path):
    fig = I.tales_panels(res, tmp_path / "bythreads", by="threads")
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 2  # two utilizations (fifo only: lifo ran with one thread)
    labels = {ln.get_label() for ln in axes[0].get_lines()}
    assert {"threads=1", "threads=2"} <= labels
    assert all("discipline fifo" in a.get_title() for a in axes)
    fig = I.tales_panels(res, tmp_path / "bydisc", by="discipline")
    # Only loads where disciplines differ at equal threads: 1 thread at 800 and 2400 QPS.
    assert len([a for a in fig.axes if a.get_visible()]) == 2
    labels = {ln.get_label() for a in fig.axes for ln in a.get_lines()}
    assert {"discipline=fifo", "discipline=lifo", "discipline=lifo ideal"} <= labels


def test_lifo_ideal_keeps_mean_stretches_tail(res):
    pts = I.ideal_points(res)
    hi = pts[(pts["threads"] == 1) & (pts["qps"] == 2400.0)].set_index("discipline")
    # Same arrivals would give the same mean; these are different seeds, so only roughly.
    assert hi.loc["lifo", "ideal_mean"] == pytest.approx(hi.loc["fifo", "ideal_mean"], rel=0.3)
    assert hi.loc["lifo", "ideal_max"] > hi.loc["fifo", "ideal_max"]


def test_report_has_excess_table_and_figures(ideal_sweep, tmp_path):
    page = write_report(ideal_sweep, tmp_path / "rep")
    html = page.read_text()
    assert "<h2>Measured vs ideal</h2>" in html
    for name in ("ideal_ccdf", "latency_vs_load_ideal", "tales_by_threads", "tales_by_discipline"):
        assert f'id="{name}"' in html, name
        assert (tmp_path / "rep" / "figures" / f"{name}.png").exists()


def test_no_ideal_is_said_not_drawn(sweep_dir, tmp_path):
    res = taillab.load(sweep_dir)
    assert I.ideal_runs(res).empty and I.excess_html(res) == ""
    with pytest.raises(I.F.FigureError, match="per-request records"):
        I.ideal_ccdf(res)
    assert I.figure_plans(res) == []


def test_load_over_time_shows_a_profile(tmp_path):
    run = tmp_path / "r"
    fixtures.make_run(run, qps=1000, duration_s=4.0, extra={"arrival": "steps:500@2s,1500@2s"})
    res = taillab.load(run)
    assert [p[0] for p in I.figure_plans(res)] == ["load_over_time"]
    fig = I.load_over_time(res, tmp_path / "lot")
    (line,) = fig.axes[0].get_lines()
    assert len(line.get_ydata()) >= 3
