"""Planner: pure functions from the composed config to work units.

config -> backend + timer -> plugin list -> test nodes -> sides (A/B env) -> units (argv, env,
device, side, round). No I/O beyond reading the corpus to resolve nodes and checking files exist.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from zlbench.backends import DeviceBackend, DeviceInfo, backend_names, get_backend
from zlbench.config.validate import round_by_round
from zlbench.planning.corpus import Corpus, TestNode, check_shape_file
from zlbench.planning.switches import named_env, switch_env
from zlbench.errors import UsageError
from zlbench.planning.units import PluginConfig, WorkUnit
from zlbench.planning.sharing import share_waiting_nodes, share_waiting_rounds

CORE_PLUGINS = ("zlbench.plugins.device_setup", "zlbench.plugins.timing", "zlbench.plugins.record")
TIMERS = ("graph", "direct", "host")
# Where processes start ahead (launcher.prestart), a plain pass' process starts once the pass this
# many places before it on its device measures. A start-up (imports, collection) takes 7-11 s on an
# H200's host, a quick set's pass measures 2-5 s: one ahead left the device idle for the rest of the
# third pass' start-up (9.5 of 53 s on set W; benchmarks/gpu/RESULTS.md, thirty-first session).
PRESTART_AHEAD = 2


@dataclass
class Side:
    name: str
    env: Dict[str, str] = field(default_factory=dict)
    index: int = 0


@dataclass
class Plan:
    backend: str
    timer: str
    devices: List[DeviceInfo]
    nodes: List[TestNode]
    sides: List[Side]
    rounds: int
    plugins: List[str]
    units: List[WorkUnit]
    corpus_root: str
    notes: List[str] = field(default_factory=list)  # said when the run starts
    # A plain run: the benchmark processes every node is measured in (its rounds); None in an A/B.
    processes: Optional[int] = None
    # A plain run: up to how many processes a node whose processes disagree gets (timer.max_processes
    # resolved; = processes: none more), and how its later passes are planned (more_passes).
    max_processes: Optional[int] = None
    more_passes: Optional[Callable[[Sequence[str], int, int], List[WorkUnit]]] = None
    # Whether more_passes' processes start together (launcher.prestart as resolved now: a resumed
    # run may set it otherwise than the run it resumes).
    more_together: bool = False
    # A node-level A/B (zlbench/engine/device_ab.py): sides, min_rounds, respawn_every, threshold,
    # aa, devices; at most `rounds` rounds. None: each unit runs in a process of its own (a plain
    # run, or ab.schedule=round). Written once in plan.json, beside the units.
    schedule: Optional[Dict[str, Any]] = None


def resolve_timer(name: str, backend: DeviceBackend) -> str:
    if name in (None, "", "auto"):
        return backend.default_timer
    if name not in TIMERS:
        raise UsageError(f"unknown timer '{name}'. Valid: auto, {', '.join(TIMERS)}.")
    if name == "graph" and not backend.supports_graph:
        raise UsageError(
            f"timer=graph needs graph capture, which backend={backend.name} does not have. "
            "Fix: timer=direct (or timer=host on the CPU)."
        )
    return name


def plugin_list(backend: DeviceBackend, timer: str) -> List[str]:
    """Compat plugins first: they rewrite collection-time markers and nothing may read the item
    list before them. Only this backend's compat plugins, never another's."""
    del timer  # every timer goes through the timing plugin, which records the timer used
    return list(backend.compat_plugins) + list(CORE_PLUGINS)


def select_devices(wanted: Any, available: Sequence[DeviceInfo], backend: str) -> List[DeviceInfo]:
    if not available:
        raise UsageError(
            f"backend={backend} found no device on this machine. Fix: backend=cpu (or auto), or run "
            "where the vendor's tool lists devices."
        )
    if wanted in (None, "all", "ALL", ""):
        return list(available)
    if isinstance(wanted, (int, str)):
        wanted = [x for x in str(wanted).split(",") if x.strip() != ""]
    by_index = {d.index: d for d in available}
    out = []
    for w in wanted:
        try:
            idx = int(w)
        except (TypeError, ValueError):
            raise UsageError(f"device '{w}' is not an index. Fix: devices=[0,1] or devices=all.")
        if idx not in by_index:
            raise UsageError(
                f"device {idx} does not exist on backend={backend}; devices here: "
                f"{', '.join(f'{d.index} ({d.name})' for d in available)}. Fix: devices=[...] with those."
            )
        if by_index[idx] not in out:
            out.append(by_index[idx])
    return out


def _side_names(names: Sequence[Any]) -> List[str]:
    """A side's name names its unit dirs (off.r0.d0.s0) and log (run.off.log): two sides of one
    name would share them and merge into one side."""
    names = [str(n) for n in names]
    odd = [n for n in names if not re.fullmatch(r"[A-Za-z0-9_-]+", n)]
    if names[0] == names[1] or odd:
        what = (f"{odd[0]!r} is not a plain name (letters, digits, _ and -: it names the side's unit dirs and log)"
                if odd else "the two sides need two names")
        raise UsageError(f"ab.sides=[{','.join(names)}]: {what}. Fix: ab.sides=[off,on].")
    return names


def sides_of(ab: Mapping[str, Any]) -> List[Side]:
    if ab.get("name", "none") == "none":
        return [Side("main", {})]
    if not ab.get("var"):
        raise UsageError(f"A/B axis '{ab.get('name')}' names no variable. Fix: ab.var=NAME "
                         "(e.g. ab=env ab.var=FLAGTREE_MUSA_RLC_ENHANCE ab.values=[0,1]).")
    names = list(ab.get("sides") or [])
    values = [str(v) for v in ab.get("values") or []]
    if len(values) != 2 or len(names) != 2:
        raise UsageError(
            f"A/B axis '{ab.get('name')}' needs exactly two values and two side names, got "
            f"values={values} sides={names}. Fix: ab.values=[0,1] ab.sides=[off,on]."
        )
    names = _side_names(names)
    fixed = {str(k): str(v) for k, v in (ab.get("fixed") or {}).items()}
    if ab.get("aa"):
        values = [values[0], values[0]]
    elif values[0] == values[1]:
        raise UsageError(
            f"A/B axis '{ab.get('name')}' sets {ab['var']}={values[0]} on both sides: it can change "
            "nothing. Fix: give two different ab.values, or ab.aa=true for a deliberate A/A run."
        )
    sides = [Side(n, {**fixed, ab["var"]: v}, i) for i, (n, v) in enumerate(zip(names, values))]
    if ab.get("side"):
        match = [s for s in sides if s.name == ab["side"]]
        if not match:
            raise UsageError(f"ab.side={ab['side']} is not one of {names}. Fix: ab.side={names[0]} or ab.side={names[1]} "
                             "(one side's pass), or drop ab.side to run both sides interleaved.")
        return match
    return sides


def balance(nodes: Sequence[TestNode], devices: Sequence[DeviceInfo],
            costs: Mapping[str, float]) -> Dict[int, List[TestNode]]:
    """Longest-processing-time-first: nodes with known wall times (earlier run) spread evenly."""
    default = (sum(costs.values()) / len(costs)) if costs else 1.0
    load = {d.index: 0.0 for d in devices}
    out: Dict[int, List[TestNode]] = {d.index: [] for d in devices}
    order = sorted(nodes, key=lambda n: -costs.get(n.nodeid, default))
    for n in order:
        target = min(load, key=lambda i: (load[i], i))
        out[target].append(n)
        load[target] += costs.get(n.nodeid, default)
    if costs:
        # Longest first inside a device too: its tail then holds short nodes, which is where a device
        # that finished takes waiting nodes from (planning/sharing.py), and no long node starts last.
        return out
    # Nothing known: corpus order inside a device, which is what users read in logs.
    rank = {n.nodeid: i for i, n in enumerate(nodes)}
    return {i: sorted(v, key=lambda n: rank[n.nodeid]) for i, v in out.items()}


def check_pytest_args(args: Sequence[str]) -> None:
    """Refuse what would measure on more than the one device zlbench pins a process to."""
    parallel = [a for a in args if a in ("-n", "--numprocesses", "--dist") or a.startswith(("-n=", "--numprocesses", "--dist="))]
    if parallel:
        raise UsageError(f"corpus.pytest_args={list(args)} asks pytest-xdist for several processes ({parallel[0]}), "
                         "which would measure on one device at once. Fix: drop it; zlbench runs one "
                         "benchmark process per device: devices=[0,1,...] spreads the work.")
    # FlagGems' own --parallel N spreads a test's shapes over devices 0..N-1 from inside the process,
    # past the one device zlbench pinned it to (0 is its default: serial).
    spread = [(a, b) for a, b in zip(args, list(args[1:]) + [""]) if a == "--parallel" and b != "0"] + \
        [(a, "") for a in args if a.startswith("--parallel=") and a != "--parallel=0"]
    if spread:
        raise UsageError(f"corpus.pytest_args={list(args)} asks the corpus to spread its shapes over several devices "
                         f"({' '.join(x for x in spread[0] if x)}), past the one device zlbench pins each "
                         "benchmark process to. Fix: drop it; devices=[0,1,...] spreads the work.")


def corpus_args(cfg: Mapping[str, Any], timer: str, known_ops: Optional[Sequence[str]] = None) -> List[str]:
    corpus, shape = cfg["corpus"], cfg["shape"]
    args = list(corpus.get("pytest_args") or [])
    check_pytest_args(args)
    args += ["--level", str(shape.get("level", "core"))]
    if shape.get("mode") == "file":
        if not shape.get("file"):
            raise UsageError("shape=file needs a shape-record file. Fix: shape.file=/path/to/shapes.yaml "
                             "(FlagGems' core_shapes.yaml format), or shape=upstream.")
        args += ["--shape_file", str(check_shape_file(shape["file"], known_ops))]
    for d in cfg.get("dtypes") or []:
        args += ["--dtypes", str(d)]
    warmup = cfg["timer"].get("warmup_ms") or corpus.get("warmup_ms")
    rep = cfg["timer"].get("rep_ms") or corpus.get("rep_ms")
    if warmup:
        args += ["--warmup", str(warmup)]
    if rep:
        args += ["--iter", str(rep)]
    return args


def make_plan(cfg: Mapping[str, Any], backend: DeviceBackend, available: Sequence[DeviceInfo],
              corpus_root: Path, run_dir: Path, costs: Optional[Mapping[str, float]] = None,
              python: str = sys.executable) -> Plan:
    timer = resolve_timer(cfg["timer"].get("name"), backend)
    wanted = cfg.get("gpus") if cfg.get("gpus") is not None else cfg.get("devices")
    devices = select_devices(wanted, available, backend.name)
    corpus = Corpus(corpus_root, cfg["corpus"].get("test_dir", "benchmark"))
    nodes = corpus.select(cfg.get("ops") or [], cfg.get("op_file"), cfg.get("test_node"))
    if not nodes:
        raise UsageError(f"the corpus at {corpus.root} has no test nodes to run.")
    plugins = plugin_list(backend, timer)
    sides = sides_of(cfg.get("ab") or {})
    rounds = passes_of(cfg)
    argv = pytest_command(python, corpus, plugins, corpus_args(cfg, timer, sorted(corpus.shape_names())))
    ab = cfg.get("ab") or {}
    notes = multi_file_notes(corpus, cfg.get("ops") or [], nodes)
    schedule = node_schedule(ab, sides, rounds, notes)
    make_unit = _UnitFactory(cfg, backend, timer, corpus, run_dir, argv, sides[0],
                             {n.nodeid: list(n.only_marks) for n in nodes if n.only_marks},
                             triton_autotune_cache(cfg, schedule))
    assignment = balance(nodes, devices, costs or {})
    if schedule:
        schedule["devices"] = len(devices)
    # A node-level A/B runs a device's nodes in its resident processes: no shards.
    shard = 0 if schedule else int(cfg["launcher"].get("shard_size") or 0)
    plain = is_plain(cfg)
    units = abba_units(make_unit, sides, rounds, devices, assignment, shard, rotate=plain)
    check_env_settings(cfg, backend, devices[0], sides, units)
    steal = bool(cfg["launcher"].get("steal", True))
    if steal:
        share_work(units, run_dir, plain, bool(schedule) and len(devices) > 1)

    def more_passes(wanted: Sequence[str], first: int, last: int) -> List[WorkUnit]:
        """Passes first..last-1 over the nodes `wanted` only (a plain run's later processes for the
        nodes whose processes disagree), planned as the first passes were."""
        picked = [n for n in nodes if n.nodeid in set(wanted)]
        more = abba_units(make_unit, sides, last, devices, balance(picked, devices, costs or {}), shard,
                          rotate=True, first=first)
        on_device = Counter(u.device for u in more)
        for u in more:  # a device's more units start together (passes x shards of them)
            u.prestart, u.more_pass = (max(1, on_device[u.device] - 1) if u.prestart else 0), True
        if steal:
            share_work(more, run_dir, True, False)
        return more

    return Plan(backend.name, timer, devices, nodes, sides, rounds, plugins, units, str(corpus.root), notes,
                processes=rounds if plain else None, schedule=schedule,
                max_processes=max_processes_of(cfg, backend) if plain else None,
                more_passes=more_passes if plain else None,
                more_together=plain and prestarts(backend, cfg["launcher"]))


def share_work(units: Sequence[WorkUnit], run_dir: Path, plain: bool, node_level_ab: bool) -> None:
    """Let a device done with its own work take work waiting on others: in a plain run a node of
    the same pass (claims per pass), in a node-level A/B on several devices a node's later round."""
    if plain:
        for r in sorted({u.round for u in units}):
            of_pass = [u for u in units if u.round == r]
            if len(of_pass) > 1:
                share_waiting_nodes(of_pass, run_dir / "claims" / f"{of_pass[0].side}.r{r}")
    elif node_level_ab:
        share_waiting_rounds(units, run_dir)


