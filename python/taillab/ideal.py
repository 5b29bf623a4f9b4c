"""The ideal beside the measured: tables and figures of summary.json's ``ideal`` section.

Each run's ``ideal`` is the replay of its own intended arrivals and measured service times
through an exact queue with the run's workers, discipline and dispatch (see the Rust crate's
``ideal`` module); ``excess`` is measured − ideal per statistic. Measured close to ideal means
the latency is what queueing predicts for those service times; a large excess is what the
harness, the transport or the host added.

Figures (one function each, like :mod:`taillab.figures`):

* :func:`latency_vs_load_ideal` — measured latency vs load with its CI (solid) and the ideal
  with its CI (dashed, shaded), one line pair per thread count: TailBench Fig. 8 (normalized
  p95 against the M/G/n model) with ``normalize=True``.
* :func:`ideal_ccdf` — measured and ideal sojourn CCDF per point (Tales of the Tail Fig. 2).
* :func:`tales_panels` — CCDFs of a sweep over workers or discipline, one line per value with
  its ideal dashed, a panel per load (Tales Fig. 3 and 4; Fig. 1 with ``by="arrival"``).
* :func:`load_over_time` — achieved rate per interval: a load profile's steps, ramp or sine.

Tables: :func:`ideal_runs` (one row per run), :func:`ideal_points` (per point, with Student-t
CIs over runs) and :func:`excess_html` (the report's excess table).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from . import figures as F
from . import html
from .hlog import Dist
from .html import esc
from .results import Results, numeric, read_summary
from .units import fmt_ns

STATS = ["mean", "p50", "p90", "p95", "p99", "p999", "max"]
_TICKS = {1.0: "p0", 0.1: "p90", 0.01: "p99", 0.001: "p99.9", 1e-4: "p99.99"}
PROFILE_KINDS = ("steps:", "ramp:", "sine:", "trace:", "mmpp:")


def ideal_runs(res: Results) -> pd.DataFrame:
    """One row per run that has an ideal: ``point``, ``run``, ``threads``, ``discipline``,
    ``dispatch``, ``arrival``, ``qps`` (offered), ``utilization``, and per statistic s in
    mean, p50, p90, p95, p99, p999, max: ``measured_s``, ``ideal_s``, ``excess_s`` (ns) and
    ``ratio_s`` (measured ÷ ideal). Runs without an ideal are left out; their reason is in
    ``Results.runs["ideal_skipped"]``."""
    rows = []
    for _, r in res.runs.iterrows():
        doc = read_summary(r["path"])
        ideal = doc.get("ideal")
        if not isinstance(ideal, dict):
            continue
        soj = (doc.get("latency_ns") or {}).get("sojourn") or {}
        row = {
            "point": r["point"],
            "run": r["run"],
            "threads": doc.get("threads"),
            "discipline": doc.get("discipline", "fifo"),
            "dispatch": doc.get("dispatch", "shared"),
            "arrival": doc.get("arrival"),
            "qps": doc.get("offered_qps", math.nan),
            "utilization": doc.get("utilization", math.nan),
        }
        for s in STATS:
            row[f"measured_{s}"] = float(soj.get(s, math.nan))
            row[f"ideal_{s}"] = float((ideal.get("sojourn") or {}).get(s, math.nan))
            row[f"excess_{s}"] = float((ideal.get("excess") or {}).get(s, math.nan))
            row[f"ratio_{s}"] = float((ideal.get("ratio") or {}).get(s, math.nan))
        rows.append(row)
    cols = ["point", "run", "threads", "discipline", "dispatch", "arrival", "qps", "utilization"]
    cols += [f"{k}_{s}" for k in ("measured", "ideal", "excess", "ratio") for s in STATS]
    return pd.DataFrame(rows, columns=cols)


def _t_ci(v: np.ndarray) -> tuple[float, float, float]:
    """Mean and 95 % Student-t interval over per-run values (the harness's CI method)."""
    from scipy import stats as sps

    v = v[np.isfinite(v)]
    if len(v) == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if len(v) < 2:
        return m, math.nan, math.nan
    h = float(sps.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return m, m - h, m + h


def ideal_points(res: Results) -> pd.DataFrame:
    """Per point: ``ideal_<s>`` and ``excess_<s>`` (mean over runs) with ``_ci_low`` and
    ``_ci_high`` (95 % Student-t over runs; NaN with one run), ``runs_with_ideal``, and the
    point's ``qps``, ``threads``, ``app``, ``config``, ``utilization``, ``discipline``,
    ``dispatch``, ``arrival`` (from its first run)."""
    per = ideal_runs(res)
    rows = []
    for _, p in res.points.iterrows():
        sel = per[per["point"] == p["point"]]
        if sel.empty:
            continue
        row = {k: p.get(k) for k in ("point", "qps", "threads", "app", "config", "utilization")}
        for k in ("discipline", "dispatch", "arrival"):
            row[k] = sel[k].iloc[0]
        row["runs_with_ideal"] = len(sel)
        for kind in ("ideal", "excess", "ratio"):
            for s in STATS:
                est, lo, hi = _t_ci(sel[f"{kind}_{s}"].to_numpy(dtype=float))
                row[f"{kind}_{s}"], row[f"{kind}_{s}_ci_low"], row[f"{kind}_{s}_ci_high"] = (
                    est,
                    lo,
                    hi,
                )
        rows.append(row)
    return pd.DataFrame(rows)


def _require(res: Results) -> pd.DataFrame:
    ip = ideal_points(res)
    if ip.empty:
        raise F.FigureError(
            f"no run in {res.root} has an ideal (summary.json 'ideal'): runs need their "
            "per-request records (kept when they fit --max-record-mem)"
        )
    return ip


def latency_vs_load_ideal(
    res: Results, out=None, stat: str = "p99", x: str = "qps", normalize: bool = False
) -> Figure:
    """Measured ``stat`` vs load with 95 % CI bars (solid) and the ideal with its CI (dashed,
    shaded), one colour per thread count, a panel per (app, config).

    ``normalize=True`` divides by the measured value at the lowest load with the fewest
    threads: TailBench Fig. 8's view of how far each thread count scales against M/G/n."""
    ip = _require(res)
    pts = res.points[res.points["runs"] > 0].merge(
        ip[["point"] + [c for c in ip.columns if c.startswith("ideal_")]], on="point", how="inner"
    )
    col, icol = f"sojourn_{stat}", f"ideal_{stat}"
    if col not in pts:
        raise F.FigureError(f"no sojourn {stat} estimates in {res.root}")
    # One line pair per thread count, and per discipline and dispatch when those vary.
    meta = ip.set_index("point")[["discipline", "dispatch"]]
    pts = pts.join(meta, on="point")
    line_keys = ["threads"] + [k for k in ("discipline", "dispatch") if pts[k].nunique() > 1]
    groups = list(pts.groupby(["app", "config"], sort=True))
    ncols = min(3, len(groups))
    nrows = (len(groups) + ncols - 1) // ncols
    fig, axes = F._new(
        w=6.4 if ncols == 1 else 5.0 * ncols, h=4.2 * nrows, nrows=nrows, ncols=ncols
    )
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, (keys, g) in zip(axes.flat, groups, strict=False):
        base = 1.0
        if normalize:
            first = g.sort_values(["threads", "qps"]).iloc[0]
            base = float(first[col])
        scale, unit = (1.0, "× lowest-load latency") if normalize else F.unit_for(numeric(g, col))
        div = base * scale
        for i, (lk, sub) in enumerate(sorted(g.groupby(line_keys), key=lambda t: str(t[0]))):
            colour = f"C{i}"
            lk = lk if isinstance(lk, tuple) else (lk,)
            th = f"{lk[0]} thr" + "".join(f", {v}" for v in lk[1:])
            xv, xlabel = F._x_values(sub, x)
            order = np.argsort(xv)
            F._errbar(ax, sub, xv, col, div, color=colour, label=f"{th} measured")
            y = numeric(sub, icol)[order] / div
            lo = numeric(sub, f"{icol}_ci_low")[order] / div
            hi = numeric(sub, f"{icol}_ci_high")[order] / div
            ax.plot(xv[order], y, "--", color=colour, marker="x", label=f"{th} ideal")
            ok = np.isfinite(lo) & np.isfinite(hi)
            if ok.any():
                ax.fill_between(xv[order][ok], lo[ok], hi[ok], color=colour, alpha=0.15, lw=0)
        F._plain_log_y(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"sojourn {F._STAT_LABEL.get(stat, stat)} ({unit})")
        ax.set_title(F._group_label(keys, ["app", "config"]), fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper left")
    kind = "normalized " if normalize else ""
    fig.suptitle(
        f"{kind}sojourn {F._STAT_LABEL.get(stat, stat)} vs load: measured and ideal (95% CI)"
    )
    return F.save(fig, out)


def _ideal_dist(res: Results, point: str) -> Dist | None:
    """The ideal's sojourn distribution of a point from requests.csv (``ideal_completed``)."""
    req = res.requests
    if "ideal_completed" not in req:
        return None
    sel = req[(req["point"] == point)]
    if "measured" in sel:
        sel = sel[sel["measured"] == 1]
    if sel.empty or sel["ideal_completed"].isna().all():
        return None
    v = (sel["ideal_completed"] - sel["intended"]).to_numpy()
    return Dist.from_values(v[v >= 0])


def _ccdf(ax, d: Dist, scale: float, **kw) -> None:
    x, cdf = d.cdf()
    ccdf = 1.0 - cdf
    keep = ccdf > 0
    ax.step(x[keep] / scale, ccdf[keep], where="post", **kw)


def _quantile_marks(ax, row: pd.Series, scale: float, **kw) -> None:
    # Without requests.csv only the ideal's quantiles are known: mark them, draw no line.
    qs = {"p50": 0.5, "p90": 0.1, "p99": 0.01, "p999": 0.001}
    xs = [row.get(f"ideal_{k}", math.nan) / scale for k in qs]
    ax.plot(xs, list(qs.values()), linestyle="none", marker="x", **kw)


def _ccdf_axes(ax, floor: float, unit: str, title: str) -> None:
    ax.set_yscale("log")
    ax.set_ylim(max(floor, 1e-5), 1.0)
    ticks = [t for t in _TICKS if t >= ax.get_ylim()[0]]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_yticklabels([_TICKS[t] for t in ticks])
    ax.set_xlabel(f"sojourn time ({unit})")
    ax.set_ylabel("fraction of requests slower than x")
    ax.set_title(title, fontsize="medium")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="x-small", loc="upper right")


def _curves(res: Results, pts: pd.DataFrame, ip: pd.DataFrame) -> list:
    out = []
    for _, p in pts.iterrows():
        d = res.histogram("sojourn", point=p["point"]) if p["runs"] else None
        if d is not None and d.total:
            irow = ip[ip["point"] == p["point"]]
            out.append((p, d, _ideal_dist(res, p["point"]), irow.iloc[0] if len(irow) else None))
    return out


def ideal_ccdf(res: Results, out=None, max_lines: int = 4) -> Figure:
    """Measured (solid) and ideal (dashed) sojourn CCDF per load point, log y with ticks at
    p90/p99/p99.9 (Tales of the Tail Fig. 2). The ideal is drawn from requests.csv's
    ``ideal_completed`` when the runs saved it, else as marks at its quantiles."""
    ip = _require(res)
    pts = res.points[res.points["point"].isin(ip["point"])]
    pts = F._pick_points(pts.sort_values(["config", "threads", "qps"], kind="stable"), max_lines)
    curves = _curves(res, pts, ip)
    if not curves:
        raise F.FigureError(f"no sojourn samples in {res.root}")
    fig, ax = F._new()
    ax = ax[0, 0]
    scale, unit = F.unit_for(np.concatenate([d.hi for _, d, _, _ in curves]))
    for i, (p, d, idist, irow) in enumerate(curves):
        lab = F._point_label(p, res)
        _ccdf(ax, d, scale, color=f"C{i}", label=f"{lab} measured")
        if idist is not None and idist.total:
            _ccdf(ax, idist, scale, color=f"C{i}", linestyle="--", label=f"{lab} ideal")
        elif irow is not None:
            _quantile_marks(ax, irow, scale, color=f"C{i}", label=f"{lab} ideal (quantiles)")
    floor = min(1e-3, 0.5 / max(d.total for _, d, _, _ in curves))
    _ccdf_axes(ax, floor, unit, "Sojourn CCDF: measured vs ideal replay of the same runs")
    return F.save(fig, out)


def tales_panels(res: Results, out=None, by: str | None = None) -> Figure:
    """CCDFs of a sweep over ``by`` ("threads", "discipline", "dispatch" or "arrival"; by
    default the first that varies), one line per value (measured solid, ideal dashed), one
    panel per offered load: Tales of the Tail Fig. 3 (workers) and Fig. 4 (disciplines), and
    Fig. 1 with ``by="arrival"``."""
    ip = _require(res)
    if by is None:
        by = next(
            (k for k in ("threads", "discipline", "dispatch", "arrival") if ip[k].nunique() > 1),
            None,
        )
    if by is None or ip[by].nunique() < 2:
        raise F.FigureError(
            f"the runs in {res.root} do not vary threads, discipline, dispatch or arrival"
        )
    # Equal utilization across thread counts (Tales scales the rate with the workers): panel by
    # ρ; the other settings that vary stay fixed within a panel.
    key = "utilization" if by == "threads" else "qps"
    fixed = [k for k in ("threads", "discipline", "dispatch", "arrival") if k != by]
    fixed = [k for k in fixed if ip[k].nunique() > 1]
    ip = ip.assign(_load=ip[key].round(2) if key == "utilization" else ip[key])
    ip["_panel"] = list(zip(ip["_load"], *[ip[k].astype(str) for k in fixed], strict=True))
    counts = ip.groupby("_panel")[by].nunique()
    panels = sorted(counts[counts > 1].index)
    if not panels:
        raise F.FigureError(f"no load in {res.root} has runs that differ only in {by}")
    ncols = min(3, len(panels))
    nrows = (len(panels) + ncols - 1) // ncols
    fig, axes = F._new(
        w=6.4 if ncols == 1 else 5.0 * ncols, h=4.2 * nrows, nrows=nrows, ncols=ncols
    )
    for ax in axes.flat[len(panels) :]:
        ax.set_visible(False)
    all_d = []
    for ax, pv in zip(axes.flat, panels, strict=False):
        sel = ip[ip["_panel"] == pv].sort_values(by)
        pts = res.points[res.points["point"].isin(sel["point"])]
        curves = _curves(res, pts, ip)
        if not curves:
            continue
        scale, unit = F.unit_for(np.concatenate([d.hi for _, d, _, _ in curves]))
        for i, (_, d, idist, irow) in enumerate(curves):
            lab = f"{by}={irow[by] if irow is not None else '?'}"
            _ccdf(ax, d, scale, color=f"C{i}", label=f"{lab}")
            if idist is not None and idist.total:
                _ccdf(ax, idist, scale, color=f"C{i}", linestyle="--", label=f"{lab} ideal")
            elif irow is not None:
                _quantile_marks(ax, irow, scale, color=f"C{i}")
            all_d.append(d)
        floor = min(1e-3, 0.5 / max(d.total for _, d, _, _ in curves))
        name = "ρ" if key == "utilization" else "offered QPS"
        rest = "".join(f", {k} {v}" for k, v in zip(fixed, pv[1:], strict=True))
        _ccdf_axes(ax, floor, unit, f"{name} {pv[0]:g}{rest}")
    if not all_d:
        raise F.FigureError(f"no sojourn samples in {res.root}")
    fig.suptitle(f"Sojourn CCDF by {by} (solid: measured, dashed: ideal)")
    return F.save(fig, out)


def load_over_time(res: Results, out=None, max_runs: int = 4) -> Figure:
    """Achieved rate per interval (completions ÷ interval length) over the measured phase,
    one line per run: the steps, ramp or sine of a load profile, or a trace's shape."""
    iv = res.intervals
    iv = iv[(iv["metric"] == "sojourn") & (iv["count"] > 0)]
    if iv.empty:
        raise F.FigureError(f"no interval logs (hist/sojourn.hlog) in {res.root}")
    keys = iv[["point", "run"]].drop_duplicates().sort_values(["point", "run"]).head(max_runs)
    fig, ax = F._new()
    ax = ax[0, 0]
    for _, k in keys.iterrows():
        s = iv[(iv["point"] == k["point"]) & (iv["run"] == k["run"])].sort_values("t_s")
        ax.plot(
            s["t_s"] + s["length_s"] / 2,
            s["count"] / s["length_s"],
            marker=".",
            label=f"{k['point']} run {k['run']}",
        )
    ax.set_xlabel("time into the measured phase (s)")
    ax.set_ylabel("achieved rate (requests/s, per interval)")
    ax.set_title("Load over time")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")
    return F.save(fig, out)


def excess_html(res: Results) -> str:
    """The report's table: per point, measured, ideal and excess (measured − ideal) for mean,
    p99 and p99.9 with the ideal's 95 % CI; empty when no run has an ideal."""
    ip = ideal_points(res)
    if ip.empty:
        return ""
    pts = res.points.set_index("point")
    rows = []
    for _, r in ip.iterrows():
        p = pts.loc[r["point"]] if r["point"] in pts.index else pd.Series(dtype=object)
        cells = [
            esc(r["point"]),
            esc(r.get("threads")),
            esc(r.get("discipline")),
            esc(r.get("dispatch")),
        ]
        for s in ("mean", "p99", "p999"):
            ci = ""
            lo, hi = r.get(f"ideal_{s}_ci_low"), r.get(f"ideal_{s}_ci_high")
            if isinstance(lo, float) and math.isfinite(lo):
                ci = f'<br><span class="muted">[{fmt_ns(lo)}, {fmt_ns(hi)}]</span>'
            ratio = r.get(f"ratio_{s}")
            cells += [
                fmt_ns(p.get(f"sojourn_{s}", math.nan)),
                fmt_ns(r[f"ideal_{s}"]) + ci,
                fmt_ns(r[f"excess_{s}"])
                + (f" ({100 * (ratio - 1):+.1f}%)" if np.isfinite(ratio) else ""),
            ]
        rows.append(cells)
    heads = ["point", "threads", "discipline", "dispatch"]
    for s in ("mean", "p99", "p99.9"):
        heads += [f"{s} measured", f"{s} ideal", f"{s} excess"]
    return (
        "<h2>Measured vs ideal</h2><p class=muted>The ideal replays each run's own arrivals "
        "and measured service times through an exact queue with its workers, discipline and "
        "dispatch; excess = measured − ideal (mean over runs, ideal with its 95% CI). A large "
        "excess is latency that queueing does not explain.</p>" + html.table(heads, rows, left=4)
    )


def section(res: Results, out_dir: Path) -> str | None:
    """The report's section: :func:`excess_html`, or None when no run has an ideal."""
    return excess_html(res) or None


def figure_plans(res: Results) -> list[tuple[str, str, object]]:
    """The report's figures of this module that ``res`` can support: (name, caption, draw)."""
    if ideal_runs(res).empty:
        plans = []
    else:
        pts = res.points[res.points["runs"] > 0]
        plans = [
            (
                "ideal_ccdf",
                "Sojourn CCDF, measured (solid) and the ideal replay of the same runs (dashed) "
                "(Tales of the Tail Fig. 2).",
                lambda o: ideal_ccdf(res, o),
            )
        ]
        if pts["qps"].nunique() > 1:
            plans.append(
                (
                    "latency_vs_load_ideal",
                    "Sojourn p99 vs load, measured with 95% CI bars and the ideal dashed with its "
                    "CI shaded, per thread count.",
                    lambda o: latency_vs_load_ideal(res, o),
                )
            )
            if pts["threads"].nunique() > 1:
                plans.append(
                    (
                        "latency_vs_load_ideal_normalized",
                        "p95 normalized to the lowest-load latency, measured vs the M/G/n ideal "
                        "per thread count (TailBench Fig. 8).",
                        lambda o: latency_vs_load_ideal(res, o, stat="p95", normalize=True),
                    )
                )
        per = ideal_runs(res)
        for by in ("threads", "discipline", "dispatch", "arrival"):
            if per[by].nunique() > 1:
                plans.append(
                    (
                        f"tales_by_{by}",
                        f"Sojourn CCDF by {by}, measured and ideal (Tales of the Tail Fig. 3/4).",
                        lambda o, by=by: tales_panels(res, o, by=by),
                    )
                )
    arrivals = res.runs.get("arrival", pd.Series(dtype=object)).dropna().astype(str)
    if arrivals.str.startswith(PROFILE_KINDS).any():
        plans.append(
            (
                "load_over_time",
                "Achieved rate per interval: the load profile (or trace) over the measured phase.",
                lambda o: load_over_time(res, o),
            )
        )
    return plans
