"""`--metrics-listen`: a run's OpenMetrics endpoint, scraped mid-run and read with
prometheus_client's parser, agrees with the run's own interval log for the same second (the
interval's request count exactly, each metric's p50/p99/max to the nanosecond: both come from
the same histogram), for an integrated run and for the client of a loopback run. During a long
warmup it serves the warmup's own intervals (phase="warmup"), which fit the app's service time
and the offered rate. The environment monitor's foreign-CPU flag is served by an integrated
run, a loopback run's client (relayed by the coordinator) and a `taillab load`."""

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


def has(fams: dict, family: str, **labels) -> bool:
    try:
        value(fams, family, **labels)
    except KeyError:
        return False
    return True


def foreign_served(fams: dict) -> bool:
    return "taillab_environment_foreign_cpu_ratio" in fams


def scrape_during(proc: subprocess.Popen, port: int, want: int,
                  until=lambda fams: True) -> tuple[list[dict], dict | None]:  # fmt: skip
    """Scrapes until `want` distinct finished measured intervals were seen and one scrape
    met `until` (or the run ends); returns a scrape of each interval, and that one."""
    seen: dict[float, dict] = {}
    met = None
    deadline = time.monotonic() + 60
    while (proc.poll() is None and (len(seen) < want or met is None)
           and time.monotonic() < deadline):  # fmt: skip
        try:
            fams = scrape(port)
        except OSError:
            time.sleep(0.1)  # not listening yet
            continue
        if has(fams, "taillab_interval_start_seconds", phase="measured"):
            start = value(fams, "taillab_interval_start_seconds", phase="measured")
            seen.setdefault(start, fams)
        if met is None and until(fams):
            met = fams
        time.sleep(0.25)
    return list(seen.values()), met


