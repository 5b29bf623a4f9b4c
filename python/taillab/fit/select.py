"""Every optional term earns its place: chosen on held-out blocks of the records.

A flexible enough model matches the runs it was fitted to whatever it has learnt, and the
terms of a fit across loads are calibrated by replaying those runs' sojourn statistics.
So each point's records are split into blocks — its runs, or, for a point of one run,
stretches of consecutive requests — taken alternately for fitting and holding out. The
base model (the mixture) and then each optional term in turn (:data:`TERMS`) are
calibrated on the fitting blocks only; each model is replayed at every held-out block's own
send times through its queue, and its error is the mean |replayed / the block's own
replay − 1| of mean, p95 and p99 sojourn (the block's own replay: its service times in
their order through the same queue, so neither side has the harness's cost). A term is kept
when it lowers that error, block by block, by more than the standard error of the
difference and by at least ``select_min_gain``; the next term is tried on top of the kept
ones. Calibration never sees the held-out blocks, so no term is scored by the statistic it
was calibrated on. The mixture's components earn their place on the same blocks: BIC
proposes k from the fitting blocks, and each component from the k-th down is dropped unless
the mixture with it gives the held-out blocks' service times a higher likelihood
(:func:`_components`).

What a replay models: the mixture's draws, times the host's speed of each stretch, the
periodic request at its gaps and the pauses added to the request they fall on, through a
FCFS queue of the runs' workers whose every worker warms and cools as synth's ``cold=``
does. A pause stops every worker in synth; here it lengthens one request (the same with one
worker).
"""

from __future__ import annotations

import heapq
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .common import MIN_TO_COMPARE, _by_send_time, _fcfs, _in_order, _stats3
from .config import FitConfig
from .mixfit import fit_mixture
from .model import TERMS, Calibrated, Records, calibrate
from .terms import ColdStart


def split_blocks(recs: Records, chunks: int) -> tuple[Records, Records, str]:
    """Per point, the blocks fitted and those held out (alternately), and how they were cut."""
    fit, held, how = [], [], set()
    for pid, dfs in recs:
        if len(dfs) >= MIN_TO_COMPARE:
            blocks = dfs
            how.add(f"runs ({len(dfs)} per point)")
        else:
            g = dfs[0].sort_values("intended", kind="stable").reset_index(drop=True)
            cut = np.array_split(np.arange(len(g)), chunks)
            blocks = [g.iloc[c] for c in cut if len(c)]
            how.add(f"{chunks} stretches of consecutive requests of its one run")
        fit.append((pid, blocks[0::2]))
        held.append((pid, blocks[1::2]))
    return fit, held, "; ".join(sorted(how))


def _replay(sent: np.ndarray, draws: np.ndarray, exempt: np.ndarray, workers: int, cold):
    """Sojourns of a FCFS queue of ``workers`` at ``sent`` serving ``draws``, each worker
    slowed by the cold start ``cold`` (a :class:`ColdStart` or None) at its warmth — but not
    the requests ``exempt`` marks (synth's ``cold=no``), which warm it all the same."""
    if cold is None:
        return _fcfs(sent, draws, workers)
    out = np.empty(len(sent))
    heap = [(-math.inf, w) for w in range(workers)]
    warmth, last = [0.0] * workers, [None] * workers
    for i, (a, d, ex) in enumerate(
        zip(sent.tolist(), draws.tolist(), exempt.tolist(), strict=True)
    ):
        free, w = heapq.heappop(heap)
        start = max(a, free)
        if last[w] is not None:
            warmth[w] *= math.exp(-(start - last[w]) / cold.tau_ns)
        sv = d if ex else d * cold.factor(warmth[w])
        warmth[w] = 1.0 - (1.0 - warmth[w]) * math.exp(-sv / cold.tau_ns)
        last[w] = start + sv
        heapq.heappush(heap, (start + sv, w))
        out[i] = start + sv - a
    return out


def _draws(cal: Calibrated, sent: np.ndarray, rng: np.random.Generator):
    """One synthetic run's service times at the send times ``sent`` (before the cold start),
    and which requests the cold start leaves alone."""
    n = len(sent)
    terms = cal.terms()
    draws = cal.drawn().sample(n, rng)
    exempt = np.zeros(n, bool)
    if "periodic" in terms:
        pos, length = terms["periodic"].draw(n, rng)
        draws[pos] = length
        exempt[pos] = not terms["periodic"].cold
    if "speed" in terms:
        draws = draws * terms["speed"].per_request(sent, rng)
    if "pause" in terms:
        pos, length = terms["pause"].draw(n, rng)
        draws[pos] += length
    return draws, exempt


def _targets(held: Records, workers: int, cfg: FitConfig):
    """Per held-out block: (send times, measured mask, the block's own replay's mean, p95
    and p99), up to ``cfg.select_max_requests`` requests per point."""
    out = []
    for _, dfs in held:
        n = 0
        for df in dfs:
            if n >= cfg.select_max_requests:
                break
            a, s, m = _by_send_time(df)
            if m.sum() == 0:
                continue
            out.append((a, m, _stats3(_in_order(df, a, s, m, workers))))
            n += len(a)
    return out


def block_errors(cal: Calibrated, targets, workers: int, cfg: FitConfig) -> np.ndarray:
    """The model's error on every held-out block: mean |replayed / own − 1| of mean, p95 and
    p99, over ``cfg.select_replays`` replays (the same seeds for every model)."""
    cold = ColdStart.from_doc(cal.cold) if cal.cold else None
    errs = []
    for b, (a, m, target) in enumerate(targets):
        e = []
        for rep in range(cfg.select_replays):
            rng = np.random.default_rng([cfg.select_seed, b, rep])
            draws, exempt = _draws(cal, a, rng)
            soj = _replay(a, draws, exempt, workers, cold)[m]
            e.append(float(np.mean(np.abs(_stats3(soj) / target - 1))))
        errs.append(float(np.mean(e)))
    return np.asarray(errs)


