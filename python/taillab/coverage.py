"""Which figure and table of the papers each `taillab reproduce` item checks, and why the
others have none yet: configs/reproduce/coverage.toml, printed into docs/reproduction.md."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import TaillabError

STATUSES = ("item", "missing", "left out")


class CoverageError(TaillabError):
    """coverage.toml is unreadable, or out of step with items.toml."""


def read_toml(p: Path, error: type[TaillabError], hint: str = "") -> dict[str, Any]:
    """The TOML document at ``p``; an unreadable or invalid file raises ``error`` saying which
    (``hint``: what to give instead, after the reason)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise error(f"cannot read {p}: {e.strerror}{hint}") from e
    except tomllib.TOMLDecodeError as e:
        raise error(f"{p} is not valid TOML ({e}); fix that line") from e


def read(path: str | Path, item_ids: list[str]) -> list[dict[str, Any]]:
    """The entries of coverage.toml, checked against the item ids of items.toml: every
    entry has a known status and what that status needs (``items``, ``needs`` or ``why``),
    every id it names is an item, and every item is named by an entry."""
    p = Path(path)
    doc = read_toml(p, CoverageError)
    entries = doc.get("entry", [])
    want = {"item": "items", "missing": "needs", "left out": "why"}
    named: list[str] = []
    for e in entries:
        where = f"{p}: {e.get('paper')} {e.get('figure')}"
        if e.get("status") not in STATUSES:
            raise CoverageError(f"{where}: status {e.get('status')!r}; one of {STATUSES}")
        if not e.get(want[e["status"]]):
            raise CoverageError(f"{where}: a {e['status']!r} entry needs `{want[e['status']]}`")
        named += e.get("items", [])
    unknown = sorted(set(named) - set(item_ids))
    if unknown:
        raise CoverageError(f"{p} names {unknown}, which items.toml does not have")
    unnamed = [i for i in item_ids if i not in named]
    if unnamed:
        raise CoverageError(f"{p} does not say which figure items {unnamed} check; add them")
    return entries


def markdown(path: str | Path, item_ids: list[str]) -> list[str]:
    """docs/reproduction.md's section: every figure and table, its item or why none."""
    entries = read(path, item_ids)
    done = sum(e["status"] == "item" for e in entries)
    missing = sum(e["status"] == "missing" for e in entries)
    lines = [
        "",
        "## Every figure and table of the papers",
        "",
        f"{len(entries)} figures and tables: {done} checked by an item, {missing} with results "
        f"no item checks yet (what each needs), {len(entries) - done - missing} left out (no "
        "results to check). From `configs/reproduce/coverage.toml`.",
        "",
        "| paper | figure | item | what it needs, or why it is left out |",
        "|---|---|---|---|",
    ]
    for e in entries:
        item = ", ".join(f"`{i}`" for i in e.get("items", [])) or f"*{e['status']}*"
        text = e.get("needs") or e.get("why") or e.get("note", "")
        lines.append(f"| {e['paper']} | {e['figure']} | {item} | {text.replace('|', '/')} |")
    return lines
