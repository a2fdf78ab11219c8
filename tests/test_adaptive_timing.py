"""Adaptive stopping, clock screening and bimodal rows (issue 13, items 1-3): the statistics, the
timing policy driven through simulated device interfaces (events, graphs, NVML), and real runs."""

import itertools
import json
import math
import statistics
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import yaml

from zlbench.plugins import _runtime, clocks, sampling, timing
from zlbench.plugins.sampling import ClockLog, ClockPolicy, StopRule, sample_until
from zlbench.results.records import ROW_FIELDS, SAMPLING_FIELDS, Row
from zlbench.results.schema import MARKER_BIMODAL, MARKER_THROTTLED

from .sim_device import sim_graphs, sim_interface
from .conftest import FIXTURES, REPO

TIMING_CORPUS = FIXTURES / "timing_corpus"
# The fixture corpus' timer module is the one zlbench patches (FlagGems' is triton.testing).
ON_TIMING_CORPUS = ("corpus=flaggems", f"corpus.root={TIMING_CORPUS}", "corpus.timer_modules=[benchmark.timing]",
                    "backend=cpu")


# -- statistics ----------------------------------------------------------------------------------
def test_median_ci_takes_binomial_order_statistics_and_covers_95_percent():
    assert sampling.median_ci(list(range(1, 11))) == (2, 9)  # P(B(10, .5) <= 1) = 1.1% <= 2.5% < 5.5%
    assert sampling.median_ci([5, 1, 4, 2, 3]) == (1, 5)  # n < 6: no such k, the whole range
    rng = np.random.default_rng(0)
    covered = sum(lo <= 0 <= hi for lo, hi in (sampling.median_ci(rng.standard_normal(15)) for _ in range(2000)))
    assert 0.95 <= covered / 2000 <= 0.99
    # Many samples (a µs kernel timed directly: tens of thousands): the normal approximation, whose
    # half-width is 1.96 x 1.2533 / sqrt(n) for a standard normal.
    cis = [sampling.median_ci(rng.standard_normal(20000)) for _ in range(200)]
    assert 0.93 <= sum(lo <= 0 <= hi for lo, hi in cis) / 200
    assert statistics.median((hi - lo) / 2 for lo, hi in cis) == pytest.approx(1.96 * 1.2533 / math.sqrt(20000), rel=0.1)
    lo, hi = sampling.median_ci(rng.standard_normal(1001))  # either side of the switch: no jump
    assert 0.05 < (hi - lo) / 2 < 0.1


def test_ci_of_the_mean_is_students_t():
    from scipy.stats import t

    xs = [1.0, 1.1, 0.9, 1.05, 0.95]
    expected = t.ppf(0.975, 4) * statistics.stdev(xs) / math.sqrt(5) / statistics.fmean(xs)
    assert sampling.ci_rel(xs, "mean") == pytest.approx(expected)
    assert sampling.ci_rel([1.0], "median") == math.inf


def test_stop_rule_says_why_it_stops():
    rule = StopRule("adaptive", target_rel=0.01, min_samples=10, max_samples=100, max_time_ms=1000)
    steady = [1.0, 1.001, 0.999] * 4
    assert rule.check(steady[:9], 1, "median") is None  # precise already, but below min_samples
    assert rule.check(steady[:10], 1, "median") == "target"
    wide = list(np.random.default_rng(1).uniform(0.5, 1.5, 50))
    assert rule.check(wide, 10, "median") is None  # 50 more samples take 10 ms: affordable
    assert rule.check(wide, 600, "median") == "unreachable"  # they would take 600 ms of the 400 left
    assert rule.check(wide * 2, 10, "median") == "max_samples"
    assert rule.check(wide, 1000, "median") == "max_time"


