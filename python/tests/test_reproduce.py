"""`taillab reproduce`'s pages and verdicts.

Two kinds of fixtures: results folders built here by hand with chosen numbers (so each rule's
numbers and status are known, and a rule can be driven either way), and trimmed real folders
from a `taillab reproduce all --quick` run on the project's VM in tests/data/reproduce/ (so the
rules read what the harness actually writes).
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from require import skip_without

from taillab import cli
from taillab import reproduce as R
from taillab.hlog import write_hlog
from taillab.reproduce.rules import tailbench

REPO = Path(__file__).resolve().parents[2]
ITEMS = REPO / "configs" / "reproduce" / "items.toml"
REAL = Path(__file__).resolve().parent / "data" / "reproduce"
HOST = {"cpu": "Test CPU", "cores": 2, "kernel": "6.1.0", "hostname": "t", "taillab": "0.1.0"}
MS, US = 1e6, 1e3


# --- a hand-built results folder ---------------------------------------------------------------


def _stats(mean=None, p50=None, p95=None, p99=None) -> dict:
    p50 = p50 if p50 is not None else (mean or 0) * 0.8
    p95 = p95 if p95 is not None else (mean or 0) * 2
    p99 = p99 if p99 is not None else p95 * 1.5
    mean = mean if mean is not None else p50 * 1.2
    return {
        "count": 1000,
        "mean": mean,
        "min": p50 / 2,
        "p50": p50,
        "p90": p95 * 0.9,
        "p95": p95,
        "p99": p99,
        "p999": p99 * 1.2,
        "max": p99 * 1.5,
    }


def point(
    pid,
    *,
    app="synth",
    config="integrated",
    threads=1,
    qps=1000.0,
    axes=None,
    soj=None,
    svc=None,
    ratio=None,
    env_ok=True,
    util=None,
    extra=None,
) -> dict:
    """One point with one run: sojourn/service statistics (ns), measured ÷ ideal ratios."""
    return dict(
        id=pid,
        app=app,
        config=config,
        threads=threads,
        qps=qps,
        axes=axes or {},
        soj=soj or _stats(mean=100 * US),
        svc=svc or _stats(mean=50 * US),
        ratio=ratio,
        env_ok=env_ok,
        util=util,
        extra=extra or {},
    )


def _summary(p: dict) -> dict:
    env = {"ok": True, "verdict": "quiet", "items": [], "reasons": []}
    if not p["env_ok"]:
        env = {
            "ok": False,
            "verdict": "other processes used 80 % of a CPU (limit 5 %): rustc 80 %",
            "items": [
                {
                    "name": "foreign_cpu",
                    "ok": False,
                    "value": 80.0,
                    "limit": 5.0,
                    "unit": "% of a CPU",
                }
            ],
            "reasons": ["other processes used 80 % of a CPU (limit 5 %): rustc 80 %"],
        }
    doc = {
        "schema": "taillab.run/1",
        "app": p["app"],
        "config": p["config"],
        "threads": p["threads"],
        "offered_qps": p["qps"],
        "achieved_qps": p["qps"],
        "latency_ns": {"sojourn": p["soj"], "service": p["svc"]},
        "checks": {"environment": env},
        "environment": {"top_foreign": [] if p["env_ok"] else [{"name": "rustc"}]},
        "host": HOST,
        **p["extra"],
    }
    if p["util"] is not None:
        doc["utilization"] = p["util"]
    if p["ratio"]:
        ideal = {s: p["soj"][s] / p["ratio"].get(s, 1.0) for s in ("mean", "p50", "p95", "p99")}
        doc["ideal"] = {"sojourn": ideal, "ratio": p["ratio"], "excess": {}}
    return doc


def experiment(d: Path, points: list[dict], fractions=None, sat=None) -> Path:
    """An experiment folder: experiment.json, one run per point, saturation.json per group."""
    d.mkdir(parents=True, exist_ok=True)
    meta = []
    for p in points:
        axes = [{"key": k, "value": v} for k, v in p["axes"].items()]
        meta.append(
            {
                "id": p["id"],
                "app": p["app"],
                "config": p["config"],
                "threads": p["threads"],
                "qps": p["qps"],
                "axes": axes,
            }
        )
        run = d / "points" / p["id"] / "run-0"
        run.mkdir(parents=True, exist_ok=True)
        (run / "summary.json").write_text(json.dumps(_summary(p)))
    doc = {
        "schema": "taillab.experiment/1",
        "kind": "sweep",
        "points": meta,
        "host": HOST,
        "parameters": {"sweep": {"load": fractions}},
        "started_at": "2026-01-02T03:04:05Z",
    }
    (d / "experiment.json").write_text(json.dumps(doc))
    for tag, qps in (sat or {}).items():
        s = d / "saturation" / tag
        s.mkdir(parents=True, exist_ok=True)
        probes = [
            {"name": "p0", "qps": qps, "achieved_qps": qps, "sustainable": True, "disturbed": False}
        ]
        (s / "saturation.json").write_text(json.dumps({"qps": qps, "probes": probes}))
    return d


def page(tmp_path: Path, item_id: str, reuse=None, quick=False) -> dict:
    """Write the item's page from tmp_path/<id> through the CLI; its verdict.json."""
    args = ["reproduce-page", item_id, str(tmp_path / item_id), "--items", str(ITEMS)]
    if reuse:
        args += ["--reuse", str(reuse)]
    if quick:
        args.append("--quick")
    assert cli.main(args) == 0
    assert (tmp_path / item_id / "index.html").exists()
    doc = json.loads((tmp_path / item_id / "verdict.json").read_text())
    assert doc["schema"] == "taillab.reproduce/1" and doc["id"] == item_id
    assert doc["status"] in R.STATUSES
    return doc


def html(tmp_path: Path, item_id: str) -> str:
    return (tmp_path / item_id / "index.html").read_text()


# --- per item, by hand ---------------------------------------------------------------------------

TABLE1_APPS = [
    "kv",
    "search",
    "translate",
    "speech",
    "img-dnn",
    "middleware",
    "oltp-mem",
    "oltp-disk",
]


def _table1(root: Path, factor: dict[str, float]) -> Path:
    """Each app's p95 = paper's × factor[app] (1.0 when not given)."""
    paper = R.read_items(ITEMS)["tailbench-table1"]["paper_p95_ms"]
    for i, app in enumerate(TABLE1_APPS):
        p95 = paper[app] * factor.get(app, 1.0) * MS
        svc = _stats(p50=10 ** (i / 2) * 50 * US, p99=10 ** (i / 2) * 50 * US * (2 + i))
        experiment(
            root / f"apps-{app}",
            [
                point(
                    "integrated-t1-q100",
                    app=app,
                    qps=100,
                    soj=_stats(mean=p95 / 2, p95=p95),
                    svc=svc,
                )
            ],
        )
    return root


def test_table1_confirmed_and_partly(tmp_path):
    _table1(tmp_path / "tailbench-table1", {"kv": 2.0, "speech": 0.5, "search": 4.0})
    doc = page(tmp_path, "tailbench-table1")
    apps = doc["numbers"]["apps"]
    assert apps["kv"]["ratio"] == pytest.approx(2.0) and apps["kv"]["within"]
    assert apps["search"]["ratio"] == pytest.approx(4.0) and not apps["search"]["within"]
    assert doc["numbers"]["within"] == 7 and doc["status"] == "confirmed"
    assert "7 of 8 apps" in doc["verdict"] and "kv 2×" in doc["verdict"]
    assert doc["runs"] == 8 and doc["disturbed_runs"] == 0
    # the paper's numbers beside ours
    assert "masstree" in html(tmp_path, "tailbench-table1")
    assert (tmp_path / "tailbench-table1" / "figures" / "p95_vs_paper.png").exists()

    other = tmp_path / "b"
    _table1(other / "tailbench-table1", {a: 10.0 for a in TABLE1_APPS[:4]})
    doc = page(other, "tailbench-table1")
    assert doc["numbers"]["within"] == 4 and doc["status"] == "partly"


def test_fig2_reads_table1(tmp_path):
    _table1(tmp_path / "tailbench-table1", {})
    (tmp_path / "tailbench-fig2").mkdir()
    doc = page(tmp_path, "tailbench-fig2", reuse=tmp_path / "tailbench-table1")
    n = doc["numbers"]
    # p50 from 50 µs to 50 µs × 10^3.5; spreads p99/p50 from 2 to 9
    assert n["p50_span"] == pytest.approx(10**3.5)
    assert n["spread_ratio"] == pytest.approx(9 / 2)
    assert doc["status"] == "confirmed" and doc["runs"] == 8


def test_tales_fig10_idle_cpus_wake_late(tmp_path):
    """Fig. 10: blocking 1.6x spinning at 10 % load, a C-state limit takes back 75 % of it:
    confirmed where the host has a cpuidle driver; without one the limit cannot act, and the
    verdict says what it needs instead of judging it."""
    p99 = {
        "spin": 100 * US,
        "hybrid": 110 * US,
        "block": 160 * US,
        "block + C-state limit": 115 * US,
    }
    exp = experiment(tmp_path / "tales-fig10" / "tales-fig10", _axis_points("case", p99))
    doc = page(tmp_path, "tales-fig10")
    assert doc["status"] == "partly" and "needs: a cpuidle driver" in doc["verdict"], doc
    meta = json.loads((exp / "experiment.json").read_text())
    meta["system"] = {"cpuidle_driver": "haltpoll"}
    (exp / "experiment.json").write_text(json.dumps(meta))
    doc = page(tmp_path, "tales-fig10")
    assert doc["status"] == "confirmed", doc["verdict"]
    assert doc["numbers"]["limit_takes_back"] == pytest.approx(0.75)
    assert doc["numbers"]["cases"]["block"]["vs_spin"] == pytest.approx(1.6)
    assert "block 1.6×" in doc["verdict"] and "≈ 60" in doc["verdict"]


