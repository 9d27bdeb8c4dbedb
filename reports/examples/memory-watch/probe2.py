"""Planted-bug probe 2 for portcheck (public API only; written by a helper outside the project, kept
here as evidence; the caches of the three state cases are keyed by twin since): each bug_* case has an ok_* twin that
must pass. Run from this folder:  portcheck run --target interpreter --cases probe2 --kernel 'bug_*'
"""
import json
import os

import torch
import triton
import triton.language as tl
from hypothesis import strategies as st
from triton.language.extra import libdevice

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T
from portcheck.tolerance import Tolerance

CAP = 4096            # elements per input (the interpreter is slow)
U32 = 2.0 ** -24
FAM = "bugprobe2"


def rows_spec(tile=32, max_rows=8):
    return lambda dtype, max_elements: S.row_inputs(dtype, min(max_elements, CAP), tile=tile, max_rows=max_rows)


def vec_spec(tile=32):
    return lambda dtype, max_elements: st.fixed_dictionaries(
        {"dtype": st.just(dtype), "n": S.lengths(tile, min(max_elements, CAP)), "seed": S.seeds(),
         "regime": S.regimes()})


def x_rows(spec, device):
    return {"x": S.row_tensor(spec, device)}


def x_vec(spec, device):
    return {"x": S.values((spec["n"],), spec["dtype"], spec["regime"], S.generator(spec["seed"])).to(device)}


def case(name, **kw):
    kw.setdefault("family", FAM)
    if os.environ.get("PROBE_LOG"):       # optional: log every spec a case's make() sees
        make = kw["make"]

        def logged(spec, device, _make=make, _name=name):
            with open(os.environ["PROBE_LOG"], "a") as f:
                f.write(json.dumps({"case": _name, **spec}) + "\n")
            return _make(spec, device)
        kw["make"] = logged
    return portcheck.register(portcheck.Case(name=name, **kw))


