"""Main's planned launches against leaner variants of the same planned path, in interleaved rounds
in one process (bf16 matmul 1 x 4104 x 4104, split-K; paged decode 8 x 1024, two kernels), plus
the parts each variant changes, timed alone.

The lean variants change only host code around the same compiled kernels, argument lists and
buffers:
- direct: Triton 3.6's generated C launcher called straight (CudaLauncher.__call__ builds a
  closure and calls it twice per launch to learn there is no scratch to allocate);
- one capture check: the split-K workspace and the arrival counters from one lookup (main asks
  torch whether the stream is capturing once per buffer);
- the key in one function (main: four calls deep) and torch._C._cuda_getDevice for the device;
- the output by torch.empty(*shape, ...) (sizes as arguments, not a tuple).
Each lean launch is checked bitwise against main's before timing. Written against tree 55f4e8b,
before the changes it led to (ninth session: the direct entry, one capture check, the key in a
list comprehension, torch.empty(*shape)); main's matmul plan no longer has the `ws` and `locks`
fields this reads, so run it on that tree.

    python3 lean_launch.py OUT.json
"""
import json
import sys

import torch
import triton

from portcheck.kernels import _launch, _plans
from portcheck.kernels import paged_attention as P
from portcheck.kernels.matmul import launcher as M
from portcheck import cases as C
from portcheck.strategies import drawn_on
from int_pointers import _rounds as rounds   # (this folder's: interleaved rounds of 200 calls)


def direct(plan: _plans.Plan):
    """A zero-overhead caller of plan's compiled kernel: Triton 3.6's C entry point, with no
    scratch (asserted) and no hooks."""
    run = plan.run
    assert type(run).__name__ == "CudaLauncher" and not run.global_scratch_size and not run.profile_scratch_size
    c_launch, head = run.launch, (run.launch_cooperative_grid, run.launch_pdl, None, None, plan.metadata,
                                  None, None, None)
    grid, function, rest = plan.grid, plan.function, plan.rest

    def launch(stream, *leading):
        c_launch(*grid, stream, function, *head, *leading, *rest)
    return launch


def lean_key(tensors, scalars):
    """_plans.key in one function (same tuple as main's, same refusals)."""
    first = tensors[0]
    if not first.is_cuda or _plans.forced() is not None \
            or _plans.hooked(triton.knobs.runtime.launch_enter_hook) \
            or _plans.hooked(triton.knobs.runtime.launch_exit_hook) or _plans.dispatch_replaced():
        return None
    return (torch._C._cuda_getDevice(),
            tuple(None if t is None else (t.dtype, t.device, t.shape, t.stride(), t.data_ptr() % 16 == 0)
                  for t in tensors),
            tuple(scalars), tuple(map(type, scalars)))


def buffers(device, stream, ws, locks):
    """scratch and arrival_counters from one capture check (not capturing: the plain caches)."""
    if torch.cuda.is_current_stream_capturing():
        return (_launch.scratch(device, ws[1], ws[2], stream),
                _launch.arrival_counters(device, locks[1], stream))
    w = _launch._SCRATCH.get((device, stream, ws[2]))
    c = _launch._COUNTERS.get((device, stream, torch.int32))
    if w is None or w.numel() < ws[1] or c is None or c.numel() < locks[1]:
        return (_launch.scratch(device, ws[1], ws[2], stream),
                _launch.arrival_counters(device, locks[1], stream))
    return w, c


def lean_matmul(a, b, launchers):
    key = lean_key((a, b, None, None, None, None), ("none", None, None, None))
    plan = M._PLANS.get(key)
    out = torch.empty(*plan.out_shape, dtype=plan.out_dtype, device=a.device)
    values = plan.values.copy()
    values[:6] = a, b, out, None, None, None
    stream = _launch.current_stream(a.device)
    ws, counters = buffers(a.device, stream, plan.ws, plan.locks)
    values[plan.ws[0]] = ws
    values[plan.locks[0]] = counters
    launchers[id(plan)](stream, *values)
    return out


def lean_decode(args, out, launchers):
    a = args
    key = lean_key((a["query"], a["key_cache"], a["value_cache"], a["block_tables"], a["context_lens"], out),
                   (a["scale"], a["max_context_len"], a["num_splits"], None))
    plan = P._PLANS.get(key)
    main, reduce = launchers[id(plan)]
    stream = triton.runtime.driver.active.get_current_stream(key[0])
    elements, at_max, at_sum = plan.workspace
    ws = _launch.scratch(a["query"].device, elements, torch.float32, stream)
    at = ws.data_ptr()
    parts = at, at + 4 * at_max, at + 4 * at_sum
    main(stream, a["query"], a["key_cache"], a["value_cache"], a["block_tables"], a["context_lens"], out, *parts)
    reduce(stream, *parts, out)
    return out