def _tail_apps(root: Path, svc_p95_mean: dict[str, float]) -> Path:
    """Table I's runs whose apps' service p95 / mean are ``svc_p95_mean[app]``."""
    for app in TABLE1_APPS:
        r = svc_p95_mean[app]
        svc = _stats(mean=100 * US, p50=80 * US, p95=100 * US * r, p99=150 * US * r)
        soj = _stats(mean=200 * US, p95=400 * US)
        experiment(
            root / f"apps-{app}",
            [point("integrated-t1-q100", app=app, qps=100, soj=soj, svc=svc)],
        )
    return root


def test_profiling_table4_ranks_the_tail_ratios(tmp_path):
    """Tables III-IV: the report's own service p95/mean put its three long-tailed apps
    (speech, search, oltp-mem) above the median, so its numbers confirm its claim; with
    speech's ratio the lowest of all, the claim holds for two of three (partly)."""
    item = R.read_items(ITEMS)["profiling-table4"]
    paper = {a: r["svc_p95_mean"] for a, r in item["paper_ratios"].items()}
    _tail_apps(tmp_path / "tailbench-table1", paper)
    (tmp_path / "profiling-table4").mkdir()
    doc = page(tmp_path, "profiling-table4", reuse=tmp_path / "tailbench-table1")
    assert doc["status"] == "confirmed", doc["verdict"]
    apps = doc["numbers"]["apps"]
    assert apps["oltp-mem"]["svc_p95_mean"] == pytest.approx(2.893)
    assert apps["kv"]["e2e_p95_mean"] == pytest.approx(2.0)
    assert doc["numbers"]["median_svc_p95_mean"] == pytest.approx((1.275 + 1.285) / 2)
    assert "sphinx" in html(tmp_path, "profiling-table4")  # the report's names beside ours
    assert (tmp_path / "profiling-table4" / "figures" / "tail_ratios.png").exists()

    other = tmp_path / "b"
    _tail_apps(other / "tailbench-table1", {**paper, "speech": 0.5})
    (other / "profiling-table4").mkdir(parents=True)
    doc = page(other, "profiling-table4", reuse=other / "tailbench-table1")
    assert doc["status"] == "partly" and "speech's service p95/mean" in doc["verdict"]


def _loads(
    app, p95_over_mean: list[float], p99_over_mean: list[float], fracs=(0.2, 0.8), sat=1000.0
) -> list[dict]:
    return [
        point(
            f"integrated-t1-q{sat * f:.0f}",
            app=app,
            qps=sat * f,
            soj=_stats(
                mean=100 * US * (1 + f), p95=100 * US * (1 + f) * r95, p99=100 * US * (1 + f) * r99
            ),
        )
        for f, r95, r99 in zip(fracs, p95_over_mean, p99_over_mean, strict=True)
    ]


def test_fig3_tail_grows_faster(tmp_path):
    root = tmp_path / "tailbench-fig3"
    sat = {"integrated-t1-q0": 1000.0}
    experiment(root / "fig3-kv", _loads("kv", [1.8, 3.1], [2.1, 4.8]), [0.2, 0.8], sat)
    experiment(root / "fig3-search", _loads("search", [1.9, 1.7], [3.0, 2.5]), [0.2, 0.8], sat)
    doc = page(tmp_path, "tailbench-fig3")
    kv = doc["numbers"]["apps"]["kv"]
    assert doc["numbers"]["tail"] == tailbench.FIG3_TAIL == "p95"
    assert kv["p95_over_mean_low"] == pytest.approx(1.8)
    assert kv["p95_over_mean_high"] == pytest.approx(3.1)
    assert kv["p99_over_mean_high"] == pytest.approx(4.8)
    assert "p95/mean from 1.8× at 20 % load to 3.1× at 80 % load" in doc["verdict"]
    # kv's p95 rises 342 µs for 60 µs of mean; search's 78 µs: only 1.3× the mean's rise.
    assert kv["p95_rise_over_mean_rise"] == pytest.approx(5.7)
    assert doc["numbers"]["apps"]["search"]["p95_rise_over_mean_rise"] == pytest.approx(1.3)
    assert doc["status"] == "partly"
    assert "search's p95 rises ≥ 2× as much as its mean" in doc["verdict"]


def test_fig3_an_ideal_queue_confirms_it(tmp_path):
    """An ideal M/M/1 queue's p95/mean is ln 20 at every load, and its p95 rises 3× as much as
    its mean: the rule confirms the paper's reading on it (a rule on the ratio would not)."""
    root = tmp_path / "tailbench-fig3"
    sat = {"integrated-t1-q0": 1000.0}
    r = math.log(20)
    for app in ("kv", "search"):
        pts = [
            point(
                f"integrated-t1-q{1000 * rho:.0f}",
                app=app,
                qps=1000 * rho,
                soj=_stats(mean=100 * US / (1 - rho), p95=r * 100 * US / (1 - rho)),
            )
            for rho in (0.2, 0.8)
        ]
        experiment(root / f"fig3-{app}", pts, [0.2, 0.8], sat)
    doc = page(tmp_path, "tailbench-fig3")
    assert doc["status"] == "confirmed", doc["verdict"]
    assert doc["numbers"]["apps"]["kv"]["p95_rise_over_mean_rise"] == pytest.approx(r)


def test_fig3_a_few_slow_requests_at_light_load_do_not_flip_it(tmp_path):
    # kv's light-load p99 set by a few slow requests (15× its mean) while its p95 grows
    # with load as the paper's does: the p99 is reported, the p95 decides.
    root = tmp_path / "tailbench-fig3"
    sat = {"integrated-t1-q0": 1000.0}
    experiment(root / "fig3-kv", _loads("kv", [1.5, 2.6], [15.0, 6.0]), [0.2, 0.8], sat)
    experiment(root / "fig3-search", _loads("search", [1.9, 3.3], [10.0, 6.5]), [0.2, 0.8], sat)
    doc = page(tmp_path, "tailbench-fig3")
    assert doc["status"] == "confirmed"
    assert "p99/mean, not judged: kv 15× → 6×" in doc["verdict"]
    assert "not judged" in html(tmp_path, "tailbench-fig3")


def _fig4(root: Path, sats: dict[str, tuple[float, float]]) -> None:
    for app, (s1, s2) in sats.items():
        pts = [
            point(f"integrated-t{t}-q{s / 2:.0f}", app=app, threads=t, qps=s / 2)
            for t, s in ((1, s1), (2, s2))
        ]
        sat = {"integrated-t1-q0": s1, "integrated-t2-q0": s2}
        experiment(root / "tailbench-fig4" / f"fig4-{app}", pts, [0.5], sat)


def test_fig4_scaling_from_saturation(tmp_path):
    sats = {
        "kv": (1000, 1930),
        "search": (500, 900),
        "oltp-mem": (800, 896),
        "translate": (100, 130),
    }
    _fig4(tmp_path, sats)
    doc = page(tmp_path, "tailbench-fig4")
    sc = {a: v["scaling"] for a, v in doc["numbers"]["apps"].items()}
    assert sc["kv"] == pytest.approx(1.93) and sc["oltp-mem"] == pytest.approx(1.12)
    assert "kv 1.93×" in doc["verdict"] and "oltp-mem 1.12×" in doc["verdict"]
    assert "this host has 2 CPUs: scaling stops at 2" in doc["verdict"]
    assert doc["status"] == "confirmed" and doc["probes"] == 8

    # Nothing scales (a busy 2-CPU host): "the slow ones scale less" proves nothing.
    flat = {
        "kv": (1000, 1000),
        "search": (1000, 650),
        "oltp-mem": (900, 540),
        "translate": (90, 50),
    }
    _fig4(tmp_path / "b", flat)
    doc = page(tmp_path / "b", "tailbench-fig4")
    assert doc["status"] == "not confirmed"
    assert doc["numbers"]["apps"]["search"]["scaling"] == pytest.approx(0.65)


def _scale(folder: Path, ran: list[int], cpus: int, needs: int | None) -> None:
    """The scale.json `taillab reproduce` writes for an item capped at the host."""
    doc = {
        "key": "harness.threads",
        "paper": [1, 2, 3, 4],
        "ran": ran,
        "cpus": cpus,
        "reserve": 1,
        "cap": max(1, cpus - 1),
        "least": 2,
        "capped": ran != [1, 2, 3, 4],
        "needs_cpus": needs,
    }
    (folder / "scale.json").write_text(json.dumps(doc))


