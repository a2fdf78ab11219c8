"""One run, start to end: compose -> plan -> identity -> launch -> watch -> finish (report)."""

from __future__ import annotations

import contextlib
import logging

import json
import os
import shlex
import signal
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from zlbench.backends import get_backend
from zlbench.backends.registry import backend_names, detect
from zlbench.config import output_dir
from zlbench.errors import UsageError
from zlbench.exitcodes import Exit
from zlbench.planning.identity import build_identity, identity_hash
from zlbench.engine.locks import RunDirLock, check_devices_free
from zlbench.engine.more_processes import more_wanted
from zlbench.engine.spares import Waiting, beating, hand_over, spare_queues, with_spares
from zlbench.engine.processes import INTERRUPTS
from zlbench.planning.plan import Plan, make_plan, more_shapes_path, resolve_timer
from zlbench.planning.switches import set_apart
from zlbench.planning.units import WorkUnit
from zlbench.results.rundir import (IDENTITY_FILE, atomic_write, load_plan, resume_command, unfinished_nodes,
                                    read_identity, write_identity, write_placeholders, write_plan)
from zlbench.results.tables import wall_times
from zlbench.config.schema import timer_settings
from zlbench.config.validate import validate_config

log = logging.getLogger("zlbench")

# After a Ctrl-C, how long the jobs get to stop before the tables are written anyway.
STOP_GRACE_S = 5.0


def resolved_config(cfg: DictConfig) -> Dict[str, Any]:
    try:
        return OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True,  # type: ignore[return-value]
                                      enum_to_str=True)
    except OmegaConfBaseException as e:
        msg = str(e).splitlines()[0]
        key = getattr(e, "full_key", None)
        hint = " Fix: shape.file=<path to a shape-record file>." if key == "shape.file" else ""
        raise UsageError(f"config value {key or ''} is not set or cannot be resolved: {msg}.{hint}")


def corpus_root(cfg: Mapping[str, Any]) -> Path:
    corpus = cfg["corpus"]
    if corpus["name"] == "demo" and not corpus.get("root"):
        # Not a Python package on purpose: pytest must import it as `benchmark`, as FlagGems' is.
        return Path(__file__).resolve().parents[1] / "demo_corpus"
    root = corpus.get("root")
    if not root:
        raise UsageError(
            f"corpus={corpus['name']} needs its checkout: set corpus.root=/path/to/FlagGems or the "
            "environment variable FLAGGEMS_ROOT."
        )
    path = Path(str(root)).expanduser().resolve()
    if not path.is_dir():
        what = "is a file, not a folder" if path.exists() else "does not exist"
        fix = ("the demo corpus needs no root: drop corpus.root; for FlagGems, corpus=flaggems corpus.root=PATH"
               if corpus["name"] == "demo" else "corpus.root=PATH where PATH is a checkout of the corpus (for "
               "FlagGems, the folder holding src/, benchmark/ and pytest.ini), or the environment variable "
               "FLAGGEMS_ROOT")
        raise UsageError(f"corpus.root={root} {what}. Fix: {fix}.")
    return path


def make_backend(cfg: Mapping[str, Any]):
    name = cfg["backend"]["name"]
    if name == "auto":
        name = detect()
    settings = {"slots": cfg["backend"].get("slots")} if name == "cpu" else {}
    return get_backend(name, **settings)


def visibility_snapshot() -> Dict[str, Optional[str]]:
    """This process' values of every backend's visibility keys (None = unset), restored in jobs."""
    keys = set()
    for name in backend_names():
        b = get_backend(name)
        if b.visibility_env:
            keys.add(b.visibility_env)
        keys.update(b.extra_visibility_envs)
    return {k: os.environ.get(k) for k in sorted(keys)}


