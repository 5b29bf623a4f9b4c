"""HdrHistogram interval logs (``hist/<metric>.hlog``) as numpy arrays.

The harness writes one histogram per second of the measured phase, V2 + DEFLATE encoded,
tagged with the metric name (values in ns). We decode each payload with the PyPI
``hdrhistogram`` package (module ``hdrh``) but compute everything else ourselves, vectorised:
``hdrh`` walks its 30k-bucket count array in Python for every percentile, which takes
seconds per sweep instead of milliseconds.

A decoded histogram becomes a :class:`Dist`: only its non-empty buckets, each with the lowest
and highest value it stands for. Percentiles follow the Rust ``hdrhistogram`` crate that writes
``summary.json``: nearest rank (the ceil(q*n)-th smallest sample), reported as the highest
value equivalent to its bucket. (Java's and Python ``hdrh``'s rank is round(q*n), one sample
lower at some n, which at the tail of a short run can be a different value altogether.)
Merging adds counts bucket by bucket; percentiles of a merge are computed from the merged
counts, never averaged.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hdrh.histogram import HdrHistogram

from .errors import HlogError

_START_TIME = re.compile(r"#\[StartTime:\s*([0-9.]+)")
_BASE_TIME = re.compile(r"#\[BaseTime:\s*([0-9.]+)")


@dataclass(frozen=True)
class Dist:
    """A sparse histogram: non-empty buckets sorted by value (ns)."""

    lo: np.ndarray  # lowest value equivalent to each bucket
    hi: np.ndarray  # highest value equivalent to each bucket
    count: np.ndarray

    @staticmethod
    def empty() -> Dist:
        z = np.zeros(0, dtype=np.int64)
        return Dist(z, z, z)

    @staticmethod
    def from_hdr(h: HdrHistogram) -> Dist:
        counts = np.ctypeslib.as_array(h.counts)[: h.counts_len].astype(np.int64)
        idx = np.nonzero(counts)[0].astype(np.int64)
        # Index -> value, as HdrHistogram.get_value_from_index but for all buckets at once.
        bucket = (idx >> h.sub_bucket_half_count_magnitude) - 1
        sub = (idx & (h.sub_bucket_half_count - 1)) + h.sub_bucket_half_count
        first = bucket < 0
        sub = np.where(first, sub - h.sub_bucket_half_count, sub)
        bucket = np.where(first, 0, bucket)
        lo = sub << (bucket + h.unit_magnitude)
        hi = lo + (np.int64(1) << (bucket + h.unit_magnitude)) - 1
        return Dist(lo, hi, counts[idx])

    @staticmethod
    def from_values(values: np.ndarray) -> Dist:
        """Exact distribution of raw samples (e.g. from requests.csv): one bucket per value."""
        v, c = np.unique(np.asarray(values, dtype=np.int64), return_counts=True)
        return Dist(v, v, c.astype(np.int64))

    @staticmethod
    def merge(dists: list[Dist]) -> Dist:
        dists = [d for d in dists if d.total]
        if not dists:
            return Dist.empty()
        if len(dists) == 1:
            return dists[0]
        lo = np.concatenate([d.lo for d in dists])
        hi = np.concatenate([d.hi for d in dists])
        cnt = np.concatenate([d.count for d in dists])
        keys, inv = np.unique(lo, return_inverse=True)
        out_c = np.zeros(len(keys), dtype=np.int64)
        np.add.at(out_c, inv, cnt)
        out_hi = np.zeros(len(keys), dtype=np.int64)
        np.maximum.at(out_hi, inv, hi)
        return Dist(keys, out_hi, out_c)

    @property
    def total(self) -> int:
        return int(self.count.sum())

    def quantile_ci(self, q: float, level: float = 0.95) -> tuple[float, float]:
        """A distribution-free confidence interval of the q-quantile: the l-th and u-th smallest
        samples, with l and u the rank B ~ Binomial(n, q) stays within, l ≤ B < u, with
        probability ≥ `level` (equal tails; clipped to the sample). It says how far one run's
        p99.9 can be trusted: 10 samples above it leave a wide interval. NaN if empty."""
        from scipy.stats import binom

        n = self.total
        if n == 0:
            return math.nan, math.nan
        tail = (1 - level) / 2
        lo = max(1, int(binom.ppf(tail, n, q)))
        hi = min(n, int(binom.ppf(1 - tail, n, q)) + 1)
        v = self.quantile(np.array([lo, hi]) / n)
        return float(v[0]), float(v[1])

    def quantile(self, q: float | np.ndarray) -> float | np.ndarray:
        """Value at quantile(s) q in [0, 1] (nearest rank, bucket's highest value); NaN if empty."""
        qa = np.atleast_1d(np.asarray(q, dtype=float))
        if np.any((qa < 0) | (qa > 1)):
            raise ValueError(f"quantiles must be in [0, 1], got {q!r}")
        total = self.total
        if total == 0:
            out = np.full(qa.shape, np.nan)
        else:
            # Nearest rank, as the Rust crate computes it: the ceil(q*n)-th smallest sample.
            # Rounding first keeps 0.99 * 100 = 99.00000000000001 at rank 99, not 100.
            target = np.maximum(1, np.ceil(np.round(qa * total, 9)).astype(np.int64))
            cum = np.cumsum(self.count)
            i = np.minimum(np.searchsorted(cum, target), len(cum) - 1)
            out = np.where(qa == 0, self.lo[0], self.hi[i]).astype(float)
        return out if np.ndim(q) else float(out[0])

    def _mid(self) -> np.ndarray:
        # HdrHistogram's "median equivalent value" of each bucket, used for mean and stdev.
        return (self.lo + (self.hi - self.lo + 1) // 2).astype(float)

    @property
    def mean(self) -> float:
        if not self.total:
            return float("nan")
        return float(np.average(self._mid(), weights=self.count))

    @property
    def stdev(self) -> float:
        if not self.total:
            return float("nan")
        m = self.mean
        return float(np.sqrt(np.average((self._mid() - m) ** 2, weights=self.count)))

    @property
    def min(self) -> float:
        return float(self.lo[0]) if self.total else float("nan")

    @property
    def max(self) -> float:
        return float(self.hi[-1]) if self.total else float("nan")

    def cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """(value, fraction of samples <= value) at each bucket's highest value."""
        if not self.total:
            return np.zeros(0), np.zeros(0)
        return self.hi.astype(float), np.cumsum(self.count) / self.total

    def stats(self) -> dict[str, float]:
        """The statistics summary.json reports, computed from this histogram."""
        p50, p90, p95, p99, p999 = self.quantile(np.array([0.5, 0.9, 0.95, 0.99, 0.999]))
        return {
            "count": self.total,
            "mean": self.mean,
            "stdev": self.stdev,
            "min": self.min,
            "p50": p50,
            "p90": p90,
            "p95": p95,
            "p99": p99,
            "p999": p999,
            "max": self.max,
        }


@dataclass(frozen=True)
class Interval:
    tag: str | None
    start_s: float  # seconds since the log's BaseTime (else since its first interval)
    length_s: float
    dist: Dist


def read_hlog(path: str | Path) -> list[Interval]:
    """Read every interval of an HdrHistogram interval log (Java/Rust/C format, V2 payloads)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise HlogError(f"cannot read interval log {path}: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise HlogError(
            f"{path} is not a text HdrHistogram interval log; re-run `taillab run` to rewrite it"
        ) from e
    out: list[Interval] = []
    first_start: float | None = None
    has_base = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        # With a BaseTime (taillab writes the start of the measured phase) timestamps are
        # already relative to it; without one they may be absolute, so we make them relative
        # to the first interval. Other comments and the quoted CSV legend carry no data.
        if line.startswith("#[BaseTime:"):
            has_base = True
        if not line or line.startswith("#") or line.startswith('"'):
            continue
        tag = None
        if line.startswith("Tag="):
            tag, _, line = line[4:].partition(",")
        fields = line.split(",")
        if len(fields) != 4:
            raise HlogError(
                f"{path}:{lineno}: expected 'start,length,max,payload', got {len(fields)} "
                "fields; this is not an HdrHistogram interval log"
            )
        try:
            start, length = float(fields[0]), float(fields[1])
            h = HdrHistogram.decode(fields[3].encode("ascii"))
        except Exception as e:  # hdrh raises several unrelated types for a bad payload
            raise HlogError(
                f"{path}:{lineno}: cannot decode interval ({type(e).__name__}: {e}); "
                "the file is truncated or not a V2 HdrHistogram log — re-run the measurement"
            ) from e
        if first_start is None:
            first_start = 0.0 if has_base else start
        out.append(Interval(tag, start - first_start, length, Dist.from_hdr(h)))
    return out


def write_hlog(path: str | Path, intervals: list[tuple[float, float, HdrHistogram]], tag: str):
    """Write an interval log in the layout the Rust ``hdrhistogram`` crate uses (for fixtures)."""
    lines = [
        "#[StartTime: 0.000 (seconds since epoch)]",
        "#[BaseTime: 0.000 (seconds since epoch)]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
    ]
    for start, length, h in intervals:
        payload = h.encode().decode("ascii")
        mx = h.get_max_value() if h.get_total_count() else 0
        lines.append(f"Tag={tag},{start:.3f},{length:.3f},{mx:.3f},{payload}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
