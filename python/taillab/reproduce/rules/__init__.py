"""The verdict rules, one module per paper: TailBench (``tailbench``, its
configuration figures in ``tailbench_configs``), Tales of the Tail
(``tales``, its host-mechanism figures in ``tales_host``), The Tail at Scale
(``tail_at_scale``), TailWAG (``tailwag``, its case studies and throttling in
``tailwag_studies``) and the profiling report (``profiling``); helpers two papers share are in
``common``. Each rule is a function named after its item id and registered by
:func:`registry.rule`; importing this package imports every module, so :data:`RULES` then holds
them all.

A rule takes ``(item, data, reuse)``: the item's entry in ``configs/reproduce/items.toml``, its
data (:class:`taillab.reproduce.items.Data`), and the data of the item it reuses (or None); it
returns a :class:`taillab.reproduce.verdict.Verdict`. The thresholds are named constants of the
module that uses them, each with why it has its value (``scripts/verdict-mutants.py`` moves
each one and checks that a test notices).
"""

from . import (
    profiling,
    tail_at_scale,
    tailbench,
    tailbench_configs,
    tailwag,
    tailwag_studies,
    tales,
    tales_host,
)
from .registry import RULES, Rule, rule

__all__ = [
    "RULES",
    "Rule",
    "rule",
    "profiling",
    "tail_at_scale",
    "tailbench",
    "tailbench_configs",
    "tailwag",
    "tailwag_studies",
    "tales",
    "tales_host",
]
