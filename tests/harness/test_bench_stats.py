"""Timing statistics, rotation and repeat planning (portcheck/speed/timing.py), without a GPU."""
import math
import statistics

import pytest

from portcheck.speed.timing import (EVENT_RESOLUTION_MS, Rotation, Stats, Timing, agree, graph_calls,
                             figure_rounds, interleave, quantile, repeats_within, round_order, round_sizes,
                             rotation_sets, summarize)


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
    from portcheck.speed import timing as bench
    monkeypatch.setattr(bench, "warm_up", lambda fn, calls: None)
    monkeypatch.setattr(bench, "capture_graph", lambda fn, calls: object())
    monkeypatch.setattr(bench, "replay_samples", lambda graph, repeats, calls: [0.02] * repeats)
    monkeypatch.setattr(bench, "flushed_estimate_ms", lambda fn: 0.13)
    monkeypatch.setattr(bench, "do_bench_samples", lambda fn, repeats, per: [0.13] * repeats)
    for events_ms, graph_ms, method in ((0.13, 0.025, "cuda_graph"),    # host-bound: replay
                                        (0.13, 0.12, "do_bench"),       # GPU-bound, long: do_bench
                                        (0.13, None, "do_bench"),       # not capturable
                                        (0.01, 0.009, "cuda_graph")):   # short: replay as before
        monkeypatch.setattr(bench, "estimate_ms", lambda fn, calls, e=events_ms: e)
        monkeypatch.setattr(bench, "graph_estimate_ms", lambda fn, calls, g=graph_ms: g)
        t = bench.time_callables([lambda: None], repeats=10)
        assert t.method == method, (events_ms, graph_ms)
        assert ("host-bound" in t.note) == (method == "cuda_graph" and events_ms > 0.1)


def test_rounds_split_the_repeats_evenly_and_alternate_their_order():
    assert figure_rounds([100, 100, 100]) == 6
    assert figure_rounds([100, 40, 20]) == 4           # the fewest repeats fill 4 rounds of 5
    assert figure_rounds([100, 15]) == 2               # 3 rounds would not pair up
    assert figure_rounds([100, 9]) == 1 and figure_rounds([]) == 1
    assert round_sizes(100, 5) == [20] * 5
    assert round_sizes(9, 5) == [2, 2, 2, 2, 1] and sum(round_sizes(9, 5)) == 9
    assert round_sizes(3, 5) == [1, 1, 1]          # never an empty round
    assert round_sizes(7, 1) == [7]
    assert round_order(["k", "a", "b"], 0) == ["k", "a", "b"]
    assert round_order(["k", "a", "b"], 1) == ["b", "a", "k"]


class _Clocked:
    """A stand-in timer on a clock that slows every sample by 0.1%: a GPU heating up."""

    def __init__(self, name, base_ms, clock, log, repeats=10, fail_in_round=None):
        self.name, self.base, self.clock, self.log = name, base_ms, clock, log
        self.repeats, self.fail_in_round = repeats, fail_in_round
        self.method, self.sets, self.calls, self.note, self.resolution_ms = "do_bench", 1, 1, "", 1e-4
        self.rounds = 0

    def sample(self, n):
        self.log.append(self.name)
        self.rounds += 1
        if self.rounds == self.fail_in_round:
            raise RuntimeError("launch failed")
        out = []
        for _ in range(n):
            self.clock[0] *= 1.001
            out.append(self.base * self.clock[0])
        return out

    def close(self):
        pass


def test_interleaved_rounds_share_the_drift_and_isolate_a_failure(monkeypatch):
    """Timed one after another, a kernel and an identical repeat on a slowing clock disagree by
    the drift; in interleaved rounds they agree, the baseline's ratio stays near the true 2x, and
    the round medians show the drift."""
    from portcheck.speed import timing as bench
    monkeypatch.setattr(bench, "_torch", lambda: type("T", (), {"cuda": type("C", (), {
        "synchronize": staticmethod(lambda: None)})}))
    clock, log = [1.0], []
    one_after_another = {n: interleave({n: _Clocked(n, 1.0, clock, log, repeats=60)}, rounds=1)[n]
                         for n in ("kernel", "repeat")}
    assert not agree(one_after_another["kernel"].stats, one_after_another["repeat"].stats)

    clock, log = [1.0], []
    timers = {"kernel": _Clocked("kernel", 1.0, clock, log, repeats=60),
              "repeat": _Clocked("repeat", 1.0, clock, log, repeats=60),
              "torch": _Clocked("torch", 2.0, clock, log, repeats=60),
              "broken": _Clocked("broken", 1.0, clock, log, repeats=60, fail_in_round=2)}
    out = interleave(timers, rounds=6)
    assert log[:8] == ["kernel", "repeat", "torch", "broken", "broken", "torch", "repeat", "kernel"]
    assert log.count("broken") == 2 and log.count("kernel") == 6    # no more rounds once it failed
    assert isinstance(out["broken"], RuntimeError)
    k, rep, base = out["kernel"], out["repeat"], out["torch"]
    assert isinstance(k, Timing) and k.stats.n == 60 and len(k.round_medians_ms) == 6
    assert agree(k.stats, rep.stats)
    assert abs(base.stats.median_ms / k.stats.median_ms - 2.0) < 0.01   # one after another: 2.25
    assert k.drift > 0.1 and k.to_dict()["rounds"] == 6    # the clock slowed 21% over the figure
