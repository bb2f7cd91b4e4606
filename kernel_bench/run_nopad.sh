# One GPU call (issue 22 item 2, issue 24 item 4): does flash_mosaic.Config(pad_seq=False)
# (no jnp.pad copies of Q, K, V, no slice of O) hold and pay? Run from the repository root
# with $OUT set; every step has its own time limit so that the call ends within ~130 s:
#   0-70 s   the Mosaic GPU tests of pad_seq=False (float64 contract cases, two windows),
#            while both benchmarks compile (16 + 7 shapes, forwards only);
#   ..95 s   bench_window forward: ours (default), ours with nopad, cuDNN, same process;
#   ..125 s  seven odd-n Mosaic shapes of bench_shapes' seed-22 draw, the same three.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-predictions-2026-12-02.json
NOPAD='nopad={"pad_seq":false}'
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
(timeout 70 python -m pytest -v -p no:cacheprovider -rfEs tests/test_flash_mosaic.py \
  -k "unpadded or (sliding_window_schedules and options4)" > $OUT/pytest-gpu.log 2>&1
  echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done) &
(timeout 125 python -m kernel_bench.bench_shapes --out $OUT/shapes.json \
  --details $OUT/shapes-details.json --pick 0,1,3,6,11,13,19 --forward-only \
  --variant 'nopad={"pad_seq":false,"backend":"mosaic"}' --budget-s 118 \
  --wait-for $OUT/window-done > $OUT/shapes.log 2>&1; echo "shapes rc=$?" >> $OUT/shapes.log) &
timeout 95 python -m kernel_bench.bench_window measure --predictions $PRED --forward-only \
  --out $OUT/window.json --budget-s 88 --wait-for $OUT/tests-done --variant "$NOPAD" \
  > $OUT/window.log 2>&1; echo "window rc=$?" >> $OUT/window.log
touch $OUT/window-done
wait
rm -f $OUT/tests-done $OUT/window-done
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -5
grep -E "variant|rc=|budget" $OUT/window.log | tail -40
grep -E "ours/cuDNN|rc=|budget|nopad" $OUT/shapes.log | tail -20
