"""One synthetic workload for several loads (the fit across loads): the terms chosen on
held-out blocks (:mod:`taillab.fit.select`), then calibrated on every block."""

from __future__ import annotations

from typing import Any

from ..results import Results
from .common import MIN_TO_COMPARE, FitError, _plain, _records
from .config import DEFAULT, FitConfig, using
from .mixfit import _mixture_entry
from .model import Calibrated, calibrate
from .pauses import _few_pauses
from .point import _split, fewest_thread_points
from .select import run_dirs, select_terms


def fit_pooled(
    res: Results, points: list[str] | None = None, cfg: FitConfig = DEFAULT, **kw
) -> dict[str, Any]:
    """One synthetic workload for several loads: a mixture and the optional terms that earn
    their place.

    An app often serves faster when busy (warm caches; on a VM, a vCPU the host has not
    descheduled). A spinning synthetic workload does not, so one fitted at one load misses
    the others. Here the records of all ``points`` (default: those with the fewest workers)
    are fitted together: the mixture, and each optional term — stop-the-world pauses, a
    cold start (synth's ``cold=F,tau=D``: every service time divided by its factor
    1 + F (1 - warmth), what the request would have taken warm, before the mixture is fitted),
    the host's speed, a periodic request — kept only where it lowers the error on held-out
    blocks (:func:`taillab.fit.select.select_terms`), and the mixture's components beyond the
    first likewise. The kept terms are then calibrated on
    every block. Entry ``point`` is ``"all"``; ``by_point`` compares each point's measured
    mean service with the model's; ``selection`` says which terms were kept, what each
    bought and why the others were dropped.
    """
    points = points or fewest_thread_points(res)
    if len(points) < MIN_TO_COMPARE:
        raise FitError(
            f"a fit across loads needs at least two points, got {points}; "
            "run the app at several loads (e.g. --load 0.2,0.5,0.7)"
        )
    recs = _records(res, points)
    runs = res.runs[res.runs["point"].isin(points)]
    prow = res.points[res.points["point"] == points[0]].iloc[0]
    workers = int(_plain(prow.get("threads")) or 1)
    dirs = run_dirs(res.runs, points)
    with using(cfg):
        selection = select_terms(recs, dirs, workers, cfg, kw)
        if selection.get("components"):
            kw = {**kw, "components": selection["components"]}
        cal = calibrate(recs, dirs, workers, selection["kept"], cfg, kw)
    out = {
        "point": "all",
        "points": points,
        "app": _plain(prow.get("app")),
        "threads": _plain(prow.get("threads")),
        "qps": None,
        "runs": len(runs),
        "source": "requests",
        **_entry(cal, kw),
        "selection": selection,
        "split": _split(runs),
        "noise_hints": [],
    }
    if selection.get("components"):
        out["chosen_by"] = "held-out"
    if cal.pause:
        _few_pauses(out, cal.pause, len(recs))
    return out


def _entry(cal: Calibrated, kw) -> dict[str, Any]:
    """The fit.json keys of a calibrated model: the mixture's, each kept term's document,
    its synth settings and readings, and each point's mean service, measured and modelled."""
    entry = _mixture_entry(cal.dist, cal.zeros, cal.mix, cal.bics, kw)
    drawn = cal.drawn()
    terms = cal.terms()
    entry["synth_set"] = drawn.setting()
    entry["synth_settings"] = [drawn.setting(), *(t.setting() for t in terms.values())]
    entry["readings"] = {"mixture": drawn.reading(), **{n: t.reading() for n, t in terms.items()}}
    if cal.cold:
        entry["cold"] = {**cal.cold, "setting": terms["cold"].setting().removeprefix("cold=")}
    if cal.speed:
        entry["speed"] = cal.speed
    if cal.pause:
        entry["pause"] = cal.pause
    if cal.periodic:
        per = {k: v for k, v in cal.periodic.items() if k not in ("rest", "members")}
        entry["periodic"] = per
    entry["by_point"] = [
        {
            "point": pid,
            "measured_service_mean_ns": float(cal.s[cal.k == i].mean()),
            "model_service_mean_ns": float(cal.mix.mean_ns * cal.factor[cal.k == i].mean()),
            "mean_factor": float(cal.factor[cal.k == i].mean()),
        }
        for i, pid in enumerate(cal.points)
    ]
    return entry
