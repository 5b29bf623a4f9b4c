"""The optional terms of a synthetic workload, typed: each with synth's setting, a one-line
reading, and how it acts on a replay (:mod:`taillab.fit.select` replays them).

The mixture itself is :class:`taillab.mixture.Mixture` (``setting()``, ``reading()``,
``sample()``). A term here is built from its fit.json entry (``from_doc``), the form the
fit writes and ``taillab tailwag`` reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..mixture import duration_spec


def _span(text: str) -> tuple[int, int]:
    """``N`` or ``N-M`` (synth's counts and gaps) as (low, high)."""
    lo, _, hi = str(text).partition("-")
    return int(lo), int(hi or lo)


def _lognormal(mean_ns: float, cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` log-normal draws of mean ``mean_ns`` and coefficient of variation ``cv``."""
    s2 = math.log1p(cv * cv)
    return rng.lognormal(math.log(mean_ns) - s2 / 2, math.sqrt(s2), n)


def _every(spans: list[tuple[int, int, int, int]], n: int, rng: np.random.Generator):
    """Positions in ``n`` requests of an event due every so many requests: ``spans`` are
    (times low, times high, gap low, gap high), taken in turn, each gap drawn uniformly
    (synth's ``requests:GAPS``); the first event at a uniform offset into a gap."""
    pos, at, turn = [], int(rng.integers(0, max(spans[0][3], 1) + 1)), 0
    while at < n:
        t_lo, t_hi, lo, hi = spans[turn % len(spans)]
        for _ in range(int(rng.integers(t_lo, t_hi + 1))):
            pos.append(at)
            at += int(rng.integers(lo, hi + 1))
            if at >= n:
                break
        turn += 1
    return np.asarray([p for p in pos if p < n], dtype=np.int64)


@dataclass(frozen=True)
class ColdStart:
    """A worker serves ``1 + extra (1 - w)^power`` times slower at warmth w, which decays
    with time constant ``tau_ns`` while it idles and builds while it serves."""

    extra: float
    tau_ns: float
    power: float = 1.0

    @staticmethod
    def from_doc(d: dict[str, Any]) -> ColdStart:
        return ColdStart(float(d["extra"]), float(d["tau_ns"]), float(d.get("power", 1.0)))

    def setting(self) -> str:
        power = f",power={self.power:g}" if self.power != 1 else ""
        return f"cold={self.extra:.4g},tau={duration_spec(self.tau_ns)}{power}"

    def reading(self) -> str:
        return (
            f"a worker idle for long serves {1 + self.extra:.3g}x slower, warm again after "
            f"about {duration_spec(self.tau_ns)} of serving"
        )

    def factor(self, warmth):
        """The slowdown at warmth ``warmth`` (a number or an array)."""
        return 1.0 + self.extra * (1.0 - warmth) ** self.power


@dataclass(frozen=True)
class HostSpeed:
    """The host's speed of the moment: every ``every_ns`` of wall time one of ``factors``
    (a shuffled cycle of them) multiplies every request."""

    factors: tuple[float, ...]
    every_ns: float

    @staticmethod
    def from_doc(d: dict[str, Any]) -> HostSpeed:
        return HostSpeed(tuple(float(x) for x in d["factors"]), float(d["every_ns"]))

    def setting(self) -> str:
        f = "/".join(f"{v:g}" for v in self.factors)
        return f"speed={f},every={duration_spec(self.every_ns)}"

    def reading(self) -> str:
        return (
            f"every {duration_spec(self.every_ns)} the host serves at "
            f"{min(self.factors):.3g}-{max(self.factors):.3g}x its mean pace"
        )

    def per_request(self, sent: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Each request's factor by the stretch of its send time (``sent`` sorted, ns)."""
        f = np.asarray(self.factors)
        stretch = ((sent - sent[0]) // self.every_ns).astype(np.int64)
        cycles = int(stretch[-1]) // len(f) + 1 if len(stretch) else 0
        order = np.concatenate([rng.permutation(len(f)) for _ in range(cycles)] or [[]])
        return f[order.astype(np.int64)[stretch]]


@dataclass(frozen=True)
class Periodic:
    """A slow request every ``gap`` requests (drawn uniformly in its range) that takes a
    log-normal of ``mean_ns`` and ``cv``; ``cold``: whether the cold start slows it too."""

    gap: tuple[int, int]
    mean_ns: float
    cv: float
    cold: bool = True

    @staticmethod
    def from_doc(d: dict[str, Any]) -> Periodic:
        cold = not d["setting"].endswith(",cold=no")
        return Periodic(_span(d["gap"]), float(d["mean_ns"]), float(d["cv"]), cold)

    def setting(self) -> str:
        gap = str(self.gap[0]) if self.gap[0] == self.gap[1] else f"{self.gap[0]}-{self.gap[1]}"
        own = f"lognormal:{duration_spec(self.mean_ns)},cv={self.cv:.4g}"
        return f"periodic=requests:{gap},for={own}" + ("" if self.cold else ",cold=no")

    def reading(self) -> str:
        lo, hi = self.gap
        every = str(lo) if lo == hi else f"{lo}-{hi}"
        return f"one request in every {every} takes {duration_spec(self.mean_ns)}"

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Where in ``n`` requests the slow ones fall, and their lengths (ns)."""
        pos = _every([(1, 1, *self.gap)], n, rng)
        return pos, _lognormal(self.mean_ns, self.cv, len(pos), rng)


@dataclass(frozen=True)
class Pauses:
    """Stop-the-world pauses: ``spans`` (times low, times high, gap low, gap high) of
    requests between them taken in turn, each pause a log-normal of ``mean_ns``, ``cv``."""

    spans: tuple[tuple[int, int, int, int], ...]
    mean_ns: float
    cv: float
    text: str

    @staticmethod
    def from_doc(d: dict[str, Any]) -> Pauses:
        if d.get("gaps"):
            spans = tuple((*_span(g["times"]), int(g["lo"]), int(g["hi"])) for g in d["gaps"])
        else:
            every = int(d["requests_per_pause"])
            spans = ((1, 1, every, every),)
        return Pauses(spans, float(d["mean_ns"]), float(d.get("cv", 0.0)), d["setting"])

    def setting(self) -> str:
        return f"pause={self.text}"

    def reading(self) -> str:
        mean_gap = np.mean([(lo + hi) / 2 for *_, lo, hi in self.spans])
        return (
            f"about every {mean_gap:.0f} requests all workers stop for "
            f"{duration_spec(self.mean_ns)}"
        )

    def draw(self, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Where in ``n`` requests the pauses fall, and their lengths (ns)."""
        pos = _every(list(self.spans), n, rng)
        if self.cv > 0:
            return pos, _lognormal(self.mean_ns, self.cv, len(pos), rng)
        return pos, np.full(len(pos), self.mean_ns)
