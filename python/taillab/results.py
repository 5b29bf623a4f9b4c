"""Load a taillab results folder into tidy pandas DataFrames.

Three layouts are read, told apart by the file at their root:

* a single run: ``summary.json`` (schema ``taillab.run/2``), ``hist/<metric>.hlog``, and
  optionally its per-request records, ``requests.csv`` or ``requests.parquet`` (the same int64
  columns; reading Parquet needs pyarrow);
* an experiment or sweep: ``experiment.json`` (schema ``taillab.experiment/1``) and
  ``points/<point-id>/run-<k>/`` run folders, each point with ``aggregate.json`` (schema
  ``taillab.aggregate/1``) once its repeats are done.

Schema versions are checked strictly (an unknown version is an error naming the file and the
versions this package reads). A ``taillab.run/2`` summary is validated against
docs/schema/run-2.json (:mod:`taillab.schema`): a key of the wrong shape is an error naming the
file and the key. Keys the schema does not name are ignored. All latencies are in nanoseconds.

Schema history (the versions this module reads):
  taillab.run/1, taillab.experiment/1, taillab.aggregate/1 — first versions (Nov 2026).
  taillab.run/2 — the same keys, each section typed on the Rust side and described by
  docs/schema/run-2.json, which these files are validated against; run/1 files are still read,
  unvalidated.
"""

from __future__ import annotations

import json
import math
import re
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import ResultsNotFound, SchemaError, TaillabError
from .hlog import Dist, read_hlog
from .schema import validate_run

RUN_SCHEMA = "taillab.run"
EXPERIMENT_SCHEMA = "taillab.experiment"
AGGREGATE_SCHEMA = "taillab.aggregate"
SUPPORTED = {RUN_SCHEMA: {1, 2}, EXPERIMENT_SCHEMA: {1}, AGGREGATE_SCHEMA: {1}}
# From this version on a run's summary.json has a JSON Schema it is validated against.
RUN_VALIDATED_FROM = 2

# A run's per-request records, in the formats `record.format` writes (docs/records.md).
REQUEST_FILES = ("requests.parquet", "requests.csv")
# The stamps of requests.csv, in the order a request passes them (docs/design.md).
STAMPS = ["intended", "sent", "enqueued", "started", "finished", "completed"]
# The user-space reads that kernel receive stamps replaced (TCP runs); files written
# before they existed lack them, and then equal `enqueued` and `completed`.
USER_STAMPS = {"enqueued_user": "enqueued", "completed_user": "completed"}
STATS = ["count", "mean", "stdev", "min", "p50", "p90", "p95", "p99", "p999", "max"]
QUANTILE_OF = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}
_RUN_DIR = re.compile(r"^run-(\d+)$")


