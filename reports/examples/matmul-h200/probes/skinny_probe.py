"""Skinny M (bf16, M = 1 and 16, N = K = 4104) on the H200: split-K layouts other than main's, a
GEMV without the matrix unit (M = 1), and a read-only kernel over B as the floor, timed with main and
torch in the same process (portcheck.speed.timing, operands rotated past L2, graph replay as the
bench does).

    python3 skinny_probe.py OUT.json [--quick]     # round 1 (skinny/skinny-probe.json)
    python3 skinny_probe.py OUT.json --round2      # round 2 (skinny/skinny-round2.json)

The probe's kernel: program p takes C's columns tile * BLOCK_N ... (the last tile moved back to end
at N, so no column mask) and split s's run of K (K_PER rows of B, a multiple of 8, so every run
but the last is whole), sums it with tl.dot on a 16-row tile (DOT) or as a [BLOCK_K, BLOCK_N]
product summed over K at the end (M = 1), leaves its partial row block in a workspace, and the
tile's last split to arrive sums the partials in split order and stores C.
"""
import argparse
import itertools
import json

import torch
import triton
import triton.language as tl

from portcheck.kernels import matmul as mm
from portcheck.speed.timing import rotation_sets, time_callables


@triton.jit
def skinny_kernel(a_ptr, b_ptr, c_ptr, ws_ptr, lock_ptr, M, N, K, K_PER, stride_am, stride_bk,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  SPLIT: tl.constexpr, DOT: tl.constexpr, STAGES: tl.constexpr, MASK_A: tl.constexpr = False):
    # the probe's shapes: N, K, strides and K_PER multiples of 8 (16 bytes of bf16)
    N = N // 8 * 8
    K_PER = K_PER // 8 * 8
    stride_am = stride_am // 8 * 8
    stride_bk = stride_bk // 8 * 8
    pid = tl.program_id(0)
    tile = pid // SPLIT
    s = pid % SPLIT
    col0 = min(tile * BLOCK_N, N - BLOCK_N)
    cols = col0 + tl.arange(0, BLOCK_N)
    k0 = s * K_PER
    k1 = min(k0 + K_PER, K)
    rk = tl.arange(0, BLOCK_K)
    rm = tl.arange(0, BLOCK_M)
    b_ptrs = b_ptr + (k0 + rk)[:, None] * stride_bk + cols[None, :]
    if DOT:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        if MASK_A:   # rows past M read as zeros (M = 1 is specialised: the wrap below is a broadcast)
            a_ptrs = a_ptr + rm[:, None] * stride_am + (k0 + rk)[None, :]
        else:
            a_ptrs = a_ptr + (rm % M)[:, None] * stride_am + (k0 + rk)[None, :]
    else:
        acc = tl.zeros((BLOCK_K, BLOCK_N), dtype=tl.float32)
        a_ptrs = a_ptr + k0 + rk
    n_full = (k1 - k0) // BLOCK_K
    if DOT:
        for _ in tl.range(0, n_full, num_stages=STAGES):
            if MASK_A:
                a = tl.load(a_ptrs, mask=(rm < M)[:, None], other=0.0)
            else:
                a = tl.load(a_ptrs)
            acc = tl.dot(a, tl.load(b_ptrs), acc)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * stride_bk
    else:
        # one tile ahead in registers (plain loads are not pipelined through shared memory)
        # (row masks: the interpreter takes no scalar mask; rows whole or none keep 16-byte loads)
        nxt = tl.load(b_ptrs, mask=(rk < tl.where(n_full > 0, BLOCK_K, 0))[:, None], other=0.0)
        for i in range(0, n_full):
            cur = nxt
            a = tl.load(a_ptrs).to(tl.float32)
            nxt = tl.load(b_ptrs + BLOCK_K * stride_bk, mask=(rk < tl.where(i + 1 < n_full, BLOCK_K, 0))[:, None],
                          other=0.0)
            acc += a[:, None] * cur.to(tl.float32)
            a_ptrs += BLOCK_K
            b_ptrs += BLOCK_K * stride_bk
    left = k1 - (k0 + n_full * BLOCK_K)
    if left > 0:
        b = tl.load(b_ptrs, mask=(rk < left)[:, None], other=0.0)
        if DOT:
            acc = tl.dot(tl.load(a_ptrs, mask=((rm < M) | (not MASK_A))[:, None] & (rk < left)[None, :], other=0.0),
                         b, acc)
        else:
            acc += tl.load(a_ptrs, mask=rk < left, other=0.0).to(tl.float32)[:, None] * b.to(tl.float32)
    if DOT:
        part = acc
        ROWS: tl.constexpr = BLOCK_M
    else:
        part = tl.sum(acc, axis=0)[None, :]
        ROWS: tl.constexpr = 1
    rows = tl.arange(0, ROWS)
    offs = rows[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    real = (rows < M)[:, None]
    own = (cols >= tile * BLOCK_N)[None, :] & real
    c_ptrs = c_ptr + rows[:, None] * N + cols[None, :]
    if SPLIT == 1:
        tl.store(c_ptrs, part.to(c_ptr.dtype.element_ty), mask=own)
    else:
        slots = ws_ptr + tile * (SPLIT * ROWS * BLOCK_N)
        tl.store(slots + s * (ROWS * BLOCK_N) + offs, part, mask=real)
        tl.debug_barrier()
        arrived = tl.atomic_add(lock_ptr + tile, 1, sem="acq_rel")
        if arrived == SPLIT - 1:
            total = tl.load(slots + offs, mask=real, other=0, cache_modifier=".cg")
            for j in tl.static_range(1, SPLIT):
                total += tl.load(slots + j * (ROWS * BLOCK_N) + offs, mask=real, other=0, cache_modifier=".cg")
            tl.atomic_xchg(lock_ptr + tile, 0)
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=own)


