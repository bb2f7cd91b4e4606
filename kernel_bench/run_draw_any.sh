#!/usr/bin/env bash
# The held-out draw committed for whichever card the device call got (issue 21): an H100
# times the 16 jobs of draw 15 its first call left (predictions of fe8c197, committed
# before either call; files with the suffix -part2) and then the ceilings sections no run
# has had time for; an H200 runs draw 14 (predictions with its measured ceilings).
# Results under $OUT.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $GPU"
case "$GPU" in
  *H200*) HW=h200 DRAW=14 DATE=2026-12-06 ;;
  *H100*) HW=h100 DRAW=15 DATE=2026-12-07 FROM=55 PART=-part2 ;;
  *) echo "no draw committed for $GPU"; exit 2 ;;
esac
HW=$HW DRAW=$DRAW DATE=$DATE FROM=${FROM:-1} PART=${PART:-} BUDGET=${BUDGET:-215} \
    bash kernel_bench/run_heldout.sh > /dev/null 2>&1
tail -30 "$OUT/$HW-heldout$DRAW-$DATE${PART:-}.log"
if [ "$HW" = h100 ] && [ "${CEIL_BUDGET:-165}" != 0 ]; then
  PYTHONPATH=. timeout $((${CEIL_BUDGET:-165} + 40)) python3 -m pallas_kernels.ceilings \
      --out "$OUT/h100-sxm.ceilings.toml" --device h100-sxm --budget-s "${CEIL_BUDGET:-165}" \
      --resume specs/devices/h100-sxm.ceilings.toml \
      --sections "wgmma fp16,triton fp16,mma.sync fp16,wgmma bwd bf16" \
      > "$OUT/ceilings.log" 2>&1
  echo "ceilings rc=$?"; tail -45 "$OUT/ceilings.log"
fi
