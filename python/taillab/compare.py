"""Before/after comparison of two results folders with the same load points.

Points are matched on (app, config, threads, offered QPS); two single runs are matched with
each other whatever their keys. For each matched point and statistic, the difference B - A is
tested:

* ``welch``: Welch's t-test on the per-run values when both sides have at least two runs.
  Runs are independent repeats with fresh seeds, so their values are i.i.d. samples of the
  statistic, which is what the test needs. This is the preferred test.
* ``ci``: a normal test from the two 95% CIs (half-width / 1.96 as standard error) when per-run
  values are missing but the aggregates give CIs.
* ``none``: one run on a side and no CI. Requests within one run are autocorrelated (a slow
  request delays the ones queued behind it), so a test over requests would overstate
  significance; we report the difference without a p-value and say to repeat the runs.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from . import figures as F
from . import html
from .errors import TaillabError
from .html import esc
from .results import Results, load
from .units import fmt_ns, fmt_num

DEFAULT_STATS = ("sojourn_mean", "sojourn_p95", "sojourn_p99")
KEY = ["app", "config", "threads", "qps"]
ALPHA = 0.05


def match_points(a: Results, b: Results) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Pairs (point in A, point in B), and the points found only in A and only in B."""
    pa, pb = a.points[a.points["runs"] > 0], b.points[b.points["runs"] > 0]
    if len(pa) == 1 and len(pb) == 1:
        return [(pa["point"].iloc[0], pb["point"].iloc[0])], [], []

    def key(p):
        return (str(p["app"]), str(p["config"]), int(p["threads"]), round(float(p["qps"]), 6))

    kb = {key(p): p["point"] for _, p in pb.iterrows()}
    pairs, only_a = [], []
    for _, p in pa.iterrows():
        k = key(p)
        if k in kb:
            pairs.append((p["point"], kb.pop(k)))
        else:
            only_a.append(p["point"])
    return pairs, only_a, list(kb.values())


def _side(res: Results, pid: str, col: str) -> tuple[float, float, float, np.ndarray]:
    p = res.points[res.points["point"] == pid].iloc[0]
    est = float(p.get(col, math.nan)) if pd.notna(p.get(col, math.nan)) else math.nan
    lo = p.get(f"{col}_ci_low", math.nan)
    hi = p.get(f"{col}_ci_high", math.nan)
    runs = res.runs[res.runs["point"] == pid]
    vals = (
        pd.to_numeric(runs[col], errors="coerce").dropna().to_numpy()
        if col in runs
        else np.zeros(0)
    )
    if not math.isfinite(est) and len(vals):
        est = float(vals.mean())
    return (
        est,
        float(lo) if pd.notna(lo) else math.nan,
        float(hi) if pd.notna(hi) else math.nan,
        vals,
    )


def compare(a: Results, b: Results, stats=DEFAULT_STATS) -> pd.DataFrame:
    """One row per (matched point, statistic): A, B, their CIs, B - A, relative change, test,
    p-value, whether the change is significant at 5%, and runs with a failed check per side."""
    from scipy import stats as sps

    pairs, _, _ = match_points(a, b)
    if not pairs:
        raise TaillabError(
            f"{a.root} and {b.root} share no load point (matched on app, config, threads, "
            "offered QPS); compare results of the same sweep definition"
        )
    rows = []
    for pa, pb in pairs:
        meta = a.points[a.points["point"] == pa].iloc[0]
        # A failed self-check on either side makes the difference suspect: say so per row.
        fa = int(a.points.loc[a.points["point"] == pa, "runs_failed"].iloc[0])
        fb = int(b.points.loc[b.points["point"] == pb, "runs_failed"].iloc[0])
        for col in stats:
            ea, la, ha, va = _side(a, pa, col)
            eb, lb, hb, vb = _side(b, pb, col)
            diff = eb - ea
            test, pval = "none", math.nan
            if len(va) >= 2 and len(vb) >= 2 and (np.std(va) > 0 or np.std(vb) > 0):
                test = "welch"
                pval = float(sps.ttest_ind(vb, va, equal_var=False).pvalue)
            elif all(math.isfinite(x) for x in (la, ha, lb, hb)):
                se = math.hypot((ha - la) / (2 * 1.96), (hb - lb) / (2 * 1.96))
                if se > 0:
                    test = "ci"
                    pval = float(2 * sps.norm.sf(abs(diff) / se))
            sig = bool(math.isfinite(pval) and pval < ALPHA)
            if test == "none":
                verdict = "no test: repeat runs (≥ 2 per side)"
            elif not sig:
                verdict = "no significant change"
            else:
                verdict = "slower" if diff > 0 else "faster"
            rows.append(
                {
                    "point_a": pa,
                    "point_b": pb,
                    "app": meta["app"],
                    "config": meta["config"],
                    "threads": meta["threads"],
                    "qps": meta["qps"],
                    "stat": col,
                    "a": ea,
                    "a_ci_low": la,
                    "a_ci_high": ha,
                    "a_runs": len(va),
                    "b": eb,
                    "b_ci_low": lb,
                    "b_ci_high": hb,
                    "b_runs": len(vb),
                    "diff": diff,
                    "rel_diff": diff / ea if ea else math.nan,
                    "test": test,
                    "p_value": pval,
                    "significant": sig,
                    "verdict": verdict,
                    "failed_runs_a": fa,
                    "failed_runs_b": fb,
                }
            )
    return pd.DataFrame(rows)