def test_fig4_capped_at_the_host_says_so_or_what_it_needs(tmp_path):
    sats = {"kv": (1000, 1930), "search": (500, 900), "oltp-mem": (800, 896), "translate": (1, 1)}
    _fig4(tmp_path, sats)
    _scale(tmp_path / "tailbench-fig4", [1, 2], 3, None)
    doc = page(tmp_path, "tailbench-fig4")
    assert doc["status"] == "confirmed"
    assert doc["numbers"]["scale"]["ran"] == [1, 2]
    assert "capped: ran harness.threads = 1, 2 of the paper's 1–4" in doc["verdict"]
    assert "this host has 3 CPUs and keeps 1 for the client and the monitor" in doc["verdict"]
    # capped below two thread counts: no verdict from a run that cannot test the claim
    _scale(tmp_path / "tailbench-fig4", [1], 2, 3)
    doc = page(tmp_path, "tailbench-fig4")
    assert doc["status"] == "inconclusive"
    assert doc["verdict"].startswith("needs: 3 CPUs (ran harness.threads = 1 of the paper's 1–4")
    assert "confirmed on these numbers" in doc["verdict"]
    assert "needs: 3 CPUs" in html(tmp_path, "tailbench-fig4")


def _fig5(root: Path, cases: list[tuple[str, float, float]], configs=("integrated", "loopback")):
    """Per app: service mean and loopback ÷ integrated p95 (networked: twice that)."""
    factor = {"integrated": 1.0, "loopback": 1.0, "networked": 2.0}
    for app, svc, ratio in cases:
        pts = [
            point(
                f"{c}-t1-q100",
                app=app,
                config=c,
                qps=100,
                svc=_stats(mean=svc),
                soj=_stats(mean=svc, p95=svc * 2 * (1 if c == "integrated" else ratio) * factor[c]),
            )
            for c in configs
        ]
        experiment(root / "tailbench-fig5" / f"fig5-{app}", pts)


def test_fig5_short_requests_differ_most(tmp_path):
    _fig5(tmp_path, [("null", 2 * US, 3.0), ("kv", 100 * US, 1.4), ("search", MS, 1.05)])
    doc = page(tmp_path, "tailbench-fig5")
    assert doc["numbers"]["apps"]["null"]["ratio"]["loopback"] == pytest.approx(3.0)
    assert doc["numbers"]["shortest"] == "null" and doc["numbers"]["longest"] == "search"
    assert doc["status"] == "confirmed"
    assert "null 3× (service mean 2 µs)" in doc["verdict"]

    # search slower over loopback than null: the short app no longer differs most
    cases = [("null", 2 * US, 1.2), ("kv", 100 * US, 1.1), ("search", MS, 2.0)]
    _fig5(tmp_path / "b", cases, ("integrated", "loopback", "networked"))
    doc = page(tmp_path / "b", "tailbench-fig5")
    assert doc["status"] == "not confirmed"
    assert doc["numbers"]["apps"]["kv"]["ratio"]["networked"] == pytest.approx(2.2)
    assert "networked (network namespaces on one host) ÷ integrated" in html(
        tmp_path / "b", "tailbench-fig5"
    )


def test_fig8_ratio_below_08_of_saturation(tmp_path):
    root = tmp_path / "tailbench-fig8"
    sat = {"integrated-t1-q0": 1000.0, "integrated-t2-q0": 2000.0}
    fracs = [0.3, 0.5, 0.7, 0.85]

    def pts(app, ratios):
        return [
            point(
                f"integrated-t{t}-q{s * f:.0f}",
                app=app,
                threads=t,
                qps=s * f,
                ratio={"p95": r, "p99": r},
            )
            for t, s in ((1, 1000.0), (2, 2000.0))
            for f, r in zip(fracs, ratios, strict=True)
        ]

    experiment(root / "fig8-kv", pts("kv", [1.05, 1.1, 1.2, 2.0]), fracs, sat)
    experiment(root / "fig8-oltp-mem", pts("oltp-mem", [1.5, 1.6, 1.7, 3.0]), fracs, sat)
    doc = page(tmp_path, "tailbench-fig8")
    assert doc["status"] == "confirmed"  # the 0.85 point does not count
    assert doc["numbers"]["ratio_p95"]["kv"]["1"]["85 % load"] == pytest.approx(2.0)
    assert len(doc["conditions"]) == 6
    experiment(root / "fig8-kv", pts("kv", [1.05, 1.1, 1.3, 2.0]), fracs, sat)
    assert page(tmp_path, "tailbench-fig8")["status"] == "partly"


def _axis_points(key: str, p99: dict[str, float], ratio=1.0, **kw) -> list[dict]:
    return [
        point(
            f"integrated-t1-q1000-{i}",
            axes={key: name},
            ratio={"p99": ratio, "p95": ratio},
            soj=_stats(mean=v / 3, p95=v / 2, p99=v),
            **kw,
        )
        for i, (name, v) in enumerate(p99.items())
    ]


def test_tales1_burstier_is_longer(tmp_path):
    p99 = {
        "fixed": 60 * US,
        "poisson": 200 * US,
        "gamma:cv=0.5": 100 * US,
        "lognormal:cv=2": 900 * US,
        "pareto:alpha=1.5": 800 * US,
        "mmpp:on=50ms,off=200ms,ratio=8": 3 * MS,
    }
    experiment(tmp_path / "tales-fig1" / "tales-fig1", _axis_points("load.arrival", p99, 1.02))
    doc = page(tmp_path, "tales-fig1")
    assert doc["status"] == "confirmed"
    assert doc["numbers"]["arrival"]["poisson"]["ratio"] == pytest.approx(1.02)
    p99["fixed"] = 300 * US  # deterministic arrivals now worse than Poisson
    experiment(tmp_path / "tales-fig1" / "tales-fig1", _axis_points("load.arrival", p99))
    assert page(tmp_path, "tales-fig1")["status"] == "not confirmed"


def _tales2(root: Path, rows, params=None) -> None:
    pts = [
        point(
            f"integrated-t1-q{q}",
            qps=q,
            util=u,
            soj=_stats(mean=p / 3, p95=p / 2, p99=p * US),
            ratio={"p99": r, "p95": r},
            extra={"params": params} if params else None,
        )
        for q, u, p, r in rows
    ]
    experiment(root / "tales-fig2" / "tales-fig2", pts)


def test_tales2_close_to_ideal_up_to_07(tmp_path):
    _tales2(tmp_path, [(10000, 0.5, 100, 1.02), (14000, 0.71, 200, 1.1), (18000, 0.9, 900, 1.6)])
    doc = page(tmp_path, "tales-fig2")
    assert doc["status"] == "confirmed"  # 1.6 at ρ 0.9 is beyond 0.7
    assert doc["numbers"]["utilization"]["ρ 0.71"]["ratio"] == pytest.approx(1.1)


def test_tales2_planned_utilization_when_the_spec_gives_it(tmp_path):
    """A busy host stretches service (measured ρ 0.95 at the 0.5 point): ρ comes from the
    spec, so the 0.9 point's ratio of 1.6 is not judged and the 0.7 point's 1.2 is."""
    rows = [(10000, 0.95, 100, 1.02), (14000, 1.3, 200, 1.2), (18000, 1.7, 900, 1.6)]
    _tales2(tmp_path, rows, params={"service": "fixed:50us"})
    doc = page(tmp_path, "tales-fig2")
    u = doc["numbers"]["utilization"]
    assert list(u) == ["ρ 0.50", "ρ 0.70", "ρ 0.90"]
    assert u["ρ 0.50"]["measured_utilization"] == pytest.approx(0.95)
    assert doc["status"] == "partly"  # rising, but 1.2 > 1.15 at ρ 0.7
    assert R.nominal_service_ns("exp:1.5ms") == pytest.approx(1.5e6)
    assert math.isnan(R.nominal_service_ns("lognormal:50us,cv=2"))


def test_tales3_more_workers_shorter(tmp_path):
    sat = {"integrated-t1-q0": 20000.0, "integrated-t2-q0": 40000.0}
    pts = [
        point(
            f"integrated-t{t}-q{s * f:.0f}",
            threads=t,
            qps=s * f,
            soj=_stats(mean=50 * US, p95=100 * US, p99=(300 if t == 1 else 200) * US * (1 + f)),
        )
        for t, s in ((1, 20000.0), (2, 40000.0))
        for f in (0.5, 0.7, 0.9)
    ]
    experiment(tmp_path / "tales-fig3" / "tales-fig3", pts, [0.5, 0.7, 0.9], sat)
    doc = page(tmp_path, "tales-fig3")
    assert doc["status"] == "confirmed" and len(doc["conditions"]) == 3
    assert doc["numbers"]["utilization"]["90 % load"]["p99_ns_2"] == pytest.approx(380 * US)


def test_tales4_fifo_shared_smallest(tmp_path):
    pts = []
    for i, (disc, disp, v) in enumerate(
        [
            ("fifo", "shared", 300),
            ("lifo", "shared", 900),
            ("random", "shared", 500),
            ("fifo", "per-worker:random", 700),
        ]
    ):
        pts.append(
            point(
                f"integrated-t2-q32000-{i}",
                threads=2,
                qps=32000,
                axes={"harness.discipline": disc, "harness.dispatch": disp},
                soj=_stats(mean=60 * US, p95=v * US / 2, p99=v * US),
            )
        )
    experiment(tmp_path / "tales-fig4" / "tales-fig4", pts)
    doc = page(tmp_path, "tales-fig4")
    assert doc["status"] == "confirmed" and len(doc["conditions"]) == 3
    assert doc["numbers"]["cases"]["lifo+shared"]["p99_ns"] == pytest.approx(900 * US)


