"""Results trees of the current schema planted with chosen numbers, for the tests of the
verdict rules (``test_verdicts_*.py``).

Every run's ``summary.json`` is a ``taillab.run/2`` document: the keys a test plants (the app,
its point, the sojourn and service statistics, an ideal, a fan-out, stalls or resources
section) and, for every other key the schema requires, a neutral value (zero, empty, false or
null: :func:`complete`). Each summary is validated against the package's copy of
docs/schema/run-2.json where it is written, so a planted file the loader would refuse fails
there; every point also gets the ``aggregate.json`` a sweep writes. The item's folder is then
read by :func:`taillab.reproduce.evaluate` — the loader, the rule, the environment, "needs" and
scale rules that ``taillab reproduce`` applies before it writes a page — and :func:`verdict`
returns what ``verdict.json`` would hold (no figures are drawn: that is what keeps these tests
quick; test_reproduce.py draws the pages).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from hdrh.histogram import HdrHistogram

from taillab import reproduce as R
from taillab.hlog import write_hlog
from taillab.schema import load_schema, validate_run

REPO = Path(__file__).resolve().parents[2]
ITEMS = REPO / "configs" / "reproduce" / "items.toml"
HOST = {
    "cpu": "Planted CPU",
    "cores": 2,
    "kernel": "6.1.0",
    "hostname": "planted",
    "taillab": "0.1.0",
    "git": "0000000",
}
MS, US = 1e6, 1e3
RUN2 = load_schema("run-2")


# --- run/2 documents -----------------------------------------------------------------------------


def _resolve(s: Any) -> Any:
    while isinstance(s, dict) and "$ref" in s:
        s = RUN2["$defs"][s["$ref"].rsplit("/", 1)[-1]]
    return s


def neutral(schema: Any) -> Any:
    """The plainest value ``schema`` allows: null where it may be null, else zero, "", false,
    [] or an object holding only its required keys (each neutral in turn)."""
    s = _resolve(schema)
    if not isinstance(s, dict):
        return None
    for alts in (s.get("anyOf"), s.get("oneOf")):
        if alts:
            nullable = [a for a in alts if _resolve(a).get("type") == "null"]
            return None if nullable else neutral(alts[0])
    if "const" in s:
        return s["const"]
    if "enum" in s:
        return s["enum"][0]
    kind = s.get("type", "object")
    kind = "null" if isinstance(kind, list) and "null" in kind else kind
    if isinstance(kind, list):
        kind = kind[0]
    simple = {"null": None, "boolean": False, "string": "", "array": []}
    if kind in simple:
        return simple[kind]
    if kind in ("integer", "number"):
        return max(0, s.get("minimum", 0)) if kind == "integer" else float(s.get("minimum", 0.0))
    return complete({}, s)


def complete(doc: dict[str, Any], schema: Any = RUN2) -> dict[str, Any]:
    """``doc`` with every key ``schema`` requires and ``doc`` lacks set to :func:`neutral`,
    and the same, recursively, inside the objects ``doc`` gives."""
    s = _resolve(schema)
    props = s.get("properties", {})
    for k in s.get("required", []):
        if k not in doc:
            doc[k] = neutral(props.get(k, {}))
    for k, v in doc.items():
        sub = _resolve(props.get(k, s.get("additionalProperties")))
        if not isinstance(sub, dict):
            continue
        alts = [a for a in sub.get("anyOf", []) if _resolve(a).get("type") != "null"]
        sub = _resolve(alts[0]) if alts else sub
        if isinstance(v, dict):
            complete(v, sub)
        elif isinstance(v, list) and isinstance(sub.get("items"), dict):
            for x in v:
                if isinstance(x, dict):
                    complete(x, sub["items"])
    return doc


def stats(p50: float, p95: float, p99: float, mean: float | None = None, **more) -> dict:
    """A metric's statistics (ns) as a run writes them: quantiles whole nanoseconds, the
    rest spread around the given ones so that they are ordered."""
    mean = p50 * 1.1 if mean is None else mean
    q = {"p50": p50, "p90": (p50 + p95) / 2, "p95": p95, "p99": p99, "p999": p99 * 1.3}
    q |= more
    q.setdefault("max", q["p999"] * 1.2)
    out: dict[str, Any] = {k: int(round(v)) for k, v in q.items()}
    return {"count": 10_000, "mean": float(mean), "stdev": float(mean), "min": 1, **out}


def _ideal(soj: dict, ratio: dict[str, float]) -> dict:
    ideal = {**soj, **{s: int(round(soj[s] / r)) for s, r in ratio.items() if s != "mean"}}
    if "mean" in ratio:
        ideal["mean"] = soj["mean"] / ratio["mean"]
    return {
        "method": "replay",
        "servers": 1,
        "discipline": "fifo",
        "dispatch": "shared",
        "replayed": soj["count"],
        "sojourn": ideal,
        "excess": {s: float(soj[s] - ideal[s]) for s in ratio},
        "ratio": {s: float(r) for s, r in ratio.items()},
    }


_DISTURBED = {
    "ok": False,
    "verdict": "other processes used 80 % of a CPU (limit 5 %): rustc 80 %",
    "items": [{"name": "foreign_cpu", "ok": False, "value": 80.0, "limit": 5.0, "unit": "%"}],
}


@dataclass
class Point:
    """One planted point of an experiment, with one run.

    ``soj`` and ``svc`` are :func:`stats`; ``ideal``: measured ÷ ideal per statistic (the run
    then has an ``ideal`` section); ``sections``: other top-level keys of its summary
    (``fanout``, ``stalls``, ``environment``, ``utilization``, …), completed to the schema."""

    id: str
    app: str = "synth"
    config: str = "integrated"
    threads: int = 1
    qps: float = 1000.0
    axes: dict[str, Any] = field(default_factory=dict)
    soj: dict = field(default_factory=lambda: stats(100 * US, 300 * US, 500 * US))
    svc: dict = field(default_factory=lambda: stats(50 * US, 100 * US, 150 * US))
    ideal: dict[str, float] | None = None
    env_ok: bool = True
    params: dict[str, str] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    runs: tuple[float, ...] | None = None


def scaled(p: Point, s: float) -> Point:
    """``p`` with its sojourn and service statistics times ``s`` (one of its repeated runs)."""

    def times(st: dict) -> dict:
        # Quantiles stay whole nanoseconds, as a run writes them.
        return {
            k: v if k == "count" else round(v * s) if isinstance(v, int) else v * s
            for k, v in st.items()
        }

    return replace(p, soj=times(p.soj), svc=times(p.svc))


def summary(p: Point) -> dict[str, Any]:
    """The run/2 summary.json of ``p``'s run (validated against the schema)."""
    env = {"ok": True, "verdict": "quiet"} if p.env_ok else dict(_DISTURBED)
    doc: dict[str, Any] = {
        "schema": "taillab.run/2",
        "app": p.app,
        "params": p.params,
        "config": p.config,
        "threads": p.threads,
        "seed": 1,
        "arrival": "poisson",
        "wait": "hybrid",
        "shaper": "inline",
        "discipline": "fifo",
        "offered_qps": float(p.qps),
        "scheduled_qps": float(p.qps),
        "achieved_qps": float(p.qps),
        "utilization": p.qps * p.svc["mean"] * 1e-9 / p.threads,
        "duration_s": 10.0,
        "requests": {"warmup": 100, "measured": p.soj["count"], "unfinished": 0, "errors": 0},
        "latency_ns": {"sojourn": p.soj, "service": p.svc},
        "checks": {"environment": env},
        "host": HOST,
        "started_at": "2026-12-01T00:00:00Z",
        "interval_s": 1.0,
    }
    if p.ideal:
        doc["ideal"] = _ideal(p.soj, p.ideal)
    doc.update(p.sections)
    complete(doc)
    validate_run(doc, f"planted {p.id}")
    return doc


