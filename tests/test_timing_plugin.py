"""The timing plugin's policy wrapper, driven on the CPU with a plain timer function."""

import json

import pytest

from zlbench.plugins import _runtime, timing
from zlbench.plugins.record import _mask_side_paths


@pytest.fixture
def plugin_config(tmp_path, monkeypatch):
    def make(**cfg):
        path = tmp_path / "plugin.json"
        path.write_text(json.dumps({"backend": "cpu", "timer": {"name": "direct", "repeat": 3}, **cfg}))
        monkeypatch.setenv(_runtime.CONFIG_ENV, str(path))
        monkeypatch.setattr(_runtime, "_config", None)
        _runtime.timing_calls.clear()
    return make


def test_direct_takes_the_median_of_repeats_and_records_the_timer(plugin_config):
    plugin_config()
    values = iter([3.0, 1.0, 2.0])
    policy, _ = timing.make_policy(lambda fn, **kw: next(values), None)
    assert policy(lambda: None, warmup=1, rep=1) == 2.0
    assert _runtime.timing_calls == [{"timer_used": "direct", "markers": [], "reason": None}]


def test_calls_from_inside_triton_pass_through_unrecorded(plugin_config):
    plugin_config()
    policy, _ = timing.make_policy(lambda fn, **kw: 7.0, None)
    fake_autotuner = {"__name__": "triton.runtime.autotuner", "policy": policy}
    exec("result = policy(lambda: None)", fake_autotuner)
    assert fake_autotuner["result"] == 7.0
    assert _runtime.timing_calls == []


def test_host_timer_measures_wall_clock(plugin_config):
    plugin_config(timer={"name": "host", "repeat": 1})
    policy, _ = timing.make_policy(lambda fn, **kw: -1.0, None)
    assert policy(lambda: sum(range(1000)), warmup=1, rep=2) > 0
    assert _runtime.timing_calls[0]["timer_used"] == "host"


def test_side_cache_paths_are_masked_before_hashing(monkeypatch):
    monkeypatch.setenv("FLAGGEMS_CACHE_DIR", "/run/cache/side0/flaggems")
    a = _mask_side_paths(b"\x00debug:/run/cache/side0/flaggems/code_cache/exp.py\x00")
    monkeypatch.setenv("FLAGGEMS_CACHE_DIR", "/run/cache/side1/flaggems")
    b = _mask_side_paths(b"\x00debug:/run/cache/side1/flaggems/code_cache/exp.py\x00")
    assert a == b and b"side" not in a
