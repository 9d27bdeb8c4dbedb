"""`--sanitize TOOL`: the log parsers, the tool search, the worker wrapping, the record merge and
the usage errors. The logs below are short copies of the tools' documented output formats (the
memcheck and initcheck ones as compute-sanitizer 2025.3 printed them for a Triton kernel on an
H200, host frames trimmed)."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from portcheck import results
from portcheck.errors import UsageError
from portcheck.runner import Checks, reproduce_command
from portcheck.sanitize import (NO_CACHING, ROCM_ASAN_ENV, Report, Sanitizer, apply, find_compute_sanitizer,
                                for_target, parse, parse_asan, run_each)
from portcheck.schema import check_result

MEMCHECK = """\
========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at oob_store+0x100 in oob.py:6
=========     by thread (99,0,0) in block (0,0,0)
=========     Access to 0x7f6d72800390 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f6d72800200 of size 400 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: launch [0x1da3] in __triton_launcher.cpython-312-x86_64-linux-gnu.so
=========         Host Frame: <module> in oob.py:13
========= 
========= Program hit cudaErrorLaunchFailure (error 719) due to "unspecified launch failure" on CUDA API call to cudaDeviceSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========         Host Frame: synchronize in __init__.py:1162
========= 
========= Target application returned an error
========= ERROR SUMMARY: 2 errors
"""

INITCHECK = """\
========= COMPUTE-SANITIZER
========= Uninitialized __global__ memory read of size 4 bytes
=========     at uninit+0xd0 in oob.py:10
=========     by thread (96,0,0) in block (0,0,0)
=========     Address 0x7fae9c800580
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: <module> in oob.py:15
========= 
========= ERROR SUMMARY: 100 errors
========= ERROR SUMMARY: 99 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""

RACECHECK = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at stage_kernel+0x3c0 in race.py:21
=========     and Read access at stage_kernel+0x4a0 in race.py:24 [512 hazards]
========= 
========= Warning: Race reported between Read access at 0x6360 in conv.cu:123:convolution(float const*)
=========     and Write access at 0x1fe0 in conv.cu:63:convolution(float const*) [4 hazards]
========= 
========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)
"""

RACE_WARNING_ONLY = """\
========= COMPUTE-SANITIZER
========= Warning: Race reported between Read access at k+0x10 in a.py:3
=========     and Write access at k+0x20 in a.py:4 [2 hazards]
========= 
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
"""

# racecheck on the H200 (2026-12-02): PyTorch's float64 mean reduction, which computed a layernorm
# oracle on the GPU, beside a hazard in the Triton kernel under test
RACE_IN_TORCH = """\
========= COMPUTE-SANITIZER
========= Error: Race reported between Read access at void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<double, at::native::MeanOps<double, double, double, double>, unsigned int, double, (int)4, (int)4>>(T3)+0xe960
=========     and Write access at void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<double, at::native::MeanOps<double, double, double, double>, unsigned int, double, (int)4, (int)4>>(T3)+0xea10 [6144 hazards]
========= 
========= Error: Race reported between Write access at layernorm_rows_kernel+0x3210 in layernorm.py:65
=========     and Write access at layernorm_rows_kernel+0x3210 in layernorm.py:65 [1 hazards]
========= 
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""

SYNCCHECK = """\
========= COMPUTE-SANITIZER
========= Barrier error detected. Divergent thread(s) in warp
=========     at reduce_kernel+0x250 in reduce.py:40
=========     by thread (5,0,0) in block (3,0,0)
========= 
========= ERROR SUMMARY: 1 error
"""

ASAN = """\
=================================================================
==3141==ERROR: AddressSanitizer: heap-buffer-overflow on amdgpu device 0 at pc 0x7fa9f82f6b2c
WRITE of size 4 in workgroup id (10,0,0)
  #0 0x7fa9f82f6b2c in kv_write at /src/kv.py:31:5
Thread ids and accessed addresses:
00 : 0x7fa9f1c38a28 01 : 0x7fa9f1c38a2c
0x7fa9f1c38a28 is located 40 bytes after 100-byte region [0x7fa9f1c38980,0x7fa9f1c389e4)
SUMMARY: AddressSanitizer: heap-buffer-overflow /src/kv.py:31:5 in kv_write
"""


