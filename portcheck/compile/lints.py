"""Lints over what the compiler produced: hardware limits Triton does not check at compile time.

Triton cross-compiles for any arch, but it accepts 256 KB of shared memory on sm_90, 128 KB of
LDS on gfx942 and 2048 threads per block on wave64 (FACTS.md): those fail only when a real device
loads or launches the kernel. Each rule here names one such limit (or one silent degradation), has
a default severity, and may be re-graded or given another threshold per matrix:

    [compile.lints]
    spills = { severity = "warning", threshold = 0 }    # bytes spilled above which it fires
    low-occupancy = { threshold = 0.25 }                 # fraction of the arch's maximum
    compiler-warning = "off"                             # a bare string sets the severity

A finding is {rule, severity, message}; `verdict()` turns a record's findings into its verdict:
by default an error fails it, and with fail_on = "warning" (`portcheck compile --fail-on warning`,
the matrix's `[compile] fail_on`) a warning does too.
"""
from __future__ import annotations

from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info", "off")
FAIL_ON = ("error", "warning")     # the least severity that fails a record


@dataclass(frozen=True)
class Rule:
    name: str
    severity: str          # the default
    summary: str
    threshold: float | None = None   # the default threshold, for rules that have one
    unit: str = ""


RULES: dict[str, Rule] = {r.name: r for r in [
    Rule("shared-over-limit", "error", "shared memory / LDS per block over the arch's limit"),
    Rule("threads-over-limit", "error", "num_warps x warp size over the arch's threads per block"),
    Rule("rejected-dtype", "error", "the compiler rejects a dtype on this arch (e.g. an fp8 format)"),
    Rule("rejected-precision", "error", "the compiler rejects a tl.dot input_precision on this arch"),
    Rule("compile-error", "error", "the compiler failed for another reason"),
    Rule("compile-timeout", "error", "the compile ran past the time limit"),
    Rule("compiler-crash", "error", "the compiler process died"),
    Rule("spills", "warning", "registers spilled to stack / scratch memory", 0, "bytes"),
    Rule("fp8-emulated", "error",
         "an fp8 tl.dot lowers to a wider matrix instruction or to FMA instead of the arch's fp8 "
         "one (a format the arch does not take natively, e.g. OCP e4m3 on gfx942)"),
    Rule("fp8-unsupported", "error", "an fp8 tl.dot on an arch whose matrix units take no fp8 format"),
    Rule("no-matrix-instruction", "warning",
         "a tl.dot uses no matrix instruction although the arch has one for its dtypes"),
    Rule("narrow-async-copy", "warning",
         "cp.async copies under 16 bytes move more than a fraction of the copied bytes: the global "
         "layout does not match the shared layout the matrix instruction needs, or 16-byte "
         "alignment was not proven (a few scalar index loads stay under the default)",
         0.25, "fraction"),
    Rule("low-occupancy", "info", "occupancy under a fraction of the arch's maximum", 0.25, "fraction"),
    Rule("amd-option-on-nvidia", "warning",
         "an AMD-only option (waves_per_eu, matrix_instr_nonkdim, kpack) given to an NVIDIA target"),
    Rule("compiler-warning", "info", "the compiler warned (e.g. an fp8 format emulated by upcasting)"),
]}


@dataclass(frozen=True)
class LintConfig:
    """Severity and threshold per rule; what a matrix's [compile.lints] table changes."""
    severities: dict = field(default_factory=lambda: {r.name: r.severity for r in RULES.values()})
    thresholds: dict = field(default_factory=lambda: {r.name: r.threshold for r in RULES.values()
                                                      if r.threshold is not None})

    @classmethod
    def from_table(cls, table: dict, bad) -> "LintConfig":
        """Validate a [compile.lints] table; `bad(key, problem)` builds the UsageError."""
        cfg = cls()
        for name, value in table.items():
            rule = RULES.get(name)
            if rule is None:
                raise bad("lints", f"names unknown rule {name!r}; known: {', '.join(RULES)}")
            if isinstance(value, str):
                value = {"severity": value}
            if not isinstance(value, dict):
                raise bad(name, "must be a severity string or a table {severity, threshold}")
            unknown = set(value) - {"severity", "threshold"}
            if unknown:
                raise bad(name, f"has unknown key(s) {', '.join(sorted(unknown))}; known: severity, threshold")
            if "severity" in value:
                if value["severity"] not in SEVERITIES:
                    raise bad(name, f"severity must be one of {', '.join(SEVERITIES)}, got {value['severity']!r}")
                cfg.severities[name] = value["severity"]
            if "threshold" in value:
                t = value["threshold"]
                if rule.threshold is None:
                    raise bad(name, "takes no threshold")
                if isinstance(t, bool) or not isinstance(t, (int, float)) or t < 0:
                    raise bad(name, f"threshold must be a number >= 0, got {t!r}")
                cfg.thresholds[name] = t
        return cfg


