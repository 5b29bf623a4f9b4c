"""What every ``taillab reproduce`` rule builds its verdict from: the conditions
(:class:`Cond`), how they make a status (:func:`status_of`), the verdict itself
(:class:`Verdict`, :func:`make_verdict`), a point's numbers (:func:`value`), the small
arithmetic and formatting the rules share, the bar figure most items draw (:func:`bars`), and
what rules in several modules read (a JSON file, a figure kind, a comparison of configurations).

A condition judged on repeated runs carries its :class:`~.judge.Check` (the statistic's 95 %
interval against its threshold, :mod:`.judge`): it holds, fails or is unresolved, and an item
with an unresolved condition is inconclusive, its sentence saying about how many more runs
would resolve it. A condition without one (one run per point, the quick variant, or numbers no
run repeats: a saturation search, a fitted model's table) is a point comparison, and a
verdict made only of those is indicative.

Every rule module (:mod:`taillab.reproduce.rules`) and the page import these public names from
here (and from :mod:`.judge`, the one module below this one); nothing here imports them back.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import figures as F
from .. import ideal
from ..ideal import ideal_points
from ..results import Results
from ..units import CONFIG_ORDER, fmt_ns, unit_for
from .judge import UNRESOLVED, Check, Estimate, compare, value

# A verdict sentence names at most this many failed conditions (the page lists them all).
MAX_LISTED = 3


@dataclass
class Cond:
    """One condition of a verdict rule, evaluated on the data (None: no data for it, or
    unresolved); ``check``: its statistic's interval against its threshold, where it has one
    (:meth:`judged`)."""

    text: str
    ok: bool | None
    primary: bool = False
    check: Check | None = None

    @staticmethod
    def judged(text: str, check: Check, primary: bool = False) -> Cond:
        """The condition ``check`` decides: it holds, fails, is unresolved or has no data."""
        return Cond(text, check.ok, primary, check)

    @property
    def unresolved(self) -> bool:
        return self.check is not None and self.check.outcome == UNRESOLVED

    @property
    def has_interval(self) -> bool:
        """Whether it was judged against its runs' spread (not a point comparison)."""
        return self.check is not None and self.check.est.has_interval


def status_of(conds: list[Cond]) -> str:
    """confirmed / partly / not confirmed / inconclusive from the conditions (module doc). A
    primary condition that fails decides (no run could take that back); otherwise an
    unresolved condition makes it inconclusive: more runs could still move it either way."""
    known = [c for c in conds if c.ok is not None]
    if not known:
        return "inconclusive"
    if any(c.primary and c.ok is False for c in known):
        return "not confirmed"
    if any(c.unresolved for c in conds):
        return "inconclusive"
    if all(c.ok for c in conds):
        return "confirmed"
    return "partly" if any(c.ok for c in known) else "not confirmed"


@dataclass
class Verdict:
    """A rule's outcome: status, the sentence's body (the numbers in words), the numbers
    themselves, the conditions, the per-app/per-case table, the paper's numbers table (when
    the paper gives numbers), the figures to draw, any extra page sections (functions of
    the page's folder returning HTML) and ``needs``: what this host lacks to run the paper's
    experiment, when its runs could not be it (the page then says "needs: …" instead of a
    verdict, the status the numbers give kept in the sentence)."""

    status: str
    body: str
    numbers: dict[str, Any]
    conds: list[Cond] = field(default_factory=list)
    heads: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    paper: tuple[list[str], list[list[str]]] | None = None
    figures: list[tuple[str, str, Callable[[Path], Any]]] = field(default_factory=list)
    sections: list[Callable[[Path], str]] = field(default_factory=list)
    needs: str | None = None

    @property
    def sentence(self) -> str:
        return f"{self.body}: {self.status}"


def resolve_text(c: Cond) -> str:
    """An unresolved condition as the sentence names it: with about how many more runs (each
    as long as these) would put its interval on one side of the threshold."""
    more = c.check.more_runs if c.check is not None else None
    if more is None:
        return f"{c.text} (its estimate sits on the threshold)"
    return f"{c.text} (about {more} more run{'s' if more > 1 else ''} a point)"


