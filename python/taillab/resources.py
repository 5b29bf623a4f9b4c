"""Resource tables: what every process of a run used, next to the latency it got.

Per point, one row per process kind — the harness, the server and client processes of a
loopback or networked run, each planned-interference process — with CPU %, peak RSS, minor
and major page faults, voluntary and involuntary context switches and I/O bytes: the
run-time statistics tables of profiling studies (TailBench's per-app CPU %, RSS, faults and
context switches; the same under CPU, memory and disk stress) as one page, ``resources.html``.

Sources in ``summary.json``:

* ``environment`` (written by the monitor, over the measured phase): ``harness`` and
  ``extra`` (server/client processes and, in a run with interference, the hogs too), each
  with ``pid``, ``cpu_pct``, ``rss_max_bytes``, ``minflt``, ``majflt``, ``vol_cs``,
  ``invol_cs``; optional ``name``, ``read_bytes``, ``write_bytes``. ``harness.children``
  lists the harness's helper processes by name (``name``, ``pids``, ``cpu_pct``): one row each,
  kind "harness child".
* ``interference`` (schema ``taillab.interference/1``, written by taillab-interfere)::

      {"schema": "taillab.interference/1", "specs": ["cpu:1@cpus=0"],
       "window": "measured" | "whole", "seconds": 10.0,
       "containment": "cgroup" | "process-group",
       "cpu_s": 9.9, "cpu_pct": 99.0,            # all hog processes (cgroup count if any)
       "read_bytes": 0, "write_bytes": 0,         # block layer, /proc/PID/io
       "read_chars": 0, "write_chars": 0,         # read/write calls incl. sockets
       "hogs": [{"spec": "cpu:1@cpus=0", "class": "cpu", "command": [...],
                 "pids": [..], "cpus": "0" | null, "nice": 5 | null,
                 "processes": [{"role": "parent" | "worker" | "server" | "client",
                                "pid": 1, "name": "stress-ng-cpu", "alive": true,
                                "cpu_s": 9.8, "cpu_pct": 98.0, "rss_max_bytes": 1,
                                "minflt": 0, "majflt": 0, "vol_cs": 0, "invol_cs": 0,
                                "read_bytes": 0, "write_bytes": 0,
                                "read_chars": 0, "write_chars": 0}],
                 "cpu_s": .., "cpu_pct": .., "read_bytes": .., "write_bytes": ..,
                 "read_chars": .., "write_chars": ..,
                 "died_early": false,
                 "exit": ["stress-ng parent (pid 1): exit status 0 after stop"],
                 "log": "/path/interfere-0-cpu.log", "log_tail": []}],
       "ok": true, "problems": [], "leftover": [], "log_dir": null}

  A hog process that is also in ``environment.extra`` is shown once, from the interference
  section (it has the role, name and I/O bytes).
* ``profile`` (optional): ``{"status": "written", "svg": "flame.svg", "folded":
  "perf.folded", ...}`` or ``{"status": "skipped", "reason": "..."}``; a ``flame.svg`` in the
  run folder is linked either way.

Figures are per run; a point's row is the mean over its runs (CPU %, counts, bytes) and the
maximum of the peak RSS.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from . import html
from .html import esc
from .results import Results, read_summary
from .units import fmt_bytes, fmt_ns, number

#: Numeric columns of a resource table, in display order.
COLUMNS = [
    "cpu_pct",
    "rss_max_bytes",
    "minflt",
    "majflt",
    "vol_cs",
    "invol_cs",
    "read_bytes",
    "write_bytes",
    "read_chars",
    "write_chars",
]
HEADERS = {
    "cpu_pct": "CPU %",
    "rss_max_bytes": "max RSS",
    "minflt": "minor faults",
    "majflt": "major faults",
    "vol_cs": "voluntary cs",
    "invol_cs": "involuntary cs",
    "read_bytes": "disk read",
    "write_bytes": "disk write",
    "read_chars": "read calls",
    "write_chars": "write calls",
}
_SUMMED = [c for c in COLUMNS if c != "rss_max_bytes"]


def _row(kind: str, process: str, src: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"kind": kind, "process": process, "pid": src.get("pid")}
    for c in COLUMNS:
        row[c] = number(src.get(c))
    row["alive"] = src.get("alive", True) is not False
    return row


def run_processes(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per process of one run's ``summary.json`` (see the module doc for sources)."""
    env = summary.get("environment") or {}
    inter = summary.get("interference") or {}
    hogs = inter.get("hogs") or []
    hog_pids = {p.get("pid") for h in hogs for p in h.get("processes") or []}
    rows = []
    if isinstance(env.get("harness"), dict):
        rows.append(_row("harness", "taillab", env["harness"]))
        # An app's helper processes (translate's Apertium stages), grouped by name.
        for c in env["harness"].get("children") or []:
            if isinstance(c, dict):
                n = len(c.get("pids") or [])
                name = c.get("name") or "child"
                rows.append(_row("harness child", f"{name} ×{n}" if n > 1 else name, c))
    for p in env.get("extra") or []:
        if isinstance(p, dict) and p.get("pid") not in hog_pids:
            rows.append(_row("server/client", p.get("name") or "process", p))
    for h in hogs:
        for p in h.get("processes") or []:
            label = f"{h.get('spec')} {p.get('role')} {p.get('name')}"
            rows.append(_row("interference", label, p))
    return rows


