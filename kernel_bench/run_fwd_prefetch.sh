# One GPU call (issues 22 item 2, 24 item 4): the Mosaic forward with the next unit's Q
# prefetched (flash_mosaic.Config.prefetch_q) beside the default, one process each.
# Run from the repository root with $OUT set; each step has its own time limit:
#   0-60 s   GPU tests: prefetch_q bitwise equal to the default over many units a CTA
#            (paired and odd groups, the blocked layout, windows), while both compile;
#   ..125 s  bench_window forward (seed 24): ours, ours prefetch_q, cuDNN;
#   ..165 s  the seven odd-n Mosaic shapes of issue 22's seed-22 draw, the same three.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-tile64-predictions-2026-12-02.json
VARIANT='prefetch={"prefetch_q": true}'
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/pytest-gpu.log
(timeout 60 python -m pytest -v -p no:cacheprovider -rfEs tests/test_flash_mosaic.py \
  -k "prefetched_q" >> $OUT/pytest-gpu.log 2>&1
  echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done) &
(timeout 165 python -m kernel_bench.bench_shapes --out $OUT/shapes.json \
  --details $OUT/shapes-details.json --pick 0,1,3,6,11,13,19 --forward-only \
  --variant "$VARIANT" --budget-s 160 --wait-for $OUT/window-done > $OUT/shapes.log 2>&1
  echo "shapes rc=$?" >> $OUT/shapes.log) &
timeout 125 python -m kernel_bench.bench_window measure --predictions $PRED --forward-only \
  --variant "$VARIANT" --out $OUT/window.json --budget-s 118 --wait-for $OUT/tests-done \
  > $OUT/window.log 2>&1; echo "window rc=$?" >> $OUT/window.log
touch $OUT/window-done
wait
rm -f $OUT/tests-done $OUT/window-done
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -4
grep -E "rc=|budget|ratio|variant" $OUT/window.log | cut -c1-120 | tail -40
grep -E "ours/cuDNN|rc=|budget|failed|prefetch" $OUT/shapes.log | cut -c1-150 | tail -20