def launch(args: list[str], out: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [str(EXE), *args, "-q", "--metrics-listen", f"127.0.0.1:{port}", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc, port


def finish(proc: subprocess.Popen, port: int) -> None:
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert f"metrics: http://127.0.0.1:{port}/metrics" in err


def run_and_scrape(args: list[str], out: Path, until=lambda fams: True):
    proc, port = launch(args, out)
    try:
        got, met = scrape_during(proc, port, 2, until)
    finally:
        finish(proc, port)
    assert got, "no scrape saw a finished interval while the run went on"
    return got, met


def check_against_log(scrapes: list[dict], out: Path) -> None:
    logs = {m: {round(iv.start_s, 3): iv for iv in read_hlog(out / "hist" / f"{m}.hlog")}
            for m in ("sojourn", "service", "send_lag")}  # fmt: skip
    m = {"phase": "measured"}
    for fams in scrapes:
        start = round(value(fams, "taillab_interval_start_seconds", **m), 3)
        length = logs["sojourn"][start].length_s
        count = logs["sojourn"][start].dist.total
        assert value(fams, "taillab_interval_requests", **m) == count
        rate = value(fams, "taillab_achieved_requests_per_second", **m)
        assert rate == pytest.approx(count / length)
        for metric, by_start in logs.items():
            d = by_start[start].dist
            fam = "taillab_interval_latency_seconds"
            lat = {
                q: value(fams, fam, metric=metric, quantile=q, **m) for q in ("0.5", "0.99", "1")
            }
            for q, p in QUANTILE.items():
                assert round(lat[q] * 1e9) == pytest.approx(d.quantile(p), abs=1), (metric, q)
            assert round(lat["1"] * 1e9) == pytest.approx(d.max, abs=1), metric
        assert value(fams, "taillab_phase", taillab_phase="measured") == 1
        assert value(fams, "taillab_requests_completed") >= count
        assert value(fams, "taillab_requests_in_flight") >= 0


def check_foreign(fams: dict | None) -> None:
    """The environment monitor's foreign CPU over the last second, and its flag."""
    assert fams is not None, "no scrape served the foreign CPU while the run went on"
    assert value(fams, "taillab_environment_foreign_cpu_ratio") >= 0
    assert value(fams, "taillab_environment_flag", check="foreign_cpu") in (0, 1)


def test_an_integrated_run_serves_what_its_interval_log_says(tmp_path):
    out = tmp_path / "r"
    scrapes, met = run_and_scrape(
        ["run", "--app", "synth", "--qps", "1000", "--duration", "4s",
         "--warmup-seconds", "0.5", "--set", "service=exp:50us"], out, foreign_served)  # fmt: skip
    check_against_log(scrapes, out)
    info = scrapes[0]["taillab_run"][0][1]
    assert (info["app"], info["topology"]) == ("synth", "integrated")
    check_foreign(met)


def test_a_loopback_runs_client_serves_what_the_interval_log_says(tmp_path):
    out = tmp_path / "r"
    scrapes, met = run_and_scrape(
        ["run", "--app", "null", "--topology", "loopback", "--qps", "1000",
         "--duration", "4s", "--warmup-seconds", "0.5"], out, foreign_served)  # fmt: skip
    check_against_log(scrapes, out)
    # The client is a `taillab load`; it names the run's topology, not its own.
    assert scrapes[0]["taillab_run"][0][1]["topology"] == "loopback"
    # Its foreign CPU is the coordinator's monitor's, relayed over its stdin.
    check_foreign(met)
    assert scrapes[0]["taillab_run"][0][1]["monitor"] == "on"


def test_a_load_serves_its_monitors_foreign_cpu(tmp_path):
    server = subprocess.Popen(
        [str(EXE), "serve", "--app", "null", "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)  # fmt: skip
    try:
        line = server.stdout.readline()
        assert line.startswith("listening "), line
        target = line.split()[1]
        args = ["load", "--app", "null", "--target", target, "--qps", "1000",
                "--duration", "3s", "--warmup-seconds", "0.5"]  # fmt: skip
        proc, port = launch(args, tmp_path / "r")
        try:
            got, met = scrape_during(proc, port, 1, foreign_served)
        finally:
            finish(proc, port)
    finally:
        server.kill()
        server.wait()
    assert got, "no scrape saw a finished interval while the load went on"
    assert got[0]["taillab_run"][0][1]["topology"] == "loopback"
    check_foreign(met)


SERVICE_S = 200e-6
QPS = 1000
W = {"phase": "warmup"}


def warmup_scrapes(out: Path) -> tuple[dict[float, dict], dict | None]:
    """Warmup 2.25 s in 0.5 s intervals, then 1 s measured: a scrape of each warmup interval
    the endpoint served while the warmup ran (by its start), and one from the measured phase
    that serves the warmup's last interval (0.25 s, cut where the measured phase begins)."""
    proc, port = launch(
        ["run", "--app", "synth", "--qps", str(QPS), "--duration", "1s", "--warmup-seconds",
         "2.25", "--interval", "500ms", "--set", f"service=fixed:{SERVICE_S * 1e6:g}us"],
        out)  # fmt: skip
    warm: dict[float, dict] = {}
    last = None
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                fams = scrape(port)
            except OSError:
                time.sleep(0.1)
                continue
            if has(fams, "taillab_interval_start_seconds", **W):
                at = round(value(fams, "taillab_interval_start_seconds", **W), 3)
                if value(fams, "taillab_phase", taillab_phase="warmup") == 1:
                    # No measured interval before the measured phase.
                    assert not has(fams, "taillab_interval_requests", phase="measured")
                    warm.setdefault(at, fams)
                elif at == 2.0:
                    last = fams
            time.sleep(0.1)
    finally:
        finish(proc, port)
    return warm, last


def implausible(fams: dict) -> list[str]:
    """What in a scrape's warmup interval does not fit the app and the offered rate."""

    def q(metric: str, quantile: str) -> float:
        return value(fams, "taillab_interval_latency_seconds", metric=metric,
                     quantile=quantile, **W)  # fmt: skip

    bad = []
    rate = value(fams, "taillab_achieved_requests_per_second", **W)
    # A Poisson count over 0.25-0.5 s at 1000/s is within ±30 % far beyond 4 sigma.
    if not 0.7 * QPS <= rate <= 1.3 * QPS:
        bad.append(f"achieved {rate:.0f}/s against {QPS}/s offered")
    # The app spins its fixed service time: nothing is served faster, and on a busy
    # two-CPU VM the median stays within a few times it.
    if not SERVICE_S <= q("service", "0.5") <= 5 * SERVICE_S:
        bad.append(f"service p50 {q('service', '0.5')} s against {SERVICE_S} s")
    return bad


def test_a_long_warmup_serves_its_own_intervals(tmp_path):
    """While the warmup runs, the endpoint serves the warmup's last finished interval,
    labelled phase="warmup", with the app's fixed service time in its quantiles and the
    offered rate in its count; the warmup's last interval keeps serving once the measured
    phase has begun, its rate over its own 0.25 s. Timing on a shared VM gets two tries."""
    for attempt in range(2):
        warm, last = warmup_scrapes(tmp_path / f"r{attempt}")
        assert len(warm) >= 2, f"the warmup served {len(warm)} finished intervals"
        assert last is not None, "no scrape in the measured phase had the warmup's last interval"
        # The warmup's intervals start on the 0.5 s grid from the schedule's start.
        assert all(round(at / 0.5, 6).is_integer() and at < 2.25 for at in warm), warm.keys()
        for fams in [*warm.values(), last]:
            n = value(fams, "taillab_interval_requests", **W)
            assert 0 < n <= value(fams, "taillab_requests_completed")
            for metric in ("service", "sojourn"):
                got = [value(fams, "taillab_interval_latency_seconds", metric=metric,
                             quantile=x, **W) for x in ("0.5", "0.99", "1")]  # fmt: skip
                assert got == sorted(got), (metric, got)
            # A request's sojourn holds its service, so every quantile does.
            for x in ("0.5", "0.99", "1"):
                soj, svc = (value(fams, "taillab_interval_latency_seconds", metric=m,
                                  quantile=x, **W) for m in ("sojourn", "service"))  # fmt: skip
                assert soj >= svc, (x, soj, svc)
        bad = [b for fams in [*warm.values(), last] for b in implausible(fams)]
        if not bad:
            return
    pytest.fail("; ".join(bad))
