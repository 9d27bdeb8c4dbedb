#!/usr/bin/env bash
# Issue 17, twenty-ninth session: what a worker's start costs on the lent H200 (probe_start.py, 1
# and 16 processes at once), then a cold whole run and a cold half 2, every process traced
# (../twenty-seventh-session/trace/run.sh; timeline.py reads its events). DEST gets start.txt and trace.tgz.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-ninth-session/run.sh
set -uo pipefail
DEST=${DEST:-/tmp}
here=reports/examples/speed-h200/twenty-ninth-session
. reports/examples/lent_machine.sh
lent_setup /tmp/start || exit 1
{ cat /tmp/start/gpu.txt
  for n in 1 16; do python3 "$here/probe_start.py" "$n" "$(mktemp -d)"; done; } > "$DEST/start.txt" 2>&1
ROUNDS=${ROUNDS:-"cold half2"} DEST=$DEST bash reports/examples/speed-h200/twenty-seventh-session/trace/run.sh
