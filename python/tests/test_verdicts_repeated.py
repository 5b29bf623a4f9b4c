"""Rules judged on repeated runs (the full variant: each point at least three times): a planted
effect clearly on one side of its threshold holds or fails, one whose runs straddle it is
unresolved and makes the item inconclusive with about how many more runs would resolve it; a
stall of the host in one run widens an interval instead of flipping a verdict. With one run
per point, or in the quick variant whatever the runs, the rules compare points as before and
the verdict is indicative.

The planted runs are copies of a point's numbers times a factor per run (planted.py's ``runs``):
(0.97, 1, 1.03) is a quiet host, (0.85, 1, 1.15) a noisy one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import test_verdicts_causes as causes
from planted import ITEMS, MS, US, Point, complete, experiment, hlog, stats, verdict

from taillab import reproduce as R
from taillab.reproduce import judge as J
from taillab.reproduce.rules import profiling as P

QUIET, NOISY = (0.97, 1.0, 1.03), (0.85, 1.0, 1.15)


def _tales5(root, hog: float, runs=QUIET, none_runs=None) -> None:
    """Tales Fig. 5's four cases at ``runs``: none's p99 400 µs (its own runs ``none_runs``
    where given), the hog ``hog`` times it, both remedies 1.05 times it."""
    p99 = {"none": 400.0, "hog": 400.0 * hog, "hog + RT": 420.0, "hog elsewhere": 420.0}
    pts = [
        Point(
            f"integrated-t1-q1000-case-{i}",
            axes={"case": k},
            soj=stats(v * US / 4, v * US / 2, v * US),
            runs=none_runs if k == "none" else None,
        )
        for i, (k, v) in enumerate(p99.items())
    ]
    experiment(root / "tales-fig5" / "tales-fig5", pts, runs=runs)


def _conds(doc) -> dict[str, dict]:
    return {c["text"]: c for c in doc["conditions"]}


def test_clear_effects_hold_or_fail_on_three_runs(tmp_path):
    """A hog that triples p99 on a quiet host holds, its interval wholly above 2×; one that
    adds half fails, wholly below: the primary condition decides."""
    _tales5(tmp_path / "a", 3.0)
    doc = verdict(tmp_path / "a", "tales-fig5")
    assert doc["status"] == "confirmed", doc["verdict"]
    assert doc["judged"] == "runs" and doc["runs_per_point"] == {"tales-fig5": [3, 3]}
    hog = _conds(doc)["hog ≥ 2× none"]
    assert hog["outcome"] == "holds" and hog["runs"] == 3 and hog["interval"] == J.BOOTSTRAP
    assert hog["value"] == pytest.approx(3.0)
    assert 2.0 < hog["ci_low"] < hog["value"] < hog["ci_high"]
    _tales5(tmp_path / "b", 1.5)
    doc = verdict(tmp_path / "b", "tales-fig5")
    assert doc["status"] == "not confirmed"
    assert _conds(doc)["hog ≥ 2× none"]["outcome"] == "fails"
    assert _conds(doc)["hog ≥ 2× none"]["ci_high"] < 2.0


def test_an_effect_its_runs_straddle_is_unresolved(tmp_path):
    """The hog at 2.05× on a noisy host: its interval holds 2×; the item is inconclusive and
    says about how many more runs would tell (the arm shrunk as 1/√runs)."""
    _tales5(tmp_path, 2.05, runs=NOISY)
    doc = verdict(tmp_path, "tales-fig5")
    assert doc["status"] == "inconclusive" and doc["status_from_data"] == "inconclusive"
    hog = _conds(doc)["hog ≥ 2× none"]
    assert hog["outcome"] == "unresolved" and hog["ok"] is None
    assert hog["ci_low"] < 2.0 < hog["ci_high"]
    # On the log scale, as a positive ratio's interval is stretched.
    arm, gap = np.log(hog["value"] / hog["ci_low"]), np.log(hog["value"] / 2.0)
    want = int(np.ceil(3 * (arm / gap) ** 2)) - 3
    assert hog["more_runs"] == want and want > 3
    assert f"hog ≥ 2× none (about {want} more runs a point)" in doc["verdict"]
    assert "unresolved by its runs" in doc["verdict"]


def test_a_stall_in_one_run_widens_the_interval_instead_of_flipping_the_verdict(tmp_path):
    """The undisturbed case's third run caught a stall (its p99 three times the others'): the
    point estimate (the mean over runs) puts the hog at 1.5× — not confirmed on one number —
    but the runs' spread says they cannot tell."""
    _tales5(tmp_path, 2.5, runs=QUIET, none_runs=(1.0, 1.0, 3.0))
    doc = verdict(tmp_path, "tales-fig5")
    hog = _conds(doc)["hog ≥ 2× none"]
    assert hog["value"] == pytest.approx(2.5 / (5 / 3), rel=0.02)
    assert hog["outcome"] == "unresolved" and doc["status"] == "inconclusive"
    # The same runs judged as points (the quick variant): not confirmed.
    assert verdict(tmp_path, "tales-fig5", quick=True)["status"] == "not confirmed"


