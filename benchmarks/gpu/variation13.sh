#!/usr/bin/env bash
# Issue 13: where the fixed graph timer's run-to-run tails come from, on a machine with two GPUs
# (both parts at once; on the H200 pair the GPU-0 part took longer than the call's 420 s, cut after 7 processes:
# give it a 600 s call or fewer processes):
#   GPU 0: process_variation.py: the worst rows in several processes x placements x repeats, and the
#          autotuner's picks per process, fresh (each process tunes) against TRITON_CACHE_AUTOTUNING=1.
#   GPU 1: zlbench, timer=graph fixed (the defaults), on sum, layer_norm and bmm, warm: runs
#          alternating between fresh autotuning and TRITON_CACHE_AUTOTUNING=1 (a first cold run each),
#          analysed by timing13_analysis.py per setting (WORK/fresh, WORK/cached, runs fixed_1..3).
# Set-up: setup.sh. Results under $OUT.
set -uo pipefail
. "$(dirname "$0")/setup.sh"
WORK=${WORK:-/tmp/zl_var13}; mkdir -p "$WORK/fresh/runs" "$WORK/cached/runs"
OPS=${OPS:-[sum,layer_norm,bmm]}
RUNS=${RUNS:-0 1 2 3}
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
} > "$OUT/env.txt" 2>&1

gpu0() {
  CUDA_VISIBLE_DEVICES=0 PYTHONPATH="$FLAGGEMS_ROOT/src:${PYTHONPATH:-}" timeout 330 python3 benchmarks/gpu/process_variation.py run --procs 4 --cached 3 \
    --out "$OUT/pv.jsonl" > "$OUT/pv_run.txt" 2>&1
  python3 benchmarks/gpu/process_variation.py analyze "$OUT/pv.jsonl" > "$OUT/pv.md" 2>&1
}
zl() { local setting=$1 i=$2; shift 2; local t0; t0=$(date +%s.%N)
  timeout 150 python3 -m zlbench corpus=flaggems backend=cuda dtypes=[float16] devices=[1] "ops=$OPS" \
    isolate_caches=false progress=plain store.url=none launcher.run_timeout_s=120 \
    hydra.run.dir="$WORK/$setting/runs/fixed_$i" > "$WORK/$setting/runs/fixed_$i.txt" 2>&1; local rc=$?
  echo "fixed_$i $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc=$rc" >> "$WORK/$setting/wall.txt"; }
gpu1() {
  for i in $RUNS; do
    TRITON_CACHE_DIR=/tmp/zl_var13_triton_fresh zl fresh "$i"
    TRITON_CACHE_DIR=/tmp/zl_var13_triton_cached TRITON_CACHE_AUTOTUNING=1 zl cached "$i"
    tar czf "$OUT/runs.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$WORK" fresh cached
  done
  for s in fresh cached; do
    python3 benchmarks/gpu/timing13_analysis.py "$WORK/$s/runs" --md "$OUT/$s.md" --json "$OUT/$s.json" \
      --rows "$OUT/${s}_rows.txt" > /dev/null 2>&1
  done
}
gpu0 & gpu1 & wait
cat "$OUT/pv.md"; for s in fresh cached; do echo "== $s"; head -20 "$OUT/${s}_rows.txt"; done