def prepare(cfg: DictConfig, run_dir: Path, provenance: Mapping[str, Any]):
    """Everything before execution; raises UsageError on bad input, writes nothing."""
    resolved = resolved_config(cfg)
    validate_config(resolved)
    backend = make_backend(resolved)
    if resolved["launcher"]["name"] == "slurm":
        # Devices are Slurm's to allocate: plan one queue per array task, pinned at run time.
        from zlbench.backends import DeviceInfo

        devices = [DeviceInfo(i, f"slurm task {i}") for i in range(max(1, int(resolved["launcher"].get("tasks") or 1)))]
    else:
        devices = backend.inherited_visible(backend.enumerate_devices())
    # timer=auto is what the backend's timer does, with that timer's settings (recorded so).
    asked = resolved["timer"].get("name")
    resolved["timer"] = timer_settings(resolved["timer"], resolve_timer(asked, backend))
    root = corpus_root(resolved)
    costs = wall_times(resolved.get("cost_from"), resolved.get("resume"))
    if resolved.get("cost_from") and not (Path(resolved["cost_from"]) / "ops_status.csv").is_file():
        raise UsageError(f"cost_from={resolved['cost_from']} holds no ops_status.csv (not a zlbench run dir with "
                         "its tables): no wall times to balance the shards by. Fix: cost_from=<an earlier run "
                         "dir>, or drop cost_from=.")
    plan = make_plan(resolved, backend, devices, root, run_dir, costs)
    identity = build_identity(resolved, plan, backend, provenance)
    return resolved, backend, plan, identity


def check_resume(run_dir: Path, identity: Mapping[str, Any]) -> bool:
    """True when run_dir already holds this run (resume it); error when it holds a run of another identity
    (other settings, or another selection of tests: not the caliber, which leaves the tests out)."""
    path = run_dir / IDENTITY_FILE
    if not path.exists():
        # A run writes its identity before its plan and units: these without it are an earlier run's
        # measurements of unknown settings, which this run would otherwise read as its own.
        held = [p.name for p in (run_dir / "plan.json", run_dir / "units") if p.exists()]
        if held:
            raise UsageError(f"{run_dir} holds an earlier run's {' and '.join(held)} but no {IDENTITY_FILE}: the "
                             "settings its measurements were made with are unknown, and this run would report them "
                             f"as its own. Fix: choose another run dir (hydra.run.dir=...), or restore its "
                             f"{IDENTITY_FILE} and resume it.")
        return False
    old = read_identity(run_dir)  # damaged: named, with its fix
    # Hashed again as this zlbench hashes (results/identity_layout.py): the hash an earlier
    # zlbench wrote beside it may read another layout of the same settings.
    if identity_hash(old) != identity["identity_hash"]:
        from zlbench.results.identity_layout import NOT_HASHED

        # over what the hash reads: another host or fail_on is no difference (NOT_HASHED)
        diff = sorted(k for k in identity if k not in NOT_HASHED and old.get(k) != identity.get(k))
        if diff == ["versions"]:  # the same overrides, other software: the command would not help
            was, now = old.get("versions") or {}, identity.get("versions") or {}
            changed = ", ".join(f"{k} {was.get(k)} -> {now.get(k)}" for k in sorted({*was, *now})
                                if was.get(k) != now.get(k))
            raise UsageError(
                f"{run_dir} was measured with other versions ({changed}); resuming it would mix "
                "measurements of two. Fix: resume it where those versions are installed, or start a new "
                "run dir with these.")
        was_file, now_file = old.get("shape_file") or {}, identity.get("shape_file") or {}
        if diff == ["shape_file"] and was_file.get("path") == now_file.get("path"):  # the file was edited
            raise UsageError(
                f"{run_dir} was measured with another content of its shape file {now_file.get('path')} (sha256 "
                f"{str(was_file.get('sha256'))[:12]} then, {str(now_file.get('sha256'))[:12]} now); resuming it "
                "would mix two shape lists. Fix: restore the file as it was, or start a new run dir.")
        here = set(identity.get("switch_env") or {}) - set(old.get("switch_env") or {})
        apart = _settings_apart(old, identity, diff)
        if len(apart) == 1 and apart[0].startswith("config.launcher.node_timeout_s:") \
                and not _switches_apart(old, identity):
            # No number changes with the limit, but which tests ended as timed out does: and a resume
            # measures only what the run did not get to, never a test that ran past its limit.
            was = (old.get("config") or {}).get("launcher", {}).get("node_timeout_s")
            raise UsageError(
                f"{run_dir} was made with launcher.node_timeout_s={was}, and a resume keeps it: it measures what the "
                "run did not get to, while a test that ran past the limit stays timed out, so another limit would "
                f"judge the run's tests by two. Fix: resume with launcher.node_timeout_s={was} "
                f"({resume_command(run_dir)}), or measure the timed-out ops under a longer limit in a new run dir "
                "(ops=[...] launcher.node_timeout_s=...).")
        raise UsageError(
            f"{run_dir} holds a run made with other settings (its identity differs in: {'; '.join(apart) or 'unknown'}"
            f"{_switches_apart(old, identity)}); resuming it would mix measurements. Fix: resume with the overrides "
            f"and switches it was made with ({resume_command(run_dir, unset=sorted(here))}), or start a new run dir."
        )
    return True


