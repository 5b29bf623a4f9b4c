#!/usr/bin/env python3
"""Copy a `taillab reproduce --quick` results folder here, trimmed to what the pages read.

    python python/tests/data/reproduce/trim.py SRC_ROOT [ITEM ...]

Kept: experiment.json, aggregate.json and summary.json without the per-point configuration,
per-run estimates and the monitor's per-thread detail (the sections in WHOLE whole);
saturation.json; each TailWAG app's validation.json; each attribution's attribution.json; the
item's scale.json and flags.json; the interval logs of three items only (HLOGS: the service-time
CDF of Fig. 2 and the CCDFs of Tales Fig. 2 and 3 read them). Dropped: requests.csv, fit.json,
pages, probe runs. Existing item folders here are replaced.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# What the pages read; the keys taillab.run/2 requires besides are put back from its schema.
RUN_KEYS = [
    "schema", "app", "params", "config", "threads", "seed", "arrival", "wait", "discipline",
    "dispatch", "offered_qps", "scheduled_qps", "achieved_qps", "utilization", "duration_s",
    "requests", "host", "started_at", "interval_s",
]  # fmt: skip
METRICS = ("sojourn", "service")
HLOGS = {"tailbench-table1": ("service",), "tales-fig2": ("sojourn",), "tales-fig3": ("sojourn",)}
# Sections of summary.json some pages read whole (the fan-out items, TailWAG's studies, the
# counters and interference items), kept as they are when a run has them.
WHOLE = ("interference", "fanout", "tuning", "stalls", "counters", "roi")
# Files beside an item's experiments that its page reads: the host cap of its worker axis and
# the command line's settings (item folder), and an attribution's result.
ITEM_FILES = ("scale.json", "flags.json")
# Items whose page shows the processes' resources (the rest read only the foreign names):
# profiling-table7's, and Table I's runs, which the report's Table II (profiling-table2) reads.
RESOURCES = {"profiling-table7", "tailbench-table1"}


def _point(p: dict) -> dict:
    return {k: v for k, v in p.items() if k != "configuration"}


def experiment(doc: dict) -> dict:
    keep = {
        k: doc[k] for k in ("schema", "kind", "base_seed", "ci", "host", "started_at") if k in doc
    }
    keep["parameters"] = {"sweep": (doc.get("parameters") or {}).get("sweep")}
    keep["points"] = [_point(p) for p in doc.get("points", [])]
    return keep


def aggregate(doc: dict) -> dict:
    # The point's description repeats experiment.json's.
    out = {k: v for k, v in doc.items() if k not in ("point", "metrics", "merged", "seeds")}
    out["metrics"] = {
        k: {f: x for f, x in v.items() if f != "per_run"} for k, v in doc.get("metrics", {}).items()
    }
    out["merged"] = {k: v for k, v in (doc.get("merged") or {}).items() if k in METRICS}
    return out


def summary(doc: dict, resources: bool) -> dict:
    out = {k: doc[k] for k in RUN_KEYS if k in doc}
    out["latency_ns"] = {k: v for k, v in doc["latency_ns"].items() if k in METRICS}
    if "ideal" in doc:
        out["ideal"] = {k: doc["ideal"][k] for k in ("method", "servers", "sojourn", "ratio")}
    checks = doc.get("checks") or {}
    out["checks"] = {k: {"ok": v.get("ok")} for k, v in checks.items()}
    if "environment" in checks:
        env = checks["environment"]
        out["checks"]["environment"] = {k: env.get(k) for k in ("ok", "verdict", "items")}
    env = doc.get("environment") or {}
    if not resources:
        env = {"top_foreign": env.get("top_foreign", [])}
    out["environment"] = {
        **({"harness": env["harness"]} if env.get("harness") is not None else {}),
        "extra": env.get("extra", []),
        "top_foreign": [
            {"name": f.get("name"), "cpu_pct": f.get("cpu_pct")} for f in env.get("top_foreign", [])
        ],
    }
    for k in WHOLE:
        if k in doc:
            out[k] = doc[k]
    return _with_required(out, doc)


def _at(doc: Any, path: list[str | int]) -> Any:
    for k in path:
        doc = doc[k]
    return doc


@cache
def _missing() -> Callable[[dict], list[str]]:
    """The package's list of the keys a run/2 summary lacks (``missing_keys`` against its
    schema); the package is imported from this checkout once."""
    sys.path.insert(0, str(HERE.parents[2]))
    from taillab.schema import load_schema, missing_keys

    return lambda d: missing_keys(d, load_schema("run-2"))


def _with_required(out: dict, doc: dict) -> dict:
    """``out`` with every key that ``taillab.run/2`` requires and the trim dropped put back from
    ``doc``, so the trimmed summary still validates (a run/1 summary is left as it is)."""
    if doc.get("schema") != "taillab.run/2":
        return out
    for _ in range(100):
        missing = _missing()(out)
        if not missing:
            return out
        for m in missing:
            path: list[str | int] = [
                int(k[1:-1]) if k.startswith("[") else k
                for k in re.findall(r"\[\d+\]|[^.\[\]]+", m)
            ]
            _at(out, path[:-1])[path[-1]] = _at(doc, path)
    raise SystemExit(f"a trimmed summary still lacks required keys: {missing[:3]}")


def _write(path: Path, doc: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n", "utf-8")


def copy_experiment(src: Path, dst: Path, hlogs: tuple[str, ...], resources: bool) -> None:
    _write(dst / "experiment.json", experiment(json.loads((src / "experiment.json").read_text())))
    for agg in src.glob("points/*/aggregate.json"):
        _write(dst / agg.relative_to(src), aggregate(json.loads(agg.read_text())))
    for s in src.glob("points/*/run-*/summary.json"):
        _write(dst / s.relative_to(src), summary(json.loads(s.read_text()), resources))
        for m in hlogs:
            h = s.parent / "hist" / f"{m}.hlog"
            if h.exists():
                (dst / h.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(h, dst / h.relative_to(src))
    for sat in src.glob("saturation/*/saturation.json"):
        _write(dst / sat.relative_to(src), json.loads(sat.read_text()))


def copy_item(src: Path, dst: Path) -> None:
    if dst.exists():
        shutil.rmtree(dst)
    for exp in src.rglob("experiment.json"):
        copy_experiment(
            exp.parent,
            dst / exp.parent.relative_to(src),
            HLOGS.get(src.name, ()),
            src.name in RESOURCES,
        )
    for name in ITEM_FILES:
        if (src / name).exists():
            _write(dst / name, json.loads((src / name).read_text()))
    for a in src.glob("*/attribution/attribution.json"):
        _write(dst / a.relative_to(src), json.loads(a.read_text()))
    for v in src.glob("*/validation/validation.json"):
        doc = json.loads(v.read_text())
        _write(
            dst / v.relative_to(src),
            {k: doc[k] for k in ("schema", "app", "summary", "points") if k in doc},
        )


def main() -> int:
    src = Path(sys.argv[1])
    items = sys.argv[2:] or sorted(d.name for d in src.iterdir() if d.is_dir())
    for item in items:
        copy_item(src / item, HERE / item)
        print(item)
    return 0


if __name__ == "__main__":
    sys.exit(main())
