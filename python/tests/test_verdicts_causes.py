"""The items about causes of the tail — the profiling report's stress tables (one factor at a
time and as an attribution), Tales Fig. 5 as an attribution, The Tail at Scale's fan-out and
hedging: each rule on planted trees (planted.py: run/2 runs, their fan-out sections and interval
logs, the attribution.json `taillab attribute` writes), the numbers on both sides of every
threshold it uses.
"""

from __future__ import annotations

import numpy as np
import pytest
from planted import MS, Point, cond, effects, experiment, hlog, stats, verdict, write_json

PLANTED = [
    "profiling-table7",
    "profiling-attribution",
    "tales-fig5-attribution",
    "tail-at-scale-fanout",
    "tail-at-scale-hedging",
]
STRESSES = ("cpu", "memory", "disk", "all")
# speech's service p95 ÷ no stress that confirm the report: CPU ≥ 1.5, all ≥ CPU, memory and
# disk alone < 1.3.
SPEECH = {"cpu": 1.55, "memory": 1.25, "disk": 1.25, "all": 1.6}
STRESS_CASES = [
    ({}, "confirmed", None),
    ({"cpu": 1.45}, "not confirmed", "speech: cpu ≥"),  # the claim itself
    ({"all": 1.5}, "partly", "speech: all ≥ cpu"),
    ({"memory": 1.35}, "partly", "speech: memory <"),
    ({"disk": 1.35}, "partly", "speech: disk <"),
]


def _judged_on_speech(doc, failed) -> None:
    assert doc["numbers"]["judged_on"] == "speech"
    assert doc["numbers"]["beside"] == {"kv": "not confirmed"}  # kv's unmoved p95: not judged
    if failed:
        assert cond(doc, failed) is False
        assert sum(c["ok"] is False for c in doc["conditions"]) == 1


def _judged(metric: str, base_us: float, terms, q: float) -> list[dict]:
    """attribution.json's effects: ``terms`` at quantile ``q``, the one a rule judges; at the
    other quantile (p95 or p99) the same terms without any effect, so that a rule reading the
    wrong quantile finds nothing."""
    other = 0.99 if q == 0.95 else 0.95
    nothing = [(fs, 0.0, hw) for fs, _, hw in terms]
    return effects(metric, base_us, terms, (q,)) + effects(metric, base_us, nothing, (other,))


# --- Tables VI-VIII: one stress at a time -------------------------------------------------------


def _stress(root, app: str, p95: dict[str, float]) -> None:
    """One app's stress cases: service p95 (and p99) ``p95[case]`` × no stress's 1 ms."""
    ratio = {"none": 1.0, **p95}
    pts = [
        Point(
            f"integrated-t1-q50-case-{i}",
            app=app,
            qps=50,
            axes={"case": case},
            svc=stats(0.5 * MS * r, 1 * MS * r, 1.3 * MS * r),
        )
        for i, (case, r) in enumerate(ratio.items())
    ]
    experiment(root / "profiling-table7" / f"profiling-{app}", pts)


@pytest.mark.parametrize(("change", "status", "failed"), STRESS_CASES)
def test_profiling_table7_stresses(tmp_path, change, status, failed):
    _stress(tmp_path, "kv", {s: 1.0 for s in STRESSES})
    _stress(tmp_path, "speech", {**SPEECH, **change})
    doc = verdict(tmp_path, "profiling-table7")
    assert doc["status"] == status, doc["verdict"]
    _judged_on_speech(doc, failed)


# --- the same as an attribution ----------------------------------------------------------------

LEVELS = {
    "cpu": "cpu:2",
    "memory": "vm:1,bytes=1G",
    "disk": "hdd:1,bytes=256M",
    "all": "cpu:2+vm:1,bytes=1G+hdd:1,bytes=256M",
}


