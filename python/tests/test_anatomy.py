"""The report's anatomy section, from a real run made with --explain (tests/data/run-explained:
its summary's anatomy section and the x_ columns of its records)."""

from __future__ import annotations

import shutil
from pathlib import Path

import taillab
from taillab import anatomy
from taillab.report import write_report
from taillab.results import read_run_requests, read_summary

RUN = Path(__file__).resolve().parents[2] / "tests" / "data" / "run-explained"
PARTS = ["lag", "queue", "transport", "run", "fault", "preempted", "wakeup", "blocked", "irq",
         "softirq", "unknown"]  # fmt: skip


def test_the_parts_of_every_request_sum_to_its_sojourn():
    req = read_run_requests(RUN)
    parts = req[[f"x_{p}" for p in PARTS]].sum(axis=1)
    assert (parts == req["sojourn"]).all()
    a = read_summary(RUN)["anatomy"]
    assert a["sum_check"]["mismatched"] == 0
    assert a["sum_check"]["requests"] == len(req)


def test_the_slowest_one_percent_are_the_measured_requests_above_p99():
    req = read_run_requests(RUN)
    tail = anatomy.slowest(req)
    m = req[req["measured"] == 1]
    assert len(tail) == max(1, round(len(m) * 0.01))
    assert tail["sojourn"].min() >= m["sojourn"].quantile(0.98)
    # Records without the x_ columns have nothing to draw.
    assert anatomy.slowest(req.drop(columns=["x_run"])).empty
    assert anatomy.slowest(None).empty


def test_the_section_shows_each_group_its_culprits_and_both_figures(tmp_path):
    page = write_report(RUN, tmp_path / "report")
    text = page.read_text()
    assert "Anatomy of the slow requests" in text
    a = read_summary(RUN)["anatomy"]
    for g in a["groups"]:
        assert f"Above {g['label']}" in text
        for c in g["culprits"]:
            assert c["name"].replace("&", "&amp;") in text
    figs = sorted(p.name for p in (tmp_path / "report" / "figures").glob("anatomy-*.png"))
    assert len(figs) == 2, figs


def test_a_run_without_anatomy_has_no_section(tmp_path):
    plain = Path(__file__).resolve().parents[2] / "tests" / "data" / "run-synth"
    assert anatomy.section(taillab.load(plain), tmp_path) is None
    # Explained without records: the shares and the slowest request's timeline, no bars.
    bare = tmp_path / "bare"
    shutil.copytree(RUN, bare)
    (bare / "requests.csv").unlink()
    html = anatomy.section(taillab.load(bare), tmp_path)
    assert html is not None and "not drawn" in html and "Above p99" in html
