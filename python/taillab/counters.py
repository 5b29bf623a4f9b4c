"""Performance counters of the worker threads, apps side by side (``counters.html``).

The microarchitectural table of the latency-critical-service characterisation papers (one
column per app: IPC and the L1I, L1D, LLC and branch misses per thousand instructions), from
the ``counters`` section that ``--counters`` writes into each run's ``summary.json`` (schema
``taillab.counters/1``, taillab-counters' ``CountersReport``)::

    {"schema": "taillab.counters/1", "requested": "auto", "kind": "hardware" | "software",
     "note": "why hardware counters are missing" (optional), "scope": "user+kernel" | "user",
     "requests": 2000, "phase_s": 2.0,
     "threads": [{"tid": 1, "name": "taillab-wrk-0",
                  "counts": {"instructions": 3e9, ...}, "running_fraction": {...}}],
     "total": {"instructions": 4e9, "cycles": 2.5e9, "task_clock_ns": 2.5e9, ...},
     "derived": {"ipc": 1.6, "l1i_mpki": 2.0, "l1d_mpki": 10.0, "llc_mpki": 0.5,
                 "branch_mpki": 2.5, "instructions_per_request": 2e6,
                 "cpu_utilization": 0.83, "cpu_us_per_request": 1250.0,
                 "context_switches_per_s": 50.0, "cpu_migrations_per_s": 1.0,
                 "page_faults_per_s": 100.0},
     "missing": {"event": "why it could not be counted"}}

A host without a hardware PMU counts software events only (task clock, context switches,
migrations, page faults); its runs fill the software rows and the page says why the
hardware rows are empty. An app's figure is the mean of its runs' figures (all points).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from . import html
from .html import esc
from .results import Results, read_summary
from .units import number

#: Rows of the table: (column, label, digits). Hardware first, then software.
HARDWARE_ROWS = [
    ("ipc", "IPC (instructions per cycle)", 2),
    ("l1i_mpki", "L1I MPKI", 2),
    ("l1d_mpki", "L1D MPKI", 2),
    ("llc_mpki", "LLC MPKI", 3),
    ("branch_mpki", "branch MPKI", 2),
    ("instructions_per_request", "instructions per request", 0),
]
SOFTWARE_ROWS = [
    ("cpu_us_per_request", "worker CPU per request (µs)", 1),
    ("cpu_utilization", "workers on CPU (fraction of the phase)", 3),
    ("context_switches_per_s", "context switches per s", 0),
    ("cpu_migrations_per_s", "CPU migrations per s", 1),
    ("page_faults_per_s", "page faults per s", 0),
]
METRICS = [c for c, _, _ in HARDWARE_ROWS + SOFTWARE_ROWS]


def run_table(res: Results) -> pd.DataFrame:
    """Per run with a ``counters`` section: ``point``, ``run``, ``app``, ``kind``, ``note``,
    ``threads`` and the derived ``METRICS`` (NaN where not counted)."""
    app_col = res.points["app"] if "app" in res.points else [None] * len(res.points)
    apps = dict(zip(res.points["point"], app_col, strict=True))
    rows = []
    for _, r in res.runs.iterrows():
        s = read_summary(r["path"])
        c = s.get("counters")
        if not isinstance(c, dict):
            continue
        d = c.get("derived") or {}
        row = {
            "point": r["point"],
            "run": r["run"],
            "app": s.get("app") or apps.get(r["point"]) or "?",
            "kind": c.get("kind"),
            "note": c.get("note"),
            "threads": len(c.get("threads") or []),
        }
        row.update({m: number(d.get(m)) for m in METRICS})
        rows.append(row)
    return pd.DataFrame(rows, columns=["point", "run", "app", "kind", "note", "threads", *METRICS])


def app_table(per_run: pd.DataFrame) -> pd.DataFrame:
    """One column per app (in first-seen order), one row per metric: the mean over the
    app's runs; ``runs`` and ``kind`` (``hardware``, ``software`` or ``mixed``) on top."""
    cols = {}
    for app, g in per_run.groupby("app", sort=False):
        kinds = sorted(set(g["kind"].dropna()))
        col = {"runs": float(len(g)), "kind": kinds[0] if len(kinds) == 1 else "mixed"}
        col.update({m: g[m].mean(skipna=True) for m in METRICS})
        cols[app] = col
    return pd.DataFrame(cols, index=["runs", "kind", *METRICS])


