"""The persistent long-row kernels of softmax, LayerNorm and RMSNorm: every program count writes
every row with the same bits, within the cases' tolerances; softmax keeps IEEE semantics for
inf and NaN on any lane, and neither its L2 prefetch (where the arch has one) nor its bf16 rows
read as words changes a bit, nor does the norms' stagger (programs idling out of phase, NVIDIA); the
launchers refuse a bad program count before launch."""
import contextlib

import pytest
import torch

from tests.support.launching import DEVICE, forbid_launches, needs_device
from portcheck import cases
from portcheck.compare import compare
from portcheck.dtypes import fmt
from portcheck.kernels import _launch
from portcheck.kernels import layernorm as LN
from portcheck.kernels import rmsnorm as RMS
from portcheck.kernels import softmax as SM
from portcheck.kernels._prefetch import l2_prefetch_ok
from portcheck.kernels._stagger import stagger_args, stagger_ok
from portcheck.facts.archs import DEFAULT_ARCHS, INTERPRETER, arch
from portcheck.facts.device import forced_arch, local_arch
from portcheck.cases import float64_args
from portcheck.runner import poisoned

ROWS, COLS, CHUNK = 7, 100, 32   # 4 chunks a row, the last partial; more rows than most grids
PROGRAM_COUNTS = (1, 2, 3, ROWS, 50)   # 50 > ROWS: one row per program, as without persistence


def _run(family: str, args: dict, programs: int | None) -> dict:
    """Launch a family's long-row kernel into NaN-poisoned outputs; returns them by case name."""
    x = args["x"]
    if family == "softmax":
        y = poisoned(tuple(x.shape), x.dtype, DEVICE)
        SM.softmax(x, y, long_rows=True, chunk=CHUNK, programs=programs)
        return {"y": y}
    rstd = poisoned((x.shape[0],), torch.float32, DEVICE)
    y = poisoned(tuple(x.shape), x.dtype, DEVICE)
    if family == "layernorm":
        mean = poisoned((x.shape[0],), torch.float32, DEVICE)
        LN.layer_norm(x, args["weight"], args["bias"], args["eps"], out=y, mean=mean, rstd=rstd,
                      long_rows=True, chunk=CHUNK, programs=programs)
        return {"y": y, "mean": mean, "rstd": rstd}
    RMS.rms_norm(x, args["weight"], args["eps"], out=y, rstd=rstd, long_rows=True, chunk=CHUNK,
                 programs=programs)
    return {"y": y, "rstd": rstd}


def _args(family: str, x: torch.Tensor) -> dict:
    g = torch.Generator().manual_seed(1)
    w = torch.randn(x.shape[1], generator=g).to(device=DEVICE, dtype=x.dtype)
    b = torch.randn(x.shape[1], generator=g).to(device=DEVICE, dtype=x.dtype)
    if family == "softmax":
        return {"x": x}
    if family == "layernorm":
        return {"x": x, "weight": w, "bias": b, "eps": 1e-5}
    return {"x": x, "weight": w, "eps": 1e-6}


def _check_against_oracle(family: str, args: dict, outs: dict) -> None:
    case = cases.get(f"{family}_long")
    args64 = float64_args({**args, "long_rows": True, "chunk": CHUNK}, DEVICE)   # as the case's make()
    refs = case.oracle(args64)
    tols = case.tolerance(args64, refs, fmt(args["x"].dtype).name)
    for name, out in outs.items():
        result = compare(name, out, refs[name], tols[name])
        assert result.ok, result.message


@needs_device
@pytest.mark.parametrize("family", ["softmax", "layernorm", "rmsnorm"])
def test_every_program_count_writes_every_row_alike(family):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(ROWS, COLS, generator=g) * 3 + 1).to(DEVICE)
    args = _args(family, x)
    first = None
    for programs in PROGRAM_COUNTS:
        outs = _run(family, args, programs)
        _check_against_oracle(family, args, outs)   # poisoned: a row left unwritten stays NaN
        if first is None:
            first = outs
        for name, out in outs.items():   # a row's arithmetic does not depend on the grid
            assert torch.equal(out, first[name]), (family, programs, name)
    # the default grid: a few programs on the interpreter (each loops over rows), one per SM on a GPU
    default = _run(family, args, None)
    for name, out in default.items():
        assert torch.equal(out, first[name]), (family, "default", name)


