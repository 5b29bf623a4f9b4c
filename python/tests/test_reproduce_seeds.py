"""bench/reproduce-seeds: one reproduction item with several base seeds, each `taillab reproduce
ITEM --seed S` (side by side with the foreign-CPU limit raised, as flags: no file is edited)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from conftest import script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "reproduce-seeds"


S = script("bench/reproduce-seeds")


def test_cpu_lists():
    assert S.cpu_list("0-3,8") == [0, 1, 2, 3, 8]
    assert S.cpu_list("5") == [5]
    with pytest.raises(SystemExit, match="ranges"):
        S.cpu_list("0-x")


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_bad_input_says_what_to_fix(tmp_path):
    exe = ROOT / "target/release/taillab"
    for args, says in [
        (["no-such-item"], "taillab reproduce --list"),
        (["tail-at-scale-hedging", "--seeds", "5,x"], "whole numbers"),
        (["tail-at-scale-hedging", "--seeds", "5,5"], "each seed once"),
        (["tail-at-scale-hedging", "--cpus", "a-b"], "ranges"),
        (["tail-at-scale-hedging", "--cpus", "0-4095"], "are not among"),
        (["tail-at-scale-hedging", "--set", "requests=5"], "SECTION.KEY=VALUE"),
        (["tail-at-scale-hedging", "--set", "load.nope=5"], "is no setting"),
        (["tail-at-scale-hedging", "--set", "load.requests=five"], "load.requests"),
    ]:
        r = _run(*args, "--out", str(tmp_path / "o"), "--bin", str(exe))
        assert r.returncode != 0 and says in r.stderr, (args, r.stderr)


def test_two_seeds_side_by_side(tmp_path):
    exe = ROOT / "target/release/taillab"
    assert exe.exists(), "the release binary is built by `make test` first"
    out = tmp_path / "seeds"
    args = ["tail-at-scale-hedging", "--smoke", "--seeds", "5,6", "--cpus-per-seed", "1"]
    args += ["--set", "load.qps=250"]
    r = _run(*args, "--out", str(out), "--bin", str(exe))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("host: "), r.stdout
    summary = json.loads((out / "summary.json").read_text())
    n = len(os.sched_getaffinity(0))
    assert summary["side_by_side"] == (n >= 2)
    assert summary["max_foreign"] == (50.0 if n >= 2 else None)
    seeds = {}
    for s in ("5", "6"):
        v = summary["seeds"][s]
        assert v["id"] == "tail-at-scale-hedging" and v["status"], v
        assert f"seed {s}: " in r.stdout
        # Each seed's runs came from its own base seed (the run seed derives from it).
        cfg = next((out / s).glob("tail-at-scale-hedging/*/points/*case-none/run-0/config.toml"))
        conf = tomllib.loads(cfg.read_text())
        seeds[s] = conf["load"]["seed"]
        assert conf["load"]["qps"] == 250
        if summary["max_foreign"] is not None:
            assert conf["monitor"]["max_foreign"] == 50.0
    assert seeds["5"] != seeds["6"]
    # Pooled per point: both seeds' runs, their requests added, an interval around each p99.9.
    with open(ROOT / "configs/reproduce/items.toml", "rb") as f:
        item = next(i for i in tomllib.load(f)["item"] if i["id"] == "tail-at-scale-hedging")
    per_run = int(dict(kv.split("=") for kv in item["smoke"])["load.requests"])
    pooled = summary["pooled"]
    assert {k.rsplit("-", 1)[-1] for k in pooled} == {"none", "hedged", "tied"}
    for row in pooled.values():
        assert row["runs"] == 2 and row["requests"] == 2 * per_run
        lo, hi = row["p999_ci_ns"]
        assert lo <= row["p999_ns"] <= hi
    assert "pooled over the seeds" in r.stdout
