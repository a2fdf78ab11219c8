"""Run work units: one pytest process over a shard of test nodes, restarted when it dies.

The benchmark process appends events (start/end/record/...) to the unit's events.jsonl. The
worker watches that file: a node running past its timeout is killed (status timeout); when the
process dies, the node in flight gets crashed (or poisoned, when the timing plugin said the capture
attempt poisoned the context) and the rest of the shard goes on in a fresh process. Nothing
already measured is lost: events are flushed as they are produced.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .claims import owner
from .plugins._runtime import CONFIG_ENV

TERMINAL = ("ok", "failed", "skipped", "crashed", "timeout", "poisoned", "fatal")


class Terminated(RuntimeError):
    """The job is being ended from outside (scancel, preemption, requeue): stop, claim nothing."""
POLL_S = 0.2


def base_node(nodeid: str) -> str:
    return nodeid.split("[")[0]


def read_events(path: Path) -> List[dict]:
    """All complete event lines; a torn last line (process killed mid-write) is ignored."""
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                break
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def finished_nodes(events: Sequence[dict]) -> Dict[str, dict]:
    """base node id -> its last end event."""
    done = {}
    for e in events:
        if e.get("event") == "end" and e.get("status") in TERMINAL and not e.get("resumable"):
            done[base_node(e["node"])] = e
    return done


def _append(path: Path, **fields) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"t": time.time(), "pid": os.getpid(), **fields}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _tail(path: Path, n: int = 6) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(l.strip() for l in lines[-n:] if l.strip())[-600:]


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"process killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"process killed by signal {-code}"
    return f"process exited with code {code}"


def run_unit(unit: dict, run_dir: str, deadline: Optional[float] = None,
             extra_env: Optional[Dict[str, str]] = None) -> Dict[str, int]:
    """Run one work unit to completion (every node gets a terminal status). Returns status counts."""
    unit_dir = Path(run_dir) / "units" / unit["unit_id"]
    unit_dir.mkdir(parents=True, exist_ok=True)
    events = unit_dir / "events.jsonl"
    log = unit_dir / "pytest.log"
    cfg_path = unit_dir / "plugin_config.json"
    cfg_path.write_text(json.dumps({**unit["plugin_config"], "events": str(events)}, indent=1))
    env = dict(os.environ)
    # The launcher may have set visibility keys of its own (submitit's local executor blanks
    # CUDA_VISIBLE_DEVICES): restore the orchestrator's values (None = unset), then pin the unit.
    for key, value in (extra_env or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    inherited_path = env.get("PYTHONPATH")
    env.update(unit["env"])
    if inherited_path and "PYTHONPATH" in unit["env"]:
        # The corpus' paths first, then whatever made zlbench itself importable here.
        env["PYTHONPATH"] = unit["env"]["PYTHONPATH"] + os.pathsep + inherited_path
    env[CONFIG_ENV] = str(cfg_path)
    crashes: Dict[str, int] = {}
    node_timeout = float(unit["node_timeout_s"])
    pool = list(unit.get("pool") or [])
    given_up: set = set()  # others' nodes a process of ours was given and did not take

    def ours(n: str) -> bool:
        """This unit answers for n: its own node nobody else took, or any node it claimed."""
        if not unit.get("claims_dir"):
            return True
        who = owner(unit["claims_dir"], n)
        return who == unit["unit_id"] or (who is None and n in own)

    own = set(unit["nodes"])
    while True:
        done = finished_nodes(read_events(events))
        remaining = [n for n in unit["nodes"] + pool if n not in done and ours(n)]
        # Others' nodes nobody has claimed yet: run them too, after ours.
        takeable = [n for n in pool if n not in done and n not in given_up and owner(unit["claims_dir"], n) is None]
        if not remaining and not takeable:
            break
        if deadline is not None and time.time() >= deadline:
            for n in remaining:
                _append(events, event="end", node=n, status="timeout",
                        reason="whole-run time limit (launcher.run_timeout_s) reached before it ran")
            break
        n_before = len(read_events(events))
        pos_before = events.stat().st_size if events.exists() else 0
        argv = pytest_argv(list(unit["argv"]) + [str(Path(unit["corpus_root"]) / n) for n in remaining + takeable],
                           unit_dir)
        _append(events, event="launch", nodes=len(remaining), host=socket.gethostname(), job_id=_job_id())
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"\n==== zlbench: launching pytest over {len(remaining)} node(s)\n")
            out.flush()
            proc = subprocess.Popen(argv, cwd=unit_dir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, preexec_fn=_die_with_parent)
            killed_for = _watch(proc, events, pos_before, node_timeout, deadline)
        # When the process was gone (after session_end: the interpreter's and device's teardown).
        _append(events, event="exited", returncode=proc.returncode, killed_for=killed_for)
        new = read_events(events)[n_before:]
        started = [e for e in new if e.get("event") == "start"]
        ended_items = {e["node"] for e in new if e.get("event") == "end"}
        ended = {base_node(n) for n in ended_items}
        in_flight = started[-1]["node"] if started and started[-1]["node"] not in ended_items else None
        setup_error = next((e["reason"] for e in new if e.get("event") == "setup_error"), None)
        collect_errors = [e for e in new if e.get("event") == "collect_error"]
        errored = {n for n in remaining + takeable
                   if any(n.startswith(c.get("nodeid") or "\0") for c in collect_errors)}
        # Others' nodes this process could not take (their file fails to import, or pytest went
        # through its whole list without running them) are their own unit's to account for.
        session_done = any(e.get("event") == "session_end" for e in new)
        given_up.update(n for n in takeable if n in errored or (session_done and owner(unit["claims_dir"], n) is None))
        # What this unit answers for now: others may have claimed some of its nodes meanwhile.
        remaining = [n for n in remaining + takeable if ours(n)]

        if setup_error:
            for n in remaining:
                if n not in ended:
                    _append(events, event="end", node=n, status="fatal", reason=setup_error)
            break
        if in_flight is not None and killed_for is None and proc.returncode == -signal.SIGTERM:
            # Terminated from outside (scancel, preemption, a user's kill): not the node's fault.
            # Record it as resumable and stop: the job itself is going away.
            _append(events, event="end", node=in_flight, op=started[-1].get("op"), status="crashed",
                    resumable=True, reason="terminated by SIGTERM (job cancelled or preempted); "
                                           "resume to measure it")
            raise Terminated(f"unit {unit['unit_id']}: the benchmark process got SIGTERM")
        if in_flight is not None:
            node = base_node(in_flight)
            poison = next((e for e in new if e.get("event") == "poison" and
                           base_node(e.get("node") or "") == node), None)
            if killed_for == "node_timeout":
                status, reason = "timeout", f"exceeded launcher.node_timeout_s={node_timeout:g}s"
            elif killed_for == "deadline":
                status, reason = "timeout", "whole-run time limit (launcher.run_timeout_s) reached"
            elif poison is not None:
                status, reason = "poisoned", f"capture poisoned the device context: {poison['reason']}"
            else:
                status, reason = "crashed", f"{_exit_reason(proc.returncode)}; log tail: {_tail(log)}"
            crashes[node] = crashes.get(node, 0) + 1
            if status == "crashed" and crashes[node] <= int(unit.get("crash_retries", 0)):
                _append(events, event="retry", node=node, reason=reason)
            else:
                _append(events, event="end", node=in_flight, op=started[-1].get("op"),
                        status=status, reason=reason,
                        wall_s=round(time.time() - started[-1]["t"], 3))
            continue
        # The process ended between nodes. Nodes it never started: collection errors, or a
        # process that died before its first node.
        never = [n for n in remaining if n not in ended and n not in {base_node(s["node"]) for s in started}]
        if not never:
            continue
        for n in never:
            err = next((c for c in collect_errors if n.startswith(c.get("nodeid") or "\0")), None)
            if err is not None:
                _append(events, event="end", node=n, status="failed",
                        reason=f"collection error: {err.get('reason')}")
        if errored:
            # pytest refuses the whole argv when a named node's file fails to import: the other
            # nodes go on in a fresh process.
            continue
        if ended_items and proc.returncode not in (0, 1):
            # It left between nodes (e.g. after a device fault made its context unusable): the
            # rest goes on in a fresh process. Progress was made, so this cannot loop forever.
            continue
        if killed_for == "deadline" and not started:
            # zlbench itself killed the process before its first node (still importing the corpus):
            # the run's time limit was reached, nothing crashed.
            for n in never:
                _append(events, event="end", node=n, status="timeout",
                        reason="whole-run time limit (launcher.run_timeout_s) reached before it ran")
            continue
        for n in never:
            if not started:
                _append(events, event="end", node=n, status="crashed",
                        reason=f"{_exit_reason(proc.returncode)} before running any node; log tail: {_tail(log)}")
            else:
                _append(events, event="end", node=n, status="failed",
                        reason="not collected by pytest (deselected or missing)")
    return status_counts(read_events(events), [n for n in unit["nodes"] + pool if ours(n)])


def _job_id() -> str:
    """Slurm array task (<array job>_<task>), plain Slurm job, or the local submitit job."""
    env = os.environ
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"
    return env.get("SLURM_JOB_ID") or env.get("SUBMITIT_LOCAL_JOB_ID") or ""


def _die_with_parent() -> None:
    """In the benchmark process, before exec: get SIGKILL when the worker dies (Linux), so a killed
    run leaves no orphan measuring on a device that a resumed run is about to use."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _args_file_supported() -> bool:
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("pytest").split(".")[:2])
    except Exception:
        return False
    return (major, minor) >= (8, 2)