# ================================================================ 1. split-K row sum: store vs atomic_add
@triton.jit
def splitk_sum_kernel(x_ptr, y_ptr, x_stride, cols, CHUNK: tl.constexpr, MODE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    part = tl.sum(tl.load(x_ptr + row * x_stride + offs, mask=offs < cols, other=0.0).to(tl.float32), axis=0)
    if MODE == 0:
        tl.atomic_add(y_ptr + row, part)                    # correct (y zeroed by the launcher)
    else:
        tl.store(y_ptr + row, part)                         # BUG: last split wins (a race on a GPU)


def splitk_launch(mode):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        if mode == 0:
            y.zero_()
        splitk_sum_kernel[(x.shape[0], triton.cdiv(x.shape[1], 64))](x, y, x.stride(0), x.shape[1], CHUNK=64, MODE=mode)
    return launch


_rowsum = dict(dtypes=("fp32", "fp16"), inputs=rows_spec(64), make=x_rows,
               outputs=lambda a: {"y": ((a["x"].shape[0],), torch.float32)},
               oracle=portcheck.oracle_from_torch(lambda x: x.sum(dim=-1), "y"),
               tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"], "fp32", "fp32")})
case("ok_splitk_atomic", launch=splitk_launch(0), nondeterministic=True, **_rowsum)
case("bug_splitk_store", launch=splitk_launch(1), **_rowsum)


# ================================================================ 1b. token counts per expert: atomic vs load+store
@triton.jit
def expert_count_kernel(ids_ptr, counts_ptr, n, E: tl.constexpr, BLOCK: tl.constexpr, MODE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ids = tl.load(ids_ptr + offs, mask=offs < n, other=-1)
    for e in tl.static_range(E):
        c = tl.sum((ids == e).to(tl.int32), axis=0)
        if MODE == 0:
            tl.atomic_add(counts_ptr + e, c)
        else:
            old = tl.load(counts_ptr + e)                   # BUG: non-atomic read-modify-write
            tl.store(counts_ptr + e, old + c)


def count_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(64, min(max_elements, CAP)),
                                  "E": st.sampled_from([4, 8]), "seed": S.seeds()})


def count_make(spec, device):
    return {"ids": S.integers(0, spec["E"], (spec["n"],), S.generator(spec["seed"])).to(torch.int32).to(device),
            "E": spec["E"]}


def count_launch(mode):
    def launch(args, outs):
        ids, c = args["ids"], outs["counts"]
        c.zero_()
        expert_count_kernel[(triton.cdiv(ids.numel(), 64),)](ids, c, ids.numel(), E=args["E"], BLOCK=64, MODE=mode)
    return launch


_count = dict(dtypes=("int32",), inputs=count_inputs, make=count_make,
              outputs=lambda a: {"counts": ((a["E"],), torch.int32)},
              oracle=lambda a: {"counts": torch.bincount(a["ids"].long(), minlength=a["E"]).to(torch.int32)},
              tolerance=lambda a, refs, dtype: {"counts": T.exact()})
case("ok_expert_count_atomic", launch=count_launch(0), **_count)
case("bug_expert_count_rmw", launch=count_launch(1), **_count)


# ================================================================ 2. atomic_add into torch.empty
def atomic_rowsum_alloc(zeroed):
    def run(x):
        y = (torch.zeros if zeroed else torch.empty)((x.shape[0],), dtype=torch.float32, device=x.device)  # BUG: empty
        splitk_sum_kernel[(x.shape[0], triton.cdiv(x.shape[1], 64))](x, y, x.stride(0), x.shape[1], CHUNK=64, MODE=0)
        return y
    run.__name__ = "rowsum_zeros" if zeroed else "rowsum_empty"
    return run


case("ok_atomic_zeros", launch=portcheck.allocating_launcher(atomic_rowsum_alloc(True), "y"),
     nondeterministic=True, **_rowsum)
case("bug_atomic_empty", launch=portcheck.allocating_launcher(atomic_rowsum_alloc(False), "y"),
     nondeterministic=True, **_rowsum)


# ================================================================ 3. cached workspace not re-zeroed between launches
@triton.jit
def rowmean_finish_kernel(ws_ptr, y_ptr, cols):
    row = tl.program_id(0)
    tl.store(y_ptr + row, tl.load(ws_ptr + row) / cols)


_WORKSPACE = {}


def rowmean_launch(rearm):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        key = (x.shape[0], str(x.device), rearm)   # the twin and the bug keep caches of their own
        ws = _WORKSPACE.get(key)
        if ws is None:
            ws = _WORKSPACE[key] = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
        elif rearm:
            ws.zero_()                                     # the twin re-arms; the bug does not
        splitk_sum_kernel[(x.shape[0], triton.cdiv(x.shape[1], 64))](x, ws, x.stride(0), x.shape[1], CHUNK=64, MODE=0)
        rowmean_finish_kernel[(x.shape[0],)](ws, y, x.shape[1])
    return launch


_rowmean = dict(_rowsum, oracle=portcheck.oracle_from_torch(lambda x: x.mean(dim=-1), "y"),
                tolerance=lambda a, refs, dtype: {"y": T.row_reduction(a["x"] / a["x"].shape[-1], "fp32", "fp32", ops=1)})
case("ok_workspace_rearmed", launch=rowmean_launch(True), nondeterministic=True, **_rowmean)
case("bug_workspace_stale", launch=rowmean_launch(False), nondeterministic=True, **_rowmean)


# ================================================================ 4. prefix sum reading another program's output
@triton.jit
def scan_one_launch_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    s = tl.cumsum(tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32), axis=0)
    carry = tl.load(y_ptr + pid * BLOCK - 1, mask=pid > 0, other=0.0)   # BUG: another program's output
    tl.store(y_ptr + offs, s + carry, mask=offs < n)


@triton.jit
def scan_serial_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    carry = tl.sum(tl.zeros([BLOCK], tl.float32), axis=0)
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
        tl.store(y_ptr + offs, tl.cumsum(x, axis=0) + carry, mask=offs < n)
        carry += tl.sum(x, axis=0)


