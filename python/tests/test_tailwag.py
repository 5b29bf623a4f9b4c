"""Validation building blocks: the error table of two matching results folders, its summary
against TailWAG's and our goal, the page with its figures, and Table 2 as data."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import fixtures
import numpy as np
import pandas as pd
import pytest

import taillab
from taillab.hlog import Dist
from taillab.tailwag import (
    GOAL,
    SEED_APP,
    TABLE2,
    TAILWAG_ERROR,
    ValidationError,
    error_table,
    summary,
    table2_rows,
    write_validation,
)
from taillab.tailwag.table import _block_rse


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A 'measured' sweep and a 'synthetic' one 3 % slower at the same points, plus one
    synthetic point the measured folder lacks."""
    root = tmp_path_factory.mktemp("tw")
    kw = dict(threads=(1, 2), runs=2, duration_s=2.0)
    m = fixtures.make_sweep(
        root / "m", qps=(400.0, 1000.0, 1400.0), failed={"integrated-t2-q400": ("rate",)}, **kw
    )
    s = fixtures.make_sweep(
        root / "s", qps=(400.0, 1000.0, 1400.0, 2000.0), slowdown=1.03, seed0=7, **kw
    )
    return m, s


def test_table2_as_printed():
    assert set(TABLE2) == {
        "silo",
        "specjbb",
        "masstree",
        "img-dnn",
        "shore",
        "xapian",
        "moses",
        "sphinx",
    }
    assert set(SEED_APP.values()) == set(TABLE2)
    for a in TABLE2.values():
        comps = a.components()
        assert math.isclose(sum(c["weight"] for c in comps), 1.0)
        assert all(0 < c["weight"] <= 1 for c in comps)
    silo = TABLE2["silo"].components()
    assert silo[0] == {"weight": pytest.approx(0.999), "mean_us": 16.14, "log_var": 0.288}
    assert silo[1] == {"weight": 0.001, "mean_us": 59.6, "log_var": 0.085}
    moses = TABLE2["moses"]
    assert moses.components()[0]["weight"] == pytest.approx(1 - 0.857 - 0.0005)
    assert moses.critical == ((4.9, 0.1), (4.0, 0.1))
    assert TABLE2["masstree"].others[0][:2] == (0.00001, 1400.0)
    assert TABLE2["sphinx"].first == (624_280.0, 0.510) and "NA" in TABLE2["sphinx"].note
    assert TAILWAG_ERROR == {"mean": 0.062, "p95": 0.019, "p99": 0.073}


def test_error_table_matches_points(pair):
    m, s = pair
    t = error_table(m, s, saturation_qps={1: 2000.0, 2: 4000.0})
    assert len(t) == 6
    assert t.attrs["unmatched"] == ["integrated-t1-q2000", "integrated-t2-q2000"]
    pm, ps = taillab.load(m).points, taillab.load(s).points
    for _, r in t.iterrows():
        a = pm[pm["point"] == r["measured_point"]].iloc[0]
        b = ps[ps["point"] == r["synthetic_point"]].iloc[0]
        assert (a["threads"], a["qps"]) == (b["threads"], b["qps"]) == (r["threads"], r["qps"])
        # Points of several runs compare their merged histograms (a tail of all their
        # requests), never the average of the runs' percentiles.
        assert a["runs"] > 1 and b["runs"] > 1
        for st in ("mean", "p95", "p99"):
            want = b[f"merged_sojourn_{st}"] / a[f"merged_sojourn_{st}"] - 1
            assert r[f"error_{st}"] == pytest.approx(want)
            if st != "mean":
                averaged = b[f"sojourn_{st}"] / a[f"sojourn_{st}"] - 1
                assert r[f"error_{st}"] != pytest.approx(averaged, rel=1e-3)
        assert r["load"] == pytest.approx(r["qps"] / (2000.0 * r["threads"]))
        assert r["measured_service_mean"] == a["service_mean"]
        assert r["synthetic_service_mean"] == b["service_mean"]
    assert t.set_index("measured_point")["runs_failed"].to_dict() == {
        p: int(p == "integrated-t2-q400") for p in t["measured_point"]
    }
    # Without saturation rates the load is the measured utilization.
    u = error_table(m, s)
    assert u["load"].between(0, 1).all() and not u["load"].equals(t["load"])


