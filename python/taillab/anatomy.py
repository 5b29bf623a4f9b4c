"""Each slow request explained (``--explain``): the report's anatomy section.

From the ``anatomy`` section that ``--explain`` writes into a run's ``summary.json`` (schema
``taillab.anatomy/1``, taillab-core's ``Anatomy``) and the ``x_<part>`` columns it adds to the
run's records::

    {"schema": "taillab.anatomy/1",
     "traced": {"cpus": [1], "tracepoints": [...], "missing": [...],
                "workers": [{"worker": 0, "tid": 4711}]},
     "cost": {"events": 12000, "events_per_s": 6000.0, "lost": 0, ...},
     "fault_ns": 700.0, "sum_check": {"requests": 4500, "mismatched": 0},
     "threads": [{"worker": 0, "tid": 4711, "serving_ns": ..., ...}],
     "groups": [{"label": "p99", "threshold_ns": ..., "requests": 40, "excess_ns": ...,
                 "share": {"queue": 0.4, "preempted": 0.5, ...}, "tail_ns": {...},
                 "median_ns": {...}, "faults": 0.0, "median_faults": 0.0,
                 "culprits": [{"how": "preempted", "name": "hog", "pid": 7,
                               "total_ns": ..., "requests": 38}]}],
     "worst": {"id": 812, "worker": 0, "sojourn_ns": ..., "faults": 0,
               "pieces": [{"start_ns": 0, "len_ns": ..., "part": "queue"}, ...]}}

Per explained run: each tail group's shares of its excess over the median request and its
culprits, the slowest 1 % as stacked bars (from the records, when the run saved them) and
the slowest request's timeline.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import figures as F
from . import html
from .html import esc
from .results import Results, read_run_requests, read_summary
from .units import fmt_ns

#: Explained runs shown at most (a sweep explained at every point would fill the page).
MAX_RUNS = 4


def explained_runs(res: Results) -> list[tuple[str, int, Path, dict]]:
    """(point, run, folder, anatomy) of each run with an ``anatomy`` section."""
    out = []
    for _, r in res.runs.iterrows():
        a = read_summary(r["path"]).get("anatomy")
        if isinstance(a, dict):
            out.append((str(r["point"]), int(r["run"]), Path(r["path"]), a))
    return out


def slowest(req: pd.DataFrame | None, fraction: float = 0.01) -> pd.DataFrame:
    """The measured requests above the ``1 - fraction`` quantile of sojourn (at least one),
    from records with ``x_`` columns; empty without them."""
    if req is None or "x_run" not in req.columns:
        return pd.DataFrame()
    m = req[req["measured"] == 1] if "measured" in req.columns else req
    if m.empty:
        return pd.DataFrame()
    n = max(1, round(len(m) * fraction))
    return m.nlargest(n, "sojourn")


def _group_table(g: dict) -> str:
    share = g.get("share") or {}
    rows = [
        [
            esc(p),
            f"{100 * s:.1f} %",
            esc(fmt_ns((g.get("tail_ns") or {}).get(p, 0.0))),
            esc(fmt_ns((g.get("median_ns") or {}).get(p, 0.0))),
        ]
        for p, s in sorted(share.items(), key=lambda kv: -abs(kv[1]))
        if abs(s) >= 0.005
    ]
    return html.table(["part", "share of excess", "tail mean", "median mean"], rows)


def _culprits(g: dict) -> str:
    rows = [
        [
            esc(c.get("how")),
            esc(c.get("name")) + (f" (pid {c['pid']})" if c.get("pid") is not None else ""),
            esc(fmt_ns(c.get("total_ns", 0))),
            str(c.get("requests", 0)),
        ]
        for c in g.get("culprits") or []
    ]
    if not rows:
        return '<p class="muted">No task or interrupt took time from these requests.</p>'
    return html.table(["how", "who", "time", "requests"], rows, left=2)


def _groups(a: dict) -> list[str]:
    parts = []
    for g in a.get("groups") or []:
        parts.append(
            f"<h3>Above {esc(g.get('label'))}: {g.get('requests')} requests</h3>"
            f"<p>mean {esc(fmt_ns(g.get('sojourn_ns', 0)))} against the median requests' "
            f"{esc(fmt_ns(g.get('median_sojourn_ns', 0)))}: an excess of "
            f"{esc(fmt_ns(g.get('excess_ns', 0)))}, shared by part below (the shares sum to 100 %)."
            f" Page faults per request: {g.get('faults', 0):.1f} "
            f"(median {g.get('median_faults', 0):.1f}).</p>"
        )
        parts.append(_group_table(g))
        parts.append(_culprits(g))
    return parts


def _figures(point: str, run: int, folder: Path, a: dict, out_dir: Path) -> list[str]:
    fig_dir = out_dir / "figures"
    tag = f"anatomy-{point}-{run}".replace("/", "_")
    tail = slowest(read_run_requests(folder))
    worst = a.get("worst") or {}
    plans = [
        (
            f"{tag}-slowest",
            "The slowest 1 % of the measured requests, each a bar of its parts.",
            lambda o: F.anatomy_bars(tail, o),
        ),
        (
            f"{tag}-worst",
            f"The slowest request ({esc(worst.get('id'))}) from its intended send time.",
            lambda o: F.request_timeline(worst, o),
        ),
    ]
    return html.figures(fig_dir, F.draw(plans, fig_dir))


def _run_part(point: str, run: int, folder: Path, a: dict, out_dir: Path) -> list[str]:
    c, sc = a.get("cost") or {}, a.get("sum_check") or {}
    traced = a.get("traced") or {}
    head = (
        f"<h3>{esc(point)} run {run}</h3><p class=muted>Traced CPUs "
        f"{esc(traced.get('cpus'))}: {c.get('events', 0)} events "
        f"({c.get('events_per_s', 0):.0f}/s), {c.get('lost', 0)} lost; the parts of "
        f"{sc.get('requests', 0) - sc.get('mismatched', 0)} of {sc.get('requests', 0)} requests "
        f"sum to their sojourn. Fault time is estimated ({esc(fmt_ns(a.get('fault_ns', 0)))} "
        "a fault, measured on this host); hypervisor steal shows as the request's own run "
        "time.</p>"
    )
    return [head, *_groups(a), *_figures(point, run, folder, a, out_dir)]


def section(res: Results, out_dir: Path) -> str | None:
    """The index page's anatomy section (figures drawn into ``out_dir/figures``); None when
    no run was explained."""
    runs = explained_runs(res)
    if not runs:
        return None
    parts = ["<h2>Anatomy of the slow requests (--explain)</h2>"]
    for point, run, folder, a in runs[:MAX_RUNS]:
        parts += _run_part(point, run, folder, a, out_dir)
    if len(runs) > MAX_RUNS:
        parts.append(
            f'<p class="muted">{len(runs) - MAX_RUNS} more explained runs: '
            "<code>taillab explain RUN</code> prints each.</p>"
        )
    return "\n".join(parts)
