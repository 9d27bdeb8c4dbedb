"""Launch plans of rope and paged decode on a real GPU (skipped elsewhere): the second launch of a
metadata key goes straight to the compiled kernel and gives what the checked launch gives, bit
for bit; a changed shape, stride or scalar plans anew.

    pytest tests/kernels/test_plans_gpu.py --target=cuda --require-device -q
"""
import os

import pytest
import torch
import triton

from portcheck.kernels import _plans
from portcheck.kernels import paged_attention as P
from portcheck.kernels import rope as R
from tests.support.launching import forbid_launches

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") or not torch.cuda.is_available(),
    reason="needs a GPU target (--target=cuda or rocm)")


def _rope_args(tokens, q_heads, k_heads, head, rot, dtype, fused, out_of_place, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    if fused:     # q and k: column slices of one qkv buffer (row stride wider than the slice)
        buf = torch.randn(tokens, (q_heads + 2 * k_heads) * head, device="cuda", generator=g).to(dtype)
        q, k = buf[:, :q_heads * head], buf[:, q_heads * head:(q_heads + k_heads) * head]
    else:
        q = torch.randn(tokens, q_heads, head, device="cuda", generator=g).to(dtype)
        k = torch.randn(tokens, k_heads, head, device="cuda", generator=g).to(dtype)
    k = k if k_heads else None
    pos = torch.randint(0, 4096, (tokens,), device="cuda", generator=g)
    cache = R.cos_sin_cache(4096, rot, 10000.0, torch.float32).cuda()
    outs = (torch.empty_like(q), torch.empty_like(k) if k is not None else None) if out_of_place else (None, None)
    return pos, q, k, head, cache, True, *outs


def _copy(t):
    """A copy with t's shape and strides (clone() makes a column slice contiguous)."""
    return None if t is None else torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t)


def _rope(args):
    """rotary_embedding on copies of the inputs it may write; the (query', key') it gives."""
    pos, q, k, head, cache, neox, qo, ko = args
    got = R.rotary_embedding(pos, _copy(q), _copy(k), head, cache, neox, qo, ko)
    return tuple(t.clone() if t is not None else None for t in got)


