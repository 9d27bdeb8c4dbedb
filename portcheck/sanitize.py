"""`portcheck run --sanitize TOOL`: run the cases under a GPU memory or race checker and fold its
report into each case's record.

NVIDIA: the worker process runs under compute-sanitizer (memcheck, racecheck, initcheck,
synccheck), one worker per case x dtype, so every finding in a log belongs to one case. ROCm:
Triton's AMD backend instruments kernels with AddressSanitizer when TRITON_ENABLE_ASAN is set
(`--sanitize address`); the host process needs ROCm's ASan runtime. The interpreter has neither.

A finding that is an error fails the case (a racecheck warning alone does not), unless it lies
in a library kernel: one the tool names by a C++ signature with no Python source line, such as
PyTorch's own reductions that compute a float64 oracle on the GPU (racecheck reports hazards in
`at::native::reduce_kernel`). Those are kept in the record, marked `library`, and counted apart.
Triton names its kernels after the Python function and places each access on a `.py` line, so
every finding in a kernel under test counts. The record keeps the findings (kind, kernel, address,
thread, block, size, access) and the log's tail, and its replay names `--sanitize TOOL`.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import results
from .cases import cases_flag
from .errors import UsageError
from .supervise import PORTCHECK, Unfinished, inflight_path, supervise, supervise_all

NVIDIA_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
ROCM_TOOLS = ("address",)
TOOLS = NVIDIA_TOOLS + ROCM_TOOLS

# Instrumented kernels run many times slower, and every kernel is compiled and patched again
# under the tool: the per-case time limit is multiplied by these (racecheck tracks every
# shared-memory access, so it is the slowest).
TIME_SCALE = {"memcheck": 20, "racecheck": 40, "initcheck": 20, "synccheck": 20, "address": 10}

BASE_PORT = 49152     # compute-sanitizer's default --port
PORTS_EACH = 10       # its default --max-connections: ports one tool may try
PRINT_LIMIT = 20      # findings written out in full per case; the summary still counts them all
TAIL_LINES = 30       # lines of the log kept in the record (host backtraces left out)

# The caching allocator hands out pieces of large blocks, inside which an out-of-bounds access
# is in bounds for the checker: every tensor gets its own allocation instead.
NO_CACHING = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}

# Triton's own AMD ASan test sets these: no fragment allocator or caching allocator that would
# hide an overflow inside a larger block, and XNACK on, which the instrumented code object needs.
ROCM_ASAN_ENV = {"TRITON_ENABLE_ASAN": "1", "HSA_XNACK": "1", "HSA_DISABLE_FRAGMENT_ALLOCATOR": "1",
                 "PYTORCH_NO_HIP_MEMORY_CACHING": "1", "AMD_PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


@dataclass
class Finding:
    kind: str
    severity: str = "error"            # error | warning (racecheck)
    kernel: str | None = None
    where: str | None = None           # file:line of the access
    address: str | None = None
    thread: str | None = None          # "x,y,z"
    block: str | None = None           # "x,y,z"
    size: int | None = None            # bytes per access
    access: str | None = None          # read | write | atomic | write/read (a race's two sides)
    detail: str | None = None          # e.g. "1 bytes after the nearest allocation ... of size 400 bytes"
    library: bool = False              # in a library kernel (PyTorch's), not one under test

    def mark_library(self) -> None:
        """A kernel with a C++ name ("void at::native::reduce_kernel<...>(T3)") placed on no Python
        line is a library's, not Triton's (whose kernels are Python functions)."""
        cxx = self.kernel is not None and ("::" in self.kernel or self.kernel.startswith("void "))
        self.library = cxx and not (self.where or "").rsplit(":", 1)[0].endswith(".py")


@dataclass
class Report:
    errors: int = 0                    # in the kernels under test: these fail the case
    warnings: int = 0
    findings: list[Finding] = field(default_factory=list)
    library_errors: int = 0            # printed errors in library kernels (kept, not failing)

    def headline(self) -> str:
        """The first error in a kernel under test, named by kind and kernel."""
        errors = [f for f in self.findings if f.severity == "error" and not f.library]
        first = next((f for f in errors if f.kernel), errors[0] if errors else None)
        if first is None:
            return f"{self.errors} errors"
        where = f" in {first.kernel}" if first.kernel else ""
        at = f" at {first.where}" if first.where else ""
        return f"{first.kind}{where}{at} ({self.errors} error{'s' if self.errors != 1 else ''})"


# -- compute-sanitizer's text log ---------------------------------------------------------------

_LINE = re.compile(r"^=========(\s+)(.*)$")
_ACCESS = re.compile(r"^(Invalid __\w+__ (read|write|atomic)|Uninitialized __\w+__ memory (read))"
                     r" of size (\d+) bytes?")
_RACE = re.compile(r"^(ERROR|WARNING|Error|Warning): Race reported between (\w+) access at (.*)$")
_RACE_OTHER = re.compile(r"^and (\w+) access at (.*?)(?: \[(\d+) hazards?\])?$")
_API = re.compile(r'^Program hit (\w+) \(error \d+\) due to "(.*)" on CUDA API call to (\w+)')
_AT = re.compile(r"^at (.+?)(?:\+0x[0-9a-fA-F]+)?(?: in (.*))?$")   # "at k+0x10 in f.py:3", "at void ns::k<..>(T3)+0x10"
_OLD_KERNEL = re.compile(r":(\w+)\(.*\)\s*$")     # older logs: "at 0x60 in file.cu:12:kernel(int*)"
_THREAD = re.compile(r"^by thread \((\d+,\d+,\d+)\) in block \((\d+,\d+,\d+)\)")
_ADDRESS = re.compile(r"^(?:Address|Access to) (0x[0-9a-fA-F]+)(.*)$")
_SUMMARY = re.compile(r"^ERROR SUMMARY: (\d+) errors?$")
_RACE_SUMMARY = re.compile(r"^RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_NOT_FINDINGS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY",
                 "Target application returned an error")


def _code_location(text: str) -> tuple[str | None, str | None]:
    """(kernel, file:line) from "kernel+0x100 in file.py:6" or an older "0x60 in file.cu:12:kernel()"."""
    m = _AT.match("at " + text)
    if not m:
        return None, None
    kernel, where = m.groups()
    old = _OLD_KERNEL.search(where or "")
    if old:
        return old.group(1), where[:old.start()]
    return (None if kernel.startswith("0x") else kernel), where


def _start(text: str) -> Finding:
    """The finding a compute-sanitizer header line opens."""
    m = _ACCESS.match(text)
    if m:
        return Finding(kind=m.group(1), access=m.group(2) or m.group(3), size=int(m.group(4)))
    m = _RACE.match(text)
    if m:
        kernel, where = _code_location(m.group(3))
        return Finding(kind="shared-memory race", severity=m.group(1).lower(), kernel=kernel,
                       where=where, access=m.group(2).lower())
    m = _API.match(text)
    if m:
        return Finding(kind=f"CUDA API error {m.group(1)} ({m.group(2)}) in {m.group(3)}")
    return Finding(kind=text.rstrip("."))    # Barrier error, hardware exception, ... as printed


def _detail(f: Finding, text: str) -> None:
    m = _RACE_OTHER.match(text)
    if m and f.kind == "shared-memory race":
        f.access = f"{f.access}/{m.group(1).lower()}"
        f.detail = f"{m.group(3)} hazards" if m.group(3) else f.detail
        return
    m = _AT.match(text)
    if m and f.kernel is None:
        f.kernel, f.where = _code_location(text[3:])
        return
    m = _THREAD.match(text)
    if m:
        f.thread, f.block = m.groups()
        return
    m = _ADDRESS.match(text)
    if m:
        f.address = m.group(1)
        rest = m.group(2).strip()
        f.detail = rest or f.detail
        return
    if text.startswith("and is ") and f.address:   # "... and is 1 bytes after the nearest allocation"
        f.detail = f"{f.detail + ' ' if f.detail else ''}{text[len('and '):]}"


def parse(text: str) -> Report:
    """A compute-sanitizer log (any tool) as counts and findings."""
    report, current, summary = Report(), None, None
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        indent, body = len(m.group(1)), m.group(2).rstrip()
        if not body or "Host Frame" in body or body.startswith("Saved host backtrace"):
            continue
        if indent > 1:
            if current is not None:
                _detail(current, body)
            continue
        current = None
        s = _SUMMARY.match(body)
        if s:
            summary = (int(s.group(1)), 0) if summary is None else summary
            continue
        s = _RACE_SUMMARY.match(body)
        if s:
            summary = (int(s.group(1)), int(s.group(2)))
            continue
        if body.startswith(_NOT_FINDINGS):
            continue
        current = _start(body)
        report.findings.append(current)
    for f in report.findings:
        f.mark_library()
    counted = (sum(f.severity == "error" for f in report.findings),
               sum(f.severity == "warning" for f in report.findings))
    # no summary when the worker was killed (time limit): count what was printed
    errors, report.warnings = summary if summary is not None else counted
    report.library_errors = sum(f.severity == "error" and f.library for f in report.findings)
    # errors past the print limit are not named: they count against the case
    report.errors = max(0, errors - report.library_errors)
    return report


# -- AddressSanitizer on ROCm -------------------------------------------------------------------

_ASAN_ERROR = re.compile(r"ERROR: AddressSanitizer: ([\w-]+)(?: on amdgpu device \d+)?(?: at pc (0x[0-9a-fA-F]+))?")
_ASAN_ACCESS = re.compile(r"^(READ|WRITE) of size (\d+)(?: in workgroup id \((\d+,\d+,\d+)\))?")
_ASAN_FRAME = re.compile(r"^#0 0x[0-9a-fA-F]+ in (\S+)(?: (?:at )?(\S+))?")
_ASAN_LOCATED = re.compile(r"^(0x[0-9a-fA-F]+) is located (.*)$")


def parse_asan(text: str) -> Report:
    """An AddressSanitizer report (ROCm's device-side format) as counts and findings."""
    report, current = Report(), None
    for line in text.splitlines():
        body = line.strip()
        m = _ASAN_ERROR.search(body)
        if m:
            current = Finding(kind=m.group(1))
            report.findings.append(current)
            continue
        if current is None:
            continue
        m = _ASAN_ACCESS.match(body)
        if m:
            current.access, current.size, current.block = m.group(1).lower(), int(m.group(2)), m.group(3)
        elif (m := _ASAN_FRAME.match(body)) and current.kernel is None:
            current.kernel, current.where = m.group(1), m.group(2)
        elif (m := _ASAN_LOCATED.match(body)) and current.address is None:
            current.address, current.detail = m.group(1), m.group(2)
    report.errors = len(report.findings)
    return report


# -- finding the tool and wrapping the worker ---------------------------------------------------

def compute_sanitizer_places(environ=os.environ) -> list[str]:
    """Where compute-sanitizer is looked for, in order."""
    places = ["PATH"]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(var):
            places.append(str(Path(environ[var]) / "bin"))
    places.append("/usr/local/cuda/bin")
    places += [str(Path(p) / "nvidia" / "*" / "bin") for p in
               dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))]
    return places


