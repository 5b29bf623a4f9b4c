import json
import shutil

import fixtures
import numpy as np
import pytest

import taillab
from taillab.errors import ResultsNotFound, SchemaError
from taillab.results import read_summary


def test_single_run(run_dir):
    res = taillab.load(run_dir)
    assert res.kind == "run" and len(res.runs) == 1 and len(res.points) == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    r, p = res.runs.iloc[0], res.points.iloc[0]
    assert r["sojourn_p99"] == summary["latency_ns"]["sojourn"]["p99"]
    assert p["sojourn_p99"] == r["sojourn_p99"] and np.isnan(p["sojourn_p99_ci_low"])
    assert r["checks_ok"] and r["check_send_lag"]
    assert r["param_spin_ns"] == 1000 and r["host_cores"] == 2
    assert r["utilization"] == summary["utilization"]  # the harness's figure wins
    assert r["discipline"] == "fifo" and r["requests_errors"] == 0  # keys added later
    assert r["verdict_send_lag"] == "p99 send lag 10 µs"
    assert set(res.metrics) == {"sojourn", "service", "queue", "send_lag"}


def test_loading_summary_file_path_is_the_run(run_dir):
    assert len(taillab.load(run_dir / "summary.json").runs) == 1


def test_requests_derived_times(run_dir):
    req = taillab.load(run_dir).requests
    measured = req[req["measured"] == 1]
    assert len(measured) == taillab.load(run_dir).runs.iloc[0]["requests_measured"]
    assert (req["sojourn"] == req["completed"] - req["intended"]).all()
    assert (
        req["send_lag"] + req["queue"] + req["service"] + req["transport"] == req["sojourn"]
    ).all()


def test_requests_receive_lags(run_dir, tmp_path):
    # Files without the user-space columns: no kernel stamps, so no lag.
    req = taillab.load(run_dir).requests
    assert (req["recv_lag"] == 0).all() and (req["server_recv_lag"] == 0).all()
    # A TCP run's file: the lags are the user-space reads minus the kernel stamps.
    d = tmp_path / "tcp"
    shutil.copytree(run_dir, d)
    lines = (d / "requests.csv").read_text().splitlines()
    out = [lines[0] + ",enqueued_user,completed_user"]
    for ln in lines[1:]:
        v = ln.split(",")
        out.append(f"{ln},{int(v[4]) + 3},{int(v[7]) + 1000}")
    (d / "requests.csv").write_text("\n".join(out) + "\n")
    req = taillab.load(d).requests
    assert (req["recv_lag"] == 1000).all() and (req["server_recv_lag"] == 3).all()
    assert (req["sojourn"] == req["completed"] - req["intended"]).all()


def test_histogram_matches_summary(run_dir):
    # The fixture's summary holds exact percentiles; the HDR log keeps 3 significant digits.
    res = taillab.load(run_dir)
    d = res.histogram("sojourn")
    assert d.total == res.runs.iloc[0]["sojourn_count"]
    assert d.quantile(0.99) == pytest.approx(res.runs.iloc[0]["sojourn_p99"], rel=0.01)


def test_intervals_are_per_second(run_dir):
    iv = taillab.load(run_dir).intervals
    soj = iv[iv["metric"] == "sojourn"].sort_values("t_s")
    assert soj["t_s"].iloc[0] == 0.0 and (soj["length_s"] == 1.0).all()
    assert soj["count"].sum() == taillab.load(run_dir).runs.iloc[0]["sojourn_count"]


def test_utilization_computed_when_summary_lacks_it(run_dir, tmp_path):
    d = _copy(run_dir, tmp_path / "r")
    doc = json.loads((d / "summary.json").read_text())
    del doc["utilization"]
    (d / "summary.json").write_text(json.dumps(doc))
    r = taillab.load(d).runs.iloc[0]
    rho = r["achieved_qps"] * r["service_mean"] * 1e-9 / r["threads"]
    assert r["utilization"] == pytest.approx(rho)


def _copy(src, dst):
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize(
    "schema, match",
    [
        ("taillab.run/3", r"reads taillab.run/1, taillab.run/2"),
        ("taillab.aggregate/1", r"expected taillab.run/1, taillab.run/2"),
        (None, r"no \"schema\" key"),
    ],
)
def test_schema_checked_strictly(run_dir, tmp_path, schema, match):
    d = _copy(run_dir, tmp_path / "r")
    doc = json.loads((d / "summary.json").read_text())
    if schema is None:
        del doc["schema"]
    else:
        doc["schema"] = schema
    (d / "summary.json").write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match=match):
        taillab.load(d)