class _Forced:
    """A looped kernel whose launches record the constexpr `flag` the wrapper asked for, and run
    with `value` instead where it is not None."""

    def __init__(self, kernel, flag, value):
        self.kernel, self.flag, self.value, self.asked = kernel, flag, value, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.asked.append(kwargs[self.flag])
            value = kwargs[self.flag] if self.value is None else self.value
            return self.kernel[grid](*args, **{**kwargs, self.flag: value})
        return launch


@needs_device
def test_layernorm_rows_of_whole_chunks_drop_the_masks_and_keep_the_bits(monkeypatch):
    """A row of whole chunks runs unmasked (EVEN) and writes what the masked code writes; a row
    with a tail is launched masked; a strided view of whole chunks is unmasked too."""
    kernel = LN.layernorm_looped_kernel
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(ROWS, COLS, generator=g) * 3 + 1).to(DEVICE)
    runs, asked = {}, {}
    for label, view, even in (("unmasked", x[:, :3 * CHUNK], None), ("masked", x[:, :3 * CHUNK], False),
                              ("tail", x, None)):
        forced = _Forced(kernel, "EVEN", even)
        monkeypatch.setattr(LN, "layernorm_looped_kernel", forced)
        args = _args("layernorm", view)
        runs[label] = _run("layernorm", args, 3)
        _check_against_oracle("layernorm", args, runs[label])
        asked[label] = forced.asked
    assert asked == {"unmasked": [True], "masked": [True], "tail": [False]}
    for out, value in runs["unmasked"].items():
        assert torch.equal(value, runs["masked"][out]), out


def test_the_l2_prefetch_is_asked_for_only_where_the_arch_has_it():
    """cp.async.bulk.prefetch is NVIDIA sm_90+'s (PTX ISA); it reads 16-byte aligned addresses,
    16 bytes at a time, so a misaligned view or chunk runs without it."""
    assert [name for name in DEFAULT_ARCHS if l2_prefetch_ok(arch(name))] == ["sm_90a", "sm_100a", "sm_120"]
    assert not l2_prefetch_ok(INTERPRETER)
    hopper = arch("sm_90a")
    x = torch.zeros(4, 64, dtype=torch.bfloat16)
    assert l2_prefetch_ok(hopper, x, 32)
    assert not l2_prefetch_ok(hopper, x[:, 1:], 32)                                      # data 2 B off
    assert not l2_prefetch_ok(hopper, torch.zeros(4, 65, dtype=torch.bfloat16)[:, :64], 32)  # rows 130 B apart
    assert not l2_prefetch_ok(hopper, x, 4)                                              # 8-byte chunks
    assert not l2_prefetch_ok(arch("gfx942"), x, 32)


@pytest.mark.skipif(DEVICE != "cuda" or not l2_prefetch_ok(local_arch()),
                    reason="the L2 prefetch is NVIDIA sm_90+'s")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("programs", [1, 3, 50])
