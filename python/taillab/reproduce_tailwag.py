"""The rules of three ``taillab reproduce`` items that read more than a point's latency:
TailWAG's three case studies (Fig. 9), its real-time throttling (Fig. 3) and the profiling
report's resource table (Table II). Registered in :data:`taillab.reproduce.RULES`; each is
``(item, data, reuse) -> Verdict`` like the others there, built from
:mod:`taillab.reproduce_verdict`, and every threshold is a named constant below with the
reason for its value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from . import figures as F
from .reproduce_verdict import (
    Cond,
    Verdict,
    _apps,
    _by_axis,
    _div,
    _ge,
    _in_unit,
    _less,
    _no_data,
    _verdict,
    _with_ideal,
    _x,
    bars,
    value,
)
from .resources import resource_table
from .results import read_summary
from .units import fmt_bytes, fmt_ns

# --- TailWAG Fig. 9: the three case studies ------------------------------------------------------
# The experiment files of configs/tailwag/, by the folder the item writes each to, and their
# [[case]] names.
TW9_DNN = "tailwag-img-dnn-scaled"
TW9_NOISE = "tailwag-noise-placement"
TW9_GC = "tailwag-middleware-gc"
TW9_CASES = {
    TW9_DNN: ("img-dnn as measured", "1.7x faster", "70x faster"),
    TW9_NOISE: ("none", "mix", "sep", "accelerator"),
    TW9_GC: ("no pauses", "G1 pauses", "Parallel pauses"),
}
# (a) A model 1.7x faster saturates at least 1.5x higher: the harness's own cost per request
# (a few µs) is small beside a 230 µs request, so most of the speed-up must show.
TW9A_SAT = 1.5
# ... and it "moves into a realm where µs-scale disturbances matter": at 50 % of its own
# saturation the 70x faster model's p99 is at least 1.25x further above its ideal queue (the
# replay of its own arrivals and service times) than the model as measured is — the same
# wake-ups and dispatch delays weigh 70 times more against a 6 µs request.
TW9A_LOAD, TW9A_DISTURB = 0.5, 1.25
# (b) Interrupt noise on the worker's CPU (a tenth of it) raises the p95 (the paper's Figs. 7
# and 9 plot the 95th) at the highest load by at least 10 % over no noise; an accelerator
# "bridges much of the gap" when it takes back at least half of the difference.
TW9B_HURT, TW9B_BRIDGE = 1.10, 0.5
# (c) At the lightest load, where the pauses rather than the queue set the tail: G1's pauses
# at least double the p99 of the workload without pauses; the collector with the longer, more
# frequent pauses (Parallel) has the longer p99; a pause delays a few % of the requests, so
# the median stays within 20 % of the one without pauses.
TW9C_PAUSE, TW9C_MEDIAN = 2.0, 1.2

# --- TailWAG Fig. 3: real-time throttling --------------------------------------------------------
# The kernel's default lets real-time threads run 950 ms of each 1 s period and stops them for
# the other 50 ms: a SCHED_FIFO worker that spins stalls 50 ms a second. At least half of that
# (25 ms of stalls over 1 ms per second measured) is the throttling showing; with the limit off
# (-1) at most a fifth of what the limit caused is left, and the p99.9 is at most half the
# limit's ("eliminates most of the latency spikes").
TW3_LIMIT, TW3_OFF = "limit 95 %", "no limit (-1)"
TW3_STALL_MS, TW3_LEFT, TW3_TAIL = 25.0, 0.2, 0.5

# --- Profiling report Table II: resource use per app ---------------------------------------------
# The report calls img-dnn, moses, sphinx and xapian CPU intensive (99 % of a CPU) and
# masstree, specjbb, shore and silo memory intensive (huge RSS). Read in our terms: the
# memory-intensive apps' median peak RSS above the CPU-intensive apps' median, and the
# CPU-intensive apps' median CPU time per request above the memory-intensive apps'. The RSS
# ranks across the apps (Spearman's rho against the report's) are shown beside, not judged:
# our engines and data sets are not theirs, only the division is comparable.
T2_CPU_APPS = ("img-dnn", "translate", "speech", "search")
T2_MEM_APPS = ("kv", "middleware", "oltp-disk", "oltp-mem")
# Table II's columns as items.toml gives them, and ours.
T2_COLUMNS = ("cpu_pct", "rss_kb", "minflt", "majflt", "vol_cs", "invol_cs")
_T2_HEADS = ["minor faults", "major faults", "voluntary cs", "involuntary cs"]


@dataclass
class _Study:
    """One case study's part of the Fig. 9 verdict."""

    nums: dict[str, Any] = field(default_factory=dict)
    conds: list[Cond] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    tail: dict[str, float] = field(default_factory=dict)
    text: str = ""