def _settings_apart(old: Mapping[str, Any], new: Mapping[str, Any], diff: List[str]) -> List[str]:
    """What the identities differ in, by setting where a part is a mapping ('config:
    launcher.node_timeout_s 0.3 -> 900.0', not 'config'), read as their hashes read them."""
    from zlbench.report.batch_summary import _changes, _flat
    from zlbench.results.identity_layout import hashed_fields, said_once

    was, now = hashed_fields(old), hashed_fields(new)
    nested = [k for k in diff if isinstance(was.get(k), Mapping) and isinstance(now.get(k), Mapping)]
    fa, fb = ({k: v for key in nested for k, v in _flat(dict(d[key]), key, lists=False).items()} for d in (was, now))
    parts = _changes(fa, fb, said_once(fa, fb, fa.keys() | fb.keys())) or nested
    return parts + [k for k in diff if k not in nested]


def _switches_apart(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Which switch variables this shell sets apart from the run's (a command that sets the run's
    cannot unset one this shell adds)."""
    parts = [f"{k} unset here, {was} in the run" if now is None else
             f"{k}={now} here, {'not set' if was is None else was} in the run"
             for k, (was, now) in set_apart(old, new).items()]
    return f"; its switches: {'; '.join(parts)}" if parts else ""


def plan_record(plan: Plan) -> Dict[str, Any]:
    return {
        "backend": plan.backend, "timer": plan.timer, "rounds": plan.rounds, "processes": plan.processes,
        "max_processes": plan.max_processes,
        "devices": [d.as_dict() for d in plan.devices],
        "nodes": [{"nodeid": n.nodeid, "op": n.op, "file": n.file} for n in plan.nodes],
        "sides": [{"name": s.name, "env": s.env} for s in plan.sides],
        "plugins": plan.plugins, "corpus_root": plan.corpus_root, "schedule": plan.schedule,
        "units": [u.to_dict() for u in plan.units],
    }


def print_plan(plan: Plan, identity: Mapping[str, Any]) -> None:
    print(f"backend={plan.backend} timer={plan.timer} identity={identity['identity_hash'][:16]}")
    print("devices: " + ", ".join(f"{d.index} ({d.name})" for d in plan.devices))
    print(f"plugins: {' '.join(plan.plugins)}")
    print(f"nodes ({len(plan.nodes)}):")
    for n in plan.nodes:
        print(f"  {n.op:24s} {n.nodeid}")
    print(f"units ({len(plan.units)}):")
    for u in plan.units:
        env = " ".join(f"{k}={v}" for k, v in sorted(u.env.items()) if k != "PYTHONPATH")
        print(f"  {u.unit_id}: {len(u.nodes)} node(s) on device {u.device}; {env}")
    if plan.units:
        print("argv: " + " ".join(plan.units[0].argv))
    for note in plan.notes:
        print(f"note: {note}")


def queues_of(units: List[WorkUnit]) -> Dict[int, List[dict]]:
    queues: Dict[int, List[dict]] = {}
    for u in units:
        queues.setdefault(u.device, []).append(u.to_dict())
    return queues


def resume_dir(cfg: DictConfig) -> Optional[Path]:
    wanted = cfg.get("resume")
    if not wanted:
        return None
    path = Path(str(wanted)).expanduser().resolve()
    if not (path / IDENTITY_FILE).is_file():
        raise UsageError(f"resume={wanted}: {path} is not a zlbench run dir (no {IDENTITY_FILE}). Fix: "
                         "pass the run dir printed when that run started, or drop resume= for a new run.")
    return path


def execute(cfg: DictConfig, hydra_run_dir: Path, provenance: Mapping[str, Any]) -> int:
    run_dir = resume_dir(cfg) or hydra_run_dir
    resolved, backend, plan, identity = prepare(cfg, run_dir, provenance)
    if resolved.get("dry_run"):
        print_plan(plan, identity)  # `dry_run=true | head`: zlbench/terminal.py
        output_dir.remove_refused_run_dir(run_dir)
        return Exit.OK
    from zlbench.engine.launchers import get_launcher

    get_launcher(resolved["launcher"]).check()
    run_dir.mkdir(parents=True, exist_ok=True)
    with RunDirLock(run_dir):
        resuming = check_resume(run_dir, identity)
        if resuming:  # the run is dated by its start (summary.md, the store), each resume listed
            old = read_identity(run_dir)
            this = {"at": identity["created"], "overrides": (provenance or {}).get("job_overrides")}
            if identity["provenance"].get("notes"):
                this["notes"] = identity["provenance"]["notes"]
            # The command the run was made with stays its provenance (each resume is listed with its
            # own); only the store it now records itself in is the resume's.
            made = {**(old.get("provenance") or identity["provenance"]),
                    "store_url": identity["provenance"].get("store_url")}
            identity = {**identity, "created": old.get("created", identity["created"]), "provenance": made,
                        "resumed": [*(old.get("resumed") or []), this]}
        if resuming and (run_dir / "plan.json").exists():
            # The same units as before, not a fresh balance (which the earlier wall times now known
            # would change): completion is tracked per unit, so a re-planned unit would measure again.
            plan.units = [WorkUnit.from_dict(u) for u in load_plan(run_dir)["units"]]
        check_devices_free(plan.units)
        try:
            write_identity(run_dir, identity)
            write_plan(run_dir, plan_record(plan))
        except OSError as e:
            raise UsageError(f"cannot write the run dir {run_dir}: {e}. Fix: free space or choose "
                             "hydra.run.dir=<writable path>.")
        rounds = f" rounds={plan.rounds} per side" if len(plan.sides) > 1 or plan.rounds > 1 else ""
        if plan.processes:
            rounds = f" processes={plan.processes} per node"
            if (plan.max_processes or 0) > plan.processes:
                rounds += f" (up to {plan.max_processes} where they disagree)"
        schedule = plan.schedule
        if schedule:
            rounds = (f" rounds: {schedule['min_rounds']} to {plan.rounds} per side (node by node, "
                      "ABBA; a node stops once its rows settle" + ("" if schedule["aa"] or plan.backend == "cpu" else
                                                                  ", or after round 1 when not live") + ")")
        log.info(f"[zlbench] {'resuming' if resuming else 'run'} {run_dir}  backend={plan.backend} "
              f"timer={plan.timer} devices={[d.index for d in plan.devices]} nodes={len(plan.nodes)} "
              f"sides={[s.name for s in plan.sides]}{rounds}")
        for note in plan.notes:
            log.info(f"[zlbench] note: {note}")
        return launch_and_finish(resolved, backend, plan, run_dir)


def launch_and_finish(resolved: Mapping[str, Any], backend, plan: Plan, run_dir: Path) -> int:
    from zlbench.engine.launchers import LaunchContext, get_launcher
    from zlbench.engine.progress import RunState, watch

    launcher_cfg = resolved["launcher"]
    deadline = (time.time() + float(launcher_cfg["run_timeout_s"])) if launcher_cfg.get("run_timeout_s") else None
    launcher = get_launcher(launcher_cfg)
    keys = [k for k in backend.visibility([0]) if k.endswith("_DEVICES") or k.endswith("_SLOT")]
    # Interrupts stay handled until the tables are written: a second Ctrl-C exits at once.
    with Interrupts(launcher, run_dir) as interrupts:
        units, warm = plan.units, None
        # Each device's job starts its first more passes' processes ahead and waits for the choice
        # (engine/spares.py); those it gave up waiting for go as jobs of their own, as the others.
        spares = spare_queues(plan, run_dir, launcher.waits, deadline)
        submit, jobs = units, None
        while units:  # the planned passes, then (a plain run) more processes where they disagree
            if submit:
                queues = queues_of(submit)
                spares = {d: s for d, s in spares.items() if d in queues}  # no planned unit there: no job
                before = len(launcher.jobs)
                with interrupts.deferred():
                    launcher.submit(LaunchContext(run_dir, with_spares(queues, spares), deadline,
                                                  visibility_snapshot(), keys, backend.name != "cpu"))
                if spares:
                    jobs = Waiting(run_dir, sorted(queues), launcher.jobs[before:])
            if not launcher.waits and interrupts.signum is None:
                log.info(f"[zlbench] submitted {len(launcher.jobs)} job(s); gather results later with "
                         f"`zlbench collect {run_dir}`")
                return Exit.OK
            log.debug("[zlbench] phase: jobs submitted")
            if warm is None:
                warm = WarmImports(finish_imports(len(plan.sides) == 2, resolved["store"]["url"], run_dir),
                                   yield_cpu=backend.name == "cpu")
            # Jobs with spares end only after the choice: the passes end when each waits for it.
            watch(RunState(run_dir, [u.to_dict() for u in units]),
                  lambda: launcher.done() or interrupts.given_up() or (jobs is not None and jobs.all_there()),
                  resolved.get("progress", "auto"), launcher.wait)
            log.debug("[zlbench] phase: jobs ended")
            waiting = jobs.waiting() if jobs is not None else []
            with beating(run_dir) if waiting else contextlib.nullcontext():  # jobs wait while it chooses
                warm.finish()  # never two threads importing one module
                units = more_processes(run_dir, plan, resolved["timer"], deadline,
                                       spares=jobs.started(waiting) if waiting else 0) \
                    if interrupts.signum is None else []
                submit = hand_over(run_dir, units, waiting) if waiting else units
            spares, jobs = {}, None
        while not (launcher.done() or interrupts.given_up()):  # jobs told that nothing more is theirs
            launcher.wait(0.5)
        code = wind_up(run_dir, launcher, interrupts, resolved.get("fail_on"))
        interrupts.written = True
        # Recording the run, interrupts stay handled: a second Ctrl-C exits at once, as it says
        # (now that the tables follow the jobs' end at once, it may well come in here).
        from zlbench.store import record_or_warn

        record_or_warn(run_dir, resolved["store"]["url"])
        log.debug("[zlbench] phase: stored")
    return Exit.INTERRUPTED if interrupts.signum else code


def more_processes(run_dir: Path, plan: Plan, timer: Mapping[str, Any], deadline: Optional[float],
                   spares: int = 0) -> List[WorkUnit]:
    """A plain run's later passes for the nodes whose processes disagree (engine/more_processes.py);
    they join plan.json, so a resume runs what is left of them. spares: how many of them have their
    processes started already (engine/spares.py)."""
    choice = more_wanted(run_dir, plan, timer, deadline, spares)
    if choice.line:
        log.info(choice.line)
    if not choice.nodes:
        return []
    # Before any more pass starts (spares read it once their gate opens): the rows each one times.
    atomic_write(more_shapes_path(run_dir), json.dumps({"nodes": choice.shapes}))
    more = plan.more_passes(choice.nodes, plan.processes, choice.last)
    plan.units = plan.units + more
    write_plan(run_dir, plan_record(plan))
    return more


def finish_imports(ab: bool, store_url, run_dir: Path) -> List[str]:
    """What writing the results imports (scipy, matplotlib, an A/B's statistics, the store: about
    1 s on a CPU)."""
    names = ["zlbench.report.run_report", "zlbench.report.plots", "zlbench.report.condensed", "scipy.stats"]
    if ab:
        names += ["zlbench.report.ab"]
    from zlbench.store import run_url

    if run_url(run_dir, store_url):  # the store record_or_warn will write to
        names += ["zlbench.store.db", "zlbench.store.ingest"]
    return names


class WarmImports:
    """Import `names` in a thread while the jobs run, where this process waits anyway, not after
    the last node (benchmarks/post_run.md: -0.85 s after it, +0.4 s on the first process' start on 2
    busy cores). yield_cpu (the CPU backend, whose benchmark processes measure on these cores): at
    the lowest CPU priority (Linux: per thread). finish() stops it between modules and raises its
    priority back where the system lets it: on cores saturated by other work a thread at nice 19 got
    ~1% of a core, and the run's finish waited minutes for it. Any import failure is left for the
    real import to report."""

    def __init__(self, names: Sequence[str], yield_cpu: bool):
        self.names, self.yield_cpu, self.tid = list(names), yield_cpu, None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="zlbench-import", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        self.tid = threading.get_native_id()
        if self.yield_cpu and not self.stop.is_set() and sys.platform.startswith("linux"):
            try:
                os.setpriority(os.PRIO_PROCESS, self.tid, 19)
            except OSError:
                pass
        for name in self.names:
            if self.stop.is_set():
                return
            try:
                __import__(name)
            except Exception:
                pass

    def finish(self) -> None:
        self.stop.set()
        if self.yield_cpu and self.tid is not None and sys.platform.startswith("linux"):
            try:  # the process' own priority (raising one's priority needs CAP_SYS_NICE or RLIMIT_NICE)
                os.setpriority(os.PRIO_PROCESS, self.tid, os.getpriority(os.PRIO_PROCESS, 0))
            except OSError:
                pass
        self.thread.join()


def wind_up(run_dir: Path, launcher, interrupts: "Interrupts", fail_on) -> int:
    """After the jobs: say which ended early, write the tables, and the run's exit code."""
    failed_jobs = [j for j in launcher.collect() if j.error] if not interrupts.signum else []
    for j in failed_jobs:
        log.info(f"[zlbench] job {j.job_id} ended early: {j.error}")
    why = ("interrupted" if interrupts.signum else
           "; ".join(f"job {j.job_id} ended early: {j.error}" for j in failed_jobs))
    try:
        code = finish(run_dir, fail_on, why)
    except OSError as e:
        raise UsageError(
            f"could not write results into {run_dir}: {e}. The events already written are intact "
            f"(tables are replaced atomically, never half-written). Fix: free space, then "
            f"`zlbench collect {run_dir}` to rebuild the tables, or resume={run_dir} to "
            "measure what is missing."
        )
    if interrupts.signum:
        log.info(f"[zlbench] interrupted: the tables hold what finished; resume with "
                 f"`{resume_command(run_dir)}`")
        return Exit.INTERRUPTED
    return code


