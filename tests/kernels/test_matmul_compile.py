"""matmul's shared-memory estimate (what the autotuner prunes by and what picks each arch's compile
variants) against what the compiler allocates, on a sample of cross-compiled variants; every
variant of every arch with PORTCHECK_MATMUL_ALL_VARIANTS=1 (slow: hundreds of compiles)."""
import os

import pytest

from portcheck import cases
from portcheck.dtypes import fmt
from portcheck.kernels import matmul as mm
from portcheck.kernels.matmul import case as mm_case
from portcheck.kernels.matmul import launcher as mm_launcher
from portcheck.facts.archs import ARCHS
from portcheck.compile.plan import CompileSettings, variant_task
from portcheck.compile.records import compile_tasks

# (arch, case, label prefix): a wgmma pipeline, mma.sync on Hopper (BLOCK_M = 16), the cp.async
# pipeline, tcgen05, the 99 KB consumer part, CDNA's LDS at its 64 KB limit, RDNA
SAMPLE = [("sm_90a", "matmul", "fp16 128x256x64 g8 w8 s3"), ("sm_89", "matmul_fp8", "fp8e4nv 16x128x128"),
          ("sm_80", "matmul", "fp32 128x128x32 g8 w4 s3"), ("sm_100a", "matmul_int8", "int8 128x128x64"),
          ("sm_120", "matmul_fp8", "fp8e4nv 128x64x128 g8 w4"), ("gfx942", "matmul", "bf16 256x256x64"),
          ("gfx1100", "matmul", "fp16 128x128x32")]


def _variants():
    by_name = {c.name: c for c in cases.all_cases() if c.family == "matmul"}
    if os.environ.get("PORTCHECK_MATMUL_ALL_VARIANTS") == "1":
        return [(a, c.name, v) for c in by_name.values() for a in ARCHS for v in c.variants(ARCHS[a])]
    chosen = []
    for arch, case, prefix in SAMPLE:
        found = [v for v in by_name[case].variants(ARCHS[arch]) if v.label.startswith(prefix)]
        assert found, f"no {case} variant {prefix!r} on {arch}: the sample is out of date"
        chosen.append((arch, case, found[0]))
    return chosen


def _estimate(arch: str, v) -> int:
    dtype = v.label.split()[0]
    c = v.constexprs
    cfg = mm.Config(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], v.num_warps, v.num_stages)
    in_bytes = 1 if dtype in mm.FP8_DTYPES or dtype == "int8" else fmt(dtype).torch_dtype.itemsize
    return mm.shared_bytes(cfg, in_bytes, ARCHS[arch])


def test_shared_estimate_matches_the_compiler():
    chosen = _variants()
    tasks = [variant_task(v, arch, case, "matmul", v.label.split()[0]) for arch, case, v in chosen]
    results = compile_tasks(tasks, CompileSettings(jobs=2, timeout=600))
    problems = []
    for (arch, case, v), r in zip(chosen, results):
        if r.verdict != "pass":
            problems.append(f"{case} {arch} {v.label}: {r.verdict}: {r.message}")
            continue
        shared, est = r.metrics["shared"], _estimate(arch, v)
        # an upper bound, and a tight one: off by no more than the mbarrier allowance
        if not (shared <= est <= shared + mm.MBARRIER_BYTES):
            problems.append(f"{case} {arch} {v.label}: compiler allocates {shared} B, estimate {est} B")
        if shared > ARCHS[arch].shared_per_block:
            problems.append(f"{case} {arch} {v.label}: {shared} B over the {ARCHS[arch].shared_per_block} B limit")
    assert not problems, "\n".join(problems)


def test_tf32_operands_compile_to_16_byte_copies_only_k_major():
    """Why the launcher makes fp32 operands K-major on sm_90a and sm_100a: cross-compiled with a
    row-major B, most of the cp.async copies are 4 bytes and the narrow-async-copy lint fires;
    with the K-major B the launcher passes (the case's variant), every copy is 16 bytes."""
    case = cases.get("matmul")
    tasks, expect = [], []
    for arch in ("sm_90a", "sm_100a"):
        assert mm.k_major_only(ARCHS[arch], "fp32")
        cfg = mm.arch_configs(ARCHS[arch], "fp32", ARCHS[arch].shared_per_block)[0]
        for b_col in (False, True):
            v = mm_case._variant(ARCHS[arch], "fp32", "fp32", cfg, b_col=b_col)
            tasks.append(variant_task(v, arch, "matmul", "matmul", "fp32"))
            expect.append(b_col)
        declared = [v for v in case.variants(ARCHS[arch]) if v.label.startswith("fp32 ")]
        assert declared
        for v in declared:   # as launched: K-major B for the wide tiles, as given for the narrow
            assert ("B col-major" in v.label) == (v.constexprs["BLOCK_M"] > mm.NARROW_M), v.label
    for r, k_major in zip(compile_tasks(tasks, CompileSettings(jobs=2, timeout=600)), expect):
        assert r.verdict == "pass", r.message
        sizes = r.metrics["async_copy_sizes"]
        rules = {f["rule"] for f in r.lints}
        if k_major:
            assert set(sizes) == {"16"} and "narrow-async-copy" not in rules, (r.arch, sizes)
        else:
            assert sizes.get("4", 0) > sizes.get("16", 0) and "narrow-async-copy" in rules, (r.arch, sizes)


