#!/usr/bin/env bash
# One GPU call (issue 22): our Mosaic forward at d = 256 on the blocked-layout shapes of
# held-out draws 11-12 beside their multiple-of-8 twins, the default against padding
# copies / the blocked layout forced and not persistent, and cuDNN
# (kernel_bench/bench_fwd_variants.py --set d256; the prediction in docs/perf-notes.md).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
python -c "import jax; print('jax', jax.__version__)" | tee -a "$OUT/gpu.txt"
sha256sum pallas_kernels/flash_mosaic.py kernel_bench/bench_fwd_variants.py >> "$OUT/gpu.txt"
timeout $((${BUDGET:-150} + 90)) python -m kernel_bench.bench_fwd_variants --set d256 \
  --out "$OUT/fwd-d256.json" --budget-s "${BUDGET:-150}" 2>&1 | tee "$OUT/fwd-d256.log"
date -u | tee -a "$OUT/fwd-d256.log"
