"""The fit's settings: every constant of the fit with its reason, in one place.

``taillab fit --fit-set KEY=VALUE`` (and ``taillab tailwag --fit-set``) sets any of them;
``taillab fit RESULTS --fit-set help`` lists them with their reasons.
"""

from __future__ import annotations

import contextvars
import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from .common import FitError


def _why(default, reason: str):
    """A setting: its default and the reason for it (shown by ``--fit-set help``)."""
    return field(default=default, metadata={"why": reason})


@dataclass(frozen=True)
class FitConfig:
    """Every constant of the fit, each with the reason for its value (``--fit-set KEY=VALUE``)."""

    select_chunks: int = _why(
        4,
        "a point measured in one run is cut into this many stretches of consecutive "
        "requests, alternately fitted and held out; with two or more runs the runs are the "
        "blocks (tailwag measures four interleaved blocks per point)",
    )
    select_replays: int = _why(
        2,
        "replays of a candidate model per held-out block (fresh draws, the same seeds for "
        "every candidate): a block of a few thousand requests sets its p99 by a few bursts",
    )
    select_max_requests: int = _why(
        150_000,
        "held-out requests per point replayed at most (whole blocks, in order): the replay "
        "is a loop per request",
    )
    components_min_gain: float = _why(
        0.002,
        "a mixture component beyond the first is kept only where it raises the held-out "
        "service times' log-likelihood by more than its standard error and by at least this "
        "many nats per request: a component that only reshapes a mode's flank buys less",
    )
    select_min_gain: float = _why(
        0.005,
        "a term is kept only where it lowers the held-out error (mean |error| of mean, p95 "
        "and p99 over the held-out blocks) by more than its standard error and by at least "
        "this much: half a point, below what any validation on these hosts resolves (their "
        "floors were 6-12 %), so a term that fits noise at a tenth of a percent is dropped",
    )
    select_seed: int = _why(0, "seed of the held-out replays' draws")
    cold_min_extra: float = _why(
        0.0,
        "a cold-start slowdown F of at most this is no term to try (0: the app is not slower "
        "after idling); any larger F is judged by its held-out replay",
    )

    pause_min_hits: int = _why(
        5,
        "A pause sequence from the records needs at least this many pauses (else the mean "
        "of the app's own count and total stands for every pause, as "
        "``requests:N,for=D``).",
    )
    pause_short_gap: float = _why(
        0.25,
        "Gaps shorter than this share of the median gap are a cluster's (a pause soon "
        "after the previous one), fitted as their own range.",
    )
    pause_times_agree: float = _why(
        0.3,
        "how near (relative) the mean of the whole stretches between clusters must be to "
        "pauses / clusters for their quartiles to set a cycle's count of long gaps "
        "(taillab.fit.pauses._long_times)",
    )
    pause_min_whole: int = _why(
        2,
        "a pause cycle's count of long gaps between clusters is taken from the stretches "
        "that fit whole in a run when at least this many agree (within pause_times_agree) "
        "with pauses / clusters (taillab.fit.pauses._long_times)",
    )
    pause_min_per_point: int = _why(
        10,
        "Fewer pauses than this per point (over its runs) set its tail by too few events "
        "to repeat.",
    )
    periodic_max_weight: float = _why(
        0.1,
        "A component can be periodic when it is at most this share of requests ...",
    )
    periodic_max_cv: float = _why(
        0.25,
        "... and the gaps between its requests, stray members joined out, have at most "
        "this robust cv (interquartile range / 1.349 / median; independent draws, joined "
        "so, about 0.5; oltp-disk's checkpoints 0.1, kv's reclaimer 0) ...",
    )
    periodic_min_gaps: int = _why(
        10,
        "... over at least this many gaps (and a stray members' component of its own needs "
        "as many requests)",
    )
    periodic_min_ratio: float = _why(
        2.0,
        "... and a periodic component is at least this many times slower on average than "
        "the rest of the mixture (deferred work, not a slightly slower kind of request).",
    )
    order_shuffles: int = _why(
        10,
        "Shuffles averaged for the order check.",
    )
    order_windows_ns: tuple[float, ...] = _why(
        (10e6, 100e6, 1e9),
        "Windows of send time the order check also shuffles within (ns): what is left of "
        "the effect within a window is the clustering at time scales shorter than it.",
    )
    cold_taus_ns: tuple[float, ...] = _why(
        (0.1e6, 0.3e6, 1e6, 3e6, 10e6, 30e6, 100e6, 300e6, 1e9),
        "Time constants tried for the cold-start term (ns): 0.1 ms to 1 s.",
    )
    cold_sim_tie: float = _why(
        0.1,
        "Replay errors within this fraction (+0.2 points) of the least count as a tie, "
        "broken by R².",
    )
    cold_sim_max_requests: int = _why(
        150_000,
        "Requests per point the simulated choice of tau replays at most (the first runs, whole).",
    )
    cold_max_extra: float = _why(
        4.0,
        "The largest cold-start slowdown F a fit across loads writes (a cold request ≤ 5× warm).",
    )
    cold_min_spread: float = _why(
        0.05,
        "Spread of the points' mean coldness (1 - warmth) below which their means cannot tell F.",
    )
    cold_means_trim: float = _why(
        0.001,
        "Each point's mean leaves out that point's slowest this share of its requests: rare "
        "stop-the-world pauses (middleware's 30 ms among 15 µs requests) would set them "
        "by their count. Not the slowest 1 % the per-request regression leaves out: that "
        "was more of the light load's requests than of the others', and put the model's "
        "mean service 1–7 % under the app's at 20 % load in nearly every app's tailwag "
        "(docs/tailwag.md).",
    )
    cold_means_rounds: int = _why(
        50,
        "Most rounds of the fixed point that finds F and each request's warm time from the "
        "points' means (see :func:`_warm_line`); it settles in a few.",
    )
    cold_means_tolerance: float = _why(
        1e-4,
        "The fixed point for F stops when a round moves F by less than this (F is a factor: "
        "a hundredth of a per cent of a cold request's time).",
    )
    cold_powers: tuple[float, ...] = _why(
        (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0),
        "Powers of the coldness the point means may follow (see :func:`_means_extra`) ...",
    )
    cold_power_min_miss: float = _why(
        0.01,
        "... tried only when the line through the point means misses one by at least this "
        "much (relative) and by three standard errors of that point's mean, and kept only "
        "when it at least halves the worst miss.",
    )
    speed_every_ns: float = _why(
        500e6,
        "Length of the stretches of wall time over which the host's speed is measured and "
        "played (synth's ``speed=...,every=``): much longer than a queue takes to settle "
        "at these loads (milliseconds), shorter than the runs.",
    )
    speed_everies_ns: tuple[float, ...] = _why(
        (100e6, 250e6, 500e6, 1e9),
        "Stretch lengths the replay also tries: a host's slow moments last from a tenth "
        "of a second to seconds. All are longer than a queue takes to settle, so the "
        "replay picks the length whose factors queue like the app's order rather than "
        "telling the wander's time scale. Another length replaces ``SPEED_EVERY_NS`` only "
        "where its replay keeps some of its wander and errs less by more than "
        "``SPEED_TIE`` (the replays are draws too).",
    )
    speed_factors: int = _why(
        9,
        "The speed is written as this many factors: equal-weight quantiles of the stretches'.",
    )
    speed_min_cv: float = _why(
        0.03,
        "The least wander of the speed (cv over stretches, sampling noise taken out) written ...",
    )
    speed_min_ratio: float = _why(
        2.0,
        "... when the stretches' means spread at least this many times as much as "
        "sampling alone would make them (variance ratio).",
    )
    speed_min_requests: int = _why(
        50,
        "Stretches with fewer measured requests than this tell no speed; the heaviest "
        "point needs this many stretches that do.",
    )
    speed_min_stretches: int = _why(
        6,
        "Stretches with fewer measured requests than this tell no speed; the heaviest "
        "point needs this many stretches that do.",
    )
    speed_trim: float = _why(
        0.02,
        "The stretches' means leave out each load's slowest 2 %: the speed is the pace of "
        "the bulk of the requests, and a rare slow one (oltp-disk's 8 ms checkpoints, 1.1 "
        "% of its requests at 25x the mean) makes a stretch's mean so noisy that it hides "
        "the wander — a 500 ms stretch's sampling noise was 8-14 % with them, 2 % "
        "without, and the 6.7 % wander between oltp-disk's blocks went unseen "
        "(docs/tailwag.md). The host's speed stretches them too (synth's ``speed=`` "
        "multiplies every request); they are only left out of the estimate, and the share "
        "replay keeps them in their places.",
    )
    speed_shares: tuple[float, ...] = _why(
        (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5),
        "Shares of the measured wander tried by the replay that sets how much of it to "
        "model. Above 1: the measured wander is a lower bound (the slowest few requests "
        "are left out of the stretches' means, and the spread is shrunk by sampling's "
        "share and summarised as quantiles), and a search point whose replay at 1 still "
        "queued 5 / 9 / 20 % short of its own order came within 1 / 2 / 16 % at 1.25.",
    )
    speed_tie: float = _why(
        0.1,
        "Shares whose replay errs within this fraction (+0.5 points) of the least count "
        "as a tie, which the least share wins.",
    )
    speed_replayed: int = _why(
        200_000,
        "The replay shuffles each share's draws until it has replayed this many requests "
        "(at least two shuffles, at most eight): a point of 20 000 requests at 70 % load "
        "sets its p99 by a few bursts.",
    )

    cold_regression_trim: float = _why(
        0.01,
        "the per-request regression that ranks the taus by R² (and gives the per-request F) "
        "leaves out the slowest this share: rare slow requests are the mixture's job, not "
        "the trend's",
    )
    cold_sim_tie_points: float = _why(
        0.002,
        "replay errors this much (absolute) above cold_sim_tie of the least also tie: at a "
        "least error near zero a relative tie alone is no tie",
    )
    cold_power_min_loads: int = _why(
        3,
        "a power of the coldness is tried only with at least this many loads: two points "
        "always lie on a line",
    )
    cold_power_min_se: float = _why(
        3.0,
        "... and only when the line misses a load's mean service by this many of its "
        "standard errors (few requests, noisy means)",
    )
    speed_tie_points: float = _why(
        0.005,
        "replay errors this much (absolute) above speed_tie of the least also tie",
    )
    speed_min_shuffles: int = _why(
        2, "the speed's share replay shuffles at least this many times ..."
    )
    speed_max_shuffles: int = _why(
        8, "... and at most this many (each a replay of the heaviest load's runs)"
    )
    pause_min_cv: float = _why(
        0.05,
        "pause lengths that vary less than this (cv) are written as one length",
    )
    pause_target: int = _why(
        20,
        "the pauses (or clusters of them) a point needs for its tail to repeat, which the "
        "warning about too few pauses asks for",
    )
    pause_round_requests: int = _why(
        10_000, "the requests that warning suggests, rounded up to a multiple of this"
    )
    periodic_share_band: float = _why(
        2.0,
        "a regular component's median gap must match the share of its members in rhythm "
        "within this factor (else a run of cold-start requests the posterior swept in)",
    )
    periodic_least_share: float = _why(
        1e-6,
        "the share of a component whose independent draws' gap cv is simulated is at least "
        "this (a geometric draw needs a share above 0) ...",
    )
    periodic_max_share: float = _why(
        0.5, "... and at most this (gaps of a share above a half are mostly 1)"
    )
    periodic_independent_gaps: int = _why(
        2000, "geometric gaps drawn to simulate independent draws' robust gap cv"
    )
    mixture_max_samples: int = _why(
        50_000,
        "EM sees at most this many draws from the service histogram (each spread over its "
        "bucket): more changes the fit little and costs seconds per k",
    )
    mixture_inits: int = _why(3, "EM starts per number of components (the best likelihood is kept)")
    mixture_max_iter: int = _why(500, "EM iterations per start at most")

    def with_settings(self, pairs: list[str] | None) -> FitConfig:
        """A copy with ``KEY=VALUE`` pairs applied; a bad key or value names the keys."""
        cfg = self
        for pair in pairs or []:
            key, sep, value = pair.partition("=")
            key = key.strip().replace("-", "_")
            known = {f.name: f for f in dataclasses.fields(self)}
            if not sep or key not in known:
                raise FitError(
                    f"--fit-set {pair!r}: write KEY=VALUE with KEY one of {sorted(known)} "
                    "(--fit-set help lists them with their reasons)"
                )
            kind = type(known[key].default)
            try:
                v = value.strip()
                new = tuple(float(x) for x in v.split("/")) if kind is tuple else kind(v)
                cfg = dataclasses.replace(cfg, **{key: new})
            except ValueError as e:
                what = "list of numbers split by /" if kind is tuple else kind.__name__
                raise FitError(f"--fit-set {pair!r}: {value!r} is not a {what}") from e
        return cfg

    @classmethod
    def help(cls) -> str:
        """Every key, its default and why, one paragraph each."""
        return "\n".join(
            f"{f.name} = {f.default!r}: {f.metadata['why']}" for f in dataclasses.fields(cls)
        )


DEFAULT = FitConfig()

_CURRENT: contextvars.ContextVar[FitConfig] = contextvars.ContextVar("fit_config", default=DEFAULT)


def current() -> FitConfig:
    """The settings of the fit under way (:data:`DEFAULT` outside :func:`using`)."""
    return _CURRENT.get()


@contextmanager
def using(cfg: FitConfig) -> Iterator[FitConfig]:
    """Runs a fit with the settings ``cfg``: every part of it reads them by :func:`current`."""
    token = _CURRENT.set(cfg)
    try:
        yield cfg
    finally:
        _CURRENT.reset(token)
