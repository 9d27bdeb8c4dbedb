#!/usr/bin/env bash
# Issue 17: a cold default run on the lent H200 with every process traced (sitecustomize.py here):
# which step of each check compiled what its warm-up did not. DEST gets trace.tgz.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-seventh-session/trace/run.sh
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/trace
here=$PWD/reports/examples/speed-h200/twenty-seventh-session/trace
. reports/examples/lent_machine.sh
lent_setup "$OUT" || exit 1
mkdir -p "$OUT/events"
export XDG_CACHE_HOME=$OUT/cache
# a first run fills the bytecode cache and reads the libraries from disk
TRITON_CACHE_DIR=$OUT/triton-settle python3 -m portcheck run --target cuda --kernel softmax --dtype fp32 --no-time \
  --out "$OUT/settle" > "$OUT/settle.log" 2>&1
(PYTHONPATH=$here TRACE_COMPILES=$OUT/events TRITON_CACHE_DIR=$OUT/triton timeout 200 \
  python3 -m portcheck run --target cuda --out "$OUT/cold" 2>&1) | stamped > "$OUT/cold.log"
echo "trace: cold rc ${PIPESTATUS[0]}" >> "$OUT/summary.txt"
python3 "$here/compiles.py" "$OUT/events" 40 > "$OUT/compiles.txt" 2>&1
rm -rf "$OUT"/*/.claims-*
tar -czf "$DEST/trace.tgz" -C /tmp --exclude=trace/cache --exclude='trace/triton*' trace
