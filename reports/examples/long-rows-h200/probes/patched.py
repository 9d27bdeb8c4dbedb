"""Long rows (bf16 4096 x 131072): main's own looped kernels against copies of them with one change,
timed in the same rounds, so that a probe's gain is main's gain (the seventh session's `.cg`
weight read won in a probe copy and lost on main: that copy differed from main in more than the
hint). Each copy is main's kernel source, read from portcheck/kernels/, with the text replaced.

- rmsnorm `.cg`: pass 2's weight read through L2 only (the change of d43054d, exactly).
- layernorm `fma`: pass 2's (x - mean) * rstd as x * rstd + (-mean * rstd), one FFMA instead of
  an FADD and an FMUL (sm_90a: 348 -> 312 instructions a 32768-column chunk, cross-compiled).
- layernorm `shifted`: pass 1 as sums of d = x - K and d^2 per 16-byte group (no reduction across
  the program until the row ends), K the first chunk's mean rounded to x's dtype, so masked
  lanes load K and add nothing; mean = K + S1/n, M2 = S2 - S1^2/n. Pass 1: 352 -> 215
  instructions a chunk (sm_90a). With K the mean of a fraction f of the row, (mean - K)^2 <=
  var (1 - f)/f, which bounds the cancellation in S2 - S1^2/n.

    python3 patched.py OUT.json           (after pip install -e . at the repository root)

Written against main at d5ba8b8 (`../eighth-session/patched.json`); since c7bdb14 main's RMSNorm
already reads its weight through .cg and RMS_CG no longer applies (patched() says so and stops).
"""
import importlib.util
import inspect
import json
import os
import sys
import tempfile

import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # rows_common.py beside it
from rows_common import bench_rows, row_timer  # noqa: E402


def patched(module, kernel: str, edits: list[tuple[str, str]], header: str = ""):
    """main's @triton.jit `kernel` from `module`, with each (old, new) replaced exactly once;
    `header` holds the imports the kernel needs beyond triton and tl."""
    src = inspect.getsource(getattr(module, kernel).fn)
    src = src[src.index("def "):]   # without main's decorator
    for old, new in edits:
        if src.count(old) != 1:
            raise ValueError(f"{kernel}: {old!r} found {src.count(old)} times")
        src = src.replace(old, new)
    path = os.path.join(tempfile.mkdtemp(), f"patched_{kernel}.py")
    with open(path, "w") as f:
        f.write("import triton\nimport triton.language as tl\n" + header + "\n\n@triton.jit\n" + src)
    spec = importlib.util.spec_from_file_location(f"patched_{kernel}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, kernel)


RMS_CG = [("y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)",
           "y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0, cache_modifier=\".cg\").to(tl.float32)")]
LN_FMA = [("y = (x - row_mean) * rstd", "y = x * rstd - row_mean * rstd")]


@triton.jit
def ln_shifted_kernel(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                      HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr, FMA: tl.constexpr):
    WIDTH: tl.constexpr = 128 // x_ptr.dtype.element_ty.primitive_bitwidth
    GROUP: tl.constexpr = BLOCK if BLOCK < WIDTH else WIDTH
    LANES: tl.constexpr = BLOCK // GROUP
    cols = tl.arange(0, BLOCK)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        row64 = tl.cast(row, tl.int64)
        x_row = x_ptr + row64 * x_stride
        y_row = y_ptr + row64 * y_stride
        first = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last")
        shift = (tl.sum(first.to(tl.float32), axis=0) / tl.minimum(n_cols, BLOCK)).to(x_ptr.dtype.element_ty)
        k = shift.to(tl.float32)
        d0 = tl.reshape(tl.where(cols < n_cols, first.to(tl.float32) - k, 0.0), [LANES, GROUP])
        s1 = tl.sum(d0, axis=1)
        s2 = tl.sum(d0 * d0, axis=1)
        nxt = tl.load(x_row + BLOCK + cols, mask=BLOCK + cols < n_cols, other=shift, eviction_policy="evict_last")
        for start in range(BLOCK, n_cols, BLOCK):
            d = tl.reshape(nxt.to(tl.float32) - k, [LANES, GROUP])
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=shift, eviction_policy="evict_last")
            s1 += tl.sum(d, axis=1)
            s2 += tl.sum(d * d, axis=1)
        S1 = tl.sum(s1, axis=0)
        S2 = tl.sum(s2, axis=0)
        nxt = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_first")
        dm = S1 / n_cols
        row_mean = k + dm
        m2 = tl.maximum(S2 - S1 * dm, 0.0)
        rstd = tl.math.rsqrt(m2 / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            ok = start + cols < n_cols
            x = nxt.to(tl.float32)
            ahead = start + BLOCK + cols
            nxt = tl.load(x_row + ahead, mask=ahead < n_cols, other=0.0, eviction_policy="evict_first")
            if FMA:
                y = x * rstd - row_mean * rstd
            else:
                y = (x - row_mean) * rstd
            if HAS_W:
                y = y * tl.load(w_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)
            if HAS_B:
                y = y + tl.load(b_ptr + start + cols, mask=ok, other=0.0).to(tl.float32)
            tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=ok, eviction_policy="evict_first")
        tl.store(mean_ptr + row64, row_mean)
        tl.store(rstd_ptr + row64, rstd)


