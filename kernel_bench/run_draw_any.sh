#!/usr/bin/env bash
# The held-out draw committed for whichever card the device call got (issue 21): an H100
# runs draw 13 (datasheet-only predictions) and then measures its ceilings; an H200 runs
# draw 14 (predictions with its measured ceilings). Results under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $GPU"
case "$GPU" in
  *H200*) HW=h200 DRAW=14 ;;
  *H100*) HW=h100 DRAW=13 ;;
  *) echo "no draw committed for $GPU"; exit 2 ;;
esac
HW=$HW DRAW=$DRAW DATE=2026-12-06 BUDGET=${BUDGET:-215} bash kernel_bench/run_heldout.sh > /dev/null 2>&1
tail -40 "$OUT/$HW-heldout$DRAW-2026-12-06.log"
PYTHONPATH=. timeout 120 python3 -m kernel_bench.xla_kernels --out "$OUT/$HW-xla-kernels-2026-12-06.json" 2>&1 | tail -12
if [ "$HW" = h100 ] && [ "${CEIL_BUDGET:-165}" != 0 ]; then
  PYTHONPATH=. timeout 200 python3 -m pallas_kernels.ceilings --out "$OUT/h100-sxm.ceilings.toml" \
      --device h100-sxm --budget-s "${CEIL_BUDGET:-165}" > "$OUT/ceilings.log" 2>&1
  echo "ceilings rc=$?"; tail -45 "$OUT/ceilings.log"
fi
