"""The interpreter's memory watch (portcheck.targets.interpreter_memory): races between the
programs of one launch, ordered and unordered, and loads of the guard bands whose values the
kernel discards; then the same bugs through `check`, and the diagnosis of state that a launcher
keeps from one launch to the next (portcheck.diagnose.state)."""
import os

import hypothesis
import pytest
import torch
import triton
import triton.language as tl

from portcheck import Case, guards, tolerance
from portcheck.runner import check
from portcheck.targets.interpreter_builder import builder
from portcheck.targets.interpreter_memory import Region, watching
from portcheck.targets.interpreter_order import shuffled
from portcheck.targets.runtime import INTERPRETER_ARCH

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET", "0") in ("", "0"),
                                reason="the memory watch is the interpreter's (--target=interpreter)")

ATOMIC, PLAIN, ARRIVALS, BY_INDEX = 0, 1, 2, 3


@triton.jit
def total_kernel(x_ptr, part_ptr, count_ptr, total_ptr, n, BLOCK: tl.constexpr, MODE: tl.constexpr,
                 PROGRAMS: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    part = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    if MODE == 0:      # ATOMIC
        tl.atomic_add(total_ptr, part)
    elif MODE == 1:    # PLAIN: a load and a store per program, updates lost on a GPU
        tl.store(total_ptr, tl.load(total_ptr) + part)
    else:
        tl.store(part_ptr + pid, part)
        if MODE == 2:  # ARRIVALS: the last program to arrive, by an atomic count, adds the partials
            last = tl.atomic_add(count_ptr, 1) == PROGRAMS - 1
        else:          # BY_INDEX: the program with the last index does, arrived or not
            last = pid == PROGRAMS - 1
        if last:
            total = 0.0
            for i in range(0, PROGRAMS):
                total += tl.load(part_ptr + i)
            tl.store(total_ptr, total)


def _total(mode: int, n: int = 100, block: int = 16) -> list[str]:
    x = torch.randn(n)
    programs = triton.cdiv(n, block)
    part, count, total = torch.zeros(programs), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
    with watching([]) as watch:
        total_kernel[(programs,)](x, part, count, total, n, BLOCK=block, MODE=mode, PROGRAMS=programs)
    return watch.findings


def test_an_atomic_total_is_no_race():
    assert _total(ATOMIC) == []


def test_a_plain_load_and_store_by_every_program_is_a_race():
    findings = _total(PLAIN)
    assert len(findings) == 1 and findings[0].startswith("race: program (0, 0, 0) loads")
    assert "program (1, 0, 0) stores to it" in findings[0] and "atomic" in findings[0]


def test_partials_read_after_an_arrival_count_are_ordered():
    assert _total(ARRIVALS) == []


def test_partials_read_by_the_last_index_without_an_arrival_count_race():
    # the interpreter runs the last index last, so the total is right there: only the watch sees it
    findings = _total(BY_INDEX)
    assert len(findings) == 1 and "stores to memory the launcher allocated" in findings[0]
    assert "loads it in the same launch" in findings[0]


def test_one_program_is_never_a_race():
    assert _total(PLAIN, n=10) == []


@triton.jit
def discard_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)                                 # no mask: reads past x's end
    tl.store(y_ptr + offs, tl.where(offs < n, x, 0.0), mask=offs < n)


def _watched_copy(kernel, n=20, block=32):
    """kernel(x, y, n, BLOCK) on a guarded input x of n floats and a guarded output y, watched."""
    args, groups = guards.rehome_inputs({"x": torch.randn(n)})
    out = guards.guarded_output("y", (n,), torch.float32, "cpu")
    with watching([Region(*s) for band in (out, *groups) for s in band.spans()]) as watch:
        kernel[(1,)](args["x"], out.tensor, n, BLOCK=block)
    return args, out, watch


def test_a_discarded_load_past_an_input_reads_its_guard_band():
    args, out, watch = _watched_copy(discard_kernel)
    assert torch.equal(out.tensor, torch.where(torch.arange(20) < 20, args["x"], 0.0))   # right all the same
    assert watch.findings == [
        "out-of-bounds read: program (0, 0, 0) loads 48 bytes after input x (from byte 0 past its end, "
        "in its guard band) with no lane masked off: on a GPU it may fault or read another allocation, "
        "whatever the outputs show: mask it"]


