#!/usr/bin/env bash
# Issue 17's long poles on one lent H200 (the device tool's `run`, from the repository root): the
# main job from an empty Triton cache with no warm-up (PORTCHECK_PRECOMPILE=0), then as shipped
# (a warm-up for the long poles only), then the shipped code's two halves (--shard 1/2, 2/2), each
# with its own empty Triton cache and portcheck cache (so every run orders its claims by the
# shipped unit seconds alone). Each log line carries the seconds since its run started.
#   run: bash reports/examples/speed-h200/seventeenth-session/poles.sh          (ROUND=2: cold, warm, halves, plain)
set -uo pipefail
OUT=${OUT:-/tmp/poles}
mkdir -p "$OUT/runs"
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/runs/install.log" 2>&1 \
    || { tail -20 "$OUT/runs/install.log"; echo "poles: the install failed"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,memory.total --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  nproc; git rev-parse HEAD 2>/dev/null || true; git status --short 2>/dev/null | head -20; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
began=$(date +%s)

stamped() {   # each line with the seconds since the run started
  python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)'
}

one() {   # one: NAME LIMIT_S [VAR=VALUE...] -- [portcheck run args...]
  local name=$1 limit=$2; shift 2
  local vars=(); while [ "$1" != "--" ]; do vars+=("$1"); shift; done; shift
  local start; start=$(date +%s%N)
  env TRITON_CACHE_DIR="$(mktemp -d)" XDG_CACHE_HOME="$(mktemp -d)" "${vars[@]}" \
      timeout "$limit" python3 -m portcheck run --target "${TARGET:-cuda}" --out "$OUT/runs/$name" "$@" 2>&1 | stamped > "$OUT/runs/$name.log"
  local rc=${PIPESTATUS[0]}
  printf 'poles: %-10s rc %s in %.1f s: %s\n' "$name" "$rc" "$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')" \
      "$(grep -E 'cases: 100%|timed: 100%' "$OUT/runs/$name.log" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
}

# a first run reads torch's and Triton's libraries from disk (the first whole run of the first
# call took 106 s, the same run later 74 s): a short one first, so that the runs compare
one settle 60 -- --kernel softmax --dtype fp32
case "${ROUND:-1}" in
1)  one plain 150 PORTCHECK_PRECOMPILE=0 --
    one poles 150 --
    one half1 110 -- --shard 1/2
    one half2 110 -- --shard 2/2
    # the same again, in the other order, while the call has the time
    [ $(( $(date +%s) - began )) -lt 360 ] && one poles-2 110 --
    [ $(( $(date +%s) - began )) -lt 440 ] && one plain-2 130 PORTCHECK_PRECOMPILE=0 -- ;;
2)  # cold, then warm from the cache (Triton's and portcheck's) that the cold run filled
    keep=(TRITON_CACHE_DIR="$OUT/triton-cache" XDG_CACHE_HOME="$OUT/portcheck-cache")
    one poles 150 "${keep[@]}" --
    one poles-warm 80 "${keep[@]}" --
    rm -rf "$OUT/triton-cache" "$OUT/portcheck-cache"
    one half1 110 -- --shard 1/2
    one half2 110 -- --shard 2/2
    [ $(( $(date +%s) - began )) -lt 400 ] && one plain 130 PORTCHECK_PRECOMPILE=0 -- ;;
esac
rm -rf "$OUT"/runs/*/.claims-* "$OUT"/runs/*/*.lock
tar -czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "${OUT:?}/runs"
