#!/usr/bin/env python3
"""Fails when a crate's source files import each other in a cycle.

A file `a.rs` depends on `b.rs` when it names `crate::b` (or `super::b` from a
submodule, or `self::b` / a child module declared in it). Cycles between files
make a crate hard to read in order; `make lint` runs this over every crate.
"""
import re
import sys
from pathlib import Path

root = Path(__file__).resolve().parent.parent


def module_of(src: Path, f: Path) -> str:
    rel = f.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return "::".join(parts)


def deps(src: Path, f: Path, mods: set[str]) -> set[str]:
    me = module_of(src, f)
    text = f.read_text()
    text = re.sub(r"#\[cfg\(test\)\]\s*mod tests\s*\{.*", "", text, flags=re.S)
    text = re.sub(r"//.*", "", text)  # doc links are not imports
    found = set()
    for m in re.finditer(r"crate::([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)", text):
        path = m.group(1).split("::")
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
    src = crate / "src"
    files = [f for f in src.rglob("*.rs")]
    mods = {module_of(src, f) for f in files}
    graph = {module_of(src, f): deps(src, f, mods) for f in files}
    out, state, stack = [], {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if d.startswith(n + "::") or n.startswith(d + "::"):
                continue
            if state.get(d) == 1:
                out.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    return out


bad = 0
for cargo in sorted(root.glob("**/Cargo.toml")):
    if "target" in cargo.parts or "fuzz" in cargo.parts or not (cargo.parent / "src").is_dir():
        continue
    for c in cycles(cargo.parent):
        bad += 1
        print(f"{cargo.parent.relative_to(root)}: import cycle {' -> '.join(c)}")
if bad:
    sys.exit(1)
print("no import cycles between files")
