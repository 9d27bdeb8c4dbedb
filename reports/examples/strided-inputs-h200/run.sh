#!/usr/bin/env bash
# The strided inputs on the lent H200: the default matrix (its checks, untimed, from an empty
# Triton cache) and four user cases that take a strided input in four ways (colcases.py).
#   run: DEST=$OUT bash reports/examples/strided-inputs-h200/run.sh   (DEST gets strided.tgz)
set -uo pipefail
DEST=${DEST:-/tmp}
OUT=/tmp/strided
. reports/examples/lent_machine.sh
lent_setup "$OUT" || exit 1
export XDG_CACHE_HOME=$OUT/cache TRITON_CACHE_DIR=$OUT/triton
save() { tar -czf "$DEST/strided.tgz.part" -C /tmp --exclude=strided/cache --exclude=strided/triton strided \
  && mv "$DEST/strided.tgz.part" "$DEST/strided.tgz"; }
timeout 60 env PYTHONPATH="$PWD/reports/examples/strided-inputs-h200:$PWD" python3 -m portcheck run --target cuda \
  --cases colcases --kernel 'col_*' --no-time --out "$OUT/colcases" > "$OUT/colcases.log" 2>&1
echo "colcases rc $?" >> "$OUT/summary.txt"; save
timeout 150 python3 -m portcheck run --target cuda --no-time --out "$OUT/default" > "$OUT/default.log" 2>&1
echo "default rc $?" >> "$OUT/summary.txt"
rm -rf "$OUT"/*/.claims-*; save
