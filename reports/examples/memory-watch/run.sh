#!/usr/bin/env bash
# A planted-bug probe written through the public API (bug_* cases, each with an ok_* twin), run on
# the lent H200's CUDA target: PROBE=probe2 (the default, this folder's probe2.py) or PROBE=probe3
# (reports/examples/planted-bugs-3/probe3.py), PROBE=probe4 (planted-bugs-4/probe4.py) or PROBE=probe5
# (planted-bugs-5/probe4.py: its module kept the name probe4, its cases are p4_*); DEST gets $PROBE.tgz.
#   run: DEST=$OUT bash reports/examples/memory-watch/run.sh
#        PROBE=probe3 DEST=$OUT bash reports/examples/memory-watch/run.sh
# Only the probe's own cases run (--kernel 'bug_*,ok_*', probe 5's 'p4_*'), as on the interpreter.
# LIMIT (seconds, default 420) bounds the run, so that a call's other work leaves it what is left.
set -uo pipefail
DEST=${DEST:-/tmp}
PROBE=${PROBE:-probe2}
module=$PROBE kernels='bug_*,ok_*'
case $PROBE in
  probe2) here=$PWD/reports/examples/memory-watch ;;
  probe3) here=$PWD/reports/examples/planted-bugs-3 ;;
  probe4) here=$PWD/reports/examples/planted-bugs-4 ;;
  probe5) here=$PWD/reports/examples/planted-bugs-5 module=probe4 kernels='p4_*' ;;
  *) echo "PROBE must be probe2, probe3, probe4 or probe5, got $PROBE" >&2; exit 2 ;;
esac
OUT=/tmp/$PROBE
. reports/examples/lent_machine.sh
lent_setup "$OUT" || exit 1
export XDG_CACHE_HOME=$OUT/cache TRITON_CACHE_DIR=$OUT/triton
(cd "$here" && timeout "${LIMIT:-420}" env PYTHONPATH="$here:$PWD" python3 -m portcheck run --target cuda --cases "$module" \
  --kernel "$kernels" --no-time --out "$OUT/cuda") > "$OUT/cuda.log" 2>&1
echo "$PROBE cuda rc $?" >> "$OUT/summary.txt"
rm -rf "$OUT"/*/.claims-*
tar -czf "$DEST/$PROBE.tgz" -C /tmp --exclude="$PROBE/cache" --exclude="$PROBE/triton" "$PROBE"
