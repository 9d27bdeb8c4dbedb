"""Launch plans (portcheck/kernels/_plans.py) without a GPU: what the key tells apart, when plans
are off, the bound on their number, and, with a stand-in for Triton's compiled kernel, that a
planned launch of rope, paged decode and matmul passes the compiled kernel what the checked launch passes
Triton's JIT for the same arguments (every parameter, in declaration order). Bit-for-bit on a
GPU: tests/kernels/test_plans_gpu.py."""
import inspect

import pytest
import torch
import triton

from portcheck.compile.capture import recording
from portcheck.facts.archs import INTERPRETER
from portcheck.facts.device import forced_arch
from portcheck.kernels import _launch, _plans
from portcheck.kernels import paged_attention as P
from portcheck.kernels import rope as R


def _key(*tensors, scalars=()):
    return _plans.metadata_key(tensors, scalars)


def test_the_key_tells_metadata_and_scalars_apart():
    x = torch.empty(8, 64, dtype=torch.float16)
    base = _key(x, None, scalars=(128, True))
    assert base == _key(torch.empty(8, 64, dtype=torch.float16), None, scalars=(128, True))
    others = [
        _key(torch.empty(8, 64, dtype=torch.bfloat16), None, scalars=(128, True)),      # dtype
        _key(torch.empty(9, 64, dtype=torch.float16), None, scalars=(128, True)),       # shape
        _key(torch.empty(64, 8, dtype=torch.float16).t(), None, scalars=(128, True)),   # stride
        _key(torch.empty(8 * 64 + 1, dtype=torch.float16)[1:].view(8, 64), None, scalars=(128, True)),  # alignment
        _key(x, x, scalars=(128, True)),                        # a tensor where there was None
        _key(x, None, scalars=(64, True)),                      # a scalar
        _key(x, None, scalars=(128, False)),
        _key(x, None, scalars=(128.0, True)),                   # 128 == 128.0, Triton tells them apart
        _key(x, None, scalars=(128, 1)),
        _plans.metadata_key((x, None), (128, True), device=1),  # the current device
    ]
    assert len({base, *others}) == len(others) + 1


def test_the_key_refuses_non_tensors():
    with pytest.raises(TypeError):
        _key(torch.empty(2), [1, 2])


def test_plans_are_off_in_the_interpreter_and_off_the_gpu(monkeypatch):
    x = torch.empty(4, 4)
    if _plans._INTERPRETED:
        assert _plans.key((x, x)) is None
    monkeypatch.setattr(_plans, "_INTERPRETED", False)
    assert _plans.key((x, x)) is None                  # a CPU tensor
    assert _plans.key(([1.0], x)) is None              # not a tensor


class _OnCuda(torch.Tensor):
    """A CPU tensor that says it is on a GPU: key()'s other conditions, tested without one."""

    @property
    def is_cuda(self):
        return True


def test_plans_are_off_under_a_forced_arch_or_launch_hooks(monkeypatch):
    monkeypatch.setattr(_plans, "_INTERPRETED", False)
    monkeypatch.setattr(_plans, "current_device", lambda: 0)
    x = torch.Tensor._make_subclass(_OnCuda, torch.empty(4, 4))
    assert _plans.key((x, None), (3,)) is not None
    assert _plans.key((x, "no tensor")) is None
    with forced_arch(INTERPRETER):
        assert _plans.key((x, None), (3,)) is None
    with recording():      # launches noted, not run: a plan must not run them
        assert _plans.key((x, None), (3,)) is None
    assert _plans.key((x, None), (3,)) is not None
    monkeypatch.setattr(triton.knobs.runtime, "launch_enter_hook", lambda metadata: None)
    assert _plans.key((x, None), (3,)) is None


def test_hooked_reads_empty_hook_chains_as_none():
    assert not _plans.hooked(None)
    chain = triton.knobs.HookChain() if hasattr(triton.knobs, "HookChain") else None
    if chain is not None:
        assert not _plans.hooked(chain)
        chain.add(lambda metadata: None)
        assert _plans.hooked(chain)
    assert _plans.hooked(lambda metadata: None)


def test_plans_are_bounded():
    plans = _plans.Plans(limit=2)
    for i in range(4):
        plans.put((i,), f"plan {i}")
    assert len(plans) == 2 and plans.get((0,)) == "plan 0" and plans.get((3,)) is None
    plans.put(None, "no key")
    plans.put((9,), None)
    assert len(plans) == 2 and plans.get(None) is None
    plans.clear()
    plans.put(([1],), "unhashable")                   # an unhashable scalar: no plan, no error
    assert plans.get(([1],)) is None and len(plans) == 0


