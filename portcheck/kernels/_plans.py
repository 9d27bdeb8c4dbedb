"""Launch plans: a launcher's checks and Triton's dispatch done once per arguments' metadata key;
later launches with that key go straight to the compiled kernel's launcher.

Why: Triton's JIT dispatch (binding, specialization key, cache lookup) plus a launcher's Python
checks cost tens to hundreds of microseconds on the host per launch (paged decode: 255 us for
137 us on the H200's GPU), so small launches are host-bound. Everything that decides how a
launch is made (the checks, the constexprs, the grid, and Triton's specialization of every
argument: dtypes, integer sizes, == 1 and divisibility by 16, 16-byte pointer alignment) follows
from the tensors' metadata and the scalar arguments, which `key` captures; never from values
inside a tensor. Plans are off (key None) on the interpreter, under a forced arch (--as-arch
draws a configuration per example), while Triton's launch hooks are set (a profiler must see
every launch through them), while Triton's JIT dispatch is replaced (portcheck.compile.capture
notes launches there without running them: a planned launch would go round it, and run) and for
tensors that are not on a CUDA / HIP device.

matmul takes its key from here and keeps its own plan record (matmul/launcher.py: its split-K
workspace and arrival counters are fresh per launch).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import triton
from triton.runtime.jit import JITFunction

from ..facts.device import forced, interpreted

LIMIT = 4096          # plans one launcher keeps: a long-running server's distinct shapes
DIRECT_TRITON = "3.6."    # the Triton whose generated CUDA launcher direct_entry was read from
# Read once: @triton.jit chose the interpreter or the compiler when the kernel modules were
# imported (a process-wide mode), and os.environ costs a microsecond a launch.
_INTERPRETED = interpreted()
# The current device's index: torch.cuda.current_device() without its lazy-init check (half its
# host time), which key() may skip since its first tensor is on a GPU (CUDA is initialized).
current_device = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)


def hooked(hook) -> bool:
    """Whether a Triton launch hook is set (None, or an empty HookChain since Triton 3.5: not)."""
    return hook is not None and bool(getattr(hook, "calls", True))


def dispatch_replaced() -> bool:
    """Whether JITFunction.run is not Triton's own (a launch recorder's, or a profiler's)."""
    return JITFunction.run.__qualname__ != "JITFunction.run"


def _not_a_tensor(t):
    raise TypeError


def metadata_key(tensors, scalars=(), device: int = -1) -> tuple:
    """The key of a launch from its tensors (or None), its scalar arguments and the current
    device; a scalar's type is part of it (2 and 2.0 hash alike, Triton specializes them apart).
    Per tensor, what Triton specializes it on (and what a launcher checks): dtype, device, shape,
    strides and 16-byte alignment; TypeError for an argument that is neither a tensor nor None
    (the launcher's checks then say what is wrong). Written out in one list comprehension (no
    call per tensor, and no generator frame): it runs on every planned launch, where each
    Python call costs a tenth of a microsecond."""
    return device, tuple([
        None if t is None else (t.dtype, t.device, t.shape, t.stride(), t.data_ptr() % 16 == 0)
        if isinstance(t, torch.Tensor) else _not_a_tensor(t) for t in tensors]), \
        tuple(scalars), tuple(map(type, scalars))


def key(tensors, scalars=()) -> tuple | None:
    """metadata_key, or None where a plan would not be safe (see the module docstring) or the
    arguments are not all tensors or None. tensors[0] must be the launch's main tensor. The
    current device is part of it: Triton compiles, loads and launches for that device (not the
    tensors'), and so does a plan."""
    first = tensors[0]
    if _INTERPRETED or forced() is not None or not isinstance(first, torch.Tensor) or not first.is_cuda \
            or hooked(triton.knobs.runtime.launch_enter_hook) or hooked(triton.knobs.runtime.launch_exit_hook) \
            or dispatch_replaced():
        return None
    try:
        return metadata_key(tensors, scalars, current_device())
    except TypeError:
        return None


def stream(key_: tuple) -> int:
    """The raw current stream of the key's device, the current one: where Triton's own launches
    go, and the device the plan's function was loaded on (_launch.current_stream(device) asks
    for a tensor's device)."""
    return triton.runtime.driver.active.get_current_stream(key_[0])


