"""`make bundle`: the tarball runs taillab, its Python dependencies and bench/manycore on a host
that has none of the project's setup — here, a clean environment (`env -i`), another prefix,
Debian's own Python instead of the project's virtual environment, no repository."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUDGET_MIB = 80


def test_the_bundle_runs_in_a_clean_environment(tmp_path):
    assert (ROOT / "target/release/taillab").exists(), (
        "the release binary is built by `make test` first"
    )
    tarball = tmp_path / "b.tar.gz"
    r = subprocess.run(
        [str(ROOT / "scripts/bundle.sh"), str(tarball)], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr
    assert tarball.stat().st_size < BUDGET_MIB << 20
    prefix = tmp_path / "elsewhere" / "opt"
    prefix.mkdir(parents=True)
    with tarfile.open(tarball) as t:
        t.extractall(prefix, filter="tar")
    run = prefix / "taillab-bundle" / "run"
    work = tmp_path / "work"
    work.mkdir()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C.UTF-8"}

    def bundled(*args, timeout=300):
        return subprocess.run(
            [str(run), *args], capture_output=True, text=True, env=env, cwd=work, timeout=timeout
        )

    # Runs started together on a fresh unpack (bench/reproduce-seeds side by side) each find the
    # wheels unpacked, none trips over another's unpacking.
    together = [
        subprocess.Popen(
            [str(run), "python3", "-c", "import hdrh.histogram"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=work,
        )
        for _ in range(8)
    ]
    for p in together:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert (prefix / "taillab-bundle" / "bench" / "reproduce-seeds").is_file()
    # The binary finds the bundled libraries (and only it: LD_LIBRARY_PATH is not exported).
    r = bundled(
        "taillab",
        "run",
        "--app",
        "synth",
        "--qps",
        "2000",
        "--requests",
        "3000",
        "--set",
        "service=fixed:50us",
        "--out",
        "r",
        "-q",
    )
    assert r.returncode in (0, 1), r.stderr
    s = json.loads((work / "r" / "summary.json").read_text())
    assert s["requests"]["measured"] == 3000
    assert s["latency_ns"]["service"]["p50"] >= 50_000
    # The Python dependency that such hosts lack comes from the bundled wheels.
    r = bundled("python3", "-c", "import hdrh.histogram, sys; print(hdrh.histogram.__file__)")
    assert r.returncode == 0, r.stderr
    assert str(prefix) in r.stdout
    # They came unpacked for this Python (importing more needs the host's numpy, which the
    # bare Debian here lacks); nothing else is carried (the attribution needs only scipy).
    ver = bundled("python3", "-c", "import sys; print(*sys.version_info[:2])").stdout.split()
    tag = "cp" + "".join(ver)
    lib = prefix / "taillab-bundle" / "pylib" / tag
    assert (lib / "hdrh" / "histogram.py").is_file()
    assert not (lib / "statsmodels").exists()
    # The many-core benchmark runs from the bundle (a path inside it), one case per table.
    r = bundled("bench/manycore", "--smoke", "--parts", "a,b")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("host: "), r.stdout
    row = next(line for line in r.stdout.splitlines() if line.startswith("exp:10us"))
    ratio = float(row.split()[4])
    # A measured/ideal ratio, not a dash: the run had records and an ideal.
    assert 0.5 < ratio < 3, row
    assert "fixed:1us" in r.stdout
