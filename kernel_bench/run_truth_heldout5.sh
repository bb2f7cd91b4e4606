#!/usr/bin/env bash
# Held-out draw 5 (issue 21), as it was run: kernel_bench/run_heldout.sh for its file.
DRAW=5 DATE=2026-12-02 exec bash "$(dirname "$0")/run_heldout.sh"
