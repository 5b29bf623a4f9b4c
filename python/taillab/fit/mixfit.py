"""The mixture of log-normals: EM on ln(service time), components by BIC, goodness of fit."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..hlog import Dist
from ..mixture import Component, Mixture
from .common import MAX_COMPONENTS, QUANTILES, FitError
from .config import current

#: Component counts tried in a row whose BIC is no better than the best so far before the
#: search stops (BIC over k is noisy by one step, rarely by two).
BIC_PATIENCE = 2

#: An integer ns record v stands for [v, v + 1): a record of 0 is drawn from at least this.
HALF_NS = 0.5
#: The fit figure: bins of the measured density, the share of each tail left out of its
#: range, the range's padding (a share of it and a constant in ln ns) and the CDF's points.
CURVE_BINS, CURVE_TAIL, CURVE_PAD, CURVE_PAD_LN, CURVE_POINTS = 60, 0.0005, 0.1, 0.05, 200


def _draw_log(dist: Dist, max_samples: int, rng: np.random.Generator) -> np.ndarray:
    """ln of up to ``max_samples`` values drawn from the histogram, spread over each bucket."""
    total = dist.total
    if total <= max_samples:
        idx = np.repeat(np.arange(len(dist.count)), dist.count)
    else:
        idx = rng.choice(len(dist.count), size=max_samples, p=dist.count / total)
    lo = np.maximum(dist.lo[idx].astype(float), HALF_NS)
    width = (dist.hi[idx] - dist.lo[idx] + 1).astype(float)
    return np.log(lo + rng.random(len(idx)) * width)


def fit_mixture(
    dist: Dist,
    *,
    components: int | None = None,
    max_components: int = MAX_COMPONENTS,
    max_samples: int | None = None,
    seed: int = 0,
) -> tuple[Mixture, dict[int, float]]:
    """Maximum-likelihood mixture of log-normals for a histogram of positive ns values.

    ``components`` fixes k; otherwise k in 1..``max_components`` with the lowest BIC (the
    search stops after two k in a row that do not improve it). Returns the mixture and the
    BIC of every k tried.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.mixture import GaussianMixture
    from threadpoolctl import threadpool_limits

    if not 1 <= (components or max_components) <= MAX_COMPONENTS:
        raise FitError(f"components must be 1..{MAX_COMPONENTS}")
    cfg = current()
    max_samples = max_samples or cfg.mixture_max_samples
    x = _draw_log(dist, max_samples, np.random.default_rng(seed))[:, None]
    ks = [components] if components else range(1, max_components + 1)
    # No more components than distinct buckets (a near-constant service time).
    ks = sorted({min(k, len(dist.count)) for k in ks})
    bics: dict[int, float] = {}
    best, worse = None, 0
    # EM here is small numpy work; k-means' thread pool on a shared 2-CPU host only thrashes.
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for k in ks:
            gm = GaussianMixture(
                k, n_init=cfg.mixture_inits, max_iter=cfg.mixture_max_iter, random_state=seed
            ).fit(x)
            bics[k] = float(gm.bic(x))
            if best is None or bics[k] < bics[best[0]]:
                best, worse = (k, gm), 0
            else:
                worse += 1
                if worse == BIC_PATIENCE:
                    break
    assert best is not None
    gm = best[1]
    comps = sorted(
        (
            Component(float(w), float(m[0]), float(c.ravel()[0]))
            for w, m, c in zip(gm.weights_, gm.means_, gm.covariances_, strict=True)
        ),
        key=lambda c: c.mean_ns,
    )
    return Mixture(tuple(comps)), bics


def goodness(dist: Dist, mix: Mixture) -> dict[str, Any]:
    """KS distance and relative errors of mean and quantiles, fitted vs measured (all data).

    Each bucket [lo, hi] stands for the values in [lo, hi + 1): the empirical CDF is compared
    with the fitted one at both edges of every bucket.
    """
    total = dist.total
    after = np.cumsum(dist.count) / total
    before = after - dist.count / total
    d_hi = np.abs(after - mix.cdf(dist.hi + 1.0))
    d_lo = np.abs(before - mix.cdf(dist.lo.astype(float)))
    errors: dict[str, dict[str, float]] = {}
    rows = [("mean", dist.mean, mix.mean_ns)]
    rows += [(name, dist.quantile(q), mix.quantile(q)) for name, q in QUANTILES.items()]
    for name, measured, fitted in rows:
        errors[name] = {
            "measured_ns": float(measured),
            "fitted_ns": float(fitted),
            "rel_error": float(fitted / measured - 1) if measured else math.nan,
        }
    return {"ks": float(max(d_hi.max(), d_lo.max())), "errors": errors}


def _curves(dist: Dist, bins: int = CURVE_BINS) -> dict[str, list[float]]:
    """The measured density of ln(ns) on log-spaced bins and the CDF, for the fit figure."""
    lo_q, hi_q = dist.quantile(np.array([CURVE_TAIL, 1 - CURVE_TAIL]))
    a, b = math.log(max(lo_q, 1.0)), math.log(max(hi_q, lo_q + 1.0))
    pad = CURVE_PAD * (b - a) + CURVE_PAD_LN
    edges = np.linspace(a - pad, b + pad, bins + 1)
    mid = np.log((dist.lo + dist.hi) / 2 + HALF_NS)
    dens, _ = np.histogram(mid, bins=edges, weights=dist.count)
    dens = dens / (dist.total * np.diff(edges))
    grid = np.exp(np.linspace(edges[0], edges[-1], CURVE_POINTS))
    cum = np.concatenate([[0], np.cumsum(dist.count)]) / dist.total
    cdf = cum[np.searchsorted(dist.hi, grid, side="right")]
    return {
        "edges_ns": np.exp(edges).tolist(),
        "density": dens.tolist(),
        "cdf_ns": grid.tolist(),
        "cdf": cdf.tolist(),
    }


def _mixture_entry(dist: Dist, zeros: int, mix: Mixture, bics, kw) -> dict[str, Any]:
    """The keys of a fit.json entry that describe the mixture fitted to ``dist``."""
    spec = mix.spec()
    warn = []
    if zeros:
        warn.append(f"{zeros} zero-length service times left out (ln 0 is undefined)")
    return {
        "n": dist.total,
        "zero_dropped": zeros,
        "bic": {str(k): v for k, v in bics.items()},
        "chosen_by": "fixed" if kw.get("components") else "bic",
        "components": [c.to_json() for c in mix.components],
        "spec": spec,
        "synth_set": f"service={spec}",
        **goodness(dist, mix),
        "warnings": warn,
        "curves": _curves(dist),
    }