def _at(pts: pd.DataFrame, case: str, qps: float | None = None) -> pd.DataFrame:
    """The points of one [[case]] (at one rate), by rate."""
    p = pts[pts["axis_case"].astype(str) == case]
    if qps is not None:
        p = p[p["qps"] == qps]
    return p.sort_values("qps")


def _get(d: dict, *path: str) -> float:
    """The number at ``d[path[0]][path[1]]…`` (NaN where there is none)."""
    for k in path:
        d = d.get(k, {}) if isinstance(d, dict) else {}
    return float(d) if isinstance(d, (int, float)) else math.nan


def _dnn(pts: pd.DataFrame) -> _Study:
    """(a): each model's saturation rate and, at TW9A_LOAD of it, its p99 and p99 ÷ ideal."""
    base, fast, fastest = TW9_CASES[TW9_DNN]
    s = _Study()
    for case in TW9_CASES[TW9_DNN]:
        c = _at(pts, case)
        if c.empty:
            continue
        near = np.abs(c["load_frac"].fillna(-1.0).to_numpy() - TW9A_LOAD)
        mid = c.iloc[int(np.argmin(near))]
        s.nums[case] = {
            "sat_qps": float(c["sat_qps"].iloc[0]),
            "p99_ns": value(mid, "sojourn", "p99"),
            "ratio_p99": float(mid.get("ratio_p99", math.nan)),
        }
    for case, v in s.nums.items():
        v["sat_vs_measured"] = _div(v["sat_qps"], _get(s.nums, base, "sat_qps"))
        s.tail[case] = v["p99_ns"]
        s.rows.append(
            [
                "(a) img-dnn",
                case,
                f"{v['sat_qps']:,.0f} QPS saturation ({_x(v['sat_vs_measured'])})",
                f"p99 {fmt_ns(v['p99_ns'])}",
                f"{_x(v['ratio_p99'])} its ideal",
            ]
        )
    disturb = _div(_get(s.nums, fastest, "ratio_p99"), _get(s.nums, base, "ratio_p99"))
    s.nums["disturbance"] = disturb
    sat = _get(s.nums, fast, "sat_vs_measured")
    s.conds = [
        Cond(f"{fast} saturates ≥ {TW9A_SAT:g}× higher", _ge(sat, TW9A_SAT), True),
        Cond(
            f"{fastest}: p99 ÷ ideal ≥ {TW9A_DISTURB:g}× the measured model's",
            _ge(disturb, TW9A_DISTURB),
        ),
    ]
    s.text = (
        f"(a) img-dnn 1.7x faster saturates {_x(sat)} higher, 70x faster "
        f"{_x(_get(s.nums, fastest, 'sat_vs_measured'))}; at half load the 70x faster "
        f"model's p99 ÷ ideal is {_x(disturb)} the measured model's"
    )
    return s


