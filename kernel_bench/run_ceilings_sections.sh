#!/usr/bin/env bash
# Measure some ceilings sections again on whichever card the device call got, keeping the
# rest of that card's committed file (--resume): SECTIONS (comma-separated, of
# pallas_kernels.ceilings.SECTIONS), CEIL_BUDGET seconds. Results under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. kernel_bench/card.sh
DEV=$DEVICE
PYTHONPATH=. timeout $((${CEIL_BUDGET:-120} + 60)) python3 -m pallas_kernels.ceilings \
    --out "$OUT/$DEV.ceilings.toml" --device "$DEV" --budget-s "${CEIL_BUDGET:-120}" \
    --resume "specs/devices/$DEV.ceilings.toml" --sections "$SECTIONS" > "$OUT/ceilings.log" 2>&1
echo "ceilings rc=$?"; tail -40 "$OUT/ceilings.log"
