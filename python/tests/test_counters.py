"""The counters page: apps side by side, from sections a real run wrote (software counters,
this project's VMs have no PMU) and one in the shape the Rust PMU test produces (hardware)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import fixtures
import pytest

import taillab
from taillab import counters
from taillab.report import write_report

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def hw() -> dict:
    return json.loads((DATA / "counters_section_hardware.json").read_text())


@pytest.fixture(scope="module")
def sw() -> dict:
    return json.loads((DATA / "counters_section_software.json").read_text())


def _runs(root: Path, sections: dict[str, list[dict]]) -> Path:
    """A folder of runs: for each app, one run per counters section given."""
    for app, secs in sections.items():
        for k, sec in enumerate(secs):
            fixtures.make_run(
                root / f"{app}-{k}", app=app, seed=k + 1, duration_s=1.0, extra={"counters": sec}
            )
    return root


def test_apps_side_by_side_with_means_over_runs(tmp_path, hw, sw):
    hw2 = json.loads(json.dumps(hw))
    hw2["derived"]["ipc"] = 2.0
    root = _runs(tmp_path / "r", {"kv": [hw, hw2], "translate": [sw]})
    res = taillab.load(root)
    per_run = counters.run_table(res)
    assert sorted(per_run["app"]) == ["kv", "kv", "translate"]
    table = counters.app_table(per_run)
    assert list(table.columns) == ["kv", "translate"]
    assert table.at["ipc", "kv"] == pytest.approx(1.8)  # mean of 1.6 and 2.0
    assert table.at["kind", "kv"] == "hardware" and table.at["runs", "kv"] == 2
    # A software-only run has no IPC, but its CPU time per request.
    assert math.isnan(table.at["ipc", "translate"])
    assert table.at["cpu_us_per_request", "translate"] == pytest.approx(
        sw["derived"]["cpu_us_per_request"]
    )
    html = counters.page(res)
    assert html.index("<th>kv</th>") < html.index("<th>translate</th>")
    assert "L1I MPKI" in html and "1.80" in html


def test_missing_pmu_is_explained_and_report_links_the_page(tmp_path, sw):
    no_pmu = dict(sw, requested="auto", note="this host has no hardware PMU: test")
    rd = tmp_path / "one"
    fixtures.make_run(rd, app="translate", duration_s=1.0, extra={"counters": no_pmu})
    page = write_report(rd)
    index = page.read_text()
    assert 'href="counters.html"' in index and "software counters" in index
    text = (page.parent / "counters.html").read_text()
    assert "Hardware counters missing on 1 run(s): this host has no hardware PMU: test" in text
    assert "worker CPU per request" in text


def test_runs_without_counters_add_nothing(tmp_path):
    rd = tmp_path / "plain"
    fixtures.make_run(rd, duration_s=1.0)
    res = taillab.load(rd)
    assert counters.run_table(res).empty
    assert counters.section(res, tmp_path) is None
    assert not (tmp_path / "counters.html").exists()
    assert "No run has counters" in counters.page(res)
