"""The service-time fit: known mixtures drawn with numpy are recovered, specs are exact, bad
input is refused with the reason, and the report shows the fit."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import fixtures
import numpy as np
import pandas as pd
import pytest

from taillab import cli
from taillab.fit import (
    FitError,
    fit_mixture,
    fit_results,
    goodness,
    read_fit,
    write_fit,
)
from taillab.hlog import Dist
from taillab.mixture import Component, Mixture


def _draw(rng, n, comps):
    """n ns values from [(weight, mean_ns, cv)] log-normal components."""
    w = np.array([c[0] for c in comps])
    k = rng.choice(len(comps), size=n, p=w / w.sum())
    out = np.empty(n)
    for i, (_, mean, cv) in enumerate(comps):
        s2 = math.log1p(cv * cv)
        m = k == i
        out[m] = rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2), m.sum())
    return np.round(out)


CASES = [
    [(1.0, 80e3, 0.2)],
    [(0.7, 40e3, 0.2), (0.3, 300e3, 0.25)],
    [(0.6, 30e3, 0.15), (0.3, 150e3, 0.15), (0.1, 800e3, 0.2)],
]


@pytest.mark.parametrize("comps", CASES, ids=["one", "two", "three"])
def test_recovers_known_mixtures(comps):
    rng = np.random.default_rng(len(comps))
    dist = Dist.from_values(_draw(rng, 20_000, comps))
    mix, bics = fit_mixture(dist, seed=1)
    assert len(mix.components) == len(comps), bics
    assert min(bics, key=bics.get) == len(comps)
    for (w, mean, cv), c in zip(comps, mix.components, strict=True):
        assert abs(c.weight - w) <= 0.03
        assert abs(c.mean_ns / mean - 1) <= 0.05
        assert abs(c.cv / cv - 1) <= 0.15
    g = goodness(dist, mix)
    assert g["ks"] < 0.02
    for name in ("mean", "p50", "p95", "p99"):
        assert abs(g["errors"][name]["rel_error"]) < 0.03, (name, g["errors"][name])


def test_one_wide_lognormal_is_not_split():
    # BIC must not buy a second component for a single skewed mode.
    rng = np.random.default_rng(5)
    mix, _ = fit_mixture(Dist.from_values(_draw(rng, 30_000, [(1.0, 500e3, 1.2)])))
    assert len(mix.components) == 1
    assert abs(mix.components[0].cv / 1.2 - 1) < 0.05


def test_histogram_input_matches_exact_values():
    # The same data as 3-digit HDR buckets (0.1 % wide) fits the same mixture.
    from hdrh.histogram import HdrHistogram

    rng = np.random.default_rng(2)
    vals = _draw(rng, 20_000, CASES[1])
    h = HdrHistogram(1, 3600 * 10**9, 3)
    for v in vals:
        h.record_value(int(v))
    a, _ = fit_mixture(Dist.from_values(vals), seed=3)
    b, _ = fit_mixture(Dist.from_hdr(h), seed=3)
    for x, y in zip(a.components, b.components, strict=True):
        assert abs(x.weight - y.weight) < 0.01 and abs(x.mean_ns / y.mean_ns - 1) < 0.01


def test_quantiles_and_cdf_are_consistent():
    m = Mixture((Component(0.25, math.log(1e4), 0.04), Component(0.75, math.log(1e5), 0.09)))
    for q in (0.1, 0.5, 0.99, 0.999):
        assert m.cdf(m.quantile(q))[0] == pytest.approx(q, abs=1e-9)
    # Half of the first component (weight 0.25) lies below its median; the second adds ~0.
    assert m.quantile(0.125) == pytest.approx(1e4, rel=1e-6)
    assert m.quantile(0.25 + 0.375) == pytest.approx(1e5, rel=1e-6)
    assert m.mean_ns == pytest.approx(0.25 * 1e4 * math.exp(0.02) + 0.75 * 1e5 * math.exp(0.045))


SPEC = re.compile(r"^(mix:)?([0-9.]+\*)?lognormal:[0-9.]+(ns|us|ms|s),cv=[0-9.e-]+")


def test_spec_is_parseable_and_exact():
    comps = (
        Component(0.123456789, math.log(33_333.3), 0.05),
        Component(0.5, math.log(2.5e6), 0.3),
        Component(1 - 0.623456789, math.log(7.77e9), 0.01),
    )
    spec = Mixture(comps).spec()
    assert spec.startswith("mix:")
    terms = spec[4:].split("+")
    ws = [float(t.split("*")[0]) for t in terms]
    assert abs(sum(ws) - 1) < 1e-9  # the Rust parser allows 1e-6
    for t, c in zip(terms, comps, strict=True):
        assert SPEC.match(t)
        mean = re.search(r"lognormal:([0-9.]+)(ns|us|ms|s)", t)
        scale = {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[mean.group(2)]
        assert float(mean.group(1)) * scale == pytest.approx(c.mean_ns, rel=5e-4)
        cv = float(t.split("cv=")[1])
        assert cv == pytest.approx(c.cv, rel=5e-4)
    one = Mixture((Component(1.0, math.log(80e3), 0.04),)).spec()
    assert one.startswith("lognormal:") and "*" not in one


def _run(tmp_path, service_fn, duration_s=10.0, qps=200.0, **kw):
    d = tmp_path / "r"
    fixtures.make_run(
        d, qps=qps, duration_s=duration_s, save_requests=True, service_fn=service_fn, **kw
    )
    return d


def test_refuses_too_few_requests(tmp_path):
    d = _run(tmp_path, lambda rng, n: rng.lognormal(10, 0.3, n), duration_s=2.0)
    with pytest.raises(FitError, match="needs at least 1000"):
        fit_results(d, point="run")
    doc = fit_results(d)
    assert "error" in doc["fits"][0]


def test_refuses_all_zero_service(tmp_path, capsys):
    d = _run(tmp_path, lambda rng, n: np.zeros(n))
    assert cli.main(["fit", str(d)]) == 2
    err = capsys.readouterr().err
    assert "every service time is zero" in err and "transport" in err


def test_zero_service_times_are_left_out_with_a_warning(tmp_path):
    def svc(rng, n):
        v = rng.lognormal(math.log(50e3), 0.2, n)
        v[:20] = 0
        return v

    f = fit_results(_run(tmp_path, svc))["fits"][0]
    assert f["zero_dropped"] == 20 and f["n"] == 1980
    assert any("zero-length" in w for w in f["warnings"])


def test_cli_json_out_and_report(tmp_path, capsys):
    d = _run(tmp_path, lambda rng, n: _draw(rng, n, CASES[1]), duration_s=15.0)
    assert cli.main(["fit", str(d), "--json", "--out", str(d)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc == read_fit(d)
    f = doc["fits"][0]
    assert f["source"] == "requests" and f["n"] == 3000
    assert f["synth_set"] == "service=" + f["spec"]
    assert len(f["components"]) == 2
    assert (d / "fit-figures" / "run.png").exists()
    # The queue/service split adds up (other = what the named parts leave).
    s = f["split"]
    parts = s["service_mean_ns"] + s["queue_mean_ns"] + s["send_lag_mean_ns"]
    assert s["other_mean_ns"] == pytest.approx(s["sojourn_mean_ns"] - parts)
    # Text output names the spec; the report shows the fit table and figure.
    assert cli.main(["fit", str(d), "--components", "1"]) == 0
    text = capsys.readouterr().out
    assert "1 component(s) by FIXED" in text and "--set 'service=lognormal:" in text
    assert cli.main(["report", str(d)]) == 0
    html = (d / "report" / "index.html").read_text()
    assert "Service-time fit" in html and 'src="figures/fit_run.png"' in html
    assert (d / "report" / "figures" / "fit_run.png").exists()


def test_noise_hints_from_environment(tmp_path):
    env = {
        "ncpu": 2,
        "intr_per_s": 4000.0,
        "host_irq_pct": 0.6,
        "host_softirq_pct": 1.4,
        "workers": [{"invol_per_s": 50.0, "runq_wait_pct": 1.0}],
    }
    d = _run(
        tmp_path,
        lambda rng, n: rng.lognormal(10, 0.3, n),
        extra={"environment": env},
    )
    hints = {h["source"]: h for h in fit_results(d)["fits"][0]["noise_hints"]}
    # 2000 interrupts/s per CPU; 2 % of a CPU over 4000/s: 5 µs each.
    assert hints["interrupts"]["rate_per_s"] == pytest.approx(2000)
    assert hints["interrupts"]["mean_ns"] == pytest.approx(5000)
    assert hints["interrupts"]["spec"] == "poisson:rate=2000,for=exp:5us"
    # 1 % of the time waiting over 50 switches/s: 200 µs per preemption.
    assert hints["preemption"]["mean_ns"] == pytest.approx(200e3)


def test_experiment_points_and_histogram_source(tmp_path):
    root = fixtures.make_sweep(tmp_path / "s", qps=(300.0, 600.0), runs=2, duration_s=3.0)
    doc = fit_results(root)
    assert [f["point"] for f in doc["fits"]] == ["integrated-t1-q300", "integrated-t1-q600"]
    for f in doc["fits"]:
        assert f["source"] == "histogram"  # these runs saved no requests.csv
        assert f["runs"] == 2 and f["n"] >= 1000
    one = fit_results(root, point="integrated-t1-q600")
    assert len(one["fits"]) == 1
    path = write_fit(one, tmp_path / "out")
    assert json.loads(path.read_text())["fits"][0]["point"] == "integrated-t1-q600"
    with pytest.raises(FitError, match="no point"):
        fit_results(root, point="nope")


def test_missing_metrics_give_null_not_nan(tmp_path, capsys):
    # A run whose summary lacks queue and send-lag statistics (e.g. an older harness):
    # the split says so with nulls and the JSON stays valid.
    stats = {"count": 2000, "mean": 60e3, "p50": 50e3, "p99": 200e3}
    d = _run(
        tmp_path,
        lambda rng, n: rng.lognormal(11, 0.4, n),
        extra={"latency_ns": {"service": stats, "sojourn": stats}},
    )
    assert cli.main(["fit", str(d), "--json"]) == 0
    f = json.loads(capsys.readouterr().out)["fits"][0]
    assert f["split"]["queue_mean_ns"] is None
    assert f["split"]["service_share"] == pytest.approx(1.0)


def test_near_constant_service_fits_one_narrow_component():
    # Three distinct values only: k is capped at the number of buckets, cv comes out tiny.
    d = Dist(np.array([999, 1000, 1001]), np.array([999, 1000, 1001]), np.array([300, 1400, 300]))
    mix, bics = fit_mixture(d, components=5)
    assert list(bics) == [3]
    assert mix.mean_ns == pytest.approx(1000.5, rel=1e-3)
    mix1, _ = fit_mixture(d)
    assert all(c.cv < 0.01 for c in mix1.components)


def _cold_records(
    extra,
    tau_ns,
    qps_list,
    n=6000,
    mean_ns=100e3,
    seed=3,
    slower=None,
    runs=1,
    power=1.0,
    periodic=None,
    second=None,
):
    """Per load, ``runs`` runs of one worker's records (``n`` requests over them) from a FIFO
    queue whose server is ``1 + extra (1 - w)^power`` times slower at warmth w (synth's
    ``cold=``; every run starts cold), and ``slower[i]`` times slower throughout at load i (a
    host slower when the app idles more, whatever each request's warmth). ``periodic=(lo, hi,
    ns)``: every lo-th to hi-th request takes ``ns`` (warm) instead of its draw (synth's
    ``periodic=requests:lo-hi,for=ns``, slowed by the cold start too). ``second=(p, ns)``: a
    share p of the draws come from a second mode around ``ns``."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    recs = []
    m = n // runs
    for j, q in enumerate(qps_list):
        mean_ns_q = mean_ns * (slower[j] if slower else 1.0)
        dfs = []
        for _ in range(runs):
            arr = np.cumsum(rng.exponential(1e9 / q, m))
            draw = rng.lognormal(math.log(mean_ns_q), 0.1, m)
            if second:
                share, mean2 = second
                other = rng.random(m) < share
                draw[other] = rng.lognormal(math.log(mean2), 0.1, int(other.sum()))
            if periodic:
                lo, hi, slow = periodic
                at = np.cumsum(rng.integers(lo, hi + 1, m // lo))
                draw[at[at < m]] = slow
            st, fi = np.empty(m), np.empty(m)
            w, free = 0.0, 0.0
            for i in range(m):
                st[i] = max(arr[i], free)
                if i:
                    w *= math.exp(-(st[i] - fi[i - 1]) / tau_ns)
                s = draw[i] * (1 + extra * (1 - w) ** power)
                fi[i] = free = st[i] + s
                w = 1 - (1 - w) * math.exp(-s / tau_ns)
            df = pd.DataFrame(
                {
                    "worker": 0,
                    "intended": arr.astype(np.int64),
                    "started": st.astype(np.int64),
                    "finished": fi.astype(np.int64),
                }
            )
            df["measured"] = (np.arange(m) >= 200 // runs).astype(int)
            dfs.append(df)
        recs.append((f"q{q}", dfs))
    return recs


def test_cold_start_is_recovered_from_records():
    from taillab.fit.cold import _series, _warmth, fit_cold

    # Warmth: cold at first; 1 - 1/e after one tau of serving; times 1/e after one tau idle.
    w = _warmth(np.array([0.0, 1e6, 3e6]), np.array([1e6, 1e6, 4e6]), 1e6)
    assert w[0] == 0 and math.isclose(w[1], 1 - math.exp(-1))
    assert math.isclose(w[2], (1 - math.exp(-1)) * math.exp(-2))
    c = fit_cold(_series(_cold_records(0.4, 3e6, (1000, 7000))))
    assert c["tau_ns"] == 3e6, c
    assert abs(c["extra"] - 0.4) < 0.05, c
    assert c["method"] == "point means"
    # No cold start in the data: no cold term (a slowdown near 0, never negative).
    c0 = fit_cold(_series(_cold_records(0.0, 3e6, (1000, 7000))))
    assert 0 <= c0["extra"] < 0.03, c0


def test_cold_start_is_not_flattened_by_a_slow_periodic_request():
    """A 3 ms request every 40th to 60th (30× the others, slowed by the cold start too) warms
    the worker, so the requests after it are warm and fast, and it finds the worker colder
    than most: a line through (mean coldness, mean service) took that for a flatter cold
    start, and leaving out the slowest requests as measured took the coldest of the slow ones,
    most from the lightest load (F 0.32 for a true 0.5 over eight seeds). The warm-time
    weighted line recovers F within ±0.15 at each of three seeds, as without the slow request."""
    from taillab.fit.cold import _series, fit_cold

    for seed in (3, 4, 5):
        recs = _cold_records(
            0.5, 3e6, (800, 2000, 3000), n=12000, seed=seed, periodic=(40, 60, 3e6)
        )
        c = fit_cold(_series(recs))
        assert c["method"] == "point means" and c["tau_ns"] == 3e6, c
        assert abs(c["extra"] - 0.5) < 0.15, (seed, c["extra"])


def test_cold_start_follows_the_points_means_when_requests_cannot_tell():
    """An app 30 % slower at light load than at heavy load throughout each load (the host's
    state, not each request's idle gap; each run starts cold all the same): a regression over
    the requests sees less of it (a request's warmth varies within a load where its service
    does not: regression dilution), the points' means see all of it, and the model matches
    each load's mean service within 2 %."""
    from taillab.fit.cold import _series, fit_cold

    recs = _cold_records(0.0, 3e6, (1500, 4500, 7000), slower=[1.3, 1.12, 1.0], runs=8)
    c = fit_cold(_series(recs))
    assert c["method"] == "point means"
    assert c["extra_requests"] < 0.85 * c["extra"], c
    for pm in c["point_means"]:
        base_fit = c["point_means"][-1]["service_ns"] / (
            1 + c["extra"] * c["point_means"][-1]["coldness"]
        )
        model = base_fit * (1 + c["extra"] * pm["coldness"])
        assert model == pytest.approx(pm["service_ns"], rel=0.02), c["point_means"]


def test_cold_start_tau_is_the_one_that_queues_like_the_app():
    """With send times, tau is chosen by replaying the model through the queue. A true cold
    start (F 0.4 after idling, tau 3 ms) is found at its own tau. An app slower at light load
    throughout each load, whatever a request's idle gap, gets a long tau: a short one would
    make requests that queued (worker warm) faster than those that found it idle, which this
    app's are not, and its model would queue less than the app at the heavy load."""
    from taillab.fit.cold import _series, fit_cold
    from taillab.fit.config import DEFAULT

    recs = _cold_records(0.4, 3e6, (1000, 4000, 7000), runs=2)
    c = fit_cold(_series(recs), recs)
    assert c["tau_method"] == "simulated", c
    assert 1e6 <= c["tau_ns"] <= 10e6, c
    assert abs(c["extra"] - 0.4) < 0.1, c
    assert all("sim_error" in v for v in c["tried"].values())

    recs = _cold_records(0.0, 3e6, (1500, 4500, 7000), slower=[1.3, 1.12, 1.0], runs=4)
    c = fit_cold(_series(recs), recs)
    assert c["tau_method"] == "simulated"
    assert c["tau_ns"] >= 10e6, c["tau_ns"]
    err = {float(t): v["sim_error"] for t, v in c["tried"].items()}
    # Mean |error| of mean, p95 and p99 at the three loads 2 % at most; the shortest tau's
    # model misses by far more.
    assert err[c["tau_ns"]] < 0.02, err
    assert err[DEFAULT.cold_taus_ns[0]] > 2 * err[c["tau_ns"]], err
    # F still from the loads' means: the model's mean service per load within 2 %.
    for pm in c["point_means"]:
        assert pm["fitted_ns"] == pytest.approx(pm["service_ns"], rel=0.02)


def test_cold_start_power_follows_loads_whose_service_stops_falling():
    """Service that drops from the light load to the middle one and then hardly moves (the
    apps' shape: 1 + F (1 - w)^4 here) misses a line through the loads' means by several
    per cent; the fit raises the coldness to a power and meets every load's mean within 1 %.
    A plain cold start (power 1) keeps power 1."""
    from taillab.fit.cold import _series, fit_cold

    recs = _cold_records(1.5, 30e6, (1500, 4500, 7000), n=30_000, runs=3, power=4.0)
    c = fit_cold(_series(recs), recs)
    assert c["power"] >= 2.0, c
    for pm in c["point_means"]:
        assert pm["fitted_ns"] == pytest.approx(pm["service_ns"], rel=0.01), c["point_means"]
    from taillab.fit.cold import _cold_setting

    assert _cold_setting(c).endswith(f",power={c['power']:g}")
    recs = _cold_records(0.4, 3e6, (1000, 4000, 7000), runs=2)
    c = fit_cold(_series(recs), recs)
    assert c["power"] == 1.0 and ",power=" not in _cold_setting(c), c


def test_pauses_come_from_app_stats_and_leave_the_mixture(tmp_path):
    """An app that reports its stop-the-world pauses (middleware's collector) gets synth's
    ``pause=``: their rate and mean length over the measured phase; the requests they hit are
    left out of the mixture."""
    from taillab.fit.common import _below
    from taillab.fit.pauses import pauses

    dirs = []
    for k, (n, ms, secs) in enumerate([(2, 50, 1.0), (1, 30, 1.0), (0, 0, 2.0)]):
        d = tmp_path / f"run-{k}"
        d.mkdir()
        stats = {"pauses": n, "pause_ms": ms, "gc": "g1"}
        doc = {"app_stats": stats, "duration_s": secs, "requests": {"measured": 1000}}
        (d / "summary.json").write_text(json.dumps(doc))
        dirs.append(d)
    other = tmp_path / "other"
    other.mkdir()
    (other / "summary.json").write_text(json.dumps({"app_stats": {"ops": 3}, "duration_s": 9.0}))
    p = pauses(dirs + [other])
    assert p["pauses"] == 3 and p["seconds"] == 4.0
    assert p["rate_per_s"] == pytest.approx(0.75)
    assert p["mean_ns"] == pytest.approx(80e6 / 3)
    # 3 pauses in 3000 measured requests: one every 1000.
    assert p["requests_per_pause"] == 1000
    assert p["setting"].startswith("requests:1000,for=")
    assert pauses([other]) is None and pauses([dirs[2]]) is None
    # Three pauses in a point (over its runs) are too few to repeat: the fit says how many
    # requests would give 20.
    from taillab.fit.pauses import _few_pauses

    out = {"warnings": []}
    _few_pauses(out, p)
    assert (
        "3.0 times per point" in out["warnings"][0] and "about 20000 requests" in out["warnings"][0]
    )
    out = {"warnings": []}
    _few_pauses(out, {**p, "pauses": 60}, 3)
    assert out["warnings"] == []
    # 60 pauses over three points of a pooled fit: 20 each, enough; over ten points, not.
    _few_pauses(out, {**p, "pauses": 60}, 10)
    assert "6.0 times per point" in out["warnings"][0]
    # 1000 requests of ~10 µs and two hit by a pause: the pause's are dropped.
    vals = np.concatenate([np.full(1000, 10_000), [20_000_000, 27_000_000]])
    kept, dropped = _below(Dist.from_values(vals), p["threshold_ns"])
    assert dropped == 2 and kept.total == 1000 and kept.max < 20_000


def _paused_records(gaps, lengths_ns, n=60_000, seed=3):
    """One run's records: ~10 µs requests back to back, those at the cumulative ``gaps``
    hit by a pause of the matching length."""
    rng = np.random.default_rng(seed)
    svc = rng.lognormal(math.log(10e3), 0.2, n)
    at = np.cumsum(gaps)
    at = at[at < n]
    svc[at] += np.asarray(lengths_ns)[: len(at)]
    fin = np.cumsum(svc)
    return pd.DataFrame({"worker": 0, "started": fin - svc, "finished": fin, "measured": 1}), len(
        at
    )


def test_pause_sequence_reads_lengths_and_clusters_from_the_records():
    """With per-request records the pauses' lengths (mean, cv) and their gaps come from the
    requests they hit: regular gaps give one range; clusters (four long gaps, two short, as
    G1's marking cycles) give a cycle that synth parses; too few pauses keep the app's own
    count and mean."""
    from taillab.fit import pause_sentence, pause_sequence

    base = {
        "source": "app",
        "pauses": 9,
        "requests": 60_000,
        "app_mean_ns": 25e6,
        "mean_ns": 25e6,
        "threshold_ns": 12.5e6,
        "requests_per_pause": 6667,
        "rate_per_s": 1.0,
        "share": 0.02,
        "setting": "requests:6667,for=25ms",
    }
    rng = np.random.default_rng(1)
    lengths = rng.lognormal(math.log(25e6), 0.3, 40)
    # Regular: every 5 000 to 7 000 requests.
    gaps = rng.integers(5_000, 7_001, 40)
    df, hits = _paused_records(gaps, lengths)
    p = pause_sequence(dict(base), [df])
    assert p["source"] == "records" and p["hits"] == hits
    assert p["mean_ns"] == pytest.approx(lengths[:hits].mean(), rel=0.01)
    assert p["cv"] == pytest.approx(lengths[:hits].std() / lengths[:hits].mean(), rel=0.05)
    (g,) = p["gaps"]
    assert 4_000 <= g["lo"] <= 5_300 and 6_700 <= g["hi"] <= 8_000, g
    assert p["setting"].startswith(f"requests:{g['lo']}-{g['hi']},for=lognormal:")
    # Clusters: LLLLSS again and again.
    cyc = np.array([[12_000, 13_000, 14_000, 12_500, 200, 900][i % 6] for i in range(40)])
    df, hits = _paused_records(cyc + rng.integers(0, 100, 40), lengths, n=200_000)
    p = pause_sequence(dict(base), [df])
    long, short = p["gaps"]
    assert (long["times"], short["times"]) == ("4", "2"), p["gaps"]
    assert long["lo"] >= 10_000 and long["hi"] <= 16_000 and short["hi"] <= 2_000, p["gaps"]
    assert "x4+" in p["setting"] and p["setting"].split(",")[0].endswith("x2")
    # Clusters of two and three in turn (LLLLSS, LLLLLS): the times become ranges.
    block = [12_000, 13_000, 14_000, 12_500, 200, 900, 12_000, 13_000, 14_000, 12_500, 13_500, 300]
    cyc = np.array([block[i % 12] for i in range(60)])
    df, hits = _paused_records(cyc, rng.lognormal(math.log(25e6), 0.3, 60), n=400_000)
    p = pause_sequence(dict(base), [df])
    long, short = p["gaps"]
    assert (long["times"], short["times"]) == ("4-5", "1-2"), p["gaps"]
    assert "x4-5+" in p["setting"] and p["setting"].split(",")[0].endswith("x1-2")
    assert "again and again" in pause_sentence(p)
    # Four pauses are too few: the app's own count and mean stand.
    df, _ = _paused_records([10_000] * 4, lengths)
    assert pause_sequence(dict(base), [df]) == base


def test_pause_cycle_is_not_cut_by_short_runs():
    """A point measured in short blocks (tailwag's interleaved runs): each run holds three or
    four pauses of a cycle of twelve long gaps and a double, so no run holds a whole stretch
    of long gaps between two doubles. The fitted cycle still pauses as often as the app did
    (before: the runs' own few gaps made it ``x2``, 60 % too many pauses) and parses in synth."""
    from taillab.fit.pauses import _few_pauses, pause_sequence

    base = {
        "source": "app",
        "pauses": 0,
        "requests": 0,
        "app_mean_ns": 25e6,
        "mean_ns": 25e6,
        "threshold_ns": 12.5e6,
        "requests_per_pause": 0,
        "rate_per_s": 1.0,
        "share": 0.02,
        "setting": "",
    }
    rng = np.random.default_rng(5)
    cycle = [15_000] * 12 + [150]
    gaps = np.array([cycle[i % 13] + int(rng.integers(-500, 500)) for i in range(400)])
    gaps[gaps < 50] = 150
    at = np.cumsum(gaps)
    dfs, pauses, n = [], 0, 50_000
    for k in range(int(at[-1]) // n):
        here = [g - k * n for g in at if k * n <= g < (k + 1) * n]
        lengths = rng.lognormal(math.log(25e6), 0.2, len(here))
        df, hits = _paused_records(np.diff([0, *here]), lengths, n=n, seed=k)
        dfs.append(df)
        pauses += hits
    p = pause_sequence(dict(base), dfs)
    truth = len(dfs) * n / pauses
    assert p["requests_per_pause"] == pytest.approx(truth, rel=0.1), (p["gaps"], truth)
    long, short = p["gaps"]
    assert long["times"] in ("11-12", "12", "12-13"), p["gaps"]
    assert short["times"] == "1", p["gaps"]
    # About 30 clusters: enough for one point, too few when they were ten points' (the tail
    # of each is then set by three).
    assert 25 <= p["clusters"] <= 35, p["clusters"]
    p["pauses"], p["requests"] = pauses, len(dfs) * n
    one, ten = {"warnings": []}, {"warnings": []}
    _few_pauses(one, p)
    _few_pauses(ten, p, 10)
    assert one["warnings"] == []
    assert len(ten["warnings"]) == 1 and "clusters per point" in ten["warnings"][0], ten


def test_periodic_length_follows_the_cold_start_term_only_when_the_data_do():
    """A pooled fit's periodic requests keep the cold-start factor when their warm-divided
    means agree across the loads, and become ``cold=no`` with their measured length when the
    measured means agree instead (a checkpoint's I/O does not slow with a cold cache)."""
    from taillab.fit import periodic_cold

    rng = np.random.default_rng(7)
    members = [np.arange(0, 1000, 100), np.arange(0, 1000, 100)]

    def case(measured_means, factors):
        raw, warm = [], []
        for m, f in zip(measured_means, factors, strict=True):
            r = rng.lognormal(math.log(50e3), 0.1, 1000)
            r[members[0]] = rng.lognormal(math.log(m), 0.05, len(members[0]))
            raw.append(r)
            warm.append(r / f)
        setting = "requests:100,for=lognormal:5ms,cv=0.05"
        per = {"members": members, "gap": "100", "setting": setting}
        periodic_cold(per, raw, warm, ["q1", "q2"])
        return per

    # Checkpoint-like: 6 ms at both loads while the cold factor went 1.3 -> 1.0.
    io = case((6e6, 6e6), (1.3, 1.0))
    assert io["cold_check"]["cold"] is False and io["setting"].endswith(",cold=no")
    assert io["setting"].startswith("requests:100,for=lognormal:")
    assert abs(io["mean_ns"] / 6e6 - 1) < 0.03
    # CPU-bound: 7.8 ms cold, 6 ms warm — the factor explains it; the setting is kept.
    cpu = case((7.8e6, 6e6), (1.3, 1.0))
    assert cpu["cold_check"]["cold"] is True
    assert cpu["setting"] == "requests:100,for=lognormal:5ms,cv=0.05"


def test_periodic_component_is_found_only_when_regular():
    """A rare slow component at regular gaps becomes ``periodic=``; the same share placed
    independently stays in the mixture."""
    from taillab.fit import periodic

    rng = np.random.default_rng(5)
    n = 20_000
    fast = rng.lognormal(math.log(50e3), 0.1, n)
    slow_at = np.cumsum(rng.integers(60, 81, n // 60))
    slow_at = slow_at[slow_at < n]
    regular = fast.copy()
    regular[slow_at] = rng.lognormal(math.log(2e6), 0.05, len(slow_at))
    share = len(slow_at) / n
    mix = Mixture(
        (
            Component(1 - share, math.log(50e3), 0.01),
            Component(share, math.log(2e6), 0.0025),
        )
    )
    p = periodic([regular[:10_000], regular[10_000:]], mix)
    assert p is not None
    assert p["component"] == 1 and p["hits"] == len(slow_at)
    assert abs(p["gap_mean"] - 70) < 1.5 and abs(p["gap_median"] - 70) <= 2
    assert p["gap_cv"] < 0.25 and 0.4 < p["gap_cv_if_independent"] < 0.6
    lo, hi = (int(x) for x in p["setting"].split(",")[0].removeprefix("requests:").split("-"))
    assert abs(lo - 60) <= 2 and abs(hi - 80) <= 2
    assert "for=lognormal:2ms" in p["setting"] or "for=lognormal:2.0" in p["setting"]
    assert len(p["rest"].components) == 1 and p["rest"].components[0].weight == 1.0
    scattered = fast.copy()
    scattered[rng.choice(n, len(slow_at), replace=False)] = 2e6
    assert periodic([scattered], mix) is None
    # Requests the posterior sweeps into a rare component (cold-start ones, one after
    # another) are not its regular occurrences: one per gap of 1 is not a 1 % share.
    cold = fast.copy()
    cold[:5000] = 2e6
    assert periodic([cold], mix) is None
    # A slightly slower kind of request, however regular, is not deferred work.
    near = Mixture(
        (Component(1 - share, math.log(50e3), 0.01), Component(share, math.log(80e3), 0.0025))
    )
    regular_near = fast.copy()
    regular_near[slow_at] = 80e3
    assert periodic([regular_near], near) is None
    # Every 128th request slow, and one in 250 others preempted into the slow component:
    # the strays are joined out, the period stays 128.
    strayed = fast.copy()
    strayed[50::128] = 2e6
    strays = rng.choice(n, n // 250, replace=False)
    strayed[strays] = 2e6
    w = float((strayed > 1e6).mean())
    mix2 = Mixture((Component(1 - w, math.log(50e3), 0.01), Component(w, math.log(2e6), 0.0025)))
    p2 = periodic([strayed], mix2)
    assert p2 is not None and p2["setting"].startswith("requests:128,"), p2
    assert 50 <= p2["strays"] <= 80
    # The strays stay in the mixture: a component of their share, as slow as the periodic.
    rest = p2["rest"].components
    assert len(rest) == 2 and abs(rest[1].mu - mix2.components[1].mu) < 1e-9
    assert 0.0025 <= p2["stray_weight"] <= 0.0045, p2["stray_weight"]
    assert abs(rest[1].weight - p2["stray_weight"] / (1 - 1 / 128)) < 1e-3
    # A slow host (kv's pooled fit, 2026-11-25): ordinary requests stretched 2.2x, as many
    # as the sweeps, fall in the left tail of a broad slow component (890 us, cv 1). Its
    # members' gaps look random; those above its log-mean less one log-sd keep the rhythm,
    # and the ones under it are strays with their own length.
    busy = rng.lognormal(math.log(100e3), 0.18, 40_000)
    busy[rng.random(40_000) < 0.01] *= 2.2
    busy[50::128] = rng.lognormal(math.log(1.5e6), 0.5, len(busy[50::128]))
    wb = 0.0178
    mixb = Mixture(
        (
            Component(1 - wb, math.log(100e3), 0.18**2),
            Component(wb, math.log(890e3) - math.log(2) / 2, math.log(2)),
        )
    )
    pb = periodic([busy[:20_000], busy[20_000:]], mixb)
    assert pb is not None and pb["strict"] and pb["setting"].startswith("requests:128,"), pb
    assert 0.85 <= pb["mean_ns"] / (1.5e6 * math.exp(0.125)) <= 1.15, pb["mean_ns"]
    stray = pb["rest"].components[-1]
    assert len(pb["rest"].components) == 2 and 200e3 <= math.exp(stray.mu) <= 250e3, stray
    assert 0.006 <= pb["stray_weight"] <= 0.012, pb["stray_weight"]
    # Independent draws, however many: never periodic.
    for share in (0.005, 0.02, 0.05):
        rnd = fast.copy()
        rnd[rng.random(n) < share] = 2e6
        mixr = Mixture(
            (Component(1 - share, math.log(50e3), 0.01), Component(share, math.log(2e6), 0.0025))
        )
        assert periodic([rnd], mixr) is None, share
    # A component of more than 10 % is never periodic, however regular.
    every5 = fast.copy()
    every5[::5] = 2e6
    assert (
        periodic(
            [every5],
            Mixture(
                (Component(0.8, mix.components[0].mu, 0.01), Component(0.2, math.log(2e6), 0.0025))
            ),
        )
        is None
    )


def test_order_effect_replays_the_queue():
    """In order, the replay is the run's own FCFS queue; regularly spaced slow requests
    queue less than the same requests shuffled; two workers halve the wait."""
    import pandas as pd

    from taillab.fit.common import _fcfs
    from taillab.fit.order import order_effect

    # One worker: arrivals 0, 1, 2; services 3, 1, 1 -> sojourns 3, 3, 3.
    assert _fcfs(np.array([0.0, 1, 2]), np.array([3.0, 1, 1]), 1).tolist() == [3, 3, 3]
    # Two workers: the second and third start at once or after the second's 1.
    assert _fcfs(np.array([0.0, 1, 2]), np.array([3.0, 1, 1]), 2).tolist() == [3, 1, 1]
    rng = np.random.default_rng(2)
    n = 6000
    arr = np.cumsum(rng.exponential(100e3, n))  # 10 000 qps
    svc = np.full(n, 40e3)
    svc[::50] = 1e6  # rho ~ 0.6, a 1 ms request every 50th
    st = np.empty(n)
    free = 0.0
    for i in range(n):
        st[i] = max(arr[i], free)
        free = st[i] + svc[i]
    df = pd.DataFrame(
        {
            "intended": arr.astype(np.int64),
            "started": st.astype(np.int64),
            "finished": (st + svc).astype(np.int64),
            "measured": 1,
        }
    )
    o = order_effect([df], 1)
    soj = st + svc - arr
    assert o["in_order"]["mean_ns"] == pytest.approx(soj.mean(), rel=1e-3)
    assert o["effect"]["mean"] < -0.05 and o["effect"]["p99"] < 0
    assert order_effect([df], 2)["in_order"]["mean_ns"] < 0.8 * soj.mean()
    # The harness's own ideal (per request, the same replay in order) is used when recorded.
    df["ideal_completed"] = (arr + soj).astype(np.int64)
    assert order_effect([df], 1)["in_order"]["mean_ns"] == pytest.approx(soj.mean(), rel=1e-3)
    df["ideal_completed"] = (arr + 2 * soj).astype(np.int64)
    assert order_effect([df], 1)["in_order"]["mean_ns"] == pytest.approx(2 * soj.mean(), rel=1e-3)


def test_fcfs_of_one_worker_is_lindleys_recursion():
    """The vectorised one-worker queue gives the recursion's sojourns, idle gaps and all."""
    from taillab.fit.common import _fcfs

    rng = np.random.default_rng(4)
    arr = np.cumsum(rng.exponential(100.0, 5000))
    svc = rng.exponential(90.0, 5000)
    free, ref = -math.inf, []
    for a, s in zip(arr, svc, strict=True):
        free = max(a, free) + s
        ref.append(free - a)
    assert np.allclose(_fcfs(arr, svc, 1), ref, rtol=0, atol=1e-6)


def test_order_effect_by_time_scale():
    """Slow stretches of 300 ms every 2 s: shuffling within 10 or 100 ms keeps them, so what
    is left of the effect there is near zero; within 1 s (a slow 300 ms mixed with 700 ms of
    normal) most of it shows; over the whole run all."""
    import pandas as pd

    from taillab.fit.common import _fcfs
    from taillab.fit.order import order_effect
    from taillab.fit.text import order_sentence
    from taillab.units import fmt_ns

    rng = np.random.default_rng(9)
    n = 40_000  # 8 s at 5 000 qps
    arr = np.cumsum(rng.exponential(200e3, n))
    slow = (arr % 2e9) < 0.3e9
    svc = rng.exponential(np.where(slow, 180e3, 100e3))
    soj = _fcfs(arr, svc, 1)
    df = pd.DataFrame(
        {
            "intended": arr.astype(np.int64),
            "started": (arr + soj - svc).astype(np.int64),
            "finished": (arr + soj).astype(np.int64),
            "measured": 1,
        }
    )
    o = order_effect([df], 1)
    by = {w["window_ns"]: w["effect"] for w in o["windows"]}
    assert sorted(by) == [10e6, 100e6, 1e9]
    whole = o["effect"]["p99"]
    assert whole > 0.3, o
    assert abs(by[10e6]["p99"]) < 0.1 * whole and abs(by[100e6]["p99"]) < 0.1 * whole, by
    assert 0.5 * whole < by[1e9]["p99"] <= 1.1 * whole, (by, whole)
    assert f"within {fmt_ns(100e6)}" in order_sentence(o)


def _wander_records(
    factors, qps_list, secs=8.0, mean_ns=100e3, seed=5, every_s=0.5, slow_every=None
):
    """Per load, one run of one FIFO worker whose lognormal service (cv 0.3) is multiplied
    by a factor drawn per ``every_s`` of wall time from ``factors`` (the host's speed);
    with ``slow_every`` every that many requests takes 25 times the mean (a checkpoint)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    recs = []
    for q in qps_list:
        arr = np.cumsum(rng.exponential(1e9 / q, int(secs * q)))
        f = rng.choice(np.asarray(factors, float), int(secs / every_s) + 2)
        sigma = math.sqrt(math.log(1 + 0.3**2))
        draw = rng.lognormal(math.log(mean_ns) - sigma**2 / 2, sigma, len(arr))
        if slow_every:
            draw[slow_every - 1 :: slow_every] = 25 * mean_ns
        draw *= f[(arr // (every_s * 1e9)).astype(int)]
        st, fi, free = np.empty(len(arr)), np.empty(len(arr)), 0.0
        for i, (a, s) in enumerate(zip(arr, draw, strict=True)):
            st[i] = max(a, free)
            fi[i] = free = st[i] + s
        df = pd.DataFrame(
            {
                "worker": 0,
                "intended": arr.astype(np.int64),
                "started": st.astype(np.int64),
                "finished": fi.astype(np.int64),
                "measured": 1,
            }
        )
        recs.append((f"q{q}", [df]))
    return recs


def test_host_speed_is_measured_per_stretch_and_kept_when_it_queues():
    """Service whose mean moves by ±25 % per half second (the host's speed) at 30 and 65 %
    load: the fit's factors span it with a cv near the true 0.20, the replay keeps at least
    three quarters of it, and the mixture's service times lose most of the wander. Steady
    service gives no speed."""
    from taillab.fit.cold import _series, _served
    from taillab.fit.config import DEFAULT
    from taillab.fit.speed import _stretches, fit_speed, speed_share

    def fitted(recs):
        series = _series(recs)
        k, s = _served(series)
        sp, divide = fit_speed(k, s, _stretches(series, DEFAULT.speed_every_ns), s > 0)
        return s, sp, divide

    recs = _wander_records([0.75, 1.0, 1.25], (3000, 6500))
    s, sp, divide = fitted(recs)
    assert sp["heaviest"] == 1 and [p["stretches"] for p in sp["points"]] == [16, 16]
    assert 0.14 <= sp["cv"] <= 0.28, sp
    f = np.array(sp["factors"])
    assert f.mean() == pytest.approx(1.0, abs=0.002) and f[0] <= 0.85 and f[-1] >= 1.15, f
    # Dividing by the stretches' factors takes most of the wander out of the service times.
    cv_of = lambda x: np.std([x[w == i].mean() for i in np.unique(w)]) / x.mean()  # noqa: E731
    w = _stretches(_series(recs), DEFAULT.speed_every_ns)
    assert cv_of(s / divide) < 0.5 * cv_of(s)
    share, tried = speed_share(recs[1][1], f, 1)
    assert share >= 0.75, tried
    assert [t["share"] for t in tried] == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5]
    # Without the wander replays queue less than the app's order: every statistic under.
    assert all(v < 0 for v in tried[0]["error"].values()), tried[0]
    _, steady, divide = fitted(_wander_records([1.0], (3000, 6500)))
    assert steady["factors"] is None and steady["cv"] < 0.03, steady
    assert (divide == 1).all()


def test_rare_slow_requests_do_not_hide_the_host_speed():
    """A checkpoint-like request every 90 (25x the mean, 1.1 % of the requests) makes each
    stretch's mean so noisy that the wander (±10 %) hides in it unless the stretches'
    means leave the slowest 2 % out (speed_trim); with them out the wander is found, and
    the replay — the slow requests kept in their places — keeps it. The factors are set at
    the load with the most requests per second even where its runs are shorter than a
    stretch."""
    import dataclasses

    from taillab.fit.cold import _series, _served
    from taillab.fit.config import DEFAULT, using
    from taillab.fit.speed import _speed_of_the_moment

    def speed(recs):
        series = _series(recs)
        k, s = _served(series)
        pts = [pid for pid, _ in recs]
        return _speed_of_the_moment(k, s, series, s > 0, recs, pts, 1, None)[0]

    recs = _wander_records([0.9, 1.0, 1.1], (700, 1700), secs=12.0, mean_ns=400e3, slow_every=90)
    sp = speed(recs)
    assert sp["factors"] and sp["share"] > 0, sp
    assert sp["heaviest"] == 1 and 0.05 <= sp["cv"] <= 0.15, sp
    with using(dataclasses.replace(DEFAULT, speed_trim=0.0)):
        hidden = speed(recs)
    assert not hidden["factors"], hidden
    assert [p["noise_cv"] for p in hidden["points"]] > [p["noise_cv"] for p in sp["points"]]


def test_the_speeds_stretch_length_is_the_one_whose_replay_queues_like_the_app():
    """The stretch length and share come from the replay: a wander per 100 ms (±40 %) is
    played in stretches shorter than the default 500 ms, whose replay errs more; the lengths
    tried are reported; another length than 500 ms wins only by more than the tie."""
    from taillab.fit.cold import _series, _served
    from taillab.fit.config import DEFAULT
    from taillab.fit.speed import _speed_of_the_moment, _speed_setting
    from taillab.mixture import duration_spec

    def chosen(recs):
        series = _series(recs)
        k, s = _served(series)
        pts = [pid for pid, _ in recs]
        sp, _ = _speed_of_the_moment(k, s, series, s > 0, recs, pts, 1, None)
        return sp, {t["every_ns"]: t["error"] for t in sp["every_tried"]}

    for every_s in (0.1, 0.5):
        sp, err = chosen(_wander_records([0.6, 1.0, 1.4], (3000, 6500), every_s=every_s))
        assert list(err) == [100e6, 250e6, 500e6, 1e9]
        assert sp["factors"] and sp["share"] > 0, sp
        e = sp["every_ns"]
        assert f"every={duration_spec(e)}" in _speed_setting(sp)
        assert e == 500e6 or err[e] * (1 + DEFAULT.speed_tie) + 0.005 < err[500e6], err
        if every_s == 0.1:
            assert e < 500e6, err
    # Steady service: no length keeps a wander, and the default length is the one reported.
    sp, err = chosen(_wander_records([1.0], (3000, 6500)))
    assert sp["every_ns"] == 500e6 and not sp["factors"], (sp, err)


def test_speed_sentence_says_why_no_speed_was_written():
    from taillab.fit import speed_sentence

    pts = [{"point": "q3000", "cv": 0.05}, {"point": "q6500", "cv": 0.06}]
    base = {"every_ns": 500e6, "points": pts, "heaviest": "q6500"}
    on = speed_sentence(
        {**base, "factors": [0.9, 1.1], "share": 1.0, "setting": "0.9/1.1,every=500ms"}
    )
    assert "q3000 5.0 %" in on and "modelled from q6500 as speed=0.9/1.1,every=500ms" in on
    assert "no share of it" in speed_sentence({**base, "factors": None, "share": 0.0})
    assert "too little" in speed_sentence({**base, "factors": None})


def test_terms_earn_their_place_on_held_out_blocks():
    """A fit across loads keeps an optional term only where it lowers the error on held-out
    blocks: a cold start the records carry is kept (and what it bought is said); in records
    without one, no term is kept, and each dropped term says why."""
    from taillab.fit.config import FitConfig
    from taillab.fit.select import select_terms

    cfg = FitConfig()
    recs = _cold_records(0.5, 3e6, (1000, 6000), n=8000, runs=4)
    doc = select_terms(recs, [], 1, cfg, {})
    assert doc["kept"] == ["cold"], doc
    step = next(s for s in doc["steps"] if s["term"] == "cold")
    assert step["gain"] > max(step["se"], cfg.select_min_gain), step
    assert doc["error"] < doc["base_error"] and doc["held_out_blocks"] == 4
    assert step["setting"].startswith("cold=")
    plain = select_terms(_cold_records(0.0, 3e6, (1000, 6000), n=8000, runs=4), [], 1, cfg, {})
    assert plain["kept"] == [], plain
    assert all(s["why"] for s in plain["steps"]) and len(plain["steps"]) == 4
    # One run per point: its requests cut into stretches, alternately fitted and held out.
    one = select_terms(_cold_records(0.5, 3e6, (1000, 6000), n=8000), [], 1, cfg, {})
    assert one["kept"] == ["cold"] and "stretches" in one["split"], one


def test_components_earn_their_place_on_held_out_likelihood():
    """BIC proposes the mixture's components; each beyond the first stays only where it raises
    the held-out service times' likelihood. Two true modes (85 % around 100 µs, 15 % around
    400 µs): two components are kept, the second for a gain far above its se; one mode: one
    component, whatever BIC proposed, and the pooled fit writes that many."""
    from taillab.fit.config import FitConfig
    from taillab.fit.select import select_terms

    cfg = FitConfig()
    recs = _cold_records(0.0, 3e6, (1000, 3000), n=8000, runs=4, second=(0.15, 400e3))
    doc = select_terms(recs, [], 1, cfg, {})
    assert doc["components"] == 2, doc
    two = next(s for s in doc["steps"] if s["term"] == "component 2")
    assert two["kept"] and two["gain"] > 10 * two["se"], two
    assert all(
        not s["kept"]
        for s in doc["steps"]
        if s["term"].startswith("component ") and s["term"] != "component 2"
    ), doc["steps"]
    one = select_terms(_cold_records(0.0, 3e6, (1000, 3000), n=8000, runs=4), [], 1, cfg, {})
    assert one.get("components", 1) == 1, one
    # A gain the setting asks more of than it buys: the second component is dropped.
    strict = dataclasses.replace(cfg, components_min_gain=2.0)
    doc = select_terms(recs, [], 1, strict, {})
    assert doc["components"] == 1 and not doc["steps"][-1]["kept"], doc["steps"]


def test_terms_are_typed_with_their_setting_and_reading():
    """Each term writes synth's setting, reads in one line, and draws as synth does."""
    from taillab.fit.terms import ColdStart, HostSpeed, Pauses, Periodic

    c = ColdStart(0.5, 3e6)
    assert c.setting() == "cold=0.5,tau=3ms" and "1.5x slower" in c.reading()
    assert ColdStart(0.5, 3e6, 2.0).setting() == "cold=0.5,tau=3ms,power=2"
    assert c.factor(0.0) == 1.5 and c.factor(1.0) == 1.0
    p = Periodic((40, 60), 3e6, 0.05)
    assert p.setting() == "periodic=requests:40-60,for=lognormal:3ms,cv=0.05"
    assert p.reading() == "one request in every 40-60 takes 3ms"
    doc = {"gap": "40-60", "mean_ns": 3e6, "cv": 0.05, "setting": p.setting()[9:] + ",cold=no"}
    assert Periodic.from_doc(doc) == Periodic((40, 60), 3e6, 0.05, cold=False)
    pos, length = p.draw(100_000, np.random.default_rng(1))
    gaps = np.diff(pos)
    assert gaps.min() >= 40 and gaps.max() <= 60 and abs(gaps.mean() - 50) < 1
    assert abs(length.mean() / 3e6 - 1) < 0.01
    s = HostSpeed((0.8, 1.0, 1.2), 500e6)
    assert s.setting() == "speed=0.8/1/1.2,every=500ms"
    f = s.per_request(np.arange(0, 3e9, 1e6), np.random.default_rng(2))
    # Six stretches of 500 ms: each factor twice, constant within a stretch.
    assert sorted(np.unique(f[::500]).tolist()) == [0.8, 1.0, 1.2]
    assert len(np.unique(f[:500])) == 1 and sorted(f[::500].tolist()) == [0.8, 0.8, 1, 1, 1.2, 1.2]
    cycle = {
        "gaps": [{"times": "2", "lo": 900, "hi": 1100}, {"times": "1", "lo": 10, "hi": 20}],
        "mean_ns": 20e6,
        "cv": 0.2,
        "setting": "requests:900-1100x2+10-20x1,for=lognormal:20ms,cv=0.2",
    }
    pa = Pauses.from_doc(cycle)
    assert pa.setting() == "pause=" + cycle["setting"] and "20ms" in pa.reading()
    pos, _ = pa.draw(100_000, np.random.default_rng(3))
    short = (np.diff(pos) <= 20).sum()
    assert 0.25 <= short / len(np.diff(pos)) <= 0.4
    mix = Mixture((Component(0.8, math.log(50e3), 0.04), Component(0.2, math.log(400e3), 0.04)))
    assert mix.setting() == "service=" + mix.spec() and "80 % of requests" in mix.reading()
    draws = mix.sample(200_000, np.random.default_rng(4))
    assert abs(draws.mean() / mix.mean_ns - 1) < 0.01


def test_fit_settings_are_declared_once_with_their_reasons():
    """--fit-set KEY=VALUE sets any of FitConfig's fields; a bad key names the keys."""
    from taillab.fit.config import FitConfig

    cfg = FitConfig().with_settings(["select_min_gain=0.02", "select-chunks=6"])
    assert cfg.select_min_gain == 0.02 and cfg.select_chunks == 6
    with pytest.raises(FitError, match="select_min_gain"):
        FitConfig().with_settings(["no_such_key=1"])
    with pytest.raises(FitError, match="is not a int"):
        FitConfig().with_settings(["select_chunks=many"])
    assert "select_min_gain = 0.005: " in FitConfig.help()
