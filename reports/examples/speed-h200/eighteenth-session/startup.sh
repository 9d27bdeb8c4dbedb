#!/usr/bin/env bash
# Where a run's first seconds go on the lent H200 (issue 17's fixed cost per run), then the
# seventeenth session's rounds. From the repository root on the device machine:
#   bash reports/examples/speed-h200/eighteenth-session/startup.sh
set -uo pipefail
OUT=${OUT:-/tmp/startup}
mkdir -p "$OUT"
here=reports/examples/speed-h200/eighteenth-session
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
    || { tail -20 "$OUT/install.log"; echo "startup: the install failed"; exit 1; }
rm "$OUT/install.log"
{ nvidia-smi -q | grep -iE 'persistence|product name|driver version'; nproc; } > "$OUT/machine.txt" 2>&1
probe() { python3 "$here/startup.py" "$@" >> "$OUT/startup.jsonl" 2>>"$OUT/startup.err"; }
probe alone-1; probe alone-2
python3 -c 'import time, torch; torch.zeros(1, device="cuda"); time.sleep(40)' & holder=$!
sleep 8; probe held-1; probe held-2
for i in $(seq 16); do probe "sixteen-$i" & done; wait_pids=$(jobs -p | grep -v "^$holder$"); wait $wait_pids
kill $holder 2>/dev/null; wait 2>/dev/null
for i in $(seq 16); do probe "sixteen-cold-$i" & done; wait
# the supervisor and one worker of a one-unit run, profiled
d=$(mktemp -d); mkdir -p "$d/w"
python3 -m cProfile -o "$d/sup.prof" -m portcheck run --target cuda --kernel softmax --dtype fp32 --no-time --out "$d/run" > "$d/sup.log" 2>&1
python3 -m cProfile -o "$d/worker.prof" -m portcheck run --target cuda --seed 0 --worker "$d/w/results.jsonl" --kernel softmax --dtype fp32 --no-time > "$d/worker.log" 2>&1
python3 - "$d" > "$OUT/profiles.txt" 2>&1 <<'PY'
import pstats, sys
for name in ("sup", "worker"):
    print(f"===== {name}: cumulative")
    pstats.Stats(f"{sys.argv[1]}/{name}.prof").sort_stats("cumulative").print_stats(45)
PY
cat "$d/sup.log" "$d/worker.log" >> "$OUT/profiles.txt"