def _read_object(path: Path) -> dict[str, Any]:
    """A JSON file holding an object; raises saying which file and what is wrong with it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise ResultsNotFound(f"cannot read {path}: {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise SchemaError(
            f"{path} is not valid JSON ({e.msg} at line {e.lineno}); the run was probably "
            "interrupted while writing it — delete that run folder and re-run it"
        ) from e
    if not isinstance(doc, dict):
        raise SchemaError(f"{path}: expected a JSON object at the top level")
    return doc


def read_json(path: Path, family: str) -> dict[str, Any]:
    """Read a JSON file and check its ``schema`` is ``<family>/<version we support>``; a run's
    summary of a version with a JSON Schema is validated against it."""
    doc = _read_object(path)
    schema = doc.get("schema")
    want = ", ".join(f"{family}/{v}" for v in sorted(SUPPORTED[family]))
    if not isinstance(schema, str):
        raise SchemaError(f'{path} has no "schema" key; expected {want}')
    fam, _, ver = schema.partition("/")
    if fam != family:
        raise SchemaError(f"{path} has schema {schema!r}, expected {want}")
    if not ver.isdigit() or int(ver) not in SUPPORTED[family]:
        raise SchemaError(
            f"{path} has schema {schema!r} but this taillab Python package reads {want}; "
            "install the package from the same taillab checkout that wrote the results "
            "(pip install -e python)"
        )
    if family == RUN_SCHEMA and int(ver) >= RUN_VALIDATED_FROM:
        validate_run(doc, path)
    return doc


def read_summary(run_dir: str | Path) -> dict[str, Any]:
    """A run folder's ``summary.json``, whole: the sections the pages read beside the columns
    of :attr:`Results.runs` (``environment``, ``interference``, ``counters``, ``ideal``, …).

    Raises :class:`ResultsNotFound` when the file is missing or unreadable and
    :class:`SchemaError` when it is not a JSON object, each naming the file: a run that
    :func:`load` listed has one, so a failure here is never an empty section. The schema is
    not checked again (``load`` did; tests and tools hand in bare sections)."""
    return _read_object(Path(run_dir) / "summary.json")


def _require(doc: dict, key: str, path: Path):
    if key not in doc:
        raise SchemaError(f"{path} lacks the required key {key!r}; the file is incomplete")
    return doc[key]


def _flatten_params(params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        return {}
    return {f"param_{k}": v for k, v in sorted(params.items())}


def run_row(run_dir: Path, doc: dict[str, Any]) -> dict[str, Any]:
    """One row of ``Results.runs`` from a parsed summary.json."""
    path = run_dir / "summary.json"
    row: dict[str, Any] = {}
    for key in ("app", "config", "threads"):
        row[key] = _require(doc, key, path)
    for key in ("seed", "arrival", "wait", "shaper", "started_at"):
        row[key] = doc.get(key)
    for key in ("offered_qps", "scheduled_qps", "achieved_qps", "duration_s", "interval_s"):
        v = doc.get(key)
        row[key] = float(v) if isinstance(v, (int, float)) else math.nan
    reqs = doc.get("requests") or {}
    for key in ("warmup", "measured", "unfinished"):
        row[f"requests_{key}"] = reqs.get(key)
    for key, v in reqs.items():
        if f"requests_{key}" not in row and isinstance(v, (int, float)):
            row[f"requests_{key}"] = v
    # Other scalar settings the harness records (discipline, spin margin, ...) are kept as
    # columns too, so new keys show up without a change here.
    for key, v in doc.items():
        if key not in row and key != "schema" and isinstance(v, (str, int, float, bool)):
            row[key] = v
    lat = _require(doc, "latency_ns", path)
    if not isinstance(lat, dict):
        raise SchemaError(f'{path}: "latency_ns" must be an object of metric -> statistics')
    for metric, stats in sorted(lat.items()):
        if not isinstance(stats, dict):
            continue
        for stat in STATS:
            v = stats.get(stat)
            row[f"{metric}_{stat}"] = float(v) if isinstance(v, (int, float)) else math.nan
    checks = doc.get("checks") or {}
    failed = []
    for name, verdict in sorted(checks.items()):
        ok = bool(verdict.get("ok")) if isinstance(verdict, dict) else bool(verdict)
        row[f"check_{name}"] = ok
        if isinstance(verdict, dict) and isinstance(verdict.get("verdict"), str):
            row[f"verdict_{name}"] = verdict["verdict"]
        if not ok:
            failed.append(name)
    row["checks_ok"] = not failed
    row["failed_checks"] = ",".join(failed)
    host = doc.get("host") or {}
    for key, v in sorted(host.items()):
        if not isinstance(v, (dict, list)):
            row[f"host_{key}"] = v
    row.update(_flatten_params(doc.get("params")))
    # Utilisation rho = lambda * E[S] / c, from the measured rate and service time: the x axis
    # of TailBench's load-latency figures when apps of different speeds share one plot.
    svc = row.get("service_mean", math.nan)
    thr = row["threads"]
    if isinstance(doc.get("utilization"), (int, float)):
        row["utilization"] = float(doc["utilization"])  # the harness's own figure
    elif isinstance(thr, (int, float)) and thr > 0:
        row["utilization"] = row["achieved_qps"] * svc * 1e-9 / thr
    else:
        row["utilization"] = math.nan
    return row


def _metric_key(key: str) -> str:
    # "sojourn.p99" -> "sojourn_p99": column names that work as pandas attributes.
    return key.replace(".", "_")


class Results:
    """A loaded results folder.

    Attributes (DataFrames, one row per ...):

    ``runs``
        run: ``point``, ``run`` (the k of ``run-<k>``), ``path`` (the run folder), ``app``,
        ``config``, ``threads``, ``seed``, ``arrival``, ``wait``, ``shaper``,
        ``offered_qps``/``scheduled_qps``/``achieved_qps``, ``duration_s``,
        ``requests_{warmup,measured,unfinished,...}``, any other scalar key of summary.json,
        ``<metric>_<stat>`` for every metric of
        ``latency_ns`` (sojourn, service, queue, send_lag, ...) and stat in count, mean,
        stdev, min, p50, p90, p95, p99, p999, max (ns), ``check_<name>`` (bool),
        ``verdict_<name>`` (the check's one-line reason), ``checks_ok``, ``failed_checks``
        (comma-separated), ``host_*``, ``param_*``, ``utilization`` (from summary.json, else
        achieved_qps x mean service time / threads).
    ``points``
        load point: ``point``, ``qps``, ``threads``, ``config``, ``app``, ``param_*``,
        ``runs`` (run folders found), ``runs_failed`` (runs with a failed check), ``target``,
        ``target_met``, ``stopped`` (the harness's reason), ``aggregated`` (whether
        aggregate.json exists), ``achieved_qps`` and
        ``utilization`` (mean over runs), and for each aggregate metric such as
        ``sojourn.p99``: ``sojourn_p99`` (estimate, ns), ``sojourn_p99_ci_low``,
        ``sojourn_p99_ci_high``, ``sojourn_p99_rel_half_width``, ``sojourn_p99_n`` (and
        ``_bootstrap_low``/``_bootstrap_high``/``_met`` when aggregate.json gives them); merged
        histograms' stats as ``merged_<metric>_<stat>``. A single run folder gives one point
        whose estimates are the run's own values and whose CIs are NaN.
    ``intervals`` (read on first use)
        interval of an interval log: ``point``, ``run``, ``metric``, ``t_s`` (start, seconds
        into the measured phase), ``length_s``, and ``count``, ``mean``, ``p50``, ``p90``,
        ``p99``, ``p999``, ``max`` (ns).
    ``requests`` (read on first use; empty when no run saved its records)
        request: ``point``, ``run``, ``id``, ``worker``, the six stamps, ``measured`` (0 for
        warmup requests, when the file says), ``ideal_completed`` when the run has an ideal,
        ``client`` (several clients) or ``leaf`` (a fan-out: a row per leaf's answer) when
        the file has one, and derived ``send_lag``, ``queue``, ``service``, ``sojourn``,
        ``transport`` (ns).
    """

    def __init__(
        self,
        root: Path,
        kind: str,
        experiment: dict | None,
        runs: pd.DataFrame,
        points: pd.DataFrame,
    ):
        self.root = root
        # "run" (one run folder), "collection" (a folder of run folders), or the
        # experiment's kind ("run" | "sweep")
        self.kind = kind
        self.experiment = experiment
        self.runs = runs
        self.points = points
        self._dists: dict[tuple[str, str], Dist] = {}

    def __repr__(self) -> str:
        return (
            f"Results({str(self.root)!r}, kind={self.kind!r}, points={len(self.points)}, "
            f"runs={len(self.runs)})"
        )

    @property
    def metrics(self) -> list[str]:
        """Latency metrics present in the run summaries (sojourn, service, ...)."""
        return sorted({c[: -len("_p99")] for c in self.runs.columns if c.endswith("_p99")})

    @property
    def host(self) -> dict[str, Any]:
        if self.experiment and isinstance(self.experiment.get("host"), dict):
            return self.experiment["host"]
        if len(self.runs):
            r = self.runs.iloc[0]
            return {c[5:]: r[c] for c in self.runs.columns if c.startswith("host_")}
        return {}

    def _select(self, point: str | None, run: int | None) -> pd.DataFrame:
        sel = self.runs
        if point is not None:
            sel = sel[sel["point"] == point]
        if run is not None:
            sel = sel[sel["run"] == run]
        if sel.empty:
            raise TaillabError(
                f"no run matches point={point!r} run={run!r} in {self.root}; "
                f"points are {list(self.points['point'])}"
            )
        return sel

    def histogram(self, metric: str, point: str | None = None, run: int | None = None) -> Dist:
        """The distribution of ``metric`` merged over the selected runs' interval logs.

        Falls back to requests.csv when a run has no interval log for the metric.
        """
        dists = []
        for _, r in self._select(point, run).iterrows():
            dists.append(self._run_dist(Path(r["path"]), metric))
        return Dist.merge(dists)

    def _run_dist(self, run_dir: Path, metric: str) -> Dist:
        key = (str(run_dir), metric)
        if key not in self._dists:
            self._dists[key] = self._read_run_dist(run_dir, metric)
        return self._dists[key]

    def _read_run_dist(self, run_dir: Path, metric: str) -> Dist:
        hl = run_dir / "hist" / f"{metric}.hlog"
        if hl.exists():
            return Dist.merge([iv.dist for iv in read_hlog(hl)])
        req = requests_file(run_dir)
        if req is not None:
            df = _read_requests(req)
            if "measured" in df:
                df = df[df["measured"] == 1]
            if metric in df:
                return Dist.from_values(df[metric].to_numpy())
        return Dist.empty()

    @cached_property
    def intervals(self) -> pd.DataFrame:
        rows = []
        for _, r in self.runs.iterrows():
            hist = Path(r["path"]) / "hist"
            if not hist.is_dir():
                continue
            for hl in sorted(hist.glob("*.hlog")):
                for iv in read_hlog(hl):
                    st = iv.dist.stats()
                    rows.append(
                        {
                            "point": r["point"],
                            "run": r["run"],
                            "metric": iv.tag or hl.stem,
                            "t_s": iv.start_s,
                            "length_s": iv.length_s,
                            **{
                                k: st[k]
                                for k in ("count", "mean", "p50", "p90", "p99", "p999", "max")
                            },
                        }
                    )
        cols = [
            "point",
            "run",
            "metric",
            "t_s",
            "length_s",
            "count",
            "mean",
            "p50",
            "p90",
            "p99",
            "p999",
            "max",
        ]
        return pd.DataFrame(rows, columns=cols)

    @cached_property
    def requests(self) -> pd.DataFrame:
        frames = []
        for _, r in self.runs.iterrows():
            req = requests_file(Path(r["path"]))
            if req is not None:
                df = _read_requests(req)
                df.insert(0, "run", r["run"])
                df.insert(0, "point", r["point"])
                frames.append(df)
        if not frames:
            return pd.DataFrame(
                columns=[
                    "point",
                    "run",
                    "id",
                    "worker",
                    *STAMPS,
                    *USER_STAMPS,
                    "send_lag",
                    "queue",
                    "service",
                    "sojourn",
                    "transport",
                    "recv_lag",
                    "server_recv_lag",
                ]
            )
        return pd.concat(frames, ignore_index=True)


def requests_file(run_dir: Path) -> Path | None:
    """The run's per-request records (``requests.parquet`` or ``requests.csv``), if it saved
    them."""
    for name in REQUEST_FILES:
        p = Path(run_dir) / name
        if p.exists():
            return p
    return None


def read_run_requests(run_dir: str | Path) -> pd.DataFrame | None:
    """One run's records with the derived durations, or None when it saved none."""
    req = requests_file(Path(run_dir))
    return None if req is None else _read_requests(req)


def _read_parquet(path: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq  # only for Parquet records: the bundle reads CSV without it
    except ImportError as e:
        raise TaillabError(
            f"{path}: reading Parquet records needs pyarrow (scripts/setup.sh installs it; "
            "or pip install pyarrow)"
        ) from e
    try:
        table = pq.read_table(path)
    except (OSError, ValueError) as e:
        raise SchemaError(
            f"{path}: not a readable Parquet file ({e}); re-run with --save-requests to rewrite it"
        ) from e
    df = table.to_pandas()
    bad = [c for c, t in df.dtypes.items() if t.kind not in "iub"]
    if bad:
        raise SchemaError(f"{path}: columns {bad} are not integers; it was not written by taillab")
    return df.astype("int64")


def _read_requests(path: Path) -> pd.DataFrame:
    """A records file of either format as int64 columns, with the derived durations."""
    if path.suffix == ".parquet":
        df = _read_parquet(path)
    else:
        try:
            df = pd.read_csv(path, dtype="int64")
        except (ValueError, pd.errors.ParserError) as e:
            raise SchemaError(
                f"{path}: expected integer columns id,worker,{','.join(STAMPS)} ({e}); "
                "re-run with --save-requests to rewrite it"
            ) from e
    missing = [c for c in ["id", "worker", *STAMPS] if c not in df.columns]
    if missing:
        raise SchemaError(f"{path} lacks the columns {missing}; it was not written by taillab")
    for user, stamp in USER_STAMPS.items():
        if user not in df.columns:
            df[user] = df[stamp]
    # Derived durations exactly as docs/design.md defines them.
    df["send_lag"] = df["sent"] - df["intended"]
    df["queue"] = df["started"] - df["enqueued"]
    df["service"] = df["finished"] - df["started"]
    df["sojourn"] = df["completed"] - df["intended"]
    df["transport"] = df["sojourn"] - df["send_lag"] - df["queue"] - df["service"]
    df["recv_lag"] = df["completed_user"] - df["completed"]
    df["server_recv_lag"] = df["enqueued_user"] - df["enqueued"]
    return df


def _load_run_dir(run_dir: Path, point: str, k: int) -> dict[str, Any]:
    doc = read_json(run_dir / "summary.json", RUN_SCHEMA)
    row = {"point": point, "run": k, "path": str(run_dir)}
    row.update(run_row(run_dir, doc))
    return row


# Axes every figure already separates (by app, configuration, threads or load).
_PLOTTED_AXES = {"net.topology", "harness.threads", "load.qps", "app.name"}


def _axis_columns(axes: Any) -> dict[str, Any]:
    """A point's values on a sweep's other axes (``axis_<key>`` columns), and ``setting``: the
    same as one label (``rt_priority=10``), "" when the sweep has no other axes. Figures draw
    one line or panel per setting, so points that differ only there are never merged."""
    row: dict[str, Any] = {"setting": ""}
    if not isinstance(axes, list):
        return row
    parts = []
    for a in axes:
        if not isinstance(a, dict) or a.get("key") in _PLOTTED_AXES:
            continue
        key, value = str(a.get("key")), a.get("value")
        row[f"axis_{key}"] = value
        parts.append(f"{key.rsplit('.', 1)[-1]}={value}")
    row["setting"] = " ".join(parts)
    return row


def _point_from_runs(point: str, meta: dict, runs: pd.DataFrame) -> dict[str, Any]:
    row: dict[str, Any] = {"point": point}
    for key in ("qps", "threads", "config", "app"):
        row[key] = meta.get(key)
    if row["qps"] is None and len(runs):
        row["qps"] = runs["offered_qps"].iloc[0]
    for key in ("threads", "config", "app"):
        if row[key] is None and len(runs):
            row[key] = runs[key].iloc[0]
    row.update(_flatten_params(meta.get("params")))
    row.update(_axis_columns(meta.get("axes")))
    row["runs"] = len(runs)
    row["runs_failed"] = int((~runs["checks_ok"]).sum()) if len(runs) else 0
    row["achieved_qps"] = runs["achieved_qps"].mean() if len(runs) else math.nan
    row["utilization"] = runs["utilization"].mean() if len(runs) else math.nan
    return row


def _run_estimates(run: pd.Series) -> dict[str, Any]:
    """Point estimates of a lone run with no aggregate.json: its own values, CI unknown."""
    out: dict[str, Any] = {}
    for col in run.index:
        m = re.match(r"^(.*)_(mean|p50|p90|p95|p99|p999)$", col)
        if m and not col.startswith(("host_", "param_", "requests_")):
            out[col] = run[col]
            for suffix in ("ci_low", "ci_high", "rel_half_width"):
                out[f"{col}_{suffix}"] = math.nan
            out[f"{col}_n"] = 1
    return out


def _load_single_run(root: Path) -> Results:
    runs = pd.DataFrame([_load_run_dir(root, "run", 0)])
    r = runs.iloc[0]
    point = _point_from_runs("run", {"qps": r["offered_qps"]}, runs)
    point.update({"target": math.nan, "target_met": False, "aggregated": False})
    point.update(_run_estimates(r))
    for m in [c[:-5] for c in runs.columns if c.endswith("_p999")]:
        for stat in STATS:
            point[f"merged_{m}_{stat}"] = r.get(f"{m}_{stat}", math.nan)
    return Results(root, "run", None, runs, pd.DataFrame([point]))


def _run_dirs(point_dir: Path) -> list[tuple[int, Path]]:
    out = []
    for d in point_dir.iterdir() if point_dir.is_dir() else []:
        m = _RUN_DIR.match(d.name)
        # A run folder without summary.json is a run that was interrupted: the harness writes
        # summary.json last, so we skip it rather than fail the whole report.
        if m and d.is_dir() and (d / "summary.json").exists():
            out.append((int(m.group(1)), d))
    return sorted(out)


def _load_experiment(root: Path) -> Results:
    exp_path = root / "experiment.json"
    exp = read_json(exp_path, EXPERIMENT_SCHEMA)
    listed = _require(exp, "points", exp_path)
    if not isinstance(listed, list):
        raise SchemaError(f'{exp_path}: "points" must be a list of point objects')
    metas: dict[str, dict] = {}
    for i, p in enumerate(listed):
        if not isinstance(p, dict) or "id" not in p:
            raise SchemaError(f'{exp_path}: points[{i}] has no "id"')
        metas[str(p["id"])] = p
    # Points found on disk but missing from experiment.json are still shown (never dropped).
    pts_dir = root / "points"
    if pts_dir.is_dir():
        for d in sorted(pts_dir.iterdir()):
            if d.is_dir() and d.name not in metas:
                metas[d.name] = {"id": d.name}

    run_rows, point_rows = [], []
    for pid, meta in metas.items():
        pdir = pts_dir / pid
        rows = [_load_run_dir(d, pid, k) for k, d in _run_dirs(pdir)]
        run_rows.extend(rows)
        prun = pd.DataFrame(rows)
        agg_path = pdir / "aggregate.json"
        if agg_path.exists():
            agg = read_json(agg_path, AGGREGATE_SCHEMA)
            meta = {**meta, **(agg.get("point") or {})}
        else:
            agg = None
        row = _point_from_runs(pid, meta, prun if len(prun) else _empty_runs())
        row["aggregated"] = agg is not None
        if agg is not None:
            row["target"] = agg.get("target", math.nan)
            row["target_met"] = bool(agg.get("target_met", False))
            # Why the point stopped (target met / run cap): the report must say which.
            row["stopped"] = agg.get("stopped")
            for key, est in sorted((agg.get("metrics") or {}).items()):
                if not isinstance(est, dict):
                    continue
                c = _metric_key(key)
                row[c] = est.get("estimate", math.nan)
                for f in (
                    "ci_low",
                    "ci_high",
                    "rel_half_width",
                    "n",
                    "bootstrap_low",
                    "bootstrap_high",
                    "met",
                ):
                    if f in est or f in ("ci_low", "ci_high", "rel_half_width", "n"):
                        row[f"{c}_{f}"] = est.get(f, math.nan)
            for m, stats in sorted((agg.get("merged") or {}).items()):
                if isinstance(stats, dict):
                    for stat in STATS:
                        row[f"merged_{m}_{stat}"] = stats.get(stat, math.nan)
        else:
            row["target"] = (
                exp.get("parameters", {}).get("target", math.nan)
                if isinstance(exp.get("parameters"), dict)
                else math.nan
            )
            row["target_met"] = False
            if len(prun) == 1:
                row.update(_run_estimates(prun.iloc[0]))
        point_rows.append(row)

    runs = pd.DataFrame(run_rows) if run_rows else _empty_runs()
    points = pd.DataFrame(point_rows)
    kind = exp.get("kind", "sweep")
    res = Results(root, str(kind), exp, runs, points)
    _fill_unaggregated(res)
    return res


def _fill_unaggregated(res: Results) -> None:
    """Points with several runs but no aggregate.json (sweep still running): merged stats.

    Percentiles come from the runs' merged histograms (never an average of percentiles);
    no CI is given because the harness has not decided the point is done.
    """
    pts = res.points
    for i, p in pts.iterrows():
        if p["aggregated"] or p["runs"] < 2:
            continue
        for m in res.metrics:
            d = res.histogram(m, point=p["point"])
            if not d.total:
                continue
            st = d.stats()
            for stat in ("mean", "p50", "p90", "p95", "p99", "p999"):
                pts.loc[i, f"{m}_{stat}"] = st[stat]
                pts.loc[i, f"{m}_{stat}_n"] = p["runs"]


def _empty_runs() -> pd.DataFrame:
    return pd.DataFrame(
        columns=[
            "point",
            "run",
            "path",
            "app",
            "config",
            "threads",
            "offered_qps",
            "achieved_qps",
            "checks_ok",
            "utilization",
        ]
    )


def _find_run_dirs(root: Path, depth: int = 2) -> list[Path]:
    """Run folders (holding summary.json) up to ``depth`` levels below ``root``."""
    out: list[Path] = []
    level = [root]
    for _ in range(depth):
        nxt = []
        for d in level:
            for c in sorted(d.iterdir()) if d.is_dir() else []:
                if not c.is_dir() or c.name in ("report", "compare"):
                    continue
                if (c / "summary.json").exists():
                    out.append(c)
                else:
                    nxt.append(c)
        level = nxt
    return out


def _load_collection(root: Path, dirs: list[Path]) -> Results:
    """A plain folder of run folders (e.g. a shell loop of `taillab run --out DIR/qps-N`).

    Runs with the same app, config, threads, offered QPS and params form one point; a point
    of several runs gets merged-histogram estimates and no CI (only the harness's
    experiments decide when a point has enough runs).
    """
    rows = []
    for d in dirs:
        row = {"point": "", "run": 0, "path": str(d)}
        row.update(run_row(d, read_json(d / "summary.json", RUN_SCHEMA)))
        rows.append(row)
    runs = pd.DataFrame(rows)
    pcols = sorted(c for c in runs.columns if c.startswith("param_"))
    key_cols = ["app", "config", "threads", "offered_qps", *pcols]
    keys = runs[key_cols].astype(str).agg("|".join, axis=1)
    point_rows = []
    for _, idx in runs.groupby(keys, sort=False).groups.items():
        first = runs.loc[idx[0]]
        # A point is named after its (first) folder, relative to the root: what the user typed.
        pid = Path(first["path"]).relative_to(root).as_posix()
        runs.loc[idx, "point"] = pid
        runs.loc[idx, "run"] = range(len(idx))
        sub = runs.loc[idx]
        meta = {
            "qps": first["offered_qps"],
            **{k: first[k] for k in ("threads", "config", "app")},
            "params": {c[6:]: first[c] for c in pcols},
        }
        row = _point_from_runs(pid, meta, sub)
        row.update({"target": math.nan, "target_met": False, "aggregated": False})
        if len(sub) == 1:
            row.update(_run_estimates(sub.iloc[0]))
        point_rows.append(row)
    points = pd.DataFrame(point_rows).sort_values(
        ["app", "config", "threads", "qps"], kind="stable", ignore_index=True
    )
    runs["run"] = runs["run"].astype(int)
    res = Results(root, "collection", None, runs, points)
    _fill_unaggregated(res)
    return res


def load(path: str | Path) -> Results:
    """Load a results folder (single run, experiment or sweep); see :class:`Results`.

    A folder holding neither experiment.json nor summary.json is read as a collection of the
    run folders up to two levels below it (kind "collection").
    """
    p = Path(path)
    if p.is_file() and p.name in ("summary.json", "experiment.json"):
        p = p.parent
    if not p.exists():
        raise ResultsNotFound(f"{p} does not exist; give the folder `taillab run` wrote")
    if (p / "experiment.json").exists():
        return _load_experiment(p.resolve())
    if (p / "summary.json").exists():
        return _load_single_run(p.resolve())
    found = _find_run_dirs(p)
    if found:
        return _load_collection(p.resolve(), [d.resolve() for d in found])
    raise ResultsNotFound(
        f"{p} holds no experiment.json or summary.json, nor run folders below it; give the "
        "folder that `taillab run` or `taillab sweep` wrote (it contains one of them)"
    )


def numeric(df: pd.DataFrame, col: str) -> np.ndarray:
    """A column as floats (NaN where missing), tolerant of object dtype from mixed rows."""
    if col not in df:
        return np.full(len(df), np.nan)
    return pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