def finish(run_dir: Path, fail_on=None, why_cut: str = "") -> int:
    """Placeholders for planned nodes that got no end (their job died from outside: say so, never
    drop them), then the tables and reports; returns the run's exit code."""
    from zlbench.report.run_report import report

    write_placeholders(run_dir, unfinished_nodes(run_dir), why_cut)
    return report(run_dir, fail_on=fail_on, why_cut=why_cut)


class Interrupts:
    """The first Ctrl-C (or SIGTERM, or SIGHUP: a closed terminal or SSH session) stops the run's
    jobs and lets the run write its tables from what finished; a second one exits at once."""

    def __init__(self, launcher, run_dir: Optional[Path] = None):
        self.launcher = launcher
        self.run_dir = run_dir
        self.written = False  # the tables: a second interrupt while the run is recorded leaves them whole
        self.signum: Optional[int] = None
        self.since = 0.0
        self._old: Dict[int, Any] = {}

    def __enter__(self) -> "Interrupts":
        for s in INTERRUPTS:
            self._old[s] = signal.signal(s, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)

    @contextmanager
    def deferred(self):
        """Processes start in here: an interrupt that arrives meanwhile waits (blocked, not
        ignored, which would lose it) until they have all started, then stops every one of them.
        The children unblock it (processes.child_of) and run in sessions of their own, so a Ctrl-C
        at the terminal reaches this process alone."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, INTERRUPTS)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a pending interrupt is handled here
        if self.signum is not None:
            # One taken by another thread of this process ran the handler before every process
            # had started: stop those started since.
            self.launcher.cancel()

    def _handle(self, signum, _frame) -> None:
        self.launcher.cancel()
        if self.signum is not None:
            collect = f"python -m zlbench collect {shlex.quote(str(self.run_dir))}"
            print("\n[zlbench] interrupted twice: exiting now, "
                  + (f"its tables written but the run not recorded in the store; `{collect}` records it"
                     if self.written else
                     "before its tables were all written (any on disk may be partial) and without recording the run"
                     + (f"; `{collect}` writes them from what finished, and `{self._resume()}` measures the rest"
                        if self.run_dir else "; resume the run dir to finish it")) + ".",
                  file=sys.stderr, flush=True)
            os._exit(Exit.INTERRUPTED)
        self.signum, self.since = signum, time.time()
        # Printed, not logged: a signal handler must not take the logging lock.
        print(f"\n[zlbench] {signal.Signals(signum).name}: stopping the run's processes and writing the "
              "tables (again to exit at once)", file=sys.stderr, flush=True)

    def _resume(self) -> str:
        try:
            return resume_command(self.run_dir)
        except Exception:  # exiting at once: a run dir that cannot be read still gets its words
            return f"python -m zlbench resume={self.run_dir}"

    def given_up(self) -> bool:
        """Interrupted, and the jobs had their grace period to stop."""
        return self.signum is not None and time.time() - self.since > STOP_GRACE_S

