"""Attention, paged decode attention and the paged KV-cache write, beyond their registered cases:
bad input refused before launch; properties a float64 comparison cannot see (grouped heads equal
repeated heads bit for bit, causal rows blind to later keys, split counts agreeing); the fp8 cache
write bit-exact on every finite code of each format, where the interpreter's faulty fp8 casts
cannot show; the tolerance rejecting a result that is wrong by one key; and the per-vendor
configuration tables covering every arch."""
import math
import os

import pytest
import torch

from portcheck.kernels import attention as A
from portcheck.kernels.attention import launcher as A_launcher
from portcheck.kernels._configs import families, load
from portcheck.kernels import kv_cache as K
from portcheck.kernels import paged_attention as P
from portcheck.oracles import attention as attention_ref
from portcheck.oracles import fp8 as fp8_ref
from portcheck.oracles import kv_cache as kv_ref
from portcheck.compare import compare
from portcheck.cases import float64_args
from portcheck.facts.archs import ARCHS

from tests.support.launching import DEVICE, forbid_launches, needs_device

@pytest.fixture
def no_launch(monkeypatch):
    forbid_launches(monkeypatch, A_launcher, "attention_fwd_kernel")
    forbid_launches(monkeypatch, P, "paged_decode_kernel", "paged_decode_reduce_kernel")
    forbid_launches(monkeypatch, K, "reshape_and_cache_kernel")


def _t(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype)


def _paged(num_seqs=2, heads_q=4, heads_kv=2, d=64, blocks=6, bs=16, max_blocks=3, lens=(20, 33)):
    q = _t(num_seqs, heads_q, d)
    kc, vc = _t(blocks, bs, heads_kv, d), _t(blocks, bs, heads_kv, d)
    tables = torch.arange(num_seqs * max_blocks, dtype=torch.int32).view(num_seqs, max_blocks) % blocks
    return q, kc, vc, tables, torch.tensor(lens, dtype=torch.int32)


def _paged_with(**change):
    q, kc, vc, tables, lens = _paged()
    args = {"query": q, "key_cache": kc, "value_cache": vc, "block_tables": tables, "context_lens": lens}
    args.update(change)
    return lambda: P.paged_decode_attention(**args)


def _kv(tokens=5, heads=2, d=64, blocks=4, bs=8, cache_dtype=torch.float16):
    key, value = _t(tokens, heads, d), _t(tokens, heads, d)
    kc = torch.zeros(blocks, bs, heads, d, dtype=cache_dtype)
    return key, value, kc, kc.clone(), torch.arange(tokens, dtype=torch.int64)


def _kv_with(scale=None, **change):
    key, value, kc, vc, slots = _kv()
    args = {"key": key, "value": value, "key_cache": kc, "value_cache": vc, "slot_mapping": slots}
    args.update(change)
    return lambda: K.reshape_and_cache(**args, scale=scale)


