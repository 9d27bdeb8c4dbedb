#!/bin/bash
# Follow-up replays for probe 6 (run from this folder, venv active, TRITON_DEFAULT_FP_FUSION=1).
# Each writes its report under followups/<name>/ and its console output to followups.log.
set -u
export PYTHONPATH=$PWD
rm -rf followups; mkdir -p followups
run() {  # name, then portcheck run arguments
  local name=$1; shift
  echo "### $name: portcheck run --target interpreter --cases probe6 --no-time --jobs 1 $*"
  local t0=$(date +%s.%N)
  portcheck run --target interpreter --cases probe6 --no-time --jobs 1 --out followups/$name "$@" 2>&1 \
    | grep -v '^interpreter: cases' | grep -v '^$' | grep -v '^report:\|^results:\|^portcheck run: matrix\|^== interpreter'
  echo "### $name: exit ${PIPESTATUS[0]}, $(echo "$(date +%s.%N) - $t0" | bc) s"
  echo
}
echo "git HEAD $(git -C ../../.. rev-parse --short HEAD); dirty: $(git -C ../../.. status --short -- portcheck | tr '\n' ' ')"
# 1. vocab-parallel embedding escape: an input whose ids hit the shard end (tp 4, rank 0, shard of 1 row)
S='{"dtype": "bf16", "hidden": 8, "rank": 0, "seed": 1, "shard": 1, "tokens": 32, "tp": 4}'
run vp_bug_replay --kernel p6_bug_vocab_parallel_embed_shard_end --dtype bf16 --replay "$S"
run vp_ok_replay --kernel p6_ok_vocab_parallel_embed_shard_end --dtype bf16 --replay "$S"
run vp_bug_thorough --kernel p6_bug_vocab_parallel_embed_shard_end --profile thorough --shrink-time 20
# 2. grad-unscale escape: a 'special' input with NaN and no inf (2 x 3, seed 1)
S='{"cols": 3, "dtype": "fp16", "inv_scale": 1.52587890625e-05, "layout": "contiguous", "regime": "special", "rows": 2, "seed": 1}'
run unscale_bug_replay --kernel p6_bug_grad_unscale_nan_not_flagged --dtype fp16 --replay "$S"
run unscale_ok_replay --kernel p6_ok_grad_unscale_nan_not_flagged --dtype fp16 --replay "$S"
run unscale_bug_thorough --kernel p6_bug_grad_unscale_nan_not_flagged --profile thorough --shrink-time 20
# 3. ce mean: a non-degenerate input (8 rows, 5 ignored) instead of the shrunk all-ignored row
S='{"cols": 100, "dtype": "bf16", "ignore_frac": 0.5, "layout": "contiguous", "regime": "normal", "rows": 8, "seed": 3}'
run ce_bug_replay --kernel p6_bug_ce_ignore_index_in_mean --dtype bf16 --replay "$S"
run ce_ok_replay --kernel p6_ok_ce_ignore_index_in_mean --dtype bf16 --replay "$S"
# 4. LayerNorm N-1: the general bias at N = 1000 (the shrunk input was N = 1, a 0/0)
for d in fp32 bf16; do
  S="{\"cols\": 1000, \"dtype\": \"$d\", \"layout\": \"contiguous\", \"regime\": \"normal\", \"rows\": 4, \"seed\": 0}"
  run ln_bug_replay_$d --kernel p6_bug_layernorm_unbiased_var --dtype $d --replay "$S"
done
# 5. softcap after mask: the main effect (one sequence of 12 tokens, q scaled by 16, cap 10)
S='{"alibi": false, "cap": 10.0, "d": 16, "dtype": "fp16", "hkv": 1, "hq": 1, "lens": [12], "qscale": 16.0, "seed": 3, "sink": false, "window": 0}'
run softcap_bug_replay --kernel p6_bug_softcap_after_mask --dtype fp16 --replay "$S"
run softcap_ok_replay --kernel p6_ok_softcap_after_mask --dtype fp16 --replay "$S"
# 6. the SIGSEGV of the first trial run: the launcher without the K % G check (repro_diag_segv.py)
echo "### segv_repro: portcheck run --target interpreter --cases repro_diag_segv --kernel p6x_bug_int4_unvalidated --no-time --jobs 1 --shrink-time 20"
PYTHONFAULTHANDLER=1 portcheck run --target interpreter --cases repro_diag_segv --kernel p6x_bug_int4_unvalidated \
  --no-time --jobs 1 --shrink-time 20 --out followups/segv_repro 2>&1 | grep -v '^interpreter: cases' | grep -v '^$' \
  | grep -v 'threading.py'
echo "### segv_repro: exit ${PIPESTATUS[0]}"
