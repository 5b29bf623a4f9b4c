"""The rules' registry: each rule function registers itself with :func:`rule` under the item id
its name spells (``tales_fig5`` is ``tales-fig5``), so a rule's name and its item's id are one
scheme and an item without a rule, or a rule without an item, shows as a difference of sets
(``python/tests/test_reproduce.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..items import Data
from ..verdict import Verdict

#: A rule: (the item's entry in items.toml, its data, the data of the item it reuses) → verdict.
Rule = Callable[[dict[str, Any], Data, "Data | None"], Verdict]
#: Every item's rule by item id, filled as the rule modules are imported (``rules/__init__``).
RULES: dict[str, Rule] = {}


def rule(fn: Rule) -> Rule:
    """Register ``fn`` as the rule of the item its name spells with ``-`` for ``_``."""
    item = fn.__name__.replace("_", "-")
    if item in RULES:
        raise ValueError(f"two rules for {item}")
    RULES[item] = fn
    return fn
