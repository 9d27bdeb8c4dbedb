"""Malformed user cases: how portcheck reports a user's mistakes in the Case contract.
Run: portcheck run --target interpreter --cases probe4_malformed --kernel 'p4m_*' --jobs 1 --no-time"""
import torch
import triton
import triton.language as tl

import portcheck
from portcheck import strategies as S
from portcheck import tolerance as T


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def _inputs(dtype, max_elements):
    from hypothesis import strategies as st
    return st.fixed_dictionaries({"dtype": st.just(dtype), "n": S.lengths(64, min(max_elements, 256)),
                                  "seed": S.seeds(), "regime": S.regimes(("normal",))})


def _make(spec, device):
    return {"x": S.values((spec["n"],), spec["dtype"], spec["regime"], S.generator(spec["seed"])).to(device)}


def _launch(args, outs):
    n = args["x"].numel()
    copy_kernel[(triton.cdiv(n, 64),)](args["x"], outs["y"], n, BLOCK=64)


BASE = dict(family="probe4_malformed", dtypes=("fp32",), inputs=_inputs, make=_make,
            outputs=lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype)}, launch=_launch,
            oracle=lambda a: {"y": a["x"].to(torch.float32)},
            tolerance=lambda a, refs, d: {"y": T.exact()})

# the oracle names an output that outputs() does not declare
portcheck.register(portcheck.Case(name="p4m_oracle_extra_output", **{**BASE, "oracle": lambda a: {"y": a["x"].to(torch.float32), "z": a["x"] * 2}}))
# outputs() declares an output the oracle never gives
portcheck.register(portcheck.Case(name="p4m_oracle_missing_output", **{**BASE, "outputs": lambda a: {"y": (tuple(a["x"].shape), a["x"].dtype), "y2": (tuple(a["x"].shape), a["x"].dtype)}}))
# the tolerance is a bare number, not a Tolerance
portcheck.register(portcheck.Case(name="p4m_tolerance_bare_float", **{**BASE, "tolerance": lambda a, refs, d: {"y": 1e-6}}))
# the tolerance misses the output's key
portcheck.register(portcheck.Case(name="p4m_tolerance_missing_key", **{**BASE, "tolerance": lambda a, refs, d: {}}))
# the spec has no "seed" (the contract requires one)
portcheck.register(portcheck.Case(name="p4m_spec_without_seed", **{**BASE, "inputs": lambda d, me: _inputs(d, me).map(lambda s: {k: v for k, v in s.items() if k != "seed"}),
                                                                  "make": lambda s, dev: {"x": torch.ones(s["n"], dtype=torch.float32, device=dev)}}))
# the oracle returns float32 (not float64) for a rounded output
portcheck.register(portcheck.Case(name="p4m_oracle_not_float64", **{**BASE, "oracle": lambda a: {"y": a["x"].to(torch.float32)},
                                                                   "tolerance": lambda a, refs, d: {"y": T.rounding(d)}}))
# the outputs() shape disagrees with the oracle's
portcheck.register(portcheck.Case(name="p4m_oracle_wrong_shape", **{**BASE, "oracle": lambda a: {"y": a["x"][:-1].to(torch.float32) if a["x"].numel() > 1 else a["x"].reshape(1, 1).to(torch.float32)}}))
# make() is not deterministic from the spec (draws from torch's global RNG)
portcheck.register(portcheck.Case(name="p4m_make_not_deterministic", **{**BASE, "make": lambda s, dev: {"x": torch.randn(s["n"], device=dev)},
                                                                       "oracle": lambda a: {"y": a["x"].to(torch.float32)}}))