def find_compute_sanitizer(environ=os.environ) -> Path:
    for place in compute_sanitizer_places(environ):
        if place == "PATH":
            found = shutil.which("compute-sanitizer", path=environ.get("PATH", ""))
            if found:
                return Path(found)
            continue
        for candidate in sorted(glob.glob(str(Path(place) / "compute-sanitizer"))):
            if os.access(candidate, os.X_OK):
                return Path(candidate)
    raise UsageError("--sanitize needs NVIDIA's compute-sanitizer (part of the CUDA toolkit; the "
                     "nvidia-cuda-sanitizer-api wheels hold only its library); looked in "
                     + ", ".join(compute_sanitizer_places(environ)))


def rocm_asan_runtime(environ=os.environ) -> tuple[Path, Path]:
    """ROCm's ASan host runtime (preloaded before Python) and its ASan-built libraries' folder."""
    roots = list(dict.fromkeys(filter(None, (environ.get("ROCM_PATH"), environ.get("ROCM_HOME"), "/opt/rocm"))))
    for root in roots:
        runtimes = sorted(glob.glob(f"{root}/llvm/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so"))
        libs = Path(root) / "lib" / "asan"
        if runtimes and libs.is_dir():
            return Path(runtimes[-1]), libs
    raise UsageError("--sanitize address needs a ROCm install with AddressSanitizer "
                     "(llvm/lib/clang/*/lib/linux/libclang_rt.asan-x86_64.so and lib/asan); looked in "
                     + ", ".join(roots))


