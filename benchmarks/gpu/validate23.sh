#!/usr/bin/env bash
# Issue 23, call 2: three plain runs at defaults (timer=auto: graph, timer.processes and the replay
# budget as shipped) on 8 FlagGems op files of 5 families that RESULTS.md had not used, float16, core
# shapes, after FlagGems' own --mode cudagraph pass over the same files (which also warms the shared
# Triton cache; the runs use isolate_caches=false to share it). Analysed by variance23.py runs.
set -uo pipefail
. "$(dirname "$0")/setup.sh"
WORK=${WORK:-/tmp/zl_val23}; mkdir -p "$WORK"
OPS=${OPS:-[mul,sigmoid,argmax,var_mean,batch_norm,log_softmax,mm,gather]}
FILES=${FILES:-"test_mul.py test_sigmoid.py test_argmax.py test_var_mean.py test_batch_norm.py test_log_softmax.py test_mm.py test_gather.py"}
RUNS=${RUNS:-1 2 3}; LIMIT=${LIMIT:-130}
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
} > "$OUT/env.txt" 2>&1; cat "$OUT/env.txt"
t0=$(date +%s.%N)
[ -n "$FILES" ] && (cd "$FLAGGEMS_ROOT" && timeout 170 python3 -m pytest -q -p no:cacheprovider $(for f in $FILES; do echo benchmark/$f; done) \
  --mode cudagraph --level core --dtypes float16 --record log > "$WORK/fg_cudagraph.txt" 2>&1)
echo "flaggems_cudagraph rc=$? wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$OUT/walls.txt"
cp "$FLAGGEMS_ROOT"/result_*.log "$WORK/" 2>/dev/null
for i in $RUNS; do
  t0=$(date +%s.%N)
  timeout "$LIMIT" python3 -m zlbench corpus=flaggems backend=cuda dtypes=[float16] "ops=$OPS" isolate_caches=false \
    progress=plain store.url=none launcher.run_timeout_s=$((LIMIT - 10)) hydra.run.dir="$WORK/run$i" ${ZL_EXTRA:-} > "$WORK/run$i.txt" 2>&1
  echo "run$i rc=$? wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s" | tee -a "$OUT/walls.txt"
  tar czf "$OUT/runs.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$WORK" .
done
python3 benchmarks/gpu/variance23.py runs "$WORK"/run*/ --json "$OUT/runs.json" | tee "$OUT/runs.md"
python3 benchmarks/gpu/variance23.py components "$WORK"/run*/ > "$OUT/components.md" 2>&1; cat "$OUT/components.md"