def _noise(pts: pd.DataFrame) -> _Study:
    """(b): p95 per interrupt placement at the highest load."""
    none, mix, sep, acc = TW9_CASES[TW9_NOISE]
    top = float(pts["qps"].max())
    s = _Study()
    for case in TW9_CASES[TW9_NOISE]:
        p = _at(pts, case, top)
        if len(p):
            s.tail[case] = value(p.iloc[0], "sojourn", "p95")
    p95 = {c: s.tail.get(c, math.nan) for c in TW9_CASES[TW9_NOISE]}
    gap = p95[mix] - p95[none]
    bridged = _div(p95[mix] - p95[acc], gap) if gap > 0 else math.nan
    s.nums = {"qps": top, "p95_ns": s.tail, "accelerator_closes": bridged}
    s.conds = [
        Cond(f"{mix} ≥ {TW9B_HURT:g}× {none}", _ge(_div(p95[mix], p95[none]), TW9B_HURT), True),
        Cond(f"{acc} closes ≥ {TW9B_BRIDGE:.0%} of the gap", _ge(bridged, TW9B_BRIDGE), True),
        Cond(f"{sep} < {mix}", _less(p95[sep], p95[mix])),
    ]
    s.rows = [
        [
            "(b) interrupts",
            c,
            f"{top:,.0f} QPS",
            f"p95 {fmt_ns(v)}",
            f"{_x(_div(v, p95[none]))} none",
        ]
        for c, v in s.tail.items()
    ]
    closes = "–" if not math.isfinite(bridged) else f"{100 * bridged:.0f} %"
    s.text = (
        f"(b) p95 at {top:,.0f} QPS: "
        + ", ".join(f"{c} {fmt_ns(v)}" for c, v in s.tail.items())
        + f" (the accelerator closes {closes} of MIX's gap)"
    )
    return s


def _gc(pts: pd.DataFrame) -> _Study:
    """(c): p99 and p50 per collector's pauses at the lightest load."""
    nopause, g1, par = TW9_CASES[TW9_GC]
    low = float(pts["qps"].min())
    s = _Study()
    st: dict[str, dict[str, float]] = {}
    for case in TW9_CASES[TW9_GC]:
        p = _at(pts, case, low)
        if len(p):
            st[case] = {q: value(p.iloc[0], "sojourn", q) for q in ("p50", "p99")}
            s.tail[case] = st[case]["p99"]
    p50 = {c: _get(st, c, "p50") for c in TW9_CASES[TW9_GC]}
    p99 = {c: _get(st, c, "p99") for c in TW9_CASES[TW9_GC]}
    s.conds = [
        Cond(f"{par} p99 > {g1} p99", _less(p99[g1], p99[par]), True),
        Cond(
            f"{g1} p99 ≥ {TW9C_PAUSE:g}× {nopause}",
            _ge(_div(p99[g1], p99[nopause]), TW9C_PAUSE),
        ),
    ]
    for case in (g1, par):
        r = _div(p50[case], p50[nopause])
        near = None if not math.isfinite(r) or r <= 0 else bool(max(r, 1 / r) <= TW9C_MEDIAN)
        s.conds.append(Cond(f"{case} p50 within {TW9C_MEDIAN:g}× {nopause}'s", near))
    s.nums = {"qps": low, "cases": st}
    s.rows = [
        [
            "(c) collector pauses",
            c,
            f"{low:,.0f} QPS",
            f"p99 {fmt_ns(v['p99'])}, p50 {fmt_ns(v['p50'])}",
            f"{_x(_div(v['p99'], p99[nopause]))} no pauses",
        ]
        for c, v in st.items()
    ]
    s.text = f"(c) p99 at {low:,.0f} QPS: " + ", ".join(
        f"{c} {fmt_ns(v)}" for c, v in s.tail.items()
    )
    return s


def _case_bars(name: str, title: str, tail: dict[str, float], caption: str):
    series, unit = _in_unit({"measured": list(tail.values())})
    return (
        name,
        caption,
        lambda o: bars(o, list(tail), series, f"latency ({unit}, log scale)", title),
    )


