"""Run to run: an item's newest full verdict against the one it replaced (rerun.py), and the
script that keeps the replaced one instead of losing it; and the doc's count of the verdicts
judged on runs beside it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from taillab.reproduce import rerun

REPO = Path(__file__).resolve().parents[2]
HOST = {"cpu": "AMD EPYC", "cores": 2, "kernel": "6.1", "hostname": "vm", "git": "abc"}


def cond(text, ok, primary=False):
    outcome = {True: "holds", False: "fails", None: "unresolved"}[ok]
    return {"text": text, "ok": ok, "primary": primary, "outcome": outcome}


def verdict(iid, status, conds, started, seed=None, judged="runs", quick=False):
    numbers = {"flags": [f"load.seed={seed}"]} if seed is not None else {}
    return {
        "schema": "taillab.reproduce/1",
        "id": iid,
        "status": status,
        "status_from_data": status,
        "verdict": f"numbers: {status}",
        "numbers": numbers,
        "conditions": conds,
        "judged": judged,
        "runs_per_point": {iid: [3, 3]},
        "runs": 6,
        "disturbed_runs": 0,
        "quick": quick,
        "host": HOST,
        "started_at": started,
    }


def test_compare_tells_same_unresolved_and_contradiction_apart():
    a = verdict("x", "confirmed", [cond("p99 rises", True, True), cond("ratio ≤ 1.15", True)], "t1")
    # The same status: same, whatever the numbers.
    assert rerun.compare(a, a).kind == rerun.SAME
    assert rerun.compare(a, a).resolved_both == 2
    # One run left a condition unresolved: the statuses differ, nothing contradicts.
    b = verdict(
        "x", "inconclusive", [cond("p99 rises", True, True), cond("ratio ≤ 1.15", None)], "t2"
    )
    ag = rerun.compare(a, b)
    assert ag.kind == rerun.UNRESOLVED_ONLY and ag.resolved_both == 1
    assert ag.one_sided == ["ratio ≤ 1.15"] and not ag.contradictions
    # A condition held in one run and failed in the other: a contradiction, named.
    c = verdict("x", "partly", [cond("p99 rises", True, True), cond("ratio ≤ 1.15", False)], "t2")
    ag = rerun.compare(a, c)
    assert ag.kind == rerun.CONTRADICTS and ag.contradictions == ["ratio ≤ 1.15"]
    # Even with the same status (both inconclusive through a third condition), a contradiction
    # is one.
    d1 = verdict("x", "inconclusive", [cond("a", True), cond("b", None)], "t1")
    d2 = verdict("x", "inconclusive", [cond("a", False), cond("b", None)], "t2")
    assert rerun.compare(d1, d2).kind == rerun.CONTRADICTS


def test_conditions_naming_a_measured_number_are_matched_with_it_as_a_wildcard():
    a = verdict("x", "confirmed", [cond("speech's p95/mean 4.39× above the median", True)], "t1")
    b = verdict(
        "x", "not confirmed", [cond("speech's p95/mean 3.1× above the median", False)], "t2"
    )
    ag = rerun.compare(a, b)
    assert ag.kind == rerun.CONTRADICTS and ag.resolved_both == 1


def test_the_same_text_is_matched_before_numbers_become_wildcards():
    """ "N = 5: ..." meets its own "N = 5: ..." even when the runs list their conditions in
    another order, not "N = 50: ..." that only matches with numbers as wildcards."""
    a = verdict(
        "x",
        "partly",
        [cond("N = 50: within 3 points", False), cond("N = 5: within 3 points", True)],
        "t1",
    )
    b = verdict(
        "x",
        "partly",
        [cond("N = 5: within 3 points", True), cond("N = 50: within 3 points", False)],
        "t2",
    )
    ag = rerun.compare(a, b)
    assert ag.kind == rerun.SAME and ag.resolved_both == 2 and not ag.contradictions


def test_intervals_that_do_not_overlap_are_named_whatever_the_outcome():
    """Two runs whose intervals for one condition are apart (both holding) say the host moved
    between the sessions; overlapping ones, or one without an interval, do not."""

    def ci(text, lo, hi, ok=True):
        return cond(text, ok) | {"value": (lo + hi) / 2, "ci_low": lo, "ci_high": hi}

    a = verdict("x", "confirmed", [ci("ratio ≥ 1.2", 6.8, 16.2), ci("b", 1.0, 2.0)], "t1")
    b = verdict("x", "confirmed", [ci("ratio ≥ 1.2", 1.3, 5.9), ci("b", 1.5, 2.5)], "t2")
    ag = rerun.compare(a, b)
    assert ag.kind == rerun.SAME and ag.disjoint == ["ratio ≥ 1.2"]
    c = verdict("x", "confirmed", [cond("ratio ≥ 1.2", True), ci("b", 1.5, 2.5)], "t2")
    assert rerun.compare(a, c).disjoint == []
    nan = verdict("x", "confirmed", [ci("ratio ≥ 1.2", float("nan"), float("nan"))], "t2")
    assert rerun.compare(a, nan).disjoint == []


def test_base_seed_comes_from_the_flags():
    assert rerun.base_seed(verdict("x", "confirmed", [], "t", seed=2)) == "seed 2"
    assert rerun.base_seed(verdict("x", "confirmed", [], "t")) == "the item's seed"
    # An item that reads another's runs has that item's seed, whatever it was given.
    reuse = {"reuse": "tailbench-table1"}
    assert rerun.base_seed(verdict("x", "confirmed", [], "t"), reuse) == "tailbench-table1's runs"


def _write(root: Path, doc: dict) -> None:
    d = root / doc["id"]
    d.mkdir(parents=True, exist_ok=True)
    (d / "verdict.json").write_text(json.dumps(doc))


def test_the_script_keeps_the_replaced_run_and_the_doc_compares_them(tmp_path):
    """A second full run of two items kept after the first: the first's verdicts move to
    earlier/, and the doc says per item whether the verdict held (and names a contradiction);
    an older run given after a newer one goes to earlier/ without replacing it; a quick run
    replaces nothing."""
    one, two, old, quick = (tmp_path / n for n in ("one", "two", "old", "quick"))
    _write(
        one,
        verdict(
            "tales-fig2",
            "confirmed",
            [cond("p99 rises", True, True), cond("r ≤ 1.15", True)],
            "2026-12-06T10:14:02Z",
        ),
    )
    _write(
        one,
        verdict(
            "tales-fig1", "confirmed", [cond("fixed < poisson", True, True)], "2026-12-06T10:10:00Z"
        ),
    )
    _write(
        two,
        verdict(
            "tales-fig2",
            "inconclusive",
            [cond("p99 rises", True, True), cond("r ≤ 1.15", None)],
            "2026-12-06T13:20:00Z",
            seed=2,
        ),
    )
    _write(
        two,
        verdict(
            "tales-fig1",
            "not confirmed",
            [cond("fixed < poisson", False, True)],
            "2026-12-06T13:10:00Z",
            seed=2,
        ),
    )
    kept = tmp_path / "kept"
    script = [sys.executable, str(REPO / "scripts" / "reproduction-doc.py"), "--kept", str(kept)]

    def doc(*roots):
        r = subprocess.run([*script, *map(str, roots)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout

    md = doc(one)
    assert "## Run to run" not in md and "Run to run:" not in md
    md = doc(two)
    fig2 = kept / "full" / "tales-fig2"
    assert json.loads((fig2 / "verdict.json").read_text())["started_at"].startswith("2026-12-06T13")
    assert [p.name for p in (fig2 / "earlier").iterdir()] == ["2026-12-06T10-14-02Z.json"]
    assert "## Run to run" in md
    assert (
        "2 items have two full runs judged on repeated runs" in md
        and "0 give the same verdict, 1 differ only where a run left a condition unresolved, "
        "1 contradict (a condition held in one run and failed in the other): tales-fig1"
        in md
    )
    rows = {
        ln.split(" | ")[0]: ln
        for ln in md.split("## Run to run")[1].splitlines()
        if ln.startswith("| tales")
    }
    assert (
        "**differs where unresolved**" in rows["| tales-fig2"] and "seed 2" in rows["| tales-fig2"]
    )
    assert "**contradicts**" in rows["| tales-fig1"] and "(fixed < poisson)" in rows["| tales-fig1"]
    # The same ROOT kept again: nothing moves twice; made again with no ROOT: the same doc.
    assert doc(two) == md and len(list((fig2 / "earlier").iterdir())) == 1
    assert doc() == md
    # An older run given late goes to earlier/ and leaves the newest in place.
    _write(
        old,
        verdict("tales-fig2", "confirmed", [cond("p99 rises", True, True)], "2026-12-05T09:00:00Z"),
    )
    doc(old)
    assert json.loads((fig2 / "verdict.json").read_text())["started_at"].startswith("2026-12-06T13")
    assert len(list((fig2 / "earlier").iterdir())) == 2
    # The comparison is with the latest run before the newest, not the oldest.
    assert "2026-12-06 10:14 UTC" in doc()
    # A quick verdict is kept apart and replaces nothing.
    _write(
        quick,
        verdict(
            "tales-fig2", "confirmed", [], "2026-12-06T14:00:00Z", judged="indicative", quick=True
        ),
    )
    doc(quick)
    assert len(list((fig2 / "earlier").iterdir())) == 2
    assert (kept / "quick" / "tales-fig2" / "verdict.json").is_file()


def test_a_run_not_judged_on_runs_is_not_compared(tmp_path):
    """A verdict from one run a point (made before the full variant repeated its points) has
    nothing to hold to: no run-to-run row."""
    root = tmp_path / "full"
    _write(root, verdict("tales-fig2", "confirmed", [cond("a", True)], "2026-12-06T13:00:00Z"))
    e = root / "tales-fig2" / "earlier"
    e.mkdir()
    (e / "x.json").write_text(
        json.dumps(
            verdict(
                "tales-fig2",
                "partly",
                [cond("a", False)],
                "2026-11-27T10:00:00Z",
                judged="indicative",
            )
        )
    )
    found = [("tales-fig2", {}, json.loads((root / "tales-fig2" / "verdict.json").read_text()))]
    assert rerun.pairs(root, found) == []
    (e / "y.json").write_text(
        json.dumps(verdict("tales-fig2", "confirmed", [cond("a", True)], "2026-12-06T10:00:00Z"))
    )
    [(iid, _, old, new, ag)] = rerun.pairs(root, found)
    assert old["started_at"].startswith("2026-12-06T10") and ag.kind == rerun.SAME


def test_the_docs_count_of_judged_verdicts_names_those_without_a_testable_condition():
    """A verdict judged on runs, one whose conditions all lacked data on its host (a capped
    thread-scaling item) and one compared as points are counted apart."""
    from taillab.reproduce import index

    runs = {"id": "a", "judged": "runs", "conditions": [{"ok": True}]}
    capped = {"id": "b", "judged": "indicative", "conditions": [{"ok": None}, {"ok": None}]}
    point = {"id": "c", "judged": "indicative", "conditions": [{"ok": False}]}
    line = index._md_judged([runs, capped, point])
    assert line.startswith("- Judged on repeated runs: 1 of 3 verdicts; ")
    assert "1 had no condition their host could test (b)" in line
    assert "; 1 compare point estimates" in line
    assert "point estimates" not in index._md_judged([runs, capped])
