"""Typed records of the run dir: what a measurement becomes (Row; what the planner hands the
launchers is in zlbench/planning/units.py). They travel as JSON (rows.jsonl): `to_dict` /
`from_dict` are the only converters, and construction validates, so a malformed row fails where it
is read, with its field."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, List, Mapping, Optional

from zlbench.errors import UsageError
from zlbench.results.schema import STATUSES, shape_key


def from_dict_checked(cls, data: Mapping[str, Any], what: str):
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise UsageError(f"{what}: unknown field(s) {', '.join(unknown)} (written by another zlbench "
                         "version?). Fix: read it with the zlbench that wrote it, or start a new run.")
    try:
        return cls(**data)
    except TypeError as e:
        raise UsageError(f"{what}: {e}. Fix: read it with the zlbench that wrote it, or start a new run.")


@dataclass
class Row:
    """One measured (op, dtype, shape) of one side and round, or a node's status where it gave none."""

    op: str
    dtype: Optional[str] = None
    shape: Optional[str] = None
    legacy_shape: Any = None
    latency_base: Optional[float] = None
    latency: Optional[float] = None
    speedup: Optional[float] = None
    gbps_base: Optional[float] = None
    gbps: Optional[float] = None
    # What FlagGems' harness reports beside the latencies, where it does (null where not).
    tflops: Optional[float] = None
    utilization: Optional[float] = None
    accuracy: Optional[float] = None
    compared_speedup: Optional[float] = None
    timer_used: Optional[str] = None
    timer_used_base: Optional[str] = None
    markers: List[str] = field(default_factory=list)
    marker_reason: Optional[str] = None
    status: str = "ok"
    reason: Optional[str] = None
    side: str = "main"
    round: int = 0
    device: Any = None
    device_name: str = ""
    device_bus_id: str = ""
    node: Optional[str] = None
    unit: Optional[str] = None
    # How the alternative's latency was sampled (null where not known: rows of older runs, result
    # logs, timing calls that could not be matched to shapes). timer.stop=fixed gives stop_reason
    # "fixed" and no sample facts; see zlbench/plugins/sampling.py.
    stop_reason: Optional[str] = None       # target, max_samples, max_time, fixed, no_samples
    samples: Optional[int] = None           # samples kept
    ci_rel: Optional[float] = None          # 95% CI half-width of the latency, relative
    spread_rel: Optional[float] = None      # interquartile range of the samples over their median
    min_ms: Optional[float] = None          # fastest sample
    samples_discarded: Optional[int] = None  # retaken for a low SM clock (null: no clock reading)
    sm_mhz: Optional[float] = None          # lowest SM clock read over the kept samples
    mem_mhz: Optional[float] = None         # lowest memory clock read over the kept samples
    mode_lo_ms: Optional[float] = None      # with BENCHMARK_BIMODAL: the two clusters' medians and
    mode_hi_ms: Optional[float] = None      # the share of samples in the upper one
    mode_hi_share: Optional[float] = None
    placements: Optional[int] = None        # timer.placements: memory placements timed (median kept),
    placement_spread_rel: Optional[float] = None  # (max - min) / median of their values,
    placement_note: Optional[str] = None    # and why one only where more were asked for
    # The same facts for the baseline's (latency_base) timing call, as one mapping.
    timing_base: Optional[Dict[str, Any]] = None
    # A plain run's row over its benchmark processes (zlbench/results/process_stats.py): how many
    # measured it, and the 95% interval [lo, hi] ms for the value another run would report (null:
    # one process, no process-level interval). Null in A/B rows (a round is one process per side).
    processes: Optional[int] = None
    latency_ci: Optional[List[float]] = None

    def __post_init__(self):
        if self.status not in STATUSES:
            raise UsageError(f"row of op {self.op}: unknown status '{self.status}'. Valid: {', '.join(STATUSES)}.")

    @classmethod
    def from_result(cls, record: Mapping[str, Any], result: Mapping[str, Any],
                    timing: Optional[Mapping[str, Any]] = None, **where: Any) -> "Row":
        """A row from one entry of a corpus record (`[INFO] {"op_name", "dtype", "result": [...]}`),
        with where it was measured and the timing facts zlbench's plugin noted for it (None for a
        record read from a result log: then what the log says)."""
        if timing is None:
            timing = {"timer_used": result.get("timer_used") or record.get("mode"),
                      "markers": result.get("markers")}
        return cls(
            op=record.get("op_name"), dtype=record.get("dtype"), shape=shape_key(result.get("shape_detail")),
            legacy_shape=result.get("legacy_shape"), latency_base=result.get("latency_base"),
            latency=result.get("latency"), speedup=result.get("speedup"), gbps_base=result.get("gbps_base"),
            gbps=result.get("gbps"), tflops=result.get("tflops"), utilization=result.get("utilization"),
            accuracy=result.get("accuracy"), compared_speedup=result.get("compared_speedup"),
            timer_used=timing.get("timer_used"),
            timer_used_base=timing.get("timer_used_base"), markers=list(timing.get("markers") or []),
            marker_reason=timing.get("marker_reason"),
            status="failed" if result.get("error_msg") else "ok", reason=result.get("error_msg"),
            **_sampling_fields(timing.get("facts")),
            timing_base=dict(timing["facts_base"]) if timing.get("facts_base") else None, **where)

    def to_dict(self) -> Dict[str, Any]:
        return asdict(self)


ROW_FIELDS = [f.name for f in fields(Row)]
SAMPLING_FIELDS = ("stop_reason", "samples", "ci_rel", "spread_rel", "min_ms", "samples_discarded", "sm_mhz",
                   "mem_mhz", "mode_lo_ms", "mode_hi_ms", "mode_hi_share", "placements", "placement_spread_rel",
                   "placement_note")


def _sampling_fields(facts: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The Row fields of a timing call's sampling facts (facts a newer plugin adds are ignored)."""
    return {k: facts.get(k) for k in SAMPLING_FIELDS} if facts else {}
