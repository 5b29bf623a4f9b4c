"""The fit in words: the CLI's summary and the report's section."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .. import html
from ..figures import service_fit
from ..html import esc
from ..results import Results
from ..units import fmt_ns
from .common import FitError, _safe
from .config import current
from .doc import read_fit


def _pct(v: float) -> str:
    return "–" if v is None or not math.isfinite(v) else f"{100 * v:+.1f}%"


def periodic_sentence(p: dict[str, Any]) -> str:
    """A fit's periodic component in words (the CLI's summary, the report, the validation)."""
    return (
        f"component {p['component'] + 1} ({fmt_ns(p['mean_ns'])}, {p['hits']} requests) came every "
        f"{p['gap_median']:.0f} requests (robust gap cv {p['gap_cv']:.2f}; independent draws "
        f"would give {p['gap_cv_if_independent']:.2f}): served regularly, "
        f"periodic={p['setting']}, not drawn from the mixture."
        + (
            f" Its {p['strays']} strays (slow, off the rhythm; {fmt_ns(p['stray_mean_ns'])} on "
            f"average) stay in the mixture, a component of {100 * p['stray_weight']:.2f} %."
            if p.get("strays", 0) >= current().periodic_min_gaps and p.get("stray_mean_ns")
            else ""
        )
        + (
            " Its measured mean held across the loads (within "
            f"{100 * p['cold_check']['spread']['measured']:.0f} %) where the cold-start term "
            f"would have it vary {100 * p['cold_check']['spread']['warm']:.0f} %: cold=no."
            if p.get("cold_check", {}).get("cold") is False
            else ""
        )
    )


def order_sentence(o: dict[str, Any]) -> str:
    """A fit's order check in words."""
    eff = ", ".join(f"{k} {_pct(v)}" for k, v in o["effect"].items())
    scales = "; ".join(
        f"within {fmt_ns(w['window_ns'])} {_pct(w['effect']['mean'])} / {_pct(w['effect']['p99'])}"
        for w in o.get("windows", [])
    )
    return (
        f"the run's own service times replayed through a FCFS queue of {o['workers']} "
        f"worker(s) at its arrival times, in their order against shuffled ({o['shuffles']} "
        f"shuffles): {eff}"
        + (
            f"; against shuffled only among requests sent in the same window (mean / p99, "
            f"the part of it from clustering shorter than the window): {scales}"
            if scales
            else ""
        )
        + ". Far from zero, no synthetic workload that draws each request "
        "independently can match this run."
    )


def speed_sentence(sp: dict[str, Any]) -> str:
    """The host's speed of the moment, as the fit saw it."""
    per = ", ".join(f"{p['point']} {100 * p['cv']:.1f} %" for p in sp["points"])
    head = (
        f"mean service per {fmt_ns(sp['every_ns'])} stretch wandered (cv, sampling noise out) {per}"
    )
    if not sp["factors"] and sp.get("share") == 0:
        return head + "; replayed, no share of it queued closer to the app's order than none"
    if not sp["factors"]:
        return head + "; too little at the heaviest load to model"
    tried = [t for t in sp.get("every_tried", []) if t["error"] is not None]
    why = (
        " (the stretch length whose replay came closest to the app's order: "
        + ", ".join(f"{fmt_ns(t['every_ns'])} {100 * t['error']:.1f} %" for t in tried)
        + ")"
        if len(tried) > 1
        else ""
    )
    return head + f"; modelled from {sp['heaviest']} as speed={sp['setting']}" + why


def pause_sentence(p: dict[str, Any]) -> str:
    """A fit's stop-the-world pauses in words."""
    own = (
        f"the app reported {p['pauses']} ({fmt_ns(p['app_mean_ns'])} "
        f"on average) in {p['requests']} requests"
    )
    if p.get("source") != "records":
        return f"{own}; one every {p['requests_per_pause']} requests, each the mean length"
    gaps = ", then ".join(f"{g['times']} × {g['lo']}–{g['hi']}" for g in p["gaps"])
    return (
        f"{own}; the records show {p['hits']} (mean {fmt_ns(p['mean_ns'])}, cv {p['cv']:.2f}), "
        f"requests between them: {gaps}" + (", again and again" if len(p["gaps"]) > 1 else "")
    )


def _tau_basis(c: dict[str, Any]) -> str:
    """Why the cold-start term's tau: its replay error or its R²."""
    if c.get("tau_method") == "simulated":
        return f"replay error {100 * c['sim_error']:.1f} %, R² {c['r2']:.3f}"
    return f"R² {c['r2']:.3f}"


def text_summary(doc: dict[str, Any]) -> str:
    """The human-readable fit: one block per point."""
    lines = []
    for f in doc["fits"]:
        if "error" in f:
            lines.append(f"point {f['point']}: not fitted: {f['error']}")
            continue
        lines += _mixture_lines(f) + _term_lines(f)
        if "selection" in f:
            lines += selection_lines(f["selection"])
        for name, text in f.get("readings", {}).items():
            lines.append(f"  reading, {name}: {text}")
        for w in f["warnings"]:
            lines.append(f"  warning: {w}")
        sets = f.get("synth_settings") or [f["synth_set"]]
        lines.append("  synth: " + " ".join(f"--set '{x}'" for x in sets))
    return "\n".join(lines)


