"""Shared results folders, built once per test session (figures and reports only read them)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

import fixtures
import pytest
from require import pytest_runtest_logreport, skip_without

# The skip ledger's hook (require.py): pytest finds hooks by name in a conftest.
__all__ = ["pytest_runtest_logreport"]

GOLDEN = Path(__file__).resolve().parents[2] / "tests" / "data"


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("run") / "r"
    fixtures.make_run(d, qps=800, duration_s=2.0, save_requests=True)
    return d


@pytest.fixture(scope="session")
def sweep_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sweep") / "s"
    return fixtures.make_sweep(
        d,
        qps=(400.0, 1200.0),
        threads=(1, 2),
        configs=("integrated", "loopback"),
        runs=2,
        duration_s=1.5,
        failed={"loopback-t1-q1200": ("send_lag",)},
    )


@pytest.fixture(scope="session")
def sweep_slow(tmp_path_factory) -> Path:
    """The same sweep definition with 50% slower service: a real regression to detect."""
    d = tmp_path_factory.mktemp("sweep_slow") / "s"
    return fixtures.make_sweep(
        d,
        qps=(400.0, 1200.0),
        threads=(1, 2),
        configs=("integrated", "loopback"),
        runs=2,
        duration_s=1.5,
        slowdown=1.5,
        seed0=99,
    )


@pytest.fixture(scope="session")
def sweep_report(sweep_dir, tmp_path_factory) -> Path:
    """The sweep's report, written once through the CLI entry point; returns index.html."""
    from taillab import cli

    out = tmp_path_factory.mktemp("report")
    assert cli.main(["report", str(sweep_dir), "--out", str(out)]) == 0
    return out / "index.html"


def golden(name: str) -> Path:
    p = GOLDEN / name
    if not p.exists():
        skip_without("test-data", f"golden folder {p} not generated yet (run tests/data/regen.sh)")
    return p


@pytest.fixture(scope="session")
def attribution_dir(tmp_path_factory) -> Path:
    """A ``taillab attribute`` folder with planted causes (fixtures.ATTRIBUTION_FACTORS)."""
    return fixtures.make_attribution(tmp_path_factory.mktemp("attribute") / "a")


@pytest.fixture(scope="session")
def attribution_page(attribution_dir) -> Path:
    """Its analysis, run once through the CLI entry point (40 resamples); returns the page."""
    from taillab import cli

    assert cli.main(["attribute", str(attribution_dir), "--bootstrap", "40"]) == 0
    return attribution_dir / "attribution" / "index.html"


def script(rel: str):
    """A repository script (``scripts/x.py``, or one without a suffix such as
    ``bench/reproduce-seeds``) loaded as a module, for tests of its functions."""
    path = Path(__file__).resolve().parents[2] / rel
    name = path.stem.replace("-", "_")
    loader = importlib.machinery.SourceFileLoader(name, str(path))
    mod = importlib.util.module_from_spec(importlib.util.spec_from_loader(name, loader))
    loader.exec_module(mod)
    return mod
