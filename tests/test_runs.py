"""Runs that cannot be corrupted: time limits, exit codes, interrupts, concurrent runs, resume,
Hydra hygiene. Real zlbench processes, real signals, real files."""

import csv
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import EXP_RUN, FIXTURES, held, measured_ends, none_left, processes_in, wait_for, zlbench

pytestmark = pytest.mark.slow
WAIT = FIXTURES / "wait_corpus"
ARGS = ["backend=cpu", "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_0*']", "progress=plain", "timer.processes=1"]


def statuses(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return {r["test_node"]: (r["status"], r["reason"]) for r in csv.DictReader(f)}


def row_set(run_dir):
    rows = [json.loads(l) for l in (run_dir / "rows.jsonl").read_text().splitlines()]
    return sorted((r["op"], r["dtype"], r["shape"], r["status"], r["latency"]) for r in rows)


def start(run_dir, *extra, env=None, stderr=subprocess.PIPE):
    full = {k: v for k, v in os.environ.items() if k not in ("ZL_BACKEND", "OP", "TEST_NODE")}
    full.update({"WAIT_S": "0.05", **(env or {})})
    return subprocess.Popen([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", *ARGS, *extra],
                            cwd=run_dir.parent, env=full, stdout=subprocess.PIPE, stderr=stderr,
                            text=True, start_new_session=True)


def holding(tmp_path, hold_from=0, **extra):
    """The wait corpus' nodes from the hold_from-th on wait in flight until release(tmp_path)."""
    return {"TICKETS": str(tmp_path / "tickets"), "HOLD_FROM": str(hold_from), **extra}


def release(tmp_path):
    (tmp_path / "tickets" / "release").touch()


def test_a_local_run_has_no_time_limit_of_its_own(tmp_path):
    run = tmp_path / "run"
    proc = start(run, "ops=['wait_00']", env=holding(tmp_path))
    try:
        assert held(tmp_path / "tickets")  # the job is surely alive
        # submitit kills a local job at its timeout: it is far beyond any run (no Slurm-only 60 min).
        assert min(_controller_timeouts(run)) >= 300 * 24 * 3600
    finally:
        release(tmp_path)
        proc.communicate(timeout=300)
    assert proc.returncode == 0
    # A Slurm-only setting on the local launcher is refused by its own schema, exit 2.
    res = zlbench(f"hydra.run.dir={tmp_path / 'x'}", *ARGS, "launcher.time_min=1", cwd=tmp_path)
    assert res.returncode == 2 and "time_min" in res.stderr, res.stderr[-2000:]


def _controller_timeouts(run_dir):
    out = []
    for pid in processes_in(run_dir):
        try:
            env = dict(kv.split(b"=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if b"SUBMITIT_LOCAL_TIMEOUT_S" in env:
            out.append(int(env[b"SUBMITIT_LOCAL_TIMEOUT_S"]))
    return out


def test_exit_codes_follow_fail_on(tmp_path, faulty_corpus):
    base = ["backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}", "ops=[good,fails]", "progress=none"]
    res = zlbench(f"hydra.run.dir={tmp_path / 'a'}", *base, cwd=tmp_path)
    assert res.returncode == 1, res.stderr[-2000:]  # a failed node: not ok by default
    # ... and it says which of fail_on's kinds made it so (an A/B's verdicts print nothing else)
    assert "[zlbench] exit 1: fail_on=['failed', 'crashed', 'timeout', 'poisoned', 'fatal'] found 1 failed" \
        in res.stderr, res.stderr[-2000:]
    res = zlbench(f"hydra.run.dir={tmp_path / 'b'}", *base, "fail_on=[]", cwd=tmp_path)
    assert res.returncode == 0 and "[zlbench] exit 1" not in res.stderr, res.stderr[-2000:]
    res = zlbench(f"hydra.run.dir={tmp_path / 'c'}", *base, "fail_on=[oops]", cwd=tmp_path)
    assert res.returncode == 2 and "fail_on" in res.stderr and not (tmp_path / "c").exists()


def test_ctrl_c_on_the_main_process_stops_everything_and_writes_the_tables(tmp_path):
    run = tmp_path / "run"
    # Three nodes end, the next ones wait in flight until the run is stopped: it cannot end otherwise.
    proc = start(run, "backend.slots=2", env=holding(tmp_path, 3))
    assert held(tmp_path / "tickets", 2) and len(measured_ends(run)) == 3  # one per device
    proc.send_signal(signal.SIGINT)  # the main process alone, not its group
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and f"resume={run}" in err
    assert none_left(run), processes_in(run)  # no orphan kept measuring
    st = statuses(run)
    assert len(st) == 10  # every planned node listed: measured, or left to resume
    left = [n for n, (s, reason) in st.items() if "resume" in reason]
    assert left and all(st[n][0] == "interrupted" for n in left)  # not a crash: no fault of the node
    assert "Run cut short** (interrupted)" in (run / "summary.md").read_text()
    # zlbench collect tells it as the run did (read back from the placeholders' reasons).
    (run / "summary.md").unlink()
    collected = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(run)], capture_output=True, text=True)
    assert "Run cut short** (interrupted)" in (run / "summary.md").read_text(), collected.stderr[-2000:]
    # The printed resume line, as a user copies it, carries the run's overrides (a resume with other
    # settings would be refused as another caliber).
    printed = shlex.split(re.search(r"resume with `([^`]+)`", err).group(1))
    assert printed[:3] == ["python", "-m", "zlbench"] and printed[-1] == f"resume={run}", printed
    assert "backend.slots=2" in printed and "ops=['wait_0*']" in printed, printed
    res = zlbench(*printed[3:], cwd=tmp_path, env={"WAIT_S": "0.05"})
    assert res.returncode == 0 and "resuming" in res.stderr, res.stderr[-2000:]
    assert {s for s, _ in statuses(run).values()} == {"ok"}
    assert len(row_set(run)) == 20  # two shapes per node, once each


def test_a_second_ctrl_c_exits_at_once(tmp_path):
    run, err = tmp_path / "run", tmp_path / "stderr"
    with open(err, "w") as f:
        proc = start(run, env=holding(tmp_path), stderr=f)
    assert held(tmp_path / "tickets")
    proc.send_signal(signal.SIGINT)
    # The second once the first is handled (two signals before Python runs its handler are one).
    assert wait_for(lambda: "SIGINT: stopping" in err.read_text())
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=300)
    assert proc.returncode == 130 and "interrupted twice: exiting now" in err.read_text(), err.read_text()[-2000:]


def test_a_second_run_into_a_live_run_dir_is_refused_and_a_dead_ones_lock_taken_over(tmp_path):
    run = tmp_path / "run"
    first = start(run, env=holding(tmp_path))
    assert held(tmp_path / "tickets")  # live until the kill
    res = zlbench(f"hydra.run.dir={run}", *ARGS, cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "in use by a live zlbench run" in res.stderr and f"pid {first.pid}" in res.stderr
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    assert none_left(run), processes_in(run)
    res = zlbench(f"hydra.run.dir={run}", *ARGS, cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "taking over" in res.stderr and "resuming" in res.stderr


def test_sigkill_mid_node_then_resume_has_exactly_the_rows_of_a_clean_run(tmp_path):
    # Each node records one dtype, waits, then records the other: killed in between, it leaves a
    # partial result that must not survive next to the rows the resume measures.
    env = {"WAIT_S": "0.05", "PARTIAL_WAIT_S": "0"}
    run, stash = tmp_path / "killed", tmp_path / "stash"
    stash.mkdir()
    proc = start(run, env=holding(stash, 2, **env))  # the third node holds after its first dtype
    assert held(stash / "tickets")
    events = [json.loads(l) for p in run.glob("units/*/events.jsonl") for l in p.read_text().splitlines()]
    ends = sum(1 for e in events if e["event"] == "end")
    records = sum(1 for e in events if e["event"] == "record")
    assert ends == 2 and records == 2 * ends + 1  # a partial result in flight
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert none_left(run), processes_in(run)
    res = zlbench(*ARGS, f"resume={run}", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    ref = tmp_path / "ref"
    assert zlbench(f"hydra.run.dir={ref}", *ARGS, cwd=tmp_path, env=env).returncode == 0
    assert row_set(run) == row_set(ref) and len(row_set(ref)) == 40
    # No stray run dir (the results store beside the run dirs is expected).
    assert not [p for p in tmp_path.iterdir() if p.name not in ("killed", "ref", "stash") and not p.name.startswith("zlbench.db")]


def test_a_run_cut_between_the_cases_of_a_test_says_so_and_its_resume_measures_the_test_whole(tmp_path):
    run = tmp_path / "run"
    args = ["backend=cpu", "corpus=flaggems", f"corpus.root={WAIT}", "ops=[paramwait]", "progress=none",
            "timer.processes=1", "store.url=none"]
    cut = zlbench(f"hydra.run.dir={run}", *args, "launcher.run_timeout_s=8", cwd=tmp_path, env={"PARAM_WAIT_S": "60"})
    assert cut.returncode == 4, cut.stderr[-3000:]  # cut: the float32 case never ended
    status = list(csv.DictReader(open(run / "ops_status.csv")))
    assert [(s["status"], s["rows"]) for s in status] == [("timeout", "2")], status
    assert re.search(r"run_timeout_s\) reached while it ran, \d+ s in", status[0]["reason"]), status
    # The case the limit stopped while it ran ends once: not also "... before it ran" after it.
    ends = [json.loads(e) for p in (run / "units").glob("*/events.jsonl") for e in p.read_text().splitlines()
            if '"end"' in e]
    cut_ends = [e["reason"] for e in ends if e["status"] == "timeout"]
    assert len(cut_ends) == 1 and "while it ran" in cut_ends[0], ends
    rows = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()]
    assert {r["dtype"] for r in rows if r["status"] == "ok"} == {"torch.float16"}  # kept, not lost
    again = zlbench(*args, f"resume={run}", cwd=tmp_path, env={"PARAM_WAIT_S": "0"})
    assert again.returncode == 0, again.stderr[-3000:]
    rows = [json.loads(x) for x in (run / "rows.jsonl").read_text().splitlines()]
    assert sorted((r["dtype"], r["shape"]) for r in rows) == [  # each case once: no row twice
        ("torch.float16", "[[128]]"), ("torch.float16", "[[64]]"), ("torch.float32", "[[128]]"), ("torch.float32", "[[64]]")]
    assert [s["status"] for s in csv.DictReader(open(run / "ops_status.csv"))] == ["ok"]


def test_a_resume_given_another_hydra_run_dir_writes_into_its_own_and_says_so(tmp_path):
    """resume=X hydra.run.dir=Y resumed X without a word and made Y to hold only that resume's
    zlbench.log (X's log missing its lines). Now Y is not made, the log goes to X, and a note says so."""
    run = tmp_path / "run"
    assert zlbench(f"hydra.run.dir={run}", *ARGS, cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0
    lines = (run / "zlbench.log").read_text().count("\n")
    res = zlbench(*ARGS, f"resume={run}", f"hydra.run.dir={tmp_path / 'other'}", cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"zlbench: note: hydra.run.dir={tmp_path / 'other'} is not used: resume={run} measures the rest into " \
        f"{run} itself" in res.stderr, res.stderr[-3000:]
    assert not (tmp_path / "other").exists() and "resuming" in (run / "zlbench.log").read_text().split("\n", lines)[-1]


def test_resume_of_a_missing_run_dir_is_refused(tmp_path):
    missing = tmp_path / "nowhere"
    res = zlbench(*ARGS, f"resume={missing}", cwd=tmp_path)
    assert res.returncode == 2 and f"{missing} does not exist. Fix: pass the run dir printed" in res.stderr, res.stderr
    assert not missing.exists()
    missing.mkdir()  # a folder that holds no run
    res = zlbench(*ARGS, f"resume={missing}", cwd=tmp_path)
    assert res.returncode == 2 and "is not a zlbench run dir (no run_identity.json)" in res.stderr, res.stderr[-2000:]
    # A folder of runs, given to summary, names them.
    (tmp_path / "runs" / "base").mkdir(parents=True)
    (tmp_path / "runs" / "base" / "run_identity.json").write_text("{}")
    res = zlbench("summary", str(tmp_path / "runs"), cwd=tmp_path, defaults=True)
    assert res.returncode == 2 and f"Fix: pass one of the run dirs in it, e.g. {tmp_path / 'runs' / 'base'}." in res.stderr


def test_resume_compares_resolved_values_not_their_spelling(tmp_path):
    run = tmp_path / "run"
    args = ["corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_00']", "progress=none"]
    assert zlbench(f"hydra.run.dir={run}", *args, cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0  # auto
    res = zlbench(*args, "backend=cpu", "timer=host", f"resume={run}", cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 0 and "resuming" in res.stderr, res.stderr[-2000:]


def test_a_sweep_runs_every_job_and_exits_with_the_worst(tmp_path):
    res = zlbench("-m", "ops=[nope],[exp]", "dtypes=[float32]", "progress=none",
                  f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-3000:]
    assert "unknown op" in res.stderr.lower() or "nope" in res.stderr
    assert (tmp_path / "sweep" / "1" / "summary.md").is_file()  # the second job ran
    table = res.stderr[res.stderr.index("multirun jobs"):]
    assert "exit   2  ops=[nope]" in table and "exit   0  ops=[exp]" in table
    assert "zlbench run" in (tmp_path / "sweep" / "1" / "summary.md").read_text().splitlines()[0]
    assert "demo on cpu" in (tmp_path / "sweep" / "1" / "summary.md").read_text().splitlines()[0]


def test_a_process_whose_start_up_hangs_is_stopped_by_the_test_time_limit(tmp_path):
    """A hang while the corpus loads (a stuck driver, a cache lock on NFS) waited for ever: the
    node clock ran only while a test was in flight."""
    run = tmp_path / "run"
    res = zlbench(f"hydra.run.dir={run}", *ARGS, "ops=['wait_00']", "launcher.node_timeout_s=2", "store.url=none",
                  cwd=tmp_path, env={"IMPORT_WAIT_S": "600"}, timeout=300)
    assert res.returncode == 1, res.stderr[-2000:]
    with open(run / "ops_status.csv") as f:
        (row,) = list(csv.DictReader(f))
    assert row["status"] == "timeout", row
    assert row["reason"].startswith("the benchmark process ran 30 s (launcher.node_timeout_s=2, at least 30 s for "
                                    "a start-up) before its first test: imports, conftest, collection or a session "
                                    "fixture hung"), row["reason"]


def test_the_sweep_table_names_the_run_dir_a_resumed_job_measured_into(tmp_path):
    run = tmp_path / "run"
    args = ["corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_00']"]
    assert zlbench(f"hydra.run.dir={run}", *args, "progress=none", cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0
    res = zlbench("-m", *args, f"resume={run}", "progress=none,plain", f"hydra.sweep.dir={tmp_path / 'sweep'}",
                  cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 0, res.stderr[-3000:]
    table = res.stderr[res.stderr.index("multirun jobs"):]
    # Hydra's job dirs (sweep/0, sweep/1) hold the jobs' logs only
    assert table.count(f"-> {run}\n") == 2 and str(tmp_path / "sweep") not in table, table


@pytest.mark.parametrize("args,needle", [
    (["+foo=1"], "foo is not a zlbench setting"),
    (["progress=bogus"], "progress"),
    (["ab=env", "ab.var=X", "ab.tuning=maybe"], "tuning"),
    (["launcher=local", "launcher.wait=false"], "wait"),
    (["corpus.pytest_args=[-n,2]"], "xdist"),
    (["hydra.run.dir=/proc/forbidden"], "cannot create hydra.run.dir=/proc/forbidden"),
])
def test_bad_overrides_exit_2_with_one_message(tmp_path, args, needle):
    res = zlbench(f"hydra.run.dir={tmp_path / 'run'}", *args, cwd=tmp_path)
    assert res.returncode == 2 and needle in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "run").exists() or not list((tmp_path / "run").glob("*.json"))


def test_version_and_hydra_help(tmp_path):
    from zlbench import __version__

    res = zlbench("--version", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == f"zlbench {__version__}"
    res = zlbench("--hydra-help", cwd=tmp_path)
    assert res.returncode == 0 and "--multirun" in res.stdout and "completion" not in res.stdout


def test_a_run_dir_holds_what_it_says_and_no_clutter(shared_run):
    res = shared_run(*EXP_RUN)
    assert res.returncode == 0, res.stderr[-2000:]
    d = res.run_dir
    assert "[zlbench] run" in (d / "zlbench.log").read_text()  # terminal lines are logged too
    assert not (d / "submitit" / "%j").exists()
    results_line = next(l for l in res.stderr.splitlines() if "results in" in l)
    assert "speedup.png" in results_line and (d / "speedup.png").is_file()
    progress = [l for l in res.stderr.splitlines() if l.startswith("[zlbench] ") and " | failures: " in l]
    assert progress and len(progress) == len(set(progress))  # the last progress line is not printed twice


def test_devices_in_use_by_another_run_are_refused(tmp_path):
    locks = tmp_path / "locks"
    env = {"ZLBENCH_LOCK_DIR": str(locks)}
    first = start(tmp_path / "a", "launcher.device_lock=true", "ops=['wait_0[0-3]']", env=holding(tmp_path, **env))
    assert held(tmp_path / "tickets") and any(locks.glob("*.holder.json"))  # it measures: it holds the device
    res = zlbench(f"hydra.run.dir={tmp_path / 'b'}", *ARGS, "launcher.device_lock=true", cwd=tmp_path, env=env)
    assert res.returncode == 2, res.stderr[-2000:]
    assert "device cpu-0 is in use by another zlbench run (pid " in res.stderr  # its holder, named
    release(tmp_path)
    first.communicate(timeout=300)
    assert first.returncode == 0
    assert not list(locks.glob("*.holder.json"))  # released when its process ended


def _as_nobody_can_import_zlbench() -> bool:
    import shutil

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return False
    res = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                          "import zlbench.engine.locks"], capture_output=True, env={**os.environ, "PYTHONPATH": ROOT})
    return res.returncode == 0


ROOT = str(Path(__file__).resolve().parents[1])


def test_device_locks_are_every_users_and_a_lock_another_user_cannot_take_is_a_usage_error(tmp_path):
    """Device locks are on by default for accelerators in a folder shared by every user: the first
    user's folder (0755) and lock files (0644) gave every later user an internal error (exit 70)."""
    import tempfile

    from zlbench.engine import locks

    shared = Path(tempfile.mkdtemp(prefix="zl-locks-", dir="/tmp"))
    try:
        os.chmod(shared, 0o755)
        folder = shared / "device-locks"
        env = {**os.environ, "ZLBENCH_LOCK_DIR": str(folder)}
        old = dict(os.environ)
        os.environ.update(env)
        try:
            with locks.DeviceLock("cuda-0"):
                assert (folder / "cuda-0.lock.holder.json").stat().st_mode & 0o777 == 0o666
            assert folder.stat().st_mode & 0o7777 == 0o1777
            assert (folder / "cuda-0.lock").stat().st_mode & 0o777 == 0o666
            # a lock file an earlier zlbench left, only its owner's to write
            (folder / "cuda-1.lock").write_text("")
            os.chmod(folder / "cuda-1.lock", 0o644)
        finally:
            os.environ.clear()
            os.environ.update(old)
        if not _as_nobody_can_import_zlbench():
            pytest.skip("another user is needed (root with setpriv, the repo readable by all)")
        code = ("import sys; from zlbench.engine.locks import DeviceLock, check_devices_free\n"
                "from zlbench.errors import UsageError\n"
                "with DeviceLock('cuda-0'): print('took cuda-0')\n"
                "class U: device_lock = sys.argv[1]\n"
                "try: check_devices_free([U()])\n"
                "except UsageError as e: print('refused:', e)\n")
        nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", code]
        res = subprocess.run(nobody + ["cuda-0"], capture_output=True, text=True, env={**env, "PYTHONPATH": ROOT})
        assert res.returncode == 0 and "took cuda-0" in res.stdout and "refused" not in res.stdout, res.stderr
        res = subprocess.run(nobody + ["cuda-1"], capture_output=True, text=True, env={**env, "PYTHONPATH": ROOT})
        assert res.returncode == 0, res.stderr
        assert f"refused: cannot take the lock of device cuda-1 in {folder}" in res.stdout, res.stdout
        assert "Fix: ZLBENCH_LOCK_DIR=" in res.stdout and "launcher.device_lock=false" in res.stdout
    finally:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)


def test_a_finished_run_is_recorded_in_the_store_and_a_dead_store_costs_one_message(shared_run, tmp_path):
    res = shared_run(*EXP_RUN)  # in <tmp>/zl_runs/2026-11-30/12-00-00
    run = res.run_dir
    assert res.returncode == 0, res.stderr[-2000:]
    db = run.parent.parent / "zlbench.db"
    assert db.is_file() and "recorded" in res.stderr
    listed = subprocess.run([sys.executable, "-m", "zlbench.history", "list", "--url", f"sqlite:///{db}",
                             "--format", "json"], capture_output=True, text=True)
    assert listed.returncode == 0 and str(run) in listed.stdout, listed.stderr
    # A store that cannot be reached: one message, the run's own exit code, the run dir intact.
    res = zlbench(f"hydra.run.dir={tmp_path / 'other'}", "ops=[exp]", "dtypes=[float32]", "progress=none",
                  "store.url=postgresql://nobody@127.0.0.1:9/none", cwd=tmp_path)
    assert res.returncode == 0 and "results store not written" in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr and (tmp_path / "other" / "rows.jsonl").is_file()


def test_a_machine_without_the_store_packages_still_gets_its_results(tmp_path):
    # A vendor machine may carry zlbench without SQLAlchemy/Alembic: the run's results and exit code
    # stand, and one line says what is missing.
    fake = tmp_path / "without_store"
    for name in ("sqlalchemy", "alembic"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(f"raise ImportError(\"No module named '{name}'\")\n")
    env = {"PYTHONPATH": os.pathsep.join(p for p in (str(fake), os.environ.get("PYTHONPATH")) if p)}
    res = zlbench(f"hydra.run.dir={tmp_path / 'run'}", "ops=[exp]", "dtypes=[float32]", "progress=none",
                  cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "results store not written" in res.stderr and "No module named" in res.stderr
    assert (tmp_path / "run" / "rows.jsonl").is_file() and "Traceback" not in res.stderr
