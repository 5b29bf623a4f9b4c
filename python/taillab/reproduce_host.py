"""``taillab reproduce``'s rules for the items about host mechanisms: the scheduling class of
the workers (Tales of the Tail Fig. 6), where interrupts are handled (Tales Fig. 8, TailWAG
Figs. 1 and 7) and NUMA placement (Tales Fig. 9).

Most of what these papers measured needs a host this project's VMs are not: a NIC whose
interrupts can be moved, with the client on another machine; two NUMA nodes. Each item still
runs what it can (the loopback baseline, the one-node baseline, the interrupts played by
synth's ``noise=``), and its verdict is ``needs: …`` (inconclusive, with what the numbers alone
would say kept in the sentence) when the runs could not be the paper's experiment. What the
host can do is read from the runs (their topology) and from this host's /sys and /proc (its
NICs' interrupts and whether their affinity may be written, its NUMA nodes): the page is
written on the host that ran the item, right after the runs.

Every rule takes ``(item, data, reuse)`` as :data:`taillab.reproduce.RULES` says; ``data`` is
the item's :class:`taillab.reproduce.Data`.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from . import figures as F
from .reproduce_verdict import (
    Cond,
    Verdict,
    _by_axis,
    _div,
    _finite,
    _ge,
    _in_unit,
    _less,
    _load_name,
    _mean,
    _no_data,
    _verdict,
    _x,
    bars,
    group_tag,
    value,
)
from .units import fmt_ns

# Two load fractions closer than this are the same planned load.
_SNAP = 0.02


def _ran(data: Any) -> pd.DataFrame:
    """The item's points that have runs (none when it has no results at all)."""
    pts = data.points
    return pts[pts["runs"] > 0] if "runs" in pts else pts


def _paper_says(item: dict) -> tuple[list[str], list[list[str]]] | None:
    """The paper's findings in words (``paper_says``), for figures whose text gives no numbers."""
    says = item.get("paper_says") or {}
    return (["what", "the paper says"], [[k, str(v)] for k, v in says.items()]) if says else None


def _needs(v: Verdict, what: str) -> Verdict:
    """The verdict of runs that could not be the paper's experiment: the page says "needs:
    ``what``" (taillab.reproduce's ``_needs_rule``, after the environment rule, so that the
    status the numbers alone give is still the one ``verdict.json`` keeps)."""
    v.needs = what
    return v


def _sojourn_bars(name: str, caption: str, title: str, by: dict[str, pd.Series]):
    """Sojourn p50 and p99 per case as bars, measured only: the runs' ideal (the same
    arrivals and service times through as many servers as workers) is not these items'
    baseline (several workers on one core, a placement)."""
    cats = list(by)
    series, unit = _in_unit({s: [value(by[c], "sojourn", s) for c in cats] for s in ("p50", "p99")})
    return (name, caption, lambda o: bars(o, cats, series, f"sojourn ({unit}, log scale)", title))


# Tales Fig. 6: CFS at nice −20 against SCHED_FIFO, four workers on one core: FIFO order
# shortens the tail when nice −20's p99 is at least TALES6_TAIL times real-time's. A p99 of
# ~12 000 requests has a sampling error of about 2 %, and the busy VM adds more: a smaller gap
# is not told from noise. Judged without a hog (the paper's comparison: both above everything
# else) and, not primary, beside one (nice −20 is then not strictly above it). The median is
# the other side of the paper's sentence ("FIFO ... also increases median latency"):
# real-time's p50 above nice −20's, judged but not primary.
TALES6_TAIL = 1.1


