"""A non-editable install (the built wheel) works from another directory: conf/ ships inside."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO

pytestmark = pytest.mark.slow


def test_wheel_carries_conf_and_demo_corpus_and_runs_elsewhere(tmp_path):
    wheel_dir = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                            "-w", str(wheel_dir), str(REPO)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(wheel_dir.glob("zlbench-*.whl"))
    target = tmp_path / "site"
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target", str(target),
                           str(wheel)], capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr[-2000:]
    assert (target / "zlbench" / "conf" / "config.yaml").is_file()
    assert (target / "zlbench" / "conf" / "backend" / "musa.yaml").is_file()
    assert (target / "zlbench" / "demo_corpus" / "benchmark" / "core_shapes.yaml").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-c", "import zlbench.config.schema as c; print(c.conf_dir())"],
                           cwd=elsewhere, env=env, capture_output=True, text=True)
    assert where.stdout.strip() == str(target / "zlbench" / "conf")
    run = subprocess.run([sys.executable, "-m", "zlbench", "ops=[exp]", "dtypes=[float32]", "progress=none", "timer.processes=1",
                          "hydra.run.dir=out"], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (elsewhere / "out" / "ops_status.csv").read_text().count(",ok,") == 1
    # Built from a git checkout, the wheel names its commit (hatch_build.py): the run's identity
    # and the history say which zlbench measured, although the install has no git of its own.
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        identity = json.loads((elsewhere / "out" / "run_identity.json").read_text())
        assert (identity["versions"]["zlbench_commit"] or "").startswith(head.stdout.strip()), identity["versions"]
