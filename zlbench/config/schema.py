"""Structured-config schemas: the one source of defaults. conf/ only selects and overrides; each
setting's default, its valid range and the reason for both are on its field here. A range is field
metadata (`setting(default, ge=1, why=...)`), from which zlbench/config/validate.py derives its rules:

    ge / gt / le / lt   bounds (inclusive / exclusive) of a number; an int field takes integers only
    choices             the values a str setting takes
    items               the values each element of a list setting may take
    noun                what the value is, in words ("a number of milliseconds"; default: "an
                        integer" for an int field, "a number" for a float)
    why                 a short reason, said after the range ("0 = no widening")
    null                what null means where it is allowed (Optional fields): ", or null for <null>"
    valid               the valid values in words, where the above cannot say it
    fix                 the override a refusal suggests (default: the default)"""

from __future__ import annotations

from dataclasses import MISSING as NO_DEFAULT, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any, Dict, List, Optional

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from zlbench.exitcodes import FAILABLE_STATUSES, FAILABLE_VERDICTS

SHAPE_LEVELS = ("core", "comprehensive")
SHAPE_MODES = ("upstream", "file")


def setting(default: Any = NO_DEFAULT, *, default_factory: Any = NO_DEFAULT, **rule: Any) -> Any:
    """A field with its valid range as metadata (keys: the module docstring)."""
    if default_factory is not NO_DEFAULT:
        return field(default_factory=default_factory, metadata=rule)
    return field(default=default, metadata=rule)


def conf_dir() -> Path:
    """conf/ ships inside the wheel as zlbench/conf; in a source checkout it is ../conf."""
    package = Path(__file__).resolve().parents[1]  # zlbench/
    packaged = package / "conf"
    if packaged.is_dir():
        return packaged
    return package.parent / "conf"


def shipped_axis_vars() -> List[str]:
    """The variable of every A/B axis zlbench ships (conf/ab/*.yaml `var`): switches known to change
    a number, so a run made with one set in the shell records it in its identity."""
    import yaml

    names = set()
    for path in sorted((conf_dir() / "ab").glob("*.yaml")):
        var = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("var")
        if isinstance(var, str) and var:
            names.add(var)
    return sorted(names)


def timer_settings(timer: Dict[str, Any], resolved: str) -> Dict[str, Any]:
    """timer=auto resolved to `resolved` (graph on CUDA): exactly what timer=<resolved> does. Each
    setting still at its default (not overridden on the command line) takes what
    conf/timer/<resolved>.yaml sets (its replay budget, say), so one graph budget serves both."""
    if timer.get("name") not in (None, "", "auto"):
        return dict(timer)
    import yaml

    path = conf_dir() / "timer" / f"{resolved}.yaml"
    preset = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}) if path.is_file() else {}
    defaults = {f.name: f.default for f in fields(TimerConf)}
    plain = lambda v: v.value if isinstance(v, Enum) else v  # noqa: E731
    out = {k: (preset[k] if k in preset and v == plain(defaults.get(k)) else v) for k, v in timer.items()}
    out["name"] = resolved
    return out


class Progress(str, Enum):
    auto = "auto"
    live = "live"
    plain = "plain"
    none = "none"


class Tuning(str, Enum):
    separate = "separate"
    replay = "replay"


class Schedule(str, Enum):
    node = "node"
    round = "round"


@dataclass
class BackendConf:
    name: str = "auto"
    capture_deny_ops: List[str] = field(default_factory=list)
    slots: Optional[int] = None


# The least timer.target_width taken (a run made with it resumes); below the narrowest interval a row
# can have (process_stats.narrowest_width) a note says what it does (validate.config_notes).
TARGET_WIDTH_MIN = 0.006


