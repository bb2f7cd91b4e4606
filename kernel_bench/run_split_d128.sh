# The split Mosaic backward (Config(split=True): dV in one consumer, dK in the other) at
# d <= 128, where the paired kernels are the default (issue 22 items 1 and 4; 24 item 4):
# bench_mosaic_backward n = 4096, d = 128 (h 16) and 64 (h 32), batch 4, bf16, causal and
# not, backward and training step: the default, the split kernels with 32- and 64-key dQ
# tiles, cuDNN; CUPTI device time, one process, gradients against cuDNN's in the details.
# From the repository root with $OUT set; about BUDGET + 40 s.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
timeout $((${BUDGET:-150} + 60)) python -m kernel_bench.bench_mosaic_backward \
  --out $OUT/split-d128.json --ns 4096 --d 128,64 --causal both --phases backward,train \
  --variants split,split_dq64 --budget-s ${BUDGET:-150} 2>&1 | tee $OUT/split-d128.log \
  | grep -E "^\[|budget|Error|error" | cut -c1-600