def rule_tailwag_fig9(item: dict, data: Any, _reuse: Any) -> Verdict:
    """TailWAG's three case studies on fitted synthetic workloads: (a) img-dnn 1.7x and 70x
    faster, (b) interrupt noise on the worker's CPU (MIX), on another (SEP) or handled by an
    accelerator, (c) middleware's collector pauses (G1, Parallel) against none."""
    pts = _with_ideal(data)
    if pts.empty or "axis_case" not in pts:
        return _no_data(data, "points over [[case]]")
    studies: dict[str, _Study] = {}
    for stem, fn in ((TW9_DNN, _dnn), (TW9_NOISE, _noise), (TW9_GC, _gc)):
        sp = pts[pts["stem"] == stem]
        if len(sp):
            studies[stem] = fn(sp)
    conds = [c for s in studies.values() for c in s.conds]
    conds += [Cond(f"{stem} measured", None) for stem in TW9_CASES if stem not in studies]
    captions = {
        TW9_DNN: ("(a) img-dnn faster", "p99 at half of each img-dnn model's own saturation"),
        TW9_NOISE: ("(b) interrupts", "p95 per interrupt placement at the highest load"),
        TW9_GC: ("(c) collector pauses", "p99 per collector's pauses at the lightest load"),
    }
    figures = [
        _case_bars(f"case_{i}", captions[stem][0], s.tail, f"Sojourn {captions[stem][1]}.")
        for i, (stem, s) in enumerate(studies.items())
        if s.tail
    ]
    paper = item.get("paper_fig9") or {}
    return _verdict(
        conds,
        "; ".join(s.text for s in studies.values()),
        {stem: s.nums for stem, s in studies.items()},
        heads=["case study", "case", "rate", "tail", "against the first case"],
        rows=[r for s in studies.values() for r in s.rows],
        paper=(["TailWAG", "what it reports"], [[k, str(v)] for k, v in paper.items()]),
        figures=figures,
    )


# --- Fig. 3 ---------------------------------------------------------------------------------------


def _stalls(data: Any, p: pd.Series) -> dict[str, Any]:
    """A point's dispatch gaps over its runs (summary.json's ``stalls``): gaps over 1 ms per
    second measured and their total, the longest, each gap's start and length, and the RT
    runtime its runs held (``tuning``)."""
    res = data.results.get(p["stem"])
    runs = res.runs[res.runs["point"] == p["point"]] if res is not None else pd.DataFrame()
    secs, n, total, longest, gaps, held = 0.0, 0, 0.0, 0.0, [], None
    for _, r in runs.iterrows():
        doc = read_summary(r["path"])
        for k in ((doc.get("tuning") or {}).get("applied") or {}).get("knobs") or []:
            if k.get("knob") == "rt_runtime":
                held = (k.get("requested"), k.get("before"))
        st = doc.get("stalls")
        if not isinstance(st, dict):  # no complete records: the run says nothing of its gaps
            continue
        secs += float(doc.get("duration_s") or 0.0)
        n += int(st.get("over_1ms") or 0)
        total += float(st.get("over_1ms_total_ns") or 0) / 1e6
        longest = max(longest, float(st.get("longest_ns") or 0) / 1e6)
        gaps += [(float(g["at_s"]), g["length_ns"] / 1e6) for g in st.get("long_gaps") or []]
    return {
        "seconds": secs,
        "stalls_per_s": _div(n, secs),
        "stall_ms_per_s": _div(total, secs),
        "longest_ms": longest if secs else math.nan,
        "gaps": gaps,
        "rt_runtime": held[0] if held else None,
        "rt_runtime_before": held[1] if held else None,
    }


def _timeline(cases: dict[str, dict[str, Any]]):
    """The stall timeline: every dispatch gap over 1 ms, when it began and how long it was,
    one series per case."""

    def draw(out):
        fig, ax = F._new(w=6.4, h=3.6)
        ax = ax[0, 0]
        drawn = False
        for i, (case, v) in enumerate(cases.items()):
            if v["gaps"]:
                t, ms = zip(*v["gaps"], strict=True)
                ax.plot(t, ms, "o", ms=4, color=f"C{i}", label=case)
                drawn = True
        if not drawn:
            raise F.FigureError("no dispatch gap over 1 ms in any case")
        ax.set_xlabel("time into the measured phase (s)")
        ax.set_ylabel("stall (ms)")
        ax.set_title("Stalls over 1 ms")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
        return F.save(fig, out)

    return draw


