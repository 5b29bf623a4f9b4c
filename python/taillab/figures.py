"""One function per figure kind; each returns a matplotlib Figure and, given ``out``, writes
``out.png`` and ``out.svg``.

The figures are those of the papers taillab reproduces: TailBench (Kasture & Sanchez, IISWC
2016) Fig. 2 (service-time CDF per app), Fig. 3/6 (latency vs load), Fig. 4 (thread scaling),
Fig. 5 (integrated vs loopback vs networked), and Tales of the Tail (Li et al., SoCC 2014)
latency CCDFs on a log y axis. Latencies are stored in ns; axes pick us/ms/s from the data.

Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot), so nothing depends on a
display or global state and the Agg canvas renders PNG headless.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before anything imports pyplot: reports are drawn headless

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FixedLocator, LogFormatter, NullLocator  # noqa: E402

from .errors import TaillabError  # noqa: E402
from .hlog import Dist  # noqa: E402
from .mixture import parse_components  # noqa: E402
from .results import Results, numeric  # noqa: E402
from .units import CONFIG_ORDER, unit_for  # noqa: E402

_STAT_LABEL = {
    "mean": "mean",
    "p50": "p50",
    "p90": "p90",
    "p95": "p95",
    "p99": "p99",
    "p999": "p99.9",
}


class FigureError(TaillabError):
    """The results hold no data for the figure asked for."""


def draw(plans, fig_dir: Path) -> list[tuple[str, str, str]]:
    """Draw each (name, caption, draw) plan into ``fig_dir/name``: (name, caption, error)
    triples, the error empty when drawn and else why the data cannot support the figure."""
    done = []
    for name, caption, plot in plans:
        try:
            plot(fig_dir / name)
            done.append((name, caption, ""))
        except FigureError as e:
            done.append((name, caption, str(e)))
    return done


def save(fig: Figure, out: str | Path | None) -> Figure:
    """Write ``out.png`` (150 dpi) and ``out.svg`` when ``out`` is given; return the figure."""
    if out is not None:
        out = Path(out)
        # A name may hold dots (a point id with `scale-1.5`): only .png/.svg is a suffix.
        if out.suffix in (".png", ".svg"):
            out = out.with_suffix("")
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out.with_name(out.name + ".png"), dpi=150)
        # The PNG draw already placed every axes; freezing that layout for the SVG halves the
        # cost (constrained layout measures every tick label on each draw).
        engine = fig.get_layout_engine()
        fig.set_layout_engine("none")
        fig.savefig(out.with_name(out.name + ".svg"))
        fig.set_layout_engine(engine)
    return fig


def _new(w=6.4, h=4.2, nrows=1, ncols=1, **kw):
    fig = Figure(figsize=(w, h), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def _plain_log_x(ax) -> None:
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(_PlainLog(labelOnlyBase=False))
    ax.xaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.5)))


def _plain_log_y(ax) -> None:
    """Log y axis labelled 200, 500, 1000 rather than 2x10^2: easier to read off a value.

    LogFormatter labels minor ticks only when the axis spans few decades, which also keeps
    the number of tick labels (the main cost of drawing) small.
    """
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(_PlainLog(labelOnlyBase=False))
    ax.yaxis.set_minor_formatter(_PlainLog(labelOnlyBase=False, minor_thresholds=(1, 0.5)))


class _PlainLog(LogFormatter):
    # Plain numbers ("0.2", "500", "2000") whatever the decade; matplotlib's default switches
    # to "1e-01" outside [1, 10^4].
    def _num_to_string(self, x, vmin, vmax):
        return f"{x:g}"


def _group_label(keys, names) -> str:
    keys = keys if isinstance(keys, tuple) else (keys,)
    return ", ".join(
        str(k) if n == "setting" else f"{n}={k}"
        for n, k in zip(names, keys, strict=False)
        if not (n == "setting" and k == "")
    )


def service_cdf(res: Results, out=None, metric: str = "service") -> Figure:
    """CDF of service times, one line per app (TailBench Fig. 2), log x axis.

    Each app's distribution merges the interval logs of all its runs; ``metric`` may name any
    other logged time (e.g. "sojourn").
    """
    fig, ax = _new()
    ax = ax[0, 0]
    curves = []
    for app in sorted(res.runs["app"].dropna().unique()):
        runs = res.runs[res.runs["app"] == app]
        d = Dist.merge([res._run_dist(Path(p), metric) for p in runs["path"]])
        if d.total:
            curves.append((app, d))
    if not curves:
        raise FigureError(f"no {metric} samples in {res.root}: runs have no hist/{metric}.hlog")
    scale, unit = unit_for(np.concatenate([d.hi for _, d in curves]))
    for app, d in curves:
        x, y = d.cdf()
        ax.step(np.maximum(x, 1) / scale, y, where="post", label=f"{app} (n={d.total:,})")
    _plain_log_x(ax)
    ax.set_ylim(0, 1.005)
    ax.set_xlabel(f"{metric} time ({unit}, log scale)")
    ax.set_ylabel("fraction of requests ≤ x")
    ax.set_title(f"{metric.capitalize()} time CDF per app")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    return save(fig, out)


def service_fit(fit: dict, out=None) -> Figure:
    """Measured vs fitted service time (TailWAG Fig. 5): density of ln(x) and CDF, log x.

    ``fit`` is one entry of fit.json (``taillab.fit``): measured curves and the fitted
    components. Measured: grey bars and a black step CDF; fitted: a red line, each component
    dashed, so a mode the fit missed or invented shows as a gap between bars and line.
    """
    if "curves" not in fit or not fit.get("components"):
        raise FigureError(f"fit of point {fit.get('point')!r} has no curves or components")
    mix = parse_components(fit["components"])
    c = fit["curves"]
    edges = np.asarray(c["edges_ns"], dtype=float)
    scale, unit = unit_for(edges)
    fig, axes = _new(w=10.0, h=4.0, ncols=2)
    ax_d, ax_c = axes[0]
    ax_d.stairs(c["density"], edges / scale, fill=True, color="0.8", label="measured")
    t = np.linspace(np.log(edges[0]), np.log(edges[-1]), 400)
    parts = mix.log_pdf_components(t)
    x = np.exp(t) / scale
    if parts.shape[1] > 1:
        for i in range(parts.shape[1]):
            ax_d.plot(x, parts[:, i], "--", color="tab:red", lw=0.9, alpha=0.7)
    ax_d.plot(x, parts.sum(axis=1), color="tab:red", label=f"fit, {parts.shape[1]} component(s)")
    _plain_log_x(ax_d)
    ax_d.set_xlabel(f"service time ({unit}, log scale)")
    ax_d.set_ylabel("density of ln(service time)")
    ax_d.legend(fontsize="small")
    gx = np.asarray(c["cdf_ns"], dtype=float)
    ax_c.step(gx / scale, c["cdf"], where="post", color="black", label="measured")
    ax_c.plot(gx / scale, mix.cdf(gx), color="tab:red", label="fit")
    _plain_log_x(ax_c)
    ax_c.set_ylim(0, 1.005)
    ax_c.set_xlabel(f"service time ({unit}, log scale)")
    ax_c.set_ylabel("fraction of requests ≤ x")
    ax_c.legend(fontsize="small", loc="lower right")
    for ax in (ax_d, ax_c):
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle(
        f"Service-time fit, point {fit.get('point')}: n={fit.get('n', 0):,}, "
        f"KS {fit.get('ks', float('nan')):.4f}"
    )
    return save(fig, out)


def _validation_x(t: pd.DataFrame) -> tuple[np.ndarray, str]:
    load = t["load"].to_numpy(dtype=float)
    if np.isfinite(load).all():
        return 100 * load, "load (% of saturation)"
    return t["qps"].to_numpy(dtype=float), "offered load (QPS)"


def validation_load(table: pd.DataFrame, out=None, stats=("mean", "p95", "p99")) -> Figure:
    """Measured (solid) vs synthetic (dashed) sojourn mean/p95/p99 vs load, one panel per
    worker count (TailWAG Fig. 8). ``table`` is :func:`taillab.tailwag.error_table`'s."""
    if table.empty:
        raise FigureError("no matched points to plot")
    groups = list(table.sort_values("qps").groupby("threads"))
    fig, axes = _new(w=5.0 * len(groups), h=4.2, ncols=len(groups))
    scale, unit = unit_for(table[[f"measured_{s}" for s in stats]].to_numpy().ravel())
    for ax, (threads, g) in zip(axes.flat, groups, strict=True):
        x, xlabel = _validation_x(g)
        for i, s in enumerate(stats):
            ax.plot(x, g[f"measured_{s}"] / scale, "-o", color=f"C{i}")
            ax.plot(x, g[f"synthetic_{s}"] / scale, "--s", color=f"C{i}", mfc="none")
        _plain_log_y(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"sojourn ({unit}, log scale)")
        ax.set_title(f"threads={threads}", fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
    # One legend for all panels, outside them: colour = statistic, line style = source.
    handles = [
        Line2D([], [], color=f"C{i}", label=_STAT_LABEL.get(s, s)) for i, s in enumerate(stats)
    ]
    handles += [
        Line2D([], [], color="0.3", marker="o", label="measured"),
        Line2D([], [], color="0.3", ls="--", marker="s", mfc="none", label="synthetic"),
    ]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize="small")
    fig.suptitle("Measured (solid) vs synthetic (dashed) latency")
    return save(fig, out)


