#!/usr/bin/env bash
# Issue 17: the default run cold on the lent H200 and its two halves (--shard 1/2, 2/2) in turns
# within one call, so each pair of halves has a cold whole run beside it (the lent machine's speed
# moved by a fifth within the twenty-first and twenty-second sessions' calls: identical halves
# took 98.9 s and 79.5 s together in one call). Round 1 also times the warm run. Each run is
# rounds.sh's (an empty Triton cache, no unit seconds of its own); portcheck's cache folder is
# shared by the rounds (CACHE).
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-second-session/pairs.sh   (DEST gets pairs.tgz)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/pairs
rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS_SH=reports/examples/speed-h200/eighteenth-session/rounds.sh
export CACHE="$OUT/cache"
start=$(date +%s)
save() { tar -czf "$DEST/pairs.tgz.part" -C /tmp --exclude=pairs/cache pairs && mv "$DEST/pairs.tgz.part" "$DEST/pairs.tgz"; }
round() {   # round NAME ROUNDS
    ROUNDS="$2" OUT="$OUT/$1" bash "$ROUNDS_SH" | grep '^rounds:' | sed "s/^/$1 /" | tee -a "$OUT/summary.txt"; save; }
elapsed() { echo $(( $(date +%s) - start )); }
round r1 "settle cold warm half1 half2"
if [ "$(elapsed)" -lt 300 ]; then round r2 "cold half1 half2"; fi
if [ "$(elapsed)" -lt 420 ]; then round r3 "cold"; fi