@pytest.mark.parametrize("call,words", [
    # attention
    (lambda: A.attention(_t(1, 6, 8, 64), _t(1, 4, 8, 64), _t(1, 4, 8, 64)),
     ["heads_q (6) must be a multiple of k's heads_kv (4)"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 64), _t(1, 2, 9, 64)), ["k and v must have one shape"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(2, 2, 8, 64), _t(2, 2, 8, 64)), ["batch sizes differ"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 128), _t(1, 2, 8, 128)), ["head_dim differs"]),
    (lambda: A.attention(_t(1, 4, 8, 96), _t(1, 2, 8, 96), _t(1, 2, 8, 96)), ["head_dim 96 is not supported"]),
    (lambda: A.attention(_t(4, 8, 64), _t(4, 8, 64), _t(4, 8, 64)), ["q must be 4-D"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 64, dtype=torch.bfloat16), _t(1, 2, 8, 64)),
     ["k has dtype torch.bfloat16"]),
    (lambda: A.attention(_t(1, 4, 8, 64, dtype=torch.float32), _t(1, 2, 8, 64), _t(1, 2, 8, 64)),
     ["q has dtype torch.float32"]),
    (lambda: A.attention(_t(1, 4, 64, 8).transpose(-1, -2), _t(1, 2, 8, 64), _t(1, 2, 8, 64)), ["unit stride"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 0, 64), _t(1, 2, 0, 64)), ["seq_k is 0"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 64), _t(1, 2, 8, 64), scale=-1.0), ["scale must be"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 64), _t(1, 2, 8, 64), scale=float("nan")), ["scale must be"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 64), _t(1, 2, 8, 64), out=_t(1, 4, 9, 64)), ["out has shape"]),
    (lambda: A.attention(_t(1, 4, 8, 64), _t(1, 2, 8, 64), _t(1, 2, 8, 64), config=A.Config(128, 8, 4, 1)),
     ["BLOCK_N must be a power of two of at least 16"]),
    # paged decode attention
    (_paged_with(query=_t(2, 3, 64)), ["heads_q (3) must be a multiple of the cache's heads_kv (2)"]),
    (_paged_with(query=_t(2, 4, 128)), ["head_dim differs"]),
    (_paged_with(value_cache=_t(6, 16, 1, 64)), ["key_cache and value_cache differ in shape"]),
    (_paged_with(key_cache=_t(6, 16, 2, 64, dtype=torch.bfloat16)), ["key_cache has dtype torch.bfloat16"]),
    (_paged_with(block_tables=torch.tensor([[0, 1, 2], [3, 9, 5]], dtype=torch.int32)),
     ["block_tables[1, 1] = 9 points outside the cache of 6 blocks"]),
    (_paged_with(block_tables=torch.tensor([[0, -1, 2], [3, 4, 5]], dtype=torch.int32)),
     ["block_tables[0, 1] = -1 points outside the cache"]),
    (_paged_with(context_lens=torch.tensor([20, 49], dtype=torch.int32)),
     ["context_lens[1] = 49 exceeds its block table", "3 blocks x block_size 16 = 48 tokens"]),
    (_paged_with(context_lens=torch.tensor([0, 5], dtype=torch.int32)), ["context_lens[0] = 0"]),
    (_paged_with(context_lens=torch.tensor([20, 33, 5], dtype=torch.int32)), ["context_lens must be a 1-D int32 tensor of 2"]),
    (_paged_with(context_lens=torch.tensor([20, 0, 33, 0], dtype=torch.int32)[::2]),
     ["context_lens must be contiguous, got stride 2"]),
    (_paged_with(context_lens=torch.tensor([20, 33], dtype=torch.int64)), ["context_lens must be a 1-D int32"]),
    (_paged_with(block_tables=torch.zeros(2, 3, dtype=torch.int64)), ["block_tables must be a 2-D int32"]),
    (_paged_with(block_tables=torch.zeros(3, 3, dtype=torch.int32)), ["block_tables must have 2 rows"]),
    (_paged_with(max_context_len=30), ["max_context_len = 30 is shorter than the longest context, 33"]),
    (_paged_with(key_cache=_t(6, 12, 2, 64), value_cache=_t(6, 12, 2, 64)), ["block_size must be a power of two"]),
    (_paged_with(query=_t(2, 4, 64, dtype=torch.float32)), ["query has dtype torch.float32"]),
    (_paged_with(num_splits=0), ["num_splits must be in [1, 128]"]),
    # the KV-cache write
    (_kv_with(key=_t(5, 3, 64), value=_t(5, 3, 64)), ["key has 3 heads but the cache holds 2"]),
    (_kv_with(key=_t(5, 2, 128), value=_t(5, 2, 128)), ["key has head_dim 128 but the cache holds 64"]),
    (_kv_with(slot_mapping=torch.tensor([0, 1, 2, 3, 32])), ["slot_mapping[4] = 32 is outside the cache's 4 x 8 = 32 slots"]),
    (_kv_with(slot_mapping=torch.tensor([0, -2, 2, 3, 4])), ["slot_mapping[1] = -2 is outside"]),
    (_kv_with(slot_mapping=torch.tensor([0, 1, 2, 3])), ["slot_mapping must be a 1-D int32/int64 tensor of 5"]),
    (_kv_with(slot_mapping=torch.zeros(5, dtype=torch.int16)), ["slot_mapping must be a 1-D int32/int64"]),
    (_kv_with(value=_t(5, 2, 32)), ["key and value differ in shape"]),
    (_kv_with(key_cache=torch.zeros(4, 8, 2, 64, dtype=torch.bfloat16)), ["key_cache and value_cache differ"]),
    (_kv_with(key_cache=torch.zeros(4, 8, 2, 64, dtype=torch.bfloat16),
              value_cache=torch.zeros(4, 8, 2, 64, dtype=torch.bfloat16)), ["only fp8 caches convert"]),
    (_kv_with(scale=torch.ones(1)), ["scale applies to fp8 caches only"]),
    (_kv_with(key_cache=torch.zeros(4, 8, 2, 64, dtype=torch.float8_e4m3fn),
              value_cache=torch.zeros(4, 8, 2, 64, dtype=torch.float8_e4m3fn)), ["an fp8 cache needs scale"]),
    (_kv_with(scale=torch.ones(1, dtype=torch.float64), key_cache=torch.zeros(4, 8, 2, 64, dtype=torch.float8_e4m3fn),
              value_cache=torch.zeros(4, 8, 2, 64, dtype=torch.float8_e4m3fn)), ["float32 tensor of one element"]),
    (_kv_with(key=_t(5, 64, 2).transpose(1, 2)), ["key must have unit stride"]),
    (_kv_with(key_cache=torch.zeros(8, 2, 64)), ["key_cache must be 4-D"]),
])
def test_bad_input_is_refused_before_launch(no_launch, call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), str(info.value)


