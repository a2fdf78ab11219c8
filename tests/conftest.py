import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


# Most tests were written for one benchmark process per node in a plain run and resident side
# processes in an A/B; they pin those (tests of process sampling and respawns name their own values).
ONE_PROCESS = ("timer.processes=1", "ab.respawn_every=0")


def pinned(args):
    """args plus ONE_PROCESS's settings the args do not set themselves (the A/B one only for an A/B:
    a plain run's identity holds the whole config, so a resume must name the same)."""
    keys = {str(a).split("=", 1)[0].lstrip("+") for a in args}
    ab = "ab" in keys
    return [*args, *(p for p in ONE_PROCESS if p.split("=", 1)[0] not in keys and (ab or not p.startswith("ab.")))]


def zlbench(*args, cwd=None, env=None, timeout=600, defaults=False):
    """Run `python -m zlbench` for real, as a user would (defaults=False: with ONE_PROCESS pinned)."""
    args = args if defaults else pinned(args)
    full_env = dict(os.environ)
    for k in ("ZL_BACKEND", "ZL_ENABLE_CUDAGRAPH", "ZL_DIRECT_REPEAT", "BENCH_LEVEL", "SHAPE_MODE",
              "TEST_NODE", "OP", "OP_FILE", "USE_FLAGTUNE", "FLAGGEMS_ROOT", "ZLBENCH_SMI_OUTPUT"):
        full_env.pop(k, None)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "zlbench", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def run_zlbench(tmp_path):
    def _run(*args, env=None, run_dir=None, defaults=False):
        run_dir = run_dir or tmp_path / "run"
        res = zlbench(f"hydra.run.dir={run_dir}", "progress=plain", *args, cwd=tmp_path, env=env, defaults=defaults)
        res.run_dir = run_dir
        return res

    return _run


@pytest.fixture
def faulty_corpus(tmp_path):
    """A copy of the fault fixture corpus (FlagGems layout) the test may modify."""
    dst = tmp_path / "faulty_corpus"
    shutil.copytree(FIXTURES / "faulty_corpus", dst)
    return dst


def measured_ends(run_dir):
    """Node ids of every end event a benchmark process or worker wrote (placeholders left for a
    resume excluded), across the run's units."""
    out = []
    for path in (Path(run_dir) / "units").glob("*/events.jsonl"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("event") == "end" and not event.get("resumable"):
                out.append(event["node"])
    return out


def wait_for(predicate, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False
