#!/usr/bin/env bash
# A held-out draw (issue 21): one device call that times every job of the predictions
# committed before it (python -m kernel_bench.heldout_draw predict --seed SEED --out
# specs/measurements/details/HW-heldoutDRAW-DATE.predictions.json), with the sha256 of
# the kernels measured. DRAW, DATE: the file's; HW: its device prefix (default h200);
# BUDGET: seconds after which no job starts; FROM: the first job to time (a later call
# finishing what an earlier one's budget left; its files get the suffix PART).
set -uo pipefail
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-190}
NAME=${HW:-h200}-heldout${DRAW:?DRAW}-${DATE:?DATE}
OUTNAME=$NAME${PART:-}
mkdir -p "$OUT"
sha256sum pallas_kernels/*.py kernel_rules/*.py > "$OUT/$OUTNAME.tree.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv | tee "$OUT/gpu.txt"
PYTHONPATH=. timeout $((BUDGET + 60)) python3 -m kernel_bench.heldout_draw measure \
    --predictions "specs/measurements/details/$NAME.predictions.json" \
    --out "$OUT/$OUTNAME.json" --details "$OUT/$OUTNAME.details.json" \
    --budget-s "$BUDGET" --run-name "heldout$DRAW" --from-job "${FROM:-1}" 2>&1 | tee "$OUT/$OUTNAME.log"
date -u | tee -a "$OUT/$OUTNAME.log"