def direct_entry(run, metadata) -> tuple | None:
    """(the C function, the arguments it takes between the kernel's function handle and its
    parameters) behind a compiled kernel's launcher, where Plan.launch may call it straight:
    Triton 3.6's CudaLauncher with no global or profile scratch, whose __call__ only learns that
    there is no scratch to allocate (a closure built and called twice) before calling
    `launch(gridX, gridY, gridZ, stream, function, cooperative, pdl, global_scratch,
    profile_scratch, packed_metadata, launch_metadata, enter_hook, exit_hook, *parameters)`:
    1.4 of its 7.3 us on the H200's host (reports/examples/host-overhead-h200/ninth-session/).
    None for anything else (another Triton, HIPLauncher, a kernel with scratch): the launcher is
    called as Triton calls it."""
    if type(run).__name__ != "CudaLauncher" or not triton.__version__.startswith(DIRECT_TRITON) \
            or getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    return run.launch, (run.launch_cooperative_grid, run.launch_pdl, None, None, metadata, None, None, None)


@dataclass
class Plan:
    """One compiled kernel as launched: later launches pass their own leading arguments (the
    tensors that change per call) followed by `rest`, the recorded values of every other
    parameter in declaration order."""
    run: object               # the compiled kernel's launcher (CudaLauncher / HIPLauncher)
    function: object
    metadata: object          # packed (num_warps, num_ctas, shared)
    grid: tuple               # (x, y, z)
    rest: tuple

    def __post_init__(self):
        self.direct = direct_entry(self.run, self.metadata)

    def launch(self, stream_: int, *leading) -> None:
        if self.direct is not None:
            entry, between = self.direct
            entry(*self.grid, stream_, self.function, *between, *leading, *self.rest)
            return
        # CompiledKernel.run(gridX, gridY, gridZ, stream, function, packed_metadata,
        # launch_metadata, enter_hook, exit_hook, *every parameter in declaration order), as
        # JITFunction.run calls it in Triton 3.6: constexprs included (the generated launcher
        # parses them as objects and drops them); no hooks (key() refuses plans while set).
        self.run(*self.grid, stream_, self.function, self.metadata, None, None, None, *leading, *self.rest)


_PARAMS: dict = {}


def parameters(jitfn) -> dict:
    """{parameter: default} of a @triton.jit function, in declaration order."""
    fn = jitfn.fn        # (a JITFunction hashes by its source's cache key: the function by id)
    if fn not in _PARAMS:
        _PARAMS[fn] = {n: p.default for n, p in inspect.signature(fn).parameters.items()}
    return _PARAMS[fn]


def record(jitfn, kernel, grid: tuple, args: tuple, constexprs: dict, leading: int) -> Plan | None:
    """The plan of the launch `kernel = jitfn[grid](*args, **constexprs, **options)` just made,
    whose first `leading` parameters are given anew on each planned launch (the tensors); None
    where `kernel` is not a compiled kernel (the interpreter's launch returns none)."""
    if not hasattr(kernel, "packed_metadata"):
        return None
    defaults = parameters(jitfn)
    full = {**defaults, **dict(zip(defaults, args)), **constexprs}
    if len(full) != len(defaults) or len(args) < leading \
            or any(v is inspect.Parameter.empty for v in full.values()):
        raise TypeError(f"record({jitfn.fn.__name__}): not the arguments of a launch of it")
    values = list(full.values())
    grid = tuple(grid) + (1,) * (3 - len(grid))
    run = kernel.run    # a property: loads the kernel's module and function handle first
    return Plan(run, kernel.function, kernel.packed_metadata, grid, tuple(values[leading:]))


class Plans:
    """A launcher's plans by key, at most `limit`: past it new keys launch checked every time
    (no eviction: a server's shapes settle, and a bound is all that is needed)."""

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self._plans: dict = {}

    # an unhashable scalar in a key (a list for a number): no plan, checked every launch
    def get(self, key_):
        try:
            return None if key_ is None else self._plans.get(key_)
        except TypeError:
            return None

    def put(self, key_, plan) -> None:
        if key_ is not None and plan is not None and len(self._plans) < self.limit:
            try:
                self._plans[key_] = plan
            except TypeError:
                pass

    def clear(self) -> None:
        self._plans.clear()

    def __len__(self) -> int:
        return len(self._plans)
