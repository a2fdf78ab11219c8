"""The execution engine under faults: a run killed with SIGKILL resumes to the same result; a
worker killed from outside leaves typed statuses; a full disk is a clear error; many devices."""

import csv
import json
import re
import shutil
import os
import signal
import shlex
import subprocess
import sys
import time

import pytest

from .conftest import FIXTURES, held, measured_ends, none_left, processes_in, zlbench

pytestmark = pytest.mark.slow
WAIT = FIXTURES / "wait_corpus"
ARGS = ["backend=cpu", "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_0*']", "progress=plain", "timer.processes=1"]
TWO = ["backend.slots=2"]  # resume must keep each node on the unit that already measured it


def statuses(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return {r["test_node"]: r["status"] for r in csv.DictReader(f)}


def row_set(run_dir):
    rows = [json.loads(l) for l in (run_dir / "rows.jsonl").read_text().splitlines()]
    return sorted((r["op"], r["dtype"], r["shape"], r["status"], r["latency"]) for r in rows)


def start_run(run_dir, *extra, env=None):
    full = {k: v for k, v in os.environ.items() if k not in ("ZL_BACKEND", "OP", "TEST_NODE")}
    full.update({"WAIT_S": "0.05", **(env or {})})
    return subprocess.Popen([sys.executable, "-m", "zlbench", f"hydra.run.dir={run_dir}", *ARGS, *extra],
                            cwd=run_dir.parent, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)


def test_collect_of_a_run_still_measuring_says_so_and_exits_cut(tmp_path):
    """`zlbench collect` of a live run: what finished so far, said to be so (not "cut short" alone),
    exit 4 (not every node measured); the run itself is left alone."""
    run, tickets = tmp_path / "live", tmp_path / "tickets"
    proc = start_run(run, env={"TICKETS": str(tickets), "HOLD_FROM": "2"})
    try:
        assert held(tickets, 1) and len(measured_ends(run)) == 2
        collected = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(run), "--store-url", "none"],
                                   capture_output=True, text=True)
        assert collected.returncode == 4, collected.stderr
        assert f"{run} is still being measured (pid {proc.pid} on" in collected.stderr, collected.stderr
        summary = (run / "summary.md").read_text()
        assert "(collected while the run was still running)" in summary
        # not a cut to resume (a resume would wait for the live run's lock, then be refused)
        assert summary.startswith(f"> **Still measuring** (pid {proc.pid} on") and "Resume with" not in summary
        said = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(run)], capture_output=True, text=True)
        assert said.returncode == 4, said.stderr
        assert "**Still measuring**" in said.stdout and "Run cut short" not in said.stdout, said.stdout[:2000]
        assert proc.poll() is None  # still running, undisturbed
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_sigkill_midway_then_resume_matches_an_uninterrupted_run(tmp_path):
    killed, tickets = tmp_path / "killed", tmp_path / "tickets"
    # Four nodes end; the next ones wait in flight (one per device) until the kill.
    proc = start_run(killed, *TWO, env={"TICKETS": str(tickets), "HOLD_FROM": "4"})
    assert held(tickets, 2) and len(measured_ends(killed)) == 4
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert none_left(killed), processes_in(killed)  # nothing of the run lives on to measure more
    before = sorted(measured_ends(killed))
    assert len(before) == 4
    env = {"WAIT_S": "0.05"}
    # Look at the partial results first (this writes wall times a fresh plan would balance by).
    collected = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(killed)], capture_output=True, text=True)
    assert collected.returncode == 4, collected.stderr  # cut short: nodes left to resume
    # The unfinished planned nodes are listed (resumable), never dropped.
    assert len(statuses(killed)) == 10 and "Run cut short" in (killed / "summary.md").read_text()
    units_before = json.loads((killed / "plan.json").read_text())["units"]
    res = zlbench(f"hydra.run.dir={tmp_path / 'elsewhere'}", *ARGS, *TWO, f"resume={killed}", cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "resuming" in res.stderr
    # The same units, not a re-balance by the wall times now known: completion is per unit.
    assert json.loads((killed / "plan.json").read_text())["units"] == units_before
    ref = tmp_path / "reference"
    res = zlbench(f"hydra.run.dir={ref}", *ARGS, *TWO, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert statuses(killed) == statuses(ref) and set(statuses(ref).values()) == {"ok"}
    assert len(statuses(ref)) == 10
    assert row_set(killed) == row_set(ref)
    # Nodes finished before the kill were not measured again.
    counts = {n: measured_ends(killed).count(n) for n in before}
    assert set(counts.values()) == {1}


def test_resume_refuses_another_caliber(tmp_path):
    run = tmp_path / "run"
    assert zlbench(f"hydra.run.dir={run}", *ARGS, cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0
    res = zlbench(f"hydra.run.dir={tmp_path / 'x'}", *ARGS, "timer.repeat=3", f"resume={run}", cwd=tmp_path)
    assert res.returncode == 2 and "made with other settings" in res.stderr and "timer" in res.stderr
    # ... naming the setting and both values (it said "differs in: timer"), each setting once
    assert "(its identity differs in: timer.repeat: 1 -> 3);" in res.stderr, res.stderr
    # Another node time limit changes no number: said as what it would do ("would mix measurements" was false).
    res = zlbench(*ARGS, "launcher.node_timeout_s=60", "fail_on=[]", f"resume={run}", cwd=tmp_path)  # fail_on: no matter
    assert res.returncode == 2 and "was made with launcher.node_timeout_s=900.0, and a resume keeps it: it measures " \
        "what the run did not get to, while a test that ran past the limit stays timed out" in res.stderr, res.stderr
    assert "would mix measurements" not in res.stderr and f"resume={run})" in res.stderr, res.stderr
    # The same overrides under other software: the message names the versions, not the overrides.
    identity = json.loads((run / "run_identity.json").read_text())
    identity["versions"]["torch"] = "0.0.1"
    (run / "run_identity.json").write_text(json.dumps(identity))
    res = zlbench(*ARGS, f"resume={run}", cwd=tmp_path)
    assert res.returncode == 2 and "was measured with other versions (torch 0.0.1 -> " in res.stderr, res.stderr


def test_a_refused_resume_keeps_the_overrides_the_run_was_made_with(tmp_path):
    run = tmp_path / "run"
    assert zlbench(f"hydra.run.dir={run}", *ARGS, cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0
    made_with = (run / ".hydra" / "overrides.yaml").read_text()
    started = json.loads((run / "run_identity.json").read_text())["created"]
    # A bare resume= (another selection: all of the corpus) is refused ...
    res = zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={WAIT}", f"resume={run}", cwd=tmp_path)
    assert res.returncode == 2 and "made with other settings" in res.stderr, res.stderr[-2000:]
    # ... and names the command that resumes it, read from what it left untouched.
    assert (run / ".hydra" / "overrides.yaml").read_text() == made_with
    assert "wait_0*" in res.stderr and "progress=plain timer.processes=1 resume=" in res.stderr
    # A resume with them runs (nothing left to do) and still leaves the run's own record alone.
    res = zlbench(*ARGS, f"resume={run}", "progress=none", cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert (run / ".hydra" / "overrides.yaml").read_text() == made_with
    assert not (run / ".hydra.resume").exists() and sorted(p.name for p in (run / ".hydra").iterdir()) == [
        "config.yaml", "hydra.yaml", "overrides.yaml"]
    # The run keeps the date it started (summary.md, the store's record), and lists its resume with
    # the overrides it was resumed with.
    identity = json.loads((run / "run_identity.json").read_text())
    assert identity["created"] == started and len(identity["resumed"]) == 1
    assert "progress=none" in identity["resumed"][0]["overrides"] and identity["resumed"][0]["at"] > started
    # ... and its provenance is still the command it was made with (the resume's overwrote it)
    assert not any(o.startswith("resume=") for o in identity["provenance"]["job_overrides"]), identity["provenance"]
    assert "progress=none" not in identity["provenance"]["cli_overrides"]
    # A dry run (which writes nothing), or a run made with other settings (refused), into the run dir by
    # hydra.run.dir= leaves it alone too: the resume command it names is still the one the run was
    # made with.
    res = zlbench(f"hydra.run.dir={run}", "backend=cpu", "dry_run=true", "ops=[exp]", cwd=tmp_path)
    assert res.returncode == 0 and "nodes (" in res.stdout, res.stderr[-2000:]
    res = zlbench(f"hydra.run.dir={run}", *ARGS, "timer.repeat=3", cwd=tmp_path)
    assert res.returncode == 2 and "made with other settings" in res.stderr, res.stderr[-2000:]
    assert (run / ".hydra" / "overrides.yaml").read_text() == made_with
    assert not (run / ".hydra.resume").exists() and len(json.loads((run / "run_identity.json").read_text())["resumed"]) == 1
    assert "wait_0*" in res.stderr and "timer.repeat" not in res.stderr.split("Fix:")[-1]
    # It is read from run_identity.json, which only an accepted run writes: a run dir copied
    # without its dot-files (or whose .hydra/ a sweep rewrote) still names it.
    shutil.rmtree(run / ".hydra")
    res = zlbench(f"hydra.run.dir={run}", *ARGS, "timer.repeat=3", cwd=tmp_path)
    assert res.returncode == 2 and "wait_0*" in res.stderr.split("Fix:")[-1], res.stderr[-2000:]
    assert "timer.repeat" not in res.stderr.split("Fix:")[-1]
    assert not (run / ".hydra").exists()  # the refused run wrote none into the copy
    # A switch this shell sets and the run did not: the refusal names it, and its Fix unsets it.
    res = zlbench(*ARGS, f"resume={run}", cwd=tmp_path, env={"WAIT_S": "0", "TRITON_DEFAULT_FP_FUSION": "0"})
    assert res.returncode == 2 and "its switches: TRITON_DEFAULT_FP_FUSION=0 here, not set in the run" in res.stderr, \
        res.stderr[-2000:]
    # ... and its Fix, run as printed in that shell, unsets it and resumes.
    fix = res.stderr.split("made with (", 1)[1].rsplit("), or start a new run dir", 1)[0]
    assert fix.startswith("env -u TRITON_DEFAULT_FP_FUSION python -m zlbench "), fix
    words = shlex.split(fix)
    again = subprocess.run([*words[:3], sys.executable, *words[4:]], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "WAIT_S": "0", "TRITON_DEFAULT_FP_FUSION": "0"})
    assert again.returncode == 0, again.stderr[-2000:]


def test_a_sweep_into_a_sweep_dir_that_holds_runs_leaves_their_hydra_files_alone(tmp_path):
    sweep = tmp_path / "sweep"
    args = ["-m", f"hydra.sweep.dir={sweep}", *ARGS[:-2], "ops=['wait_00']", "progress=none", "timer.processes=1"]
    assert zlbench(*args, "timer.repeat=5,6", cwd=tmp_path, env={"WAIT_S": "0"}).returncode == 0
    made_with = {p: p.read_text() for p in sweep.glob("*/.hydra/*.yaml")}
    assert len(made_with) == 6, sorted(made_with)
    res = zlbench(*args, "timer.repeat=7,8", cwd=tmp_path, env={"WAIT_S": "0"})
    assert res.returncode == 2 and res.stdout.count("made with other settings") + res.stderr.count("made with other settings") >= 2
    assert {p: p.read_text() for p in sweep.glob("*/.hydra/*.yaml")} == made_with


def test_the_resume_command_reads_back_as_the_run_dir_whatever_its_name(tmp_path):
    import shlex

    from hydra.core.override_parser.overrides_parser import OverridesParser
    from zlbench.results.rundir import resume_command

    for name in ("it's x", "a,b", "plain"):
        run = tmp_path / name
        run.mkdir()
        (run / "run_identity.json").write_text(json.dumps({"provenance": {"job_overrides": ["ops=[exp]", "resume=x"]}}))
        words = shlex.split(resume_command(run))
        assert words[:4] == ["python", "-m", "zlbench", "ops=[exp]"] and len(words) == 5
        (parsed,) = OverridesParser.create().parse_overrides(words[4:])
        assert parsed.key_or_group == "resume" and parsed.value() == str(run)
    # A run made with switches set in its shell: the command sets them (a resume without them is
    # another identity, refused with this same command as its Fix); a masked password is left out.
    (run / "run_identity.json").write_text(json.dumps({
        "provenance": {"job_overrides": ["ops=[exp]"]},
        "switch_env": {"TRITON_DEFAULT_FP_FUSION": "0", "FLAGGEMS_DB_URL": "postgresql://u:***@db/x"}}))
    words = shlex.split(resume_command(run))
    assert words[:6] == ["env", "TRITON_DEFAULT_FP_FUSION=0", "python", "-m", "zlbench", "ops=[exp]"], words


def test_a_worker_killed_from_outside_leaves_statuses_not_holes(tmp_path):
    run, tickets = tmp_path / "run", tmp_path / "tickets"
    proc = start_run(run, env={"TICKETS": str(tickets), "HOLD_FROM": "2"})  # the third node waits in flight
    assert held(tickets) and len(measured_ends(run)) == 2
    jobs = [p for p in os.listdir("/proc") if p.isdigit() and _is_job_of(p, run)]
    assert jobs, "no submitit job process found"
    for pid in jobs:
        os.kill(int(pid), signal.SIGKILL)
    killed_at = time.monotonic()
    out, err = proc.communicate(timeout=120)
    # The job's end is known at its controller's exit: no 15 s wait for the result file a killed
    # worker never writes (what is left is the tables, about 1 s; 10 s leaves room for a busy host).
    assert time.monotonic() - killed_at < 14  # before: submitit waited 15 s for the file
    st = statuses(run)
    assert len(st) == 10
    assert "crashed" in st.values() and "ok" in st.values()
    reasons = (run / "ops_status.csv").read_text()
    assert "resume to measure it" in reasons and "ended early" in reasons  # which job, and why
    assert proc.returncode == 4 and "Run cut short" in (run / "summary.md").read_text()
    assert none_left(run), processes_in(run)


def _is_job_of(pid, run_dir):
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    return b"submitit.core._submit" in cmd and any(str(run_dir).encode() in c for c in cmd)


def test_full_disk_is_a_clear_error_and_corrupts_nothing(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        run = mnt / "run"
        res = zlbench(f"hydra.run.dir={run}", "backend=cpu", "corpus=flaggems", f"corpus.root={WAIT}",
                      "ops=['wait_*']", "progress=none", cwd=tmp_path, env={"WAIT_S": "0"})
        assert res.returncode == 2, res.stderr[-2000:]
        assert "No space left on device" in res.stderr and "Traceback" not in res.stderr
        # Every events line that was written is whole JSON (a torn last line is ignored by readers).
        for path in run.glob("units/*/events.jsonl"):
            lines = path.read_text(errors="replace").split("\n")
            for line in lines[:-1]:
                json.loads(line)
        for name in ("rows.jsonl", "ops_status.csv"):
            assert not (run / name).exists() or (run / name).read_text().endswith("\n")
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_units_spread_over_simulated_devices(tmp_path):
    # Nodes where the plan put them (no taking), to see each device measure its own.
    res = zlbench(f"hydra.run.dir={tmp_path / 'run'}", *ARGS, "backend.slots=4", "launcher.steal=false",
                  cwd=tmp_path, env={"WAIT_S": "0.1"})
    assert res.returncode == 0, res.stderr[-2000:]
    plan = json.loads((tmp_path / "run" / "plan.json").read_text())
    assert sorted({u["device"] for u in plan["units"]}) == [0, 1, 2, 3]
    assert {u["env"]["ZLBENCH_CPU_SLOT"] for u in plan["units"]} == {"0", "1", "2", "3"}
    rows = [json.loads(l) for l in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    assert {r["device"] for r in rows} == {0, 1, 2, 3}


def test_run_time_limit_gives_timeouts_even_while_the_corpus_is_still_importing(tmp_path):
    # Device 0's process is killed while a node runs; device 1's while pytest still imports the
    # corpus (flag_gems takes ~12 s on a GPU machine). Neither is a crash: both hit the limit.
    run = tmp_path / "run"
    res = zlbench(f"hydra.run.dir={run}", *ARGS[:3], "ops=['wait_0[0-1]']", "progress=none", "backend.slots=2",
                  "launcher.steal=false", "launcher.run_timeout_s=4", cwd=tmp_path,
                  env={"WAIT_S": "600", "IMPORT_WAIT_S": "600", "SLOW_SLOT": "1"})
    assert res.returncode == 4, res.stderr[-2000:]  # cut short by its time limit
    summary = (run / "summary.md").read_text()
    assert "Run cut short" in summary
    # Its resume command leaves out the limit that cut it (the same 4 s would cut the resume as well).
    resume = re.search(r"Resume with `([^`]*)`( \(without the launcher.run_timeout_s that cut it)?", summary)
    assert resume and resume[2] and "run_timeout_s" not in resume[1] and f"resume={run}" in resume[1], summary
    with open(run / "ops_status.csv") as f:
        got = {r["test_node"].split("::")[1]: (r["status"], r["reason"]) for r in csv.DictReader(f)}
    assert len(got) == 2 and {s for s, _ in got.values()} == {"timeout"}, got
    assert all("launcher.run_timeout_s" in reason for _, reason in got.values()), got


def test_a_cut_node_measured_in_some_processes_still_drops_the_limit_from_the_resume(tmp_path):
    """At timer.processes=3 a node cut after its first pass reads "measured in 1 of 3 processes; not in
    the others: whole-run time limit ...": the banner kept the limit in the resume command then."""
    from zlbench.report.run_report import cut_banner
    from zlbench.results import events as ev

    (tmp_path / "run_identity.json").write_text(json.dumps(
        {"switch_env": {}, "provenance": {"job_overrides": ["ops=[exp]", "launcher.run_timeout_s=4"]}}))
    cut = [{"test_node": "t.py::test_exp", "status": "timeout", "rows": 2,
            "reason": f"measured in 1 of 3 processes; not in the others: {ev.DEADLINE_REASON} before it ran"}]
    banner = cut_banner(cut, 1, tmp_path, processes=3)
    assert "run_timeout_s=4" not in banner and "(without the launcher.run_timeout_s that cut it" in banner, banner


def _ran_where(run_dir):
    """node -> device of the unit whose events hold its end, and node -> device the plan gave it."""
    plan = json.loads((run_dir / "plan.json").read_text())
    planned = {n: u["device"] for u in plan["units"] for n in u["nodes"]}
    ran = {}
    for u in plan["units"]:
        for line in (run_dir / "units" / u["unit_id"] / "events.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e.get("event") == "end" and not e.get("resumable"):
                ran.setdefault(e["node"], []).append(u["device"])
    return planned, ran


@pytest.mark.parametrize("steal", [True, False])
def test_a_device_done_early_takes_the_nodes_waiting_on_another(tmp_path, steal):
    # Device 0 is slow to start (as a GPU importing flag_gems can be); device 1 finishes its own 5
    # nodes and takes device 0's. Each node still runs exactly once, every row recorded.
    run = tmp_path / "run"
    # Device 0 loads the corpus only once 7 nodes started elsewhere (3 without taking): device 1
    # surely took 2 or more of its 5, whatever the machine's speed.
    env = {"WAIT_S": "0.05", "SLOW_SLOT": "0", "TICKETS": str(tmp_path / "tickets"),
           "IMPORT_AFTER": "7" if steal else "3"}
    res = zlbench(f"hydra.run.dir={run}", *ARGS, "backend.slots=2", f"launcher.steal={str(steal).lower()}",
                  cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    planned, ran = _ran_where(run)
    assert sorted(ran) == sorted(planned) and all(len(d) == 1 for d in ran.values()), ran
    assert set(statuses(run).values()) == {"ok"}
    moved = [n for n in planned if ran[n] != [planned[n]]]
    rows = [json.loads(l) for l in (run / "rows.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(planned) and all(r["device"] == ran[r["node"]][0] for r in rows)
    if steal:
        assert {planned[n] for n in moved} == {0} and len(moved) >= 2, (moved, planned, ran)
    else:
        assert moved == []


def test_a_crash_log_tail_reads_a_fault_handlers_dump_of_its_own_launch(tmp_path):
    """A process killed by SIGABRT ends its log with the fault handler's frames and the list of
    extension modules: the tail gave that list ('torch._C._fft, torch._C._linalg, ...'), which says
    nothing; it now gives the fatal error and the innermost frames, of this launch only."""
    from zlbench.engine.processes import log_tail

    dump = ["", "==== zlbench: launching pytest over 9 node(s)", "....Fatal Python error: Aborted", "",
            "Current thread 0x00007f658b230140 (most recent call first):",
            '  File "/venv/site-packages/torch/_ops.py", line 1269 in __call__',
            '  File "/fg/benchmark/base.py", line 288 in <lambda>',
            '  File "/venv/site-packages/triton/testing.py", line 111 in do_bench_cudagraph',
            '  File "/work/zlbench/plugins/timers/graph.py", line 45 in batch',
            '  File "/work/zlbench/plugins/timers/__init__.py", line 94 in measure', "",
            "Extension modules: yaml._yaml, numpy._core._multiarray_umath, torch._C, torch._C._fft (total: 80)"]
    log = tmp_path / "pytest.log"
    log.write_text("\n".join(dump) + "\n")
    assert log_tail(log) == ("Fatal Python error: Aborted | in torch/_ops.py:1269 __call__ < benchmark/base.py:288 "
                             "<lambda> < triton/testing.py:111 do_bench_cudagraph < timers/graph.py:45 batch")
    # Other threads' frames come first in the dump: the tail reads the thread that died.
    log.write_text("\n".join(dump[:3] + ["", "Thread 0x00007f0000000001 (most recent call first):",
                                         '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
                                         '  File "/venv/site-packages/tqdm/_monitor.py", line 60 in run', ""]
                             + dump[4:]) + "\n")
    assert log_tail(log).startswith("Fatal Python error: Aborted | in torch/_ops.py:1269 __call__ < ")
    # The next launch of the unit ended otherwise: its own last lines, not the earlier dump.
    log.write_text("\n".join(dump + ["", "==== zlbench: launching pytest over 8 node(s)", "..",
                                     "RuntimeError: CUDA error: an illegal memory access"]) + "\n")
    assert log_tail(log) == "RuntimeError: CUDA error: an illegal memory access | .."
    # A conftest that cannot import (flag_gems without triton): the exception first, then the tail.
    log.write_text("\n".join(["==== zlbench: launching pytest over 1 node(s)",
                              "ImportError while loading conftest '/fg/benchmark/conftest.py'.",
                              "/fg/benchmark/conftest.py:23: in <module>", "    import flag_gems",
                              "/fg/src/flag_gems/runtime/configs_loader.py:20: in <module>", "    import triton",
                              "E   ModuleNotFoundError: No module named 'triton'"]) + "\n")
    assert log_tail(log).startswith("ModuleNotFoundError: No module named 'triton' | ")
    # A bare Exception is one too; an earlier test's failure, far above the end, is not what ended it.
    log.write_text("\n".join(["==== zlbench: launching pytest over 8 node(s)", "E   AssertionError: rows differ"]
                             + ["."] * 20 + ["Exception: cuda graph replay failed"]) + "\n")
    assert log_tail(log).startswith("Exception: cuda graph replay failed | ") and "AssertionError" not in log_tail(log)
    # pytest's usage error (a corpus option's invalid choice) ends under its banner: the error first
    # (a review: the Not ok table, cut at 160 characters, showed the banner only).
    log.write_text("\n".join(["==== zlbench: launching pytest over 1 node(s)",
                              "ERROR: usage: __main__.py [options] [file_or_dir] [file_or_dir] [...]",
                              "__main__.py: error: argument --dtypes: invalid choice: 'int8' (choose from float16, "
                              "float32)", "  inifile: /fg/pytest.ini", "  rootdir: /fg"]) + "\n")
    assert log_tail(log).startswith("__main__.py: error: argument --dtypes: invalid choice: 'int8'"), log_tail(log)
