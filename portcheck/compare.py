"""Error metrics between a kernel's output and its reference.

ULP distances are in the output's format. NaN and Inf must sit in the same places with the same
sign, but for the output's own rounding: an infinity where the reference, within its tolerance,
reaches the format's overflow threshold (max + ulp(max)/2). Integer, quantized and RNG outputs
are compared bit for bit.

The comparison runs where the reference lies (the oracle's device: a GPU's, whose float64
operations round as the CPU's do), so that a GPU check does not copy each output to the host and
compare millions of elements per core there; only the metrics and a failure's masks come back.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .dtypes import Format, fmt
from .guards import ONE_NAN_CODE, bits, is_output_poison
from .tolerance import Tolerance

_INT_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@dataclass
class Comparison:
    name: str
    ok: bool
    total: int
    mismatches: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    max_ulp: float = 0.0       # over elements whose |ref| exceeds the absolute tolerance
    worst_ratio: float = 0.0   # max |err| / (atol + rtol |ref|): 1.0 is the tolerance
    message: str = ""
    worst_index: list = field(default_factory=list)
    tolerance: dict = field(default_factory=dict)   # the Tolerance summary it was judged by
    launch_spread: float | None = None   # nondeterministic cases: max |difference| between launches
    launch: int = 1                      # the launch it judges (compare_launches: a later one)
    # elements holding a NaN or Inf where the reference is finite, not the output poison (flat
    # bool mask): produced by the kernel or read from an input's guard; the runner tells which
    nan_where_finite: torch.Tensor | None = field(default=None, repr=False)

    def metrics(self) -> dict:
        found = {"max_abs": self.max_abs, "max_rel": self.max_rel, "max_ulp": self.max_ulp,
                 "worst_ratio": self.worst_ratio, "mismatches": self.mismatches}
        if self.launch_spread is not None:
            found["launch_spread"] = self.launch_spread
        return found


def ulp_of(ref: torch.Tensor, f: Format) -> torch.Tensor:
    """Spacing of format f at |ref| (float64 in, float64 out); subnormal spacing below tiny."""
    mag = ref.abs()
    _, exp = torch.frexp(mag)
    e = torch.clamp(exp.to(torch.int64) - 1, min=f.min_exp)
    e = torch.where(mag == 0, torch.full_like(e, f.min_exp), e)
    return torch.ldexp(torch.ones_like(mag), e - f.mantissa_bits)


def _ordered(bits: torch.Tensor, width: int) -> torch.Tensor:
    """Sign-magnitude float bits -> integers ordered like the floats (+0 and -0 both map to 0)."""
    b = bits.to(torch.int64) & ((1 << (8 * width)) - 1)
    sign = (b >> (8 * width - 1)) & 1
    mag = b & ((1 << (8 * width - 1)) - 1)
    return torch.where(sign == 1, -mag, mag)


def ulp_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Number of representable values between a and b (same float dtype); NaN vs non-NaN: inf."""
    if a.dtype != b.dtype:
        raise TypeError(f"ulp_distance needs one dtype, got {a.dtype} and {b.dtype}")
    width = a.element_size()
    view = _INT_VIEW[width]
    oa, ob = _ordered(a.contiguous().view(view), width), _ordered(b.contiguous().view(view), width)
    dist = (oa - ob).abs().to(torch.float64)
    na, nb = torch.isnan(a.to(torch.float32)), torch.isnan(b.to(torch.float32))
    dist = torch.where(na & nb, torch.zeros_like(dist), dist)
    return torch.where(na ^ nb, torch.full_like(dist, float("inf")), dist)


def flat_to_index(flat_index: int, shape) -> list:
    idx = []
    for dim in reversed(list(shape)):
        idx.append(flat_index % dim if dim else 0)
        flat_index //= dim if dim else 1
    return idx[::-1]


def _per_element(x, ref: torch.Tensor):
    """A scalar, or a tensor broadcastable to ref, as a flat float64 tensor on ref's device, or a float."""
    if not isinstance(x, torch.Tensor):
        return float(x)
    return x.detach().to(device=ref.device, dtype=torch.float64).expand(ref.shape).flatten()