_COMPARE_HEADS = [
    "point",
    "statistic",
    "A",
    "B",
    "B − A",
    "change",
    "runs A/B",
    "test",
    "p",
    "verdict",
    "failed runs A/B",
]


def _compare_rows(df: pd.DataFrame) -> list[list[str]]:
    """One table row per compared point and statistic, the verdict coloured."""
    rows = []
    for _, r in df.iterrows():
        cls = "fail" if r["verdict"] == "slower" else "ok" if r["verdict"] == "faster" else ""
        rows.append(
            [
                esc(r["point_a"]),
                esc(r["stat"]),
                fmt_ns(r["a"]),
                fmt_ns(r["b"]),
                fmt_ns(r["diff"]),
                f"{100 * r['rel_diff']:+.1f}%" if math.isfinite(r["rel_diff"]) else "–",
                f"{r['a_runs']}/{r['b_runs']}",
                esc(r["test"]),
                fmt_num(r["p_value"], 2),
                f'<span class="{cls}">{esc(r["verdict"])}</span>',
                (
                    f'<span class="fail">{r["failed_runs_a"]}/{r["failed_runs_b"]}</span>'
                    if r["failed_runs_a"] or r["failed_runs_b"]
                    else '<span class="ok">ok</span>'
                ),
            ]
        )
    return rows


def write_compare(
    a: str | Path | Results, b: str | Path | Results, out: str | Path | None = None
) -> Path:
    """Write ``<out>/index.html`` and ``compare.csv`` (default ``<B>/compare``)."""
    ra = a if isinstance(a, Results) else load(a)
    rb = b if isinstance(b, Results) else load(b)
    df = compare(ra, rb)
    _, only_a, only_b = match_points(ra, rb)
    out_dir = (Path(out) if out is not None else rb.root / "compare").resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    df.to_csv(out_dir / "compare.csv", index=False)
    fig_dir = out_dir / "figures"
    figs = F.draw(
        [
            (
                f"compare_{stat}",
                "A dashed, B solid; bars: 95% CI.",
                lambda o, stat=stat: F.compare_load(ra, rb, o, stat=stat),
            )
            for stat in ("p99", "mean")
        ],
        fig_dir,
    )
    parts = [
        f"<p>A: <code>{esc(ra.root)}</code><br>B: <code>{esc(rb.root)}</code></p>",
        f"<p class=muted>B − A per matched point; tests at the {ALPHA:.0%} level "
        "(welch: Welch's t on per-run values; ci: normal test from the 95% CIs; none: "
        "one run per side, no valid test).</p>",
    ]
    if only_a or only_b:
        parts.append(
            f'<p class="note">Unmatched points — only in A: {esc(only_a)}; only in B: '
            f"{esc(only_b)}.</p>"
        )
    nsig = int(df["significant"].sum())
    parts.append(f"<p><b>{nsig}</b> of {len(df)} comparisons changed significantly.</p>")
    # A statistic no point has is simply left out.
    parts += [html.figure_tag(fig_dir, n, cap) for n, cap, err in figs if not err]
    parts.append(html.table(_COMPARE_HEADS, _compare_rows(df), left=2))
    parts.append('<p><a href="compare.csv">compare.csv</a></p>')
    page = out_dir / "index.html"
    page.write_text(html.document("taillab compare", parts), encoding="utf-8")
    return page


def text_summary(df: pd.DataFrame) -> str:
    """A plain-text table for the terminal."""
    lines = [f"{'point':<28} {'stat':<14} {'A':>12} {'B':>12} {'change':>8} {'p':>8}  verdict"]
    for _, r in df.iterrows():
        rel = f"{100 * r['rel_diff']:+.1f}%" if math.isfinite(r["rel_diff"]) else "–"
        p = f"{r['p_value']:.3g}" if math.isfinite(r["p_value"]) else "–"
        lines.append(
            f"{str(r['point_a'])[:28]:<28} {r['stat']:<14} {r['a']:>12.0f} "
            f"{r['b']:>12.0f} {rel:>8} {p:>8}  {r['verdict']}"
        )
    return "\n".join(lines)