def validation_threads(table: pd.DataFrame, out=None, stat: str = "p95") -> Figure:
    """Measured (solid) vs synthetic (dashed) sojourn ``stat`` vs load, one colour per worker
    count (TailWAG Fig. 6)."""
    if table.empty:
        raise FigureError("no matched points to plot")
    fig, ax = _new()
    ax = ax[0, 0]
    scale, unit = unit_for(table[f"measured_{stat}"])
    for i, (threads, g) in enumerate(table.sort_values("qps").groupby("threads")):
        x, xlabel = _validation_x(g)
        c = f"C{i}"
        ax.plot(x, g[f"measured_{stat}"] / scale, "-o", color=c, label=f"{threads} thread(s)")
        ax.plot(x, g[f"synthetic_{stat}"] / scale, "--s", color=c, mfc="none")
    _plain_log_y(ax)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"sojourn {_STAT_LABEL.get(stat, stat)} ({unit}, log scale)")
    ax.set_title(f"Thread scaling: measured (solid) vs synthetic (dashed) {stat}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="upper left")
    return save(fig, out)


def _pick_points(points: pd.DataFrame, limit: int) -> pd.DataFrame:
    if len(points) <= limit:
        return points
    idx = np.unique(np.linspace(0, len(points) - 1, limit).round().astype(int))
    return points.iloc[idx]


def sojourn_ccdf(res: Results, out=None, metric: str = "sojourn", max_lines: int = 8) -> Figure:
    """Complementary CDF of sojourn time, log y with ticks at p90/p99/p99.9 (Tales of the Tail).

    One line per load point (evenly chosen if there are more than ``max_lines``), ordered and
    coloured by offered load. A line that ends early ran out of samples: its tail beyond
    1/count is unknown, which the plot shows rather than extrapolates.
    """
    fig, ax = _new()
    ax = ax[0, 0]
    pts = res.points.sort_values(["config", "threads", "qps"], kind="stable")
    pts = _pick_points(pts, max_lines)
    curves = []
    for _, p in pts.iterrows():
        d = res.histogram(metric, point=p["point"]) if p["runs"] else None
        if d is not None and d.total:
            curves.append((p, d))
    if not curves:
        raise FigureError(f"no {metric} samples in {res.root}: runs have no hist/{metric}.hlog")
    scale, unit = unit_for(np.concatenate([d.hi for _, d in curves]))
    cmap = matplotlib.colormaps["viridis"]
    for i, (p, d) in enumerate(curves):
        x, cdf = d.cdf()
        # P(X > x); the last bucket has CCDF 0, which a log axis cannot show, so stop before it.
        ccdf = 1.0 - cdf
        keep = ccdf > 0
        lab = _point_label(p, res)
        ax.step(
            x[keep] / scale,
            ccdf[keep],
            where="post",
            color=cmap(i / max(1, len(curves) - 1)),
            label=lab,
        )
    ax.set_yscale("log")
    floor = min(1e-3, 0.5 / max(d.total for _, d in curves))
    ax.set_ylim(max(floor, 1e-6), 1.0)
    ticks = [1.0, 0.1, 0.01, 0.001, 1e-4]
    ticks = [t for t in ticks if t >= ax.get_ylim()[0]]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_minor_locator(NullLocator())
    names = {1.0: "p0", 0.1: "p90", 0.01: "p99", 0.001: "p99.9", 1e-4: "p99.99"}
    ax.set_yticklabels([names[t] for t in ticks])
    xs = np.concatenate([d.hi for _, d in curves]) / scale
    if xs.max() / max(xs.min(), 1e-12) > 300:
        _plain_log_x(ax)
    ax.set_xlabel(f"{metric} time ({unit})")
    ax.set_ylabel("fraction of requests slower than x")
    ax.set_title(f"{metric.capitalize()} time CCDF")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize="small", loc="upper right")
    return save(fig, out)


