#!/usr/bin/env bash
# Issue 17, twenty-ninth session: a cold whole run and its two halves on the lent H200, every process
# traced (../twenty-seventh-session/trace/run.sh; timeline.py reads its events). DEST gets trace.tgz.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-ninth-session/run.sh
set -uo pipefail
DEST=${DEST:-/tmp}
ROUNDS=${ROUNDS:-"cold half1 half2"} DEST=$DEST bash reports/examples/speed-h200/twenty-seventh-session/trace/run.sh