@pytest.mark.parametrize(
    ("hog", "rt", "elsewhere", "status"),
    [(5.0, 1.2, 1.1, "confirmed"), (1.3, 1.1, 1.0, "not confirmed"), (5.0, 3.0, 1.1, "partly")],
)
def test_tales5_either_way(tmp_path, hog, rt, elsewhere, status):
    base = 400 * US
    p99 = {
        "none": base,
        "hog": hog * base,
        "hog + RT": rt * base,
        "hog elsewhere": elsewhere * base,
    }
    experiment(tmp_path / "tales-fig5" / "tales-fig5", _axis_points("case", p99))
    doc = page(tmp_path, "tales-fig5")
    assert doc["status"] == status
    assert doc["numbers"]["cases"]["hog"]["vs_none"] == pytest.approx(hog)
    assert f"hog {hog:.3g}×" in doc["verdict"]


def _fan(
    leaves,
    above,
    model_above,
    ratio=1.02,
    p999=None,
    model_p999=None,
    served=1.0,
    cancelled=0.0,
    released_p999=None,
    without_send_lag=None,
):
    e2e = _stats(mean=3 * MS, p99=8 * MS)
    if p999 is not None:
        e2e["p999"] = p999
    model = {**e2e, "p999": model_p999 or e2e["p999"], "p99": e2e["p99"] / ratio}
    released = {} if released_p999 is None else {"e2e_released": {**e2e, "p999": released_p999}}
    return {
        "fanout": {
            "leaves": leaves,
            "measured": {
                **released,
                "e2e": e2e,
                "above_leaf_p99": above,
                "served_per_sub": served,
                "cancelled_per_sub": cancelled,
            },
            "model": {"e2e": model, "above_leaf_p99": model_above},
            "model_without": []
            if without_send_lag is None
            else [{"without": "send lag", "e2e": {**model, "p999": without_send_lag}}],
            "ratio": {"p99": ratio},
        }
    }


@pytest.mark.parametrize(("above50", "status"), [(0.37, "confirmed"), (0.29, "partly")])
def test_tail_at_scale_fanout_against_one_minus_099_to_the_n(tmp_path, above50, status):
    cases = {"5 leaves": (5, 0.047), "10 leaves": (10, 0.088), "50 leaves": (50, above50)}
    pts = [
        point(f"integrated-t1-q50-{i}", axes={"case": name}, extra=_fan(n, a, a + 0.005))
        for i, (name, (n, a)) in enumerate(cases.items())
    ]
    experiment(tmp_path / "tail-at-scale-fanout" / "tas-fanout", pts)
    doc = page(tmp_path, "tail-at-scale-fanout")
    assert doc["status"] == status
    assert doc["numbers"]["leaves"]["10"]["independent"] == pytest.approx(1 - 0.99**10)
    assert doc["numbers"]["leaves"]["50"]["above_leaf_p99"] == pytest.approx(above50)
    # 10 leaves far from 1 − 0.99^N is the claim failing.
    pts[1] = point("integrated-t1-q50-1", axes={"case": "10 leaves"}, extra=_fan(10, 0.02, 0.02))
    experiment(tmp_path / "tail-at-scale-fanout" / "tas-fanout", pts)
    assert page(tmp_path, "tail-at-scale-fanout")["status"] == "not confirmed"


def _hedging_page(tmp_path: Path, cases: dict[str, dict]) -> dict:
    pts = [
        point(f"integrated-t1-q500-{i}", axes={"case": k}, extra=v)
        for i, (k, v) in enumerate(cases.items())
    ]
    experiment(tmp_path / "tail-at-scale-hedging" / "tas-hedging", pts)
    return page(tmp_path, "tail-at-scale-hedging")


@pytest.mark.parametrize(
    ("hedged_p999", "served", "status"),
    [(2 * MS, 1.05, "confirmed"), (2 * MS, 1.4, "not confirmed"), (8 * MS, 1.05, "not confirmed")],
)
def test_tail_at_scale_hedging_cut_for_its_load(tmp_path, hedged_p999, served, status):
    cases = {
        "none": _fan(1, 0.01, 0.01, p999=20 * MS, model_p999=20 * MS),
        "hedged": _fan(1, 0.01, 0.01, p999=hedged_p999, model_p999=hedged_p999, served=served),
        "tied": _fan(1, 0.01, 0.01, p999=3 * MS, served=1.1, cancelled=0.6),
    }
    doc = _hedging_page(tmp_path, cases)
    assert doc["status"] == status
    assert doc["numbers"]["cut_p999"] == pytest.approx(20 * MS / hedged_p999)
    assert doc["numbers"]["extra_load"] == pytest.approx(served - 1)


@pytest.mark.parametrize(("released", "holds"), [(2 * MS, True), (6 * MS, False)])
def test_tail_at_scale_hedging_from_the_release(tmp_path, released, holds):
    """A cut held back by the harness's own send lag is told apart: from each request's
    release it holds, or not even then; the primary cut is the arrival's either way."""
    cases = {
        "none": _fan(1, 0.01, 0.01, p999=20 * MS, released_p999=19 * MS),
        "hedged": _fan(1, 0.01, 0.01, p999=6 * MS, served=1.05, released_p999=released),
        "tied": _fan(1, 0.01, 0.01, p999=3 * MS, served=1.1, cancelled=0.6),
    }
    doc = _hedging_page(tmp_path, cases)
    assert doc["numbers"]["cut_p999_released"] == pytest.approx(19 * MS / released)
    assert doc["status"] == "not confirmed"
    conds = {c["text"].split(" (")[0]: c["ok"] for c in doc["conditions"]}
    assert conds["hedging cuts p99.9 ≥ 5×"] is False
    assert conds["from each request's release"] is holds


@pytest.mark.parametrize(("model_ms", "holds"), [(1.9, True), (2.5, True), (5.0, False)])
def test_tail_at_scale_hedging_model_against_the_runs_interval(tmp_path, model_ms, holds):
    """The hedged p99.9 comes from the run's histogram with its 95 % interval (order
    statistics); a model more than 10 % off the estimate is not called wrong while the
    interval holds it, and is once it is outside."""
    cases = {
        "none": _fan(1, 0.01, 0.01, p999=20 * MS),
        "hedged": _fan(1, 0.01, 0.01, p999=9 * MS, model_p999=model_ms * MS, served=1.04),
        "tied": _fan(1, 0.01, 0.01, p999=10 * MS, cancelled=1.0),
    }
    pts = [
        point(f"integrated-t1-q500-{i}", axes={"case": k}, extra=v)
        for i, (k, v) in enumerate(cases.items())
    ]
    d = experiment(tmp_path / "tail-at-scale-hedging" / "tas-hedging", pts)
    # 10 000 requests, the 20 slowest spread over 0.9–3 ms: p99.9 is the 11th slowest, its
    # interval the 18th to the 4th slowest.
    top = np.linspace(0.9 * MS, 3 * MS, 20)
    vals = np.concatenate([np.linspace(100 * US, 800 * US, 9980), top])
    h = HdrHistogram(1, 3600 * 10**9, 3)
    for v in vals:
        h.record_value(int(v))
    hist = d / "points" / "integrated-t1-q500-1" / "run-0" / "hist"
    hist.mkdir()
    write_hlog(hist / "sojourn.hlog", [(0.0, 50.0, h)], "sojourn")
    doc = page(tmp_path, "tail-at-scale-hedging")
    hedged = doc["numbers"]["cases"]["hedged"]
    # From the histogram, not the summary's 9 ms.
    assert hedged["p999_ns"] == pytest.approx(top[9], rel=2e-3)
    assert hedged["p999_ci_ns"] == pytest.approx([top[2], top[16]], rel=2e-3)
    assert hedged["requests"] == 10_000
    assert doc["numbers"]["cut_p999"] == pytest.approx(20 * MS / top[9], rel=2e-3)
    model = next(c for c in doc["conditions"] if c["text"].startswith("hedged p99.9 within"))
    assert model["ok"] is holds
    assert "95 % interval" in doc["verdict"]


@pytest.mark.parametrize(("hedged_model", "needs"), [(2.7 * MS, True), (1.2 * MS, False)])
def test_tail_at_scale_hedging_needs_a_client_on_time(tmp_path, hedged_model, needs):
    """Where the run's own model says only the client's release lag keeps the cut under 5×
    (without it the model cuts 12×), the run could not test the claim from the arrival."""
    cases = {
        "none": _fan(
            1, 0.01, 0.01, p999=10.2 * MS, model_p999=10.2 * MS, without_send_lag=10.1 * MS
        ),
        "hedged": _fan(
            1,
            0.01,
            0.01,
            p999=2.4 * MS,
            model_p999=hedged_model,
            served=1.03,
            released_p999=0.83 * MS,
            without_send_lag=0.84 * MS,
        ),
        "tied": _fan(1, 0.01, 0.01, p999=10 * MS, cancelled=1.0),
    }
    doc = _hedging_page(tmp_path, cases)
    assert doc["numbers"]["model_cut_p999_without_send_lag"] == pytest.approx(10.1 / 0.84)
    assert doc["status_from_data"] == "not confirmed"  # 10.2 / 2.4 = 4.25×
    if needs:
        assert doc["status"] == "inconclusive"
        assert doc["verdict"].startswith("needs: a client that releases each request on time")
    else:
        assert doc["status"] == "not confirmed" and "needs:" not in doc["verdict"]


