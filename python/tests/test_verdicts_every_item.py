"""Every item `taillab reproduce --list` shows has its rule tested on planted data, on both
sides of its thresholds, in one of the test_verdicts_*.py files (their ``PLANTED`` lists)."""

from __future__ import annotations

import test_verdicts_causes
import test_verdicts_tailbench
import test_verdicts_tailwag
import test_verdicts_tales
from planted import ITEMS

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