def main(path: str) -> None:
    import torch
    from portcheck.kernels import layernorm, rmsnorm
    r = bench_rows()
    x, w, b, y, mean, rstd = r.x, r.w, r.b, r.y, r.mean, r.rstd
    n_rows, n_cols, sms, copy = r.n_rows, r.n_cols, r.sms, r.copy
    rms_cfg = rmsnorm.config(n_cols, 32, True, None, 2)
    ln_cfg = layernorm.config(n_cols, 32, True, None, 2)
    rms_cg = patched(rmsnorm, "rmsnorm_looped_kernel", RMS_CG)
    ln_fma = patched(layernorm, "layernorm_looped_kernel", LN_FMA)
    rms_ref = rmsnorm.rms_norm(x, w, 1e-6)[0].float()
    ln_ref = layernorm.layer_norm(x, w, b, 1e-5)
    ln_y, ln_mean, ln_rstd = (t.float() for t in ln_ref)
    rows = []
    t = row_timer(x, y, copy, rows)

    def rms(kernel):
        return lambda: kernel[(sms,)](x, w, y, rstd, n_rows, n_cols, n_cols, n_cols, 1e-6, HAS_W=True,
                                      BLOCK=rms_cfg["BLOCK"], num_warps=rms_cfg["num_warps"])

    def ln(kernel, **extra):
        return lambda: kernel[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5, HAS_W=True,
                                      HAS_B=True, BLOCK=ln_cfg["BLOCK"], num_warps=ln_cfg["num_warps"], **extra)

    stats = {}
    for _ in range(3):
        t("rmsnorm main (wrapper)", lambda: rmsnorm.rms_norm(x, w, 1e-6, out=y, long_rows=True), rms_ref)
        t("rmsnorm main", rms(rmsnorm.rmsnorm_looped_kernel), rms_ref)
        t("rmsnorm .cg", rms(rms_cg), rms_ref)
        t("layernorm main (wrapper)", lambda: layernorm.layer_norm(x, w, b, 1e-5, out=y, long_rows=True), ln_y)
        t("layernorm main", ln(layernorm.layernorm_looped_kernel), ln_y)
        t("layernorm fma", ln(ln_fma), ln_y)
        for fma in (False, True):
            name = f"layernorm shifted{' + fma' if fma else ''}"
            t(name, ln(ln_shifted_kernel, FMA=fma), ln_y)
            stats[name] = {"mean_max_abs_diff": float((mean - ln_mean).abs().max()),
                           "rstd_max_rel_diff": float(((rstd - ln_rstd) / ln_rstd).abs().max())}
    print(json.dumps(stats))
    json.dump({"copy_gbs": copy, "rows": rows, "stats_vs_main": stats,
               "torch": torch.__version__, "triton": triton.__version__}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
