"""One launch of ln_lanes.py's kernel (OFFSET=1, 32 warps) between cudaProfilerStart and Stop, for
Nsight Compute: `ncu --profile-from-start off --section WarpStateStats --section SourceCounters
-o OUT python3 profile_lanes.py`."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ln_lanes import ln_lanes_kernel  # noqa: E402

n_rows, n_cols = 4096, 131072
x = torch.randn(n_rows, n_cols, device="cuda", dtype=torch.bfloat16)
w = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n_cols, device="cuda", dtype=torch.bfloat16)
y, mean, rstd = torch.empty_like(x), torch.empty(n_rows, device="cuda"), torch.empty(n_rows, device="cuda")
sms = torch.cuda.get_device_properties(0).multi_processor_count


def launch():
    ln_lanes_kernel[(sms,)](x, w, b, y, mean, rstd, n_rows, n_cols, n_cols, n_cols, 1e-5, HAS_W=True, HAS_B=True,
                            BLOCK=32768, OFFSET=1, num_warps=32)


launch()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
launch()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
