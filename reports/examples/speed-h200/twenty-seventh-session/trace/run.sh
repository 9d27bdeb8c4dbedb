#!/usr/bin/env bash
# Issue 17: a cold default run on the lent H200 with every process traced (sitecustomize.py here):
# which step of each check compiled what its warm-up did not. DEST gets trace.tgz.
#   run: [ROUNDS="cold half1"] DEST=$OUT bash reports/examples/speed-h200/twenty-seventh-session/trace/run.sh
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/trace
here=$PWD/reports/examples/speed-h200/twenty-seventh-session/trace
. reports/examples/lent_machine.sh
lent_setup "$OUT" || exit 1
export XDG_CACHE_HOME=$OUT/cache
# a first run fills the bytecode cache and reads the libraries from disk
TRITON_CACHE_DIR=$OUT/triton-settle python3 -m portcheck run --target cuda --kernel softmax --dtype fp32 --no-time \
  --out "$OUT/settle" > "$OUT/settle.log" 2>&1
for round in ${ROUNDS:-cold}; do   # cold: the whole matrix; half1 / half2: --shard 1/2, 2/2; each cold
  shard=(); [ "$round" != cold ] && shard=(--shard "${round#half}/2")
  rm -f "$XDG_CACHE_HOME/portcheck/unit-seconds.json"; mkdir -p "$OUT/events-$round"
  (PYTHONPATH=$here TRACE_COMPILES=$OUT/events-$round TRITON_CACHE_DIR=$OUT/triton-$round timeout 200 \
    python3 -m portcheck run --target cuda --out "$OUT/$round" "${shard[@]}" 2>&1) | stamped > "$OUT/$round.log"
  echo "trace: $round rc ${PIPESTATUS[0]}" >> "$OUT/summary.txt"
  python3 "$here/compiles.py" "$OUT/events-$round" 40 > "$OUT/compiles-$round.txt" 2>&1
done
rm -rf "$OUT"/*/.claims-*
tar -czf "$DEST/trace.tgz" -C /tmp --exclude=trace/cache --exclude='trace/triton*' trace
