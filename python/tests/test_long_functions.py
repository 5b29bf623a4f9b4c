"""scripts/long-functions.py on Python: a function over the cap is found (methods, nested and
async functions too, from its ``def`` to its last line), one at the cap is not, and the repo's
own Python sources are all within it."""

from __future__ import annotations

import pytest
from conftest import script


@pytest.fixture(scope="module")
def lint():
    return script("scripts/long-functions.py")


def _fn(name: str, lines: int, indent: str = "", kw: str = "def") -> str:
    """A function of exactly ``lines`` lines: its ``def`` line and ``lines - 1`` statements."""
    body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))
    return f"{indent}{kw} {name}():\n{body}"


def test_a_planted_long_function_is_found_and_one_at_the_cap_is_not(lint, tmp_path):
    src = tmp_path / "m.py"
    src.write_text(
        _fn("at_cap", 80)
        + "\n\nclass C:\n"
        + _fn("method", 81, indent="    ")
        + "\n\n"
        + _fn("coro", 90, kw="async def")
        + "\n\ndef outer():\n"
        + _fn("inner", 85, indent="    ")
        + "    return inner\n"
    )
    found = {name: length for name, _, length in lint.long_python_functions(src, 80)}
    assert found == {"method": 81, "coro": 90, "outer": 87, "inner": 85}


def test_the_repository_s_python_is_within_the_cap(lint):
    files = dict((rel, p) for p, rel in lint.python_files())
    # Sources it must read: the package, a script, a bench executable without a suffix.
    assert {"python/taillab/report.py", "scripts/import-cycles.py", "bench/tailwag"} <= set(files)
    assert not any("/tests/" in rel for rel in files)
    over = [
        f"{rel}:{line} {name} {length}"
        for rel, p in files.items()
        for name, line, length in lint.long_python_functions(p, lint.PY_LIMIT)
    ]
    assert not over, over
