#!/usr/bin/env bash
# Where the wall time of one FlagGems file goes under zlbench (issue 3's wall target), and whether
# direct timing is launch-bound (issue 3's direct noise). Set-up: setup.sh. About 5 minutes.
#   imports.txt     wall of `import torch`, CUDA init, `import triton`, `import flag_gems`
#   importtime.txt  python -X importtime of flag_gems (the heaviest modules)
#   wall.txt        a cold zlbench run (compiles), then a warm one
#   events.jsonl    the warm run's process timeline (launch, session_start, node start/end, exited)
#   profile.txt     cProfile of the warm run's benchmark process, rerun by hand from plan.json
#   gap_1/2.json    benchmarks/gpu/direct_gap.py in two processes
set -uo pipefail
. "$(dirname "$0")/setup.sh"
FILE=${FILE:-test_exp.py}
FG_PATH=$FLAGGEMS_ROOT/src:${PYTHONPATH:-}   # flag_gems importable outside zlbench's runs
R=/tmp/zl_prof; rm -rf "$R"; mkdir -p "$R"
WALL=$OUT/wall.txt; : > "$WALL"
timed() { local name=$1; shift; local t0; t0=$(date +%s.%N); "$@" > "$R/$name.out" 2> "$R/$name.err"; local rc=$?
  echo "$name $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") rc=$rc" | tee -a "$WALL"; }
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,clocks.sm,clocks.max.sm --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  nproc; } > "$OUT/env.txt" 2>&1

for stmt in "import torch" "import torch; torch.zeros(1, device='cuda')" "import triton" "import flag_gems" \
            "import pytest"; do
  t0=$(date +%s.%N); PYTHONPATH=$FG_PATH python3 -c "$stmt" >/dev/null 2>&1
  echo "$(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s  $stmt" >> "$OUT/imports.txt"; done
PYTHONPATH=$FG_PATH python3 -X importtime -c "import flag_gems" 2> "$R/importtime.raw"
sort -t'|' -k2 -n -r "$R/importtime.raw" | head -40 > "$OUT/importtime.txt"

zl() { python3 -m zlbench corpus=flaggems backend=cuda op_file=$FILE isolate_caches=false progress=none \
     timer=graph corpus.fast_exit=false hydra.run.dir=$R/$1; }
timed zl_cold zl cold
timed zl_warm zl warm
cp "$(ls -d "$R"/warm/units/*/ | head -1)events.jsonl" "$OUT/events.jsonl"

# The warm run's benchmark process again, by hand, under cProfile.
python3 - "$R/warm" "$R/prof.out" <<'EOF'
import json, os, subprocess, sys
run, out = sys.argv[1], sys.argv[2]
unit = json.load(open(f"{run}/plan.json"))["units"][0]
udir = f"{run}/units/{unit['unit_id']}"
env = {**os.environ, **unit["env"], "ZLBENCH_PLUGIN_CONFIG": f"{udir}/plugin_config.json"}
env["PYTHONPATH"] = unit["env"].get("PYTHONPATH", "") + os.pathsep + os.environ.get("PYTHONPATH", "")
argv = [sys.executable, "-m", "cProfile", "-o", out] + unit["argv"][1:] + [
    os.path.join(unit["corpus_root"], n) for n in unit["nodes"]]
subprocess.run(argv, cwd=udir, env=env, stdout=open(f"{udir}/profile.log", "w"), stderr=subprocess.STDOUT)
EOF
python3 -c "
import pstats, sys
s = pstats.Stats('$R/prof.out', stream=sys.stdout)
s.sort_stats('cumulative').print_stats(45); s.sort_stats('tottime').print_stats(25)" > "$OUT/profile.txt" 2>&1

PYTHONPATH=$FG_PATH timed gap_1 python3 benchmarks/gpu/direct_gap.py; cp "$R/gap_1.out" "$OUT/gap_1.json"
PYTHONPATH=$FG_PATH timed gap_2 python3 benchmarks/gpu/direct_gap.py; cp "$R/gap_2.out" "$OUT/gap_2.json"
tail -n 5 "$R"/*.err >> "$OUT/env.txt" 2>&1
tail -3 "$OUT/profile.txt"; cat "$WALL" "$OUT/imports.txt"
