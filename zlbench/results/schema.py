"""The row and status schemas every writer and reader agrees on."""

ROW_FIELDS = [
    "op", "dtype", "shape", "legacy_shape", "latency_base", "latency", "speedup", "gbps_base",
    "gbps", "timer_used", "timer_used_base", "markers", "marker_reason", "status", "reason", "side", "round", "device",
    "device_name", "device_bus_id", "node", "unit",
]
OPS_STATUS_FIELDS = [
    "op", "test_node", "side", "status", "rows", "backend", "device", "timer", "wall_s", "reason",
    "host", "job_id",
]
STATUSES = ("ok", "failed", "skipped", "crashed", "timeout", "poisoned", "fatal")
# Worst first: a node measured over several rounds reports its worst status.
SEVERITY = {s: i for i, s in enumerate(("fatal", "poisoned", "crashed", "timeout", "failed", "skipped", "ok"))}


def shape_key(shape) -> str:
    """Canonical text of a shape detail, the pairing key across runs."""
    import json

    return json.dumps(shape, separators=(",", ":"), sort_keys=True)