def _stress(root: Path, app: str, p95: dict[str, float]) -> None:
    pts = []
    for i, (case, r) in enumerate(p95.items()):
        inter = {
            "interference": {
                "schema": "taillab.interference/1",
                "cpu_pct": 150.0 * (case != "none"),
                "hogs": [
                    {
                        "spec": "cpu:2",
                        "processes": [
                            {
                                "role": "worker",
                                "pid": 10 + i,
                                "name": "stress-ng-cpu",
                                "cpu_pct": 75.0,
                                "write_bytes": 4096,
                            }
                        ],
                    }
                ],
            }
        }
        env = {"harness": {"pid": 1, "cpu_pct": 40.0, "rss_max_bytes": 1 << 27, "invol_cs": 10}}
        pts.append(
            point(
                f"integrated-t1-q500-case-{i}",
                app=app,
                qps=500,
                axes={"case": case},
                svc=_stats(mean=r * MS, p95=r * MS, p99=r * 1.3 * MS),
                extra={**(inter if case != "none" else {}), "environment": env},
            )
        )
    experiment(root / f"profiling-{app}", pts)


def test_profiling_stress_ratios(tmp_path):
    root = tmp_path / "profiling-table7"
    _stress(root, "kv", {"none": 1.0, "cpu": 1.1, "memory": 1.0, "disk": 1.0, "all": 1.2})
    _stress(root, "speech", {"none": 1.0, "cpu": 2.1, "memory": 1.05, "disk": 1.1, "all": 4.4})
    doc = page(tmp_path, "profiling-table7")
    sp = doc["numbers"]["apps"]["speech"]["ratio"]
    assert sp["cpu"]["p95"] == pytest.approx(2.1) and sp["all"]["p99"] == pytest.approx(4.4)
    # judged on the report's app: kv, unmoved by the hog, is shown beside it
    assert doc["numbers"]["judged_on"] == "speech" and doc["status"] == "confirmed"
    assert doc["numbers"]["beside"] == {"kv": "not confirmed"}
    assert "judged on speech" in doc["verdict"] and "kv not confirmed" in doc["verdict"]
    paper = doc["numbers"]["paper_ratio"]
    assert paper["cpu"]["p95"] == pytest.approx(4770.2 / 2501.8)
    text = html(tmp_path, "profiling-table7")
    assert "Resources per case" in text and "75 %" in text and "4 KiB" in text
    assert (root / "resources-profiling-kv.html").exists()


def test_profiling_is_judged_on_speech_only(tmp_path):
    # kv showing the claim does not confirm it when speech, the report's app, does not
    root = tmp_path / "profiling-table7"
    _stress(root, "kv", {"none": 1.0, "cpu": 2.1, "memory": 1.05, "disk": 1.1, "all": 4.4})
    _stress(root, "speech", {"none": 1.0, "cpu": 1.2, "memory": 1.0, "disk": 1.0, "all": 1.3})
    doc = page(tmp_path, "profiling-table7")
    assert doc["numbers"]["judged_on"] == "speech" and doc["status"] == "not confirmed"
    assert doc["numbers"]["beside"] == {"kv": "confirmed"}
    # without speech's results there is nothing to judge
    shutil.rmtree(root / "profiling-speech")
    doc = page(tmp_path, "profiling-table7")
    assert doc["status"] == "inconclusive" and "no data for" in doc["verdict"]


def _attribution(d: Path, app: str, metric: str, base_us: float, terms: list[tuple]) -> None:
    """An attribution folder: one point (for load_item) and an attribution.json whose
    ``metric`` effects at p95 and p99 are ``terms`` — (factors [(key, level)], estimate µs,
    CI half-width µs) — over the intercept ``base_us``."""
    experiment(d, [point("integrated-t1-q500", app=app, qps=500)])
    effects = []
    for q in (0.95, 0.99):
        effects.append(
            {
                "metric": metric,
                "quantile": q,
                "kind": "intercept",
                "term": "base",
                "estimate_us": base_us,
                "ci_low_us": base_us,
                "ci_high_us": base_us,
                "excludes_zero": None,
            }
        )
        for fs, est, hw in terms:
            name = " × ".join(f"{k}={lv}" for k, lv in fs)
            effects.append(
                {
                    "metric": metric,
                    "quantile": q,
                    "term": name,
                    "kind": "main" if len(fs) == 1 else "interaction",
                    "factors": [{"key": k, "level": lv} for k, lv in fs],
                    "estimate_us": est,
                    "ci_low_us": est - hw,
                    "ci_high_us": est + hw,
                    "excludes_zero": bool(est - hw > 0 or est + hw < 0),
                }
            )
    (d / "attribution").mkdir()
    (d / "attribution" / "attribution.json").write_text(
        json.dumps({"schema": "taillab.attribution/1", "effects": effects})
    )
    (d / "attribution" / "index.html").write_text("<html></html>")


HOG, RT, CORE = (
    ("interference.hogs", "cpu:1@cpus=0"),
    ("harness.rt_priority", "50"),
    (
        "harness.cpus",
        "1",
    ),
)


@pytest.mark.parametrize(
    ("hog", "rt_left", "core_left", "hw", "status"),
    [
        (800.0, 50.0, 20.0, 60.0, "confirmed"),  # the hog ×3, both remedies take it back
        (800.0, 700.0, 20.0, 60.0, "partly"),  # RT leaves most of it
        # The hog's CI holds 0 and twice the base: unresolved by these runs (the full
        # variant's three-valued judging; --quick: not confirmed, test_verdicts_causes.py).
        (800.0, 50.0, 20.0, 900.0, "inconclusive"),
    ],
)
def test_tales5_attribution_from_effects(tmp_path, hog, rt_left, core_left, hw, status):
    # The cells come from the model: base + mains + interaction; a remedy that leaves
    # `left` µs of the hog's effect has interaction −(hog − left).
    terms = [
        ([HOG], hog, hw),
        ([RT], 5.0, 10.0),
        ([CORE], -3.0, 10.0),
        ([HOG, RT], -(hog - rt_left), hw),
        ([HOG, CORE], -(hog - core_left), hw),
        ([RT, CORE], 0.0, 10.0),
    ]
    root = tmp_path / "tales-fig5-attribution"
    _attribution(root / "tales-fig5-attribution", "synth", "sojourn", 400.0, terms)
    doc = page(tmp_path, "tales-fig5-attribution")
    assert doc["status"] == status, doc["verdict"]
    rel = doc["numbers"]["cells_vs_base"]
    assert rel["hog"] == pytest.approx((400 + hog) / 400)
    assert rel["hog + RT"] == pytest.approx((400 + 5 + rt_left) / 400)
    assert rel["hog, dedicated core"] == pytest.approx((400 - 3 + core_left) / 400)
    text = html(tmp_path, "tales-fig5-attribution")
    # The paper's one-factor words beside our effects, and the attribution's own page.
    assert "10–1000×" in text and "nearly eliminates" in text
    assert "tales-fig5-attribution/attribution/index.html" in text


def test_profiling_attribution_from_effects(tmp_path):
    root = tmp_path / "profiling-attribution"
    levels = {
        "cpu:2": 110.0,
        "vm:1,bytes=1G": 5.0,
        "hdd:1,bytes=256M": -2.0,
        "cpu:2+vm:1,bytes=1G+hdd:1,bytes=256M": 300.0,
    }
    speech = [([("interference.hogs", lv)], est * 1e4, 20.0 * 1e4) for lv, est in levels.items()]
    _attribution(root / "profiling-speech-attribution", "speech", "service", 1e6, speech)
    flat = [([("interference.hogs", lv)], 1.0, 20.0) for lv in levels]
    _attribution(root / "profiling-kv-attribution", "kv", "service", 100.0, flat)
    doc = page(tmp_path, "profiling-attribution")
    ratio = doc["numbers"]["apps"]["speech"]["ratio"]
    assert ratio["cpu"]["p95"] == pytest.approx(2.1)
    assert ratio["all"]["p95"] == pytest.approx(4.0)
    assert ratio["memory"]["p99"] == pytest.approx(1.05)
    # Judged on speech, the report's app, as the one-factor item; kv (its CPU stress not
    # found: the CI holds 0) is beside it.
    assert doc["numbers"]["judged_on"] == "speech" and doc["status"] == "confirmed"
    assert doc["numbers"]["beside"] == {"kv": "not confirmed"}
    assert doc["numbers"]["apps"]["kv"]["effects"]["cpu"]["p95"]["excludes_zero"] is False
    assert doc["numbers"]["paper_ratio"]["cpu"]["p95"] == pytest.approx(4770.2 / 2501.8)
    assert "kv" in html(tmp_path, "profiling-attribution")


def _validation(root: Path, app: str, err: dict[str, float]) -> None:
    experiment(root / app / "measured", [point("integrated-t1-q100", app=app, qps=100)])
    experiment(root / app / "synthetic", [point("integrated-t1-q100", qps=100, env_ok=False)])
    stats = {s: {"mean_abs_error": v} for s, v in err.items()}
    (root / app / "validation").mkdir(parents=True)
    doc = {"schema": "taillab.validation/1", "summary": {"points": 3, "stats": stats}}
    (root / app / "validation" / "validation.json").write_text(json.dumps(doc))