def test_stable_batches_stop_at_min_samples_noisy_ones_get_more():
    log = ClockLog(None, ClockPolicy())
    firsts = []

    def steady(first, during):
        firsts.append(first)
        return [1.0, 1.0005]

    s = sample_until(steady, StopRule(min_samples=10, target_rel=0.005), log, "median")
    assert (s.stop_reason, len(s.samples), firsts) == ("target", 10, [True, False, False, False, False])
    rng = np.random.default_rng(2)
    s = sample_until(lambda first, during: list(rng.uniform(0.5, 1.5, 2)),
                     StopRule(min_samples=10, target_rel=0.005, max_samples=40, max_time_ms=60_000), log, "median")
    assert (s.stop_reason, len(s.samples)) == ("max_samples", 40)
    facts = s.facts()
    assert facts["samples"] == 40 and facts["ci_rel"] > 0.005 and facts["min_ms"] == min(s.samples)
    assert facts["samples_discarded"] is None  # no clock reading, nothing screened


def test_the_first_batchs_warm_up_is_not_sampling_time():
    now = [0.0]

    def batches(samples):
        def take(first, during):  # FlagGems' direct timer: 1 s of warm-up, then 100 ms of samples
            now[0] += 1.1 if first else 0.1
            return list(samples)
        return take

    rule = StopRule(min_samples=10, target_rel=0.0005, max_samples=10_000, max_time_ms=1000)
    steady = batches([1.0, 1.001, 0.999, 1.0005, 0.9995])
    s = sample_until(steady, rule, ClockLog(None, ClockPolicy()), "median", clock=lambda: now[0])
    assert s.stop_reason == "target" and len(s.samples) > 10  # not max_time after the 1.1 s first batch
    noisy = batches([1.0, 1.2, 0.9, 1.1, 1.05])
    rule = StopRule(min_samples=10, target_rel=0.001, max_samples=10_000, max_time_ms=300)
    s = sample_until(noisy, rule, ClockLog(None, ClockPolicy()), "median", clock=lambda: now[0])
    assert (s.stop_reason, len(s.samples)) == ("unreachable", 10)  # judged on the second batch's pace


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
def two_modes(n, lo=3.0, hi=3.3, share=0.3, noise=0.01, seed=0):
    rng = np.random.default_rng(seed)
    return list(np.where(rng.random(n) < share, hi, lo) * rng.normal(1, noise, n))


def test_two_clusters_are_found_with_their_modes():
    got = sampling.bimodal(two_modes(200))
    assert got is not None
    assert got["mode_lo_ms"] == pytest.approx(3.0, rel=0.01) and got["mode_hi_ms"] == pytest.approx(3.3, rel=0.01)
    assert got["mode_hi_share"] == pytest.approx(0.3, abs=0.07)


@pytest.mark.parametrize("n", [30, 200, 3000])
def test_unimodal_samples_are_not_bimodal(n):
    rng = np.random.default_rng(n)
    shapes = [lambda: rng.normal(3, 0.03, n), lambda: rng.lognormal(1, 0.2, n), lambda: 3 + rng.exponential(0.1, n),
              lambda: rng.uniform(3, 3.3, n), lambda: 3 + 0.03 * rng.standard_t(3, n), lambda: 3 + rng.gamma(2, 0.05, n)]
    flagged = sum(sampling.bimodal(list(draw())) is not None for draw in shapes for _ in range(20))
    assert flagged <= (2 if n == 30 else 0), flagged


def test_close_modes_a_small_cluster_or_few_samples_are_not_bimodal():
    assert sampling.bimodal(two_modes(500, hi=3.03, noise=0.001)) is None  # modes 1% apart
    assert sampling.bimodal(two_modes(500, share=0.08)) is None  # a tail, not a mode
    assert sampling.bimodal(two_modes(15, share=0.5)) is None  # too few samples to tell
    assert sampling.bimodal(two_modes(40, share=0.5)) is not None


def test_the_binned_density_is_scipys_gaussian_kde():
    from scipy.stats import gaussian_kde

    x = np.sort(np.log(two_modes(400, noise=0.02)))
    grid, d = sampling._density(x)
    sd = np.std(x, ddof=1)
    iqr = np.subtract(*np.percentile(x, [75, 25]))
    h = 0.9 * min(sd, iqr / 1.349) * len(x) ** -0.2
    exact = gaussian_kde(x, bw_method=h / sd)(grid)
    assert np.max(np.abs(d - exact)) < 0.02 * np.max(exact)


