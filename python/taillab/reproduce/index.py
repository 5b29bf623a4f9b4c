"""The index of every item's verdict (:func:`write_index`) and the markdown of
docs/reproduction.md (:func:`markdown`, used by ``scripts/reproduction-doc.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import coverage, html
from ..html import esc
from .items import SCHEMA, ReproduceError, read_items
from .page import CSS_EXTRA, STATUS_CLASS
from .verdict import read_json


def read_verdicts(root: str | Path, items_path: str | Path) -> list[tuple[str, dict, dict | None]]:
    """(id, item, verdict.json or None when the item has no page yet), in items.toml order."""
    root = Path(root)
    if not root.is_dir():
        raise ReproduceError(
            f"{root} does not exist; give the folder `taillab reproduce all` wrote"
        )
    out = []
    for iid, item in read_items(items_path).items():
        doc = read_json(root / iid / "verdict.json")
        out.append((iid, item, doc if doc.get("schema") == SCHEMA else None))
    return out


def _env_cell(doc: dict) -> str:
    k, n = doc.get("disturbed_runs", 0), doc.get("runs", 0)
    return f"{k} of {n} runs disturbed" if k else f"{n} runs, none disturbed"


def _machine(host: dict) -> str:
    """A verdict's machine in words: name, CPU model, CPUs and kernel."""
    return (
        f"{host.get('hostname', '?')}, {host.get('cpu', '?')}, {host.get('cores', '?')} CPUs, "
        f"kernel {host.get('kernel', '?')}"
    )


def _machines(found: list[tuple[str, dict, dict | None]]) -> list[str]:
    """The machines the verdicts were measured on, first seen first (items of a full run made
    over several sessions may come from different hosts)."""
    seen: list[str] = []
    for _, _, d in found:
        if d and d.get("host"):
            m = _machine(d["host"])
            if m not in seen:
                seen.append(m)
    return seen


def write_index(root: str | Path, items_path: str | Path) -> Path:
    """``root/index.html``: every item's status and sentence, linking its page."""
    root = Path(root)
    rows, quick = [], False
    for iid, item, doc in read_verdicts(root, items_path):
        if doc is None:
            rows.append(
                [
                    esc(iid),
                    esc(item.get("paper")),
                    esc(item.get("figure")),
                    esc(item.get("claim")),
                    '<span class="muted">no page</span>',
                    "",
                    "",
                ]
            )
            continue
        quick |= bool(doc.get("quick"))
        st = str(doc.get("status"))
        rows.append(
            [
                f'<a href="{esc(iid)}/index.html">{esc(iid)}</a>',
                esc(item.get("paper")),
                esc(item.get("figure")),
                esc(item.get("claim")),
                f'<span class="{STATUS_CLASS.get(st, "muted")}">{esc(st)}</span>',
                esc(doc.get("verdict")),
                esc(_env_cell(doc)),
            ]
        )
    banner = '<p class="note"><b>--quick</b>: tiny counts: indicative only.</p>' if quick else ""
    text = html.document(
        "taillab reproduce",
        [
            banner,
            "<p class=muted>Each verdict is computed from the results by its rule "
            "(python/taillab/reproduce/rules/); a run that failed its environment check is "
            "counted, never dropped.</p>",
            html.table(
                ["item", "paper", "figure", "claim", "status", "verdict", "environment"],
                rows,
                left=7,
            ),
        ],
        heading="Reproduction of the papers' figures",
        css=CSS_EXTRA,
    )
    page = root / "index.html"
    page.write_text(text, encoding="utf-8")
    return page


def _body(doc: dict) -> str:
    """The verdict sentence without its trailing ": <status>" (shown beside it)."""
    text, tail = str(doc.get("verdict", "")), f": {doc.get('status')}"
    return text[: -len(tail)] if text.endswith(tail) else text


def _md(text: Any) -> str:
    return str(text or "").replace("|", "\\|").replace("\n", " ")


