#!/usr/bin/env bash
# Issue 13: the fixed graph timer with its inputs' memory placements sampled (timer.placements=$K)
# (with TOL: only where placement moves a call) against the default (one placement), side by side on a machine with two GPUs (~6 min): each GPU
# runs timing13.sh's fixed step (the 8 op files, a cold run then three warm ones, its own caches)
# and FlagGems' own cudagraph mode (the agreement), GPU 0 the default, GPU 1 timer.placements=$K.
# Run-to-run spread is compared within a GPU, so the two GPUs' own difference does not enter it.
# Results: $OUT/one/ and $OUT/placements/ (timing13.md, timing13.json, timing13_rows.txt, runs.tgz).
set -uo pipefail
. "$(dirname "$0")/setup.sh"  # installs and byte-compiles once, before the two chains fork
K=${K:-5}
# TOL=0.015: GPU 1 with timer.placement_tol=$TOL (the own placement at the whole budget, one copy
# checks it, the other copies only where the two differ by more than TOL).
TOL=${TOL:-}
# FlagGems' runner names its log after argv: each GPU's native step runs in a copy of its own.
[ -d /tmp/zl_fg1 ] || cp -r "$FLAGGEMS_ROOT" /tmp/zl_fg1
one() { local gpu=$1 name=$2 root=$3; shift 3; mkdir -p "$OUT/$name"
  CUDA_VISIBLE_DEVICES=$gpu FLAGGEMS_ROOT=$root WORK=/tmp/zl_p13/$name OUT=$OUT/$name STEPS="fixed native analyze" \
    FIXED_RUNS="0 1 2 3" TRITON_CACHE_DIR=/tmp/zl_p13_triton_$name FLAGGEMS_CACHE_DIR=/tmp/zl_p13_fg_$name \
    ZL_EXTRA="$*" bash "$(dirname "$0")/timing13.sh" > "$OUT/$name.log" 2>&1; }
# SWAP=1: the default on GPU 1 and placements on GPU 0 (a second call cancels the GPUs' own difference).
A=0; B=1; [ -n "${SWAP:-}" ] && { A=1; B=0; }
one $A one "$FLAGGEMS_ROOT" &
one $B placements /tmp/zl_fg1 timer.placements=$K ${TOL:+timer.placement_tol=$TOL} &
wait
for n in one placements; do echo "== $n"; cat "$OUT/$n/timing13.md" 2>/dev/null | head -30; done
