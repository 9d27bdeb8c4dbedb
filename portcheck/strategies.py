"""Hypothesis strategies for kernel inputs, and the deterministic tensors they stand for.

A strategy draws a *spec*: a small JSON-able dict (shape, dtype, layout, value regime, seed).
`values()` turns a spec's fields into tensors with a seeded CPU generator, so the same spec gives
the same bits on any machine: that is what makes a failure replayable from one command line.
Benchmarks draw inside `drawn_on(device)` instead: the same distributions from a device
generator, without the host time a 1 GB float64 draw costs.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import random

import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from .dtypes import fmt

PRIMES = (2, 3, 5, 7, 13, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191, 16381)

# Value regimes a case may accept. "offset" puts each row far from zero relative to its spread
# (offset_ratio()), where a one-pass variance E[x^2] - E[x]^2 cancels. "zeros" makes the first
# row and about half the others all zero (padding tokens), where a scale or a norm taken from the
# row divides by zero. "special" puts +inf, -inf and NaN among normal values (each of them where
# the tensor has three elements or more; SPECIALS) and belongs only to
# kernels whose result is defined for them. "ties" puts values on the midpoints between the codes
# of a quantized format once a row is scaled by its absmax over the format's largest code
# (tie_values()), where rounding half away from zero, or half up, differs from round-half-to-even.
REGIMES = ("normal", "large", "tiny", "equal", "offset", "zeros", "ties", "special")
# the non-finite values of each special regime. A case draws "special"; its check also runs one
# input of each kind alone (drawn_with_variants): a test for one kind that misses another (|g| ==
# inf, which NaN passes) shows only where that other kind comes without the first
SPECIALS = {"special": (math.inf, -math.inf, math.nan), "special-nan": (math.nan,),
            "special-inf": (math.inf, -math.inf)}
# the formats a "ties" row probes, one per row in turn: int8 and the fp8 codes of both vendors
TIE_FORMATS = (torch.int8, torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz)
# offset's largest ratio of a row's offset to its spread: 2**12 leaves an fp32 accumulator's
# E[x^2] - E[x]^2 about one unit of the variance (u(fp32) * 2**24)
OFFSET_MOST_LOG2 = 12


def register_profiles() -> None:
    """ci: fast and derandomized; dev: the default; thorough: for nightly runs."""
    common = dict(deadline=None, database=None, print_blob=True,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.filter_too_much, HealthCheck.large_base_example,
                                         HealthCheck.function_scoped_fixture])
    # derandomize is explicit everywhere: a profile inherits the loaded default, which is
    # derandomized under hypothesis' own CI profile (the CI environment variable) or after ours
    settings.register_profile("ci", max_examples=12, derandomize=True, **common)
    settings.register_profile("dev", max_examples=40, derandomize=False, **common)
    settings.register_profile("thorough", max_examples=400, derandomize=False, **common)


def session_seed(profile: str) -> int:
    """The session seed when none is given: fixed under a derandomized profile (ci), so a gate
    sees the same examples on every run and a strict xfail cannot flip on luck; random
    otherwise, to search further. Either way it is recorded with the results."""
    register_profiles()
    return 0 if settings.get_profile(profile).derandomize else random.randrange(2**31)


def lengths(tile: int, limit: int) -> st.SearchStrategy[int]:
    """Lengths that break kernels: 1, primes, tile-1 / tile / tile+1, and anything up to limit."""
    edges = [n for n in {1, tile - 1, tile, tile + 1, 2 * tile + 1} if 1 <= n <= limit]
    primes = [p for p in PRIMES if p <= limit]
    if not primes:   # limit 1
        return st.just(1)
    return st.one_of(st.sampled_from(sorted(edges)), st.sampled_from(primes),
                     st.integers(1, max(1, limit)))


def rows_and_cols(tile: int, max_elements: int, max_cols: int | None = None, max_rows: int = 64):
    """(rows, cols) with rows*cols <= max_elements; cols stress the tile edges. Kernels that run
    one program per row can ask for fewer rows (the interpreter pays per program)."""
    max_cols = min(max_cols or max_elements, max_elements)
    return lengths(tile, max_cols).flatmap(
        lambda n: st.tuples(st.integers(1, max(1, min(max_rows, max_elements // n))), st.just(n)))


def matmul_sizes(tile: int, max_elements: int, max_k: int | None = None):
    """(M, N, K) for C = A @ B: each stresses the tile edges, and A (M x K), B (K x N) and C (M x N)
    each stay within max_elements."""
    k_limit = min(max_k or max_elements, max_elements)
    return lengths(tile, k_limit).flatmap(
        lambda k: lengths(tile, max(1, max_elements // k)).flatmap(
            lambda m: st.tuples(st.just(m), lengths(tile, max(1, min(max_elements // k, max_elements // m))),
                                st.just(k))))


def row_inputs(dtype: str, max_elements: int, tile: int = 128, max_rows: int = 64,
               allowed=REGIMES[:-1]) -> st.SearchStrategy[dict]:
    """Specs for a kernel over the rows of one matrix: dtype, rows, cols, seed, regime, layout
    (row_tensor() makes the tensor)."""
    return st.tuples(rows_and_cols(tile, max_elements, max_rows=max_rows), seeds(), regimes(allowed),
                     layouts()).map(lambda t: {"dtype": dtype, "rows": t[0][0], "cols": t[0][1], "seed": t[1],
                                               "regime": t[2], "layout": t[3]})


def row_tensor(spec: dict, device: str, scale: float = 1.0) -> torch.Tensor:
    """The rows x cols tensor a row_inputs() spec stands for, in its layout on `device`."""
    t = values((spec["rows"], spec["cols"]), spec["dtype"], spec["regime"], generator(spec["seed"]), scale)
    return laid_out(t, spec["layout"], device)


def matmul_inputs(dtype: str, max_elements: int, tile: int = 32, max_k: int | None = None,
                  allowed=("normal",)) -> st.SearchStrategy[dict]:
    """Specs for C = A @ B: dtype, M, N, K, seed, regime (matmul_tensors() makes A and B). Only
    normal values by default: large ones overflow a low-precision output after a few products."""
    return st.tuples(matmul_sizes(tile, max_elements, max_k), seeds(), regimes(allowed)).map(
        lambda t: {"dtype": dtype, "M": t[0][0], "N": t[0][1], "K": t[0][2], "seed": t[1], "regime": t[2]})


def matmul_tensors(spec: dict, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A (M x K) and B (K x N) for a matmul_inputs() spec, scaled by 1/sqrt(K) so that C stays
    around 1 whatever K."""
    g = generator(spec["seed"])
    scale = spec["K"] ** -0.25
    a = values((spec["M"], spec["K"]), spec["dtype"], spec["regime"], g, scale)
    b = values((spec["K"], spec["N"]), spec["dtype"], spec["regime"], g, scale)
    return a.to(device), b.to(device)