def rule_tailwag_fig3(item: dict, data: Any, _reuse: Any) -> Verdict:
    """A SCHED_FIFO worker that spins, under the kernel's default real-time limit and with it
    off (-1): the stalls over 1 ms per second and the p99.9/max of each."""
    pts = data.points
    by = _by_axis(pts[pts["runs"] > 0], "case") if len(pts) else {}
    if not by:
        return _no_data(data, "points over [[case]]")
    cases: dict[str, dict[str, Any]] = {}
    for case, p in by.items():
        cases[case] = _stalls(data, p) | {s: value(p, "sojourn", s) for s in ("p99", "p999", "max")}
    lim, off = cases.get(TW3_LIMIT, {}), cases.get(TW3_OFF, {})
    left = _div(_get(off, "stall_ms_per_s"), _get(lim, "stall_ms_per_s"))
    conds = [
        Cond(
            f"the limit stalls the worker ≥ {TW3_STALL_MS:g} ms a second",
            _ge(_get(lim, "stall_ms_per_s"), TW3_STALL_MS),
            True,
        ),
        Cond(f"-1 leaves ≤ {TW3_LEFT:.0%} of those stalls", _less(left, TW3_LEFT + 1e-12), True),
        Cond(
            f"-1's p99.9 ≤ {TW3_TAIL:g}× the limit's",
            _less(_div(_get(off, "p999"), _get(lim, "p999")), TW3_TAIL + 1e-12),
        ),
    ]
    body = "; ".join(
        f"{c}: stalled {v['stall_ms_per_s']:.3g} ms a second ({v['stalls_per_s']:.3g} stalls "
        f"over 1 ms a second, longest {v['longest_ms']:.3g} ms), p99.9 {fmt_ns(v['p999'])}, "
        f"max {fmt_ns(v['max'])}"
        for c, v in cases.items()
    )
    paper = item.get("paper_fig3") or {}
    rows = [
        [
            c,
            str(v["rt_runtime"] if v["rt_runtime"] is not None else "–"),
            f"{v['stall_ms_per_s']:.3g} ms",
            f"{v['stalls_per_s']:.3g}",
            f"{v['longest_ms']:.3g} ms",
            fmt_ns(v["p99"]),
            fmt_ns(v["p999"]),
            fmt_ns(v["max"]),
        ]
        for c, v in cases.items()
    ]
    series, unit = _in_unit({s: [cases[c][s] for c in cases] for s in ("p99", "p999", "max")})
    return _verdict(
        conds,
        body,
        {"cases": cases, "left": left, "paper": paper},
        heads=[
            "case",
            "sched_rt_runtime_us",
            "stalled per second",
            "stalls > 1 ms per second",
            "longest",
            "p99",
            "p99.9",
            "max",
        ],
        rows=rows,
        paper=(["TailWAG Fig. 3", ""], [[k, str(v)] for k, v in paper.items()]),
        figures=[
            (
                "stall_timeline",
                "Every stall of the worker over 1 ms (a request due, the worker free, nothing "
                "started), when it began and how long it lasted, per case.",
                _timeline(cases),
            ),
            (
                "tail",
                "Sojourn p99, p99.9 and max per case.",
                lambda o: bars(o, list(cases), series, f"latency ({unit}, log scale)", "Tail"),
            ),
        ],
    )


# --- Table II ------------------------------------------------------------------------------------


def _resources_of(res: Any, p: pd.Series) -> dict[str, float]:
    """The harness and its helper processes at one point (runs averaged): CPU %, peak RSS,
    faults and switches, and CPU time per measured request."""
    t = resource_table(res)
    t = t[(t["point"] == p["point"]) & t["kind"].isin(["harness", "harness child"])]
    if t.empty:
        return {}
    per_run = t.groupby("run").agg(
        cpu_pct=("cpu_pct", "sum"),
        rss=("rss_max_bytes", "sum"),
        minflt=("minflt", "sum"),
        majflt=("majflt", "sum"),
        vol_cs=("vol_cs", "sum"),
        invol_cs=("invol_cs", "sum"),
    )
    runs = res.runs[res.runs["point"] == p["point"]].set_index("run")
    reqs = pd.to_numeric(runs["requests_measured"], errors="coerce")
    secs = pd.to_numeric(runs["duration_s"], errors="coerce")
    cpu_s = per_run["cpu_pct"] / 100 * secs.reindex(per_run.index)
    out = {k: float(per_run[k].mean()) for k in per_run.columns}
    out["rss"] = float(per_run["rss"].max())
    out["cpu_per_request_ns"] = float((cpu_s / reqs.reindex(per_run.index)).mean()) * 1e9
    return out


def _median(vals: list[float]) -> float:
    v = [x for x in vals if math.isfinite(x)]
    return float(np.median(v)) if v else math.nan