def is_plain(cfg: Mapping[str, Any]) -> bool:
    """A run with no A/B axis: its rounds are timer.processes independent passes over the nodes."""
    return (cfg.get("ab") or {}).get("name", "none") == "none"


def passes_of(cfg: Mapping[str, Any]) -> int:
    """How many rounds the plan has: an A/B's ab.rounds; a plain run's timer.processes (each a pass
    over every node in fresh benchmark processes: the process is the unit of variation). The one
    place they are derived: the rest reads Plan.rounds (plan.json's "rounds")."""
    if is_plain(cfg):
        return int(cfg["timer"].get("processes") or 1)
    return int((cfg.get("ab") or {}).get("rounds", 1))


def max_processes_of(cfg: Mapping[str, Any], backend: DeviceBackend) -> int:
    """Up to how many processes a plain run's node gets where its processes disagree
    (timer.max_processes; null: twice timer.processes on an accelerator, no more on the CPU).
    One process has no interval to judge by: no more."""
    processes = passes_of(cfg)
    wanted = cfg["timer"].get("max_processes")
    if processes < 2:
        return processes
    if wanted is None:
        return processes if backend.name == "cpu" else 2 * processes
    return max(processes, int(wanted))


def node_schedule(ab: Mapping[str, Any], sides: Sequence[Side], rounds: int, notes: List[str]) -> Optional[Dict[str, Any]]:
    """What zlbench/engine/device_ab.py needs to run an interleaved A/B node by node (at most
    `rounds` rounds: plan.json's "rounds"); None when the A/B runs round by round (ab.schedule=round),
    or there is no pair of sides."""
    if len(sides) != 2:
        return None
    every = ab.get("respawn_every")
    ignored = (f"; ab.respawn_every={every} does nothing then (every round runs in fresh processes)"
               if every is not None and int(every) != 1 else "")
    if str(ab.get("schedule", "node")) != "node":
        if ignored:
            notes.append("ab.schedule=round runs whole passes round by round" + ignored)
        return None
    if round_by_round(ab):
        # Replay needs side A's tuning written before B's process starts: whole passes per round.
        notes.append("ab.tuning=replay runs round by round (ab.schedule=round): side B must start after "
                     "side A has tuned" + ignored)
        return None
    return {"sides": [s.name for s in sides], "min_rounds": min(int(ab.get("min_rounds") or 4), rounds),
            "respawn_every": int(ab.get("respawn_every") or 0),
            "threshold": float(ab.get("threshold", 0.02)), "aa": bool(ab.get("aa"))}


