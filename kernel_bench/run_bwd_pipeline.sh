# The GPU call of the pipelined Mosaic backward (issue 22 items 1 and 4), from the
# repository root with $OUT set, in this order (each step's output under $OUT as it goes):
# 1. the backward's GPU tests, default launch and the other Config.pipeline, fold and the
#    CPU-side lowering cases excluded (they run on CPU; on the GPU machine they took the
#    first call's limit); -x and a per-test timeout, so a hang costs one timeout and ends
#    the call;
# 2. ptxas's report of the kernels at PTXAS_D (default launch and flipped pipeline);
# 3. in what is left of TOTAL_S, bench_mosaic_backward at n = NS, d = DS, h = HEADS, causal and not, backward and
#    training step, ours (the default, then the flipped pipeline) and cuDNN.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
t0=$(date +%s)
step() { echo "=== $1 at $(($(date +%s) - t0)) s"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
python -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())" | tee -a $OUT/gpu.txt
step tests
timeout ${TEST_S:-150} python -m pytest -q -p no:cacheprovider -x -rfEs --timeout ${CASE_S:-60} \
  tests/test_flash_mosaic_backward.py -k "not folded and not lower" 2>&1 | tee $OUT/pytest.log
[ "${PIPESTATUS[0]}" = 0 ] || { step "tests failed"; exit 1; }
step ptxas
MOSAIC_GPU_DUMP_PTXAS=1 TF_CPP_MIN_LOG_LEVEL=0 timeout ${PTXAS_S:-60} \
  python -m kernel_bench.bench_mosaic_backward --ptxas ${PTXAS_D:-128} > $OUT/ptxas.log 2>&1
grep -E "^===|registers|spill|serializ|Potential" $OUT/ptxas.log | cut -c1-300 | head -60
# the bench gets what is left of TOTAL_S; no shape starts in its last SHAPE_S seconds
left=$((${TOTAL_S:-320} - $(date +%s) + t0 - 5))
step "bench ($left s left)"
timeout $left python -m kernel_bench.bench_mosaic_backward --out $OUT/anchors.json \
  --ns ${NS:-4096} --d ${DS:-128,64} --h ${HEADS:-16} --causal both --phases backward,train \
  --variants ${VARIANTS:-flip_pipeline} --budget-s $((left - ${SHAPE_S:-45})) 2>&1 | tee $OUT/anchors.log
step end