def pytest_argv(argv: List[str], unit_dir: Path) -> List[str]:
    """Keep `python -m pytest -p ...` on the command line and put the rest (paths, options, node
    ids) into an @args file. FlagGems names its result log after the command-line arguments, and
    hundreds of absolute node ids overflow a file name (OSError: File name too long)."""
    if not _args_file_supported():
        return argv
    head, rest = argv[:3], argv[3:]
    keep, spill = [], []
    i = 0
    while i < len(rest):
        if rest[i] == "-p" and i + 1 < len(rest):
            keep += rest[i:i + 2]
            i += 2
        else:
            spill.append(rest[i])
            i += 1
    (unit_dir / "pytest_args.txt").write_text("\n".join(spill) + "\n", encoding="utf-8")
    return head + keep + ["@pytest_args.txt"]


def _new_events(events: Path, pos: int):
    """Complete event lines appended since byte `pos`, and the position after them (a torn last
    line is left for the next read). The watch loop polls often: it must not re-read the file."""
    try:
        with open(events, "rb") as f:
            f.seek(pos)
            chunk = f.read()
    except OSError:
        return [], pos
    end = chunk.rfind(b"\n") + 1
    out = []
    for line in chunk[:end].splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out, pos + end


def _watch(proc: subprocess.Popen, events: Path, pos: int, node_timeout: float,
           deadline: Optional[float]) -> Optional[str]:
    """Wait for the process; kill its process group on a node timeout or the run deadline."""
    current = None
    since = time.time()
    while proc.poll() is None:
        time.sleep(POLL_S)
        new, pos = _new_events(events, pos)
        for e in new:
            if e.get("event") == "start":
                current, since = e["node"], e["t"]
            elif e.get("event") == "end":
                current = None
        now = time.time()
        reason = None
        if current is not None and now - since > node_timeout:
            reason = "node_timeout"
        elif deadline is not None and now > deadline:
            reason = "deadline"
        if reason:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            return reason
    return None


def status_counts(events: Sequence[dict], nodes: Sequence[str]) -> Dict[str, int]:
    done = finished_nodes(events)
    counts: Dict[str, int] = {}
    for n in nodes:
        s = done.get(n, {}).get("status", "missing")
        counts[s] = counts.get(s, 0) + 1
    return counts


def run_queue(units: List[dict], run_dir: str, deadline: Optional[float] = None,
              extra_env: Optional[Dict[str, str]] = None) -> Dict[str, Dict[str, int]]:
    """The job function both launchers run: a device's units, in order."""
    return {u["unit_id"]: run_unit(u, run_dir, deadline, extra_env) for u in units}
