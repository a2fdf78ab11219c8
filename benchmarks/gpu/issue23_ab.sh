#!/usr/bin/env bash
# Issue 23's A/B benchmark at defaults (timer=auto, timer.processes, ab.rounds/min_rounds and
# ab.respawn_every as shipped; no overrides but the ops, the dtype, a time limit and the run dir),
# on FlagGems op files RESULTS.md had not used before. Set-up: setup.sh. Steps (STEPS, in order):
#   aa      A/A (ab=triton_fp_fusion ab.aa=true: both sides the same value) on $OPS
#   live    ab=triton_fp_fusion (TRITON_DEFAULT_FP_FUSION 1 -> 0: live on NVIDIA) on $OPS4
#   plain   a plain run on $OPS4 (the dead axis' and FlagGems' yardstick)
#   plainoff  the same with launcher.prestart=false (each pass' process starts when the one before ends)
#   plainshare  the same with timer.share_tuning=true (the processes share FlagGems' and Triton's picks)
#   plainauto  the same with pytest's plugin autoload on in the benchmark processes (as before 2026-12-03)
#   plainbase  the same run by another zlbench: BASE (default .fgz/base.tar.xz) holds its zlbench/ and conf/,
#           e.g. `git archive <commit> zlbench conf | xz > .fgz/base.tar.xz` (a change against main, same call)
#   plain2  a second plain run on $OPS4 (with plain: two runs of one caliber)
#   plain3  a third plain run on $OPS4
#   plainmax3  the same with timer.max_processes=3 (no node gets more processes: before the twentieth session)
#   plainnofuse  a plain run on $OPS4 with TRITON_DEFAULT_FP_FUSION=0 in the environment (a live change)
#   cmp     `zlbench summary` of plain against plain2 (expect no verdict) and against plainnofuse
#           (expect the fused ops' rows flagged): two plain runs judged on their rows' intervals
#   gate    `history compare` of plain against plain2 (GATE_A, GATE_B: other run dirs; the CI gate at
#           defaults) in a store of the two it builds; where it fails, the
#           recheck it prints, run as printed, and plain compared with that run (gate/compare*.json)
#   abenv   ab=env ab.var=$ABVAR ab.values=$ABVALUES on $OPS (any switch; e.g. TRITON_DISABLE_LINE_INFO
#           [0,1]: live, its kernels differ in their line tables only, so a neutral axis: no row may move)
#   dead    ab=musa_rlc (FLAGTREE_MUSA_RLC_ENHANCE: not read on NVIDIA's stock Triton) on $OPS4
#   fg      FlagGems' own runner, --mode cudagraph --record none, on the files of $OPS4 (or $FGFILES:
#           list every mark of those files in OPS4 so that both run the same tests), with Triton and
#           FlagGems caches of its own, cold as a zlbench run's (isolate_caches=true) are; FGMARKS
#           (a pytest -m expression) picks the same marks as OPS4 out of those files; FGDTYPES (default
#           float16, as DTYPES): its --dtypes, FGDTYPES= (empty) leaves FlagGems its own choice, as DTYPES= does
# Each step's run dir (without caches) is packed to $OUT/runs/<step>.tgz as soon as it ends, and its wall
# to $OUT/wall.txt, so a call cut short still returns what it measured. DTYPES (default [float16]):
# the dtypes override; DTYPES= (empty) leaves the corpus its own choice, as a run at defaults does.
# COPYMD=1: copies of ab.md / summary.md beside each .tgz as well (off by default: the device returns at
# most 8 files of $OUT, and four steps with their copies and env.txt/wall.txt already make 10).
set -uo pipefail
. "$(dirname "$0")/setup.sh"
OPS=${OPS:-[amin,prod,logsumexp,std,instance_norm,index_add,masked_fill,flip,triu,isinf]}
OPS4=${OPS4:-[amin,logsumexp,masked_fill,triu]}
STEPS=${STEPS:-aa}; LIMIT=${LIMIT:-520}; TAG=${TAG:-}; DTYPES=${DTYPES-[float16]}; FGDTYPES=${FGDTYPES-float16}
WORK=${WORK:-/tmp/zl_i23_$(date +%s)}; R=$OUT/runs; mkdir -p "$WORK" "$R"
{ date -u; nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id --format=csv,noheader
  python3 -c 'import torch, triton, sys; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
  echo "STEPS=$STEPS OPS=$OPS OPS4=$OPS4 LIMIT=$LIMIT DTYPES=$DTYPES"; } > "$OUT/env.txt" 2>&1; cat "$OUT/env.txt"
zl() { local name=$1 ops=$2 limit=$3; shift 3
  timeout "$limit" python3 -m zlbench corpus=flaggems backend=cuda "ops=$ops" ${DTYPES:+dtypes=$DTYPES} \
    progress=plain store.url=none launcher.run_timeout_s=$((limit - 25)) hydra.run.dir="$WORK/$name" "$@"; }