@dataclass(frozen=True)
class Sanitizer:
    tool: str
    exe: Path | None = None               # compute-sanitizer; None for ROCm's ASan
    preload: Path | None = None           # ROCm: the ASan runtime, loaded before Python
    asan_libs: Path | None = None         # ROCm: the ASan-built runtime libraries

    @property
    def time_scale(self) -> float:
        return TIME_SCALE[self.tool]

    def wrap(self, cmd: list[str], log: Path, slot: int = 0) -> list[str]:
        """The worker command under the tool (ASan is compiled into the kernels: no wrapper);
        `slot`: which of the tools running at once this is."""
        if self.exe is None:
            return list(cmd)
        # no --error-exitcode: with it the tool's status replaces the worker's, which the
        # supervisor reads (1: a case failed, 3: GPU context lost)
        return [str(self.exe), "--tool", self.tool, "--log-file", str(log),
                "--print-limit", str(PRINT_LIMIT), "--target-processes", "all",
                # the tool talks to its target over TCP ports from --port on: tools running at
                # once each get ports of their own
                "--port", str(BASE_PORT + slot * PORTS_EACH), "--max-connections", str(PORTS_EACH),
                # the worker's children that never touch CUDA (the C compiler that builds Triton's
                # launcher on a cold cache, ldconfig) are not an error of the case
                "--require-cuda-init", "no", *cmd]

    def environ(self, env: dict, log: Path) -> dict:
        env = dict(env)
        if self.exe is not None:
            return {**env, **NO_CACHING}
        env.update(ROCM_ASAN_ENV)
        env["LD_PRELOAD"] = ":".join(filter(None, (str(self.preload), env.get("LD_PRELOAD"))))
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, (str(self.asan_libs), env.get("LD_LIBRARY_PATH"))))
        # Python's own allocations are not instrumented and leak by design: no leak report
        env["ASAN_OPTIONS"] = f"log_path={log}:detect_leaks=0"
        return env

    def logs(self, log: Path) -> list[Path]:
        """compute-sanitizer writes `log`; ASan writes `log.<pid>`, one per process."""
        return [log] if self.exe is not None else sorted(log.parent.glob(log.name + ".*"))

    def read(self, log: Path) -> tuple[Report, str]:
        text = "\n".join(p.read_text(errors="replace") for p in self.logs(log) if p.exists())
        report = parse(text) if self.exe is not None else parse_asan(text)
        kept = [line for line in text.splitlines() if "Host Frame" not in line]
        return report, "\n".join(kept[-TAIL_LINES:])


