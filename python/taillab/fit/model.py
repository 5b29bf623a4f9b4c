"""One synthetic workload calibrated on some blocks of the records with some of the optional
terms: the mixture always, the pauses, cold start, host speed and periodic request when
asked for and found. :mod:`taillab.fit.select` calibrates on the blocks it fits and replays
on those it holds out; :mod:`taillab.fit.pooled` calibrates the kept terms on every block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..hlog import Dist
from ..mixture import Mixture
from .cold import _cold_factor, _means_keep, _series, _served, fit_cold
from .common import MIN_REQUESTS, FitError, _positive
from .config import FitConfig
from .mixfit import fit_mixture
from .pauses import pause_sequence, pauses
from .periodic import _server_order, periodic, periodic_cold
from .speed import FACTOR_DIGITS, _speed_of_the_moment
from .terms import ColdStart, HostSpeed, Pauses, Periodic

#: The optional terms, in the order they are calibrated and tried (each may lean on those
#: before it: the cold start's replay leaves pause hits to the pauses, the speed is of warm
#: service times, the periodic request is a component of the mixture they leave).
TERMS = ("pause", "cold", "speed", "periodic")

Records = list[tuple[str, list[pd.DataFrame]]]


@dataclass
class Calibrated:
    """A model calibrated on ``recs`` with the terms asked for; a term asked for but not
    found is None, and ``notes`` says why."""

    points: list[str]
    k: np.ndarray  # every measured request's point index ...
    s: np.ndarray  # ... and service time (ns)
    factor: np.ndarray  # ... and its cold-start factor (1 without the term)
    mix: Mixture
    bics: dict[int, float]
    dist: Dist
    zeros: int
    cold: dict[str, Any] | None = None
    speed: dict[str, Any] | None = None  # the speed's document (factors None: not modelled)
    pause: dict[str, Any] | None = None
    periodic: dict[str, Any] | None = None  # with its "rest" of the mixture and "members"
    notes: dict[str, str] = field(default_factory=dict)

    def found(self, term: str) -> bool:
        """Whether ``term`` is part of the model."""
        if term == "speed":
            return bool(self.speed and self.speed.get("factors"))
        return getattr(self, term) is not None

    def drawn(self) -> Mixture:
        """The mixture synth draws from: without the periodic component where there is one."""
        return self.periodic["rest"] if self.periodic else self.mix

    def terms(self) -> dict[str, Any]:
        """The typed terms (:mod:`taillab.fit.terms`) of the model, by name."""
        out: dict[str, Any] = {}
        if self.cold:
            out["cold"] = ColdStart.from_doc(self.cold)
        if self.found("speed"):
            out["speed"] = HostSpeed.from_doc(self.speed)
        if self.pause:
            out["pause"] = Pauses.from_doc(self.pause)
        if self.periodic:
            out["periodic"] = Periodic.from_doc(self.periodic)
        return out


def calibrate(
    recs: Records, dirs: list[Path], workers: int, terms, cfg: FitConfig, kw
) -> Calibrated:
    """The model of ``recs`` (per point, its records) with the optional ``terms`` asked for.
    ``dirs``: the run folders (the app's own pause count); ``kw``: the mixture's options."""
    points = [pid for pid, _ in recs]
    series = _series(recs)
    k, s = _served(series)
    pause = pauses(dirs) if "pause" in terms else None
    pause_ns = pause["threshold_ns"] if pause else None
    notes: dict[str, str] = {}
    cold, factor = None, np.ones(len(s))
    if "cold" in terms:
        cold, factor = _cold_part(series, recs, pause_ns, cfg, notes)
    warm = s / factor
    if (warm > 0).sum() < MIN_REQUESTS:
        raise FitError(
            f"points {points} have {int((warm > 0).sum())} non-zero service times; "
            f"a fit needs at least {MIN_REQUESTS}"
        )
    hit = s >= pause_ns if pause else np.zeros(len(s), bool)
    speed = None
    if "speed" in terms:
        speed, warm = _speed_part(k, warm, series, hit, recs, workers, pause_ns)
        if not speed["factors"]:
            notes["speed"] = "no wander of the host's speed that queues like the app's order"
    if pause:
        # Requests a pause hit are the pause's, not the mixture's.
        pause["dropped"] = int(hit.sum())
        warm = warm[~hit]
        pause = pause_sequence(pause, [df for _, dfs in recs for df in dfs])
    elif "pause" in terms:
        notes["pause"] = "the app reports no stop-the-world pauses"
    dist, zeros = _positive(Dist.from_values(np.rint(warm).astype(np.int64)))
    mix, bics = fit_mixture(dist, **kw)
    cal = Calibrated(points, k, s, factor, mix, bics, dist, zeros, cold, speed, pause)
    cal.notes = notes
    if "periodic" in terms:
        cal.periodic = _periodic_part(recs, cold, mix)
        if cal.periodic is None:
            notes["periodic"] = "no rare component whose requests come at regular gaps"
    return cal


def _cold_part(series, recs, pause_ns, cfg: FitConfig, notes: dict[str, str]):
    """The cold-start term and every measured request's factor, or None (and factor 1)
    when its slowdown is below ``cfg.cold_min_extra``."""
    cold = fit_cold(series, recs, pause_ns)
    w = cold.pop("warmth")
    if cold["extra"] <= cfg.cold_min_extra:
        notes["cold"] = (
            f"no cold-start slowdown found (F {cold['extra']:.3g}, R² {cold['r2']:.3f}): the "
            "app is not slower after idling"
        )
        return None, np.ones(len(w))
    return cold, _cold_factor(cold, w)


def _speed_part(k, warm, series, hit, recs: Records, workers: int, pause_ns):
    """The host's speed (its document) and the warm service times with its wander, as much of
    it as the synthetic workload adds back, taken out."""
    points = [pid for pid, _ in recs]
    speed, divide = _speed_of_the_moment(
        k, warm, series, ~hit & _means_keep(warm), recs, points, workers, pause_ns
    )
    if speed["factors"]:
        share = speed["share"]
        if share > 0:
            q = 1 + (np.array(speed["factors"]) - 1) * share
            speed["factors"] = [round(float(v), FACTOR_DIGITS) for v in q / q.mean()]
            warm = warm / (1 + (divide - 1) * share)
        else:
            speed["factors"] = None
    for sp in speed["points"]:
        sp["point"] = points[sp.pop("index")]
    speed["heaviest"] = points[speed["heaviest"]]
    if speed["factors"]:
        speed["setting"] = HostSpeed.from_doc(speed).setting().removeprefix("speed=")
    return speed, warm


def _periodic_part(recs: Records, cold, mix: Mixture):
    """The mixture's periodic component (:func:`taillab.fit.periodic.periodic`), its length
    checked against the cold-start term, or None."""
    runs_in_order = [x for _, dfs in recs for x in _server_order(dfs, cold)]
    per = periodic(runs_in_order, mix)
    if per is not None and cold:
        raw = [x for _, dfs in recs for x in _server_order(dfs)]
        periodic_cold(per, raw, runs_in_order, [pid for pid, dfs in recs for _ in dfs])
    return per
