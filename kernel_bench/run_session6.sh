# One GPU call of 2026-12-03 (issues 22 and 24), from the repository root with $OUT set:
# 1. kernel_bench/run_bwd_d256.sh (the split Mosaic backward above d = 128: its GPU
#    tests, then bench_mosaic_backward n = 4096, d = 256, causal and not), TOTAL_S s;
# 2. bench_window measure with training steps (seed-24 window draw: forward and
#    jax.grad through our kernels, whose backward is now the Mosaic backward, against
#    cuDNN's local_window_size, CUPTI device time), WINDOW_S s.
# Table afterwards (CPU): python -m kernel_bench.bench_window report --predictions
#   specs/measurements/details/h200-window-tile64-predictions-2026-12-02.json --measured FILE
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-tile64-predictions-2026-12-02.json
TOTAL_S=${TOTAL_S:-110} bash kernel_bench/run_bwd_d256.sh
echo "=== window training steps"
timeout ${WINDOW_S:-330} python -m kernel_bench.bench_window measure --predictions $PRED \
  --out $OUT/window-train.json --budget-s $((${WINDOW_S:-330} - 40)) > $OUT/window-train.log 2>&1
echo "window rc=$?"
grep -E "rc=|budget|ratio" $OUT/window-train.log | cut -c1-160 | tail -40
