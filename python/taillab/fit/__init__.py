"""Fit measured service times with a mixture of log-normal components (TailWAG's first step).

A workload generator stands in for an app only if its service times have the app's
distribution. Real service times are skewed and often multi-modal (a fast path and a slow
path, a rare very slow request), so we fit a *mixture of log-normals*: the logarithm of the
service time is a mixture of Gaussians, which maximum likelihood fits well with EM. We use
scikit-learn's ``GaussianMixture`` on ln(ns) for k = 1..5 components and keep the k with the
lowest BIC (Bayesian information criterion: log-likelihood penalised by 3 parameters per
component times ln n / 2), so a second mode is added only when the data carry it.

Data: a run's per-request records (``requests.csv`` or ``requests.parquet``, measured requests
only) when every run of the point has them, else its service histogram (``hist/service.hlog``),
whose buckets are at most 0.1 % wide. Both become a sparse histogram; EM sees up to
``max_samples`` draws from it, each spread uniformly over its bucket (an integer ns record
stands for [v, v+1)), so discrete values cannot attract a degenerate zero-width component.
Goodness of fit is measured on *all* the data: the Kolmogorov–Smirnov distance between the
measured and fitted CDFs, and the relative error of the fitted mean, p50, p95, p99 and p99.9.

Each component is reported as TailWAG's Table 2 does — weight, mean and variance — where the
variance is that of ln(service time) (σ²): Table 2's values (e.g. 0.007 for an img-dnn whose
service times all lie within 0.35–0.45 ms) only make sense in log space. We add the
component's mean and median in ns and its coefficient of variation √(e^σ² − 1). The synth
spec writes each component as ``lognormal:MEAN,cv=CV``, the form ``taillab_core::dist``
parses, with 4 significant digits (≤ 0.05 % rounding).

Order. A mixture draws every request independently; an app need not. Two checks use the
per-request records (when every run saved them):

* ``order``: the run's own service times replayed, in their order and then shuffled, through
  a FCFS queue with the run's worker count at the run's intended arrival times. If the
  shuffled replay queues differently from the one in order, no independent draw can match
  the app, however good the fitted distribution (oltp-disk: shuffling its service times
  raised the replayed p99 at 70 % load from 7.0 to 14.6 ms).
* ``periodic``: a rare component (at most 10 % of requests) whose requests come at regular
  gaps in the server's start order — a robust gap cv (interquartile range / 1.349 / median,
  gaps split by a stray member joined again) of at most 0.25, where independent draws give
  about 0.5 — is a checkpoint, a log rotation, a flush: work due every so many requests. It
  leaves the mixture and becomes synth's ``periodic=requests:N-M,for=DIST`` (gaps drawn
  uniformly in N..M: the uniform with the measured gaps' quartiles).

What a fit can and cannot see (for calibrating synth's locks and noise):

* The *queue/service split* of the run (mean sojourn = send lag + queue + service + the rest)
  is reported. Queueing is the harness's to reproduce; only service is fitted.
* Critical sections inside the app are part of its measured service time. At one worker they
  cost nothing extra; their contention shows only as service growth with the worker count,
  which a fit of one point cannot separate. Compare fits at 1 and N workers to size
  ``recv_lock``/``send_lock``.
* Disturbances that hit a worker while it served (interrupts, preemption) are inside the
  measured service times and so inside the fitted mixture (often as a small slow
  component). The run's environment section gives host-wide interrupt and preemption rates
  and CPU shares; they are reported as ``noise_hints`` (a ``noise=`` spec with the mean
  disturbance length they imply) for what-if studies. Adding them to a fitted spec counts
  them twice.

The package, one module per term and stage (each imports only those listed before it):
:mod:`.common` (the error, a point's records, the FCFS replay), :mod:`.mixfit` (the mixture),
:mod:`.pauses`, :mod:`.cold`, :mod:`.periodic`, :mod:`.order`, :mod:`.speed` (the terms and
checks), :mod:`.point` (one point), :mod:`.pooled` (one workload across loads), :mod:`.doc`
(fit.json) and :mod:`.text` (the fit in words); :mod:`.config` holds the settings,
:mod:`.terms` the typed terms, :mod:`.model` calibrates a set of them and :mod:`.select`
chooses them on held-out blocks.
"""

from __future__ import annotations

from .cold import fit_cold
from .common import SCHEMA, FitError, measured_service
from .config import FitConfig
from .doc import fit_results, read_fit, write_fit
from .mixfit import fit_mixture, goodness
from .order import order_effect
from .pauses import pause_sequence, pauses
from .periodic import periodic, periodic_cold
from .point import fewest_thread_points, fit_point, noise_hints
from .pooled import fit_pooled
from .speed import fit_speed, speed_share
from .text import (
    order_sentence,
    pause_sentence,
    periodic_sentence,
    section,
    selection_lines,
    speed_sentence,
    text_summary,
)

__all__ = [
    "SCHEMA",
    "FitConfig",
    "FitError",
    "fewest_thread_points",
    "fit_cold",
    "fit_mixture",
    "fit_point",
    "fit_pooled",
    "fit_results",
    "fit_speed",
    "goodness",
    "measured_service",
    "noise_hints",
    "order_effect",
    "order_sentence",
    "pause_sentence",
    "pause_sequence",
    "pauses",
    "periodic",
    "periodic_cold",
    "periodic_sentence",
    "read_fit",
    "section",
    "selection_lines",
    "speed_sentence",
    "speed_share",
    "text_summary",
    "write_fit",
]
