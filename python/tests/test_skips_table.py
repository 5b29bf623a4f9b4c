"""The skip ledger: what require.py enters, and what scripts/skips-table makes of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import require

TABLE = Path(__file__).resolve().parents[2] / "scripts" / "skips-table"


def _table(ledger: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(TABLE), str(ledger)], capture_output=True, text=True, check=False
    )


def _accuracy(ledger: Path, passed: int, disturbed: int) -> None:
    rows = [f"accuracy\tt::p{i}\tp{i}\tpassed\t1" for i in range(passed)]
    rows += [f"accuracy\tt::d{i}\td{i}\tdisturbed\t9" for i in range(disturbed)]
    ledger.mkdir(parents=True, exist_ok=True)
    (ledger / "ledger.tsv").write_text("\n".join(rows) + "\n")


def test_a_tenth_disturbed_passes_and_more_fails(tmp_path):
    """18 passed and 2 disturbed (10 %) is within the bound; 18 and 3 (14 %) is not."""
    _accuracy(tmp_path / "a", 18, 2)
    ok = _table(tmp_path / "a")
    assert ok.returncode == 0, ok.stdout
    assert "20 ran: 18 passed, 0 failed, 2 skipped as disturbed (10%" in ok.stdout
    _accuracy(tmp_path / "b", 18, 3)
    bad = _table(tmp_path / "b")
    assert bad.returncode == 1, bad.stdout
    assert "FAILED" in bad.stdout and "t::d2 (d2, 9 tries)" in bad.stdout


def _report(nodeid: str, skipped: bool, why: str) -> SimpleNamespace:
    return SimpleNamespace(
        nodeid=nodeid,
        skipped=skipped,
        failed=not skipped,
        longrepr=("f.py", 1, f"Skipped: {why}") if skipped else None,
        longreprtext=why,
    )


def test_every_skip_is_entered_and_counted_per_feature(tmp_path, monkeypatch):
    """skip_without's skips under their feature, other skips under `-`, a required feature's
    failure as such; the table counts them per feature."""
    monkeypatch.setenv("TAILLAB_SKIP_LEDGER", str(tmp_path))
    why = "no THP here (needs `thp`; TAILLAB_REQUIRE=thp makes this a failure)"
    require.pytest_runtest_logreport(_report("tests/t.py::a", True, why))
    require.pytest_runtest_logreport(_report("tests/t.py::b", True, "plain skip mark"))
    failed = "needs `thp`, which TAILLAB_REQUIRE lists: no THP here"
    require.pytest_runtest_logreport(_report("tests/t.py::c", False, failed))
    rows = [r.split("\t") for r in (tmp_path / "ledger.tsv").read_text().splitlines()]
    assert [r[:3] for r in rows] == [
        ["skip", "python/tests/t.py::a", "thp"],
        ["skip", "python/tests/t.py::b", "-"],
        ["required", "python/tests/t.py::c", "thp"],
    ]
    assert rows[0][3] == "no THP here", "the hint is left out"
    out = _table(tmp_path).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("thp"))
    assert line.split() == ["thp", "1", "1"], out
    assert "2 skipped, 1 failed as required" in out
