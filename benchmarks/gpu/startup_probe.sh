#!/usr/bin/env bash
# Where a benchmark process' start-up goes (issue 23's wall: a more pass costs a start-up however few
# its nodes). Run from the repo root of a CUDA machine set up as setup.sh says. Writes under $OUT:
#   startup.txt      walls of: import torch; CUDA init; import flag_gems; pytest collection of $FILES
#                    (FlagGems' conftest), each REPS times, with yaml's pure-Python and C loaders
#   importtime.txt   python -X importtime of that collection (the 40 slowest imports, cumulative)
#   collect.prof.txt cProfile of that collection (the 60 costliest calls, cumulative)
#   yaml.txt         FlagGems' YAML files parsed by PyYAML's SafeLoader and CSafeLoader
set -uo pipefail
. "$(dirname "$0")/setup.sh"
FILES=${FILES:-benchmark/test_exp2.py benchmark/test_pad.py benchmark/test_cumsum.py}; REPS=${REPS:-3}
cd "$FLAGGEMS_ROOT" || exit 2
# A -p plugin that makes yaml.safe_load parse with libyaml (the same documents, parsed in C).
mkdir -p /tmp/zl_probe && cat > /tmp/zl_probe/cyaml_probe.py <<'EOF'
import yaml
if getattr(yaml, "__with_libyaml__", False):
    yaml.safe_load = lambda stream: yaml.load(stream, Loader=yaml.CSafeLoader)
EOF
export PYTHONPATH=/tmp/zl_probe:${PYTHONPATH:-}
secs() { local t0; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; python3 -c "print(round($(date +%s.%N) - $t0, 2))"; }
{
  for i in $(seq "$REPS"); do
    echo "rep $i: import torch $(secs python3 -c 'import torch')" \
      "| + cuda init $(secs python3 -c 'import torch; torch.zeros(1, device="cuda")')" \
      "| + import flag_gems $(secs python3 -c 'import torch, flag_gems')" \
      "| cyaml: $(secs python3 -c 'import cyaml_probe, torch, flag_gems')" \
      "| collect $(secs python3 -m pytest -q -p no:cacheprovider --collect-only $FILES)" \
      "| cyaml: $(secs python3 -m pytest -q -p no:cacheprovider -p cyaml_probe --collect-only $FILES)"
  done
} > "$OUT/startup.txt" 2>&1; cat "$OUT/startup.txt"
python3 -X importtime -m pytest -q -p no:cacheprovider --collect-only $FILES 2> /tmp/zl_probe/imp.txt >/dev/null
sort -t'|' -k2 -n -r /tmp/zl_probe/imp.txt | head -40 > "$OUT/importtime.txt"
python3 -m cProfile -o /tmp/zl_probe/collect.prof -m pytest -q -p no:cacheprovider --collect-only $FILES >/dev/null 2>&1
python3 -c "import pstats; pstats.Stats('/tmp/zl_probe/collect.prof').sort_stats('cumulative').print_stats(60)" \
  > "$OUT/collect.prof.txt" 2>&1
python3 - > "$OUT/yaml.txt" 2>&1 <<'EOF'
import glob, time, yaml
print("libyaml", yaml.__with_libyaml__, yaml.__version__)
for p in ["benchmark/core_shapes.yaml", *sorted(glob.glob("src/flag_gems/runtime/backend/_nvidia/**/*.yaml", recursive=True))]:
    s, got = open(p).read(), {}
    for name in ("SafeLoader", "CSafeLoader"):
        t = time.perf_counter()
        for _ in range(5):
            got[name] = yaml.load(s, Loader=getattr(yaml, name))
        print(f"{p} {name} {(time.perf_counter() - t) / 5 * 1000:.1f} ms")
    print(f"{p} same: {got['SafeLoader'] == got['CSafeLoader']}")
EOF
cat "$OUT/yaml.txt"; head -12 "$OUT/importtime.txt"
