#!/usr/bin/env python3
"""Fails when a crate's source files, or a Python package's modules, import each other in a cycle.

Rust: a file `a.rs` depends on `b.rs` when it names `crate::b` — also inside a group,
`use crate::{b, c}` or `use crate::x::{b}` — (or `super::b` from a submodule, or `self::b` / a
child module declared in it).

Python (every package `python/<name>/` with an `__init__.py`): a module depends on another of
its package when it imports it — `from . import b`, `from .b import x`, `import pkg.b`,
`from pkg import b` — anywhere in the file: inside a function or an `if TYPE_CHECKING:` block
counts as much as at the top, since an import moved into a function to break a cycle still
leaves the two modules knotted. A name imported from the package itself (`from . import x`
where x is no module) is a dependency on `__init__`.

Cycles between files make a crate or package hard to read in order; `make lint` runs this
over every crate and package.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cycles(graph: dict[str, set[str]], related=lambda a, b: False) -> list[list[str]]:
    """Every cycle a depth-first walk meets, as [a, b, ..., a]; ``related`` pairs are skipped."""
    out, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if related(n, d):
                continue
            if state.get(d) == 1:
                out.append(stack[stack.index(d) :] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return out


# --- Rust --------------------------------------------------------------------------------------


def module_of(src: Path, f: Path) -> str:
    rel = f.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def _group_items(text: str, start: int) -> tuple[list[str], int]:
    """The top-level items of the brace group that opens at ``text[start]`` (`{a, b::c, d::{e}}`),
    and the index after its closing brace."""
    items, depth, cur, i = [], 0, "", start
    while i < len(text):
        ch = text[i]
        if ch == "{":
            depth += 1
            if depth > 1:
                cur += ch
        elif ch == "}":
            depth -= 1
            if depth == 0:
                items.append(cur)
                return [x.strip() for x in items if x.strip()], i + 1
            cur += ch
        elif ch == "," and depth == 1:
            items.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    return [x.strip() for x in items if x.strip()], i


def _crate_paths(text: str) -> list[list[str]]:
    """Every path a file names under `crate::`, the grouped forms expanded: `crate::a::b`,
    `use crate::{a, b::c}` and `use crate::x::{y, z}` give [a, b], [a], [b, c], [x, y], [x, z]."""
    out = []
    for m in re.finditer(
        r"crate::((?:[a-z_][a-z0-9_]*::)*)(\{|[a-z_][a-z0-9_]*)", text
    ):
        prefix = [p for p in m.group(1).split("::") if p]
        if m.group(2) != "{":
            out.append(prefix + [m.group(2)])
            continue
        items, _ = _group_items(text, m.start(2))
        for item in items:
            head = re.match(r"(self|[a-z_][a-z0-9_]*)((?:::[a-z_][a-z0-9_]*)*)", item)
            if not head:
                continue  # a type, `*`, or a nested group of types
            names = [head.group(1)] + [p for p in head.group(2).split("::") if p]
            out.append(
                prefix
                + ([] if names == ["self"] else [n for n in names if n != "self"])
            )
    return [p for p in out if p]


def deps(src: Path, f: Path, mods: set[str]) -> set[str]:
    me = module_of(src, f)
    text = f.read_text()
    text = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", text, flags=re.S)
    text = re.sub(r"//.*", "", text)  # doc links are not imports
    found = set()
    for path in _crate_paths(text):
        for k in range(len(path), 0, -1):
            cand = "::".join(path[:k])
            if cand in mods:
                found.add(cand)
                break
    parent = me.rsplit("::", 1)[0] if "::" in me else ""
    for m in re.finditer(r"super::([a-z_][a-z0-9_]*)", text):
        cand = f"{parent}::{m.group(1)}" if parent else m.group(1)
        if cand in mods:
            found.add(cand)
    found.discard(me)
    # A parent naming its own submodules is structure, not a cycle.
    return {d for d in found if not d.startswith(me + "::") or not me}


def cycles(crate: Path) -> list[list[str]]:
    """The import cycles between a crate's files (modules as `a::b`)."""
    src = crate / "src"
    files = [f for f in src.rglob("*.rs")]
    mods = {module_of(src, f) for f in files}
    graph = {module_of(src, f): deps(src, f, mods) for f in files}
    return _cycles(graph, lambda n, d: d.startswith(n + "::") or n.startswith(d + "::"))


# --- Python ------------------------------------------------------------------------------------


def _py_module(pkg: Path, f: Path) -> str:
    """A file's module within the package, dotted: `a`, `sub.b`, `__init__`, `sub`."""
    parts = list(f.relative_to(pkg).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def py_deps(pkg: Path, f: Path, mods: set[str]) -> set[str]:
    """The package's modules that file ``f`` imports, wherever in the file."""
    me = _py_module(pkg, f)
    # The package a relative import in this file starts from ("" is the top package).
    if me == "__init__":
        here = ""
    elif f.name == "__init__.py":
        here = me
    else:
        here = me.rpartition(".")[0]
    name = pkg.name

    def resolve(dotted: str) -> str | None:
        # The longest prefix that is a module ("" is the package itself: its __init__).
        if not dotted:
            return "__init__"
        parts = dotted.split(".")
        for k in range(len(parts), 0, -1):
            cand = ".".join(parts[:k])
            if cand in mods:
                return cand
        return None

    found: set[str] = set()
    tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == name or a.name.startswith(name + "."):
                    dep = resolve(a.name[len(name) + 1 :])
                    if dep:
                        found.add(dep)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".") if here else []
                if node.level > 1:
                    base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module == name or (node.module or "").startswith(name + "."):
                target = node.module[len(name) + 1 :]
            else:
                continue
            for a in node.names:
                sub = f"{target}.{a.name}" if target else a.name
                dep = sub if sub in mods else resolve(target)
                if dep:
                    found.add(dep)
    found.discard(me)
    return found


def python_cycles(pkg: Path) -> list[list[str]]:
    """The import cycles between a Python package's modules (counting imports in functions)."""
    files = sorted(pkg.rglob("*.py"))
    mods = {_py_module(pkg, f) for f in files}
    graph = {_py_module(pkg, f): py_deps(pkg, f, mods) for f in files}
    return _cycles(graph)


def main(root: Path = ROOT) -> int:
    """Check every crate and every Python package under ``root``; 1 when any has a cycle."""
    bad = 0
    for cargo in sorted(root.glob("**/Cargo.toml")):
        if (
            "target" in cargo.parts
            or "fuzz" in cargo.parts
            or not (cargo.parent / "src").is_dir()
        ):
            continue
        for c in cycles(cargo.parent):
            bad += 1
            print(f"{cargo.parent.relative_to(root)}: import cycle {' -> '.join(c)}")
    packages = sorted(p.parent for p in root.glob("python/*/__init__.py"))
    for pkg in packages:
        for c in python_cycles(pkg):
            bad += 1
            print(f"{pkg.relative_to(root)}: import cycle {' -> '.join(c)}")
    if bad:
        return 1
    names = ", ".join(str(p.relative_to(root)) for p in packages)
    print(
        f"no import cycles between files (crates, and Python packages {names or 'none'})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
