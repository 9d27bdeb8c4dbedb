"""The memory each program of an interpreted launch loads and stores, for bugs whose values
need never reach an output:

- a race: bytes that one program stores to and another program loads, stores or updates
  atomically in the same launch, with no atomic between them that orders the two. Triton's
  interpreter runs a launch's programs one after another, so a race shows in its outputs only
  where the programs' order changes the result (portcheck.targets.interpreter_order); a lost
  update of an integer count, two programs' load-add-store of one counter, does not.
- a race within a program: a load of bytes the program stored from another element of its block,
  with no tl.debug_barrier() between (the interpreter runs each operation over the whole block).
- a load of the harness's guard bands (portcheck.guards): an unmasked load past a tensor's end
  whose value the kernel then throws away (a `tl.where` after it). The outputs stay right; on a
  GPU the load may fault, or read another allocation.

`watching(regions)` replaces the interpreter builder's loads, stores and atomics with ones that
note, per program, the bytes of the lanes their masks keep, and each launch's notes are compared
when it ends (the next grid, or the context's end). Two accesses are ordered when the program
that ran first makes a releasing atomic (sem "release" or "acq_rel", Triton's default) after its
access and the other an acquiring atomic (or "acq_rel") to some of the same bytes before its own:
split-K's last arriver, which counts arrivals with an atomic and only then reads the others'
partial sums, and a lock taken with atomic_cas are ordered so. Atomics never race one another; a
volatile load counts as a relaxed atomic (it is how a program polls a flag). An atomic of scope
"cta" is atomic, and orders, within its own program only: to the others it is a plain load or
store (two programs' cta-scoped adds to one counter lose updates on a GPU). An atomic with its mask
on in a guard band is reported as a load there is: adding 0 past an output's end leaves the band as
it was, so the band's own check cannot see it.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from .interpreter_builder import builder, patched

LOAD, STORE, ATOMIC = "load", "store", "atomic"
MAX_BYTES = 1 << 24   # bytes one launch may note; past that the launch is not watched (too slow)


@dataclass(frozen=True)
class Region:
    """A named span of memory: a tensor a check hands the kernel, or one of its guard bands."""
    lo: int          # first byte address
    hi: int          # one past the last
    what: str        # "input x", "output y"
    band: str = ""   # "before" / "after": a guard band before or after `what`; "" the tensor itself
    element_size: int = 1


@dataclass
class _Access:
    program: tuple
    time: int
    kind: str
    addresses: np.ndarray   # byte addresses, int64
    releases: bool = False
    acquires: bool = False
    cta: bool = False       # an atomic of scope "cta": atomic within its program only (kind LOAD / STORE)
    volatile: bool = False  # a volatile load (kind ATOMIC: it reads, it updates nothing)
    elements: np.ndarray | None = None   # each byte's element of the block (its flat index), for a
                                         # plain LOAD / STORE of more than one element
    masked: bool = True     # its mask left some lane off (False: no mask, or one of every lane)

    def __post_init__(self):
        self.lo, self.hi = int(self.addresses.min()), int(self.addresses.max()) + 1


@dataclass
class Watch:
    """What `watching` found: one message per problem, in the order found."""
    regions: list[Region]
    findings: list[str] = field(default_factory=list)
    unwatched: list[str] = field(default_factory=list)   # why, for each launch it could not watch

    def _name(self, address: int) -> str:
        for r in self.regions:
            if not r.band and r.lo <= address < r.hi:
                return f"{r.what}'s element {(address - r.lo) // r.element_size}"
        return "memory the launcher allocated (no argument of the case)"

    def _add(self, message: str) -> None:
        if message not in self.findings:
            self.findings.append(message)

    def analyse(self, accesses: list[_Access], barriers: dict | None = None) -> None:
        if not accesses:
            return
        self._band_loads(accesses)
        self._races(accesses)
        self._unsynchronized(accesses, barriers or {})

    def _unsynchronized(self, accesses: list[_Access], barriers: dict) -> None:
        """A program that loads bytes it stored earlier into another element of its block, with no
        tl.debug_barrier() between: on a GPU the two elements may be held by threads of different
        warps, and the load may run before the store lands (the interpreter runs each operation
        over the whole block at once, so it always sees the store)."""
        stores: dict = {}
        for load in accesses:
            if load.kind == STORE and load.elements is not None:
                stores.setdefault(load.program, []).append(load)
                continue
            if load.kind != LOAD or load.elements is None:
                continue
            fence = max((t for t in barriers.get(load.program, ()) if t < load.time), default=-1)
            for store in stores.get(load.program, ()):
                if store.time < fence or store.hi <= load.lo or store.lo >= load.hi:
                    continue
                both, at_store, at_load = np.intersect1d(store.addresses, load.addresses, return_indices=True)
                moved = store.elements[at_store] != load.elements[at_load]
                if moved.any():
                    k = int(np.flatnonzero(moved)[0])
                    self._add(f"race within a program: program {_program(load.program)} stores "
                              f"{self._name(int(both[k]))} from element {int(store.elements[at_store[k]])} of "
                              f"its block and loads it into element {int(load.elements[at_load[k]])} with no "
                              "tl.debug_barrier() between: on a GPU other threads (warps) may hold the two "
                              "elements, and the load may run before the store lands")
                    return   # one a launch: the first says what to fix

    def _band_loads(self, accesses: list[_Access]) -> None:
        """Loads and atomics in a guard band: a plain store there changes the band, which the
        check sees without the watch; an atomic that changes nothing (adding 0) does not."""
        bands = [r for r in self.regions if r.band]
        for a in accesses:
            if a.kind == STORE and not a.cta:
                continue
            for r in bands:
                if a.hi <= r.lo or a.lo >= r.hi:
                    continue
                hit = (a.addresses >= r.lo) & (a.addresses < r.hi)
                if hit.any():
                    first = int(a.addresses[hit].min() if r.band == "after" else a.addresses[hit].max())
                    where = (f"from byte {first - r.lo} past its end" if r.band == "after"
                             else f"from {r.hi - first} bytes before its start")
                    reads = a.kind == LOAD or a.volatile
                    lanes, fix = ((f"in lanes the {'load' if reads else 'atomic'}'s mask leaves on",
                                   "its mask must leave them off") if a.masked else ("with no lane masked off", "mask it"))
                    self._add(f"out-of-bounds {'read' if reads else 'atomic'}: program {_program(a.program)} "
                              f"{_verb(a)} {int(hit.sum())} bytes {r.band} {r.what} ({where}, in its guard "
                              f"band) {lanes}: on a GPU it may fault or {'read' if reads else 'change'} another "
                              f"allocation, whatever the outputs show: {fix}")
                    bands.remove(r)   # one message a band
                    break

    def _races(self, accesses: list[_Access]) -> None:
        writes = [i for i, a in enumerate(accesses) if a.kind != LOAD]
        if not writes:
            return
        programs = {a.program for a in accesses}
        if len(programs) < 2:
            return
        written = np.unique(np.concatenate([accesses[i].addresses for i in writes]))
        # the accesses whose span holds a written byte (most loads read inputs no program writes)
        near = [i for i, a in enumerate(accesses)
                if np.searchsorted(written, a.lo) < np.searchsorted(written, a.hi)]
        if len({accesses[i].program for i in near}) < 2:
            return
        byte = np.concatenate([accesses[i].addresses for i in near])
        event = np.repeat(np.array(near), [accesses[i].addresses.size for i in near])
        keep = np.isin(byte, written)
        byte, event = byte[keep], event[keep]
        order = np.lexsort((event, byte))
        byte, event = byte[order], event[order]
        fresh = np.ones(byte.size, dtype=bool)
        fresh[1:] = (byte[1:] != byte[:-1]) | (event[1:] != event[:-1])
        byte, event = byte[fresh], event[fresh]
        starts = np.flatnonzero(np.r_[True, byte[1:] != byte[:-1]])
        counts = np.diff(np.r_[starts, byte.size])
        pairs: dict[tuple[int, int], int] = {}   # (event, event) -> a byte both touch
        two = starts[counts == 2]   # most shared bytes: one store and one other access
        if two.size:
            both, first = np.unique(np.stack([event[two], event[two + 1]], axis=1), axis=0, return_index=True)
            pairs.update({(int(i), int(j)): int(byte[two[k]]) for (i, j), k in zip(both, first)})
        seen = set()
        for s, n in zip(starts[counts > 2], counts[counts > 2]):
            touching = tuple(int(e) for e in event[s:s + n])
            if touching in seen:
                continue
            seen.add(touching)
            for i in range(n):
                for j in range(i + 1, n):
                    pairs.setdefault((touching[i], touching[j]), int(byte[s]))
        rank = {}
        for a in accesses:
            rank.setdefault(a.program, len(rank))
        for (i, j), address in sorted(pairs.items()):
            a, b = accesses[i], accesses[j]
            if a.program == b.program or (a.kind != STORE and b.kind != STORE
                                          and not {a.kind, b.kind} == {LOAD, ATOMIC}):
                continue
            first, second = (a, b) if rank[a.program] < rank[b.program] else (b, a)
            if _ordered(first, second, accesses):
                continue
            self._add(_race_message(first, second, self._name(address)))
            return   # one race a launch: the first says what to fix


def _ordered(first: _Access, second: _Access, accesses: list[_Access]) -> bool:
    """Whether an atomic orders `first` (of the program that ran first) before `second`: a
    releasing one at or after `first` (an atomic releases itself too) and an acquiring one at or
    before `second`, on some of the same bytes."""
    released = [a for a in accesses if a.program == first.program and a.kind == ATOMIC and a.releases
                and a.time >= first.time]
    acquired = [a for a in accesses if a.program == second.program and a.kind == ATOMIC and a.acquires
                and a.time <= second.time]
    return any(np.intersect1d(r.addresses, q.addresses).size for r in released for q in acquired)


def _program(p: tuple) -> str:
    return "(" + ", ".join(str(i) for i in p) + ")"


def _verb(a: _Access) -> str:
    if a.cta:
        return f"{'loads' if a.kind == LOAD else 'updates'} with an atomic of scope \"cta\" (atomic within its program only)"
    if a.volatile:
        return "loads (volatile)"
    return {LOAD: "loads", STORE: "stores to", ATOMIC: "updates atomically"}[a.kind]


def _race_message(first: _Access, second: _Access, what: str) -> str:
    return (f"race: program {_program(first.program)} {_verb(first)} {what} and program "
            f"{_program(second.program)} {_verb(second)} it in the same launch, with no atomic that "
            "orders the two: on a GPU the programs run at once, in any order. An update that several "
            "programs make needs an atomic (tl.atomic_add), and a program may read what another "
            "writes only after an atomic that orders them (an arrival counter) or in a later launch")


def _lanes(ptrs, mask) -> tuple[np.ndarray, np.ndarray]:
    """The byte addresses of the lanes a mask keeps (all lanes without one), and each byte's
    element of the block (its flat index)."""
    addresses = np.asarray(ptrs.data, dtype=np.uint64).reshape(-1)
    elements = np.arange(addresses.size)
    if mask is not None:
        kept = np.broadcast_to(np.asarray(mask.data, dtype=bool), np.asarray(ptrs.data).shape).reshape(-1)
        addresses, elements = addresses[kept], elements[kept]
    width = _element_size(ptrs)
    starts = addresses.astype(np.int64)
    if width == 1:
        return starts, elements
    return (starts[:, None] + np.arange(width, dtype=np.int64)).reshape(-1), np.repeat(elements, width)


def _element_size(ptrs) -> int:
    return max(1, getattr(ptrs.get_element_ty(), "primitive_bitwidth", 8) // 8)


def _semantics():
    """The sets of memory semantics that release and that acquire, and the scope that is one
    program's only, as the builder receives them."""
    from triton.runtime import interpreter
    sem = interpreter._ir.MEM_SEMANTIC
    return {sem.RELEASE, sem.ACQUIRE_RELEASE}, {sem.ACQUIRE, sem.ACQUIRE_RELEASE}, interpreter._ir.MEM_SYNC_SCOPE.CTA


