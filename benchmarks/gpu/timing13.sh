#!/usr/bin/env bash
# GPU benchmark of issue 13 items 1-3 (adaptive stopping, clock screening, bimodal rows) on real
# FlagGems: 8 op files of 4 families (pointwise exp gelu; reductions sum softmax layer_norm; blas
# bmm; others cumsum topk), float16, core shapes. Set-up: setup.sh (wheels in .whl/ incl.
# nvidia-ml-py, FlagGems in .fg/). Analysis: timing13_analysis.py (run by the analyze step, or
# later on the fetched runs.tgz). Steps, in order, with their device time on a warm H200 (measured
# 2026-11-30c; native not yet: its first try failed on the log's name, fixed in native_step):
#   clocks   ~25 s  every clock reader against a device spin (clock_check.py), and one zlbench
#                   run through the kernel-timer reader (timer.clock_reader=kernel_timer)
#   fixed    ~130 s timer=graph timer.stop=fixed, twice (the first also compiles into the caches)
#   graph    ~150 s timer=graph timer.stop=adaptive timer.clock_reader=auto, three runs
#   direct   ~145 s timer=direct, adaptive with clocks as graph, warmup 25 ms, rep 50 ms, three runs
#   native   ? s    FlagGems' own runner, --mode cudagraph (its default 100 ms), one run
#   targets  ~155 s timer=graph, adaptive with clocks, with timer.target_rel=0.003 and =0.01, two runs each, on 4 of the files
#   analyze  ~5 s   timing13_analysis.py over what is there -> timing13.md, timing13.json
# ZL_EXTRA: overrides added to every zlbench run (e.g. timer.placements=5; placements13.sh).
# Two calls of at most 9 minutes each:
#   OUT=... STEPS="clocks fixed graph" bash benchmarks/gpu/timing13.sh
#   OUT=... STEPS="direct native targets analyze" bash benchmarks/gpu/timing13.sh
# Runs are kept in $WORK (default /tmp/zl_timing13, which outlives a call while the machine stays
# warm) and archived as $OUT/runs.tgz (runs/, wall.txt, clocks.json) after every step; each step is
# bounded by `timeout`. A second call on a fresh machine compiles again (its first run is slower)
# and sees only its own runs: analyze both archives afterwards, extracted side by side:
#   python benchmarks/gpu/timing13_analysis.py call1/runs call2/runs
set -uo pipefail
. "$(dirname "$0")/setup.sh"
WORK=${WORK:-/tmp/zl_timing13}; R=$WORK/runs; mkdir -p "$R"
WALL=$WORK/wall.txt; touch "$WALL"
log() { echo "== $(date +%T) $*" | tee -a "$OUT/log.txt"; }
STEPS=${STEPS:-clocks fixed graph direct native targets analyze}
step() { local name=$1 limit=$2; shift 2; case " $STEPS " in *" $name "*) ;; *) return;; esac; log "start $name"
  timeout "$limit" "$@" >"$R/$name.txt" 2>&1; log "end $name rc=$?"
  tar czf "$OUT/runs.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$WORK" runs wall.txt \
    $(cd "$WORK" && ls clocks.json 2>/dev/null); }
timed() { local name=$1; shift; local t0; t0=$(date +%s.%N); "$@"; local rc=$?
  echo "$name $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc=$rc" | tee -a "$WALL"; }

{ date -u; nvidia-smi --query-gpu=name,driver_version,pci.bus_id,clocks.max.sm,clocks.max.mem --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  python3 -c 'import pynvml; print("nvidia-ml-py", pynvml.__file__)' 2>&1 | tail -1
} > "$OUT/env.txt" 2>&1

OPS='[exp,gelu,sum,softmax,layer_norm,bmm,cumsum,topk]'
OPS_SUB='[exp,softmax,bmm,topk]'
FILES="test_exp.py test_gelu.py test_sum.py test_softmax.py test_layer_norm.py test_bmm.py test_cumsum.py test_topk.py"
MARKS="exp or gelu or sum or softmax or layer_norm or bmm or cumsum or topk"
zl() { local name=$1; shift; timed "$name" python3 -m zlbench corpus=flaggems backend=cuda dtypes=[float16] \
  isolate_caches=false progress=plain store.url=none hydra.run.dir=$R/$name "$@" ${ZL_EXTRA:-}; }
# The adaptive steps ask for it (the defaults are timer.stop=fixed, timer.clock_reader=none).
ADAPT="timer.stop=adaptive timer.clock_reader=auto"
export -f zl timed; export R WALL WORK ADAPT FIXED_RUNS ZL_EXTRA

clocks_step() {
  python3 benchmarks/gpu/clock_check.py > "$WORK/clocks.json"; echo "clock_check rc=$?"
  zl clocks_kernel_timer timer=graph ops=[exp] timer.clock_reader=kernel_timer launcher.run_timeout_s=60
}
export -f clocks_step
step clocks 120 bash -c clocks_step
# FIXED_RUNS: the fixed runs' numbers (fixed_0 is not analysed: on a fresh machine, a cold run that
# fills the caches, e.g. FIXED_RUNS="0 1 2 3" for three warm runs).
step fixed 330 bash -c 'for i in ${FIXED_RUNS:-1 2}; do zl fixed_$i timer=graph timer.stop=fixed timer.clock_reader=none "ops=$0" launcher.run_timeout_s=160; done' "$OPS"
step graph 320 bash -c 'for i in 1 2 3; do zl graph_$i timer=graph $ADAPT "ops=$0" launcher.run_timeout_s=100; done' "$OPS"
step direct 300 bash -c 'for i in 1 2 3; do zl direct_$i timer=direct $ADAPT timer.warmup_ms=25 timer.rep_ms=50 "ops=$0" launcher.run_timeout_s=95; done' "$OPS"
native_step() { # FlagGems' runner over the same files and marks. Its conftest names the log after
  # argv (all of it joined: 2026-11-30c, ENAMETOOLONG with the 8 files and the marks on argv), so it
  # runs in benchmark/ with the marks, level and dtypes in PYTEST_ADDOPTS, which argv does not hold.
  (cd "$FLAGGEMS_ROOT/benchmark" && rm -f result*.log
   PYTEST_ADDOPTS="-m '$MARKS' --level core --dtypes float16" \
     timed native_cudagraph python3 -m pytest -q $FILES --mode cudagraph --record log
   mv result*.log "$R/native_cudagraph.log"); }
export -f native_step; export FILES MARKS
step native 200 bash -c native_step
step targets 260 bash -c 'for t in 0.003 0.01; do for i in 1 2; do zl target_${t}_$i timer=graph $ADAPT timer.target_rel=$t "ops=$0" launcher.run_timeout_s=60; done; done' "$OPS_SUB"
step analyze 60 python3 benchmarks/gpu/timing13_analysis.py "$R" --json "$OUT/timing13.json" --md "$OUT/timing13.md" \
  --rows "$OUT/timing13_rows.txt"
[ -f "$OUT/timing13.md" ] && cat "$OUT/timing13.md"
log done