def rule_tales6(item: dict, data: Any, _reuse: Any) -> Verdict:
    """p50/p99 per scheduling case: real-time (FIFO) p99 below nice −20's (CFS order),
    without and with a hog."""
    by = _by_axis(_ran(data), "case")
    if not by:
        return _no_data(data, "points over [[case]]")
    q = {k: {s: value(p, "sojourn", s) for s in ("p50", "p99")} for k, p in by.items()}
    nan = {"p50": math.nan, "p99": math.nan}
    tail = {
        hog: _div(q.get(f"nice -20{hog}", nan)["p99"], q.get(f"real-time{hog}", nan)["p99"])
        for hog in ("", " + hog")
    }
    conds = [
        Cond(
            f"nice −20 p99 ≥ {TALES6_TAIL:g}× real-time's (FIFO order, shorter tail)",
            _ge(tail[""], TALES6_TAIL),
            True,
        ),
        Cond(f"the same beside a hog (≥ {TALES6_TAIL:g}×)", _ge(tail[" + hog"], TALES6_TAIL)),
        Cond(
            "real-time p50 above nice −20's (FIFO raises the median)",
            _less(q.get("nice -20", nan)["p50"], q.get("real-time", nan)["p50"]),
        ),
    ]
    body = "; ".join(
        f"{k}: p50 {fmt_ns(v['p50'])}, p99 {fmt_ns(v['p99'])}" for k, v in q.items()
    ) + (f"; nice −20 ÷ real-time p99 {_x(tail[''])} alone, {_x(tail[' + hog'])} beside a hog")
    rows = [[k, fmt_ns(v["p50"]), fmt_ns(v["p99"])] for k, v in q.items()]
    caption = (
        "Sojourn p50 and p99 per case: four workers on CPU 0 at nice −20 (CFS picks the "
        "thread) and at real-time priority (FIFO), alone and beside a CPU hog (Tales Fig. 6)."
    )
    return _verdict(
        conds,
        body,
        {"cases": q, "nice_over_rt_p99": tail[""], "nice_over_rt_p99_hog": tail[" + hog"]},
        heads=["case", "p50", "p99"],
        rows=rows,
        paper=_paper_says(item),
        figures=[_sojourn_bars("p99_by_scheduler", caption, "sojourn by scheduler", by)],
    )


def nic_irqs(root: Path = Path("/")) -> dict[str, dict[str, list[int]]]:
    """This host's network interfaces with a device behind them (not lo, veth or bridges):
    their interrupts (the device's MSI vectors, else the /proc/interrupts lines that name the
    interface or its virtio device) and which of those have an affinity file we may write."""
    out: dict[str, dict[str, list[int]]] = {}
    net = root / "sys/class/net"
    try:
        lines = (root / "proc/interrupts").read_text().splitlines()[1:]
    except OSError:
        lines = []
    for dev in sorted(net.iterdir()) if net.is_dir() else []:
        d = dev / "device"
        if not d.exists():
            continue
        names = {dev.name, d.resolve().name}
        irqs = {
            int(f.name)
            for msi in (d / "msi_irqs",)
            if msi.is_dir()
            for f in msi.iterdir()
            if f.name.isdigit()
        }
        for line in lines:
            n, _, rest = line.partition(":")
            if n.strip().isdigit() and any(
                re.search(rf"\b{re.escape(x)}(-|\b)", rest) for x in names
            ):
                irqs.add(int(n))
        files = {i: root / f"proc/irq/{i}/smp_affinity" for i in sorted(irqs)}
        out[dev.name] = {
            "irqs": sorted(irqs),
            "writable": [i for i, f in files.items() if f.exists() and os.access(f, os.W_OK)],
        }
    return out


def _nic_needs(data: Any) -> tuple[str | None, dict]:
    """Why these runs cannot be the paper's interrupt experiment (None when they can): their
    requests crossed no NIC (integrated or loopback), or no NIC of this host lets its
    interrupts be moved. And what was found."""
    configs = sorted({str(c) for c in data.points.get("config", pd.Series(dtype=str)).dropna()})
    nics = nic_irqs()
    found = {"topologies": configs, "nics": nics}
    movable = {k: v for k, v in nics.items() if v["irqs"] and v["writable"]}
    here = "; this host's NICs: " + (
        ", ".join(
            f"{k} (IRQ {', '.join(map(str, v['irqs'])) or 'none found'}, "
            f"{'affinity writable' if v['writable'] else 'affinity not writable'})"
            for k, v in nics.items()
        )
        or "none"
    )
    if not configs or set(configs) <= {"integrated", "loopback"}:
        why = f"these runs were {', '.join(configs) or 'not found'}: their requests crossed no NIC"
        return f"NIC interrupt affinity ({why}{here})", found
    if not movable:
        return f"NIC interrupt affinity (no NIC whose interrupts can be moved{here})", found
    return None, found


# TailWAG Fig. 1 / Tales Fig. 8: SEP's p99 below MIX's at the loads TailWAG calls low to moderate
# (up to half of saturation), and MIX saturating above SEP (a core more to serve).
IRQ_LOW = 0.5


def _placement(data: Any) -> tuple[dict[str, dict], list[list[str]]]:
    """Per case (MIX, SEP): its saturation rate and p99 per load fraction; the table's rows."""
    out: dict[str, dict] = {}
    rows = []
    pts = _ran(data)
    for case, g in pts.groupby(pts.get("axis_case", pd.Series(index=pts.index, dtype=str))):
        sats = [
            data.saturation.get(s, {}).get(group_tag(str(p)), {}).get("qps", math.nan)
            for s, p in zip(g["stem"], g["point"], strict=True)
        ]
        c = out.setdefault(str(case), {"saturation_qps": _mean(sats), "p99_ns": {}})
        for _, p in g.sort_values(["load_frac", "qps"]).iterrows():
            # By fraction of the placement's own saturation; by offered rate when the runs
            # had no saturation search (the smoke's fixed rate).
            f = float(p["load_frac"])
            c["p99_ns"][f if math.isfinite(f) else float(p["qps"])] = value(p, "sojourn", "p99")
            rows.append(
                [
                    str(case),
                    _load_name(p),
                    f"{float(p.get('achieved_qps', p['qps'])):,.0f}",
                    fmt_ns(value(p, "sojourn", "p50")),
                    fmt_ns(value(p, "sojourn", "p99")),
                ]
            )
    return out, rows