# -- the policy, through simulated device interfaces ---------------------------------------------
@pytest.fixture
def plugin_config(tmp_path, monkeypatch):
    def make(backend="cpu", **timer):
        path = tmp_path / "plugin.json"
        # Adaptive sampling and the backend's clock reader are opt-in (conf/timer): asked for here.
        timer = {"stop": "adaptive", "clock_reader": "auto", **timer}
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


def test_adaptive_direct_asks_for_samples_warms_up_once_and_returns_their_median(plugin_config):
    plugin_config(min_samples=10, target_rel=0.005)
    calls = []
    batches = [[1.0, 1.001, 0.999, 1.0, 1.0005], [1.0002, 0.9995, 1.0, 1.001, 0.9998]]
    policy, _ = timing.make_policy(scripted_bench(batches, calls), None)
    assert policy(lambda: None, warmup=7, rep=20, return_mode="median") == statistics.median(sum(batches, []))
    assert [(c["warmup"], c["return_mode"]) for c in calls] == [(7, "all"), (0, "all")]
    [call] = _runtime.timing_calls
    assert call["timer_used"] == "direct" and call["markers"] == []
    facts = call["facts"]
    assert facts["stop_reason"] == "target" and facts["samples"] == 10 and facts["min_ms"] == 0.999
    assert facts["ci_rel"] <= 0.005 and facts["spread_rel"] > 0


def test_fixed_direct_calls_the_corpus_timer_as_before_and_passes_its_number_through(plugin_config):
    plugin_config(stop="fixed")
    calls = []
    policy, _ = timing.make_policy(scripted_bench([[0.123456, 0.2, 0.1]], calls), None)
    assert policy(lambda: None, warmup=7, rep=20, return_mode="median") == 0.123456
    assert calls == [{"warmup": 7, "rep": 20, "quantiles": None, "return_mode": "median"}]
    facts = _runtime.timing_calls[0]["facts"]
    assert facts["stop_reason"] == "fixed" and facts["samples"] is None and facts["mode_lo_ms"] is None


def test_a_corpus_timer_without_samples_is_timed_as_with_fixed_and_says_so(plugin_config):
    plugin_config()
    calls = []

    def old_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        calls.append(return_mode)
        return 0.5  # knows no return_mode="all"

    policy, _ = timing.make_policy(old_bench, None)
    assert policy(lambda: None, warmup=7, rep=20, return_mode="median") == 0.5
    assert calls == ["all", "median"]
    assert _runtime.timing_calls[0]["facts"]["stop_reason"] == "no_samples"


def test_a_bimodal_call_is_marked_and_reports_its_modes(plugin_config):
    plugin_config(min_samples=10, target_rel=0.05)
    policy, _ = timing.make_policy(scripted_bench([two_modes(300)], []), None)
    policy(lambda: None, warmup=1, rep=1, return_mode="median")
    [call] = _runtime.timing_calls
    assert call["markers"] == [MARKER_BIMODAL]
    assert call["facts"]["mode_hi_ms"] == pytest.approx(3.3, rel=0.01)


@pytest.fixture
def sim_graph_device(monkeypatch):
    """A simulated device at Triton's device-interface boundary (streams, events, synchronize)
    and a simulated graph class; replays take the scripted times (ms), in order."""
    log = []

    def install(replay_ms):
        # 5 eager calls take 1 ms: 100 calls per graph at rep 20; then the scripted replays.
        sim_interface(monkeypatch, iter([1.0] + list(replay_ms)))
        sim_graphs(monkeypatch, log)
        from zlbench.backends import get_backend

        monkeypatch.setattr(type(get_backend("musa")), "graph_class", "simgraph.Graph")
        monkeypatch.setattr(timing, "_device_module", lambda: types.SimpleNamespace())  # cannot spin
        monkeypatch.setattr(timing, "_spin_cache", {})
        return log

    return install