def test_memcheck_log_names_the_kernel_the_access_and_where_it_landed():
    r = parse(MEMCHECK)
    assert r.errors == 2 and r.warnings == 0
    write, api = r.findings
    assert (write.kind, write.kernel, write.where) == ("Invalid __global__ write", "oob_store", "oob.py:6")
    assert (write.access, write.size, write.thread, write.block) == ("write", 4, "99,0,0", "0,0,0")
    assert write.address == "0x7f6d72800390"
    assert "1 bytes after the nearest allocation" in write.detail
    assert api.kind.startswith("CUDA API error cudaErrorLaunchFailure") and api.kernel is None
    assert r.headline() == "Invalid __global__ write in oob_store at oob.py:6 (2 errors)"


def test_initcheck_counts_errors_past_the_print_limit():
    r = parse(INITCHECK)
    assert r.errors == 100 and len(r.findings) == 1
    f = r.findings[0]
    assert (f.kind, f.access, f.size, f.kernel, f.address) == (
        "Uninitialized __global__ memory read", "read", 4, "uninit", "0x7fae9c800580")


def test_racecheck_tells_errors_from_warnings_in_both_log_formats():
    r = parse(RACECHECK)
    assert (r.errors, r.warnings) == (1, 1)
    error, warning = r.findings
    assert (error.kind, error.severity, error.kernel, error.where) == (
        "shared-memory race", "error", "stage_kernel", "race.py:21")
    assert (error.access, error.detail) == ("write/read", "512 hazards")
    assert (warning.severity, warning.kernel, warning.where, warning.access) == (
        "warning", "convolution", "conv.cu:123", "read/write")


def test_a_race_in_a_library_kernel_is_kept_apart_from_the_kernels_under_test():
    r = parse(RACE_IN_TORCH)
    torch_side, ours = r.findings
    assert torch_side.kernel.startswith("void at::native::reduce_kernel<") and torch_side.where is None
    assert torch_side.library and torch_side.detail == "6144 hazards"
    assert (ours.kernel, ours.where, ours.library) == ("layernorm_rows_kernel", "layernorm.py:65", False)
    assert (r.errors, r.library_errors) == (1, 1)
    assert r.headline() == "shared-memory race in layernorm_rows_kernel at layernorm.py:65 (1 error)"
    only_torch = RACE_IN_TORCH.split("========= Error: Race reported between Write")[0] + \
        "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
    after = apply(_record(), "racecheck", parse(only_torch), "")
    assert after["verdict"] == "pass" and after["sanitizer"]["library_errors"] == 1
    assert after["sanitizer"]["findings"][0]["library"] is True
    check_result(after)


def test_synccheck_barrier_error():
    r = parse(SYNCCHECK)
    assert r.errors == 1
    f = r.findings[0]
    assert (f.kind, f.kernel, f.thread, f.block) == (
        "Barrier error detected. Divergent thread(s) in warp", "reduce_kernel", "5,0,0", "3,0,0")


def test_a_log_cut_short_counts_the_findings_it_printed():
    cut = MEMCHECK.split("========= Target application")[0]
    assert parse(cut).errors == 2
    assert parse("========= COMPUTE-SANITIZER\n").errors == 0


def test_rocm_asan_report():
    r = parse_asan(ASAN)
    assert r.errors == 1
    f = r.findings[0]
    assert (f.kind, f.access, f.size, f.block, f.kernel, f.where) == (
        "heap-buffer-overflow", "write", 4, "10,0,0", "kv_write", "/src/kv.py:31:5")
    assert f.address == "0x7fa9f1c38a28" and f.detail.startswith("40 bytes after")


def _record(verdict="pass", message="") -> dict:
    r = results.Result("runtime", "softmax", "softmax", "fp32", "cuda", "sm_90a", verdict, "gpu",
                       message=message, examples=5,
                       reproduce=reproduce_command("cuda", "softmax", "fp32", None, 7, Checks(sanitize="memcheck")),
                       provenance={"host": "h", "arch": "sm_90a", "torch": "2", "triton": "3", "portcheck": "0",
                                   "timestamp": "2026-12-01T00:00:00", "seed": 7, "command": "portcheck run"})
    return r.to_dict()


