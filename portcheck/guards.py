"""Guard bands: every tensor a check hands a kernel sits inside a larger allocation whose extra
bytes are filled with a known pattern, so an out-of-bounds access is caught, not left to luck.

Outputs get a sentinel byte before and after them (on a check's second launch, a float output gets
-0.0 there, which an out-of-bounds atomic add of +0.0 changes); any changed guard byte after the
launch is an out-of-bounds write. Inputs are re-homed with the same strides into an allocation
whose guards, and whose gaps (storage a strided view does not cover: a padded row), hold poison (NaN, the
format's NaN code for fp8, the type minimum for integers), so an unmasked read puts poison in the
output; and the whole allocation is compared bit for bit after the launch, so a write into an
input, its padding or its guards is caught too. Tensors that share storage (aliases, slices of one
fused tensor) are re-homed together, keeping their relative offsets.

Data pointers keep their address modulo 256 (outputs: 256-byte aligned), so Triton's
divisibility-by-16 specialization compiles the same kernel as without guards.

What a launcher allocates itself during a launch (`torch.empty` and its kin: scratch, partial
sums, counters, an allocating launcher's outputs) is filled with the output poison too
(`poisoned_allocations`): a kernel that reads such memory before writing it, or leaves an element
of a returned output unwritten, shows it on every run, not only when the allocator happens to
hand back dirty memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

from .frames import calling_line

ALIGN = 256                # bytes: the data pointer's address modulo ALIGN is preserved
MIN_GUARD_BYTES = 4096     # at least this much guard before and after each allocation
# inputs spanning more than this stay where they are, unguarded: a re-home takes a guard of a row
# stride each side, a copy of the allocation and a byte map of it, several times the span (the
# runner's far rows, 2**31 elements apart, would take tens of GB)
REHOME_LIMIT_BYTES = 2**31
OUTPUT_GUARD_BYTE = 0xA5   # outside outputs: a sentinel that no kernel writes by accident
# outside a float output on a check's second launch: -0.0 in the output's format, which an atomic
# add of +0.0 (a masked-off lane's contribution past the end, tl.atomic_add without its mask) turns
# into +0.0; the sentinel, a number, comes out of that add unchanged, so such a bug writes nothing
# a guard of the sentinel sees
NEGATIVE_ZERO = {torch.float64: -(2**63), torch.float32: -(2**31), torch.float16: -(2**15),
                 torch.bfloat16: -(2**15), torch.float8_e4m3fn: 0x80, torch.float8_e5m2: 0x80}

_BITS_VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}

# Quiet NaNs with payloads no arithmetic produces (hardware and numpy make 0x7FC00000-like
# canonical NaNs): an output element with OUTPUT_POISON's bits was never written; one with
# INPUT_POISON's bits was copied from outside an input. fp8 formats have one or few NaN codes.
OUTPUT_POISON = {torch.float64: 0x7FF80000DEADBEEF, torch.float32: 0x7FC0BEEF, torch.float16: 0x7EAD,
                 torch.bfloat16: 0x7FED, torch.float8_e4m3fn: 0x7F, torch.float8_e5m2: 0x7D,
                 torch.float8_e4m3fnuz: 0x80, torch.float8_e5m2fnuz: 0x80,
                 torch.int8: -128, torch.int16: -(2**15), torch.int32: -(2**31), torch.int64: -(2**63),
                 torch.uint8: 0xA5, torch.bool: 0}
INPUT_POISON = {torch.float64: 0x7FF800000000F00D, torch.float32: 0x7FC0F00D, torch.float16: 0x7F0D,
                torch.bfloat16: 0x7FCD, torch.float8_e4m3fn: 0x7F, torch.float8_e5m2: 0x7F,
                torch.float8_e4m3fnuz: 0x80, torch.float8_e5m2fnuz: 0x80,
                torch.int8: -128, torch.int16: -(2**15), torch.int32: -(2**31), torch.int64: -(2**63),
                torch.uint8: 0xA5, torch.bool: 1}
# The finite fill of the confirming re-run: an output that changes with it read outside an input
FINITE_FILL = {torch.float64: 2.5, torch.float32: 2.5, torch.float16: 2.5, torch.bfloat16: 2.5,
               torch.float8_e4m3fn: 2.5, torch.float8_e5m2: 2.5, torch.float8_e4m3fnuz: 2.5,
               torch.float8_e5m2fnuz: 2.5, torch.int8: 0, torch.int16: 0, torch.int32: 0,
               torch.int64: 0, torch.uint8: 0, torch.bool: 0}
ONE_NAN_CODE = (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz)


def pattern(dtype: torch.dtype, table: dict) -> torch.Tensor:
    """One element of `table`'s value for dtype, as its bytes (a CPU uint8 tensor)."""
    if table is FINITE_FILL:
        value = torch.tensor([table[dtype]], dtype=torch.float32 if dtype.is_floating_point else torch.int64)
        return value.to(dtype).view(torch.uint8)
    bits = torch.tensor([table[dtype]], dtype=torch.int64)
    if dtype == torch.bool:
        return bits.to(torch.uint8)
    width = torch.empty((), dtype=dtype).element_size()
    return bits.to(_BITS_VIEW[width]).view(torch.uint8) if width > 1 else bits.to(torch.uint8)


