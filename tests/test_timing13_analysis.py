"""benchmarks/gpu/timing13_analysis.py on synthetic runs whose answers are known (the GPU call
that produces the real ones is too dear to find a bug in the analysis)."""

import importlib.util
import json

import pytest

from .conftest import REPO

spec = importlib.util.spec_from_file_location("timing13_analysis", REPO / "benchmarks/gpu/timing13_analysis.py")
analysis = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analysis)


def write_run(root, name, scale, files=analysis.FILES, bimodal=False):
    rows = []
    for i, f in enumerate(files):
        for shape in (64, 4096):
            latency = (0.001 if shape == 64 else 0.05) * (1 + i / 10) * scale
            rows.append({"op": f[5:-3], "dtype": "torch.float16", "shape": f"[[{shape}]]", "status": "ok",
                         "node": f"benchmark/{f}::test_x", "latency": latency, "latency_base": latency * 1.1,
                         "markers": ["BENCHMARK_BIMODAL"] if bimodal and shape == 64 else [],
                         "stop_reason": "target", "samples": 10, "ci_rel": 0.001, "samples_discarded": 0,
                         "sm_mhz": 1980.0, "mem_mhz": 3201.0, "mode_lo_ms": 0.001 if bimodal and shape == 64 else None,
                         "mode_hi_ms": 0.0011 if bimodal and shape == 64 else None, "mode_hi_share": 0.3,
                         "timing_base": {"stop_reason": "max_time", "samples": 30, "samples_discarded": 2}})
    rows.append({**rows[0], "node": "benchmark/test_blas_perf_parallel.py::x", "op": "other"})  # not one of the files
    (root / name).mkdir(parents=True)
    (root / name / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / name / "run_identity.json").write_text(json.dumps({"processes": [{"clocks": {"reader": "nvml"}}]}))


def test_the_analysis_reports_noise_agreement_wall_clocks_and_modes(tmp_path):
    runs = tmp_path / "call1" / "runs"
    for i, scale in enumerate((1.0, 1.01, 0.98), 1):
        write_run(runs, f"graph_{i}", scale, bimodal=i == 1)
    later = tmp_path / "call2" / "runs"  # a second call's archive, extracted beside the first
    write_run(later, "direct_1", 1.0)
    write_run(later, "direct_2", 1.05)
    (tmp_path / "call1" / "wall.txt").write_text("graph_1 50.0 rc=0\ngraph_2 52.0 rc=0\ngraph_3 51.0 rc=0\n")
    (tmp_path / "call2" / "wall.txt").write_text("native_cudagraph 102.0 rc=0\ndirect_1 40 rc=0\n")
    native = [{"op_name": f[5:-3], "dtype": "torch.float16", "result": [
        {"shape_detail": [[4096]], "latency": 0.05 * (1 + i / 10) / 1.02, "latency_base": 0.055 * (1 + i / 10)}]}
        for i, f in enumerate(analysis.FILES)]
    (later / "native_cudagraph.log").write_text("".join("[INFO] " + json.dumps(r) + "\n" for r in native))
    out = tmp_path / "t.json"
    assert analysis.main([str(runs), str(later), "--json", str(out), "--md", str(tmp_path / "t.md")]) == 0
    res = json.loads(out.read_text())
    graph = res["groups"]["graph"]
    assert graph["rows_per_run"] == [16, 16, 16] and graph["wall_s"] == [50.0, 52.0, 51.0]
    # pairs: 1.01/1 - 1 = 1%, 0.98/1 - 1 = 2%, 0.98/1.01 - 1 = 2.97%: max 2.97%
    assert graph["run_to_run"]["flaggems"]["all"]["max_pct"] == pytest.approx(2.97, abs=0.01)
    assert graph["run_to_run"]["flaggems"]["from_20us"]["rows"] == 24
    assert res["groups"]["direct"]["run_to_run"]["torch"]["all"]["p50_pct"] == pytest.approx(5.0, abs=0.01)
    # zlbench's median of (1, 1.01, 0.98) over FlagGems' 1/1.02: 1.02; torch rows agree to 1.0
    agree = res["agreement_graph_vs_native_cudagraph_from_20us"]
    assert agree["flaggems"]["rows"] == 8 and agree["flaggems"]["p50"] == pytest.approx(1.02, abs=1e-4)
    assert agree["torch"]["p50"] == pytest.approx(1.0, abs=1e-4)
    assert res["wall_graph_pass_over_native_cudagraph"] == pytest.approx(51.0 / 102.0, abs=1e-3)
    s = graph["sampling"]
    assert s["stop_reasons"] == {"target": 48, "max_time": 48} and s["samples_discarded"] == 96
    assert s["bimodal_calls"] == {"flaggems": 8, "torch": 0} and s["bimodal_rows_marked"] == 8
    assert graph["readers"] == {"nvml": 3} and "fixed" not in res["groups"]
    assert "| graph | 3 | 50.0/52.0/51.0 |" in (tmp_path / "t.md").read_text()
