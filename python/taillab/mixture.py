"""The mixture model of service times: log-normal components, their mixture, and the specs
synth's ``service=`` parses.

A leaf module (it imports nothing of taillab's): the fit (:mod:`taillab.fit`) makes mixtures,
fit.json stores their components, and the figures (:mod:`taillab.figures`) draw them back from
there (:func:`parse_components`). A component is ln(ns) ~ Normal(mu, s2): its arithmetic mean,
median and cv follow in closed form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Component:
    """One log-normal component: ln(ns) ~ Normal(mu, s2), with mixture weight ``weight``."""

    weight: float
    mu: float
    s2: float

    @property
    def mean_ns(self) -> float:
        return math.exp(self.mu + self.s2 / 2)

    @property
    def median_ns(self) -> float:
        return math.exp(self.mu)

    @property
    def cv(self) -> float:
        return math.sqrt(math.expm1(self.s2))

    def to_json(self) -> dict[str, float]:
        return {
            "weight": self.weight,
            "mean_ns": self.mean_ns,
            "median_ns": self.median_ns,
            "log_mean": self.mu,
            "log_var": self.s2,
            "cv": self.cv,
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> Component:
        return Component(float(d["weight"]), float(d["log_mean"]), float(d["log_var"]))


@dataclass(frozen=True)
class Mixture:
    """A mixture of log-normal components, sorted by mean."""

    components: tuple[Component, ...]

    def _arrays(self):
        w = np.array([c.weight for c in self.components])
        mu = np.array([c.mu for c in self.components])
        sd = np.sqrt([c.s2 for c in self.components])
        return w, mu, sd

    def cdf(self, x_ns) -> np.ndarray:
        """P(X <= x) for x in ns (0 for x <= 0)."""
        from scipy import special  # where used: a page that never asks starts without scipy

        x = np.atleast_1d(np.asarray(x_ns, dtype=float))
        w, mu, sd = self._arrays()
        with np.errstate(divide="ignore"):
            t = np.log(np.maximum(x, 0.0))[:, None]
        return (w * special.ndtr((t - mu) / sd)).sum(axis=1)

    def log_pdf_components(self, t) -> np.ndarray:
        """Density of ln(X) at t (rows) for each component (columns), weighted."""
        t = np.atleast_1d(np.asarray(t, dtype=float))[:, None]
        w, mu, sd = self._arrays()
        return w * np.exp(-0.5 * ((t - mu) / sd) ** 2) / (sd * math.sqrt(2 * math.pi))

    @property
    def mean_ns(self) -> float:
        return float(sum(c.weight * c.mean_ns for c in self.components))

    def quantile(self, q: float) -> float:
        """The x (ns) with P(X <= x) = q, solved on ln x."""
        from scipy import optimize

        _, mu, sd = self._arrays()
        lo, hi = float((mu - 12 * sd).min()), float((mu + 12 * sd).max())
        return math.exp(optimize.brentq(lambda t: self.cdf(math.exp(t))[0] - q, lo, hi))

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` independent draws (ns), as synth's ``service=`` draws them."""
        w, mu, sd = self._arrays()
        k = rng.choice(len(w), size=n, p=w / w.sum())
        return np.exp(rng.normal(mu[k], sd[k]))

    def setting(self) -> str:
        """Synth's setting of this term: ``service=SPEC``."""
        return f"service={self.spec()}"

    def reading(self) -> str:
        """The mixture in words: each component's share of requests and mean."""
        return ", ".join(
            f"{100 * c.weight:.3g} % of requests take {duration_spec(c.mean_ns)} "
            f"on average (cv {c.cv:.2g})"
            for c in self.components
        )

    def spec(self) -> str:
        """The distribution spec synth's ``service=`` parses (weights sum to exactly 1)."""
        comps = [c for c in self.components if round(c.weight, 6) > 0]
        if len(comps) == 1:
            return lognormal_spec(comps[0])
        total = sum(c.weight for c in comps)
        ws = [round(c.weight / total, 6) for c in comps]
        big = int(np.argmax(ws))
        ws[big] = round(1.0 - (sum(ws) - ws[big]), 6)
        return "mix:" + "+".join(
            f"{w:.6f}".rstrip("0").rstrip(".") + "*" + lognormal_spec(c)
            for w, c in zip(ws, comps, strict=True)
        )


def duration_spec(ns: float) -> str:
    """A duration for a spec: 4 significant digits in the largest unit that keeps it >= 1."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if ns >= scale:
            v = ns / scale
            return (f"{v:.4g}" if v < 1e4 else f"{v:.0f}") + unit
    return f"{ns:.4g}ns"


def lognormal_spec(c: Component) -> str:
    """One component as synth's ``lognormal:MEAN,cv=CV``."""
    return f"lognormal:{duration_spec(c.mean_ns)},cv={c.cv:.4g}"


def parse_components(rows: list[dict[str, Any]]) -> Mixture:
    """A mixture from the ``components`` list of a fit (fit.json)."""
    return Mixture(tuple(Component.from_json(r) for r in rows))
