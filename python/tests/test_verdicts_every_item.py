"""Every item `taillab reproduce --list` shows has its rule tested on planted data, on both
sides of its thresholds, in one of the test_verdicts_*.py files (their ``PLANTED`` lists); and
the environment rule that every item's verdict passes through."""

from __future__ import annotations

import test_verdicts_causes
import test_verdicts_tailbench
import test_verdicts_tailwag
import test_verdicts_tales
from planted import ITEMS, US, Point, experiment, stats, verdict

from taillab import reproduce as R

MODULES = (
    test_verdicts_tailbench,
    test_verdicts_tales,
    test_verdicts_tailwag,
    test_verdicts_causes,
)


def test_every_item_is_planted():
    planted = [i for m in MODULES for i in m.PLANTED]
    assert len(planted) == len(set(planted)), "an item is listed by two test files"
    assert sorted(planted) == sorted(R.read_items(ITEMS))
    assert set(planted) == set(R.RULES)


def test_every_run_disturbed_is_inconclusive_whatever_the_numbers(tmp_path):
    """The environment rule over any item's rule: numbers that confirm, from runs that all
    failed their environment check, are inconclusive (the numbers' status kept); one quiet run
    among them is enough to judge."""
    p99 = {"none": 400.0, "hog": 1000.0, "hog + RT": 500.0, "hog elsewhere": 450.0}
    for quiet in (set(), {"none"}):
        pts = [
            Point(
                f"integrated-t1-q1000-case-{i}",
                axes={"case": k},
                soj=stats(v * US / 4, v * US / 2, v * US),
                env_ok=k in quiet,
            )
            for i, (k, v) in enumerate(p99.items())
        ]
        experiment(tmp_path / "tales-fig5" / "tales-fig5", pts)
        doc = verdict(tmp_path, "tales-fig5")
        status = "confirmed" if quiet else "inconclusive"
        assert (doc["status"], doc["status_from_data"]) == (status, "confirmed")
        assert doc["disturbed_runs"] == 4 - len(quiet)