@dataclass
class TimerConf:
    """How a timing call times. conf/timer/<name>.yaml only selects (and graph.yaml sets its replay
    budget); every default and its reason is here."""

    # auto: the backend's (graph where capture is validated: cuda; direct elsewhere; host on the CPU),
    # with that timer's settings. graph: capture the op in a device graph and time its replay (a shape
    # the capture refuses falls back to direct timing, marked BENCHMARK_DIRECT_NO_CUDAGRAPH). direct:
    # the corpus' own do_bench. host: the host's wall clock, synchronizing the device (the CPU).
    name: str = "auto"
    # Timing calls per measurement, the median kept.
    repeat: int = setting(1, ge=1, why="the median of N timings")
    # The corpus' warm-up and replay budget per call (ms); null: the corpus' own (FlagGems: 1000 / 100).
    warmup_ms: Optional[int] = setting(None, gt=0, noun="a number of milliseconds", null="the corpus' default")
    rep_ms: Optional[int] = setting(None, gt=0, noun="a number of milliseconds", null="the corpus' default")
    # Direct timing: keep the device busy after each L2 clear so the kernel is queued before its
    # start event (where the device can spin: torch's <device>._sleep).
    fill_gaps: bool = True
    # Graph timing: widen the replay of launch-bound calls to at least this much device time.
    min_window_ms: float = setting(2.0, ge=0, noun="a number of milliseconds", why="0 = no widening")
    # The process is the unit of variation (autotune picks, input placement, runtime state are drawn
    # per process): a plain run measures every node in this many independent benchmark processes
    # (passes in shuffled order, spread over the devices) and each row reports the median over them
    # with a process-level interval (zlbench/results/process_stats.py). 1: one process, no interval.
    processes: int = setting(3, ge=1, le=50, why="benchmark processes per node in a plain run; 1: no "
                             "process-level interval")
    # Where a node's processes disagree, more of them: after the timer.processes passes, a node
    # with a row of at least 20 us whose interval is wider than target_width (hi - lo over the
    # latency) is measured in more processes, up to max_processes in all, so that time goes where
    # the variance is (benchmarks/gpu/RESULTS.md, twentieth session). null: twice timer.processes
    # on an accelerator, timer.processes (none more) on the CPU, whose spread is mostly the load of
    # its shared cores. Needs timer.processes >= 2 and a launcher that waits for its jobs.
    max_processes: Optional[int] = setting(None, ge=1, le=100, null="twice timer.processes on an accelerator, "
                                           "none more on the CPU")
    # Below the narrowest interval a row can have (1.1%: the run-level share, process_stats.RUN_SD)
    # every node with a row >= 20 us gets more processes: a note says so (validate.config_notes).
    target_width: float = setting(0.02, ge=TARGET_WIDTH_MIN, noun="a fraction of the latency",
                                  why="a node whose rows >= 20 us have wider intervals gets more processes; "
                                      "no interval is narrower than about 0.011")
    # The more processes add at most this share of the wall the planned passes took: a pass costs
    # a process' start-up (7-11 s with torch and FlagGems) however few its nodes, so on quick files
    # three more passes cost as much as the planned run (RESULTS.md, twenty-first session).
    more_budget: float = setting(0.5, gt=0, noun="a fraction of the planned passes' wall",
                                 why="more processes add at most this share of the planned passes' wall")
    # Each process tunes afresh (its own FlagGems tuning cache, Triton's on-disk autotuning cache
    # off: TRITON_CACHE_AUTOTUNING=0); true: they share both (the first to tune a kernel pins its
    # picks for the others), which hides autotune luck from the interval. planning/plan.py.
    share_tuning: bool = False

    @classmethod
    def from_plugin(cls, timer: Dict[str, Any]) -> "TimerConf":
        """The settings as a benchmark process receives them (the plugin config's `timer` dict, the
        name resolved); a key it does not know (a removed setting, in an old plugin config) or a
        null where the field takes none is left at its default."""
        known = {f.name: f for f in fields(cls)}
        return cls(**{k: v for k, v in timer.items()
                      if k in known and (v is not None or known[k].default is None)})


@dataclass
class ShapeConf:
    mode: str = setting("upstream", choices=SHAPE_MODES)
    level: str = setting("core", choices=SHAPE_LEVELS)
    file: Optional[str] = None


@dataclass
class IdentityConf:
    # Env variables to record in the run identity beside the backend's list (a set one enters the
    # identity hash, so a resume with another value is refused).
    env: List[str] = field(default_factory=list)


