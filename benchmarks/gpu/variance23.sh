#!/usr/bin/env bash
# Issue 23, call 1: where a row's variance lives, on one H200, 8+ FlagGems op files of 5 families
# (pointwise, reduction, norm, blas/autotuned, index), float16, core shapes. zlbench plain runs that
# sample processes (timer.processes=4), fresh tuning per process, at replay budgets of 5 and 20 ms;
# then a run whose processes share one tuning cache with 10 replay windows per call (adaptive,
# min=max=10 samples: the within-call spread). Analysed by variance23.py components.
# Usage: OPS='[...]' SETTINGS='rep5 rep20 shared' bash benchmarks/gpu/variance23.sh ; results under $OUT.
set -uo pipefail
. "$(dirname "$0")/setup.sh"
WORK=${WORK:-/tmp/zl_var23}; mkdir -p "$WORK"
OPS=${OPS:-[abs,addcmul,amax,mean,rms_norm,group_norm,mv,index_select,cross_entropy_loss,embedding]}
SETTINGS=${SETTINGS:-rep5 rep20 shared}
LIMIT=${LIMIT:-240}
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
args_of() { case $1 in
  rep5) echo "timer.rep_ms=5 timer.processes=4" ;;
  rep10) echo "timer.rep_ms=10 timer.processes=4" ;;
  rep20) echo "timer.rep_ms=20 timer.processes=4" ;;
  shared) echo "timer.rep_ms=20 timer.processes=3 timer.share_tuning=true" ;;
  *) echo "$1" | tr ',' ' ' ;;
esac; }
# One warm-up pass first (compiles into the shared Triton cache), not analysed.
timeout 200 python3 -m zlbench corpus=flaggems backend=cuda dtypes=[float16] "ops=$OPS" timer.processes=1 \
  isolate_caches=false progress=plain store.url=none hydra.run.dir="$WORK/warm" > "$OUT/warm.txt" 2>&1; echo "warm rc=$?"
for s in $SETTINGS; do
  t0=$(date +%s.%N)
  timeout "$LIMIT" python3 -m zlbench corpus=flaggems backend=cuda dtypes=[float16] "ops=$OPS" $(args_of "$s") \
    isolate_caches=false progress=plain store.url=none launcher.run_timeout_s=$((LIMIT - 20)) hydra.run.dir="$WORK/$s" > "$WORK/$s.txt" 2>&1
  echo "$s rc=$? wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$OUT/walls.txt"
  python3 benchmarks/gpu/variance23.py components "$WORK"/*/ --json "$OUT/components.json" > "$OUT/components.md" 2>&1
  tar czf "$OUT/runs.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$WORK" .
done
cat "$OUT/components.md"