def test_no_match_is_an_error(pair, tmp_path):
    m, _ = pair
    other = fixtures.make_sweep(tmp_path / "o", qps=(777.0,), runs=1)
    with pytest.raises(ValidationError, match="absolute rates"):
        error_table(m, other)


def test_summary_over_one_worker_loads(pair):
    m, s = pair
    t = error_table(m, s, saturation_qps=2000.0)  # one rate: loads 0.2, 0.5, 0.7 at t1
    all1 = summary(t)
    near = summary(t, loads=(0.2, 0.5, 0.7))
    assert all1["points"] == near["points"] == 3
    assert summary(t, loads=(0.5,))["points"] == 1
    one = t[t["threads"] == 1]
    for st in ("mean", "p95", "p99"):
        v = near["stats"][st]
        assert v["mean_abs_error"] == pytest.approx(one[f"error_{st}"].abs().mean())
        assert v["goal"] == GOAL[st] and v["met"] == (v["mean_abs_error"] <= GOAL[st])


def test_each_error_carries_its_standard_error_from_the_runs_spread(pair):
    """error_<s>_se is (1 + error) times both sides' relative standard errors (resampling
    each point's runs, see test_block_rse_...) in quadrature; the summary's noise floor is
    their mean times sqrt(2/pi), and a point counts as beyond noise past twice its se."""
    m, s = pair
    t = error_table(m, s, saturation_qps=2000.0)
    res = {side: taillab.load(f) for side, f in (("m", m), ("s", s))}

    def rse(side, point, st):
        runs = res[side].runs
        paths = runs[runs["point"] == point]["path"]
        assert len(paths) == 2
        return _block_rse([res[side]._run_dist(Path(p), "sojourn") for p in paths])[st]

    for _, r in t.iterrows():
        for st in ("mean", "p95", "p99"):
            want = (1 + r[f"error_{st}"]) * math.hypot(
                rse("m", r["measured_point"], st), rse("s", r["synthetic_point"], st)
            )
            assert want > 0 and r[f"error_{st}_se"] == pytest.approx(want)
    one = t[t["threads"] == 1]
    summ = summary(t, loads=(0.2, 0.5, 0.7))
    for st in ("mean", "p95", "p99"):
        v = summ["stats"][st]
        se = one[f"error_{st}_se"].to_numpy()
        assert v["noise_floor"] == pytest.approx(se.mean() * math.sqrt(2 / math.pi))
        assert v["beyond_noise"] == int((one[f"error_{st}"].abs().to_numpy() > 2 * se).sum())
        assert v["resolvable"] == (v["noise_floor"] <= GOAL[st])
        assert (one["runs"] == 2).all()
    # A hand-made table: a 4 % error with a 1 % se is beyond noise and resolvable for the
    # mean's 3 % goal; with a 10 % se the floor (8 %) is above it: not resolvable.
    for se, beyond, resolvable in ((0.01, 1, True), (0.10, 0, False)):
        table = pd.DataFrame(
            [
                {"threads": 1, "load": 0.5, "runs": 4, "error_mean": 0.04, "error_mean_se": se}
                | {f"error_{st}": 0.0 for st in ("p95", "p99")}
            ]
        )
        v = summary(table)["stats"]["mean"]
        assert v["noise_floor"] == pytest.approx(se * math.sqrt(2 / math.pi))
        assert (v["beyond_noise"], v["resolvable"]) == (beyond, resolvable)
        # Four runs with a floor of 8 % against 3 %: (8 / 3)² as many runs would resolve it.
        want = None if resolvable else math.ceil(4 * (v["noise_floor"] / 0.03) ** 2)
        assert v.get("runs_to_resolve") == want and want != 4
        assert "noise_floor" not in summary(table)["stats"]["p95"]