def multi_file_notes(corpus: Corpus, ops: Sequence[str], nodes: Sequence[TestNode]) -> List[str]:
    """Op marks are not unique to one file (FlagGems' test_blas_perf_parallel.py carries pointwise
    ops' marks): a selection by mark that pulls in another file's test says so."""
    notes = []
    for op in ops:
        files = sorted({n.file for n in nodes if corpus.matches(op, n)})
        if len(files) > 1:
            notes.append(f"op '{op}' matches tests in {len(files)} files: {', '.join(files)}")
    return notes


def abba_units(make_unit, sides: Sequence[Side], rounds: int, devices: Sequence[DeviceInfo],
               assignment: Mapping[int, List[TestNode]], shard: int, rotate: bool = False,
               first: int = 0) -> List[WorkUnit]:
    """ABBA across rounds (A,B then B,A), every side of a device's nodes on that device, node
    order shuffled per round (seeded, reproducible); shards of at most `shard` nodes (0: one).
    rotate (a plain run's passes): pass r gives device i the nodes planned for device i + r, so a
    node's processes are spread over the devices. first: the rounds before it are planned already."""
    units: List[WorkUnit] = []
    for r in range(first, rounds):
        order = sides if r % 2 == 0 else list(reversed(sides))
        for i, dev in enumerate(devices):
            planned = devices[(i + r) % len(devices)] if rotate else dev
            dev_nodes = [n.nodeid for n in assignment[planned.index]]
            if rounds > 1:
                random.Random(f"{r}:{dev.index}").shuffle(dev_nodes)
            chunks = [dev_nodes[i:i + shard] for i in range(0, len(dev_nodes), shard)] if shard else [dev_nodes]
            units += [make_unit(side, r, dev, k, chunk) for side in order
                      for k, chunk in enumerate(chunks) if chunk]
    return units