def scan_tol(a, refs, dtype):
    n = a["x"].shape[-1]
    return {"y": Tolerance(U32, n * U32 * a["x"].abs().cumsum(-1) + 2.0 ** -149,
                           "rtol = u(fp32); atol_i = n u(fp32) sum_{j<=i} |x_j| + sub(fp32)")}


_scan = dict(dtypes=("fp32",), inputs=vec_spec(32), make=x_vec,
             outputs=lambda a: {"y": (tuple(a["x"].shape), torch.float32)},
             oracle=portcheck.oracle_from_torch(lambda x: x.cumsum(-1), "y"), tolerance=scan_tol)
case("ok_scan_serial", launch=lambda a, o: scan_serial_kernel[(1,)](a["x"], o["y"], a["x"].numel(), BLOCK=32), **_scan)
case("bug_scan_cross_program",
     launch=lambda a, o: scan_one_launch_kernel[(triton.cdiv(a["x"].numel(), 32),)](a["x"], o["y"], a["x"].numel(), BLOCK=32),
     **_scan)


# ================================================================ 5. unmasked load, value discarded by tl.where
@triton.jit
def softmax_kernel(x_ptr, y_ptr, xs, ys, cols, BLOCK: tl.constexpr, MASKED: tl.constexpr, SUB_MAX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    if MASKED:
        x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
    else:
        x = tl.load(x_ptr + row * xs + offs).to(tl.float32)      # BUG: reads past the row (and the tensor)
    x = tl.where(offs < cols, x, -float("inf"))
    if SUB_MAX:
        x = x - tl.max(x, axis=0)
    e = tl.exp(x)                                                   # without SUB_MAX: BUG (overflow)
    tl.store(y_ptr + row * ys + offs, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=offs < cols)


def softmax_launch(masked, sub_max):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        softmax_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1],
                                      BLOCK=triton.next_power_of_2(x.shape[1]), MASKED=masked, SUB_MAX=sub_max)
    return launch


_softmax = dict(dtypes=("fp32", "fp16"), inputs=rows_spec(32), make=x_rows,
                outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
                oracle=portcheck.oracle_from_torch(lambda x: torch.softmax(x, dim=-1), "y"),
                tolerance=lambda a, refs, dtype: {"y": T.softmax(a["x"], refs["y"], dtype)}, math=("exp",))
case("ok_softmax", launch=softmax_launch(True, True), **_softmax)
case("bug_softmax_unmasked_where", launch=softmax_launch(False, True), **_softmax)
# ================================================================ 9. softmax without the max subtraction
case("bug_softmax_no_max", launch=softmax_launch(True, False), **_softmax)


# ================================================================ 6. shift / forward difference, mask i < n on x[i+1]
@triton.jit
def diff_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0).to(tl.float32)
    if BUG:
        nxt = tl.load(x_ptr + offs + 1, mask=offs < n, other=0.0).to(tl.float32)     # BUG: reads x[n]
    else:
        nxt = tl.load(x_ptr + offs + 1, mask=offs + 1 < n, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (nxt - x).to(y_ptr.dtype.element_ty), mask=offs < n)


def diff_oracle(a):
    x = a["x"]
    return {"y": torch.cat([x[1:], x.new_zeros(1)]) - x}


def diff_tol(a, refs, dtype):
    x = a["x"]
    terms = torch.cat([x[1:], x.new_zeros(1)]).abs() + x.abs()
    return {"y": T.elementwise(dtype, "fp32", ops=1, terms=terms)}


_diff = dict(dtypes=("fp32", "fp16"), inputs=vec_spec(64), make=x_vec,
             outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)}, oracle=diff_oracle, tolerance=diff_tol)
for _bug in (False, True):
    case("bug_diff_mask_n" if _bug else "ok_diff",
         launch=(lambda b: lambda a, o: diff_kernel[(triton.cdiv(a["x"].numel(), 64),)](a["x"], o["y"], a["x"].numel(),
                                                                                      BLOCK=64, BUG=b))(_bug), **_diff)