def test_block_rse_is_the_runs_spread_for_a_mean_and_follows_a_slow_block_in_the_tail():
    """Resampling a point's runs: with alike runs the mean's rse is their sd / mean /
    sqrt(n), as are the tails'; one slow run of twenty holds the merged p99, which the
    runs' own p99s (one slow value among twenty) understate by far; fewer than two runs
    give NaN; the same runs, the same value."""
    rng = np.random.default_rng(3)
    blocks = [rng.exponential(100_000, 3000).astype(np.int64) + 1 for _ in range(20)]

    def formula(bs):
        per = np.array([[b.mean(), np.quantile(b, 0.95), np.quantile(b, 0.99)] for b in bs])
        return per.std(axis=0, ddof=1) / per.mean(axis=0) / math.sqrt(len(bs))

    got = _block_rse([Dist.from_values(b) for b in blocks])
    # The mean's is the same estimator up to the draws' noise (400 draws: ~4 %); a tail's
    # two estimates each carry the noise of twenty runs' spread (~16 %).
    for st, f, rel in zip(("mean", "p95", "p99"), formula(blocks), (0.1, 0.35, 0.35), strict=True):
        assert got[st] == pytest.approx(f, rel=rel), st
    blocks[7] = blocks[7] * 4
    slow = _block_rse([Dist.from_values(b) for b in blocks])
    assert slow["mean"] == pytest.approx(formula(blocks)[0], rel=0.1)
    assert slow["p99"] > 2 * formula(blocks)[2]
    assert slow == _block_rse([Dist.from_values(b) for b in blocks])
    one = _block_rse([Dist.from_values(blocks[0]), Dist.empty()])
    assert all(math.isnan(v) for v in one.values())


def test_page_with_figures_and_table2(pair, tmp_path):
    m, s = pair
    fit = {
        "components": [
            {"weight": 0.9, "mean_ns": 17e3, "median_ns": 15e3, "log_var": 0.25},
            {"weight": 0.1, "mean_ns": 60e3, "median_ns": 58e3, "log_var": 0.08},
        ],
        "synth_set": "service=mix:0.9*lognormal:17us,cv=0.53+0.1*lognormal:60us,cv=0.28",
        "periodic": {
            "component": 2,
            "mean_ns": 6e6,
            "hits": 36,
            "gap_median": 85.0,
            "gap_cv": 0.1,
            "gap_cv_if_independent": 1.16,
            "setting": "requests:74-96,for=lognormal:6ms,cv=0.06",
        },
    }
    order = {
        "point": "integrated-t1-q1000",
        "order": {
            "workers": 1,
            "shuffles": 10,
            "in_order": {"mean_ns": 1.2e6, "p95_ns": 6e6, "p99_ns": 7e6},
            "shuffled": {"mean_ns": 1.6e6, "p95_ns": 10e6, "p99_ns": 14e6},
            "effect": {"mean": -0.25, "p95": -0.4, "p99": -0.5},
        },
    }
    page = write_validation(
        m,
        s,
        tmp_path / "v",
        app="oltp-mem",
        fit=fit,
        saturation_qps={1: 2000.0, 2: 4000.0},
        point_fits=[order, {"point": "integrated-t1-q3000"}],
    )
    html = page.read_text()
    assert "<h2>Order</h2>" in html and "-50.0%" in html and "14 ms" in html
    assert "periodic=requests:74-96,for=lognormal:6ms,cv=0.06" in html
    for ref in re.findall(r'(?:src|href)="([^"#]+)"', html):
        assert (page.parent / ref).exists(), ref
    assert 'src="figures/validation_load.png"' in html
    assert 'src="figures/validation_threads.png"' in html
    assert "Table 2 (silo)" in html and "16.1 µs" in html and "critical section 2" in html
    assert "integrated-t1-q2000" in html  # unmatched points are named
    assert "1 run(s) failed" in html
    doc = json.loads((page.parent / "validation.json").read_text())
    assert doc["schema"] == "taillab.validation/1" and len(doc["points"]) == 6
    assert doc["summary"]["stats"]["p99"]["tailwag"] == 0.073
    csv = (page.parent / "validation.csv").read_text().splitlines()
    assert len(csv) == 7 and csv[0].startswith("threads,qps,load")


