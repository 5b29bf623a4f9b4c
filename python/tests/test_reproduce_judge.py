"""The intervals the reproduce rules judge by (taillab.reproduce.judge): their coverage on data
with a known truth, the three-valued comparison and its runs-to-resolve estimate, and a point's
statistics over its runs read from the files a sweep writes.

Coverage is counted over a few hundred seeded trials, so each test gives the same answer every
time; the bands are wide (a few standard errors of a count of 300) but each catches a wrong
formula: an unstretched bootstrap over three runs covers about 73 % of the time, a one-sided
or off-by-one order statistic well under 90 %.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from planted import US, Point, experiment, hlog, stats

from taillab.hlog import Dist
from taillab.reproduce import judge as J
from taillab.results import load

TRIALS = 300
# Fewer draws than the rules' 2000 keep these tests quick; the percentile points move a
# little, the coverage hardly.
DRAWS = 400


def _coverage(trial) -> float:
    return float(np.mean([trial(i) for i in range(TRIALS)]))


def _mean_interval(x: np.ndarray, seed: int) -> tuple[float, float]:
    return J.bootstrap_interval(
        [len(x)], lambda p: x[list(p[0])].mean(), x.mean(), resamples=DRAWS, seed=seed
    )


@pytest.mark.parametrize("k", [3, 8])
def test_bootstrap_over_runs_covers_a_mean_95_percent(k):
    """Per-run estimates normal around a known mean: the stretched percentile bootstrap over
    k runs covers it in about 95 % of trials (3 runs: the t-interval's width)."""
    rng = np.random.default_rng(k)

    def trial(i):
        lo, hi = _mean_interval(rng.normal(10.0, 1.0, k), seed=i)
        return lo <= 10.0 <= hi

    assert 0.91 <= _coverage(trial) <= 0.99


def test_bootstrap_stretch_is_what_makes_three_runs_cover():
    """Without the stretch, three runs' percentile bootstrap covers far less than 95 %."""
    assert J.stretch(3) == pytest.approx(4.303 / 1.960 * math.sqrt(1.5), rel=1e-3)
    assert J.stretch(10) == pytest.approx(2.262 / 1.960 * math.sqrt(10 / 9), rel=1e-3)
    assert math.isnan(J.stretch(1))
    rng = np.random.default_rng(3)

    def plain(i):
        x = rng.normal(10.0, 1.0, 3)
        reps = [x[rng.integers(0, 3, 3)].mean() for _ in range(DRAWS)]
        lo, hi = np.quantile(reps, [0.025, 0.975])
        return lo <= 10.0 <= hi

    assert _coverage(plain) < 0.85


def test_bootstrap_over_two_points_covers_their_ratio():
    """A ratio of two points' means (3 runs each, 10 % noise): covered at least 95 % of the
    time (the stretch takes the fewer runs' t, a little wide for two points together)."""
    rng = np.random.default_rng(7)

    def trial(i):
        a, b = rng.normal(10.0, 1.0, 3), rng.normal(20.0, 2.0, 3)

        def ratio(p):
            return b[list(p[1])].mean() / a[list(p[0])].mean()

        lo, hi = J.bootstrap_interval([3, 3], ratio, b.mean() / a.mean(), resamples=DRAWS, seed=i)
        return lo <= 2.0 <= hi

    assert 0.93 <= _coverage(trial) <= 1.0


def test_order_statistic_interval_covers_a_quantile_95_percent():
    """Three runs of 3000 exponential requests, their histograms added: the order-statistic
    interval of the p99 covers the true one (ln 100 ms) in about 95 % of trials."""
    rng = np.random.default_rng(99)
    truth = math.log(100) * 1e6

    def trial(_):
        runs = [Dist.from_values(rng.exponential(1e6, 3000).astype(np.int64)) for _ in range(3)]
        e = J.quantile_interval(runs, 0.99)
        return e.lo <= truth <= e.hi

    assert 0.91 <= _coverage(trial) <= 0.985


def test_quantile_interval_pools_the_runs():
    """The runs' histograms are added: the quantile is the pooled one, its interval the
    order statistics of all of their requests."""
    runs = [Dist.from_values(np.arange(1, 1001) + 1000 * k) for k in range(3)]
    e = J.quantile_interval(runs, 0.5)
    assert e.value == 1500 and e.runs == 3 and e.how == J.ORDER
    assert e.lo < 1500 < e.hi and e.hi - e.lo < 120
    assert math.isnan(J.quantile_interval([Dist.empty()], 0.5).value)


# --- the three-valued comparison -----------------------------------------------------------------


def _e(v, lo=math.nan, hi=math.nan, runs=3) -> J.Estimate:
    return J.Estimate(v, lo, hi, runs, J.BOOTSTRAP if math.isfinite(lo) else J.POINT)


def test_holds_fails_and_unresolved():
    e = _e(10.0, 9.0, 11.0)
    assert J.compare(e, ">=", 8.0).outcome == J.HOLDS
    assert J.compare(e, ">=", 12.0).outcome == J.FAILS
    assert J.compare(e, "<", 12.0).outcome == J.HOLDS
    assert J.compare(e, "<=", 8.0).outcome == J.FAILS
    assert J.compare(e, "within", (8.0, 12.0)).outcome == J.HOLDS
    assert J.compare(e, "within", (11.5, 12.0)).outcome == J.FAILS
    assert J.compare(e, "factor", 1.05).outcome == J.FAILS
    assert J.compare(_e(1.0, 0.9, 1.1), "factor", 1.2).outcome == J.HOLDS
    c = J.compare(e, ">=", 10.5)
    assert c.outcome == J.UNRESOLVED and c.ok is None
    assert (J.compare(e, ">=", 8).ok, J.compare(e, ">=", 12).ok) == (True, False)
    assert J.compare(_e(math.nan, 1, 2), ">=", 1).outcome == J.NO_DATA
    assert J.compare(_e(-1.0), "factor", 2.0).outcome == J.NO_DATA


def test_without_an_interval_a_point_is_compared_as_before():
    """One run: holds or fails on the value alone, strict where the rule was."""
    assert J.compare(_e(10.0, runs=1), ">=", 10.0).outcome == J.HOLDS
    assert J.compare(_e(10.0, runs=1), ">", 10.0).outcome == J.FAILS
    assert J.compare(_e(10.0, runs=1), "<", 10.0).outcome == J.FAILS
    assert J.compare(_e(1.5, runs=1), "factor", 1.5).outcome == J.HOLDS
    assert J.compare(_e(1 / 1.6, runs=1), "factor", 1.5).outcome == J.FAILS


def test_runs_to_resolve_from_the_width_and_one_over_root_runs():
    """The arm facing the threshold must shrink, as 1/√runs, to the value's distance from it:
    ``runs × (arm ÷ distance)²`` runs in all. A positive statistic against positive bounds is
    read on the log scale (as its interval was stretched); others as they are. Both edges of a
    range count; a value on the threshold never resolves."""
    e = _e(10.0, 9.0, 11.0)

    def more(arm, gap):
        return math.ceil(3 * (arm / gap) ** 2) - 3

    ln = math.log
    assert J.compare(e, ">=", 10.5).more_runs == more(ln(11 / 10), ln(10.5 / 10)) == 9
    assert J.compare(e, ">=", 9.5).more_runs == more(ln(10 / 9), ln(10 / 9.5)) == 10
    assert J.runs_to_resolve(e, "<=", 10.8) == more(ln(11 / 10), ln(10.8 / 10))
    # Inside a range whose both edges cross the interval: the farther-off resolution decides.
    assert J.runs_to_resolve(e, "within", (9.5, 10.8)) == 10
    assert J.compare(e, ">=", 10.0).more_runs is None
    # An effect in µs against 0: on its own scale.
    assert J.compare(_e(-1.0, -2.0, 0.5), "<", 0.0).more_runs == more(1.5, 1.0) == 4
    # A just-resolvable one still asks for at least one more run.
    assert J.runs_to_resolve(_e(10.0, 8.99, 11.0), ">=", 9.0) == 1
    # The runs asked for do resolve it: the upper arm, shrunk as 1/√runs, falls below 10.3.
    n = J.compare(e, ">=", 10.3).more_runs
    assert ln(11 / 10) * math.sqrt(3 / (3 + n)) <= ln(10.3 / 10) + 1e-12
    assert ln(11 / 10) * math.sqrt(3 / (2 + n)) > ln(10.3 / 10)


def test_check_texts_and_doc():
    c = J.compare(_e(2.0, 1.5, 2.5), ">=", 1.2, fmt=lambda v: f"{v:.2g}×")
    assert c.interval_text() == "2× [1.5×, 2.5×]" and c.threshold_text() == "≥ 1.2×"
    doc = c.doc()
    assert doc["outcome"] == "holds" and doc["ci_low"] == 1.5 and doc["runs"] == 3
    assert J.compare(_e(1.0, runs=1), "factor", 1.5).threshold_text() == "within 1.5 either way"


# --- a point's runs, read from a results folder --------------------------------------------------


def _three_runs(root, scales=(1.0, 1.1, 0.9), n=4000, seed=0):
    """One point with three runs whose summaries and sojourn histograms are scaled copies."""
    rng = np.random.default_rng(seed)
    p = Point("integrated-t1-q1000", soj=stats(100 * US, 300 * US, 500 * US))
    d = experiment(root, [p], runs=scales)
    values = []
    for k, s in enumerate(scales):
        v = rng.exponential(100 * US * s, n)
        hlog(d / "points" / p.id / f"run-{k}", "sojourn", v)
        values.append(v)
    return d, values


def test_a_points_statistic_pools_its_runs(tmp_path):
    """A quantile over the runs is the quantile of their histograms added; a judged
    estimate's interval holds it; quick (repeated False): the point's number as before."""
    d, values = _three_runs(tmp_path / "e")
    res = load(d)
    row = res.points.iloc[0].to_dict() | {"stem": "e"}
    judge = J.Judge({"e": res})
    e = judge.quantile(row, "sojourn", "p99")
    pooled = Dist.merge([Dist.from_values(v.astype(np.int64)) for v in values])
    assert e.value == pytest.approx(pooled.quantile(0.99), rel=2e-3)
    assert e.lo < e.value < e.hi and e.runs == 3 and e.how == J.ORDER
    boot = judge.estimate([row], lambda v: v.stat("sojourn", "p99"))
    assert boot.how == J.BOOTSTRAP and e.lo <= boot.lo and boot.hi <= e.hi
    mean = judge.estimate([row], lambda v: v.stat("sojourn", "mean"))
    assert mean.value == pytest.approx(100 * US * 1.1)  # the summaries' means, count-weighted
    quick = J.Judge({"e": res}, repeated=False).estimate([row], lambda v: v.stat("sojourn", "p99"))
    assert quick.how == J.POINT and quick.value == J.value(row, "sojourn", "p99")
    assert not quick.has_interval


def test_a_bootstrap_is_the_same_each_time(tmp_path):
    d, _ = _three_runs(tmp_path / "e")
    res = load(d)
    row = res.points.iloc[0].to_dict() | {"stem": "e"}
    a = J.Judge({"e": res}).estimate([row], lambda v: v.stat("sojourn", "p95"))
    b = J.Judge({"e": load(d)}).estimate([row], lambda v: v.stat("sojourn", "p95"))
    assert (a.lo, a.hi) == (b.lo, b.hi)


def test_an_absolute_error_is_stretched_as_it_is_not_on_the_log_scale():
    """Three runs' signed errors −1 %, +1 %, +4 % (|mean| 1.3 %) against a bound of 10 %: on the
    log scale the upper arm, multiplied, reaches far above the bound (unresolved); as it is
    (``log=False``) it holds, and its lower end stops at 0. A true error of 5 % is still
    covered about 95 % of the time."""
    x = np.array([-0.01, 0.01, 0.04])
    c = abs(x.mean())

    def interval(log):
        lo, hi = J.bootstrap_interval([3], lambda p: abs(x[list(p[0])].mean()), c, log=log)
        return J.Estimate(c, lo, hi, 3, J.BOOTSTRAP, log)

    ratio, error = interval(True), interval(False)
    assert ratio.hi > 0.10 and J.compare(ratio, "<=", 0.10).outcome == J.UNRESOLVED
    assert error.hi < 0.10 and J.compare(error, "<=", 0.10).outcome == J.HOLDS
    assert error.lo == 0.0
    # runs to resolve are reckoned on the same scale: arm 4 points, 2 from the bound
    lin, logged = (J.Estimate(0.08, 0.04, 0.12, 3, J.BOOTSTRAP, log) for log in (False, True))
    assert J.runs_to_resolve(lin, "<=", 0.10) == 9  # 3 × (0.04 / 0.02)² − 3
    assert J.runs_to_resolve(logged, "<=", 0.10) == 7  # 3 × (ln 1.5 / ln 1.25)² − 3
    rng = np.random.default_rng(5)

    def trial(i):
        y = rng.normal(0.05, 0.02, 3)
        lo, hi = J.bootstrap_interval(
            [3],
            lambda p: abs(y[list(p[0])].mean()),
            abs(y.mean()),
            resamples=DRAWS,
            seed=i,
            log=False,
        )
        return lo <= 0.05 <= hi

    assert 0.91 <= _coverage(trial) <= 0.99