def pytest_command(python: str, corpus: Corpus, plugins: Sequence[str], args: Sequence[str]) -> List[str]:
    """The benchmark process' command line, less the node ids (the worker adds those)."""
    argv = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
            "--rootdir", str(corpus.root)]
    if corpus.ini is not None:
        argv += ["-c", str(corpus.ini)]
    for p in plugins:
        argv += ["-p", p]
    return argv + list(args)


class _UnitFactory:
    """Builds the work units of one plan: what they share is fixed once, here."""

    def __init__(self, cfg: Mapping[str, Any], backend: DeviceBackend, timer: str, corpus: Corpus,
                 run_dir: Path, argv: List[str], first_side: Side, only_marks: Dict[str, List[str]],
                 autotune_cache: Optional[str]):
        self.cfg, self.backend, self.timer, self.corpus = cfg, backend, timer, corpus
        self.run_dir, self.argv, self.first_side, self.only_marks = run_dir, argv, first_side, only_marks
        self.autotune_cache = autotune_cache
        self.pythonpath = ":".join([str(corpus.root)] + [str(corpus.root / p)
                                                         for p in cfg["corpus"].get("pythonpath") or []])

    def __call__(self, side: Side, r: int, dev: DeviceInfo, k: int, nodes: List[str]) -> WorkUnit:
        cfg, launcher = self.cfg, self.cfg["launcher"]
        unit_id = f"{side.name}.r{r}.d{dev.index}.s{k}"
        env = unit_env(cfg, self.backend, dev, side, self.run_dir, self.first_side, r, self.autotune_cache)
        env["PYTHONPATH"] = self.pythonpath
        argv, shapes_file = list(self.argv), None
        if r and not is_plain(cfg) and len(self.cfg["ab"].get("sides") or []) == 2 and not cfg["ab"].get("side"):
            argv += [str(a) for a in cfg["corpus"].get("baseline_off_args") or []]  # the A/B compares the alternative
        elif is_plain(cfg) and r >= passes_of(cfg):
            # A plain run's more processes time what the planned ones did, the baseline included: a
            # process that skipped it read an op's 4-byte rows of 2**30 elements 10-11% faster on an
            # H100 (benchmarks/gpu/RESULTS.md, forty-fifth session); only the rows that disagree.
            shapes_file = str(more_shapes_path(self.run_dir))
        return WorkUnit(
            unit_id=unit_id, side=side.name, round=r, device=dev.index, nodes=nodes, argv=argv,
            env=env, corpus_root=str(self.corpus.root),
            plugin_config=PluginConfig(
                unit=unit_id, backend=self.backend.name, timer={**dict(cfg["timer"]), "name": self.timer},
                timer_modules=list(cfg["corpus"].get("timer_modules") or []),
                capture_deny_ops=list(cfg["backend"].get("capture_deny_ops") or []),
                fast_exit=bool(cfg["corpus"].get("fast_exit", True)), only_marks=self.only_marks,
                shapes_file=shapes_file, record_launches=not is_plain(cfg),
            ).to_dict(),
            node_timeout_s=float(launcher["node_timeout_s"]),
            crash_retries=int(launcher.get("crash_retries") or 0),
            device_lock=device_lock_key(self.backend, dev, launcher),
            prestart=PRESTART_AHEAD if is_plain(cfg) and prestarts(self.backend, launcher) else 0,
        )