@triton.jit
def read_kernel(x_ptr, out_ptr, n, PER: tl.constexpr, BLOCK: tl.constexpr):
    """Sums a contiguous run of PER elements per program: B read once, the floor of a GEMV."""
    pid = tl.program_id(0)
    offs = pid * PER + tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, PER, BLOCK):
        acc += tl.load(x_ptr + start + offs, mask=start + offs < n, other=0.0).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


def skinny(a, b, out, ws, locks, bn, bk, split, warps, stages, dot, mask_a=False, whole=False):
    """whole: each split's run of K in whole BLOCK_K slices (main's rule), else in multiples of 8."""
    m, k = a.shape
    n = b.shape[1]
    step = bk if whole else 8
    k_per = triton.cdiv(triton.cdiv(k, split), step) * step
    tiles = triton.cdiv(n, bn)
    skinny_kernel[(tiles * split,)](a, b, out, ws, locks, m, n, k, k_per, a.stride(0), b.stride(0),
                                    BLOCK_M=16 if dot else 1, BLOCK_N=bn, BLOCK_K=bk, SPLIT=split, DOT=dot,
                                    STAGES=stages, MASK_A=mask_a, num_warps=warps, num_stages=stages)
    return out


def variants_round2(m: int, sms: int):
    """(bn, bk, split, warps, stages, dot, mask_a, whole): the 16-row tile only, A's rows wrapped
    or masked, runs of K in whole slices or in multiples of 8, deeper pipelines."""
    out = []
    for bn, bk, stages in ((128, 64, 3), (128, 64, 4), (128, 64, 5), (128, 64, 6), (128, 128, 3), (128, 128, 4),
                           (64, 64, 4), (64, 128, 4)):
        tiles = triton.cdiv(4104, bn)
        split = max(1, round(sms / tiles))
        for mask_a, whole in ((False, True), (True, True), (True, False), (False, False)):
            out.append((bn, bk, split, 4, stages, True, mask_a, whole))
    return out