def test_adaptive_graph_replays_one_capture_until_precise(plugin_config, sim_graph_device):
    plugin_config(backend="musa", name="graph", min_samples=10, target_rel=0.005, max_samples=30)
    log = sim_graph_device([10.0] * 10)
    policy, _ = timing.make_policy(lambda *a, **k: pytest.fail("no direct timing"), None)
    assert policy(lambda: None, rep=20, return_mode="median") == pytest.approx(0.1)
    assert log.count("capture") == 1 and log.count("replay") == 10
    facts = _runtime.timing_calls[-1]["facts"]
    assert (facts["stop_reason"], facts["samples"], facts["ci_rel"]) == ("target", 10, 0)


def test_noisy_replays_get_more_samples_up_to_the_maximum(plugin_config, sim_graph_device):
    plugin_config(backend="musa", name="graph", min_samples=10, target_rel=0.005, max_samples=30)
    log = sim_graph_device([9.0, 11.0] * 20)
    policy, _ = timing.make_policy(lambda *a, **k: pytest.fail("no direct timing"), None)
    assert policy(lambda: None, rep=20, return_mode="median") == pytest.approx(0.1)
    assert log.count("capture") == 1 and log.count("replay") == 30
    assert _runtime.timing_calls[-1]["facts"]["stop_reason"] == "max_samples"


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


def test_a_throttled_batch_read_through_nvml_is_discarded_and_retaken(plugin_config, sim_nvml):
    plugin_config(backend="cuda", min_samples=5, target_rel=0.01, throttle_pause_ms=0)
    state = sim_nvml([1000])  # the first batch ran at 1000 MHz < 0.75 x 1980
    calls = []
    policy, _ = timing.make_policy(scripted_bench([[9.0] * 5, [1.0] * 5], calls), None)
    assert policy(lambda: None, warmup=7, rep=20, return_mode="median") == 1.0  # the slow batch is gone
    assert [c["warmup"] for c in calls] == [7, 7]  # retaken as the first batch, with its warm-up
    assert state.handles == [3]  # NVML numbers every GPU: the visible one was asked for
    facts = _runtime.timing_calls[0]["facts"]
    assert (facts["samples_discarded"], facts["sm_mhz"], facts["mem_mhz"], facts["samples"]) == (5, 1980, 3201, 5)


def test_a_sample_still_throttled_after_the_retries_is_kept_and_marked(plugin_config, sim_nvml):
    plugin_config(backend="cuda", stop="fixed", throttle_retries=2, throttle_pause_ms=0)
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


def test_a_timing_call_is_attributed_to_its_shape_and_side():
    from zlbench.plugins import record

    _runtime.timing_calls[:] = [{"timer_used": "graph", "markers": [], "reason": None, "facts": {"samples": i}}
                                for i in range(4)]
    timing_facts = record._markers_for_results(2)
    assert [(t["facts_base"]["samples"], t["facts"]["samples"]) for t in timing_facts] == [(0, 1), (2, 3)]
    _runtime.timing_calls[:] = [{"timer_used": "graph", "markers": [], "facts": {"samples": 1}}] * 3
    assert [t["facts"] for t in record._markers_for_results(2)] == [None, None]  # 3 calls for 2 shapes: unknown


def test_rows_carry_the_sampling_facts_and_old_rows_read_as_unknown():
    assert set(SAMPLING_FIELDS) < set(ROW_FIELDS) and "timing_base" in ROW_FIELDS
    record = {"op_name": "exp", "dtype": "torch.float16", "result": []}
    result = {"shape_detail": [[64]], "latency": 0.003, "latency_base": 0.002}
    row = Row.from_result(record, result, {"timer_used": "graph", "markers": [MARKER_BIMODAL], "facts": FACTS,
                                           "facts_base": {**FACTS, "samples": 10}})
    assert (row.stop_reason, row.samples, row.mode_hi_share, row.timing_base["samples"]) == ("target", 40, 0.4, 10)
    old = Row.from_result(record, result, {"timer_used": "graph", "markers": []})
    assert old.stop_reason is None and old.samples is None and old.timing_base is None


