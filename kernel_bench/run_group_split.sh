# The dK/dV kernel's GQA group spread over CTAs where its grid leaves the GPU idle
# (issue 22: Config.group_split, group_split_for; docs/perf-notes.md has the prediction):
# the GPU float64-reference tests of the Mosaic backward, then backward and training step
# of the default (the split chosen per call) beside group_1 (the group summed by one CTA,
# the launch before) and cuDNN, CUPTI device time, one process. From the repository root
# with $OUT set; about BENCH_S + 150 s.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout 200 python -m pytest -q -x -p no:cacheprovider tests/test_flash_mosaic_backward.py \
  -k "gradients_match or group_split or jax_grad or no_key" 2>&1 | tail -15 | tee $OUT/tests.log
timeout $((${BENCH_S:-120} + 100)) python -m kernel_bench.bench_mosaic_backward \
  --out $OUT/group-split.json --phases backward,train --variants group_1 \
  --shapes ${SHAPES:-3x1024x6x1x128xc,1x2048x16x1x128,2x4096x8x1x64xc,2x1536x12x2x96,1x4096x8x1x128xc,4x1024x32x4x128xc} \
  --budget-s ${BENCH_S:-120} 2>&1 | tee $OUT/group-split.log | grep -E "^\[|budget|Error|error|^\|" | cut -c1-700