def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns as same-width integers (contiguous)."""
    t = t.contiguous()
    return t.view(torch.uint8) if t.dtype == torch.bool else t.view(_BITS_VIEW[t.element_size()])


def is_output_poison(t: torch.Tensor) -> torch.Tensor:
    """Where the tensor still holds the harness's output poison, bit for bit."""
    if t.dtype not in OUTPUT_POISON:
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    return bits(t) == bits(pattern(t.dtype, OUTPUT_POISON).view(t.dtype).to(t.device))


def poison_output(t: torch.Tensor) -> torch.Tensor:
    """Fill t with the output poison (in place) and return it."""
    if t.dtype in OUTPUT_POISON:
        t.copy_(pattern(t.dtype, OUTPUT_POISON).view(t.dtype).to(t.device).expand(t.shape))
    else:
        t.fill_(float("nan"))
    return t


# the factories whose memory is uninitialized; resize_ and set_ grow storage rarely in launchers
EMPTY_FACTORIES = frozenset({torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty})


def poisoned_allocations(fill: dict = OUTPUT_POISON) -> "_PoisonedAllocations":
    """A context inside which every tensor an EMPTY_FACTORIES call returns holds `fill`'s value
    for its dtype (the output poison by default; FINITE_FILL for the confirming re-run), not
    whatever the allocator's block held before, and a contiguous one sits between guard bands, as
    the harness's outputs do: `.violations()` after the launch names a store past either end of
    it (on the interpreter such a store corrupted the heap, and the process died of SIGABRT, or
    not). `.allocated` counts those tensors."""
    return _PoisonedAllocations(fill)


class _PoisonedAllocations(TorchFunctionMode):
    def __init__(self, fill: dict):
        super().__init__()
        self.fill, self.allocated, self.bands = fill, 0, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))   # the mode is off inside its own handler
        if (func in EMPTY_FACTORIES and isinstance(result, torch.Tensor) and result.numel()
                and result.dtype in self.fill
                and not (result.is_cuda and torch.cuda.is_current_stream_capturing())):   # no copy in a capture
            if result.is_contiguous() and result.layout == torch.strided and not result.requires_grad:
                band = guarded_output(f"the {tuple(result.shape)} {str(result.dtype).replace('torch.', '')} "
                                      f"tensor the launcher allocated at {calling_line()}",
                                      result.shape, result.dtype, result.device)
                self.bands.append(band)
                result = band.tensor
            result.copy_(pattern(result.dtype, self.fill).view(result.dtype).to(result.device).expand(result.shape))
            self.allocated += 1
        return result

    def violations(self) -> list[str]:
        """'out-of-bounds write: ...' for each allocation whose guard bands changed."""
        return [v for band in self.bands for v in band.violations()]