def test_summary_shows_stop_reasons_clocks_and_bimodal_rows():
    from zlbench.report.summary import render_summary

    base = {"op": "exp", "dtype": "torch.float16", "shape": "[[64]]", "status": "ok", "latency": 0.003,
            "latency_base": 0.002, "speedup": 0.66, "timer_used": "graph", "node": "t.py::test_exp", "side": "main"}
    rows = [{**base, **FACTS, "markers": [MARKER_BIMODAL], "timing_base": {**FACTS, "mode_lo_ms": None}},
            {**base, "shape": "[[128]]", **FACTS, "stop_reason": "unreachable", "mode_lo_ms": None, "markers": []}]
    text = render_summary(rows, [], "t")
    assert "- 3 timing calls stopped: target 2, unreachable 1" in text
    assert "6 sample(s) discarded for a low SM clock in 3 call(s)" in text  # the torch side's are counted too
    assert "SM 1980..1980 MHz" in text
    assert "| exp  | float16 | [[64]]  | alternative |         0.003 |         0.0033 | 40%" in text
    old = [{k: v for k, v in r.items() if k not in SAMPLING_FIELDS + ("timing_base",)} for r in rows]
    assert "## Timing" not in render_summary(old, [], "t")  # rows of an older run say nothing


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


@pytest.mark.parametrize("override", ["timer.target_rel=0", "timer.min_samples=0", "timer.throttle_threshold=1.5"])
def test_out_of_range_sampling_settings_are_refused(override):
    from zlbench.errors import UsageError
    from zlbench.config.validate import validate_config

    from .test_validate import resolved

    with pytest.raises(UsageError, match=override.replace(".", r"\.")):
        validate_config(resolved(override))


# -- real runs on the CPU ------------------------------------------------------------------------
def read_rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "rows.jsonl").read_text().splitlines() if line.strip()]


def sides(row):
    """Sampling facts of the row's two timing calls."""
    return [{k: row[k] for k in SAMPLING_FIELDS}, row["timing_base"]]


@pytest.mark.slow
def test_demo_rows_say_why_their_timing_stopped(run_zlbench):
    res = run_zlbench("ops=[exp,mm]", "dtypes=[float32]", "timer.stop=adaptive", "timer.clock_reader=auto",
                      "timer.max_time_ms=300")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_rows(res.run_dir)
    assert len(rows) == 6
    for facts in (f for r in rows for f in sides(r)):
        assert facts["stop_reason"] in ("target", "unreachable", "max_time", "max_samples"), facts
        assert facts["samples"] >= 10 and facts["min_ms"] > 0
        if facts["stop_reason"] == "target":
            assert facts["ci_rel"] <= 0.005
        assert facts["samples_discarded"] is None and facts["sm_mhz"] is None  # the CPU: no clock reading
    ident = json.loads((res.run_dir / "run_identity.json").read_text())
    assert ident["timer"]["stop"] == "adaptive"
    assert ident["clocks"]["sources"] == [] and ident["clocks"]["reading"].startswith("none: the cpu backend")
    assert [p["clocks"]["reader"] for p in ident["processes"]] == [None]
    summary = (res.run_dir / "summary.md").read_text()
    assert "## Timing" in summary and "- 12 timing calls stopped: " in summary
    assert "clocks: not read (none: the cpu backend has no device clock" in summary


@pytest.mark.slow
def test_fixed_stop_times_as_before(run_zlbench, tmp_path):
    args = (*ON_TIMING_CORPUS, "timer=direct", "ops=[steady]")
    fixed = run_zlbench(*args, "timer.stop=fixed", run_dir=tmp_path / "fixed")
    adaptive = run_zlbench(*args, "timer.stop=adaptive", "timer.max_time_ms=300", run_dir=tmp_path / "adaptive")
    assert fixed.returncode == 0 and adaptive.returncode == 0, fixed.stderr[-2000:] + adaptive.stderr[-2000:]
    events = [json.loads(line) for p in (fixed.run_dir / "units").glob("*/events.jsonl")
              for line in p.read_text().splitlines()]
    results = [res for e in events if e["event"] == "record" for res in e["payload"]["result"]]
    for res, row in zip(results, read_rows(fixed.run_dir)):
        # One call of the corpus' timer per timing call, asked what the corpus asked, its number kept.
        assert [c["return_mode"] for c in res["calls"]] == ["median", "median"]
        assert (row["latency_base"], row["latency"]) == (res["calls"][0]["value"], res["calls"][1]["value"])
        assert row["stop_reason"] == "fixed" and row["samples"] is None and row["timing_base"]["stop_reason"] == "fixed"
        assert MARKER_BIMODAL not in row["markers"]
    for row in read_rows(adaptive.run_dir):
        assert row["stop_reason"] != "fixed" and row["samples"] >= 10
    ident = [json.loads((r.run_dir / "run_identity.json").read_text()) for r in (fixed, adaptive)]
    assert ident[0]["timer"]["stop"] == "fixed" and ident[0]["identity_hash"] != ident[1]["identity_hash"]


