"""summary.json against docs/schema/run-2.json: a run the binary writes validates, a corrupted key
is named with its file, run/1 folders still load, and the validator checks every keyword the
schema uses."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

import taillab
from taillab.errors import SchemaError
from taillab.schema import (
    SCHEMA_DIR,
    load_schema,
    missing_keys,
    problems,
    unknown_keywords,
    validate_run,
)

ROOT = Path(__file__).resolve().parents[2]
RUN_V1 = ROOT / "tests" / "data" / "run-v1"
SECTIONS = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def fresh_run(tmp_path_factory) -> Path:
    """A run folder the release binary writes now (monitored: `environment`, `stalls`, ...)."""
    exe = ROOT / "target/release/taillab"
    assert exe.exists(), "the release binary is built by `make test` first"
    out = tmp_path_factory.mktemp("fresh") / "r"
    r = subprocess.run(
        [str(exe), "run", "--app", "synth", "--qps", "500", "--requests", "600",
         "--warmup-seconds", "0.2", "--set", "service=exp:100us", "-q", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (out / "summary.json").exists(), r.stderr
    return out


def _v2(tmp_path: Path, edit) -> Path:
    """A copy of the run/1 golden folder relabelled run/2, with ``edit`` applied to its summary."""
    d = tmp_path / "r"
    shutil.copytree(RUN_V1, d)
    doc = json.loads((d / "summary.json").read_text())
    doc["schema"] = "taillab.run/2"
    edit(doc)
    (d / "summary.json").write_text(json.dumps(doc))
    return d


def test_the_package_carries_the_checked_in_schema():
    docs = ROOT / "docs" / "schema" / "run-2.json"
    assert (SCHEMA_DIR / "run-2.json").read_bytes() == docs.read_bytes()


def test_the_validator_checks_every_keyword_the_schema_uses():
    assert unknown_keywords(load_schema("run-2")) == []
    assert unknown_keywords({"properties": {"x": {"pattern": "^a"}}}) == ["pattern"]


def test_a_run_the_binary_writes_validates(fresh_run):
    doc = json.loads((fresh_run / "summary.json").read_text())
    assert doc["schema"] == "taillab.run/2"
    assert {"environment", "stalls", "placement"} <= doc.keys()
    assert problems(doc, load_schema("run-2")) == []
    assert taillab.load(fresh_run).runs.iloc[0]["app"] == "synth"


def test_missing_keys_are_named_by_their_paths_and_nothing_else():
    doc = json.loads((RUN_V1 / "summary.json").read_text())
    del doc["app"]
    del doc["latency_ns"]["sojourn"]["p99"]
    doc["threads"] = "two"  # the wrong shape: a problem, not a missing key
    schema = load_schema("run-2")
    assert sorted(missing_keys(doc, schema)) == ["app", "latency_ns.sojourn.p99"]
    assert len(problems(doc, schema)) == 3


def test_the_old_run_files_fit_the_new_schema():
    # run/2 changed no key: a real run/1 file relabelled validates.
    doc = json.loads((RUN_V1 / "summary.json").read_text())
    assert problems(doc, load_schema("run-2")) == []


@pytest.mark.parametrize(
    "name, section",
    [
        ("environment_section.json", "EnvSummary"),
        ("counters_section_hardware.json", "CountersReport"),
        ("counters_section_software.json", "CountersReport"),
        ("interference_section.json", "InterferenceReport"),
    ],
)
def test_recorded_sections_fit_their_definitions(name, section):
    schema = load_schema("run-2")
    doc = json.loads((SECTIONS / name).read_text())
    assert problems(doc, {"$ref": f"#/$defs/{section}", "$defs": schema["$defs"]}) == []


def test_a_run_1_folder_still_loads_unvalidated(tmp_path):
    d = tmp_path / "old"
    shutil.copytree(RUN_V1, d)
    doc = json.loads((d / "summary.json").read_text())
    assert doc["schema"] == "taillab.run/1"
    doc["app_stats"] = {"anything": [1, "goes"]}
    (d / "summary.json").write_text(json.dumps(doc))
    assert taillab.load(d).runs.iloc[0]["app"] == doc["app"]


def test_a_corrupted_key_is_named_with_its_file(tmp_path):
    d = _v2(tmp_path, lambda doc: doc["latency_ns"]["sojourn"].update(p99="abc"))
    want = f"{d / 'summary.json'}: latency_ns.sojourn.p99: 'abc' is not of type 'integer'"
    with pytest.raises(SchemaError) as e:
        taillab.load(d)
    assert str(e.value).startswith(want), str(e.value)


@pytest.mark.parametrize(
    "edit, says",
    [
        (lambda d: d.pop("latency_ns"), "latency_ns: the required key is missing"),
        (lambda d: d["requests"].update(measured=1.0), "requests.measured: 1.0 is not of type"),
        (lambda d: d["requests"].update(measured=-1), "requests.measured: -1 is less than"),
        (lambda d: d.update(threads=True), "threads: true is not of type 'integer'"),
        (lambda d: d["checks"]["rate"].update(ok="yes"), "checks.rate.ok: 'yes' is not of type"),
        (lambda d: d.update(environment={"steal_pct": 0.1}), "environment.phase_marked: the req"),
        (lambda d: d.update(stalls={"gaps": "x"}), "stalls.gaps: 'x' is not of type 'integer'"),
        (
            lambda d: d.update(nodes=[{"node": "n1", "roles": [], "ok": True}]),
            "nodes[0].reasons: the required key is missing",
        ),
        (
            lambda d: d.update(profile={"status": "written", "data": "perf.data"}),
            "profile.folded: the required key is missing",
        ),
        (lambda d: d.update(roi={"mode": "bochs", "issued": {}}), "roi.mode: 'bochs' is not one"),
        (lambda d: d.update(nodes=[{"node": "n1"}]), "nodes[0].roles: the required key is"),
        (lambda d: d.update(profile="written"), "profile: matches none of its allowed shapes"),
    ],
)
def test_each_kind_of_fault_names_its_key(tmp_path, edit, says):
    d = _v2(tmp_path, edit)
    with pytest.raises(SchemaError, match=r"summary\.json: ") as e:
        taillab.load(d)
    assert says in str(e.value), str(e.value)


def test_many_faults_are_counted_not_all_listed():
    doc = json.loads((RUN_V1 / "summary.json").read_text())
    for m in doc["latency_ns"].values():
        m.update(p50="x", p99="y")
    with pytest.raises(SchemaError, match=r"and \d+ more") as e:
        validate_run(doc, "r/summary.json")
    assert str(e.value).startswith("r/summary.json: latency_ns.")
