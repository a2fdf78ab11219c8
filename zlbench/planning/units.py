"""The plan's typed contracts: what the planner hands the launchers (WorkUnit) and the PluginConfig
its benchmark processes read. They travel as JSON (plan.json, plugin_config.json): `to_dict` /
`from_dict` are the only converters, and construction validates, so a malformed plan fails where it
is read, with its field."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Mapping, Optional

from zlbench.errors import UsageError
from zlbench.results.records import from_dict_checked


@dataclass
class PluginConfig:
    """What zlbench's plugins read inside one benchmark process (plugin_config.json)."""

    unit: str
    backend: str
    timer: Dict[str, Any]
    timer_modules: List[str] = field(default_factory=list)
    capture_deny_ops: List[str] = field(default_factory=list)
    fast_exit: bool = True
    # node id -> the op marks of its parametrize cases that run (the others are deselected), for
    # nodes selected through marks set on pytest.param cases.
    only_marks: Dict[str, List[str]] = field(default_factory=dict)
    claims_dir: Optional[str] = None  # set when the unit may take others' nodes (zlbench/engine/stealing.py)
    # A plain run's more passes: the file naming the shapes they time (plugins/only_shapes.py).
    shapes_file: Optional[str] = None
    # An A/B: each timing call's op is called once more, untimed, recording the Triton kernels it
    # launches (liveness evidence for kernels another test or process of its side compiled).
    record_launches: bool = False
    events: Optional[str] = None  # the unit's events file, set by the worker

    def to_dict(self) -> Dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class WorkUnit:
    """One benchmark process' worth of work: a shard of nodes of one side and round on one device."""

    unit_id: str
    side: str
    round: int
    device: int
    nodes: List[str]
    argv: List[str]
    env: Dict[str, str]
    corpus_root: str
    plugin_config: Dict[str, Any]
    node_timeout_s: float
    crash_retries: int
    # Other units' nodes this unit may take once its own are done, and where claims are kept
    # (zlbench/engine/stealing.py); empty when nodes stay where the plan put them.
    pool: List[str] = field(default_factory=list)
    claims_dir: Optional[str] = None
    # The per-device lock its benchmark processes hold (zlbench/engine/locks.py); None: not locked.
    device_lock: Optional[str] = None
    # Its process may start while the unit this many places before it on the device measures
    # (engine/jobs.py; 0: once that unit is done). 1 for a plain run's passes; a plain run's more
    # passes start together (each measures a few nodes for a second or a few: one at a time, their
    # processes' start-ups, 6-11 s each on an H200's host, would be most of their wall).
    prestart: int = 0
    # A plain run's more pass (past timer.processes, engine/more_processes.py): the run limit stops
    # it without cutting the run (its nodes' rows keep the processes that ran).
    more_pass: bool = False

    def __post_init__(self):
        if self.node_timeout_s <= 0 or self.crash_retries < 0:
            raise UsageError(f"work unit {self.unit_id}: node_timeout_s must be > 0 and crash_retries >= 0.")

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkUnit":
        return from_dict_checked(cls, data, f"work unit {data.get('unit_id', '?')}")
