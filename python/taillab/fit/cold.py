"""The cold-start term (synth's ``cold=F,tau=D``): a worker is slower after idling."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..mixture import duration_spec
from .common import MIN_TO_COMPARE, _by_send_time, _fcfs, _in_order, _stats3
from .config import current


def _warmth(started: np.ndarray, finished: np.ndarray, tau_ns: float) -> np.ndarray:
    """Warmth of one worker at the start of each of its requests (sorted by start).

    The model of synth's ``cold=F,tau=D``: warmth decays as exp(-idle/tau) while the worker
    waits and grows as 1 - (1 - w) exp(-busy/tau) while it serves; a worker starts cold.
    """
    idle = np.maximum(started[1:] - finished[:-1], 0) / tau_ns
    busy = np.maximum(finished - started, 0) / tau_ns
    w = np.empty(len(started))
    cur = 0.0
    e_idle = np.exp(-idle).tolist()
    e_busy = np.exp(-busy).tolist()
    for i in range(len(started)):
        if i:
            cur *= e_idle[i - 1]
        w[i] = cur
        cur = 1.0 - (1.0 - cur) * e_busy[i]
    return w


def _series(recs) -> list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]:
    """(point index, started, finished, measured mask) per worker of every run, by start."""
    out = []
    for k, (_, dfs) in enumerate(recs):
        for df in dfs:
            for _, g in df.groupby("worker"):
                g = g.sort_values("started")
                keep = (g["measured"] == 1).to_numpy() if "measured" in g else np.ones(len(g), bool)
                st = g["started"].to_numpy(dtype=float)
                out.append((k, st, g["finished"].to_numpy(dtype=float), keep))
    return out


def _warmth_at(series, tau_ns: float) -> np.ndarray:
    """Warmth at the start of every measured request, in the order of :func:`_served`."""
    return np.concatenate([_warmth(st, fi, tau_ns)[keep] for _, st, fi, keep in series])


def _served(series) -> tuple[np.ndarray, np.ndarray]:
    """(point index, service time) of every measured request."""
    k = np.concatenate([np.full(int(keep.sum()), i) for i, _, _, keep in series])
    s = np.concatenate([(fi - st)[keep] for _, st, fi, keep in series])
    return k, s


def fit_cold(series, recs=None, pause_ns: float | None = None) -> dict[str, Any]:
    """The cold-start term service = base * (1 + F (1 - warmth)) from every measured request.

    tau: for each tau in ``cold_taus_ns``, a linear regression of service on (1 - warmth)
    over the requests, the slowest 1 % left out (rare slow requests are the mixture's job,
    not the trend's); the tau with the largest R² wins. F: from the points' means at that tau
    — each point's mean service against its mean coldness (1 - warmth), a line through the
    points (``method: "point means"``; each point's slowest ``cold_means_trim`` left out, and
    the coldness raised to a power where the loads ask for it: :func:`_means_extra`). A
    request's warmth is a noisy stand-in for what
    slows it (caches, the host's state), and a regression on a noisy regressor shrinks its
    slope (regression dilution: on kv, F 0.18 per request against 0.75 from the means, whose
    model then missed the 20 % load's mean service by 10 %); the means are what a
    validation compares.

    With ``recs`` (the points' records, one worker, with their intended send times) tau is
    instead the one whose model *queues* like the app (``tau_method: "simulated"``, see
    :func:`_simulated_taus`): R² rewards a short tau whenever a request's idle gap explains a
    little of its service, but a short tau makes every request that queued (its worker warm)
    fast and every one that found the worker idle slow — img-dnn's fit took 3 ms, F 0.53, so
    its model served queued requests ~10 % faster than idle arrivals where the app served
    them 3 % faster, and at 70 % load the synthetic workload queued 14 / 26 / 32 % less (mean
    / p95 / p99) than the app with the same mean service. When the points' mean coldness
    spreads less than
    ``cold_min_spread`` (loads too alike to tell) the per-request F is kept (``method:
    "requests"``). F < 0 (faster when cold) is set to 0: no cold term; F is capped at
    ``cold_max_extra``. The result holds the winning tau's warmth per measured request
    (``warmth``, not JSON). ``series`` is :func:`_series` of the points' records;
    ``pause_ns``: requests at least this slow were hit by a stop-the-world pause (the replay
    leaves them to the pause model).
    """
    k, s = _served(series)
    keep = (s > 0) & (s <= np.quantile(s, 1 - current().cold_regression_trim))
    y = s[keep]
    tried = {}
    warmth = {}  # per tau, every measured request's (a loop per request: computed once)
    best = None
    for tau in current().cold_taus_ns:
        w = warmth[tau] = _warmth_at(series, tau)
        x = 1.0 - w[keep]
        a = np.vstack([np.ones_like(x), x]).T
        (base, slope), *_ = np.linalg.lstsq(a, y, rcond=None)
        resid = y - a @ np.array([base, slope])
        r2 = 1.0 - float((resid**2).sum() / ((y - y.mean()) ** 2).sum())
        extra = max(float(slope / base), 0.0) if base > 0 else 0.0
        tried[str(int(tau))] = {"extra": extra, "r2": r2}
        if best is None or r2 > best["r2"]:
            best = {"extra": extra, "tau_ns": tau, "r2": r2, "warmth": w}
    assert best is not None
    best["tau_method"] = "r2"
    mk = s > 0
    if recs is not None:
        sim = _simulated_taus(recs, warmth, k, s, mk, tried, pause_ns)
        if sim is not None:
            r2 = tried[str(int(sim["tau_ns"]))]["r2"]
            best = {**sim, "r2": r2, "tau_method": "simulated"}
    best["extra"] = best["extra_requests"] = tried[str(int(best["tau_ns"]))]["extra"]
    best["method"] = "requests"
    _means_extra(best, k[mk], s[mk], 1.0 - best["warmth"][mk])
    return {**best, "tried": tried}


def _means_keep(s: np.ndarray) -> np.ndarray:
    """The requests the point means are taken over (see ``cold_means_trim``)."""
    return (s > 0) & (s <= np.quantile(s, 1 - current().cold_means_trim))


def _means_extra(best: dict[str, Any], kk: np.ndarray, y: np.ndarray, x: np.ndarray) -> None:
    """F from the points' means (see :func:`fit_cold`); sets ``extra``, ``power``, ``method``
    and ``point_means`` in ``best`` when the points spread enough to tell. ``kk``: each
    measured request's point; ``y``: its service time; ``x``: its coldness (1 - warmth).

    A request that starts at coldness x takes d (1 + F x^p), d its warm time, drawn alike at
    every load: so each point's mean service is D + F · mean(d x^p) over its requests, a line
    whose slope is F itself. d is not measured: it is y / (1 + F x^p) at the F being fitted,
    found by iterating from F = 0 (:func:`_warm_line`). Two shortcuts this replaces were
    biased. A line through (mean x^p, mean service) with F = slope / intercept assumes a
    request's warm time does not vary with its coldness; but a slow kind of request (synth's
    ``periodic=``, a checkpoint) warms the worker, so the requests after it are warm and
    fast, and it itself finds the worker colder than most: on synth with F 0.5 and a 3 ms
    request every 50th that line found F 0.37. And leaving out the slowest requests as
    measured, across all the loads, takes the coldest of the slow kind, most of them from the
    lightest load, which flattens the line (F 0.32 on the same runs): each point now leaves
    out its own slowest few.

    The apps' mean service does not fall in a line with their coldness: it drops from the
    lightest load to the middle one and then hardly moves (translate 922, 826, 825 µs at 20,
    50 and 70 %; oltp-disk 267, 248, 253), so a line through three loads misses the middle
    one by about 3 % and the outer ones by 1–2 % the other way — and at 70 % load 2 % less
    service is about 8 % less queueing. With three or more points whose line misses one by
    ``cold_power_min_miss`` (and three standard errors: few requests, noisy means), the
    factor becomes 1 + F (1 - w)^p (synth's ``power=``) with the p of ``cold_powers`` whose
    line misses least, if that halves the worst miss; each point's ``fitted_ns`` is the
    model's mean."""
    groups = [kk == p for p in np.unique(kk)]  # each point's requests, found once
    xm = np.array([x[g].mean() for g in groups])
    if len(groups) < MIN_TO_COMPARE or float(xm.max() - xm.min()) < current().cold_min_spread:
        return
    power = 1.0
    base, extra, fitted, ym = _warm_line(groups, y, x, 1.0)
    miss = float(np.max(np.abs(fitted / ym - 1)))
    se = max(float(y[g].std() / math.sqrt(g.sum())) / m for g, m in zip(groups, ym, strict=True))
    cfg = current()
    if len(groups) >= cfg.cold_power_min_loads and miss >= max(
        cfg.cold_power_min_miss, cfg.cold_power_min_se * se
    ):
        fits = []
        for p in cfg.cold_powers[1:]:
            b, e, f, m = _warm_line(groups, y, x, p)
            fits.append((float(np.max(np.abs(f / m - 1))), p, b, e, f, m))
        m_p, p, b, e, f, m = min(fits, key=lambda t: t[0])
        if m_p <= miss / 2 and b > 0 and e >= 0:
            power, base, extra, fitted, ym = p, b, e, f, m
    if base > 0:
        best["extra"] = min(max(extra, 0.0), cfg.cold_max_extra)
        best["power"] = power
        best["method"] = "point means"
        best["point_means"] = [
            {"coldness": float(c), "service_ns": float(v), "fitted_ns": float(f)}
            for c, v, f in zip(xm, ym, fitted, strict=True)
        ]


def _warm_line(groups, y: np.ndarray, x: np.ndarray, power: float):
    """(D, F, each point's fitted mean, each point's mean service) of the line mean service =
    D + F · mean(d x^p) through the points (see :func:`_means_extra`), d = y / (1 + F x^p)
    iterated to a fixed point from F = 0. Each point leaves out its own slowest
    ``cold_means_trim`` of requests (rare stop-the-world pauses), the same share at every load:
    a share of all the points' requests together comes mostly from one load (the coldest
    requests of the slow kind, at the lightest), and one chosen by warm time moves with F
    (the coldest again, whenever F is under the truth: it pulled F down to 0.27 for a true 0.5)."""
    cfg = current()
    xp = x**power
    keep = [g & (y > 0) & (y <= np.quantile(y[g], 1 - cfg.cold_means_trim)) for g in groups]
    ym = np.array([y[g].mean() for g in keep])
    extra, base = 0.0, 0.0
    fitted = ym
    for _ in range(cfg.cold_means_rounds):
        d = y / (1.0 + extra * xp)
        xw = np.array([(d * xp)[g].mean() for g in keep])
        a = np.vstack([np.ones_like(xw), xw]).T
        (base, slope), *_ = np.linalg.lstsq(a, ym, rcond=None)
        fitted = a @ np.array([base, slope])
        done = abs(float(slope) - extra) < cfg.cold_means_tolerance
        extra = max(float(slope), 0.0)
        if done:
            break
    return float(base), extra, fitted, ym


def _cold_factor(cold: dict[str, Any], w):
    """Synth's cold-start factor 1 + F (1 - w)^p at warmth ``w`` (a number or an array)."""
    return 1.0 + cold["extra"] * (1.0 - w) ** cold.get("power", 1.0)


def _cold_queue(
    arrivals: np.ndarray, draws: np.ndarray, extra: float, tau_ns: float, power: float = 1.0
) -> np.ndarray:
    """Sojourns of one worker serving ``draws`` (warm service times) FCFS at ``arrivals`` under
    synth's ``cold=extra,tau=tau_ns,power=power``: a request that starts at warmth w takes
    draw × (1 + extra (1 - w)^power); the worker starts cold, as synth's does at every run's
    start."""
    out = np.empty(len(arrivals))
    free, last, w = -math.inf, None, 0.0
    for i, (a, d) in enumerate(zip(arrivals.tolist(), draws.tolist(), strict=True)):
        start = a if a > free else free
        if last is not None:
            w *= math.exp(-(start - last) / tau_ns)
        sv = d * (1.0 + extra * (1.0 - w) ** power)
        w = 1.0 - (1.0 - w) * math.exp(-sv / tau_ns)
        free = last = start + sv
        out[i] = free - a
    return out


def _simulated_taus(recs, warmth, k, s, keep, tried, pause_ns) -> dict[str, Any] | None:
    """The tau whose cold-start model queues most like the app.

    For each tau: F from the points' means (as :func:`fit_cold`), every measured service time
    divided by its factor (what it would have taken warm), and the model — draws from those
    warm times, slowed by the cold term — replayed through one FCFS worker at each point's
    own intended send times (up to ``cold_sim_max_requests`` per point, whole runs). Its
    mean / p95 / p99 sojourn per point is compared with the app's own service times replayed
    in their order (:func:`_in_order`: the app's queue, less the harness). The order matters:
    shuffled, a load's service times lose the very thing that tells the taus apart — whether
    the requests that queued (worker warm) were faster than those that found it idle. The
    tau with the least mean |relative error| over the points and the three statistics wins —
    of those within ``cold_sim_tie`` of it (replays are draws too), the one with the best R²;
    every tau's error is in ``tried[tau]["sim_error"]``.
    None when the records lack send times or have several workers (a shared queue's warmth
    is per worker; the R² choice stands)."""
    runs, target = [], []  # per point: [(send times, measured mask)]; the app's statistics
    for _, dfs in recs:
        got, soj, n = [], [], 0
        for df in dfs:
            if "intended" not in df or df["worker"].nunique() > 1:
                return None
            if n >= current().cold_sim_max_requests:
                break
            a, s_ordered, m = _by_send_time(df)
            if pause_ns:
                # The app's queue without its pauses (the model's draws have none): a request
                # a pause hit serves the median of the others.
                hit = s_ordered >= pause_ns
                s_ordered = np.where(hit, np.median(s_ordered[~hit]), s_ordered)
                soj.append(_fcfs(a, s_ordered, 1)[m])
            else:
                soj.append(_in_order(df, a, s_ordered, m, 1))
            got.append((a, m))
            n += len(a)
        runs.append(got)
        target.append(_stats3(np.concatenate(soj)))
    y = s[keep]
    for tau in current().cold_taus_ns:
        w = warmth[tau]
        trial: dict[str, Any] = {"extra": tried[str(int(tau))]["extra"]}
        _means_extra(trial, k[keep], y, 1.0 - w[keep])
        extra, power = trial["extra"], trial.get("power", 1.0)
        tried[str(int(tau))]["power"] = power
        # Stop-the-world pauses are the pause model's, here and in the app's replay above:
        # drawn at random as service times they would queue like no app does (middleware's
        # replays erred 600–1 100 %).
        warm = (s / _cold_factor(trial, w))[(s > 0) & (s < (pause_ns or math.inf))]
        draw = np.random.default_rng(1)
        errs = []
        for i, got in enumerate(runs):
            soj = [_cold_queue(a, draw.choice(warm, len(a)), extra, tau, power)[m] for a, m in got]
            errs.extend(np.abs(_stats3(np.concatenate(soj)) / target[i] - 1).tolist())
        tried[str(int(tau))]["sim_error"] = float(np.mean(errs))
    # Replays are draws too: taus within cold_sim_tie of the best are as good, and among
    # them the per-request evidence (R²) decides.
    least = min(v["sim_error"] for v in tried.values())
    bound = least * (1 + current().cold_sim_tie) + current().cold_sim_tie_points
    tie = [t for t in current().cold_taus_ns if tried[str(int(t))]["sim_error"] <= bound]
    tau = max(tie, key=lambda t: tried[str(int(t))]["r2"])
    return {
        "tau_ns": tau,
        "warmth": warmth[tau],
        "sim_error": tried[str(int(tau))]["sim_error"],
        # The taus as good as the choice: the fit's interval for tau on its grid.
        "tau_tie_ns": tie,
    }


def _cold_setting(c: dict[str, Any]) -> str:
    p = c.get("power", 1.0)
    return f"{c['extra']:.4g},tau={duration_spec(c['tau_ns'])}" + (
        f",power={p:g}" if p != 1 else ""
    )