def _md_header(
    found: list[tuple[str, dict, dict | None]],
    inside: str | None,
    machines: list[str],
    filled: set[str] = frozenset(),
    pages: bool = True,
) -> list[str]:
    """The doc's opening: how it is made, the machine, when, where the results are (``inside``:
    their folder relative to the repository, or None: on the machine that ran them, so the doc
    says how to make them instead of naming that machine's folder), the variant, the
    environment. ``machines``: the verdicts' hosts (``_machines``). ``filled``: items whose
    verdict comes from a quick run because the full run has not reached them yet."""
    docs = [d for _, it, d in found if d]
    # An item that reads another's runs would count them twice.
    own = [d for _, it, d in found if d and not it.get("reuse")]
    quick = any(d.get("quick") for d in docs)
    full = [iid for iid, _, d in found if d and not d.get("quick")]
    host = next((d["host"] for d in docs if d.get("host")), {})
    times = sorted(d["started_at"] for d in docs if d.get("started_at"))
    runs = sum(d.get("runs", 0) for d in own)
    disturbed = sum(d.get("disturbed_runs", 0) for d in own)
    variant = "**--quick** (tiny counts: indicative only)" if quick else "full"
    if full and quick:
        variant = (
            f"full for {len(full)} of {len(found)} items; the others' verdicts come from "
            f"`--quick` (tiny counts: indicative only), marked *(--quick)*, until the full run "
            f"reaches them"
        )
    # Items rerun after a fix were measured by another build: name each build and its items.
    builds: dict[str, list[str]] = {}
    for item_id, _, d in found:
        if d and (d.get("host") or {}).get("git"):
            builds.setdefault(d["host"]["git"], []).append(item_id)
    if len(builds) > 1:
        git = "; ".join(f"git {g}: {', '.join(ids)}" for g, ids in builds.items())
    else:
        git = f"git {host.get('git', '?')}"
    counts = sorted({d["host"]["cores"] for d in docs if (d.get("host") or {}).get("cores")})
    cores = " and ".join(str(c) for c in counts) if counts else "?"
    if len(machines) > 1:
        machine = (
            f"- Machines: {len(machines)}, named per item in the environment column: "
            + "; ".join(machines)
            + f"; taillab {host.get('taillab', '?')} ({git})"
        )
    else:
        machine = f"- Machine: {_machine(host)}, taillab {host.get('taillab', '?')} ({git})"
    return [
        "# Reproduction of the papers' figures",
        "",
        "Generated by `scripts/reproduction-doc.py` from the results of `taillab reproduce"
        + (" --quick" if quick and not full else "")
        + ("` (and of `--quick` for the items marked so)" if filled else "`")
        + "; do not edit by hand. Each verdict is computed from the data by its rule in "
        "`python/taillab/reproduce/rules/`, one module per paper (thresholds and why are named "
        "constants there): "
        "**confirmed** (every condition holds), **partly**, **not confirmed**, or "
        "**inconclusive** (no data, every run failed its environment check, or `needs: …` "
        "where the host could not run the paper's experiment; the status the numbers alone "
        "give is then said in the sentence).",
        "",
        machine,
        f"- When: {times[0] if times else '?'} to {times[-1] if times else '?'}",
        _md_results(inside, quick and not full, pages)
        + (
            "; the items marked *(--quick)*: `taillab reproduce all --quick --out QDIR`, and "
            "`--quick-root QDIR` to the script"
            if filled and (inside is None or pages)
            else ""
        ),
        f"- Variant: {variant}",
        f"- Environment: {disturbed} of {runs} runs failed their environment check"
        + (" (a shared, busy host: read every verdict below as provisional)" if disturbed else ""),
        f"- CPUs: {cores}; figures that need more (thread scaling to 4 or 8) run "
        'what fits beside one CPU for the client and the monitor, and say so ("needs: N CPUs" '
        "where that cannot test the claim). A networked configuration is two network "
        "namespaces on this one host.",
        "",
    ]


