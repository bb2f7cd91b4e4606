# The call this helper had no device time left for (issue 24 item 4 with the Q prefetch
# default): run from the repository root with $OUT set, about 230 s of command.
#   0-90 s   the Mosaic forward GPU tests (contract, windows, layouts, head dims, the
#            prefetch against one Q buffer) while the window benchmark compiles;
#   ..225 s  bench_window forward (seed 24), ours (default: prefetch_q where it fits, the
#            64-key tile under small windows at d = 128), ours with one Q buffer, cuDNN.
# Table afterwards (CPU): python -m kernel_bench.bench_window report --predictions
#   specs/measurements/details/h200-window-tile64-predictions-2026-12-02.json --measured FILE
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-tile64-predictions-2026-12-02.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/pytest-gpu.log
(timeout 90 python -m pytest -v -p no:cacheprovider -rfEs tests/test_flash_mosaic.py \
  -k "prefetched_q or matches_float64 or fully_masked or sliding_window or partial" \
  >> $OUT/pytest-gpu.log 2>&1; echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done) &
timeout 225 python -m kernel_bench.bench_window measure --predictions $PRED --forward-only \
  --variant 'single_q={"prefetch_q": false}' --out $OUT/window.json --budget-s 215 \
  --wait-for $OUT/tests-done > $OUT/window.log 2>&1; echo "window rc=$?" >> $OUT/window.log
wait
rm -f $OUT/tests-done
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -4
grep -E "rc=|budget|ratio|variant" $OUT/window.log | cut -c1-120 | tail -40