def main(path: str) -> None:
    dev = torch.device("cuda", torch.cuda.current_device())
    small = torch.zeros(1024, device=dev)
    a = torch.randn(1, 4104, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4104, 4104, device=dev, dtype=torch.bfloat16)
    for _ in range(5):
        M.matmul(a, b)
    mplan = M._PLANS.get(M._plan_key(a, b, None, None, "none", None, None, None, None, None))
    assert mplan is not None and mplan.ws is not None and mplan.locks is not None and mplan.tma is None
    launchers = {id(mplan): direct(mplan.kernel)}
    assert torch.equal(lean_matmul(a, b, launchers), M.matmul(a, b))

    case = C.get("paged_attention")
    with drawn_on("cuda"):
        args = case.make({**case.bench[0], "context_lens": [1024] * 8}, "cuda")
    out = torch.empty_like(args["query"])

    def decode():
        x = args
        return P.paged_decode_attention(x["query"], x["key_cache"], x["value_cache"], x["block_tables"],
                                        x["context_lens"], scale=x["scale"], out=out,
                                        max_context_len=x["max_context_len"], num_splits=x["num_splits"],
                                        validate=False)
    for _ in range(5):
        decode()
    dkey = _plans.key((args["query"], args["key_cache"], args["value_cache"], args["block_tables"],
                       args["context_lens"], out), (args["scale"], args["max_context_len"], args["num_splits"], None))
    dplan = P._PLANS.get(dkey)
    assert dplan is not None and dplan.reduce is not None
    launchers[id(dplan)] = (direct(dplan.main), direct(dplan.reduce))
    expect = decode().clone()
    out.fill_(float("nan"))
    assert torch.equal(lean_decode(args, out, launchers), expect)
    assert lean_key((a, b, None, None, None, None), ("none", None, None, None)) == \
        M._plan_key(a, b, None, None, "none", None, None, None, None, None)

    stream = _launch.current_stream(a.device)
    values = mplan.values.copy()
    values[:6] = a, b, torch.empty(mplan.out_shape, dtype=mplan.out_dtype, device=dev), None, None, None
    values[mplan.ws[0]], values[mplan.locks[0]] = buffers(dev, stream, mplan.ws, mplan.locks)
    fast = launchers[id(mplan)]
    shape, dt = mplan.out_shape, mplan.out_dtype
    fns = {
        "floor: small.add_(1)": lambda: small.add_(1),
        "matmul M=1: torch.matmul": lambda: torch.matmul(a, b),
        "matmul M=1: main planned": lambda: M.matmul(a, b),
        "matmul M=1: lean planned": lambda: lean_matmul(a, b, launchers),
        "decode 8x1024: main planned": decode,
        "decode 8x1024: lean planned": lambda: lean_decode(args, out, launchers),
        "part: main key (matmul._plan_key)": lambda: M._plan_key(a, b, None, None, "none", None, None, None, None, None),
        "part: lean key": lambda: lean_key((a, b, None, None, None, None), ("none", None, None, None)),
        "part: torch.cuda.current_device()": torch.cuda.current_device,
        "part: torch._C._cuda_getDevice()": torch._C._cuda_getDevice,
        "part: torch.empty(shape tuple)": lambda: torch.empty(shape, dtype=dt, device=dev),
        "part: torch.empty(*shape)": lambda: torch.empty(*shape, dtype=dt, device=dev),
        "part: a.new_empty(shape)": lambda: a.new_empty(shape),
        "part: scratch + arrival_counters (main)": lambda: (
            _launch.scratch(dev, mplan.ws[1], mplan.ws[2], stream), _launch.arrival_counters(dev, mplan.locks[1], stream)),
        "part: buffers, one capture check": lambda: buffers(dev, stream, mplan.ws, mplan.locks),
        "part: torch.cuda.is_current_stream_capturing()": torch.cuda.is_current_stream_capturing,
        "part: Triton launcher, CudaLauncher.__call__ (main)": lambda: mplan.kernel.launch(stream, *values),
        "part: Triton launcher, C entry direct": lambda: fast(stream, *values),
    }
    rows = [{"what": k, "host_us": v} for k, v in rounds(fns).items()]
    for r in rows:
        print(json.dumps(r), flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