def for_target(target: str, tool: str, environ=os.environ) -> Sanitizer:
    """The sanitizer for `tool` on `target`, or a UsageError that says why there is none."""
    if target == "cuda":
        if tool not in NVIDIA_TOOLS:
            raise UsageError(f"--sanitize {tool} is not a compute-sanitizer tool; on cuda use one of "
                             + ", ".join(NVIDIA_TOOLS))
        return Sanitizer(tool, exe=find_compute_sanitizer(environ))
    if target == "rocm":
        if tool not in ROCM_TOOLS:
            raise UsageError(f"--sanitize {tool} is NVIDIA's compute-sanitizer, unavailable on ROCm; "
                             "there use --sanitize address (Triton's AMD AddressSanitizer build)")
        preload, libs = rocm_asan_runtime(environ)
        return Sanitizer(tool, preload=preload, asan_libs=libs)
    raise UsageError(f"--sanitize runs on a GPU (cuda: {', '.join(NVIDIA_TOOLS)}; rocm: address); "
                     f"the {target} target has no sanitizer")


# -- the record -------------------------------------------------------------------------------

def apply(record: dict, tool: str, report: Report, log_tail: str) -> dict:
    """The record with the sanitizer's report; an error (not a warning alone) fails the case."""
    record = dict(record)
    record["sanitizer"] = {"tool": tool, "errors": report.errors, "warnings": report.warnings,
                           "library_errors": report.library_errors,
                           "findings": [asdict(f) for f in report.findings], "log_tail": log_tail}
    if report.errors and record.get("verdict") != "skip":
        before = record.get("message", "")
        record["verdict"] = "fail"
        record["message"] = f"{tool}: {report.headline()}" + (f"; then: {before}" if before else "")
    return record


