"""Helpers the rules of more than one paper use: attributions' effects and cells, the
placement items' cases, what a host could not run (``needs``), the papers' own text.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any

import pandas as pd

from ... import figures as F
from ... import html
from ...html import esc
from ...units import fmt_ns
from ..items import Data
from ..judge import Check, Estimate, compare
from ..verdict import (
    Verdict,
    as_float,
    group_tag,
    load_name,
    make_verdict,
    mean_of,
    mult,
    read_json,
    value,
)


def num_text(v: Any, fmt: str) -> str:
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "–"
    return "–" if not math.isfinite(v) else fmt.format(v)


def attribution(data: Data, stem: str) -> dict[str, Any]:
    """``attribution.json`` of an item's attribution experiment ({} when it is missing)."""
    return read_json(data.root / stem / "attribution" / "attribution.json")


def attr_effects(doc: dict, metric: str, q: float) -> dict[str, dict]:
    """An attribution's terms (intercept as ``base``) for one metric and quantile, by name."""
    return {
        ("base" if e["kind"] == "intercept" else e["term"]): e
        for e in doc.get("effects") or []
        if e.get("metric") == metric and abs(float(e.get("quantile", -1)) - q) < 1e-9
    }


def ci_text(e: dict | None) -> str:
    if not e:
        return "–"
    lo, hi = as_float(e.get("ci_low_us")), as_float(e.get("ci_high_us"))
    return f"{_us_signed(as_float(e.get('estimate_us')))} [{_us_signed(lo)}, {_us_signed(hi)}]"


def _us_signed(v: float) -> str:
    if not math.isfinite(v):
        return "–"
    return ("+" if v >= 0 else "−") + fmt_ns(abs(v) * 1e3)


