# One GPU call (2026-12-03): held-out draw 7 (issue 21; predictions committed before it),
# then one-knob variants of the paired Mosaic backward at d = 128 (issue 22: deeper rings,
# a 128-key dQ tile), n = 4096, h = 16, b = 4, bf16, causal and not, backward and
# training step beside cuDNN. From the repository root with $OUT set.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
DRAW=7 DATE=2026-12-03 BUDGET=${DRAW_S:-170} bash kernel_bench/run_heldout.sh > $OUT/draw7.out 2>&1
echo "draw 7: $(grep -c '^\[ *[0-9]*/' $OUT/draw7.out) jobs logged"
timeout $((${VARIANT_S:-100} + 120)) python -m kernel_bench.bench_mosaic_backward \
  --out $OUT/variants-d128.json --ns 4096 --d 128 --causal both --phases backward,train \
  --variants stages_3,dq_128,dq_stages_3 --budget-s ${VARIANT_S:-100} 2>&1 \
  | tee $OUT/variants-d128.log | grep -E "^\[|budget|Error|error" | cut -c1-700
