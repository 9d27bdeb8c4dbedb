"""What the long-row probes of this folder share: the resource reading of a cross-compiled cubin,
and the timer of a [4096, 131072] bf16 launch against the copy bandwidth of the same run."""
import importlib.util
import json
import os
from functools import cache

_BINARY = os.path.join(os.path.dirname(__file__), *[".."] * 4, "portcheck", "compile", "binary.py")


@cache
def _binary():
    """portcheck.compile.binary, loaded from its file: it needs neither torch nor the rest of
    portcheck, so a Triton-only environment (the H200's Triton 3.6, say) can read cubins here."""
    spec = importlib.util.spec_from_file_location("portcheck_binary", _BINARY)
    binary = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(binary)
    return binary


def nvidia_resources(cubin: bytes) -> dict:
    """Registers, stack (spill) and local bytes of a cubin: portcheck.compile.binary's reading."""
    return _binary().nvidia_resources(cubin)


def row_timer(x, y, copy_gbs: float, rows: list):
    """t(name, fn, ref=None): fn's do_bench median as a fraction of the copy bandwidth (x read once,
    y written once), y's largest difference to ref, or the error; appended to rows and printed."""
    import torch
    import triton.testing
    nbytes = 2 * x.numel() * x.element_size()

    def t(name, fn, ref=None):
        try:
            fn()
            torch.cuda.synchronize()
            err = float((y.float() - ref).abs().max()) if ref is not None else None
            ms = triton.testing.do_bench(fn, warmup=10, rep=100, return_mode="median")
            rows.append({"what": name, "us": ms * 1e3, "of_copy": nbytes / (ms * 1e6) / copy_gbs,
                         "max_abs_diff_vs_main": err})
        except Exception as e:  # noqa: BLE001
            rows.append({"what": name, "error": str(e)[:300]})
        print(json.dumps(rows[-1]), flush=True)
    return t


def sm90a_resources(fn, signature: dict, constexprs: dict, num_warps: int = 32) -> dict:
    """Registers and stack (spill) bytes of a @triton.jit function cross-compiled for sm_90a with
    this machine's Triton, specialised as the bench launch is: every pointer and i32 argument a
    multiple of 16 (without that attribute the loads do not vectorize)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    attrs = {(i,): [["tt.divisibility", 16]] for i, kind in enumerate(signature.values())
             if kind.startswith("*") or kind == "i32"}
    out = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=GPUTarget("cuda", 90, 32),
                         options={"num_warps": num_warps})
    return nvidia_resources(out.asm["cubin"])


def launchers(r):
    """Zero-argument launches of a looped kernel (main's or a probe's copy, with extra constexprs)
    on bench_rows() `r`, as the bench launches main's: one program an SM, main's chunk and warps,
    the rows of whole chunks (EVEN), weight and bias, softmax's L2 prefetch on."""
    from types import SimpleNamespace
    from portcheck.kernels import layernorm, rmsnorm, softmax
    cfg = {m: m.config(r.n_cols, 32, True, None, 2) for m in (softmax, layernorm, rmsnorm)}
    rows = (r.n_rows, r.n_cols, r.n_cols, r.n_cols)   # n_rows, n_cols and both strides

    def sm(kern, **extra):
        c = cfg[softmax]
        return lambda: kern[(r.sms,)](r.x, r.y, *rows, BLOCK=c["BLOCK"], PREFETCH=True,
                                      num_warps=c["num_warps"], **extra)

    def ln(kern, **extra):
        c = cfg[layernorm]
        return lambda: kern[(r.sms,)](r.x, r.w, r.b, r.y, r.mean, r.rstd, *rows, 1e-5, HAS_W=True, HAS_B=True,
                                      EVEN=True, BLOCK=c["BLOCK"], num_warps=c["num_warps"], **extra)

    def rms(kern, **extra):
        c = cfg[rmsnorm]
        return lambda: kern[(r.sms,)](r.x, r.w, r.y, r.rstd, *rows, 1e-6, HAS_W=True, BLOCK=c["BLOCK"],
                                      num_warps=c["num_warps"], **extra)
    return SimpleNamespace(softmax=sm, layernorm=ln, rmsnorm=rms)


def bench_rows():
    """The long-row bench's inputs on the GPU, seeded: bf16 x [4096, 131072], a weight and a bias,
    y like x, per-row fp32 mean and rstd; with the SM count and this process's copy bandwidth."""
    from types import SimpleNamespace
    import torch
    from portcheck.speed.ceilings import measure_copy
    copy = measure_copy()["gbs"]
    n_rows, n_cols = 4096, 131072
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16, generator=g)
    w = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16, generator=g)
    return SimpleNamespace(x=x, w=w, b=b, y=torch.empty_like(x), mean=torch.empty(n_rows, device="cuda"),
                           rstd=torch.empty(n_rows, device="cuda"), n_rows=n_rows, n_cols=n_cols, copy=copy,
                           sms=torch.cuda.get_device_properties(0).multi_processor_count)