def excludes_zero(e: dict | None) -> bool | None:
    if not e or e.get("excludes_zero") is None:
        return None
    lo, hi = as_float(e.get("ci_low_us")), as_float(e.get("ci_high_us"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    return bool(e["excludes_zero"])


# How an attribution's effects got their intervals (taillab.attribute).
ATTRIBUTION = "the attribution's cluster bootstrap over runs"


def effect_check(
    data: Data, doc: dict, e: dict | None, op: str, bound: float, base: float | None = None
) -> Check | None:
    """An attribution's effect ``e`` (µs) with its bootstrap CI compared with ``bound``
    (``base``: as its cell ÷ the base cell, (base + effect) ÷ base, the base taken as
    estimated): the condition's check in the full variant; None in the quick variant or
    without a CI (one run a cell), where the rule compares as before."""
    if not data.judge.repeated or not e:
        return None
    est, lo, hi = (as_float(e.get(k)) for k in ("estimate_us", "ci_low_us", "ci_high_us"))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return None
    fmt = _us_signed
    if base:
        est, lo, hi = ((base + x) / base for x in (est, lo, hi))
        fmt = mult
    runs = int((doc.get("bootstrap") or {}).get("runs_per_cell") or 1)
    return compare(Estimate(est, lo, hi, runs, ATTRIBUTION), op, bound, fmt=fmt)


def attribution_links(data: Data, out: Path) -> str:
    links = [
        f'<a href="{esc(html.rel(data.root / s / "attribution" / "index.html", out))}">{esc(s)}</a>'
        for s in data.results
        if (data.root / s / "attribution" / "index.html").exists()
    ]
    if not links:
        return ""
    return (
        "<h2>The attributions</h2><p>Each experiment's own page (every effect at p50/p95/p99 "
        "with its CI, the interactions, the run-to-run variance, the best and worst cells): "
        + " · ".join(links)
        + ".</p>"
    )


def ran_of(data: Any) -> pd.DataFrame:
    """The item's points that have runs (none when it has no results at all)."""
    pts = data.points
    return pts[pts["runs"] > 0] if "runs" in pts else pts


def paper_says(item: dict) -> tuple[list[str], list[list[str]]] | None:
    """The paper's findings in words (``paper_says``), for figures whose text gives no numbers."""
    says = item.get("paper_says") or {}
    return (["what", "the paper says"], [[k, str(v)] for k, v in says.items()]) if says else None


def needs_text(v: Verdict, what: str) -> Verdict:
    """The verdict of runs that could not be the paper's experiment: the page says "needs:
    ``what``" (taillab.reproduce's ``_needs_rule``, after the environment rule, so that the
    status the numbers alone give is still the one ``verdict.json`` keeps)."""
    v.needs = what
    return v


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


def nic_needs(data: Any) -> tuple[str | None, dict]:
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


def placement(data: Any) -> tuple[dict[str, dict], list[list[str]]]:
    """Per case (MIX, SEP): its saturation rate and p99 per load fraction; the table's rows."""
    out: dict[str, dict] = {}
    rows = []
    pts = ran_of(data)
    for case, g in pts.groupby(pts.get("axis_case", pd.Series(index=pts.index, dtype=str))):
        sats = [
            data.saturation.get(s, {}).get(group_tag(str(p)), {}).get("qps", math.nan)
            for s, p in zip(g["stem"], g["point"], strict=True)
        ]
        c = out.setdefault(str(case), {"saturation_qps": mean_of(sats), "p99_ns": {}})
        for _, p in g.sort_values(["load_frac", "qps"]).iterrows():
            # By fraction of the placement's own saturation; by offered rate when the runs
            # had no saturation search (the smoke's fixed rate).
            f = float(p["load_frac"])
            c["p99_ns"][f if math.isfinite(f) else float(p["qps"])] = value(p, "sojourn", "p99")
            rows.append(
                [
                    str(case),
                    load_name(p),
                    f"{float(p.get('achieved_qps', p['qps'])):,.0f}",
                    fmt_ns(value(p, "sojourn", "p50")),
                    fmt_ns(value(p, "sojourn", "p99")),
                ]
            )
    return out, rows


def placement_point(data: Any, case: str, load: float) -> pd.Series | None:
    """The point of placement ``case`` at ``load``, keyed as :func:`placement` keys its
    p99s (the fraction of saturation, else the offered rate); None when it did not run."""
    pts = ran_of(data)
    if "axis_case" not in pts:
        return None
    for _, p in pts[pts["axis_case"].astype(str) == case].iterrows():
        f = float(p["load_frac"])
        if (f if math.isfinite(f) else float(p["qps"])) == load:
            return p
    return None


def placement_verdict(item: dict, data: Any, conds, body: str, nums: dict, rows) -> Verdict:
    """The verdict of an interrupt-placement item, "needs: …" unless its runs crossed a NIC
    whose interrupts can be moved."""
    why, found = nic_needs(data)
    nums = {**nums, "capability": found}
    caption = (
        "Sojourn mean, p95 and p99 against the rate achieved, per placement "
        f"({item.get('paper', '')} {item.get('figure', '')}; over loopback, no NIC "
        "interrupts: the client's CPU and the workers')."
    )
    v = make_verdict(
        conds,
        body,
        nums,
        heads=["placement", "load", "achieved QPS", "p50", "p99"],
        rows=rows,
        paper=paper_says(item),
        figures=[
            (
                "latency_vs_throughput",
                caption,
                lambda o: F.latency_vs_load(data.combined(), o, x="achieved_qps"),
            )
        ],
    )
    return needs_text(v, why) if why else v


def paper_text(item: dict, key: str) -> tuple[list[str], list[list[str]]] | None:
    """The paper's words for an item whose figure gives no numbers (items.toml ``key``)."""
    paper = item.get(key) or {}
    return (["", "the paper"], [[k, str(v)] for k, v in paper.items()]) if paper else None


def get_number(d: dict, *path: str) -> float:
    """The number at ``d[path[0]][path[1]]…`` (NaN where there is none)."""
    for k in path:
        d = d.get(k, {}) if isinstance(d, dict) else {}
    return float(d) if isinstance(d, (int, float)) else math.nan