def offset_ratio(dtype: str) -> float:
    """The offset regime's ratio of a row's offset to its spread: 2**(p-3) for a format of p
    significant bits (the spread keeps about 8 steps of the format at the offset), at most
    2**OFFSET_MOST_LOG2; 32 in bf16, 256 in fp16, 4096 in fp32."""
    return 2.0 ** min(OFFSET_MOST_LOG2, fmt(dtype).mantissa_bits + 1 - 3)


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**31 - 1)


_NOTED_REGIMES: contextvars.ContextVar = contextvars.ContextVar("portcheck_noted_regimes", default=None)


def regimes(allowed=REGIMES[:-1]) -> st.SearchStrategy[str]:
    noted = _NOTED_REGIMES.get()
    if noted is not None:
        noted.update(allowed)
    return st.sampled_from(tuple(allowed))


def drawn_with_variants(regimes: set) -> set:
    """The regimes a check runs for a case that draws `regimes`: those, and where it draws special
    values, each kind of them alone (SPECIALS)."""
    return set(regimes) | (set(SPECIALS) if "special" in regimes else set())


def with_regimes(build) -> tuple[st.SearchStrategy, set]:
    """build() -> a case's strategy, and the regimes it can draw: those of every regimes()
    strategy made while it is built or while it draws one example (one made inside a flatmap, as
    the row families' are, is made at its first draw; noted at build time only, they were never)."""
    from hypothesis import Phase, find
    with noting_regimes() as noted:
        strategy = build()
        try:
            find(strategy, lambda _: True, settings=settings(   # one draw, not shrunk: a few milliseconds
                database=None, max_examples=1, deadline=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck)))
        except Exception:   # noqa: BLE001  a strategy that draws nothing: the search says so itself
            pass
    return strategy, noted