# ---- planned launches against checked ones, with a stand-in for Triton ---------------------------

class _Compiled:
    """Stands in for a CompiledKernel: its launcher notes what a planned launch passes."""
    packed_metadata = (4, 1, 0)
    function = "function handle"

    def __init__(self, calls):
        self.run = lambda *a: calls.append(("planned", a[:3], a[3:9], list(a[9:])))


class _Jit:
    """Stands in for a @triton.jit kernel: notes each checked launch's arguments as Triton's JIT
    binds them (every parameter in declaration order, defaults filled in)."""

    def __init__(self, jitfn, calls):
        self.fn, self.calls = jitfn.fn, calls
        self.signature = inspect.signature(jitfn.fn)

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            params = {k: v for k, v in kwargs.items() if k in self.signature.parameters}
            bound = self.signature.bind(*args, **params)
            bound.apply_defaults()
            self.calls.append(("checked", tuple(grid) + (1,) * (3 - len(grid)), list(bound.arguments.values())))
            return _Compiled(self.calls)
        return launch


@pytest.fixture
def planning(monkeypatch):
    """Plans on for CPU tensors, with the kernels replaced by stand-ins; yields the calls."""
    calls = []
    monkeypatch.setattr(_plans, "key", lambda tensors, scalars=(): _plans.metadata_key(tensors, scalars))
    monkeypatch.setattr(_plans, "stream", lambda key: 1234)
    for module, names in ((R, ("rope_kernel",)), (P, ("paged_decode_kernel", "paged_decode_reduce_kernel"))):
        for name in names:
            monkeypatch.setattr(module, name, _Jit(getattr(module, name), calls))
    monkeypatch.setattr(R, "_PLANS", _plans.Plans())
    monkeypatch.setattr(P, "_PLANS", _plans.Plans())
    return calls


def _address(x) -> int:
    """A pointer argument's address: planned launches pass the tensors' addresses (ints), checked
    ones the tensors (or views of them)."""
    return x if isinstance(x, int) else x.data_ptr()


def _same(planned: list, checked: list, skip=()) -> None:
    """Argument lists equal; tensors by address (the planned launch passes the addresses of the
    tensors the launcher got, or the tensors it keeps, the checked one views of them); positions
    in `skip` compared by the caller."""
    assert len(planned) == len(checked)
    for i, (p, c) in enumerate(zip(planned, checked)):
        if i in skip:
            continue
        if isinstance(c, torch.Tensor):
            assert _address(p) == c.data_ptr(), i
        else:
            assert p == c and type(p) is type(c), (i, p, c)


@pytest.mark.parametrize("key_heads,out_of_place,layout", [(2, False, 3), (0, False, 3), (2, True, 2), (0, True, 2)])
def test_a_planned_rope_launch_passes_what_the_checked_one_passes(planning, key_heads, out_of_place, layout):
    t, hq, d = 5, 4, 32

    def args():
        q = torch.randn(t, hq, d) if layout == 3 else torch.randn(t, hq * d)
        k = (torch.randn(t, key_heads, d) if layout == 3 else torch.randn(t, key_heads * d)) if key_heads else None
        outs = (torch.empty_like(q), torch.empty_like(k) if k is not None else None) if out_of_place else (None, None)
        return torch.arange(t), q, k, R.cos_sin_cache(16, d, 1e4, torch.float32), outs

    pos, q, k, cache, (qo, ko) = args()
    R.rotary_embedding(pos, q, k, d, cache, True, qo, ko)
    assert len(R._PLANS) == 1 and [c[0] for c in planning] == ["checked"]
    pos, q, k, cache, (qo, ko) = args()
    result = R.rotary_embedding(pos, q, k, d, cache, True, qo, ko)
    assert result[0] is (qo if out_of_place else q) and result[1] is (ko if out_of_place else k)
    R._PLANS.clear()
    assert R.rotary_embedding(pos, q, k, d, cache, True, qo, ko) == result
    (_, grid_p, extra, planned), (_, grid_c, checked) = planning[1], planning[2]
    assert grid_p == grid_c and extra == (1234, "function handle", (4, 1, 0), None, None, None)
    _same(planned, checked)


