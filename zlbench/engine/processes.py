"""The benchmark processes zlbench starts (plain units and resident A/B sides alike): their
environment and command line, their tie to the worker, how they are killed, what their log says."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
from pathlib import Path
from typing import Dict, List, Optional

from zlbench.results import events as ev

# How often a watcher reads the events a benchmark process appends (s).
POLL_S = 0.2
# A start-up (torch, Triton and the corpus imported on a busy machine) may take longer than a short
# test time limit allows a test: where no test is in flight the limit is never below this.
IDLE_FLOOR_S = 30.0


def idle_limit(node_timeout: float) -> float:
    return max(node_timeout, IDLE_FLOOR_S)


def process_env(unit: dict, extra_env: Dict[str, Optional[str]], cfg_path: Path) -> Dict[str, str]:
    env = dict(os.environ)
    # The launcher may have set visibility keys of its own (submitit's local executor blanks
    # CUDA_VISIBLE_DEVICES): restore the orchestrator's values (None = unset), then pin the unit.
    for key, value in extra_env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    inherited_path = env.get("PYTHONPATH")
    env.update(unit["env"])
    if inherited_path and "PYTHONPATH" in unit["env"]:
        # The corpus' paths first, then whatever made zlbench itself importable here.
        env["PYTHONPATH"] = unit["env"]["PYTHONPATH"] + os.pathsep + inherited_path
    env[ev.CONFIG_ENV] = str(cfg_path)
    return env


def job_id() -> str:
    """The submitit job running this worker: Slurm array task, Slurm job, or local job."""
    try:
        import submitit

        return str(submitit.JobEnvironment().job_id)
    except RuntimeError:  # not inside a submitit job (a worker run by hand)
        return ""


# The signals the orchestrator answers by stopping the run (Ctrl-C, kill, a closed terminal or
# SSH session). Blocked around process starts so none is lost; unblocked in every child.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PR_SET_PDEATHSIG = 1


def die_with_parent(parent: Optional[int] = None) -> None:
    """In a child before exec (or first thing in a process): get SIGKILL when the parent dies
    (Linux), so a killed run leaves no orphan measuring on a device that a resumed run is about to
    use. `parent`: the pid the child was started by; if it is already gone, die now (the signal
    would never come)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        return
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)


def child_of(parent: int):
    """A preexec_fn for a process this one starts with INTERRUPTS blocked: it dies with `parent`
    and gets the signals unblocked again (a blocked mask is inherited through exec)."""
    def preexec() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, INTERRUPTS)
        die_with_parent(parent)
    return preexec


def descendants(pid: int) -> List[int]:
    """Every live process below pid."""
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


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


def wait_exit(proc: subprocess.Popen, timeout: float) -> bool:
    """Whether the process has exited, waiting for it at most `timeout` s: woken by its exit at
    once (a pidfd) where the system has them, else Popen.wait's own back-off (<= 50 ms late)."""
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)  # not reaped yet (only its Popen reaps it): still this process
    except (AttributeError, OSError):
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        return proc.poll() is not None
    try:
        select.select([fd], [], [], timeout)
    finally:
        os.close(fd)
    return proc.poll() is not None


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


# How the line starts that a worker writes into a process log before each benchmark process it starts.
LAUNCH_BANNER = "==== zlbench:"


def log_tail(path: Path, n: int = 6) -> str:
    """What the end of a benchmark process' log says of how it ended: its last n lines, or where it
    ends in a fault handler's dump (an abort or a segfault: the frames, then the list of extension
    modules, which say nothing), the fatal error, the line before it and the innermost frames."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    # this launch's own lines: the log holds every launch of the unit, each after its banner
    start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith(LAUNCH_BANNER)), -1)
    lines = lines[start + 1:]
    fatal = next((i for i in range(len(lines) - 1, max(-1, len(lines) - 400), -1)
                  if "Fatal Python error:" in lines[i]), None)
    if fatal is None:
        # The exception it died of first (pytest's `E   ModuleNotFoundError: ...` ends a conftest's
        # ImportError): a table cuts a long reason, and its end is what says why.
        # Near the end only: an earlier test's failure (E   AssertionError) is not what ended it.
        error = next((i for i in range(len(lines) - 1, max(-1, len(lines) - 12), -1) if _ERROR.match(lines[i])), None)
        tail = [l.strip() for i, l in enumerate(lines[-n:], len(lines) - len(lines[-n:])) if l.strip() and i != error]
        head = [next(filter(None, _ERROR.match(lines[error]).group("error", "usage"))).strip()] \
            if error is not None else []
        return (" | ".join(head + tail)[:600] if head else " | ".join(tail)[-600:])
    before = [l.strip() for l in lines[max(0, fatal - 3):fatal]
              if l.strip() and not l.startswith("====") and l.strip(".") and "most recent call" not in l]
    # the thread that died: the handler lists other threads' frames first
    current = next((i for i in range(fatal + 1, min(len(lines), fatal + 400))
                    if lines[i].lstrip().startswith("Current thread")), fatal)
    frames = []
    for line in lines[current + 1:current + 40]:
        if not line.strip().startswith("File "):
            break
        frames.append(_frame(line))
    frames = frames[:4]
    parts = before[-1:] + [lines[fatal][lines[fatal].index("Fatal Python error:"):].strip()]
    return " | ".join(parts + (["in " + " < ".join(frames)] if frames else []))[:600]


# A line that names the exception a process died of: `ValueError: ...`, pytest's `E   ImportError: ...`.
_ERROR = re.compile(r"^(?:E\s+)?(?P<error>(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Exit|Interrupt)\b:?.*)$"
                    # argparse's usage error (pytest's, or a corpus conftest's option), after its banner
                    r"|^(?P<usage>[\w. -]*: error: .*)$")


def _frame(line: str) -> str:
    """'File "/x/y/triton/testing.py", line 111 in do_bench_cudagraph' -> 'triton/testing.py:111 do_bench_cudagraph'."""
    m = re.match(r'\s*File "([^"]+)", line (\d+) in (.+)', line)
    if not m:
        return line.strip()
    return f"{'/'.join(m.group(1).split('/')[-2:])}:{m.group(2)} {m.group(3).strip()}"