def select_terms(
    recs: Records, dirs: list[Path], workers: int, cfg: FitConfig, kw
) -> dict[str, Any]:
    """The terms that earn their place (see the module's docs): the selection's document —
    ``kept`` and ``steps`` (per term tried: kept or not, the held-out error it gave, its
    gain over the model before it with that gain's standard error, and why)."""
    fit, held, how = split_blocks(recs, cfg.select_chunks)
    targets = _targets(held, workers, cfg)
    kept: list[str] = []
    cal = calibrate(fit, dirs, workers, kept, cfg, kw)
    errs = block_errors(cal, targets, workers, cfg)
    doc: dict[str, Any] = {"split": how, "held_out_blocks": len(targets)}
    doc["base_error"] = float(errs.mean())
    steps = []
    for term in TERMS:
        trial = calibrate(fit, dirs, workers, [*kept, term], cfg, kw)
        if not trial.found(term):
            steps.append({"term": term, "kept": False, "why": trial.notes.get(term, "not found")})
            continue
        step = _judge(term, errs, block_errors(trial, targets, workers, cfg), cfg)
        step["setting"] = trial.terms()[term].setting()
        steps.append(step)
        if step["kept"]:
            kept.append(term)
            errs = np.asarray(step.pop("errors"))
        else:
            step.pop("errors")
    doc["kept"], doc["steps"] = kept, steps
    if not kw.get("components"):
        doc["components"] = _components(fit, held, dirs, workers, kept, cfg, kw, steps)
    doc["error"] = float(errs.mean())
    return doc


def _components(fit, held, dirs, workers, kept, cfg, kw, steps):
    """How many mixture components earn their place. BIC proposes k from the fitting blocks'
    service times; then, from the k-th down, a component stays only where the mixture with it
    gives the held-out blocks' service times (warm, as the kept terms make them) a higher
    likelihood than the one without it, by more than the standard error of that gain and by
    at least ``cfg.components_min_gain`` nats per request. The likelihood, not the replayed
    sojourn: a component is a claim about the service times, and a queue's statistics are too
    noisy to tell a small component from none. Appends a step per component tried."""
    base = calibrate(fit, dirs, workers, kept, cfg, kw)
    k = len(base.mix.components)
    if k < MIN_TO_COMPARE:
        return k
    held_dist = calibrate(held, dirs, workers, kept, cfg, {**kw, "components": 1}).dist
    t = np.log((held_dist.lo + held_dist.hi) / 2.0)
    n = held_dist.count.astype(float)
    opts = {key: v for key, v in kw.items() if key in ("max_samples", "seed")}

    def loglik(j: int) -> np.ndarray:
        mix = fit_mixture(base.dist, components=j, **opts)[0]
        with np.errstate(divide="ignore"):
            return np.log(mix.log_pdf_components(t).sum(axis=1))

    ll = loglik(k)
    while k > 1:
        fewer = loglik(k - 1)
        d = ll - fewer
        gain = float((n * d).sum() / n.sum())
        se = float(np.sqrt((n * (d - gain) ** 2).sum() / (n.sum() - 1) / n.sum()))
        step = {"term": f"component {k}", "gain": gain, "se": se, "unit": "nats per request"}
        step["setting"] = f"{k} components rather than {k - 1}"
        if gain > se and gain >= cfg.components_min_gain:
            why = f"raised the held-out likelihood by {gain:.4f} ± {se:.4f} nats a request"
            steps.append(step | {"kept": True, "why": why})
            break
        why = f"raised the held-out likelihood by {gain:+.4f} nats a request (se {se:.4f})"
        steps.append(step | {"kept": False, "why": why + ", not enough"})
        k, ll = k - 1, fewer
    return k


def _judge(term: str, before: np.ndarray, after: np.ndarray, cfg: FitConfig) -> dict[str, Any]:
    """Whether ``term`` lowered the held-out error (``before`` → ``after``, per block) by
    more than its standard error and by at least ``cfg.select_min_gain``."""
    gain = before - after
    n = len(gain)
    se = float(gain.std(ddof=1) / math.sqrt(n)) if n >= MIN_TO_COMPARE else math.nan
    mean = float(gain.mean()) if n else math.nan
    step = {"term": term, "error": float(after.mean()), "gain": mean, "se": se}
    step["errors"] = after.tolist()
    if not math.isfinite(se):
        return step | {"kept": False, "why": f"{n} held-out block(s): no standard error"}
    if mean <= se:
        why = f"lowered the held-out error by {100 * mean:+.2f} points, not more than its se"
        return step | {"kept": False, "why": why + f" ({100 * se:.2f})"}
    if mean < cfg.select_min_gain:
        why = f"lowered the held-out error by only {100 * mean:.2f} points"
        return step | {"kept": False, "why": why + f" (< {100 * cfg.select_min_gain:g})"}
    why = f"lowered the held-out error by {100 * mean:.2f} ± {100 * se:.2f} points"
    return step | {"kept": True, "why": why}


def run_dirs(res_runs: pd.DataFrame, points: list[str]) -> list[Path]:
    """The run folders of ``points`` (the app's own pause counts)."""
    return [Path(p) for p in res_runs[res_runs["point"].isin(points)]["path"]]
