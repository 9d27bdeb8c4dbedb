"""matmul's launcher: bad input is refused with a ValueError before anything launches, and a few
fixed edge cases (K = 0, one element, 64-bit indexing, the autotuned path) run on the interpreter."""
import os

import pytest
import torch

from portcheck.facts.archs import ARCHS
from portcheck.kernels import _launch
from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul import case as mm_case
from portcheck.kernels.matmul import launcher as mm_launcher
from portcheck.oracles.matmul import int_matmul
from portcheck.oracles.matmul import matmul as matmul_ref
from tests.support.launching import tma_launches

INTERPRETER = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class _NoLaunch:
    """Stands in for the kernels: any launch attempt fails the test."""

    def __getitem__(self, grid):
        raise AssertionError("the launcher launched a kernel for bad input")


@pytest.fixture
def on_arch(monkeypatch):
    """Pretend the active device is `arch` and make any launch an error."""
    def use(arch: str):
        monkeypatch.setattr(mm_launcher, "current_arch", lambda: ARCHS[arch])
        monkeypatch.setattr(mm_case, "current_arch", lambda: ARCHS[arch])
        monkeypatch.setattr(mm_launcher, "_kernel", _NoLaunch())
        monkeypatch.setattr(mm_launcher, "matmul_tma_kernel", _NoLaunch())
        monkeypatch.setattr(mm_launcher, "_autotuned", lambda *a, **k: _NoLaunch())
    return use


def tf32(x: torch.Tensor) -> torch.Tensor:
    """fp32 operands as a tf32 dot takes them (rounded to 10 fraction bits)."""
    from portcheck.targets.interpreter_numerics import round_to_tf32
    return torch.from_numpy(round_to_tf32(x.contiguous().numpy())).reshape(x.shape)


def fp8(shape, dtype=torch.float8_e4m3fn):
    return torch.randn(*shape).to(dtype)


ONE = torch.tensor([1.0])


@pytest.mark.parametrize("call,words", [
    (lambda: mm.matmul(torch.randn(2, 3, 4), torch.randn(4, 5)), ["a must be 2-D", "3-D"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3)), ["b must be 2-D", "1-D"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(4, 5)), ["K mismatch", "[2, 3]", "[4, 5]"]),
    (lambda: mm.matmul(torch.randn(2, 3, dtype=torch.float64), torch.randn(3, 5, dtype=torch.float64)),
     ["torch.float64", "matmul takes fp16, bf16, fp32, int8 or fp8"]),
    (lambda: mm.matmul(torch.randn(2, 3).half(), torch.randn(3, 5)), ["both operands must share a dtype"]),
    (lambda: mm.matmul(torch.randn(2, 3), [[1.0]]), ["b must be a torch.Tensor"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), activation="tanh"), ["unknown activation 'tanh'"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), scale_a=ONE, scale_b=ONE),
     ["per-tensor scales are for fp8"]),
    (lambda: mm.matmul(torch.randn(2, 3).half(), torch.randn(3, 5).half(), out_dtype=torch.float32),
     ["writes torch.float16, not torch.float32"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), bias=torch.randn(4)), ["bias must have shape (5,)"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), bias=torch.randn(5).half()),
     ["bias has dtype torch.float16; expected torch.float32"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), out=torch.empty(5, 2)),
     ["out must be a torch.float32 tensor of shape (2, 5)"]),
    (lambda: mm.matmul(torch.ones(2, 3, dtype=torch.int8), torch.ones(3, 5, dtype=torch.int8), activation="gelu"),
     ["exact int32", "'gelu'"]),
    (lambda: mm.matmul(torch.ones(2, 3, dtype=torch.int8), torch.ones(3, 5, dtype=torch.int8),
                       bias=torch.ones(5, dtype=torch.int64)), ["bias has dtype torch.int64; expected torch.int32"]),
    (lambda: mm.matmul(fp8((2, 3)), fp8((3, 5))), ["need scale_a and scale_b"]),
    (lambda: mm.matmul(fp8((2, 3)), fp8((3, 5)), scale_a=torch.tensor([1.0]).half(), scale_b=ONE),
     ["scale_a must be a one-element float32 tensor"]),
    (lambda: mm.matmul(fp8((2, 3)), fp8((3, 5)), scale_a=ONE, scale_b=torch.ones(2)),
     ["scale_b must be a one-element float32 tensor", "(2,)"]),
    (lambda: mm.matmul(fp8((2, 3)), fp8((3, 5)), scale_a=ONE, scale_b=ONE, out_dtype=torch.float8_e4m3fn),
     ["writes bf16, fp16 or fp32"]),
    (lambda: mm.matmul(fp8((2, 3)), fp8((3, 5), torch.float8_e5m2), scale_a=ONE, scale_b=ONE),
     ["both operands must share a dtype"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), config={"BLOCK_M": 16}),
     ["config must be a matmul Config"]),
    (lambda: mm.matmul(torch.randn(2, 3), torch.randn(3, 5), config=mm.config_table()["amd"]["fp32"][0]),
     ["carries AMD options, which sm_90a does not take"]),
])
def test_bad_input_is_refused_before_launch(on_arch, call, words):
    on_arch("sm_90a")
    with pytest.raises(ValueError) as err:
        call()
    for w in words:
        assert w in str(err.value), str(err.value)