@pytest.mark.slow
def test_a_bimodal_row_is_marked_and_shown_in_the_summary(run_zlbench):
    # Timed at real-time priority: a call preempted by another job would blur the two modes.
    res = run_zlbench(*ON_TIMING_CORPUS, "ops=[bimodal]", "timer.stop=adaptive", "timer.max_time_ms=300",
                      env={"ZL_FIXTURE_REALTIME": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_rows(res.run_dir)
    assert len(rows) == 2
    for row in rows:  # a third of the calls take 0.3 ms instead of 0.2 ms
        assert MARKER_BIMODAL in row["markers"] and row["timer_used"] == "host"
        assert row["mode_lo_ms"] == pytest.approx(0.2, rel=0.1) and row["mode_hi_ms"] == pytest.approx(0.3, rel=0.1)
        assert row["mode_hi_share"] == pytest.approx(1 / 3, abs=0.1)
    summary = (res.run_dir / "summary.md").read_text()
    assert "### Bimodal rows (BENCHMARK_BIMODAL)" in summary
    assert sum(1 for line in summary.splitlines() if line.startswith("| bimodal ") and "alternative" in line) == 2


@pytest.mark.slow
def test_replayed_throttled_clocks_discard_samples_in_a_real_run(run_zlbench, tmp_path):
    replay = tmp_path / "clocks.json"  # the device reports 900 MHz twice, then its maximum
    replay.write_text(json.dumps({"max_sm_mhz": 1980, "max_mem_mhz": 3201,
                                  "readings": [[900, 3201], [900, 3201]], "then": [1980, 3201]}))
    res = run_zlbench(*ON_TIMING_CORPUS, "ops=[steady]",
                      "timer.max_time_ms=300", env={"ZLBENCH_CLOCK_REPLAY": str(replay)})
    assert res.returncode == 0, res.stderr[-3000:]
    rows = read_rows(res.run_dir)
    first = rows[0]["timing_base"]  # the first timing call of the process read the two low clocks
    assert first["samples_discarded"] > 0 and first["sm_mhz"] == 1980
    assert all(f["sm_mhz"] == 1980 and f["mem_mhz"] == 3201 for r in rows for f in sides(r))
    assert sum(f["samples_discarded"] for r in rows for f in sides(r)) == first["samples_discarded"]
    ident = json.loads((res.run_dir / "run_identity.json").read_text())
    assert ident["clocks"]["sources"] == ["replay"] and ident["processes"][0]["clocks"]["reader"] == "replay"
    assert "sample(s) discarded for a low SM clock in 1 call(s)" in (res.run_dir / "summary.md").read_text()


def test_the_timing_line_names_the_target_only_where_it_decides():
    from zlbench.report.summary import timing_lines

    rows = [{"op": "exp", "dtype": "torch.float16", "shape": "[[64]]", "status": "ok", "stop_reason": "fixed"}]
    fixed = timing_lines(rows, {"timer": {"stop": "fixed", "target_rel": 0.005}})
    assert "- 1 timing calls stopped: fixed 1 (timer.stop=fixed)" in fixed
    adaptive = timing_lines([{**rows[0], "stop_reason": "target"}], {"timer": {"stop": "adaptive", "target_rel": 0.005}})
    assert "- 1 timing calls stopped: target 1 (timer.stop=adaptive, target +-0.5%)" in adaptive