def test_tailwag_errors_vs_paper(tmp_path):
    root = tmp_path / "tailwag-table2"
    _validation(root, "kv", {"mean": 0.02, "p95": 0.01, "p99": 0.04})
    _validation(root, "img-dnn", {"mean": 0.04, "p95": 0.02, "p99": 0.06})
    doc = page(tmp_path, "tailwag-table2")
    avg = doc["numbers"]["average"]
    assert avg["mean"] == pytest.approx(0.03) and avg["p95"] == pytest.approx(0.015)
    assert doc["status"] == "confirmed"
    assert doc["runs"] == 4 and doc["disturbed_runs"] == 2  # the synthetic runs
    assert "Built from disturbed runs" in html(tmp_path, "tailwag-table2")


def test_tailwag_fig5_service_coverage(tmp_path):
    """TailWAG Fig. 5 from tailwag-table2's runs: the synthetic workload's service quantiles
    against the app's at each load, the worst per quantile; kv within every limit, img-dnn's
    p99 30 % long (over the 20 % limit) at one of two loads: partly."""
    root = tmp_path / "tailwag-table2"

    def side(app, name, p99s):
        pts = [
            point(
                f"integrated-t1-q{q}", app=app, qps=q, svc=_stats(p50=100 * US, p95=200 * US, p99=v)
            )
            for q, v in zip((100, 300), p99s, strict=True)
        ]
        experiment(root / app / name, pts)

    side("kv", "measured", [400 * US, 400 * US])
    side("kv", "synthetic", [460 * US, 380 * US])
    side("img-dnn", "measured", [400 * US, 400 * US])
    side("img-dnn", "synthetic", [400 * US, 520 * US])
    (tmp_path / "tailwag-fig5").mkdir()
    doc = page(tmp_path, "tailwag-fig5", reuse=root)
    apps = doc["numbers"]["apps"]
    assert apps["kv"]["p99"] == pytest.approx(0.15) and apps["kv"]["p50"] == pytest.approx(0)
    assert apps["img-dnn"]["p99"] == pytest.approx(0.30)
    assert doc["status"] == "partly" and "img-dnn p99 within 20%" in doc["verdict"]
    assert (tmp_path / "tailwag-fig5" / "figures" / "service_coverage.png").exists()


# --- the worker-count and load-axis items (rules: tailbench, tales, tailwag) -----------------


def _fig6(root: Path, app: str, loopback: dict[float, float], to_ideal=1.1) -> None:
    """One app at 20–80 % of each configuration's saturation: integrated's p95 grows with the
    load, loopback's is integrated's × ``loopback[load]``; every run ``to_ideal`` × its ideal."""
    sat = {"integrated-t1-q0": 400.0, "loopback-t1-q0": 360.0}
    fracs = [0.2, 0.4, 0.6, 0.8]
    pts = []
    for c, s in (("integrated", 400.0), ("loopback", 360.0)):
        for f in fracs:
            p95 = 2 * MS / (1 - f) * (loopback[f] if c == "loopback" else 1.0)
            pts.append(
                point(
                    f"{c}-t1-q{s * f:.0f}",
                    app=app,
                    config=c,
                    qps=s * f,
                    soj=_stats(mean=p95 / 2, p95=p95),
                    ratio={"p95": to_ideal, "p99": to_ideal},
                )
            )
    experiment(root / "tailbench-fig6" / f"fig6-{app}", pts, fracs, sat)


def test_tailbench_fig6_configurations_on_one_load_axis(tmp_path):
    """Judged below 80 % of each one's saturation: a loopback 3× slower at 80 % is shown, not
    judged; 2× at 40 % is the claim failing."""
    near = {0.2: 1.1, 0.4: 1.2, 0.6: 0.9, 0.8: 3.0}
    _fig6(tmp_path, "oltp-disk", near)
    _fig6(tmp_path, "img-dnn", near)
    doc = page(tmp_path, "tailbench-fig6")
    app = doc["numbers"]["apps"]["img-dnn"]
    assert app["loads"]["40 % load"]["loopback_over_integrated"] == pytest.approx(1.2)
    assert app["loopback_saturation"] == pytest.approx(0.9)
    assert doc["status"] == "confirmed" and len(doc["conditions"]) == 4
    assert "img-dnn 1.1× at 20 % load" in doc["verdict"]
    assert (tmp_path / "tailbench-fig6" / "figures" / "p95_vs_load.png").exists()

    _fig6(tmp_path / "b", "oltp-disk", near)
    _fig6(tmp_path / "b", "img-dnn", {**near, 0.4: 2.0}, to_ideal=1.5)
    doc = page(tmp_path / "b", "tailbench-fig6")
    assert doc["status"] == "not confirmed"
    failed = [c["text"] for c in doc["conditions"] if c["ok"] is False]
    assert failed == [
        "img-dnn: loopback within 1.5× of integrated below 80% load",
        "img-dnn: each configuration within 1.25× of its ideal below 80% load",
    ]


def test_tailbench_fig7_shortest_by_service_p50(tmp_path):
    """middleware's mean carries its collector's pauses (the largest mean here), its p50 is
    the smallest: it is the short-request app the transport's cost shows on."""
    cases = [("middleware", 40 * US, 3 * MS, 1.8), ("kv", 80 * US, 100 * US, 1.3)]
    cases += [("search", 1 * MS, 1.2 * MS, 1.05), ("img-dnn", 1.2 * MS, 1.3 * MS, 1.02)]
    for app, p50, mean, ratio in cases:
        pts = [
            point(
                f"{c}-t4-q4000",
                app=app,
                config=c,
                threads=4,
                qps=4000,
                svc=_stats(mean=mean, p50=p50),
                soj=_stats(mean=mean, p95=p50 * 3 * (ratio if c == "loopback" else 1.0)),
            )
            for c in ("integrated", "loopback")
        ]
        experiment(tmp_path / "tailbench-fig7" / f"fig7-{app}", pts)
    doc = page(tmp_path, "tailbench-fig7")
    assert doc["numbers"]["shortest"] == "middleware" and doc["numbers"]["threads"] == [4]
    assert doc["status"] == "confirmed", doc["verdict"]
    assert doc["verdict"].startswith("p95 loopback ÷ integrated with 4 worker(s): middleware 1.8×")


@pytest.mark.parametrize(
    ("shared", "each", "status"),
    [((300, 1.2), (900, 1.1), "confirmed"), ((1000, 4.0), (900, 1.1), "not confirmed")],
)
def test_tales7_one_queue_against_a_queue_each(tmp_path, shared, each, status):
    """p99 (µs) and measured ÷ ideal of 4 workers from one queue and from a queue each; the
    per-worker ideal (4 × M/M/1) is the single-core one."""
    pts = [
        point(
            f"integrated-t4-q60000-dispatch-{d}",
            threads=4,
            qps=60000,
            axes={"harness.dispatch": d},
            soj=_stats(mean=80 * US, p95=p99 * US / 2, p99=p99 * US),
            ratio={"p99": r},
        )
        for d, (p99, r) in (("shared", shared), ("per-worker:random", each))
    ]
    experiment(tmp_path / "tales-fig7" / "tales-fig7", pts)
    doc = page(tmp_path, "tales-fig7")
    assert doc["status"] == status
    single = doc["numbers"]["single_core_ideal_p99_ns"]
    assert single == pytest.approx(each[0] * US / each[1])
    assert "p99 with 4 worker(s): one shared queue" in doc["verdict"]


def _tw6(root: Path, app: str, rows: list[tuple[int, float, float, float | None]]) -> None:
    """validation.json with (threads, load, p95 error, its floor or None: round 1 only)."""
    experiment(root / app / "measured", [point("integrated-t1-q100", app=app, qps=100)])
    experiment(root / app / "synthetic", [point("integrated-t1-q100", qps=100)])
    pts = []
    for t, load, err, floor in rows:
        m = 1 * MS * (1 + 2 * load) / t
        r = {"threads": t, "qps": 1000 * load * t, "load": load, "measured_p95": m}
        r["synthetic_p95"] = m * (1 + err)
        if floor is None:
            r["error_p95"] = err
        else:
            r |= {"error_p95": 0.0, "later_error_p95": err, "floor_p95": floor}
        pts.append(r)
    (root / app / "validation").mkdir(parents=True)
    doc = {"schema": "taillab.validation/1", "points": pts}
    (root / app / "validation" / "validation.json").write_text(json.dumps(doc))


def test_tailwag_fig6_follows_thread_scaling(tmp_path):
    """An out-of-sample error beyond 15 % but within its point's floor passes; at the most
    workers (out of the fit's sample) 30 % beyond both fails the claim."""
    root = tmp_path / "tailwag-fig6"
    _tw6(root, "kv", [(1, 0.2, 0.05, 0.1), (1, 0.7, -0.2, 0.25), (2, 0.2, 0.1, 0.05)])
    _tw6(root, "img-dnn", [(1, 0.2, 0.02, None), (2, 0.2, 0.3, 0.1), (2, 0.7, 0.01, 0.1)])
    doc = page(tmp_path, "tailwag-fig6")
    kv = doc["numbers"]["apps"]["kv"]
    assert kv["threads"]["1"]["ok"] is True and kv["threads"]["1"]["worst_abs_error"] == 0.2
    assert kv["scaling"]["20 % load"]["measured"] == pytest.approx(0.5)
    assert kv["scaling"]["20 % load"]["synthetic"] == pytest.approx(0.5 * 1.1 / 1.05)
    assert doc["status"] == "not confirmed"
    failed = [c for c in doc["conditions"] if c["ok"] is False]
    assert [c["text"].split(":")[0] for c in failed] == ["img-dnn 2 worker(s)"]
    assert failed[0]["primary"]
    assert (tmp_path / "tailwag-fig6" / "figures" / "threads_kv.png").exists()