def _aggregate(runs: list[Point]) -> dict[str, Any]:
    """The point's aggregate.json of its runs: the CI metrics' estimates (the mean over runs),
    the merged stats (the first run's: the rules read the runs themselves when there are
    several)."""
    k = len(runs)
    metrics = {
        f"sojourn.{s}": {
            "estimate": float(sum(r.soj[s] for r in runs) / k),
            "ci_low": None,
            "ci_high": None,
            "n": k,
        }
        for s in ("mean", "p95", "p99")
    }
    return {
        "schema": "taillab.aggregate/1",
        "runs": k,
        "target": 1.0,
        "target_met": False,
        "stopped": f"run cap {k} reached",
        "metrics": metrics,
        "merged": {"sojourn": runs[0].soj, "service": runs[0].svc},
    }


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def experiment(
    d: Path,
    points: list[Point],
    *,
    load: list[float] | None = None,
    saturation: dict[str, float] | None = None,
    system: dict[str, Any] | None = None,
    runs: tuple[float, ...] = (1.0,),
) -> Path:
    """An experiment folder as a sweep writes it: experiment.json (``load``: the sweep's
    planned fractions of saturation; ``system``: its host report), a run per factor of
    ``runs`` (a point's own ``runs`` first: run k has its latencies times the k-th factor) and
    an aggregate.json per point, and ``saturation/<tag>/saturation.json`` per group tag given
    (``integrated-t1-q0``: that group's saturation rate)."""
    meta = []
    for p in points:
        axes = [{"key": k, "value": v} for k, v in p.axes.items()]
        meta.append(
            {"id": p.id, "app": p.app, "config": p.config, "threads": p.threads, "qps": p.qps}
            | {"axes": axes, "params": p.params}
        )
        each = [scaled(p, f) for f in (p.runs or runs)]
        for k, r in enumerate(each):
            _write(d / "points" / p.id / f"run-{k}" / "summary.json", summary(r))
        _write(d / "points" / p.id / "aggregate.json", _aggregate(each))
    doc = {
        "schema": "taillab.experiment/1",
        "kind": "sweep",
        "host": HOST,
        "started_at": "2026-12-01T00:00:00Z",
        "parameters": {"sweep": {"load": load}},
        "points": meta,
    }
    if system is not None:
        doc["system"] = system
    _write(d / "experiment.json", doc)
    for tag, qps in (saturation or {}).items():
        probe = {"name": "probe-0", "qps": qps, "achieved_qps": qps, "sustainable": True}
        _write(
            d / "saturation" / tag / "saturation.json",
            {"qps": qps, "probes": [probe | {"disturbed": False}]},
        )
    return d


