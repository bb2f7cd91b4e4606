# One GPU call (issues 22 item 3 / 24 item 4): the Mosaic forward GPU tests never run on
# the blocked-layout kernel, then the window set with the small-window tile.
# Run from the repository root with $OUT set; each step has its own time limit:
#   0-120 s  GPU tests, most wanted first (causal head dims 112-256, pad_head_dim, both
#            sequence layouts on the contract cases; the window contract at the new
#            default tile; the last partial block under a right window; each window
#            schedule at block_k 128) while the benchmark compiles;
#   ..235 s  bench_window forward (seed 24), ours (default: block_k 64 where left + right
#            <= 1024), ours at the other tile, cuDNN, one process.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
PRED=specs/measurements/details/h200-window-tile64-predictions-2026-12-02.json
T=tests/test_flash_mosaic.py::TestMosaicBackend
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/pytest-gpu.log
python -c "import jax; print('jax', jax.__version__)" >> $OUT/pytest-gpu.log
(
  timeout 120 python -m pytest -v -p no:cacheprovider -rfEs \
    "$T::test_head_dims[True-112]" "$T::test_head_dims[True-160]" \
    "$T::test_head_dims[True-192]" "$T::test_head_dims[True-256]" \
    "$T::test_padded_head_dims" "$T::test_sequence_layouts_match_float64" \
    "$T::test_sliding_window_matches_float64_reference" \
    "$T::test_last_partial_block_under_a_right_window" \
    "$T::test_sliding_window_schedules[True-200-3-1-options4]" \
    "$T::test_sliding_window_schedules[False-window1-4-2-options4]" \
    >> $OUT/pytest-gpu.log 2>&1
  echo "pytest rc=$?" >> $OUT/pytest-gpu.log; touch $OUT/tests-done
) &
timeout 235 python -m kernel_bench.bench_window measure --predictions $PRED --forward-only \
  --other-tile --out $OUT/window.json --budget-s 215 --wait-for $OUT/tests-done \
  > $OUT/window.log 2>&1; echo "window rc=$?" >> $OUT/window.log
wait
rm -f $OUT/tests-done
grep -E "passed|failed|error|rc=" $OUT/pytest-gpu.log | tail -4
grep -E "rc=|budget|ratio|variant" $OUT/window.log | cut -c1-160 | tail -40