# ================================================================ 7. persistent row kernel skipping the remainder rows
@triton.jit
def persistent_rowsum_kernel(x_ptr, y_ptr, xs, rows, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    if BUG:
        per = rows // nprog                                   # BUG: the last rows % nprog rows are skipped
        for i in range(0, per):
            row = (pid * per + i).to(tl.int64)
            x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
            tl.store(y_ptr + row, tl.sum(x, axis=0))
    else:
        for r in range(pid, rows, nprog):
            row = tl.cast(r, tl.int64)   # r is a plain int on the interpreter
            x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
            tl.store(y_ptr + row, tl.sum(x, axis=0))


def persistent_launch(bug):
    def launch(args, outs):
        x = args["x"]
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
        grid = (min(sms, x.shape[0]),)
        persistent_rowsum_kernel[grid](x, outs["y"], x.stride(0), x.shape[0], x.shape[1],
                                       BLOCK=triton.next_power_of_2(x.shape[1]), BUG=bug)
    return launch


_prs = dict(_rowsum, inputs=rows_spec(32, max_rows=16))
case("ok_persistent", launch=persistent_launch(False), **_prs)
case("bug_persistent_skip_tail", launch=persistent_launch(True), **_prs)


# ================================================================ 8. LayerNorm one-pass variance E[x^2] - E[x]^2
@triton.jit
def layernorm_kernel(x_ptr, y_ptr, xs, ys, cols, eps, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    if ONE_PASS:
        var = tl.sum(x * x, axis=0) / cols - mean * mean       # BUG: cancels for |mean| >> std
    else:
        d = tl.where(m, x - mean, 0.0)
        var = tl.sum(d * d, axis=0) / cols
    y = (x - mean) * tl.rsqrt(var + eps)
    tl.store(y_ptr + row * ys + offs, y.to(y_ptr.dtype.element_ty), mask=m)


def ln_launch(one_pass):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        layernorm_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), x.shape[1], args["eps"],
                                        BLOCK=triton.next_power_of_2(x.shape[1]), ONE_PASS=one_pass)
    return launch


_ln = dict(dtypes=("fp32", "fp16", "bf16"), inputs=rows_spec(32),
           make=lambda spec, device: {"x": S.row_tensor(spec, device), "eps": 1e-5},
           outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
           oracle=lambda a: {"y": torch.nn.functional.layer_norm(a["x"], a["x"].shape[-1:], eps=a["eps"])},
           tolerance=lambda a, refs, dtype: {"y": T.normalization(a["x"], dtype, "fp32", eps=a["eps"])},
           math=("rsqrt",))
case("ok_layernorm", launch=ln_launch(False), **_ln)
case("bug_layernorm_one_pass", launch=ln_launch(True), **_ln)


# ================================================================ 10. RMSNorm with eps outside the sqrt
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, xs, ys, cols, eps, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + offs, mask=m, other=0.0).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / cols
    if BUG:
        rstd = 1.0 / (tl.sqrt(ms) + eps)                      # BUG: eps outside the sqrt
    else:
        rstd = tl.rsqrt(ms + eps)
    tl.store(y_ptr + row * ys + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=m)


def rms_make(spec, device):
    g = S.generator(spec["seed"] + 1)
    return {"x": S.row_tensor(spec, device),
            "w": (1.0 + 0.1 * S.normal((spec["cols"],), g)).to(portcheck.fmt(spec["dtype"]).torch_dtype).to(device),
            "eps": 1e-6}


def rms_launch(bug):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        rmsnorm_kernel[(x.shape[0],)](x, args["w"], y, x.stride(0), y.stride(0), x.shape[1], args["eps"],
                                      BLOCK=triton.next_power_of_2(x.shape[1]), BUG=bug)
    return launch