def test_softmax_l2_prefetch_keeps_every_bit(monkeypatch, dtype, programs):
    """With and without the prefetch, alike on rows with a tail and of whole chunks (the last
    rows' prefetches stop at the tensor's end), and the wrapper asks for it only on aligned rows,
    also under another arch's configuration (--as-arch: the prefetch is the local device's)."""
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(ROWS, 4 * CHUNK, generator=g) * 3).to(device=DEVICE, dtype=dtype)   # rows 16-byte aligned
    views = {"tail": (x[:, :COLS], True), "whole chunks": (x[:, :3 * CHUNK].contiguous(), True),
             "misaligned": (x[:, 1:COLS + 1], False), "as sm_80": (x[:, :COLS], True)}
    for label, (view, prefetched) in views.items():
        runs = {}
        for value in (None, False):
            forced = _Forced(SM.softmax_online_kernel, "PREFETCH", value)
            monkeypatch.setattr(SM, "softmax_online_kernel", forced)
            with forced_arch(arch("sm_80")) if label == "as sm_80" else contextlib.nullcontext():
                runs[value] = _run("softmax", {"x": view}, programs)["y"]
            monkeypatch.undo()
            assert forced.asked == [prefetched], label
        _check_against_oracle("softmax", {"x": view}, {"y": runs[None]})
        assert torch.equal(runs[None], runs[False]), label


@needs_device
def test_softmax_reads_bf16_as_words_and_keeps_every_bit(monkeypatch):
    """bf16 rows of an even length starting 4-byte aligned are read as int32 words of two elements
    (WORDS) and give the element loads' bits: rows with a tail (the words past it masked to -inf)
    and of whole chunks, a NaN, an inf and a -inf in either half of a word, a row of only -inf. An
    odd length, a view 2 bytes off, an odd row stride, fp16 and chunks of one element are read
    element by element. (Words are a row's business: one program count, with several rows each.)"""
    programs = 3
    g = torch.Generator().manual_seed(5)
    wide = (torch.randn(ROWS, 4 * CHUNK + 1, generator=g) * 3).to(torch.bfloat16)
    wide[1, 6], wide[2, 9], wide[3, 40], wide[4, 41] = float("nan"), float("nan"), float("inf"), -float("inf")
    wide[5] = -float("inf")
    wide = wide.to(DEVICE)
    x = wide[:, :4 * CHUNK].contiguous()
    views = {"tail": (x[:, :COLS], True), "whole chunks": (x[:, :3 * CHUNK].contiguous(), True),
             "odd length": (x[:, :COLS - 1], False), "2 bytes off": (x[:, 1:COLS + 1], False),
             "odd row stride": (wide[:, :COLS], False), "fp16": (x[:, :COLS].to(torch.float16), False)}
    for label, (view, words) in views.items():
        runs = {}
        for value in (None, False):
            forced = _Forced(SM.softmax_online_kernel, "WORDS", value)
            monkeypatch.setattr(SM, "softmax_online_kernel", forced)
            runs[value] = _run("softmax", {"x": view}, programs)["y"]
            monkeypatch.undo()
            assert forced.asked == [words], label
        _check_against_oracle("softmax", {"x": view}, {"y": runs[None]})
        assert torch.equal(runs[None].nan_to_num(), runs[False].nan_to_num()), label
        assert torch.equal(runs[None].isnan(), runs[False].isnan()), label
    forced = _Forced(SM.softmax_online_kernel, "WORDS", None)   # a chunk of one element holds no word
    monkeypatch.setattr(SM, "softmax_online_kernel", forced)
    y = SM.softmax(x[:, :8], long_rows=True, chunk=1, programs=programs)
    assert forced.asked == [False]
    _check_against_oracle("softmax", {"x": x[:, :8]}, {"y": y})


def test_the_stagger_is_asked_for_on_nvidia_only():
    """%globaltimer is NVIDIA's PTX: AMD and the interpreter run the kernels as they were."""
    assert [name for name in DEFAULT_ARCHS if stagger_ok(arch(name))] == \
        [name for name in DEFAULT_ARCHS if arch(name).vendor == "nvidia"]
    assert not stagger_ok(INTERPRETER) and not stagger_ok(arch("gfx942"))
    assert stagger_args(arch("gfx942"), 4, 0.3, 304, 2**19) == {"STAGGER": False}


