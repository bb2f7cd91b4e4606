#!/usr/bin/env bash
# The held-out draw committed for whichever card the device call got (issue 21): draw 16
# (seed 20261216, predictions of 10ac048 for both cards, committed before the call, the
# three-step naive baseline timed too); then, with CEIL_BUDGET > 0, the ceilings
# SECTIONS (default: those the card's file lacks) of the card's own file (resumed from
# it: run_ceilings_sections.sh). Results under $OUT:
#     BUDGET=250 CEIL_BUDGET=60 bash kernel_bench/run_draw_any.sh
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
. kernel_bench/card.sh
HW=$CARD DRAW=16 DATE=2026-12-07
# the ceilings sections each card's file lacks (the H100 measured the other two on 2026-12-07)
case "$CARD" in
  h200) DEFAULT_SECTIONS="wgmma pv_mn bf16,wgmma bwd_lone bf16,wgmma bwd_serial bf16,loaded latency,xla naive,wgmma swizzle bf16" ;;
  *) DEFAULT_SECTIONS="wgmma bwd_lone bf16,wgmma bwd_serial bf16,loaded latency,wgmma pv_mn bf16" ;;
esac
HW=$HW DRAW=$DRAW DATE=$DATE FROM=${FROM:-1} PART=${PART:-} BUDGET=${BUDGET:-215} \
    bash kernel_bench/run_heldout.sh > /dev/null 2>&1
tail -30 "$OUT/$HW-heldout$DRAW-$DATE${PART:-}.log"
if [ "${CEIL_BUDGET:-0}" != 0 ]; then  # SECTIONS of the card's own ceilings file
  OUT=$OUT CEIL_BUDGET=$CEIL_BUDGET SECTIONS=${SECTIONS:-$DEFAULT_SECTIONS} \
      bash kernel_bench/run_ceilings_sections.sh
fi