_rms = dict(dtypes=("fp32", "fp16", "bf16"), inputs=rows_spec(32), make=rms_make,
            outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
            oracle=lambda a: {"y": a["x"] * torch.rsqrt(a["x"].square().mean(-1, keepdim=True) + a["eps"]) * a["w"]},
            tolerance=lambda a, refs, dtype: {"y": T.normalization(a["x"], dtype, "fp32", eps=a["eps"], centered=False,
                                                                   weight=a["w"])},
            math=("rsqrt", "sqrt"))
case("ok_rmsnorm", launch=rms_launch(False), **_rms)
case("bug_rmsnorm_eps_outside_sqrt", launch=rms_launch(True), **_rms)


# ================================================================ 11. causal softmax, looped over column tiles, tile-local mask
@triton.jit
def causal_softmax_kernel(x_ptr, y_ptr, T_, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    base = row.to(tl.int64) * T_
    ar = tl.arange(0, BLOCK)
    m = tl.max(tl.full([BLOCK], -float("inf"), tl.float32), axis=0)
    for start in range(0, T_, BLOCK):
        offs = start + ar
        ok = (offs < T_) & (offs <= row)
        m = tl.maximum(m, tl.max(tl.load(x_ptr + base + offs, mask=ok, other=-float("inf")).to(tl.float32), axis=0))
    s = tl.sum(tl.zeros([BLOCK], tl.float32), axis=0)
    for start in range(0, T_, BLOCK):
        offs = start + ar
        if BUG:
            ok = (offs < T_) & (ar <= row)                  # BUG: tile-local column index in the causal mask
        else:
            ok = (offs < T_) & (offs <= row)
        x = tl.load(x_ptr + base + offs, mask=ok, other=-float("inf")).to(tl.float32)
        s += tl.sum(tl.exp(x - m), axis=0)
    for start in range(0, T_, BLOCK):
        offs = start + ar
        ok = (offs < T_) & (offs <= row)
        x = tl.load(x_ptr + base + offs, mask=ok, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + base + offs, (tl.exp(x - m) / s).to(y_ptr.dtype.element_ty), mask=offs < T_)


def causal_inputs(dtype, max_elements):
    return st.fixed_dictionaries({"dtype": st.just(dtype), "T": S.lengths(16, 64), "seed": S.seeds(),
                                  "regime": S.regimes(("normal", "large", "equal", "offset"))})


def causal_make(spec, device):
    return {"x": S.values((spec["T"], spec["T"]), spec["dtype"], spec["regime"], S.generator(spec["seed"])).to(device)}


def causal_masked(x):
    t = x.shape[-1]
    return x.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))


_causal = dict(dtypes=("fp32", "fp16"), inputs=causal_inputs, make=causal_make,
               outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
               oracle=lambda a: {"y": torch.softmax(causal_masked(a["x"]), dim=-1)},
               tolerance=lambda a, refs, dtype: {"y": T.softmax(causal_masked(a["x"]), refs["y"], dtype)},
               math=("exp",))
for _bug in (False, True):
    case("bug_causal_tile_local_mask" if _bug else "ok_causal_softmax",
         launch=(lambda b: lambda a, o: causal_softmax_kernel[(a["x"].shape[0],)](a["x"], o["y"], a["x"].shape[0],
                                                                                 BLOCK=16, BUG=b))(_bug), **_causal)


