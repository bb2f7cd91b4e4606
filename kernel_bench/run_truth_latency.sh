#!/usr/bin/env bash
# Model truth (issue 21): the pointer-chase latencies of pallas_kernels.ceilings (section
# "latency": one dependent load at a time from DRAM and from L2), on one H200, merged
# into a copy of the committed ceilings file (--resume keeps its other sections).
set -euo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
PYTHONPATH=. python3 -m pallas_kernels.ceilings --out "$OUT/h200-sxm.ceilings.toml" \
    --sections latency --resume specs/devices/h200-sxm.ceilings.toml --budget-s 90 \
    2>&1 | tee "$OUT/h200-latency.log"
