"""Supplementary evidence (not a portcheck run): the two rounding modes of probe3's int8 quantiser differ
only on ties, which no drawn input has. Run on the interpreter with portcheck's numerics layer (which
gives libdevice.round / rint their numpy meaning). Also: tl.argmax(tie_break_left=False) on the
interpreter returns the leftmost index, as tie_break_left=True does."""
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402

from portcheck.targets import interpreter_numerics  # noqa: E402

interpreter_numerics.install()
import probe3  # noqa: E402

x = torch.tensor([[254.0, 1.0, 3.0, -5.0, 7.0]])      # scale = 2: x / scale = 127, 0.5, 1.5, -2.5, 3.5
for away in (False, True):
    q = torch.empty(1, 5, dtype=torch.int8)
    s = torch.empty(1)
    probe3.quant_kernel[(1,)](x, q, s, 5, 5, 5, QMAX=127.0, BLOCK=8, INT=True, HALF_AWAY=away, NAN_PROP=True)
    print("round half away" if away else "round half even", q.tolist())
print("torch.round (the oracle)", torch.round(x / 2).to(torch.int8).tolist())

e = torch.full((1, 8), 0.25)
for fast in (False, True):
    ids, w = torch.empty(1, 2, dtype=torch.int32), torch.empty(1, 2)
    probe3.topk2_kernel[(1,)](e, ids, w, 8, 8, BLOCK=8, RENORM=True, FAST_TIES=fast)
    print(f"all-equal logits, tie_break_left={not fast}: top-2 ids {ids.tolist()}")
