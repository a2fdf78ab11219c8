"""The row vocabulary every writer and reader agrees on: row and status fields, statuses, markers."""

import math
import re
from typing import Optional, Tuple

OPS_STATUS_FIELDS = [
    "op", "test_node", "side", "status", "rows", "backend", "device", "timer", "wall_s", "reason",
    "host", "job_id",
]
# interrupted: a node left unmeasured by a Ctrl-C or SIGTERM of the run (resumable, not at fault).
STATUSES = ("ok", "failed", "skipped", "crashed", "timeout", "poisoned", "fatal", "interrupted")
# Markers every timing path and report agrees on (rows carry them; pytest failures name them).
MARKER_FALLBACK = "BENCHMARK_DIRECT_NO_CUDAGRAPH"
MARKER_POISONED = "BENCHMARK_CAPTURE_POISONED"
MARKER_FATAL = "BENCHMARK_DEVICE_FAULT"
# A timing call's samples fall into two clusters (the row gives mode_lo_ms, mode_hi_ms, mode_hi_share).
MARKER_BIMODAL = "BENCHMARK_BIMODAL"
# A timing call kept a sample taken below timer.throttle_threshold of the device's maximum SM clock
# after its retries ran out (marker_reason says the clock).
MARKER_THROTTLED = "BENCHMARK_CLOCK_THROTTLED"
# A row's benchmark processes disagree far beyond what rows of its size in the run do (typically an
# autotune pick drawn differently per process): its interval rests on its own spread alone.
MARKER_PROCESS_UNSTABLE = "BENCHMARK_PROCESS_UNSTABLE"
# The corpus timed the row itself (a timing path zlbench does not patch: FlagGems' --mode
# operator|wrapper, a vendor timer the backend does not name): its regime is the corpus', not zlbench's.
MARKER_NOT_ZLBENCH_TIMER = "BENCHMARK_NOT_ZLBENCH_TIMER"
# A graph-timed call replayed in under NO_WORK_MS per call: it launched no device work (the op returns
# a view, e.g. einsum 'ij->ji'), so its latency times an empty replay, not a kernel. No kernel of any
# vendor replays in under ~0.5 us; an empty graph's replay over thousands of calls reads ~1-2 ns.
MARKER_NO_DEVICE_WORK = "BENCHMARK_NO_DEVICE_WORK"
NO_WORK_MS = 1e-4
# pytest's own marks: FlagGems takes a test's first other mark as its op id.
BUILTIN_MARKS = frozenset({
    "parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout",
    "tryfirst", "trylast",
})
# Worst first: a node measured over several rounds reports its worst status.
SEVERITY = {s: i for i, s in enumerate(("fatal", "poisoned", "crashed", "timeout", "failed", "interrupted", "skipped", "ok"))}


def short_dtype(dtype: Optional[str]) -> str:
    """'torch.float16' -> 'float16' (how tables show a row's dtype)."""
    return str(dtype).replace("torch.", "") if dtype else "-"


def shape_key(shape) -> str:
    """Canonical text of a shape detail, the pairing key across runs."""
    import json

    return json.dumps(shape, separators=(",", ":"), sort_keys=True)


# A corpus may yield several cases of one op and dtype whose shape details read alike (FlagGems'
# bincount: one shape, three class counts that only the values show). Within a record, the n-th
# such case is keyed `<shape> #n` (n >= 2), so that cases are never taken for repeats of one row;
# a record's cases come in the corpus' own order, the same in every process and run.
_CASE = re.compile(r" #(\d+)$")


def case_key(shape: str, n: int) -> str:
    """The key of the n-th case (1-based) of a record whose shape key is `shape`."""
    return shape if n <= 1 else f"{shape} #{n}"


def base_shape(key: str) -> str:
    """The shape key without its case number: the canonical JSON of the shape detail."""
    return _CASE.sub("", key)


def did_no_device_work(row: dict, field: str = "latency") -> bool:
    """Whether the row's `field` (latency or latency_base) timed an empty replay: under NO_WORK_MS a
    call, which zlbench's timer marks MARKER_NO_DEVICE_WORK; a FlagGems log's row (FlagGems' own
    cudagraph mode, unmarked) reads so by its value alone, as no kernel runs that fast."""
    value = row.get(field)
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < NO_WORK_MS


def kernel_speedup(row: dict) -> Optional[float]:
    """The row's speedup (torch / alternative) where both sides timed device work, else None: where a
    side timed an empty replay (a view, or an op that returns metadata) the ratio compares nanoseconds
    of replay noise, or a kernel with nothing, and would move an op's geomean by orders of magnitude."""
    s = row.get("speedup")
    if not isinstance(s, (int, float)) or s <= 0 or did_no_device_work(row) or did_no_device_work(row, "latency_base"):
        return None
    return float(s)


def interval(value) -> Optional[Tuple[float, float]]:
    """A row's process-level interval as it carries it (latency_ci: [lo, hi] ms), or None where the
    value is not one: two finite numbers with 0 < lo <= hi."""
    if not (isinstance(value, (list, tuple)) and len(value) == 2
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
        return None
    return (float(value[0]), float(value[1])) if 0 < value[0] <= value[1] else None
