#!/usr/bin/env python3
"""Checks that the planted verdict tests notice a reproduction rule moved across a threshold.

Each threshold constant of the rule modules (python/taillab/reproduce/rules/*.py: every module-level
upper-case number, and every number of an upper-case dict of them) is moved by --shift (6 %)
up and then down — integers by one — and python/tests/test_verdicts_*.py run against it, in
this process, stopping at the first failure. A mutant the tests pass "survived": no planted
case sits between the bound and the moved bound. With --ops every comparison operator of
those modules is also turned around, one at a time (``<`` to ``>=``, ``<=`` to ``>``, …), in a
copy of the package; a survivor there is either an untested condition or a comparison that
only formats a sentence or a figure (the list says which line).

Usage: .venv/bin/python scripts/verdict-mutants.py [--shift F] [--ops] [NAME ...]
(NAME: only the constants named). Exits 1 when a threshold constant survives. The tests run
until the first that fails, about half a minute a mutant on the busy 2-vCPU VM (the 105
threshold mutants of 2026-12-01 took 50 minutes); --ops adds about 70 comparisons. Not part
of `make test`: the tests it runs are.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = sorted(str(p) for p in (ROOT / "python" / "tests").glob("test_verdicts_*.py"))
MODULES = tuple(
    f"reproduce.rules.{m}"
    for m in (
        "tailbench",
        "tailbench_configs",
        "tales",
        "tales_host",
        "tail_at_scale",
        "tailwag",
        "tailwag_studies",
        "profiling",
        "common",
    )
)
# Upper-case numbers of those modules that are not thresholds of a verdict: how many failed
# conditions a sentence names, a unit table, and how near a planned load fraction a measured
# one snaps (rounding of rates, not a bound of a claim).
NOT_THRESHOLDS = {"MAX_LISTED", "_UNIT_NS", "FRACTION_SNAP", "_SNAP"}
# Constants a relative move does not test, and the values that do: which load a study reads
# (the point nearest it is the same 6 % off), a rank (the median of eight apps moves by
# less than their spacing), which leaf counts are the claim (5, 10 and 50 are planted), and
# the quantile or app a rule judges.
SPECIAL = {
    "TW9A_LOAD": [0.9],
    "PROF_TAIL_RANK": [0.25, 0.75],
    "TAS_PRIMARY_LEAVES": [9, 50],
    "FIG3_TAIL": ["p99"],
    "PROF_APP": ["kv"],
}
FLIP = {"<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _assigned(module: str) -> set[str]:
    """The names a module assigns at its top level (not those it imports)."""
    src = (ROOT / "python" / Path(*module.split("."))).with_suffix(".py").read_text()
    names = set()
    for node in ast.parse(src).body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets += [node.target] if isinstance(node, ast.AnnAssign) else []
        for t in targets:
            elts = t.elts if isinstance(t, ast.Tuple) else [t]
            names |= {e.id for e in elts if isinstance(e, ast.Name)}
    return names


def _is_threshold(v: object) -> bool:
    if isinstance(v, dict):
        return bool(v) and all(isinstance(x, float) for x in v.values())
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def constants() -> list[tuple[object, str, object]]:
    """(module, name, value) of every threshold constant the rule modules define."""
    out = []
    for name in MODULES:
        mod = importlib.import_module(f"taillab.{name}")
        for k in sorted(_assigned(mod.__name__)):
            v = getattr(mod, k)
            if (
                k.isupper()
                and k not in NOT_THRESHOLDS
                and (k in SPECIAL or _is_threshold(v))
            ):
                out.append((mod, k, v))
    return out


def moved(name: str, v: object, shift: float) -> list[object]:
    """The mutants of a constant's value: each number up and down (SPECIAL's own)."""
    if name in SPECIAL:
        return SPECIAL[name]
    if isinstance(v, dict):
        return [{**v, k: x * f} for k, x in v.items() for f in (1 + shift, 1 - shift)]
    if isinstance(v, int):
        return [v + 1, v - 1]
    return [v * (1 + shift), v * (1 - shift)]


def passes(extra: list[str] | None = None, env: dict | None = None) -> bool:
    """Whether the planted verdict tests pass (in this process, or a child with ``env``)."""
    args = ["-q", "-x", "-p", "no:cacheprovider", *TESTS]
    if env is not None:
        cmd = [sys.executable, "-m", "pytest", *args]
        return (
            subprocess.run(
                cmd, check=False, cwd=ROOT, env=env, capture_output=True
            ).returncode
            == 0
        )
    import pytest

    with contextlib.redirect_stdout(io.StringIO()):
        return pytest.main(args + (extra or [])) == 0


def check_constants(shift: float, only: list[str]) -> list[str]:
    survived = []
    for mod, name, value in constants():
        if only and name not in only:
            continue
        for m in moved(name, value, shift):
            setattr(mod, name, m)
            try:
                ok = passes()
            finally:
                setattr(mod, name, value)
            line = f"{mod.__name__}.{name} = {m!r}"
            print(("SURVIVED " if ok else "killed   ") + line, flush=True)
            if ok:
                survived.append(line)
    return survived


def check_ops(modules: tuple[str, ...]) -> list[str]:
    """Every comparison of ``modules`` turned around, one at a time, in a copy."""
    pkg = ROOT / "python" / "taillab"
    survived = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in modules:
            rel = Path(*name.split(".")).with_suffix(".py")
            text = (pkg / rel).read_text()
            lines = text.split("\n")
            tokens = tokenize.generate_tokens(io.StringIO(text).readline)
            for t in [t for t in tokens if t.type == tokenize.OP and t.string in FLIP]:
                (row, col), end = t.start, t.end[1]
                line = lines[row - 1]
                mutant = lines[: row - 1] + [line[:col] + FLIP[t.string] + line[end:]]
                shutil.rmtree(Path(tmp) / "taillab", ignore_errors=True)
                shutil.copytree(pkg, Path(tmp) / "taillab")
                (Path(tmp) / "taillab" / rel).write_text(
                    "\n".join(mutant + lines[row:])
                )
                ok = passes(env={**os.environ, "PYTHONPATH": tmp})
                where = f"{rel}:{row}: {mutant[-1].strip()[:100]}"
                print(("SURVIVED " if ok else "killed   ") + where, flush=True)
                if ok:
                    survived.append(where)
    return survived


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shift", type=float, default=0.06, help="relative move of a float (0.06)"
    )
    ap.add_argument(
        "--ops", action="store_true", help="also turn every comparison around"
    )
    ap.add_argument("names", nargs="*", help="only these constants")
    a = ap.parse_args()
    sys.path.insert(0, str(ROOT / "python" / "tests"))
    if not passes():
        print(
            "the planted verdict tests fail unmutated; fix them first", file=sys.stderr
        )
        return 2
    survived = check_constants(a.shift, a.names)
    ops = check_ops(MODULES + ("reproduce.verdict",)) if a.ops else []
    ops_text = f", {len(ops)} turned comparisons (read the lines)" if a.ops else ""
    print(f"{len(survived)} threshold mutants survived{ops_text}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
