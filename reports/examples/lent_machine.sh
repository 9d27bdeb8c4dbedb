# Sourced by the evidence scripts that run on the lent GPU machine, from the repository root.
# `lent_setup DIR` empties DIR, installs the working tree there (editable, no dependencies: the lent
# machine reaches no registry) and writes DIR/gpu.txt: the GPU, its driver and clock, the cores and
# the CPU model (leases land on different hosts),
# torch and Triton, the copy's HEAD and its uncommitted files. `stamped` prefixes each line of its
# input with the seconds since it started.
lent_setup() {
  local dir=$1
  rm -rf "$dir"; mkdir -p "$dir"
  python3 -m pip install --no-deps --no-build-isolation -e . > "$dir/install.log" 2>&1 || { tail "$dir/install.log"; return 1; }
  { nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; nproc; lscpu | grep -E "^(Model name|Thread\(s\) per core|Core\(s\) per socket|Socket\(s\))"
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
    git rev-parse HEAD; git status --short | head -30; } > "$dir/gpu.txt" 2>&1
}

stamped() {
  python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)'
}