# ================================================================ 12/14. per-row quantisers: fp8 e4m3 (max vs absmax), int8 (trunc vs RNE)
@triton.jit
def quant_kernel(x_ptr, q_ptr, s_ptr, xs, qs, cols, QMAX: tl.constexpr, BLOCK: tl.constexpr,
                 INT: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    m = offs < cols
    x = tl.load(x_ptr + row * xs + offs, mask=m, other=0.0).to(tl.float32)
    if BUG and not INT:
        amax = tl.max(tl.where(m, x, -float("inf")), axis=0)   # BUG: max, not absmax
    else:
        amax = tl.max(tl.abs(x), axis=0)
    scale = tl.maximum(amax, 1e-12) / QMAX
    v = tl.minimum(tl.maximum(x / scale, -QMAX), QMAX)
    if INT:
        if BUG:
            q = v.to(tl.int8)                                    # BUG: truncates toward zero
        else:
            q = libdevice.rint(v).to(tl.int8)
    else:
        q = v.to(q_ptr.dtype.element_ty)
    tl.store(q_ptr + row * qs + offs, q, mask=m)
    tl.store(s_ptr + row, scale)


def quant_launch(integer, bug):
    qmax = 127.0 if integer else 448.0

    def launch(args, outs):
        x, q = args["x"], outs["q"]
        quant_kernel[(x.shape[0],)](x, q, outs["scale"], x.stride(0), q.stride(0), x.shape[1], QMAX=qmax,
                                    BLOCK=triton.next_power_of_2(x.shape[1]), INT=integer, BUG=bug)
    return launch


def quant_oracle(integer):
    qmax = 127.0 if integer else 448.0

    def oracle(a):
        # exact codes: the fp32 arithmetic the quantiser specifies, then round to nearest even
        x32 = a["x"].to(torch.float32)
        scale32 = x32.abs().amax(-1).clamp(min=1e-12) / qmax
        v = (x32 / scale32[:, None]).clamp(-qmax, qmax)
        q = torch.round(v).to(torch.int8) if integer else v.to(torch.float8_e4m3fn)
        return {"q": q, "scale": a["x"].abs().amax(-1).clamp(min=1e-12) / qmax}
    return oracle


def quant_case(name, integer, bug):
    case(name, dtypes=("fp32",), inputs=rows_spec(32, max_rows=8), make=x_rows,
         outputs=lambda a: {"q": (tuple(a["x"].shape), torch.int8 if integer else torch.float8_e4m3fn),
                            "scale": ((a["x"].shape[0],), torch.float32)},
         launch=quant_launch(integer, bug), oracle=quant_oracle(integer),
         tolerance=lambda a, refs, dtype: {"q": T.exact("the codes of the fp32 quantiser, bit for bit"),
                                           "scale": T.rounding("fp32", ops=1)})


quant_case("ok_fp8_quant", False, False)
quant_case("bug_fp8_quant_max_not_absmax", False, True)
quant_case("ok_int8_quant", True, False)
quant_case("bug_int8_quant_trunc", True, True)


# ================================================================ 13. chunk loop assuming cols % BLOCK == 0
@triton.jit
def looped_rowsum_kernel(x_ptr, y_ptr, xs, cols, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    ar = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    if BUG:
        for c in range(0, cols // BLOCK):                    # BUG: the tail chunk is dropped
            acc += tl.load(x_ptr + row * xs + c * BLOCK + ar).to(tl.float32)
    else:
        for c in range(0, tl.cdiv(cols, BLOCK)):
            offs = c * BLOCK + ar
            acc += tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row, tl.sum(acc, axis=0))


for _bug in (False, True):
    case("bug_chunks_floor" if _bug else "ok_chunks",
         launch=(lambda b: lambda a, o: looped_rowsum_kernel[(a["x"].shape[0],)](a["x"], o["y"], a["x"].stride(0),
                                                                                a["x"].shape[1], BLOCK=32, BUG=b))(_bug),
         **dict(_rowsum, inputs=rows_spec(32)))


# ================================================================ 15. rows on the grid's second axis (65,535 limit on GPUs)
@triton.jit
def rowscale_kernel(x_ptr, y_ptr, xs, ys, cols, BLOCK: tl.constexpr, AXIS: tl.constexpr):
    row = tl.program_id(AXIS).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
    tl.store(y_ptr + row * ys + offs, (2.0 * x).to(y_ptr.dtype.element_ty), mask=offs < cols)


def rowscale_launch(axis):
    def launch(args, outs):
        x, y = args["x"], outs["y"]
        grid = (x.shape[0], 1) if axis == 0 else (1, x.shape[0])    # axis 1: BUG past 65,535 rows on a GPU
        rowscale_kernel[grid](x, y, x.stride(0), y.stride(0), x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]),
                              AXIS=axis)
    return launch


