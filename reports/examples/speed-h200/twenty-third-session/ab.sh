#!/usr/bin/env bash
# Issue 17: the session's start (portcheck/commands/run.py's standbys) against the tree it started
# from, in turns within one call on the lent H200: a warm single-unit run (how long a run takes to
# start), the whole default matrix cold, and its two halves (--shard 1/2, 2/2), each from an empty
# Triton cache and with no unit seconds of its own (claims by the shipped figures). `base` is the
# device copy's HEAD (the session's starting commit, unpacked with git archive); `new` is the
# working tree. Each log line carries the seconds since its run started.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-third-session/ab.sh   (DEST gets ab.tgz)
# SEQ="..." sets the rounds (below; call 2 ran the default, call 3 `SEQ` as in this folder's README).
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/ab
rm -rf "$OUT"; mkdir -p "$OUT/runs" "$OUT/base"
git archive HEAD | tar -x -C "$OUT/base"
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { tail "$OUT/install.log"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; nproc
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  git rev-parse HEAD; git status --short | head -30; } > "$OUT/gpu.txt" 2>&1
export XDG_CACHE_HOME=$OUT/cache
start=$(date +%s)
stamped() { python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)'; }
save() { tar -czf "$DEST/ab.tgz.part" -C /tmp --exclude=ab/cache --exclude=ab/base --exclude='ab/triton*' ab && mv "$DEST/ab.tgz.part" "$DEST/ab.tgz"; }
one() {   # one NAME TREE LIMIT CACHE -- portcheck run args...
  local name=$1 tree=$2 limit=$3 cache=$4; shift 5
  [ "$cache" = fresh ] && { cache=$(mktemp -d /tmp/ab/triton-XXXX); rm -f "$XDG_CACHE_HOME/portcheck/unit-seconds.json"; }
  local dir=$PWD; [ "$tree" = base ] && dir=$OUT/base
  local t0; t0=$(date +%s%N)
  (cd "$dir" && TRITON_CACHE_DIR=$cache timeout "$limit" python3 -m portcheck run --target cuda --out "$OUT/runs/$name" "$@" 2>&1) | stamped > "$OUT/runs/$name.log"
  local rc=${PIPESTATUS[0]}
  printf 'ab: %-12s %-4s rc %s in %6.1f s (%s s elapsed): %s\n' "$name" "$tree" "$rc" \
    "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')" "$(( $(date +%s) - start ))" \
    "$(grep -E 'checking with|cases: 100%|timed: 100%' "$OUT/runs/$name.log" | sed 's/portcheck run.*//' | tr -s ' ' | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
  save; }
left() { [ $(( $(date +%s) - start )) -lt "$1" ]; }
WARM=$OUT/triton-warm
# SEQ: the rounds in order, each NAME:TREE:KIND (KIND small, cold, half1 or half2); a whole run
# starts only in the call's first 420 s, a half in its first 370 s (a call may run 600 s)
SEQ=${SEQ:-"settle:new:small settle-b:base:small small-b1:base:small small-n1:new:small small-b2:base:small
  small-n2:new:small small-b3:base:small small-n3:new:small cold-n1:new:cold cold-b1:base:cold
  half1-n:new:half1 half2-n:new:half2 half1-b:base:half1 half2-b:base:half2 cold-n2:new:cold"}
budget() { case $1 in cold) echo 420;; half1|half2) echo 370;; *) echo 500;; esac; }
for round in $SEQ; do
  IFS=: read -r name tree kind <<< "$round"
  left "$(budget "$kind")" || continue
  case $kind in
    small) one "$name" "$tree" 60 "$WARM" -- --kernel softmax,rmsnorm --dtype fp32 --no-time;;
    cold) one "$name" "$tree" 150 fresh --;;
    half1) one "$name" "$tree" 110 fresh -- --shard 1/2;;
    half2) one "$name" "$tree" 110 fresh -- --shard 2/2;;
  esac
done
rm -rf "$OUT"/runs/*/.claims-* "$OUT"/triton-*
save
