"""Locks that keep two runs from measuring over each other: one on a run dir (a second run into a
live run dir is refused) and one per accelerator device (held by a benchmark process for as long as
it runs, so two runs never share a GPU). Both are flock(2) locks through filelock: the kernel frees
them when their holder dies, so a killed run's lock is taken over, never stale. Beside each lock a
small JSON file names the holder for the message.

A run dir has a second lock that every worker of the run holds shared (and hands on to its
benchmark processes), so the run dir stays locked while any process of the run lives, not just its
orchestrator: a resume right after the orchestrator was killed waits for the rest of the run to die
(they die with it) instead of measuring next to it."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence

from filelock import FileLock, Timeout

from zlbench.errors import UsageError
from zlbench.results.rundir import RUN_LOCK_FILE, describe_holder as _describe, holder_record

# Where device locks live (one machine's devices, shared by every run on it).
LOCK_DIR_ENV = "ZLBENCH_LOCK_DIR"
DEFAULT_LOCK_DIR = "/tmp/zlbench-device-locks"
SHARED_DIR_MODE = 0o1777
SHARED_FILE_MODE = 0o666
# Held shared by every worker of a run, probed exclusively by a run that starts in the dir.
WORKERS_LOCK = ".zlbench.workers.lock"
# How long a run waits for the processes of an earlier run in its dir to end (they die with their
# orchestrator within moments; a benchmark process tearing down a device context takes longer).
WAIT_ENV = "ZLBENCH_RUN_DIR_WAIT_S"
WAIT_S = 60.0
# Set in the environment of every process of a local run: names them in messages.
RUN_DIR_ENV = "ZLBENCH_RUN_DIR"


def _holder() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)[:300]}


class _HeldLock:
    """shared: a lock every user of the machine takes (a device's), so its files are theirs to write."""

    def __init__(self, path: Path, shared: bool = False):
        self.lock = FileLock(str(path), mode=SHARED_FILE_MODE) if shared else FileLock(str(path))
        self.holder = holder_record(path)
        self.shared = shared

    def try_acquire(self) -> bool:
        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            return False
        text = json.dumps(_holder()).encode()
        if not self.shared:
            self.holder.write_bytes(text)
            return True
        # Not O_CREAT where it exists: in a sticky world-writable dir, Linux (protected_regular)
        # refuses that on another user's file even where its mode lets everyone write it.
        made = not self.holder.exists()
        fd = os.open(self.holder, os.O_WRONLY | os.O_TRUNC | (os.O_CREAT if made else 0), SHARED_FILE_MODE)
        try:
            if made:
                os.fchmod(fd, SHARED_FILE_MODE)  # not narrowed by the umask
            os.write(fd, text)
        finally:
            os.close(fd)
        return True

    def release(self) -> None:
        try:
            self.holder.unlink()
        except OSError:
            pass
        self.lock.release()


class RunDirLock:
    """Held by the orchestrator for the whole run: a second run into the same dir is refused, and
    a run waits (then is refused) while processes of an earlier run in the dir still live."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._lock = _HeldLock(run_dir / RUN_LOCK_FILE)

    def __enter__(self) -> "RunDirLock":
        stale = self._lock.holder.exists()
        previous = _describe(self._lock.holder) if stale else ""
        if not self._lock.try_acquire():
            raise UsageError(
                f"{self.run_dir} is in use by a live zlbench run ({_describe(self._lock.holder)}). Two runs "
                "in one run dir would measure every node twice at once. Fix: wait for it to end, or give "
                "this run its own hydra.run.dir=...")
        try:
            self._wait_for_workers()
        except BaseException:
            self._lock.release()
            raise
        if stale:
            print(f"[zlbench] taking over {self.run_dir} from a run that ended without releasing it "
                  f"({previous})", file=sys.stderr)
        return self

    def _wait_for_workers(self) -> None:
        try:
            fd = os.open(self.run_dir / WORKERS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return  # an unwritable run dir: said clearly when the run writes its files
        try:
            if _try_flock(fd, exclusive=True):
                return
            wait_s = float(os.environ.get(WAIT_ENV) or WAIT_S)
            print(f"[zlbench] waiting up to {wait_s:g} s for the processes of an earlier run in {self.run_dir} "
                  f"to end: {_describe_processes(self.run_dir)}", file=sys.stderr, flush=True)
            deadline = time.time() + wait_s
            while time.time() < deadline:
                time.sleep(0.2)
                if _try_flock(fd, exclusive=True):
                    return
            raise UsageError(
                f"{self.run_dir} is still in use by processes of an earlier run "
                f"({_describe_processes(self.run_dir)}); measuring next to them would record nodes twice. "
                f"Fix: wait for them to end, or end them (kill <pid>), then run again.")
        finally:
            os.close(fd)  # drops the probe's lock

    def __exit__(self, *exc) -> None:
        self._lock.release()


def _try_flock(fd: int, exclusive: bool) -> bool:
    # fcntl directly, not filelock: filelock has no shared mode, and the descriptor must be
    # handed on to child processes so that they hold the same lock.
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def run_processes(run_dir: Path) -> List[int]:
    """Live processes of a local run in run_dir (this one excluded), found by their environment."""
    import psutil

    want, out = str(Path(run_dir).resolve()), []
    for p in psutil.process_iter():
        try:
            if p.pid != os.getpid() and p.environ().get(RUN_DIR_ENV) == want:
                out.append(p.pid)
        except (psutil.Error, OSError):
            continue  # gone, or another user's
    return out


def _describe_processes(run_dir: Path) -> str:
    pids = run_processes(run_dir)
    return f"pid {', '.join(map(str, pids))}" if pids else "pids unknown (another host, or another user's)"


# run dir -> the descriptor this process holds WORKERS_LOCK on (shared) while it works in it.
_held: Dict[str, int] = {}


@contextlib.contextmanager
def worker_of(run_dir: str) -> Iterator[None]:
    """Around a worker's job: hold the run dir's workers lock shared. Benchmark processes started
    with pass_fds=held_fds() hold it too, for as long as they live."""
    import fcntl

    key = str(Path(run_dir).resolve())
    try:
        fd = os.open(Path(key) / WORKERS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        fd = None  # the run reports the unwritable dir on its own
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:  # a file system without flock: no lock, as before
            pass
        _held[key] = fd
    try:
        yield
    finally:
        if fd is not None:
            _held.pop(key, None)
            os.close(fd)


def held_fds() -> tuple:
    """The descriptors a benchmark process inherits so that it holds the run dir's lock too."""
    return tuple(_held.values())


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or DEFAULT_LOCK_DIR)


