"""Result files checked against the JSON Schemas that the Rust types generate.

``summary.json`` of schema ``taillab.run/2`` is checked against ``schema/run-2.json`` in this
package, a copy of docs/schema/run-2.json (``taillab config schema run`` prints it; a Rust test
fails when either copy differs from what the types generate). Files of ``taillab.run/1`` were
written before the schema existed and are read as they are.

The validator covers the part of JSON Schema (draft 2020-12) that schemars emits: ``$ref`` into
``$defs``, ``type``, ``properties``, ``required``, ``additionalProperties``, ``items``,
``anyOf``, ``oneOf``, ``allOf``, ``enum``, ``const``, ``minimum``/``maximum`` and the integer
``format``s. A schema with any other keyword is refused (:func:`unknown_keywords`), so a
constraint is never skipped silently. It is written here rather than taken from the
``jsonschema`` package because the bundle (``make bundle``) runs this package on hosts without
pip, and jsonschema's dependencies include a compiled extension. Integers are as strict as the
Rust reader that reads the same files: ``1.0`` is not an integer, nor is ``true``.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from .errors import SchemaError

SCHEMA_DIR = Path(__file__).with_name("schema")
# Keywords that constrain a value, and those that only describe it.
CHECKED = {
    "$ref", "type", "properties", "required", "additionalProperties", "items", "anyOf",
    "oneOf", "allOf", "enum", "const", "minimum", "maximum", "format",
}  # fmt: skip
DESCRIBING = {"$schema", "$id", "$defs", "title", "description", "default"}
# The integer formats schemars writes for Rust's integer types, with their ranges: serde
# refuses a value outside them, so the check does too. Other formats (double, float) say nothing
# a type does not.
INT_RANGE = {
    **{f"uint{b}": (0, 2**b - 1) for b in (8, 16, 32, 64, 128)},
    **{f"int{b}": (-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32, 64, 128)},
    "uint": (0, 2**64 - 1),
    "int": (-(2**63), 2**63 - 1),
}
_TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
# Errors listed in one exception before the rest are only counted.
MAX_LISTED = 5


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The schema ``schema/<name>.json`` of this package (``run-2``)."""
    path = SCHEMA_DIR / f"{name}.json"
    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise SchemaError(f"cannot read the schema {path}: {e}; reinstall the package") from e
    bad = unknown_keywords(schema)
    if bad:
        raise SchemaError(
            f"{path} uses JSON Schema keywords this validator does not check ({', '.join(bad)}); "
            "teach taillab/schema.py them"
        )
    return schema


def unknown_keywords(schema: Any) -> list[str]:
    """Keywords used anywhere in ``schema`` that the validator neither checks nor ignores."""
    found: set[str] = set()

    def walk(s: Any) -> None:
        if isinstance(s, list):
            for x in s:
                walk(x)
        if not isinstance(s, dict):
            return
        for k, v in s.items():
            if k not in CHECKED | DESCRIBING:
                found.add(k)
            if k in ("properties", "$defs"):
                for sub in v.values():
                    walk(sub)
            elif k not in ("enum", "const", "default"):
                walk(v)

    walk(schema)
    return sorted(found)


def _show(v: Any) -> str:
    if isinstance(v, str):
        return repr(v) if len(v) <= 60 else repr(v[:57] + "...")
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _key(path: str, k: str | int) -> str:
    if isinstance(k, int):
        return f"{path}[{k}]"
    return f"{path}.{k}" if path else k