def _table2_rows(nums: dict, paper: dict, names: dict) -> tuple[list, list]:
    """Table II's rows, ours (largest peak RSS first) and the report's."""
    rows = [
        [
            a,
            str(names.get(a, "")),
            f"{v['cpu_pct']:.0f} %",
            fmt_ns(v["cpu_per_request_ns"]),
            fmt_bytes(v["rss"]),
            f"{v['minflt']:,.0f}",
            f"{v['majflt']:,.0f}",
            f"{v['vol_cs']:,.0f}",
            f"{v['invol_cs']:,.0f}",
        ]
        for a, v in sorted(nums.items(), key=lambda t: -t[1]["rss"])
    ]
    paper_rows = [
        [a, str(names.get(a, "")), *(f"{float(r.get(k, math.nan)):,.0f}" for k in T2_COLUMNS)]
        for a, r in paper.items()
    ]
    return rows, paper_rows


def rule_profiling_table2(item: dict, data: Any, reuse: Any) -> Verdict:
    """Table II from Table I's runs: each app's CPU, peak RSS, page faults and context switches
    at the light load (the harness and its helper processes), the report's beside; the
    report's division into memory- and CPU-intensive apps judged on peak RSS and CPU time per
    request."""
    from scipy import stats as sps

    src = reuse if reuse is not None else data
    apps = _apps(src)
    if not apps:
        return _no_data(src, "app results")
    nums: dict[str, dict[str, float]] = {}
    for app, pts in apps.items():
        p = pts.sort_values("qps").iloc[0]
        got = _resources_of(src.results[p["stem"]], p)
        if got:
            nums[app] = got
    if not nums:
        return _no_data(src, "resource sections (environment.harness) in Table I's runs")
    paper = item.get("paper_table2") or {}
    names = item.get("paper_apps") or {}
    groups = (("cpu", T2_CPU_APPS), ("mem", T2_MEM_APPS))
    rss = {g: _median([_get(nums, a, "rss") for a in members]) for g, members in groups}
    cpu = {
        g: _median([_get(nums, a, "cpu_per_request_ns") for a in members]) for g, members in groups
    }
    both = [a for a in nums if a in paper and math.isfinite(nums[a]["rss"])]
    rho = math.nan
    if len(both) >= 3:
        ours, theirs = [nums[a]["rss"] for a in both], [paper[a]["rss_kb"] for a in both]
        rho = float(sps.spearmanr(ours, theirs)[0])
    conds = [
        Cond(
            "the report's memory-intensive apps: median peak RSS above its CPU-intensive apps'",
            _less(rss["cpu"], rss["mem"]),
            True,
        ),
        Cond(
            "the report's CPU-intensive apps: median CPU per request above its "
            "memory-intensive apps'",
            _less(cpu["mem"], cpu["cpu"]),
        ),
    ]
    body = (
        f"median peak RSS {fmt_bytes(rss['mem'])} for the report's memory-intensive apps "
        f"({', '.join(T2_MEM_APPS)}) against {fmt_bytes(rss['cpu'])} for its CPU-intensive "
        f"ones; median CPU per request {fmt_ns(cpu['cpu'])} against {fmt_ns(cpu['mem'])}; "
        f"RSS ranks against the report's: Spearman's ρ {rho:.2f} over {len(both)} apps"
    )
    rows, paper_rows = _table2_rows(nums, paper, names)
    cats = [a for a in nums if a in paper]
    series = {
        "ours (MiB)": [nums[a]["rss"] / 2**20 for a in cats],
        "report (MiB)": [paper[a]["rss_kb"] / 1024 for a in cats],
    }
    return _verdict(
        conds,
        body,
        {
            "apps": nums,
            "median_rss": rss,
            "median_cpu_per_request_ns": cpu,
            "rss_spearman": rho,
        },
        heads=["app", "report's app", "CPU", "CPU per request", "peak RSS", *_T2_HEADS],
        rows=rows,
        paper=(["app", "report's app", "CPU %", "RSS (kB)", *_T2_HEADS], paper_rows),
        figures=[
            (
                "rss",
                "Peak RSS per app while it serves its light load, ours (the harness and its "
                "helper processes, over the measured phase) beside the report's Table II.",
                lambda o: bars(o, cats, series, "peak RSS (MiB, log scale)", "Memory per app"),
            )
        ],
    )