def _point_label(p: pd.Series, res: Results) -> str:
    if res.kind == "run" and len(res.points) == 1:
        return f"{p['app']} {p['config']} {p['qps']:g} QPS"
    parts = [f"{p['qps']:g} QPS"]
    if res.points["threads"].nunique() > 1:
        parts.append(f"{p['threads']} thr")
    if res.points["config"].nunique() > 1:
        parts.append(str(p["config"]))
    if res.points["app"].nunique() > 1:
        parts.append(str(p["app"]))
    return ", ".join(parts)


def _x_values(pts: pd.DataFrame, x: str) -> tuple[np.ndarray, str]:
    if x == "qps":
        return numeric(pts, "qps"), "offered load (QPS)"
    if x == "achieved_qps":
        return numeric(pts, "achieved_qps"), "achieved load (QPS)"
    if x == "utilization":
        return numeric(pts, "utilization"), "utilization ρ = λ·E[S]/threads"
    raise FigureError(f"x must be 'qps', 'achieved_qps' or 'utilization', not {x!r}")


def _errbar(ax, pts: pd.DataFrame, x: np.ndarray, col: str, scale: float, **kw):
    y = numeric(pts, col)
    lo, hi = numeric(pts, f"{col}_ci_low"), numeric(pts, f"{col}_ci_high")
    # Missing CIs (a lone run) draw no bar rather than a zero-width one pretending certainty.
    # A t-interval from few runs can reach below zero; a log axis cannot draw that, so the
    # bar stops at y/20 (still unmistakably long: the tables give the true bounds).
    lo = np.where(np.isfinite(lo), np.maximum(lo, y / 20), y)
    hi = np.where(np.isfinite(hi), hi, y)
    yerr = np.vstack([y - lo, hi - y])
    order = np.argsort(x)
    return ax.errorbar(
        x[order], y[order] / scale, yerr=yerr[:, order] / scale, capsize=3, marker="o", ms=4, **kw
    )


