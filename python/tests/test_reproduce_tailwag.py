"""The rules of TailWAG's case studies and the report's Table II (python/taillab/reproduce/rules/)
on hand-built results folders (the
fixtures of test_reproduce.py): TailWAG's case studies (Fig. 9), its real-time throttling
(Fig. 3) and the profiling report's resource table (Table II), each driven either way."""

from __future__ import annotations

import pytest
from test_reproduce import MS, US, _stats, experiment, html, page, point

from taillab.reproduce.rules import profiling as P
from taillab.reproduce.rules import tailwag_studies as T

GiB, MiB = 2**30, 2**20


# --- Fig. 9 ---------------------------------------------------------------------------------------


def _case_points(cases: dict[str, dict], qps_of) -> list[dict]:
    """One point per case (and rate): ``cases[name]`` gives its sojourn statistics (and a
    measured ÷ ideal p99 as ``ratio``)."""
    out = []
    for i, (name, v) in enumerate(cases.items()):
        for q in qps_of(name):
            st = v[q] if q in v else v
            out.append(
                point(
                    f"integrated-t1-q{q:.0f}-case-{i}",
                    qps=q,
                    axes={"case": name},
                    soj=_stats(**{k: st[k] for k in ("mean", "p50", "p95", "p99") if k in st}),
                    ratio={"p99": st.get("ratio", 1.0)},
                )
            )
    return out


def _fig9(root, accelerator_p95=120 * US):
    dnn = {  # saturation, p99 at half of it, measured ÷ ideal p99
        "img-dnn as measured": dict(sat=2000.0, mean=0.5 * MS, p99=1 * MS, ratio=1.05),
        "1.7x faster": dict(sat=3300.0, mean=0.3 * MS, p99=0.6 * MS, ratio=1.1),
        "70x faster": dict(sat=60000.0, mean=10 * US, p99=40 * US, ratio=2.0),
    }
    pts = _case_points(dnn, lambda n: [dnn[n]["sat"] * 0.5])
    sat = {f"integrated-t1-q0-case-{i}": v["sat"] for i, v in enumerate(dnn.values())}
    experiment(root / T.TW9_DNN, pts, fractions=[0.5], sat=sat)
    p95 = {"none": 100 * US, "mix": 200 * US, "sep": 105 * US, "accelerator": accelerator_p95}
    noise = {
        c: {q: dict(p95=v * q / 14000, mean=v / 4) for q in (4000, 14000)} for c, v in p95.items()
    }
    experiment(root / T.TW9_NOISE, _case_points(noise, lambda n: [4000, 14000]))
    gc = {
        "no pauses": dict(p50=20 * US, p95=60 * US, p99=100 * US),
        "G1 pauses": dict(p50=21 * US, p95=70 * US, p99=5 * MS),
        "Parallel pauses": dict(p50=22 * US, p95=2 * MS, p99=20 * MS),
    }
    gc = {c: {q: v for q in (14000, 35000)} for c, v in gc.items()}
    experiment(root / T.TW9_GC, _case_points(gc, lambda n: [14000, 35000]))


def test_fig9_three_case_studies(tmp_path):
    """(a) 1.7x faster saturates 1.65x higher and the 70x faster model sits 1.9x further above
    its ideal; (b) the accelerator closes 80 % of MIX's gap; (c) pauses set the p99, not the
    median: confirmed. An accelerator that closes a tenth of it fails the claim."""
    _fig9(tmp_path / "tailwag-fig9")
    doc = page(tmp_path, "tailwag-fig9")
    n = doc["numbers"]
    assert doc["status"] == "confirmed", doc["verdict"]
    assert n[T.TW9_DNN]["1.7x faster"]["sat_vs_measured"] == pytest.approx(1.65)
    assert n[T.TW9_DNN]["disturbance"] == pytest.approx(2.0 / 1.05)
    assert n[T.TW9_NOISE]["qps"] == 14000 and n[T.TW9_NOISE]["accelerator_closes"] == (
        pytest.approx(0.8)
    )
    assert n[T.TW9_GC]["qps"] == 14000
    assert "closes 80 % of MIX's gap" in doc["verdict"]
    assert "silo" in html(tmp_path, "tailwag-fig9")  # the paper's case studies beside ours
    for i in range(3):
        assert (tmp_path / "tailwag-fig9" / "figures" / f"case_{i}.png").exists()

    other = tmp_path / "b"
    _fig9(other / "tailwag-fig9", accelerator_p95=190 * US)
    doc = page(other, "tailwag-fig9")
    assert doc["status"] == "not confirmed", doc["verdict"]
    assert "accelerator closes ≥ 50% of the gap" in doc["verdict"]


# --- Fig. 3 ---------------------------------------------------------------------------------------


