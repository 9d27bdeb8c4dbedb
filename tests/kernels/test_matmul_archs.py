"""matmul's per-arch decisions come from the arch table, and its configuration data is sound:
every arch gets configurations for every dtype it takes, each within the arch's threads and
shared memory, AMD options only for AMD, kpack only where Triton still honours it."""
import pytest

from portcheck.facts.archs import ARCHS, INTERPRETER
from portcheck.facts.device import dot_fp32_precision
from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul import launcher as mm_launcher

ALL = sorted(ARCHS)


def test_interpreter_takes_every_fp8_format_and_tf32():
    assert set(INTERPRETER.fp8_native) == set(mm.FP8_DTYPES)
    assert dot_fp32_precision(INTERPRETER) == "tf32"


@pytest.mark.parametrize("name", ALL)
def test_fp8_formats_it_runs_are_ones_triton_accepts(name):
    assert set(ARCHS[name].fp8_native) <= set(ARCHS[name].fp8_triton)


@pytest.mark.parametrize("name,mode", [("sm_89", "split"), ("sm_90a", "partial"), ("sm_100a", "fused"),
                                       ("sm_120", "split"), ("gfx942", "fused"), ("gfx950", "fused"),
                                       ("gfx1201", "fused")])
def test_fp8_accumulation_promotes_where_the_mma_keeps_13_bits(name, mode):
    assert ARCHS[name].fp8_accumulation == mode


def test_the_interpreter_accumulates_fp8_in_place():
    assert INTERPRETER.fp8_accumulation == "fused"


def _dtypes(name):
    return ("fp16", "bf16", "fp32", "int8") + ARCHS[name].fp8_native


@pytest.mark.parametrize("name", ALL)
def test_every_dtype_has_configs_within_the_arch_limits(name):
    a = ARCHS[name]
    for dtype in _dtypes(name):
        cfgs = mm.arch_configs(a, dtype, a.shared_per_block)
        assert cfgs, f"no {dtype} configuration fits {name}"
        for c in cfgs:
            assert c.num_warps * a.warp_size <= a.max_threads_per_block, (name, c.label)
            if a.is_amd:
                assert c.num_stages == 2, "AMD's stream pipeliner is tuned for num_stages=2"
            else:
                assert not c.options


@pytest.mark.parametrize("name", ALL)
def test_variants_cover_every_config_and_dtype(name):
    """The compile variants are what the launcher would run: every fitting config per dtype."""
    a = ARCHS[name]
    from portcheck import cases
    by_case = {c.name: c for c in cases.all_cases() if c.family == "matmul"}
    plain = [v for v in by_case["matmul"].variants(a) if "bias" not in v.label and "split-K" not in v.label]
    assert len(plain) == sum(len(mm.arch_configs(a, d, a.shared_per_block)) for d in ("fp16", "bf16", "fp32"))
    fp8 = [v for v in by_case["matmul_fp8"].variants(a) if "split-K" not in v.label]
    assert {v.label.split()[0] for v in fp8} == set(a.fp8_native)
    for v in plain + fp8:
        assert v.divisible_by_16 and set(v.divisible_by_16) <= set(v.signature)
    # split-K once per dtype wherever a narrow (skinny M) configuration exists
    split = [v for v in by_case["matmul"].variants(a) if "split-K" in v.label]
    narrow = {d for d in ("fp16", "bf16", "fp32")
              if any(c.block_m <= mm.NARROW_M for c in mm.arch_configs(a, d, a.shared_per_block))}
    assert {v.label.split()[0] for v in split} == narrow
    assert all(v.constexprs["SPLIT_K"] > 1 and v.signature["lock_ptr"] == "*i32" for v in split)


def test_kpack_only_where_triton_honours_it():
    for cls, cfgs in mm.config_table()["amd"].items():
        for c in cfgs:
            if c.options.get("kpack", 1) != 1:
                # Triton deprecates kpack from gfx950 on (it overrides it to 1 with a warning)
                assert c.archs and all(p in ("gfx90a", "gfx942") for p in c.archs), (cls, c.label)


def test_config_file_errors_name_the_entry():
    with pytest.raises(ValueError, match=r"\[amd\] fp8 #3: unknown key\(s\) \['blok'\]"):
        mm_launcher._parse_config({"blok": [1, 2, 3], "group": 1, "warps": 4, "stages": 2}, "[amd] fp8 #3")
    with pytest.raises(ValueError, match="missing key"):
        mm_launcher._parse_config({"block": [16, 16, 16]}, "[nvidia] fp32 #1")


@pytest.mark.parametrize("name", ALL)
def test_shared_estimate_prunes_what_would_not_load(name):
    """Configurations left out on an arch are exactly those the estimate puts over its limit."""
    a = ARCHS[name]
    for dtype in ("fp16", "fp32", "int8"):
        table = [c for c in mm.config_table()[mm.vendor(a)][mm.dtype_class(dtype)] if c.for_arch(a)]
        kept = mm.arch_configs(a, dtype, a.shared_per_block)
        in_bytes = {"fp16": 2, "fp32": 4, "int8": 1}[dtype]
        for c in table:
            assert (c in kept) == (mm.shared_bytes(c, in_bytes, a) <= a.shared_per_block)


@pytest.mark.parametrize("name", ALL)
def test_operands_are_made_k_major_where_the_tf32_matrix_unit_reads_only_k_major(name):
    """wgmma and tcgen05 read tf32 operands from shared memory K-major only; mma.sync, MFMA and
    WMMA load fragments themselves. 16-bit dtypes never need the extra pass."""
    a = ARCHS[name]
    reads_smem = a.matrix_family in ("wgmma", "tcgen05")
    assert mm.k_major_only(a, "fp32") == (reads_smem and dot_fp32_precision(a) == "tf32")
    assert not mm.k_major_only(a, "fp16") and not mm.k_major_only(a, "bf16")
    assert not mm.k_major_only(INTERPRETER, "fp32")