def _md_results(inside: str | None, quick: bool, pages: bool = True) -> str:
    """The doc's line on where the results are, or how to make them."""
    if inside is not None and not pages:
        return (
            f"- Results: each item's `verdict.json` is kept in `{inside}` of this repository "
            "(`quick/` beside it for the items marked *(--quick)*); its runs and page stayed on "
            "the machine that ran it. To add to them: `target/release/taillab reproduce ID "
            "[--quick] --out DIR` (or `all`), then `.venv/bin/python scripts/reproduction-doc.py "
            "DIR > docs/reproduction.md`, which keeps DIR's verdicts there beside the others"
        )
    if inside is not None:
        pages_at = "each item's page is `<id>/index.html` there"
        return f"- Results: `{inside}` in this repository ({pages_at})"
    run = "taillab reproduce all" + (" --quick" if quick else "")
    return (
        "- Results: not in this repository (they stayed on the machine that ran them). To make "
        f"them and this page on yours: `target/release/{run} --out DIR`, then "
        "`.venv/bin/python scripts/reproduction-doc.py DIR > docs/reproduction.md`; each "
        "item's page is `DIR/<id>/index.html`"
    )


def markdown(
    root: str | Path,
    items_path: str | Path,
    repo: str | Path | None = None,
    quick_root: str | Path | None = None,
) -> str:
    """docs/reproduction.md: per item the paper's claim, our verdict with its numbers, the
    environment and the command; a column linking the pages when ``root`` lies inside
    ``repo`` (the doc is in repo/docs). ``quick_root``: a `--quick` run whose verdicts stand
    in, marked, for the items a (full) run in ``root`` has not reached yet."""
    root = Path(root).resolve()
    found = read_verdicts(root, items_path)
    filled: set[str] = set()
    if quick_root is not None:
        stand_in = {iid: d for iid, _, d in read_verdicts(quick_root, items_path)}
        for k, (iid, item, doc) in enumerate(found):
            if doc is None and stand_in.get(iid) is not None:
                found[k] = (iid, item, stand_in[iid])
                filled.add(iid)
    docs_dir = Path(repo).resolve() / "docs" if repo is not None else None
    inside_repo = docs_dir is not None and root.is_relative_to(docs_dir.parent)
    # Verdicts kept in the repository without their runs (scripts/reproduction-doc.py) have
    # no pages to link.
    link = inside_repo and any((root / iid / "index.html").exists() for iid, _, _ in found)
    heads = ["item", "paper", "figure", "claim"] + (["our figure"] if link else [])
    heads += ["verdict (our numbers)", "environment", "command"]
    inside = str(root.relative_to(docs_dir.parent)) if inside_repo else None
    machines = _machines(found)
    lines = _md_header(found, inside, machines, filled, pages=link)
    lines += ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for iid, item, doc in found:
        cells = [iid, _md(item.get("paper")), _md(item.get("figure")), _md(item.get("claim"))]
        stood_in = iid in filled
        if link:
            page = html.rel(root / iid / "index.html", docs_dir) if doc and not stood_in else ""
            cells.append(f"[page]({page})" if page else "–")
        if doc is None:
            cells += ["not run", "–"]
        else:
            env = _env_cell(doc)
            if len(machines) > 1 and doc.get("host"):
                env += f"; on {_machine(doc['host'])}"
            mark = "*(--quick)* " if stood_in else ""
            cells += [f"{mark}**{_md(doc.get('status'))}**: {_md(_body(doc))}", _md(env)]
        cells.append(f"`taillab reproduce {iid}{' --quick' if stood_in else ''}`")
        lines.append("| " + " | ".join(cells) + " |")
    cov = Path(items_path).with_name("coverage.toml")
    if cov.exists():
        lines += coverage.markdown(cov, list(read_items(items_path)))
    return "\n".join([*lines, ""])