def test_an_error_fails_the_case_and_the_record_keeps_the_findings():
    before = _record(message="")
    after = apply(before, "memcheck", parse(MEMCHECK), "tail")
    assert after["verdict"] == "fail"
    assert after["message"] == "memcheck: Invalid __global__ write in oob_store at oob.py:6 (2 errors)"
    assert after["sanitizer"]["findings"][0]["thread"] == "99,0,0"
    assert "--sanitize memcheck" in after["reproduce"]
    check_result(after)
    crashed = apply(_record("error", "AcceleratorError: unspecified launch failure"), "memcheck", parse(MEMCHECK), "")
    assert crashed["verdict"] == "fail" and crashed["message"].endswith("then: AcceleratorError: unspecified launch failure")


def test_warnings_alone_and_clean_logs_leave_the_verdict():
    for log in (RACE_WARNING_ONLY, "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"):
        after = apply(_record(), "racecheck", parse(log), "")
        assert after["verdict"] == "pass" and after["message"] == ""
        check_result(after)
    skipped = apply(_record("skip", "skipped by override"), "memcheck", parse(MEMCHECK), "")
    assert skipped["verdict"] == "skip"


def test_wrap_runs_the_worker_under_the_tool_with_its_own_allocations(tmp_path):
    s = Sanitizer("racecheck", exe=Path("/opt/cuda/bin/compute-sanitizer"))
    cmd = s.wrap(["python", "-m", "portcheck", "run"], tmp_path / "x.log")
    assert cmd[:3] == ["/opt/cuda/bin/compute-sanitizer", "--tool", "racecheck"]
    assert cmd[cmd.index("--log-file") + 1] == str(tmp_path / "x.log")
    assert cmd[cmd.index("--target-processes") + 1] == "all"
    assert cmd[cmd.index("--require-cuda-init") + 1] == "no"   # a child that never touches CUDA is fine
    assert "--error-exitcode" not in cmd      # it would replace the worker's exit status
    assert cmd[-4:] == ["python", "-m", "portcheck", "run"]
    assert s.environ({"A": "1"}, tmp_path / "x.log") == {"A": "1", **NO_CACHING}
    assert s.time_scale > 1


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_tool_is_found_on_path_then_cuda_home_else_a_usage_error_says_where(tmp_path):
    home = tmp_path / "cuda"
    in_home = _executable(home / "bin" / "compute-sanitizer", "#!/bin/sh\n")
    on_path = _executable(tmp_path / "path" / "compute-sanitizer", "#!/bin/sh\n")
    assert find_compute_sanitizer({"PATH": str(on_path.parent), "CUDA_HOME": str(home)}) == on_path
    assert find_compute_sanitizer({"PATH": "", "CUDA_HOME": str(home)}) == in_home
    if Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        pytest.skip("this machine has a CUDA toolkit")
    with pytest.raises(UsageError, match=r"compute-sanitizer .*looked in PATH, .*/usr/local/cuda/bin"):
        find_compute_sanitizer({"PATH": str(tmp_path)})


def test_targets_without_the_tool_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="the interpreter target has no sanitizer"):
        for_target("interpreter", "memcheck")
    with pytest.raises(UsageError, match="unavailable on ROCm"):
        for_target("rocm", "memcheck")
    with pytest.raises(UsageError, match="not a compute-sanitizer tool"):
        for_target("cuda", "address", {"PATH": ""})
    with pytest.raises(UsageError, match="ROCm install with AddressSanitizer.*looked in"):
        for_target("rocm", "address", {"ROCM_PATH": str(tmp_path)})


def test_rocm_address_sets_tritons_asan_switches(tmp_path):
    runtime = tmp_path / "llvm/lib/clang/19/lib/linux/libclang_rt.asan-x86_64.so"
    runtime.parent.mkdir(parents=True)
    runtime.write_text("")
    (tmp_path / "lib/asan").mkdir(parents=True)
    s = for_target("rocm", "address", {"ROCM_PATH": str(tmp_path)})
    log = tmp_path / "a.log"
    env = s.environ({"LD_PRELOAD": "x.so"}, log)
    assert s.wrap(["python"], log) == ["python"]
    assert {k: env[k] for k in ROCM_ASAN_ENV} == ROCM_ASAN_ENV
    assert env["LD_PRELOAD"] == f"{runtime}:x.so"
    assert env["LD_LIBRARY_PATH"].startswith(str(tmp_path / "lib/asan"))
    assert f"log_path={log}" in env["ASAN_OPTIONS"]
    (tmp_path / "a.log.4242").write_text(ASAN)    # ASan appends the pid
    report, _ = s.read(log)
    assert report.findings[0].kernel == "kv_write"