def test_fp8_cache_format_the_target_cannot_produce_is_refused(no_launch, monkeypatch):
    """sm_80's Triton converts to e5m2 only: an e4m3 cache is refused there before launch."""
    monkeypatch.setattr(K, "target_fp8_names", lambda: frozenset({"fp8e5", "fp8e4b15"}))
    cache = torch.zeros(4, 8, 2, 64, dtype=torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="cannot be produced here"):
        K.reshape_and_cache(_t(5, 2, 64), _t(5, 2, 64), cache, cache.clone(), torch.arange(5),
                            torch.ones(1))


def test_unvalidated_launch_still_refuses_what_needs_no_readback(no_launch):
    """validate=False skips only the device readback; shapes, dtypes and head counts are still checked."""
    with pytest.raises(ValueError, match="must be a multiple"):
        _paged_with(query=_t(2, 3, 64), validate=False)()
    with pytest.raises(ValueError, match="exceeds the block table's capacity"):
        _paged_with(validate=False, max_context_len=49)()
    with pytest.raises(ValueError, match="heads but the cache holds"):
        key, value, kc, vc, slots = _kv()
        K.reshape_and_cache(_t(5, 3, 64), _t(5, 3, 64), kc, vc, slots, validate=False)


# ---- properties on the device (the interpreter on CPU) ----------------------------------------------

@needs_device
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_heads_equal_repeated_heads_bit_for_bit(causal):
    """GQA / MQA read a shared key/value head; the result must be exactly that of MHA on copies."""
    gen = torch.Generator().manual_seed(1)
    for heads_kv in (1, 2):
        q = torch.randn(1, 4, 37, 64, generator=gen).half().to(DEVICE)
        k = torch.randn(1, heads_kv, 41, 64, generator=gen).half().to(DEVICE)
        v = torch.randn(1, heads_kv, 41, 64, generator=gen).half().to(DEVICE)
        grouped = A.attention(q, k, v, causal=causal)
        full = A.attention(q, k.repeat_interleave(4 // heads_kv, 1), v.repeat_interleave(4 // heads_kv, 1),
                           causal=causal)
        assert torch.equal(grouped, full)


@needs_device
def test_causal_rows_do_not_see_later_keys():
    """Changing keys and values after position i leaves rows <= i bit-identical."""
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 2, 50, 64, generator=gen).half() for _ in range(3))
    base = A.attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), causal=True).cpu()
    cut = 21
    k2, v2 = k.clone(), v.clone()
    k2[:, :, cut + 1:] = torch.randn(k2[:, :, cut + 1:].shape, generator=gen).half() * 8
    v2[:, :, cut + 1:] = torch.randn(v2[:, :, cut + 1:].shape, generator=gen).half() * 8
    changed = A.attention(q.to(DEVICE), k2.to(DEVICE), v2.to(DEVICE), causal=True).cpu()
    assert torch.equal(base[:, :, :cut + 1], changed[:, :, :cut + 1])
    assert not torch.equal(base[:, :, cut + 1:], changed[:, :, cut + 1:])