def more_shapes_path(run_dir: Path) -> Path:
    """Where a plain run's choice of the shapes its more passes time is kept (engine/more_processes.py)."""
    return Path(run_dir) / "more_shapes.json"


def prestarts(backend: DeviceBackend, launcher: Mapping[str, Any]) -> bool:
    """Whether a plain unit's process starts while the one before measures: by default where the
    device is not the host's cores (a starting process would share the cores a CPU run measures)."""
    wanted = launcher.get("prestart")
    return backend.name != "cpu" if wanted is None else bool(wanted)


def device_lock_key(backend: DeviceBackend, device: DeviceInfo, launcher: Mapping[str, Any]) -> Optional[str]:
    """The per-device lock a benchmark process holds (zlbench/engine/locks.py): on by default for
    accelerators of the local pool (Slurm allocates devices itself), null where not locked."""
    wanted = launcher.get("device_lock")
    if wanted is None:
        wanted = backend.name != "cpu" and launcher.get("name") == "local"
    return f"{backend.name}-{device.bus_id or device.index}" if wanted else None


def triton_autotune_cache(cfg: Mapping[str, Any], schedule: Optional[Mapping[str, Any]]) -> Optional[str]:
    """TRITON_CACHE_AUTOTUNING for a run's benchmark processes, so that Triton's own autotuner
    (`triton.autotune`, which keeps its picks in the Triton cache dir when this is on) follows what
    FlagGems' tuning cache does: "0" where every process tunes afresh (a plain run's processes; the
    side processes of a node-level A/B (`schedule`, node_schedule's) that respawn), "1" where a
    plain run's processes share their picks (timer.share_tuning: the first process to tune a kernel
    pins it for the rest). None: left as the environment has it (one process; an A/B run round by
    round, whose FlagGems cache every round shares; one that never respawns). corpus.env names it
    to pin picks."""
    if is_plain(cfg):
        if passes_of(cfg) < 2:
            return None
        return "1" if cfg["timer"].get("share_tuning") else "0"
    return "0" if schedule and schedule.get("respawn_every") else None


