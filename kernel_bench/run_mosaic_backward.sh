# The GPU call of the Mosaic backward (issue 22 item 1), from the repository root with
# $OUT set: a smoke run of the backward (nothing else runs if it fails or hangs), then
# its tests and the Mosaic forward's gradient tests (which now run it) while the
# 28-shape benchmark compiles, the 28 shapes, and the FA-3 anchor shapes (NS).
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 80 python -m pytest -q -p no:cacheprovider -x \
  "tests/test_flash_mosaic_backward.py::test_gradients_match_float64[1-300-300-4-2-128-True-None-bfloat16]" \
  2>&1 | tee $OUT/smoke.log || exit 1
(timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfEs --timeout 100 \
  tests/test_flash_mosaic_backward.py "tests/test_flash_mosaic.py::TestMosaicBackend::test_gradients_match_float64" \
  2>&1 | tee $OUT/pytest.log; touch $OUT/tests-done) &
timeout ${SHAPES_S:-330} python -m kernel_bench.bench_shapes --out $OUT/shapes.json \
  --details $OUT/shapes-details.json --seed 22 --count 28 --budget-s ${SHAPES_BUDGET_S:-250} \
  --wait-for $OUT/tests-done 2>&1 | tee $OUT/shapes.log
wait
timeout ${BENCH_S:-120} python -m kernel_bench.bench_mosaic_backward --out $OUT/anchors.json \
  --ns ${NS:-4096,16384} --budget-s ${BUDGET_S:-80} 2>&1 | tee $OUT/anchors.log
tail -3 $OUT/pytest.log