@needs_device
def test_split_counts_agree_within_the_tolerance():
    """Every split count (1 = no reduction kernel) meets the float64 bound on the same input."""
    case_args = P._make({"dtype": "fp16", "heads_kv": 2, "group": 4, "head_dim": 64, "block_size": 8,
                         "context_lens": [61, 7, 33], "spare_columns": 2, "hint": False, "splits": None,
                         "scale": None, "regime": "normal", "seed": 5}, DEVICE)
    args64 = float64_args(case_args, "cpu")
    ref = P._oracle(args64)
    tol = P._tolerance(args64, ref, "fp16")["out"]
    for splits in (1, 2, 3, 5):
        out = P.paged_decode_attention(case_args["query"], case_args["key_cache"], case_args["value_cache"],
                                       case_args["block_tables"], case_args["context_lens"], num_splits=splits)
        cmp = compare("out", out, ref["out"], tol)
        assert cmp.ok, f"num_splits={splits}: {cmp.message}"


def _every_finite_code(fmt_dtype, scale):
    f = fp8_ref.fp8_format(fmt_dtype)
    values = fp8_ref.decode(torch.arange(256, dtype=torch.uint8), f)
    values = values[torch.isfinite(values)]
    top = f.max_finite
    # beyond the range: must saturate to +-max (inf too)
    extra = torch.tensor([2 * top, -3 * top, float("inf"), float("-inf")], dtype=torch.float64)
    return torch.cat([values, extra]) * scale


@needs_device
@pytest.mark.parametrize("in_dtype", [torch.float16, torch.bfloat16])
def test_fp8_cache_write_is_exact_on_every_finite_code(in_dtype):
    """Values on the fp8 grid (times a power-of-two scale) and past its range: the quotient is
    exact and its conversion has nothing to round, so this holds on the interpreter too."""
    cache_dtype = K.device_fp8()
    for scale in (0.5, 2.0):
        x = _every_finite_code(cache_dtype, scale)
        x = x[x.to(in_dtype).double() == x]             # what the input format holds exactly
        heads, d = 2, 16
        x = torch.cat([x, torch.zeros((-x.numel()) % (heads * d), dtype=x.dtype)]).view(-1, heads, d)
        tokens = x.shape[0]
        bs = 4
        blocks = tokens // bs + 2
        slots = torch.randperm(blocks * bs, generator=torch.Generator().manual_seed(3))[:tokens]
        slots[::5] = -1
        key, value = x.to(in_dtype), (-x).to(in_dtype)
        kc = torch.full((blocks, bs, heads, d), float("nan"), dtype=cache_dtype)
        vc = kc.clone()
        ek, ev = kv_ref.reshape_and_cache(key.double(), value.double(), slots, kc, vc, scale)
        kc, vc = kc.to(DEVICE), vc.to(DEVICE)
        K.reshape_and_cache(key.to(DEVICE), value.to(DEVICE), kc, vc, slots.to(DEVICE),
                            torch.tensor([scale], device=DEVICE))
        assert torch.equal(kc.cpu().view(torch.uint8), ek.view(torch.uint8))
        assert torch.equal(vc.cpu().view(torch.uint8), ev.view(torch.uint8))


# ---- the tolerance is a bound, not a blanket --------------------------------------------------------

def test_attention_tolerance_rejects_a_result_off_by_one_key():
    """A kernel whose causal mask let each row see one key too many fails; the exact result
    rounded to fp16 passes."""
    gen = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 64, 64, generator=gen, dtype=torch.float64).half().double() for _ in range(3))
    ref = attention_ref.attention(q, k, v, causal=True)
    tol = A.attention_tolerance(q, k, v, ref, None, True, "fp16", "fp16")
    assert compare("out", ref.half(), ref, tol).ok
    s = attention_ref.logits(q, k, None, False)
    leaky = torch.ones(64, 64, dtype=torch.bool).tril(1)
    wrong = torch.softmax(s.masked_fill(~leaky, float("-inf")), dim=-1) @ v
    assert not compare("out", wrong.half(), ref, tol).ok
    # and the bound stays well under the output's scale (about u(fp16) plus n u(fp32) terms)
    assert float((tol.atol / v.abs().amax()).max()) < 2e-3


