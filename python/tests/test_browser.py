"""End to end: the report rendered by a real browser (Debian chromium, headless).

Checks what a reader would notice: the page is not blank, and every image it references
actually loaded (a broken <img> still leaves a non-blank page, so both checks are needed).
The report itself has no scripts; the image check runs on a copy with one appended script.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg
from require import skip_without

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const broken = imgs.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);
  document.body.setAttribute('data-probe', JSON.stringify({n: imgs.length, broken}));
});
</script>"""


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("TAILLAB_SKIP_BROWSER"):
        skip_without("chromium", "TAILLAB_SKIP_BROWSER is set and chromium is not installed")
    pytest.fail("chromium is not installed: run the project setup (python/apt.txt lists it)")


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess:
    cmd = [_chromium(), *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=90, env={**os.environ, "HOME": str(tmp)}
    )


def _probe(page: Path, tmp: Path) -> dict:
    probe = page.with_name("_probe.html")
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    try:
        res = _run(["--virtual-time-budget=20000", "--dump-dom", probe.as_uri()], tmp)
    finally:
        probe.unlink()
    m = re.search(r'data-probe="([^"]*)"', res.stdout)
    assert m, f"page did not finish loading in chromium: {res.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_report_renders_in_chromium(sweep_report, tmp_path):
    shot = tmp_path / "shot.png"
    res = _run(
        [
            "--window-size=1280,2000",
            "--hide-scrollbars",
            f"--screenshot={shot}",
            sweep_report.as_uri(),
        ],
        tmp_path,
    )
    assert shot.exists(), f"no screenshot: {res.stderr[-2000:]}"
    img = mpimg.imread(shot)[..., :3]
    # Non-blank: a real share of pixels differ from the background, in more than two colours.
    bg = np.median(img.reshape(-1, 3), axis=0)
    differs = np.abs(img - bg).sum(axis=2) > 0.1
    assert differs.mean() > 0.02
    assert len(np.unique((img.reshape(-1, 3) * 255).astype(np.uint8), axis=0)) > 16

    probe = _probe(sweep_report, tmp_path)
    assert probe["n"] >= 7 and probe["broken"] == []


def test_probe_catches_a_broken_image(tmp_path):
    # The negative control: if this passed with a missing file, the check above means nothing.
    page = tmp_path / "site" / "index.html"
    page.parent.mkdir()
    page.write_text('<!doctype html><html><body><img src="missing.png"></body></html>')
    probe = _probe(page, tmp_path)
    assert probe["n"] == 1 and len(probe["broken"]) == 1


def test_attribution_page_renders_in_chromium(attribution_page, tmp_path):
    # taillab attribute's page: its effects plots, interaction plots and CCDF all load.
    probe = _probe(attribution_page, tmp_path)
    assert probe["n"] >= 4 and probe["broken"] == [], probe


def test_anatomy_section_renders_in_chromium(tmp_path):
    # An explained run's report: the slowest 1 % as stacked bars and the slowest request's
    # timeline both load.
    from taillab.report import write_report

    run = Path(__file__).resolve().parents[2] / "tests" / "data" / "run-explained"
    page = write_report(run, tmp_path / "report")
    probe = _probe(page, tmp_path)
    assert probe["broken"] == [], probe
    html = page.read_text()
    assert "Anatomy of the slow requests" in html
    assert html.count('<img src="figures/anatomy-') == 2
