"""Every timing entry point the corpus uses goes through zlbench's timer (issue 25 item 2): on Ascend
FlagGems' base.py times kernel mode with triton.backends.ascend.testing.do_bench_npu (looked up at
call time, by vendor name), so the ascend backend names it and the timing plugin patches it; a row
the corpus times by a path zlbench does not patch is marked and counted, never accepted silently."""

import sys
import types

from zlbench.backends import get_backend
from zlbench.plugins import _runtime, record, timing
from zlbench.report.summary import render_summary
from zlbench.results.schema import MARKER_NOT_ZLBENCH_TIMER

from .test_timing_plugin import plugin_config, recorded  # noqa: F401 (fixture)


def flaggems_latency(vendor_name, fn):
    """How FlagGems' benchmark/base.py get_latency dispatches in kernel mode (vendor -> entry point)."""
    import triton

    if vendor_name == "ascend":
        return triton.backends.ascend.testing.do_bench_npu(fn)
    return triton.testing.do_bench(fn, warmup=1, rep=1, return_mode="median")


def fake_triton(monkeypatch):
    """triton.testing (zlbench's corpus timer module) and Ascend's triton.backends.ascend.testing."""
    triton = types.ModuleType("triton")
    testing = types.ModuleType("triton.testing")
    testing.do_bench = lambda fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean": 2.0
    npu = types.ModuleType("triton.backends.ascend.testing")
    npu.do_bench_npu = lambda fn, *a, **kw: 999.0  # the vendor's own timer: never what a row reads
    triton.testing = testing
    triton.backends = types.SimpleNamespace(ascend=types.SimpleNamespace(testing=npu))
    for name, mod in (("triton", triton), ("triton.testing", testing), ("triton.backends.ascend.testing", npu)):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(timing, "_patched", {})
    return npu


def test_the_ascend_backend_names_flaggems_npu_timer():
    assert "triton.backends.ascend.testing:do_bench_npu" in get_backend("ascend").corpus_timer_entry_points
    assert get_backend("cuda").corpus_timer_entry_points == ()


def test_ascend_rows_are_timed_by_zlbench_not_by_do_bench_npu(plugin_config, monkeypatch):  # noqa: F811
    fake_triton(monkeypatch)
    # fill_gaps off: no torch.npu to spin on this CPU (the simulation stays at the timer boundary).
    plugin_config(backend="ascend", timer_modules=["triton.testing"],
                  timer={"name": "direct", "repeat": 1, "fill_gaps": False})
    timing.install()
    assert flaggems_latency("ascend", lambda: None) == 2.0  # zlbench's direct timer, not 999
    assert flaggems_latency("nvidia", lambda: None) == 2.0
    assert [c["timer_used"] for c in recorded()] == ["direct", "direct"]


def test_a_backend_without_the_entry_point_leaves_it_and_its_rows_are_marked(plugin_config, monkeypatch):  # noqa: F811
    fake_triton(monkeypatch)
    plugin_config(backend="cpu", timer_modules=["triton.testing"], timer={"name": "direct", "repeat": 1})
    timing.install()
    assert flaggems_latency("ascend", lambda: None) == 999.0  # not patched: the corpus timed it
    assert _runtime.timing_calls == []
    marks = record._markers_for_results([{}] * 2)
    assert all(m["markers"] == [MARKER_NOT_ZLBENCH_TIMER] and m["timer_used"] is None for m in marks)
    rows = [{"op": "exp", "dtype": "torch.float16", "shape": "[[8]]", "status": "ok", "latency": 999.0,
             "latency_base": 999.0, "markers": m["markers"]} for m in marks]
    assert f"2 row(s) were timed by the corpus itself ({MARKER_NOT_ZLBENCH_TIMER}" in render_summary(rows, [], "t")
