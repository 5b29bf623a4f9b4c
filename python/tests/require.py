"""Skips that TAILLAB_REQUIRE turns into failures (the Rust tests' tests/require.rs).

A test that cannot run on this host calls `skip_without(feature, why)`: pytest skips it, or
fails it where the comma-separated environment variable TAILLAB_REQUIRE lists the feature (or
is `all`). The names are those of tests/features.txt.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

import pytest

FEATURES = Path(__file__).resolve().parents[2] / "tests" / "features.txt"


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
