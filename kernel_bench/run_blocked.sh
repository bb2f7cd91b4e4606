# One GPU call (issues 22 item 2, 24 item 4): the forward without padding copies
# (flash_mosaic's blocked shared-memory layout where a length is not a multiple of 8).
# Run from the repository root with $OUT set; each step has its own time limit:
#   0-150 s  the Mosaic forward GPU tests (contract: float64, odd n, GQA, causal, windows,
#            the padded and blocked layouts; not the gradients) while both benchmarks compile;
#   ..215 s  bench_window forward (seed 24): ours (default), ours with copies (pad_seq=True, the old default),
#            cuDNN, same process: issue 24's figure re-measured;
#   ..290 s  ten seed-22 shapes (the seven odd-n Mosaic shapes of 2026-12-02, d = 80 at
#            n = 3867, and two shapes whose n is a multiple of 8 where the forced blocked
#            layout prices itself): default, copies, blocked, cuDNN.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-predictions-2026-12-02.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/pytest-gpu.log
(timeout 150 python -m pytest -v -p no:cacheprovider -rfEs tests/test_flash_mosaic.py \
  -k "not gradients" >> $OUT/pytest-gpu.log 2>&1
  echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done) &
(timeout 290 python -m kernel_bench.bench_shapes --out $OUT/shapes.json \
  --details $OUT/shapes-details.json --pick 0,1,3,6,11,13,19,9,2,17 --forward-only \
  --variant 'copies={"pad_seq":true,"backend":"mosaic"}' \
  --variant 'blocked={"blocked":true,"backend":"mosaic"}' --budget-s 275 \
  --wait-for $OUT/window-done > $OUT/shapes.log 2>&1; echo "shapes rc=$?" >> $OUT/shapes.log) &
timeout 215 python -m kernel_bench.bench_window measure --predictions $PRED --forward-only \
  --out $OUT/window.json --budget-s 200 --wait-for $OUT/tests-done \
  --variant 'copies={"pad_seq":true}' > $OUT/window.log 2>&1; echo "window rc=$?" >> $OUT/window.log
touch $OUT/window-done
wait
rm -f $OUT/tests-done $OUT/window-done
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -5
grep -E "variant|rc=|budget|ratio" $OUT/window.log | tail -40
grep -E "ours/cuDNN|rc=|budget|variant" $OUT/shapes.log | tail -30
