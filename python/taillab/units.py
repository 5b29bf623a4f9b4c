"""Units and number formats: latencies are stored in ns everywhere, and only here become text.

A leaf module (it imports nothing of taillab's): every page, figure and summary formats its
numbers through it, so a latency reads the same in a table, an axis label and a sentence.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np

#: Time units from the largest down: (ns per unit, label).
UNITS = [(1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")]

#: The configurations in the order the figures and tables show them: the harness's own
#: queue first, then one host over loopback, then two hosts (TailBench Fig. 5).
CONFIG_ORDER = ["integrated", "loopback", "networked"]


def fmt_ns(v: Any) -> str:
    """A latency in ns as 3 significant digits in a readable unit ('1.23 ms'); '–' when unknown."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return "–"
    if not math.isfinite(v):
        return "–"
    for scale, unit in UNITS:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {unit}"
    return f"{v:.3g} ns"


def fmt_num(v: Any, digits: int = 4) -> str:
    """A number with ``digits`` significant digits and thousands separators (whole above a
    million); text that is no number comes back HTML-escaped, '–' for NaN and infinities."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return html.escape(str(v))
    if not math.isfinite(v):
        return "–"
    return f"{v:,.{digits}g}" if abs(v) < 1e6 else f"{v:,.0f}"


def fmt_bytes(v: Any) -> str:
    """Bytes as 3 significant digits in binary units ('8.72 MiB'); '–' when unknown."""
    v = number(v)
    if math.isnan(v):
        return "–"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.3g} {unit}" if unit != "B" else f"{v:.0f} B"
        v /= 1024
    return "–"


def number(v: Any) -> float:
    """A JSON value as a float: NaN for anything that is not a number (booleans included)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def unit_for(values_ns) -> tuple[float, str]:
    """The largest unit in which the median value is at least 1 (µs for 250_000 ns -> 250 µs)."""
    v = np.asarray(values_ns, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    med = float(np.median(v)) if len(v) else 1.0
    for scale, name in UNITS:
        if med >= scale:
            return scale, name
    return 1.0, "ns"