def resource_table(res: Results) -> pd.DataFrame:
    """Per run and process: ``point``, ``run``, ``kind``, ``process``, ``pid`` and ``COLUMNS``.

    Runs whose summary has no ``environment`` section (``--no-monitor``) contribute no rows.
    """
    rows = []
    for _, r in res.runs.iterrows():
        for p in run_processes(read_summary(r["path"])):
            rows.append({"point": r["point"], "run": r["run"], **p})
    cols = ["point", "run", "kind", "process", "pid", *COLUMNS, "alive"]
    return pd.DataFrame(rows, columns=cols)


def point_table(per_run: pd.DataFrame) -> pd.DataFrame:
    """Per point and process kind: processes of the same label within a run are added (two
    ``stress-ng-cpu`` workers are one row with ``n`` = 2), then runs are averaged; the peak
    RSS is the largest seen."""
    if per_run.empty:
        return per_run.assign(n=pd.Series(dtype=int), runs=pd.Series(dtype=int))
    keys = ["point", "kind", "process"]
    agg = {c: (c, lambda s: s.sum(min_count=1)) for c in _SUMMED}
    agg["rss_max_bytes"] = ("rss_max_bytes", "max")
    agg["n"] = ("pid", "count")
    agg["ended_early"] = ("alive", lambda s: int((~s.astype(bool)).sum()))
    within = per_run.groupby([*keys, "run"], sort=False).agg(**agg).reset_index()
    means = {c: (c, "mean") for c in _SUMMED}
    means.update(
        rss_max_bytes=("rss_max_bytes", "max"),
        n=("n", "max"),
        ended_early=("ended_early", "sum"),
        runs=("run", "nunique"),
    )
    return within.groupby(keys, sort=False).agg(**means).reset_index()


def _fmt_count(v: Any) -> str:
    v = number(v)
    return "–" if math.isnan(v) else f"{v:,.0f}"


def _cell(col: str, v: Any) -> str:
    if col == "cpu_pct":
        v = number(v)
        return "–" if math.isnan(v) else f"{v:.1f}"
    if col.endswith("_bytes") or col.endswith("_chars"):
        return fmt_bytes(v)
    return _fmt_count(v)


def _latency(res: Results, point: str) -> str:
    p = res.points[res.points["point"] == point]
    if p.empty:
        return ""
    p = p.iloc[0]
    parts = [f"{esc(p.get('app'))} · {esc(p.get('config'))} · {esc(p.get('threads'))} thr"]
    parts.append(f"offered {_fmt_count(p.get('qps'))} QPS")
    for label, col in (("service p99", "service_p99"), ("sojourn p99", "sojourn_p99")):
        v = p.get(col, p.get(f"merged_{col}"))
        parts.append(f"{label} {fmt_ns(v)}")
    return " · ".join(parts)


