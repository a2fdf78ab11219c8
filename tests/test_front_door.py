"""One front door: `zlbench collect|summary|history ...` (also `python -m zlbench VERB ...`) run the
commands on run dirs and the store, with their exit codes."""

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
