#!/usr/bin/env bash
# Issue 17: where a run's time goes on the lent H200, with the run's own files kept: the default
# matrix cold (empty Triton cache, no unit history), then warm, then its two halves cold, each with
# the CPU's use sampled every 0.5 s (/proc/stat) and the Triton cache's kernels counted by name.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-fourth-session/profile.sh  (DEST gets profile.tgz)
# ROUNDS="cold warm half1 half2" sets the rounds, each KIND or KIND-TREE: TREE `base` runs the
# device copy's HEAD (unpacked with git archive: the lent copy's HEAD is the session's start), `new`
# (the default) its working tree, `nostride` the working tree with runner.check's strided inputs
# taken out (one line, below: what they cost the main job); every tree's warm round reuses that
# tree's last cold cache. PROBE=1 first shows what a check worker's GPU waits cost the CPU
# (probe_waits.py); COLCASES=1 first runs reports/examples/strided-inputs-h200/colcases.py (the
# twenty-fifth session added `nostride` and COLCASES; its call ran a copy of this script). TREE
# `polesN` runs the working tree with N warm-up threads a long pole (precompile.POLE_THREADS, 8 on
# main): the twenty-ninth session's trace found a kernel's warm-up compile costing 1.5 times the
# CPU in the whole run that it cost in a half.
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/profile
ROUNDS=${ROUNDS:-"cold warm half1 half2"}
. reports/examples/lent_machine.sh
lent_setup "$OUT" || exit 1
mkdir -p "$OUT/runs" "$OUT/base"
git archive HEAD | tar -x -C "$OUT/base"
case " $ROUNDS " in *-nostride\ *)   # nostride: the working tree, its strided inputs' step returning at once
  mkdir -p "$OUT/nostride" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$OUT/nostride"
  sed -i 's/^        if COLUMNS_KEY in search.largest:   # the case.s own key of that name$/        if True:  # nostride/' "$OUT/nostride/portcheck/runner.py"
  grep -q '^        if True:  # nostride$' "$OUT/nostride/portcheck/runner.py" || { echo "nostride: the line to replace is gone"; exit 1; };;
esac
for tree in $(tr ' ' '\n' <<< "$ROUNDS" | sed -n 's/^.*-\(poles[0-9][0-9]*\)$/\1/p' | sort -u); do
  mkdir -p "$OUT/$tree" && git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$OUT/$tree"
  sed -i "s/^POLE_THREADS = 8$/POLE_THREADS = ${tree#poles}  # $tree/" "$OUT/$tree/portcheck/precompile.py"
  grep -q "^POLE_THREADS = ${tree#poles}  # $tree$" "$OUT/$tree/portcheck/precompile.py" || { echo "$tree: POLE_THREADS = 8 is gone"; exit 1; }
done
export XDG_CACHE_HOME=$OUT/cache
start=$(date +%s)
cpu() {   # cpu FILE: the share of all CPUs busy, every 0.5 s, until killed (exec: the kill reaches python)
  exec python3 -u -c 'import sys, time
def read():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f), f[3] + f[4]
t0 = time.time(); a = read()
while True:
    time.sleep(0.5); b = read()
    print(f"{time.time() - t0:6.1f} {1 - (b[1] - a[1]) / max(1, b[0] - a[0]):.2f}", flush=True); a = b' > "$1"; }
save() { tar -czf "$DEST/profile.tgz.part" -C /tmp --exclude=profile/cache --exclude=profile/base --exclude=profile/nostride --exclude='profile/poles*' \
  --exclude='profile/triton*' profile && mv "$DEST/profile.tgz.part" "$DEST/profile.tgz"; }
kernels() {   # kernels CACHE FILE: compiled kernels per name in a Triton cache
  find "$1" -name '*.json' ! -name '__grp__*' -printf '%f\n' 2>/dev/null | sed 's/\.json$//' | sort | uniq -c | sort -rn > "$2"; }
one() {   # one NAME LIMIT CACHE -- portcheck run args...  (TREE: base or new)
  local name=$1 limit=$2 cache=$3; shift 4
  local dir=$PWD; [ "$TREE" != new ] && dir=$OUT/$TREE   # base, nostride, polesN
  cpu "$OUT/runs/$name.cpu" & local sampler=$!
  # the timing worker's file, folded into the records (and removed) as the run ends
  (while sleep 0.1; do cp -f "$OUT/runs/$name/.cuda.timings.jsonl" "$OUT/runs/$name.timings.jsonl" 2>/dev/null; done) & local copier=$!
  local t0; t0=$(date +%s%N)
  (cd "$dir" && TRITON_CACHE_DIR=$cache timeout "$limit" python3 -m portcheck run --target cuda --out "$OUT/runs/$name" "$@" 2>&1) | stamped > "$OUT/runs/$name.log"
  local rc=${PIPESTATUS[0]}
  kill "$sampler" "$copier" 2>/dev/null; wait "$sampler" "$copier" 2>/dev/null
  kernels "$cache" "$OUT/runs/$name.kernels"
  printf 'profile: %-12s rc %s in %6.1f s (%s s elapsed)\n' "$name" "$rc" \
    "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')" "$(( $(date +%s) - start ))" | tee -a "$OUT/summary.txt"
  save; }
left() { [ $(( $(date +%s) - start )) -lt "$1" ]; }
# a first run fills the bytecode cache and reads the libraries from disk
(TRITON_CACHE_DIR=$OUT/triton-settle python3 -m portcheck run --target cuda --kernel softmax --dtype fp32 --no-time --out "$OUT/runs/settle" > "$OUT/runs/settle.log" 2>&1)
[ "${PROBE:-0}" = 1 ] && python3 reports/examples/speed-h200/twenty-fourth-session/probe_waits.py > "$OUT/probe-waits.txt" 2>&1
if [ "${COLCASES:-0}" = 1 ]; then
  (timeout 150 env PYTHONPATH="$PWD/reports/examples/strided-inputs-h200:$PWD" TRITON_CACHE_DIR=$OUT/triton-colcases \
    python3 -m portcheck run --target cuda --cases colcases --kernel 'col_*' --no-time --out "$OUT/runs/colcases" 2>&1) | stamped > "$OUT/runs/colcases.log"
  echo "profile: colcases rc ${PIPESTATUS[0]} ($(( $(date +%s) - start )) s elapsed)" | tee -a "$OUT/summary.txt"; save
fi
n=0
for round in $ROUNDS; do
  kind=${round%%-*}; TREE=new; [ "$kind" != "$round" ] && TREE=${round#*-}
  whole=$OUT/triton-whole-$TREE
  n=$((n + 1)); name=$n-$round   # each round its own output folder (a used one is refused)
  case $kind in
    cold) left 420 && { rm -rf "$whole"; rm -f "$XDG_CACHE_HOME/portcheck/unit-seconds.json"; one "$name" 150 "$whole" --; };;
    warm) left 490 && one "$name" 100 "$whole" --;;
    half1|half2) left 450 && { rm -f "$XDG_CACHE_HOME/portcheck/unit-seconds.json"
                   one "$name" 110 "$(mktemp -d "$OUT/triton-XXXX")" -- --shard "${kind#half}/2"; };;
  esac
done
rm -rf "$OUT"/runs/*/.claims-*
save
