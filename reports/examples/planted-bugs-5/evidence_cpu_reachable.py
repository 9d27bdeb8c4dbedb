"""Evidence for three escapes: the planted bug is reachable on the CPU interpreter with inputs
outside what portcheck's interpreter check draws. Run: TRITON_INTERPRET=1 python evidence_cpu_reachable.py
(raw Triton interpreter, not portcheck's harness)."""
import sys
import torch
import probe4 as P
from portcheck import strategies as S


def persistent(bug, rows):
    x = torch.randn(rows, 8, dtype=torch.float16)
    y = torch.empty(rows, dtype=torch.float16)
    P._persist_launch(bug)({"x": x}, {"y": y})
    ref = x.double().square().sum(-1).sqrt()
    return float(((y.double() - ref).abs() / ref).max())


def split(bug, cols):
    x = torch.randn(2, cols, dtype=torch.float32)
    y = torch.empty(2, dtype=torch.float32)
    P._split_launch(bug)({"x": x}, {"y": y})
    return float((y.double() - x.double().sum(-1)).abs().max())


def far(bug):
    t = torch.randn(3, 8, dtype=torch.float64).to(torch.float16)
    x = S.laid_out(t, "far", "cpu")          # rows 2**31 elements apart (4 GiB of fp16 storage)
    b = torch.randn(8, dtype=torch.float16)
    y = torch.empty(3, 8, dtype=torch.float16)
    P._bias_launch(bug)({"x": x, "b": b}, {"y": y})
    return float((y.double() - (t.double() + b.double())).abs().max())


which = sys.argv[1:] or ["persistent", "split", "far"]
if "persistent" in which:
    for rows in (64, 140):
        print(f"persistent rownorm, {rows} rows (grid = min(rows, 132)): bug max rel err {persistent(True, rows):.3g}, "
              f"twin {persistent(False, rows):.3g}")
if "split" in which:
    for cols in (16384, 40000):
        print(f"rowsum, {cols} cols: bug max abs err {split(True, cols):.3g}, twin {split(False, cols):.3g}")
if "far" in which:
    for bug in (False, True):
        try:
            print(f"bias add, far rows (row 2 at 2**31 elements), {'bug' if bug else 'twin'}: max abs err {far(bug):.3g}")
        except Exception as exc:   # noqa: BLE001
            print(f"bias add, far rows, {'bug' if bug else 'twin'}: {type(exc).__name__}: {str(exc)[:300]}")
