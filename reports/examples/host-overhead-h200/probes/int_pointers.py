"""A planned launch passing tensors to Triton's launcher (main's plans.Plan) against passing their
addresses, bf16 matmul 1 x 4104 x 4104 (split-K) and 256^3, in interleaved rounds in one process.

For a tensor the generated launcher calls data_ptr() and cuPointerGetAttribute (a driver call)
per pointer argument; for an int it does neither, but the caller then has to turn each tensor
of the argument list into its address in Python. Measured on the H200 (int-pointers.json): the
addresses were slower (M = 1: 24.3 against 23.4 us; 256^3: 21.4 against 16.8 us), so main
kept the tensors.

    python3 int_pointers.py OUT.json
"""
import dataclasses
import json
import statistics
import sys
import time

import torch

from portcheck.kernels import _plans
from portcheck.kernels.matmul import launcher as M


class AddressPlan(_plans.Plan):
    """plans.Plan passing every tensor as its address (the change tried, not kept)."""

    def launch(self, stream_: int, *leading) -> None:
        self.run(*self.grid, stream_, self.function, self.metadata, None, None, None,
                 *[t.data_ptr() if isinstance(t, torch.Tensor) else t for t in leading], *self.rest)


def _rounds(fns: dict, count: int = 200, rounds: int = 15) -> dict:
    per = {k: [] for k in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(count):
                fn()
            per[name].append((time.perf_counter() - t0) / count * 1e6)
    torch.cuda.synchronize()
    return {k: statistics.median(v) for k, v in per.items()}


def main(path: str) -> None:
    small = torch.zeros(1024, device="cuda")
    fns = {"torch floor: small.add_(1)": lambda: small.add_(1)}
    for m, n, k in ((1, 4104, 4104), (256, 256, 256)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        for _ in range(20):
            M.matmul(a, b)
        plan = M._PLANS.get(M._plan_key(a, b, None, None, "none", None, None, None, None, None))
        assert plan is not None
        fields = {f.name: getattr(plan.kernel, f.name) for f in dataclasses.fields(plan.kernel)}   # no copies
        addresses = dataclasses.replace(plan, kernel=AddressPlan(**fields))
        torch.testing.assert_close(addresses.launch(a, b, None, None, None, None),
                                   plan.launch(a, b, None, None, None, None), rtol=0, atol=0)
        label = f"{m}x{n}x{k}"
        fns[f"{label} torch.matmul"] = lambda a=a, b=b: torch.matmul(a, b)
        fns[f"{label} portcheck matmul, planned"] = lambda a=a, b=b: M.matmul(a, b)
        fns[f"{label} _Plan.launch, tensors"] = lambda a=a, b=b, p=plan: p.launch(a, b, None, None, None, None)
        fns[f"{label} _Plan.launch, addresses"] = lambda a=a, b=b, p=addresses: p.launch(a, b, None, None, None, None)
    rows = [{"what": k, "host_us": v} for k, v in _rounds(fns).items()]
    for r in rows:
        print(json.dumps(r), flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, open(path, "w"),
              indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
