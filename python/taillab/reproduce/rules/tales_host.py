"""The rules of Tales of the Tail's items about host mechanisms: the scheduling class of the
workers (Fig. 6), where interrupts are handled (Fig. 8) and NUMA placement (Fig. 9).

Most of what these figures measured needs a host this project's VMs are not: a NIC whose
interrupts can be moved, with the client on another machine; two NUMA nodes. Each item still
runs what it can (the loopback baseline, the one-node baseline, the interrupts played by
synth's ``noise=``), and its verdict is ``needs: …`` (inconclusive, with what the numbers alone
would say kept in the sentence) when the runs could not be the paper's experiment. What the
host can do is read from the runs (their topology) and from this host's /sys and /proc (its
NICs' interrupts and whether their affinity may be written, its NUMA nodes): the page is
written on the host that ran the item, right after the runs. TailWAG's Figs. 1 and 7 share
the interrupt helpers (:mod:`.common`).

Every rule takes ``(item, data, reuse)`` as :data:`taillab.reproduce.RULES` says.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ...units import fmt_ns
from ..verdict import (
    Cond,
    Verdict,
    bars,
    below,
    by_axis,
    in_unit,
    make_verdict,
    mult,
    no_data,
    ratio_check,
    ratio_of,
    value,
)
from .common import (
    needs_text,
    paper_says,
    placement,
    placement_point,
    placement_verdict,
    ran_of,
)
from .registry import rule


def _sojourn_bars(name: str, caption: str, title: str, by: dict[str, pd.Series]):
    """Sojourn p50 and p99 per case as bars, measured only: the runs' ideal (the same
    arrivals and service times through as many servers as workers) is not these items'
    baseline (several workers on one core, a placement)."""
    cats = list(by)
    series, unit = in_unit({s: [value(by[c], "sojourn", s) for c in cats] for s in ("p50", "p99")})
    return (name, caption, lambda o: bars(o, cats, series, f"sojourn ({unit}, log scale)", title))


# Tales Fig. 6: CFS at nice −20 against SCHED_FIFO, four workers on one core: FIFO order
# shortens the tail when nice −20's p99 is at least TALES6_TAIL times real-time's. A p99 of
# ~12 000 requests has a sampling error of about 2 %, and the busy VM adds more: a smaller gap
# is not told from noise. Judged without a hog (the paper's comparison: both above everything
# else) and, not primary, beside one (nice −20 is then not strictly above it). The median is
# the other side of the paper's sentence ("FIFO ... also increases median latency"):
# real-time's p50 above nice −20's, judged but not primary.
TALES6_TAIL = 1.1


@rule
def tales_fig6(item: dict, data: Any, _reuse: Any) -> Verdict:
    """p50/p99 per scheduling case: real-time (FIFO) p99 below nice −20's (CFS order),
    without and with a hog."""
    by = by_axis(ran_of(data), "case")
    if not by:
        return no_data(data, "points over [[case]]")
    q = {k: {s: value(p, "sojourn", s) for s in ("p50", "p99")} for k, p in by.items()}
    nan = {"p50": math.nan, "p99": math.nan}
    tail = {
        hog: ratio_of(q.get(f"nice -20{hog}", nan)["p99"], q.get(f"real-time{hog}", nan)["p99"])
        for hog in ("", " + hog")
    }
    nice, rt = (
        {hog: by.get(f"{k}{hog}") for hog in ("", " + hog")} for k in ("nice -20", "real-time")
    )
    conds = [
        Cond.judged(
            f"nice −20 p99 ≥ {TALES6_TAIL:g}× real-time's (FIFO order, shorter tail)",
            ratio_check(data, nice[""], rt[""], ">=", TALES6_TAIL),
            True,
        ),
        Cond.judged(
            f"the same beside a hog (≥ {TALES6_TAIL:g}×)",
            ratio_check(data, nice[" + hog"], rt[" + hog"], ">=", TALES6_TAIL),
        ),
        Cond.judged(
            "real-time p50 above nice −20's (FIFO raises the median)",
            below(data, nice[""], rt[""], "p50"),
        ),
    ]
    body = "; ".join(
        f"{k}: p50 {fmt_ns(v['p50'])}, p99 {fmt_ns(v['p99'])}" for k, v in q.items()
    ) + (f"; nice −20 ÷ real-time p99 {mult(tail[''])} alone, {mult(tail[' + hog'])} beside a hog")
    rows = [[k, fmt_ns(v["p50"]), fmt_ns(v["p99"])] for k, v in q.items()]
    caption = (
        "Sojourn p50 and p99 per case: four workers on CPU 0 at nice −20 (CFS picks the "
        "thread) and at real-time priority (FIFO), alone and beside a CPU hog (Tales Fig. 6)."
    )
    return make_verdict(
        conds,
        body,
        {"cases": q, "nice_over_rt_p99": tail[""], "nice_over_rt_p99_hog": tail[" + hog"]},
        heads=["case", "p50", "p99"],
        rows=rows,
        paper=paper_says(item),
        figures=[_sojourn_bars("p99_by_scheduler", caption, "sojourn by scheduler", by)],
    )


@rule
def tales_fig8(item: dict, data: Any, reuse: Any) -> Verdict:
    """A dedicated interrupt core against spread interrupts at the heaviest load (~80 %)."""
    d = reuse if reuse is not None and reuse.results else data
    cases, rows = placement(d)
    mix, sep = cases.get("MIX"), cases.get("SEP")
    if not mix or not sep:
        return no_data(d, "MIX and SEP points")
    top = max(sep["p99_ns"])
    a, b = sep["p99_ns"][top], mix["p99_ns"].get(top, math.nan)
    at = f"{100 * top:.0f} % load" if top <= 1 else f"{top:,.0f} QPS"
    shorter = below(d, placement_point(d, "SEP", top), placement_point(d, "MIX", top))
    conds = [Cond.judged(f"dedicated (SEP) p99 < spread (MIX) at {at}", shorter, True)]
    body = f"p99 at {at}: dedicated {fmt_ns(a)}, spread {fmt_ns(b)}"
    body += f" (spread ÷ dedicated {mult(ratio_of(b, a))})"
    return placement_verdict(item, d, conds, body, {"placements": cases}, rows)


@rule
def tales_fig9(item: dict, data: Any, _reuse: Any) -> Verdict:
    """kv's p99 with its memory where Linux puts it and bound to node 0; the experiment the
    paper ran needs two NUMA nodes (and an instance per node)."""
    by = by_axis(ran_of(data), "case")
    if not by:
        return no_data(data, "points over [[case]]")
    q = {k: value(p, "sojourn", "p99") for k, p in by.items()}
    ratio = ratio_of(q.get("node 0", math.nan), q.get("default", math.nan))
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    conds = [
        Cond.judged(
            "memory bound to one node shortens p99",
            below(data, by.get("node 0"), by.get("default")),
            True,
        )
    ]
    body = (
        ", ".join(f"{k} p99 {fmt_ns(v)}" for k, v in q.items())
        + f" (node 0 ÷ default {mult(ratio)})"
    )
    caption = (
        "Sojourn p50 and p99 of kv at 75 % of its saturation rate, its memory where Linux "
        "places it and bound to node 0 (Tales Fig. 9, the one-node baseline)."
    )
    v = make_verdict(
        conds,
        body,
        {"p99_ns": q, "node0_over_default": ratio, "numa_nodes": nodes},
        heads=["memory", "p99"],
        rows=[[k, fmt_ns(x)] for k, x in q.items()],
        paper=paper_says(item),
        figures=[_sojourn_bars("p99_by_memory", caption, "sojourn by memory placement", by)],
    )
    if len(nodes) < 2:
        return needs_text(
            v, f"2 NUMA nodes (this host has {len(nodes) or 'no'} node: {', '.join(nodes) or '–'})"
        )
    return needs_text(
        v,
        "a server instance per NUMA node, its workers and its memory on that node (the "
        "paper's NUMA-aware case): this item binds memory only (tuning.numa_node), one server",
    )
