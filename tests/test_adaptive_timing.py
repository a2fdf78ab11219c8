"""Clock screening (issue 13, item 2): the clock log, the timing policy driven through a simulated
NVML, and real runs."""

import itertools
import json
import statistics
import sys
import types
from pathlib import Path

import pytest
import yaml

from zlbench.plugins import _runtime, clocks, sampling, timing
from zlbench.plugins.sampling import ClockLog, ClockPolicy
from zlbench.results.records import SAMPLING_FIELDS
from zlbench.results.schema import MARKER_THROTTLED

from .conftest import FIXTURES, REPO

TIMING_CORPUS = FIXTURES / "timing_corpus"
# The fixture corpus' timer module is the one zlbench patches (FlagGems' is triton.testing).
ON_TIMING_CORPUS = ("corpus=flaggems", f"corpus.root={TIMING_CORPUS}", "corpus.timer_modules=[benchmark.timing]",
                    "backend=cpu")


# -- clocks around each batch --------------------------------------------------------------------
class ScriptedReader:
    source = "sim"

    def __init__(self, readings, max_sm_mhz=1980.0):
        self.readings, self.max_sm_mhz, self.log = list(readings), max_sm_mhz, []

    def begin(self):
        self.log.append("begin")

    def during(self):
        self.log.append("during")

    def end(self):
        self.log.append("end")
        return self.readings.pop(0)


def test_a_batch_read_below_the_threshold_is_discarded_and_retaken_after_a_pause():
    reader = ScriptedReader([(1000.0, 3201.0), (1400.0, 3201.0), (1980.0, 3201.0)])
    pauses = []
    log = ClockLog(reader, ClockPolicy(threshold=0.75, retries=3, pause_ms=20), sleep=pauses.append)
    batches = iter([[9.0] * 4, [8.0] * 4, [1.0] * 4])
    assert log.take(lambda during: next(batches)) == [1.0] * 4
    assert log.discarded == 8 and pauses == [0.02, 0.04]  # 1000 and 1400 < 0.75 x 1980 = 1485
    assert log.facts() == {"samples_discarded": 8, "sm_mhz": 1980.0, "mem_mhz": 3201.0}
    assert log.throttled_kept is None and reader.log == ["begin", "end"] * 3


def test_when_retries_run_out_the_batch_is_kept_and_said_throttled():
    log = ClockLog(ScriptedReader([(900.0, None)] * 3), ClockPolicy(0.75, retries=2), sleep=lambda s: None)
    assert log.take(lambda during: [1.0]) == [1.0]
    assert log.discarded == 2 and "SM clock 900 MHz below 0.75 x 1980 MHz after 2 retries" == log.throttled_kept


def test_without_a_maximum_clock_or_a_threshold_nothing_is_discarded():
    for reader, threshold in ((ScriptedReader([(500.0, None)], max_sm_mhz=None), 0.75),
                              (ScriptedReader([(500.0, None)]), 0.0)):
        log = ClockLog(reader, ClockPolicy(threshold=threshold))
        assert log.take(lambda during: [1.0]) == [1.0] and log.discarded == 0
        assert log.facts()["sm_mhz"] == 500.0  # still recorded


def test_a_reader_that_fails_is_dropped_and_the_call_goes_on():
    class Broken(ScriptedReader):
        def end(self):
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")

    errors = []
    log = ClockLog(Broken([]), ClockPolicy(), on_error=errors.append)
    assert log.take(lambda during: [1.0]) == [1.0] and log.take(lambda during: [2.0]) == [2.0]
    assert len(errors) == 1 and "NVML_ERROR_GPU_IS_LOST" in errors[0]


# -- bimodality ----------------------------------------------------------------------------------
# -- the policy, through simulated device interfaces ---------------------------------------------
@pytest.fixture
def plugin_config(tmp_path, monkeypatch):
    def make(backend="cpu", **timer):
        path = tmp_path / "plugin.json"
        # The backend's clock reader is opt-in (conf/timer): asked for here.
        timer = {"clock_reader": "auto", **timer}
        path.write_text(json.dumps({"backend": backend, "timer": {"name": "direct", "fill_gaps": False, **timer}}))
        monkeypatch.setenv(_runtime.CONFIG_ENV, str(path))
        monkeypatch.setattr(_runtime, "_config", None)
        monkeypatch.setattr(clocks, "_cache", {})
        _runtime.timing_calls.clear()
    return make