def test_table2_rows_pad_and_mark_missing():
    rows = table2_rows("speech", None)
    assert rows[1][5] == "3%" and rows[1][6] == "–"  # sphinx distribution 2: "3%, NA"
    assert table2_rows(None, None) == []


def test_validate_cli(pair, tmp_path, capsys):
    from taillab import cli

    m, s = pair
    fit = tmp_path / "fit.json"
    comps = [{"weight": 1.0, "mean_ns": 2e5, "median_ns": 1.9e5, "log_var": 0.1}]
    fit.write_text(
        json.dumps({"schema": "taillab.fit/1", "fits": [{"point": "p", "components": comps}]})
    )
    out = tmp_path / "v"
    args = ["validate", str(m), str(s), "--out", str(out), "--app", "kv", "--fit", str(fit)]
    assert cli.main([*args, "--saturation", "1=2000,2=4000"]) == 0
    text = capsys.readouterr().out
    assert "3 point(s) at 20/50/70 % load" in text and "TailWAG 7.3%" in text
    assert (out / "index.html").exists() and "Table 2 (masstree)" in (
        out / "index.html"
    ).read_text()
    assert cli.main([*args, "--saturation", "1=fast"]) == 2
    assert "threads=rate" in capsys.readouterr().err
    assert cli.main([*args[:-2], "--fit", str(fit), "--fit-point", "nope"]) == 2


def test_one_synthetic_folder_per_point(pair, tmp_path):
    """`taillab tailwag --fit-at each`: one synthetic folder per measured point; the table
    matches across all of them, names each point by its folder, and the page is written."""
    m, _ = pair
    a = fixtures.make_sweep(tmp_path / "a", qps=(400.0,), threads=(1,), slowdown=1.05, runs=1)
    b = fixtures.make_sweep(tmp_path / "b", qps=(1000.0,), threads=(1,), slowdown=0.9, runs=1)
    t = error_table(m, [a, b], saturation_qps=2000.0)
    assert list(t["qps"]) == [400.0, 1000.0]
    assert list(t["synthetic_point"]) == ["a/integrated-t1-q400", "b/integrated-t1-q1000"]
    pa, pb = taillab.load(a).points.iloc[0], taillab.load(b).points.iloc[0]
    pm = taillab.load(m).points.set_index("point")
    assert t["error_mean"].iloc[0] == pytest.approx(
        pa["sojourn_mean"] / pm.loc["integrated-t1-q400", "merged_sojourn_mean"] - 1
    )
    assert t["error_mean"].iloc[1] == pytest.approx(
        pb["sojourn_mean"] / pm.loc["integrated-t1-q1000", "merged_sojourn_mean"] - 1
    )
    page = write_validation(m, [a, b], tmp_path / "v", saturation_qps=2000.0)
    doc = json.loads((page.parent / "validation.json").read_text())
    assert len(doc["points"]) == 2 and doc["synthetic"] == str(tmp_path.resolve())
    # Each point's pauses come from its own folder: b's service is 10 % faster than a's.
    slow = error_table(m, [a, b], saturation_qps=2000.0, slow_ns=600_000.0)
    want = [math.exp(-600e3 / (200e3 * f)) * 1e5 for f in (1.05, 0.9)]
    assert list(slow["synthetic_slow"]) == pytest.approx(want, rel=0.3)