FAKE_SANITIZER = """#!/bin/sh
# stands in for compute-sanitizer: writes a canned log to --log-file and runs the command
while [ $# -gt 0 ]; do
  case "$1" in
    --log-file) log="$2"; shift 2;;
    --*) shift 2;;
    *) break;;
  esac
done
cp "$CANNED_LOG" "$log"
exec "$@"
"""

WORKER = """
import json, sys
from pathlib import Path
from portcheck import results
from portcheck.supervise import finish, inflight_path
case, dtype, path, slot = sys.argv[1:5]
for c, d in [("broken_module", "-"), (case, dtype)]:
    results.append(path, {"kind": "runtime", "case": c, "dtype": d, "verdict": "pass", "message": ""})
finish(inflight_path(Path(path), "cuda", int(slot)), False)   # a worker's normal end: any other is a fault
"""


@pytest.mark.parametrize("jobs", [1, 2])
def test_each_unit_runs_in_its_own_worker_and_gets_its_own_log(tmp_path, jobs):
    exe = _executable(tmp_path / "bin" / "compute-sanitizer", FAKE_SANITIZER)
    logs = {"memcheck": tmp_path / "canned.log"}
    logs["memcheck"].write_text(MEMCHECK)
    out = tmp_path / "out"
    out.mkdir()
    results_path = out / "results.jsonl"
    env = {**os.environ, "CANNED_LOG": str(logs["memcheck"])}
    status = run_each(Sanitizer("memcheck", exe=exe), [("softmax", "fp32"), ("softmax", "fp16")],
                      lambda case, dtype, staged, slot: [sys.executable, "-c", WORKER, case, dtype, str(staged), str(slot)],
                      env, results_path, "cuda", 60, jobs)
    records = results.read(results_path)
    assert status == 1
    # the module error every worker saw is recorded once (first, whichever worker wrote it; the
    # run then puts the units' records in order); each unit's record has its own log's findings
    assert records[0]["case"] == "broken_module" and "sanitizer" not in records[0]
    assert sorted((r["case"], r["dtype"]) for r in records[1:]) == [("softmax", "fp16"), ("softmax", "fp32")]
    for r in records[1:]:
        assert r["verdict"] == "fail" and r["sanitizer"]["errors"] == 2
        assert r["message"].startswith("memcheck: Invalid __global__ write in oob_store")
    assert sorted(p.name for p in (out / "sanitizer").iterdir()) == ["cuda-softmax-fp16.log", "cuda-softmax-fp32.log"]


def _portcheck(*argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "portcheck", *argv], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PATH": os.path.dirname(sys.executable)})


@pytest.mark.parametrize("target, tool, says", [
    ("interpreter", "memcheck", "the interpreter target has no sanitizer"),
    ("rocm", "racecheck", "unavailable on ROCm"),
])
def test_run_refuses_a_target_without_the_tool(tmp_path, target, tool, says):
    root = Path(__file__).resolve().parents[2]
    done = _portcheck("run", "--target", target, "--kernel", "softmax", "--sanitize", tool,
                      "--out", str(tmp_path / "r"), cwd=root)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_run_on_cuda_without_compute_sanitizer_says_where_it_looked(tmp_path):
    if Path("/usr/local/cuda/bin/compute-sanitizer").exists():
        pytest.skip("this machine has a CUDA toolkit")
    root = Path(__file__).resolve().parents[2]
    done = _portcheck("run", "--target", "cuda", "--kernel", "softmax", "--sanitize", "memcheck",
                      "--out", str(tmp_path / "r"), cwd=root)
    assert done.returncode == 2, done.stderr
    assert "looked in PATH" in done.stderr and "/usr/local/cuda/bin" in done.stderr


def test_a_replay_names_the_sanitizer():
    cmd = reproduce_command("cuda", "softmax", "fp16", {"dtype": "fp16", "seed": 1}, None, Checks(sanitize="racecheck"))
    assert "--sanitize racecheck" in cmd and json.dumps({"dtype": "fp16", "seed": 1}, sort_keys=True) in cmd
    assert "--sanitize" not in reproduce_command("cuda", "softmax", "fp16", None, 3, Checks())
    assert Report().headline() == "0 errors"
