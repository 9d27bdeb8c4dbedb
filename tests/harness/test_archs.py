"""Arch table and detection from the strings devices report."""
import pytest

from portcheck.errors import UsageError
from portcheck.facts.archs import (ARCHS, INTERPRETER, arch, arch_from_cuda_capability, arch_from_gcn_name,
                                     arch_from_triton_target, parse_archs)

TEN = ["sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120", "gfx90a", "gfx942", "gfx950", "gfx1100", "gfx1201"]


def test_the_ten_archs_are_there_with_sources():
    assert set(TEN) <= set(ARCHS)
    for a in ARCHS.values():
        assert a.source and a.peak_bw_gbs > 0 and a.peak_tflops.get("bf16", 0) > 0
        assert a.max_threads_per_block == 1024 and a.warp_size in (32, 64)


@pytest.mark.parametrize("cc,name", [((8, 0), "sm_80"), ((8, 9), "sm_89"), ((9, 0), "sm_90a"),
                                     ((10, 0), "sm_100a"), ((12, 0), "sm_120"), ((8, 6), "sm_86")])
def test_cuda_capability(cc, name):
    assert arch_from_cuda_capability(*cc) == name


@pytest.mark.parametrize("gcn,name", [("gfx942:sramecc+:xnack-", "gfx942"), ("gfx90a:sramecc+:xnack-", "gfx90a"),
                                      ("gfx1100", "gfx1100"), ("gfx950:sramecc+:xnack-", "gfx950")])
def test_gcn_arch_name(gcn, name):
    assert arch_from_gcn_name(gcn) == name


def test_bad_gcn_name():
    with pytest.raises(ValueError):
        arch_from_gcn_name("NVIDIA H200")


def test_vendor_facts_used_by_kernels():
    assert arch("gfx942").fp8_formats() == ("fp8e4b8", "fp8e5b16")
    assert arch("sm_90a").fp8_formats() == ("fp8e4nv", "fp8e5")
    assert arch("sm_80").fp8_formats() is None and arch("gfx90a").fp8_formats() is None
    assert arch("gfx942").fp32_dot_precision() == "tf32" and arch("gfx950").fp32_dot_precision() == "ieee"
    assert arch("gfx942").shared_per_block == 64 * 1024 and arch("gfx950").shared_per_block == 160 * 1024


@pytest.mark.parametrize("backend,triton_arch,name", [("cuda", 80, "sm_80"), ("cuda", 90, "sm_90a"),
                                                     ("cuda", 120, "sm_120"), ("hip", "gfx942:sramecc+:xnack-", "gfx942")])
def test_triton_target_names_the_row(backend, triton_arch, name):
    assert arch_from_triton_target(backend, triton_arch) == name


@pytest.mark.parametrize("name,storage", [("sm_80", "fp8e5"), ("sm_89", "fp8e4nv"), ("gfx90a", "fp8e4nv"),
                                          ("gfx942", "fp8e4b8"), ("gfx1201", "fp8e4nv")])
def test_fp8_storage_is_the_native_e4m3_else_what_triton_converts_to(name, storage):
    assert arch(name).fp8_storage() == storage


def test_sm_120_shares_sm_89s_configurations():
    """99 KB of shared memory per block and mma.sync on both: one config family."""
    assert arch("sm_120").shared_per_block == arch("sm_89").shared_per_block
    assert arch("sm_120").config_family == arch("sm_89").config_family


def test_the_interpreter_row_is_not_a_compile_target():
    assert INTERPRETER.name not in ARCHS and INTERPRETER.is_interpreter
    # tf32 as Triton's interpreter defaults to and portcheck's numerics layer rounds it (as NVIDIA's)
    assert INTERPRETER.fp32_dot_precision() == "tf32" and INTERPRETER.fp8_storage() == "fp8e4nv"


def test_unknown_arch_lists_known():
    with pytest.raises(UsageError, match="unknown arch 'gfx999'; known: sm_80"):
        parse_archs("gfx942,gfx999")
    assert parse_archs("all") == tuple(ARCHS)
