"""Run to run: does an item's verdict hold from one full run to the next?

A full run's verdicts are kept in the repository (``scripts/reproduction-doc.py``:
``docs/reproduction/full/<id>/verdict.json``); when a later full run of the item is kept, the
verdict it replaces moves to ``<id>/earlier/<started_at>.json`` instead of being lost. This
module compares an item's newest verdict with the one before it, when both were judged on
repeated runs (verdict.json's ``judged == "runs"``):

* ``same`` — the same status;
* ``differs where unresolved`` — the statuses differ, but no condition that both runs
  resolved disagrees: the difference comes from conditions one of the runs left unresolved (its
  interval straddled the threshold) or could not judge, which is what an interval that straddles
  means;
* ``contradicts`` — a condition held in one run and failed in the other: each run's interval
  was on its own side of the threshold, so at least one of them is wrong about the host (a
  drift between the sessions, or an interval too narrow for the host's spread).

Conditions are matched by their text, then those left with the numbers in it read as
wildcards (a few conditions name a measured number, e.g. "speech's service p95/mean 4.39× above
the apps' median"), in order where two texts match alike. Whatever the outcomes, a condition
whose 95 % intervals in the two runs do not overlap is named: the host moved between the
sessions more than the runs' spread within one shows (an interval the judge trusted was too
narrow for the next session). The base seed of a run is the seed it was
run with (``taillab reproduce ID --seed N``: ``load.seed=N`` in verdict.json's ``numbers.flags``),
else the item's own (1 unless its experiment sets one); an item that reads another's runs
(``reuse`` in items.toml) has that item's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .items import SCHEMA
from .verdict import read_json

SAME, UNRESOLVED_ONLY, CONTRADICTS = "same", "differs where unresolved", "contradicts"

# The folder, beside an item's kept verdict.json, that holds the verdicts it replaced.
EARLIER = "earlier"


def stamp(doc: dict) -> str:
    """A verdict's file name under ``earlier/``: its start time, safe in a path."""
    return re.sub(r"[^0-9A-Za-z.-]", "-", str(doc.get("started_at") or "unknown")) + ".json"


def earlier(root: str | Path, iid: str) -> list[dict]:
    """The item's replaced verdicts (``root/<id>/earlier/*.json``), oldest first."""
    folder = Path(root) / iid / EARLIER
    docs = [read_json(p) for p in folder.glob("*.json")] if folder.is_dir() else []
    docs = [d for d in docs if d.get("schema") == SCHEMA]
    return sorted(docs, key=lambda d: str(d.get("started_at") or ""))


def base_seed(doc: dict, item: dict | None = None) -> str:
    """The base seed a verdict's runs derive from, in words (``item``: its items.toml entry; an
    item that reads another's runs has that item's seed)."""
    if item and item.get("reuse"):
        return f"{item['reuse']}'s runs"
    for f in (doc.get("numbers") or {}).get("flags") or []:
        key, _, val = str(f).partition("=")
        if key == "load.seed":
            return f"seed {val}"
    return "the item's seed"


def _key(text: str) -> str:
    return re.sub(r"[-+]?\d+(?:[.,]\d+)*", "#", text)


def _pairs(a: list[dict], b: list[dict]) -> list[tuple[dict, dict]]:
    """Conditions of two verdicts matched by their text, then those left by their text with
    numbers as wildcards (in order), so "N = 5: ..." meets "N = 5: ..." and not "N = 50: ..."."""
    out, left_a, left_b = [], list(a), list(b)
    for key in (lambda c: str(c.get("text", "")), lambda c: _key(str(c.get("text", "")))):
        pool: dict[str, list[dict]] = {}
        for c in left_b:
            pool.setdefault(key(c), []).append(c)
        rest = []
        for c in left_a:
            match = pool.get(key(c))
            if match:
                other = match.pop(0)
                out.append((c, other))
                left_b.remove(other)
            else:
                rest.append(c)
        left_a = rest
    return out


def _interval(c: dict) -> tuple[float, float] | None:
    lo, hi = c.get("ci_low"), c.get("ci_high")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        if math.isfinite(lo) and math.isfinite(hi):
            return float(lo), float(hi)
    return None


@dataclass
class Agreement:
    """How an item's newest verdict compares with the one before it."""

    kind: str
    # Conditions both runs resolved (held or failed), and those among them that disagree.
    resolved_both: int = 0
    contradictions: list[str] = field(default_factory=list)
    # Conditions one run resolved and the other left unresolved or without data.
    one_sided: list[str] = field(default_factory=list)
    # Conditions whose 95 % intervals in the two runs do not overlap, whatever their outcome:
    # the host moved between the sessions more than either run's spread shows.
    disjoint: list[str] = field(default_factory=list)


def compare(old: dict, new: dict) -> Agreement:
    """The agreement of two verdicts of one item (see the module doc)."""
    both, contra, one_sided, disjoint = 0, [], [], []
    for a, b in _pairs(old.get("conditions") or [], new.get("conditions") or []):
        oa, ob = a.get("ok"), b.get("ok")
        if oa is not None and ob is not None:
            both += 1
            if oa != ob:
                contra.append(str(b.get("text")))
        elif (oa is None) != (ob is None):
            one_sided.append(str(b.get("text")))
        ia, ib = _interval(a), _interval(b)
        if ia and ib and (ia[1] < ib[0] or ib[1] < ia[0]):
            disjoint.append(str(b.get("text")))
    if contra:
        kind = CONTRADICTS
    elif old.get("status") == new.get("status"):
        kind = SAME
    else:
        kind = UNRESOLVED_ONLY
    return Agreement(kind, both, contra, one_sided, disjoint)


def pairs(root: str | Path, found: list[tuple[str, dict, dict | None]]):
    """(id, item, the verdict before, the newest, their agreement) for every item whose newest kept
    verdict and the latest one it replaced were both judged on repeated runs."""
    out = []
    for iid, item, doc in found:
        if not doc or doc.get("judged") != "runs" or doc.get("quick"):
            continue
        before = [d for d in earlier(root, iid) if d.get("judged") == "runs" and not d.get("quick")]
        if before:
            out.append((iid, item, before[-1], doc, compare(before[-1], doc)))
    return out