@contextlib.contextmanager
def noting_regimes():
    """Inside, every regimes() strategy made adds its regimes to the set yielded: what a case's
    strategy, built inside, can draw (runner.check runs each that its search left out)."""
    noted: set = set()
    token = _NOTED_REGIMES.set(noted)
    try:
        yield noted
    finally:
        _NOTED_REGIMES.reset(token)


def layouts() -> st.SearchStrategy[str]:
    """contiguous rows, or rows padded so that the row stride differs from the row length."""
    return st.sampled_from(LAYOUTS)


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


# Where normal() draws. Benchmarks draw on the GPU: a 1 GB float64 CPU draw costs seconds of host
# time a figure, which would dominate a benchmark run and keep it from scaling over GPUs.
_DRAW_ON: contextvars.ContextVar[str | None] = contextvars.ContextVar("portcheck_draw_on", default=None)


@contextlib.contextmanager
def drawn_on(device: str):
    """Inside, normal() draws on `device` from a generator seeded by the CPU one: reproducible
    per seed and device type, but not the CPU stream, so checks (which replay specs on any
    machine) never use it."""
    token = _DRAW_ON.set(device)
    try:
        yield
    finally:
        _DRAW_ON.reset(token)


def normal(shape, gen: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    """Normal float64 values of `shape` and standard deviation `scale`: from `gen` on the CPU,
    or on drawn_on's device."""
    device = _DRAW_ON.get()
    if device is None:
        x = torch.randn(*shape, generator=gen, dtype=torch.float64)
    else:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        on_device = torch.Generator(device=device).manual_seed(seed)
        x = torch.randn(*shape, generator=on_device, device=device, dtype=torch.float64)
    return x.mul_(scale) if scale != 1.0 else x


def integers(low: int, high: int, shape, gen: torch.Generator) -> torch.Tensor:
    """Uniform int64 values in [low, high) of `shape`: from `gen` on the CPU, or on drawn_on's
    device (as normal() draws)."""
    device = _DRAW_ON.get()
    if device is None:
        return torch.randint(low, high, tuple(shape), generator=gen, dtype=torch.int64)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen))
    on_device = torch.Generator(device=device).manual_seed(seed)
    return torch.randint(low, high, tuple(shape), generator=on_device, device=device, dtype=torch.int64)


def code_grid(out_dtype: torch.dtype) -> torch.Tensor:
    """The non-negative finite values of a quantized format (int8, an fp8), ascending (float64)."""
    if not out_dtype.is_floating_point:
        return torch.arange(0, torch.iinfo(out_dtype).max + 1, dtype=torch.float64)
    v = torch.arange(128, dtype=torch.uint8).view(out_dtype).to(torch.float64)
    return torch.unique(v[torch.isfinite(v)])


