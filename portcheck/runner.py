"""Where cases meet targets: make inputs, poison outputs, launch, compute the oracle, compare.

`check()` drives a hypothesis search over a case's input strategy on one target and dtype and
returns one Result; `replay()` runs exactly one recorded spec again.
"""
from __future__ import annotations

import contextlib
import functools
import json
import math
import shlex
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis
import torch

from . import as_arch as forcing
from . import autotuned, guards, precompile
from . import strategies as S
from .cases import Case, CaseContractError, cases_flag, contract_errors, float64_args, launched_in_place
from .compare import Comparison, compare, compare_launches, flat_to_index
from .compile.worker import first_error_line
from .diagnose import diagnose
from .diagnose.finding import REPRODUCED, Finding
from .dtypes import fmt
from .errors import UsageError
from .facts import device as facts_device
from .frames import kernel_line
from .overrides import Override
from .results import PHASES, Result
from .targets import interpreter_lanes
from .targets.interpreter_grid import GridTooLarge, excess, limited
from .targets.runtime import TARGETS

SHRINK_SHARE = 0.8   # of the per-case time limit the search may use: the rest is for digests and the record

def poisoned(shape, dtype: torch.dtype, device: str) -> torch.Tensor:
    """An output buffer pre-filled so that any element the kernel never writes is caught: a NaN
    with a payload no arithmetic makes for floats (portcheck.guards.OUTPUT_POISON), a value the
    kernels never produce (type minimum) for integers."""
    return guards.poison_output(torch.empty(shape, dtype=dtype, device=device))


@dataclass(frozen=True)
class Checks:
    """What each example checks beyond its outputs' values."""
    guards: bool = True     # guard bands around outputs and inputs (off only to diagnose)
    launches: int = 2       # launches on the same inputs, compared bit for bit
    sanitize: str | None = None   # the worker runs under this sanitizer tool (portcheck/sanitize.py)

    def flags(self) -> list[str]:
        """The command-line options that select these checks (none for the defaults)."""
        return ((["--no-guards"] if not self.guards else [])
                + (["--launches", str(self.launches)] if self.launches != Checks.launches else [])
                + (["--sanitize", self.sanitize] if self.sanitize else []))


CHECKS = Checks()   # this process's checks: `portcheck run` and the pytest plugin set them
REPLAY_FLAGS: tuple[str, ...] = ()   # what else a replay needs of the command line: --raw-interpreter,
                                     # --matrix, --profile


def replay_flags(target: str, raw_interpreter: bool, matrix: str | None, profile: str | None) -> list[str]:
    """The options of a command line (portcheck run's, pytest's) that a printed replay repeats:
    Triton's own interpreter numerics (on the interpreter), the matrix (its budgets and overrides,
    as an absolute path) and the profile."""
    return ((["--raw-interpreter"] if raw_interpreter and target == "interpreter" else [])
            + (["--matrix", str(Path(matrix).resolve())] if matrix else [])
            + (["--profile", profile] if profile else []))


def configure(checks: Checks, replay_flags=()) -> None:
    """This process's checks, and the options of its command line that a printed replay must
    repeat to reproduce (Triton's own interpreter numerics, the matrix's budgets and overrides,
    the profile)."""
    global CHECKS, REPLAY_FLAGS
    if checks.launches < 1:
        raise UsageError(f"--launches must be at least 1, got {checks.launches}")
    CHECKS, REPLAY_FLAGS = checks, tuple(replay_flags)


def oracle_device(target_name: str) -> str:
    """float64 references run on the device when it has float64 (CUDA and ROCm GPUs do)."""
    return TARGETS[target_name].device


def synchronize(target_name: str) -> None:
    if TARGETS[target_name].is_gpu:
        torch.cuda.synchronize()


class PhaseClock:
    """Seconds per phase of one check. The first launch of the check counts as "compile" (it
    JIT-compiles the kernel); once a failure is seen, everything counts as "shrink" (the runner
    then records the search's wall time from there, the gaps between examples included)."""

    def __init__(self, target_name: str | None = None):
        self.target_name = target_name   # None: a clock that records nothing
        self.seconds: dict[str, float] = {}
        self.shrinking = False

    @contextlib.contextmanager
    def timing(self, phase: str):
        if self.target_name is None:
            yield
            return
        if self.shrinking:
            phase = "shrink"
        elif phase == "launches" and "compile" not in self.seconds:
            phase = "compile"
        start = time.perf_counter()
        try:
            yield
            synchronize(self.target_name)   # a GPU's work is done before the clock is read
        finally:
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def rounded(self) -> dict[str, float]:
        return {p: round(self.seconds[p], 4) for p in PHASES if p in self.seconds}


NO_CLOCK = PhaseClock()


def _outputs(case: Case, args: dict, device: str, guarded: bool, launch: int = 0):
    """Fresh poisoned outputs, and their guard bands (none when guards are off): of the sentinel
    byte on a first launch, of -0.0 around float outputs on the next (guards.NEGATIVE_ZERO)."""
    shapes = case.outputs(args)
    if not guarded:
        return {n: poisoned(shape, dtype, device) for n, (shape, dtype) in shapes.items()}, []
    bands = [guards.guarded_output(n, shape, dtype, device, negative_zero=launch % 2 == 1)
             for n, (shape, dtype) in shapes.items()]
    return {b.name: b.tensor for b in bands}, bands


def order_seed(spec: dict) -> int:
    """The seed of the shuffled program order on the interpreter: a function of the spec, so a
    replay of the spec runs the programs in the same order."""
    return zlib.crc32(json.dumps(spec, sort_keys=True, default=str).encode())


def _program_order(target_name: str, spec: dict, launch: int):
    """Launches after the first run the interpreter's programs in a shuffled order (a GPU's
    scheduler varies the order by itself)."""
    if launch == 0 or TARGETS[target_name].is_gpu:
        return contextlib.nullcontext()
    from .targets.interpreter_order import shuffled
    return shuffled(order_seed(spec) + launch)


def _quiet_arithmetic(target_name: str):
    """The interpreter computes in numpy, which warns at every overflow or invalid operation (a
    softmax without its max subtraction prints dozens, its diagnosis more); the comparison
    reports what they did to the outputs. Around every evaluation (checks, digests) and a
    failure's diagnosis."""
    if TARGETS[target_name].is_gpu:
        return contextlib.nullcontext()
    import numpy
    return numpy.errstate(all="ignore")


GRID_HINT = "a grid no GPU launches: "


def _grid_limits(target_name: str):
    """On the interpreter, grids past a GPU's limits refused (targets.interpreter_grid)."""
    return contextlib.nullcontext() if TARGETS[target_name].is_gpu else limited()


def _hints_checked(target_name: str):
    """On the interpreter, the kernel's compiler hints held against their values
    (targets.interpreter_hints); a GPU's compiler trusts them."""
    if TARGETS[target_name].is_gpu:
        return contextlib.nullcontext()
    from .targets.interpreter_hints import checking
    return checking()


NOTE = "note"   # a passing comparison that says something of the launch (a launch left unwatched)


def _memory_watch(target_name: str, launch: int, checks: Checks, bands: list):
    """The first launch of an example on the interpreter, watched for races and loads of the guard
    bands (targets.interpreter_memory): what it finds joins the guard bands' findings. A GPU runs
    the kernel unwatched: no tool sees its global memory so (compute-sanitizer's racecheck, under
    `--sanitize`, watches shared memory)."""
    if launch or not checks.guards or TARGETS[target_name].is_gpu:
        return contextlib.nullcontext()
    from .targets.interpreter_memory import Region, watching
    return watching([Region(*s) for band in bands for s in band.spans()])


def _conversions_watched(target_name: str, launch: int, checks: Checks):
    """The first launch of an example on the interpreter, its float-to-integer conversions watched
    for values no vendor defines (targets.interpreter_conversions)."""
    if launch or not checks.guards or TARGETS[target_name].is_gpu:
        return contextlib.nullcontext()
    from .targets.interpreter_conversions import watching
    return watching()


def _another_lowering(case: Case, target_name: str, args: dict, first: dict, lines: list[str]) -> list[str]:
    """Where the first launch converted NaN, inf or out-of-range floats to integers: the example
    once more with those conversions lowered the other legal way; each output that changes is a
    finding (targets.interpreter_conversions)."""
    from .targets.interpreter_conversions import another_lowering, differs
    outs, _ = _outputs(case, args, TARGETS[target_name].device, False)
    with launched_in_place(case, args, outs), guards.poisoned_allocations(), _grid_limits(target_name), \
            another_lowering():
        case.launch(args, outs)
    return [m for m in (differs(name, first[name], outs[name], lines) for name in first if name in outs) if m]