# --- environment, quick, bad input, index, doc ---------------------------------------------------


def test_disturbed_banner_and_inconclusive(tmp_path):
    p99 = {"none": 100 * US, "hog": 500 * US, "hog + RT": 110 * US, "hog elsewhere": 105 * US}
    pts = _axis_points("case", p99)
    pts[1]["env_ok"] = False
    experiment(tmp_path / "tales-fig5" / "tales-fig5", pts)
    doc = page(tmp_path, "tales-fig5", quick=True)
    text = html(tmp_path, "tales-fig5")
    assert doc["disturbed_runs"] == 1 and doc["runs"] == 4 and doc["status"] == "confirmed"
    assert "Built from disturbed runs" in text and "1 of 4 run(s)" in text
    assert "other processes&#x27; CPU up to 80" in text and "rustc" in text
    assert "tiny counts: indicative only" in text and doc["quick"] is True

    for p in pts:
        p["env_ok"] = False
    experiment(tmp_path / "tales-fig5" / "tales-fig5", pts)
    doc = page(tmp_path, "tales-fig5")
    assert doc["status"] == "inconclusive" and doc["status_from_data"] == "confirmed"
    assert "every one of the 4 runs failed its environment check" in doc["verdict"]
    assert "tiny counts" not in html(tmp_path, "tales-fig5")


def test_zero_latency_is_no_data_not_a_crash(tmp_path):
    p99 = {"none": 0.0, "hog": 500 * US, "hog + RT": 110 * US, "hog elsewhere": 105 * US}
    experiment(tmp_path / "tales-fig5" / "tales-fig5", _axis_points("case", p99))
    doc = page(tmp_path, "tales-fig5")
    assert doc["status"] == "inconclusive" and doc["numbers"]["cases"]["hog"]["vs_none"] is None
    assert "no data for: hog ≥ 2× none" in doc["verdict"]


def test_no_data_is_inconclusive(tmp_path):
    (tmp_path / "tales-fig4").mkdir()
    doc = page(tmp_path, "tales-fig4")
    assert doc["status"] == "inconclusive" and doc["runs"] == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["reproduce-page", "tales-fig99", "{tmp}", "--items", str(ITEMS)], "unknown item"),
        (["reproduce-page", "tales-fig5", "{tmp}/nope", "--items", str(ITEMS)], "does not exist"),
        (["reproduce-page", "tales-fig5", "{tmp}", "--items", "{tmp}/x.toml"], "cannot read"),
        (
            [
                "reproduce-page",
                "tailbench-fig2",
                "{tmp}",
                "--items",
                str(ITEMS),
                "--reuse",
                "{tmp}/nope",
            ],
            "tailbench-table1",
        ),
        (["reproduce-index", "{tmp}/nope", "--items", str(ITEMS)], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, says):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    assert cli.main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("taillab: error:") and says in err


def test_index_and_markdown(tmp_path):
    p99 = {"none": 100 * US, "hog": 500 * US, "hog + RT": 110 * US, "hog elsewhere": 105 * US}
    experiment(tmp_path / "tales-fig5" / "tales-fig5", _axis_points("case", p99))
    page(tmp_path, "tales-fig5", quick=True)
    assert cli.main(["reproduce-index", str(tmp_path), "--items", str(ITEMS)]) == 0
    index = (tmp_path / "index.html").read_text()
    assert 'href="tales-fig5/index.html"' in index and "no page" in index
    assert index.count("<tr>") == 1 + len(R.read_items(ITEMS))

    md = R.markdown(tmp_path, ITEMS, repo=tmp_path.parent)
    assert "**--quick**" in md and "Test CPU, 2 CPUs" in md
    assert "Environment: 0 of 4 runs failed" in md
    row = next(line for line in md.splitlines() if line.startswith("| tales-fig5 "))
    assert "**confirmed**" in row and "hog 5×" in row and "`taillab reproduce tales-fig5`" in row
    assert "[page](" in row  # the results lie inside "repo"
    assert f"Results: `{tmp_path.name}` in this repository" in md
    outside = R.markdown(tmp_path, ITEMS, repo=REPO)
    assert "[page](" not in outside
    # Results elsewhere: how to make them, not a folder of the machine that ran them.
    assert str(tmp_path) not in outside
    assert "`target/release/taillab reproduce all --quick --out DIR`" in outside
    items_table, cov_table = md.split("## Every figure and table of the papers")
    assert sum(line.startswith("| ") for line in items_table.splitlines()) == 1 + len(
        R.read_items(ITEMS)
    )
    # The coverage: every item named in its figure's row, the rows without one say why.
    for iid in R.read_items(ITEMS):
        assert f"`{iid}`" in cov_table, iid
    # Every status the list holds shows in the table (since 2026-11-27 none is "missing").
    from taillab import coverage

    entries = coverage.read(ITEMS.with_name("coverage.toml"), list(R.read_items(ITEMS)))
    statuses = {e["status"] for e in entries}
    for status in statuses - {"item"}:
        assert f"| *{status}* |" in cov_table, status
    # One build: named once. An item rerun by another build: each build names its items.
    assert "(git " in md and "git abc: tales-fig5" not in md
    v5 = tmp_path / "tales-fig5" / "verdict.json"
    doc = json.loads(v5.read_text())
    doc["host"] = dict(doc.get("host") or {}, git="def")
    v5.write_text(json.dumps(doc))
    (tmp_path / "tales-fig4").mkdir()
    doc.update(id="tales-fig4", host=dict(doc["host"], git="abc"))
    (tmp_path / "tales-fig4" / "verdict.json").write_text(json.dumps(doc))
    two = R.markdown(tmp_path, ITEMS, repo=REPO)
    assert "git def: tales-fig5; git abc: tales-fig4" in two or (
        "git abc: tales-fig4; git def: tales-fig5" in two
    ), two[:600]
    # One machine: named once, not per item.
    assert "- Machine: " in two and "; on " not in two
    # Items measured on two hosts (a full run made over several sessions): each row names its.
    doc.update(host=dict(doc["host"], hostname="big", cpu="Intel Xeon", cores=16))
    (tmp_path / "tales-fig4" / "verdict.json").write_text(json.dumps(doc))
    mixed = R.markdown(tmp_path, ITEMS, repo=REPO)
    assert "- Machines: 2, named per item" in mixed and "CPUs: 2 and 16;" in mixed
    rows = {
        line.split(" | ")[0]: line for line in mixed.splitlines() if line.startswith("| tales-fig")
    }
    assert "on big, Intel Xeon, 16 CPUs" in rows["| tales-fig4"]
    assert "on big" not in rows["| tales-fig5"] and ", 2 CPUs, kernel" in rows["| tales-fig5"]


def test_markdown_of_a_full_run_not_finished_takes_quick_verdicts_marked(tmp_path):
    """A full run made item by item: the items it has not reached show the quick run's
    verdicts, each marked, and the header says how many are full."""
    full, quick = tmp_path / "full", tmp_path / "quick"
    p99 = {"none": 100 * US, "hog": 500 * US, "hog + RT": 110 * US, "hog elsewhere": 105 * US}
    experiment(full / "tales-fig5" / "tales-fig5", _axis_points("case", p99))
    page(full, "tales-fig5")
    fig1 = {"fixed": 60 * US, "poisson": 200 * US, "mmpp:on=50ms,off=200ms,ratio=8": 3 * MS}
    for iid, key, values in (("tales-fig5", "case", p99), ("tales-fig1", "arrival", fig1)):
        experiment(quick / iid / iid, _axis_points(key, values))
        page(quick, iid, quick=True)
    md = R.markdown(full, ITEMS, repo=REPO, quick_root=quick)
    assert f"Variant: full for 1 of {len(R.read_items(ITEMS))} items" in md
    rows = {line.split(" | ")[0]: line for line in md.splitlines() if line.startswith("| ")}
    assert "*(--quick)* **" in rows["| tales-fig1"]
    assert "`taillab reproduce tales-fig1 --quick`" in rows["| tales-fig1"]
    assert "(--quick)" not in rows["| tales-fig5"]
    assert "`taillab reproduce tales-fig5`" in rows["| tales-fig5"]
    assert rows["| tales-fig4"].count("not run") == 1
    # How to make the results: the full run's command.
    assert "`target/release/taillab reproduce all --out DIR`" in md
    # Without the quick root the missing items are "not run"; a wrong one is named.
    alone = R.markdown(full, ITEMS, repo=REPO)
    assert "(--quick)" not in alone and "Variant: full" in alone
    with pytest.raises(R.ReproduceError, match="does not exist"):
        R.markdown(full, ITEMS, repo=REPO, quick_root=tmp_path / "nope")