DEFAULT = LintConfig()


# ---- which operand dtypes each arch's matrix units take --------------------------------------
# Element types as Triton's TTIR spells them: the arch table's Arch.matrix_dtypes, plus its native
# fp8 formats (Arch.fp8_native); fp32 operands count as "tf32" when the dot asks for tf32 and as
# "bf16" for the bf16x3/x6 decompositions.
# portcheck's fp8 names (facts/archs.py, dtypes.py) as TTIR spells the element types
TTIR_FP8 = {"fp8e4nv": "f8E4M3FN", "fp8e5": "f8E5M2", "fp8e4b8": "f8E4M3FNUZ", "fp8e5b16": "f8E5M2FNUZ",
            "fp8e4b15": "f8E4M3B11FNUZ"}
_FP8_NAME = {ttir: name for name, ttir in TTIR_FP8.items()}


def native_fp8(arch) -> set[str]:
    """The TTIR element types of the fp8 formats the arch's matrix units take natively."""
    return {TTIR_FP8[f] for f in arch.fp8_native}


def _dot_operand_kind(elem: str, precision: str | None, arch) -> str:
    if elem == "f32":
        precision = precision or arch.dot_default
        if precision in ("tf32", "tf32x3"):
            return "tf32"
        if precision in ("bf16x3", "bf16x6"):
            return "bf16"
        return "f32"
    return elem


def expects_matrix_instruction(dot: dict, arch) -> bool:
    have = set(arch.matrix_dtypes) | native_fp8(arch)
    kinds = {_dot_operand_kind(dot[k], dot.get("precision"), arch) for k in ("a", "b")}
    return bool(kinds) and kinds <= have


def _fp8_dot_finding(dot: dict, raw: dict, arch) -> tuple[str, str] | None:
    """(rule, message) for an fp8 dot that does not reach the arch's fp8 matrix instruction,
    judged from the instructions the compiler emitted (their operand types), else None."""
    fp8 = [dot[k] for k in ("a", "b") if dot[k].startswith("f8")]
    if not fp8:
        return None
    names = ", ".join(dict.fromkeys(_FP8_NAME.get(t, t) for t in fp8))
    shape = f"tl.dot {dot['a']} x {dot['b']} -> {dot.get('acc', '?')}"
    instrs = raw.get("matrix_instructions") or []
    lowered = (f"{instrs[0]} ({', '.join(raw.get('matrix_operands') or ['?'])} operands)" if instrs
               else "FMA (no matrix instruction)")
    if not arch.fp8_native:
        return "fp8-unsupported", (f"{shape} ({names}) on {arch.name}, whose matrix units take no fp8 "
                                   f"format: it lowers to {lowered}")
    if "fp8" in (raw.get("matrix_operands") or []):
        return None
    native = ", ".join(arch.fp8_native)
    why = (f"{names} is native on {arch.name}, yet" if set(fp8) <= native_fp8(arch)
           else f"{names} is not native on {arch.name} (its fp8 matrix units take {native}):")
    return "fp8-emulated", f"{shape}: {why} it lowers to {lowered}"


# ---- the rules --------------------------------------------------------------------------------

def _kb(n: int) -> str:
    return f"{n / 1024:g} KB"


