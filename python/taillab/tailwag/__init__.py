"""Validation of a synthetic workload against the app it stands for (TailWAG §4).

TailWAG (Zhuo & Lipasti, BID 2023) measures an app, fits its service times, runs a
synthetic workload with the fitted parameters at the *same absolute loads*, and compares the
round-trip latency: mean, p95 and p99 at 20 %, 50 % and 70 % of the app's saturation rate
with one worker (its Fig. 8; average errors 6.2 % / 1.9 % / 7.3 %), and p95 against load for
1, 2 and 4 workers (its Fig. 6). This package is that comparison over two results folders
(experiments or run collections) whose points match on (threads, offered QPS):

* :func:`error_table` (``table``) — one row per matched point: measured and synthetic sojourn
  mean, p95, p99 and the relative error (synthetic / measured − 1);
* :func:`summary` (``summary``) — mean absolute error per statistic over the one-worker rows,
  next to TailWAG's and this project's goal; with later rounds, the headline out of sample
  (:func:`out_of_sample`): their errors, each point within the floor of the same rounds,
  beyond it (named) or unresolved, round 1 kept as in sample;
* :func:`write_validation` (``page``) — ``validation.csv``, ``validation.json``, the figures
  (measured solid, synthetic dashed) and ``index.html``, with the fitted components next to
  TailWAG's Table 2 row for the app's counterpart.

Table 2 is transcribed from the paper as printed. Its "variance" is read as the variance of
ln(service time): values such as 0.007 for an img-dnn whose service times all lie within
0.35–0.45 ms are impossible in µs² and fit exactly in log space. Whether its "mean" is the
arithmetic mean or e^μ the paper does not say (they differ by e^(σ²/2), 0.4 % to 29 % for its
rows); the page shows both of ours.
"""

from __future__ import annotations

from .page import SEED_APP, TABLE2, SeedApp, render, section, table2_rows, write_validation
from .summary import out_of_sample, summary
from .table import (
    BEYOND,
    GOAL,
    LOADS,
    STATS,
    TAILWAG_ERROR,
    UNRESOLVED,
    WITHIN,
    Folders,
    ValidationError,
    error_table,
)

__all__ = [
    "BEYOND",
    "GOAL",
    "LOADS",
    "SEED_APP",
    "STATS",
    "TABLE2",
    "TAILWAG_ERROR",
    "UNRESOLVED",
    "WITHIN",
    "Folders",
    "SeedApp",
    "ValidationError",
    "error_table",
    "out_of_sample",
    "render",
    "section",
    "summary",
    "table2_rows",
    "write_validation",
]