def test_service_mean_falls_back_to_the_merged_histogram():
    """Experiments without a CI target report a point's service only as merged_service_*:
    the drift columns must still be filled (they were empty in real validations)."""
    import pandas as pd

    from taillab.tailwag.table import _service_mean

    assert _service_mean(pd.Series({"service_mean": 5.0, "merged_service_mean": 7.0})) == 5.0
    assert _service_mean(pd.Series({"service_mean": math.nan, "merged_service_mean": 7.0})) == 7.0
    assert _service_mean(pd.Series({"merged_service_mean": 7.0})) == 7.0
    assert math.isnan(_service_mean(pd.Series({"sojourn_mean": 1.0})))


def test_rounds_keep_round_one_and_add_later_rounds_and_the_app_against_itself(pair, tmp_path):
    """``rounds``: the error columns stay round 1's; each round's own errors, the later rounds
    with each side's histograms merged (not averaged percentiles), and the app's later rounds
    against its first are added."""
    from taillab.hlog import Dist
    from taillab.tailwag.table import _point_dist

    m, s = pair
    # Rounds 2 and 3: the app 10 % slower than in round 1 (a drifting host), the synthetic
    # workload as before.
    kw = dict(qps=(400.0, 1000.0, 1400.0), threads=(1, 2), runs=2, duration_s=2.0)
    later = [
        (
            fixtures.make_sweep(tmp_path / f"m{k}", slowdown=1.10, seed0=10 * k, **kw),
            fixtures.make_sweep(tmp_path / f"s{k}", slowdown=1.03, seed0=10 * k + 5, **kw),
        )
        for k in (2, 3)
    ]
    one = error_table(m, s)
    two = error_table(*later[0]).set_index("measured_point")
    t = error_table(m, s, rounds=later)
    assert t.attrs["rounds"] == 3 and (t["rounds"] == 3).all() and len(t) == len(one) == 6
    for st in ("mean", "p95", "p99"):
        assert np.allclose(t[f"error_{st}"], one[f"error_{st}"])
        assert np.allclose(t[f"error_{st}_r1"], one[f"error_{st}"])
    loaded = [(taillab.load(a), taillab.load(b)) for a, b in later]
    rm = taillab.load(m)
    for _, r in t.iterrows():
        p, q = r["measured_point"], r["synthetic_point"]
        for st in ("mean", "p95", "p99"):
            assert r[f"error_{st}_r2"] == pytest.approx(two.loc[p, f"error_{st}"])
        app = Dist.merge([_point_dist(a, p, "sojourn") for a, _ in loaded]).stats()
        syn = Dist.merge([_point_dist(b, q, "sojourn") for _, b in loaded]).stats()
        first = _point_dist(rm, p, "sojourn").stats()
        for st in ("mean", "p95", "p99"):
            assert r[f"later_measured_{st}"] == pytest.approx(app[st])
            assert r[f"later_error_{st}"] == pytest.approx(syn[st] / app[st] - 1)
            assert r[f"repeat_{st}"] == pytest.approx(app[st] / first[st] - 1)
        # The app drifted 10 % slower after round 1: it shows against itself, and the
        # synthetic workload (3 % slower than round 1's app) is now faster than the app.
        assert r["repeat_mean"] > 0.03 and r["later_error_mean"] < 0
    summ = summary(t)
    assert summ["rounds"] == 3 and summ["stats"]["mean"]["app_repeat"] > 0.03
    # The app moved more than the goal (3 %) against itself. Round 1 is still judged by its
    # runs' spread; a table without it (one run per point) by that drift.
    for st, v in summ["stats"].items():
        assert v["resolvable"] == (v["noise_floor"] <= GOAL[st])
    no_spread = t.drop(columns=[f"error_{st}_se" for st in ("mean", "p95", "p99")])
    assert summary(no_spread)["stats"]["mean"]["resolvable"] is False
    assert summ["stats"]["p95"]["later"] == pytest.approx(
        np.mean(np.abs(t[t["threads"] == 1]["later_error_p95"]))
    )
    # The same folders again: nothing drifts.
    same = error_table(m, s, rounds=[(m, s)])
    assert same["repeat_p99"].abs().max() < 1e-9
    for st, v in summary(same)["stats"].items():
        assert v["app_repeat"] < 1e-9 and v["resolvable"] == (v["noise_floor"] <= GOAL[st])
    assert summary(same.drop(columns=["error_mean_se"]))["stats"]["mean"]["resolvable"]
    assert "app_repeat" not in summary(one)["stats"]["mean"]