def findings(raw: dict, arch, options: dict, config: LintConfig = DEFAULT) -> list[dict]:
    """Every rule that fires for one compile of one variant on one arch (severity 'off' dropped)."""
    out = []

    def add(rule: str, message: str):
        sev = config.severities[rule]
        if sev != "off":
            out.append({"rule": rule, "severity": sev, "message": message})

    status = raw.get("status")
    if status == "timeout":
        add("compile-timeout", raw.get("error", "timed out"))
    elif status == "crash":
        add("compiler-crash", raw.get("error", "the compiler process died"))
    elif status == "error":
        kind = raw.get("error_kind", "compile-error")
        add(kind if kind in RULES else "compile-error", raw.get("error", ""))
    for key in raw.get("dropped_options", []):
        add("amd-option-on-nvidia",
            f"{key}={options.get(key)!r} is an AMD-only option: triton.compile ignores it for "
            f"{arch.name}, and a JIT launch on NVIDIA rejects it as an unrecognised keyword")
    if status != "ok":
        return out

    warps = raw.get("num_warps") or 0
    warp = raw.get("warp_size") or arch.warp_size
    threads = warps * warp
    if threads > arch.max_threads_per_block:
        add("threads-over-limit", f"num_warps={warps} x {warp}-wide {'wavefronts' if arch.is_amd else 'warps'} "
                                  f"= {threads} threads > {arch.max_threads_per_block} per block")
    shared = raw.get("shared") or 0
    if shared > arch.shared_per_block:
        what = "LDS" if arch.is_amd else "shared memory"
        add("shared-over-limit", f"{what} {shared} B ({_kb(shared)}) > {arch.shared_per_block} B "
                                 f"({_kb(arch.shared_per_block)}) per block on {arch.name}")
    spill = raw.get("spill_bytes") or 0
    spill_count = raw.get("spill_count") or 0
    if spill > config.thresholds["spills"] or (spill_count and config.thresholds["spills"] == 0):
        detail = f"{spill_count} VGPRs spilled, " if spill_count else ""
        add("spills", f"{detail}{spill} B of {'scratch' if arch.is_amd else 'stack'} per thread "
                      f"(threshold {config.thresholds['spills']:g} B)")
    for dot in raw.get("dots", []):
        fp8 = _fp8_dot_finding(dot, raw, arch)
        if fp8:
            add(*fp8)
            break
    family = raw.get("matrix_family") or "none"
    for dot in raw.get("dots", []):
        if family == "none" and not dot["a"].startswith("f8") and expects_matrix_instruction(dot, arch):
            add("no-matrix-instruction",
                f"tl.dot {dot['a']} x {dot['b']} -> {dot.get('acc', '?')}"
                f"{' (' + dot['precision'] + ')' if dot.get('precision') else ''} runs without "
                f"{arch.matrix_family} on {arch.name}, whose matrix units take these dtypes")
            break
    sizes = {int(k): v for k, v in (raw.get("async_copy_sizes") or {}).items()}
    moved = sum(k * v for k, v in sizes.items())   # each instruction once, as the PTX has it
    narrow = sum(k * v for k, v in sizes.items() if k < 16)
    if moved and narrow / moved > config.thresholds["narrow-async-copy"]:
        spread = ", ".join(f"{v} of {k} B" for k, v in sorted(sizes.items()))
        add("narrow-async-copy", f"copies under 16 bytes move {narrow / moved:.0%} of the bytes "
                                 f"of its cp.async instructions ({spread}; threshold "
                                 f"{config.thresholds['narrow-async-copy']:.0%})")
    frac = raw.get("occupancy_fraction")
    if frac is not None and frac < config.thresholds["low-occupancy"]:
        add("low-occupancy", f"occupancy {raw.get('occupancy_effective', raw.get('occupancy'))}/"
                             f"{raw.get('occupancy_max')} {raw.get('occupancy_unit', '')} "
                             f"({frac:.0%} < {config.thresholds['low-occupancy']:.0%})")
    for w in raw.get("warnings", []):
        add("compiler-warning", w)
    return out


def failing(found: list[dict], fail_on: str = "error") -> list[dict]:
    """The findings that fail a record: errors, and warnings too when fail_on is 'warning'."""
    severities = FAIL_ON[:FAIL_ON.index(fail_on) + 1]
    return [f for f in found if f["severity"] in severities]


def verdict(found: list[dict], status: str, fail_on: str = "error") -> str:
    """error: the compile could not be judged (timeout, crash); fail: a finding at or above
    `fail_on` (error by default), or no binary; skip: nothing to build on the arch, or the
    toolchain itself is missing; pass otherwise (info never fails)."""
    if status in ("toolchain", "skip"):
        return "skip"
    errors = [f for f in found if f["severity"] == "error"]
    if any(f["rule"] in ("compile-timeout", "compiler-crash") for f in errors):
        return "error"
    if failing(found, fail_on) or status != "ok":
        return "fail"
    return "pass"


