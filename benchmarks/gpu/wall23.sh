#!/usr/bin/env bash
# Issue 23's wall: where a plain pass' benchmark process spends its time, against FlagGems'
# `--mode cudagraph` on the same tests. Set-up: setup.sh. Steps:
#   1. issue23_ab.sh STEPS="plain fg" on $OPS4 / $FGFILES (+ $FGMARKS): both runners cold, same call
#   2. one process of that plain run (its unit r1) again by hand, each with a fresh FlagGems tuning
#      cache and the run's warm Triton cache, timed: as zlbench runs it (gc.freeze after collection)
#      and with the freeze undone (gc_probe.py), in ABAB order; gc_probe.py times the corpus'
#      gc.collect() calls in each (byhand.txt)
#   3. the same process under cProfile (profile.txt: cumulative and own time)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/setup.sh"
WORK=${WORK:-/tmp/zl_wall23}; export WORK
STEPS="${WALL_STEPS:-plain fg}" bash "$HERE/issue23_ab.sh"
RUN=$WORK/plain${TAG:-}
byhand() {  # name unfreeze profile
  python3 - "$RUN" "$1" "$2" "$3" "$HERE" "$OUT" <<'PY'
import json, os, subprocess, sys, time
run, name, unfreeze, profile, here, out = sys.argv[1:]
plan = json.load(open(f"{run}/plan.json"))
unit = next(u for u in plan["units"] if u["round"] == 1)
scratch = f"{run}/byhand/{name}"; os.makedirs(scratch, exist_ok=True)
cfg = {**unit["plugin_config"], "events": f"{scratch}/events.jsonl", "fast_exit": profile != "1"}
json.dump(cfg, open(f"{scratch}/plugin_config.json", "w"))
env = {**os.environ, **unit["env"], "ZLBENCH_PLUGIN_CONFIG": f"{scratch}/plugin_config.json",
       "FLAGGEMS_CACHE_DIR": f"{scratch}/tuning", "ZL_GC_UNFREEZE": unfreeze,
       "ZL_GC_PROBE_OUT": f"{scratch}/gc.json"}
env["PYTHONPATH"] = os.pathsep.join([unit["env"].get("PYTHONPATH", ""), here, os.environ.get("PYTHONPATH", "")])
head = [sys.executable, "-m", "cProfile", "-o", f"{scratch}/prof.out"] if profile == "1" else [sys.executable]
argv = head + unit["argv"][1:] + ["-p", "gc_probe"] + [os.path.join(unit["corpus_root"], n) for n in unit["nodes"]]
t0 = time.time()
rc = subprocess.run(argv, cwd=scratch, env=env, stdout=open(f"{scratch}/pytest.log", "w"), stderr=subprocess.STDOUT).returncode
wall = time.time() - t0
ends = [json.loads(l) for l in open(f"{scratch}/events.jsonl") if '"end"' in l]
gc_ = json.load(open(f"{scratch}/gc.json")) if os.path.exists(f"{scratch}/gc.json") else {}
line = (f"{name}: wall {wall:.1f} s rc {rc} nodes ok {sum(e.get('status') == 'ok' for e in ends)}/{len(unit['nodes'])} "
        f"gc.collect calls {gc_.get('calls')} total {gc_.get('seconds')} s frozen {gc_.get('frozen')}"
        f" -> {gc_.get('frozen_at_end')}; first ms {gc_.get('first_ms')} median rest {gc_.get('median_rest_ms')} ms")
print(line); open(f"{out}/byhand.txt", "a").write(line + "\n")
PY
}
for s in ${BYHAND:-freeze1 unfrozen1 freeze2 unfrozen2}; do
  case $s in freeze*) byhand "$s" 0 0;; unfrozen*) byhand "$s" 1 0;; esac
  tar czf "$OUT/runs/byhand.tgz" --exclude=tuning --exclude=prof.out -C "$RUN" byhand
done
if [ "${PROFILE:-1}" = 1 ]; then
  byhand profiled 0 1
  python3 -c "
import pstats, sys
s = pstats.Stats('$RUN/byhand/profiled/prof.out', stream=sys.stdout)
s.sort_stats('cumulative').print_stats(70); s.sort_stats('tottime').print_stats(40)" > "$OUT/profile.txt" 2>&1
  tar czf "$OUT/runs/byhand.tgz" --exclude=tuning --exclude=prof.out -C "$RUN" byhand
fi
cat "$OUT/wall.txt" "$OUT/byhand.txt"
