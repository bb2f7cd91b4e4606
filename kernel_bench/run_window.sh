# The GPU call of issue 24 item 4 (run from the root of a clean export of a commit, $OUT
# set): the Mosaic kernel tests (windows and the dense contract) and the Triton window
# tests on Hopper while the sliding-window benchmark compiles, then the benchmark.
# WINDOW_ARGS (optional) goes to the benchmark, e.g. --variant nopad={"pad_seq":false}.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-predictions-2026-12-02.json
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
(timeout 150 python -m pytest -v -p no:cacheprovider -rfEs tests/test_flash_mosaic.py \
  "tests/test_flash_kernel.py::TestTritonBackend" -k "window or Mosaic or gradients" \
  > $OUT/pytest-gpu.log 2>&1; echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done) &
timeout 235 python -m kernel_bench.bench_window measure --predictions $PRED \
  --out $OUT/window.json --budget-s 205 --wait-for $OUT/tests-done $WINDOW_ARGS 2>&1 | tee $OUT/window.log
wait
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -5
