# The GPU call of the Mosaic backward (issue 22 item 1), from the repository root with
# $OUT set: a smoke run of the backward (nothing else runs if it fails or hangs), its
# tests (the default launch, the folded-dQ option, the Mosaic forward's gradient
# tests, which run it), the FA-3 anchor shapes (NS; the default, then the folded dQ
# where it applies), and with SHAPES=1 the 28-shape benchmark.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout ${SMOKE_S:-90} python -m pytest -q -p no:cacheprovider -x -rfE \
  "tests/test_flash_mosaic_backward.py::test_gradients_match_float64[1-300-300-4-2-128-True-None-bfloat16]" \
  "tests/test_flash_mosaic_backward.py::test_gradients_match_float64[2-77-130-3-1-64-False-None-float16]" \
  2>&1 | tee $OUT/smoke.log; [ "${PIPESTATUS[0]}" = 0 ] || exit 1
timeout ${TEST_S:-200} python -m pytest -q -p no:cacheprovider -rfEs --timeout 100 \
  tests/test_flash_mosaic_backward.py "tests/test_flash_mosaic.py::TestMosaicBackend::test_gradients_match_float64" \
  2>&1 | tee $OUT/pytest.log
timeout ${BENCH_S:-200} python -m kernel_bench.bench_mosaic_backward --out $OUT/anchors.json \
  --ns ${NS:-4096} --budget-s ${BUDGET_S:-160} 2>&1 | tee $OUT/anchors.log
if [ "${SHAPES:-0}" = 1 ]; then
  timeout ${SHAPES_S:-330} python -m kernel_bench.bench_shapes --out $OUT/shapes.json \
    --details $OUT/shapes-details.json --seed 22 --count 28 --budget-s ${SHAPES_BUDGET_S:-250} \
    2>&1 | tee $OUT/shapes.log
fi
tail -3 $OUT/pytest.log