def _mixture_lines(f: dict[str, Any]) -> list[str]:
    """A fit's mixture, its goodness and the point's sojourn split."""
    lines = [
        f"point {f['point']}: {f['n']} service times ({f['source']}), "
        f"{len(f['components'])} component(s) by {f['chosen_by'].upper()}, KS {f['ks']:.4f}",
        f"  {'weight':>8} {'mean':>10} {'median':>10} {'log var':>8} {'cv':>7}",
    ]
    for c in f["components"]:
        lines.append(
            f"  {c['weight']:8.4f} {fmt_ns(c['mean_ns']):>10} {fmt_ns(c['median_ns']):>10} "
            f"{c['log_var']:8.4f} {c['cv']:7.3f}"
        )
    err = "  ".join(f"{k} {_pct(v['rel_error'])}" for k, v in f["errors"].items())
    lines.append(f"  fitted vs measured: {err}")
    s = f["split"]
    lines.append(
        f"  sojourn mean {fmt_ns(s['sojourn_mean_ns'])} "
        f"= service {fmt_ns(s['service_mean_ns'])} + queue {fmt_ns(s['queue_mean_ns'])} "
        f"+ send lag {fmt_ns(s['send_lag_mean_ns'])} "
        f"+ other {fmt_ns(s['other_mean_ns'])}"
    )
    return lines


def _term_lines(f: dict[str, Any]) -> list[str]:
    """A fit's terms and checks in words."""
    lines = []
    if "cold" in f:
        c = f["cold"]
        lines.append(
            f"  across {', '.join(f['points'])}: cold start x{1 + c['extra']:.3f} "
            f"(tau {fmt_ns(c['tau_ns'])}, {_tau_basis(c)}); "
            "the mixture is of warm service times"
        )
    for b in f.get("by_point", []):
        lines.append(
            f"    {b['point']}: service mean {fmt_ns(b['measured_service_mean_ns'])} "
            f"measured, {fmt_ns(b['model_service_mean_ns'])} modelled"
        )
    if "speed" in f:
        lines.append(f"  host speed: {speed_sentence(f['speed'])}")
    if "pause" in f:
        lines.append(f"  pauses: {pause_sentence(f['pause'])}")
    if "periodic" in f:
        lines.append(f"  periodic: {periodic_sentence(f['periodic'])}")
    if "order" in f:
        lines.append(f"  order: {order_sentence(f['order'])}")
    for h in f["noise_hints"]:
        lines.append(f"  noise hint ({h['source']}, {h['basis']}): noise={h['spec']}")
    return lines


def selection_lines(sel: dict[str, Any]) -> list[str]:
    """Which optional terms a fit across loads kept, what each bought, why others went."""
    lines = [
        f"  terms, chosen on {sel['held_out_blocks']} held-out blocks ({sel['split']}): "
        f"the mixture alone erred {100 * sel['base_error']:.1f} % (mean |error| of mean, "
        f"p95, p99 of the blocks' own replays), the kept model {100 * sel['error']:.1f} %"
    ]
    for st in sel["steps"]:
        verdict = "kept" if st["kept"] else "dropped"
        lines.append(f"    {st['term']}: {verdict}: {st['why']}")
    if sel.get("components"):
        lines.append(f"    the mixture keeps {sel['components']} component(s)")
    return lines


def section(res: Results, out_dir: Path) -> str | None:
    """The report's section: per point, the fit table and the figure (drawn into
    ``out_dir/figures``), from the results folder's ``fit.json`` (``taillab fit RESULTS --out
    RESULTS`` writes it there); None without one."""
    fit_json = res.root / "fit.json"
    if not fit_json.exists():
        return None
    fig_dir = out_dir / "figures"
    try:
        doc = read_fit(fit_json)
    except FitError as e:
        return f"<h2>Service-time fit</h2><p class=note>{esc(e)}</p>"
    parts = [
        "<h2>Service-time fit</h2><p class=muted>Mixture of log-normals fitted by maximum "
        "likelihood (EM on ln of service time, components chosen by BIC), from "
        "<code>fit.json</code>. Variance is that of ln(service time), as in TailWAG's "
        "Table 2.</p>"
    ]
    for f in doc["fits"]:
        if "error" in f:
            parts.append(
                f"<p class=note>point {esc(f['point'])}: not fitted: {esc(f['error'])}</p>"
            )
            continue
        rows = [
            [
                str(i + 1),
                f"{c['weight']:.4f}",
                fmt_ns(c["mean_ns"]),
                fmt_ns(c["median_ns"]),
                f"{c['log_var']:.4f}",
                f"{c['cv']:.3f}",
            ]
            for i, c in enumerate(f["components"])
        ]
        parts.append(f"<h3>point {esc(f['point'])}</h3>")
        parts.append(
            html.table(["component", "weight", "mean", "median", "variance (ln)", "cv"], rows)
        )
        err = [
            [k, fmt_ns(v["measured_ns"]), fmt_ns(v["fitted_ns"]), _pct(v["rel_error"])]
            for k, v in f["errors"].items()
        ]
        parts.append(html.table(["statistic", "measured", "fitted", "error"], err))
        sets = f.get("synth_settings") or [f["synth_set"]]
        parts.append(
            f"<p>KS distance {f['ks']:.4f} over {f['n']} service times ({esc(f['source'])}). "
            "Synth: " + " ".join(f"<code>--set '{esc(x)}'</code>" for x in sets) + "</p>"
        )
        if "periodic" in f:
            parts.append(f"<p>{esc(periodic_sentence(f['periodic']))}</p>")
        if "order" in f:
            parts.append(f"<p>Order: {esc(order_sentence(f['order']))}</p>")
        name = "fit_" + _safe(f["point"])
        service_fit(f, fig_dir / name)
        parts.append(
            html.figure_tag(
                fig_dir,
                name,
                "Measured (bars, steps) vs fitted (line; components dashed) density of "
                "ln(service time) and CDF (TailWAG Fig. 5).",
            )
        )
    return "\n".join(parts)