def test_one_run_or_quick_compares_points_and_is_indicative(tmp_path):
    _tales5(tmp_path / "one", 3.0, runs=(1.0,))
    doc = verdict(tmp_path / "one", "tales-fig5")
    assert doc["status"] == "confirmed" and doc["judged"] == "indicative"
    assert all(c["interval"] == J.POINT and c["ci_low"] is None for c in doc["conditions"])
    page = R.evaluate("tales-fig5", tmp_path / "one" / "tales-fig5", ITEMS)
    assert "Indicative: each condition compares one number" in R.render(
        page, tmp_path / "one" / "tales-fig5"
    )
    _tales5(tmp_path / "q", 2.05, runs=NOISY)
    doc = verdict(tmp_path / "q", "tales-fig5", quick=True)
    assert doc["judged"] == "indicative" and doc["status"] == "confirmed"


def test_the_page_shows_each_conditions_interval(tmp_path):
    _tales5(tmp_path, 3.0)
    folder = tmp_path / "tales-fig5"
    text = R.render(R.evaluate("tales-fig5", folder, ITEMS), folder)
    assert "value [95 % interval]" in text and "runs a point" in text
    assert "3× [" in text and "≥ 2×" in text and '<span class="ok">holds</span>' in text
    assert "Runs per point: tales-fig5 3." in text


# --- Table I: a quantile's order-statistic interval ------------------------------------------

PAPER_P95_MS = R.read_items(ITEMS)["tailbench-table1"]["paper_p95_ms"]


def _table1(root, kv: float, runs=QUIET) -> None:
    """Every app at its paper's p95 but kv at ``kv`` times it, over ``runs``; kv's runs also
    have sojourn histograms (exponential requests whose p95 is its summary's)."""
    rng = np.random.default_rng(1)
    for app, ms in PAPER_P95_MS.items():
        p95 = ms * (kv if app == "kv" else 1.0) * MS
        p = Point("integrated-t1-q100", app=app, qps=100, soj=stats(p95 / 3, p95, 1.4 * p95))
        d = experiment(root / "tailbench-table1" / f"apps-{app}", [p], runs=runs)
        if app == "kv":
            for k, f in enumerate(runs):
                scale = p95 * f / np.log(20)  # an exponential's p95 is ln 20 × its mean
                hlog(d / "points" / p.id / f"run-{k}", "sojourn", rng.exponential(scale, 4000))


@pytest.mark.parametrize(
    ("kv", "runs", "outcome", "status"),
    [
        (1.0, QUIET, "holds", "confirmed"),
        (10.0, QUIET, "fails", "confirmed"),  # 7 of 8 still within
        (2.9, NOISY, "unresolved", "confirmed"),  # 7 sure: one open app cannot move it
    ],
)
def test_table1_judges_each_p95_by_its_order_statistics(tmp_path, kv, runs, outcome, status):
    _table1(tmp_path, kv, runs)
    doc = verdict(tmp_path, "tailbench-table1")
    c = _conds(doc)["kv within 3× of Table I's"]
    assert (c["outcome"], doc["status"]) == (outcome, status), doc["verdict"]
    assert c["interval"] == J.ORDER and c["ci_low"] < c["value"] < c["ci_high"]
    others = _conds(doc)["search within 3× of Table I's"]
    assert others["interval"] == J.BOOTSTRAP  # no histograms: the runs' own p95s


def test_table1_unresolved_apps_that_could_cross_a_bound_are_inconclusive(tmp_path):
    """Five apps surely within, three at 2.9× on a noisy host: anywhere from five (partly) to
    eight (confirmed)."""
    for app, ms in PAPER_P95_MS.items():
        f = 2.9 if app in ("kv", "search", "translate") else 1.0
        p95 = ms * f * MS
        p = Point("integrated-t1-q100", app=app, qps=100, soj=stats(p95 / 3, p95, 1.4 * p95))
        experiment(tmp_path / "tailbench-table1" / f"apps-{app}", [p], runs=NOISY)
    doc = verdict(tmp_path, "tailbench-table1")
    assert doc["status"] == "inconclusive" and doc["numbers"]["within"] == 5
    assert "unresolved by its runs: search within 3×" in doc["verdict"]
    assert "kv within 3× of Table I's (about " in doc["verdict"]


# --- an attribution's effects, three-valued by their own CIs ------------------------------------