def _guard_bytes(largest_stride_bytes: int) -> int:
    """At least MIN_GUARD_BYTES and one stride of the largest dimension, in whole ALIGN blocks."""
    need = max(MIN_GUARD_BYTES, largest_stride_bytes)
    return -(-need // ALIGN) * ALIGN


def _allocate(nbytes: int, device, address_mod: int) -> tuple[torch.Tensor, int]:
    """A uint8 buffer of nbytes (plus slack) and the index in it whose address is address_mod
    modulo ALIGN."""
    raw = torch.empty(nbytes + ALIGN, dtype=torch.uint8, device=device)
    start = (address_mod - raw.data_ptr()) % ALIGN
    return raw, start


def _fill(buf: torch.Tensor, byte_pattern: torch.Tensor, phase: int) -> None:
    """Repeat byte_pattern over buf, element boundaries at `phase` bytes from buf's start."""
    width = byte_pattern.numel()
    reps = -(-(buf.numel() + width) // width)
    tiled = byte_pattern.to(buf.device).repeat(reps)
    shift = (width - phase % width) % width
    buf.copy_(tiled[shift:shift + buf.numel()])


def _typed(raw: torch.Tensor, byte_offset: int, like: torch.Tensor) -> torch.Tensor:
    """A view of raw's storage with like's dtype, shape and strides, starting at byte_offset."""
    width = like.element_size()
    assert byte_offset % width == 0, "a re-homed tensor must stay aligned to its element size"
    return torch.empty(0, dtype=like.dtype, device=raw.device).set_(
        raw.untyped_storage(), byte_offset // width, like.size(), like.stride())


def _span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) bytes of t's storage its view can reach."""
    width = t.element_size()
    first = t.storage_offset() * width
    reach = sum((n - 1) * s for n, s in zip(t.shape, t.stride()))
    return first, first + (reach + 1) * width


def span_elements(t: torch.Tensor) -> int:
    """How many elements of its storage t's view spans, from its first to its last."""
    first, end = _span(t)
    return (end - first) // t.element_size()


def _byte_ranges(changed: torch.Tensor) -> tuple[int, int, int]:
    where = changed.nonzero().flatten()
    return int(where.numel()), int(where[0]), int(where[-1])


def _band_writes(what: str, before: torch.Tensor, after: torch.Tensor) -> list[str]:
    """'out-of-bounds write: ...' for each guard band (changed-byte masks) with a changed byte."""
    found = []
    if bool(before.any()):
        n, first, last = _byte_ranges(before)
        found.append(f"out-of-bounds write: {n} bytes before {what} (from byte "
                     f"{first - before.numel()} to {last - before.numel()} relative to its start)")
    if bool(after.any()):
        n, first, last = _byte_ranges(after)
        found.append(f"out-of-bounds write: {n} bytes after {what} (from byte {first} to {last} "
                     "past its end)")
    return found


def _spans(what: str, raw: torch.Tensor, start: int, nbytes: int, element_size: int) -> list[tuple]:
    """(first byte address, one past the last, what, band, element size) of the guard band before
    a guarded tensor ("before"), the tensor's bytes (""), and the band after it ("after"): what the
    interpreter's memory watch (portcheck.targets.interpreter_memory) names and watches."""
    base = raw.data_ptr()
    return [(base, base + start, what, "before", element_size),
            (base + start, base + start + nbytes, what, "", element_size),
            (base + start + nbytes, base + raw.numel(), what, "after", element_size)]


# ---- outputs -----------------------------------------------------------------------------------

@dataclass
class GuardedOutput:
    name: str
    tensor: torch.Tensor     # the output the kernel writes (contiguous, poisoned)
    raw: torch.Tensor        # the whole uint8 allocation
    start: int               # byte index of the output in raw
    nbytes: int
    fill: torch.Tensor       # one guard element's bytes (uint8): the sentinel byte, or -0.0

    def violations(self) -> list[str]:
        """'out-of-bounds write: ...' for each guard band with changed bytes."""
        expected = torch.empty_like(self.raw[:self.start])
        _fill(expected, self.fill, 0)   # the bands end and start on element boundaries
        before = self.raw[:self.start] != expected
        after = self.raw[self.start + self.nbytes:] != expected[:self.raw.numel() - self.start - self.nbytes]
        return _band_writes(self.name, before, after)

    def spans(self) -> list[tuple]:
        return _spans(f"output {self.name}", self.raw, self.start, self.nbytes, self.tensor.element_size())


def guarded_output(name: str, shape, dtype: torch.dtype, device, negative_zero: bool = False) -> GuardedOutput:
    """A poisoned contiguous output inside guard bands of OUTPUT_GUARD_BYTE, or, with
    `negative_zero` and a float output, of -0.0 in its format (NEGATIVE_ZERO)."""
    like = torch.empty(tuple(shape), dtype=dtype, device="meta")
    width = like.element_size()
    nbytes = like.numel() * width   # 0 for an empty output: its guard bands meet
    largest = max((s * width for s in like.stride()), default=0)
    guard = _guard_bytes(largest)
    raw, start = _allocate(guard + nbytes + guard, device, 0)
    fill = pattern(dtype, NEGATIVE_ZERO) if negative_zero and dtype in NEGATIVE_ZERO \
        else torch.tensor([OUTPUT_GUARD_BYTE], dtype=torch.uint8)
    region = raw[start:start + guard + nbytes + guard]
    _fill(region, fill, 0)
    tensor = poison_output(_typed(raw, start + guard, like))
    return GuardedOutput(name, tensor, region, guard, like.numel() * width, fill)


# ---- inputs ------------------------------------------------------------------------------------

@dataclass
class GuardedInputs:
    """One storage's tensors, re-homed; `snapshot` is the whole allocation as it was before the
    launch."""
    names: list[str]
    raw: torch.Tensor        # guards + span of the storage + guards, as uint8
    start: int               # byte index of the span in raw
    span: int                # bytes
    covered: torch.Tensor    # bool per byte of the span: some view reaches it
    snapshot: torch.Tensor
    in_place: bool           # the case declared one of these tensors as updated in place
    element_size: int = 1    # the first tensor's

    def spans(self) -> list[tuple]:
        return _spans(f"input {', '.join(self.names)}", self.raw, self.start, self.span, self.element_size)

    def violations(self) -> list[str]:
        changed = self.raw != self.snapshot
        if not bool(changed.any()):
            return []
        names = ", ".join(self.names)
        found = _band_writes(f"input {names}", changed[:self.start], changed[self.start + self.span:])
        inside = changed[self.start:self.start + self.span]
        gaps = inside & ~self.covered
        if bool(gaps.any()):
            n, first, _ = _byte_ranges(gaps)
            found.append(f"out-of-bounds write: {n} bytes into the padding of input {names} "
                         f"(first at byte {first} of its storage span)")
        data = inside & self.covered
        if bool(data.any()) and not self.in_place:
            n, first, _ = _byte_ranges(data)
            found.append(f"input {names} modified: {n} bytes changed (first at byte {first} of its "
                         "storage span); declare it in Case.in_place if the kernel updates it")
        return found


def _distinct(t: torch.Tensor) -> torch.Tensor:
    """t without the repeats of its stride-0 (expanded) dimensions: a view that may be written."""
    for dim, stride in enumerate(t.stride()):
        if stride == 0 and t.shape[dim] > 1:
            t = t.narrow(dim, 0, 1)
    return t


def _rehome_group(tensors: list[tuple[str, torch.Tensor]], fill: dict, in_place: bool):
    spans = [_span(t) for _, t in tensors]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    first = tensors[0][1]
    device = first.device
    largest = max(s * t.element_size() for _, t in tensors for s in (*t.stride(), 1))
    guard = _guard_bytes(largest)
    address = first.untyped_storage().data_ptr() + lo
    raw, start = _allocate(guard + (hi - lo) + guard, device, address % ALIGN)
    region = raw[start:start + guard + (hi - lo) + guard]
    _fill(region, pattern(first.dtype, fill), phase=guard)
    covered = torch.zeros(hi - lo, dtype=torch.bool, device=device)
    moved = []
    for (name, t), (s, _) in zip(tensors, spans):
        new = _typed(raw, start + guard + s - lo, t)
        _distinct(new).copy_(_distinct(t))
        width = t.element_size()   # the bytes of every element the view reaches
        each_byte = torch.empty(0, dtype=torch.bool, device="meta").as_strided(
            (*t.shape, width), (*(x * width for x in t.stride()), 1))
        _distinct(_typed(covered, s - lo, each_byte)).fill_(True)
        moved.append((name, new))
    group = GuardedInputs([n for n, _ in tensors], region, guard, hi - lo, covered, region.clone(),
                          in_place, first.element_size())
    return moved, group


def _guardable(value) -> bool:
    return isinstance(value, torch.Tensor) and value.numel() > 0 and value.dtype in INPUT_POISON


def storage_groups(args: dict) -> list[list[tuple[str, torch.Tensor]]]:
    """The guardable tensors among args, grouped by the storage they view: (name, tensor) pairs."""
    by_storage: dict[tuple, list[tuple[str, torch.Tensor]]] = {}
    for name, value in args.items():
        if _guardable(value):
            by_storage.setdefault((value.device, value.untyped_storage().data_ptr()), []).append((name, value))
    return list(by_storage.values())


def rehome_inputs(args: dict, in_place=(), fill: dict = INPUT_POISON,
                  poisoned: str | None = None) -> tuple[dict, list[GuardedInputs]]:
    """A copy of args whose tensors live inside guarded allocations (other values pass through),
    and the groups to check after the launch. `fill` is the guard/gap content; `poisoned` (a name in
    one group) gives that group INPUT_POISON instead, for the confirming re-runs. A group whose
    storage span passes REHOME_LIMIT_BYTES is left in place, with no group to check."""
    out, groups = dict(args), []
    with torch.no_grad():
        for tensors in storage_groups(args):
            names = [n for n, _ in tensors]
            spans = [_span(t) for _, t in tensors]
            if max(e for _, e in spans) - min(s for s, _ in spans) > REHOME_LIMIT_BYTES:
                continue
            group_fill = INPUT_POISON if poisoned in names else fill
            moved, group = _rehome_group(tensors, group_fill, any(n in in_place for n in names))
            out.update(moved)
            groups.append(group)
    return out, groups
