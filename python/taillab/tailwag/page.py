"""The validation page and its files: ``validation.csv``, ``validation.json``, the figures and
``index.html``, with the fitted components beside TailWAG's Table 2 row (transcribed here).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .. import figures as F
from .. import html
from ..fit import periodic_sentence, selection_lines, speed_sentence
from ..html import esc
from ..results import Results, load
from ..units import fmt_ns
from .summary import summary
from .table import BEYOND, LOADS, STATS, UNRESOLVED, WITHIN, Folders, error_table, pct_text


@dataclass(frozen=True)
class SeedApp:
    """One row of TailWAG's Table 2, as printed (µs; variances of ln(service time)).

    ``first`` is Distribution 1 (mean, variance), whose probability the paper leaves
    implied (1 − the others); ``others`` are (probability, mean, variance) with None where
    the paper prints NA; ``critical`` are Critical Sections 1 and 2 (mean, variance).
    """

    name: str
    first: tuple[float, float]
    others: tuple[tuple[float, float | None, float | None], ...] = ()
    critical: tuple[tuple[float, float], tuple[float, float]] = ((0.0, 0.0), (0.0, 0.0))
    note: str = field(default="")

    def components(self) -> list[dict[str, Any]]:
        """Every distribution with its probability (Distribution 1's implied)."""
        p1 = 1.0 - sum(p for p, _, _ in self.others)
        rows = [{"weight": p1, "mean_us": self.first[0], "log_var": self.first[1]}]
        rows += [{"weight": p, "mean_us": m, "log_var": v} for p, m, v in self.others]
        return rows


TABLE2: dict[str, SeedApp] = {
    a.name: a
    for a in [
        SeedApp("silo", (16.14, 0.288), ((0.001, 59.6, 0.085),), ((3.5, 0.15), (3.5, 0.15))),
        SeedApp(
            "specjbb",
            (11.1, 0.39),
            ((0.03, 30.73, 0.066), (0.03, 200.0, 0.049)),
            ((3.9, 0.1), (3.9, 0.1)),
        ),
        SeedApp("masstree", (105.0, 0.06), ((0.00001, 1400.0, 0.05),), ((3.5, 0.2), (3.5, 0.2))),
        SeedApp("img-dnn", (395.0, 0.007), (), ((6.4, 0.5), (6.4, 0.5))),
        SeedApp(
            "shore",
            (92.8, 0.163),
            ((0.45, 432.0, 0.24), (0.042, 1900.0, 0.124)),
            ((3.9, 0.1), (3.9, 0.1)),
        ),
        SeedApp("xapian", (532.0, 0.3), ((0.378, 1800.0, 0.35),), ((4.2, 0.1), (4.2, 0.1))),
        SeedApp(
            "moses",
            (840.0, 0.133),
            ((0.857, 1525.0, 0.14), (0.0005, 11450.0, 0.54)),
            ((4.9, 0.1), (4.0, 0.1)),
        ),
        SeedApp(
            "sphinx",
            (624_280.0, 0.510),
            ((0.03, None, None),),
            ((50.0, 0.6), (50.0, 0.6)),
            note="Distribution 2 is printed as '3%, NA': its mean and variance are not given.",
        ),
    ]
}


# Which TailBench app each of ours plays the role of (see each app's README).
SEED_APP = {
    "oltp-mem": "silo",
    "middleware": "specjbb",
    "kv": "masstree",
    "img-dnn": "img-dnn",
    "oltp-disk": "shore",
    "search": "xapian",
    "translate": "moses",
    "speech": "sphinx",
}


def table2_rows(app: str | None, fit: dict[str, Any] | None) -> list[list[str]]:
    """Rows of the page's parameter table: our fitted components beside TailWAG's for the
    app's counterpart (``app`` is ours, e.g. "oltp-mem", or a Table 2 name)."""
    seed = TABLE2.get(SEED_APP.get(app or "", app or ""))
    ours = (fit or {}).get("components", [])
    theirs = seed.components() if seed else []

    def num(v, fmt):
        return "–" if v is None or (isinstance(v, float) and not math.isfinite(v)) else fmt(v)

    rows = []
    for i in range(max(len(ours), len(theirs))):
        o = ours[i] if i < len(ours) else {}
        t = theirs[i] if i < len(theirs) else {}
        rows.append(
            [
                f"distribution {i + 1}",
                num(o.get("weight"), lambda v: f"{100 * v:.3g}%"),
                num(o.get("mean_ns"), fmt_ns),
                num(o.get("median_ns"), fmt_ns),
                num(o.get("log_var"), lambda v: f"{v:.3g}"),
                num(t.get("weight"), lambda v: f"{100 * v:.3g}%"),
                num(t.get("mean_us"), lambda v: fmt_ns(1e3 * v)),
                num(t.get("log_var"), lambda v: f"{v:.3g}"),
            ]
        )
    if seed:
        for k, (m, v) in enumerate(seed.critical, start=1):
            rows.append([f"critical section {k}", "", "", "", "", "", fmt_ns(1e3 * m), f"{v:.3g}"])
    return rows


def _figures(table: pd.DataFrame, fig_dir: Path) -> list[tuple[str, str, str]]:
    return F.draw(
        [
            (
                "validation_load",
                "Sojourn mean, p95 and p99 vs load: measured solid, synthetic dashed, one "
                "panel per worker count (TailWAG Fig. 8).",
                lambda o: F.validation_load(table, o),
            ),
            (
                "validation_threads",
                "Sojourn p95 vs load per worker count: measured solid, synthetic dashed "
                "(TailWAG Fig. 6).",
                lambda o: F.validation_threads(table, o),
            ),
        ],
        fig_dir,
    )


def section(res: Results, out_dir: Path) -> str | None:
    """The report's TailWAG section when ``res`` is ``taillab tailwag``'s ``OUT/measured/``
    beside its synthetic twin's ``OUT/validation/``: the average errors and the validation
    figures, redrawn from ``OUT/validation/validation.csv`` into ``out_dir/figures``; None
    for any other results folder."""
    validation_dir = res.root.parent / "validation"
    if res.root.name != "measured" or not (validation_dir / "validation.csv").exists():
        return None
    fig_dir = out_dir / "figures"
    table = pd.read_csv(validation_dir / "validation.csv")
    summ = summary(table, loads=LOADS)
    page = validation_dir / "index.html"
    parts = [
        "<h2>TailWAG validation</h2><p class=muted>The synthetic workload fitted to these runs "
        "against them: mean |synthetic / measured − 1| of sojourn over the one-worker points "
        f"({summ['points']}); the full page: "
        f'<a href="{esc(html.rel(page, out_dir))}">{esc(page.name)}</a>.</p>'
    ]
    parts += _headline(summ)
    rows = []
    for st, v in summ["stats"].items():
        rows.append(
            [st, pct_text(v["mean_abs_error"]).lstrip("+"), f"≤ {v['goal']:.0%}"]
            + [f"{100 * v['tailwag']:.1f}%"]
            + [pct_text(v.get("noise_floor", math.nan)).lstrip("+")]
        )
    heads = ["statistic", "round 1 (in sample)", "goal", "TailWAG", "noise floor"]
    parts.append(html.table(heads, rows))
    parts += html.figures(fig_dir, _figures(table, fig_dir))
    return "\n".join(parts)


def _per_point_out_of_sample(table: pd.DataFrame) -> list[str]:
    """Each point's out-of-sample error ± its standard error, floor and verdict."""
    if "later_error_mean" not in table:
        return []
    rows = []
    for _, r in table[table["later_error_mean"].notna()].iterrows():
        row = [esc(r["threads"]), f"{r['qps']:,.4g}", f"{r['load']:.0%}"]
        for st in STATS:
            row += [
                f"{pct_text(r[f'later_error_{st}'])} ± {100 * r[f'later_error_{st}_se']:.1f}",
                pct_text(r[f"floor_{st}"]).lstrip("+"),
                esc(r[f"verdict_{st}"]),
            ]
        rows.append(row)
    heads = ["threads", "QPS", "load"]
    for st in STATS:
        heads += [f"{st} error ± se", "floor", "verdict"]
    return ["<h2>Per point, out of sample</h2>", html.table(heads, rows, left=0)]


def _headline(summ: dict[str, Any]) -> list[str]:
    """The page's headline: the out-of-sample errors against the floor of the same rounds,
    with every point beyond it named and every unresolved one with the runs it needs."""
    oos = summ.get("out_of_sample")
    if not oos:
        return [
            "<p class=note>One round only: every error below is in sample (the synthetic "
            "workload against the runs it was fitted to); run <code>--rounds 2</code> or more "
            "for the out-of-sample headline.</p>"
        ]
    rows = [
        [
            st,
            pct_text(v["mean_abs_error"]).lstrip("+"),
            pct_text(v["floor"]).lstrip("+"),
            pct_text(v["app_repeat"]).lstrip("+"),
            f"≤ {v['goal']:.0%}",
            f"{v[WITHIN]} / {v[BEYOND]} / {v[UNRESOLVED]}",
            pct_text(summ["stats"][st]["mean_abs_error"]).lstrip("+"),
        ]
        for st, v in oos["stats"].items()
    ]
    heads = ["statistic", "out of sample", "floor", "app vs itself", "goal"]
    heads += ["points within / beyond / unresolved", "round 1 (in sample)"]
    parts = [
        "<h2>Out of sample</h2><p class=muted>The synthetic workload against the app's later "
        f"rounds (fresh runs of both, {oos['points']} one-worker point(s)): mean |synthetic / "
        "measured − 1|, each side's runs of those rounds merged. A point's <i>floor</i> is "
        "the larger of twice its error's standard error (resampling both sides' blocks) and "
        "the app against itself between its rounds (the host's drift); within it the error "
        "cannot be told from zero, beyond it the model errs, and where the floor is above the "
        "goal the runs cannot tell whether the goal is met (unresolved).</p>",
        html.table(heads, rows),
    ]
    for b in oos["beyond"]:
        parts.append(
            f"<p class=fail>beyond the floor: {esc(b['point'])} ({b['load']:.0%} load) "
            f"{b['stat']} {pct_text(b['error'])} ± {100 * b['se']:.1f} (floor "
            f"{100 * b['floor']:.1f} %): {esc(b['term'])}</p>"
        )
    for u in oos["unresolved"]:
        runs = f"; about {u['runs']} blocks per point would resolve it" if u["runs"] else ""
        parts.append(
            f"<p class=muted>unresolved: {esc(u['point'])} {u['stat']} (floor "
            f"{100 * u['floor']:.1f} % above the goal{runs})</p>"
        )
    return parts


def render(
    table: pd.DataFrame,
    out_dir: Path,
    *,
    app: str | None = None,
    fit: dict[str, Any] | None = None,
    measured_root: Path | None = None,
    synthetic_root: Path | None = None,
    point_fits: list[dict[str, Any]] | None = None,
) -> str:
    """The validation page (HTML) for an error table; draws its figures into out_dir.

    ``point_fits``: the fit.json entries of the measured points; their order checks (the
    run's service times replayed in order and shuffled) get a table of their own.
    """
    fig_dir = out_dir / "figures"
    summ = summary(table, loads=LOADS)
    title = f"TailWAG validation{': ' + app if app else ''}"
    parts = []
    if measured_root or synthetic_root:
        parts.append(
            f'<p class="muted">measured <code>{esc(measured_root)}</code> · synthetic '
            f"<code>{esc(synthetic_root)}</code></p>"
        )
    parts += _headline(summ)
    parts += _round1_section(summ, table)
    parts += _per_point_section(table)
    parts += _order_section(point_fits)
    parts.append("<h2>Figures</h2>")
    parts += html.figures(fig_dir, _figures(table, fig_dir))
    parts += _params_section(app, fit)
    return html.document(title, parts)


def _round1_section(summ: dict[str, Any], table: pd.DataFrame) -> list[str]:
    """Round 1's errors against TailWAG's and the goal, the noise floor's and the later
    rounds' columns where there are any, and the later rounds' per-point table."""
    parts: list[str] = []
    parts.append(
        "<h2>Round 1 (in sample)</h2><p class=muted>Mean |synthetic / measured − 1| of sojourn "
        f"time over the one-worker points at {', '.join(f'{x:.0%}' for x in LOADS)} load "
        f"({summ['points']} point(s)), next to TailWAG's (its Fig. 8) and our goal: the "
        "synthetic workload against the very runs it was fitted to, which a flexible enough "
        "model matches whatever it has learnt"
        + (" (the headline above is out of sample)" if "out_of_sample" in summ else "")
        + ".</p>"
    )
    rows = []
    repeat = any("app_repeat" in v for v in summ["stats"].values())
    floor = any("noise_floor" in v for v in summ["stats"].values())
    for st, v in summ["stats"].items():
        verdict = '<span class="ok">met</span>' if v["met"] else '<span class="fail">not met</span>'
        if not v["met"] and v.get("resolvable") is False:
            verdict += " (this host's noise alone is above the goal" + (
                f"; about {v['runs_to_resolve']} runs per point would resolve it)"
                if v.get("runs_to_resolve")
                else ")"
            )
        rows.append(
            [st, pct_text(v["mean_abs_error"]).lstrip("+"), f"≤ {v['goal']:.0%}", verdict]
            + [f"{100 * v['tailwag']:.1f}%"]
            + (
                [
                    pct_text(v.get("noise_floor", math.nan)).lstrip("+"),
                    f"{v.get('beyond_noise', '–')} of {summ['points']}",
                ]
                if floor
                else []
            )
            + (
                [pct_text(v.get(k, math.nan)).lstrip("+") for k in ("later", "app_repeat")]
                if repeat
                else []
            )
        )
    heads = (
        ["statistic", "ours", "goal", "", "TailWAG"]
        + (["noise floor", "points beyond noise"] if floor else [])
        + (["later rounds", "app vs itself"] if repeat else [])
    )
    parts.append(html.table(heads, rows))
    if floor:
        parts.append(
            "<p class=muted><i>Noise floor</i>: the average error a synthetic workload with no "
            "error of its own would show here, from the spread of each side's runs (each "
            "point's error has standard error (1 + error) · √(rse² of the measured side + "
            "rse² of the synthetic side), where a side's rse comes from resampling its runs: "
            "merge a draw of them with replacement, take the statistic, its sd over the "
            "draws; a normal error's mean size is √(2/π) of that). <i>Points beyond "
            "noise</i>: those whose |error| is more than twice its standard error — there the "
            "model, not the host, is off. With a few runs per point the spread is itself "
            "rough (±40 % at four runs).</p>"
        )
    if summ.get("rounds", 1) > 1:
        parts.append(
            f"<p class=muted>{summ['rounds']} rounds: the app and the synthetic workload ran in "
            "turn with fresh seeds. <i>Ours</i> is round 1, the synthetic workload against the "
            "app runs it was fitted from (as TailWAG compares: in sample); <i>later rounds</i> "
            "is the same synthetic workload against later runs of the app, each side's "
            "histograms merged over those rounds (out of sample: the headline); <i>app vs "
            "itself</i> is the app's later rounds against its first: what this host's drift "
            "alone does to a comparison.</p>"
        )
        parts += _per_point_out_of_sample(table)
    return parts


def _per_point_section(table: pd.DataFrame) -> list[str]:
    """Round 1 per point: each statistic measured, synthetic and its error, the pauses."""
    parts: list[str] = []
    parts.append("<h2>Per point, round 1 (in sample)</h2>")
    rows = []
    for _, r in table.iterrows():
        row = [esc(r["threads"]), f"{r['qps']:,.4g}", f"{r['load']:.0%}"]
        row.append(
            '<span class="ok">ok</span>'
            if not r["runs_failed"]
            else f'<span class="fail">{r["runs_failed"]} run(s) failed</span>'
        )
        row.append(f"{fmt_ns(r['measured_service_mean'])} / {fmt_ns(r['synthetic_service_mean'])}")
        for st in STATS:
            se = r.get(f"error_{st}_se", math.nan)
            row += [
                fmt_ns(r[f"measured_{st}"]),
                fmt_ns(r[f"synthetic_{st}"]),
                pct_text(r[f"error_{st}"])
                + (f" ± {100 * se:.1f}" if se is not None and math.isfinite(se) else ""),
            ]
        rows.append(row)
    heads = ["threads", "QPS", "load", "checks", "service mean measured / synthetic"]
    for st in STATS:
        heads += [f"{st} measured", f"{st} synthetic", "error ± se"]
    slow = "measured_slow" in table
    if slow:
        heads.append("pauses per 100 000 measured / synthetic (mean length)")
        for row, (_, r) in zip(rows, table.iterrows(), strict=True):
            row.append(
                " / ".join(
                    f"{r[f'{side}_slow']:.3g} ({fmt_ns(r[f'{side}_slow_mean'])})"
                    for side in ("measured", "synthetic")
                )
            )
    parts.append(html.table(heads, rows, left=0))
    if slow:
        parts.append(
            "<p class=muted><i>Pauses</i>: requests whose service took at least the fit's "
            "pause threshold, per 100 000 requests of each side's runs, and their mean "
            "service. The synthetic workload draws its pauses every so many requests at every "
            "load alike; where the app's count moves with the load (a collector that runs "
            "more often under load), the fit pooled over the loads is off at both ends.</p>"
        )
    if table.attrs.get("unmatched"):
        parts.append(
            "<p class=note>Points without a partner (not compared): "
            + ", ".join(esc(p) for p in table.attrs["unmatched"])
            + "</p>"
        )
    return parts


def _order_section(point_fits: list[dict[str, Any]] | None) -> list[str]:
    """The measured runs' order checks: in order, shuffled, and within windows."""
    parts: list[str] = []
    order = [f for f in point_fits or [] if f.get("order")]
    if not order:
        return parts
    parts.append(
        "<h2>Order</h2><p class=muted>Each measured run's own service times replayed "
        "through a FCFS queue at its arrival times, in their order and shuffled: the "
        "synthetic workload draws every request independently, so it can follow the app "
        "only where the two agree. Far apart, the app's order (slow requests in bursts, or "
        "regularly spaced) sets its queueing, not its distribution. The last column "
        "shuffles only among requests sent in the same window: the part of the p99 effect "
        "made by clustering shorter than the window (a wander slower than the longest "
        "window shows only in the whole-run effect).</p>"
    )
    rows = []
    for f in order:
        o = f["order"]
        row = [esc(f["point"])]
        for st in STATS:
            row += [
                fmt_ns(o["in_order"][f"{st}_ns"]),
                fmt_ns(o["shuffled"][f"{st}_ns"]),
                pct_text(o["effect"][st]),
            ]
        wins = o.get("windows", [])
        row.append(" / ".join(pct_text(w["effect"]["p99"]) for w in wins) or "–")
        rows.append(row)
    heads = ["point"]
    for st in STATS:
        heads += [f"{st} in order", "shuffled", "effect"]
    wins = order[0]["order"].get("windows", [])
    heads.append(
        "p99 effect within " + " / ".join(fmt_ns(w["window_ns"]) for w in wins)
        if wins
        else "p99 effect within windows"
    )
    parts.append(html.table(heads, rows, left=0))
    return parts


def _params_section(app: str | None, fit: dict[str, Any] | None) -> list[str]:
    """The fitted parameters next to TailWAG's Table 2, the cold start, the terms chosen,
    the host's speed, a periodic component and the synthetic workload's settings."""
    parts: list[str] = []
    seed = SEED_APP.get(app or "", app if app in TABLE2 else None)
    if fit or seed:
        parts.append(
            f"<h2>Parameters next to TailWAG's Table 2 ({esc(seed or 'no counterpart')})</h2>"
            "<p class=muted>Variance is that of ln(service time). Ours: weight, arithmetic "
            "mean and median per fitted component; the paper does not say which mean it "
            "prints.</p>"
        )
        parts.append(
            html.table(
                ["", "weight", "mean", "median", "variance", "TailWAG prob.", "mean", "variance"],
                table2_rows(app, fit),
            )
        )
        if seed and TABLE2[seed].note:
            parts.append(f"<p class=muted>{esc(TABLE2[seed].note)}</p>")
        if fit and fit.get("cold"):
            c = fit["cold"]
            parts.append(
                f"<p>Fitted across {len(fit.get('points', []))} loads with a cold start: a worker "
                f"serves up to {1 + c['extra']:.3g}× slower after idling, warming and cooling "
                f"with a time constant of {fmt_ns(c['tau_ns'])} (R² {c['r2']:.3f} over every "
                "request); the components above are of the warm service times. Mean service "
                "per load, measured vs the model: "
                + "; ".join(
                    f"{esc(b['point'])} {fmt_ns(b['measured_service_mean_ns'])} vs "
                    f"{fmt_ns(b['model_service_mean_ns'])}"
                    for b in fit.get("by_point", [])
                )
                + ".</p>"
            )
        if fit and fit.get("selection"):
            lines = [x.strip() for x in selection_lines(fit["selection"])]
            parts.append(
                f"<p>{esc(lines[0][0].upper() + lines[0][1:])}:</p><ul>"
                + "".join(f"<li>{esc(x)}</li>" for x in lines[1:])
                + "</ul>"
            )
        if fit and fit.get("speed"):
            text = speed_sentence(fit["speed"])
            parts.append(f"<p>The host's speed: {esc(text)}.</p>")
        if fit and fit.get("periodic"):
            text = periodic_sentence(fit["periodic"])
            parts.append(f"<p>{esc(text[0].upper() + text[1:])}</p>")
        if fit and fit.get("synth_set"):
            sets = fit.get("synth_settings") or [fit["synth_set"]]
            parts.append(
                "<p>Synthetic workload: "
                + " ".join(f"<code>--set '{esc(x)}'</code>" for x in sets)
                + "</p>"
            )
    return parts


def write_validation(
    measured: Folders,
    synthetic: Folders | list[Folders],
    out: str | Path,
    *,
    app: str | None = None,
    fit: dict[str, Any] | None = None,
    saturation_qps: float | dict[int, float] | None = None,
    rounds: list[tuple[Folders, Folders]] | None = None,
    point_fits: list[dict[str, Any]] | None = None,
) -> Path:
    """Write ``out/index.html``, ``validation.csv``, ``validation.json`` and the figures.
    ``rounds``: further (measured, synthetic) folders, pooled as :func:`error_table` says.

    ``fit`` is the fit.json entry the synthetic workload was made from (its components
    go beside TailWAG's Table 2 row for ``app``'s counterpart); ``point_fits`` the fit.json
    entries of the measured points (their order checks). Returns index.html's path.
    """
    m = measured if isinstance(measured, Results) else load(measured)
    if isinstance(synthetic, list | tuple) and len(synthetic) == 1:
        synthetic = synthetic[0]
    many = isinstance(synthetic, list | tuple)
    s = (
        [x if isinstance(x, Results) else load(x) for x in synthetic]
        if many
        else (synthetic if isinstance(synthetic, Results) else load(synthetic))
    )
    s_root = Path(s[0].root).parent if many else s.root
    # The fit's pause threshold: the page counts each side's pauses per point.
    slow_ns = ((fit or {}).get("pause") or {}).get("threshold_ns")
    table = error_table(m, s, saturation_qps=saturation_qps, rounds=rounds, slow_ns=slow_ns)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    out_dir = out_dir.resolve()
    table.to_csv(out_dir / "validation.csv", index=False)
    doc = {
        "schema": "taillab.validation/1",
        "app": app,
        "measured": str(m.root),
        "synthetic": str(s_root),
        "rounds": [[str(a), str(b)] for a, b in rounds or []],
        "summary": summary(table, loads=LOADS),
        "points": json.loads(table.to_json(orient="records")),
        "unmatched": table.attrs.get("unmatched", []),
    }
    (out_dir / "validation.json").write_text(
        json.dumps(_finite(doc), indent=1, allow_nan=False), encoding="utf-8"
    )
    page = out_dir / "index.html"
    text = render(
        table,
        out_dir,
        app=app,
        fit=fit,
        measured_root=m.root,
        synthetic_root=s_root,
        point_fits=point_fits,
    )
    page.write_text(text, encoding="utf-8")
    return page


def _finite(v: Any) -> Any:
    """NaN and infinities as null: JSON has no such numbers."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_finite(x) for x in v]
    return v
