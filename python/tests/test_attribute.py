"""The attribution's analysis on planted causes of exactly known size (fixtures.make_attribution):
the compressed quantile regression equals the one over every request, each planted effect's CI
holds its true size and the null factor's holds zero, and the page and JSON say so."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from fixtures import attribution_service
from scipy import optimize

from taillab import attribute as A
from taillab.attribute import analysis as AA
from taillab.attribute import data as AD
from taillab.attribute import model as AM
from taillab.errors import TaillabError
from taillab.results import load


def _true_quantile(cell: list[int], q: float) -> float:
    """The q-quantile (µs) of a cell's service distribution, from a large draw's exact mixture:
    base 100 µs + Exp(5 µs), +20 µs for scale, 3 % of them +300 µs for noise."""
    shift = 100.0 + (20.0 if cell[0] else 0.0)
    hit = 0.03 if cell[1] else 0.0

    def cdf(x: float) -> float:
        f = lambda s: 1 - math.exp(-max(x - s, 0.0) / 5.0)  # noqa: E731
        return (1 - hit) * f(shift) + hit * f(shift + 300.0)

    return optimize.brentq(lambda x: cdf(x) - q, shift, shift + 400.0)


def _truth(term: str, q: float) -> float:
    base = [0, 0, 0]
    if term.startswith("app.scale"):
        return _true_quantile([1, 0, 0], q) - _true_quantile(base, q)
    if term.startswith("app.noise"):
        return _true_quantile([0, 1, 0], q) - _true_quantile(base, q)
    return 0.0


@pytest.fixture(scope="module")
def analysed(attribution_page, attribution_dir):
    return json.loads((attribution_dir / "attribution" / "attribution.json").read_text())


def test_compression_is_exact(attribution_dir):
    design = A.read_design(attribution_dir)
    model = A.Model(design, interactions=True)
    runs = A.collect(load(attribution_dir), design, model)
    ones = np.ones(len(runs), dtype=int)
    for q in (0.5, 0.99):
        full = A.quantreg(runs, "service", q, ones, compress=False)
        fast = A.quantreg(runs, "service", q, ones)
        assert np.allclose(fast, full, atol=0.05), (q, fast, full)
        # A resample's multiplicities are weights: the same optimum as repeating those runs
        # (where the optimum is flat, another point of it: the objective is compared).
        mult = AD.resample(runs, np.random.default_rng(3))
        rep = [r for r, m in zip(runs, mult, strict=True) for _ in range(m)]
        weighted = A.quantreg(runs, "service", q, mult)
        repeated = A.quantreg(rep, "service", q, np.ones(len(rep), dtype=int), compress=False)
        y = np.concatenate([r.sorted["service"] for r in rep])
        x = np.vstack([np.repeat(r.x[None, :], r.n, axis=0) for r in rep])
        got, best = _check_loss(y, x, weighted, q), _check_loss(y, x, repeated, q)
        assert abs(got - best) <= 1e-9 * best, (q, got, best)
        assert np.allclose(weighted, repeated, atol=0.5), (q, weighted, repeated)


def _check_loss(y: np.ndarray, x: np.ndarray, beta: np.ndarray, q: float) -> float:
    """The quantile regression's objective: the check function summed over the rows."""
    r = y - x @ beta
    return float(np.sum(np.where(r >= 0, q * r, (q - 1) * r)))


def _exact_lp(y: np.ndarray, x: np.ndarray, q: float) -> np.ndarray:
    """The quantile regression solved exactly as the linear program it is (HiGHS, through
    scipy): minimise q·Σu + (1 − q)·Σv subject to xβ + u − v = y, u, v ≥ 0, β free."""
    from scipy import sparse

    n, k = x.shape
    eye = sparse.identity(n, format="csr")
    a_eq = sparse.hstack([sparse.csr_matrix(x), eye, -eye], format="csr")
    c = np.concatenate([np.zeros(k), np.full(n, q), np.full(n, 1 - q)])
    bounds = [(None, None)] * k + [(0, None)] * (2 * n)
    sol = optimize.linprog(c, A_eq=a_eq, b_eq=y, bounds=bounds, method="highs")
    assert sol.status == 0, sol.message
    return sol.x[:k]


def test_quantreg_reaches_the_exact_optimum(tmp_path):
    """The fit on compressed rows (the dual program, HiGHS) reaches the optimum of the primal
    program over every request. Where a sparse tail makes the optimum a flat stretch between two
    order statistics the two vertices may differ within it, so the objective is what is compared
    (and the coefficients only loosely)."""
    from fixtures import make_attribution

    root = make_attribution(tmp_path / "a", duration_s=0.4)
    design = A.read_design(root)
    model = A.Model(design, interactions=True)
    runs = A.collect(load(root), design, model)
    ones = np.ones(len(runs), dtype=int)
    for metric in ("sojourn", "service"):
        y = np.concatenate([r.sorted[metric] for r in runs])
        x = np.vstack([np.repeat(r.x[None, :], r.n, axis=0) for r in runs])
        for q in (0.5, 0.95, 0.99):
            fast = A.quantreg(runs, metric, q, ones)
            exact = _exact_lp(y, x, q)
            got, best = _check_loss(y, x, fast, q), _check_loss(y, x, exact, q)
            assert got <= best * (1 + 1e-9), (metric, q, got, best)
            # The flat stretches are a few µs wide here (Exp(5 µs) tails over 400 requests).
            assert np.allclose(fast, exact, atol=15.0), (metric, q, fast, exact)


