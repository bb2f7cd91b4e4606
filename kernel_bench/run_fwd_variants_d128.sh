# One GPU call (issue 22): launch variants of our Mosaic forward at d = 128 beside the
# default and cuDNN on eight shapes (kernel_bench/bench_fwd_variants.py; the prediction
# is in docs/perf-notes.md). From the repository root with $OUT set; BUDGET: seconds after
# which no shape starts (compiles run in threads while the first pass times).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
python -c "import jax; print('jax', jax.__version__)" | tee -a "$OUT/gpu.txt"
sha256sum pallas_kernels/flash_mosaic.py kernel_bench/bench_fwd_variants.py >> "$OUT/gpu.txt"
timeout $((${BUDGET:-210} + 90)) python -m kernel_bench.bench_fwd_variants \
  --out "$OUT/fwd-d128.json" --budget-s "${BUDGET:-210}" 2>&1 | tee "$OUT/fwd-d128.log"
date -u | tee -a "$OUT/fwd-d128.log"