@dataclass
class CorpusConf:
    name: str = "demo"
    root: Optional[str] = None
    test_dir: str = "benchmark"
    pythonpath: List[str] = field(default_factory=list)
    pytest_args: List[str] = field(default_factory=list)
    timer_modules: List[str] = field(default_factory=list)
    warmup_ms: Optional[int] = None
    rep_ms: Optional[int] = None
    env: Dict[str, str] = field(default_factory=dict)
    fast_exit: bool = True
    # Arguments that make the corpus skip its baseline (torch) timing. An A/B compares the two
    # sides' alternative, not the baseline: rounds after the first pass these (round 1 times the
    # baseline on both sides, which is what ab.md's baseline drift check reads). A plain run's more
    # processes (past timer.processes) do not: they time what the planned ones did, as a process that
    # skipped the baseline read some rows apart. []: every round and process.
    baseline_off_args: List[str] = field(default_factory=list)
    # The names the corpus' --dtypes takes (its pytest choices): dtypes= outside them is refused
    # before any process starts, each of which would die on it. null: not checked. Not part of the
    # run identity (it checks input; it measures nothing).
    dtypes_taken: Optional[List[str]] = None


@dataclass
class LauncherConf:
    """What every launcher takes."""

    name: str = "local"
    node_timeout_s: float = setting(900.0, gt=0, noun="a number of seconds")
    # Whole-run limit in seconds (null = none). Nodes not finished by then get status `timeout`.
    run_timeout_s: Optional[float] = setting(None, gt=0, noun="a number of seconds", null="no limit")
    shard_size: int = setting(0, ge=0, why="0 = every node of a device in one process")
    crash_retries: int = setting(0, ge=0)
    # One side, one round: a device whose shard is done takes nodes still waiting in other shards.
    steal: bool = True
    # Hold a per-device lock while a benchmark process runs (null: on for accelerators of the local
    # pool; Slurm allocates devices itself).
    device_lock: Optional[bool] = None
    # Start each pass' benchmark process while the pass two before it measures on the device
    # (planning/plan.py PRESTART_AHEAD; one before on a job of 2 CPUs); it waits after collection until the device is free (null:
    # on for accelerators, off on the CPU, where the starting process would share the cores being
    # measured).
    prestart: Optional[bool] = None


@dataclass
class LocalLauncherConf(LauncherConf):
    """The local device pool has no limits of its own: run_timeout_s bounds a run when asked."""


@dataclass
class SlurmLauncherConf(LauncherConf):
    name: str = "slurm"
    tasks: int = setting(1, ge=1)
    wait: bool = True
    partition: Optional[str] = None
    # Slurm's time limit per array task; a task cut by it is requeued and resumes. 0: none (Slurm's
    # --time=0; a job asking more than its partition's limit stays pending).
    time_min: int = setting(60, ge=0, noun="a number of minutes", why="0: no time limit, where the partition allows "
                            "none")
    # GPUs asked for each array task on an accelerator (none on the CPU); 0: none (a GRES request
    # in additional_parameters, say).
    gpus_per_task: int = setting(1, ge=0, why="0: ask Slurm for none")
    cpus_per_task: int = setting(2, ge=1)
    mem_gb: Optional[int] = setting(None, ge=0, noun="a number of GB", why="0: all of a node's memory, Slurm's --mem=0",
                                    null="the partition's default")
    account: Optional[str] = None
    qos: Optional[str] = None
    constraint: Optional[str] = None
    array_parallelism: int = setting(64, ge=1, why="array tasks running at once")
    # Slurm signals each task this long before its time limit (below it: validate.py); submitit then
    # checkpoints and requeues it, and the requeued task resumes. Slurm takes up to 65535.
    signal_delay_s: int = setting(90, ge=1, le=65535, noun="a number of seconds",
                                  why="before the time limit, to requeue the task")
    setup: List[str] = field(default_factory=list)
    additional_parameters: Dict[str, Any] = field(default_factory=dict)


# launcher=<name> -> the schema its settings validate against (conf/launcher/<name>.yaml names it).
LAUNCHER_SCHEMAS = {"local": LocalLauncherConf, "slurm": SlurmLauncherConf}