def compare(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    """Compare one output tensor with its reference under a tolerance."""
    total = out.numel()
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(name, False, total, total,
                          message=f"{name}: shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    ref = ref.detach()
    out = out.detach().to(ref.device)
    if tol.exact:
        return _compare_exact(name, out, ref)
    return _compare_float(name, out, ref, tol)


def _compare_exact(name: str, out: torch.Tensor, ref: torch.Tensor) -> Comparison:
    if out.dtype != ref.dtype:
        return Comparison(name, False, out.numel(), out.numel(),
                          message=f"{name}: dtype {out.dtype}, expected {ref.dtype} (an exact tolerance compares "
                                  f"bits: the case's oracle must give {name} in its output's dtype, or the "
                                  "case a tolerance with a formula, portcheck.tolerance.rounding and kin)")
    if out.dtype.is_floating_point:
        view = _INT_VIEW[out.element_size()]
        a, b = out.contiguous().view(view), ref.contiguous().view(view)
        ulps = ulp_distance(out, ref)
        max_ulp = float(ulps.max()) if ulps.numel() else 0.0
    else:
        a, b, max_ulp = out, ref, 0.0
    diff = a != b
    if out.dtype.is_floating_point:
        # IEEE 754 leaves the sign and payload of a NaN result to the implementation: a NaN
        # matches a NaN; every other value, -0 included, must match bit for bit
        nan = torch.isnan(out.to(torch.float32)) & torch.isnan(ref.to(torch.float32))
        diff = diff & ~nan
    bad = int(diff.sum())
    cmp = Comparison(name, bad == 0, out.numel(), bad, max_ulp=max_ulp,
                     worst_ratio=float("inf") if bad else 0.0)
    if out.dtype.is_floating_point or out.dtype in (torch.int32, torch.int64, torch.int8, torch.int16):
        if not out.dtype.is_floating_point and out.numel():
            cmp.max_abs = float((out.to(torch.int64) - ref.to(torch.int64)).abs().max())
    if bad:
        first = int(diff.flatten().nonzero()[0])
        cmp.worst_index = flat_to_index(first, out.shape)
        cmp.message = (f"{name}: {bad} of {out.numel()} elements differ bitwise; first at "
                       f"{cmp.worst_index}: got {out.flatten()[first].item()!r}, "
                       f"expected {ref.flatten()[first].item()!r}")
        unwritten = int((diff & is_output_poison(out)).sum())
        if unwritten:
            cmp.message += f"; {unwritten} of them never written (still the harness's output poison)"
    return cmp


def _compare_float(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Comparison:
    f = fmt(out.dtype)
    o, r = out.to(torch.float64).flatten(), ref.to(torch.float64).flatten()
    total = o.numel()
    cmp = Comparison(name, True, total)
    if total == 0:
        return cmp
    nan_o, nan_r = torch.isnan(o), torch.isnan(r)
    inf_o, inf_r = torch.isinf(o), torch.isinf(r)
    atol, rel_bound = _per_element(tol.atol, ref), _per_element(tol.rtol, ref) * r.abs()
    bound = atol + rel_bound
    special_bad = (nan_o != nan_r) | ((inf_o | inf_r) & ~(nan_o | nan_r) & (o != r))
    if f.overflow_threshold is not None:
        # an infinity of the reference's sign where the reference, within its tolerance, reaches
        # the format's overflow threshold is the output's own rounding (IEEE: from max + ulp(max)/2
        # round-to-nearest gives inf), not a placement error
        rounded_up = (inf_o & torch.isfinite(r) & (o.sign() == r.sign())
                      & (r.abs() + bound >= f.overflow_threshold))
        special_bad = special_bad & ~rounded_up
    finite = ~(nan_o | nan_r | inf_o | inf_r)
    err = torch.where(finite, (o - r).abs(), torch.zeros_like(o))
    ratio = torch.where(finite, err / bound, torch.zeros_like(o))
    ratio = torch.where(special_bad, torch.full_like(o, float("inf")), ratio)
    rel = torch.where(finite & (r != 0), err / r.abs(), torch.zeros_like(o))
    # ULPs are reported where the reference is larger than the absolute tolerance: closer to zero
    # (cancellation) its ULP is tiny and the distance in them says nothing. A sum judged by an
    # absolute bound alone still gets its ULPs wherever the sum stands clear of that bound.
    meaningful = finite & (r.abs() > atol)
    ulps = torch.where(meaningful, err / ulp_of(r, f), torch.zeros_like(o))
    bad = (ratio > 1.0)
    cmp.mismatches = int(bad.sum())
    cmp.ok = cmp.mismatches == 0
    cmp.max_abs = float(err.max())
    cmp.max_rel = float(rel.max())
    cmp.max_ulp = float("inf") if bool(special_bad.any()) else float(ulps.max())
    worst = int(torch.argmax(torch.nan_to_num(ratio, posinf=1e308)))
    cmp.worst_ratio = float(ratio[worst])
    cmp.worst_index = flat_to_index(worst, out.shape)
    if not cmp.ok:
        cmp.message = _float_message(name, out, o, r, special_bad, err, bound, cmp)
        cmp.nan_where_finite = (special_bad & ~(inf_r | nan_r) & ~is_output_poison(out).flatten()).cpu()
    return cmp


def _float_message(name, out, o, r, special_bad, err, bound, cmp) -> str:
    """Which elements are wrong and why, the first of each kind: an element never written (it
    still holds the output poison, bit for bit), a NaN or Inf where the reference is finite (the
    kernel produced it, or read it from an input's guard), a finite value where the reference is
    NaN or Inf, an error beyond the tolerance."""
    unwritten = special_bad & is_output_poison(out).flatten()
    finite_r = torch.isfinite(r)
    kinds = [(unwritten, "never written (it still holds the harness's output poison{})".format(
                 ", or it is a NaN: this format has one NaN code" if out.dtype in ONE_NAN_CODE else "")),
             (special_bad & ~unwritten & finite_r,
              "NaN/Inf placement differs: a NaN or Inf where the reference is finite (the kernel "
              "produced it: overflow or an invalid operation)"),
             (special_bad & ~unwritten & ~finite_r, "NaN/Inf placement differs: the reference is NaN "
              "or Inf here and the output is not, or has the other sign"),
             (~special_bad & (err > bound), "")]
    parts = []
    for mask, why in kinds:
        count = int(mask.sum())
        if count:
            where = int(mask.nonzero()[0])
            why = why or f"error {err[where].item():.3g} > tolerance {bound[where].item():.3g}"
            parts.append(f"at {flat_to_index(where, out.shape)} got {o[where].item()!r}, expected "
                         f"{r[where].item()!r}: {why}" + (f" ({count} elements)" if count > 1 else ""))
    return (f"{name}: {cmp.mismatches} of {cmp.total} elements out of tolerance; {'; '.join(parts)}; "
            f"max {cmp.max_ulp:.3g} ULP, worst error/tolerance {cmp.worst_ratio:.3g}")


def compare_launches(name: str, first: torch.Tensor, other: torch.Tensor, ref: torch.Tensor,
                     tol: Tolerance, launch: int, nondeterministic: bool, how: str = "") -> Comparison:
    """Launch `launch`'s output against the first launch's, on the same inputs: bit for bit, or,
    for a case declared nondeterministic, each launch within the tolerance of the reference with
    the spread between them reported."""
    label = f"{name} (launch {launch})"
    if nondeterministic:
        cmp = compare(label, other, ref, tol)
        a, b = first.detach().to(torch.float64), other.detach().to(device=first.device, dtype=torch.float64)
        both = torch.isfinite(a) & torch.isfinite(b)
        cmp.launch_spread = float((a - b).abs()[both].max()) if bool(both.any()) else 0.0
        cmp.launch = launch
        return cmp
    a, b = bits(first.detach()), bits(other.detach().to(first.device))
    diff = (a != b).flatten()
    cmp = Comparison(label, not bool(diff.any()), first.numel(), int(diff.sum()), launch=launch)
    if not cmp.ok:
        where = int(diff.nonzero()[0])
        cmp.worst_ratio = float("inf")
        cmp.worst_index = flat_to_index(where, first.shape)
        cmp.message = (f"{name}: nondeterministic: {cmp.mismatches} of {cmp.total} elements differ "
                       f"between launch 1 and launch {launch} on the same inputs{how}; first at "
                       f"{cmp.worst_index}: {first.flatten()[where].item()!r} vs "
                       f"{other.flatten()[where].item()!r} (declare Case.nondeterministic if the "
                       "kernel may legitimately vary)")
    return cmp
