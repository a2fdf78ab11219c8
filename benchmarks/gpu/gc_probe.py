"""A pytest plugin for benchmarks/gpu/wall23.sh: how long the corpus' gc.collect() calls take in a
benchmark process. Loaded with `-p gc_probe` (benchmarks/gpu on PYTHONPATH) beside zlbench's plugins.
ZL_GC_UNFREEZE=1 undoes zlbench's gc.freeze() (plugins/device_setup.py) after collection, so one
process of each kind can be timed side by side. Writes {"calls", "seconds", "frozen", the first calls' and the median of the rest's ms} to ZL_GC_PROBE_OUT."""

import gc
import json
import os
import time

import pytest

_orig = gc.collect
_totals = {"calls": 0, "seconds": 0.0}
_each = []


def _timed_collect(*args, **kwargs):
    t0 = time.perf_counter()
    try:
        return _orig(*args, **kwargs)
    finally:
        _each.append(time.perf_counter() - t0)
        _totals["calls"] += 1
        _totals["seconds"] += _each[-1]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    if os.environ.get("ZL_GC_UNFREEZE") == "1":
        gc.unfreeze()
    _totals["frozen"] = gc.get_freeze_count()
    gc.collect = _timed_collect  # the corpus calls gc.collect() through the module


def pytest_sessionfinish(session):
    out = os.environ.get("ZL_GC_PROBE_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({**_totals, "seconds": round(_totals["seconds"], 3),
                       "first_ms": [round(1e3 * t, 1) for t in _each[:8]],
                       "median_rest_ms": round(1e3 * sorted(_each[8:])[len(_each[8:]) // 2], 1) if _each[8:] else None,
                       "frozen_at_end": gc.get_freeze_count()}, f)