@pytest.mark.parametrize("arch,dtype,takes", [
    ("sm_80", torch.float8_e4m3fn, "no fp8 format"),
    ("sm_80", torch.float8_e5m2, "no fp8 format"),
    ("sm_90a", torch.float8_e4m3fnuz, "fp8e4nv, fp8e5"),
    ("sm_120", torch.float8_e5m2fnuz, "fp8e4nv, fp8e5"),
    ("gfx942", torch.float8_e4m3fn, "fp8e4b8, fp8e5b16"),
    ("gfx950", torch.float8_e4m3fnuz, "fp8e4nv, fp8e5"),
    ("gfx90a", torch.float8_e4m3fnuz, "no fp8 format"),
    ("gfx1100", torch.float8_e5m2, "no fp8 format"),
])
def test_fp8_format_the_arch_cannot_run_is_refused(on_arch, arch, dtype, takes):
    on_arch(arch)
    with pytest.raises(ValueError) as err:
        mm.matmul(fp8((2, 3), dtype), fp8((3, 5), dtype), scale_a=ONE, scale_b=ONE)
    assert f"does not run on {arch}" in str(err.value) and takes in str(err.value)


def test_empty_output_launches_nothing(on_arch):
    on_arch("sm_90a")
    c = mm.matmul(torch.randn(0, 3), torch.randn(3, 5))
    assert c.shape == (0, 5)


# ---- real launches on the interpreter (the GPU runs are tests/kernels/test_kernels.py's) -------------

needs_interpreter = pytest.mark.skipif(not INTERPRETER, reason="launches CPU tensors: interpreter only")


@needs_interpreter
@pytest.mark.parametrize("activation", ["none", "relu", "gelu", "silu"])
def test_k_zero_gives_the_epilogue_of_zero(activation):
    bias = torch.randn(5)
    c = mm.matmul(torch.randn(3, 0), torch.randn(0, 5), bias=bias, activation=activation)
    ref = matmul_ref(torch.zeros(3, 0, dtype=torch.float64), torch.zeros(0, 5, dtype=torch.float64),
                     bias=bias.double(), activation_name=activation)
    torch.testing.assert_close(c.double(), ref, rtol=1e-6, atol=1e-7)


@needs_interpreter
def test_autotuned_path_and_every_interpreter_config_agree():
    a, b = torch.randn(37, 70).half(), torch.randn(70, 33).half()
    outs = [mm.matmul(a, b)] + [mm.matmul(a, b, config=c) for c in mm.configs("fp16")]
    ref = matmul_ref(a.double(), b.double())
    for c in outs:
        # fp16 output: half an ulp of rounding plus a small accumulation error
        assert ((c.double() - ref).abs() <= 2.0 ** -10 * ref.abs() + 1e-3).all()


