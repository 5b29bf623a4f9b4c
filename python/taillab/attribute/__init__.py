"""Attribution of the tail to its causes: ``taillab attribute``'s analysis and page.

The runs of a designed experiment (``design.json``: factors, cells, blocks) are read with
every request (``requests.csv``, through :mod:`taillab.results`). For each latency (sojourn,
service, queue) and quantile τ (p50, p95, p99, and p99.9 when every cell holds at least
20 000 requests), the requests' latencies are regressed on the factors' levels by quantile
regression, solved exactly as the linear program it is (HiGHS, through scipy):

* treatment coding: the first level of every factor is the base, and a level's coefficient
  is the change of the τ-quantile when that factor alone moves from its base level to it,
  the others at their base levels;
* two-factor interactions (a full factorial only: a fraction aliases them with each other);
* blocks as effect-coded columns, so a drift of the host between blocks is taken out and the
  intercept is the base cell averaged over blocks.

**Exact compression.** Every request of one run has the same regressors, so a stretch of a
run's sorted requests that lies wholly below (above) the fitted quantile enters the
check-function objective only through its count and its sum: it is replaced by one row at
its mean, weighted by its count. Each run keeps its requests near the fitted quantile and
cuts the rest into about 200 stretches. That objective equals the exact one wherever no
run's fit lies inside a stretch and is below it elsewhere (the check function is convex),
so a fit whose every run lies outside its stretches is the exact fit of all requests; where
one does not, that run keeps the requests around it too and the fit is redone (the tests
check the result against the program over every request: the same objective; where a
sparse tail leaves the optimum flat between two order statistics, the coefficients may sit
anywhere on that flat). An iterative solver (statsmodels' ``QuantReg``, used before) and a
coarser compression crawled on the long runs of a real attribution: the full run of an
attribution item spent more than half an hour in its bootstrap.

**Confidence intervals** come from a cluster bootstrap over runs: requests of one run share
its arrivals and its host's moment, so they are not independent; each resample draws every
cell's runs with replacement (stratified by cell, so every cell stays in the model) and
refits. With n runs per cell the bootstrap's spread is short by √((n−1)/n) (for n = 3, 18 %),
so the deviations are scaled by √(n/(n−1)) before the 2.5 and 97.5 % points are taken. Cells
of one block share their arrival seed (common random numbers): the bootstrap ignores that
pairing, which makes its intervals wider, not narrower.

**Run-to-run variance of p99**: each run's own sojourn p99, its variance across a cell's
runs, and per factor level the ratio of the geometric mean of those variances at that level
to the base level's (a main effect on log variance), with the same bootstrap.

Output: ``attribution.json`` (``taillab.attribution/1``), a text table, and a page
(:func:`write_page`) with the effects plot, interaction plots for the pairs that matter,
and the sojourn CCDF of the best and worst cells against their ideals.

Modules: ``model`` (the design, the regressors, the exact quantile regression), ``data`` (the
runs' requests and the bootstrap's draws), ``analysis`` (:func:`analyse`), ``page`` (the text
table, figures, page and :func:`run`).
"""

from __future__ import annotations

from .analysis import SCHEMA, analyse, letter, named_aliases
from .data import collect
from .model import DESIGN_SCHEMA, METRICS, QUANTILES, Model, RunData, qlabel, quantreg, read_design
from .page import cells_ccdf, effects_plot, interaction_plot, run, text_table, write_page

__all__ = [
    "DESIGN_SCHEMA",
    "METRICS",
    "QUANTILES",
    "SCHEMA",
    "Model",
    "RunData",
    "analyse",
    "cells_ccdf",
    "collect",
    "effects_plot",
    "interaction_plot",
    "letter",
    "named_aliases",
    "qlabel",
    "quantreg",
    "read_design",
    "run",
    "text_table",
    "write_page",
]
