#!/usr/bin/env bash
# Issue 17: where a run's first seconds go on the lent H200, before any check: the supervisor's
# start (cProfile), one worker's start alone and sixteen at once (each under cProfile, a unit
# none of them but one claims), nvidia-smi alone and sixteen at once, and torch's import.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-third-session/startup.sh  (DEST gets startup.tgz)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/startup
rm -rf "$OUT"; mkdir -p "$OUT"
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { tail "$OUT/install.log"; exit 1; }
export XDG_CACHE_HOME=$OUT/cache TRITON_CACHE_DIR=$OUT/triton
{ nvidia-smi --query-gpu=name,driver_version --format=csv; nproc; git rev-parse HEAD; git status --short | head; } > "$OUT/gpu.txt" 2>&1
ms() { python3 -c 'import time; print(f"{time.time():.3f}")'; }
wall() {   # wall NAME CMD...: seconds, appended to times.txt
  local name=$1; shift; local a b; a=$(ms); "$@" > "$OUT/$name.out" 2>&1; b=$(ms)
  echo "$name $(python3 -c "print(f'{$b - $a:.3f}')")" | tee -a "$OUT/times.txt"; }
# a first run fills the bytecode cache and reads the libraries from disk
python3 -m portcheck run --target cuda --kernel softmax --dtype fp32 --no-time --out "$OUT/settle" > "$OUT/settle.log" 2>&1
for i in 1 2 3; do
  wall "import-torch-$i" python3 -c 'import torch'
  wall "import-torch-triton-$i" python3 -c 'import torch, triton'
  wall "cli-parser-$i" python3 -c 'import portcheck.cli as c; c.build_parser()'
  wall "nvidia-smi-$i" nvidia-smi --query-gpu=driver_version --format=csv,noheader
  wall "nvidia-smi-x16-$i" bash -c 'for j in $(seq 16); do nvidia-smi --query-gpu=driver_version --format=csv,noheader & done; wait'
  wall "proc-version-$i" cat /proc/driver/nvidia/version
done
# the supervisor under cProfile: one unit, one worker
wall supervisor python3 -m cProfile -o "$OUT/supervisor.prof" -m portcheck run --target cuda --kernel softmax --dtype fp32 --no-time --jobs 1 --out "$OUT/sup"
# one worker alone, then sixteen at once on one unit (the fifteen that claim nothing show the start)
w() { python3 -m cProfile -o "$OUT/w$1.prof" -m portcheck run --target cuda --seed 0 --worker "$2/results.jsonl" --kernel softmax --dtype fp32 --no-time --worker-slot "$1"; }
mkdir -p "$OUT/one" "$OUT/many"
wall worker-alone w 0 "$OUT/one"
a=$(ms); for i in $(seq 1 16); do ( s=$(ms); w "$i" "$OUT/many" > "$OUT/w$i.out" 2>&1; e=$(ms); echo "w$i $s $e" >> "$OUT/many.txt" ) & done; wait; b=$(ms)
echo "workers-x16 $(python3 -c "print(f'{$b - $a:.3f}')")" | tee -a "$OUT/times.txt"
python3 - "$OUT" <<'PY' > "$OUT/profiles.txt" 2>&1
import pstats, sys, glob, os
out = sys.argv[1]
for name in ["supervisor.prof", "w0.prof", "w2.prof", "w9.prof"]:
    p = os.path.join(out, name)
    if not os.path.exists(p):
        continue
    print("=" * 30, name)
    s = pstats.Stats(p)
    s.sort_stats("cumulative").print_stats(45)
PY
cp "$OUT/times.txt" "$DEST/" 2>/dev/null
tar -czf "$DEST/startup.tgz" -C /tmp --exclude=startup/cache --exclude=startup/triton startup
