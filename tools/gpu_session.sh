#!/usr/bin/env bash
# One call on a lent GPU machine (the `device` tool's `run`, from the repository root): install
# portcheck without dependencies (the machine has torch, triton, pytest, hypothesis, xdist and
# tabulate, and no registry), run the GPU tests that no CPU can run, then the main job from an
# empty Triton cache and again from the cache it filled (issue 17's cold and warm figures).
# Everything it keeps lies under $OUT (six files: the device brings back eight at most).
#   run: bash tools/gpu_session.sh [pytest paths...]      (default: the GPU-only harness tests)
set -uo pipefail
OUT=${OUT:-/tmp/portcheck-gpu}
mkdir -p "$OUT"
TESTS=("$@")
[ ${#TESTS[@]} -gt 0 ] || TESTS=(tests/harness/test_far_rows.py tests/harness/test_autotuned.py
                                 tests/harness/test_guards.py tests/harness/test_diagnose.py
                                 tests/kernels/test_long_rows.py)
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
    || { tail -20 "$OUT/install.log"; echo "gpu_session: the install failed"; exit 1; }
rm "$OUT/install.log"   # kept only when it failed: $OUT's eight files go to the runs
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  git rev-parse HEAD 2>/dev/null || true; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

start=$(date +%s)
timeout 240 python3 -m pytest -q -n 4 -p no:cacheprovider --target=cuda --require-device "${TESTS[@]}" > "$OUT/gpu-pytest.log" 2>&1
echo "gpu_session: pytest rc $? (124: stopped at 240 s) in $(( $(date +%s) - start )) s: $(tail -1 "$OUT/gpu-pytest.log")"

export TRITON_CACHE_DIR; TRITON_CACHE_DIR=$(mktemp -d)   # a cold cache: the figure #17 asks for
start=$(date +%s)
python3 -m portcheck run --target cuda --out "$OUT/main-job" > "$OUT/main-job.log" 2>&1
echo "gpu_session: main job rc $? in $(( $(date +%s) - start )) s (cold Triton cache)"
tail -6 "$OUT/main-job.log"
start=$(date +%s)
python3 -m portcheck run --target cuda --out "$OUT/main-job-warm" > "$OUT/main-job-warm.log" 2>&1
echo "gpu_session: main job rc $? in $(( $(date +%s) - start )) s (warm: the cache the cold run filled)"
tail -6 "$OUT/main-job-warm.log"
# $OUT brings back 8 files at most: each report folder travels as one archive
for d in main-job main-job-warm; do tar -czf "$OUT/$d.tgz" -C "$OUT" --exclude .lock "$d" && rm -rf "${OUT:?}/$d"; done