def latency_vs_load(
    res: Results, out=None, x: str = "qps", metric: str = "sojourn", stats=("mean", "p95", "p99")
) -> Figure:
    """Mean, p95 and p99 vs load with 95% CI bars (TailBench Fig. 3 and Fig. 6).

    One panel per (app, config, threads); ``x`` is "qps" (offered), "achieved_qps" or
    "utilization". Log y axis: near saturation the tail grows by decades.
    """
    pts = res.points[res.points["runs"] > 0]
    cols = [f"{metric}_{s}" for s in stats]
    if pts.empty or not any(c in pts for c in cols):
        raise FigureError(f"no {metric} estimates in {res.root} to plot against load")
    keys = ["app", "config", "threads"] + (["setting"] if "setting" in pts else [])
    groups = list(pts.groupby(keys, sort=True))
    fig, axes = _new(
        w=6.4 if len(groups) == 1 else 5.0 * min(3, len(groups)),
        h=4.2 * ((len(groups) + 2) // 3),
        nrows=(len(groups) + 2) // 3,
        ncols=min(3, len(groups)),
    )
    allv = np.concatenate([numeric(pts, c) for c in cols])
    scale, unit = unit_for(allv)
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, (keys, g) in zip(axes.flat, groups, strict=False):
        xv, xlabel = _x_values(g, x)
        for s in stats:
            if f"{metric}_{s}" in g:
                _errbar(ax, g, xv, f"{metric}_{s}", scale, label=_STAT_LABEL.get(s, s))
        _plain_log_y(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{metric} ({unit}, log scale)")
        ax.set_title(_group_label(keys, ["app", "config", "threads", "setting"]), fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left")
    fig.suptitle(f"{metric.capitalize()} latency vs load (bars: 95% CI)")
    return save(fig, out)


def _lines_by(
    res: Results,
    out,
    by: str,
    panel_keys: list[str],
    stat: str,
    metric: str,
    x: str,
    title: str,
    order=None,
) -> Figure:
    pts = res.points[res.points["runs"] > 0]
    col = f"{metric}_{stat}"
    if pts.empty or col not in pts or pts[by].nunique() < 1:
        raise FigureError(f"no {col} estimates in {res.root}")
    if by != "setting" and "setting" in pts and "setting" not in panel_keys:
        # Points that differ in another swept setting get panels of their own.
        panel_keys = [*panel_keys, "setting"]
    groups = list(pts.groupby(panel_keys, sort=True))
    ncols = min(3, len(groups))
    nrows = (len(groups) + ncols - 1) // ncols
    fig, axes = _new(w=6.4 if ncols == 1 else 5.0 * ncols, h=4.2 * nrows, nrows=nrows, ncols=ncols)
    scale, unit = unit_for(numeric(pts, col))
    for ax in axes.flat[len(groups) :]:
        ax.set_visible(False)
    for ax, (keys, g) in zip(axes.flat, groups, strict=False):
        values = list(g[by].unique())
        if order:
            values.sort(key=lambda v: (order.index(v) if v in order else len(order), str(v)))
        else:
            values.sort()
        for v in values:
            sub = g[g[by] == v]
            xv, xlabel = _x_values(sub, x)
            _errbar(ax, sub, xv, col, scale, label=str(v) if by == "setting" else f"{by}={v}")
        _plain_log_y(ax)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(f"{metric} {_STAT_LABEL.get(stat, stat)} ({unit}, log scale)")
        ax.set_title(
            _group_label(keys if isinstance(keys, tuple) else (keys,), panel_keys),
            fontsize="medium",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left")
    fig.suptitle(title)
    return save(fig, out)


def thread_scaling(
    res: Results, out=None, stat: str = "p95", metric: str = "sojourn", x: str = "qps"
) -> Figure:
    """p95 vs QPS, one line per thread count (TailBench Fig. 4); a panel per (app, config)."""
    return _lines_by(
        res,
        out,
        "threads",
        ["app", "config"],
        stat,
        metric,
        x,
        f"Thread scaling: {metric} {_STAT_LABEL.get(stat, stat)} vs load",
    )


def config_comparison(
    res: Results, out=None, stat: str = "p95", metric: str = "sojourn", x: str = "qps"
) -> Figure:
    """Integrated vs loopback vs networked on one plot (TailBench Fig. 5); panel per
    (app, threads)."""
    return _lines_by(
        res,
        out,
        "config",
        ["app", "threads"],
        stat,
        metric,
        x,
        f"Configurations: {metric} {_STAT_LABEL.get(stat, stat)} vs load",
        order=CONFIG_ORDER,
    )


def setting_comparison(
    res: Results, out=None, stat: str = "p95", metric: str = "sojourn", x: str = "qps"
) -> Figure:
    """One line per value of the sweep's other axes (e.g. ``rt_priority=0`` vs ``=10``, an
    interference case, a discipline), panel per (app, config, threads): the side-by-side view of
    any swept setting."""
    return _lines_by(
        res,
        out,
        "setting",
        ["app", "config", "threads"],
        stat,
        metric,
        x,
        f"Settings compared: {metric} {_STAT_LABEL.get(stat, stat)} vs load",
    )


def latency_over_time(
    res: Results, out=None, point: str | None = None, max_runs: int = 4
) -> Figure:
    """Per-interval sojourn p50/p99 and send-lag p99 over the measured phase, one panel per run.

    Shows warmup that was too short (a falling start), hiccups (isolated spikes, with or
    without send lag: a spike in send lag means the load generator, not the server, fell
    behind) and saturation (a steady climb).
    """
    iv = res.intervals
    if point is not None:
        iv = iv[iv["point"] == point]
    if iv.empty:
        raise FigureError(f"no interval logs (hist/*.hlog) for point={point!r} in {res.root}")
    keys = iv[["point", "run"]].drop_duplicates().sort_values(["point", "run"]).head(max_runs)
    n = len(keys)
    fig, axes = _new(w=6.4, h=2.4 * n + 0.8, nrows=n, ncols=1, sharex=True)
    soj = iv[iv["metric"] == "sojourn"]
    scale, unit = unit_for(numeric(soj, "p99") if len(soj) else numeric(iv, "p99"))
    for ax, (_, k) in zip(axes.flat, keys.iterrows(), strict=True):
        sel = iv[(iv["point"] == k["point"]) & (iv["run"] == k["run"])]
        for metric, stat, style in [
            ("sojourn", "p50", "-"),
            ("sojourn", "p99", "-"),
            ("send_lag", "p99", ":"),
        ]:
            s = sel[(sel["metric"] == metric) & (sel["count"] > 0)].sort_values("t_s")
            if len(s):
                ax.plot(
                    s["t_s"] + s["length_s"] / 2,
                    s[stat] / scale,
                    style,
                    marker=".",
                    label=f"{metric} {_STAT_LABEL[stat]}",
                )
        _plain_log_y(ax)
        ax.set_ylabel(f"latency ({unit})")
        title = (
            "run" if res.kind == "run" and len(res.runs) == 1 else f"{k['point']} run {k['run']}"
        )
        ax.set_title(title, fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="x-small", loc="best")
    axes.flat[-1].set_xlabel("time into the measured phase (s)")
    fig.suptitle("Latency over time (per interval)")
    return save(fig, out)


def checks_panel(res: Results, out=None) -> Figure:
    """Grid of runs x self-checks: green passed, red failed, grey not reported."""
    runs = res.runs
    checks = sorted(c for c in runs.columns if c.startswith("check_"))
    if runs.empty or not checks:
        raise FigureError(f"no runs with checks in {res.root}")
    m = np.full((len(runs), len(checks)), 0.5)
    for j, c in enumerate(checks):
        col = runs[c]
        m[:, j] = np.where(col.isna(), 0.5, np.where(col.fillna(False).astype(bool), 1.0, 0.0))
    h = min(0.28 * len(runs) + 1.6, 40)
    fig, ax = _new(w=1.3 * len(checks) + 3.2, h=h)
    ax = ax[0, 0]
    cmap = matplotlib.colors.ListedColormap(["#d62728", "#bbbbbb", "#2ca02c"])
    ax.imshow(m, cmap=cmap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(len(checks)), [c[6:] for c in checks], rotation=30, ha="right")
    labels = [
        f"{p} #{r}" if res.kind != "run" or len(runs) > 1 else "run"
        for p, r in zip(runs["point"], runs["run"], strict=True)
    ]
    ax.set_yticks(range(len(runs)), labels, fontsize="small" if len(runs) < 30 else "xx-small")
    for i in range(len(runs)):
        for j in range(len(checks)):
            ax.text(
                j,
                i,
                {1.0: "ok", 0.0: "FAIL", 0.5: "–"}[m[i, j]],
                ha="center",
                va="center",
                fontsize="x-small",
                color="white",
            )
    failed = int((m == 0).any(axis=1).sum())
    ax.set_title(f"Self-checks: {failed} of {len(runs)} runs failed at least one")
    return save(fig, out)


def compare_load(
    a: Results,
    b: Results,
    out=None,
    stat: str = "p99",
    metric: str = "sojourn",
    x: str = "qps",
    labels=("A", "B"),
) -> Figure:
    """Before/after: ``stat`` vs load for two results folders, A dashed and B solid, with CIs;
    one panel per (app, config, threads) present in either."""
    col = f"{metric}_{stat}"
    pa, pb = a.points[a.points["runs"] > 0], b.points[b.points["runs"] > 0]
    if col not in pa or col not in pb:
        raise FigureError(f"{col} is missing from {a.root} or {b.root}")
    keys = sorted(
        set(map(tuple, pa[["app", "config", "threads"]].astype(str).values))
        | set(map(tuple, pb[["app", "config", "threads"]].astype(str).values))
    )
    ncols = min(3, len(keys))
    nrows = (len(keys) + ncols - 1) // ncols
    fig, axes = _new(w=6.4 if ncols == 1 else 5.0 * ncols, h=4.2 * nrows, nrows=nrows, ncols=ncols)
    scale, unit = unit_for(np.concatenate([numeric(pa, col), numeric(pb, col)]))
    for ax in axes.flat[len(keys) :]:
        ax.set_visible(False)
    for ax, k in zip(axes.flat, keys, strict=False):
        for res_pts, lab, ls in [(pa, labels[0], "--"), (pb, labels[1], "-")]:
            g = res_pts[
                (res_pts[["app", "config", "threads"]].astype(str).values == np.array(k)).all(
                    axis=1
                )
            ]
            if len(g):
                xv, xlabel = _x_values(g, x)
                _errbar(ax, g, xv, col, scale, label=lab, linestyle=ls)
                ax.set_xlabel(xlabel)
        _plain_log_y(ax)
        ax.set_ylabel(f"{metric} {_STAT_LABEL.get(stat, stat)} ({unit}, log scale)")
        ax.set_title(_group_label(k, ["app", "config", "threads"]), fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small", loc="upper left")
    fig.suptitle(f"Before/after: {metric} {_STAT_LABEL.get(stat, stat)} vs load")
    return save(fig, out)


FIGURES = {
    "service_cdf": service_cdf,
    "sojourn_ccdf": sojourn_ccdf,
    "latency_vs_load": latency_vs_load,
    "thread_scaling": thread_scaling,
    "config_comparison": config_comparison,
    "latency_over_time": latency_over_time,
    "checks_panel": checks_panel,
}


#: The parts of a request's sojourn (``--explain``), in the order of its life, with their
#: colours: the harness's and the ideal's parts in greys and blues, the kernel's warm.
ANATOMY_COLOURS = {
    "lag": "#bdbdbd",
    "queue": "#9ecae1",
    "transport": "#dadaeb",
    "run": "#3182bd",
    "fault": "#756bb1",
    "preempted": "#e6550d",
    "wakeup": "#fdae6b",
    "blocked": "#31a354",
    "irq": "#de2d26",
    "softirq": "#fb6a4a",
    "unknown": "#000000",
}


def anatomy_bars(tail: pd.DataFrame, out=None) -> Figure:
    """The slowest requests as stacked bars of their parts (the ``x_<part>`` columns of an
    explained run's records), slowest first: what each slow request spent its time on."""
    if tail.empty:
        raise FigureError("no explained requests (records without x_ columns)")
    tail = tail.sort_values("sojourn", ascending=False)
    scale, unit = unit_for(float(tail["sojourn"].max()))
    fig, ax = _new(7.2, 3.8)
    ax = ax[0][0]
    x = np.arange(len(tail))
    bottom = np.zeros(len(tail))
    for part, colour in ANATOMY_COLOURS.items():
        col = f"x_{part}"
        if col not in tail or not tail[col].any():
            continue
        v = tail[col].to_numpy(dtype=float) / scale
        ax.bar(x, v, bottom=bottom, width=1.0, color=colour, label=part, linewidth=0)
        bottom += v
    ax.set_xlabel(f"the slowest {len(tail)} requests, slowest first")
    ax.set_ylabel(f"sojourn ({unit})")
    ax.set_xlim(-0.5, len(tail) - 0.5)
    ax.legend(fontsize=7, ncols=4, loc="upper right")
    return save(fig, out)


def request_timeline(worst: dict, out=None) -> Figure:
    """One request's life from its intended time (the ``anatomy.worst`` pieces) as one
    horizontal bar coloured by part, each long piece labelled with its culprit."""
    pieces = worst.get("pieces") or []
    if not pieces:
        raise FigureError("the slowest request has no pieces")
    scale, unit = unit_for(float(worst.get("sojourn_ns") or 1))
    fig, ax = _new(7.2, 1.9)
    ax = ax[0][0]
    seen = set()
    total = sum(p["len_ns"] for p in pieces) or 1
    for p in pieces:
        part = p["part"]
        ax.barh(
            0,
            p["len_ns"] / scale,
            left=p["start_ns"] / scale,
            color=ANATOMY_COLOURS.get(part, "#888888"),
            label=None if part in seen else part,
            height=0.6,
        )
        seen.add(part)
        if p.get("culprit") and p["len_ns"] > 0.12 * total:
            ax.text(
                (p["start_ns"] + p["len_ns"] / 2) / scale,
                0.42,
                p["culprit"],
                ha="center",
                fontsize=7,
            )
    ax.set_yticks([])
    ax.set_ylim(-0.5, 0.7)
    ax.set_xlabel(f"time since the request's intended send ({unit})")
    ax.legend(fontsize=7, ncols=6, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    return save(fig, out)
