#!/usr/bin/env bash
# Issue 17 on one lent H200 (the device tool's `run`, from the repository root): the main job from
# an empty Triton cache, again warm from the cache it filled, then its two halves (--shard 1/2,
# 2/2) each from an empty Triton cache. Each cold run starts with no unit seconds of its own
# (portcheck's History file removed: claims ordered by the shipped figures, as on a fresh
# machine); the rest of portcheck's cache folder (the workers' bytecode, where Python keeps none
# beside torch's sources, as on the lent machine) is the call's, filled by its first run
# (`settle`). Each log line carries the seconds since its run started.
#   run: bash reports/examples/speed-h200/eighteenth-session/rounds.sh
# ROUNDS="settle half1 half2" runs only the rounds named (default: all five, in this order);
# CACHE=DIR keeps portcheck's cache folder there, across calls of this script, and leaves it.
set -uo pipefail
OUT=${OUT:-/tmp/rounds}
CACHE=${CACHE:-$OUT/cache}
mkdir -p "$OUT/runs"
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/runs/install.log" 2>&1 \
    || { tail -20 "$OUT/runs/install.log"; echo "rounds: the install failed"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  nproc; git rev-parse HEAD 2>/dev/null || true; git status --short 2>/dev/null | head -20; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

stamped() {   # each line with the seconds since the run started
  python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)'
}

one() {   # one: NAME LIMIT_S [VAR=VALUE...] -- [portcheck run args...]
  local name=$1 limit=$2; shift 2
  [[ " ${ROUNDS:-settle cold warm half1 half2} " == *" $name "* ]] || return 0
  local vars=(); while [ "$1" != "--" ]; do vars+=("$1"); shift; done; shift
  local start; start=$(date +%s%N)
  env TRITON_CACHE_DIR="$(mktemp -d)" XDG_CACHE_HOME="$CACHE" "${vars[@]}" \
      timeout "$limit" python3 -m portcheck run --target "${TARGET:-cuda}" --out "$OUT/runs/$name" "$@" 2>&1 | stamped > "$OUT/runs/$name.log"
  local rc=${PIPESTATUS[0]}
  printf 'rounds: %-10s rc %s in %.1f s: %s\n' "$name" "$rc" "$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')" \
      "$(grep -E 'cases: 100%|timed: 100%' "$OUT/runs/$name.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
}

# a first run reads torch's and Triton's libraries from disk: a short one first, so that the runs compare
one settle 60 -- --kernel softmax --dtype fp32
fresh() { rm -f "$CACHE/portcheck/unit-seconds.json"; }
keep=(TRITON_CACHE_DIR="$OUT/triton-cache")
fresh; one cold 150 "${keep[@]}" --
one warm 80 "${keep[@]}" --
rm -rf "$OUT/triton-cache"
fresh; one half1 110 -- --shard 1/2
fresh; one half2 110 -- --shard 2/2
ls "$CACHE/portcheck" > "$OUT/runs/cache-folder.txt" 2>&1
rm -rf "$OUT"/runs/*/.claims-* "$OUT"/runs/*/*.lock "$OUT/cache"
tar -czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "${OUT:?}/runs"