def tie_values(shape, dtype: str, formats, gen: torch.Generator, per_row: bool = True) -> torch.Tensor:
    """Values (float64) that land exactly on the midpoints between neighbouring codes after scaling.

    Each row (or the tensor, per_row=False) holds +-qmax * 2^k at its first element, qmax its
    format's largest code, so a scale of absmax / qmax is exactly 2^k and x / scale, or x times
    1 / scale, is exact: the rest are midpoints (and some codes) times 2^k, which only
    round-half-to-even places right. Row r probes formats[r % len(formats)] (every row the first,
    per tensor). All are exact in fp16 and bf16 (at most 8 significant bits, within range)."""
    rows, cols = shape
    which = torch.arange(rows) % len(formats) if per_row else torch.zeros(rows, dtype=torch.long)
    pick = torch.rand(rows, cols, generator=gen, dtype=torch.float64)
    sign = torch.where(torch.rand(rows, cols, generator=gen) < 0.5, -1.0, 1.0).to(torch.float64)
    level = torch.rand(rows if per_row else 1, 1, generator=gen, dtype=torch.float64).expand(rows, 1)
    x = torch.empty(rows, cols, dtype=torch.float64)
    for j, out_dtype in enumerate(formats[:len(formats) if per_row else 1]):
        sel = which == j
        if not bool(sel.any()):
            continue
        grid = code_grid(out_dtype)
        qmax = float(grid[-1])
        mids = torch.cat([(grid[1:] + grid[:-1]) / 2, grid[1:]])
        # k from -4 to the largest with qmax * 2^k finite in the input format, at most 3
        top = min(3, math.floor(math.log2(torch.finfo(fmt(dtype).torch_dtype).max / qmax)))
        k = torch.floor(level[sel] * (top + 5)) - 4
        x[sel] = mids[(pick[sel] * mids.numel()).long().clamp_(max=mids.numel() - 1)] * sign[sel] * torch.exp2(k)
        if per_row and cols:
            x[sel, 0] = sign[sel, 0] * qmax * torch.exp2(k[:, 0])
        elif rows and cols:
            x[0, 0] = qmax * float(torch.exp2(k[0, 0]))
    return x


