# Draw 5's shapes (development data since it was scored) timed again with each call's
# CUPTI kernel list (names, median seconds) in the details: what the training step's
# XLA kernels, cuDNN's decode kernels and the d = 96 forward launch (issue 21).
# From the repository root with $OUT set; about BUDGET + 40 s.
export PYTHONUNBUFFERED=1 PYTHONPATH=. XLA_PYTHON_CLIENT_PREALLOCATE=false
python -m kernel_bench.heldout_draw measure \
  --predictions specs/measurements/details/h200-kernel-lists-2026-12-03.shapes.json \
  --out $OUT/h200-kernel-lists-2026-12-03.json \
  --details $OUT/h200-kernel-lists-2026-12-03.details.json \
  --budget-s ${BUDGET:-150} --run-name kernel-lists 2>&1 | tee $OUT/kernel-lists.log | tail -50