@triton.jit
def off_by_one_mask_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs <= n, other=0.0)    # <= : one lane past x's end
    tl.store(y_ptr + offs, x, mask=offs < n)


def test_a_load_whose_mask_leaves_a_lane_past_the_end_on_is_told_to_fix_its_mask():
    args, out, watch = _watched_copy(off_by_one_mask_kernel)
    assert torch.equal(out.tensor, args["x"])
    assert watch.findings == [
        "out-of-bounds read: program (0, 0, 0) loads 4 bytes after input x (from byte 0 past its end, "
        "in its guard band) in lanes the load's mask leaves on: on a GPU it may fault or read another "
        "allocation, whatever the outputs show: its mask must leave them off"]


@pytest.mark.parametrize("masked", [True, False])
def test_an_unmasked_atomic_past_an_output_is_out_of_bounds_though_it_changes_nothing(masked):
    # imported here: at collection it would register the planted cases, which the kernel suite
    # (tests/kernels/test_kernels.py, every registered case) would then run as its own
    from tests.support.planted_bugs import colsum_kernel
    x = torch.randn(3, 20)
    out = guards.guarded_output("y", (20,), torch.float32, "cpu")
    out.tensor.zero_()
    with watching([Region(*s) for s in out.spans()]) as watch:
        colsum_kernel[(3,)](x, out.tensor, 3, 20, MASKED=masked, BLOCK=32)
    assert not out.violations()   # the sentinel band holds its bytes still (-0.0 bands, a second launch's, would not)
    assert watch.findings == ([] if masked else [
        "out-of-bounds atomic: program (0, 0, 0) updates atomically 48 bytes after output y (from byte 0 "
        "past its end, in its guard band) with no lane masked off: on a GPU it may fault or change "
        "another allocation, whatever the outputs show: mask it"])


@triton.jit
def scoped_count_kernel(count_ptr, CTA: tl.constexpr):
    if CTA:
        tl.atomic_add(count_ptr, 1, scope="cta")
    else:
        tl.atomic_add(count_ptr, 1)


def test_an_atomic_of_scope_cta_is_no_atomic_between_programs():
    for cta, races in ((False, False), (True, True)):
        count = torch.zeros(1, dtype=torch.int32)
        with watching([]) as watch:
            scoped_count_kernel[(2,)](count, CTA=cta)
        assert bool(watch.findings) == races, watch.findings
    assert watch.findings[0].startswith('race: program (0, 0, 0) updates with an atomic of scope "cta" '
                                        "(atomic within its program only) memory the launcher allocated")


def test_the_watch_and_the_shuffled_order_nest_and_leave_the_builder_as_it_was():
    with watching([]) as watch, shuffled(7):
        x = torch.randn(100)
        part, count, total = torch.zeros(7), torch.zeros(1, dtype=torch.int32), torch.zeros(1)
        total_kernel[(7,)](x, part, count, total, 100, BLOCK=16, MODE=PLAIN, PROGRAMS=7)
    assert len(watch.findings) == 1 and watch.findings[0].startswith("race: ")
    own = {"set_grid_dim", "set_grid_idx", "create_masked_load", "create_masked_store", "create_atomic_rmw"}
    assert not own & set(vars(builder()))


# ---- through `check`: a user's case ----------------------------------------------------------