def test_the_measured_report_shows_the_validation(pair, tmp_path):
    """`taillab tailwag`'s OUT/measured report carries the validation: errors and figures."""
    import shutil

    from taillab.report import write_report

    m, s = pair
    out = tmp_path / "tw"
    shutil.copytree(m, out / "measured")
    write_validation(out / "measured", s, out / "validation", app="kv")
    page = write_report(out / "measured")
    html = page.read_text()
    assert "TailWAG validation" in html and "validation/index.html" in html
    assert (page.parent / "figures" / "validation_load.png").exists()
    # Elsewhere (no validation beside it) the report has no such section.
    assert "TailWAG validation" not in write_report(m, tmp_path / "plain").read_text()


def test_pauses_per_point_from_the_fits_threshold(pair, tmp_path):
    """With the fit's pause threshold, each point counts both sides' requests that long
    (per 100 000) and their mean: exponential service (mean 200 µs) has e^(-t/200 µs) of its
    requests beyond t, and the synthetic side (3 % slower) more; the page shows them."""
    m, s = pair
    t_ns = 800_000.0
    t = error_table(m, s, slow_ns=t_ns)
    assert "measured_slow" not in error_table(m, s)
    one = t[t["threads"] == 1]
    for side, mean in (("measured", 200e3), ("synthetic", 206e3)):
        share = one[f"{side}_slow"].sum() / 1e5 / len(one)
        want = math.exp(-t_ns / mean)
        assert share == pytest.approx(want, rel=0.25), side
        # Memoryless: beyond t, the mean is t plus the service mean.
        got = np.average(one[f"{side}_slow_mean"], weights=one[f"{side}_slow"])
        assert got == pytest.approx(t_ns + mean, rel=0.1), side
    assert one["synthetic_slow"].sum() > one["measured_slow"].sum()
    # A threshold above every request: none, and no mean.
    none = error_table(m, s, slow_ns=1e12)
    assert (none["measured_slow"] == 0).all() and none["synthetic_slow_mean"].isna().all()
    # Rounds keep each later round's count; the page shows the column when the fit has one.
    r = error_table(m, s, rounds=[(m, s)], slow_ns=t_ns)
    assert np.allclose(r["measured_slow_r2"], r["measured_slow"])
    assert np.allclose(r["synthetic_slow_mean_r2"], r["synthetic_slow_mean"])
    page = write_validation(
        m, s, tmp_path / "v", fit={"components": [], "pause": {"threshold_ns": t_ns}}
    )
    html = page.read_text()
    assert "pauses per 100 000 measured / synthetic" in html
    doc = json.loads((page.parent / "validation.json").read_text())
    assert all(p["measured_slow"] > 0 for p in doc["points"])
    assert "pauses per 100 000" not in write_validation(m, s, tmp_path / "w").read_text()


