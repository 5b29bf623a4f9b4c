import numpy as np
import pytest
from hdrh.histogram import HdrHistogram

from taillab.errors import HlogError
from taillab.hlog import Dist, read_hlog, write_hlog


def _hist(values):
    h = HdrHistogram(1, 3600 * 10**9, 3)
    for v in values:
        h.record_value(int(v))
    return h


def test_quantiles_are_nearest_rank_like_the_rust_writer():
    # Oracle: the ceil(q*n)-th smallest raw sample, mapped to its bucket's highest value (what
    # the Rust hdrhistogram crate reports in summary.json).
    rng = np.random.default_rng(3)
    for n in (100, 976, 5000):
        vals = np.sort(rng.lognormal(11, 1.2, n).astype(int) + 1)
        h = _hist(vals)
        d = Dist.from_hdr(h)
        for q in (0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0):
            rank = max(1, int(np.ceil(round(q * n, 9))))
            assert d.quantile(q) == h.get_highest_equivalent_value(int(vals[rank - 1])), (n, q)
        assert d.total == n
        assert d.mean == pytest.approx(h.get_mean_value(), rel=1e-9)
        assert d.min == h.get_min_value() and d.max == h.get_max_value()


def test_merge_equals_histogram_of_union():
    rng = np.random.default_rng(4)
    a, b = rng.exponential(1e5, 2000) + 1, rng.exponential(1e6, 500) + 1
    merged = Dist.merge([Dist.from_hdr(_hist(a)), Dist.from_hdr(_hist(b))])
    union = Dist.from_hdr(_hist(np.concatenate([a, b])))
    assert np.array_equal(merged.lo, union.lo) and np.array_equal(merged.count, union.count)
    assert merged.quantile(0.99) == union.quantile(0.99)


def test_quantile_ci_covers_the_true_quantile_and_names_its_order_statistics():
    # Ranks: 10 000 samples, q = 0.999: B ~ Bin(10 000, 0.999) lies in [9 983, 9 996] with
    # probability ≥ 0.95, so the interval is the 9 983rd to the 9 997th smallest sample.
    assert Dist.from_values(np.arange(1, 10_001)).quantile_ci(0.999) == (9983.0, 9997.0)
    # Coverage over many exponential samples of 2 000: near 95 % (a ±1 SE interval covers
    # about 68 %; the 95 % interval of the mean rank instead, with the rank spread of n draws
    # misread, far less).
    rng = np.random.default_rng(5)
    truth = 1e5 * np.log(100)
    hits = 0
    for _ in range(400):
        lo, hi = Dist.from_values(rng.exponential(1e5, 2000).astype(int) + 1).quantile_ci(0.99)
        hits += lo <= truth <= hi
    assert 0.91 <= hits / 400 <= 0.99
    assert all(np.isnan(Dist.empty().quantile_ci(0.99)))


def test_quantile_rejects_out_of_range():
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dist.from_values(np.array([1, 2, 3])).quantile(99)


def test_empty_dist_is_nan():
    d = Dist.empty()
    assert d.total == 0 and np.isnan(d.quantile(0.5)) and np.isnan(d.mean)


def test_interval_log_roundtrip(tmp_path):
    ivs = [(10.0, 1.0, _hist([1000, 2000, 3000])), (11.0, 1.0, _hist([5000] * 7))]
    write_hlog(tmp_path / "x.hlog", ivs, "sojourn")
    got = read_hlog(tmp_path / "x.hlog")
    assert [iv.tag for iv in got] == ["sojourn", "sojourn"]
    assert [iv.start_s for iv in got] == [10.0, 11.0]  # relative to BaseTime
    assert [iv.dist.total for iv in got] == [3, 7]
    assert got[1].dist.quantile(0.5) == pytest.approx(5000, rel=1e-3)


def test_corrupt_log_names_the_line(tmp_path):
    p = tmp_path / "bad.hlog"
    p.write_text("#[StartTime: 1.0 (seconds since epoch)]\nTag=x,0.0,1.0,2.0,HISTnotbase64\n")
    with pytest.raises(HlogError, match=r"bad.hlog:2: cannot decode"):
        read_hlog(p)
    p.write_text("0.0,1.0\n")
    with pytest.raises(HlogError, match=r"bad.hlog:1: expected"):
        read_hlog(p)


def test_log_times_relative_to_base_time(tmp_path):
    # taillab writes BaseTime = start of the measured phase and interval starts relative to
    # it; a log whose first interval is not at 0 must keep its offset.
    h = _hist([1000]).encode().decode()
    p = tmp_path / "b.hlog"
    p.write_text(
        "#[StartTime: 1700000000.000 (seconds since epoch)]\n"
        "#[BaseTime: 1700000000.000 (seconds since epoch)]\n"
        f"Tag=sojourn,2.000,1.000,0.001,{h}\nTag=sojourn,3.000,1.000,0.001,{h}\n"
    )
    assert [iv.start_s for iv in read_hlog(p)] == [2.0, 3.0]
    # Without a BaseTime, absolute timestamps become offsets from the first interval.
    p.write_text(f"1700000002.000,1.000,0.001,{h}\n1700000003.000,1.000,0.001,{h}\n")
    assert [iv.start_s for iv in read_hlog(p)] == [0.0, 1.0]
