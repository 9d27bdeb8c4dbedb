"""Output digests for cross-vendor diffs (`portcheck diff`).

After a case x dtype is checked, the session runs it once more on a fixed, small set of inputs
that do not depend on the session seed, and records for each output the sha256 of its bytes,
its error against float64, and for small outputs the bytes themselves (base64). Two runs on
different vendors then hold outputs of identical inputs, and `portcheck diff` compares them
bit for bit and in ULP.

The inputs are the first DIGEST_EXAMPLES distinct specs of a derandomized hypothesis draw under the
smallest element budget of BUDGETS the case's strategy accepts: the same on every machine with the
same hypothesis and portcheck. A machine with another hypothesis version draws other specs; set
PORTCHECK_DIGEST_SPECS to a results.jsonl from the other machine and its specs are reused.
PORTCHECK_DIGESTS sets how many specs are digested (0: none).
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
from functools import lru_cache

import hypothesis
import torch
from hypothesis import HealthCheck, Phase

from .cases import Case
from .errors import UsageError

DIGEST_EXAMPLES = 4           # specs digested per case x dtype on a GPU
INTERPRETER_DIGESTS = 2       # and in the interpreter, where every launch is slow
DRAWS = 24                    # examples drawn (cheap: no kernel runs) to find the distinct specs
BUDGETS = (256, 1024, 4096, 16384)   # elements per tensor: the smallest a case's strategy can draw
KEEP_BYTES = 4096             # outputs up to this many bytes keep their bytes in the record
SPECS_ENV = "PORTCHECK_DIGEST_SPECS"


COUNT_ENV = "PORTCHECK_DIGESTS"   # specs per case x dtype; 0 turns digests off


def default_count(on_gpu: bool) -> int:
    """How many specs a session digests: PORTCHECK_DIGESTS if set, else 4 on a GPU, 2 in the
    interpreter (each interpreted launch costs about as much as one checked example)."""
    text = os.environ.get(COUNT_ENV)
    if text:
        try:
            n = int(text)
        except ValueError:
            raise UsageError(f"{COUNT_ENV}={text!r}: expected a whole number of specs (0 turns digests off)") from None
        if n < 0:
            raise UsageError(f"{COUNT_ENV}={text!r}: expected 0 or more")
        return n
    return DIGEST_EXAMPLES if on_gpu else INTERPRETER_DIGESTS


def canonical(spec: dict) -> str:
    return json.dumps(spec, sort_keys=True, default=str)


def _draw(case: Case, dtype: str, count: int, budget: int) -> list[dict]:
    drawn: dict[str, dict] = {}

    # a fixed max_examples keeps the derandomized sequence the same whatever `count` is, so the
    # interpreter's fewer specs are the first of a GPU run's
    @hypothesis.settings(max_examples=DRAWS, derandomize=True, database=None, deadline=None,
                         phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @hypothesis.given(case.inputs(dtype, budget))
    def draw(spec):
        if len(drawn) < count:
            drawn.setdefault(canonical(spec), spec)

    draw()
    return list(drawn.values())


def draw_specs(case: Case, dtype: str, count: int = DIGEST_EXAMPLES) -> tuple[list[dict], int]:
    """The first `count` distinct specs of a derandomized draw (no kernel runs here), under the
    smallest budget of BUDGETS the case's strategy can draw from, and that budget."""
    problems = []
    for budget in BUDGETS:
        try:
            specs = _draw(case, dtype, count, budget)
        except Exception as exc:  # noqa: BLE001 - a strategy whose smallest shape needs more
            problems.append(f"{budget}: {type(exc).__name__}")
            continue
        if specs:
            return specs, budget
    raise ValueError(f"no spec drawn within {BUDGETS[-1]} elements ({'; '.join(problems)})")


@lru_cache(maxsize=4)
def _specs_file(path: str) -> dict:
    """(case, dtype) -> specs, from the digests of another run's results.jsonl."""
    from .results import read
    out: dict[tuple, list] = {}
    for r in read(path):
        for d in (r.get("digests") or {}).get("entries", ()):
            out.setdefault((r.get("case"), r.get("dtype")), []).append(d["spec"])
    return out


def specs_for(case: Case, dtype: str, count: int) -> tuple[list[dict], str]:
    """The specs to digest and how they were chosen."""
    path = os.environ.get(SPECS_ENV)
    if path:
        return _specs_file(path).get((case.name, dtype), [])[:count], f"specs from {path}"
    specs, budget = draw_specs(case, dtype, count)
    # said in full: a reader of the record took this budget for the check's own
    return specs, (f"the digests' own inputs (not the check's): hypothesis {hypothesis.__version__}, "
                   f"derandomized, max_elements={budget}")


def tensor_bytes(t: torch.Tensor) -> bytes:
    """Row-major bytes of a tensor (any dtype), as stored for a diff."""
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def describe_output(out: torch.Tensor, comp) -> dict:
    data = tensor_bytes(out)
    entry = {"dtype": dtype_name(out.dtype), "shape": list(out.shape),
             "sha256": hashlib.sha256(data).hexdigest()}
    if len(data) <= KEEP_BYTES:
        entry["data"] = base64.b64encode(data).decode("ascii")
    if comp is not None:
        entry["max_ulp"] = comp.max_ulp
        entry["worst_ratio"] = comp.worst_ratio
    return entry


def collect(case: Case, target_name: str, dtype: str, count: int = DIGEST_EXAMPLES,
            on_example=None) -> dict:
    """{drawn_by, entries: [{spec, outputs | error}]}; never raises for a kernel fault."""
    from .runner import evaluate
    try:
        specs, drawn_by = specs_for(case, dtype, count)
    except Exception as exc:  # a strategy that cannot draw under the small budget
        return {"drawn_by": f"no specs: {type(exc).__name__}: {str(exc)[:200]}", "entries": []}
    entries = []
    for spec in specs:
        if on_example is not None:
            on_example(spec)
        outs: dict = {}
        try:
            comps = {c.name: c for c in evaluate(case, target_name, spec, keep=outs)}
            entries.append({"spec": spec, "outputs": {name: describe_output(t, comps.get(name))
                                                      for name, t in outs.items()}})
        except Exception as exc:
            text = str(exc).strip().splitlines()
            entries.append({"spec": spec, "error": f"{type(exc).__name__}: {text[0][:300] if text else ''}"})
    return {"drawn_by": drawn_by, "entries": entries}