def _launch_all(case: Case, target_name: str, spec: dict, args: dict, checks: Checks,
                input_bands: list, clock: PhaseClock = NO_CLOCK) -> tuple[list[dict], list[str], int, list[str]]:
    """Every launch's outputs, the guard violations seen, how many tensors the launcher
    allocated itself (torch.empty and kin, poisoned: guards.poisoned_allocations), and the notes
    on the launches (why the memory watch left one unwatched, a contiguity hint broken)."""
    device = TARGETS[target_name].device
    runs, violations, allocated, notes = [], [], 0, []
    for launch in range(checks.launches):
        with clock.timing("launches"):
            outs, bands = _outputs(case, args, device, checks.guards, launch)
            try:
                with launched_in_place(case, args, outs), _program_order(target_name, spec, launch), \
                        guards.poisoned_allocations() as allocations, \
                        _memory_watch(target_name, launch, checks, [*bands, *input_bands]) as watch, \
                        _grid_limits(target_name), _hints_checked(target_name) as hints, \
                        _conversions_watched(target_name, launch, checks) as conversions:
                    case.launch(args, outs)
            except GridTooLarge as exc:   # the interpreter refused the grid before its first program
                violations.append(f"{GRID_HINT}{exc}; the launch did not run")
                conversions = None
            synchronize(target_name)
            allocated += allocations.allocated
            violations += [v for v in allocations.violations() if v not in violations]
            if hints is not None:
                violations += [h for h in hints.broken if h not in violations]
                notes += hints.notes
            if watch is not None:
                violations += [f for f in watch.findings if f not in violations]
                notes += [f"the memory watch left a launch unwatched: {why}" for why in watch.unwatched]
        runs.append(outs)
        with clock.timing("compare"):
            for band in [*bands, *input_bands]:
                violations += [v for v in band.violations() if v not in violations]
        _restore_in_place(input_bands)   # the next launch sees the same guards and gaps
        if conversions is not None and conversions.lines:
            with clock.timing("launches"):
                violations += _another_lowering(case, target_name, args, outs, conversions.lines)
            _restore_in_place(input_bands)
    return runs, violations, allocated, notes


def _restore_in_place(input_bands: list) -> None:
    """The inputs a launch updates in place, back to what they held before it."""
    for band in input_bands:
        if band.in_place:
            band.raw.copy_(band.snapshot)


def evaluate(case: Case, target_name: str, spec: dict, tol_factor: float = 1.0,
             tol_reason: str = "", keep: dict | None = None, checks: Checks | None = None,
             explain: bool = False, clock: PhaseClock = NO_CLOCK) -> list[Comparison]:
    """Run one spec (launched `checks.launches` times, inside guard bands unless they are off)
    and compare every output; `keep`, if given, receives the first launch's output tensors
    (portcheck.digests records them for cross-vendor diffs). `explain` re-runs an example whose
    output holds an unexplained NaN to tell an out-of-bounds read from a NaN the kernel made.
    `clock` receives the seconds spent in each phase."""
    # under --as-arch the launcher reads the drawn autotune configuration (Case.configs); a
    # kernel under @triton.autotune launches the configuration the spec asks for (autotuned.py)
    with facts_device.drawing(spec.get(forcing.CONFIG_KEY)), autotuned.choosing(spec), \
            _quiet_arithmetic(target_name):
        return _evaluate(case, target_name, spec, tol_factor, tol_reason, keep, checks or CHECKS, explain, clock)


def _inputs(case: Case, device: str, spec: dict, checks: Checks) -> tuple[dict, list]:
    """The example's arguments (inside guarded allocations unless guards are off) and the
    input guard bands to check after each launch."""
    # far rows stay where they are (guards.REHOME_LIMIT_BYTES): what they look for, an offset
    # that wraps in int32, shows in the outputs
    args = _far_args(case, spec, device) if spec.get("layout") == "far" else case.make(spec, device)
    if COLUMNS_KEY in spec:
        args = strided_columns(args, spec[COLUMNS_KEY], case.in_place)
    if not checks.guards:
        return args, []
    return guards.rehome_inputs(args, case.in_place)


# ---- strided columns: an input whose last dimension is not contiguous ------------------------
# Hypothesis's layouts vary the row stride only; a launcher given a tensor whose last dimension is
# strided (a transposed or sliced view) must copy it, use its stride, or refuse it. A passing
# search ends with one more input per tensor argument, the largest passing input with that
# tensor alone laid out so (runner.check): a refusal is the launcher's right; a wrong result is a
# failure where the launcher hands the kernel that stride (a kernel that takes it and steps by 1,
# a check made on one tensor and not on the next), and said in the passing record where it does
# not (a launcher written for contiguous tensors only).
COLUMNS_KEY = "strided_input"   # the spec key naming the argument the harness lays out so
STRIDE = 2                      # its last dimension's stride; the elements between hold the poison
# what a launcher raises to refuse an input it cannot take (torch's view() of a strided tensor
# raises a plain RuntimeError naming the stride); anything else is a fault, as in any example
REFUSALS = (ValueError, TypeError, NotImplementedError, AssertionError)


def columns_hint(name: str) -> str:
    return f"{name} with a strided last dimension (stride {STRIDE}, a view of every other element): "


def stridable(args: dict, in_place=()) -> list[str]:
    """The arguments strided_columns can lay out: tensors with 2 or more elements along their last
    dimension, neither written in place nor sharing storage with another argument (views of one
    buffer, which the case may mean to alias)."""
    return [name for (name, t), *others in guards.storage_groups(args)
            if not others and t.dim() and t.shape[-1] >= 2 and name not in in_place]


def strided_columns(args: dict, name: str, in_place=()) -> dict:
    """args with `name` replaced by a copy whose last dimension has stride STRIDE."""
    if name not in stridable(args, in_place):
        raise ValueError(f"{COLUMNS_KEY}: {name!r} is not a tensor argument that can be laid out so "
                         f"(these can: {', '.join(stridable(args, in_place)) or 'none'})")
    t = args[name]
    with torch.no_grad():
        wide = poisoned((*t.shape[:-1], STRIDE * t.shape[-1]), t.dtype, t.device)[..., ::STRIDE]
        wide.copy_(t)
    return {**args, name: wide}


HARNESS_KEYS = (autotuned.KEY, autotuned.CACHED, forcing.CONFIG_KEY, COLUMNS_KEY)   # what the harness adds to a case's specs


def harness_keys(spec: dict, own: set, where: str) -> dict:
    """spec without the keys that the harness, not the case's strategy (whose keys are `own`),
    put there: an autotune configuration no example reached or another input's key chose,
    --as-arch's drawn configuration, the strided input. Their values are checked: a UsageError names a wrong one."""
    added = {k: spec[k] for k in HARNESS_KEYS if k in spec and k not in own}
    for key, value in added.items():
        if key == COLUMNS_KEY:
            if not isinstance(value, str) or not value:
                raise UsageError(f"{where}: '{key}' must name a tensor argument, got {value!r}")
        elif key == autotuned.CACHED:
            if not isinstance(value, dict) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= 0
                    for k, v in value.items()):
                raise UsageError(f"{where}: '{key}' must map kernel names to configuration indices, "
                                 f"0 or more, got {value!r}")
        elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{where}: '{key}' must be a configuration index, 0 or more, got {value!r}")
    return {k: v for k, v in spec.items() if k not in added}


def _noted(case: Case, device: str, args: dict, guarded: bool):
    """The case's launches on these arguments, noted and not run (no compile): precompile.noted."""
    def job():
        case.launch(args, _outputs(case, args, device, guarded)[0])
    return precompile.noted([job])


def launch_integers(case: Case, device: str, args: dict, checks: Checks) -> list[list[int]]:
    """The integers that each Triton launch on these arguments passes."""
    return [[v for v in (*launched, *kwargs.values()) if type(v) is int]
            for _, launched, kwargs in _noted(case, device, args, checks.guards).raw]


def launch_grids(case: Case, device: str, args: dict) -> list[tuple]:
    """The grid of each Triton launch on these arguments."""
    return _noted(case, device, args, False).grids


def takes_column_stride(plain: list[list[int]], strided: list[list[int]]) -> bool:
    """Whether the launches with an input's last dimension strided pass that stride where the plain
    ones pass 1: the launcher hands the kernel the stride, so the kernel claims to take it. The
    example's spec is otherwise the same, so only the layout can change an integer argument."""
    return any(p == 1 and s == STRIDE for before, after in zip(plain, strided) for p, s in zip(before, after))


def columns_finding(name: str) -> Finding:
    return Finding("position", f"{name}'s strided last dimension read as if contiguous: the kernel steps "
                   "through it by 1, or the launcher passes its pointer without its stride (copy it with "
                   ".contiguous(), use its stride, or refuse it)",
                   f"the input the harness lays out with {name}'s last dimension at stride {STRIDE}, after the "
                   "search's own inputs, whose last dimensions are contiguous, passed", REPRODUCED)