def _stress_attribution(root, app: str, p95: dict[str, float], cpu_hw=0.1) -> None:
    """An app's attribution over interference.hogs: each level's effect on service p95 and p99
    making its cell ``p95[stress]`` × the base's 1 ms, its CI ± ``cpu_hw`` × base for the CPU
    stress (± 0.01 × base for the others)."""
    base = 1000.0
    terms = [
        (
            [("interference.hogs", LEVELS[s])],
            (r - 1) * base,
            (cpu_hw if s == "cpu" else 0.01) * base,
        )
        for s, r in p95.items()
    ]
    stem = root / "profiling-attribution" / f"profiling-{app}-attribution"
    experiment(stem, [Point("integrated-t1-q50", app=app, qps=50)])
    write_json(
        stem / "attribution" / "attribution.json",
        {"schema": "taillab.attribution/1", "effects": _judged("service", base, terms, 0.95)},
    )


@pytest.mark.parametrize(
    ("change", "cpu_hw", "status", "failed"),
    [(c, 0.1, s, f) for c, s, f in STRESS_CASES]
    + [({}, 0.6, "not confirmed", "speech: cpu's effect on p95 excludes 0")],  # 0.55 ± 0.6
)
def test_profiling_attribution_stresses(tmp_path, change, cpu_hw, status, failed):
    """As the quick variant judges an attribution: each CI excludes 0 or not (two-valued);
    the full variant's three-valued judging of the same CIs: test_verdicts_repeated.py."""
    _stress_attribution(tmp_path, "kv", {s: 1.0 for s in STRESSES})
    _stress_attribution(tmp_path, "speech", {**SPEECH, **change}, cpu_hw)
    doc = verdict(tmp_path, "profiling-attribution", quick=True)
    assert doc["status"] == status, doc["verdict"]
    _judged_on_speech(doc, failed)
    ratio = doc["numbers"]["apps"]["speech"]["ratio"]["cpu"]
    assert (ratio["p95"], ratio["p99"]) == pytest.approx(({**SPEECH, **change}["cpu"], 1.0))


# --- Tales Fig. 5 as an attribution ---------------------------------------------------------------

HOG, RT, CORE = (
    ("interference.hogs", "cpu:1@cpus=0"),
    ("harness.rt_priority", "50"),
    ("harness.cpus", "1"),
)


def _tales5(root, hog=2.05, rt=1.45, core=1.45, hog_hw=0.2, rt_x_hw=0.1, core_x_hw=0.1) -> None:
    """Sojourn p99 of the cells ÷ the base cell's 400 µs: hog ``hog``, hog + RT ``rt``, hog on
    a dedicated core ``core`` (RT and the core alone change nothing); each effect's CI ± its
    half-width × base."""
    b = 400.0
    terms = [
        ([HOG], (hog - 1) * b, hog_hw * b),
        ([RT], 0.0, 0.05 * b),
        ([CORE], 0.0, 0.05 * b),
        ([HOG, RT], (rt - hog) * b, rt_x_hw * b),
        ([HOG, CORE], (core - hog) * b, core_x_hw * b),
        ([RT, CORE], 0.0, 0.05 * b),
    ]
    stem = root / "tales-fig5-attribution" / "tales-fig5-attribution"
    experiment(stem, [Point("integrated-t1-q2000", qps=2000)])
    write_json(
        stem / "attribution" / "attribution.json",
        {"schema": "taillab.attribution/1", "effects": _judged("sojourn", b, terms, 0.99)},
    )


@pytest.mark.parametrize(
    ("change", "status", "conds"),
    [
        ({}, "confirmed", [True] * 5),
        ({"hog": 1.95}, "not confirmed", [False, True, True, True, True]),
        (
            {"hog_hw": 1.1},
            "not confirmed",
            [False, True, True, True, True],
        ),  # 1.05 ± 1.1: not found
        ({"rt": 1.55}, "partly", [True, False, True, True, True]),
        ({"rt_x_hw": 0.7}, "partly", [True, True, False, True, True]),  # −0.6 ± 0.7
        ({"core": 1.55}, "partly", [True, True, True, False, True]),
        ({"core_x_hw": 0.7}, "partly", [True, True, True, True, False]),
    ],
)
def test_tales5_attribution(tmp_path, change, status, conds):
    """As the quick variant judges it (two-valued; the full variant: test_verdicts_repeated.py)."""
    _tales5(tmp_path, **change)
    doc = verdict(tmp_path, "tales-fig5-attribution", quick=True)
    assert (doc["status"], [c["ok"] for c in doc["conditions"]]) == (status, conds)
    assert doc["numbers"]["cells_vs_base"]["hog + RT"] == pytest.approx(change.get("rt", 1.45))


