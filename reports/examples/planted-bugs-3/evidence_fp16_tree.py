"""Supplementary evidence (not a portcheck run): what an fp16 row sum WITHOUT upcast gives when every
add rounds to fp16, as a GPU's reduction does (a model: each of 128 threads adds its elements in
order, then a pairwise tree over the threads' partials, every add rounded to fp16), against the
tolerance bug_rowsum_half_accumulator is judged by: u(fp16)|s| + n u(fp32) sum|x| + sub(fp16).
The interpreter's tl.sum of fp16 calls numpy's sum, which accumulates in fp32 and rounds once."""
import numpy as np
import torch

from portcheck import strategies as S

U16, U32, SUB16 = 2.0 ** -11, 2.0 ** -24, 2.0 ** -24


def gpu_like(x16, threads=128):
    n = x16.size
    per = -(-n // threads)
    pad = np.zeros(per * threads, np.float16)
    pad[:n] = x16
    parts = pad.reshape(threads, per)            # thread t holds a contiguous run
    acc = parts[:, 0].copy()
    for j in range(1, per):
        acc = (acc.astype(np.float32) + parts[:, j].astype(np.float32)).astype(np.float16)
    while acc.size > 1:
        h = acc.size // 2
        acc = (acc[:h].astype(np.float32) + acc[h:].astype(np.float32)).astype(np.float16)
    return float(acc[0])


for cols in (31, 255, 1021, 2039, 4093):
    bad = 0
    worst = 0.0
    for seed in range(200):
        x = S.values((cols,), "fp16", "normal", S.generator(seed)).numpy()
        exact = float(x.astype(np.float64).sum())
        tol = U16 * abs(exact) + cols * U32 * float(np.abs(x.astype(np.float64)).sum()) + SUB16
        interp = float(np.float16(np.sum(x)))           # what the interpreter's tl.sum(fp16) returns
        err_gpu = abs(gpu_like(x) - exact)
        assert abs(interp - exact) <= tol
        worst = max(worst, err_gpu / tol)
        bad += err_gpu > tol
    print(f"cols={cols:5d}: modelled fp16 GPU sum out of tolerance in {bad:3d}/200 rows, worst error/tolerance "
          f"{worst:.1f}; the interpreter's np.sum within tolerance in 200/200")
