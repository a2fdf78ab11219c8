"""Hostile input through `python -m zlbench`, as a user meets it: refused before anything runs, one
message with the fix, exit 2, nothing left behind (no run dir, no zl_runs/<date>/, no store row), and
nothing of a live run touched. Secrets stay out of every file a run writes."""

import os
import signal
import subprocess
import sys

import pytest

from .conftest import EXP_RUN, FIXTURES, wait_for, zlbench

WAIT = FIXTURES / "wait_corpus"
QUICK = ["ops=[exp]", "dtypes=[float32]", "progress=none"]


def files_under(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


@pytest.mark.parametrize("args,message", [
    (["dtypes=[float17]"], "zlbench: error: dtypes=[float17]: float17 is not a torch dtype name."),
    (["devices=[]"], "zlbench: error: devices=[] selects no device. Fix: devices=all"),
    (["gpus=[0]", "devices=[0]"], "zlbench: error: gpus= and devices= both select devices"),
    (["+timer.rep=5"], "zlbench: error: timer.rep is not a zlbench setting. The settings of timer are: "),
    (["+ab.foo=1"], "zlbench: error: ab.foo is not a zlbench setting."),
    (["node_timeout_s=0"], "Fix: launcher.node_timeout_s=0."),
    (["ops=[nope]"], "zlbench: error: op 'nope' matches no test"),  # refused once Hydra made the run dir
    (["ops=[nope]"], "Fix: ops=[<op mark>]: its op marks are add, amax, exp,"),  # what to choose from
    # A value of the wrong type, or null where the setting takes none: Hydra's refusal was several
    # lines without the fix.
    (["timer.repeat=1.5"], "zlbench: error: timer.repeat=1.5 is not valid: it must be an integer >= 1 "
                           "(the median of N timings). Fix: timer.repeat=1."),
    (["timer.min_window_ms=null"], "timer.min_window_ms=null is not valid: it must be a number of milliseconds"
                                   " >= 0 (0 = no widening). Fix: timer.min_window_ms=2."),
    (["launcher.node_timeout_s=soon"], "launcher.node_timeout_s=soon is not valid: it must be a number of "
                                       "seconds > 0. Fix: launcher.node_timeout_s=900."),
    (["timer.share_tuning=maybe"], "timer.share_tuning=maybe is not valid: it must be true or false. "
                                   "Fix: timer.share_tuning=false."),
    (["progress=null"], "progress=null is not valid: it must be one of auto, live, plain, none. Fix: progress=auto."),
    (["ab.schedule=bogus"], "ab.schedule=bogus is not valid: it must be one of node, round. Fix: ab.schedule=node."),
    (["ops=exp"], "ops=exp is not valid: it must be a list of strings in brackets, e.g. [a,b]. Fix: ops=[exp]."),
    (["fail_on=[failed,null]"], "fail_on=[failed,null] is not valid: it must be a list of node statuses"),
    (["-m", "timer.repeat=1,x"], "timer.repeat=x is not valid: it must be an integer >= 1"),
    # Removed keys and settings under ~ (Hydra: "does not exist", "does not support deletion").
    (["~timer.stop"], "zlbench: error: timer.stop was removed: adaptive stopping was deleted"),
    (["~timer.placements=[a]"], "Fix: drop ~timer.placements."),
    (["-m", "+timer.clock_reader=nvml,none"], "zlbench: error: timer.clock_reader was removed: clock screening"),
    (["~timer.repeat"], "zlbench: error: ~timer.repeat: a setting cannot be deleted, only set (every setting has "
                        "a value). Fix: drop ~timer.repeat, or timer.repeat=1 for its default."),
    (["~timer.foo"], "zlbench: error: timer.foo is not a zlbench setting. The settings of timer are: "),
    # A free dict's entry that is not set (Hydra: "Could not delete ... does not exist", no fix).
    (["~corpus.env.FOO"], ("zlbench: error: ~corpus.env.FOO: corpus.env.FOO is not set (corpus.env is empty), so "
                           "there is nothing to delete. Fix: drop ~corpus.env.FOO.")),
    (["ab=musa_rlc", "~ab.fixed.FOO"], ("zlbench: error: ~ab.fixed.FOO: ab.fixed.FOO is not set (ab.fixed holds "
                                        "FLAGTREE_MUSA_RLC_PHASE_MASK), so there is nothing to delete. Fix: drop "
                                        "~ab.fixed.FOO.")),
    # Two sides of one name shared their unit dirs and logs, merged into one side.
    (["ab=demo_fused_softmax", "ab.sides=[x,x]", "ops=[softmax]"],
     "zlbench: error: ab.sides=[x,x]: the two sides need two names. Fix: ab.sides=[off,on]."),
    (["ab=demo_fused_softmax", "ab.sides=[off,on.r1]", "ops=[softmax]"], "zlbench: error: ab.sides=[off,on.r1]: "
     "'on.r1' is not a plain name (letters, digits, _ and -: it names the side's unit dirs and log)."),
    # A cost_from= that holds no tables balanced nothing, silently; a resume= of a file was said as hydra.run.dir=.
    (["cost_from=/nonexistent/run"], "zlbench: error: cost_from=/nonexistent/run holds no ops_status.csv (not a "
     "zlbench run dir with its tables): no wall times to balance the shards by."),
    (["resume=/etc/passwd"], "zlbench: error: resume=/etc/passwd is a file, not a run dir. Fix: resume=/etc"),
    # An option no config group has: Hydra's block of its own ("Could not find 'timer/bar'"), no fix.
    (["timer=bar"], "zlbench: error: timer=bar: no such timer option. Fix: timer=<one of auto, direct, graph, host>."),
    (["ab=baz"], "zlbench: error: ab=baz: no such ab option. Fix: ab=<one of demo_fused_softmax, env,"),
    # A/B settings without an axis: the plain run ignored them, silently.
    (["ab.rounds=5"], "zlbench: error: ab.rounds= is an A/B setting, but no A/B axis is chosen (ab=none): a plain "
     "run would ignore it. Fix: add ab=<axis>"),
    (["ab=none", "ab.rounds=5", "ab.aa=true"], "are A/B settings, but no A/B axis is chosen (ab=none): a plain "
     "run would ignore them."),
    # A plain run's process settings in an A/B: ignored, yet in its identity (a resume without them refused).
    (["ab=demo_fused_softmax", "timer.processes=5"], "zlbench: error: timer.processes= sets a plain run's processes, "
     "but an A/B axis is chosen (ab=demo_fused_softmax): its rounds are its processes"),
    # The axis' own variable in ab.fixed: the sides' values won and the entry was ignored, silently.
    (["ab=demo_fused_softmax", "+ab.fixed.DEMO_GEMS_FUSED_SOFTMAX=1"], "zlbench: error: "
     "ab.fixed.DEMO_GEMS_FUSED_SOFTMAX=1: DEMO_GEMS_FUSED_SOFTMAX is the axis' own variable"),
    # An env value YAML reads as a boolean or a number: the processes got Python's spelling of it
    # (DEMO_GEMS_FUSED_SOFTMAX=False / =True: an A/B that changed nothing; 1e3 as 1000.0).
    (["ab=demo_fused_softmax", "ab.values=[false,true]"], "zlbench: error: ab.values=[false,true]: unquoted, false "
     "and true are YAML booleans, and every benchmark process would get them as False and True, not as typed. Fix: "
     "quote them, ab.values=['false','true'], or use 0/1: ab.values=[0,1]."),
    (["ab=demo_fused_softmax", "ab.values=[1e3,1000]"], "zlbench: error: ab.values=[1e3,1000]: unquoted, 1e3 is a "
     "YAML number, and every benchmark process would get it as 1000.0, not as typed. Fix: quote it, "
     "ab.values=['1e3',1000]."),
    (["ab=demo_fused_softmax", "+ab.fixed.ZL_TEST_X=true"], "zlbench: error: ab.fixed.ZL_TEST_X=true: unquoted, true "
     "is a YAML boolean"),
    (["+corpus.env.ZL_TEST_X=false"], "zlbench: error: corpus.env.ZL_TEST_X=false: unquoted, false is a YAML boolean, "
     "and every benchmark process would get it as False, not as typed. Fix: quote it, corpus.env.ZL_TEST_X='false', "
     "or use 0/1: corpus.env.ZL_TEST_X=0."),
    # A variable zlbench sets itself as the axis or in ab.fixed: the sides' value replaced zlbench's (side B's
    # CUDA_VISIBLE_DEVICES moved it off the device whose lock it held); in corpus.env: ignored, silently.
    (["ab=env", "ab.var=ZLBENCH_CPU_SLOT", "ab.values=[0,1]", "dry_run=true"], "zlbench: error: "
     "ab.var=ZLBENCH_CPU_SLOT: ZLBENCH_CPU_SLOT pins each benchmark process to the device (or CPU slot) zlbench "
     "gives it, whose lock it holds; the A/B's sides would run with their own value in its place. Fix: "
     "devices=[...] chooses the devices."),
    (["ab=env", "ab.var=CUDA_VISIBLE_DEVICES", "ab.values=[0,1]", "dry_run=true"], "zlbench: error: "
     "ab.var=CUDA_VISIBLE_DEVICES: CUDA_VISIBLE_DEVICES pins each benchmark process to the device"),
    (["ab=env", "ab.var=TRITON_CACHE_DIR", "ab.values=[a,b]", "dry_run=true"], "zlbench: error: "
     "ab.var=TRITON_CACHE_DIR: TRITON_CACHE_DIR is where each side (and each process) keeps its kernels"),
    (["ab=demo_fused_softmax", "+ab.fixed.PYTEST_DISABLE_PLUGIN_AUTOLOAD=0", "dry_run=true"], "zlbench: error: "
     "ab.fixed.PYTEST_DISABLE_PLUGIN_AUTOLOAD=0: PYTEST_DISABLE_PLUGIN_AUTOLOAD keeps the plugins merely installed "
     "beside pytest out of every benchmark process; the A/B's sides would run with their own value in its place. "
     "Fix: corpus.env.PYTEST_DISABLE_PLUGIN_AUTOLOAD='' loads them all, on both sides."),
    (["+corpus.env.FLAGGEMS_CACHE_DIR=/tmp/zl_test_x", "dry_run=true"], "zlbench: error: "
     "corpus.env.FLAGGEMS_CACHE_DIR=/tmp/zl_test_x: FLAGGEMS_CACHE_DIR is where each side (and each process) keeps "
     "its tuning picks, under the run dir (isolate_caches; a plain run's processes each tune afresh), and zlbench "
     "sets it, so the processes would never get this value."),
    # The axis' variable in corpus.env too: the sides' values won, silently.
    (["ab=demo_fused_softmax", "+corpus.env.DEMO_GEMS_FUSED_SOFTMAX=1", "dry_run=true"], "zlbench: error: "
     "corpus.env.DEMO_GEMS_FUSED_SOFTMAX=1: DEMO_GEMS_FUSED_SOFTMAX is the A/B's variable, which each side sets "
     "(ab.values), so the processes would never get this value. Fix: drop corpus.env.DEMO_GEMS_FUSED_SOFTMAX "
     "(~corpus.env.DEMO_GEMS_FUSED_SOFTMAX)."),
    # ab.min_rounds where no node stops early (round by round, one side's pass): ignored, silently.
    (["ab=demo_fused_softmax", "ab.schedule=round", "ab.min_rounds=3", "dry_run=true"], "zlbench: error: "
     "ab.min_rounds= is ignored where ab.schedule=round (whole passes, round by round), so every node runs all "
     "ab.rounds rounds (only an A/B of both sides node by node stops a node early, once its verdict settles). "
     "Fix: drop ab.min_rounds (ab.rounds sets the rounds)."),
    (["ab=demo_fused_softmax", "ab.side=off", "ab.min_rounds=3", "dry_run=true"], "zlbench: error: "
     "ab.min_rounds= is ignored where ab.side=off (one side's pass: no verdict of its own), so every node runs all "
     "ab.rounds rounds"),
    (["ab=demo_fused_softmax", "ab.tuning=replay", "ab.min_rounds=3", "dry_run=true"], "zlbench: error: "
     "ab.min_rounds= is ignored where ab.tuning=replay (it runs round by round)"),
    # A near miss of Hydra's own setting: Hydra refused it in three lines and offered +hydra.run.dri=, which
    # it then took, writing the run to zl_runs/<date>/<time>/ (the `+` form, silently).
    (["hydra.run.dri=elsewhere"], "zlbench: error: hydra.run.dri is not a Hydra setting. The settings of hydra.run "
                                  "are: dir. Fix: hydra.run.dir=elsewhere."),
    (["+hydra.run.dri=elsewhere"], "Fix: hydra.run.dir=elsewhere."),
    # An interpolation of an unset variable (the job's label resolved it, outside any handler: traceback).
    (["timer.repeat=${oc.env:ZLBENCH_TEST_UNSET}"], "zlbench: error: config value timer.repeat is not set or "
     "cannot be resolved: KeyError raised while resolving interpolation: \"Environment variable "
     "'ZLBENCH_TEST_UNSET' not found\"."),
])
def test_refused_runs_leave_nothing_behind(tmp_path, args, message):
    """Run where a user runs it: the default run dir zl_runs/<date>/<time> under the working dir,
    the default store beside it."""
    res = zlbench(*args, "progress=none", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert message in res.stderr and "Traceback" not in res.stderr
    assert "To append to your config use" not in res.stderr  # Hydra's advice that would then run
    assert len([l for l in res.stderr.splitlines() if l.startswith("zlbench: error:")]) == 1
    assert files_under(tmp_path) == []  # no run dir, no zl_runs/<date>/, no zlbench.db


@pytest.mark.parametrize("group,text,message", [
    # An axis file of the user's: the processes got False/True, an A/B whose sides set the same nothing.
    ("ab", "name: mine\nvar: ZL_TEST_X\nvalues: [off, on]\n", "mine.yaml, line 3: values: [off, on]: unquoted, off and "
     "on are YAML booleans, and every benchmark process would get them as False and True, not as typed. Fix: in that "
     "file, quote them, values: ['off', 'on'], or use 0/1: values: [0, 1]."),
    ("ab", "name: mine\nvar: ZL_TEST_X\nfixed:\n  ZL_TEST_Y: \"1\"\n  ZL_TEST_Z: 1e3\n", "mine.yaml, line 5: ZL_TEST_Z: "
     "1e3: unquoted, 1e3 is a YAML number, and every benchmark process would get it as 1000.0, not as typed. Fix: in "
     "that file, quote it, ZL_TEST_Z: '1e3'."),
    ("ab", "name: mine\nvar: ZL_TEST_X\nvalues:\n  - 0\n  - yes\n", "mine.yaml, line 5: - yes: unquoted, yes is a YAML "
     "boolean"),
    # Read as YAML composed it: anchors, merge keys, comments in a list over lines, 1:30 (YAML 1.1's 90).
    ("ab", "name: mine\nvar: ZL_TEST_X\nvalues: [&a off, on]\n", "mine.yaml, line 3 (values): off: unquoted, off is a "
     "YAML boolean, and every benchmark process would get it as False, not as typed. Fix: in that file, quote it, "
     "'off', or use 0/1: 0."),
    ("ab", "name: mine\nvar: ZL_TEST_X\nfixed: {<<: {ZL_TEST_Y: off}}\n", "mine.yaml, line 3: ZL_TEST_Y: off: unquoted"),
    ("ab", "name: mine\nvar: ZL_TEST_X\nvalues: [\n  '0',  # A\n  on  # B\n]\n", "mine.yaml, line 5 (values): on: "
     "unquoted, on is a YAML boolean"),
    ("ab", "name: mine\nvar: ZL_TEST_X\nfixed: {ZL_TEST_Y: 1:30}\n", "mine.yaml, line 3: ZL_TEST_Y: 1:30: unquoted, 1:30 "
     "is a YAML number, and every benchmark process would get it as 90, not as typed. Fix: in that file, quote it, "
     "ZL_TEST_Y: '1:30'."),
    # A base file of the group the chosen one's defaults list names, and side names.
    ("ab", {"mine": "defaults: [base, _self_]\nname: mine\n", "base": "name: base\nvar: ZL_TEST_X\nvalues: [no, yes]\n"},
     "base.yaml, line 3: values: [no, yes]: unquoted, no and yes are YAML booleans"),
    ("ab", "name: mine\nvar: ZL_TEST_X\nvalues: ['0', '1']\nsides: [off, on]\n", "mine.yaml, line 4: sides: [off, on]: "
     "unquoted, off and on are YAML booleans, and the A/B's sides would be named False and True, not as typed."),
    ("corpus", "defaults: [demo, _self_]\nenv: {ZL_TEST_X: true}\n", "mine.yaml, line 2: ZL_TEST_X: true: "
     "unquoted, true is a YAML boolean, and every benchmark process would get it as True"),
    # A file whose header puts it at the config's root (# @package _global_): its ab: mapping, and any
    # other group's keys it sets.
    ("ab", "# @package _global_\nab:\n  name: mine\n  var: ZL_TEST_X\n  values: [off, on]\n",
     "mine.yaml, line 5: values: [off, on]: unquoted, off and on are YAML booleans"),
    ("ab", "\n# @package _global_\nab:\n  name: mine\n  var: ZL_TEST_X\n  values: ['0', '1']\n"
     "corpus:\n  env: {ZL_TEST_W: on}\n", "mine.yaml, line 8: ZL_TEST_W: on: unquoted, on is a YAML boolean"),
])
def test_a_group_file_of_the_users_with_a_yaml_boolean_is_refused(tmp_path, group, text, message):
    """The command line's env values were checked before Hydra; a group file's (--config-dir) reached
    every process in Python's spelling, without a word."""
    conf = tmp_path / "conf"
    (conf / group).mkdir(parents=True)
    for name, content in (text if isinstance(text, dict) else {"mine": text}).items():
        (conf / group / f"{name}.yaml").write_text(content + "# café\n", encoding="utf-8")  # read as UTF-8 anywhere
    work = tmp_path / "work"
    work.mkdir()
    res = zlbench("--config-dir", str(conf), f"{group}=mine", "dry_run=true", "progress=none", cwd=work,
                  env={"LC_ALL": "C", "PYTHONUTF8": "0", "PYTHONCOERCECLOCALE": "0"})
    assert res.returncode == 2, res.stderr[-2000:]
    assert message in res.stderr and "Traceback" not in res.stderr
    assert files_under(work) == []
    # What the command line sets replaces the file's: a list whole, a mapping's entries (ab.fixed={} merges: refused).
    fix = {"values: [off": "ab.values=[0,1]", "ZL_TEST_Z": "ab.fixed={ZL_TEST_Z:'1e3'}", "- yes": "ab.values=[0,1]",
           "(values)": "ab.values=[0,1]", "ZL_TEST_Y": "ab.fixed.ZL_TEST_Y='1'", "no, yes": "ab.values=[0,1]",
           "sides": "ab.sides=[a,b]", "ZL_TEST_X: true": "corpus.env.ZL_TEST_X='1'",
           "ZL_TEST_W": "corpus.env.ZL_TEST_W='1'"}
    override = next(v for k, v in fix.items() if k in message)
    res = zlbench("--config-dir", str(conf), f"{group}=mine", override, "dry_run=true", "progress=none", cwd=work)
    assert res.returncode == 0, res.stderr[-2000:]
    if "ZL_TEST_Z" in message:
        res = zlbench("--config-dir", str(conf), "ab=mine", "ab.fixed={}", "dry_run=true", "progress=none", cwd=work)
        assert res.returncode == 2 and "ZL_TEST_Z: 1e3: unquoted" in res.stderr, res.stderr[-2000:]


def test_a_primary_config_of_the_users_with_a_yaml_boolean_is_refused(tmp_path):
    """--config-name NAME: the user's own primary config lands at the config's root, so its corpus:
    and ab: mappings reach every benchmark process as a group file's would."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "mine.yaml").write_text("defaults:\n  - config\n  - override ab: env\n  - _self_\n"
                                    "ab:\n  var: ZL_TEST_X\n  values: [off, on]\ncorpus:\n  env: {ZL_TEST_W: on}\n")
    work = tmp_path / "work"
    work.mkdir()
    res = zlbench("--config-dir", str(conf), "--config-name", "mine", "dry_run=true", "progress=none", cwd=work,
                  defaults=True)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "mine.yaml, line 7: values: [off, on]: unquoted, off and on are YAML booleans" in res.stderr
    assert "mine.yaml, line 9: ZL_TEST_W: on: unquoted, on is a YAML boolean" in res.stderr
    assert "Traceback" not in res.stderr and files_under(work) == []
    # Set on the command line, the file's values are replaced: nothing left to refuse. The command
    # line's ab.* settings are the A/B's the file chose (not "no A/B axis is chosen"), and a plain
    # run's setting is refused as it would be with ab=env typed.
    res = zlbench("--config-dir", str(conf), "--config-name", "mine", "ab.values=[0,1]", "corpus.env.ZL_TEST_W='1'",
                  "dry_run=true", "progress=none", cwd=work, defaults=True)
    assert res.returncode == 0, res.stderr[-2000:]
    res = zlbench("--config-dir", str(conf), "--config-name", "mine", "ab.values=[0,1]", "corpus.env.ZL_TEST_W='1'",
                  "timer.processes=1", "dry_run=true", "progress=none", cwd=work, defaults=True)
    assert res.returncode == 2 and "an A/B axis is chosen (ab=env)" in res.stderr, res.stderr[-2000:]
    # The launcher it chooses: its settings are the command line's to set.
    (conf / "on_slurm.yaml").write_text("defaults:\n  - config\n  - override launcher: slurm\n  - _self_\n")
    res = zlbench("--config-dir", str(conf), "--config-name", "on_slurm", "launcher.partition=debug", "dry_run=true",
                  "progress=none", cwd=work)
    assert res.returncode == 0, res.stderr[-2000:]


def test_group_files_are_read_where_hydra_takes_their_values_from(tmp_path):
    """A second hostile pass: files a defaults entry names with a package (b1@_here_, fx@fixed), a merge
    key at the top, a tag, a list reached through an alias, side names; and no refusal where the
    command line replaced the value with the one the message suggests."""
    conf, work = tmp_path / "conf", tmp_path / "work"
    (conf / "ab").mkdir(parents=True)
    work.mkdir()

    def run(files, *args):
        for name, content in files.items():
            (conf / "ab" / f"{name}.yaml").write_text(content)
        return zlbench("--config-dir", str(conf), "ab=mine", *args, "dry_run=true", "progress=none", cwd=work)

    res = run({"mine": "defaults: [b1@_here_, fx@fixed, _self_]\nname: mine\nvar: ZL_TEST_X\n",
               "b1": "values: [off, '1']\n", "fx": "ZL_TEST_Q: 1e3\n"})
    assert res.returncode == 2, res.stderr[-2000:]
    assert "b1.yaml, line 1: values: [off, '1']: unquoted, off is a YAML boolean" in res.stderr
    assert "fx.yaml, line 1: ZL_TEST_Q: 1e3: unquoted" in res.stderr
    res = run({"mine": "<<: {name: mine, var: ZL_TEST_X, values: ['0', !!float 1]}\n"})
    assert res.returncode == 2 and "mine.yaml, line 1 (values): !!float 1: the tag !!float makes YAML read it as " \
        "1.0, and every benchmark process would get it as 1.0, not as typed. Fix: in that file, drop the tag: '1'." \
        in res.stderr, res.stderr[-2000:]
    res = run({"mine": "name: mine\nvar: ZL_TEST_X\nfixed: {ZL_TEST_Y: &s 'x'}\nvalues: [&a off, *a]\n"
                       "sides: [off, on]\n"})
    said = [line for line in res.stderr.splitlines() if "unquoted" in line]
    assert res.returncode == 2 and len(said) == 2, res.stderr[-2000:]  # the aliased off once
    assert any("line 4 (values): off:" in line for line in said)
    assert any(line.endswith("sides: [off, on]: unquoted, off and on are YAML booleans, and the A/B's sides would be "
                              "named False and True, not as typed. Fix: in that file, quote them, sides: ['off', 'on'].")
               for line in said)  # no 0/1 for names
    # The fix the message gives, on the command line: the file's value never reaches a process.
    res = run({"mine": "name: mine\nvar: ZL_TEST_X\nvalues: [00, '1']\nfixed: {ZL_TEST_Y: 00}\n"},
              "ab.values=['0','1']", "ab.fixed={ZL_TEST_Y:'0'}")
    assert res.returncode == 0, res.stderr[-2000:]
    res = run({}, "ab.values=['0','1']", "++ab.fixed={ZL_TEST_Z:'0'}")  # a mapping merges: the file's Y still reaches
    assert res.returncode == 2 and "ZL_TEST_Y: 00: unquoted" in res.stderr, res.stderr[-2000:]


def test_a_sweep_over_lists_of_quoted_values_is_taken(tmp_path):
    """-m ab.values=['a','b'],['c','d']: the type check read Hydra's QuotedString objects inside each
    list and refused the sweep ('ab.values=[QuotedString(text='a', ...)] is not valid')."""
    res = zlbench("-m", "ab=demo_fused_softmax", "ab.values=['a','b'],['c','d']", "dry_run=true", "progress=none",
                  cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "ab.values=['a','b']" in res.stdout + res.stderr and "ab.values=['c','d']" in res.stdout + res.stderr
    res = zlbench("-m", "ab=demo_fused_softmax", "ab.values=[false,'b'],['c','d']", "dry_run=true", cwd=tmp_path)
    assert res.returncode == 2 and "unquoted, false is a YAML boolean" in res.stderr, res.stderr[-2000:]


def test_a_dry_run_leaves_no_dated_folder(tmp_path):
    res = zlbench("dry_run=true", "ops=[exp]", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("args", [
    ["ops=[expp]"],  # refused
    ["ops=[exp]", "dry_run=true"],
])
@pytest.mark.parametrize("held", [["result_test_exp.log", "notes.log"], []])
def test_a_folder_of_the_users_own_survives_a_refused_or_dry_run_into_it(tmp_path, args, held):
    """A folder of FlagGems result logs (which `zlbench summary` reads), or an empty one the user made:
    the refused run removed it whole, as if Hydra had made it."""
    own = tmp_path / "gems_logs"
    own.mkdir()
    for name in held:
        (own / name).write_text("kept\n")
    res = zlbench(*args, f"hydra.run.dir={own}", "progress=none", cwd=tmp_path)
    assert res.returncode in (0, 2), res.stderr[-2000:]
    assert sorted(p.name for p in own.iterdir()) == sorted(held)  # Hydra's .hydra/ and log went again
    assert all((own / name).read_text() == "kept\n" for name in held)
    res = zlbench("ops=[exp]", f"resume={own}", "progress=none", cwd=tmp_path)
    assert res.returncode == 2 and "is not a zlbench run dir" in res.stderr, res.stderr[-2000:]
    assert sorted(p.name for p in own.iterdir()) == sorted(held)


@pytest.mark.parametrize("args,entry", [
    (["+corpus.env.ZL_TEST_X=1", "~corpus.env.ZL_TEST_X"], "ZL_TEST_X"),  # set by an earlier override
    (["ab=musa_rlc", "~ab.fixed.FLAGTREE_MUSA_RLC_PHASE_MASK"], "FLAGTREE_MUSA_RLC_PHASE_MASK"),  # by its group
])
def test_a_delete_of_an_entry_that_is_set_deletes_it(tmp_path, args, entry):
    res = zlbench(*args, "dry_run=true", "ops=[exp]", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "nodes (" in res.stdout and entry not in res.stdout + res.stderr


@pytest.mark.parametrize("args,shown", [
    (["corpus.env.ZL_TEST_X=1"], "ZL_TEST_X=1"),  # the README's spelling: no `+` needed
    (["ab=musa_rlc", "ab.fixed.FLAGTREE_MUSA_RLC_PHASE_MASK=7"], "FLAGTREE_MUSA_RLC_PHASE_MASK=7"),  # its group's
    (["ab=musa_rlc", "ab.fixed.ZL_TEST_Y=2"], "ZL_TEST_Y=2"),
    (["+corpus.env.ZL_TEST_X=1", "corpus.env.ZL_TEST_X=2"], "ZL_TEST_X=2"),
    (["corpus.env.ZL_TEST_X='false'"], "ZL_TEST_X=false"),  # quoted: text, as typed
    # zlbench never sets PATH: a toolchain's bin dir ahead of the shell's is the processes' to have
    (["corpus.env.PATH=/opt/tc/bin:/usr/bin:/bin"], "PATH=/opt/tc/bin:/usr/bin:/bin"),
    (["ab=env", "ab.var=PATH", "ab.values=[/opt/a/bin:/usr/bin,/opt/b/bin:/usr/bin]"], "PATH=/opt/b/bin:/usr/bin"),
])
def test_an_entry_of_a_free_dict_is_set_with_or_without_a_plus(tmp_path, args, shown):
    res = zlbench(*args, "dry_run=true", "ops=[exp]", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert shown in res.stdout


def test_a_dry_run_sweep_leaves_no_sweep_folder(tmp_path):
    res = zlbench("-m", "dry_run=true", "ops=[exp]", "timer.repeat=1,2", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("nodes (1):") == 2  # each job printed its plan
    assert files_under(tmp_path) == []


def test_a_sweep_whose_every_job_is_refused_leaves_nothing(tmp_path):
    res = zlbench("-m", "ops=[nope],[nope2]", "progress=none", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "exit   2  ops=[nope]" in res.stderr and "exit   2  ops=[nope2]" in res.stderr
    assert files_under(tmp_path) == []


def test_tilde_in_a_path_value_is_the_home_folder(tmp_path):
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "FlagGems").symlink_to(FIXTURES / "mini_corpus")
    res = zlbench("corpus=flaggems", "corpus.root=~/FlagGems", "ops=[exp]", "dry_run=true", cwd=tmp_path,
                  env={"HOME": str(tmp_path / "home")})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "nodes (2):\n  exp " in res.stdout


def test_help_lists_only_the_launchers_a_user_picks(tmp_path):
    res = zlbench("--help", cwd=tmp_path)
    assert res.returncode == 0
    assert "launcher: local, slurm\n" in res.stdout and "schema" not in res.stdout


def test_ab_rounds_below_min_rounds_is_said_with_the_fix(tmp_path):
    res = zlbench("ab=demo_fused_softmax", "ab.rounds=2", "ops=[softmax]", "dry_run=true", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert ("[zlbench] note: ab.rounds=2 is below ab.min_rounds=4: every node runs all 2 rounds") in res.stderr
    assert "Fix: ab.rounds=4 or more, or ab.min_rounds=2 to plan it so." in res.stderr


def _unwritable(folder):
    """Make an existing folder unwritable even for root (chattr +i); None where that cannot be done."""
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        return lambda: folder.chmod(0o755)
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        return None
    return lambda: subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.mark.parametrize("sub", ["", "run"])
def test_a_run_dir_that_cannot_be_written_is_one_line(tmp_path, sub):
    ro = tmp_path / "ro"
    undo = _unwritable(ro)
    if undo is None:
        pytest.skip("cannot make a folder unwritable here (chattr +i needs root on ext4/xfs)")
    try:
        run_dir = ro / sub if sub else ro
        res = zlbench(f"hydra.run.dir={run_dir}", *QUICK, cwd=tmp_path)
    finally:
        undo()
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    verb = "create" if sub else "write into"
    assert f"zlbench: error: cannot {verb} hydra.run.dir={run_dir}: " in res.stderr
    assert "Fix: hydra.run.dir=<a writable folder>." in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert files_under(ro) == []


@pytest.mark.slow
def test_a_run_refused_because_its_run_dir_is_live_leaves_that_run_untouched(tmp_path):
    run_dir = tmp_path / "live"
    env = {k: v for k, v in os.environ.items() if k not in ("OP", "TEST_NODE", "ZL_BACKEND")}
    first = subprocess.Popen([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", "backend=cpu",
                              "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_00']", "progress=none"],
                             cwd=tmp_path, env={**env, "WAIT_S": "600"}, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert wait_for(lambda: (run_dir / ".zlbench.lock.holder.json").exists(), timeout=120)
        hydra_files = {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()}
        log = (run_dir / "zlbench.log").read_bytes()
        for how in ([f"hydra.run.dir={run_dir}", "ops=[exp]"], [f"resume={run_dir}"]):
            res = zlbench(*how, "progress=none", cwd=tmp_path)
            assert res.returncode == 2, res.stderr[-2000:]
            assert f"zlbench: error: {run_dir} is in use by a live zlbench run (pid {first.pid} " in res.stderr
            assert {p.name: p.read_bytes() for p in (run_dir / ".hydra").iterdir()} == hydra_files
            # The live run goes on logging (its phases); nothing of the refused one enters its log.
            after = (run_dir / "zlbench.log").read_bytes()
            assert after.startswith(log) and b"in use by a live zlbench run" not in after
    finally:
        os.killpg(first.pid, signal.SIGINT)  # the first run stops and writes its tables
        first.communicate(timeout=120)


@pytest.mark.slow
def test_no_password_is_written_into_the_run_dir_or_the_store(tmp_path):
    secret = "s3cret-pw"
    # On the command line: refused, with where to put it instead.
    res = zlbench(f"store.url=postgresql://user:{secret}@127.0.0.1:9/none", *QUICK, cwd=tmp_path)
    assert res.returncode == 2 and "ZLBENCH_STORE_URL" in res.stderr and "~/.pgpass" in res.stderr
    assert secret not in res.stderr and files_under(tmp_path) == []
    # From the environment: the store URL (unreachable here: one message) and a tuner DB URL the
    # identity records among the switch variables; neither's password lands anywhere.
    run_a, run_b = tmp_path / "zl_runs" / "a", tmp_path / "zl_runs" / "b"
    res = zlbench(f"hydra.run.dir={run_a}", *QUICK, cwd=tmp_path,
                  env={"ZLBENCH_STORE_URL": f"postgresql://user:{secret}@127.0.0.1:9/none"})
    assert res.returncode == 0 and "results store not written" in res.stderr, res.stderr[-2000:]
    assert secret not in res.stderr
    res = zlbench(f"hydra.run.dir={run_b}", *QUICK, cwd=tmp_path,
                  env={"FLAGGEMS_DB_URL": f"postgresql://tuner:{secret}@db.example/tuning"})
    assert res.returncode == 0 and "recorded" in res.stderr, res.stderr[-2000:]
    identity = (run_b / "run_identity.json").read_text()
    assert '"FLAGGEMS_DB_URL": "postgresql://tuner:***@db.example/tuning"' in identity
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert tmp_path / "zl_runs" / "zlbench.db" in written  # the store took run b, identity and all
    assert [str(p) for p in written if secret.encode() in p.read_bytes()] == []


def test_collect_of_a_file_in_a_run_dir_names_the_run_dir(tmp_path):
    rows = tmp_path / "run" / "rows.jsonl"
    rows.parent.mkdir()
    rows.write_text("")
    res = zlbench("collect", str(rows), cwd=tmp_path, defaults=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert res.stderr.strip() == f"zlbench: error: {rows} is a file, not a run dir. Fix: zlbench collect {rows.parent}"
    assert files_under(tmp_path) == ["run", "run/rows.jsonl"]


@pytest.mark.parametrize("args,message", [
    (["regressions", "-k", "0"], "argument -k: '0' is not valid: it must be an integer >= 1"),  # died in numpy
    (["compare", "--latest", "--window", "0"], "argument --window: '0' is not valid: it must be an integer >= 1"),
    (["regressions", "--threshold", "-1"], "argument --threshold: '-1' is not valid: it must be a number >= 0"),
    (["html", "--out", "FILE"], "argument --out: FILE is a file; --out takes a folder (made if missing)"),
])
def test_history_options_out_of_range_are_refused_in_one_line(shared_run, tmp_path, args, message):
    store = shared_run(*EXP_RUN).run_dir.parents[1] / "zlbench.db"
    (tmp_path / "FILE").write_text("mine")
    res = zlbench("history", *args, "--url", str(store), cwd=tmp_path, defaults=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert message in res.stderr and (tmp_path / "FILE").read_text() == "mine"


def test_a_result_log_with_a_word_where_a_number_goes_names_its_line(tmp_path):
    log = tmp_path / "result.log"
    entry = {"shape_detail": [[64]], "latency_base": 0.01, "latency": "n/a", "speedup": None}
    log.write_text("[INFO] Benchmark record logger enabled\n[INFO] " + __import__("json").dumps(
        {"op_name": "exp", "dtype": "torch.float16", "result": [entry]}) + "\n")
    for verb in (["summary", str(log)], ["history", "import", str(log), "--url", f"sqlite:///{tmp_path}/s.db"]):
        res = zlbench(*verb, cwd=tmp_path, defaults=True)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
        assert f"{log}:2: malformed result record (latency is 'n/a', not a number)" in res.stderr


@pytest.mark.parametrize("text, message", [
    ("NaN", "latency is nan, not a finite number"), ("Infinity", "latency is inf, not a finite number"),
    ("-Infinity", "latency is -inf, not a finite number"), ("0", "latency is 0, not a time (above 0 ms)"),
    ("-1", "latency is -1, not a time (above 0 ms)")])
def test_a_result_log_with_a_time_that_is_no_reading_names_its_line(tmp_path, text, message):
    """JSON's NaN and Infinity parse as floats, and a 0 or negative latency is no measurement: a
    summary printed them (nan, inf, -1 ms) or dropped the row, and exited 0."""
    log = tmp_path / "result.log"
    log.write_text('[INFO] {"op_name": "exp", "dtype": "torch.float16", "result": [{"shape_detail": [[4]], '
                   f'"latency": {text}, "latency_base": 0.1, "speedup": 1.0}}, {{"shape_detail": [[8]], '
                   '"latency": 0.2, "latency_base": 0.1, "speedup": 0.5}]}\n')
    res = zlbench("summary", str(log), cwd=tmp_path, defaults=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert f"{log}:1: malformed result record ({message})" in res.stderr, res.stderr


def test_a_record_line_without_the_space_after_its_level_is_read(tmp_path):
    """`[INFO]{...}` (a hand-edited line) was passed over as no record: its rows were missing and the
    summary exited 0 without a word."""
    from zlbench.results.flaggems_log import rows_from_log

    log = tmp_path / "result.log"
    log.write_text('[INFO]{"op_name": "exp", "dtype": "torch.float16", "result": [{"shape_detail": [[4]], '
                   '"latency": 0.2, "latency_base": 0.1, "speedup": 0.5}]}\n')
    assert [(r["op"], r["latency"]) for r in rows_from_log(log)] == [("exp", 0.2)]


def test_a_result_entry_without_a_latency_is_a_failed_row_not_an_ok_one(tmp_path):
    """`"latency": null` without an error_msg read as an ok row of no value: it dropped out of the
    tables and the summary said every test was ok. An error_msg still gives the reason."""
    from zlbench.results.flaggems_log import rows_from_log

    log = tmp_path / "result.log"
    log.write_text('[INFO] {"op_name": "exp", "dtype": "torch.float16", "result": [{"shape_detail": [[4]], '
                   '"latency": null, "latency_base": 0.1}, {"shape_detail": [[8]], "latency": 0.2, '
                   '"latency_base": 0.1, "speedup": 0.5}, {"shape_detail": [[16]], "latency": null, '
                   '"error_msg": "CUDA error: out of memory"}]}\n')
    got = [(r["shape"], r["status"], r["reason"]) for r in rows_from_log(log)]
    assert got[1] == ("[[8]]", "ok", None) and got[2] == ("[[16]]", "failed", "CUDA error: out of memory"), got
    assert got[0][:2] == ("[[4]]", "failed") and "records no latency and no error_msg: not measured" in got[0][2], got
    res = zlbench("summary", str(log), cwd=tmp_path, defaults=True)
    assert "| failed   |            1 |" in res.stdout and "| ok " not in res.stdout, res.stdout


@pytest.mark.parametrize("ci", [[0.1], "x", [None, None], True, {"lo": 1}, [0.2, 0.1], [0.1, float("inf")], [-1, 2],
                                [0, 0]])
def test_a_run_log_with_a_malformed_interval_names_its_line(tmp_path, ci):
    """A zlbench run.log carries each row's latency_ci; one that is not [lo, hi] was a traceback."""
    from zlbench.errors import UsageError
    from zlbench.results.flaggems_log import rows_from_log

    log = tmp_path / "run.log"
    entry = {"shape_detail": [[64]], "latency_base": 0.01, "latency": 0.02, "processes": 3, "latency_ci": ci}
    log.write_text("[INFO] " + __import__("json").dumps({"op_name": "exp", "dtype": "torch.float16", "result": [entry]}))
    with pytest.raises(UsageError, match=r"run.log:1: malformed result record \(latency_ci is .*not an interval"):
        rows_from_log(log)


def test_a_ctrl_c_in_a_verb_exits_130_in_one_line(tmp_path):
    """`zlbench summary` reading a log that is a FIFO: it waits for lines while a Ctrl-C comes."""
    import errno

    fifo = tmp_path / "result.log"
    os.mkfifo(fifo)
    # Ctrl-C's disposition as a terminal's foreground process has it: a suite started in the
    # background by a script (`nohup ... &`) has SIGINT ignored, which its children inherit.
    proc = subprocess.Popen([sys.executable, "-m", "zlbench", "summary", str(fifo)], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))

    def reading():  # opening the write end succeeds once the reader has the FIFO open
        try:
            reading.fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            return True
        except OSError as e:
            assert e.errno == errno.ENXIO
            return False

    try:
        assert wait_for(reading, timeout=120)
        os.write(reading.fd, b"[INFO] Benchmark record logger enabled\n")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        if getattr(reading, "fd", None) is not None:
            os.close(reading.fd)
    assert proc.returncode == 130 and err == "zlbench: summary interrupted\n", err[-2000:]


def test_launcher_slurm_where_there_is_no_slurm_is_a_usage_error(tmp_path):
    # It was an internal error ("Could not detect srun") after the run dir was made.
    empty = tmp_path / "bin"
    empty.mkdir()
    res = zlbench("launcher=slurm", "ops=[exp]", "progress=none", cwd=tmp_path,
                  env={"PATH": os.pathsep.join([str(empty), os.path.dirname(sys.executable)])})
    assert res.returncode == 2, res.stderr[-2000:]
    assert "launcher=slurm: no Slurm here (sbatch is not on PATH)" in res.stderr and "Fix:" in res.stderr
    assert "Traceback" not in res.stderr and files_under(tmp_path) == ["bin"]  # no run dir, no zl_runs/


def test_a_copy_of_the_package_without_its_configs_says_so(tmp_path):
    """zlbench/ copied without conf/ (a copy of the package alone, as a GPU machine got one): Hydra
    died with a FileNotFoundError traceback; it is one line naming what is missing and the fix."""
    import shutil
    from pathlib import Path

    import zlbench

    shutil.copytree(Path(zlbench.__file__).parent, tmp_path / "zlbench",
                    ignore=shutil.ignore_patterns("conf", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "zlbench", "dry_run=true"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-2000:]
    assert f"zlbench: error: zlbench's configs are missing: no {tmp_path / 'conf'}" in res.stderr, res.stderr


def test_an_ab_made_with_a_plain_runs_process_setting_still_resumes(tmp_path):
    """An A/B run dir made before such settings were refused holds timer.processes= in its overrides,
    which its resume command repeats: the refusal leaves a resume to the run dir's identity check."""
    from zlbench.config.command_line import _check_overrides

    with pytest.raises(Exception, match="sets a plain run's processes"):
        _check_overrides(["ab=demo_fused_softmax", "timer.processes=1"], {"ab", "timer.processes"})
    _check_overrides(["ab=demo_fused_softmax", "timer.processes=1", f"resume={tmp_path}"],
                     {"ab", "timer.processes", "resume"})


def test_a_run_dir_with_measurements_but_no_identity_is_refused_and_a_damaged_one_named(shared_run, tmp_path):
    """A review: a copy of a run dir without run_identity.json, run into with other dtypes, measured
    nothing and wrote the new identity over the old rows (float32 rows labelled bfloat16); a damaged
    identity crashed resume with exit 70."""
    from .conftest import copied_run

    mix = copied_run(shared_run(*EXP_RUN), tmp_path / "mix")
    (mix / "run_identity.json").unlink()
    res = zlbench(f"hydra.run.dir={mix}", "progress=plain", "ops=[exp]", "dtypes=[bfloat16]", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "holds an earlier run's plan.json and units but no run_identity.json" in res.stderr
    assert "Fix: choose another run dir (hydra.run.dir=...)" in res.stderr
    assert not (mix / "run_identity.json").exists()  # nothing written over the old rows
    damaged = copied_run(shared_run(*EXP_RUN), tmp_path / "damaged")
    (damaged / "run_identity.json").write_text('{"broken')
    res = zlbench(*EXP_RUN, f"resume={damaged}", "progress=plain", cwd=tmp_path)
    assert res.returncode == 2 and "run_identity.json is not valid JSON" in res.stderr, res.stderr[-2000:]
    assert "measurements in units/ are untouched" in res.stderr