# ---- configuration tables ---------------------------------------------------------------------

@pytest.mark.parametrize("name", list(ARCHS))
def test_every_arch_has_a_configuration(name):
    a = ARCHS[name]
    configs = A.arch_configs(a)
    assert set(configs) == set(A.HEAD_DIMS)
    for cfg in configs.values():
        assert cfg.num_warps * a.warp_size <= a.max_threads_per_block
        assert cfg.block_n >= A.MIN_BLOCK_N and cfg.block_m >= 16
        assert not cfg.options or a.is_amd, "AMD compiler options on an NVIDIA config"
    assert P.arch_config(a).block_n >= P.MIN_BLOCK_N
    assert not P.arch_config(a).options or a.is_amd


def test_the_config_files_hold_exactly_the_config_families():
    """A table for every family the arch table names (sm_120 reads sm_89's), and none left over."""
    for kernel in ("attention", "paged_attention", "moe_gemm"):
        assert set(load(kernel)) == set(families()), kernel
    assert ARCHS["sm_120"].config_family == ARCHS["sm_89"].config_family


def test_split_heuristic_fills_the_device_and_keeps_splits_long():
    # 64 sequences x 8 kv heads on 132 SMs: 512 programs, split to about 8 programs per SM
    assert P.choose_splits(512, 4096, 64, 132, 8) == 3
    # one long sequence: many splits, each at least MIN_SPLIT_TOKENS
    s = P.choose_splits(8, 32768, 64, 132, 8)
    assert s > 1 and 32768 / s >= P.MIN_SPLIT_TOKENS
    # a full device or a short context: no split
    assert P.choose_splits(4096, 4096, 64, 132, 8) == 1
    assert P.choose_splits(8, 200, 64, 132, 8) == 1


def test_causal_work_counts_visible_pairs():
    assert A.visible_pairs(4, 4, True) == 10
    assert A.visible_pairs(6, 4, True) == 10 + 2 * 4
    assert A.visible_pairs(3, 5, True) == 6
    assert A.visible_pairs(3, 5, False) == 15
    assert math.isclose(A.visible_pairs(4096, 4096, True) / A.visible_pairs(4096, 4096, False), 0.5, rel_tol=1e-3)


_DESCRIPTOR_COMPILE = """
import json, re, subprocess, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from portcheck.kernels import attention as A
from portcheck.facts.archs import ARCHS
arch = ARCHS["sm_90a"]
v = next(v for v in A.descriptor_variants(arch, causal=True) if v.label.startswith("bf16 d=128"))
k = triton.compile(triton.compiler.ASTSource(fn=v.kernel, signature=v.signature, constexprs=v.constexprs),
                   target=GPUTarget(arch.backend, arch.triton_arch, arch.warp_size),
                   options={"num_warps": v.num_warps, "num_stages": v.num_stages})
stack = None
tool = Path(triton.__file__).parent / "backends/nvidia/bin/cuobjdump"
if tool.exists():
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"]); f.flush()
        usage = subprocess.run([str(tool), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"STACK:(\\d+)", usage)
    stack = int(m[1]) if m else -1
print(json.dumps({"tma": "cp.async.bulk.tensor" in k.asm["ptx"], "wgmma": "wgmma.mma_async" in k.asm["ptx"],
                  "shared": k.metadata.shared, "limit": arch.shared_per_block, "stack": stack}))
"""


def test_hopper_descriptor_kernel_builds_tma_and_wgmma_within_shared_memory():
    """The sm_90a table loads through TMA descriptors, which portcheck compile cannot declare yet:
    cross-compile the bench configuration (bf16, head_dim 128, causal) here, in a process
    without the interpreter (an interpreted kernel cannot be compiled)."""
    import json
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", _DESCRIPTOR_COMPILE], capture_output=True, text=True,
                         env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["tma"] and got["wgmma"], got
    assert got["shared"] <= got["limit"], got
    assert got["stack"] in (None, 0), f"register spills: {got}"