def scripted_bench(batches, calls):
    """The corpus' direct timer: returns the next batch (a list for return_mode=all, else its median)."""
    batches = iter(batches)

    def bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        calls.append({"warmup": warmup, "rep": rep, "quantiles": quantiles, "return_mode": return_mode})
        batch = next(batches)
        return batch if return_mode == "all" else statistics.median(batch)

    return bench

@pytest.fixture
def sim_nvml(monkeypatch):
    """NVIDIA's management library at its boundary (a stand-in pynvml module): the SM clock reads
    the scripted values in order, then 1980 MHz; the memory clock 3201 MHz; maxima 1980 / 3201."""
    state = types.SimpleNamespace(handles=[])

    def install(sm_readings):
        sm = itertools.chain(sm_readings, itertools.repeat(1980))
        nvml = types.ModuleType("pynvml")
        nvml.NVML_CLOCK_SM, nvml.NVML_CLOCK_MEM = 1, 2
        nvml.nvmlInit = lambda: None

        def by_index(i):
            state.handles.append(i)
            return ("gpu", i)

        def by_bus(bus):
            raise RuntimeError("not used: torch sees no CUDA device here")

        nvml.nvmlDeviceGetHandleByIndex, nvml.nvmlDeviceGetHandleByPciBusId = by_index, by_bus
        nvml.nvmlDeviceGetMaxClockInfo = lambda h, kind: 1980 if kind == 1 else 3201
        nvml.nvmlDeviceGetClockInfo = lambda h, kind: next(sm) if kind == 1 else 3201
        monkeypatch.setitem(sys.modules, "pynvml", nvml)
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
        return state

    return install

def test_a_sample_still_throttled_after_the_retries_is_kept_and_marked(plugin_config, sim_nvml):
    plugin_config(backend="cuda", throttle_retries=2, throttle_pause_ms=0)
    sim_nvml([1000] * 3)
    policy, _ = timing.make_policy(scripted_bench([[3.0]] * 3, []), None)
    assert policy(lambda: None, warmup=7, rep=20, return_mode="median") == 3.0
    [call] = _runtime.timing_calls
    assert call["markers"] == [MARKER_THROTTLED] and "SM clock 1000 MHz" in call["reason"]
    assert call["facts"]["samples_discarded"] == 2  # fixed mode: whole timing calls


def test_which_reader_each_backend_gets_and_why_none(monkeypatch, tmp_path):
    from zlbench.backends import get_backend

    monkeypatch.delenv("ZLBENCH_CLOCK_REPLAY", raising=False)
    reader, facts = clocks.make_reader(get_backend("cpu"), environ={})
    assert reader is None and "cpu backend has no device clock" in facts["why"]
    reader, facts = clocks.make_reader(get_backend("musa"), environ={})
    assert reader is None and "no clock reader for MThreads" in facts["why"]
    monkeypatch.setitem(sys.modules, "pynvml", None)  # nvidia-ml-py not installed
    monkeypatch.setitem(sys.modules, "triton", None)  # nor Triton: no stamp kernel either
    reader, facts = clocks.make_reader(get_backend("cuda"), environ={})
    assert reader is None and "nvml: nvidia-ml-py is not installed" in facts["why"] and "kernel_timer:" in facts["why"]
    assert clocks.make_reader(get_backend("cuda"), "none", environ={})[1]["why"] == "timer.clock_reader=none"
    replay = tmp_path / "clocks.json"
    replay.write_text(json.dumps({"max_sm_mhz": 1980, "readings": [[1000, 3201]]}))
    reader, facts = clocks.make_reader(get_backend("cpu"), environ={"ZLBENCH_CLOCK_REPLAY": str(replay)})
    assert facts["reader"] == "replay" and reader.end() == (1000, 3201) and reader.end() == (1980, None)


def test_the_identity_says_what_each_backend_reads(tmp_path):
    from .test_identity import identity_of
    from .test_plan import cfg

    assert identity_of(cfg(), tmp_path)["clocks"]["sources"] == []
    assert identity_of(cfg(), tmp_path)["clocks"]["reading"].startswith("none: the cpu backend has no device clock")
    assert identity_of(cfg(), tmp_path, backend="cuda")["clocks"]["sources"] == ["nvml", "kernel_timer"]
    assert identity_of(cfg(), tmp_path, {"ZLBENCH_CLOCK_REPLAY": "/x.json"})["clocks"]["sources"] == ["replay"]


