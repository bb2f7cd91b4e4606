# One GPU call (issues 22 item 2, 24 item 4): the forward without padding copies
# (flash_mosaic's blocked shared-memory layout where a length is not a multiple of 8).
# Run from the repository root with $OUT set; each step has its own time limit:
#   0-100 s  the Mosaic forward GPU tests (the contract's float64 cases: odd n, GQA,
#            causal, windows, fully masked rows, head dims; the padded and blocked layouts
#            at every contract case) while both benchmarks compile;
#   ..150 s  bench_window forward (seed 24): ours and cuDNN, one process: issue 24's figure;
#   ..185 s  the seven odd-n Mosaic shapes of issue 22's seed-22 draw, ours and cuDNN.
# VARIANTS (optional) adds --variant arguments to both benchmarks.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-predictions-2026-12-02.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/pytest-gpu.log
(timeout 100 python -m pytest -v -p no:cacheprovider -rfEs tests/test_flash_mosaic.py \
  -k "matches_float64 or sliding_window or layouts or fully_masked or head_dims" \
  >> $OUT/pytest-gpu.log 2>&1; echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done) &
(timeout 185 python -m kernel_bench.bench_shapes --out $OUT/shapes.json \
  --details $OUT/shapes-details.json --pick 0,1,3,6,11,13,19 --forward-only $VARIANTS \
  --budget-s 180 --wait-for $OUT/window-done > $OUT/shapes.log 2>&1
  echo "shapes rc=$?" >> $OUT/shapes.log) &
timeout 150 python -m kernel_bench.bench_window measure --predictions $PRED --forward-only \
  --out $OUT/window.json --budget-s 140 --wait-for $OUT/tests-done $VARIANTS \
  > $OUT/window.log 2>&1; echo "window rc=$?" >> $OUT/window.log
touch $OUT/window-done
wait
rm -f $OUT/tests-done $OUT/window-done
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -3
grep -E "rc=|budget|ratio" $OUT/window.log | cut -c1-150 | tail -20
grep -E "ours/cuDNN|rc=|budget|failed" $OUT/shapes.log | cut -c1-150 | tail -10
