"""Skips that TAILLAB_REQUIRE turns into failures (the Rust tests' tests/require.rs).

A test that cannot run on this host calls `skip_without(feature, why)`: pytest skips it, or
fails it where the comma-separated environment variable TAILLAB_REQUIRE lists the feature (or
is `all`). The names are those of tests/features.txt.

Every skip pytest reports (these and any other: `importorskip`, `skipif`) and every failure of
a required feature is entered in the skip ledger that `make test` prints at its end
(scripts/skips-table; the Rust tests write to the same one): `pytest_runtest_logreport`, which
conftest.py registers.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NoReturn

import pytest

ROOT = Path(__file__).resolve().parents[2]
FEATURES = ROOT / "tests" / "features.txt"
# How skip_without's messages name their feature.
_NEEDS = re.compile(r"needs `([\w-]+)`")
# The hint skip_without's message ends with, which the ledger leaves out.
_SUFFIX = re.compile(r" \(needs `[\w-]+`; TAILLAB_REQUIRE=.*\)$")


def known() -> list[str]:
    """The feature names of tests/features.txt."""
    lines = FEATURES.read_text().splitlines()
    return [ln.split()[0] for ln in lines if ln.strip() and not ln.startswith((" ", "#"))]


def required(feature: str) -> bool:
    """Whether TAILLAB_REQUIRE lists `feature` (or is `all`); a name there that is no feature
    fails, as a typo would let the skip it meant to forbid pass."""
    names = known()
    assert feature in names, f"test bug: `{feature}` is not in {FEATURES}"
    listed = [n.strip() for n in os.environ.get("TAILLAB_REQUIRE", "").split(",") if n.strip()]
    for n in listed:
        if n != "all" and n not in names:
            choices = ", ".join(["all", *names])
            pytest.fail(f"TAILLAB_REQUIRE names `{n}`, which is not a feature: one of {choices}")
    return "all" in listed or feature in listed


def skip_without(feature: str, why: str) -> NoReturn:
    """This host lacks `feature` (`why`): skip, or fail where TAILLAB_REQUIRE lists it."""
    if required(feature):
        pytest.fail(f"needs `{feature}`, which TAILLAB_REQUIRE lists: {why}")
    pytest.skip(f"{why} (needs `{feature}`; TAILLAB_REQUIRE={feature} makes this a failure)")


def ledger_dir() -> Path:
    """TAILLAB_SKIP_LEDGER, else the Rust tests' default (the target dir's tmp/skips)."""
    if os.environ.get("TAILLAB_SKIP_LEDGER"):
        return Path(os.environ["TAILLAB_SKIP_LEDGER"])
    return ROOT / os.environ.get("CARGO_TARGET_DIR", "target") / "tmp" / "skips"


def _ledger(kind: str, test: str, feature: str, why: str) -> None:
    """One tab-separated row, appended in one write (tests/require.rs writes the same)."""
    clean = [re.sub(r"[\t\r\n]+", " ", x) for x in (kind, test, feature, why)]
    folder = ledger_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "ledger.tsv", "a", encoding="utf-8") as f:
        f.write("\t".join(clean) + "\n")


def pytest_runtest_logreport(report) -> None:
    """Enters every skip (feature `-` unless skip_without named one) and every failure of a
    required feature in the ledger."""
    test = f"python/{report.nodeid}"
    text = report.longreprtext or ""
    if report.skipped and not hasattr(report, "wasxfail"):
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else text
        why = why.removeprefix("Skipped: ")
        m = _NEEDS.search(why)
        _ledger("skip", test, m.group(1) if m else "-", _SUFFIX.sub("", why))
    elif report.failed and "which TAILLAB_REQUIRE lists" in text:
        m = _NEEDS.search(text)
        crash = getattr(getattr(report.longrepr, "reprcrash", None), "message", text)
        _ledger("required", test, m.group(1) if m else "-", crash)