@needs_interpreter
def test_wide_indexing_gives_the_same_result():
    """The 64-bit index path (taken only past 2^31 elements) computes what the 32-bit one does."""
    a, b = torch.randn(20, 40), torch.randn(40, 24)
    cfg = mm.configs("fp32")[0]
    outs = []
    for wide in (False, True):
        c = torch.full((20, 24), float("nan"))
        grid = (-(-20 // cfg.block_m) * -(-24 // cfg.block_n),)
        mm_launcher._kernel[grid](a, b, c, None, None, None, 20, 24, 40, *a.stride(), *b.stride(), *c.stride(),
                         **cfg.constexprs(), WIDE=wide, HAS_BIAS=False, HAS_SCALES=False,
                         ACTIVATION="none", PRECISION="ieee", FP8_ACC="none")
        outs.append(c)
    assert torch.equal(outs[0], outs[1]) and not outs[0].isnan().any()


@needs_interpreter
def test_int8_extremes_are_exact_and_wrap_like_int32():
    a = torch.full((17, 300), -128, dtype=torch.int8)
    b = torch.full((300, 9), -128, dtype=torch.int8)
    bias = torch.full((9,), 2**31 - 1, dtype=torch.int32)   # the sum overflows: int32 wraps
    c = mm.matmul(a, b, bias=bias)
    assert torch.equal(c, int_matmul(a, b, bias=bias))
    assert int(c[0, 0]) == ((300 * 16384 + 2**31 - 1 + 2**31) % 2**32) - 2**31


def test_alignment_hints_name_only_the_16_byte_multiples_triton_cannot_see():
    from portcheck.kernels.matmul import alignment_hints
    # M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn for bf16 4000x4104x4104
    vals = (4000, 4104, 4104, 4104, 1, 4104, 1, 4104, 1)
    got = alignment_hints(vals, 2)
    # 4000 is a multiple of 16 (Triton specialises it), 4104 = 8 * 513 is a multiple of 8 only
    assert got == {"VEC": 8, "HINTS": 2 | 4 | 8 | 32 | 128}
    assert alignment_hints((4096,) * 3 + (4096, 1, 4096, 1, 4096, 1), 2) == {}     # nothing to add
    assert alignment_hints((4097, 4097, 4097, 4097, 1, 4097, 1, 4097, 1), 2) == {}   # not provable
    assert alignment_hints((4104,) * 9, 1) == {}       # fp8 / int8: a 16-byte vector is 16 elements
    assert alignment_hints((4100,) * 3 + (4100, 1) * 3, 4) == {"VEC": 4, "HINTS": 1 | 2 | 4 | 8 | 32 | 128}


def test_fp32_on_a_tf32_arch_is_also_compared_with_the_library_at_tf32(on_arch):
    """torch's default fp32 matmul is exact; the kernel uses tf32 where the arch has it, so the
    bench adds the library at tf32, and leaves torch's setting as it found it."""
    spec = {"dtype": "fp32", "m": 8, "n": 8, "k": 8, "a_layout": "row", "b_layout": "row",
            "bias": False, "activation": "none", "config": None, "regime": "normal", "seed": 0}
    on_arch("sm_90a")
    args = mm_case._make(spec, "cpu")
    assert args["precision"] == "tf32"
    matmul_settings = torch.backends.cuda.matmul
    before = getattr(matmul_settings, "fp32_precision", None), matmul_settings.allow_tf32
    found = mm_case._baselines(args)
    assert {"torch", "torch.matmul tf32"} <= set(found)
    assert torch.equal(found["torch.matmul tf32"](), found["torch"]())   # on the CPU tf32 is moot
    assert (getattr(matmul_settings, "fp32_precision", None), matmul_settings.allow_tf32) == before
    on_arch("gfx90a")   # no tf32 there: ieee, and no tf32 baseline
    assert "torch.matmul tf32" not in mm_case._baselines(mm_case._make(spec, "cpu"))


class _StrideSpy:
    """Stands in for the kernel and records the operand strides of each launch."""

    def __init__(self):
        self.strides = []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):   # (a, b, c, bias, sa, sb, M, N, K, am, ak, bk, bn, cm, cn)
            self.strides.append(args[9:13])
        return launch


@pytest.mark.parametrize("arch,dtype,relaid", [("sm_90a", torch.float32, True),
                                               ("sm_100a", torch.float32, True),
                                               ("sm_90a", torch.float16, False),
                                               ("sm_80", torch.float32, False),
                                               ("sm_120", torch.float32, False)])
def test_tf32_operands_reach_wgmma_and_tcgen05_k_major(monkeypatch, arch, dtype, relaid):
    monkeypatch.setattr(mm_launcher, "current_arch", lambda: ARCHS[arch])
    spy = _StrideSpy()
    monkeypatch.setattr(mm_launcher, "_kernel", spy)
    wide = mm.Config(64, 16, 16, 1, 4, 1)            # a wgmma / tcgen05 tile on sm_90a / sm_100a
    a_col = torch.randn(6, 4).to(dtype).t()          # [4, 6], M-major
    b_row = torch.randn(6, 5).to(dtype)              # [6, 5], N-major
    mm.matmul(a_col, b_row, config=wide)
    mm.matmul(b_row.t().contiguous(), b_row.t().contiguous().t(), config=wide)   # both K-major
    mm.matmul(a_col, b_row, config=mm.Config(16, 16, 16, 1, 4, 1))   # mma.sync: either layout
    k_major = (6, 1, 1, 6)                           # stride_am, stride_ak, stride_bk, stride_bn
    as_given = (1, 4, 5, 1)
    assert spy.strides == [k_major if relaid else as_given, k_major, as_given]


def test_the_autotuned_launch_relays_only_past_the_narrow_tiles(monkeypatch):
    """M <= NARROW_M keeps the autotuner to the narrow mma.sync tiles: B is read once, as given."""
    monkeypatch.setattr(mm_launcher, "current_arch", lambda: ARCHS["sm_90a"])
    spy = _StrideSpy()
    monkeypatch.setattr(mm_launcher, "_autotuned", lambda *a: spy)
    b_row = torch.randn(6, 5)
    for m in (mm.NARROW_M, mm.NARROW_M + 1):
        mm.matmul(torch.randn(m, 6), b_row)
    assert [s[2:] for s in spy.strides] == [(5, 1), (1, 6)]


@needs_interpreter
def test_relaid_operands_give_the_product(monkeypatch):
    monkeypatch.setattr(mm_launcher, "current_arch", lambda: ARCHS["sm_90a"])
    a, b = torch.randn(33, 20).t(), torch.randn(33, 17)           # [20, 33] M-major, [33, 17]
    c = mm.matmul(a, b, config=mm.Config(64, 16, 16, 1, 4, 1))
    ref = matmul_ref(tf32(a).double(), tf32(b).double())         # sm_90a's fp32 dot is tf32
    # exact tf32 products summed over K = 33 in fp32: each term within 2^-24 relative
    bound = 33 * 2.0 ** -24 * (a.double().abs() @ b.double().abs())
    assert ((c.double() - ref).abs() <= bound).all()


def test_split_k_only_where_the_tiles_leave_units_idle_and_never_an_empty_split():
    split_k = mm_launcher.split_k
    # M = 1, N = K = 4104 on 132 SMs, about one program per SM: 16x128x128 tiles, 33 tiles, K split
    # 4 ways (9, 9, 9 and 6 slices); 16x64x64, 65 tiles, 3 ways (22, 22, 21)
    assert split_k(1, 4104, 4104, 16, 128, 128, 132) == 4
    assert split_k(1, 4104, 4104, 16, 64, 64, 132) == 3
    assert split_k(4096, 4096, 4096, 128, 128, 64, 132) == 1           # the tiles fill the device
    assert split_k(1, 4104, 7 * 64, 16, 64, 64, 132) == 1   # 7 slices: two splits would take under 4 each
    for k in range(1, 3000, 37):
        s = split_k(16, 64, k, 16, 64, 32, 132)
        slices = -(-k // 32)
        per = -(-slices // s)
        assert 1 <= s <= mm_launcher.SPLIT_MOST and (s - 1) * per < slices, (k, s)


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.float32, torch.int8])
def test_split_k_is_exact_to_the_order_deterministic_and_re_arms_its_counters(dtype):
    """Every interpreter config splits these shapes (4 units); the partial tiles are summed in
    split order by whichever split comes last, so repeated launches agree bit for bit."""
    for m, n, k in ((1, 40, 700), (16, 64, 257), (3, 7, 1000)):
        if dtype == torch.int8:
            a, b = torch.randint(-128, 128, (m, k), dtype=dtype), torch.randint(-128, 128, (k, n), dtype=dtype)
        else:
            a, b = torch.randn(m, k), torch.randn(k, n)
        for cfg in mm.configs("int8" if dtype == torch.int8 else "fp32"):
            assert mm_launcher.split_k(m, n, k, cfg.block_m, cfg.block_n, cfg.block_k,
                                       mm_launcher.INTERPRETER_UNITS) > 1
            first, again = mm.matmul(a, b, config=cfg), mm.matmul(a, b, config=cfg)
            assert torch.equal(first, again)
            if dtype == torch.int8:
                assert torch.equal(first, int_matmul(a, b))
            else:
                # the interpreter's fp32 dot is tf32, as NVIDIA's: exact products of tf32 operands
                torch.testing.assert_close(first.double(), matmul_ref(tf32(a).double(), tf32(b).double()),
                                           rtol=k * 2.0 ** -23, atol=k * 2.0 ** -23)
    assert all(not locks.any() for locks in _launch._COUNTERS.values())


def test_misaligned_operands_are_repacked_only_for_a_compute_bound_launch(monkeypatch):
    """K = 97 fp16 rows start 2 bytes apart: a compute-bound launch gets A [M, K] and B K-major,
    rows padded to 16 bytes; a skinny one (M = 1) reads them where they are."""
    seen = []

    class Recorder:
        def __getitem__(self, grid):
            return lambda *args, **kw: seen.append(args[:2])
    monkeypatch.setattr(mm_launcher, "_autotuned", lambda *a, **k: Recorder())
    monkeypatch.setattr(mm_launcher, "_kernel", Recorder())
    # the pointer kernel's operands (descriptors would wrap them: test_tma_* below)
    monkeypatch.setattr(mm_launcher, "tma_layout", lambda *a: None)
    for m in (256, 1):
        a, b = torch.randn(m, 97).half(), torch.randn(97, 201).half()
        mm.matmul(a, b)
        got_a, got_b = seen[-1]
        if m == 1:
            assert got_a is a and got_b is b
            continue
        assert got_a.stride(1) == 1 and got_a.stride(0) % 8 == 0 and torch.equal(got_a, a)
        assert got_b.stride(0) == 1 and got_b.stride(1) % 8 == 0 and torch.equal(got_b, b)
    aligned = torch.randn(256, 96).half(), torch.randn(96, 200).half()
    mm.matmul(*aligned)
    assert seen[-1][0] is aligned[0] and seen[-1][1] is aligned[1]


@pytest.mark.parametrize("cols,pad", [(4104, 4160), (97, 104), (8, 8), (40, 42)])
def test_rows_are_copied_whole_through_the_wide_view_or_element_by_element(cols, pad):
    """_copy_rows: 8-byte elements where rows, starts and strides allow it (4104 into 4160), the
    element copy otherwise (97 columns: rows 194 bytes long; 42 columns: rows 84 bytes apart);
    either way exactly the source."""
    src = torch.randn(5, cols).half()
    dst = torch.zeros(5, pad).half()[:, :cols]
    mm_launcher._copy_rows(dst, src)
    assert torch.equal(dst, src)
    src_t = torch.randn(cols, 5).half().t()            # no unit stride along the rows: elements
    mm_launcher._copy_rows(dst, src_t)
    assert torch.equal(dst, src_t)


@pytest.mark.parametrize("arch,runs", [("sm_90a", True), ("sm_100a", True), ("sm_120", False),
                                       ("sm_80", False), ("gfx942", False)])
def test_tma_runs_only_where_descriptors_feed_a_shared_memory_matrix_unit(arch, runs):
    a, b = torch.randn(256, 64).half(), torch.randn(64, 128).half()
    out = torch.empty(256, 128).half()
    assert (mm_launcher.tma_layout(ARCHS[arch], "fp16", a, b, out, 256, None) is not None) == runs


@pytest.mark.parametrize("what,a,b,out,layout", [
    ("B row-major", (256, 64), (64, 128), (256, 128), mm.TmaLayout(False, True)),
    ("B K-major", (256, 64), "t(128, 64)", (256, 128), mm.TmaLayout(True, True)),
    ("C rows 2 bytes apart", (256, 64), (64, 128), "s(256, 129)", mm.TmaLayout(False, False)),
    ("A rows 2 bytes apart", "s(256, 65)", (64, 128), (256, 128), None),
    ("B rows 2 bytes apart", (256, 64), "s(64, 129)", (256, 128), None),
    ("A K-major", "t(64, 256)", (64, 128), (256, 128), None),
    ("skinny M", (32, 64), (64, 128), (32, 128), None),
    ("K = 0", (256, 0), (0, 128), (256, 128), None),
])
def test_tma_layout_follows_the_strides(what, a, b, out, layout):
    """TMA needs unit stride along A's K, along B's N or K, and 16-byte aligned row strides;
    C goes through a descriptor only when its rows are aligned too, else through pointers."""
    def make(spec):
        if isinstance(spec, tuple):
            return torch.empty(spec).half()
        shape = tuple(int(v) for v in spec[2:-1].split(","))
        if spec[0] == "t":      # the transpose of a contiguous buffer
            return torch.empty(shape).half().t()
        return torch.empty(shape).half()[:, :shape[1] - 1]   # a column short: rows 2 bytes off 16
    a, b, out = make(a), make(b), make(out)
    got = mm_launcher.tma_layout(ARCHS["sm_90a"], "fp16", a, b, out, a.shape[0], None)
    assert got == layout, what


@needs_interpreter
@pytest.mark.parametrize("m,n,k", [(64, 48, 32), (100, 88, 72), (97, 200, 40), (40, 24, 136)])
@pytest.mark.parametrize("b_kmajor", [False, True])
@pytest.mark.parametrize("c_aligned", [True, False])
def test_tma_kernel_equals_the_pointer_kernel_on_every_tail(monkeypatch, m, n, k, b_kmajor, c_aligned):
    """matmul_tma_kernel on the interpreter, with M, N and K tails the descriptors zero-fill, B
    either way and C through a descriptor or through masked pointers, with a bias and gelu:
    bitwise the pointer kernel's result (the same tiles summed in the same order)."""
    torch.manual_seed(m * n + k)
    a = torch.randn(m, k).half()
    b = torch.randn(n, k).half().t() if b_kmajor else torch.randn(k, n).half()
    bias = torch.randn(n).half()
    n_c = n if c_aligned else n + 1
    if c_aligned and (n * 2) % 16:
        pytest.skip("C rows not 16-byte aligned at this N")
    seen = tma_launches(monkeypatch)
    got = mm.matmul(a, b, bias=bias, activation="gelu", out=torch.empty(m, n_c).half()[:, :n])
    assert len(seen) == 1 and seen[0] == mm.TmaLayout(b_kmajor, c_aligned)
    assert torch.equal(got, mm.matmul(a, b, bias=bias, activation="gelu", tma=True,
                                      out=torch.empty(m, n_c).half()[:, :n]))
    want = mm.matmul(a, b, bias=bias, activation="gelu", tma=False, out=torch.empty(m, n_c).half()[:, :n])
    assert len(seen) == 2
    assert torch.equal(got, want)


@needs_interpreter
def test_a_is_copied_into_whole_lines_only_where_both_operands_rows_fall_off_them(monkeypatch):
    """K = 40 and N = 72 fp16: A's rows 80 bytes apart and B's 144, off the copy engine's 128-byte
    lines. A compute-bound descriptor launch with N >= TMA_REPACK_MIN_N reads A from a copy with
    rows of 64 elements, bitwise the result of reading it in place; with either operand on whole
    lines, a narrower N or too few flops, A is read where it is."""
    seen = []
    real = mm_launcher._launch_tma

    def spy(key, layout, a, *rest):
        seen.append(a)
        return real(key, layout, a, *rest)
    monkeypatch.setattr(mm_launcher, "_launch_tma", spy)
    torch.manual_seed(3)
    a, b = torch.randn(100, 40).half(), torch.randn(40, 72).half()
    in_place = mm.matmul(a, b)
    assert seen[-1] is a                                                # N = 72 < TMA_REPACK_MIN_N
    monkeypatch.setattr(mm_launcher, "TMA_REPACK_MIN_N", 72)
    copied = mm.matmul(a, b)
    assert seen[-1] is not a and seen[-1].stride() == (64, 1) and torch.equal(seen[-1], a)
    assert torch.equal(copied, in_place)
    b_kmajor = torch.randn(72, 40).half().t()                          # B's rows 80 bytes apart
    mm.matmul(a, b_kmajor)
    assert seen[-1] is not a and seen[-1].stride() == (64, 1)
    for a2, b2 in ((torch.randn(100, 64).half(), torch.randn(64, 72).half()),    # A on lines
                   (a, torch.randn(40, 128).half()),                           # B on lines
                   (torch.randn(40, 40).half(), b)):                           # M N < REPACK_FROM (M + N)
        monkeypatch.setattr(mm_launcher, "TMA_REPACK_MIN_N", b2.shape[1])
        mm.matmul(a2, b2)
        assert seen[-1] is a2


@needs_interpreter
@pytest.mark.parametrize("a,b,words", [
    (torch.randn(256, 64), torch.randn(64, 128), "fp16 or bf16"),                   # fp32
    (torch.randn(16, 64).half(), torch.randn(64, 128).half(), "more than NARROW_M rows"),
    # rows 130 bytes apart, too few flops to be repacked first
    (torch.randn(64, 65).half()[:, :64], torch.randn(64, 48).half(), "16-byte aligned rows"),
])
def test_tma_true_is_refused_where_descriptors_cannot_be_used(a, b, words):
    with pytest.raises(ValueError, match="tma=True") as err:
        mm.matmul(a, b, tma=True)
    assert words in str(err.value)


def test_tma_must_be_a_bool_or_none():
    with pytest.raises(ValueError, match="tma must be None, True or False, got 'yes'"):
        mm.matmul(torch.randn(4, 8), torch.randn(8, 4), tma="yes")