def make_verdict(conds: list[Cond], body: str, numbers: dict, **kw) -> Verdict:
    status = status_of(conds)
    failed = [c.text for c in conds if c.ok is False]
    unresolved = [resolve_text(c) for c in conds if c.unresolved]
    nodata = [c.text for c in conds if c.ok is None and not c.unresolved]
    sentence = body
    if unresolved:
        sentence += "; unresolved by its runs: " + ", ".join(unresolved[:MAX_LISTED])
        if len(unresolved) > MAX_LISTED:
            sentence += f" and {len(unresolved) - MAX_LISTED} more"
    if len(failed) > MAX_LISTED:
        sentence += f"; not met: {len(failed)} of {len(conds)} conditions (first: {failed[0]})"
    elif failed:
        sentence += "; not met: " + ", ".join(failed)
    if nodata:
        sentence += "; no data for: " + ", ".join(nodata)
    return Verdict(status, sentence, numbers, conds, **kw)


def ratio_check(
    data: Any,
    num: pd.Series | None,
    den: pd.Series | None,
    op: str,
    bound: float,
    stat: str = "p99",
    metric: str = "sojourn",
) -> Check:
    """``num``'s ``metric`` ``stat`` ÷ ``den``'s compared with ``bound`` (``op``, as
    :func:`.judge.compare`), its interval from both points' runs (no data without either)."""
    if num is None or den is None:
        return compare(Estimate(math.nan), op, bound)
    return data.judge.check(
        [num, den],
        lambda a, b: ratio_of(a.stat(metric, stat), b.stat(metric, stat)),
        op,
        bound,
        fmt=mult,
    )


def below(
    data: Any, a: pd.Series | None, b: pd.Series | None, stat: str = "p99", metric="sojourn"
) -> Check:
    """``a``'s ``stat`` below ``b``'s: ``b`` ÷ ``a`` > 1 (:func:`ratio_check`)."""
    return ratio_check(data, b, a, ">", 1.0, stat, metric)


def no_data(data: Any, what: str) -> Verdict:
    return Verdict(
        "inconclusive",
        f"no {what} in {data.root} (missing: {', '.join(data.missing) or 'none'})",
        {},
    )


def mult(v: float, digits: int = 3) -> str:
    """A ratio as '1.93×' ('–' when unknown)."""
    if v is None or not math.isfinite(v):
        return "–"
    return f"{v:,.0f}×" if abs(v) >= 100 else f"{v:.{digits}g}×"


def pct(v: float) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{100 * v:.3g} %"


def ok_mark(v: bool | None) -> str:
    if v is None:
        return '<span class="muted">no data</span>'
    return '<span class="ok">yes</span>' if v else '<span class="fail">no</span>'


def ratio_of(a: float, b: float) -> float:
    """a ÷ b, NaN when either is unknown or b is 0 (a verdict then says "no data")."""
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return math.nan
    return a / b if b and math.isfinite(a) and math.isfinite(b) else math.nan


def within_factor(ratio: float, factor: float) -> bool | None:
    """Whether a ratio is within ``factor`` of 1 either way (None when unknown)."""
    if not math.isfinite(ratio) or ratio <= 0:
        return None
    return bool(max(ratio, 1 / ratio) <= factor)