def refused(exc: BaseException) -> bool:
    """Whether an exception is a launcher's refusal of its input rather than a fault."""
    return isinstance(exc, REFUSALS) or (isinstance(exc, RuntimeError) and type(exc) is RuntimeError
                                         and ("stride" in str(exc) or "contiguous" in str(exc)))


# ---- far rows: offsets past 2**31 elements (GPU targets) ------------------------------------
# the regimes the search left out run on its largest passing input within this many elements:
# every shape that shows a regime's bug has rows of a few dozen elements, and the interpreter's
# longest rows take seconds an example
CACHE_RUNS = 4   # inputs a check runs with a configuration another input's key chose (autotune_cache)
REGIME_ELEMENTS = 4096
# the interpreter's: the regimes' bugs (an overflow, subnormals, a cancelling variance, a zero row,
# ties, inf and NaN) show on rows of a few elements, and softmax_long's row loops there take about
# a second for an input of 4,096 (its regime inputs added 4 to 7 s to the default matrix)
INTERPRETER_REGIME_ELEMENTS = 1024
# the special regime's single kinds (NaN alone, the infinities alone) run on the largest passing
# input within this many: what they look for (a non-finite check that misses one kind) shows on any
# row, and softmax_long's 1,024-element inputs took 0.5 s each on the interpreter
VARIANT_ELEMENTS = 256
ROW_KEYS = ("rows", "tokens")   # the spec keys that name the row count of a laid-out tensor
FAR_HEADROOM = 2                # free device memory needed: this many times the far tensor's bytes


FAR_HINT = "rows 2**31 elements apart (layout 'far': an offset computed in int32 wraps there): "


def far_rows_runs_on(target_name: str) -> bool:
    """GPUs only: the far tensor takes gigabytes, which the interpreter would read from host memory."""
    return TARGETS[target_name].is_gpu


def far_rows_base(spec: dict) -> bool:
    """Whether an input can be re-laid out far: it drew its layout from strategies.layouts() (so
    its case places the tensor with strategies.laid_out) and names its row count."""
    return spec.get("layout") in S.LAYOUTS and any(k in spec for k in ROW_KEYS)


def spec_size(spec: dict) -> int:
    """The product of a spec's sizes: its positive integers but seeds and the harness's own keys."""
    return math.prod(v for k, v in spec.items() if isinstance(v, int) and not isinstance(v, bool)
                     and v > 0 and "seed" not in k and k not in HARNESS_KEYS)


def far_rows_rank(spec: dict) -> int:
    """Which passing input the far example re-lays out: the largest (a one-column softmax is 1 in
    every row, a wrong row alike), by spec_size."""
    return spec_size(spec)


def far_rows_example(spec: dict) -> dict:
    """spec with its rows strategies.far_stride() apart, 3 of them at least, the last past 2**31
    elements, and normal values (NaN makes every row of a softmax NaN, equal values every row of
    it alike, and a wrong row with them): a kernel that computes row * stride in int32 reads the
    wrong row there (or faults)."""
    key = next(k for k in ROW_KEYS if k in spec)
    return {**spec, key: max(3, spec[key]), "layout": "far", **({"regime": "normal"} if "regime" in spec else {})}


def far_rows_twin(far: dict) -> dict:
    """The far example with its rows contiguous: it runs first, so that a failure of the far
    example is one that only rows 2**31 elements apart show (and a failure of the twin is an
    ordinary one, reported as such)."""
    return {**far, "layout": "contiguous"}


# ---- many rows: more rows than a persistent grid has programs (GPU targets) ------------------
# The search draws at most 64 rows, fewer than an H200 has SMs: a persistent kernel (a grid of
# programs per SM, each striding over rows) never takes a second row there, so a row loop that
# carries state from one row to the next, or strides wrongly, passes. One more input has
# MANY_ROWS_PER_UNIT rows per SM / CU and 3 more (an uneven split): grids of up to 8 programs per
# unit give every program two rows or more. A spec with a row length (ROW_LENGTH_KEYS, which is
# cut to keep MANY_ROWS_ELEMENTS) has MANY_ROWS_AT_LEAST rows whatever the GPU: 65,537, a prime
# (no grid divides it evenly) past the 65,535 programs that a grid's second and third axes allow, so a
# launcher that puts rows on one of those fails there too. Other specs (tokens of heads x dims)
# keep 16 per unit and 3: their row length is not cut, and 65,537 of them could take gigabytes.
MANY_ROWS_PER_UNIT = 16
MANY_ROWS_AT_LEAST = 2**16 + 1
# its row length is cut to keep rows x length within this: the search's own GPU budget
# (matrices/default.toml, max_elements.gpu), so the input costs no more to draw, check against its
# float64 reference and compare than the search's largest
MANY_ROWS_ELEMENTS = 2**22
# the keys that name a row's length: cols, or d (the gated activations' output width, half the
# input's); a row length left uncut made a 2,115 x 79,809 gated input, 70 s of a GPU check
ROW_LENGTH_KEYS = ("cols", "d")
MANY_HINT = "more rows than the search draws ({rows}: at least {per} per SM/CU and 3, so that a persistent " \
            "kernel's programs take several rows each, and more than the 65,535 programs a grid's second " \
            "or third axis allows): "
# On the interpreter the many-rows input runs only where its grid passes a GPU's limits (65,537 rows
# take minutes there), and portcheck's own persistent kernels take a few programs there. A launcher
# that caps its grid at a GPU's SMs or CUs (a constant, or a device count with a fallback off the
# GPU) still gives each program one row of the search's 64. One more input there has STRIDING_ROWS
# rows, more than any GPU's units (MI300X's 304 CUs, the most) and prime, in REGIME_ELEMENTS
# elements at most, and runs where a launch has fewer programs than rows but no fewer than the
# search's largest input had rows: there no program took a second row (a grid of a program a row
# would only cost time, about 0.7 s for 611 programs; a grid of 4, whose programs took several of
# the search's rows, 5 s of softmax_long's row loop over 611 rows).
STRIDING_ROWS = 2 * 304 + 3
STRIDING_HINT = "more rows than any GPU has SMs or CUs ({rows}), where a launch has fewer programs than rows, " \
                "so that each program takes several: "


# The interpreter's budget (matrices/default.toml: 16,384 elements) keeps the search's rows short,
# and a launcher that takes another path past a length (a looped or split kernel for rows longer
# than 32,768) never ran that path there. One more input there has two rows of LONG_ROW elements:
# 2**15 + 2**13 - 1, past 32,768 by a quarter of it, and one short of whole in every chunk of a
# power of two up to 8,192 (a last partial chunk dropped or misread is most of a chunk). It runs
# where the case's strategy, given room, draws rows that long (a case that caps its rows' length, a
# one-block kernel's, gets none). The interpreter pays per program and per operation more than per
# element: the default matrix's 45 such inputs add about 11 s of worker time on two cores (a
# probe's split path: 2 x 40,000 in seconds); GPU searches draw lengths up to their own budget.
LONG_ROW = 2**15 + 2**13 - 1
LONG_ROW_DRAWS = 200   # draws that look for a row that long (a length drawn up to the budget: 1 in 6)
# and only where no launch on it has more programs than this: the interpreter takes about a
# millisecond a program, and a grid of 16-element blocks over it (5,120 programs) took seconds a
# launch, minutes for an autotuned case's configurations (a size gate sits in a launcher whose
# kernels take long rows in large blocks, or a row a program)
LONG_ROW_PROGRAMS = 1024
LONG_ROW_HINT = "two rows of {cols} elements, longer than the interpreter's search draws (past 32,768, " \
                "a length at which a launcher may take another path): "


def draws_long_rows(case: Case, dtype: str, length: str) -> bool:
    """Whether the case's strategy, given room for them, draws a `length` of LONG_ROW or more."""
    settings = hypothesis.settings(database=None, max_examples=LONG_ROW_DRAWS, deadline=None, derandomize=True,
                                   phases=[hypothesis.Phase.generate],
                                   suppress_health_check=list(hypothesis.HealthCheck))
    try:   # the first such draw ends it
        hypothesis.find(case.inputs(dtype, 4 * LONG_ROW), lambda s: s.get(length, 0) >= LONG_ROW, settings=settings)
    except Exception:   # noqa: BLE001  none drawn (NoSuchExample), or a strategy that takes no such budget
        return False
    return True


def long_row_example(spec: dict, regimes: set) -> dict:
    """spec (a passing row-layout input with a row length) with two rows of LONG_ROW elements. Its
    values are the offset regime's where the case draws it (rows far from zero, so a chunk of the
    row dropped from a sum is many times a sum's tolerance; zero-mean values hide one about a third
    of the time), else normal ones where it draws those."""
    key = next(k for k in ROW_KEYS if k in spec)
    length = next(k for k in ROW_LENGTH_KEYS if k in spec)
    prefer = next((r for r in ("offset", "normal") if r in regimes), None)
    return {**spec, key: 2, length: LONG_ROW, **({"regime": prefer} if "regime" in spec and prefer else {})}