def test_verdicts_kept_in_the_repository_add_up_over_runs(tmp_path):
    """scripts/reproduction-doc.py keeps each ROOT's verdicts (full and quick apart) and makes
    the doc from all it has kept: items run in different sessions add up, a later verdict of an
    item replaces its earlier one, a full one outranks a quick one."""
    import subprocess
    import sys

    p99 = {"none": 100 * US, "hog": 500 * US, "hog + RT": 110 * US, "hog elsewhere": 105 * US}
    fig1 = {"fixed": 60 * US, "poisson": 200 * US, "mmpp:on=50ms,off=200ms,ratio=8": 3 * MS}
    one, two, three = tmp_path / "one", tmp_path / "two", tmp_path / "three"
    experiment(one / "tales-fig5" / "tales-fig5", _axis_points("case", p99))
    page(one, "tales-fig5")
    experiment(two / "tales-fig1" / "tales-fig1", _axis_points("arrival", fig1))
    page(two, "tales-fig1", quick=True)
    kept = tmp_path / "kept"
    script = [sys.executable, str(REPO / "scripts" / "reproduction-doc.py"), "--kept", str(kept)]

    def doc(*roots):
        r = subprocess.run([*script, *map(str, roots)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        rows = {ln.split(" | ")[0]: ln for ln in r.stdout.splitlines() if ln.startswith("| ")}
        return r.stdout, rows

    doc(one)
    md, rows = doc(two)  # a later session: the first's verdict is still there
    assert (kept / "full" / "tales-fig5" / "verdict.json").is_file()
    assert (kept / "quick" / "tales-fig1" / "verdict.json").is_file()
    assert "(--quick)" not in rows["| tales-fig5"] and "**confirmed**" in rows["| tales-fig5"]
    assert "*(--quick)* **" in rows["| tales-fig1"]
    # A full verdict of tales-fig1 later: it replaces the quick one in the doc.
    experiment(three / "tales-fig1" / "tales-fig1", _axis_points("arrival", fig1))
    page(three, "tales-fig1")
    md, rows = doc(three)
    assert "(--quick)" not in rows["| tales-fig1"]
    assert "- Variant: full\n" in md and "*(--quick)*" not in md.split("| item |")[1]
    # Made again from what is kept, no ROOT: the same doc.
    assert doc()[0] == md
    # A folder that is not one `taillab reproduce` wrote: one line says so.
    r = subprocess.run([*script, str(tmp_path / "nope")], capture_output=True, text=True)
    assert r.returncode != 0 and "does not exist" in r.stderr
    r = subprocess.run([*script, str(kept)], capture_output=True, text=True)
    assert r.returncode != 0 and "no item's verdict.json" in r.stderr


def test_the_reproduction_doc_is_made_from_the_kept_verdicts():
    """docs/reproduction.md is what scripts/reproduction-doc.py makes from docs/reproduction/
    (no hand edits, nothing stale): after changing items.toml, a rule's sentence or the doc's
    layout, rerun `.venv/bin/python scripts/reproduction-doc.py > docs/reproduction.md`."""
    import subprocess
    import sys

    r = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "reproduction-doc.py")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == (REPO / "docs" / "reproduction.md").read_text(encoding="utf-8")


def test_markdown_of_kept_verdicts_links_no_pages(tmp_path):
    """Verdicts kept inside the repository without their runs: no page column, and the doc
    says where they are and how to add to them."""
    p99 = {"none": 100 * US, "hog": 500 * US, "hog + RT": 110 * US, "hog elsewhere": 105 * US}
    runs = tmp_path / "runs"
    experiment(runs / "tales-fig5" / "tales-fig5", _axis_points("case", p99))
    page(runs, "tales-fig5")
    kept = tmp_path / "docs" / "reproduction" / "full" / "tales-fig5"
    kept.mkdir(parents=True)
    shutil.copyfile(runs / "tales-fig5" / "verdict.json", kept / "verdict.json")
    md = R.markdown(kept.parent, ITEMS, repo=tmp_path)
    assert "[page](" not in md and "our figure" not in md
    assert "kept in `docs/reproduction/full` of this repository" in md
    # With the runs inside the repository, their pages are linked as before.
    assert "[page](" in R.markdown(runs, ITEMS, repo=tmp_path)


def test_every_item_has_a_rule():
    assert set(R.read_items(ITEMS)) == set(R.RULES)


def test_coverage_names_every_item_and_only_items(tmp_path):
    """configs/reproduce/coverage.toml and items.toml stay in step: an item no entry names,
    an entry naming no item, a status without what it needs are each one clear error."""
    from taillab import coverage

    cov = ITEMS.with_name("coverage.toml")
    ids = list(R.read_items(ITEMS))
    entries = coverage.read(cov, ids)
    assert {e["status"] for e in entries} <= set(coverage.STATUSES)
    with pytest.raises(coverage.CoverageError, match="does not say which figure items"):
        coverage.read(cov, [*ids, "new-item"])
    with pytest.raises(coverage.CoverageError, match="which items.toml does not have"):
        coverage.read(cov, ids[1:])
    bad = tmp_path / "coverage.toml"
    bad.write_text('[[entry]]\npaper = "P"\nfigure = "Fig. 1"\nstatus = "missing"\n')
    with pytest.raises(coverage.CoverageError, match="needs `needs`"):
        coverage.read(bad, [])


def test_status_rules():
    C = R.Cond
    assert R.status_of([C("a", True), C("b", True)]) == "confirmed"
    assert R.status_of([C("a", True), C("b", False)]) == "partly"
    assert R.status_of([C("a", False, True), C("b", True)]) == "not confirmed"
    assert R.status_of([C("a", False), C("b", False)]) == "not confirmed"
    assert R.status_of([C("a", None)]) == "inconclusive"
    assert R.status_of([C("a", True), C("b", None)]) == "partly"
    assert R.group_tag("integrated-t2-q1234-case-hog") == "integrated-t2-q0-case-hog"


# --- the real quick run, trimmed -----------------------------------------------------------------


# Items the trimmed real run cannot serve (none: python/tests/data/reproduce is a quick run of
# every item, 2026-12-02, trimmed by its trim.py).
NOT_IN_REAL: set[str] = set()


def _real_items() -> list[str]:
    """The items of the trimmed real run (an item that only reads another's has no folder)."""
    items = R.read_items(ITEMS)
    have = {d.name for d in REAL.iterdir() if d.is_dir()} if REAL.is_dir() else set()
    return [
        i
        for i, it in items.items()
        if (i in have or it.get("reuse") in have) and i not in NOT_IN_REAL
    ]


@pytest.fixture
def real(tmp_path) -> Path:
    shutil.copytree(REAL, tmp_path / "r", ignore=shutil.ignore_patterns("*.py"))
    return tmp_path / "r"


def _real_page(root: Path, item_id: str) -> dict:
    item = R.read_items(ITEMS)[item_id]
    (root / item_id).mkdir(exist_ok=True)
    reuse = root / item["reuse"] if item.get("reuse") else None
    return page(root, item_id, reuse=reuse, quick=True)


@pytest.mark.parametrize("item_id", _real_items())
def test_real_quick_run(real, item_id):
    """Every item of the real run gets a page and a verdict from the harness's own files."""
    doc = _real_page(real, item_id)
    assert doc["runs"] > 0 and doc["quick"] and doc["host"]["cores"] >= 1
    # Inconclusive from the data only where this host could not run the worker counts the
    # claim needs (the quick run was capped at its 2 CPUs: the page says "needs: N CPUs").
    if doc["status_from_data"] == "inconclusive":
        assert doc["verdict"].startswith("needs: "), doc["verdict"]
    text = html(real, item_id)
    assert "tiny counts: indicative only" in text
    assert ("Built from disturbed runs" in text) == (doc["disturbed_runs"] > 0)
    if doc["disturbed_runs"] == doc["runs"]:
        assert doc["status"] == "inconclusive"
    if not doc["verdict"].startswith("needs: "):
        assert "not drawn" not in text  # a capped item's scaling figure has one line too few


def _agg(path: Path, metric: str) -> float:
    return json.loads(path.read_text())["metrics"][metric]["estimate"]


def test_real_numbers_are_the_files(real):
    """The verdicts' numbers are those of aggregate.json and saturation.json."""
    if not _real_items():
        skip_without("test-data", "no trimmed real run in tests/data/reproduce")
    doc = _real_page(real, "tailbench-table1")
    for app, v in doc["numbers"]["apps"].items():
        agg = next((real / "tailbench-table1" / f"apps-{app}").glob("points/*/aggregate.json"))
        assert v["ours_p95_ms"] == pytest.approx(_agg(agg, "sojourn.p95") / 1e6)
    doc = _real_page(real, "tailbench-fig4")
    for app, v in doc["numbers"]["apps"].items():
        # The run was capped at this host's one worker (scale.json): each thread count it ran
        # is that count's saturation.json, and with one count there is no scaling to state.
        sat = real / "tailbench-fig4" / f"fig4-{app}" / "saturation"
        for t, qps in v["saturation_qps"].items():
            doc_t = json.loads((sat / f"integrated-t{t}-q0" / "saturation.json").read_text())
            assert qps == pytest.approx(doc_t["qps"])
        assert (v["scaling"] is None) == (len(v["saturation_qps"]) < 2)
    doc = _real_page(real, "tales-fig5")
    pts = real / "tales-fig5" / "tales-fig5" / "points"
    none = _agg(next(pts.glob("*-case-none/aggregate.json")), "sojourn.p99")
    hog = _agg(next(pts.glob("*-case-hog/aggregate.json")), "sojourn.p99")
    assert doc["numbers"]["cases"]["hog"]["vs_none"] == pytest.approx(hog / none)