@pytest.mark.parametrize("module", [LN, RMS])
def test_no_program_idles_as_long_as_a_row_takes(module):
    """The longest idle, (PHASES - 1) x STEP model rows, is at most one: the model row is a lower
    bound on a row's time (the datasheet bandwidth shared by the rows in flight)."""
    assert (module.STAGGER_PHASES - 1) * module.STAGGER_STEP <= 1
    h200 = stagger_args(arch("sm_90a"), module.STAGGER_PHASES, module.STAGGER_STEP, 132, 2 * 2 * 131072)
    # 132 rows of 131072 bf16 read and written at 4.8 TB/s: 14.4 us (the H200 takes about 20)
    assert h200["STAGGER"] and h200["row_ns"] == pytest.approx(132 * 2 * 2 * 131072 / 4800)


@pytest.mark.skipif(DEVICE != "cuda", reason="the stagger is NVIDIA's")
@pytest.mark.parametrize("family,kernel", [("layernorm", "layernorm_looped_kernel"), ("rmsnorm", "rmsnorm_looped_kernel")])
@pytest.mark.parametrize("programs", [1, 3, 5, 50])
def test_programs_out_of_phase_keep_every_bit(monkeypatch, family, kernel, programs):
    """With and without the idle time after the first row (ROWS = 7 rows: 3 and 5 programs leave
    some with one row fewer, 1 and 50 none), every output alike and within the oracle's tolerance."""
    module = {"layernorm": LN, "rmsnorm": RMS}[family]
    g = torch.Generator().manual_seed(5)
    x = (torch.randn(ROWS, COLS, generator=g) * 3 + 1).to(DEVICE)
    runs = {}
    for value in (None, False):
        forced = _Forced(getattr(module, kernel), "STAGGER", value)
        monkeypatch.setattr(module, kernel, forced)
        args = _args(family, x)
        runs[value] = _run(family, args, programs)
        monkeypatch.undo()
        assert forced.asked == [True]
    _check_against_oracle(family, args, runs[None])
    for name, out in runs[None].items():
        assert torch.equal(out, runs[False][name]), name