class _Validator:
    def __init__(self, root: dict[str, Any]):
        self.defs = root.get("$defs", {})

    def errors(self, v: Any, s: Any, path: str) -> list[tuple[str, str]]:
        """Every (key path, message) where ``v`` breaks ``s``."""
        if s is True or s == {}:
            return []
        if s is False:
            return [(path, "is not allowed here")]
        out: list[tuple[str, str]] = []
        if "$ref" in s:
            out += self.errors(v, self._deref(s["$ref"]), path)
        if "type" in s:
            types = s["type"] if isinstance(s["type"], list) else [s["type"]]
            if not any(_TYPES[t](v) for t in types):
                names = " or ".join(repr(t) for t in types)
                return out + [(path, f"{_show(v)} is not of type {names}")]
        if "enum" in s and v not in s["enum"]:
            out.append((path, f"{_show(v)} is not one of {s['enum']}"))
        if "const" in s and v != s["const"]:
            out.append((path, f"{_show(v)} is not {_show(s['const'])}"))
        if _TYPES["number"](v):
            out += self._bounds(v, s, path)
        if isinstance(v, dict):
            out += self._object(v, s, path)
        if isinstance(v, list) and "items" in s:
            for i, x in enumerate(v):
                out += self.errors(x, s["items"], _key(path, i))
        for sub in s.get("allOf", []):
            out += self.errors(v, sub, path)
        if "anyOf" in s:
            out += self._alternatives(v, s["anyOf"], path, exactly_one=False)
        if "oneOf" in s:
            out += self._alternatives(v, s["oneOf"], path, exactly_one=True)
        return out

    def _deref(self, ref: str) -> Any:
        prefix = "#/$defs/"
        if not ref.startswith(prefix) or ref[len(prefix) :] not in self.defs:
            raise SchemaError(f"the schema refers to {ref!r}, which it does not define")
        return self.defs[ref[len(prefix) :]]

    def _bounds(self, v: float, s: dict[str, Any], path: str) -> list[tuple[str, str]]:
        out = []
        if "minimum" in s and v < s["minimum"]:
            out.append((path, f"{_show(v)} is less than the minimum of {s['minimum']}"))
        if "maximum" in s and v > s["maximum"]:
            out.append((path, f"{_show(v)} is more than the maximum of {s['maximum']}"))
        lo_hi = INT_RANGE.get(s.get("format", ""))
        if lo_hi and isinstance(v, int) and not lo_hi[0] <= v <= lo_hi[1]:
            out.append((path, f"{_show(v)} is out of range for {s['format']}"))
        return out

    def _object(self, v: dict[str, Any], s: dict[str, Any], path: str) -> list[tuple[str, str]]:
        out = []
        props = s.get("properties", {})
        for k in s.get("required", []):
            if k not in v:
                out.append((_key(path, k), MISSING))
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                out += self.errors(x, props[k], _key(path, k))
            elif extra is False:
                out.append((_key(path, k), "is not a key of this object"))
            elif extra is not True:
                out += self.errors(x, extra, _key(path, k))
        return out

    def _alternatives(
        self, v: Any, alts: list[Any], path: str, exactly_one: bool
    ) -> list[tuple[str, str]]:
        tries = [self.errors(v, a, path) for a in alts]
        fits = sum(1 for t in tries if not t)
        if fits == 1 or (fits > 1 and not exactly_one):
            return []
        if fits > 1:
            return [(path, f"{_show(v)} matches more than one of its allowed shapes")]
        # None fits: report the alternative that got furthest (the variant whose tag matched;
        # an Option's value rather than its null), judged by how deep its errors lie.
        depth = [max(len(p) for p, _ in t) for t in tries]
        if max(depth) > len(path):
            best = max(
                range(len(tries)),
                key=lambda i: (not self._tag_differs(v, alts[i]), depth[i], -len(tries[i])),
            )
            return tries[best]
        why = "; ".join(dict.fromkeys(m for t in tries for _, m in t))
        return [(path, f"matches none of its allowed shapes ({why})")]

    def _tag_differs(self, v: Any, alt: Any) -> bool:
        """Whether ``v`` has a key that ``alt`` fixes to another value (an enum variant's tag,
        ``"status": "skipped"``)."""
        while isinstance(alt, dict) and "$ref" in alt:
            alt = self._deref(alt["$ref"])
        if not isinstance(v, dict) or not isinstance(alt, dict):
            return False
        fixed = {k: p["const"] for k, p in alt.get("properties", {}).items() if "const" in p}
        return any(k in v and v[k] != c for k, c in fixed.items())


MISSING = "the required key is missing"


def problems(doc: Any, schema: dict[str, Any]) -> list[str]:
    """Each place ``doc`` breaks ``schema``, as ``key.path: what is wrong``: values of the wrong
    shape first (the likelier corruption), then missing keys."""
    found = _Validator(schema).errors(doc, schema, "")
    found.sort(key=lambda e: e[1] == MISSING)
    return [f"{p}: {m}" if p else m for p, m in found]


def missing_keys(doc: Any, schema: dict[str, Any]) -> list[str]:
    """The key paths (``a.b[0].c``, as :func:`problems` names them) that ``schema`` requires and
    ``doc`` lacks."""
    return [p for p, m in _Validator(schema).errors(doc, schema, "") if m == MISSING]


def validate_run(doc: dict[str, Any], path: Path | str) -> None:
    """Raise :class:`SchemaError` naming ``path`` and the first wrong keys when ``doc`` (a
    ``taillab.run/2`` summary.json) does not match docs/schema/run-2.json."""
    found = problems(doc, load_schema("run-2"))
    if not found:
        return
    more = len(found) - MAX_LISTED
    raise SchemaError(
        f"{path}: "
        + "; ".join(found[:MAX_LISTED])
        + (f"; and {more} more" if more > 0 else "")
        + " (the file does not match taillab.run/2, docs/schema/run-2.json: it was edited by "
        "hand or written by a different taillab; re-run it)"
    )