# -- rows, records, summary, config --------------------------------------------------------------
FACTS = {"stop_reason": "target", "samples": 40, "ci_rel": 0.002, "spread_rel": 0.01, "min_ms": 0.0029,
         "samples_discarded": 2, "sm_mhz": 1980.0, "mem_mhz": 3201.0, "mode_lo_ms": 0.003, "mode_hi_ms": 0.0033,
         "mode_hi_share": 0.4}

def test_summary_names_the_widest_placement_spread():
    from zlbench.report.summary import render_summary

    base = {"op": "layer_norm", "dtype": "torch.float16", "status": "ok", "latency": 0.04, "latency_base": 0.4,
            "speedup": 10, "timer_used": "graph", "node": "t.py::test_ln", "side": "main", "markers": [],
            "stop_reason": "fixed", "placements": 5}
    rows = [{**base, "shape": "[[20,6,65536]]", "placement_spread_rel": 0.06},
            {**base, "shape": "[[64]]", "placement_spread_rel": 0.004},
            {**base, "shape": "[[1024,1024,1024]]", "placements": 1, "placement_spread_rel": None,
             "placement_note": "its inputs (2048 MB) exceed timer.placement_max_mb"}]
    rows.append({**base, "shape": "[[8]]", "placements": 2, "placement_spread_rel": 0.01,
                 "placement_note": "placement 3 of 5 failed: RuntimeError: CUDA out of memory"})
    text = render_summary(rows, [], "t")
    assert ("- memory placements per call: 5: 2 call(s), 2: 1 call(s), 1: 1 call(s); widest spread between "
            "placements 6% (layer_norm float16 [[20,6,65536]], alternative; the median is kept); 2 call(s) got "
            "fewer than asked (placement_note says why)") in text
    refused = [{**base, "shape": "[[8]]", "placements": 1, "placement_spread_rel": None,
                "placement_note": "its inputs need gradients"}]
    assert "- memory placements per call: 1: 1 call(s); 1 call(s) got fewer than asked" in \
        render_summary(refused, [], "t")


def test_config_and_plugin_defaults_agree():
    from zlbench.config.schema import TimerConf

    conf = TimerConf()
    for key, value in sampling.DEFAULTS.items():
        assert getattr(conf, key) == value, key
        # conf/timer only selects (and overrides): no timer file sets a sampling default of its own.
        for path in sorted((REPO / "conf" / "timer").glob("*.yaml")):
            assert yaml.safe_load(path.read_text()).get(key, value) == value, (path.name, key)

# -- real runs on the CPU ------------------------------------------------------------------------
def read_rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "rows.jsonl").read_text().splitlines() if line.strip()]


def sides(row):
    """Sampling facts of the row's two timing calls."""
    return [{k: row[k] for k in SAMPLING_FIELDS}, row["timing_base"]]

@pytest.mark.slow
def test_replayed_throttled_clocks_discard_samples_in_a_real_run(run_zlbench, tmp_path):
    replay = tmp_path / "clocks.json"  # the device reports 900 MHz twice, then its maximum
    replay.write_text(json.dumps({"max_sm_mhz": 1980, "max_mem_mhz": 3201,
                                  "readings": [[900, 3201], [900, 3201]], "then": [1980, 3201]}))
    res = run_zlbench(*ON_TIMING_CORPUS, "ops=[steady]",
                      env={"ZLBENCH_CLOCK_REPLAY": str(replay)})
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_rows(res.run_dir)
    first = rows[0]["timing_base"]  # the first timing call of the process read the two low clocks
    assert first["samples_discarded"] > 0 and first["sm_mhz"] == 1980
    assert all(f["sm_mhz"] == 1980 and f["mem_mhz"] == 3201 for r in rows for f in sides(r))
    assert sum(f["samples_discarded"] for r in rows for f in sides(r)) == first["samples_discarded"]
    ident = json.loads((res.run_dir / "run_identity.json").read_text())
    assert ident["clocks"]["sources"] == ["replay"] and ident["processes"][0]["clocks"]["reader"] == "replay"
    assert "sample(s) discarded for a low SM clock in 1 call(s)" in (res.run_dir / "summary.md").read_text()
