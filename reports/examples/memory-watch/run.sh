#!/usr/bin/env bash
# A planted-bug probe written through the public API (probe2.py: 19 bug_* cases, each with an ok_*
# twin), run on the lent H200's CUDA target; DEST gets probe2.tgz.
#   run: DEST=$OUT bash reports/examples/memory-watch/run.sh
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/probe2
. reports/examples/lent_machine.sh
lent_setup "$OUT" || exit 1
export XDG_CACHE_HOME=$OUT/cache TRITON_CACHE_DIR=$OUT/triton
here=$PWD/reports/examples/memory-watch
(cd "$here" && timeout 420 env PYTHONPATH="$here:$PWD" python3 -m portcheck run --target cuda --cases probe2 \
  --no-time --out "$OUT/cuda") > "$OUT/cuda.log" 2>&1
echo "probe2 cuda rc $?" >> "$OUT/summary.txt"
rm -rf "$OUT"/*/.claims-*
tar -czf "$DEST/probe2.tgz" -C /tmp --exclude=probe2/cache --exclude=probe2/triton probe2
