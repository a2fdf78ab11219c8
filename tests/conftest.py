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
    """args plus ONE_PROCESS's settings the args do not set themselves (the A/B one only for an A/B,
    the plain one only for a plain run, which refuses the other's: a run's identity holds the whole
    config, so a resume must name the same)."""
    keys = {str(a).split("=", 1)[0].lstrip("+") for a in args}
    ab = bool({"ab", "ab.name"} & keys)
    return [*args, *(p for p in ONE_PROCESS if p.split("=", 1)[0] not in keys and ab == p.startswith("ab."))]


def _env(env):
    full_env = dict(os.environ)
    for k in ("ZL_BACKEND", "ZL_ENABLE_CUDAGRAPH", "ZL_DIRECT_REPEAT", "BENCH_LEVEL", "SHAPE_MODE",
              "TEST_NODE", "OP", "OP_FILE", "USE_FLAGTUNE", "FLAGGEMS_ROOT", "ZLBENCH_SMI_OUTPUT"):
        full_env.pop(k, None)
    full_env.update(env or {})
    return full_env


def zlbench(*args, cwd=None, env=None, timeout=600, defaults=False):
    """Run `python -m zlbench` for real, as a user would (defaults=False: with ONE_PROCESS pinned)."""
    args = args if defaults else pinned(args)
    return subprocess.run([sys.executable, "-m", "zlbench", *args], cwd=cwd, env=_env(env),
                          capture_output=True, text=True, timeout=timeout)


def start_zlbench(*args, cwd, env=None, defaults=False):
    """`python -m zlbench` started in a session of its own (a test signals it, or its group)."""
    args = args if defaults else pinned(args)
    return subprocess.Popen([sys.executable, "-m", "zlbench", *args], cwd=cwd, env=_env(env),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.fixture(autouse=True, scope="session")
def _device_locks_of_this_session(tmp_path_factory):
    """Device locks are the machine's (ZLBENCH_LOCK_DIR): another test session on this machine would
    hold the same simulated devices and refuse this one's runs. This session's runs lock their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ZLBENCH_LOCK_DIR", str(tmp_path_factory.mktemp("device_locks")))
        # Plain runs keep compiled kernels across runs (share_kernels): this session's in a dir of its own.
        mp.setenv("ZLBENCH_CACHE_DIR", str(tmp_path_factory.mktemp("kernel_cache")))
        yield


@pytest.fixture
def run_zlbench(tmp_path):
    def _run(*args, env=None, run_dir=None, defaults=False):
        run_dir = run_dir or tmp_path / "run"
        res = zlbench(f"hydra.run.dir={run_dir}", "progress=plain", *args, cwd=tmp_path, env=env, defaults=defaults)
        res.run_dir = run_dir
        return res

    return _run


EXP_RUN = ("ops=[exp]", "dtypes=[float32]")  # a demo run several tests read (shared_run)


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory):
    """A run several tests read and none modifies (copy it first: copied_run), made once per
    session for its arguments: `python -m zlbench` costs seconds, whatever it measures."""
    made = {}

    # Laid out as Hydra's default run dirs (zl_runs/<date>/<time>): the store goes to zl_runs/zlbench.db.
    def _run(*args, env=None, where="zl_runs/2026-11-30/12-00-00"):
        key = (args, tuple(sorted((env or {}).items())), where)
        if key not in made:
            base = tmp_path_factory.mktemp("shared")
            res = zlbench(f"hydra.run.dir={base / where}", "progress=plain", *args, cwd=base, env=env)
            res.run_dir = base / where
            made[key] = res
        return made[key]

    return _run


def copied_run(res, dst):
    """A copy of a shared run's dir that a test may modify."""
    shutil.copytree(res.run_dir, dst)
    return dst


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


def wait_for(predicate, timeout=300):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def processes_in(run_dir):
    """Live processes working in the run dir (benchmark processes run in their unit dirs)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if cwd.startswith(str(run_dir)) or str(run_dir).encode() in cmd:
            out.append(int(pid))
    return out


def none_left(run_dir, timeout=120):
    """Every process of the run has ended (within timeout s: processes die asynchronously after a
    kill). False while any lives on: an orphan."""
    return wait_for(lambda: processes_in(run_dir) == [], timeout=timeout)


def held(tickets, n=1):
    """At least n nodes of the wait corpus wait in flight for the test (its TICKETS / HOLD_FROM)."""
    return wait_for(lambda: len(list(Path(tickets).glob("held.*"))) >= n)


@pytest.fixture
def url(tmp_path):
    """An empty SQLite results store's URL (the history tests' store)."""
    (tmp_path / "store").mkdir()
    return f"sqlite:///{tmp_path / 'store' / 'zlbench.db'}"
