# The one GPU call of issue 22 (run from the repository root with $OUT set): the
# kernel tests on Hopper while the 28-shape benchmark compiles, then the benchmark.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
(timeout 170 python -m pytest -q -p no:cacheprovider -rfEs tests/test_flash_mosaic.py "tests/test_flash_kernel.py::TestTritonBackend" tests/test_flash_backward.py::test_gpu_shapes 2>&1 | tee $OUT/pytest-gpu.log; touch $OUT/tests-done) &
timeout 330 python -m kernel_bench.bench_shapes --out $OUT/shapes.json --details $OUT/shapes-details.json --seed 22 --count 28 --budget-s 300 --wait-for $OUT/tests-done 2>&1 | tee $OUT/shapes.log
wait
tail -3 $OUT/pytest-gpu.log