# --- The Tail at Scale: fan-out ------------------------------------------------------------------


def _fan(leaves: int, above: float, ratio: float, **measured) -> dict:
    """A fan-out section: ``above`` of the requests slower than the leaves' p99 (the model
    the same), the whole request's p99 ``ratio`` × its model's."""
    e2e = stats(2 * MS, 6 * MS, 8 * MS)
    model = {"above_leaf_p99": above, "e2e": {**e2e, "p99": int(e2e["p99"] / ratio)}}
    return {
        "leaves": leaves,
        "measured": {"above_leaf_p99": above, "e2e": e2e, "served_per_sub": 1.0, **measured},
        "model": model,
        "ratio": {"p99": ratio},
        "above_leaf_p99_independent": 1 - 0.99**leaves,
    }


def _fanout(root, off: dict[int, float], ratio: dict[int, float]) -> None:
    """5, 10 and 50 leaves: the fraction above the leaves' p99 1 − 0.99^N + ``off[N]`` (0.01
    where not given), the p99 ``ratio[N]`` × the model's (1.05)."""
    pts = [
        Point(
            f"integrated-t1-q50-case-{i}",
            qps=50,
            axes={"case": f"{n} leaves"},
            sections={"fanout": _fan(n, 1 - 0.99**n + off.get(n, 0.01), ratio.get(n, 1.05))},
        )
        for i, n in enumerate((5, 10, 50))
    ]
    experiment(root / "tail-at-scale-fanout" / "tas-fanout", pts)


@pytest.mark.parametrize(
    ("off", "ratio", "status", "failed"),
    [
        ({10: 0.029}, {}, "confirmed", None),
        ({10: 0.031}, {}, "not confirmed", "N = 10: above"),  # up to 10 leaves: the claim
        ({10: -0.031}, {}, "not confirmed", "N = 10: above"),
        ({50: -0.031}, {}, "partly", "N = 50: above"),  # beyond, leaves on one host correlate
        ({}, {10: 1.095}, "confirmed", None),
        ({}, {10: 1.105}, "partly", "N = 10: p99"),
        ({}, {50: 1 / 1.105}, "partly", "N = 50: p99"),
    ],
)
def test_fanout_amplification(tmp_path, off, ratio, status, failed):
    _fanout(tmp_path, off, ratio)
    doc = verdict(tmp_path, "tail-at-scale-fanout")
    assert doc["status"] == status, doc["verdict"]
    assert [c["primary"] for c in doc["conditions"]] == [True, False, True, False, False, False]
    if failed:
        assert cond(doc, failed) is False
        assert sum(c["ok"] is False for c in doc["conditions"]) == 1


# --- The Tail at Scale: hedged and tied requests ------------------------------------------------


def _tail(p999: float, spread: float = 0.0) -> np.ndarray:
    """10 000 sojourns whose p99.9 (the 11th slowest) is ``p999``: the 30 slowest p999 × (1 +
    ``spread`` × (k − 19) / 29), k = 0…29, so that the p99.9's 95 % interval (the 18th to the
    4th slowest) is about ± 0.24 × ``spread`` of it (``spread`` 0: of zero width)."""
    body = np.linspace(0.1, 0.3, 9970) * p999
    return np.concatenate([body, (1 + spread * (np.arange(30) - 19) / 29) * p999])


