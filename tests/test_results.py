import json

import pytest

from zlbench.batch_summary import main as batch_summary
from zlbench.errors import UsageError
from zlbench.plugins import _runtime
from zlbench.plugins.record import _markers_for_results
from zlbench.results.flaggems_log import rows_from_log

RECORD = {"op_name": "exp", "dtype": "torch.float16", "mode": "kernel", "level": "core", "result": [
    {"legacy_shape": [64], "shape_detail": [[64]], "latency_base": 0.01, "latency": 0.02, "speedup": 0.5,
     "error_msg": None},
    {"legacy_shape": [128], "shape_detail": [[128]], "latency_base": 0.03, "latency": 0.02, "speedup": 1.5,
     "error_msg": None}]}


def write_log(path, lines):
    path.write_text("\n".join(["[INFO] Benchmark record logger enabled"] + lines) + "\n")
    return path


def test_flaggems_log_rows(tmp_path):
    log = write_log(tmp_path / "result_test_exp.log", ["[INFO] " + json.dumps(RECORD), "[INFO] [{\"op_name\": \"x\"}]"])
    rows = rows_from_log(log)
    assert [(r["op"], r["shape"], r["latency"]) for r in rows] == [("exp", "[[64]]", 0.02), ("exp", "[[128]]", 0.02)]


def test_malformed_log_names_the_line(tmp_path):
    log = write_log(tmp_path / "bad.log", ["[INFO] " + json.dumps(RECORD), '[INFO] {"op_name": "exp", "result": [ }'])
    with pytest.raises(UsageError, match=r"bad.log:3: malformed result record"):
        rows_from_log(log)


def test_log_without_records_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="holds no"):
        rows_from_log(write_log(tmp_path / "empty.log", []))


def test_batch_summary_of_a_log_and_bad_input(tmp_path, capsys):
    log = write_log(tmp_path / "result.log", ["[INFO] " + json.dumps(RECORD)])
    assert batch_summary([str(log)]) == 0
    out = capsys.readouterr().out
    assert "| exp" in out and "float16" in out
    assert batch_summary([str(tmp_path / "missing.log")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_timing_markers_attach_to_their_shape():
    _runtime.timing_calls[:] = [
        {"timer_used": "graph", "markers": [], "reason": None},
        {"timer_used": "graph", "markers": [], "reason": None},
        {"timer_used": "graph", "markers": [], "reason": None},
        {"timer_used": "direct", "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"], "reason": "capture refused"},
    ]
    per_shape = _markers_for_results(2)
    assert per_shape[0]["markers"] == [] and per_shape[0]["timer_used"] == "graph"
    assert per_shape[1]["markers"] == ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]
    assert per_shape[1]["timer_used"] == "direct" and per_shape[1]["timer_used_base"] == "graph"
    assert _runtime.timing_calls == []


def test_unaligned_timing_calls_over_mark_rather_than_lose_a_fallback():
    _runtime.timing_calls[:] = [{"timer_used": "direct", "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"], "reason": "x"}]
    per_shape = _markers_for_results(3)
    assert all(p["markers"] == ["BENCHMARK_DIRECT_NO_CUDAGRAPH"] for p in per_shape)