def test_the_headline_is_out_of_sample_and_judged_against_the_floor(pair, tmp_path):
    """With later rounds the headline is theirs: each point's later error with its standard
    error from resampling the later rounds' blocks of both sides, a floor (twice that se, or
    the app against itself between rounds when larger) and a verdict; round 1 stays on the
    page, labelled in sample. A synthetic workload that matches the app's later rounds is
    within the floor (or unresolved, where the floor is above the goal); one 30 % slower is
    beyond it at every point, named with its term (the service time: its service mean is off
    as much)."""
    from taillab.tailwag.table import BEYOND, UNRESOLVED, WITHIN, _run_dists

    m, s = pair
    kw = dict(qps=(400.0, 1000.0, 1400.0), threads=(1,), runs=3, duration_s=1.0)
    app2 = fixtures.make_sweep(tmp_path / "m2", seed0=20, **kw)
    # The synthetic workload's later round the app's very runs: no error at all.
    twin = fixtures.make_sweep(tmp_path / "s2", seed0=20, **kw)
    slow = fixtures.make_sweep(tmp_path / "x2", slowdown=1.3, seed0=25, **kw)
    good = error_table(m, s, rounds=[(app2, twin)])
    loaded = taillab.load(app2), taillab.load(twin)
    for _, r in good[good["threads"] == 1].iterrows():
        for st in ("mean", "p95", "p99"):
            rse = [
                _block_rse(_run_dists(res, r[f"{side}_point"], "sojourn"))[st]
                for res, side in zip(loaded, ("measured", "synthetic"), strict=True)
            ]
            se = (1 + r[f"later_error_{st}"]) * math.hypot(*rse)
            assert se > 0 and r[f"later_error_{st}_se"] == pytest.approx(se)
            assert r[f"floor_{st}"] == pytest.approx(max(2 * se, abs(r[f"repeat_{st}"])))
            assert r[f"verdict_{st}"] in (WITHIN, UNRESOLVED), r
    summ = summary(good)
    assert summ["headline"] == "out_of_sample"
    oos = summ["out_of_sample"]
    assert oos["beyond"] == [] and oos["points"] == 3
    bad = summary(error_table(m, s, rounds=[(app2, slow)]))["out_of_sample"]
    assert bad["stats"]["mean"]["mean_abs_error"] > 0.25
    assert bad["stats"]["mean"][BEYOND] == bad["points"] == 3
    named = [b for b in bad["beyond"] if b["stat"] == "mean"]
    assert sorted(b["point"] for b in named) == sorted(good[good["threads"] == 1]["measured_point"])
    assert all(b["term"].startswith("service time") for b in named), named
    # One round: the headline says it is in sample.
    assert summary(error_table(m, s))["headline"] == "in_sample"
    page = write_validation(m, s, tmp_path / "v", rounds=[(app2, slow)]).read_text()
    assert "Out of sample" in page and "Round 1 (in sample)" in page
    assert "beyond the floor" in page


def test_a_points_verdict():
    """Beyond the floor: a model error, named with its term; within a floor above the goal:
    unresolved, with the blocks per point that would bring twice the se to the goal; within
    a floor below it: within."""
    from taillab.tailwag.table import BEYOND, UNRESOLVED, WITHIN, _judge

    def row(err, se, repeat, svc=0.0):
        r = {"later_runs": 4, "later_service_error": svc}
        for st in ("mean", "p95", "p99"):
            r |= {f"later_error_{st}": err, f"later_error_{st}_se": se, f"repeat_{st}": repeat}
        return r

    v = _judge(row(0.10, 0.01, 0.02, svc=0.09))
    assert v["verdict_mean"] == BEYOND and v["floor_mean"] == pytest.approx(0.02)
    assert v["term_mean"].startswith("service time")
    assert _judge(row(0.10, 0.01, 0.02, svc=0.01))["term_mean"].startswith("queueing")
    v = _judge(row(0.01, 0.005, 0.012))
    assert v["verdict_mean"] == WITHIN and v["floor_mean"] == pytest.approx(0.012)
    # p99's goal is 5 %: the same 1.2 % floor is within it too.
    assert v["verdict_p99"] == WITHIN
    v = _judge(row(0.02, 0.05, 0.01))
    assert v["verdict_mean"] == UNRESOLVED and v["floor_mean"] == pytest.approx(0.10)
    assert v["runs_to_resolve_mean"] == math.ceil(4 * (0.10 / 0.03) ** 2)
    # The drift between rounds alone above the goal: unresolved too.
    assert _judge(row(0.02, 0.001, 0.08))["verdict_mean"] == UNRESOLVED
