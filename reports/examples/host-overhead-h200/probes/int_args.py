"""Planned launches with the tensors' addresses written out (x.data_ptr() per tensor, no loop)
against main's (tensors, whose data_ptr() and cuPointerGetAttribute the generated launcher calls
per pointer), paged decode 8 x 1024 (two launches, nine pointers) and bf16 matmul 1 x 4104 x
4104 (split-K, five pointers), in interleaved rounds in one process. The seventh session's try
(int_pointers.py) turned every argument with a list comprehension; this one touches only the
tensors. Written against tree 90e22a4.

    python3 int_args.py OUT.json
"""
import json
import sys

import torch
import triton

from portcheck import cases as C
from portcheck.kernels import _launch, _plans
from portcheck.kernels import paged_attention as P
from portcheck.kernels.matmul import launcher as M
from portcheck.strategies import drawn_on
from int_pointers import _rounds as rounds


def decode_addresses(x, out):
    """paged_decode_attention's planned path (validate=False), the tensors as addresses."""
    q, kc, vc, bt, cl = x["query"], x["key_cache"], x["value_cache"], x["block_tables"], x["context_lens"]
    key = _plans.key((q, kc, vc, bt, cl, out), (x["scale"], x["max_context_len"], x["num_splits"], None))
    plan = P._PLANS.get(key)
    stream = _plans.stream(key)
    elements, at_max, at_sum = plan.workspace
    at = _launch.scratch(q.device, elements, torch.float32, stream).data_ptr()
    parts = at, at + 4 * at_max, at + 4 * at_sum
    o = out.data_ptr()
    plan.main.launch(stream, q.data_ptr(), kc.data_ptr(), vc.data_ptr(), bt.data_ptr(), cl.data_ptr(), o, *parts)
    plan.reduce.launch(stream, *parts, o)
    return out


def matmul_addresses(a, b):
    """matmul's planned path (no bias, no scales, split-K), the tensors as addresses."""
    plan = M._PLANS.get(M._plan_key(a, b, None, None, "none", None, None, None, None, None))
    out = torch.empty(*plan.out_shape, dtype=plan.out_dtype, device=a.device)
    values = plan.values.copy()
    values[:6] = a.data_ptr(), b.data_ptr(), out.data_ptr(), None, None, None
    stream = _launch.current_stream(a.device)
    at_ws, elements, dtype, at_counters, tiles = plan.split
    ws, counters = _launch.split_buffers(a.device, elements, dtype, tiles, stream)
    values[at_ws], values[at_counters] = ws.data_ptr(), counters.data_ptr()
    plan.kernel.launch(stream, *values)
    return out


def main(path: str) -> None:
    small = torch.zeros(1024, device="cuda")
    a = torch.randn(1, 4104, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4104, 4104, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        M.matmul(a, b)
    assert torch.equal(matmul_addresses(a, b), M.matmul(a, b))
    case = C.get("paged_attention")
    with drawn_on("cuda"):
        x = case.make({**case.bench[0], "context_lens": [1024] * 8}, "cuda")
    out = torch.empty_like(x["query"])

    def decode():
        return P.paged_decode_attention(x["query"], x["key_cache"], x["value_cache"], x["block_tables"],
                                        x["context_lens"], scale=x["scale"], out=out,
                                        max_context_len=x["max_context_len"], num_splits=x["num_splits"],
                                        validate=False)
    for _ in range(5):
        decode()
    expect = decode().clone()
    out.fill_(float("nan"))
    assert torch.equal(decode_addresses(x, out), expect)
    fns = {
        "floor: small.add_(1)": lambda: small.add_(1),
        "matmul M=1: torch.matmul": lambda: torch.matmul(a, b),
        "matmul M=1: main planned": lambda: M.matmul(a, b),
        "matmul M=1: addresses": lambda: matmul_addresses(a, b),
        "decode 8x1024: main planned": decode,
        "decode 8x1024: addresses": lambda: decode_addresses(x, out),
    }
    rows = [{"what": k, "host_us": v} for k, v in rounds(fns).items()]
    for r in rows:
        print(json.dumps(r), flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
               "rows": rows}, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
