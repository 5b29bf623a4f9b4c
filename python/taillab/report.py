"""The HTML report: ``index.html`` plus ``figures/*.png|svg`` in one folder, static files only.

Nothing is fetched when the page is viewed (no scripts, fonts or styles from elsewhere), so the
folder can be zipped, mailed or opened from a laptop offline. Links to the raw files
(summary.json, interval logs, requests.csv) are relative, so moving the results folder together
with its report keeps them working.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from . import anatomy, counters, fit, html, ideal, resources, tailwag
from . import figures as F
from .html import esc
from .results import Results, load, numeric, requests_file
from .units import fmt_ns, fmt_num

#: A section of the page: its HTML for a results folder and the report's folder (drawing
#: figures into ``out_dir/figures`` and writing pages of its own beside ``index.html`` as it
#: needs), or None when the results hold nothing for it.
Section = Callable[[Results, Path], "str | None"]


def _est_cell(p: pd.Series, col: str) -> str:
    est = p.get(col)
    lo, hi = p.get(f"{col}_ci_low"), p.get(f"{col}_ci_high")
    rel = p.get(f"{col}_rel_half_width")
    s = fmt_ns(est)
    if lo is not None and isinstance(lo, (int, float)) and math.isfinite(lo):
        s += f'<br><span class="muted">[{fmt_ns(lo)}, {fmt_ns(hi)}]'
        if isinstance(rel, (int, float)) and math.isfinite(rel):
            pct = 100 * rel
            s += f" ±{pct:.0f}%" if pct >= 10 else f" ±{pct:.2g}%"
        s += "</span>"
    return s


def _over_time_plans(res: Results, pts: pd.DataFrame) -> list[tuple[str, str, Callable]]:
    """Latency-over-time figures for at most three points."""
    out: list[tuple[str, str, Callable]] = []
    # Latency over time: every point would swamp a big sweep, so show the highest-load point
    # of each group (where hiccups and saturation show first) and the lowest overall.
    over = []
    if len(pts):
        srt = pts.sort_values("qps")
        over = list(
            dict.fromkeys(
                [srt.iloc[0]["point"]]
                + [g.iloc[-1]["point"] for _, g in srt.groupby(["app", "config", "threads"])]
            )
        )[:3]
    for pid in over:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(pid))
        out.append(
            (
                f"over_time_{safe}",
                f"Latency over time at point {esc(pid)}: "
                "per-interval sojourn p50/p99 and send-lag p99, first runs.",
                lambda o, pid=pid: F.latency_over_time(res, o, point=pid, max_runs=2),
            )
        )
    return out


def _plans(res: Results) -> list[tuple[str, str, Callable]]:
    """Every figure the results can support: (name, caption, draw) plans."""
    pts = res.points[res.points["runs"] > 0]
    plans: list[tuple[str, str, Callable]] = [
        (
            "service_cdf",
            "Service-time CDF per app (TailBench Fig. 2). Log x axis.",
            lambda o: F.service_cdf(res, o),
        ),
        (
            "sojourn_ccdf",
            "Sojourn-time CCDF, one line per load point; y ticks at p90, p99, "
            "p99.9 (Tales of the Tail).",
            lambda o: F.sojourn_ccdf(res, o),
        ),
    ]
    if pts["qps"].nunique() > 1:
        plans.append(
            (
                "latency_vs_load",
                "Sojourn mean, p95, p99 vs offered load with 95% CI bars (TailBench Fig. 3).",
                lambda o: F.latency_vs_load(res, o),
            )
        )
        if numeric(pts, "utilization").size and pd.notna(numeric(pts, "utilization")).all():
            plans.append(
                (
                    "latency_vs_utilization",
                    "The same against utilization "
                    "ρ = achieved QPS × mean service time / threads (TailBench Fig. 6).",
                    lambda o: F.latency_vs_load(res, o, x="utilization"),
                )
            )
    if pts["threads"].nunique() > 1:
        plans.append(
            (
                "thread_scaling",
                "p95 vs load, one line per thread count (TailBench Fig. 4).",
                lambda o: F.thread_scaling(res, o),
            )
        )
    if pts["config"].nunique() > 1:
        plans.append(
            (
                "config_comparison",
                "p95 vs load per configuration: integrated, "
                "loopback, networked (TailBench Fig. 5).",
                lambda o: F.config_comparison(res, o),
            )
        )
    if "setting" in pts and pts["setting"].nunique() > 1:
        plans.append(
            (
                "setting_comparison",
                "p95 vs load, one line per value of the sweep's other axes "
                "(the configurations side by side).",
                lambda o: F.setting_comparison(res, o),
            )
        )
    plans += _over_time_plans(res, pts)
    plans.extend(ideal.figure_plans(res))
    plans.append(
        (
            "checks_panel",
            "Self-checks of every run (red: failed; the run is kept and marked, never dropped).",
            lambda o: F.checks_panel(res, o),
        )
    )
    return plans


def _heading(res: Results, out_dir: Path) -> str:
    """What the results are, and the runs that failed a check or points still running."""
    nruns = len(res.runs)
    nfail = int((~res.runs["checks_ok"].astype(bool)).sum()) if nruns else 0
    parts = [
        f'<p class="muted">{esc(res.kind)} · {len(res.points)} point(s) · {nruns} '
        f"run(s) · results in <code>{esc(res.root)}</code></p>"
    ]
    if nfail:
        failed = res.runs[~res.runs["checks_ok"].astype(bool)]
        parts.append(
            f'<p class="note"><span class="fail">{nfail} of {nruns} run(s) failed a '
            "self-check</span>: "
            + ", ".join(
                f"{esc(p)} #{r} ({esc(c)})"
                for p, r, c in zip(
                    failed["point"], failed["run"], failed["failed_checks"], strict=True
                )
            )
            + ". Their numbers are included below; read them with care.</p>"
        )
    pend = res.points[(res.points["runs"] > 0) & ~res.points["aggregated"].astype(bool)]
    if res.experiment is not None and len(pend):
        parts.append(
            '<p class="note">Points without aggregate.json (still running or '
            "interrupted): "
            + ", ".join(esc(p) for p in pend["point"])
            + ". Their values merge the finished runs and carry no CI.</p>"
        )
    return "\n".join(parts)


def _points(res: Results, out_dir: Path) -> str:
    """One row per point: its estimates with their CIs, the CI target, the checks."""
    rows = []
    for _, p in res.points.iterrows():
        tm = p.get("target_met")
        target = (
            "–"
            if not p.get("aggregated")
            else ('<span class="ok">met</span>' if tm else '<span class="fail">not met</span>')
            + f" ({fmt_num(100 * float(p.get('target', math.nan)), 3)}%)"
        )
        if isinstance(p.get("stopped"), str) and p.get("stopped"):
            target += f'<br><span class="muted">{esc(p["stopped"])}</span>'
        rf = int(p.get("runs_failed", 0) or 0)
        checks = (
            '<span class="ok">all ok</span>'
            if not rf
            else f'<span class="fail">{rf} run(s) failed</span>'
        )
        rows.append(
            [
                esc(p["point"]),
                esc(p.get("app")),
                esc(p.get("config")),
                esc(p.get("threads")),
                fmt_num(p.get("qps")),
                fmt_num(p.get("achieved_qps")),
                fmt_num(p.get("utilization"), 3),
                esc(p.get("runs")),
                _est_cell(p, "sojourn_mean"),
                _est_cell(p, "sojourn_p95"),
                _est_cell(p, "sojourn_p99"),
                fmt_ns(
                    p.get("merged_sojourn_p999")
                    if pd.notna(p.get("merged_sojourn_p999", math.nan))
                    else p.get("sojourn_p999")
                ),
                target,
                checks,
            ]
        )
    heads = [
        "point",
        "app",
        "config",
        "threads",
        "offered QPS",
        "achieved QPS",
        "ρ",
        "runs",
        "mean",
        "p95",
        "p99",
        "p99.9 (merged)",
        "CI target",
        "checks",
    ]
    return (
        "<h2>Points</h2><p class=muted>Estimates of sojourn time with their 95% CI "
        "and relative half-width; n is the number of runs behind each estimate.</p>\n"
        + html.table(heads, rows, left=3)
    )


def _figures(res: Results, out_dir: Path) -> str:
    """Every figure the results support, drawn into out_dir/figures (or why not)."""
    fig_dir = out_dir / "figures"
    return "\n".join(["<h2>Figures</h2>", *html.figures(fig_dir, F.draw(_plans(res), fig_dir))])


def _runs(res: Results, out_dir: Path) -> str:
    """One row per run: its numbers, its checks and links to its raw files."""
    rows = []
    check_cols = sorted(c for c in res.runs.columns if c.startswith("check_"))
    for _, r in res.runs.iterrows():
        rd = Path(r["path"])
        links = [f'<a href="{esc(html.rel(rd / "summary.json", out_dir))}">summary.json</a>']
        for hl in sorted((rd / "hist").glob("*.hlog")):
            links.append(f'<a href="{esc(html.rel(hl, out_dir))}">{esc(hl.name)}</a>')
        req = requests_file(rd)
        if req is not None:
            links.append(f'<a href="{esc(html.rel(req, out_dir))}">{esc(req.name)}</a>')
        # The harness's one-line verdict shows on hover and, for a failure, in the cell.
        chk = " ".join(
            f'<span class="{"ok" if r[c] else "fail"}" title="{esc(r.get("verdict_" + c[6:]))}">'
            f"{esc(c[6:])}</span>"
            + (
                ""
                if r[c] or pd.isna(r.get("verdict_" + c[6:]))
                else f' <span class="muted">({esc(r.get("verdict_" + c[6:]))})</span>'
            )
            for c in check_cols
            if pd.notna(r[c])
        )
        rows.append(
            [
                esc(r["point"]),
                esc(r["run"]),
                esc(r.get("seed")),
                fmt_num(r.get("achieved_qps")),
                esc(r.get("requests_measured")),
                fmt_ns(r.get("sojourn_p50")),
                fmt_ns(r.get("sojourn_p99")),
                fmt_ns(r.get("sojourn_max")),
                fmt_ns(r.get("send_lag_p99")),
                fmt_ns(r.get("service_mean")),
                chk,
                " · ".join(links),
            ]
        )
    heads = [
        "point",
        "run",
        "seed",
        "achieved QPS",
        "measured",
        "sojourn p50",
        "p99",
        "max",
        "send lag p99",
        "service mean",
        "checks",
        "raw files",
    ]
    return "<h2>Runs</h2>\n" + html.table(heads, rows, left=2)


def _metadata(res: Results, out_dir: Path) -> str:
    """The host, the experiment's parameters and the first run's settings."""
    meta = [["results", f"<code>{esc(res.root)}</code>"], ["kind", esc(res.kind)]]
    for k, v in sorted(res.host.items()):
        meta.append([f"host {esc(k)}", esc(v)])
    if res.experiment:
        meta.append(["taillab", esc(res.experiment.get("taillab"))])
        for k, v in sorted((res.experiment.get("parameters") or {}).items()):
            meta.append([f"parameter {esc(k)}", esc(v)])
    r0 = res.runs.iloc[0] if len(res.runs) else None
    if r0 is not None:
        for k in ("arrival", "wait", "shaper", "duration_s", "interval_s", "started_at"):
            if k in r0 and pd.notna(r0[k]):
                meta.append([esc(k), esc(r0[k])])
        for c in sorted(c for c in res.runs.columns if c.startswith("param_")):
            vals = res.runs[c].dropna().astype(str).unique()
            meta.append([f"app param {esc(c[6:])}", esc(", ".join(vals))])
    return "<h2>Run metadata</h2>\n" + html.table(["key", "value"], meta, left=2)


def _footer(res: Results, out_dir: Path) -> str:
    return (
        '<p class="muted">Written by the taillab Python package. Latencies are '
        "measured from each request's intended send time (no coordinated omission).</p>"
    )


#: The page, top to bottom. Each page module exposes its own section (criterion's report
#: fan-out): adding a kind of result is a function here, not an edit of :func:`render`.
SECTIONS: list[Section] = [
    _heading,
    _points,
    ideal.section,
    anatomy.section,
    _figures,
    fit.section,
    tailwag.section,
    _runs,
    resources.section,
    counters.section,
    _metadata,
    _footer,
]


def render(res: Results, out_dir: Path, sections: list[Section] = SECTIONS) -> str:
    """The report page: ``sections`` walked in order (those with nothing to show left out);
    they draw their figures into ``out_dir/figures`` and may write pages beside it."""
    fig_dir = out_dir / "figures"
    # Figures of an earlier report in the same folder would linger as orphans (e.g. a point
    # that is no longer among those drawn); the folder is ours, so clear our own file kinds.
    for old in list(fig_dir.glob("*.png")) + list(fig_dir.glob("*.svg")):
        old.unlink()
    parts = [s for s in (section(res, out_dir) for section in sections) if s]
    return html.document(f"taillab report: {res.root.name}", parts)


def write_report(results: str | Path | Results, out: str | Path | None = None) -> Path:
    """Write ``<out>/index.html`` (default ``<results>/report``); returns its path."""
    res = results if isinstance(results, Results) else load(results)
    out_dir = Path(out) if out is not None else res.root / "report"
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    page = out_dir / "index.html"
    page.write_text(render(res, out_dir), encoding="utf-8")
    return page
