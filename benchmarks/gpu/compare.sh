#!/usr/bin/env bash
# GPU validation, part 2 (issue 3's benchmark): zlbench against FlagGems' own runner on the same
# file, side by side in one call, caches warm for both. Two runs of each; run-to-run noise per row
# (abs log ratio: median, p90, max) and wall time. Set-up: setup.sh.
set -uo pipefail
. "$(dirname "$0")/setup.sh"
FILE=${FILE:-test_exp.py}
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

timed native_kernel_1 native native_kernel_1 kernel
timed native_kernel_2 native native_kernel_2 kernel
timed zl_graph_1 zl zl_graph_1 timer=graph
timed zl_graph_2 zl zl_graph_2 timer=graph
timed zl_direct_1 zl zl_direct_1 timer=direct
timed zl_direct_2 zl zl_direct_2 timer=direct
PAIRS="native_kernel_1.log:native_kernel_2.log zl_graph_1:zl_graph_2 zl_direct_1:zl_direct_2"
if [ -n "${EXTRA:-}" ]; then  # the noise follow-ups: FlagGems' cudagraph mode, graph with more replay
  timed native_cudagraph_1 native native_cudagraph_1 cudagraph
  timed native_cudagraph_2 native native_cudagraph_2 cudagraph
  timed zl_graph_r3_1 zl zl_graph_r3_1 timer=graph timer.repeat=3 timer.rep_ms=100
  timed zl_graph_r3_2 zl zl_graph_r3_2 timer=graph timer.repeat=3 timer.rep_ms=100
  PAIRS="$PAIRS native_cudagraph_1.log:native_cudagraph_2.log zl_graph_r3_1:zl_graph_r3_2"
fi
for pair in $PAIRS; do
  a=${pair%%:*}; b=${pair##*:}
  echo "== $a vs $b" >> "$OUT/noise.txt"
  python3 benchmarks/noise.py "$R/$a" "$R/$b" >> "$OUT/noise.txt" 2>&1
done
cat "$OUT/noise.txt"
tar czf "$OUT/cmp.tgz" --exclude=cache --exclude=submitit -C "$OUT" cmp && rm -rf "$R"