def test_truncated_json_says_what_to_do(run_dir, tmp_path):
    d = _copy(run_dir, tmp_path / "r")
    (d / "summary.json").write_text('{"schema": "taillab.run/1", "app":')
    with pytest.raises(SchemaError, match="not valid JSON.*re-run"):
        taillab.load(d)


def test_read_summary_names_the_file_and_the_fault(run_dir, tmp_path):
    # The pages read a run's sections through it: a broken file is an error, never {}.
    assert read_summary(run_dir)["latency_ns"]["sojourn"]["p99"] > 0
    gone = tmp_path / "gone"
    with pytest.raises(ResultsNotFound, match=f"cannot read {gone / 'summary.json'}"):
        read_summary(gone)
    d = _copy(run_dir, tmp_path / "r")
    (d / "summary.json").write_text('{"app":')
    with pytest.raises(SchemaError, match=f"{d / 'summary.json'} is not valid JSON"):
        read_summary(d)
    (d / "summary.json").write_text("[1]")
    with pytest.raises(SchemaError, match="expected a JSON object"):
        read_summary(d)


def test_missing_required_key(run_dir, tmp_path):
    d = _copy(run_dir, tmp_path / "r")
    doc = json.loads((d / "summary.json").read_text())
    del doc["latency_ns"]
    (d / "summary.json").write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="latency_ns"):
        taillab.load(d)


def test_not_a_results_folder(tmp_path):
    with pytest.raises(ResultsNotFound, match="no experiment.json or summary.json"):
        taillab.load(tmp_path)
    with pytest.raises(ResultsNotFound, match="does not exist"):
        taillab.load(tmp_path / "nope")


def test_sweep(sweep_dir):
    res = taillab.load(sweep_dir)
    assert res.kind == "sweep"
    assert len(res.points) == 8 and len(res.runs) == 16
    p = res.points.set_index("point").loc["integrated-t1-q1200"]
    agg = json.loads((sweep_dir / "points/integrated-t1-q1200/aggregate.json").read_text())
    assert p["sojourn_p99"] == agg["metrics"]["sojourn.p99"]["estimate"]
    assert p["sojourn_p99_ci_low"] == agg["metrics"]["sojourn.p99"]["ci_low"]
    assert p["aggregated"] and p["runs"] == 2
    assert p["stopped"].startswith("run cap")
    failed = res.points.set_index("point")["runs_failed"]
    assert failed["loopback-t1-q1200"] == 1 and failed.drop("loopback-t1-q1200").sum() == 0
    bad = res.runs[~res.runs["checks_ok"]]
    assert list(bad["failed_checks"]) == ["send_lag"]
    assert set(res.intervals["metric"]) == {"sojourn", "service", "queue", "send_lag"}


def test_unfinished_sweep_point(tmp_path):
    # A sweep interrupted mid-point: no aggregate.json, and a run folder without summary.json.
    root = fixtures.make_sweep(
        tmp_path / "s", qps=(500.0,), runs=2, aggregate=False, duration_s=1.0
    )
    (root / "points/integrated-t1-q500/run-2/hist").mkdir(parents=True)
    res = taillab.load(root)
    p = res.points.iloc[0]
    assert not p["aggregated"] and p["runs"] == 2
    merged = res.histogram("sojourn", point=p["point"]).quantile(0.99)
    assert p["sojourn_p99"] == merged  # merged histogram, not the mean of the two p99s
    assert np.isnan(p.get("sojourn_p99_ci_low", np.nan))


def test_unknown_experiment_schema(sweep_dir, tmp_path):
    d = tmp_path / "e"
    d.mkdir()
    doc = json.loads((sweep_dir / "experiment.json").read_text())
    doc["schema"] = "taillab.experiment/9"
    (d / "experiment.json").write_text(json.dumps(doc))
    with pytest.raises(SchemaError, match="experiment/9"):
        taillab.load(d)


def test_collection_of_run_folders(tmp_path):
    # What a shell loop of `taillab run --out DIR/qps-N` leaves: no experiment.json.
    for q in (300, 900):
        fixtures.make_run(tmp_path / f"qps-{q}", qps=q, duration_s=1.0, seed=q)
    fixtures.make_run(tmp_path / "again" / "qps-900", qps=900, duration_s=1.0, seed=5)
    res = taillab.load(tmp_path)
    assert res.kind == "collection" and len(res.runs) == 3
    assert list(res.points["point"]) == ["qps-300", "qps-900"]
    p900 = res.points.iloc[1]
    assert p900["runs"] == 2 and p900["qps"] == 900
    assert p900["sojourn_p99"] == res.histogram("sojourn", point="qps-900").quantile(0.99)
    assert (
        res.points.iloc[0]["sojourn_p99"]
        == res.runs.set_index("point").loc["qps-300", "sojourn_p99"]
    )