@triton.jit
def count_kernel(ids_ptr, counts_ptr, n, BLOCK: tl.constexpr, ATOMIC_ADD: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < n
    if ATOMIC_ADD:
        tl.atomic_add(counts_ptr + tl.load(ids_ptr + offs, mask=ok, other=0), 1, mask=ok)
    else:   # one id a program (BLOCK 1), counted with a plain load and store: lost updates on a GPU
        slot = counts_ptr + tl.load(ids_ptr + offs, mask=ok, other=0)
        tl.store(slot, tl.load(slot, mask=ok) + 1, mask=ok)


def _count_case(atomic: bool) -> Case:
    def inputs(dtype, max_elements):
        return hypothesis.strategies.fixed_dictionaries({
            "dtype": hypothesis.strategies.just(dtype), "n": hypothesis.strategies.integers(2, 40),
            "seed": hypothesis.strategies.integers(0, 9)})

    def make(spec, device):
        g = torch.Generator().manual_seed(spec["seed"])
        return {"ids": torch.randint(0, 4, (spec["n"],), generator=g, dtype=torch.int32).to(device)}

    def launch(args, outs):
        counts, ids = outs["counts"], args["ids"].contiguous()   # ids index memory: never poison
        counts.zero_()
        n = ids.numel()
        block = 16 if atomic else 1
        count_kernel[(triton.cdiv(n, block),)](ids, counts, n, BLOCK=block, ATOMIC_ADD=atomic)

    return Case(name=f"count_{'atomic' if atomic else 'plain'}", family="probe", dtypes=("int32",),
                inputs=inputs, make=make, outputs=lambda a: {"counts": ((4,), torch.int32)}, launch=launch,
                oracle=lambda a: {"counts": torch.bincount(a["ids"].long(), minlength=4).to(torch.int32)},
                tolerance=lambda a, refs, dtype: {"counts": tolerance.exact("integer counts")})


SEARCH = hypothesis.settings(max_examples=6, derandomize=True, deadline=None, database=None,
                             phases=[hypothesis.Phase.explicit, hypothesis.Phase.generate],
                             suppress_health_check=list(hypothesis.HealthCheck))


def test_lost_updates_of_an_integer_count_fail_as_a_race_where_the_outputs_are_right():
    plain = check(_count_case(False), "interpreter", INTERPRETER_ARCH, "int32", settings=SEARCH, max_elements=4096)
    assert plain.verdict == "fail", plain.message
    assert plain.message.startswith("race: program (")
    assert "loads output counts's element" in plain.message
    assert plain.diagnosis[0]["cause"].startswith("programs of one launch touch the same memory")
    atomic = check(_count_case(True), "interpreter", INTERPRETER_ARCH, "int32", settings=SEARCH, max_elements=4096)
    assert atomic.verdict == "pass", atomic.message


def test_a_launch_left_unwatched_is_said_in_the_passing_record(monkeypatch):
    from portcheck.targets import interpreter_memory
    monkeypatch.setattr(interpreter_memory, "MAX_BYTES", 8)   # every launch accesses more than 8 bytes
    r = check(_count_case(False), "interpreter", INTERPRETER_ARCH, "int32", settings=SEARCH, max_elements=4096)
    assert r.verdict == "pass", r.message   # the race goes unseen, and the record says why
    assert "the memory watch left a launch unwatched: it accesses more than 8 bytes (" in r.message
    assert f"examples of {r.examples})" in r.message


# ---- state kept between launches -------------------------------------------------------------

@triton.jit
def accumulate_kernel(x_ptr, ws_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    s = tl.load(ws_ptr) + tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    tl.store(ws_ptr, s)                                       # ws is assumed to hold zero
    tl.store(y_ptr, s)


def test_a_workspace_never_reset_is_named_as_state_kept_between_launches():
    workspace = torch.zeros(1)   # the launcher's cache, never zeroed again: the bug

    def inputs(dtype, max_elements):
        return hypothesis.strategies.fixed_dictionaries({"dtype": hypothesis.strategies.just(dtype),
                                                         "n": hypothesis.strategies.integers(1, 30)})

    case = Case(name="stale_sum", family="probe", dtypes=("fp32",), inputs=inputs,
                make=lambda spec, device: {"x": torch.linspace(-1, 2, spec["n"], device=device)},
                outputs=lambda a: {"y": ((1,), torch.float32)},
                launch=lambda a, o: accumulate_kernel[(1,)](a["x"], workspace, o["y"], a["x"].numel(), BLOCK=32),
                oracle=lambda a: {"y": a["x"].sum().reshape(1)},
                tolerance=lambda a, refs, dtype: {"y": tolerance.Tolerance(atol=1e-5, rtol=1e-5, formula="test")})
    r = check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=4096)
    assert r.verdict == "fail", r.message
    assert r.diagnosis[0]["cause"].startswith("state kept from one launch to the next")
    assert "its programs in the same order both times" in r.diagnosis[0]["evidence"]


@triton.jit
def last_arriver_kernel(x_ptr, count_ptr, y_ptr, n, BLOCK: tl.constexpr, PROGRAMS: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(y_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0))
    if tl.atomic_add(count_ptr, 1) == PROGRAMS - 1:   # the last to arrive finishes; the count is
        tl.store(y_ptr, tl.atomic_add(y_ptr, 0.0) * 2)  # never reset, so no later launch finishes


def test_a_count_never_reset_that_stops_later_launches_finishing_is_named_as_state():
    counts = {}   # the launcher's cache, one count per program count, zeroed once: the bug

    def launch(a, o):
        programs = triton.cdiv(a["x"].numel(), 16)
        o["y"].zero_()
        count = counts.setdefault(programs, torch.zeros(1, dtype=torch.int32))
        last_arriver_kernel[(programs,)](a["x"], count, o["y"], a["x"].numel(), BLOCK=16, PROGRAMS=programs)

    def inputs(dtype, max_elements):
        return hypothesis.strategies.fixed_dictionaries({"dtype": hypothesis.strategies.just(dtype),
                                                         "n": hypothesis.strategies.integers(1, 60)})

    case = Case(name="stale_count", family="probe", dtypes=("fp32",), inputs=inputs,
                make=lambda spec, device: {"x": torch.linspace(-1, 2, spec["n"], device=device)},
                outputs=lambda a: {"y": ((1,), torch.float32)}, launch=launch, nondeterministic=True,
                oracle=lambda a: {"y": 2 * a["x"].sum().reshape(1)},
                tolerance=lambda a, refs, dtype: {"y": tolerance.Tolerance(atol=1e-5, rtol=1e-5, formula="test")})
    r = check(case, "interpreter", INTERPRETER_ARCH, "fp32", settings=SEARCH, max_elements=4096)
    assert r.verdict == "fail", r.message
    # every launch after the first leaves y as its sum, not twice it: the two diagnosis launches
    # agree, and the input that was right at its first launch is wrong now
    assert r.diagnosis[0]["cause"].startswith("state kept from one launch to the next"), r.diagnosis
    assert "an input whose first launch was right earlier in this check is wrong" in r.diagnosis[0]["evidence"]


@triton.jit
def reverse_kernel(x_ptr, ws_ptr, y_ptr, BLOCK: tl.constexpr, BARRIER: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(ws_ptr + offs, tl.load(x_ptr + offs))
    if BARRIER:
        tl.debug_barrier()
    tl.store(y_ptr + offs, tl.load(ws_ptr + BLOCK - 1 - offs))   # each element reads another's store


@pytest.mark.parametrize("barrier", [True, False])
def test_elements_of_one_program_exchanging_through_memory_need_a_barrier(barrier):
    x, ws, y = torch.randn(128), torch.empty(128), torch.empty(128)
    with watching([]) as watch:
        reverse_kernel[(1,)](x, ws, y, BLOCK=128, BARRIER=barrier)
    assert torch.equal(y, x.flip(0))   # right on the interpreter either way
    assert watch.findings == ([] if barrier else [
        "race within a program: program (0, 0, 0) stores memory the launcher allocated (no argument of the "
        "case) from element 0 of its block and loads it into element 127 with no tl.debug_barrier() between: "
        "on a GPU other threads (warps) may hold the two elements, and the load may run before the store lands"])


@triton.jit
def scalar_then_block_kernel(ws_ptr, y_ptr, BLOCK: tl.constexpr):
    tl.store(ws_ptr + 1, 2.0)   # a scalar: Triton stores it once; the block's load below reads it
    offs = tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(ws_ptr + offs))


def test_a_scalar_stored_then_loaded_as_part_of_a_block_is_no_race_within_a_program():
    ws, y = torch.zeros(4), torch.empty(4)
    with watching([]) as watch:
        scalar_then_block_kernel[(1,)](ws, y, BLOCK=4)
    assert watch.findings == [] and y.tolist() == [0.0, 2.0, 0.0, 0.0]
