"""Locks that keep two runs from measuring over each other: one on a run dir (a second run into a
live run dir is refused) and one per accelerator device (held by a benchmark process for as long as
it runs, so two runs never share a GPU). Both are flock(2) locks through filelock: the kernel frees
them when their holder dies, so a killed run's lock is taken over, never stale. Beside each lock a
small JSON file names the holder for the message."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from filelock import FileLock, Timeout

from zlbench.errors import UsageError

# Where device locks live (one machine's devices, shared by every run on it).
LOCK_DIR_ENV = "ZLBENCH_LOCK_DIR"


def _holder() -> dict:
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join(sys.argv)[:300]}


def _describe(path: Path) -> str:
    try:
        h = json.loads(path.read_text(encoding="utf-8"))
        return f"pid {h['pid']} on {h['host']}, started {h['started']}: {h.get('command', '')}"
    except (OSError, ValueError, KeyError):
        return "holder unknown"


class _HeldLock:
    def __init__(self, path: Path):
        self.lock = FileLock(str(path))
        self.holder = path.with_name(path.name + ".holder.json")

    def try_acquire(self) -> bool:
        try:
            self.lock.acquire(timeout=0)
        except Timeout:
            return False
        self.holder.write_text(json.dumps(_holder()), encoding="utf-8")
        return True

    def release(self) -> None:
        try:
            self.holder.unlink()
        except OSError:
            pass
        self.lock.release()


class RunDirLock:
    """Held by the orchestrator for the whole run: a second run into the same dir is refused."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self._lock = _HeldLock(run_dir / ".zlbench.lock")

    def __enter__(self) -> "RunDirLock":
        stale = self._lock.holder.exists()
        previous = _describe(self._lock.holder) if stale else ""
        if not self._lock.try_acquire():
            raise UsageError(
                f"{self.run_dir} is in use by a live zlbench run ({_describe(self._lock.holder)}). Two runs "
                "in one run dir would measure every node twice at once. Fix: wait for it to end, or give "
                "this run its own hydra.run.dir=...")
        if stale:
            print(f"[zlbench] taking over {self.run_dir} from a run that ended without releasing it "
                  f"({previous})", file=sys.stderr)
        return self

    def __exit__(self, *exc) -> None:
        self._lock.release()


def device_lock_path(key: str) -> Path:
    folder = Path(os.environ.get(LOCK_DIR_ENV) or "/tmp/zlbench-device-locks")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{key.replace('/', '_').replace(':', '_')}.lock"


class DeviceLock:
    """Held around each benchmark process: waits while another run's process holds the device."""

    def __init__(self, key: Optional[str], on_wait=None):
        self._lock = _HeldLock(device_lock_path(key)) if key else None
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
        probe = _HeldLock(device_lock_path(key))
        if not probe.try_acquire():
            raise UsageError(f"device {key} is in use by another zlbench run ({_describe(probe.holder)}): "
                             "two runs on one device measure each other. Fix: wait for it to end, or "
                             "devices=[...] to use others.")
        probe.release()