def unit_env(cfg: Mapping[str, Any], backend: DeviceBackend, device: DeviceInfo, side: Side,
             run_dir: Path, first_side: Optional[Side] = None, round_: int = 0,
             autotune_cache: Optional[str] = None) -> Dict[str, str]:
    env: Dict[str, str] = {}
    env.update({str(k): str(v) for k, v in (cfg["corpus"].get("env") or {}).items()})
    # pytest loads every plugin installed beside it (hypothesis, hydra's own, ...) into every process
    # unless told not to: 1-2 s of each process' start-up on the GPU machine (RESULTS.md), and a
    # plugin may reorder, reseed or time out what the corpus runs. A corpus that needs one names it
    # in corpus.pytest_args (-p NAME); corpus.env.PYTEST_DISABLE_PLUGIN_AUTOLOAD='' loads them all.
    env.setdefault("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    env.update(backend.visibility([device.index]))
    env["ZLBENCH_TORCH_DEVICE"] = backend.torch_device
    env["USE_FLAGTUNE"] = "1" if cfg.get("autotune") else "0"
    if cfg.get("isolate_caches", True):
        # Named by position, not by side name: both sides' paths have the same length, so kernels
        # whose debug info embeds a generated source's path compare equal once the path is masked.
        cache = run_dir / "cache" / f"side{side.index}"
        env["TRITON_CACHE_DIR"] = str(cache / "triton")
        env["FLAGGEMS_CACHE_DIR"] = str(cache / "flaggems")
        if (cfg.get("ab") or {}).get("tuning") == "replay" and first_side is not None:
            # Side A tunes first (round 0 runs A first on every device); B replays A's configs.
            env["FLAGGEMS_CACHE_DIR"] = str(run_dir / "cache" / f"side{first_side.index}" / "flaggems")
    if is_plain(cfg) and passes_of(cfg) > 1 and not cfg["timer"].get("share_tuning"):
        # Each pass' process tunes afresh, isolate_caches or not: FlagGems keeps its picks on disk,
        # so a shared cache would pin the first process' picks for all and hide them from the
        # interval (Triton's kernel cache, code only, stays shared).
        env["FLAGGEMS_CACHE_DIR"] = str(run_dir / "cache" / f"side{side.index}" / f"flaggems.p{round_}")
    if autotune_cache is not None and "TRITON_CACHE_AUTOTUNING" not in env:  # corpus.env pins picks
        env["TRITON_CACHE_AUTOTUNING"] = autotune_cache
    env.update(side.env)
    env["PYTHONUNBUFFERED"] = "1"
    if (is_plain(cfg) and cfg.get("isolate_caches", True) and cfg.get("share_kernels", True)
            and "TRITON_CACHE_DIR" not in (cfg["corpus"].get("env") or {})
            and not _truthy({**os.environ, **env}.get("TRITON_CACHE_AUTOTUNING"))):  # picks would be kept there
        named = [*(cfg["corpus"].get("env") or {}), *side.env, *named_env(cfg)]
        shared = shared_kernel_cache(backend, env, named=named)
        if _writable(shared):  # else the run's own, as share_kernels=false
            env["TRITON_CACHE_DIR"] = str(shared)
    return env


# What zlbench sets in its benchmark processes, and why (unit_env, the factory's PYTHONPATH, the
# backends' visibility(), engine/processes.py): an A/B's variable or ab.fixed naming one would replace
# it, corpus.env naming one would be ignored. (name: (why, fix))
OWNED_ENV = {
    "PYTHONPATH": ("is the corpus' paths (corpus.root, corpus.pythonpath) ahead of the shell's",
                   "corpus.pythonpath=[DIR] (under corpus.root, or absolute), or export it in the shell"),
    "PYTHONUNBUFFERED": ("lets zlbench read a benchmark process' output as it comes", "drop it"),
    "USE_FLAGTUNE": ("is set from autotune= (FlagGems' tuning)", "autotune=true (every process); to compare "
                     "tuning on and off, two runs (autotune=false, autotune=true) and `zlbench summary A --ab B`"),
    "TRITON_CACHE_DIR": ("is where each side (and each process) keeps its kernels, under the run dir "
                         "(isolate_caches; an A/B's liveness compares what each side compiled)",
                         "drop it (isolate_caches=false keeps a plain run's processes in corpus.env's caches)"),
    "FLAGGEMS_CACHE_DIR": ("is where each side (and each process) keeps its tuning picks, under the run dir "
                           "(isolate_caches; a plain run's processes each tune afresh)",
                           "drop it (isolate_caches=false and timer.share_tuning=true keep a plain run's processes "
                           "in corpus.env's caches)"),
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": ("keeps the plugins merely installed beside pytest out of every benchmark "
                                       "process", "corpus.env.PYTEST_DISABLE_PLUGIN_AUTOLOAD='' loads them all, on "
                                       "both sides"),
    "TRITON_CACHE_AUTOTUNING": ("makes every process that starts afresh tune afresh",
                                "corpus.env.TRITON_CACHE_AUTOTUNING=1 pins the picks, on both sides"),
}


