#!/usr/bin/env bash
# GPU validation, part 1 (issues 3 and 5): fault classification on fixtures, >=10 real FlagGems op
# files under timer=graph and timer=direct, A/B liveness of a live and a dead switch.
# Set-up: setup.sh.
set -uo pipefail
. "$(dirname "$0")/setup.sh"
R=$OUT/runs; mkdir -p "$R"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/log.txt"; }
STEPS=${STEPS:-fixtures graph direct ab_live ab_dead graph_rest direct_rest}
# Each step's output and run dir go under $R; runs.tgz is refreshed after every step, so a call cut
# short still brings back what finished.
step() { local name=$1 limit=$2; shift 2; case " $STEPS " in *" $name "*) ;; *) return;; esac; log "start $name"
  timeout "$limit" "$@" >"$R/$name.txt" 2>&1; log "end $name rc=$?"
  tar czf "$OUT/runs.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$OUT" runs; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  (cd .fg && git log -1 --format=%H 2>/dev/null || echo "flaggems: archive of the fetched checkout")
  python3 -m pytest --version
} > "$OUT/env.txt" 2>&1

OPS='[exp,gelu,sum,argmax,layer_norm,softmax,fft,topk,mm,rand,cumsum,nonzero]'
step fixtures 100 python3 -m pytest -q -s -p no:cacheprovider --basetemp=$R/fixtures_tmp tests/test_gpu.py
step graph 200 python3 -m zlbench corpus=flaggems backend=cuda timer=graph "ops=$OPS" isolate_caches=false launcher.run_timeout_s=180 progress=plain hydra.run.dir=$R/graph
step direct 110 python3 -m zlbench corpus=flaggems backend=cuda timer=direct "ops=$OPS" dtypes=[float16] timer.warmup_ms=25 timer.rep_ms=50 isolate_caches=false launcher.run_timeout_s=100 progress=plain hydra.run.dir=$R/direct
step ab_live 95 python3 -m zlbench corpus=flaggems backend=cuda ab=triton_fp_fusion ab.rounds=2 ops=[layer_norm] dtypes=[float32] launcher.run_timeout_s=90 progress=plain hydra.run.dir=$R/ab_live
step ab_dead 80 python3 -m zlbench corpus=flaggems backend=cuda ab=musa_rlc ab.rounds=2 ops=[exp] dtypes=[float32] launcher.run_timeout_s=75 progress=plain hydra.run.dir=$R/ab_dead
# What the first calls did not reach: random generation, matmul under graph, scan, nonzero.
# The live switch measured: four rounds (ABBA) on every GPU, both sides of a row on one GPU.
step ab_measured 255 python3 -m zlbench corpus=flaggems backend=cuda ab=triton_fp_fusion ab.rounds=4 "ops=[layer_norm,softmax,sum,exp]" dtypes=[float32] launcher.run_timeout_s=240 progress=plain hydra.run.dir=$R/ab_measured
OPS_REST='[rand,mm,cumsum,nonzero]'
step graph_rest 110 python3 -m zlbench corpus=flaggems backend=cuda timer=graph "ops=$OPS_REST" dtypes=[float16] isolate_caches=false launcher.run_timeout_s=100 progress=plain hydra.run.dir=$R/graph_rest
step direct_rest 110 python3 -m zlbench corpus=flaggems backend=cuda timer=direct "ops=$OPS_REST" dtypes=[float16] timer.warmup_ms=25 timer.rep_ms=50 isolate_caches=false launcher.run_timeout_s=100 progress=plain hydra.run.dir=$R/direct_rest
# Ctrl-C mid-run on a GPU, then resume: exit 130 then 0, every node ok, each row once.
interrupt_resume() {
  local d=$R/interrupted args="corpus=flaggems backend=cuda timer=graph ops=[exp,softmax,sum,gelu,layer_norm] dtypes=[float16] isolate_caches=false progress=plain"
  python3 -m zlbench $args hydra.run.dir=$d & local pid=$!
  sleep 40; kill -INT $pid; wait $pid; echo "interrupted: exit $?"
  python3 -m zlbench $args resume=$d; echo "resumed: exit $?"
  python3 - "$d" <<'PY'
import collections, csv, json, sys
d = sys.argv[1]
st = [r["status"] for r in csv.DictReader(open(f"{d}/ops_status.csv"))]
rows = [json.loads(l) for l in open(f"{d}/rows.jsonl")]
dup = [k for k, n in collections.Counter((r["op"], r["dtype"], r["shape"]) for r in rows).items() if n > 1]
print("statuses", collections.Counter(st), "rows", len(rows), "duplicated", dup)
PY
}
export -f interrupt_resume; export R
step interrupt_resume 240 bash -c interrupt_resume
rm -rf "$R"
log done
