#!/usr/bin/env bash
# Issue 17, twenty-first session, call 4: the default run on the lent H200 cold, then its
# halves as --shard deals them now (longest first by the shipped seconds, in a snake) and as it
# dealt them before (round-robin in the matrix's order, `rr`: workers.shard's last line set back
# in the device copy), side by side, each half from an empty Triton cache and no unit seconds of
# its own (rounds.sh); a second snake pair while the call has time.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-first-session/shard.sh   (DEST gets shard.tgz)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/shard
rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS_SH=reports/examples/speed-h200/eighteenth-session/rounds.sh
export CACHE="$OUT/cache"
start=$(date +%s)
save() { tar -czf "$DEST/shard.tgz.part" -C /tmp --exclude=shard/cache shard && mv "$DEST/shard.tgz.part" "$DEST/shard.tgz"; }
cp portcheck/workers.py "$OUT/workers.snake.py"   # the device copy's git is the session's base, not this tree
snake() { cp "$OUT/workers.snake.py" portcheck/workers.py; }
rr() { sed -i 's/^    return \[u for k, u in enumerate(units) if part\[k\] == i - 1\]$/    return units[i - 1::n]/' portcheck/workers.py
       grep -q 'return units\[i - 1::n\]' portcheck/workers.py || { echo "shard.sh: rr edit failed"; exit 1; }; }
round() {   # round NAME VARIANT ROUNDS
    $2; ROUNDS="$3" OUT="$OUT/$1" bash "$ROUNDS_SH" | grep '^rounds:' | sed "s/^/$1 /" | tee -a "$OUT/summary.txt"; save; }
round whole snake "settle cold"
round snake-a snake "half1 half2"
round rr-a rr "half1 half2"
if [ $(( $(date +%s) - start )) -lt 220 ]; then round snake-b snake "half1 half2"; fi
snake
