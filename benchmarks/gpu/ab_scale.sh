#!/usr/bin/env bash
# Issue 12's benchmark: the A/B at corpus scale, today's round-level design (ab.schedule=round: each
# side's whole pass in fresh processes per round) against the node-level one (ab.schedule=node:
# resident side processes, ABBA per node, liveness first, sequential rounds), on the same >= 10
# FlagGems op files, float16. Set-up: setup.sh. Analysis: ab_scale.py $OUT/runs (wall from wall.txt).
#   CHAIN0 / CHAIN1: the steps GPU 0 / GPU 1 run, each chain in order, both chains at the same time
#   (a machine with two GPUs: both designs under the same conditions; CHAIN1 empty on one GPU).
#   CHAIN01: steps run on both GPUs at once (devices=[0,1]), before the two chains, e.g.
#   CHAIN01="plain live_node": a plain pass and an A/B over two GPUs (each node's sides on one GPU);
#   their run dirs are named <step>_2gpu. The 1-GPU yardsticks come from CHAIN0.
#   plain        one plain zlbench pass of the ops (the dead axis' yardstick)
#   dead_node    ab=musa_rlc (not read on NVIDIA: a dead axis), node-level, ab.rounds=$MAX
#   dead_round   the same, round-level, ab.rounds=$DEAD_ROUNDS (it costs 2 x rounds passes)
#   aa_node / aa_round     A/A (ab.aa=true) of triton_fp_fusion, ab.rounds=$MAX each
#   live_node / live_round ab=triton_fp_fusion (live on NVIDIA), ab.rounds=$MAX each
#   aa_node_respawn        A/A node-level with ab.respawn_every=1 (the respawn default's evidence)
#   live_node_nosteal      live_node with launcher.steal=false (on several GPUs: no device takes
#                          another's rounds; the yardstick of zlbench/engine/stealing.py's round stealing)
set -uo pipefail
. "$(dirname "$0")/setup.sh"
# Ten op files of seven families (unary and binary pointwise, activation, reduction, index
# reduction, scan, norm); FlagGems' mm mark also pulls in test_blas_perf_parallel.py and a >100 s
# self-transpose test, too long for these calls.
OPS=${OPS:-[exp,add,gelu,sum,softmax,sigmoid,argmax,cumsum,layer_norm,abs]}
MAX=${MAX:-4}
DEAD_ROUNDS=${DEAD_ROUNDS:-2}
LIMIT=${LIMIT:-560}  # per step on GPU 0; LIMIT1 on GPU 1
LIMIT1=${LIMIT1:-$LIMIT}
CHAIN0=${CHAIN0-plain dead_node aa_node live_node}  # set empty: no steps
CHAIN1=${CHAIN1-aa_round live_round}
CHAIN01=${CHAIN01:-}
R=$OUT/runs; mkdir -p "$R"
WALL=$OUT/wall.txt; touch "$WALL"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  echo "ops=$OPS max_rounds=$MAX dead_rounds=$DEAD_ROUNDS"; env | grep -E '^(OPS_|LIMIT_|CHAIN)' | sort
} > "$OUT/env.txt" 2>&1

# Per step, optionally: LIMIT_<step> (its time limit, s) and OPS_<step> (its ops), e.g. OPS_aa_node=[exp,sum].
label() { [ "$2" = "0,1" ] && echo "${1}_2gpu" || echo "$1"; }
zl() { local name=$1 dev=$2 limit=$LIMIT; shift 2; [ "$dev" = 1 ] && limit=$LIMIT1
  local lv="LIMIT_$name" ov="OPS_$name"; limit=${!lv:-$limit}; local ops=${!ov:-$OPS}
  name=$(label "$name" "$dev")  # OPS_/LIMIT_ of the step hold for its 2-GPU run too
  timeout "$limit" python3 -m zlbench corpus=flaggems backend=cuda "ops=$ops" dtypes=[float16] devices=[$dev] \
    progress=plain launcher.run_timeout_s=$((limit - 30)) hydra.run.dir=$R/$name "$@"; }
run_step() { local name=$1 dev=$2; case $name in
  plain) zl "$name" "$dev";;
  dead_node) zl "$name" "$dev" ab=musa_rlc ab.rounds=$MAX ab.allow_dead=true;;
  dead_round) zl "$name" "$dev" ab=musa_rlc ab.schedule=round ab.rounds=$DEAD_ROUNDS ab.allow_dead=true;;
  aa_node) zl "$name" "$dev" ab=triton_fp_fusion ab.aa=true ab.rounds=$MAX;;
  aa_round) zl "$name" "$dev" ab=triton_fp_fusion ab.aa=true ab.schedule=round ab.rounds=$MAX;;
  aa_node_respawn) zl "$name" "$dev" ab=triton_fp_fusion ab.aa=true ab.rounds=$MAX ab.respawn_every=1;;
  live_node) zl "$name" "$dev" ab=triton_fp_fusion ab.rounds=$MAX;;
  live_node_nosteal) zl "$name" "$dev" ab=triton_fp_fusion ab.rounds=$MAX launcher.steal=false;;
  live_round) zl "$name" "$dev" ab=triton_fp_fusion ab.schedule=round ab.rounds=$MAX;;
  *) echo "unknown step $name"; return 2;;
  esac; }
timed() { local name=$1 dev=$2 t0 rc; t0=$(date +%s.%N)
  run_step "$name" "$dev" > "$R/$(label "$name" "$dev").txt" 2>&1; rc=$?
  echo "$(label "$name" "$dev") $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc=$rc gpu=$dev" >> "$WALL"; }
pack() { tar czf "$OUT/runs.tgz" --exclude=cache --exclude=submitit --exclude=resident --exclude='*.pyc' -C "$OUT" runs; }

chain() { local dev=$1 step; shift
  for step in "$@"; do echo "== $(date +%T) gpu $dev $step" | tee -a "$OUT/log.txt"; timed "$step" "$dev"; pack; done; }
[ -n "$CHAIN01" ] && chain 0,1 $CHAIN01
chain 0 $CHAIN0 & chain 1 $CHAIN1 & wait
pack
cat "$WALL"