def test_runs_far_from_their_fit_stay_compressed(monkeypatch):
    """Runs of one cell that disagree (a stalled run, a clean one, a mixed one: what a host's
    moment does to a real attribution) put the fit far from each run's own quantile. The
    compression must still reach the exact optimum while keeping a small part of the requests:
    globbing each run's far requests into two rows at its extremes, and widening every run's
    window on each retry, grew a real attribution's program to every request (minutes a fit)."""
    rng = np.random.default_rng(11)
    n = 2000

    def run(cell: int, slow: float) -> A.RunData:
        fast = 100.0 + rng.exponential(5.0, n)
        stalled = 1000.0 + rng.exponential(50.0, n)
        y = np.where(rng.random(n) < slow, stalled, fast) + 30.0 * cell
        return A.RunData(cell, 0, np.array([1.0, float(cell)]), {"sojourn": y})

    runs = [run(c, slow) for c in (0, 1) for slow in (0.0, 0.45, 1.0)]
    sizes: list[int] = []
    solve = AM._lp

    def counted(y, w, x, q):
        sizes.append(len(y))
        return solve(y, w, x, q)

    monkeypatch.setattr(AM, "_lp", counted)
    ones = np.ones(len(runs), dtype=int)
    y = np.concatenate([r.sorted["sojourn"] for r in runs])
    x = np.vstack([np.repeat(r.x[None, :], r.n, axis=0) for r in runs])
    for q in (0.5, 0.9, 0.99):
        sizes.clear()
        fast = A.quantreg(runs, "sojourn", q, ones)
        got, best = _check_loss(y, x, fast, q), _check_loss(y, x, _exact_lp(y, x, q), q)
        assert got <= best * (1 + 1e-9), (q, got, best)
        assert len(sizes) <= 4, (q, sizes)
        assert max(sizes) <= 0.25 * len(y), (q, sizes, len(y))


def test_planted_effects_are_recovered(analysed):
    main = [e for e in analysed["effects"] if e["metric"] == "service" and e["kind"] == "main"]
    assert len(main) == 3 * len(analysed["quantiles"])
    for e in main:
        truth = _truth(e["term"], e["quantile"])
        lo, hi = e["ci_low_us"], e["ci_high_us"]
        # The CI with half its width again: nine 95 % intervals would miss one in three
        # times by chance; this bounds the error by 1.5 half-widths, and the width below.
        pad = (hi - lo) / 4
        assert lo - pad <= truth <= hi + pad, (e["term"], e["label"], truth, lo, hi)
        assert hi - lo < max(6.0, 0.2 * abs(truth)), (e["term"], e["label"], lo, hi)
        if abs(truth) > 5:
            assert e["excludes_zero"], e
    noise99 = next(e for e in main if e["term"].startswith("app.noise") and e["quantile"] == 0.99)
    assert noise99["pct_of_base"] > 100, noise99


def test_what_to_change_and_interactions(analysed):
    w = analysed["what_to_change"]
    # Every change from the base makes p99 worse or no better: the base is the best cell.
    assert [x["key"] for x in w][-1] == "app.noise", w
    assert w[-1]["p99_gain_us"] < -100, w
    inter = {e["term"] for e in analysed["effects"] if e["kind"] == "interaction"}
    assert len(inter) == 3
    var = {v["key"]: v for v in analysed["variance_p99"]}
    assert set(var) == {f["key"] for f in analysed["design"]["factors"]}
    assert all(v["ratio"] > 0 for v in var.values())
    p = analysed["precision"]
    assert p["blocks"] == 3 and p["median_half_width_us"] > 0
    # A quarter of the half-width needs sixteen times the blocks.
    widths = sorted(p["blocks_for_half_width_us"].values())
    assert widths[1] >= 15 * 3, p
    text = A.text_table(analysed)
    assert "what to change" in text and "app.noise=slow" in text


def test_page_has_its_figures(attribution_page):
    page = attribution_page.read_text()
    for name in ("effects-sojourn", "effects-service", "effects-queue", "cells-ccdf"):
        assert f'id="{name}"' in page, name
        assert (attribution_page.parent / "figures" / f"{name}.png").exists()
    assert "What to change" in page


def test_a_folder_without_design_is_refused(tmp_path):
    with pytest.raises(TaillabError, match="no design.json"):
        A.read_design(tmp_path)


def test_the_cells_carry_the_true_service(attribution_dir):
    """The fixture itself: a cell's drawn services follow the planted distribution."""
    rng = np.random.default_rng(0)
    s = attribution_service([1, 1, 0])(rng, 200_000) / 1e3
    assert abs(np.quantile(s, 0.99) - _true_quantile([1, 1, 0], 0.99)) < 2.0


