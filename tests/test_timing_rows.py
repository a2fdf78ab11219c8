"""What timing leaves in rows at defaults (the timer's own budget, its number passed through), how a
timing call is attributed to its row, old rows and run dirs of removed timer options still read, and
removed timer keys refused with their reason (issue 24 item 3)."""

import json
import statistics
from pathlib import Path

import pytest

from zlbench.config.keys import REMOVED
from zlbench.plugins import _runtime, timing
from zlbench.results.records import ROW_FIELDS, SAMPLING_FIELDS, Row
from zlbench.results.schema import MARKER_BIMODAL

from .conftest import FIXTURES

TIMING_CORPUS = FIXTURES / "timing_corpus"
# The fixture corpus' timer module is the one zlbench patches (FlagGems' is triton.testing).
ON_TIMING_CORPUS = ("corpus=flaggems", f"corpus.root={TIMING_CORPUS}", "corpus.timer_modules=[benchmark.timing]",
                    "backend=cpu")


@pytest.fixture
def plugin_config(tmp_path, monkeypatch):
    def make(backend="cpu", **timer):
        path = tmp_path / "plugin.json"
        path.write_text(json.dumps({"backend": backend, "timer": {"name": "direct", "fill_gaps": False, **timer}}))
        monkeypatch.setenv(_runtime.CONFIG_ENV, str(path))
        monkeypatch.setattr(_runtime, "_config", None)
        _runtime.timing_calls.clear()
    return make


def scripted_bench(batches, calls):
    """The corpus' direct timer: returns the median of the next batch."""
    batches = iter(batches)

    def bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
        calls.append({"warmup": warmup, "rep": rep, "quantiles": quantiles, "return_mode": return_mode})
        return statistics.median(next(batches))

    return bench


def test_direct_calls_the_corpus_timer_as_before_and_passes_its_number_through(plugin_config):
    plugin_config()
    calls = []
    policy, _ = timing.make_policy(scripted_bench([[0.123456, 0.2, 0.1]], calls), None)
    assert policy(lambda: None, warmup=7, rep=20, return_mode="median") == 0.123456
    assert calls == [{"warmup": 7, "rep": 20, "quantiles": None, "return_mode": "median"}]
    [call] = _runtime.timing_calls
    assert (call["timer_used"], call["markers"], call["reason"]) == ("direct", [], None)
    # Every sampling field a row carries, as before: the stop reason, the rest null.
    assert call["facts"] == {k: ("fixed" if k == "stop_reason" else None) for k in SAMPLING_FIELDS}


# -- rows, records, summary: rows of older runs still read ---------------------------------------
FACTS = {"stop_reason": "target", "samples": 40, "ci_rel": 0.002, "spread_rel": 0.01, "min_ms": 0.0029,
         "samples_discarded": 2, "sm_mhz": 1980.0, "mem_mhz": 3201.0, "mode_lo_ms": 0.003, "mode_hi_ms": 0.0033,
         "mode_hi_share": 0.4}


def test_a_timing_call_is_attributed_to_its_shape_and_side():
    from zlbench.plugins import record

    _runtime.timing_calls[:] = [{"timer_used": "graph", "markers": [], "reason": None, "facts": {"samples": i}}
                                for i in range(4)]
    timing_facts = record._markers_for_results([{}, {}])
    assert [(t["facts_base"]["samples"], t["facts"]["samples"]) for t in timing_facts] == [(0, 1), (2, 3)]
    _runtime.timing_calls[:] = [{"timer_used": "graph", "markers": [], "facts": {"samples": 1}}] * 3
    assert [t["facts"] for t in record._markers_for_results([{}, {}])] == [None, None]  # 3 calls for 2 shapes: unknown


def test_rows_of_adaptive_runs_and_of_runs_before_sampling_facts_still_read():
    assert set(SAMPLING_FIELDS) < set(ROW_FIELDS) and "timing_base" in ROW_FIELDS
    record = {"op_name": "exp", "dtype": "torch.float16", "result": []}
    result = {"shape_detail": [[64]], "latency": 0.003, "latency_base": 0.002}
    row = Row.from_result(record, result, {"timer_used": "graph", "markers": [MARKER_BIMODAL], "facts": FACTS,
                                           "facts_base": {**FACTS, "samples": 10}})
    assert (row.stop_reason, row.samples, row.mode_hi_share, row.timing_base["samples"]) == ("target", 40, 0.4, 10)
    old = Row.from_result(record, result, {"timer_used": "graph", "markers": []})
    assert old.stop_reason is None and old.samples is None and old.timing_base is None


def test_summary_of_an_adaptive_run_still_shows_its_stop_reasons_clocks_and_bimodal_rows():
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


def test_summary_of_a_run_with_placements_still_names_their_widest_spread():
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


# -- real runs on the CPU ------------------------------------------------------------------------
def read_rows(run_dir):
    return [json.loads(line) for line in (Path(run_dir) / "rows.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_rows_at_defaults_carry_the_corpus_timers_number(run_zlbench, tmp_path):
    res = run_zlbench(*ON_TIMING_CORPUS, "timer=direct", "ops=[steady]", "timer.processes=1")
    assert res.returncode == 0, res.stderr[-2000:]
    events = [json.loads(line) for p in (res.run_dir / "units").glob("*/events.jsonl")
              for line in p.read_text().splitlines()]
    results = [r for e in events if e["event"] == "record" for r in e["payload"]["result"]]
    rows = read_rows(res.run_dir)
    assert results and len(results) == len(rows)
    for r, row in zip(results, rows):
        # One call of the corpus' timer per timing call, asked what the corpus asked, its number kept.
        assert [c["return_mode"] for c in r["calls"]] == ["median", "median"]
        assert (row["latency_base"], row["latency"]) == (r["calls"][0]["value"], r["calls"][1]["value"])
        assert row["stop_reason"] == "fixed" and row["samples"] is None and row["timing_base"]["stop_reason"] == "fixed"
        assert row["timer_used"] == "direct" and row["markers"] == []
    # Nothing about the deleted adaptive stopping and clock screening in a run made now.
    summary = (res.run_dir / "summary.md").read_text()
    assert "timing calls stopped" not in summary and "clocks" not in summary and "## Timing" not in summary


@pytest.mark.slow
@pytest.mark.parametrize("arg", ["timer.stop=adaptive", "+timer.target_rel=0.01", "timer.clock_reader=auto",
                                 "timer.placements=5"])
def test_a_removed_timer_key_is_refused_with_its_reason(run_zlbench, arg):
    res = run_zlbench(*ON_TIMING_CORPUS, arg)
    key = arg.lstrip("+").split("=")[0]
    assert res.returncode == 2, res.stderr
    assert f"zlbench: error: {key} was removed: {REMOVED[key]}. Fix: drop {key}=." in res.stderr
    assert "Traceback" not in res.stderr and "settings of timer are" not in res.stderr
    assert not res.run_dir.exists()  # nothing left behind
