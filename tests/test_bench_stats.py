"""Timing statistics, rotation and repeat planning (portcheck/bench.py), without a GPU."""
import math
import statistics

import pytest

from portcheck.bench import (EVENT_RESOLUTION_MS, Rotation, Stats, agree, graph_calls, quantile,
                             repeats_within, rotation_sets, summarize)


def test_quantile_matches_linear_interpolation():
    xs = [1.0, 2.0, 3.0, 4.0, 10.0]
    assert quantile(xs, 0.0) == 1.0 and quantile(xs, 1.0) == 10.0
    assert quantile(xs, 0.5) == 3.0
    assert quantile(xs, 0.25) == 2.0 and quantile(xs, 0.75) == 4.0
    assert quantile([1.0, 2.0], 0.5) == 1.5
    # same as statistics.quantiles(method="inclusive")
    data = sorted([0.9, 1.3, 1.1, 5.0, 0.7, 1.0, 1.2])
    assert math.isclose(quantile(data, 0.25), statistics.quantiles(data, n=4, method="inclusive")[0])
    with pytest.raises(ValueError):
        quantile([], 0.5)
    with pytest.raises(ValueError):
        quantile([1.0], 1.5)


def test_summarize_median_spread_and_extremes():
    s = summarize([0.12, 0.10, 0.11, 0.10, 0.13, 0.10, 0.50])
    assert s.n == 7 and s.median_ms == 0.11 and s.min_ms == 0.10 and s.max_ms == 0.50
    assert math.isclose(s.q1_ms, 0.10) and math.isclose(s.q3_ms, 0.125)
    assert math.isclose(s.iqr_ms, 0.025) and math.isclose(s.rel_spread, 0.025 / 0.11)
    # one outlier moves the mean, not the median or the spread
    assert s.mean_ms > s.median_ms
    d = s.to_dict()
    assert d["rel_spread"] == s.rel_spread and Stats.from_dict(d) == s


def test_summarize_refuses_faulty_samples():
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        summarize([1.0, float("nan")])
    with pytest.raises(ValueError):
        summarize([1.0, -0.1])


def test_noise_bound_flags_wide_spreads():
    steady = summarize([1.00, 1.01, 0.99, 1.00, 1.02])
    jumpy = summarize([1.0, 1.5, 1.0, 1.5, 1.0, 1.5])
    assert not steady.noisy(0.05)
    assert jumpy.noisy(0.05) and jumpy.rel_spread == pytest.approx(0.5 / 1.25)


def test_agreement_uses_the_larger_spread_or_the_timer_resolution():
    a = summarize([1.00, 1.02, 0.98, 1.01, 0.99])          # IQR 0.02
    b = summarize([1.015, 1.035, 0.995, 1.025, 1.005])     # shifted by 0.015 < 0.02
    c = summarize([1.10, 1.12, 1.08, 1.11, 1.09])          # shifted by 0.1 > 0.02
    assert agree(a, b) and agree(b, a)
    assert not agree(a, c)
    # identical samples: IQR 0, so the timer's resolution decides
    flat1, flat2 = summarize([0.05] * 5), summarize([0.05 + EVENT_RESOLUTION_MS / 2] * 5)
    assert agree(flat1, flat2)
    assert not agree(flat1, summarize([0.05 + 3 * EVENT_RESOLUTION_MS] * 5))


def test_rotation_sets_cover_four_l2_fulls_and_stop_above_twice_l2():
    l2 = 50 << 20
    assert rotation_sets(2 * l2, l2) == 1
    assert rotation_sets(10 * l2, l2) == 1
    assert rotation_sets(l2, l2) == 4
    assert rotation_sets(10 << 20, l2) == 20
    assert rotation_sets(1 << 10, l2) == 64           # capped
    assert rotation_sets(1 << 10, l2, most=8) == 8
    assert rotation_sets(2 * l2 - 1, l2) == 3          # just under twice L2: ceil(4 L2 / bytes)
    assert rotation_sets(3 * l2 // 2, l2) == 3
    assert rotation_sets(l2 * 19 // 10, l2) == 3
    assert rotation_sets(0, l2) == 64
    assert rotation_sets(100, 0) == 1                  # unknown L2: no rotation


def test_rotation_cycles_in_order_and_rewinds():
    seen = []
    rot = Rotation([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        rot()
    assert seen == [0, 1, 2, 0, 1, 2, 0] and len(rot) == 3
    rot.rewind()
    rot()
    assert seen[-1] == 0
    with pytest.raises(ValueError):
        Rotation([])


def test_graph_calls_are_whole_rotations_of_about_one_millisecond():
    assert graph_calls(0.005, 1) == 200
    assert graph_calls(0.005, 16) == 192 and graph_calls(0.005, 16) % 16 == 0
    assert graph_calls(0.0001, 1) == 2000              # capped
    assert graph_calls(5.0, 4) == 4                    # never fewer than one rotation
    assert graph_calls(0.0, 3) == 1998


def test_long_launches_get_fewer_repeats_within_the_budget():
    assert repeats_within(100, 0.1) == 100
    assert repeats_within(100, 50.0) == 40             # 2 s budget
    assert repeats_within(100, 1000.0) == 10           # never below 10
    assert repeats_within(5, 1000.0) == 5              # nor above what was asked
    assert repeats_within(100, 0.0) == 100


def test_host_bound_launches_are_timed_by_graph_replay(monkeypatch):
    """Events around back-to-back launches time the host when a Python launcher cannot keep the
    GPU fed; a graph replay much faster than them means the figure must come from replay."""
    from portcheck import bench
    stats = bench.summarize([0.02] * 10)
    monkeypatch.setattr(bench, "warm_up", lambda fn, calls: None)
    monkeypatch.setattr(bench, "time_graph", lambda fn, repeats, calls: stats)
    monkeypatch.setattr(bench, "time_do_bench", lambda fn, repeats, est: bench.summarize([0.13] * 10))
    for events_ms, graph_ms, method in ((0.13, 0.025, "cuda_graph"),    # host-bound: replay
                                        (0.13, 0.12, "do_bench"),       # GPU-bound, long: do_bench
                                        (0.13, None, "do_bench"),       # not capturable
                                        (0.01, 0.009, "cuda_graph")):   # short: replay as before
        monkeypatch.setattr(bench, "estimate_ms", lambda fn, calls, e=events_ms: e)
        monkeypatch.setattr(bench, "graph_estimate_ms", lambda fn, calls, g=graph_ms: g)
        t = bench.time_callables([lambda: None], repeats=10)
        assert t.method == method, (events_ms, graph_ms)
        assert ("host-bound" in t.note) == (method == "cuda_graph" and events_ms > 0.1)
