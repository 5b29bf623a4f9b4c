import math
import re
from pathlib import Path

import pytest

import taillab
from taillab import cli
from taillab.compare import compare, match_points


def _refs(page: Path) -> list[str]:
    text = page.read_text()
    return re.findall(r'(?:src|href)="([^"#]+)"', text)


def test_report_of_sweep_links_resolve(sweep_dir, sweep_report):
    page = sweep_report
    out = page.parent
    html = page.read_text()
    refs = _refs(page)
    imgs = [r for r in refs if r.endswith(".png")]
    assert len(imgs) >= 7  # cdf, ccdf, load, utilization, threads, configs, over time, checks
    for r in refs:
        assert (out / r).exists(), r  # figures and every raw file link
    assert any(r.endswith("send_lag.hlog") for r in refs)
    assert "1 of 16 run(s) failed a self-check" in html
    assert "<script" not in html and "http" not in html  # static, nothing fetched
    # Every point appears in the points table with its CI.
    for pid in taillab.load(sweep_dir).points["point"]:
        assert f'<td class="l">{pid}</td>' in html


def test_report_of_single_run_default_location(run_dir):
    from taillab.report import write_report

    page = write_report(run_dir)
    assert page == run_dir.resolve() / "report" / "index.html"
    html = page.read_text()
    assert "requests.csv" in html
    # One run: no load curve to draw, and it says so rather than drawing a single dot.
    assert "latency_vs_load" not in html


def test_cli_prints_page_path(run_dir, tmp_path, capsys, monkeypatch):
    # The Rust CLI relays this line to the user; keep it the only stdout line.
    from taillab import report

    monkeypatch.setattr(report, "render", lambda res, out_dir: "<html></html>")
    assert cli.main(["report", str(run_dir), "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out == f"{(tmp_path / 'o' / 'index.html').resolve()}\n"


def test_cli_bad_input_exit_2(tmp_path, capsys):
    assert cli.main(["report", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("taillab: error:") and "does not exist" in err


def test_compare_detects_regression(sweep_dir, sweep_slow, tmp_path, capsys):
    a, b = taillab.load(sweep_dir), taillab.load(sweep_slow)
    pairs, only_a, only_b = match_points(a, b)
    assert len(pairs) == 8 and not only_a and not only_b
    df = compare(a, b)
    assert len(df) == 8 * 3 and set(df["test"]) == {"welch"}
    mean = df[df["stat"] == "sojourn_mean"]
    assert (mean["rel_diff"] > 0.3).all()  # 50% slower service
    # The fixture sweep's first loopback-t1-q1200 run failed its send-lag check.
    flagged = df[df["failed_runs_a"] > 0]
    assert set(flagged["point_a"]) == {"loopback-t1-q1200"} and (df["failed_runs_b"] == 0).all()
    assert mean["significant"].mean() >= 0.75 and set(mean["verdict"]) <= {
        "slower",
        "no significant change",
    }
    assert (
        cli.main(["compare", str(sweep_dir), str(sweep_slow), "--out", str(tmp_path / "cmp")]) == 0
    )
    out = capsys.readouterr().out
    assert "slower" in out and (tmp_path / "cmp" / "compare.csv").exists()
    page = tmp_path / "cmp" / "index.html"
    for r in _refs(page):
        assert (page.parent / r).exists(), r


def test_report_without_interval_logs(run_dir, tmp_path):
    # A run copied without hist/ (or from a tool that writes none) still gets a report: the
    # figures that need the logs say why they are missing, the rest is drawn.
    import shutil

    from taillab.report import write_report

    d = tmp_path / "r"
    shutil.copytree(run_dir, d, ignore=shutil.ignore_patterns("hist", "requests.csv"))
    html = write_report(d, tmp_path / "out").read_text()
    assert "sojourn_ccdf: not drawn (no sojourn samples" in html
    assert 'id="checks_panel"' in html
    assert '.hlog"' not in html  # no link to a file that is not there


def test_compare_identical_is_not_significant(sweep_dir):
    a = taillab.load(sweep_dir)
    df = compare(a, a)
    assert (df["diff"] == 0).all() and not df["significant"].any()


def test_compare_single_runs_has_no_test(run_dir):
    a = taillab.load(run_dir)
    df = compare(a, a)
    assert set(df["test"]) == {"none"} and df["p_value"].map(math.isnan).all()
    assert df["verdict"].str.contains("repeat runs").all()


def test_compare_disjoint_points_error(sweep_dir, tmp_path):
    import fixtures

    other = fixtures.make_sweep(tmp_path / "o", qps=(777.0,), runs=1, duration_s=1.0)
    other2 = fixtures.make_sweep(tmp_path / "p", qps=(888.0, 999.0), runs=1, duration_s=1.0)
    with pytest.raises(taillab.TaillabError, match="share no load point"):
        compare(taillab.load(other2), taillab.load(sweep_dir))
    assert len(compare(taillab.load(other), taillab.load(other))) == 3
