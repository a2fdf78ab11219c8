#!/usr/bin/env bash
# Multi-GPU verification (issue 7) on a machine with several GPUs, real FlagGems: a sweep of 45 op
# files (pointwise, comparison, reduction, normalization, scan) on all GPUs and on one, an
# interleaved A/B on all GPUs; then benchmarks/multi_gpu.py checks pinning (bus id per row),
# scaling and that both A/B sides of each row ran on one GPU. Set-up: setup.sh.
#   DTYPES='[float16]' (default; '[]' = FlagGems' three dtypes, about 3x the work: split the steps
#   over two calls on one warm machine, STEPS="warm many" then STEPS="one ab", and run
#   benchmarks/multi_gpu.py here on the two mg.tgz extracted side by side).
set -uo pipefail
. "$(dirname "$0")/setup.sh"
R=$OUT/mg; mkdir -p "$R"
WALL=$OUT/wall.txt; : > "$WALL"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/log.txt"; }
OPS=${OPS:-'[abs,neg,exp,exp2,log,sin,cos,tanh,sigmoid,relu,gelu,silu,sqrt,rsqrt,reciprocal,erf,add,sub,div_out,maximum,minimum,eq,ne,gt,lt,ge,le,clamp,sum,mean,amax,max,min,argmax,argmin,softmax,layer_norm,cumsum,isnan,bitwise_not,logical_and,tan,sign,floor,log1p]'}
STEPS=${STEPS:-warm many one ab}
# (an array, not a function: `timeout` runs programs)
DTYPES=${DTYPES:-'[float16]'}
zl=(python3 -m zlbench corpus=flaggems backend=cuda timer=graph "ops=$OPS" "dtypes=$DTYPES" isolate_caches=false progress=plain)
step() { local name=$1 limit=$2; shift 2; case " $STEPS " in *" $name "*) ;; *) return;; esac; log "start $name"
  local t0; t0=$(date +%s.%N)
  timeout "$limit" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  echo "$name $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc=$rc" | tee -a "$WALL"; log "end $name rc=$rc"
  tar czf "$OUT/mg.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$OUT" mg; }

{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  nproc; } > "$OUT/env.txt" 2>&1

# warm: compiles every kernel into the shared caches (and gives the balancer wall times per node).
step warm 185 "${zl[@]}" launcher.run_timeout_s=175 hydra.run.dir=$R/warm
step many 120 "${zl[@]}" cost_from=$R/warm launcher.run_timeout_s=110 hydra.run.dir=$R/many
step one 185 "${zl[@]}" devices=[0] launcher.run_timeout_s=175 hydra.run.dir=$R/one
# Both sides of each row on one GPU; per-side caches (isolate_caches) so liveness means something.
step ab 85 python3 -m zlbench corpus=flaggems backend=cuda ab=triton_fp_fusion ab.rounds=2 \
  "ops=[layer_norm,softmax,exp,sum]" dtypes=[float32] launcher.run_timeout_s=75 progress=plain hydra.run.dir=$R/ab
[ -d "$R/one" ] && [ -d "$R/many" ] && python3 benchmarks/multi_gpu.py --one $R/one --many $R/many $([ -d "$R/ab" ] && echo --ab $R/ab) --wall "$WALL" --json "$OUT/multi_gpu.json" \
  > "$OUT/multi_gpu.txt" 2>&1; cat "$OUT/multi_gpu.txt"
tar czf "$OUT/mg.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$OUT" mg && rm -rf "$R"
log done