def values(shape, dtype: str, regime: str, gen: torch.Generator, scale: float = 1.0) -> torch.Tensor:
    """A tensor in `dtype` drawn from a regime (on the CPU unless inside drawn_on); last
    dimension = one row. Works in place on the float64 draw: it is the size of the input.
    "ties" ignores `scale`: its values are exact only as drawn."""
    f = fmt(dtype)
    if regime == "ties":
        rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        cols = shape[-1] if shape else 1
        return tie_values((rows, cols), dtype, TIE_FORMATS, gen).reshape(shape).to(f.torch_dtype)
    base = normal(shape, gen, scale)
    if regime == "large":
        # large but finite in the format, so a missing max-subtraction or a naive sum of squares shows
        base.mul_(min(1e4, 2.0 ** (math.log2(torch.finfo(f.torch_dtype).max) / 2 - 1)))
    elif regime == "tiny":
        base.mul_(f.tiny * 4)   # around the smallest normal: many values become subnormal
    elif regime == "equal":
        row = normal((*shape[:-1], 1), gen, scale)
        base = row.expand(*shape).clone()
    elif regime == "offset":
        # each row: +-c plus its normal spread, the first row's sign drawn and the rows' signs
        # alternating after it, so that two rows or more lie on both sides of zero (a bug that
        # shows only below zero, a -inf fill of the masked lanes given as 0, passed on inputs
        # whose rows all drew +)
        sign = normal((*shape[:-1], 1), gen).sign_()
        flip = torch.ones(sign.numel(), dtype=sign.dtype, device=sign.device)
        flip[1::2] = -1
        sign = sign.flatten()[:1].mul(flip).reshape(sign.shape)
        base.add_(sign.mul_(offset_ratio(dtype) * scale))
    elif regime == "zeros":
        kept = normal((*shape[:-1], 1), gen) > 0
        kept.view(-1)[0] = False   # the first row always: a one-row input is a zero row
        base.mul_(kept)
    elif regime in SPECIALS:
        flat = base.flatten()
        n = flat.numel()
        specials = torch.tensor(SPECIALS[regime], dtype=torch.float64)
        kinds = len(specials)
        picks = torch.randint(0, n, (max(kinds, n // 16),), generator=gen)
        drawn = torch.randint(0, kinds, picks.shape, generator=gen)
        flat[picks.to(flat.device)] = specials[drawn].to(flat.device)
        # then neighbouring places, one of each kind (written last, so no pick overwrites them):
        # an input with room for them holds every kind of its regime
        first = (picks[0] + torch.arange(min(n, kinds))) % n
        flat[first.to(flat.device)] = specials[(drawn[0] + torch.arange(first.numel())) % kinds].to(flat.device)
        base = flat.reshape(shape)
    elif regime != "normal":
        raise ValueError(f"unknown value regime {regime!r}; known: {', '.join(REGIMES)}")
    limit = torch.finfo(f.torch_dtype).max
    if regime in SPECIALS:    # keep the infinities; clamp only the finite values
        base = torch.where(base.isfinite(), base.clamp(-limit, limit), base)
    else:                     # every value is finite
        base.clamp_(-limit, limit)
    return base.to(f.torch_dtype)


# Row layouts a spec may draw (layouts()). "far" is not drawn: the runner adds one example in it
# on GPUs (runner.far_rows_example), since it takes gigabytes.
LAYOUTS = ("contiguous", "padded")
PAD = 17                 # elements after each padded row: an odd count, so row strides are unaligned
# "far": the last row starts this many elements into the storage, so that an offset computed in
# int32 (row * stride, a 32-bit program id times a 32-bit stride) wraps there
FAR_ELEMENTS = 2**31
FAR_ALIGN = 16           # far row strides are whole multiples of 16 elements (aligned rows)


def far_stride(rows: int, cols: int) -> int:
    """The row stride of the "far" layout: the last of `rows` rows starts at FAR_ELEMENTS or
    beyond, and the stride itself stays an int32 (below 2**31), so a kernel receives it as a
    32-bit integer and only the product row * stride passes 2**31. Needs 3 rows or more."""
    if rows < 3:
        raise ValueError(f"the far layout needs 3 rows or more (got {rows}): with 2, a stride "
                         f"reaching {FAR_ELEMENTS} would itself be a 64-bit argument")
    stride = -(-FAR_ELEMENTS // (rows - 1))
    stride = max(-(-stride // FAR_ALIGN) * FAR_ALIGN, -(-(cols + PAD) // FAR_ALIGN) * FAR_ALIGN)
    assert stride < 2**31 and (rows - 1) * stride >= FAR_ELEMENTS
    return stride


def laid_out(t: torch.Tensor, layout: str, device: str, fill=None) -> torch.Tensor:
    """Place a 2-D tensor on the device with the requested row layout: contiguous; padded (the
    row stride PAD elements longer than a row); far (rows far_stride() apart, the last beyond
    FAR_ELEMENTS: gigabytes of storage, of which only the rows and PAD elements after each are
    written). Past each padded or far row lie PAD elements of `fill` (default NaN, or -1 for
    integers), so a kernel that reads past a row's end shows it."""
    if layout == "contiguous":
        return t.to(device).contiguous()
    if layout not in ("padded", "far"):
        raise ValueError(f"unknown layout {layout!r}")
    rows, cols = t.shape
    if fill is None:
        fill = float("nan") if t.dtype.is_floating_point else -1
    if layout == "padded":
        buf = torch.full((rows, cols + PAD), fill, dtype=t.dtype, device=device)
        buf[:, :cols] = t.to(device)
        return buf[:, :cols]
    stride = far_stride(rows, cols)
    storage = torch.empty((rows - 1) * stride + cols + PAD, dtype=t.dtype, device=device)
    view = storage.as_strided((rows, cols + PAD), (stride, 1))
    view[:, cols:] = fill
    view[:, :cols] = t.to(device)
    return view[:, :cols]