def _pins() -> set:
    """Every backend's visibility variables (ROCm's HIP honours CUDA_VISIBLE_DEVICES too)."""
    pins = set()
    for name in backend_names():
        b = get_backend(name)
        pins.update(v for v in (b.visibility_env, *b.extra_visibility_envs) if v)
    return pins


def _why_owned(name: str, backend: DeviceBackend) -> Tuple[str, str]:
    """(why zlbench owns `name` in its benchmark processes, the fix)."""
    if name in _pins():
        return ("pins each benchmark process to the device (or CPU slot) zlbench gives it, whose lock it holds",
                "devices=[...] chooses the devices")
    if name in backend.visibility([0]):
        return ("is set per CPU slot (its share of the cores, a settled heap: backends/cpu.py)",
                "backend.slots=N shares the cores among N slots")
    if name.startswith("ZLBENCH_"):
        return "is zlbench's own (a benchmark process' device, slot and settings)", "drop it"
    return OWNED_ENV.get(name, ("is set by zlbench in every benchmark process", "drop it"))


def check_env_settings(cfg: Mapping[str, Any], backend: DeviceBackend, device: DeviceInfo, sides: Sequence[Side],
                       units: Sequence[WorkUnit]) -> None:
    """Refuse an A/B variable or ab.fixed entry that names what zlbench sets in the benchmark processes
    (the sides' value would replace it: ab.var=CUDA_VISIBLE_DEVICES moved side B off the device whose
    lock it held), and a corpus.env entry the processes would not get as given (zlbench or the A/B
    sets it after corpus.env)."""
    ab = cfg.get("ab") or {}
    corpus_env = {str(k): str(v) for k, v in (cfg["corpus"].get("env") or {}).items()}
    # What zlbench sets itself, where the plan sets the most (an A/B that respawns: autotuning).
    own = set(unit_env({**cfg, "corpus": {**cfg["corpus"], "env": {}}}, backend, device, Side("", {}), Path("."),
                       autotune_cache="0")) | {"PYTHONPATH"} | _pins()
    problems = []
    for k, v in sides[0].env.items():
        where = f"ab.var={k}" if k == ab.get("var") else f"ab.fixed.{k}={v}"
        if k in own or k.startswith("ZLBENCH_"):
            why, fix = _why_owned(k, backend)
            problems.append(f"{where}: {k} {why}; the A/B's sides would run with their own value in its place. "
                            f"Fix: {fix}.")
        elif k in corpus_env:
            what = "the A/B's variable, which each side sets (ab.values)" if k == ab.get("var") else \
                "in ab.fixed, which both sides set"
            problems.append(f"corpus.env.{k}={corpus_env[k]}: {k} is {what}, so the processes would never get this "
                            f"value. Fix: drop corpus.env.{k} (~corpus.env.{k}).")
    for k, v in corpus_env.items():
        ignored = any(u.env.get(k) != v for u in units)
        if k not in sides[0].env and (ignored or k in _pins() or k.startswith("ZLBENCH_")):
            why, fix = _why_owned(k, backend)
            effect = ", and zlbench sets it, so the processes would never get this value" if ignored else \
                "; the processes would run with this value in its place"
            problems.append(f"corpus.env.{k}={v}: {k} {why}{effect}. Fix: {fix}.")
    if problems:
        raise UsageError("\n".join(problems))


