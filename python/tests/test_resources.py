"""The resource-table page, on sections captured from real runs (tests/data) placed into
synthetic results folders."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import fixtures
import pytest

import taillab
from taillab import resources
from taillab.report import write_report

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def env() -> dict:
    return json.loads((DATA / "environment_section.json").read_text())


@pytest.fixture(scope="module")
def inter() -> dict:
    return json.loads((DATA / "interference_section.json").read_text())


def _with_hogs_in_extra(env: dict, inter: dict) -> dict:
    """As a run records it: the monitor also lists the hog pids among its extra processes."""
    e = copy.deepcopy(env)
    for h in inter["hogs"]:
        for p in h["processes"]:
            e["extra"].append({k: p[k] for k in ("pid", "cpu_pct", "rss_max_bytes", "minflt")})
    return e


def test_run_rows_come_from_both_sections_without_duplicates(env, inter):
    rows = resources.run_processes(
        {"environment": _with_hogs_in_extra(env, inter), "interference": inter}
    )
    kinds = [r["kind"] for r in rows]
    assert kinds.count("harness") == 1
    assert kinds.count("server/client") == len(env["extra"])
    n_hog = sum(len(h["processes"]) for h in inter["hogs"])
    assert kinds.count("interference") == n_hog
    hog = [r for r in rows if r["kind"] == "interference"]
    assert sum(r["cpu_pct"] for r in hog) == pytest.approx(
        sum(p["cpu_pct"] for h in inter["hogs"] for p in h["processes"])
    )
    # I/O bytes come from the interference section (the monitor does not read /proc/PID/io).
    assert any(r["read_chars"] > 0 for r in hog)
    assert all("cpu:1@cpus=0" in r["process"] or "net:" in r["process"] for r in hog)


def test_harness_children_are_rows_of_their_own(env):
    """An app's helper processes (translate's Apertium stages) show under the harness."""
    e = copy.deepcopy(env)
    e["harness"]["children"] = [
        {"name": "lt-proc", "pids": [11, 12, 13], "cpu_pct": 3.5},
        {"name": "apertium-tagger", "pids": [14], "cpu_pct": 0.5},
    ]
    rows = resources.run_processes({"environment": e})
    kids = [r for r in rows if r["kind"] == "harness child"]
    assert [r["process"] for r in kids] == ["lt-proc ×3", "apertium-tagger"]
    assert [r["cpu_pct"] for r in kids] == [3.5, 0.5]
    assert math.isnan(kids[0]["rss_max_bytes"])


def _sweep_with_sections(root: Path, env: dict, inter: dict, cpu: list[float]) -> Path:
    fixtures.make_sweep(root, qps=(400.0, 900.0), runs=len(cpu), duration_s=1.0)
    for rd in sorted(root.glob("points/*/run-*")):
        k = int(rd.name.split("-")[1])
        s = json.loads((rd / "summary.json").read_text())
        i = copy.deepcopy(inter)
        # Two workers with the same label, to be added up within a run.
        worker = next(p for p in i["hogs"][0]["processes"] if p["role"] == "worker")
        twin = dict(worker, pid=worker["pid"] + 1000, cpu_pct=cpu[k])
        worker["cpu_pct"] = cpu[k]
        i["hogs"][0]["processes"].append(twin)
        e = copy.deepcopy(env)
        e["harness"]["rss_max_bytes"] = 1_000_000 * (k + 1)
        s.update(environment=e, interference=i)
        (rd / "summary.json").write_text(json.dumps(s))
    return root


def test_point_table_adds_within_a_run_and_averages_runs(tmp_path, env, inter):
    root = _sweep_with_sections(tmp_path / "s", env, inter, cpu=[40.0, 20.0])
    res = taillab.load(root)
    per_run = resources.resource_table(res)
    assert set(per_run["point"]) == set(res.points["point"])
    table = resources.point_table(per_run)
    w = table[table["process"].str.contains("worker stress-ng-cpu")]
    assert len(w) == 2  # one row per point
    # Run 0: 2 x 40 %, run 1: 2 x 20 %: mean 60 %, two processes of that kind.
    assert w["cpu_pct"].tolist() == pytest.approx([60.0, 60.0])
    assert w["n"].tolist() == [2, 2]
    h = table[table["kind"] == "harness"]
    assert h["rss_max_bytes"].tolist() == [2_000_000, 2_000_000]  # the largest, not the mean
    assert (h["runs"] == 2).all()


def test_report_links_the_page_flags_early_deaths_and_links_profiles(tmp_path, env, inter):
    rd = tmp_path / "r"
    i = copy.deepcopy(inter)
    i["ok"] = False
    i["problems"] = ["interference cpu:1@cpus=0: worker stress-ng-cpu (pid 4120) ended early"]
    i["hogs"][0]["processes"][1]["alive"] = False
    fixtures.make_run(
        rd,
        duration_s=1.0,
        extra={
            "environment": env,
            "interference": i,
            "profile": {"status": "written", "svg": "flame.svg", "folded": "perf.folded"},
        },
    )
    (rd / "flame.svg").write_text("<svg></svg>")
    (rd / "perf.folded").write_text("main;spin 10\n")
    page = write_report(rd)
    out = page.parent
    index = page.read_text()
    assert 'href="resources.html"' in index
    assert "Interference ended early" in index and "pid 4120" in index
    text = (out / "resources.html").read_text()
    for ref in re.findall(r'href="([^"#]+)"', text):
        assert (out / ref).exists(), ref
    assert "flame graph" in text and "perf.folded" in text
    assert "stress-ng-cpu" in text and "1 ended early" in text
    assert "harness: taillab" in text
    # The latency of the point sits in its header row.
    assert "service p99" in text and "sojourn p99" in text


def test_skipped_profile_and_missing_sections(tmp_path):
    rd = tmp_path / "r"
    fixtures.make_run(
        rd,
        duration_s=1.0,
        extra={"profile": {"status": "skipped", "reason": "perf is not installed"}},
    )
    res = taillab.load(rd)
    assert resources.resource_table(res).empty
    text = resources.page(res, tmp_path)
    assert "No run has an environment section" in text
    assert "profile skipped: perf is not installed" in text


def test_byte_formatting():
    assert resources.fmt_bytes(512) == "512 B"
    assert resources.fmt_bytes(9138176) == "8.71 MiB"
    assert resources.fmt_bytes(math.nan) == "–"
    assert resources.fmt_bytes(None) == "–"