@pytest.fixture(scope="module")
def fraction(tmp_path_factory):
    """The resolution-IV half fraction of four factors (fixtures.make_attribution(fraction=
    True)), 4 000 requests a cell, analysed with 20 resamples and the p99.9 threshold at 4 000
    requests a cell (20 000 a cell would take minutes to make and fit here)."""
    from fixtures import make_attribution

    root = make_attribution(
        tmp_path_factory.mktemp("fraction") / "a",
        blocks=2,
        duration_s=1.0,
        qps=2000.0,
        fraction=True,
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(AA, "P999_REQUESTS", 4000)
        return root, A.analyse(root, bootstrap=20)


def test_a_fraction_estimates_main_effects_and_names_its_aliases(fraction):
    root, doc = fraction
    kinds = {e["kind"] for e in doc["effects"]}
    assert kinds == {"intercept", "main"}, kinds
    mains = {e["term"] for e in doc["effects"] if e["kind"] == "main"}
    assert mains == {"app.scale=1.5", "app.noise=slow", "app.lock_spin=20us", "harness.wait=spin"}
    # The confounded interactions, by letter (design.json) and by factor.
    assert doc["design"]["aliases"] == [["A×B", "C×D"], ["A×C", "B×D"], ["A×D", "B×C"]]
    assert ["app.scale × app.noise", "app.lock_spin × harness.wait"] in doc["aliases"]
    text = A.text_table(doc)
    assert "A×B = C×D (app.scale × app.noise = app.lock_spin × harness.wait)" in text
    page = A.write_page(root, doc, root / "attribution")
    assert "app.scale × app.noise = app.lock_spin × harness.wait" in page.read_text()
    # Main effects are clear of the two-factor interactions: the planted ones are found.
    for q in (0.5, 0.99):
        e = next(
            x
            for x in doc["effects"]
            if x["metric"] == "service" and x["quantile"] == q and x["term"] == "app.scale=1.5"
        )
        assert e["ci_low_us"] - 2 <= _truth(e["term"], q) <= e["ci_high_us"] + 2, e


def test_p999_only_where_the_cells_hold_enough_requests(fraction, analysed):
    # Under the threshold (4 500 requests a cell against 20 000): no p99.9; at it (4 000 a
    # cell against a threshold of 4 000): p99.9 for every metric and term.
    assert min(c["requests"] for c in analysed["cells"]) < AA.P999_REQUESTS
    assert analysed["quantiles"] == [0.5, 0.95, 0.99]
    assert not any(e["quantile"] == 0.999 for e in analysed["effects"])
    _, doc = fraction
    assert min(c["requests"] for c in doc["cells"]) >= 4000
    assert doc["quantiles"] == [0.5, 0.95, 0.99, 0.999]
    at = [e for e in doc["effects"] if e["quantile"] == 0.999]
    assert {e["metric"] for e in at} == set(A.METRICS) and all(e["label"] == "p99.9" for e in at)
    assert len(at) == 3 * 5  # intercept and four main effects per metric
    # The 300 µs noise on 3 % of requests is at p99.9 too (its true shift from the mixture);
    # four requests a cell above p99.9 make it coarse, so only its size is checked.
    e = next(x for x in at if x["metric"] == "service" and x["term"] == "app.noise=slow")
    truth = _truth(e["term"], 0.999)
    assert truth > 200 and 0.5 * truth < e["estimate_us"] < 1.5 * truth, (truth, e)


def test_the_bootstrap_is_the_same_in_two_processes(attribution_dir):
    # The resamples are drawn first, then refitted in forked processes: the same CIs.
    one = A.analyse(attribution_dir, bootstrap=8, procs=1)
    two = A.analyse(attribution_dir, bootstrap=8, procs=2)
    assert [e["ci_low_us"] for e in one["effects"]] == [e["ci_low_us"] for e in two["effects"]]
    assert [e["ci_high_us"] for e in one["effects"]] == [e["ci_high_us"] for e in two["effects"]]


def test_saturated_runs_are_counted_and_named(attribution_dir, tmp_path):
    """A run whose saturation check failed is counted in its cell, and the text says which
    cell and what to do: its quantiles grow with the run's length, not only with the factors."""
    import shutil

    root = tmp_path / "a"
    shutil.copytree(attribution_dir, root, ignore=shutil.ignore_patterns("attribution"))
    design = A.read_design(root)
    cid = design["cell_ids"][3]
    path = root / "points" / cid / "run-1" / "summary.json"
    doc = json.loads(path.read_text())
    doc["checks"]["saturation"] = {"ok": False, "verdict": "backlog grew: saturated"}
    path.write_text(json.dumps(doc))
    out = A.analyse(root, bootstrap=4)
    counts = {c["id"]: c["saturated_runs"] for c in out["cells"]}
    assert counts[cid] == 1
    assert sum(counts.values()) == 1
    text = A.text_table(out)
    assert f"saturated: 1 run(s) in 1 cell(s) ({cid})" in text
    assert "saturated" not in A.text_table(A.analyse(attribution_dir, bootstrap=4))
