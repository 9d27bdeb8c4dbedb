"""One launch each of main's layernorm_long and of thread_state.py's per-thread LayerNorm (bf16
4096 x 131072, 32768-column chunks, 32 warps) between cudaProfilerStart and Stop, for Nsight
Compute: `ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis
--section WarpStateStats --csv python3 profile_threads.py`."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from thread_state import ln_threads_kernel  # noqa: E402

from portcheck.kernels.layernorm import layer_norm  # noqa: E402

n_rows, n_cols = 4096, 131072
x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16)
y, mean, rstd = torch.empty_like(x), torch.empty(n_rows, device="cuda"), torch.empty(n_rows, device="cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count


def main_kernel():
    layer_norm(x, w, b, 1e-5, out=y, mean=mean, rstd=rstd, long_rows=True)


def per_thread():
    ln_threads_kernel[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5,
                              BLOCK=32768, THREADS=1024, num_warps=32)


for launch in (main_kernel, per_thread):
    launch()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
for launch in (main_kernel, per_thread):
    launch()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