def _special_rows() -> torch.Tensor:
    """Rows whose softmax IEEE arithmetic defines, chunk 32 so each lane sees 4 columns."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(11, COLS, generator=g) * 4
    x[0] = float("-inf")                                # all -inf: exp(-inf - -inf) is NaN
    x[1, 70] = float("inf")                             # +inf: inf - inf is NaN, the whole row NaN
    x[2, 5] = float("nan")                              # NaN anywhere: the whole row NaN
    x[3, ::3] = float("-inf")                           # -inf among finite values: exact zeros
    x[4, 3::CHUNK] = float("-inf")                      # one lane sees only -inf, and then NaN:
    x[4, 3 + 2 * CHUNK] = float("nan")                  #   still the whole row NaN
    x[5, 7] = x[5, 7 + CHUNK] = float("inf")            # +inf twice on one lane
    x[6] = torch.arange(COLS, dtype=torch.float32)      # the max rises on every chunk: rescaling
    x[7] = -torch.arange(COLS, dtype=torch.float32)     # the max comes first
    x[8, :] = 3e38                                      # huge and equal: no overflow, 1/n each
    x[9] = torch.linspace(0, -110, COLS)                # exp down to 2^-159: subnormal fp32
                                                        #   outputs, none flushed to 0
    x[10, 96:99] = float("-inf")                        # a NaN whose 16-byte group holds only
    x[10, 99] = float("nan")                            #   -inf besides: still the whole row NaN
    return x


@needs_device
@pytest.mark.parametrize("programs", [1, 2, 9])
def test_softmax_long_keeps_ieee_semantics_on_every_lane(programs):
    x = _special_rows().to(DEVICE)
    outs = _run("softmax", {"x": x}, programs)
    _check_against_oracle("softmax", {"x": x}, outs)   # NaN where the oracle has NaN, only there
    y = outs["y"].cpu()
    assert torch.isnan(y[[0, 1, 2, 4, 5, 10]]).all()
    assert (y[3, ::3] == 0).all() and not torch.isnan(y[3]).any()
    assert torch.allclose(y[8], torch.full((COLS,), 1 / COLS))
    tiny = torch.finfo(torch.float32).tiny
    assert ((y[9] > 0) & (y[9] < tiny)).any()


@pytest.mark.parametrize("keyword, bad, message",
                         [("programs", bad, "programs must be a positive int") for bad in (0, -3, True, 2.0, "4")]
                         + [("chunk", bad, "chunk must be a power of two") for bad in (0, -4, 3, True, 2.0, "16")])
def test_a_bad_program_count_or_chunk_is_refused_before_launch(monkeypatch, keyword, bad, message):
    forbid_launches(monkeypatch, SM, "softmax_online_kernel", "softmax_rows_kernel")
    forbid_launches(monkeypatch, LN, "layernorm_looped_kernel", "layernorm_rows_kernel")
    forbid_launches(monkeypatch, RMS, "rmsnorm_looped_kernel", "rmsnorm_rows_kernel")
    x = torch.zeros(4, 8)
    for call in (lambda: SM.softmax(x, long_rows=True, **{keyword: bad}),
                 lambda: LN.layer_norm(x, long_rows=True, **{keyword: bad}),
                 lambda: RMS.rms_norm(x, long_rows=True, **{keyword: bad})):
        with pytest.raises(ValueError, match=message):
            call()


def test_persistent_grid_size():
    cpu = torch.device("cpu")
    # off the GPU a few programs, so that each loops over rows; never more programs than rows
    assert _launch.persistent_programs(100, cpu, 1) == _launch.INTERPRETER_PROGRAMS
    assert _launch.persistent_programs(1, cpu, 4) == 1
    assert _launch.persistent_programs(100, cpu, 1, programs=7) == 7
    assert _launch.persistent_programs(5, cpu, 1, programs=64) == 5
    assert _launch.INTERPRETER_PROGRAMS >= 2


def test_a_balanced_grid_drops_the_partial_last_wave_only_when_few_programs_go(monkeypatch):
    monkeypatch.setattr(_launch, "interpreted", lambda: False)
    monkeypatch.setattr(_launch, "compute_units", lambda device: 132)
    gpu = torch.device("cuda")   # only its type is read
    assert _launch.persistent_programs(4096, gpu, 1) == 132
    assert _launch.persistent_programs(4096, gpu, 1, balanced=True) == 128   # 32 rows each, as before
    assert _launch.persistent_programs(133, gpu, 1, balanced=True) == 132    # 67 would idle half the SMs
    assert _launch.persistent_programs(10**6, gpu, 1, balanced=True) == 132
    assert _launch.persistent_programs(4096, gpu, 1, programs=132, balanced=True) == 132   # asked for
    for rows in range(1, 2000):   # never more rows a program than the plain grid gives
        plain, even = (_launch.persistent_programs(rows, gpu, 1, balanced=b) for b in (False, True))
        assert -(-rows // even) == -(-rows // plain) and 16 * (plain - even) <= plain


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU to count its SMs/CUs")
def test_default_grid_is_programs_per_sm_times_the_device_units():
    dev = torch.device("cuda")
    units = torch.cuda.get_device_properties(dev).multi_processor_count
    for module in (SM, LN, RMS):
        assert _launch.persistent_programs(10**6, dev, module.PROGRAMS_PER_SM) == module.PROGRAMS_PER_SM * units


@pytest.mark.parametrize("module", [RMS, LN, SM])
def test_the_looped_chunk_is_the_same_bytes_for_every_dtype(module):
    """LOOP_BLOCK counts 16-bit elements: fp32 rows take half as many a chunk (the same bytes in
    registers), and a row shorter than a chunk takes its own power of two."""
    long = 1 << 20
    half = module.config(long, 32, long_rows=True, itemsize=2)["BLOCK"]
    single = module.config(long, 32, long_rows=True, itemsize=4)["BLOCK"]
    assert half == module.LOOP_BLOCK and single * 4 == half * 2
    assert module.config(1000, 32, long_rows=True, itemsize=4)["BLOCK"] == 1024