files() { python3 -c "import sys; print(' '.join('benchmark/test_%s.py' % o for o in sys.argv[1].strip('[]').split(',')))" "$1"; }
# LIMIT_<step> (s) overrides LIMIT for one step, e.g. LIMIT_live=240.
step() { local lv="LIMIT_$1"; local LIMIT=${!lv:-$LIMIT}; case $1 in
  aa) zl "aa$TAG" "$OPS" "$LIMIT" ab=triton_fp_fusion ab.aa=true;;
  live) zl "live$TAG" "$OPS4" "$LIMIT" ab=triton_fp_fusion;;
  plain) zl "plain$TAG" "$OPS4" "$LIMIT";;
  plainoff) zl "plainoff$TAG" "$OPS4" "$LIMIT" launcher.prestart=false;;
  plainshare) zl "plainshare$TAG" "$OPS4" "$LIMIT" timer.share_tuning=true;;
  plainauto) zl "plainauto$TAG" "$OPS4" "$LIMIT" "+corpus.env.PYTEST_DISABLE_PLUGIN_AUTOLOAD=''";;
  plainbase) mkdir -p "$WORK/base" && tar xJf "${BASE:-.fgz/base.tar.xz}" -C "$WORK/base" &&
      ( export PYTHONSAFEPATH=1 PYTHONPATH=$WORK/base:$PYTHONPATH  # not the cwd's zlbench first
        python3 -c 'import zlbench; print("zlbench from", zlbench.__file__)' && zl "plainbase$TAG" "$OPS4" "$LIMIT" );;
  plain2) zl "plain2$TAG" "$OPS4" "$LIMIT";;
  plain3) zl "plain3$TAG" "$OPS4" "$LIMIT";;
  plainmax3) zl "plainmax3$TAG" "$OPS4" "$LIMIT" timer.max_processes=3;;
  plainnofuse) TRITON_DEFAULT_FP_FUSION=0 zl "plainnofuse$TAG" "$OPS4" "$LIMIT";;
  cmp) for b in plain2 plainnofuse; do
         python3 -m zlbench summary "$WORK/plain$TAG" --ab "$WORK/$b$TAG" --out "$WORK/cmp$TAG/$b"; echo "rc=$?"
       done;;
  gate) local g=$WORK/gate$TAG a=${GATE_A:-$WORK/plain$TAG} b=${GATE_B:-$WORK/plain2$TAG}; mkdir -p "$g"
      # the runs keep no store (store.url=none): the gate builds one of the two, as CI would keep one
      python3 -m zlbench history import --url "$g/zlbench.db" "$a" "$b" || return 2
      python3 -m zlbench history compare --url "$g/zlbench.db" "$a" "$b" --out "$g/first"; local rc=$?; echo "gate rc=$rc"
      [ -f "$g/first/compare.json" ] || return $rc  # a usage error: compare wrote nothing
      local cmd; cmd=$(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["summary"].get("recheck"); print(r["command"] if r else "")' "$g/first/compare.json")
      [ "$rc" = 1 ] && [ -n "$cmd" ] || return $rc
      command -v python >/dev/null || { mkdir -p /tmp/pybin && ln -sf "$(command -v python3)" /tmp/pybin/python && PATH=/tmp/pybin:$PATH; }
      echo "recheck: $cmd"; timeout "$LIMIT" bash -c "$cmd"; echo "recheck rc=$?"
      local into; into=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["summary"]["recheck"]["run_dir"])' "$g/first/compare.json")
      python3 -m zlbench history compare --url "$g/zlbench.db" "$a" "$into" --out "$g/again"; rc=$?; echo "gate after recheck rc=$rc"
      cp -r "$into" "$g/"; return $rc;;
  abenv) zl "abenv$TAG" "$OPS" "$LIMIT" ab=env "ab.var=${ABVAR:?ABVAR names the switch}" "ab.values=${ABVALUES:-[0,1]}";;
  dead) zl "dead$TAG" "$OPS4" "$LIMIT" ab=musa_rlc;;
  fg) (cd "$FLAGGEMS_ROOT" && export TRITON_CACHE_DIR=$WORK/fg$TAG.triton FLAGGEMS_CACHE_DIR=$WORK/fg$TAG.tuning &&
        timeout "$LIMIT" python3 -m pytest -q -p no:cacheprovider ${FGFILES:-$(files "$OPS4")} \
        ${FGMARKS:+-m "$FGMARKS"} --mode cudagraph --level core ${FGDTYPES:+--dtypes $FGDTYPES} --record none --durations=0) > "$WORK/fg$TAG.txt" 2>&1; local rc=$?  # 124: cut at LIMIT
      mkdir -p "$WORK/fg$TAG"; mv "$WORK/fg$TAG.txt" "$WORK/fg$TAG/"; return $rc;;
  *) echo "unknown step $1"; return 2;;
  esac; }
for s in $STEPS; do
  t0=$(date +%s.%N); step "$s" > "$WORK/$s$TAG.log" 2>&1; rc=$?
  echo "$s$TAG wall=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s rc=$rc" | tee -a "$OUT/wall.txt"
  mkdir -p "$WORK/$s$TAG"; cp "$WORK/$s$TAG.log" "$WORK/$s$TAG/"
  tar czf "$R/$s$TAG.tgz" --exclude=cache --exclude=submitit --exclude='*.pyc' -C "$WORK" "$s$TAG"
  [ "${COPYMD:-0}" = 1 ] && for f in ab.md summary.md plain2/ab.md plainnofuse/ab.md; do
    [ -f "$WORK/$s$TAG/$f" ] && cp "$WORK/$s$TAG/$f" "$R/$s$TAG.${f//\//.}"; done
done
