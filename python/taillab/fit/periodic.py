"""A slow request at regular gaps (synth's ``periodic=``): checkpoints, reclaimer sweeps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..mixture import Component, Mixture, lognormal_spec
from .cold import _cold_factor, _warmth
from .common import (
    MIN_TO_COMPARE,
    NORMAL_IQR_SD,
    QUARTILES,
    _lognormal_of,
    _one,
    _range_of,
)
from .config import current

#: The shortest period, in requests, a periodic slow request can have: one in every request
#: is the whole stream, not a rhythm in it.
MIN_PERIOD = 2

#: Members a rhythm needs at least: two gaps, or there is nothing to join.
RHYTHM_MIN_MEMBERS = 3


def _server_order(dfs: list[pd.DataFrame], cold: dict[str, Any] | None = None) -> list[np.ndarray]:
    """Per run, every request's service time (ns), warmup included, in start order.

    With ``cold`` (a :func:`fit_cold` result) each is divided by its cold-start factor, as
    the pooled mixture's service times were: what the request would have taken warm.
    """
    out = []
    for df in dfs:
        g = df.sort_values("started", kind="stable")
        svc = (g["finished"] - g["started"]).to_numpy(dtype=float)
        if cold and cold["extra"] > 0:
            factor = np.empty(len(g))
            for _, idx in g.groupby("worker").indices.items():
                st = g["started"].to_numpy(dtype=float)[idx]
                fi = g["finished"].to_numpy(dtype=float)[idx]
                w = _warmth(st, fi, cold["tau_ns"])
                factor[idx] = _cold_factor(cold, w)
            svc = svc / factor
        out.append(svc)
    return out


def _merge_short_gaps(gaps: np.ndarray) -> np.ndarray:
    """Gaps with the stray members taken out (see :func:`_in_rhythm`)."""
    pos = np.concatenate([[0], np.cumsum(np.asarray(gaps, dtype=np.int64))])
    return np.diff(_in_rhythm(pos))


def _in_rhythm(member: np.ndarray) -> np.ndarray:
    """The members (positions, sorted) left when the strays are taken out: each gap shorter
    than half the upper quartile joins its shorter neighbour (the member between them goes),
    until none is left.

    A stray member — an ordinary request preempted into the slow component — splits one
    true gap in two short ones; joining puts the true gap back. Independent draws, joined
    so, still vary (robust cv about 0.5); regular ones with strays come out regular.
    """
    m = [int(x) for x in member]
    if len(m) < RHYTHM_MIN_MEMBERS:
        return np.array(m, dtype=np.int64)
    g = [b - a for a, b in zip(m, m[1:], strict=False)]
    ref = float(np.quantile(g, QUARTILES[2])) / 2
    i = 0
    while i < len(g) and len(g) > 1:
        if g[i] >= ref:
            i += 1
            continue
        if i == 0:
            j = 1
        elif i == len(g) - 1:
            j = i - 1
        else:
            j = i - 1 if g[i - 1] <= g[i + 1] else i + 1
        a, b = min(i, j), max(i, j)
        g[a] += g[b]
        del g[b]
        del m[b]  # the member between gaps a and b
        i = max(a - 1, 0)
    return np.array(m, dtype=np.int64)


def _independent_cv(p: float) -> float:
    """The robust gap cv that independent draws of share p give, joined as the data are:
    2 000 geometric gaps (seeded), through :func:`_merge_short_gaps`."""
    cfg = current()
    p = min(max(p, cfg.periodic_least_share), cfg.periodic_max_share)
    g = _merge_short_gaps(np.random.default_rng(0).geometric(p, cfg.periodic_independent_gaps))
    q25, med, q75 = np.quantile(g, QUARTILES)
    return float((q75 - q25) / NORMAL_IQR_SD / med)


def _rhythm(runs, dens, totals, k: int, c: Component, strict: bool):
    """The regular gaps of component ``k``'s members, or None if they have none.

    A member is a request whose posterior for ``k`` is over one half; ``strict`` keeps
    only those above the component's log-mean less one log-sd (a broad component's left
    tail holds ordinary requests a slow host stretched: kv's pooled fit on a busy host
    swept in as many of them as reclaimer sweeps, and its gaps looked random). The strays
    are taken out by :func:`_in_rhythm`. Returns (joined gaps, their median, robust cv,
    members in rhythm per run, the strays' service times: every member not in rhythm)
    when the gaps are regular and one in ``median`` requests is about the share of
    requests in rhythm (not a run of cold-start requests the posterior swept in).
    """
    gaps, kept, strays = [], [], []
    cut = c.mu - math.sqrt(c.s2)
    for s, d, total in zip(runs, dens, totals, strict=True):
        post = (total > 0) & (d[:, k] > total / 2)
        member = np.flatnonzero(post & (np.log(np.maximum(s, 1.0)) > cut) if strict else post)
        beat = _in_rhythm(member)
        off = post.copy()
        off[beat] = False
        kept.append(beat)
        strays.append(s[off])
        gaps.append(np.diff(beat))
    g = np.concatenate(gaps) if gaps else np.array([])
    if len(g) < current().periodic_min_gaps:
        return None
    q25, med, q75 = np.quantile(g, QUARTILES)
    cv = (q75 - q25) / NORMAL_IQR_SD / med if med > 0 else math.inf
    share_kept = sum(len(b) for b in kept) / max(sum(len(r) for r in runs), 1)
    share = 1.0 / med if med > 0 else math.inf
    band = current().periodic_share_band
    if (
        cv > current().periodic_max_cv
        or med < MIN_PERIOD
        or not share_kept / band <= share <= band * share_kept
    ):
        return None
    return g, med, cv, kept, np.concatenate(strays)


def periodic(runs: list[np.ndarray], mix: Mixture) -> dict[str, Any] | None:
    """The mixture's rare component whose requests come at regular gaps, if one does.

    ``runs``: per run, service times in the server's start order (:func:`_server_order`).
    A request belongs to a component when that component's posterior is over one half.
    Components of at most ``periodic_max_weight``, at least ``periodic_min_ratio`` times the
    rest's mean, are tried slowest first; the first whose gaps (in requests, within each
    run, stray members joined out by :func:`_merge_short_gaps`) have a robust cv
    (interquartile range / 1.349 / median) of at most ``periodic_max_cv`` and whose median
    gap matches the share of its members that are not strays (1 / gap within a factor 2 of
    it) is returned with synth's ``periodic=`` setting — gaps uniform, with the measured
    gaps' quartiles — and the rest of the mixture (``rest``, a :class:`Mixture`, not JSON):
    the other components and the strays, renormalised. Independent draws of a share p have
    geometric gaps: robust cv about 1.2, about 0.5 once joined (``gap_cv_if_independent``,
    by simulation).

    The strays are the component's members that do not keep its rhythm: on a busy host,
    ordinary requests a preemption made slow (kv's 70 % point on a slow host: 630 strays
    to 925 reclaimer sweeps). The periodic length is a log-normal of the members in rhythm;
    the strays stay in the mixture as a log-normal component of their own share and times,
    drawn independently — without them the synthetic workload would lose that share of its
    slow requests, and with the periodic length they would be too slow.
    """
    comps = mix.components
    if len(comps) < MIN_TO_COMPARE or not runs:
        return None
    # Each request's weighted density under each component, once per run.
    dens = [mix.log_pdf_components(np.log(np.maximum(s, 1.0))) for s in runs]
    totals = [d.sum(axis=1) for d in dens]
    for k in sorted(range(len(comps)), key=lambda i: -comps[i].mean_ns):
        c = comps[k]
        if c.weight > current().periodic_max_weight:
            continue
        rest_mean = sum(x.weight * x.mean_ns for i, x in enumerate(comps) if i != k)
        if c.mean_ns * (1 - c.weight) < current().periodic_min_ratio * rest_mean:
            continue
        found = None
        for strict in (False, True):
            found = _rhythm(runs, dens, totals, k, c, strict)
            if found is not None:
                break
        if found is None:
            continue
        g, med, cv, members, stray_ns = found
        n = sum(len(r) for r in runs)
        hits = sum(len(m) for m in members)
        gap = _one(*_range_of(g))
        rest = [x for i, x in enumerate(comps) if i != k]
        # The periodic length from the members in rhythm; the strays (as slow, off the
        # rhythm) stay in the mixture with their own length, drawn independently.
        beat = np.concatenate([r[m] for r, m in zip(runs, members, strict=True)])
        own = _lognormal_of(beat) if len(beat) >= current().periodic_min_gaps else c
        stray_weight = len(stray_ns) / n
        if len(stray_ns) >= current().periodic_min_gaps:
            lone = _lognormal_of(stray_ns)
            rest.append(Component(stray_weight, lone.mu, lone.s2))
        left = sum(x.weight for x in rest)
        return {
            "component": k,
            "weight": c.weight,
            "mean_ns": own.mean_ns,
            "cv": own.cv,
            "hits": hits,
            "strays": len(stray_ns),
            "stray_weight": stray_weight,
            "stray_mean_ns": float(stray_ns.mean()) if len(stray_ns) else None,
            "strict": strict,
            "gap_mean": float(g.mean()),
            "gap_median": float(med),
            "gap_cv": cv,
            "gap_cv_if_independent": _independent_cv(c.weight),
            "gap": gap,
            "setting": f"requests:{gap},for={lognormal_spec(own)}",
            "rest": Mixture(tuple(Component(x.weight / left, x.mu, x.s2) for x in rest)),
            "members": members,
        }
    return None


def periodic_cold(
    per: dict[str, Any], raw: list[np.ndarray], warm: list[np.ndarray], point_of: list[str]
) -> None:
    """Whether a pooled fit's periodic requests slow down with the cold-start term.

    The pooled fit divides every service time by its cold-start factor, and synth multiplies
    every draw by it, the periodic requests' included. A checkpoint's I/O or a reclaimer's
    sweep through memory need not follow: oltp-disk's checkpoints took 6.2–6.5 ms at 20, 50
    and 70 % load while its other requests sped up 12 %. Per point, the members' mean is taken
    as measured (``raw``, per run) and as the fit sees it (``warm``, divided by the factor);
    whichever varies less across the points is the periodic request's own length. When that
    is the measured one, the length becomes a log-normal of the members' measured times and
    the setting gets ``cold=no`` (synth then serves it at its drawn length).
    """
    members = per["members"]
    by: dict[str, list[list[np.ndarray]]] = {}
    for r, w, pid, m in zip(raw, warm, point_of, members, strict=True):
        if len(m):
            by.setdefault(pid, [[], []])
            by[pid][0].append(r[m])
            by[pid][1].append(w[m])
    if len(by) < MIN_TO_COMPARE:
        return
    means = {
        side: [float(np.concatenate(v[i]).mean()) for v in by.values()]
        for i, side in enumerate(("measured", "warm"))
    }
    spread = {side: max(x) / min(x) - 1.0 for side, x in means.items()}
    cold = spread["warm"] <= spread["measured"]
    per["cold_check"] = {"points": list(by), "mean_ns": means, "spread": spread, "cold": cold}
    if cold:
        return
    own = _lognormal_of(np.concatenate([r[m] for r, m in zip(raw, members, strict=True)]))
    per["mean_ns"], per["cv"] = own.mean_ns, own.cv
    per["setting"] = f"requests:{per['gap']},for={lognormal_spec(own)},cold=no"


def _with_periodic(out: dict[str, Any], per: dict[str, Any] | None) -> None:
    """Puts a periodic component into a fit entry: the rest of the mixture for service=."""
    if per is None:
        return
    rest = per.pop("rest")
    per.pop("members", None)
    spec = rest.spec()
    sets = out.get("synth_settings") or [out["synth_set"]]
    out["synth_set"] = f"service={spec}"
    out["synth_settings"] = [out["synth_set"], *sets[1:], f"periodic={per['setting']}"]
    out["periodic"] = per