def mean_of(v) -> float:
    v = [x for x in v if x is not None and math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def at_least(v: float, limit: float) -> bool | None:
    return None if not math.isfinite(v) else bool(v >= limit)


def finite_or(v: float, default: float = -math.inf) -> float:
    return v if v is not None and math.isfinite(v) else default


def less_than(a: float, b: float) -> bool | None:
    return None if not (math.isfinite(a) and math.isfinite(b)) else bool(a < b)


def by_axis(pts: pd.DataFrame, key: str) -> dict[str, pd.Series]:
    """A sweep's points by their value on axis ``key`` (e.g. "load.arrival", "case")."""
    col = f"axis_{key}"
    if col not in pts:
        return {}
    return {
        str(r[col]): r for _, r in pts.iterrows() if isinstance(r[col], str) or pd.notna(r[col])
    }


def bars(
    out: Path | None,
    cats: list[str],
    series: dict[str, list[float]],
    ylabel: str,
    title: str,
    log: bool = True,
    hlines: list[tuple[float, str]] | None = None,
    errs: dict[str, list[tuple[float, float]]] | None = None,
):
    """Grouped bars: one group per category, one bar per series (NaN bars left out), with
    optional dotted reference lines and, for the series ``errs`` names, whiskers from each
    bar's low to high value (an interval; NaN ends leave a bar without). The small figure of
    an item that no figure kind of :mod:`taillab.figures` fits (ours beside the paper's, a
    ratio per app)."""
    vals = np.array([[finite_or(v, math.nan) for v in s] for s in series.values()], dtype=float)
    if not cats or not np.isfinite(vals).any():
        raise F.FigureError(f"no values to draw for {title!r}")
    fig, ax = F._new(w=max(5.0, 0.75 * len(cats) * max(1, len(series)) + 2.0), h=4.0)
    ax = ax[0, 0]
    width = 0.8 / len(series)
    x = np.arange(len(cats))
    for i, (name, row) in enumerate(zip(series, vals, strict=True)):
        xs = x + (i - (len(series) - 1) / 2) * width
        ax.bar(xs, row, width, label=name, color=f"C{i}")
        if errs and name in errs:
            lo, hi = (np.array([finite_or(e[j], math.nan) for e in errs[name]]) for j in (0, 1))
            ok = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(row)
            if ok.any():
                below, above = np.maximum(row - lo, 0), np.maximum(hi - row, 0)
                ax.errorbar(
                    xs[ok], row[ok], yerr=[below[ok], above[ok]], fmt="none", ecolor="0.15",
                    capsize=3, lw=1,
                )  # fmt: skip
    for k, (y, lab) in enumerate(hlines or []):
        ax.axhline(
            y, color=f"C{len(series) + k}" if lab else "0.4", ls=":", lw=1.2, label=lab or None
        )
    if log and (vals[np.isfinite(vals)] > 0).all():
        F._plain_log_y(ax)
    ax.set_xticks(
        x, cats, rotation=30 if len(cats) > 4 else 0, ha="right" if len(cats) > 4 else "center"
    )
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    if len(series) > 1 or any(lab for _, lab in hlines or []):
        ax.legend(fontsize="small")
    return F.save(fig, out)


def apps_of(data: Any) -> dict[str, pd.DataFrame]:
    """Points per app, in the item's experiment order."""
    out: dict[str, pd.DataFrame] = {}
    for stem in data.results:
        pts = data.of(stem)
        pts = pts[pts["runs"] > 0]
        if len(pts):
            app = str(pts["app"].iloc[0])
            out[app] = pd.concat([out[app], pts]) if app in out else pts
    return out


def ideal_rows(data: Any, stems: list[str] | None = None) -> pd.DataFrame:
    """Per point of the item: measured ÷ ideal ratios (mean over runs) beside the point."""
    frames = []
    for stem, res in data.results.items():
        if stems is not None and stem not in stems:
            continue
        ip = ideal_points(res)
        if ip.empty:
            continue
        cols = ["point"] + [c for c in ip.columns if c.startswith(("ratio_", "ideal_"))]
        frames.append(data.of(stem).merge(ip[cols], on="point", how="inner"))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def with_ideal(data: Any) -> pd.DataFrame:
    """The item's points with runs, with ratio_*/ideal_* columns where runs have an ideal."""
    pts = data.points[data.points["runs"] > 0] if len(data.points) else data.points
    ip = ideal_rows(data)
    if ip.empty:
        return pts.assign(ratio_p99=math.nan, ideal_p99=math.nan)
    keep = ["stem", "point", "ratio_p99", "ideal_p99"]
    return pts.merge(ip[keep], on=["stem", "point"], how="left")


def in_unit(series_ns: dict[str, list[float]]) -> tuple[dict[str, list[float]], str]:
    """Latencies (ns) scaled to the unit their median reads best in, and that unit."""
    scale, unit = unit_for([v for vs in series_ns.values() for v in vs])
    return {k: [v / scale for v in vs] for k, vs in series_ns.items()}, unit


# Topologies as the page names them: a networked run here is two network namespaces on one
# host joined by a veth pair, not two machines.
CONFIG_LABEL = {"networked": "networked (network namespaces on one host)"}


def read_json(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    return doc if isinstance(doc, dict) else {}


def as_float(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def fig_plan(name: str, res: Results, out: Path, **kw):
    return getattr(F, name)(res, out, **kw)


def ideal_fig_plan(name: str, res: Results, out: Path, **kw):
    return getattr(ideal, name)(res, out, **kw)


def p99_table(by: dict[str, pd.Series]) -> tuple[dict, list[list[str]]]:
    nums, rows = {}, []
    for name, p in by.items():
        v, r = value(p, "sojourn", "p99"), float(p.get("ratio_p99", math.nan))
        nums[name] = {"p99_ns": v, "ideal_p99_ns": float(p.get("ideal_p99", math.nan)), "ratio": r}
        rows.append([name, fmt_ns(v), fmt_ns(nums[name]["ideal_p99_ns"]), mult(r)])
    return nums, rows


def config_ratios(pts: pd.DataFrame) -> dict[str, Any] | None:
    """One app's sojourn p95 per configuration ÷ integrated (None without both integrated and
    loopback)."""
    by = {str(p["config"]): p for _, p in pts.iterrows()}
    if "integrated" not in by or "loopback" not in by:
        return None
    base = value(by["integrated"], "sojourn", "p95")
    out = {"service_mean_ns": value(by["integrated"], "service", "mean"), "p95_ns": {}}
    for c in sorted(by, key=lambda c: CONFIG_ORDER.index(c) if c in CONFIG_ORDER else 9):
        out["p95_ns"][c] = value(by[c], "sojourn", "p95")
    out["ratio"] = {c: ratio_of(v, base) for c, v in out["p95_ns"].items() if c != "integrated"}
    return out


def transport_parts(
    nums: dict[str, dict[str, Any]], data: Any, lead, order: str, figure: str
) -> tuple[list[str], list[list[str]], list]:
    """The table and figures of a comparison of configurations (``nums``: per app, in
    ``order``, :func:`config_ratios`' numbers): the columns after ``lead(app, numbers)``'s
    cells (each configuration's p95, then each ÷ integrated), the rows, and two figures —
    the ratios as bars and the p95 per configuration (TailBench ``figure``)."""
    configs = list(dict.fromkeys(c for v in nums.values() for c in v["p95_ns"]))
    rows = [
        lead(a, v)
        + [fmt_ns(v["p95_ns"].get(c)) for c in configs]
        + [mult(v["ratio"].get(c, math.nan)) for c in configs[1:]]
        for a, v in nums.items()
    ]
    label = [CONFIG_LABEL.get(c, c) for c in configs]
    heads = [f"{c} p95" for c in label] + [f"{c} ÷ integrated" for c in label[1:]]
    series = {
        f"{c} ÷ integrated": [v["ratio"].get(c, math.nan) for v in nums.values()]
        for c in configs[1:]
    }
    networked = "; networked is two network namespaces on this one host."
    figures = [
        (
            "transport_ratio",
            f"Sojourn p95 of each TCP configuration ÷ integrated per app, apps ordered by {order}; "
            "loopback is server and client processes over 127.0.0.1"
            + (networked if "networked" in configs else "."),
            lambda o: bars(
                o,
                list(nums),
                series,
                "p95 ÷ integrated (log scale)",
                "Transport cost by request length",
                hlines=[(1.0, "equal")],
            ),
        ),
        (
            "config_comparison",
            f"Sojourn p95 per configuration and app (TailBench {figure}).",
            lambda o: fig_plan("config_comparison", data.combined(), o),
        ),
    ]
    return heads, rows, figures


def group_tag(point_id: str) -> str:
    """The saturation folder of a point's group: its id with the rate set to 0."""
    return re.sub(r"^([^-]+-t\d+-q)[^-]*", r"\g<1>0", point_id)


def load_name(p: pd.Series) -> str:
    f = p.get("load_frac")
    if isinstance(f, float) and math.isfinite(f):
        return f"{100 * f:.0f} % load"
    return f"{float(p['qps']):,.0f} QPS"