@pytest.mark.parametrize("splits", [1, 3])
def test_a_planned_paged_decode_passes_what_the_checked_one_passes(planning, splits):
    # 512 tokens: more than one split of the longest BLOCK_N any arch's table takes (on sm_90a
    # a 64-token context was one split whatever num_splits asked)
    def args():
        q = torch.randn(2, 4, 64).half()
        kc, vc = torch.randn(64, 16, 2, 64).half(), torch.randn(64, 16, 2, 64).half()
        return q, kc, vc, torch.arange(64, dtype=torch.int32).view(2, 32), torch.tensor([40, 512], dtype=torch.int32)

    def launch(a, out=None):
        return P.paged_decode_attention(*a, max_context_len=512, num_splits=splits, validate=False,
                                        scale=0.25, out=out)

    launch(args())
    kernels = 2 if splits > 1 else 1
    assert len(P._PLANS) == 1 and len(planning) == kernels
    a = args()
    out = torch.empty_like(a[0])
    assert launch(a, out) is out
    assert len(P._PLANS) == 2                      # out given: a key of its own
    assert launch(a, out) is out                   # planned
    P._PLANS.clear()
    launch(a, out)                                 # checked again
    planned, checked = planning[2 * kernels:3 * kernels], planning[3 * kernels:]
    assert [p[0] for p in planned] == ["planned"] * kernels and [c[0] for c in checked] == ["checked"] * kernels
    for p, c in zip(planned, checked):
        assert p[1] == c[1] and p[2] == (1234, "function handle", (4, 1, 0), None, None, None)
    main_p, main_c = planned[0][3], checked[0][2]
    parts = (6, 7, 8)
    if splits == 1:     # the workspace is not touched: the plan keeps the first launch's stand-in
        assert all(main_p[i].numel() == 1 and main_p[i].dtype == torch.float32 for i in parts)
        _same(main_p, main_c, skip=parts)
        return
    # the workspace is fresh per launch: its parts' places relative to its start, as addresses
    assert [main_p[i] - main_p[6] for i in parts] == [main_c[i].data_ptr() - main_c[6].data_ptr() for i in parts]
    assert all(main_p[i] % 16 == 0 for i in parts)
    _same(main_p, main_c, skip=parts)
    red_p, red_c = planned[1][3], checked[1][2]
    assert red_p[:3] == main_p[6:9]
    _same(red_p, red_c, skip=(0, 1, 2))


def test_validated_paged_decode_is_never_planned(planning):
    q = torch.randn(1, 2, 64).half()
    kc, vc = torch.randn(2, 16, 1, 64).half(), torch.randn(2, 16, 1, 64).half()
    for _ in range(2):
        P.paged_decode_attention(q, kc, vc, torch.tensor([[0, 1]], dtype=torch.int32),
                                 torch.tensor([20], dtype=torch.int32))
    assert len(P._PLANS) == 0 and [c[0] for c in planning] == ["checked", "checked"]


# ---- matmul: its own plan record (split-K workspace, arrival counters, TMA descriptors) ---------

class _Heuristics(_Jit):
    """Stands in for triton.heuristics over a kernel: the heuristic values fill their parameters,
    as the wrapper computes them from the bound arguments at launch."""

    def __init__(self, heuristics, calls):
        super().__init__(heuristics.fn, calls)
        self.values = heuristics.values

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            named = {**dict(zip(self.signature.parameters, args)), **kwargs}
            return _Jit.__getitem__(self, grid)(*args, **kwargs, **{n: f(named) for n, f in self.values.items()})
        return launch


def _same_operand(p, c) -> None:
    """A tensor, or a tensor descriptor over the same tensor with the same box."""
    if hasattr(c, "block_shape"):
        assert p.base.data_ptr() == c.base.data_ptr() and list(p.shape) == list(c.shape)
        assert list(p.strides) == list(c.strides) and list(p.block_shape) == list(c.block_shape)
    elif isinstance(c, torch.Tensor):
        assert _address(p) == c.data_ptr()
    else:
        assert p is c is None