def run_each(sanitizer: Sanitizer, units: list[tuple[str, str]], command_for, env: dict,
             results_path: Path, target: str, case_timeout: float, jobs: int = 1) -> int:
    """One supervised worker per case x dtype under the sanitizer, `jobs` of them at a time; its
    record, with the log's findings, goes to `results_path`. `command_for(case, dtype, staged, slot)`
    is the worker command that checks that one unit into the file `staged`, keeping its in-flight
    file as worker `slot` (supervise.inflight_path). Returns 0 (all passed) or 1; raises
    Unfinished when a worker stopped outside its case."""
    log_dir = results_path.parent / "sanitizer"
    log_dir.mkdir(parents=True, exist_ok=True)
    todo = list(units)
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            print(line, flush=True)

    def one(slot: int, case: str, dtype: str, stop, started) -> int:
        """One unit in lane `slot`: its staged records, in-flight file and the tool's ports are the lane's."""
        log = log_dir / f"{target}-{case}-{dtype}.log"
        staged = results_path.with_name(f".{target}.sanitized.{slot}.jsonl")
        for old in [log, *log_dir.glob(log.name + ".*"), staged]:
            old.unlink(missing_ok=True)
        try:
            code = supervise(sanitizer.wrap(command_for(case, dtype, staged, slot), log, slot),
                             sanitizer.environ(env, log), staged, target, case_timeout * sanitizer.time_scale,
                             restart=False, inflight=inflight_path(results_path, target, slot), output=say,
                             stop=stop, started=started)
            report, tail = sanitizer.read(log)
            with lock:
                code = max(code, _merge(results_path, staged, (case, dtype), sanitizer.tool, report, tail))
        finally:
            staged.unlink(missing_ok=True)
        if report.errors:
            say(f"    {sanitizer.tool}: {report.headline()}: the case fails; log: {log}")
        elif report.warnings:
            say(f"    {sanitizer.tool}: {report.warnings} warnings; log: {log}")
        return code

    def lane(slot: int, stop, started) -> int:
        status = 0
        while not stop.is_set():
            with lock:
                if not todo:
                    return status
                case, dtype = todo.pop(0)
            status = max(status, one(slot, case, dtype, stop, started))
        return status

    lanes = max(1, min(jobs, len(units)))
    status, unfinished = supervise_all([functools.partial(lane, slot) for slot in range(lanes)])
    if unfinished:
        raise Unfinished("; ".join(unfinished))
    return status


def _merge(results_path: Path, staged: Path, unit: tuple[str, str], tool: str, report: Report,
           tail: str) -> int:
    """Moves the staged records into the results (records already there, such as a kernel module's
    import error seen by every worker, only once); 1 if the unit's record failed."""
    have = ({(r.get("case"), r.get("dtype")) for r in results.read(results_path)}
            if results_path.exists() else set())
    moved, failed = [], 0
    for r in results.read(staged) if staged.exists() else []:
        if (r.get("case"), r.get("dtype")) == unit and r.get("kind") == "runtime":
            r = apply(r, tool, report, tail)
        elif (r.get("case"), r.get("dtype")) in have:
            continue
        failed |= r.get("verdict") in ("fail", "error", "xpass")
        moved.append(r)
    results.append_many(results_path, moved)
    return int(failed)


class SanitizedSession:
    """The pytest plugin's session under `--portcheck-sanitize=TOOL`: the sanitizer must start the
    process that runs a case, so each case x dtype runs through `portcheck run --sanitize TOOL` in
    a fresh process, with this session's target, seed and profile and `run_options` (the matrix,
    the checks' flags, `--sanitize TOOL`); its record comes back."""

    def __init__(self, session, tool: str, run_options: list[str]):
        self.session, self.tool, self.run_options = session, tool, run_options

    def __getattr__(self, name):   # target, arch, availability, ... are the wrapped session's
        return getattr(self.session, name)

    def run(self, case, dtype: str, spec: dict | None = None, on_example=None) -> results.Result:
        s = self.session
        with tempfile.TemporaryDirectory(prefix="portcheck-sanitize-") as out:
            cmd = [*PORTCHECK, "run", "--target", s.target.name,
                   "--kernel", case.name, "--dtype", dtype, "--seed", str(s.seed), "--profile", s.profile,
                   "--no-time", "--out", out, *cases_flag(case.name), *self.run_options]
            if spec is not None:
                cmd += ["--replay", json.dumps(spec, sort_keys=True)]
            done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            path = Path(out) / "results.jsonl"
            mine = [r for r in (results.read(path) if path.exists() else [])
                    if (r.get("case"), r.get("dtype"), r.get("kind")) == (case.name, dtype, "runtime")]
        if not mine:
            tail = " | ".join(done.stdout.strip().splitlines()[-3:])
            return results.Result("runtime", case.name, case.family, dtype, s.target.name, s.arch, "error",
                                  "gpu", message=f"portcheck run --sanitize {self.tool} left no record "
                                                 f"(exit {done.returncode}): {tail}", reproduce=shlex.join(cmd))
        if s.results_path is not None:
            results.append(s.results_path, mine[-1])
        known = {f for f in results.Result.__dataclass_fields__}
        return results.Result(**{k: v for k, v in mine[-1].items() if k in known})
