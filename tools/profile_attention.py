"""One attention launch of portcheck's kernel and one of each SDPA backend, for Nsight Compute
(a developer's tool, not a test): where the kernel's time goes next to cuDNN's and FlashAttention's.

    ncu --profile-from-start off --section SpeedOfLight --section Occupancy \
        --section WarpStateStats --section LaunchStats --csv \
        python3 tools/profile_attention.py [--seq 4096] [--causal]

bf16, batch 4, 32 heads, head_dim 128 (the attention bench's shape class). Everything runs once
outside the profiled range first (compilation, autotuning, cuDNN's plan), then once each between
cudaProfilerStart and cudaProfilerStop, so ncu sees exactly one launch per implementation.
"""
from __future__ import annotations

import argparse
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from portcheck.kernels.attention import attention

BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--causal", action="store_true")
    a = p.parse_args(argv)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn(4, 32, a.seq, 128, device="cuda", dtype=torch.bfloat16, generator=g)
               for _ in range(3))
    runs = {"portcheck": lambda: attention(q, k, v, causal=a.causal)}
    for name, backend in BACKENDS.items():
        def sdpa(backend=backend):
            with sdpa_kernel(backend):
                return scaled_dot_product_attention(q, k, v, is_causal=a.causal)
        runs[f"sdpa-{name}"] = sdpa
    usable = {}
    for name, fn in runs.items():
        try:
            fn()
            usable[name] = fn
        except RuntimeError as exc:   # a backend this build or shape does not offer
            print(f"{name}: not run ({str(exc).splitlines()[0][:100]})", file=sys.stderr)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, fn in usable.items():
        torch.cuda.nvtx.range_push(name)
        fn()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled: " + ", ".join(usable), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
