"""The HTML every page is made of: one document writer, tables, figure tags, escaping, links.

A leaf module (it imports nothing of taillab's). Every page the package writes — the report,
its resources and counters pages, compare, the TailWAG validation, the reproduction pages —
is a :func:`document`: the same head and style sheet, nothing fetched when it is viewed (no
scripts, fonts or styles from elsewhere), so a folder of pages can be zipped, mailed or
opened offline. Links to files are relative (:func:`rel`), so moving a results folder
together with its pages keeps them working.
"""

from __future__ import annotations

import html
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: The one style sheet, inlined into every page.
CSS = """
body{font:14px/1.45 system-ui,-apple-system,'DejaVu Sans',sans-serif;margin:2em auto;
max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
td,th{border:1px solid #ccc;padding:3px 7px;text-align:right;vertical-align:top}
th{background:#f3f3f3}td.l,th.l{text-align:left}
.ok{color:#17741a;font-weight:600}.fail{color:#b31b1b;font-weight:700}.muted{color:#777}
figure{margin:1em 0;display:inline-block;max-width:100%}
figure img{max-width:100%;border:1px solid #eee}figcaption{font-size:13px;color:#444}
.note{background:#fff8e0;border-left:4px solid #e0b000;padding:.4em .8em}
"""


def esc(v: Any) -> str:
    """Text for HTML (``None`` is empty)."""
    return html.escape("" if v is None else str(v))


def rel(target: str | Path, out_dir: Path) -> str:
    """The link from a page in ``out_dir`` to ``target``, relative and with forward slashes."""
    return Path(os.path.relpath(Path(target), out_dir)).as_posix()


def document(
    title: str,
    body: str | Iterable[str],
    *,
    heading: str | None = None,
    css: str = "",
) -> str:
    """A whole page: ``<!doctype html>``, the style sheet (:data:`CSS`, then ``css``), the
    ``title`` as the window title and as the ``<h1>`` (``heading`` instead when given; ""
    leaves the heading to ``body``), and ``body``'s HTML (parts joined by newlines).

    ``title`` and ``heading`` are text (escaped here); ``body`` is HTML."""
    parts = [body] if isinstance(body, str) else list(body)
    h1 = title if heading is None else heading
    head = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{esc(title)}</title><style>{CSS}{css}</style></head><body>"
    )
    return "\n".join([head, *([f"<h1>{esc(h1)}</h1>"] if h1 else []), *parts, "</body></html>"])


def table(headers: list[str], rows: list[list[str]], left: int = 1) -> str:
    """A table of HTML cells (escape text before); the first ``left`` columns align left."""
    th = "".join(f'<th class="{"l" if i < left else ""}">{h}</th>' for i, h in enumerate(headers))
    body = "".join(
        "<tr>"
        + "".join(f'<td class="{"l" if i < left else ""}">{c}</td>' for i, c in enumerate(r))
        + "</tr>"
        for r in rows
    )
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def figure_tag(fig_dir: Path, name: str, caption: str) -> str:
    """The ``<figure>`` of ``fig_dir/name.png|svg`` (drawn already) for a page in
    ``fig_dir``'s parent: the PNG linking the SVG, and ``caption`` (HTML)."""
    png, svg = f"{fig_dir.name}/{name}.png", f"{fig_dir.name}/{name}.svg"
    # Shown at 100 px per figure inch (the PNGs are 150 dpi): text stays the size of the page's.
    width = int.from_bytes((fig_dir / f"{name}.png").read_bytes()[16:20], "big") * 2 // 3
    return (
        f'<figure id="{esc(name)}"><a href="{svg}"><img src="{png}" width="{width}" '
        f'alt="{esc(name)}"></a><figcaption>{caption} '
        f'<a href="{png}">PNG</a> · <a href="{svg}">SVG</a></figcaption></figure>'
    )


def not_drawn(name: str, why: Any) -> str:
    """What a page shows instead of a figure the data could not support."""
    return f'<p class="muted">{esc(name)}: not drawn ({esc(why)})</p>'


def figures(fig_dir: Path, drawn: Iterable[tuple[str, str, str]]) -> list[str]:
    """The figures of (name, caption, error) triples: each drawn one's tag, or why not."""
    return [not_drawn(n, err) if err else figure_tag(fig_dir, n, cap) for n, cap, err in drawn]