@pytest.mark.parametrize("m,n,k,block,b_kmajor,line_a", [
    (40, 48, 96, (32, 32, 32), False, False),       # the pointer kernel, tiles move back to fit
    (3, 40, 700, (16, 32, 32), False, False),       # split-K: a fresh workspace, the stream's counters
    (100, 72, 40, (64, 32, 32), False, False),      # a wide tile: tensor descriptors, B as [K, N]
    (100, 72, 40, (64, 32, 32), True, False),       # ... and B K-major
    (100, 72, 40, (64, 32, 32), False, True),       # ... A's and B's rows off 128-byte lines: A copied
])
def test_a_planned_matmul_passes_what_the_checked_one_passes(monkeypatch, m, n, k, block, b_kmajor, line_a):
    from portcheck.kernels.matmul import launcher as M
    calls = []
    if line_a:
        monkeypatch.setattr(M, "TMA_REPACK_MIN_N", n)
    monkeypatch.setattr(_plans, "key", lambda tensors, scalars=(): _plans.metadata_key(tensors, scalars))
    monkeypatch.setattr(M, "_kernel", _Heuristics(M._kernel, calls))
    monkeypatch.setattr(M, "matmul_tma_kernel", _Jit(M.matmul_tma_kernel, calls))
    monkeypatch.setattr(M, "_PLANS", _plans.Plans())
    config = M.Config(*block, 1, 4, 2)
    wide = block[0] > M.NARROW_M

    def args():
        b = torch.randn(n, k).half().t() if b_kmajor else torch.randn(k, n).half()
        return torch.randn(m, k).half(), b, torch.randn(n).half()

    a, b, bias = args()
    M.matmul(a, b, bias=bias, activation="gelu", config=config)
    assert len(M._PLANS) == 1 and [c[0] for c in calls] == ["checked"]
    a, b, bias = args()
    planned_out = M.matmul(a, b, bias=bias, activation="gelu", config=config)
    M._PLANS.clear()
    checked_out = M.matmul(a, b, bias=bias, activation="gelu", config=config)
    (_, grid_p, extra, planned), (_, grid_c, checked) = calls[1], calls[2]
    assert grid_p == grid_c and extra[1:] == ("function handle", (4, 1, 0), None, None, None)
    names = list(_plans.parameters(M.matmul_tma_kernel if wide else M.matmul_kernel))
    fresh = ("c", "c_ptr")        # each launch's own output
    skip = {names.index(n) for n in ("ws_ptr",) if n in names and checked[names.index(n)] is not None}
    assert len(planned) == len(checked) == len(names)
    for i, (name, p, c) in enumerate(zip(names, planned, checked)):
        if i in skip:           # split-K's workspace: the stream's scratch, at least the checked one's size
            assert p == _launch.scratch(a.device, c.numel(), c.dtype, 0).data_ptr()
        elif name in fresh:
            assert _address(p.base if hasattr(p, "block_shape") else p) == planned_out.data_ptr()
            assert planned_out.shape == checked_out.shape
        elif name == "a_desc" and line_a:   # a fresh copy of A per launch, rows of 128 bytes
            assert p.base.data_ptr() not in (a.data_ptr(), c.base.data_ptr())
            assert p.base.stride() == c.base.stride() == (64, 1) and list(p.block_shape) == list(c.block_shape)
            assert torch.equal(p.base, a) and torch.equal(c.base, a)
        elif hasattr(c, "block_shape") or isinstance(c, torch.Tensor) or c is None:
            _same_operand(p, c)
        else:
            assert p == c and type(p) is type(c), (name, p, c)
    if not wide and M.split_k(m, n, k, *block, M.INTERPRETER_UNITS) > 1:
        assert skip, "split-K launches carry a workspace"


# ---- the per-stream buffers a planned launch takes instead of allocating ----------------------

def test_scratch_is_one_buffer_per_device_stream_and_dtype_grown_on_demand_and_fresh_under_capture(monkeypatch):
    monkeypatch.setattr(_launch, "_SCRATCH", {})
    cpu = torch.device("cpu")
    first = _launch.scratch(cpu, 100, torch.float32, stream=7)
    assert first.numel() == 100 and _launch.scratch(cpu, 50, torch.float32, stream=7) is first
    assert _launch.scratch(cpu, 50, torch.float32, stream=8) is not first      # another stream
    assert _launch.scratch(cpu, 50, torch.int32, stream=7).dtype == torch.int32  # another dtype
    grown = _launch.scratch(cpu, 200, torch.float32, stream=7)
    assert grown.numel() == 200 and _launch.scratch(cpu, 100, torch.float32, stream=7) is grown
    monkeypatch.setattr(_launch, "_capturing", lambda device: True)   # a graph keeps its own
    monkeypatch.setattr(_launch, "_capture_id", lambda stream: None)  # capture not identified: per launch
    assert _launch.scratch(cpu, 100, torch.float32, stream=7) is not grown
    counters = _launch.arrival_counters(cpu, 10, stream=7)
    assert counters is not _launch.arrival_counters(cpu, 10, stream=7) and not counters.any()


