#!/usr/bin/env bash
# Issue 17, twenty-first session: the long poles' warm-up on compile processes
# (precompile.POLE_PROCESSES = 8) against threads only (0), side by side in one call on the lent
# H200, from the repository root. First one fp8 pole alone with each, then the default run's
# halves in the order A B B A (half 1) and A B (half 2), each from an empty Triton cache and
# no unit seconds of its own (rounds.sh), portcheck's cache folder shared by all; then, while
# the call has time, the whole run cold and warm with the processes.
#   run: DEST=$OUT bash reports/examples/speed-h200/twenty-first-session/ab.sh   (DEST gets ab.tgz)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/ab
rm -rf "$OUT"
ROUNDS_SH=reports/examples/speed-h200/eighteenth-session/rounds.sh
export CACHE="$OUT/cache"
mkdir -p "$OUT"
start=$(date +%s)
save() { tar -czf "$DEST/ab.tgz.part" -C /tmp --exclude=ab/cache ab && mv "$DEST/ab.tgz.part" "$DEST/ab.tgz"; }   # after each round: a call cut short keeps what ran
variant() { sed -i "s/^POLE_PROCESSES = .*/POLE_PROCESSES = $1/" portcheck/precompile.py; }
stamped() { python3 -u -c 'import sys, time
t0 = time.time()
for line in sys.stdin:
    print(f"{time.time() - t0:7.1f} {line}", end="", flush=True)'; }

ROUNDS=settle OUT="$OUT/settle" bash "$ROUNDS_SH"
for p in 0 8; do   # one pole alone, no other unit on the CPUs
    variant $p
    mkdir -p "$OUT/alone-p$p"
    t=$(date +%s%N)
    TRITON_CACHE_DIR="$(mktemp -d)" XDG_CACHE_HOME="$CACHE" timeout 150 python3 -m portcheck run --target cuda \
        --kernel matmul_fp8_out --dtype fp8e4nv --jobs 1 --no-time --out "$OUT/alone-p$p/run" 2>&1 | stamped > "$OUT/alone-p$p/run.log"
    echo "alone p$p: $(awk -v a="$t" -v b="$(date +%s%N)" 'BEGIN { print (b - a) / 1e9 }') s" | tee -a "$OUT/summary.txt"
    save
done
for run in "half1 0" "half1 8" "half1 8" "half1 0" "half2 0" "half2 8"; do
    read -r half p <<< "$run"
    variant $p
    n=$(ls -d "$OUT/$half-p$p"* 2>/dev/null | wc -l)
    ROUNDS=$half OUT="$OUT/$half-p$p-$n" bash "$ROUNDS_SH" | grep '^rounds:' | sed "s/^/p$p /" | tee -a "$OUT/summary.txt"
    save
done
variant 8
if [ $(( $(date +%s) - start )) -lt 420 ]; then
    ROUNDS="cold warm" OUT="$OUT/whole-p8" bash "$ROUNDS_SH" | grep '^rounds:' | sed "s/^/p8 /" | tee -a "$OUT/summary.txt"
fi
rm -rf "$CACHE"
save
