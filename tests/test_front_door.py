"""One front door: `zlbench collect|summary|history ...` (also `python -m zlbench VERB ...`) run the
commands on run dirs and the store, with their exit codes."""

import os
import subprocess
import sys

import pytest

from .conftest import zlbench


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "zlbench", *args], cwd=cwd, capture_output=True, text=True)


@pytest.mark.slow
def test_verbs_run_the_commands_on_run_dirs_and_the_store(tmp_path):
    done = zlbench(f"hydra.run.dir={tmp_path / 'run'}", "backend=cpu", "ops=[exp]", "dtypes=[float32]",
                   "progress=none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = run("summary", str(tmp_path / "run"), cwd=tmp_path)
    assert summary.returncode == 0 and "## Results per op and dtype" in summary.stdout, summary.stderr
    collect = run("collect", str(tmp_path / "run"), "--store-url", "none", cwd=tmp_path)
    assert collect.returncode == 0, collect.stderr
    listed = run("history", "--url", str(tmp_path / "zlbench.db"), "list", cwd=tmp_path)
    assert listed.returncode == 0 and "run" in listed.stdout, listed.stderr
    missing = run("summary", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert missing.returncode == 2 and "nowhere" in missing.stderr
    # Not a verb: a run's override, refused as such.
    assert run("collectt", cwd=tmp_path).returncode == 2
    helped = run("--help", cwd=tmp_path)
    assert "zlbench collect RUN_DIR" in helped.stdout and "zlbench history VERB" in helped.stdout


def test_each_verb_names_itself_as_the_front_door_spells_it(tmp_path):
    for verb in ("collect", "summary", "history"):
        helped = run(verb, "--help", cwd=tmp_path)
        assert helped.returncode == 0 and helped.stdout.startswith(f"usage: zlbench {verb}"), helped.stdout[:200]


def test_a_word_that_is_no_override_is_named_with_its_fix(tmp_path):
    (tmp_path / "old_run").mkdir()
    (tmp_path / "FlagGems" / "benchmark").mkdir(parents=True)
    (tmp_path / "summary.log").write_text("")  # a path that reads like a verb is a path
    cases = {("sumary", "old_run"): "unknown verb 'sumary'. Fix: zlbench summary old_run.",
             ("old_run",): "old_run is a folder, not an override",
             ("corpus=flaggems", "FlagGems"): "FlagGems is a folder, not an override: it looks like a corpus "
                                              "checkout (it holds benchmark/). Fix: corpus=flaggems corpus.root=FlagGems.",
             ("compare", "a", "b"): "compare is a history verb. Fix: zlbench history compare A B",
             ("summary.log",): "summary.log is a file, not an override: a result log is read by a verb. Fix: "
                               "zlbench summary summary.log.",
             ("backend=cpu", "collect"): "collect is a verb and comes first",
             ("backend=cpu", "fast"): "'fast' is neither an override (key=value) nor a verb",
             ("--ops=[exp]",): "--ops=[exp] is an override with dashes; zlbench's take none. Fix: ops=[exp].",
             ("ops=[[exp]",): "cannot read the override 'ops=[[exp]' (no viable alternative at input '[[exp]')",
             ("dtypes=[float16,]",): "Fix: a list as 'dtypes=[a,b]'",
             ("resume=/x/a,b",): "'resume=/x/a,b' lists several values (a comma makes a sweep). Fix: quote it",
             ("ops=exp,softmax",): "is a list without its brackets (a comma alone sweeps values). "
                                   "Fix: ops=[exp,softmax]."}
    for args, said in cases.items():
        res = run(*args, cwd=tmp_path)
        assert res.returncode == 2 and said in res.stderr, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and "missing EQUAL" not in res.stderr
    # A flag's value is no stray word.
    assert run("--cfg", "job", "backend=cpu", cwd=tmp_path).returncode == 0


def _reader_gone(*args, cwd):
    """`zlbench ARGS | true`: stdout's reader left before zlbench wrote a line to it."""
    proc = subprocess.Popen([sys.executable, "-m", "zlbench", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(timeout=600), err


@pytest.mark.slow
def test_a_reader_that_leaves_ends_the_output_not_the_run(tmp_path):
    code, err = _reader_gone(f"hydra.run.dir={tmp_path / 'run'}", "backend=cpu", "ops=[exp]", "dtypes=[float32]",
                             "timer.processes=1", "progress=plain", cwd=tmp_path)
    assert code == 0 and "recorded" in err, err[-3000:]  # measured, its tables written, in the store
    assert (tmp_path / "run" / "summary.md").is_file()
    for args in (("summary", str(tmp_path / "run")), ("history", "--url", str(tmp_path), "list"),
                 (f"hydra.run.dir={tmp_path / 'dry'}", "backend=cpu", "dry_run=true")):
        code, err = _reader_gone(*args, cwd=tmp_path)
        assert code == 0 and "Traceback" not in err and "Broken pipe" not in err, (args, err[-2000:])
    if os.path.exists("/dev/full"):  # stdout on a full disk: the run's own dir is fine
        with open("/dev/full", "w") as full:
            res = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(tmp_path / "run")], cwd=tmp_path,
                                 stdout=full, stderr=subprocess.PIPE, text=True)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-2000:]
