"""The rules of TailBench's items (Kasture & Sanchez, IISWC 2016): Table 1, Figs. 2–4 and 8; the
configuration figures (5–7: integrated against loopback) are in :mod:`.tailbench_configs`."""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from ...units import fmt_ns
from ..items import Data
from ..judge import Estimate, compare
from ..verdict import (
    Cond,
    Verdict,
    apps_of,
    at_least,
    bars,
    fig_plan,
    finite_or,
    ideal_fig_plan,
    ideal_rows,
    load_name,
    make_verdict,
    mult,
    no_data,
    ok_mark,
    ratio_of,
    resolve_text,
    value,
    within_factor,
)
from .registry import rule

# Table I: a p95 within 3x of the paper's counts as "the same order" — our engines, data and
# CPUs differ from TailBench's (masstree vs a B+ tree, xapian vs tantivy, 2016 Xeons vs a VM),
# so only the scale, not the value, is comparable.
TABLE1_FACTOR = 3.0


# ... confirmed when 6 of the 8 apps are within that factor, partly from 3.
TABLE1_CONFIRM, TABLE1_PARTLY = 6, 3


# Fig. 2: the paper's service times span from ~100 us to ~1 s; two decades across our apps
# is the least that still shows "widely different scales".
FIG2_SPAN = 100.0


# ... and "different spread": one app's p99/p50 at least twice another's.
FIG2_SPREAD = 2.0


# Fig. 3: the tail judged is the p95, the percentile the paper's discussion of Figs. 3–4 reads
# (its Fig. 4 plots only the p95), taken from each point's estimate over its repeated runs (the
# CI loop's). At the lightest load a point of a ~50 µs app holds ~10 000 requests and its p99
# is their 100 slowest: a few preemptions of the worker on a shared host move it by several
# times, and flipped this verdict on runs that were otherwise alike; the p95 needs five times
# as many outliers to move. The p99 is shown beside it, not judged.
FIG3_TAIL = "p95"


# ... and "tail latencies increase much more rapidly than the mean" is read in the figure's
# own terms, the rise in µs from the lightest load to the heaviest: the tail's rise at least
# twice the mean's. An ideal FIFO queue from ρ 0.2 to 0.8 gives 3.0 (exponential service),
# 3.1 (constant) and 3.9 (log-normal, cv 2), while its p95/mean hardly moves for exponential
# or log-normal service (3.0 → 3.0, 3.8 → 3.9): a rule on the ratio would fail the ideal.
FIG3_FASTER = 2.0


# Fig. 4: scaling from 1 to 2 threads by at least 1.5x is clearly better than sub-linear
# (perfect is 2x; TailBench's kv and search are near-linear).
FIG4_SCALES = 1.5


# Fig. 8: measured p95 within 1.25x of the M/G/n replay of the same service times counts as
# "the model predicts it"; only below 0.8 of saturation, where the paper's model holds too
# (near saturation both curves turn vertical and any ratio is noise).
FIG8_CLOSE, FIG8_BELOW = 1.25, 0.8


def _threads_of_tag(tag: str) -> int | None:
    m = re.match(r"^[^-]+-t(\d+)-", tag)
    return int(m.group(1)) if m else None


def _table1_status(conds: list[Cond]) -> tuple[str, int]:
    """Table I's status from how many apps are within TABLE1_FACTOR (TABLE1_CONFIRM,
    TABLE1_PARTLY), and that count: inconclusive when the unresolved apps could move it
    across a bound."""

    def status(within: int) -> str:
        if within >= TABLE1_CONFIRM:
            return "confirmed"
        return "partly" if within >= TABLE1_PARTLY else "not confirmed"

    within = sum(c.ok is True for c in conds)
    most = within + sum(c.unresolved for c in conds)
    return (status(within) if status(within) == status(most) else "inconclusive"), within