def test_launches_captured_on_one_stream_share_that_captures_buffers_and_no_other_capture_does(monkeypatch):
    """Under graph capture a zeroed buffer is a fill kernel in every replay: the launches of one
    capture on one stream share one (they run in order); another capture, stream or a larger
    request gets its own, and eager launches never see a captured one."""
    for cache in ("_SCRATCH", "_COUNTERS", "_CAPTURED"):
        monkeypatch.setattr(_launch, cache, {})
    cpu = torch.device("cpu")
    eager = _launch.arrival_counters(cpu, 10, stream=7)
    capture = {"id": 41}
    monkeypatch.setattr(_launch, "_capturing", lambda device: True)
    monkeypatch.setattr(_launch, "_capture_id", lambda stream: capture["id"])
    counters = _launch.arrival_counters(cpu, 10, stream=7)
    assert counters is not eager and not counters.any()
    assert _launch.arrival_counters(cpu, 20, stream=7) is counters          # same capture and stream
    assert _launch.arrival_counters(cpu, 10, stream=8) is not counters      # another captured stream
    work = _launch.scratch(cpu, 100, torch.float32, stream=7)
    assert work is not counters and _launch.scratch(cpu, 60, torch.float32, stream=7) is work
    assert _launch.scratch(cpu, 60, torch.int32, stream=7) is not work      # another dtype
    bigger = _launch.scratch(cpu, 200, torch.float32, stream=7)
    assert bigger is not work and bigger.numel() == 200
    capture["id"] = 42                                                       # the next graph
    assert _launch.arrival_counters(cpu, 10, stream=7) is not counters
    assert _launch.scratch(cpu, 100, torch.float32, stream=7) is not bigger
    monkeypatch.setattr(_launch, "_capturing", lambda device: False)
    assert _launch.arrival_counters(cpu, 10, stream=7) is eager


def test_split_buffers_are_the_streams_scratch_and_counters_from_one_capture_check(monkeypatch):
    for cache in ("_SCRATCH", "_COUNTERS", "_CAPTURED"):
        monkeypatch.setattr(_launch, cache, {})
    checks = []
    monkeypatch.setattr(_launch, "_capturing", lambda device: checks.append(device) or False)
    cpu = torch.device("cpu")
    work, counters = _launch.split_buffers(cpu, 100, torch.float32, 10, stream=7)
    assert len(checks) == 1
    assert work is _launch.scratch(cpu, 100, torch.float32, stream=7)
    assert counters is _launch.arrival_counters(cpu, 10, stream=7) and counters.dtype == torch.int32
    monkeypatch.setattr(_launch, "_capturing", lambda device: True)   # a graph keeps its own
    monkeypatch.setattr(_launch, "_capture_id", lambda stream: 41)
    captured = _launch.split_buffers(cpu, 100, torch.float32, 10, stream=7)
    assert captured[0] is not work and captured[1] is not counters and not captured[1].any()


class CudaLauncher:
    """Stands in for Triton's generated CUDA launcher (by its class name): notes how it is called."""

    def __init__(self, calls, scratch=0):
        self.calls, self.global_scratch_size, self.profile_scratch_size = calls, scratch, 0
        self.launch_cooperative_grid, self.launch_pdl = False, True
        self.launch = lambda *a: calls.append(("entry", a))

    def __call__(self, *a):
        self.calls.append(("__call__", a))


def test_a_plan_calls_triton_36s_c_entry_straight_and_any_other_launcher_as_triton_does(monkeypatch):
    """Triton 3.6's CudaLauncher.__call__(gridX, gridY, gridZ, stream, function, *args) passes
    launch(gridX, gridY, gridZ, stream, function, cooperative, pdl, global_scratch, profile_scratch,
    *args) where args = (packed_metadata, launch_metadata, enter_hook, exit_hook, *parameters)."""
    calls = []
    monkeypatch.setattr(triton, "__version__", "3.6.0")
    plan = _plans.Plan(CudaLauncher(calls), "function", (4, 1, 0), (2, 3, 1), ("rest",))
    plan.launch(99, "x", "y")
    assert calls == [("entry", (2, 3, 1, 99, "function", False, True, None, None, (4, 1, 0), None, None, None,
                                "x", "y", "rest"))]
    calls.clear()
    others = [_plans.Plan(CudaLauncher(calls, scratch=64), "function", (4, 1, 0), (2, 3, 1), ("rest",))]
    monkeypatch.setattr(triton, "__version__", "3.7.0")
    others.append(_plans.Plan(CudaLauncher(calls), "function", (4, 1, 0), (2, 3, 1), ("rest",)))
    for other in others:
        other.launch(99, "x", "y")
    assert calls == [("__call__", (2, 3, 1, 99, "function", (4, 1, 0), None, None, None, "x", "y", "rest"))] * 2
