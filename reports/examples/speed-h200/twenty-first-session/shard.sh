#!/usr/bin/env bash
# Issue 17: the default run on the lent H200 cold, then its halves as this tree's --shard deals
# them (`tree`) and as round-robin in the matrix's order dealt them (`rr`: workers.shard's last
# line set back in the device copy), side by side, each half from an empty Triton cache and no
# unit seconds of its own (rounds.sh); then rr and tree again while the call has time (A B B A).
# Call 4 of the twenty-first session ran it on 5a24592, the snake by the shipped seconds, with
# the tree's rounds named `snake` (call4/snake-a-*.log); on main since f4a5d91 the tree's
# deal is each case's dtypes round-robin, each case starting one part further.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-first-session/shard.sh   (DEST gets shard.tgz)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/shard
rm -rf "$OUT"; mkdir -p "$OUT"
ROUNDS_SH=reports/examples/speed-h200/eighteenth-session/rounds.sh
export CACHE="$OUT/cache"
start=$(date +%s)
save() { tar -czf "$DEST/shard.tgz.part" -C /tmp --exclude=shard/cache shard && mv "$DEST/shard.tgz.part" "$DEST/shard.tgz"; }
cp portcheck/workers.py "$OUT/workers.tree.py"   # the device copy's git is the session's base, not this tree
tree() { cp "$OUT/workers.tree.py" portcheck/workers.py; }
rr() { sed -i -E 's/^    return \[u for (k, u in enumerate\(units\) if part\[k\]|u, p in zip\(units, part\) if p) == i - 1\]$/    return units[i - 1::n]/' portcheck/workers.py
       grep -q 'return units\[i - 1::n\]' portcheck/workers.py || { echo "shard.sh: rr edit failed"; exit 1; }; }
round() {   # round NAME VARIANT ROUNDS
    $2; ROUNDS="$3" OUT="$OUT/$1" bash "$ROUNDS_SH" | grep '^rounds:' | sed "s/^/$1 /" | tee -a "$OUT/summary.txt"; save; }
round whole tree "settle cold"
round tree-a tree "half1 half2"
round rr-a rr "half1 half2"
# A B B A while the call has time (a pair of halves takes about 100 s)
elapsed() { echo $(( $(date +%s) - start )); }
if [ "$(elapsed)" -lt 330 ]; then round rr-b rr "half1 half2"; fi
if [ "$(elapsed)" -lt 440 ]; then round tree-b tree "half1 half2"; fi
tree