def _fig3(root, off_gaps: int):
    """Four seconds under each limit: the limit stalls 50 ms each second; -1 ``off_gaps``."""

    def case(i, name, gaps, p99, knob):
        long_gaps = [{"at_s": 0.3 + k, "length_ns": 50_000_000} for k in range(gaps)]
        stalls = {
            "gaps": 1000,
            "gap_p50_ns": 500,
            "gap_p99_ns": 5000,
            "longest_ns": 50_000_000 if gaps else 20_000,
            "longest_at_s": 0.3,
            "over_1ms": gaps,
            "over_1ms_total_ns": gaps * 50_000_000,
            "long_gaps": long_gaps,
        }
        tuning = {
            "applied": {
                "knobs": [
                    {"knob": "rt_runtime", "requested": knob, "before": "950000", "message": ""}
                ],
                "recovered": [],
            },
            "restore_failed": [],
        }
        return point(
            f"integrated-t1-q4000-case-{i}",
            qps=4000,
            axes={"case": name},
            soj=_stats(mean=p99 / 20, p95=p99 / 4, p99=p99),
            extra={"stalls": stalls, "duration_s": 4.0, "tuning": tuning},
        )

    experiment(
        root / "tailwag-fig3",
        [
            case(0, T.TW3_LIMIT, 4, 40 * MS, "950000"),
            case(1, T.TW3_OFF, off_gaps, 200 * US, "-1"),
        ],
    )


def test_fig3_the_limit_stalls_and_minus_one_removes_it(tmp_path):
    _fig3(tmp_path / "tailwag-fig3", off_gaps=0)
    doc = page(tmp_path, "tailwag-fig3")
    cases = doc["numbers"]["cases"]
    assert doc["status"] == "confirmed", doc["verdict"]
    assert cases[T.TW3_LIMIT]["stall_ms_per_s"] == pytest.approx(50.0)
    assert cases[T.TW3_LIMIT]["stalls_per_s"] == pytest.approx(1.0)
    assert cases[T.TW3_LIMIT]["rt_runtime"] == "950000"
    assert cases[T.TW3_OFF]["stall_ms_per_s"] == 0 and doc["numbers"]["left"] == 0
    assert "stalled 50 ms a second" in doc["verdict"]
    assert (tmp_path / "tailwag-fig3" / "figures" / "stall_timeline.png").exists()
    assert "950000 µs of each 1000000" in html(tmp_path, "tailwag-fig3")

    # A kernel whose -1 still stalls the worker (the same 50 ms a second) does not confirm it.
    other = tmp_path / "b"
    _fig3(other / "tailwag-fig3", off_gaps=4)
    doc = page(other, "tailwag-fig3")
    assert doc["status"] == "not confirmed", doc["verdict"]
    assert doc["numbers"]["left"] == pytest.approx(1.0)


# --- Table II -------------------------------------------------------------------------------------


def _table2(root, rss: dict[str, float], cpu_ms: dict[str, float]):
    """Table I's runs whose harness used ``rss[app]`` bytes and ``cpu_ms[app]`` of CPU per
    request (1000 requests in 10 s)."""
    for app in (*P.T2_CPU_APPS, *P.T2_MEM_APPS):
        harness = {
            "pid": 1,
            "cpu_pct": 100 * 1000 * cpu_ms[app] / 1e3 / 10,
            "rss_max_bytes": rss[app],
            "minflt": 1000,
            "majflt": 0,
            "vol_cs": 2000,
            "invol_cs": 10,
        }
        extra = {
            "environment": {"harness": harness},
            "duration_s": 10.0,
            "requests": {"measured": 1000},
        }
        experiment(
            root / f"apps-{app}",
            [point("integrated-t1-q100", app=app, qps=100, extra=extra)],
        )


def test_table2_memory_and_cpu_intensive_apps(tmp_path):
    rss = {a: 100 * MiB for a in P.T2_CPU_APPS} | {a: 2 * GiB for a in P.T2_MEM_APPS}
    cpu = {a: 2.0 for a in P.T2_CPU_APPS} | {a: 0.05 for a in P.T2_MEM_APPS}
    _table2(tmp_path / "tailbench-table1", rss, cpu)
    (tmp_path / "profiling-table2").mkdir()
    doc = page(tmp_path, "profiling-table2", reuse=tmp_path / "tailbench-table1")
    n = doc["numbers"]
    assert doc["status"] == "confirmed", doc["verdict"]
    assert n["median_rss"]["mem"] == 2 * GiB and n["median_rss"]["cpu"] == 100 * MiB
    assert n["median_cpu_per_request_ns"]["cpu"] == pytest.approx(2 * MS)
    assert n["apps"]["kv"]["cpu_pct"] == pytest.approx(0.5)
    assert "masstree" in html(tmp_path, "profiling-table2")
    assert (tmp_path / "profiling-table2" / "figures" / "rss.png").exists()
    assert doc["runs"] == 8

    other = tmp_path / "b"
    swapped = {a: 100 * MiB for a in P.T2_MEM_APPS} | {a: 2 * GiB for a in P.T2_CPU_APPS}
    _table2(other / "tailbench-table1", swapped, cpu)
    (other / "profiling-table2").mkdir(parents=True)
    doc = page(other, "profiling-table2", reuse=other / "tailbench-table1")
    assert doc["status"] == "not confirmed", doc["verdict"]
    assert doc["numbers"]["rss_spearman"] < 0