def _placement_verdict(item: dict, data: Any, conds, body: str, nums: dict, rows) -> Verdict:
    """The verdict of an interrupt-placement item, "needs: …" unless its runs crossed a NIC
    whose interrupts can be moved."""
    why, found = _nic_needs(data)
    nums = {**nums, "capability": found}
    caption = (
        "Sojourn mean, p95 and p99 against the rate achieved, per placement "
        f"({item.get('paper', '')} {item.get('figure', '')}; over loopback, no NIC "
        "interrupts: the client's CPU and the workers')."
    )
    v = _verdict(
        conds,
        body,
        nums,
        heads=["placement", "load", "achieved QPS", "p50", "p99"],
        rows=rows,
        paper=_paper_says(item),
        figures=[
            (
                "latency_vs_throughput",
                caption,
                lambda o: F.latency_vs_load(data.combined(), o, x="achieved_qps"),
            )
        ],
    )
    return _needs(v, why) if why else v


def rule_tailwag_fig1(item: dict, data: Any, _reuse: Any) -> Verdict:
    """SEP against MIX: p99 at low and moderate load, and the saturation rate."""
    cases, rows = _placement(data)
    mix, sep = cases.get("MIX"), cases.get("SEP")
    if not mix or not sep:
        return _no_data(data, "MIX and SEP points")
    conds = [
        Cond(
            f"SEP p99 < MIX p99 at {100 * f:.0f} % load",
            _less(sep["p99_ns"][f], mix["p99_ns"].get(f, math.nan)),
            f == min(sep["p99_ns"]),
        )
        for f in sep["p99_ns"]
        if f <= IRQ_LOW + _SNAP
    ]
    conds.append(
        Cond("MIX saturates above SEP", _less(sep["saturation_qps"], mix["saturation_qps"]), True)
    )
    body = "; ".join(
        f"{k}: saturation "
        + (f"{v['saturation_qps']:,.0f} QPS" if math.isfinite(v["saturation_qps"]) else "–")
        + ", p99 "
        + ", ".join(
            f"{fmt_ns(x)} at " + (f"{100 * f:.0f} %" if f <= 1 else f"{f:,.0f} QPS")
            for f, x in v["p99_ns"].items()
        )
        for k, v in cases.items()
    )
    return _placement_verdict(item, data, conds, body, {"placements": cases}, rows)


def rule_tales8(item: dict, data: Any, reuse: Any) -> Verdict:
    """A dedicated interrupt core against spread interrupts at the heaviest load (~80 %)."""
    d = reuse if reuse is not None and reuse.results else data
    cases, rows = _placement(d)
    mix, sep = cases.get("MIX"), cases.get("SEP")
    if not mix or not sep:
        return _no_data(d, "MIX and SEP points")
    top = max(sep["p99_ns"])
    a, b = sep["p99_ns"][top], mix["p99_ns"].get(top, math.nan)
    at = f"{100 * top:.0f} % load" if top <= 1 else f"{top:,.0f} QPS"
    conds = [Cond(f"dedicated (SEP) p99 < spread (MIX) at {at}", _less(a, b), True)]
    body = f"p99 at {at}: dedicated {fmt_ns(a)}, spread {fmt_ns(b)}"
    body += f" (spread ÷ dedicated {_x(_div(b, a))})"
    return _placement_verdict(item, d, conds, body, {"placements": cases}, rows)