@dataclass
class ABConf:
    """An A/B axis. Its file in conf/ab/ names the variable, its values and side names, and what both
    sides fix; everything else is a default here (override on the command line: ab.rounds=20)."""

    name: str = "none"
    var: Optional[str] = None
    # Both sides set the variable (0 vs 1, never unset vs set): same environment size.
    values: List[str] = field(default_factory=lambda: ["0", "1"])
    sides: List[str] = field(default_factory=lambda: ["off", "on"])
    # Pick one side for a Hydra multirun (-m ab=<axis> ab.side=off,on); null = both, interleaved.
    side: Optional[str] = None
    # At most this many rounds (each side once per round). With schedule=node a node stops earlier:
    # after round 1 when its kernels are identical on both sides (not live), and from min_rounds on
    # once every row of it has a settled verdict (a sequential rule valid under looks after every round).
    rounds: int = setting(10, ge=1)
    min_rounds: int = setting(4, ge=2, why="a paired interval needs two rounds")
    # node: resident side processes per device, sides alternating per node (A n1, B n1, B n2, A n2,
    # ...; zlbench/engine/device_ab.py); round: each side's whole pass in fresh processes per round.
    schedule: Schedule = Schedule.node
    # Both sides' processes start afresh every K rounds, each start tuning afresh. 1 (every round): a
    # round is an independent unit, so the paired interval covers what a process draws at start
    # (autotune picks, placement); 0 (never) keeps one process per side for the run, whose luck no
    # interval over rounds can see (an A/A flagged 5.5% of rows so on an H200; RESULTS.md).
    respawn_every: int = setting(1, ge=0, why="0: never")
    # Variables both sides set alike (e.g. a phase mask that only matters when the switch is on).
    fixed: Dict[str, str] = field(default_factory=dict)
    # A/A: both sides get values[0] (measures the false positive rate of the whole pipeline).
    aa: bool = False
    # A run whose axis is found not live exits non-zero unless this is set.
    allow_dead: bool = False
    # Relative change below which a significant difference is "changed below threshold".
    threshold: float = setting(0.02, gt=0, lt=1, noun="a relative change")
    # separate: each side tunes itself. replay: side B runs with the tuned configs side A recorded
    # (one FLAGGEMS_CACHE_DIR, A tunes first), so the A/B isolates the switch from autotuning luck.
    tuning: Tuning = Tuning.separate


@dataclass
class StoreConf:
    # default: the SQLite file zl_runs/zlbench.db beside the run dirs; any SQLAlchemy URL
    # (postgresql://...); none: off.
    url: str = "default"


@dataclass
class ZlbenchConfig:
    backend: BackendConf = MISSING
    timer: TimerConf = MISSING
    shape: ShapeConf = MISSING
    corpus: CorpusConf = MISSING
    launcher: LauncherConf = MISSING
    ab: ABConf = MISSING
    store: StoreConf = field(default_factory=StoreConf)
    devices: Any = "all"
    gpus: Any = None
    ops: List[str] = field(default_factory=list)
    op_file: Optional[str] = None
    test_node: Optional[str] = None
    dtypes: List[str] = field(default_factory=list)
    autotune: bool = False
    isolate_caches: bool = True
    share_kernels: bool = True
    identity: IdentityConf = field(default_factory=IdentityConf)
    resume: Optional[str] = None
    cost_from: Optional[str] = None
    progress: Progress = Progress.auto
    # Statuses and A/B verdicts that make the run exit 1 (for CI); [] = only usage errors, cut or
    # interrupted runs and dead A/B axes exit non-zero.
    fail_on: List[str] = setting(
        default_factory=lambda: ["failed", "crashed", "timeout", "poisoned", "fatal"],
        items=FAILABLE_STATUSES + FAILABLE_VERDICTS,
        valid=f"a list of node statuses ({', '.join(FAILABLE_STATUSES)}) and A/B verdicts "
              f"({', '.join(FAILABLE_VERDICTS)})")
    dry_run: bool = False


def register_schemas() -> None:
    cs = ConfigStore.instance()
    cs.store(name="zlbench_schema", node=ZlbenchConfig)
    # Each launcher option validates against its own schema (conf/launcher/*.yaml name it). Stored
    # outside the launcher group, which --help lists as the options a user picks from.
    cs.store(name="launcher_local_schema", node=LocalLauncherConf)
    cs.store(name="launcher_slurm_schema", node=SlurmLauncherConf)
