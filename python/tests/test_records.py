"""Per-request records in either format (`record.format`): the loader gives the same frame for
a run's requests.csv and the same rows as Parquet, and a run the binary writes as Parquet loads
with every request the summary counts and the tail it reports."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import taillab
from taillab.errors import SchemaError
from taillab.results import requests_file

ROOT = Path(__file__).resolve().parents[2]


def test_csv_and_parquet_of_the_same_rows_load_the_same(run_dir, tmp_path):
    d = tmp_path / "pq"
    shutil.copytree(run_dir, d)
    csv = pd.read_csv(d / "requests.csv", dtype="int64")
    pq.write_table(pa.Table.from_pandas(csv, preserve_index=False), d / "requests.parquet")
    (d / "requests.csv").unlink()
    assert requests_file(d) == d / "requests.parquet"
    got, want = taillab.load(d).requests, taillab.load(run_dir).requests
    assert len(got) == len(csv) > 0
    pd.testing.assert_frame_equal(got.drop(columns=["point"]), want.drop(columns=["point"]))
    # The fit reads the same records either way.
    service = taillab.load(d).histogram("service").total
    assert service == taillab.load(run_dir).histogram("service").total


def test_a_parquet_file_that_is_not_taillab_s_is_named(run_dir, tmp_path):
    d = tmp_path / "bad"
    shutil.copytree(run_dir, d, ignore=shutil.ignore_patterns("requests.csv"))
    pq.write_table(pa.table({"id": ["a", "b"]}), d / "requests.parquet")
    with pytest.raises(SchemaError, match="requests.parquet"):
        _ = taillab.load(d).requests


@pytest.fixture(scope="module")
def parquet_run(tmp_path_factory) -> Path:
    exe = ROOT / "target/release/taillab"
    assert exe.exists(), "the release binary is built by `make test` first"
    out = tmp_path_factory.mktemp("pq") / "r"
    r = subprocess.run(
        [str(exe), "run", "--app", "synth", "--qps", "2000", "--requests", "4000",
         "--warmup-requests", "300", "--set", "service=exp:50us", "--save-requests",
         "--record-format", "parquet", "-q", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (out / "summary.json").exists(), r.stderr
    return out


def test_a_parquet_run_loads_every_request_and_its_tail(parquet_run):
    assert not (parquet_run / "requests.csv").exists()
    summ = json.loads((parquet_run / "summary.json").read_text())
    req = taillab.load(parquet_run).requests
    n = summ["requests"]
    assert len(req) == n["measured"] + n["warmup"]
    assert set(req.drop(columns=["point"]).dtypes) == {np.dtype("int64")}
    assert (req["measured"] == 1).sum() == n["measured"]
    assert req["id"].is_unique and req["id"].is_monotonic_increasing
    soj = req.loc[req["measured"] == 1, "sojourn"].to_numpy()
    # summary.json's p99 is an HdrHistogram value (3 significant digits) of the same samples.
    rank = int(np.ceil(0.99 * len(soj))) - 1
    assert np.sort(soj)[rank] == pytest.approx(summ["latency_ns"]["sojourn"]["p99"], rel=2e-3)
    assert "ideal_completed" in req


@pytest.mark.parametrize(
    ("sender", "args"),
    [
        ("client", ["--app", "null", "--clients", "2", "--qps", "2000"]),
        (
            "leaf",
            ["--app", "synth", "--set", "service=fixed:100us", "--fanout", "2", "--qps", "1e3"],
        ),
    ],
)
def test_several_clients_and_leaves_load_from_parquet_with_their_column(sender, args, tmp_path):
    exe = ROOT / "target/release/taillab"
    assert exe.exists(), "the release binary is built by `make test` first"
    out = tmp_path / sender
    r = subprocess.run(
        [str(exe), "run", *args, "--topology", "loopback", "--requests", "500",
         "--warmup-requests", "50", "--save-requests", "--record-format", "parquet",
         "-q", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert requests_file(out) == out / "requests.parquet"
    req = taillab.load(out).requests
    assert sorted(req[sender].unique()) == [0, 1]
    measured = req[req["measured"] == 1]
    n = json.loads((out / "summary.json").read_text())["requests"]["measured"]
    # Several clients share the requests; each leaf answers every one.
    assert len(measured) == (n if sender == "client" else 2 * n)
    assert (measured["sojourn"] > 0).all()
