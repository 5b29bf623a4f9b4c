"""`--metrics-listen`: a run's OpenMetrics endpoint, scraped mid-run and read with
prometheus_client's parser, agrees with the run's own interval log for the same second (the
interval's request count exactly, each metric's p50/p99/max to the nanosecond: both come from
the same histogram), for an integrated run and for the client of a loopback run."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from taillab.hlog import read_hlog

ROOT = Path(__file__).resolve().parents[2]
EXE = ROOT / "target/release/taillab"
QUANTILE = {"0.5": 0.5, "0.99": 0.99}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict:
    """One scrape, parsed: {family name: [(sample name, labels, value), ...]}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        text = r.read().decode()
    return {
        f.name: [(s.name, s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


def value(fams: dict, family: str, **labels) -> float:
    for _, lab, v in fams[family]:
        if all(lab.get(k) == x for k, x in labels.items()):
            return v
    raise KeyError(f"{family} {labels}")


def scrape_during(proc: subprocess.Popen, port: int, want: int) -> list[dict]:
    """Scrapes until `want` distinct finished intervals were seen (or the run ends)."""
    seen: dict[float, dict] = {}
    deadline = time.monotonic() + 60
    while proc.poll() is None and len(seen) < want and time.monotonic() < deadline:
        try:
            fams = scrape(port)
        except OSError:
            time.sleep(0.1)  # not listening yet
            continue
        if "taillab_interval_start_seconds" in fams:
            seen.setdefault(value(fams, "taillab_interval_start_seconds"), fams)
        time.sleep(0.25)
    return list(seen.values())


def run_and_scrape(args: list[str], out: Path) -> list[dict]:
    port = free_port()
    cmd = [str(EXE), *args, "-q", "--metrics-listen", f"127.0.0.1:{port}", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        got = scrape_during(proc, port, 2)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"metrics: http://127.0.0.1:{port}/metrics" in err
    assert got, "no scrape saw a finished interval while the run went on"
    return got


def check_against_log(scrapes: list[dict], out: Path) -> None:
    logs = {m: {round(iv.start_s, 3): iv for iv in read_hlog(out / "hist" / f"{m}.hlog")}
            for m in ("sojourn", "service", "send_lag")}  # fmt: skip
    for fams in scrapes:
        start = round(value(fams, "taillab_interval_start_seconds"), 3)
        length = logs["sojourn"][start].length_s
        count = logs["sojourn"][start].dist.total
        assert value(fams, "taillab_interval_requests") == count
        assert value(fams, "taillab_achieved_requests_per_second") == pytest.approx(count / length)
        for metric, by_start in logs.items():
            d = by_start[start].dist
            for q, p in QUANTILE.items():
                got = value(fams, "taillab_interval_latency_seconds", metric=metric, quantile=q)
                assert round(got * 1e9) == pytest.approx(d.quantile(p), abs=1), (metric, q)
            top = value(fams, "taillab_interval_latency_seconds", metric=metric, quantile="1")
            assert round(top * 1e9) == pytest.approx(d.max, abs=1), metric
        assert value(fams, "taillab_phase", taillab_phase="measured") == 1
        assert value(fams, "taillab_requests_completed") >= count
        assert value(fams, "taillab_requests_in_flight") >= 0


def test_an_integrated_run_serves_what_its_interval_log_says(tmp_path):
    out = tmp_path / "r"
    scrapes = run_and_scrape(
        ["run", "--app", "synth", "--qps", "1000", "--duration", "4s",
         "--warmup-seconds", "0.5", "--set", "service=exp:50us"], out)  # fmt: skip
    check_against_log(scrapes, out)
    info = scrapes[0]["taillab_run"][0][1]
    assert (info["app"], info["topology"]) == ("synth", "integrated")
    # The environment monitor's foreign CPU over the last second, and its flag.
    last = scrapes[-1]
    assert value(last, "taillab_environment_foreign_cpu_ratio") >= 0
    assert value(last, "taillab_environment_flag", check="foreign_cpu") in (0, 1)


def test_a_loopback_runs_client_serves_what_the_interval_log_says(tmp_path):
    out = tmp_path / "r"
    scrapes = run_and_scrape(
        ["run", "--app", "null", "--topology", "loopback", "--qps", "1000",
         "--duration", "4s", "--warmup-seconds", "0.5"], out)  # fmt: skip
    check_against_log(scrapes, out)
    # The client is a `taillab load`; it names the run's topology, not its own.
    assert scrapes[0]["taillab_run"][0][1]["topology"] == "loopback"
