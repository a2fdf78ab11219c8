"""One A/B side's resident benchmark process on one device (zlbench/engine/device_ab.py runs them):
started lazily with its side's env and caches, fed one node at a time through plugins/serve.py,
restarted after a crash, a timeout or a respawn, each start tuning afresh where asked."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from zlbench.engine.locks import held_fds
from zlbench.engine.processes import (LAUNCH_BANNER, POLL_S, die_with_parent, idle_limit, kill_group, process_env,
                                     pytest_argv)
from zlbench.results import events as ev

SERVE_PLUGIN = "zlbench.plugins.serve"
QUIT_GRACE_S = 10.0


class SideProcess:
    """One side's resident benchmark process on one device (started lazily, restarted after a
    crash, a timeout or a respawn)."""

    def __init__(self, side: str, template: Mapping, run_dir: Path, nodes: Sequence[str],
                 extra_env: Mapping[str, Optional[str]], prober: bool = False, retune: bool = False, index: int = 0):
        self.side, self.nodes, self.extra_env, self.prober = side, list(nodes), extra_env, prober
        self.index = index  # the side's position: names its caches where the plan gave it none
        self.retune = retune  # every start tunes afresh (a FlagGems tuning cache of its own)
        self.dir = Path(run_dir) / "resident" / f"d{template['device']}.{side}{'.probe' if prober else ''}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.log = self.dir / "pytest.log"
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self.seq = 0
        self.commands: Optional[Path] = None
        self.broken: Optional[str] = None  # why it cannot start (then its nodes end at once)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, unit: Mapping, events: Optional[Path] = None) -> None:
        """A fresh process whose start-up events (session_start, process facts, collection errors)
        go to `unit`, the first one it serves (a prober's to `events`, its probe file)."""
        self.starts += 1
        self.commands = self.dir / f"commands.{self.starts}.jsonl"
        self.commands.write_text("", encoding="utf-8")
        cfg_path = self.dir / f"plugin_config.{self.starts}.json"
        plugin_cfg = {**unit["plugin_config"], "unit": unit["unit_id"],
                      "events": str(events or ev.events_path(self._run_dir, unit["unit_id"])),
                      "serve": str(self.commands)}
        if self.prober:
            plugin_cfg["probe_process"] = True
        tuning = self.tuning_cache(unit)
        if tuning is not None:
            unit = {**unit, "env": {**unit["env"], "FLAGGEMS_CACHE_DIR": str(tuning)}}
        cfg_path.write_text(json.dumps(plugin_cfg, indent=1))
        root = Path(unit["corpus_root"])
        argv = list(unit["argv"]) + ["-p", SERVE_PLUGIN] + [str(root / n) for n in self.nodes]
        argv = pytest_argv(argv, self.dir)
        with open(self.log, "a", encoding="utf-8") as out:
            out.write(f"\n{LAUNCH_BANNER} resident {'prober' if self.prober else 'process'} {self.starts} of side "
                      f"{self.side} (tuning cache {unit['env'].get('FLAGGEMS_CACHE_DIR')})\n")
            out.flush()
            self.proc = subprocess.Popen(argv, cwd=self.dir, env=process_env(unit, dict(self.extra_env), cfg_path),
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=functools.partial(die_with_parent, os.getpid()),
                                         pass_fds=held_fds())
        self.seq = 0

    def tuning_cache(self, unit: Mapping) -> Optional[Path]:
        """This start's FlagGems cache where it is not the side's own (None): a prober's scratch one
        (its untimed tuning picks stay there), or with `retune` a fresh one per start (FlagGems keeps
        its picks on disk: a respawned process would only read them back). Beside the side's own,
        named as long, since liveness masks the cache path in kernels' debug info by length
        (zlbench/ab/fingerprints.py)."""
        own = unit["env"].get("FLAGGEMS_CACHE_DIR")
        if self.prober:
            if not own:
                return self.dir / "flaggems"
            name = Path(own).name
            return Path(own).parent / ("probe" + "_" * len(name))[:len(name)]
        if self.retune:  # isolate_caches or not: each start's picks are its own
            side_dir = Path(own).parent if own else self._run_dir / "cache" / f"side{self.index}"
            return side_dir / f"tune{self.starts:04d}"  # 8 characters, as 'flaggems'
        return None

    @property
    def _run_dir(self) -> Path:
        return self.dir.parent.parent

    def send(self, unit: Mapping, node: str, events: Optional[Path] = None, probe: bool = False) -> int:
        self.seq += 1
        line = {"seq": self.seq, "node": node, "unit": unit["unit_id"], "probe": probe,
                "events": str(events or ev.events_path(self._run_dir, unit["unit_id"]))}
        with open(self.commands, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        return self.seq

    def stop(self) -> None:
        """Quit between commands (the session ends normally); killed when it does not."""
        if not self.alive():
            self.proc = None
            return
        with open(self.commands, "a", encoding="utf-8") as f:
            f.write(json.dumps({"quit": True}) + "\n")
        try:
            self.proc.wait(QUIT_GRACE_S)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            kill_group(self.proc)


def wait_served(proc: SideProcess, seq: int, events: Path, pos: int, node_timeout: float,
                deadline: Optional[float]) -> Tuple[bool, Optional[str]]:
    """(served, killed_for): the command's `served` event, or the process' end (killed_for says
    why zlbench killed it, as plain_worker._watch does: node_timeout | startup | between_nodes |
    deadline; None when it died by itself). A test in flight has launcher.node_timeout_s; with none in
    flight (a start-up: imports, collection) the limit is never below IDLE_FLOOR_S, as in a plain run."""
    current, since, started_any = None, time.time(), False
    while True:
        new, pos = ev.read_new_events(events, pos)
        for e in new:
            if e.get("event") == "served" and e.get("seq") == seq and e.get("pid") == proc.proc.pid:
                return True, None
            if e.get("event") == "start":
                current, since, started_any = e["node"], e["t"], True
            elif e.get("event") == "end":
                current, since = None, time.time()
        if not proc.alive():
            new, pos = ev.read_new_events(events, pos)
            served = any(e.get("event") == "served" and e.get("seq") == seq for e in new)
            return served, None
        now = time.time()
        reason = None
        if current is not None and now - since > node_timeout:
            reason = "node_timeout"
        elif current is None and now - since > idle_limit(node_timeout):
            # its first command (seq 1) before any test of it: the process is still starting
            reason = "startup" if seq == 1 and not started_any else "between_nodes"
        elif deadline is not None and now > deadline:
            reason = "deadline"
        if reason:
            proc.kill()
            return False, reason
        time.sleep(POLL_S / 4)
