"""What an attribution shows: its text table (:func:`text_table`), its figures (effects,
interactions, the best and worst cells' CCDFs), its page (:func:`write_page`) and
``attribution.json`` (:func:`run`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .. import figures as F
from .. import html
from ..html import esc
from ..results import Results, load
from ..units import fmt_ns
from .analysis import analyse, named_aliases
from .model import qlabel


def _us(v: float) -> str:
    return fmt_ns(v * 1e3) if math.isfinite(v) else "–"


def _signed(v: float) -> str:
    return ("+" if v >= 0 else "−") + _us(abs(v))


def text_table(doc: dict) -> str:
    """The effects on sojourn at every quantile, the interactions that matter and what to
    change, as plain text."""
    lines = []
    for q in doc["quantiles"]:
        es = [e for e in doc["effects"] if e["metric"] == "sojourn" and e["quantile"] == q]
        base = next(e for e in es if e["kind"] == "intercept")
        lines.append(f"sojourn {qlabel(q)}: base cell {_us(base['estimate_us'])}")
        lines.append(f"  {'term':<52} {'effect':>10} {'% base':>8}  {'95 % CI':<24} excl. 0")
        for e in es:
            if e["kind"] == "intercept":
                continue
            ci = f"[{_signed(e['ci_low_us'])}, {_signed(e['ci_high_us'])}]"
            pct = f"{e['pct_of_base']:+.1f}%" if e["pct_of_base"] is not None else "–"
            lines.append(
                f"  {e['term'][:52]:<52} {_signed(e['estimate_us']):>10} {pct:>8}  {ci:<24} "
                f"{'yes' if e['excludes_zero'] else 'no'}"
            )
    sat = [c for c in doc["cells"] if c.get("saturated_runs")]
    if sat:
        lines.append(
            f"saturated: {sum(c['saturated_runs'] for c in sat)} run(s) in {len(sat)} cell(s) "
            f"({', '.join(c['id'] for c in sat[:3])}{', …' if len(sat) > 3 else ''}) had a queue "
            "that grew through the run: their quantiles grow with the run's length, not only "
            "with the factors, and they make the fits slow; lower the load"
        )
    inter = doc["interactions"]
    lines.append(
        "interactions that matter (sojourn, CI excludes 0): "
        + (
            "; ".join(f"{e['term']} at {e['label']} {_signed(e['estimate_us'])}" for e in inter)
            or "none"
        )
    )
    if doc["design"]["aliases"]:
        lines.append(
            "aliased two-factor interactions (not estimated): "
            + "; ".join(
                f"{' = '.join(c)} ({' = '.join(n)})"
                for c, n in zip(doc["design"]["aliases"], named_aliases(doc["design"]), strict=True)
            )
        )
    lines.append("what to change, by sojourn p99 gain from the base configuration:")
    for i, w in enumerate(doc["what_to_change"], 1):
        sure = "" if w["sure"] else " (CI includes 0)"
        lines.append(
            f"  {i}. {w['key']}={w['level']}: {_signed(-w['p99_gain_us'])} "
            f"({-w['pct_of_base']:+.1f}%) "
            f"[{_signed(-w['ci_high_us'])}, {_signed(-w['ci_low_us'])}]{sure}"
        )
    p = doc.get("precision") or {}
    if p:
        need = ", ".join(
            f"±{_us(float(t))} in about {n} blocks"
            for t, n in p["blocks_for_half_width_us"].items()
        )
        lines.append(
            f"precision: the main effects on sojourn p99 are ±{_us(p['median_half_width_us'])} "
            f"(median half-width) with {p['blocks']} blocks; {need}"
        )
    for v in doc["variance_p99"]:
        lines.append(
            f"  run-to-run variance of p99, {v['key']}={v['level']} vs {v['base']}: "
            f"×{v['ratio']:.2g} [{v['ci_low']:.2g}, {v['ci_high']:.2g}]"
        )
    return "\n".join(lines) + "\n"


def effects_plot(doc: dict, out=None, metric: str = "sojourn"):
    """Each term's effect with its 95 % CI, one panel per quantile (Treadmill's effects plot)."""
    qs = doc["quantiles"]
    terms = [
        e["term"]
        for e in doc["effects"]
        if e["metric"] == metric and e["quantile"] == qs[0] and e["kind"] != "intercept"
    ]
    if not terms:
        raise F.FigureError("no effect to draw")
    fig, axes = F._new(w=3.2 * len(qs) + 2.5, h=0.35 * len(terms) + 1.6, ncols=len(qs), sharey=True)
    for k, q in enumerate(qs):
        ax = axes[0, k]
        es = {
            e["term"]: e
            for e in doc["effects"]
            if e["metric"] == metric and e["quantile"] == q and e["kind"] != "intercept"
        }
        for y, t in enumerate(terms):
            e = es[t]
            color = "C3" if e["excludes_zero"] else "C0"
            lo, hi = e["ci_low_us"], e["ci_high_us"]
            if math.isfinite(lo) and math.isfinite(hi):
                ax.plot([lo, hi], [y, y], color=color, lw=2)
            ax.plot([e["estimate_us"]], [y], "o", color=color)
        ax.axvline(0, color="#888", lw=0.8)
        ax.set_title(f"{metric} {qlabel(q)}", fontsize="medium")
        ax.set_xlabel("effect (µs)")
        ax.grid(True, axis="x", alpha=0.3)
    axes[0, 0].set_yticks(range(len(terms)))
    axes[0, 0].set_yticklabels(
        [t if len(t) < 48 else t[:45] + "…" for t in terms], fontsize="small"
    )
    axes[0, 0].invert_yaxis()
    return F.save(fig, out)


def interaction_plot(doc: dict, a: dict, b: dict, out=None):
    """Measured sojourn p99 of each level of factor ``a`` (x) with one line per level of
    ``b``, pooled over the cells and runs at those levels: parallel lines, no interaction."""
    cells = doc["cells"]
    fig, ax = F._new(w=5.2, h=3.8)
    ax = ax[0, 0]
    for j, lb in enumerate(b["levels"]):
        ys = []
        for la in a["levels"]:
            v = [
                c["sojourn_p99_us"]
                for c in cells
                if c["levels"][a["key"]] == la and c["levels"][b["key"]] == lb
            ]
            ys.append(float(np.mean(v)) if v else math.nan)
        ax.plot(range(len(a["levels"])), ys, "o-", color=f"C{j}", label=f"{b['key']}={lb}")
    ax.set_xticks(range(len(a["levels"])))
    ax.set_xticklabels(a["levels"], fontsize="small")
    ax.set_xlabel(a["key"])
    ax.set_ylabel("sojourn p99 (µs), mean over cells")
    ax.legend(fontsize="x-small")
    ax.grid(True, alpha=0.3)
    return F.save(fig, out)


def cells_ccdf(res: Results, doc: dict, out=None):
    """Sojourn CCDF of the best and the worst cell (by measured p99), each with its ideal
    (the same runs' arrivals and service times through an exact queue) dashed."""
    from ..hlog import Dist

    cells = sorted(
        (c for c in doc["cells"] if math.isfinite(c["sojourn_p99_us"])),
        key=lambda c: c["sojourn_p99_us"],
    )
    if not cells:
        raise F.FigureError("no cell has sojourn samples")
    pick = [("best", cells[0]), ("worst", cells[-1])] if len(cells) > 1 else [("only", cells[0])]
    req = res.requests
    if "measured" in req:
        req = req[req["measured"] == 1]
    fig, ax = F._new()
    ax = ax[0, 0]
    floor = 1.0
    for i, (name, c) in enumerate(pick):
        sel = req[req["point"] == c["id"]]
        d = Dist.from_values(sel["sojourn"].to_numpy())
        x, cdf = d.cdf()
        keep = (1 - cdf) > 0
        label = f"{name}: " + ", ".join(f"{k.split('.')[-1]}={v}" for k, v in c["levels"].items())
        ax.step(x[keep] / 1e3, (1 - cdf)[keep], where="post", color=f"C{i}", label=label[:70])
        floor = min(floor, 0.5 / max(d.total, 1))
        if "ideal_completed" in sel and sel["ideal_completed"].notna().any():
            v = (sel["ideal_completed"] - sel["intended"]).to_numpy()
            di = Dist.from_values(v[v >= 0])
            x, cdf = di.cdf()
            keep = (1 - cdf) > 0
            ax.step(
                x[keep] / 1e3,
                (1 - cdf)[keep],
                where="post",
                color=f"C{i}",
                ls="--",
                label=f"{name}: ideal",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(max(floor, 1e-5), 1)
    ax.set_xlabel("sojourn (µs)")
    ax.set_ylabel("fraction of requests slower than x")
    ax.legend(fontsize="x-small")
    ax.grid(True, which="major", alpha=0.3)
    return F.save(fig, out)


def _effects_html(doc: dict, metric: str) -> str:
    rows = []
    for q in doc["quantiles"]:
        es = [e for e in doc["effects"] if e["metric"] == metric and e["quantile"] == q]
        for e in es:
            if e["kind"] == "intercept":
                rows.append([f"<b>{qlabel(q)}</b> base cell", _us(e["estimate_us"]), "", "", ""])
                continue
            mark = (
                '<span class="fail">yes</span>'
                if e["excludes_zero"]
                else '<span class="muted">no</span>'
            )
            pct = f"{e['pct_of_base']:+.1f} %" if e["pct_of_base"] is not None else "–"
            rows.append(
                [
                    esc(e["term"]),
                    esc(_signed(e["estimate_us"])),
                    esc(pct),
                    esc(f"[{_signed(e['ci_low_us'])}, {_signed(e['ci_high_us'])}]"),
                    mark,
                ]
            )
    return html.table(["term", "effect", "% of base", "95 % CI", "excludes 0"], rows)


def _precision_html(doc: dict) -> str:
    p = doc.get("precision") or {}
    if not p:
        return ""
    need = ", ".join(
        f"±{_us(float(t))} in about {n} blocks" for t, n in p["blocks_for_half_width_us"].items()
    )
    return (
        f'<p class="muted">Precision: the main effects on sojourn p99 are '
        f"±{esc(_us(p['median_half_width_us']))} (median 95 % half-width) with {p['blocks']} "
        f"blocks; the half-width shrinks as one over the root of the blocks: {esc(need)}.</p>"
    )


def _page_plans(doc: dict, res: Results) -> list:
    """The page's figures: the effects per metric, one interaction plot per pair of factors
    that interact, and the best and worst cells' CCDFs (last)."""
    factors = doc["design"]["factors"]
    plans = [
        (
            f"effects-{m}",
            f"Effects on {m} (µs) with 95 % CIs; red: the CI excludes 0.",
            lambda p, m=m: effects_plot(doc, p, m),
        )
        for m in doc["metrics"]
    ]
    seen = set()
    for e in doc["interactions"]:
        fa = next(f for f in factors if f["key"] == e["factors"][0]["key"])
        fb = next(f for f in factors if f["key"] == e["factors"][1]["key"])
        if (fa["key"], fb["key"]) in seen:
            continue
        seen.add((fa["key"], fb["key"]))
        plans.append(
            (
                f"interaction-{len(seen)}",
                esc(
                    f"{fa['key']} × {fb['key']}: sojourn p99 per level "
                    "(non-parallel lines: they interact)."
                ),
                lambda p, a=fa, b=fb: interaction_plot(doc, a, b, p),
            )
        )
    plans.append(
        (
            "cells-ccdf",
            "Sojourn CCDF of the best and the worst cell, each against its ideal (dashed).",
            lambda p: cells_ccdf(res, doc, p),
        )
    )
    return plans


def _page_tables(doc: dict) -> tuple[str, str, str, str]:
    """The page's tables: the factors, what to change, the p99's variance ratios, the cells."""
    factors = doc["design"]["factors"]
    facts = html.table(
        ["factor", "levels (base first)"],
        [[esc(f["key"]), esc(" | ".join(f["levels"]))] for f in factors],
    )
    change = html.table(
        ["", "change", "sojourn p99 gain", "% of base", "95 % CI", ""],
        [
            [
                str(i),
                esc(f"{w['key']} = {w['level']}"),
                esc(_signed(w["p99_gain_us"])),
                esc(f"{w['pct_of_base']:+.1f} %"),
                esc(f"[{_signed(w['ci_low_us'])}, {_signed(w['ci_high_us'])}]"),
                "" if w["sure"] else '<span class="muted">CI includes 0</span>',
            ]
            for i, w in enumerate(doc["what_to_change"], 1)
        ],
    )
    var = html.table(
        ["factor", "level vs base", "variance ratio", "95 % CI"],
        [
            [
                esc(v["key"]),
                esc(f"{v['level']} vs {v['base']}"),
                esc(f"×{v['ratio']:.3g}"),
                esc(f"[{v['ci_low']:.3g}, {v['ci_high']:.3g}]"),
            ]
            for v in doc["variance_p99"]
        ],
    )
    cells = html.table(
        ["cell", "runs", "disturbed", "saturated", "requests", "sojourn p99 (pooled)"],
        [
            [
                esc(c["id"]),
                str(c["runs"]),
                str(c["disturbed_runs"]),
                str(c.get("saturated_runs", 0)),
                str(c["requests"]),
                esc(_us(c["sojourn_p99_us"])),
            ]
            for c in doc["cells"]
        ],
    )
    return facts, change, var, cells


def write_page(
    root: str | Path, doc: dict, out_dir: str | Path | None = None, res: Results | None = None
) -> Path:
    """``OUT/attribution/index.html`` with its figures (and attribution.json beside it)."""
    root = Path(root)
    out = Path(out_dir) if out_dir else root / "attribution"
    fig_dir = out / "figures"
    out.mkdir(parents=True, exist_ok=True)
    res = res or load(root)
    factors = doc["design"]["factors"]
    drawn = F.draw(_page_plans(doc, res), fig_dir)
    d = doc["design"]
    kind = (
        f"resolution-{d['resolution']} fraction" if d["kind"] == "fractional" else "full factorial"
    )
    facts, change, var, cells = _page_tables(doc)
    alias = (
        f'<p class="note">Aliased two-factor interactions (a fraction cannot tell them apart; '
        f"not estimated): {esc('; '.join(' = '.join(c) for c in named_aliases(d)))}</p>"
        if d["aliases"]
        else ""
    )
    bs = doc["bootstrap"]
    body = [
        f"<p>{esc(kind)}, {len(factors)} factors, {len(doc['cells'])} cells × {d['blocks']} blocks "
        f"({doc['requests']['runs']} runs, at least {doc['requests']['min_per_run']} "
        "requests each). "
        "Quantile regression (exact: a linear program, solved by HiGHS) of every request's "
        "latency on the factors' levels"
        f"{' and their two-way interactions' if d['kind'] == 'full' else ''}, blocks "
        f"effect-coded; 95 % CIs from {bs['resamples']} cluster-bootstrap resamples over runs "
        f"(docs/attribute.md).</p>",
        facts,
        alias,
        "<h2>What to change</h2>",
        change,
        _precision_html(doc),
        "<h2>Effects</h2>",
        *html.figures(fig_dir, drawn[: len(doc["metrics"])]),
        *(f"<h3>{esc(m)}</h3>" + _effects_html(doc, m) for m in doc["metrics"]),
        "<h2>Interactions that matter</h2>",
        *(
            html.figures(fig_dir, drawn[len(doc["metrics"]) : -1])
            or ['<p class="muted">none: no interaction\'s CI excludes 0</p>']
        ),
        "<h2>Run-to-run variance of sojourn p99</h2>",
        var,
        "<h2>Best and worst cells</h2>",
        *html.figures(fig_dir, drawn[-1:]),
        cells,
    ]
    page = out / "index.html"
    page.write_text(html.document("Attribution of the tail", body))
    return page


def run(root: str | Path, bootstrap: int = 200, out_dir: str | Path | None = None) -> dict:
    """Analyse, write attribution.json and the page; returns the attribution."""
    res = load(root)
    doc = analyse(root, bootstrap=bootstrap, res=res)
    out = Path(out_dir) if out_dir else Path(root) / "attribution"
    out.mkdir(parents=True, exist_ok=True)
    (out / "attribution.json").write_text(json.dumps(_clean(doc), indent=1, allow_nan=False))
    write_page(root, doc, out, res=res)
    return doc


def _clean(v):
    """NaN and infinities as null (JSON has neither)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v
