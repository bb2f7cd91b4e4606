#!/usr/bin/env bash
# Held-out draw 5 (issue 21): one device call that times every job of the predictions
# committed before it (python -m kernel_bench.heldout_draw predict --seed 20261205), with
# the sha256 of the kernels measured. BUDGET: seconds after which no job starts.
set -uo pipefail
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-190}
NAME=h200-heldout5-2026-12-02
mkdir -p "$OUT"
sha256sum pallas_kernels/*.py > "$OUT/$NAME.tree.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
PYTHONPATH=. timeout $((BUDGET + 60)) python3 -m kernel_bench.heldout_draw measure \
    --predictions "specs/measurements/details/$NAME.predictions.json" \
    --out "$OUT/$NAME.json" --details "$OUT/$NAME.details.json" \
    --budget-s "$BUDGET" --run-name heldout5 2>&1 | tee "$OUT/$NAME.log"
date -u | tee -a "$OUT/$NAME.log"
