#!/usr/bin/env python3
"""Fails when a Rust function outside the tests runs over 120 lines, or a Python one over 80.

A Rust function is counted from its `fn` line to its closing brace; a Python one from its
`def` line to its last line (Python's own parser: decorators left out, its docstring in),
in every Python file outside the tests (`*.py`, and the scripts under bench/ and scripts/
that start with a Python `#!` line). Test code is left out: files
under a `tests/`, `benches/` or `fuzz/` folder, `#[cfg(test)]` modules and `#[test]`
functions. The TPC-C transactions (apps/oltp/src/txn.rs) are allowed their length: each is the
specification's numbered steps in order, read side by side with it.

Usage: scripts/long-functions.py [--limit N] [--py-limit N] [--all]   (--all lists every function over the
limit, allowed ones included). `make lint` runs it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 120
PY_LIMIT = 80
# Files whose functions may be longer, and why (shown with --all).
ALLOWED = {
    "apps/oltp/src/txn.rs": "the TPC-C transactions follow the specification's steps",
}
SKIP_DIRS = {"target", "tests", "benches", "fuzz", ".git", ".venv", "node_modules"}
FN = re.compile(
    r"^[ \t]*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?"
    r"(?:extern\s+\"[^\"]*\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)",
    re.M,
)


def blank(text: str) -> str:
    """The text with comments, strings and char literals blanked (newlines kept)."""
    out, i, n = [], 0, len(text)

    def keep_lines(s: str) -> str:
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(keep_lines(text[i:j]))
            i = j
        elif m := re.match(r'b?r(#*)"', text[i:i + 40]) if c in "rb" and (
            i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")
        ) else None:
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append(keep_lines(text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(keep_lines(text[i:j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(?:\\u\{[0-9a-fA-F]+\}|\\.|[^\\'\n])'", text[i:i + 12])
            if m:
                out.append(" " * m.end())
                i += m.end()
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def close_of(text: str, open_at: int) -> int:
    """The index of the brace closing the one at `open_at`."""
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text) - 1


def test_ranges(text: str) -> list[tuple[int, int]]:
    """Spans of `#[cfg(test)]` items and `#[test]` functions."""
    spans = []
    for m in re.finditer(r"#\[(?:cfg\(test\)|test)\]", text):
        brace = text.find("{", m.end())
        semi = text.find(";", m.end())
        if brace >= 0 and (semi < 0 or brace < semi):
            spans.append((m.start(), close_of(text, brace)))
    return spans


def long_functions(path: Path, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each non-test function over `limit` lines."""
    text = blank(path.read_text(encoding="utf-8", errors="replace"))
    tests = test_ranges(text)
    found = []
    for m in FN.finditer(text):
        if any(a <= m.start() <= b for a, b in tests):
            continue
        # The body opens at the first `{` after the signature; a `;` first means no body.
        depth, j = 0, m.end()
        while j < len(text):
            ch = text[j]
            if ch in "([<":
                depth += 1
            elif ch in ")]>" and depth:
                depth -= 1
            elif ch == ";" and depth == 0:
                j = -1
                break
            elif ch == "{" and depth == 0:
                break
            j += 1
        if j < 0 or j >= len(text):
            continue
        end = close_of(text, j)
        first = text.count("\n", 0, m.start()) + 1
        length = text.count("\n", m.start(), end) + 1
        if length > limit:
            found.append((m.group(1), first, length))
    return found


def rust_files():
    for p in sorted(ROOT.rglob("*.rs")):
        rel = p.relative_to(ROOT)
        if not SKIP_DIRS.intersection(rel.parts[:-1]):
            yield p, rel.as_posix()


def python_files():
    """Every Python source outside the tests: `*.py`, and bench/'s and scripts/' executables
    whose first line names Python."""
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT)
        if not SKIP_DIRS.intersection(rel.parts[:-1]):
            yield p, rel.as_posix()
    for folder in ("bench", "scripts"):
        for p in sorted((ROOT / folder).iterdir()):
            if p.is_file() and not p.suffix:
                head = p.read_bytes()[:64]
                if head.startswith(b"#!") and b"python" in head.split(b"\n")[0]:
                    yield p, p.relative_to(ROOT).as_posix()


def long_python_functions(path: Path, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function or method over `limit` lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append((node.name, node.lineno, length))
    return sorted(found, key=lambda t: t[1])


def main(argv: list[str]) -> int:
    limit = int(argv[argv.index("--limit") + 1]) if "--limit" in argv else LIMIT
    py_limit = int(argv[argv.index("--py-limit") + 1]) if "--py-limit" in argv else PY_LIMIT
    show_all = "--all" in argv
    bad = 0
    for path, rel in python_files():
        for name, line, length in long_python_functions(path, py_limit):
            bad += 1
            print(f"{rel}:{line}: def {name} is {length} lines, over {py_limit}: split it into the steps its docstring names")
    for path, rel in rust_files():
        for name, line, length in long_functions(path, limit):
            if rel in ALLOWED:
                if show_all:
                    print(f"{rel}:{line}: fn {name} is {length} lines (allowed: {ALLOWED[rel]})")
                continue
            bad += 1
            print(f"{rel}:{line}: fn {name} is {length} lines, over {limit}: split it into the steps its doc comment names")
    if bad:
        print(f"{bad} function(s) over the limit ({limit} lines Rust, {py_limit} Python)", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