def write_json(path: Path, doc: dict[str, Any]) -> Path:
    """A file a rule reads besides the runs (validation.json, attribution.json, scale.json)."""
    _write(path, doc)
    return path


# --- verdicts ------------------------------------------------------------------------------------


def verdict(
    root: Path, item_id: str, reuse: Path | None = None, quick: bool = False
) -> dict[str, Any]:
    """What verdict.json would hold for the item whose folder is ``root/item_id`` (``quick``:
    as the quick variant's page)."""
    folder = root / item_id
    folder.mkdir(parents=True, exist_ok=True)
    page = R.evaluate(item_id, folder, ITEMS, reuse=reuse, quick=quick)
    doc = R.verdict_doc(page)
    assert doc["status"] in R.STATUSES
    return doc


def cond(doc: dict[str, Any], start: str) -> bool | None:
    """The outcome of the one condition whose text starts with ``start``."""
    found = [c for c in doc["conditions"] if c["text"].startswith(start)]
    texts = [c["text"] for c in doc["conditions"]]
    assert len(found) == 1, f"{len(found)} conditions start with {start!r}: {texts}"
    return found[0]["ok"]


def hlog(run_dir: Path, metric: str, values_ns) -> None:
    """The run's interval log of ``metric`` holding ``values_ns`` (one 10 s interval), which
    the rules that read distributions (p99.9 and its interval) take over the summary's."""
    h = HdrHistogram(1, 3600 * 10**9, 3)
    for v in values_ns:
        h.record_value(int(v))
    (run_dir / "hist").mkdir(parents=True, exist_ok=True)
    write_hlog(run_dir / "hist" / f"{metric}.hlog", [(0.0, 10.0, h)], metric)


def effects(metric: str, base_us: float, terms, quantiles=(0.95, 0.99)) -> list[dict]:
    """attribution.json's ``effects`` at each quantile: the intercept ``base_us`` and each of
    ``terms`` — (factors [(key, level)], estimate µs, CI half-width µs) — a main effect for
    one factor, an interaction for two, as taillab.attribute writes them."""
    out = []
    for q in quantiles:
        base = {"estimate_us": base_us, "ci_low_us": base_us, "ci_high_us": base_us}
        out.append({"metric": metric, "quantile": q, "kind": "intercept", "term": "base"} | base)
        for fs, est, hw in terms:
            lo, hi = est - hw, est + hw
            out.append(
                {
                    "metric": metric,
                    "quantile": q,
                    "kind": "main" if len(fs) == 1 else "interaction",
                    "term": " × ".join(f"{k}={v}" for k, v in fs),
                    "factors": [{"key": k, "level": v} for k, v in fs],
                    "estimate_us": est,
                    "ci_low_us": lo,
                    "ci_high_us": hi,
                    "excludes_zero": bool(lo > 0 or hi < 0),
                }
            )
    return out
