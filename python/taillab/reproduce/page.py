"""One item's verdict and page: its rule applied (:func:`evaluate`) with the checks every item
gets after it (the environment, a host that could not run the experiment, an item capped at
the host, run flags), the page drawn (:func:`render`, :func:`write_page`) and ``verdict.json``
(:func:`verdict_doc`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import html
from ..errors import TaillabError
from ..html import esc
from .items import SCHEMA, Data, Env, ReproduceError, load_item, read_items
from .judge import FAILS, HOLDS, UNRESOLVED
from .rules import RULES
from .verdict import Cond, Verdict, ok_mark, read_json

STATUS_CLASS = {
    "confirmed": "ok",
    "not confirmed": "fail",
    "partly": "warn",
    "inconclusive": "muted",
}


CSS_EXTRA = """
.status{font-size:1.15em;padding:.1em .5em;border-radius:3px;border:1px solid #ccc}
.warn{color:#9a6400;font-weight:700}.banner{background:#fde8e8;border-left:4px solid #b31b1b;
padding:.4em .8em}.claim{font-size:1.1em}
"""


@dataclass
class Page:
    """What a page shows: the item, its verdict (after the environment rule), its data."""

    item_id: str
    item: dict[str, Any]
    verdict: Verdict
    status_from_data: str
    data: Data
    quick: bool

    @property
    def env(self) -> Env:
        return self.data.env


def _reuse_data(item_id: str, item: dict, items: dict, folder: Path, reuse) -> Data | None:
    """The results of the item this one reads (``reuse`` in items.toml), if any."""
    if not item.get("reuse"):
        return None
    other = str(item["reuse"])
    rdir = Path(reuse) if reuse else folder.parent / other
    if not rdir.is_dir():
        raise ReproduceError(
            f"{item_id} reads {other}'s results but {rdir} does not exist; run "
            f"`taillab reproduce {other}` first or give --reuse DIR"
        )
    return load_item(rdir, items[other])


def _environment_rule(verdict: Verdict, env: Env) -> str:
    """Every run disturbed (or none found): inconclusive, whatever the numbers say. Returns
    the status the numbers alone gave."""
    from_data = verdict.status
    if from_data == "inconclusive":
        return from_data
    if env.all_disturbed:
        verdict.status = "inconclusive"
        verdict.body += (
            f"; {from_data} on these numbers, but every one of the {env.runs} runs failed its "
            "environment check"
        )
    elif env.runs == 0:
        verdict.status = "inconclusive"
        verdict.body += "; no run found"
    return from_data


def _counts(v: list) -> str:
    """Worker counts as a page writes them: '1', '1, 2', '1–4' for a run of them."""
    v = [int(x) for x in v]
    if len(v) > 2 and v == list(range(v[0], v[-1] + 1)):
        return f"{v[0]}–{v[-1]}"
    return ", ".join(str(x) for x in v)


def _needs_rule(verdict: Verdict, from_data: str) -> None:
    """A rule that found its runs could not be the paper's experiment (``verdict.needs``):
    "needs: …" instead of a verdict, ``from_data`` (the status the numbers alone gave) kept in
    the sentence."""
    if verdict.needs:
        verdict.status = "inconclusive"
        verdict.body = f"needs: {verdict.needs}; {from_data} on these numbers: {verdict.body}"


def _scale_rule(verdict: Verdict, folder: Path, from_data: str) -> None:
    """An item whose worker axis was capped at the host (OUT/<id>/scale.json, written by
    `taillab reproduce`) says so; one capped below the fewest workers that test its claim
    gives "needs: N CPUs" instead of a verdict (``from_data``, the status the numbers alone
    gave, stays in the sentence)."""
    f = folder / "scale.json"
    if not f.exists():
        return
    sc = read_json(f)
    verdict.numbers["scale"] = sc
    ran, paper = sc.get("ran") or [], sc.get("paper") or []
    note = (
        f"ran {sc.get('key')} = {_counts(ran)} of the paper's {_counts(paper)}: this host has "
        f"{sc.get('cpus')} CPUs and keeps {sc.get('reserve')} for the client and the monitor"
    )
    needs = sc.get("needs_cpus")
    if needs:
        verdict.status = "inconclusive"
        verdict.body = (
            f"needs: {needs} CPUs ({note}; the claim needs {sc.get('least')}); "
            f"{from_data} on these numbers: {verdict.body}"
        )
    elif sc.get("capped"):
        verdict.body += f"; capped: {note}"


def _flags_rule(verdict: Verdict, folder: Path) -> None:
    """An item run with settings of the command line (OUT/<id>/flags.json, written by
    `taillab reproduce ID --seed 7 ...`) says which, in its sentence and its numbers."""
    f = folder / "flags.json"
    if not f.exists():
        return
    flags = read_json(f).get("flags")
    if isinstance(flags, list) and flags:
        verdict.numbers["flags"] = flags
        verdict.body += f"; run with {', '.join(str(x) for x in flags)}"


def evaluate(
    item_id: str,
    folder: str | Path,
    items_path: str | Path,
    reuse: str | Path | None = None,
    quick: bool = False,
) -> Page:
    """Read an item's folder and apply its rule, then the environment rule."""
    items = read_items(items_path)
    if item_id not in items:
        raise ReproduceError(f"unknown item {item_id!r}; {items_path} lists: {', '.join(items)}")
    item, folder = items[item_id], Path(folder)
    if not folder.is_dir():
        raise ReproduceError(
            f"{folder} does not exist; run `taillab reproduce {item_id}` first or give the "
            "folder it wrote"
        )
    reused = _reuse_data(item_id, item, items, folder, reuse)
    data = load_item(folder, item)
    # The quick variant's statistics are points whatever their runs (judge.py).
    for d in (data, reused):
        if d is not None:
            d.quick = quick
    rule = RULES.get(item_id)
    if rule is None:
        verdict = Verdict("inconclusive", "no verdict rule for this item (see RULES)", {})
    else:
        verdict = rule(item, data, reused)
    # An item that only reads another's results shows (and is judged on) those runs.
    shown = reused if reused is not None and not data.results else data
    from_data = _environment_rule(verdict, shown.env)
    _needs_rule(verdict, from_data)
    _scale_rule(verdict, folder, from_data)
    _flags_rule(verdict, folder)
    return Page(item_id, item, verdict, from_data, shown, quick)


def _draw(page: Page, out: Path) -> list[str]:
    """Draw the verdict's figures into out/figures; the figures' HTML (or why not drawn)."""
    fig_dir = out / "figures"
    for old in list(fig_dir.glob("*.png")) + list(fig_dir.glob("*.svg")):
        old.unlink()
    parts = []
    for name, caption, draw in page.verdict.figures:
        try:
            draw(fig_dir / name)
            parts.append(html.figure_tag(fig_dir, name, esc(caption)))
        except TaillabError as e:  # a FigureError, or data a rule's own figure cannot use
            parts.append(html.not_drawn(name, e))
    return parts


def _banners(page: Page) -> list[str]:
    out = []
    env = page.env
    if env.disturbed:
        out.append(
            '<p class="banner"><span class="fail">Built from disturbed runs</span>: '
            f"{env.disturbed} of {env.runs} run(s) failed their environment check — "
            f"{esc(env.gist())}. Their numbers are included; the verdict is only as good as "
            "they are.</p>"
        )
    if env.disturbed_probes:
        out.append(
            f'<p class="note">{env.disturbed_probes} of {env.probes} saturation probe(s) were '
            "disturbed (after their redos); the rates they found may be low.</p>"
        )
    if page.quick:
        out.append(
            '<p class="note"><b>--quick</b>: tiny counts: indicative only. Run '
            f"<code>taillab reproduce {esc(page.item_id)}</code> for the real figure.</p>"
        )
    if page.data.missing:
        out.append(
            '<p class="note">Experiments without results (failed or not run): '
            + ", ".join(esc(m) for m in page.data.missing)
            + "</p>"
        )
    return out


def judged(v: Verdict) -> bool:
    """Whether a verdict was judged against its runs' spread (a condition with an interval),
    not only by point comparisons (indicative)."""
    return any(c.has_interval for c in v.conds)


def _outcome_mark(c: Cond) -> str:
    if c.check is None:
        return ok_mark(c.ok)
    out = c.check.outcome
    css = {HOLDS: "ok", FAILS: "fail", UNRESOLVED: "warn"}.get(out, "muted")
    more = c.check.more_runs if c.unresolved else None
    extra = f" (about {more} more runs a point)" if more is not None else ""
    return f'<span class="{css}">{esc(out)}</span>{esc(extra)}'


def _conditions_html(page: Page) -> list[str]:
    """The conditions: with intervals (value [95 % interval], threshold, outcome, runs) when
    the verdict was judged on repeated runs, else whether each holds and why that is
    indicative."""
    v = page.verdict
    if not v.conds:
        return []
    if not judged(v):
        rows = [[esc(c.text), ok_mark(c.ok), "primary" if c.primary else ""] for c in v.conds]
        note = [] if page.quick else [f'<p class="note">{esc(INDICATIVE)}</p>']
        return [html.table(["condition", "holds", ""], rows), *note]
    rows = [
        [
            esc(c.text),
            esc(c.check.interval_text()) if c.check else "–",
            esc(c.check.threshold_text()) if c.check else "–",
            _outcome_mark(c),
            str(c.check.est.runs) if c.check else "–",
            "primary" if c.primary else "",
        ]
        for c in v.conds
    ]
    heads = ["condition", "value [95 % interval]", "threshold", "outcome", "runs a point", ""]
    return [html.table(heads, rows), f'<p class="muted">{esc(JUDGED)}</p>']


# What the page says of a verdict judged by point comparisons, and of one judged on its runs.
INDICATIVE = (
    "Indicative: each condition compares one number with its threshold, with nothing to "
    "judge its noise by (one run per point, or numbers no run repeats); the full variant "
    "runs each point at least three times and judges each condition against its runs' spread."
)
JUDGED = (
    "Each value is its statistic over the point's runs with a 95 % interval: a quantile's from "
    "its order statistics and the runs' spread, any other statistic's from a bootstrap over "
    "runs. A condition holds when its whole interval is on the claimed side of the threshold, "
    "fails when it is wholly on the other, and is unresolved otherwise (the item is then "
    "inconclusive); an interval narrows about as 1/√runs. A condition without an interval "
    "compares one number."
)


def _verdict_html(page: Page) -> list[str]:
    v = page.verdict
    out = [
        f'<h2>Verdict</h2><p><span class="status {STATUS_CLASS[v.status]}">{esc(v.status)}</span> '
        f"{esc(v.sentence)}</p>"
    ]
    if v.status != page.status_from_data:
        out.append(f'<p class="muted">On the numbers alone: {esc(page.status_from_data)}.</p>')
    return out + _conditions_html(page)


def _data_html(page: Page, out: Path) -> list[str]:
    d = page.data
    host = d.host
    parts = ["<h2>Data</h2>"]
    if host:
        parts.append(
            f"<p>Host: {esc(host.get('hostname'))}, {esc(host.get('cpu'))}, "
            f"{esc(host.get('cores'))} CPUs, kernel {esc(host.get('kernel'))}, "
            f"taillab {esc(host.get('taillab'))} "
            f"({esc(host.get('git'))}); started {esc(d.started_at)}.</p>"
        )
    links = [
        f'<a href="{esc(html.rel(r.root, out))}">{esc(s)}</a> '
        f"({len(r.points)} point(s), {len(r.runs)} run(s))"
        for s, r in d.results.items()
    ]
    if links:
        parts.append(
            "<p>Experiments (each an ordinary results folder; <code>taillab report DIR</code> "
            "draws every figure of one): " + " · ".join(links) + "</p>"
        )
    per = d.runs_per_point()
    if per:
        parts.append(
            "<p>Runs per point: "
            + ", ".join(f"{esc(s)} {_span(n)}" for s, n in per.items())
            + ".</p>"
        )
    if page.env.detail:
        rows = "".join(f"<li><code>{esc(w)}</code>: {esc(r)}</li>" for w, r in page.env.detail)
        parts.append(
            f"<details><summary>Disturbed runs ({len(page.env.detail)})</summary>"
            f"<ul>{rows}</ul></details>"
        )
    cmd = f"taillab reproduce {page.item_id}" + (" --quick" if page.quick else "")
    parts.append(f"<p>Command: <code>{esc(cmd)}</code></p>")
    return parts


def _span(n: list[int]) -> str:
    """'3', or '3–5' when a CI target stopped points at different counts."""
    return str(n[0]) if n[0] == n[1] else f"{n[0]}–{n[1]}"


def render(page: Page, out: Path) -> str:
    """The item's page (HTML); draws its figures into out/figures."""
    it, v = page.item, page.verdict
    title = f"{it.get('paper', '')}: {it.get('figure', '')}"
    parts = [
        f'<p class="muted"><a href="../index.html">all items</a> · {esc(page.item_id)}</p>',
        f"<h1>{esc(title)}</h1>",
        f'<p class="claim">Claim: {esc(it.get("claim", ""))}</p>',
        *_banners(page),
        *_verdict_html(page),
        "<h2>Our figure</h2>",
        *(_draw(page, out) or ['<p class="muted">No figure for this item.</p>']),
        "<h2>The paper's numbers</h2>",
    ]
    if v.paper:
        parts.append(html.table(*v.paper))
    else:
        parts.append(
            '<p class="muted">The paper gives this figure as a plot only; compare the shape.</p>'
        )
    if v.rows:
        parts += ["<h2>Our numbers</h2>", html.table(v.heads, v.rows)]
    for section in v.sections:
        parts.append(section(out))
    parts += _data_html(page, out)
    # The way back to every item comes before the heading.
    return html.document(f"{page.item_id}: {title}", parts, heading="", css=CSS_EXTRA)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def _cond_doc(c: Cond) -> dict[str, Any]:
    """A condition as verdict.json keeps it: with its check where it has one."""
    doc = {"text": c.text, "ok": c.ok, "primary": c.primary}
    return doc | c.check.doc() if c.check is not None else doc


def verdict_doc(page: Page) -> dict[str, Any]:
    """verdict.json's content (schema in the module doc)."""
    v, env, it = page.verdict, page.env, page.item
    return _jsonable(
        {
            "schema": SCHEMA,
            "id": page.item_id,
            "paper": it.get("paper"),
            "figure": it.get("figure"),
            "claim": it.get("claim"),
            "status": v.status,
            "status_from_data": page.status_from_data,
            "verdict": v.sentence,
            "numbers": v.numbers,
            "conditions": [_cond_doc(c) for c in v.conds],
            "judged": "runs" if judged(v) else "indicative",
            "runs_per_point": page.data.runs_per_point(),
            "runs": env.runs,
            "disturbed_runs": env.disturbed,
            "probes": env.probes,
            "disturbed_probes": env.disturbed_probes,
            "environment": env.gist(),
            "quick": page.quick,
            "host": page.data.host,
            "started_at": page.data.started_at,
        }
    )


def write_page(
    item_id: str,
    folder: str | Path,
    items_path: str | Path,
    reuse: str | Path | None = None,
    quick: bool = False,
) -> Path:
    """Write ``folder/index.html`` and ``folder/verdict.json``; returns the page's path."""
    page = evaluate(item_id, folder, items_path, reuse=reuse, quick=quick)
    out = Path(folder).resolve()
    (out / "index.html").write_text(render(page, out), encoding="utf-8")
    doc = verdict_doc(page)
    (out / "verdict.json").write_text(
        json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False), encoding="utf-8"
    )
    return out / "index.html"