def _point_rows(table: pd.DataFrame, res: Results) -> str:
    cols = ["process", "n", *COLUMNS]
    head = "".join(
        f'<th class="{"l" if c == "process" else ""}">{HEADERS.get(c, c)}</th>' for c in cols
    )
    body = []
    for point, g in table.groupby("point", sort=False):
        body.append(
            f'<tr><th class="l" colspan="{len(cols)}">{esc(point)}'
            f' <span class="muted">{_latency(res, point)}</span></th></tr>'
        )
        for _, r in g.iterrows():
            name = f"{esc(r['kind'])}: {esc(r['process'])}"
            if r.get("ended_early"):
                name += f' <span class="fail">({int(r["ended_early"])} ended early)</span>'
            cells = [f'<td class="l">{name}</td>', f"<td>{int(r['n'])}</td>"]
            cells += [f"<td>{_cell(c, r[c])}</td>" for c in COLUMNS]
            body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _run_notes(res: Results, out_dir: Path) -> list[list[str]]:
    """Per run: interference specs and problems, and profile links or skip reasons."""
    rows = []
    for _, r in res.runs.iterrows():
        rd = Path(r["path"])
        s = read_summary(rd)
        inter = s.get("interference") or {}
        prof = s.get("profile") or {}
        notes = []
        if inter:
            specs = ", ".join(esc(x) for x in inter.get("specs") or [])
            cpu = number(inter.get("cpu_pct"))
            cpu_txt = "" if math.isnan(cpu) else f" ({cpu:.0f} % of a CPU)"
            notes.append(f"interference {specs}{cpu_txt}, {esc(inter.get('containment'))}")
            notes += [f'<span class="fail">{esc(p)}</span>' for p in inter.get("problems") or []]
        if (rd / "flame.svg").exists():
            notes.append(f'<a href="{esc(html.rel(rd / "flame.svg", out_dir))}">flame graph</a>')
            if (rd / "perf.folded").exists():
                notes.append(
                    f'<a href="{esc(html.rel(rd / "perf.folded", out_dir))}">perf.folded</a>'
                )
        elif prof.get("status") == "skipped":
            notes.append(f'<span class="muted">profile skipped: {esc(prof.get("reason"))}</span>')
        if notes:
            rows.append([esc(r["point"]), esc(r["run"]), "<br>".join(notes)])
    return rows


def page(res: Results, out_dir: Path) -> str:
    """The whole ``resources.html`` page (for ``out_dir``: its links to flame graphs are
    relative)."""
    table = point_table(resource_table(res))
    parts = [
        '<p><a href="index.html">back to the report</a></p>',
        "<p class=muted>What each process used over the measured phase: CPU as % of one CPU, "
        "peak resident set, page faults, context switches (involuntary ones mean the scheduler "
        "took the CPU away), bytes through the block layer (disk) and through read/write calls "
        "(sockets and page cache included). Per point: mean over runs, largest peak RSS; "
        "n is how many processes of that kind a run had. Interference processes are the "
        "experiment's planned load, not foreign CPU.</p>",
    ]
    if table.empty:
        parts.append(
            "<p class=muted>No run has an environment section (run without --no-monitor).</p>"
        )
    else:
        parts.append(_point_rows(table, res))
    notes = _run_notes(res, out_dir)
    if notes:
        parts.append("<h2>Interference and profiles per run</h2>")
        parts.append(html.table(["point", "run", "notes"], notes, left=3))
    name = res.root.name
    return html.document(f"resources: {name}", parts, heading=f"Resources: {name}")


def section(res: Results, out_dir: Path) -> str:
    """Writes ``resources.html`` into ``out_dir`` and returns the index page's short section:
    a link, and any interference problem (a hog that ended early) in red."""
    (out_dir / "resources.html").write_text(page(res, out_dir), encoding="utf-8")
    problems = []
    for _, r in res.runs.iterrows():
        inter = read_summary(r["path"]).get("interference") or {}
        problems += [f"{r['point']} #{r['run']}: {p}" for p in inter.get("problems") or []]
    out = [
        "<h2>Resources</h2>",
        '<p><a href="resources.html">Per-process resource table</a> (CPU, RSS, faults, '
        "context switches, I/O) of the harness, servers and interference, with flame graphs "
        "where profiled.</p>",
    ]
    if problems:
        out.append(
            '<p class="note"><span class="fail">Interference ended early</span>: '
            + "; ".join(esc(p) for p in problems)
            + "</p>"
        )
    return "\n".join(out)