def replay_budget(target_name: str, max_elements: int) -> int:
    """The largest size a --replay may ask for: the target's budget, and on the interpreter room for
    its long-row input (whose failure prints a replay of it)."""
    return max_elements if TARGETS[target_name].is_gpu else max(max_elements, 2 * LONG_ROW)


def many_rows_example(spec: dict, units: int) -> dict:
    """spec (a passing row-layout input) with MANY_ROWS_PER_UNIT x units + 3 rows (with a row length,
    at least MANY_ROWS_AT_LEAST), its row length cut to MANY_ROWS_ELEMENTS in all, and normal values
    (equal ones hide a row's stale state)."""
    key = next(k for k in ROW_KEYS if k in spec)
    length = next((k for k in ROW_LENGTH_KEYS if k in spec), None)
    rows = max(MANY_ROWS_PER_UNIT * units + 3, MANY_ROWS_AT_LEAST if length else 0)
    out = {**spec, key: rows, **({"regime": "normal"} if "regime" in spec else {})}
    if length:
        out[length] = _cut(spec[length], max(1, MANY_ROWS_ELEMENTS // rows))
    return out


def striding_rows_example(spec: dict) -> dict:
    """spec (a passing row-layout input with a row length) with STRIDING_ROWS rows, its row length
    cut to REGIME_ELEMENTS in all, and normal values."""
    key = next(k for k in ROW_KEYS if k in spec)
    length = next(k for k in ROW_LENGTH_KEYS if k in spec)
    return {**spec, key: STRIDING_ROWS, length: _cut(spec[length], max(1, REGIME_ELEMENTS // STRIDING_ROWS)),
            **({"regime": "normal"} if "regime" in spec else {})}


def _cut(cols: int, most: int) -> int:
    """cols cut to at most `most`, keeping the largest power of two that divides it (up to what
    `most` allows): a launcher that asks for a row length divisible by 8 or 128 still gets one."""
    if cols <= most:
        return cols
    align = cols & -cols
    while align > most:
        align //= 2
    return most // align * align


class FarRowsUnsupported(Exception):
    """The case's make() does not lay its rows out far: the far example is not its to run."""


def _far_args(case: Case, spec: dict, device: str) -> dict:
    """make()'s arguments for a far spec, provided a tensor among them reaches past 2**31
    elements: a case with a layout of its own may take "far" for another layout, or refuse it."""
    try:
        args = case.make(spec, device)
    except torch.OutOfMemoryError:
        raise
    except Exception as exc:   # noqa: BLE001  whatever the case's own layout code says
        raise FarRowsUnsupported(f"make() refused layout 'far': {type(exc).__name__}: {exc}") from None
    if not any(isinstance(t, torch.Tensor) and t.numel() and guards.span_elements(t) > S.FAR_ELEMENTS
               for t in args.values()):
        raise FarRowsUnsupported("make() laid out no tensor past 2**31 elements for layout 'far'")
    return args


def far_rows_obstacle(target_name: str, spec: dict) -> str | None:
    """Why the far example cannot run on this GPU now: its tensor needs gigabytes."""
    need = S.FAR_ELEMENTS * fmt(spec["dtype"]).torch_dtype.itemsize
    free, _ = torch.cuda.mem_get_info(TARGETS[target_name].device)
    if free < FAR_HEADROOM * need:
        return f"{need / 2**30:.0f} GiB of rows spread past 2**31 elements need {FAR_HEADROOM}x that free, " \
               f"{free / 2**30:.0f} GiB is"
    return None


def _precompile(case: Case, target_name: str, strategy, settings: hypothesis.settings, seed: int | None,
                checks: Checks, threads: int, also=(), strided: bool = True) -> None:
    """Compile the kernels of the examples the check will draw, several at a time, before it
    draws them (portcheck.precompile): the check's launches then find them compiled. With them,
    those of check's strided-input step, which launches the largest passing input with each
    tensor strided in turn: the largest drawn here, where the search keeps to these examples
    (the H200's fp8 matmul checks compiled their strided inputs' pointer kernel one after another
    at launch, some 10 s each in a loaded run, where every other input takes the TMA kernel).
    `also`: more specs, launched as the examples are, and zero-argument launches, compiled with them;
    `strided`: False where the check has no strided-input step (--as-arch)."""
    device = TARGETS[target_name].device

    def launch(spec: dict) -> None:   # as evaluate() launches it, noted instead of run
        with facts_device.drawing(spec.get(forcing.CONFIG_KEY)):
            args, _ = _inputs(case, device, spec, checks)
            case.launch(args, _outputs(case, args, device, checks.guards)[0])

    def launch_strided(spec: dict) -> None:   # as check's strided() launches it
        for name in stridable(case.make(spec, device), case.in_place):
            try:
                launch({**spec, COLUMNS_KEY: name})
            except Exception:   # noqa: BLE001  a launcher's refusal: nothing to compile
                continue
    try:
        specs = precompile.examples(strategy, settings, seed)
        largest = max(specs, key=spec_size, default=None)
        strided_jobs = [functools.partial(launch_strided, largest)] \
            if strided and largest is not None and COLUMNS_KEY not in largest else []
        precompile.ahead([functools.partial(launch, s) for s in specs] + strided_jobs
                         + [item if callable(item) else functools.partial(launch, item) for item in also],
                         threads)
    except Exception:   # noqa: BLE001  a warm-up only saves time: the check compiles what it lacks
        pass


def _evaluate(case: Case, target_name: str, spec: dict, tol_factor: float, tol_reason: str,
              keep: dict | None, checks: Checks, explain: bool, clock: PhaseClock) -> list[Comparison]:
    with clock.timing("inputs"):
        args, input_bands = _inputs(case, TARGETS[target_name].device, spec, checks)
    runs, violations, allocated, notes = _launch_all(case, target_name, spec, args, checks, input_bands, clock)
    outs = runs[0]
    if keep is not None:
        keep.update(outs)
    with clock.timing("oracle"):
        args64 = float64_args(args, oracle_device(target_name))
        refs = case.oracle(args64)
    with clock.timing("compare"):
        tols = case.tolerance(args64, refs, spec["dtype"])
        broken = contract_errors(case, outs, refs, tols)
        if broken:
            raise CaseContractError(f"{case.name}: {broken}")
        unchecked = [n for n in case.in_place if n in outs and n not in refs]
        if unchecked:
            notes.append(f"{', '.join(unchecked)} updated in place, with no reference from the oracle: "
                         "the value the kernel leaves there is not checked (return one under its name)")
        comps = [Comparison("guards", False, 0, worst_ratio=float("inf"), message=v) for v in violations]
        # notes, not findings: a passing record says them
        comps += [Comparison(NOTE, True, 0, message=note) for note in dict.fromkeys(notes)]
        for name, ref in refs.items():
            tol = tols[name]
            if tol_factor != 1.0 and not tol.exact:
                tol = tol.scaled(tol_factor, tol_reason)
            comp = compare(name, outs[name], ref, tol)
            comp.tolerance = tol.summary()
            if explain and unexplained_nan(comp) and not _explain_undefined(
                    case, target_name, spec, name, outs[name].shape, comp) and input_bands:
                _explain_nan(case, target_name, spec, [b.names for b in input_bands], name,
                             outs[name].shape, comp)
            if explain and allocated and not comp.ok:
                _explain_allocated(case, target_name, spec, name, outs[name], ref, comp)
            comps.append(comp)
            for launch, other in enumerate(runs[1:], start=2):
                shuffled = (f" (programs in shuffled order, seed {order_seed(spec) + launch - 1})"
                            if not TARGETS[target_name].is_gpu else "")
                comps.append(compare_launches(name, outs[name], other[name], ref, tol, launch,
                                              case.nondeterministic, shuffled))
    return comps


def _made_alike(case: Case, device: str, spec: dict) -> None:
    """make() twice on one spec must give the same arguments, bit for bit: inputs drawn from
    torch's global generator, or another source the spec does not fix, make every failure's
    replay another input (portcheck.strategies.generator(spec["seed"]) fixes them)."""
    first, again = case.make(spec, device), case.make(spec, device)
    for name in first:
        a, b = first[name], again.get(name)
        if isinstance(a, torch.Tensor):
            same = (isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype
                    and torch.equal(a.detach().contiguous().view(-1).view(torch.uint8),
                                    b.detach().contiguous().view(-1).view(torch.uint8)))
        else:
            try:
                same = bool(a == b) or bool(a != a and b != b)   # a NaN scalar is itself
            except Exception:   # noqa: BLE001  a list of tensors, say: not judged here
                same = True
        if not same:
            raise CaseContractError(
                f"{case.name}: make() gave two different {name!r} for one spec: its inputs do not follow from "
                "the spec, so no failure would replay; draw them from portcheck.strategies.generator(spec['seed'])")


def unexplained_nan(comp: Comparison) -> bool:
    """A NaN or Inf where the reference is finite that is not the output poison."""
    return comp.nan_where_finite is not None and bool(comp.nan_where_finite.any())


def _finite(t: torch.Tensor) -> torch.Tensor:
    return torch.isfinite(t.detach().cpu().flatten().to(torch.float64))


def _finite_on_rerun(case: Case, target_name: str, spec: dict, name: str, *, inputs: dict = guards.INPUT_POISON,
                     poisoned: str | None = None, allocations: dict = guards.OUTPUT_POISON) -> torch.Tensor:
    """Which elements of output `name` are finite (flat, on the CPU) when the example runs again
    with its inputs' guards and gaps holding `inputs` (`poisoned`'s group the poison) and what the
    launcher allocates holding `allocations`: the confirming re-runs of a NaN's origin."""
    device = TARGETS[target_name].device
    args, _ = guards.rehome_inputs(case.make(spec, device), case.in_place, fill=inputs, poisoned=poisoned)
    outs, _ = _outputs(case, args, device, True)
    with launched_in_place(case, args, outs), guards.poisoned_allocations(allocations):
        case.launch(args, outs)
    synchronize(target_name)
    return _finite(outs[name])


def _explain_nan(case: Case, target_name: str, spec: dict, input_names: list[list[str]], name: str,
                 shape, comp: Comparison) -> None:
    """A NaN where the reference is finite came from outside the inputs if it turns finite when
    their guards and gaps hold a finite value instead: run the example again so, then once per
    input with only that input's guards poisoned to name it, and say so in the message."""
    def rerun(poisoned_input=None):
        return _finite_on_rerun(case, target_name, spec, name, inputs=guards.FINITE_FILL, poisoned=poisoned_input)

    moved = comp.nan_where_finite & rerun()
    if not bool(moved.any()):
        return
    read = [names for names in input_names if bool((moved & ~rerun(names[0])).any())]
    which = " and ".join(", ".join(names) for names in (read or input_names))
    first = int(moved.nonzero()[0])
    comp.message = (f"{name}: out-of-bounds read: output elements depend on memory outside input "
                    f"{which}: {int(moved.sum())} of {comp.total} elements (first at "
                    f"{flat_to_index(first, shape)}) hold NaN/Inf read from its guards or padding, and "
                    f"turn finite when those hold a finite value; {comp.mismatches} elements out of tolerance")


def _explain_undefined(case: Case, target_name: str, spec: dict, name: str, shape, comp: Comparison) -> bool:
    """A NaN where the reference is finite came from the masked-off lanes of a tl.load without
    other= (poisoned on the interpreter: targets.interpreter_lanes) if it turns finite when they
    hold 0: run the example again so and, where it does, say so with the loads' lines."""
    if TARGETS[target_name].is_gpu or not interpreter_lanes.installed():
        return False
    with interpreter_lanes.zero_filled() as lines:
        moved = comp.nan_where_finite & _finite_on_rerun(case, target_name, spec, name)
    if not lines or not bool(moved.any()):
        return False
    first = int(moved.nonzero()[0])
    comp.message = (f"{name}: undefined lanes read: {int(moved.sum())} of {comp.total} elements (first at "
                    f"{flat_to_index(first, shape)}) hold NaN from the masked-off lanes of tl.load without "
                    f"other= at {', '.join(lines)}, which the language leaves undefined (NaN here), and turn "
                    "finite when those lanes hold 0, as today's GPU backends fill them: give other= the value "
                    f"the computation needs there; {comp.mismatches} elements out of tolerance")
    return True


def _explain_allocated(case: Case, target_name: str, spec: dict, name: str, out: torch.Tensor,
                       ref: torch.Tensor, comp: Comparison) -> None:
    """A NaN (or the poison) where the reference is finite came from memory the launcher allocated
    itself if it turns finite when that memory holds a finite value instead: run the example
    again so, and say so in the message."""
    if not out.dtype.is_floating_point or out.shape != ref.shape:   # a wrong shape: the check said so
        return
    suspect = ~_finite(out) & _finite(ref)
    if not bool(suspect.any()):
        return
    moved = suspect & _finite_on_rerun(case, target_name, spec, name, allocations=guards.FINITE_FILL)
    if not bool(moved.any()):
        return
    first = int(moved.nonzero()[0])
    comp.message = (f"{name}: read before written: {int(moved.sum())} of {comp.total} elements (first at "
                    f"{flat_to_index(first, out.shape)}) depend on memory the launcher allocated itself "
                    "(torch.empty or kin): NaN while it holds the harness's poison, finite when it holds "
                    f"{guards.FINITE_FILL[torch.float32]}: the kernel read it before writing it (a buffer "
                    "assumed zero: torch.zeros?) or left it unwritten in an output the launcher returned; "
                    f"{comp.mismatches} elements out of tolerance")


def _larger(kept: dict | None, example: dict, limit: float = math.inf) -> dict | None:
    """`example` where it is within `limit` elements (spec_size) and larger than `kept`, else `kept`."""
    size = spec_size(example)
    return example if size <= limit and (kept is None or size > spec_size(kept)) else kept


@dataclass
class _Search:
    examples: int = 0
    current: dict | None = None
    failing: dict | None = None
    message: str = ""
    metrics: dict = field(default_factory=lambda: _fold_metrics({}, []))
    tolerance: dict = field(default_factory=dict)
    nan_to_explain: bool = False      # the failing example's output holds a NaN or Inf (or the poison)
                                      # where the reference is finite: from outside an input, or from
                                      # what the launcher allocated?
    failed: list = field(default_factory=list)   # the failing example's failing comparisons
    fault: BaseException | None = None   # the last exception an example raised (hypothesis shrinks errors too)
    faulting: dict | None = None          # ... and its input
    first_run: dict | None = None     # the first example that ran (--as-arch: every config on it)
    first_right: dict | None = None   # the search's first example whose first launch was right
                                      # (diagnose: is it still, or did the launches since leave state?)
    far_base: dict | None = None      # the passing row-layout input to re-lay out (far_rows_rank)
    far_note: str = ""                # why the far example did not run
    columns_notes: list = field(default_factory=list)   # strided inputs read as if contiguous, unclaimed
    launch_notes: dict = field(default_factory=dict)   # the launches' notes (NOTE comparisons): how many examples
    many_rows: dict | None = None     # the many-rows input, once it has run (or is running)
    striding_rows: dict | None = None  # the interpreter's input with more rows than programs
    long_row: dict | None = None      # the interpreter's input with rows longer than its search draws
    most_rows: int = 0                # the most rows a passing input of the search had
    configs_run: set = field(default_factory=set)   # --as-arch: the drawn configurations that ran
    largest: dict | None = None       # the largest passing input the search drew (spec_size)
    autotune_count: int = 0           # the most configurations an autotuned launch chose among
    autotune_run: set = field(default_factory=set)  # the configuration indices that ran
    failing_autotune: list = field(default_factory=list)  # the failing input's autotuned launches
    autotuned: list = field(default_factory=list)   # (passing search example, its autotuned launches)
    not_here: list = field(default_factory=list)    # --as-arch: why examples could not run locally
    regimes_run: set = field(default_factory=set)   # value regimes the search ran on rows of 2+ elements
    regime_base: dict | None = None   # the largest such passing input within REGIME_ELEMENTS
    variant_base: dict | None = None  # ... and within VARIANT_ELEMENTS (the special regime's single kinds)

    failing_metrics: dict = field(default_factory=dict)   # the failing example's own metrics
    first_failure: dict | None = None   # the search's first failing input and its message, before shrinking
    shrink_started: float | None = None   # time.monotonic() at the first example after a failure
    smaller_at: int = 0               # the example count when a failing (or faulting) input last got smaller
    shrink_ended: float | None = None     # ... and when the search ended

    def keeps(self, kept: dict | None, example: dict) -> bool:
        """Whether a failing (or faulting) example replaces `kept`, the one held so far: the first,
        and then one no larger (spec_size). Hypothesis's shrinker tries smaller inputs, but while
        it looks for other failures it also runs larger ones, and a search stopped mid-way reports
        what it holds."""
        if kept is not None and spec_size(example) > spec_size(kept):
            return False
        if kept is None or spec_size(example) < spec_size(kept):
            self.smaller_at = self.examples
        return True

    def end_search(self) -> None:
        if self.shrink_started is not None and self.shrink_ended is None:
            self.shrink_ended = time.monotonic()

    def note_autotuned(self, launches: list) -> None:
        """Which configurations of the autotuned launches ran (autotuned.Launched)."""
        for run in launches:
            self.autotune_count = max(self.autotune_count, run.count)
            self.autotune_run.add(run.index)

    def observe(self, comps: list[Comparison]) -> None:
        if self.failing is None or any(not c.ok for c in comps):
            # the formula in force for the failing input reported (the last to fail: hypothesis
            # replays its smallest last), else for the last input (guard and launch-to-launch
            # comparisons are judged by no formula)
            self.tolerance = {c.name: c.tolerance for c in comps if c.tolerance}
        _fold_metrics(self.metrics, comps)
        for c in comps:
            if c.name == NOTE:
                self.launch_notes[c.message] = self.launch_notes.get(c.message, 0) + 1

    def notes(self) -> list[str]:
        """What a passing record says of checks that did not run as they do elsewhere."""
        return [*self.columns_notes, *(f"{note} ({n} example{'s' * (n > 1)} of {self.examples})"
                                       for note, n in self.launch_notes.items())]


_NO_METRICS = Comparison("", True, 0).metrics()   # every metric a comparison reports, at 0


def _fold_metrics(into: dict, comps: list[Comparison]) -> dict:
    """`into` with each metric raised to the largest of the comparisons' (each at least 0)."""
    for k, zero in _NO_METRICS.items():
        into.setdefault(k, zero)
    for c in comps:
        for k, v in c.metrics().items():
            into[k] = max(into.get(k, 0.0), v)
    return into


class CaseFailed(AssertionError):
    pass


class ShrinkStopped(BaseException):
    """The deadline passed while shrinking a failure, or the failing inputs stopped getting smaller
    (its argument says which). A BaseException, so that hypothesis does not take it for another
    failure to shrink but lets it through at once."""


# Shrinking ends once this many examples in a row found no failing input smaller by its sizes
# (spec_size): what is left for hypothesis then is the values and seeds of an input as small as it
# gets, and the report needs none of that. The record says nothing of such an end (a time limit's
# cut it names). Planted-bug probe 5 on the interpreter spent 338 of its 380 worker-seconds
# shrinking, most failures until the 20 s limit, many on inputs of 1 x 1 already.
SHRINK_STALL = 30


def _first_cause(exc: BaseException) -> BaseException:
    """The original fault behind hypothesis's wrappers: when a replay of a failing example fails
    differently (a GPU context poisoned by the first failure), hypothesis raises a FlakyFailure
    group; the first exception in it is the kernel's own."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def reproduce_argv(target: str, case: str, dtype: str, spec: dict | None, seed=None,
                   checks: Checks | None = None, as_arch: str | None = None) -> list[str]:
    cmd = ["portcheck", "run", *cases_flag(case), "--target", target, "--kernel", case, "--dtype", dtype,
           *(["--as-arch", as_arch] if as_arch else []), *(checks or CHECKS).flags(), *REPLAY_FLAGS]
    if spec is not None:
        cmd += ["--replay", json.dumps(spec, sort_keys=True)]
    elif seed is not None:
        cmd += ["--seed", str(seed)]
    return cmd


def reproduce_command(*args, **kwargs) -> str:
    return shlex.join(reproduce_argv(*args, **kwargs))


FRESH_REPLAY_S = 30.0   # at most, for a failure's replay in a fresh process (diagnose.fresh)
FRESH_REPLAY_END = 0.9  # and never past this share of the case's time limit


def fresh_replay_budget(started: float, deadline: float | None) -> float:
    """Seconds a failure's fresh-process replay may take: FRESH_REPLAY_S, within FRESH_REPLAY_END of
    the case's time limit (which the shrink deadline, SHRINK_SHARE of it from the start, gives)."""
    if deadline is None:
        return FRESH_REPLAY_S
    limit = (deadline - started) / SHRINK_SHARE
    return min(FRESH_REPLAY_S, started + FRESH_REPLAY_END * limit - time.monotonic())


def check(case: Case, target_name: str, arch: str, dtype: str, *, settings: hypothesis.settings,
          max_elements: int, override: Override | None = None, seed: int | None = None,
          spec: dict | None = None, on_example=None, checks: Checks | None = None,
          as_arch: list | None = None, deadline: float | None = None,
          shrink_time: float | None = None, pole: bool = False, also_warm=()) -> Result:
    """Search (or, given `spec`, replay) one case x target x dtype; never raises for kernel faults.

    `on_example(spec)` is called before each example runs, so a supervisor that sees the process
    die or hang knows the exact input it was on; `on_example(spec, failed=message)` before a
    failure's diagnosis, whose re-runs of other inputs may kill it, so that the failure stands.
    `as_arch`: archs that share their launches (portcheck.as_arch.groups); the case runs with its launches configured for the first of
    them, and the record (arch: that one, evidence "as-arch") says what changed to run locally.
    `deadline` (a time.monotonic() value): once it has passed after a failure, the search stops
    shrinking and reports the smallest failing input found so far, so that a failure is never
    turned into a time-out; so it does once `shrink_time` seconds have gone into shrinking.
    `pole`: a long pole of its run, whose kernels a GPU check compiles ahead (portcheck.precompile),
    with those of `also_warm` (specs launched as the examples are, and zero-argument launches).
    The record's `phases` says where the time went.
    """
    started = time.monotonic()
    forced = as_arch[0] if as_arch else None
    evidence = forcing.EVIDENCE if forced else ("gpu" if TARGETS[target_name].is_gpu else "interpreter")
    result = Result("runtime", case.name, case.family, dtype, target_name, forced.name if forced else arch,
                    "pass", evidence, override=override.to_dict() if override else None)
    factor = override.factor if override is not None and override.action == "tolerance" else 1.0
    reason = override.reason if override is not None else ""
    search = _Search()
    clock = PhaseClock(target_name)
    strategy, drawable_regimes = S.with_regimes(lambda: case.inputs(dtype, max_elements))
    regime_elements = REGIME_ELEMENTS if TARGETS[target_name].is_gpu else INTERPRETER_REGIME_ELEMENTS
    running_as = contextlib.nullcontext   # a fresh context each time it is entered
    if forced:
        local = facts_device.local_arch()
        notes = forcing.Notes()
        result.as_arch = forcing.record(forced, as_arch, arch, notes, search.not_here)
    if override is not None and override.action == "skip":
        result.verdict, result.message = "skip", f"skipped by override: {override.reason}"
        return result
    if forced:
        why_not = forcing.no_launch_reason(case, forced, dtype) or forcing.local_obstacle(forced, local, dtype)
        if why_not:
            result.verdict, result.message = "skip", why_not
            result.reproduce = reproduce_command(target_name, case.name, dtype, None, seed, checks, forced.name)
            return result
        n_configs = len(case.configs(forced, dtype)) if case.configs is not None else 0
        if n_configs:   # every configuration the arch declares is one hypothesis may draw
            strategy = hypothesis.strategies.tuples(strategy, hypothesis.strategies.integers(0, n_configs - 1)) \
                .map(lambda drawn: {**drawn[0], forcing.CONFIG_KEY: drawn[1]})
        running_as = lambda: forcing.forcing(forced, local, notes)  # noqa: E731

    def prop(example):
        clock.shrinking = search.failing is not None or search.fault is not None
        if clock.shrinking:
            now = time.monotonic()
            search.shrink_started = search.shrink_started or now
            if ((deadline is not None and now > deadline)
                    or (shrink_time is not None and now - search.shrink_started > shrink_time)):
                raise ShrinkStopped("at the time limit")
            if search.examples - search.smaller_at >= SHRINK_STALL:
                raise ShrinkStopped("")   # an end, not a cut: the record says nothing of it
        search.examples += 1
        search.current = example
        if on_example is not None:
            on_example(example)
        try:
            if search.examples == 1 and example.get("layout") != "far":   # once a check: a replay
                _made_alike(case, TARGETS[target_name].device, example)     # must make the same inputs
            comps = evaluate(case, target_name, example, factor, reason, checks=checks, clock=clock)
        except facts_device.NotRunnableHere as exc:   # recorded in the record's as_arch.skipped
            search.examples -= 1
            if str(exc) not in search.not_here:
                search.not_here.append(str(exc))
            if hypothesis.currently_in_test_context():
                hypothesis.reject()
            return
        except hypothesis.errors.UnsatisfiedAssumption:   # an input rejected is no fault
            raise
        except Exception as exc:
            if search.keeps(search.faulting, example):
                search.fault, search.faulting = exc, example
                search.failing_autotune = autotuned.launched()
            raise
        finally:
            search.note_autotuned(autotuned.launched())
        search.first_run = search.first_run or example
        search.configs_run.add(example.get(forcing.CONFIG_KEY))
        search.observe(comps)
        worst = max((c.worst_ratio for c in comps), default=0.0)
        # steer the search toward larger errors (neither a replay nor --as-arch's configurations
        # that hypothesis did not draw are a search)
        if spec is None and hypothesis.currently_in_test_context():
            hypothesis.target(worst if math.isfinite(worst) else 1e300, label="error / tolerance")
        bad = [c for c in comps if not c.ok]
        if hypothesis.currently_in_test_context() and all(c.ok for c in comps if c.launch == 1):
            search.first_right = search.first_right or example
        if bad:
            message = "; ".join(c.message for c in bad)
            if search.first_failure is None and spec is None:
                search.first_failure = {"input": example, "message": message}
            if search.keeps(search.failing, example):
                search.failing, search.message, search.failed = example, message, bad
                search.failing_metrics = _fold_metrics({}, comps)
                search.nan_to_explain = any(unexplained_nan(c) or c.max_ulp == math.inf for c in bad)
                search.failing_autotune = autotuned.launched()
            raise CaseFailed(message)
        if hypothesis.currently_in_test_context():   # the search's own inputs, not the ones added after it
            search.largest = _larger(search.largest, example)
            if autotuned.launched():
                search.autotuned.append((example, autotuned.launched()))
            # a regime counts once drawn on a row of two elements or more and, where the spec has
            # rows, two rows or more: the offset regime's rows alternate their side of zero, the
            # zeros regime zeroes the first row, ties takes its formats row by row
            rows = max((example[k] for k in ROW_KEYS if isinstance(example.get(k), int)), default=None)
            if "regime" in example and spec_size(example) > (rows or 1) and (rows is None or rows >= 2):
                search.regimes_run.add(example["regime"])
                search.regime_base = _larger(search.regime_base, example, regime_elements)
                search.variant_base = _larger(search.variant_base, example, VARIANT_ELEMENTS)
            if far_rows_base(example) and (search.far_base is None
                                           or far_rows_rank(example) > far_rows_rank(search.far_base)):
                search.far_base = example
            search.most_rows = max(search.most_rows, rows or 0)

    def many_rows():
        """One more input, a passing row-layout one with more rows than the GPU has SMs or CUs."""
        search.many_rows = many_rows_example(search.far_base,
                                             facts_device.compute_units(TARGETS[target_name].device))
        prop(search.many_rows)

    def autotune_cache():
        """Triton's autotuner keeps one configuration per key (the key arguments, the tensors'
        dtypes), chosen at the key's first launch among those the pruning left for that launch's
        arguments, and hands it to every later launch with the key. Where two passing inputs share
        a key and their pruning differs, the later one runs with each configuration only the
        other's pruning kept (at most CACHE_RUNS a check): a key that misses an argument the
        pruning reads (a BLOCK that must divide the row length) fails so."""
        seen: dict = {}   # (kernel, key) -> [(example, its launch)]
        for example, runs in search.autotuned:
            for run in runs:
                seen.setdefault((run.kernel, repr(run.key)), []).append((example, run))
        tried = set()
        for (kernel, key), sharing in seen.items():
            for _, first in sharing:
                for later, run in sharing:
                    for index in (i for i in first.pruned if i not in run.pruned):
                        if (kernel, key, index) not in tried and len(tried) < CACHE_RUNS:
                            tried.add((kernel, key, index))
                            prop({**later, autotuned.CACHED: {kernel: index}})

    def regimes():
        """More inputs, one per value regime the case's strategy can draw (S.noting_regimes) that
        the search ran on no row of two or more elements: the largest passing input of at most
        REGIME_ELEMENTS elements in that regime. Twelve examples leave one of six regimes out about
        one time in nine, and a regime drawn only on one-element rows shows nothing that needs a
        row's spread (the offset regime's cancelling variance). A case that draws special values
        also gets an input of each kind alone (S.SPECIALS)."""
        base = search.regime_base or search.largest
        if "regime" not in base:
            return
        for regime in sorted(S.drawn_with_variants(drawable_regimes) - search.regimes_run,
                             key=lambda r: (r not in S.REGIMES, str(r))):
            variant = regime in S.SPECIALS and regime not in S.REGIMES
            prop({**((search.variant_base or base) if variant else base), "regime": regime})

    def many_rows_grids():
        """On the interpreter, the many-rows input's launches noted and not run (65,537 rows take
        minutes there): where a grid passes a GPU's limits, the input runs, and the interpreter
        refuses that grid as a GPU would (targets.interpreter_grid); else the STRIDING_ROWS input
        runs where a launch has fewer programs than rows."""
        spec = many_rows_example(search.far_base, 1)
        length = next((k for k in ROW_LENGTH_KEYS if k in spec), None)
        if length is None:   # no row length: rows few enough for any grid
            return
        # the launches are noted on rows a few elements long (the largest power of two up to 16 that
        # divides the row length, so a launcher that asks for a multiple of 8 still gets one): making
        # 2**22 elements took 0.1 to 0.3 s a unit, and only the rows make the grid large
        probe = {**spec, length: min(spec[length] & -spec[length], 16)}
        device = TARGETS[target_name].device
        if any(excess(grid) for grid in launch_grids(case, device, case.make(probe, device))):
            search.many_rows = spec
            prop(spec)
            return
        # where the search's largest input had no fewer programs than rows, no program took two
        striding = striding_rows_example(search.far_base)
        try:
            grids = launch_grids(case, device, case.make(striding, device))
        except Exception:   # noqa: BLE001  make() or the launcher refuses that shape: nothing to run
            return
        if any(search.most_rows <= math.prod(grid) < STRIDING_ROWS for grid in grids):
            search.striding_rows = striding
            prop(striding)

    def long_rows():
        """On the interpreter, the LONG_ROW input, where the search's rows were all shorter, the
        case's strategy draws rows that long and the case makes it (make() or a launcher that
        refuses it: nothing to run) in grids of LONG_ROW_PROGRAMS at most."""
        length = next((k for k in ROW_LENGTH_KEYS if k in search.far_base), None)
        if length is None or search.far_base[length] >= LONG_ROW or not draws_long_rows(case, dtype, length):
            return
        spec = long_row_example(search.far_base, drawable_regimes)
        try:
            grids = launch_grids(case, TARGETS[target_name].device, case.make(spec, TARGETS[target_name].device))
        except Exception:   # noqa: BLE001
            return
        if any(math.prod(grid) > LONG_ROW_PROGRAMS for grid in grids):
            return
        search.long_row = spec
        prop(spec)

    def strided():
        """More inputs, one per tensor argument: the largest passing input with that tensor's last
        dimension strided (strided_columns). A launcher may refuse it; one that passes the kernel
        that stride must get it right (a failure); one that neither refuses it nor passes its
        stride, and gets it wrong, reads it as if contiguous: said in the record, no failure, as a
        launcher whose callers only hold contiguous tensors is written so."""
        if COLUMNS_KEY in search.largest:   # the case's own key of that name
            return
        device, noting = TARGETS[target_name].device, checks or CHECKS
        with _quiet_arithmetic(target_name):   # never under --as-arch: no drawn configuration to set
            args, _ = _inputs(case, device, search.largest, noting)
            plain = launch_integers(case, device, args, noting)
            claims = {name: takes_column_stride(plain, launch_integers(
                case, device, strided_columns(args, name, case.in_place), noting))
                for name in stridable(args, case.in_place)}
        for name, claimed in claims.items():
            spec = {**search.largest, COLUMNS_KEY: name}
            try:
                if claimed:
                    prop(spec)
                    continue
                search.current = spec   # what a fault record names, as prop has it
                if on_example is not None:
                    on_example(spec)
                with _quiet_arithmetic(target_name):
                    bad = [c for c in evaluate(case, target_name, spec, factor, reason, checks=checks, clock=clock)
                           if not c.ok]
                search.examples += 1
                if bad:
                    search.columns_notes.append(f"{columns_hint(name)}read as if contiguous, by a launcher that "
                                                f"neither copies nor refuses it ({bad[0].message.split(';')[0]})")
            except CaseFailed:
                raise
            except Exception as exc:   # noqa: BLE001  a refusal is the launcher's right; a fault is not
                if not refused(exc):
                    search.fault, search.faulting = exc, spec
                    raise
                search.fault = search.faulting = None
                if claimed:   # prop counted it
                    search.examples -= 1

    def far_rows():
        """One more input, a passing row-layout one with its rows past 2**31 elements (GPUs),
        after its twin with contiguous rows."""
        far = far_rows_example(search.far_base)
        search.far_note = far_rows_obstacle(target_name, far) or ""
        if search.far_note:
            return
        prop(far_rows_twin(far))
        try:
            prop(far)
        except FarRowsUnsupported as exc:
            search.examples -= 1
            search.fault = search.faulting = None
            search.far_note = str(exc)
        except torch.OutOfMemoryError as exc:   # other workers on the GPU took the room since
            search.fault = search.faulting = None
            search.far_note = f"out of device memory ({str(exc).splitlines()[0][:120]})"
        finally:
            torch.cuda.empty_cache()

    def report_failure():
        """The failing example's message (an unexplained NaN explained) and its likely causes."""
        result.verdict, result.message = "fail", search.message
        clock.shrinking = False
        with running_as(), _quiet_arithmetic(target_name), clock.timing("diagnosis"), \
                autotuned.choosing(search.failing):
            if search.nan_to_explain and (checks or CHECKS).guards:   # only the example reported
                comps = evaluate(case, target_name, search.failing, factor, reason, checks=checks, explain=True)
                search.failed = [c for c in comps if not c.ok]
                result.message = "; ".join(c.message for c in search.failed)
            if override is None or override.action != "xfail":   # a known failure is not diagnosed again
                # the diagnosis judges by the case's own tolerances, on the local arch's configuration
                right = search.first_right if factor == 1.0 and not forced else None
                # a replay is that command already; a search's failure is replayed in a fresh process
                # (not under a GPU checker, which would follow the replay's processes at its own pace)
                replay = None if spec is not None or (checks or CHECKS).sanitize else reproduce_argv(
                    target_name, case.name, dtype, search.failing, seed, checks, forced.name if forced else None)
                if on_example is not None:   # the failure stands if a re-run of the diagnosis kills the process
                    on_example(search.failing, failed=result.message)
                found = diagnose(case, target_name, dtype, search.failing, search.failed, arch=arch, right=right,
                                 replay=replay, replay_budget_s=fresh_replay_budget(started, deadline))
                if COLUMNS_KEY in search.failing:
                    found.insert(0, columns_finding(search.failing[COLUMNS_KEY]))
                result.diagnosis = [f.to_dict() for f in found]

    try:
        with running_as():
            if spec is not None:
                prop(spec)
            else:
                warm_threads = precompile.threads(pole)
                if TARGETS[target_name].is_gpu and warm_threads:
                    with clock.timing("compile"):
                        _precompile(case, target_name, strategy, settings, seed, checks or CHECKS, warm_threads,
                                    also_warm, strided=not forced)
                test = hypothesis.given(strategy)(prop)
                if override is not None and override.action == "xfail":
                    # an expected failure needs no minimal example: skip the costly shrink phase
                    settings = hypothesis.settings(settings, phases=[p for p in settings.phases
                                                                     if p != hypothesis.Phase.shrink])
                test = settings(test)
                if seed is not None:
                    test = hypothesis.seed(seed)(test)
                test()
                if forced and case.configs is not None and search.first_run is not None:
                    # the configurations hypothesis did not draw, each on the first input that ran
                    for index in range(len(case.configs(forced, dtype))):
                        if index not in search.configs_run:
                            prop({**search.first_run, forcing.CONFIG_KEY: index})
                if search.largest is not None:
                    # autotuned kernels: each configuration no example reached, on the largest input
                    for index in range(search.autotune_count):
                        if index not in search.autotune_run:
                            prop({**search.largest, autotuned.KEY: index})
                    autotune_cache()
                    if not forced:
                        regimes()
                        strided()
                if far_rows_runs_on(target_name) and not forced and search.far_base is not None:
                    many_rows()
                    far_rows()
                elif not TARGETS[target_name].is_gpu and not forced and search.far_base is not None:
                    many_rows_grids()
                    long_rows()
    except ShrinkStopped as exc:   # the smallest failing input so far is the one reported
        search.end_search()
        stopped = f"shrinking stopped {exc.args[0]} after {search.examples} examples" if exc.args[0] else ""
        if search.failing is not None:
            report_failure()
            if search.fault is not None:   # as where hypothesis raises both (below)
                result.message += f" (another input raised {_error_message(search.fault)})"
        else:
            result.verdict, result.message = "error", _error_message(search.fault)
            search.failing = search.faulting
        if stopped:
            result.message += f" ({stopped})"
    except CaseFailed:
        search.end_search()
        report_failure()
    except Exception as exc:  # a kernel, launcher or oracle fault fails this case only
        search.end_search()
        failed = isinstance(exc, BaseExceptionGroup) and exc.subgroup(CaseFailed) is not None
        if failed and search.failing is not None:
            # hypothesis found a failure and, on other inputs, a fault: the failure is the finding,
            # reported on its own input (the record held the fault's message with the failure's input)
            fault = exc.subgroup(lambda e: not isinstance(e, (CaseFailed, BaseExceptionGroup)))
            report_failure()
            if fault is not None:
                result.message += f" (another input raised {_error_message(_first_cause(fault))})"
        else:
            result.verdict, result.message = "error", _error_message(_first_cause(exc))
            search.failing = search.faulting or search.failing or search.current
    if search.not_here and search.examples == 0 and result.verdict in ("pass", "error"):
        # --as-arch: no input could run on the local device (hypothesis gave up, or the replay)
        result.verdict, result.message = "skip", "; ".join(search.not_here)
    result.examples = search.examples
    if result.verdict == "pass" and search.far_note:
        result.message = f"far rows not checked: {search.far_note}"
    if result.verdict == "pass" and search.notes():
        result.message = "; ".join(filter(None, [result.message, *search.notes()]))
    if search.shrink_ended is not None and clock.target_name is not None:
        # everything after the failure was shrinking, hypothesis's own time between examples too:
        # the wall time that the shrink budget is spent against, not only the timed launches
        clock.seconds["shrink"] = search.shrink_ended - search.shrink_started
    result.phases = clock.rounded()
    # a failure's numbers are those of the input it reports (its replay prints the same), not the
    # largest over every input the search tried on its way there
    result.metrics = search.failing_metrics if result.verdict == "fail" and search.failing_metrics \
        else search.metrics
    result.tolerance = search.tolerance
    result.failing_input = search.failing if result.verdict in ("fail", "error") else None
    # shrinking may end on a degenerate input (one element, a row of zeros) whose symptom is not the
    # one a realistic input shows: the record keeps the first failing input too, where it differs
    if result.verdict == "fail" and search.first_failure and search.first_failure["input"] != search.failing:
        result.first_failure = search.first_failure
    if (result.failing_input or {}).get("layout") == "far":
        result.message = FAR_HINT + result.message
    elif COLUMNS_KEY in (result.failing_input or {}):
        result.message = columns_hint(result.failing_input[COLUMNS_KEY]) + result.message
    elif result.failing_input is not None and result.failing_input is search.many_rows:
        rows = next(result.failing_input[k] for k in ROW_KEYS if k in result.failing_input)
        result.message = MANY_HINT.format(rows=rows, per=MANY_ROWS_PER_UNIT) + result.message
    elif result.failing_input is not None and result.failing_input is search.striding_rows:
        result.message = STRIDING_HINT.format(rows=STRIDING_ROWS) + result.message
    elif result.failing_input is not None and result.failing_input is search.long_row:
        result.message = LONG_ROW_HINT.format(cols=LONG_ROW) + result.message
    if result.failing_input is not None and search.failing_autotune:
        ran = "; ".join(dict.fromkeys(run.describe() for run in search.failing_autotune))
        result.message = f"{ran}: {result.message}"
    if override is not None and override.action == "xfail":
        if result.verdict in ("fail", "error"):
            result.verdict = "xfail"
            result.message = f"expected failure ({override.reason}): {result.message}"
        else:
            result.verdict = "xpass"
            result.message = (f"strict xfail: passed although the override says '{override.reason}'; "
                              "remove the entry from the overrides manifest")
    result.reproduce = reproduce_command(target_name, case.name, dtype, result.failing_input, seed, checks,
                                         forced.name if forced else None)
    return result


def _error_message(exc: BaseException) -> str:
    where = kernel_line(exc)
    if hasattr(exc, "error_message"):   # Triton's CompilationError: its first line is only "at L:C:"
        said = first_error_line(exc)
    else:
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {said}" + (f" (at {where})" if where else "")


def bench_launch(case: Case, target_name: str, spec: dict):
    """A zero-argument launch of the case on a bench spec, its inputs made: what time_case times.
    The inputs (hundreds of MB) are drawn on the GPU: on the host they cost seconds."""
    from .strategies import drawn_on
    device = TARGETS[target_name].device
    with drawn_on(device):
        args = case.make(spec, device)
    outs = {n: torch.empty(shape, dtype=dt, device=device) for n, (shape, dt) in case.outputs(args).items()}
    return lambda: case.launch(args, outs)


def time_case(case: Case, target_name: str, spec: dict) -> float:
    """Median milliseconds of one launch on a GPU target (triton.testing.do_bench, L2 flushed
    before each launch): 10 ms of warm-up and 40 ms of launches, dozens of them for any kernel of
    this matrix, enough for the column's median; `portcheck bench` gives the careful figures."""
    import triton.testing
    return float(triton.testing.do_bench(bench_launch(case, target_name, spec), warmup=10, rep=40,
                                         return_mode="median"))