def rule_tales9(item: dict, data: Any, _reuse: Any) -> Verdict:
    """kv's p99 with its memory where Linux puts it and bound to node 0; the experiment the
    paper ran needs two NUMA nodes (and an instance per node)."""
    by = _by_axis(_ran(data), "case")
    if not by:
        return _no_data(data, "points over [[case]]")
    q = {k: value(p, "sojourn", "p99") for k, p in by.items()}
    ratio = _div(q.get("node 0", math.nan), q.get("default", math.nan))
    nodes = sorted(p.name for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    conds = [
        Cond(
            "memory bound to one node shortens p99",
            _less(q.get("node 0", math.nan), q.get("default", math.nan)),
            True,
        )
    ]
    body = (
        ", ".join(f"{k} p99 {fmt_ns(v)}" for k, v in q.items()) + f" (node 0 ÷ default {_x(ratio)})"
    )
    caption = (
        "Sojourn p50 and p99 of kv at 75 % of its saturation rate, its memory where Linux "
        "places it and bound to node 0 (Tales Fig. 9, the one-node baseline)."
    )
    v = _verdict(
        conds,
        body,
        {"p99_ns": q, "node0_over_default": ratio, "numa_nodes": nodes},
        heads=["memory", "p99"],
        rows=[[k, fmt_ns(x)] for k, x in q.items()],
        paper=_paper_says(item),
        figures=[_sojourn_bars("p99_by_memory", caption, "sojourn by memory placement", by)],
    )
    if len(nodes) < 2:
        return _needs(
            v, f"2 NUMA nodes (this host has {len(nodes) or 'no'} node: {', '.join(nodes) or '–'})"
        )
    return _needs(
        v,
        "a server instance per NUMA node, its workers and its memory on that node (the "
        "paper's NUMA-aware case): this item binds memory only (tuning.numa_node), one server",
    )


# TailWAG Fig. 7: interrupts on the worker's CPU (MIX) raise the low-variance shape's p95 by at
# least TW7_RISE over a dedicated CPU (SEP): the noise takes a tenth of the CPU, so anything
# less is within what the extra utilization alone would do; and by more than they raise the
# high-variance shape's (the paper's contrast). Shapes are told apart by the measured service
# p95 ÷ p50 of their runs without noise, not by their names.
TW7_RISE = 1.1


def rule_tailwag_fig7(item: dict, data: Any, _reuse: Any) -> Verdict:
    """Per service shape: p95 with interrupts on the worker's CPU (MIX) ÷ on another (SEP)."""
    pts = _ran(data)
    if pts.empty or "axis_app.service" not in pts or "axis_case" not in pts:
        return _no_data(data, "points over app.service and [[case]]")
    shapes: dict[str, dict[str, float]] = {}
    for (svc, case), g in pts.groupby(["axis_app.service", "axis_case"]):
        p = g.iloc[0]
        s = shapes.setdefault(str(svc), {})
        s[str(case)] = value(p, "sojourn", "p95")
        if case == "none":
            s["spread"] = _div(value(p, "service", "p95"), value(p, "service", "p50"))
    for s in shapes.values():
        s["rise"] = _div(s.get("MIX", math.nan), s.get("SEP", math.nan))
    order = sorted(shapes, key=lambda k: _finite(shapes[k].get("spread", math.nan), math.inf))
    low, high = shapes[order[0]], shapes[order[-1]]
    conds = [
        Cond(
            f"MIX ÷ SEP p95 ≥ {TW7_RISE:g} for the low-variance shape",
            _ge(low["rise"], TW7_RISE),
            True,
        ),
        Cond(
            "it rises more than the high-variance shape's",
            _less(high["rise"], low["rise"]) if len(order) > 1 else None,
        ),
    ]
    why, found = _nic_needs(data)
    conds.append(Cond("a real NIC's interrupts moved (TailWAG's measured lines)", None))
    body = "MIX ÷ SEP p95: " + ", ".join(
        f"{k} (service p95/p50 {_x(v.get('spread', math.nan), 2)}) {_x(v['rise'])}"
        for k, v in shapes.items()
    )
    if why:
        body += f"; needs: {why} for the measured lines"
    rows = [
        [k, _x(v.get("spread", math.nan), 2)]
        + [fmt_ns(v.get(c, math.nan)) for c in ("none", "MIX", "SEP")]
        + [_x(v["rise"])]
        for k, v in shapes.items()
    ]
    cats = list(shapes)
    series, unit = _in_unit(
        {c: [shapes[k].get(c, math.nan) for k in cats] for c in ("none", "MIX", "SEP")}
    )
    caption = (
        "Sojourn p95 per service shape: no interrupts, interrupts (synth's noise) on the "
        "worker's CPU (MIX), on another CPU (SEP) (TailWAG Fig. 7)."
    )
    return _verdict(
        conds,
        body,
        {"shapes": shapes, "capability": found},
        heads=["service", "service p95 ÷ p50", "p95 none", "p95 MIX", "p95 SEP", "MIX ÷ SEP"],
        rows=rows,
        paper=_paper_says(item),
        figures=[
            (
                "p95_by_placement",
                caption,
                lambda o: bars(
                    o,
                    cats,
                    series,
                    f"sojourn p95 ({unit}, log scale)",
                    "p95 by interrupt placement",
                ),
            )
        ],
    )
