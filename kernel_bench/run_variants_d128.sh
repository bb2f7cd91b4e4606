# One-knob variants of the paired Mosaic backward at d = 128 (issue 22: deeper rings, a
# 128-key dQ tile; docs/perf-notes.md has the prediction), n = 4096, h = 16, b = 4, bf16,
# causal and not, backward and training step beside cuDNN, CUPTI device time, one
# process. From the repository root with $OUT set; about VARIANT_S + 60 s.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout $((${VARIANT_S:-100} + 120)) python -m kernel_bench.bench_mosaic_backward \
  --out $OUT/variants-d128.json --ns 4096 --d 128 --causal both --phases backward,train \
  --variants stages_3,dq_128,dq_stages_3 --budget-s ${VARIANT_S:-100} 2>&1 \
  | tee $OUT/variants-d128.log | grep -E "^\[|budget|Error|error" | cut -c1-900
