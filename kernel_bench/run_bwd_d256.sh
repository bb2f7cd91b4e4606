# The one GPU call of the split Mosaic backward above d = 128 (issue 22 items 1 and 4),
# from the repository root with $OUT set; each step's output under $OUT as it goes:
# 1. the split kernels' GPU tests (float64 reference at d = 160, 192, 200, 256, causal and
#    not, GQA, MQA, odd n, cross attention, a window; the CPU-side lowering cases left
#    out), a per-test timeout and TEST_S in all, so a hang costs one timeout;
# 2. in what is left of TOTAL_S, bench_mosaic_backward at n = 4096, d = 256, h = 8,
#    batch 4, bf16, causal and not, backward and training step: ours with the split
#    kernels (Config(split=True)), cuDNN, then ours as the default runs it (the Triton
#    backward while SPLIT_DEFAULT is False), CUPTI device time, one process; ptxas's
#    report of each kernel compiled there (MOSAIC_GPU_DUMP_PTXAS) in the same log.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
t0=$(date +%s)
step() { echo "=== $1 at $(($(date +%s) - t0)) s"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee $OUT/gpu.txt
python -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, jax.devices())" | tee -a $OUT/gpu.txt
step tests
timeout ${TEST_S:-35} python -m pytest -q -p no:cacheprovider -rfEs --timeout ${CASE_S:-20} \
  tests/test_flash_mosaic_backward.py -k "split and not lower" 2>&1 | tee $OUT/pytest.log
rc=${PIPESTATUS[0]}
step "tests rc=$rc"
# the bench runs whatever the tests said (it is bounded by its own timeout)
# no shape starts in the bench's last SHAPE_S seconds
left=$((${TOTAL_S:-104} - $(date +%s) + t0 - 3))
step "bench ($left s left)"
# ptxas's report of every kernel the bench compiles (registers, spills, wgmma serialisation)
MOSAIC_GPU_DUMP_PTXAS=1 TF_CPP_MIN_LOG_LEVEL=0 \
  timeout $left python -m kernel_bench.bench_mosaic_backward --out $OUT/d256.json \
  --ns 4096 --d ${DS:-256} --h 8 --causal both --phases backward,train \
  --variants split --budget-s $((left - ${SHAPE_S:-15})) 2>&1 | tee $OUT/d256.log
grep -E "^\[|registers|spill|serializ|Potential|injected" $OUT/d256.log | cut -c1-400 > $OUT/ptxas-summary.txt
step end