def _position(method, name: str) -> int | None:
    """The position of a bound method's parameter `name`, or None."""
    import inspect
    names = list(inspect.signature(method).parameters)
    return names.index(name) if name in names else None


@contextlib.contextmanager
def watching(regions: list[Region]):
    """Inside, every launch on the interpreter is watched; the Watch's findings are complete once
    the context has ended."""
    watch = Watch(list(regions))
    b = builder()
    releasing, acquiring, cta = _semantics()
    state = {"accesses": [], "bytes": 0, "time": 0, "off": False, "quiet": 0, "barriers": {}}
    original = {name: getattr(b, name) for name in
                ("set_grid_dim", "create_masked_load", "create_masked_store", "create_atomic_rmw",
                 "create_atomic_cas", "create_atomic_load", "create_atomic_store", "create_barrier")
                if hasattr(b, name)}

    def end_launch() -> None:
        accesses, off, barriers = state["accesses"], state["off"], state["barriers"]
        state.update(accesses=[], bytes=0, off=False, barriers={})
        if off:
            watch.unwatched.append(off)
        elif accesses:
            try:
                watch.analyse(accesses, barriers)
            except Exception as exc:   # noqa: BLE001  the watch adds findings; it never fails a launch itself
                watch.unwatched.append(f"its analysis failed ({type(exc).__name__}: {exc})")

    def note(kind: str, ptrs, mask, sem=None, scope=None, volatile=False) -> None:
        if state["off"] or state["quiet"]:
            return
        try:
            addresses, elements = _lanes(ptrs, mask)
        except Exception as exc:   # noqa: BLE001  a pointer or mask shape the watch does not know:
            # this launch goes unwatched, and runs as it would
            state.update(off=f"an access it could not read ({type(exc).__name__}: {exc})", accesses=[])
            return
        if not addresses.size:
            return
        masked = mask is not None and not bool(np.all(np.asarray(mask.data, dtype=bool)))
        state["bytes"] += addresses.size
        if state["bytes"] > MAX_BYTES:
            state.update(off=f"it accesses more than {MAX_BYTES:,} bytes", accesses=[])
            return
        state["time"] += 1
        # a plain access of a block (a scalar's value is every thread's: Triton stores it once and
        # broadcasts what it loads, and a scalar atomic meets the block at a barrier to broadcast)
        blockwise = sem is None and kind != ATOMIC and np.asarray(ptrs.data).size > 1
        if scope == cta:   # to the other programs, a plain load or store: it neither orders nor is atomic
            state["accesses"].append(_Access(tuple(b.grid_idx), state["time"], kind, addresses, cta=True,
                                             masked=masked))
        else:
            state["accesses"].append(_Access(tuple(b.grid_idx), state["time"], kind, addresses,
                                             sem in releasing, sem in acquiring, volatile=volatile,
                                             elements=elements if blockwise else None, masked=masked))

    def set_grid_dim(nx, ny, nz):
        end_launch()
        return original["set_grid_dim"](nx, ny, nz)

    def create_barrier():   # tl.debug_barrier(): the program's threads meet; stores before it land
        if not state["off"]:
            state["time"] += 1
            state["barriers"].setdefault(tuple(b.grid_idx), []).append(state["time"])
        return original["create_barrier"]()

    # Triton 3.6 and 3.9 differ in the cache arguments between the ones read here, and call these
    # with some of them by keyword: what is not read passes through as it came
    volatile_at = _position(original["create_masked_load"], "is_volatile")

    def create_masked_load(ptrs, mask, *rest, **kwargs):
        volatile = kwargs["is_volatile"] if "is_volatile" in kwargs else (
            rest[volatile_at - 2] if volatile_at is not None and len(rest) > volatile_at - 2 else False)
        note(ATOMIC if volatile else LOAD, ptrs, mask, volatile=volatile)
        return original["create_masked_load"](ptrs, mask, *rest, **kwargs)

    def create_masked_store(ptrs, value, mask, *rest, **kwargs):
        note(STORE, ptrs, mask)
        return original["create_masked_store"](ptrs, value, mask, *rest, **kwargs)

    def create_atomic_rmw(rmw_op, ptr, val, mask, sem, scope):
        note(STORE if scope == cta else ATOMIC, ptr, mask, sem, scope)
        return original["create_atomic_rmw"](rmw_op, ptr, val, mask, sem, scope)

    def create_atomic_cas(ptr, cmp, val, sem, scope):
        note(STORE if scope == cta else ATOMIC, ptr, None, sem, scope)
        return original["create_atomic_cas"](ptr, cmp, val, sem, scope)

    def create_atomic_load(ptr, mask, sem, scope):
        note(LOAD if scope == cta else ATOMIC, ptr, mask, sem, scope)
        with quiet():
            return original["create_atomic_load"](ptr, mask, sem, scope)

    def create_atomic_store(ptr, val, mask, sem, scope):
        note(STORE if scope == cta else ATOMIC, ptr, mask, sem, scope)
        with quiet():
            return original["create_atomic_store"](ptr, val, mask, sem, scope)

    @contextlib.contextmanager
    def quiet():   # the builder's atomic load and store call its masked load and store
        state["quiet"] += 1
        try:
            yield
        finally:
            state["quiet"] -= 1

    hooks = dict(set_grid_dim=set_grid_dim, create_barrier=create_barrier, create_masked_load=create_masked_load,
                 create_masked_store=create_masked_store, create_atomic_rmw=create_atomic_rmw,
                 create_atomic_cas=create_atomic_cas, create_atomic_load=create_atomic_load,
                 create_atomic_store=create_atomic_store)
    with patched(**{name: fn for name, fn in hooks.items() if name in original}):
        try:
            yield watch
        finally:
            end_launch()
