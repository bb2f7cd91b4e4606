# Issue 22's second GPU call (repository root, $OUT set): the Mosaic head-dim tests of
# the padding change, then the routing shapes (d=64 causal, short n) on Mosaic, Triton, cuDNN.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
timeout 60 python -m pytest -q -p no:cacheprovider -rfEs tests/test_flash_mosaic.py -k "72 or padded or test_head_dims_pad" 2>&1 | tee $OUT/pytest-gpu2.log
timeout 85 python -m kernel_bench.bench_shapes --routing --out $OUT/routing.json 2>&1 | tee $OUT/routing.log