def test_autotuned_launches_compile_as_the_declared_variants(monkeypatch):
    """Captured through the autotuner (every config is recorded) as the launcher makes it on
    sm_90a (fp32: B made K-major) and gfx942 (bf16, AMD options), the first configuration builds
    the same kernel as the declared variant of that configuration."""
    import dataclasses

    from portcheck.compile.capture import capture_case
    from portcheck.compile.plan import plan
    case = cases.get("matmul")
    tasks = []
    for arch, dtype in (("sm_90a", "fp32"), ("gfx942", "bf16")):
        monkeypatch.setattr(mm_launcher, "current_arch", lambda arch=arch: ARCHS[arch])
        monkeypatch.setattr(mm_case, "current_arch", lambda arch=arch: ARCHS[arch])
        mm_launcher._autotuned.cache_clear()
        spec = next(s for s in case.bench if s["dtype"] == dtype and s["m"] == s["n"] == 4096)
        captured = capture_case(case, [spec])
        first = captured[0]
        tile = {k: first.constexprs[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M")}
        declared = [v for v in case.variants(ARCHS[arch]) if v.label.startswith(dtype + " ")
                    and "bias" not in v.label and tile.items() <= v.constexprs.items()
                    and (v.num_warps, v.num_stages) == (first.num_warps, first.num_stages)]
        assert len(declared) == 1, (arch, tile, [v.label for v in declared])
        undeclared = dataclasses.replace(case, name=f"matmul_{arch}", variants=None)
        tasks += plan([undeclared], [arch], {f"matmul_{arch}": [first]})
        tasks.append(variant_task(declared[0], arch, "matmul"))
    mm_launcher._autotuned.cache_clear()
    done = compile_tasks(tasks, CompileSettings(jobs=2, timeout=600))
    for a, b in zip(done[::2], done[1::2]):
        assert a.verdict == b.verdict == "pass", (a.message, b.message)
        for key in ("registers", "shared", "num_warps", "code_bytes", "async_copy_sizes"):
            assert a.metrics.get(key) == b.metrics.get(key), (a.arch, key)


def test_int8_tiles_on_sm80_and_sm89_do_not_spill():
    """A 64x64 int32 warp tile needs more than 255 registers with mma.sync on sm_80 / sm_89
    (568-696 B of stack a thread, cross-compiled); their int8 configurations keep warp tiles of
    64x32 or less, and none of their variants spills."""
    case = cases.get("matmul_int8")
    chosen = [(arch, v) for arch in ("sm_80", "sm_89") for v in case.variants(ARCHS[arch])
              if "bias" not in v.label]
    tasks = [variant_task(v, arch, "matmul_int8", "matmul", "int8") for arch, v in chosen]
    for (arch, v), r in zip(chosen, compile_tasks(tasks, CompileSettings(jobs=2, timeout=600))):
        assert r.verdict == "pass", r.message
        assert r.metrics.get("stack_bytes") == 0 and r.metrics.get("local_bytes") == 0, (arch, v.label)


def test_tma_variants_compile_clean_through_tma_and_the_arch_matrix_unit():
    """matmul_tma_kernel's launches (every wide bf16 configuration of sm_90a and sm_100a; none on
    sm_120 or AMD), built by portcheck's compile pipeline (tensordesc<...> stand-ins) and judged
    by its lints: each passes with no error finding and no spills, copies no tile with cp.async
    (TMA does), runs the arch's matrix unit (wgmma, tcgen05) and allocates the shared memory
    tma_shared_bytes estimates (an upper bound, off by no more than the mbarrier allowance)."""
    assert not mm.tma_variants(ARCHS["sm_120"]) and not mm.tma_variants(ARCHS["gfx942"])
    chosen = [(arch, v) for arch in ("sm_90a", "sm_100a") for v in mm.tma_variants(ARCHS[arch])]
    tasks = [variant_task(v, arch, "matmul", "matmul", "bf16") for arch, v in chosen]
    assert len(tasks) >= 8
    for (arch, v), r in zip(chosen, compile_tasks(tasks, CompileSettings(jobs=2, timeout=600))):
        m = r.metrics
        assert r.verdict == "pass", (r.arch, r.message)
        assert not [f for f in r.lints if f["severity"] == "error"], (r.arch, r.lints)
        assert m["spill_bytes"] == 0 and m["shared"] <= ARCHS[r.arch].shared_per_block, (r.arch, m)
        c = v.constexprs
        est = mm.tma_shared_bytes(mm.Config(c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_K"], c["GROUP_M"], v.num_warps,
                                            v.num_stages), 2, ARCHS[arch])
        assert m["shared"] <= est <= m["shared"] + mm.MBARRIER_BYTES, (arch, v.label, m["shared"], est)
        assert not m["async_copy_sizes"], (r.arch, m["async_copy_sizes"])
        assert any(ARCHS[r.arch].matrix_family in ins for ins in m["matrix_instructions"]), (r.arch, m)
