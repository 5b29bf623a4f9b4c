import numpy as np
import pytest

import taillab
from taillab import figures as F


@pytest.fixture(scope="module")
def sweep(sweep_dir):
    return taillab.load(sweep_dir)


def _visible(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def _written(base):
    png, svg = base.with_suffix(".png"), base.with_suffix(".svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]


def test_service_cdf(sweep, tmp_path):
    fig = F.service_cdf(sweep, tmp_path / "cdf")
    _written(tmp_path / "cdf")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    (line,) = ax.get_lines()
    y = line.get_ydata()
    assert y[-1] == pytest.approx(1.0) and np.all(np.diff(y) >= 0)  # a CDF
    assert line.get_label().startswith("synth")


def test_sojourn_ccdf(sweep, tmp_path):
    fig = F.sojourn_ccdf(sweep, tmp_path / "ccdf")
    _written(tmp_path / "ccdf")
    ax = fig.axes[0]
    assert ax.get_yscale() == "log"
    assert len(ax.get_lines()) == len(sweep.points)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert {"p90", "p99", "p99.9"} <= set(labels)
    for line in ax.get_lines():
        y = line.get_ydata()
        assert np.all(np.diff(y) <= 0) and y.min() > 0  # a CCDF on a log axis
    assert len(F.sojourn_ccdf(sweep, max_lines=3).axes[0].get_lines()) == 3


def test_latency_vs_load(sweep, tmp_path):
    fig = F.latency_vs_load(sweep, tmp_path / "load")
    _written(tmp_path / "load")
    axes = _visible(fig)
    assert len(axes) == 4  # app x config x threads
    ax = axes[0]
    assert ax.get_yscale() == "log"
    assert [c.get_label() for c in ax.containers] == ["mean", "p95", "p99"]
    assert "(µs" in ax.get_ylabel()
    # The p99 line holds the aggregate estimates, in the axis unit, in load order.
    p = sweep.points[(sweep.points["config"] == "integrated") & (sweep.points["threads"] == 1)]
    p = p.sort_values("qps")
    y = ax.containers[2].lines[0].get_ydata()
    assert np.allclose(y, p["sojourn_p99"].to_numpy() / 1e3)
    assert np.allclose(ax.containers[2].lines[0].get_xdata(), p["qps"])


def test_latency_vs_utilization(sweep):
    fig = F.latency_vs_load(sweep, x="utilization")
    ax = _visible(fig)[0]
    assert "utilization" in ax.get_xlabel()
    assert np.all(ax.containers[0].lines[0].get_xdata() < 1.0)
    with pytest.raises(F.FigureError, match="x must be"):
        F.latency_vs_load(sweep, x="bogus")


def test_thread_scaling(sweep, tmp_path):
    fig = F.thread_scaling(sweep, tmp_path / "thr")
    _written(tmp_path / "thr")
    axes = _visible(fig)
    assert len(axes) == 2  # one per (app, config)
    assert [c.get_label() for c in axes[0].containers] == ["threads=1", "threads=2"]
    assert "p95" in axes[0].get_ylabel()


def test_config_comparison(sweep, tmp_path):
    fig = F.config_comparison(sweep, tmp_path / "cfg")
    _written(tmp_path / "cfg")
    axes = _visible(fig)
    assert len(axes) == 2  # one per (app, threads)
    assert [c.get_label() for c in axes[0].containers] == ["config=integrated", "config=loopback"]


def test_latency_over_time(sweep, tmp_path):
    fig = F.latency_over_time(sweep, tmp_path / "time", point="integrated-t1-q1200")
    _written(tmp_path / "time")
    assert len(fig.axes) == 2  # two runs
    labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
    assert labels == ["sojourn p50", "sojourn p99", "send_lag p99"]
    with pytest.raises(F.FigureError, match="no interval logs"):
        F.latency_over_time(sweep, point="no-such-point")


def test_checks_panel(sweep, tmp_path):
    fig = F.checks_panel(sweep, tmp_path / "checks")
    _written(tmp_path / "checks")
    img = fig.axes[0].get_images()[0].get_array()
    assert img.shape == (len(sweep.runs), 3)
    runs = sweep.runs.reset_index(drop=True)
    bad = runs.index[~runs["checks_ok"]].tolist()
    cols = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert np.argwhere(img == 0).tolist() == [[bad[0], cols.index("send_lag")]]
    assert "1 of 16 runs failed" in fig.axes[0].get_title()


def test_compare_load(sweep, sweep_slow):
    b = taillab.load(sweep_slow)
    fig = F.compare_load(sweep, b)
    ax = _visible(fig)[0]
    a_line, b_line = (c.lines[0] for c in ax.containers)
    assert [c.get_label() for c in ax.containers] == ["A", "B"]
    assert np.all(b_line.get_ydata() > a_line.get_ydata())  # B is 50% slower


def test_unit_choice():
    assert F.unit_for([250_000]) == (1e3, "µs")
    assert F.unit_for([3e9]) == (1e9, "s")
    assert F.unit_for([]) == (1.0, "ns")


def test_a_name_with_dots_keeps_them(tmp_path):
    # Point ids hold axis values such as scale-1.5: the dot is no suffix to replace.
    from matplotlib.figure import Figure

    F.save(Figure(), tmp_path / "over_time_q1000-scale-1.5-noise")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "over_time_q1000-scale-1.5-noise.png",
        "over_time_q1000-scale-1.5-noise.svg",
    ]
