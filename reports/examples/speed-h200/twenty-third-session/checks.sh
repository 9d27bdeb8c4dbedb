#!/usr/bin/env bash
# Issue 17 on the lent H200: what the standbys (supervise.Standby) must not change, on a GPU: a
# usage error found after they started (one message, exit 2, no standby left running), a --gpus
# index that does not exist, a sanitizer run (which starts none), a run stopped by SIGTERM (a
# partial report, status 143; a background job of a script ignores SIGINT, so not Ctrl-C's
# signal), and with PYTEST=1 the fault and worker tests of the harness. Each line: what, status, seconds.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-third-session/checks.sh   (DEST gets checks.txt)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/checks
rm -rf "$OUT"; mkdir -p "$OUT"
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 || { tail "$OUT/install.log"; exit 1; }
export XDG_CACHE_HOME=$OUT/cache TRITON_CACHE_DIR=$OUT/triton
log=$DEST/checks.txt; : > "$log"
check() {   # check NAME CMD...: its status, seconds, stderr's error lines and the standbys left
  local name=$1; shift; local t0; t0=$(date +%s%N)
  "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"; local rc=$?
  printf '%-12s rc %s in %5.1f s; error lines %s; standbys left %s\n' "$name" "$rc" \
    "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }')" "$(grep -c 'error:' "$OUT/$name.err")" \
    "$(pgrep -fc -- '--standby' || true)" | tee -a "$log"
  grep 'error:' "$OUT/$name.err" | head -2 | cut -c1-160 | sed 's/^/    /' | tee -a "$log"; }
run() { python3 -m portcheck run --target cuda "$@"; }
check warm-up run --kernel softmax --dtype fp32 --no-time --out "$OUT/r0"
check bad-kernel run --kernel no_such_case --out "$OUT/r1"
check bad-gpus run --kernel softmax --gpus 5 --out "$OUT/r2"
check bad-jobs run --kernel softmax --jobs 0 --out "$OUT/r3"
check memcheck run --kernel softmax --dtype fp32 --sanitize memcheck --out "$OUT/r4"
grep -E 'checking|worker|pass|fail' "$OUT/memcheck.out" | head -4 | cut -c1-160 | sed 's/^/    /' | tee -a "$log"
# a stopped run: SIGTERM once the checks are under way (its timing worker is then waiting for them)
python3 -m portcheck run --target cuda --kernel 'softmax*,rmsnorm*,layernorm*' --out "$OUT/r5" > "$OUT/stop.out" 2> "$OUT/stop.err" &
pid=$!
for _ in $(seq 150); do [ -s "$OUT/r5/results.jsonl" ] && break; sleep 0.2; done
kill -TERM $pid; t0=$(date +%s%N)
for _ in $(seq 300); do kill -0 $pid 2> /dev/null || break; sleep 0.2; done   # at most 60 s
if kill -0 $pid 2> /dev/null; then kill -9 $pid; rc=hung; else wait $pid; rc=$?; fi
sleep 1.5   # an orphaned worker ends itself within a second
printf 'stopped      rc %s, %5.1f s after SIGTERM; run.json status %s; workers left %s\n' "$rc" \
  "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 - 1.5 }')" \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$OUT/r5/run.json" 2>&1 | tail -1)" \
  "$(pgrep -fc -- "$OUT/r5" || true)" | tee -a "$log"
[ -n "${PYTEST:-}" ] || exit 0   # PYTEST=1: also the harness's fault and worker tests
t0=$(date +%s)
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/harness/test_faults.py tests/harness/test_workers.py \
    --target=cuda --require-device -n 8 > "$OUT/pytest.log" 2>&1
echo "pytest harness (faults, workers) rc $? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/pytest.log")" | tee -a "$log"
cp "$OUT/pytest.log" "$DEST/checks-pytest.log"