_rowscale = dict(dtypes=("fp32",), inputs=rows_spec(32), make=x_rows,
                 outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)},
                 oracle=lambda a: {"y": 2.0 * a["x"]},
                 tolerance=lambda a, refs, dtype: {"y": T.rounding(dtype, "fp32")})
case("ok_grid_axis0", launch=rowscale_launch(0), **_rowscale)
case("bug_grid_rows_on_axis1", launch=rowscale_launch(1), **_rowscale)


# ================================================================ 3b. cached state, deterministic: workspace += without re-zeroing
@triton.jit
def ws_accumulate_kernel(x_ptr, ws_ptr, y_ptr, xs, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32)
    s = tl.load(ws_ptr + row) + tl.sum(acc, axis=0)          # ws is assumed to hold zeros
    tl.store(ws_ptr + row, s)
    tl.store(y_ptr + row, s / cols)


_WS_DET = {}


def ws_det_launch(rearm):
    def launch(args, outs):
        x = args["x"]
        key = (x.shape[0], str(x.device), rearm)   # the twin and the bug keep caches of their own
        ws = _WS_DET.get(key)
        if ws is None:
            ws = _WS_DET[key] = torch.zeros(x.shape[0], dtype=torch.float32, device=x.device)
        elif rearm:
            ws.zero_()
        ws_accumulate_kernel[(x.shape[0],)](x, ws, outs["y"], x.stride(0), x.shape[1], BLOCK=32)
    return launch


case("ok_workspace_det", launch=ws_det_launch(True), **_rowmean)
case("bug_workspace_det_stale", launch=ws_det_launch(False), **_rowmean)


# ================================================================ 3c. split reduction whose last arriver finishes: counter not re-armed
@triton.jit
def last_arriver_kernel(x_ptr, ws_ptr, cnt_ptr, y_ptr, xs, cols, nsplit, CHUNK: tl.constexpr, REARM_COUNTER: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * CHUNK + tl.arange(0, CHUNK)
    part = tl.sum(tl.load(x_ptr + row * xs + offs, mask=offs < cols, other=0.0).to(tl.float32), axis=0)
    tl.atomic_add(ws_ptr + row, part)
    arrived = tl.atomic_add(cnt_ptr + row, 1)
    if arrived == nsplit - 1:                                  # the last program of this row finishes it
        total = tl.atomic_add(ws_ptr + row, 0.0)
        tl.store(y_ptr + row, total / cols)
        tl.store(ws_ptr + row, 0.0)                            # re-arms the workspace
        if REARM_COUNTER:
            tl.store(cnt_ptr + row, 0)                         # BUG when off: the counter keeps counting


_LAST = {}


def last_arriver_launch(rearm):
    def launch(args, outs):
        x = args["x"]
        key = (x.shape[0], str(x.device), rearm)   # the twin and the bug keep caches of their own
        if key not in _LAST:
            _LAST[key] = (torch.zeros(x.shape[0], dtype=torch.float32, device=x.device),
                          torch.zeros(x.shape[0], dtype=torch.int32, device=x.device))
        ws, cnt = _LAST[key]
        if os.environ.get("PROBE_LOG"):
            import traceback
            with open(os.environ["PROBE_LOG"], "a") as f:
                f.write(f"last_arriver launch, counter before = {cnt.tolist()}; called from: "
                        + " <- ".join(f"{fr.name}" for fr in traceback.extract_stack()[-8:-1]) + "\n")
        nsplit = triton.cdiv(x.shape[1], 64)
        last_arriver_kernel[(x.shape[0], nsplit)](x, ws, cnt, outs["y"], x.stride(0), x.shape[1], nsplit, CHUNK=64,
                                                  REARM_COUNTER=rearm)
    return launch


case("ok_last_arriver", launch=last_arriver_launch(True), nondeterministic=True, **_rowmean)
case("bug_last_arriver_counter_stale", launch=last_arriver_launch(False), nondeterministic=True, **_rowmean)
