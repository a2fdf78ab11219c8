"""Every shell command README.md shows in a ```bash block runs as written (issue 26).

The commands run in order, in an empty folder, with this test's Python first on PATH, so the run
dirs one command makes (runs/base, ...) are there for the next. Two kinds are adapted, and only so:
- the set-up commands: their venv and pip steps are what made this environment (tests/test_install.py
  builds and runs the wheel); the rest of the line runs. The test command must be `.ci/run`'s, verbatim
  (running it here would run this suite inside itself);
- commands that need a FlagGems checkout, a GPU or a Slurm partition run with `dry_run=true`, with
  `~/FlagGems` a copy of the fixture corpus tests/fixtures/mini_corpus (FlagGems' layout)."""

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

from .conftest import FIXTURES, REPO

pytestmark = pytest.mark.slow

README = REPO / "README.md"
INSTALL_STEPS = ("python3 -m venv ", ". .venv/bin/activate", "pip install ")
TEST_COMMAND = "pip install -e '.[test]' && python -m pytest -q"
NEEDS_DRY_RUN = ("corpus=flaggems", "launcher=slurm")


def bash_commands(text):
    """The command lines of every ```bash block, in order (blank lines and comments left out)."""
    out = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def adapt(command):
    """What this test runs for a README command, or None for the test command itself."""
    if command == TEST_COMMAND:
        return None
    steps = [s.strip() for s in command.split(" && ")]
    steps = [s for s in steps if not s.startswith(INSTALL_STEPS)]
    assert steps, f"nothing to run in {command!r}"
    run = " && ".join(steps)
    if run.startswith("python -m zlbench ") and any(k in run for k in NEEDS_DRY_RUN):
        run += " dry_run=true"
    return run


def test_readme_test_command_is_ci_run_s():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in ci.splitlines()
    assert TEST_COMMAND in bash_commands(README.read_text(encoding="utf-8"))


def test_every_readme_command_runs_as_written(tmp_path):
    commands = bash_commands(README.read_text(encoding="utf-8"))
    assert len(commands) >= 10, commands
    home = tmp_path / "home"
    shutil.copytree(FIXTURES / "mini_corpus", home / "FlagGems")
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZL_", "ZLBENCH_", "FLAGGEMS_"))
           and k not in ("OP", "OP_FILE", "TEST_NODE", "BENCH_LEVEL", "SHAPE_MODE", "USE_FLAGTUNE", "PGSERVICE")}
    env.update(HOME=str(home), PATH=os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", ""))
    ran = []
    for command in commands:
        run = adapt(command)
        if run is None:
            continue
        proc = subprocess.run(["bash", "-c", run], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        # A gate's exit 1 is its documented answer (a slower row on a shared machine), not a broken command:
        # compare and regressions gate by default (--fail-on slower), as any --fail-on does.
        words = shlex.split(run)
        allowed = (0, 1) if "--fail-on" in words or {"compare", "regressions"} & set(words) else (0,)
        assert proc.returncode in allowed, f"README command failed ({proc.returncode}): {run}\n{proc.stderr[-3000:]}"
        ran.append(run)
    assert any(r.startswith("python -m zlbench corpus=flaggems corpus.root=~/FlagGems") for r in ran)
    # What the README's commands wrote is what it says they write.
    assert (work / "runs" / "ab" / "ab.md").is_file()
    assert (work / "runs" / "compare" / "compare.md").is_file()
    assert (work / "runs" / "cmp" / "ab.md").is_file()
    assert (work / "runs" / "site" / "index.html").is_file()
    assert list((work / "zl_runs").glob("*/*/summary.md")), "set-up command 1 wrote no run dir"
    assert not (work / "zl_runs" / "multirun").exists()
    # summary.md: a side column only where there are sides (issue 26).
    def results_header(run):
        return next(l for l in (work / "runs" / run / "summary.md").read_text().splitlines() if l.startswith("| op "))
    assert "side" not in results_header("base") and "| side " in results_header("ab")
    # Every file "What a run writes" names is in the plain run or the A/B the README ran.
    for name in files_the_readme_names():
        if "<" in name or name in CONDITIONAL:
            continue
        assert any((work / "runs" / d / name.rstrip("/")).exists() for d in ("base", "ab")), \
            f"README names {name}: neither runs/base nor runs/ab has it"


# Written only where they apply: several devices taking each other's nodes; something compiled or tuned;
# nodes that got more processes (on an accelerator).
CONDITIONAL = {"claims/", "cache/", "more_shapes.json"}


def files_the_readme_names():
    section = README.read_text(encoding="utf-8").split("## What a run writes", 1)[1].split("\n## ", 1)[0]
    cells = re.findall(r"^\| (`[^|]*) \|", section, flags=re.M)
    names = [n for cell in cells for n in re.findall(r"`([^`]+)`", cell)]
    assert {"plan.json", "processes.json", "artifacts.json", "submitit/"} <= set(names), names
    return names