@pytest.mark.parametrize(
    ("change", "status", "hog"),
    [
        ({"hog": 3.0}, "confirmed", "holds"),  # 3× ± 0.2: wholly above 2×
        ({"hog": 1.5}, "not confirmed", "fails"),  # wholly below
        ({}, "inconclusive", "unresolved"),  # 2.05× ± 0.2: holds 2×
    ],
)
def test_tales5_attribution_effects_by_their_intervals(tmp_path, change, status, hog):
    causes._tales5(tmp_path, **change)
    doc = verdict(tmp_path, "tales-fig5-attribution")
    c = doc["conditions"][0]
    assert (doc["status"], c["outcome"]) == (status, hog), doc["verdict"]
    assert c["interval"] == "the attribution's cluster bootstrap over runs"
    # A remedy's cell sums several effects: compared as a point, without a check.
    assert "outcome" not in doc["conditions"][1] and doc["conditions"][1]["ok"] is True


@pytest.mark.parametrize(
    ("cpu", "status", "outcome"),
    [
        (1.8, "confirmed", "holds"),  # 1.8× ± 0.1: wholly above 1.5×
        (1.3, "not confirmed", "fails"),  # wholly below
        (1.55, "inconclusive", "unresolved"),  # 1.55× ± 0.1: holds 1.5×
    ],
)
def test_profiling_attribution_stresses_by_their_intervals(tmp_path, cpu, status, outcome):
    """The report's stress table as an attribution, full variant: each stress level's cell ÷
    the base by its effect's CI (memory and disk ± 0.01 × base, wholly below 1.3×); "all ≥ cpu"
    compares two effects without their joint draws: a point."""
    causes._stress_attribution(tmp_path, "kv", {s: 1.0 for s in causes.STRESSES})
    causes._stress_attribution(tmp_path, "speech", {**causes.SPEECH, "cpu": cpu, "all": 2.0})
    doc = verdict(tmp_path, "profiling-attribution")
    by_text = {c["text"]: c for c in doc["conditions"]}
    c = by_text["speech: cpu ≥ 1.5×"]
    assert (doc["status"], c["outcome"]) == (status, outcome), doc["verdict"]
    assert c["interval"] == "the attribution's cluster bootstrap over runs"
    for s in ("memory", "disk"):
        assert by_text[f"speech: {s} < 1.3×"]["outcome"] == "holds"
    assert "outcome" not in by_text["speech: all ≥ cpu"]
    assert by_text["speech: all ≥ cpu"]["ok"] is True


# --- Table II: the two groups' medians as a ratio, by a bootstrap over each app's runs ----------

TIGHT = (0.99, 1.0, 1.01)


def _table2(root, rss_ratio: float, runs) -> None:
    """Table I's light point of every app over ``runs``; each run's harness peak RSS 256 MiB
    (× ``rss_ratio`` for the report's memory-intensive apps) and CPU 40 % (× 2 for its
    CPU-intensive ones), both × the run's factor."""
    for app in PAPER_P95_MS:
        mem = app in P.T2_MEM_APPS
        p = Point("integrated-t1-q100", app=app, qps=100)
        d = experiment(root / "tailbench-table1" / f"apps-{app}", [p], runs=runs)
        for k, f in enumerate(runs):
            path = d / "points" / p.id / f"run-{k}" / "summary.json"
            doc = json.loads(path.read_text())
            harness = {"pid": 1, "rss_max_bytes": int(2**28 * (rss_ratio if mem else 1.0) * f)}
            harness["cpu_pct"] = 40.0 * (1.0 if mem else 2.0) * f
            doc.setdefault("environment", {})["harness"] = harness
            path.write_text(json.dumps(complete(doc)))


@pytest.mark.parametrize(
    ("rss", "runs", "status", "outcome"),
    [
        (2.0, TIGHT, "confirmed", "holds"),
        (0.5, TIGHT, "not confirmed", "fails"),  # the division by memory is the claim
        (1.05, NOISY, "inconclusive", "unresolved"),  # 5 % apart, runs ± 15 %
    ],
)
def test_profiling_table2_groups_by_their_intervals(tmp_path, rss, runs, status, outcome):
    _table2(tmp_path, rss, runs)
    doc = verdict(tmp_path, "profiling-table2", reuse=tmp_path / "tailbench-table1")
    assert (doc["status"], doc["judged"]) == (status, "runs"), doc["verdict"]
    mem, cpu = doc["conditions"]
    assert mem["outcome"] == outcome and mem["primary"] and mem["interval"] == J.BOOTSTRAP
    assert mem["value"] == pytest.approx(rss, rel=1e-6)
    assert mem["ci_low"] < mem["value"] < mem["ci_high"]
    if runs == TIGHT:
        assert cpu["outcome"] == "holds" and cpu["value"] == pytest.approx(2.0)
    # the runs' peaks averaged: the median memory-intensive app's 256 MiB × rss
    assert doc["numbers"]["median_rss"]["mem"] == pytest.approx(2**28 * rss, rel=1e-6)
