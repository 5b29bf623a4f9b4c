"""``taillab reproduce``'s pages: our figure beside the paper's numbers, and a verdict
computed from the data.

The Rust side (``taillab reproduce ID``) runs an item's experiments from
``configs/reproduce/items.toml`` into ``ROOT/<id>/<experiment-stem>/`` (an ordinary experiment
folder each; for ``kind = "tailwag"`` items ``ROOT/<id>/<app>/`` with ``measured/``,
``synthetic/`` and ``validation/``), then calls :func:`write_page`, and after ``all``
:func:`write_index`. Nothing here runs anything: it reads those folders.

Every verdict is a list of conditions evaluated on the measured numbers (:class:`Cond`), each
item's rule one function registered in :data:`RULES` (:mod:`.rules`, one module per paper); the
thresholds are named constants of those modules, each with why it has its value. The status is

* ``confirmed`` — every condition holds;
* ``partly`` — some hold (and no *primary* condition, the effect the claim is about, fails);
* ``not confirmed`` — none holds, or a primary one fails;
* ``inconclusive`` — no data, a condition its runs cannot resolve, or every run of the item
  failed its environment check (another process, steal or a CPU wait disturbed it). The
  numbers are still computed and shown, with what they would say (``status_from_data`` in
  ``verdict.json``).

On repeated runs (the full variant runs each point three times) each condition is judged by
its statistic's 95 % interval over the runs (:mod:`.judge`): it holds or fails only when the
whole interval is on one side of its threshold, and is unresolved otherwise; a verdict from one
run a point, or from ``--quick``, compares point estimates and is labelled indicative.

A run whose environment check failed (``checks.environment.ok == false`` in its summary.json)
is kept, never dropped: the page counts them and says at the top that the figure is built from
disturbed runs, with the gist of the reasons.

``verdict.json`` (schema ``taillab.reproduce/1``)::

    {"schema": "taillab.reproduce/1", "id", "paper", "figure", "claim",
     "status", "status_from_data", "verdict" (one sentence), "numbers" {...},
     "conditions": [{"text", "ok", "primary", and where judged by a check: "outcome",
                     "value", "ci_low", "ci_high", "op", "bound", "runs", "interval",
                     "more_runs"}],
     "judged" ("runs" | "indicative"), "runs_per_point" {experiment: [fewest, most]},
     "runs", "disturbed_runs", "probes", "disturbed_probes", "environment" (the gist),
     "quick", "host", "started_at"}

Schema history: taillab.reproduce/1 — first version; 2026-12-06: each condition's check,
``judged`` and ``runs_per_point`` added (keys a reader may miss: a verdict without them was
made from point comparisons).

Modules: :mod:`.items` (the items file and an item's data), :mod:`.judge` (a statistic's
interval over a point's runs and its three-valued comparison with a threshold),
:mod:`.verdict` (the vocabulary of a verdict: conditions, statuses, the formatting and figure
helpers every rule uses),
:mod:`.rules` (the rules), :mod:`.page` (one item's verdict and page), :mod:`.rerun` (an item's
newest full verdict against the one it replaced), :mod:`.index` (the index of every item and the
markdown of docs/reproduction.md).
"""

from __future__ import annotations

from .index import markdown, read_verdicts, write_index
from .items import (
    SCHEMA,
    STATUSES,
    Data,
    Env,
    ReproduceError,
    experiment_stem,
    load_item,
    nominal_service_ns,
    read_items,
)
from .page import Page, evaluate, render, verdict_doc, write_page
from .rules import RULES
from .verdict import Cond, Verdict, group_tag, status_of

__all__ = [
    "RULES",
    "SCHEMA",
    "STATUSES",
    "Cond",
    "Data",
    "Env",
    "Page",
    "ReproduceError",
    "Verdict",
    "evaluate",
    "experiment_stem",
    "group_tag",
    "load_item",
    "markdown",
    "nominal_service_ns",
    "read_items",
    "read_verdicts",
    "render",
    "status_of",
    "verdict_doc",
    "write_index",
    "write_page",
]