def variants(m: int, sms: int, quick: bool):
    """(bn, bk, split, warps, stages, dot) to try at this M."""
    out = []
    if m == 1:
        for bn, bk, warps in itertools.product((128, 256, 512), (16, 32, 64), (4, 8)):
            if bk * bn > 32 * 32 * warps or bk * bn < 2048:   # at most 32 accumulators a thread: no spills
                continue
            tiles = triton.cdiv(4104, bn)
            for per_sm in (1, 2) if not quick else (1,):
                split = max(1, round(per_sm * sms / tiles))
                out.append((bn, bk, split, warps, 1, False))
    for bn, bk, stages in itertools.product((64, 128, 256), (64, 128), (3, 4)):
        if bn * bk > 128 * 128:
            continue
        tiles = triton.cdiv(4104, bn)
        for per_sm in (1, 2) if not quick else (1,):
            split = max(1, round(per_sm * sms / tiles))
            out.append((bn, bk, split, 4 if bn <= 128 else 8, stages, True))   # 256 on 4 warps spills
    return out


def rotated_operands(m: int, n: int, k: int) -> list:
    """bf16 (A, B) copies enough to rotate past L2, as `portcheck bench` reads them."""
    sets = rotation_sets((m * k + k * n) * 2, torch.cuda.get_device_properties(0).L2_cache_size)
    return [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
             torch.randn(k, n, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]


def main(path: str, quick: bool, round2: bool) -> None:
    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    rows = []
    n = k = 4104
    for m in (1, 16):
        copies = rotated_operands(m, n, k)
        ref = (copies[0][0].double() @ copies[0][1].double())
        scale = float(ref.abs().max())

        def record(name, fns, check=None):
            try:
                err = None
                if check is not None:
                    err = float((check().double() - ref).abs().max()) / scale
                ms = time_callables(fns).stats.median_ms
                rows.append({"m": m, "what": name, "us": ms * 1e3, "rel_err": err})
            except Exception as e:  # noqa: BLE001
                rows.append({"m": m, "what": name, "error": str(e)[:300]})
            print(json.dumps(rows[-1]), flush=True)

        record("torch", [lambda x=x, y=y: torch.matmul(x, y) for x, y in copies],
               lambda: torch.matmul(*copies[0]))
        record("main", [lambda x=x, y=y: mm.matmul(x, y) for x, y in copies], lambda: mm.matmul(*copies[0]))
        sink = torch.empty(sms * 4, device="cuda", dtype=torch.float32)
        per = triton.cdiv(triton.cdiv(k * n, sms * 4), 8192) * 8192
        record("read B once (floor)", [lambda y=y: read_kernel[(triton.cdiv(k * n, per),)](y, sink, k * n, per, 8192,
                                                                                            num_warps=8)
                                       for _, y in copies])
        for v in variants_round2(m, sms) if round2 else variants(m, sms, quick):
            bn, bk, split, warps, stages, dot = v[:6]
            tiles = triton.cdiv(n, bn)
            ws = torch.empty(tiles * split * (16 if dot else 1) * bn, device="cuda", dtype=torch.float32)
            locks = torch.zeros(tiles, device="cuda", dtype=torch.int32)
            out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            label = f"{'dot' if dot else 'gemv'} bn{bn} bk{bk} split{split} ({tiles * split} programs) w{warps} s{stages}"
            if len(v) > 6:
                label += f" A {'masked' if v[6] else 'wrapped'}, K runs {'whole slices' if v[7] else 'x8'}"
            record(label, [lambda x=x, y=y, c=v: skinny(x, y, out, ws, locks, *c) for x, y in copies],
                   lambda c=v: skinny(*copies[0], out, ws, locks, *c).clone())
        base = [r for r in rows if r["m"] == m and r["what"] == "torch"][0]["us"]
        for r in rows:
            if r["m"] == m and "us" in r:
                r["vs_torch"] = base / r["us"]
        json.dump(rows, open(path, "w"), indent=1)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--quick", action="store_true", help="one program per SM only")
    p.add_argument("--round2", action="store_true", help="the 16-row tile: A masked or wrapped, K runs "
                   "whole or in multiples of 8, deeper pipelines (skinny/skinny-round2.json)")
    args = p.parse_args()
    main(args.out, args.quick, args.round2)