def device_lock_path(key: str) -> Path:
    """The lock of a device, in a folder every user's runs share (two users' runs on one GPU measure
    each other as two runs of one user would): made sticky and world-writable, as /tmp is."""
    folder = lock_dir()
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        try:
            os.chmod(folder, SHARED_DIR_MODE)
        except OSError:  # made by another user meanwhile
            pass
    return folder / f"{key.replace('/', '_').replace(':', '_')}.lock"


class DeviceLock:
    """Held around each benchmark process: waits while another run's process holds the device."""

    def __init__(self, key: Optional[str], on_wait=None):
        self._lock = _HeldLock(device_lock_path(key), shared=True) if key else None
        self.on_wait = on_wait

    def __enter__(self) -> "DeviceLock":
        if self._lock is None:
            return self
        if not self._lock.try_acquire():
            if self.on_wait:
                self.on_wait(_describe(self._lock.holder))
            while not self._lock.try_acquire():
                time.sleep(0.5)
        return self

    def __exit__(self, *exc) -> None:
        if self._lock is not None:
            self._lock.release()


def check_devices_free(units: Sequence) -> None:
    """Before a run starts: refuse it when another run holds one of its devices."""
    for key in sorted({u.device_lock for u in units if u.device_lock}):
        try:
            probe = _HeldLock(device_lock_path(key), shared=True)
            free = probe.try_acquire()
        except OSError as e:  # another user's lock files, a folder that cannot be written
            folder = lock_dir()
            raise UsageError(f"cannot take the lock of device {key} in {folder}: {e.strerror or e} "
                             f"({getattr(e, 'filename', None) or folder}). Fix: {LOCK_DIR_ENV}=<a folder every user "
                             f"of this machine can write> (or `chmod 1777 {folder}` and `chmod 666` its files), or "
                             "launcher.device_lock=false.") from None
        if not free:
            raise UsageError(f"device {key} is in use by another zlbench run ({_describe(probe.holder)}): "
                             "two runs on one device measure each other. Fix: wait for it to end, or "
                             "devices=[...] to use others.")
        probe.release()
