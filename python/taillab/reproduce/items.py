"""An item's data: ``configs/reproduce/items.toml`` read and checked, and the results folders
an item's experiments wrote loaded with their host's environment (:class:`Env`), load fractions and
saturation rates (:class:`Data`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import coverage
from ..errors import TaillabError
from ..results import Results, load, numeric, read_summary
from .judge import Judge
from .verdict import group_tag, read_json

SCHEMA = "taillab.reproduce/1"


STATUSES = ("confirmed", "partly", "not confirmed", "inconclusive")


# Two fractions of saturation that differ by less than this are the same planned load (the
# harness rounds rates to 0.01 QPS).
FRACTION_SNAP = 0.02


# How the environment check's items read in a sentence.
_ENV_ITEMS = {
    "steal": "CPU steal",
    "foreign_cpu": "other processes' CPU",
    "worker_invol_cs": "involuntary switches of a worker",
    "worker_runq_wait": "a worker waiting for a CPU",
}


class ReproduceError(TaillabError):
    """An item, its folder or items.toml cannot be used."""


def read_items(path: str | Path) -> dict[str, dict[str, Any]]:
    """Every ``[[item]]`` of items.toml by id, in file order."""
    p = Path(path)
    doc = coverage.read_toml(p, ReproduceError, "; give --items configs/reproduce/items.toml")
    items = doc.get("item")
    if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
        raise ReproduceError(f"{p} has no [[item]] tables with an id each")
    return {str(i["id"]): i for i in items}


def experiment_stem(path: str) -> str:
    """The folder an experiment file's results go to: ``apps/kv.toml`` → ``apps-kv``, and a file
    of another configs folder (``../tailwag/middleware-gc.toml``) → ``tailwag-middleware-gc``."""
    path = path.removesuffix(".toml")
    while path.startswith("../"):
        path = path[3:]
    return path.replace("/", "-")


def _stems(item: dict[str, Any]) -> list[str]:
    if item.get("kind") == "tailwag":
        return [f"{a}/{side}" for a in item.get("apps", []) for side in ("measured", "synthetic")]
    return [experiment_stem(e) for e in item.get("experiments", [])]


@dataclass
class Env:
    """The environment checks of an item's runs: counts, worst values, foreign processes."""

    runs: int = 0
    disturbed: int = 0
    probes: int = 0
    disturbed_probes: int = 0
    worst: dict[str, tuple[float, float, str]] = field(default_factory=dict)
    foreign: Counter = field(default_factory=Counter)
    reasons: list[str] = field(default_factory=list)
    detail: list[tuple[str, str]] = field(default_factory=list)

    def add(self, where: str, summary: dict[str, Any]) -> None:
        self.runs += 1
        env = (summary.get("checks") or {}).get("environment")
        if not isinstance(env, dict) or env.get("ok") is not False:
            return
        self.disturbed += 1
        self.detail.append((where, str(env.get("verdict", ""))))
        for it in env.get("items") or []:
            if isinstance(it, dict) and it.get("ok") is False:
                v = float(it.get("value") or 0.0)
                name = str(it.get("name"))
                if name not in self.worst or v > self.worst[name][0]:
                    self.worst[name] = (v, float(it.get("limit") or 0.0), str(it.get("unit", "")))
        if not env.get("items"):
            self.reasons += [str(r) for r in env.get("reasons") or [env.get("verdict", "")]]
        for f in (summary.get("environment") or {}).get("top_foreign") or []:
            if isinstance(f, dict) and f.get("name"):
                self.foreign[str(f["name"])] += 1

    def gist(self) -> str:
        """One line: the failed items at their worst, and the processes seen most often."""
        parts = []
        for name, (v, limit, unit) in sorted(self.worst.items(), key=lambda t: -t[1][0]):
            parts.append(
                f"{_ENV_ITEMS.get(name, name)} up to {v:.3g} {unit} (limit {limit:g})".strip()
            )
        if not parts and self.reasons:
            parts.append(self.reasons[0][:160])
        text = "; ".join(parts)
        if self.foreign:
            text += "; busy other processes: " + ", ".join(
                n for n, _ in self.foreign.most_common(3)
            )
        return text

    @property
    def all_disturbed(self) -> bool:
        return self.runs > 0 and self.disturbed == self.runs