def _fmt(v: Any, digits: int) -> str:
    x = number(v)
    if math.isnan(x):
        return '<span class="muted">–</span>'
    return f"{x:,.{digits}f}"


def _runs(n: Any) -> str:
    n = int(n)
    return f"{n} run" if n == 1 else f"{n} runs"


def _table_html(table: pd.DataFrame) -> str:
    apps = list(table.columns)
    head = '<th class="l">per worker thread, measured phase</th>' + "".join(
        f"<th>{esc(a)}</th>" for a in apps
    )
    body = [
        '<tr><td class="l">counted</td>'
        + "".join(
            f"<td>{esc(table.at['kind', a])} ({_runs(table.at['runs', a])})</td>" for a in apps
        )
        + "</tr>"
    ]
    for title, rows in (("hardware counters", HARDWARE_ROWS), ("software counters", SOFTWARE_ROWS)):
        body.append(f'<tr><th class="l" colspan="{len(apps) + 1}">{title}</th></tr>')
        for col, label, digits in rows:
            cells = "".join(f"<td>{_fmt(table.at[col, a], digits)}</td>" for a in apps)
            body.append(f'<tr><td class="l">{esc(label)}</td>{cells}</tr>')
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def page(res: Results) -> str:
    """The whole ``counters.html`` page."""
    per_run = run_table(res)
    parts = [
        '<p><a href="index.html">back to the report</a></p>',
        "<p class=muted>Counted on each worker thread from the start of the measured phase "
        "until the thread ended (<code>--counters</code>); an app's figure is the mean over "
        "its runs. MPKI is misses per thousand instructions. The counts include the "
        "harness's own work on the worker threads: with <code>--wait spin</code> or "
        "<code>hybrid</code> a worker spins while it waits for the next arrival, which adds "
        "instructions at a high IPC; <code>--wait block</code> leaves the app's own.</p>",
    ]
    if per_run.empty:
        parts.append("<p class=muted>No run has counters (run with --counters auto).</p>")
    else:
        parts += _tables(per_run)
    name = res.root.name
    return html.document(f"counters: {name}", parts, heading=f"Performance counters: {name}")


def _tables(per_run: pd.DataFrame) -> list[str]:
    """The apps side by side, why hardware counters are missing, and the runs one by one."""
    parts = [_table_html(app_table(per_run))]
    notes = sorted(set(per_run["note"].dropna()))
    if notes:
        parts.append(
            '<p class="note">Hardware counters missing on '
            f"{int(per_run['note'].notna().sum())} run(s): "
            + "; ".join(esc(n) for n in notes)
            + "</p>"
        )
    rows = [
        [
            esc(r.point),
            esc(r.run),
            esc(r.app),
            esc(r.kind),
            str(r.threads),
            _fmt(r.ipc, 2),
            _fmt(r.cpu_us_per_request, 1),
        ]
        for r in per_run.itertuples()
    ]
    parts.append("<h2>Per run</h2>")
    heads = ["point", "run", "app", "counted", "threads", "IPC", "CPU µs/request"]
    parts.append(html.table(heads, rows, left=1))
    return parts


def section(res: Results, out_dir: Path) -> str | None:
    """Writes ``counters.html`` into ``out_dir`` and returns the index page's short section;
    None when no run was counted."""
    per_run = run_table(res)
    if per_run.empty:
        return None
    (out_dir / "counters.html").write_text(page(res), encoding="utf-8")
    apps = ", ".join(esc(a) for a in dict.fromkeys(per_run["app"]))
    kinds = ", ".join(sorted(set(per_run["kind"].dropna())))
    return (
        "<h2>Performance counters</h2>"
        f'<p><a href="counters.html">IPC and MPKI per app, side by side</a> '
        f"({apps}; {kinds} counters).</p>"
    )