def _hedging(
    root, cut=5.1, extra=0.09, model=1.095, cancelled=0.3, released=None, lag_cut=None, spread=0.0
):
    """No copies (p99.9 20 ms), hedged (its p99.9 ``cut`` × shorter, ``extra`` more copies
    served, measured ÷ model ``model``) and tied copies (``cancelled`` per sub-request);
    ``released``: the cut from each request's release; ``lag_cut``: the cut of the models
    with the send lag and without it (else both the hedged model's)."""
    none, hedged = 20 * MS, 20 * MS / cut
    hedged_model = none / lag_cut[0] if lag_cut else hedged / model
    hedged_free = none / lag_cut[1] if lag_cut else hedged_model
    sections = {
        "none": (none, {}, none, none),
        "hedged": (hedged, {"served_per_sub": 1 + extra}, hedged_model, hedged_free),
        "tied": (3 * MS, {"served_per_sub": 1.1, "cancelled_per_sub": cancelled}, 3 * MS, 3 * MS),
    }
    pts = []
    for i, (case, (_, measured, model_p999, free_p999)) in enumerate(sections.items()):
        fan = _fan(3, 0.03, 1.0, **measured)
        fan["model"]["e2e"]["p999"] = int(model_p999)
        fan["model_without"] = [
            {"without": "send lag", "e2e": {**fan["model"]["e2e"], "p999": int(free_p999)}}
        ]
        if released is not None:
            fan["measured"]["e2e_released"] = {
                **fan["measured"]["e2e"],
                "p999": int(none if case == "none" else none / released),
            }
        pts.append(
            Point(
                f"integrated-t1-q500-case-{i}",
                qps=500,
                axes={"case": case},
                sections={"fanout": fan},
            )
        )
    exp = experiment(root / "tail-at-scale-hedging" / "tas-hedging", pts)
    for i, (p999, *_) in enumerate(sections.values()):
        hlog(
            exp / "points" / f"integrated-t1-q500-case-{i}" / "run-0",
            "sojourn",
            _tail(p999, spread),
        )


@pytest.mark.parametrize(
    ("change", "status", "failed"),
    [
        ({}, "confirmed", None),
        ({"cut": 4.9}, "not confirmed", "hedging cuts p99.9"),
        ({"extra": 0.11}, "not confirmed", "for ≤ 10 % more served copies"),
        ({"model": 1.105}, "partly", "hedged p99.9 within"),
        ({"model": 1 / 1.105}, "partly", "hedged p99.9 within"),
        ({"model": 1.2, "spread": 1.0}, "confirmed", None),  # the model inside the p99.9's interval
        ({"model": 1.2, "spread": 0.5}, "partly", "hedged p99.9 within"),  # ... just outside it
        ({"cancelled": 0.0}, "partly", "tied copies are cancelled"),
        ({"released": 5.1}, "confirmed", None),
        ({"released": 4.9}, "partly", "from each request's release"),
    ],
)
def test_hedging(tmp_path, change, status, failed):
    _hedging(tmp_path, **change)
    doc = verdict(tmp_path, "tail-at-scale-hedging")
    assert doc["status"] == status, doc["verdict"]
    # from the runs' interval logs, not the summaries
    assert doc["numbers"]["cases"]["hedged"]["requests"] == 10_000
    assert doc["numbers"]["cut_p999"] == pytest.approx(change.get("cut", 5.1), rel=2e-3)
    if failed:
        assert cond(doc, failed) is False
        assert sum(c["ok"] is False for c in doc["conditions"]) == 1


@pytest.mark.parametrize(
    ("lag_cut", "status"),
    [
        ((4.9, 5.1), "inconclusive"),  # only the client's release lag keeps the model under 5×
        ((4.9, 4.9), "not confirmed"),  # the model without it does not cut 5× either
        ((5.1, 5.3), "not confirmed"),  # the model allows the cut: the run's 4.5× is the hedging's
    ],
)
def test_hedging_needs_a_client_on_time(tmp_path, lag_cut, status):
    _hedging(tmp_path, cut=4.5, lag_cut=lag_cut)
    doc = verdict(tmp_path, "tail-at-scale-hedging")
    assert (doc["status"], doc["status_from_data"]) == (status, "not confirmed")
    assert doc["verdict"].startswith("needs: a client") is (status == "inconclusive")