def _truthy(value: Optional[str]) -> bool:
    """As Triton reads a boolean variable (knobs.env_bool)."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on", "y")


def _writable(path: Path) -> bool:
    """Whether `path` exists writable or could be made (its nearest existing parent is a writable dir)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


# Where plain runs keep the kernels they compiled, for the next run of the same compile environment.
CACHE_DIR_ENV = "ZLBENCH_CACHE_DIR"
# Variables that say where Triton keeps things and how it was run, not what it compiles: not in the
# key (nor the backend's device visibility: MUSA_, HIP_, ASCEND_ prefixes match it).
NOT_COMPILE_ENV = ("TRITON_CACHE_DIR", "TRITON_CACHE_AUTOTUNING", "FLAGGEMS_CACHE_DIR", "TRITON_HOME",
                   "TRITON_DUMP_DIR", "TRITON_OVERRIDE_DIR")


def shared_kernel_cache(backend: DeviceBackend, env: Mapping[str, str],
                        environ: Optional[Mapping[str, str]] = None, named: Sequence[str] = ()) -> Path:
    """Where a plain run's processes keep their compiled kernels across runs (share_kernels): one
    Triton cache per backend and compile-relevant environment (every variable that can change a
    number, as the run identity records them, set by the shell, corpus.env or zlbench, and the
    variables `named`: corpus.env's, identity.env's, whatever their names), under
    ZLBENCH_CACHE_DIR (default ~/.cache/zlbench). Triton keys its entries by source, compiler and
    options, but only by the environment variables on its own list: a FlagTree switch that is not
    there (NVIDIA's RLC) would hand one value's kernels to the other. Keyed by all of them, runs of
    one compile environment share, runs of two never do."""
    merged = {**(os.environ if environ is None else environ), **env}
    where = set(NOT_COMPILE_ENV) | set(backend.visibility([0]))  # one cache for every device of a run
    relevant = {k: v for k, v in switch_env(backend, merged, named).items() if k not in where}
    key = hashlib.sha256(json.dumps([backend.name, relevant], sort_keys=True).encode()).hexdigest()[:16]
    root = os.environ.get(CACHE_DIR_ENV) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "zlbench")
    return Path(root) / "triton" / f"{backend.name}-{key}"
