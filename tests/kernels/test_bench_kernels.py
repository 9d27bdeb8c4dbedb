"""The benchmark suite: every registered case's bench specs, timed on the GPU with --bench.

    pytest --target=cuda --bench [--portcheck-report=DIR] [-n N: one GPU per worker]

Without --bench this collects one skipped item. Figures land in DIR/results.jsonl and DIR/bench.md.
"""
import pytest

from portcheck import cases


def test_portcheck_bench(portcheck_bench_spec, portcheck_bench):
    name, spec = portcheck_bench_spec
    r = portcheck_bench.bench(cases.get(name), spec)
    if r.verdict == "error":
        pytest.fail(f"{name} {r.variant}: {r.message}\n  rerun: {r.reproduce}", pytrace=False)
    if r.verdict == "skip":    # an override says this target cannot run it (e.g. FNUZ fp8 on NVIDIA)
        pytest.skip(r.message)
    assert r.time_ms is not None and r.time_ms > 0, "a benchmark must report a positive time"
    assert r.bench["kernel"]["n"] >= 3, "a figure needs several repeats to state a spread"
