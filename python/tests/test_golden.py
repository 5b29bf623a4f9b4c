"""Loaders against results folders written by the real binary (tests/data, see regen.sh).

These pin the contract between the Rust writer and the Python reader: the interval logs
decode, merge back to the counts and percentiles summary.json reports, and requests.csv
agrees with both.
"""

import json

import numpy as np
import pytest
from conftest import golden

import taillab
from taillab import figures as F
from taillab.report import write_report


def test_run_intervals_merge_to_summary():
    d = golden("run-synth")
    res = taillab.load(d)
    summary = json.loads((d / "summary.json").read_text())
    assert res.kind == "run" and res.runs.iloc[0]["app"] == "synth"
    for metric, st in summary["latency_ns"].items():
        h = res.histogram(metric)
        assert h.total == st["count"], metric
        # The same histogram and the same percentile rule on both sides: exactly equal.
        for q, key in ((0.5, "p50"), (0.9, "p90"), (0.95, "p95"), (0.99, "p99"), (0.999, "p999")):
            assert h.quantile(q) == st[key], (metric, key)
        assert h.max == st["max"] and h.min == st["min"]


def test_run_requests_agree_with_summary():
    d = golden("run-synth")
    res = taillab.load(d)
    req = res.requests
    r = res.runs.iloc[0]
    m = req[req["measured"] == 1]
    assert len(m) == r["requests_measured"]
    # One monotonic clock: every request passes its stamps in order.
    s = m[["intended", "sent", "enqueued", "started", "finished", "completed"]].to_numpy()
    assert (np.diff(s, axis=1) >= 0).all()
    assert np.percentile(m["sojourn"], 99) == pytest.approx(r["sojourn_p99"], rel=0.02)
    assert m["service"].mean() == pytest.approx(r["service_mean"], rel=0.01)


def test_stall_shows_in_latency_over_time():
    d = golden("run-stall")
    res = taillab.load(d)
    iv = res.intervals
    soj = iv[iv["metric"] == "sojourn"].sort_values("t_s")
    worst = soj.loc[soj["max"].idxmax()]
    # The 300 ms stall starts 1 s into the measured phase: the worst interval is the one
    # holding it, and its max is about the stall's length (requests waited through it).
    assert 0.5 <= worst["t_s"] <= 1.5
    assert worst["max"] > 200e6
    quiet = soj[(soj["t_s"] < 0.5) | (soj["t_s"] > 2.0)]
    assert (quiet["p99"] < worst["p99"] / 10).any()
    fig = F.latency_over_time(res)
    assert len(fig.axes[0].get_lines()) == 3


def test_collection_latency_grows_with_load(tmp_path):
    d = golden("loads")
    res = taillab.load(d)
    assert res.kind == "collection" and list(res.points["qps"]) == [500, 1500, 2500]
    p99 = res.points["sojourn_p99"].to_numpy()
    mean = res.points["sojourn_mean"].to_numpy()
    # M/M/1: mean 1/(mu - lambda) grows 1.8x from rho 0.1 to 0.5; noise is far smaller.
    assert mean[2] > 1.3 * mean[0] and p99[2] > p99[0]


def test_sweep_aggregates_agree_with_runs():
    d = golden("sweep")
    res = taillab.load(d)
    assert res.kind == "sweep" and len(res.points) == 4 and len(res.runs) == 8
    assert sorted(res.points["threads"].unique()) == [1, 2]
    for _, p in res.points.iterrows():
        runs = res.runs[res.runs["point"] == p["point"]]
        assert p["aggregated"] and p["runs"] == len(runs) == 2
        # The CI is a t-interval over per-run values, centred on their mean.
        assert p["sojourn_p99"] == pytest.approx(runs["sojourn_p99"].mean(), rel=1e-12)
        assert p["sojourn_p99_ci_low"] < p["sojourn_p99"] < p["sojourn_p99_ci_high"]
        # merged = the runs' interval logs added up: our merge must give the same numbers.
        h = res.histogram("sojourn", point=p["point"])
        assert h.total == p["merged_sojourn_count"] == runs["sojourn_count"].sum()
        assert h.quantile(0.99) == p["merged_sojourn_p99"]
        assert h.quantile(0.999) == p["merged_sojourn_p999"]
        assert isinstance(p["stopped"], str) and p["stopped"]


def test_sweep_report(tmp_path):
    page = write_report(golden("sweep"), tmp_path / "rep")
    html = page.read_text()
    for fig in ("latency_vs_load", "latency_vs_utilization", "thread_scaling", "checks_panel"):
        assert f'id="{fig}"' in html, fig
    assert "config_comparison" not in html  # one configuration: nothing to compare


def test_repeated_run_is_one_point():
    res = taillab.load(golden("repeat"))
    assert res.kind == "run" and len(res.points) == 1 and len(res.runs) == 3
    p = res.points.iloc[0]
    assert p["runs"] == 3 and p["sojourn_p99_n"] == 3
    assert len(set(res.runs["seed"])) == 3  # fresh seed per run
