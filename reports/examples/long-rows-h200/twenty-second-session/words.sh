#!/usr/bin/env bash
# Issue 22 on the lent H200: softmax_long's bf16 rows read as int32 words of two elements (this
# tree: the launcher's WORDS=words_ok(x)) against element loads (the device copy's launcher edited
# to WORDS=False), one bench process each, W E E W W E; then the long-row GPU tests and the softmax
# cells of the main job on this tree.
#   run: OUT=$OUT bash reports/examples/long-rows-h200/twenty-second-session/words.sh
set -uo pipefail
OUT=${OUT:-/tmp/words}
mkdir -p "$OUT"
python3 -m pip install --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
    || { tail -20 "$OUT/install.log"; echo "words: the install failed"; exit 1; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
  git rev-parse HEAD 2>/dev/null; git status --short 2>/dev/null | head -20; } > "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"
SM=portcheck/kernels/softmax.py
cp "$SM" "$OUT/softmax.tree.py"   # the device copy's git is the session's base, not this tree
words() { cp "$OUT/softmax.tree.py" "$SM"; }
elements() { sed -i -E 's/WORDS=words_ok\(x(, cfg\["BLOCK"\])?\), num_warps/WORDS=False, num_warps/' "$SM"
             grep -q 'WORDS=False, num_warps' "$SM" || { echo "words: the elements edit failed"; exit 1; }; }
k=0
for variant in words elements elements words words elements; do
    k=$((k + 1)); $variant
    python3 -m portcheck bench --target cuda --kernel softmax_long --dtype bf16 --no-compile \
        --out "$OUT/bench-$k-$variant" > "$OUT/bench-$k-$variant.log" 2>&1
    echo "bench $k $variant: $(grep -E '^softmax_long' "$OUT/bench-$k-$variant.log" | grep -oE '[0-9.]+ us|[0-9]+% of ceiling|torch [0-9.]+x' | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
done
words
python3 -m pytest -q -p no:cacheprovider tests/kernels/test_long_rows.py --target=cuda --require-device \
    > "$OUT/gpu-pytest.log" 2>&1; echo "pytest rc $?: $(tail -1 "$OUT/gpu-pytest.log")" | tee -a "$OUT/summary.txt"
python3 -m portcheck run --target cuda --kernel softmax,softmax_long --out "$OUT/run" > "$OUT/run.log" 2>&1
echo "run rc $?: $(grep -cE ' pass ' "$OUT/run.log") pass" | tee -a "$OUT/summary.txt"
cp "$OUT/run/matrix.md" "$OUT/run-matrix.md" 2>/dev/null
rm -rf "$OUT"/bench-*/ "$OUT/run"