@rule
def tailbench_table1(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Sojourn p95 at the light load per app vs Table I's: within TABLE1_FACTOR."""
    paper = item.get("paper_p95_ms") or {}
    names = item.get("paper_apps") or {}
    apps = apps_of(data)
    if not apps:
        return no_data(data, "app results")
    nums: dict[str, Any] = {}
    conds = []
    for app, want in paper.items():
        ours = math.nan
        check = compare(Estimate(math.nan), "factor", TABLE1_FACTOR)
        if app in apps:
            light = apps[app].sort_values("qps").iloc[0]
            ours = value(light, "sojourn", "p95") / 1e6
            est = data.judge.quantile(light, "sojourn", "p95").scaled(1 / (want * 1e6))
            check = compare(est, "factor", TABLE1_FACTOR, fmt=mult)
        ratio = ratio_of(ours, want)
        conds.append(Cond.judged(f"{app} within {TABLE1_FACTOR:g}× of Table I's", check))
        nums[app] = {"ours_p95_ms": ours, "paper_p95_ms": want, "ratio": ratio, "within": check.ok}
    status, within = _table1_status(conds)
    listed = ", ".join(
        f"{a} {mult(v['ratio'], 2)}" for a, v in nums.items() if math.isfinite(v["ratio"])
    )
    sentence = (
        f"{within} of {len(paper)} apps have a light-load p95 within {TABLE1_FACTOR:g}× of "
        f"Table I's (ours ÷ paper: {listed})"
    )
    absent = [a for a, v in nums.items() if not math.isfinite(v["ratio"])]
    if absent:
        sentence += "; no data for " + ", ".join(absent)
    open_ = [resolve_text(c) for c in conds if c.unresolved]
    if open_:
        sentence += "; unresolved by its runs: " + ", ".join(open_)
    rows = [
        [
            a,
            str(names.get(a, "")),
            fmt_ns(v["ours_p95_ms"] * 1e6),
            fmt_ns(v["paper_p95_ms"] * 1e6),
            mult(v["ratio"]),
            ok_mark(v["within"]),
        ]
        for a, v in nums.items()
    ]
    seen = [a for a in nums if math.isfinite(nums[a]["ours_p95_ms"])]
    series = {
        "ours": [nums[a]["ours_p95_ms"] for a in seen],
        "TailBench Table I": [paper[a] for a in seen],
    }
    return Verdict(
        status,
        sentence,
        {"apps": nums, "within": within, "of": len(paper)},
        conds=conds,
        heads=["app", "TailBench app", "our p95", "paper's p95", "ours ÷ paper", "within"],
        rows=rows,
        paper=(
            ["app", "TailBench app", "p95 at the lowest load (Table I)"],
            [[a, str(names.get(a, "")), fmt_ns(v * 1e6)] for a, v in paper.items()],
        ),
        figures=[
            (
                "p95_vs_paper",
                "Sojourn p95 at the light load, ours beside Table I's (log scale).",
                lambda o: bars(o, seen, series, "p95 (ms, log scale)", "p95 at a light load"),
            )
        ],
    )


def _fig2_span(vals: list[float]) -> float:
    """The largest of positive finite values ÷ the smallest (NaN with fewer than two)."""
    v = [x for x in vals if math.isfinite(x) and x > 0]
    return max(v) / min(v) if len(v) > 1 else math.nan


def _spread(v) -> float:
    """A point's service p99 ÷ p50 (a :class:`View`'s)."""
    return ratio_of(v.stat("service", "p99"), v.stat("service", "p50"))


@rule
def tailbench_fig2(item: dict, data: Data, reuse: Data | None) -> Verdict:
    """Service p50 span across apps and p99/p50 spread per app (the reused Table I runs)."""
    src = reuse if reuse is not None else data
    apps = apps_of(src)
    if not apps:
        return no_data(src, "app results")
    nums, light = {}, []
    for app, pts in apps.items():
        p = pts.sort_values("qps").iloc[0]
        light.append(p)
        p50, p99 = value(p, "service", "p50"), value(p, "service", "p99")
        nums[app] = {"service_p50_ns": p50, "service_p99_ns": p99, "spread": ratio_of(p99, p50)}
    span = _fig2_span([v["service_p50_ns"] for v in nums.values()])
    spread_ratio = _fig2_span([v["spread"] for v in nums.values()])
    judge = src.judge

    def spans(stat):
        return lambda *vs: _fig2_span([stat(v) for v in vs])

    conds = [
        Cond.judged(
            f"p50s span ≥ {FIG2_SPAN:g}×",
            judge.check(light, spans(lambda v: v.stat("service", "p50")), ">=", FIG2_SPAN, mult),
        ),
        Cond.judged(
            f"spreads differ ≥ {FIG2_SPREAD:g}×",
            judge.check(light, spans(_spread), ">=", FIG2_SPREAD, mult),
        ),
    ]
    lo = min(nums, key=lambda a: finite_or(nums[a]["service_p50_ns"], math.inf))
    hi = max(nums, key=lambda a: finite_or(nums[a]["service_p50_ns"]))
    wide = max(nums, key=lambda a: finite_or(nums[a]["spread"]))
    narrow = min(nums, key=lambda a: finite_or(nums[a]["spread"], math.inf))
    body = (
        f"service p50 spans {mult(span)} across {len(nums)} apps "
        f"({lo} {fmt_ns(nums[lo]['service_p50_ns'])} to "
        f"{hi} {fmt_ns(nums[hi]['service_p50_ns'])}); "
        "p99/p50 ranges from "
        f"{mult(nums[narrow]['spread'])} ({narrow}) to {mult(nums[wide]['spread'])} ({wide})"
    )
    rows = [
        [a, fmt_ns(v["service_p50_ns"]), fmt_ns(v["service_p99_ns"]), mult(v["spread"])]
        for a, v in sorted(nums.items(), key=lambda t: t[1]["service_p50_ns"])
    ]
    return make_verdict(
        conds,
        body,
        {"apps": nums, "p50_span": span, "spread_ratio": spread_ratio},
        heads=["app", "service p50", "service p99", "p99 ÷ p50"],
        rows=rows,
        figures=[
            (
                "service_cdf",
                "Service-time CDF per app at the light load of Table I (TailBench Fig. 2).",
                lambda o: fig_plan("service_cdf", src.combined(), o),
            )
        ],
    )


def _rise_over_mean(lo, hi) -> float:
    """The tail's rise (FIG3_TAIL) from ``lo``'s load to ``hi``'s ÷ the mean's (views of the
    two points; NaN where the mean does not rise)."""
    t = FIG3_TAIL
    d_mean = hi.stat("sojourn", "mean") - lo.stat("sojourn", "mean")
    if not d_mean > 0:
        return math.nan
    return ratio_of(hi.stat("sojourn", t) - lo.stat("sojourn", t), d_mean)


def _ends(pts: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The lowest- and highest-load points (by planned fraction, else offered rate)."""
    key = "load_frac" if pts["load_frac"].notna().all() else "qps"
    s = pts.sort_values(key)
    return s.iloc[0], s.iloc[-1]


def _fig3_app(data: Data, app: str, pts: pd.DataFrame) -> tuple:
    """One app of Fig. 3: its numbers, its condition (the tail's rise against the mean's),
    its parts of the sentence and its table row."""
    t = FIG3_TAIL
    lo, hi = _ends(pts)

    def over_mean(p: pd.Series, stat: str) -> float:
        return ratio_of(value(p, "sojourn", stat), value(p, "sojourn", "mean"))

    r_lo, r_hi = over_mean(lo, t), over_mean(hi, t)
    r99_lo, r99_hi = over_mean(lo, "p99"), over_mean(hi, "p99")
    g_tail = ratio_of(value(hi, "sojourn", t), value(lo, "sojourn", t))
    gmean = ratio_of(value(hi, "sojourn", "mean"), value(lo, "sojourn", "mean"))
    d_mean = value(hi, "sojourn", "mean") - value(lo, "sojourn", "mean")
    faster = ratio_of(value(hi, "sojourn", t) - value(lo, "sojourn", t), d_mean)
    check = data.judge.check([lo, hi], _rise_over_mean, ">=", FIG3_FASTER, fmt=mult)
    ok = check.ok
    cond = Cond.judged(f"{app}'s {t} rises ≥ {FIG3_FASTER:g}× as much as its mean", check)
    nums = {
        "low": load_name(lo),
        "high": load_name(hi),
        f"{t}_over_mean_low": r_lo,
        f"{t}_over_mean_high": r_hi,
        f"{t}_growth": g_tail,
        f"{t}_rise_over_mean_rise": faster,
        "p99_over_mean_low": r99_lo,
        "p99_over_mean_high": r99_hi,
        "mean_growth": gmean,
        "runs_low": int(lo.get("runs", 0) or 0),
        "runs_high": int(hi.get("runs", 0) or 0),
    }
    part = (
        f"{app} {mult(faster, 2)} as much as its mean ({t}/mean from {mult(r_lo, 2)} at "
        f"{load_name(lo)} to {mult(r_hi, 2)} at {load_name(hi)})"
    )
    p99_part = f"{app} {mult(r99_lo, 2)} → {mult(r99_hi, 2)}"
    row = [
        app,
        load_name(lo),
        load_name(hi),
        mult(r_lo),
        mult(r_hi),
        mult(g_tail),
        mult(gmean),
        f"{mult(r99_lo)} → {mult(r99_hi)}",
        f"{mult(faster)} {ok_mark(ok)}",
    ]
    return nums, cond, part, p99_part, row


@rule
def tailbench_fig3(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Per app: the tail's rise (FIG3_TAIL, lowest load to highest) at least FIG3_FASTER times
    the mean's; tail/mean at both ends and the p99's ratios reported beside, not judged."""
    apps = apps_of(data)
    if not apps:
        return no_data(data, "results")
    t = FIG3_TAIL
    nums, conds, parts, p99_parts, rows = {}, [], [], [], []
    for app, pts in apps.items():
        nums[app], cond, part, p99_part, row = _fig3_app(data, app, pts)
        conds.append(cond)
        parts.append(part)
        p99_parts.append(p99_part)
        rows.append(row)
    return make_verdict(
        conds,
        f"{t} rises from the lightest load to the heaviest: "
        + "; ".join(parts)
        + f" (p99/mean, not judged: {', '.join(p99_parts)})",
        {"apps": nums, "tail": t},
        heads=[
            "app",
            "low",
            "high",
            f"{t}/mean low",
            f"{t}/mean high",
            f"{t} growth",
            "mean growth",
            "p99/mean (not judged)",
            f"{t} rise ÷ mean rise",
        ],
        rows=rows,
        figures=[
            (
                "latency_vs_load",
                "Sojourn mean, p95 and p99 vs offered load, one panel per app (TailBench Fig. 3).",
                lambda o: fig_plan("latency_vs_load", data.combined(), o),
            )
        ],
    )


def _host_cpus(data: Data) -> int | None:
    c = data.host.get("cores")
    return int(c) if isinstance(c, (int, float)) and not isinstance(c, bool) else None


@rule
def tailbench_fig4(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Per app: saturation rate at the most threads ÷ at one thread."""
    sat: dict[str, dict[int, float]] = {}
    for stem, docs in data.saturation.items():
        pts = data.of(stem)
        app = str(pts["app"].iloc[0]) if len(pts) else stem
        for tag, doc in docs.items():
            t = _threads_of_tag(tag)
            if t is not None:
                sat.setdefault(app, {})[t] = float(doc["qps"])
    if not sat:
        return no_data(data, "saturation searches")
    nums = {}
    for app, by in sat.items():
        top = max(by)
        nums[app] = {
            "saturation_qps": {str(t): q for t, q in sorted(by.items())},
            "threads": top,
            "scaling": ratio_of(by[top], by[1]) if 1 in by and top > 1 else math.nan,
        }
    sc = {a: v["scaling"] for a, v in nums.items()}
    fast, slow = ("kv", "search"), ("oltp-mem", "translate")
    scales = [at_least(sc.get(a, math.nan), FIG4_SCALES) for a in fast]
    # Without a scaling app, "the others scale less" is empty: that one decides.
    known = [x for x in scales if x is not None]
    conds = [Cond("kv or search scales", any(known) if known else None, True)]
    conds += [Cond(f"{a} ≥ {FIG4_SCALES:g}×", ok) for a, ok in zip(fast, scales, strict=True)]
    floor = min((finite_or(sc.get(a, math.nan), math.inf) for a in fast), default=math.inf)
    for a in slow:
        v = sc.get(a, math.nan)
        ok = None if not (math.isfinite(v) and math.isfinite(floor)) else bool(v < floor)
        conds.append(Cond(f"{a} below kv and search", ok))
    threads = max((v["threads"] for v in nums.values()), default=1)
    cpus = _host_cpus(data)
    body = f"scaling 1→{threads} threads: " + ", ".join(f"{a} {mult(v, 3)}" for a, v in sc.items())
    if cpus and threads >= cpus:
        body += f" (this host has {cpus} CPUs: scaling stops at {threads} threads)"
    rows = [
        [
            a,
            ", ".join(f"{t} thr: {q:,.0f}" for t, q in v["saturation_qps"].items()),
            mult(v["scaling"]),
        ]
        for a, v in nums.items()
    ]
    return make_verdict(
        conds,
        body,
        {"apps": nums, "host_cpus": cpus},
        heads=["app", "saturation QPS", f"scaling 1→{threads}"],
        rows=rows,
        figures=[
            (
                "scaling",
                f"Saturation rate at {threads} threads ÷ at 1 thread per app; the dashed line is "
                "linear scaling.",
                lambda o: bars(
                    o,
                    list(sc),
                    {"measured": list(sc.values())},
                    f"saturation rate, {threads} threads ÷ 1 thread",
                    "Thread scaling",
                    log=False,
                    hlines=[(float(threads), "linear")],
                ),
            ),
            (
                "thread_scaling",
                "Sojourn p95 vs load, one line per thread count (TailBench Fig. 4).",
                lambda o: fig_plan("thread_scaling", data.combined(), o),
            ),
        ],
    )


def to_ideal_p95(v) -> float:
    """A point's measured ÷ ideal p95 (each run's own, averaged over the view's runs)."""
    return v.number("ideal", "ratio", "p95")


@rule
def tailbench_fig8(item: dict, data: Data, _reuse: Data | None) -> Verdict:
    """Per app and thread count: measured ÷ ideal (M/G/n replay) p95 at each load."""
    ip = ideal_rows(data)
    if ip.empty:
        return no_data(data, "runs with an ideal (summary.json 'ideal')")
    ip = ip.sort_values(["app", "threads", "qps"])
    nums: dict[str, Any] = {}
    conds, rows = [], []
    for _, p in ip.iterrows():
        app, thr, frac, r = str(p["app"]), int(p["threads"]), p["load_frac"], p["ratio_p95"]
        nums.setdefault(app, {}).setdefault(str(thr), {})[load_name(p)] = r
        close = within_factor(r, FIG8_CLOSE)
        if app == "kv" and math.isfinite(frac) and frac < FIG8_BELOW:
            check = data.judge.check([p], to_ideal_p95, "factor", FIG8_CLOSE, fmt=mult)
            close = check.ok
            conds.append(
                Cond.judged(f"kv {thr} thr at {load_name(p)} within {FIG8_CLOSE:g}×", check)
            )
        rows.append(
            [
                app,
                str(thr),
                load_name(p),
                fmt_ns(value(p, "sojourn", "p95")),
                fmt_ns(p["ideal_p95"]),
                mult(r),
                ok_mark(close),
            ]
        )
    if not conds:
        conds = [Cond(f"kv below {FIG8_BELOW:.0%} of saturation", None)]
    body = "measured ÷ M/G/n p95: " + "; ".join(
        f"{a} {t} thr " + ", ".join(f"{mult(v, 2)} at {load}" for load, v in by.items())
        for a, per in nums.items()
        for t, by in per.items()
    )
    return make_verdict(
        conds,
        body,
        {"ratio_p95": nums},
        heads=[
            "app",
            "threads",
            "load",
            "measured p95",
            "ideal p95",
            "measured ÷ ideal",
            f"within {FIG8_CLOSE:g}×",
        ],
        rows=rows,
        figures=[
            (
                "normalized_p95",
                "p95 normalized to the lowest-load latency, measured (solid) vs the M/G/n ideal "
                "replay of the same service times (dashed), per thread count (TailBench Fig. 8).",
                lambda o: ideal_fig_plan(
                    "latency_vs_load_ideal", data.combined(), o, stat="p95", normalize=True
                ),
            )
        ],
    )