@dataclass
class Data:
    """An item's results: each experiment loaded, its points with their load fraction, the
    saturation searches, the environment checks, and the host they ran on. ``quick``: the
    quick variant's, whose statistics are judged as points whatever their runs
    (:attr:`judge`)."""

    root: Path
    results: dict[str, Results]
    points: pd.DataFrame
    saturation: dict[str, dict[str, dict[str, Any]]]
    env: Env
    missing: list[str]
    host: dict[str, Any]
    started_at: str | None
    quick: bool = False
    _judge: Judge | None = field(default=None, repr=False, compare=False)

    @property
    def judge(self) -> Judge:
        """The item's statistics with their intervals from its points' runs (:mod:`.judge`)."""
        if self._judge is None or self._judge.repeated == self.quick:
            self._judge = Judge(self.results, repeated=not self.quick)
        return self._judge

    def runs_per_point(self) -> dict[str, list[int]]:
        """Per experiment, the fewest and the most runs a point of it had."""
        out = {}
        for stem in self.results:
            n = self.of(stem).get("runs", pd.Series(dtype=float)).dropna()
            n = n[n > 0]
            if len(n):
                out[stem] = [int(n.min()), int(n.max())]
        return out

    def of(self, stem: str) -> pd.DataFrame:
        """The points of one experiment."""
        return self.points[self.points["stem"] == stem]

    def combined(self, stems: list[str] | None = None, planned_rho: bool = False) -> Results:
        """One Results over several experiments (point ids prefixed with their experiment), for
        the figure functions that draw one panel or line per app. ``planned_rho``: the
        points' utilization is the planned fraction of saturation, so that points planned at
        the same load share a panel whatever the host did to their service times."""
        stems = [s for s in (stems or list(self.results)) if s in self.results]
        runs, pts = [], []
        for s in stems:
            r, p = self.results[s], self.of(s)
            if planned_rho:
                p = p.assign(utilization=p["load_frac"])
            runs.append(r.runs.assign(point=s + "/" + r.runs["point"].astype(str)))
            pts.append(p.assign(point=s + "/" + p["point"].astype(str)))
        if not pts:
            raise ReproduceError(f"no results in {self.root}")
        return Results(
            self.root,
            "collection",
            None,
            pd.concat(runs, ignore_index=True),
            pd.concat(pts, ignore_index=True),
        )


def _saturations(exp_dir: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for f in sorted(exp_dir.glob("saturation/*/saturation.json")):
        doc = read_json(f)
        if isinstance(doc.get("qps"), (int, float)):
            out[f.parent.name] = doc
    return out


def _fractions(res: Results, sats: dict[str, dict[str, Any]]) -> pd.DataFrame:
    """The experiment's points with ``sat_qps`` and ``load_frac`` (offered ÷ saturation,
    snapped to the planned fraction) when its loads were relative to saturation."""
    pts = res.points.copy()
    planned = ((res.experiment or {}).get("parameters") or {}).get("sweep") or {}
    planned = [float(x) for x in planned.get("load") or []]
    sat = [sats.get(group_tag(str(p)), {}).get("qps", math.nan) for p in pts["point"]]
    pts["sat_qps"] = np.asarray(sat, dtype=float)
    frac = numeric(pts, "qps") / pts["sat_qps"].to_numpy()
    for i, f in enumerate(frac):
        near = [x for x in planned if abs(x - f) <= FRACTION_SNAP]
        if near:
            frac[i] = near[0]
    pts["load_frac"] = frac
    pts["nominal_rho"] = [_nominal_rho(res, p) for _, p in pts.iterrows()]
    return pts


_UNIT_NS = {"ns": 1.0, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9}


def nominal_service_ns(spec: Any) -> float:
    """The mean of a synth service spec whose mean is its parameter (``fixed:50us``,
    ``exp:100us``); NaN for any other spec."""
    m = re.fullmatch(r"(fixed|exp):([0-9.]+)\s*(ns|us|µs|ms|s)", str(spec).strip())
    return float(m.group(2)) * _UNIT_NS[m.group(3)] if m else math.nan


def _nominal_rho(res: Results, p: pd.Series) -> float:
    """Planned utilization, offered rate × the spec's mean service ÷ workers: unlike the
    measured one it does not grow when a busy host stretches each request."""
    runs = res.runs[res.runs["point"] == p["point"]]
    if runs.empty or "param_service" not in runs:
        return math.nan
    svc = nominal_service_ns(runs["param_service"].iloc[0])
    return float(p["qps"]) * svc * 1e-9 / float(p["threads"])


def load_item(root: Path, item: dict[str, Any]) -> Data:
    """Read every experiment of ``item`` under ``root`` (missing ones are listed, not fatal)."""
    results, frames, sats, missing = {}, [], {}, []
    env = Env()
    for stem in _stems(item):
        d = root / stem
        if not (d / "experiment.json").exists():
            missing.append(stem)
            continue
        res = load(d)
        results[stem] = res
        sats[stem] = _saturations(d)
        frames.append(_fractions(res, sats[stem]).assign(stem=stem))
        for _, r in res.runs.iterrows():
            env.add(f"{stem}/{r['point']} run {r['run']}", read_summary(r["path"]))
        for doc in sats[stem].values():
            for p in doc.get("probes") or []:
                env.probes += 1
                env.disturbed_probes += bool(isinstance(p, dict) and p.get("disturbed"))
    points = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["stem"])
    first = next(iter(results.values()), None)
    exp = first.experiment if first is not None else {}
    return Data(
        root=root,
        results=results,
        points=points,
        saturation=sats,
        env=env,
        missing=missing,
        host=first.host if first is not None else {},
        started_at=(exp or {}).get("started_at"),
    )
