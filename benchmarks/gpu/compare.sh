#!/usr/bin/env bash
# GPU validation, part 2 (issue 3's benchmark): zlbench against FlagGems' own runner on the same
# file, side by side in one call, caches warm for both. Two runs of each; run-to-run noise per row
# (abs log ratio: median, p90, max) and wall time. Set-up: setup.sh.
#   RUNS: which runners, each run twice (default: native_kernel zl_graph zl_direct). Known:
#   native_kernel native_cudagraph (FlagGems' pytest --mode ...), zl_graph, zl_graph_r3 (median of
#   three captures), zl_graph_rep100 / _rep10 / _rep5 (other replay budgets), zl_graph_noauto
#   (pytest's plugin autoload off), zl_direct.
#   GAP=1: also benchmarks/gpu/direct_gap.py in two processes (gap_1.json, gap_2.json).
set -uo pipefail
. "$(dirname "$0")/setup.sh"
FILE=${FILE:-test_exp.py}
RUNS=${RUNS:-native_kernel zl_graph zl_direct}
R=$OUT/cmp; mkdir -p "$R"
WALL=$OUT/wall.txt; : > "$WALL"
timed() { local name=$1; shift; local t0; t0=$(date +%s.%N); "$@" > "$R/$name.out" 2>&1; local rc=$?
  echo "$name $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc=$rc" | tee -a "$WALL"; }
native() { # FlagGems' runner: one pytest over the file, from the checkout. Its log is named after
  # argv (result-q_benchmark_...log here).
  (cd "$FLAGGEMS_ROOT" && rm -f result*.log
   python3 -m pytest -q "benchmark/$FILE" --level core --mode "$2" --record log
   mv result*.log "$R/$1.log"); }
zl() { python3 -m zlbench corpus=flaggems backend=cuda op_file=$FILE isolate_caches=false progress=none \
     hydra.run.dir=$R/$1 "${@:2}"; }
run_one() { case $1 in
  native_kernel) native "$2" kernel;; native_cudagraph) native "$2" cudagraph;;
  zl_graph) zl "$2" timer=graph;; zl_graph_r3) zl "$2" timer=graph timer.repeat=3;;
  zl_graph_rep100) zl "$2" timer=graph timer.rep_ms=100;; zl_direct) zl "$2" timer=direct;;
  zl_graph_rep10) zl "$2" timer=graph timer.rep_ms=10;; zl_graph_rep5) zl "$2" timer=graph timer.rep_ms=5;;
  zl_graph_noauto) PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 zl "$2" timer=graph;;
  *) echo "unknown run $1"; return 2;; esac; }

: > "$OUT/noise.txt"
# A first run compiles every kernel into the shared caches, so that every measured run is warm.
[ "${WARM:-1}" = 1 ] && timed warm zl warm timer=graph
for run in $RUNS; do
  timed "${run}_1" run_one "$run" "${run}_1"
  timed "${run}_2" run_one "$run" "${run}_2"
  case $run in native_*) a=$R/${run}_1.log b=$R/${run}_2.log;; *) a=$R/${run}_1 b=$R/${run}_2;; esac
  echo "== $run" >> "$OUT/noise.txt"
  python3 benchmarks/noise.py "$a" "$b" >> "$OUT/noise.txt" 2>&1
done
cat "$OUT/noise.txt"
if [ "${GAP:-0}" = 1 ]; then for i in 1 2; do
  PYTHONPATH=$FLAGGEMS_ROOT/src:$PYTHONPATH python3 benchmarks/gpu/direct_gap.py > "$OUT/gap_$i.json" \
    2> "$R/gap_$i.err" || tail -5 "$R/gap_$i.err"; done; fi
tar czf "$OUT/cmp.tgz" --exclude=cache --exclude=submitit -C "$OUT" cmp && rm -rf "$R"