def _equal(a, b) -> bool:
    return all((x is None and y is None) or torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("tokens,q_heads,k_heads,head,rot,dtype,fused,out_of_place", [
    (16384, 32, 8, 128, 128, torch.bfloat16, False, False),     # the bench shape, in place
    (7, 32, 8, 128, 128, torch.bfloat16, False, False),         # a decode step
    (33, 8, 2, 128, 64, torch.float16, True, True),             # fused qkv, partial rotary, outputs
    (5, 4, 0, 64, 64, torch.float32, False, False),             # no key
])
def test_planned_rope_equals_checked_bit_for_bit(monkeypatch, tokens, q_heads, k_heads, head, rot, dtype, fused,
                                                 out_of_place):
    R._PLANS.clear()
    shape = (tokens, q_heads, k_heads, head, rot, dtype, fused, out_of_place)
    first = _rope(_rope_args(*shape, seed=1))
    assert len(R._PLANS) == 1
    args = _rope_args(*shape, seed=2)
    with monkeypatch.context() as m:
        forbid_launches(m, R, "rope_kernel")     # a planned launch never goes through Triton's JIT
        planned = _rope(args)
    R._PLANS.clear()
    checked = _rope(args)
    assert _equal(planned, checked) and not _equal(planned, first)


def test_rope_plans_anew_for_another_shape_stride_or_alignment():
    R._PLANS.clear()
    _rope(_rope_args(64, 8, 2, 128, 128, torch.bfloat16, False, False, seed=1))
    _rope(_rope_args(65, 8, 2, 128, 128, torch.bfloat16, False, False, seed=1))         # tokens
    _rope(_rope_args(64, 8, 2, 128, 128, torch.bfloat16, True, False, seed=1))          # strides
    pos, q, k, head, cache, neox, _, _ = _rope_args(64, 8, 2, 128, 128, torch.bfloat16, False, False, seed=1)
    shifted = torch.empty(q.numel() + 1, dtype=q.dtype, device="cuda")[1:].view(q.shape)   # 2 bytes in
    shifted.copy_(q)
    assert shifted.stride() == q.stride()
    got = R.rotary_embedding(pos, shifted, _copy(k), head, cache, neox)
    assert len(R._PLANS) == 4
    R._PLANS.clear()
    again = R.rotary_embedding(pos, _copy(q), _copy(k), head, cache, neox)
    assert _equal(got, again)


def test_plans_on_triton_36_cuda_call_its_launchers_c_entry_straight():
    """The direct entry (_plans.direct_entry) is what the bit-for-bit tests above run on Triton 3.6
    with CUDA; anywhere else plans call Triton's launcher."""
    R._PLANS.clear()
    _rope(_rope_args(64, 8, 2, 128, 128, torch.bfloat16, False, False, seed=1))
    (plan,) = R._PLANS._plans.values()
    direct = triton.__version__.startswith(_plans.DIRECT_TRITON) and torch.version.hip is None
    assert (plan.direct is not None) == direct


def _paged_args(num_seqs, context, seed, heads_kv=8, group=4, head_dim=128, block_size=16):
    """A shuffled cache with every sequence `context` long (the bench case's layout)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    blocks_each = -(-context // block_size)
    num_blocks = num_seqs * blocks_each + 1
    q = torch.randn(num_seqs, heads_kv * group, head_dim, device="cuda", generator=g).to(torch.bfloat16)
    kc, vc = (torch.randn(num_blocks, block_size, heads_kv, head_dim, device="cuda", generator=g)
              .to(torch.bfloat16) for _ in range(2))
    tables = torch.randperm(num_blocks - 1, device="cuda", generator=g)[:num_seqs * blocks_each]
    tables = tables.view(num_seqs, blocks_each).to(torch.int32)
    lens = torch.full((num_seqs,), context, dtype=torch.int32, device="cuda")
    return q, kc, vc, tables, lens


@pytest.mark.parametrize("num_seqs,context,splits,give_out", [
    (4, 8192, None, False),     # split over the context: main kernel and the reduction
    (64, 4096, None, True),     # the bench batch
    (3, 1000, 1, True),         # one split
    (2, 333, 3, False),         # splits forced, a context that ends inside a block
])
def test_planned_paged_decode_equals_checked_bit_for_bit(monkeypatch, num_seqs, context, splits, give_out):
    P._PLANS.clear()

    def launch(args):
        out = torch.full_like(args[0], float("nan")) if give_out else None
        return P.paged_decode_attention(*args, max_context_len=context, num_splits=splits, validate=False,
                                        out=out)

    first = launch(_paged_args(num_seqs, context, seed=1))
    assert len(P._PLANS) == 1
    args = _paged_args(num_seqs, context, seed=2)
    with monkeypatch.context() as m:
        forbid_launches(m, P, "paged_decode_kernel", "paged_decode_reduce_kernel")
        planned = launch(args)
    P._PLANS.clear()
    checked = launch(args)
    validated = P.paged_decode_attention(*args, max_context_len=context, num_splits=splits)
    assert torch.equal(planned, checked) and torch.equal(planned, validated)
    assert not torch.equal(planned, first)
    assert len(P._PLANS) == 1        # validate=True: checked, never planned


def test_paged_decode_plans_anew_for_another_scalar_or_shape():
    P._PLANS.clear()
    args = _paged_args(4, 2048, seed=3)
    base = P.paged_decode_attention(*args, max_context_len=2048, validate=False)
    bounded = P.paged_decode_attention(*args, validate=False)     # None: the tables' 2048, a key of its own
    scaled = P.paged_decode_attention(*args, max_context_len=2048, scale=0.05, validate=False)
    P.paged_decode_attention(*args, max_context_len=2048, num_splits=2, validate=False)
    P.paged_decode_attention(*_paged_args(5, 2048, seed=3), max_context_len=2048, validate=False)
    assert len(P._PLANS) == 5 and not torch.equal(scaled, base) and torch.equal(bounded, base)
    again = P.paged_decode_attention(*args, max_context_len=2048, validate=False)    # planned
    assert len(P._PLANS) == 5 and torch.equal(again, base)
