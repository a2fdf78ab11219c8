"""summary.md from synthetic rows: per-op lines keyed by test node, warnings about the rows."""

from zlbench.report.summary import per_op_table, render_summary


def row(op, node, latency_base, latency, shape="[[64]]", **kw):
    return {"op": op, "node": node, "side": "main", "dtype": "torch.float16", "shape": shape, "status": "ok",
            "latency_base": latency_base, "latency": latency, "speedup": latency_base / latency,
            "timer_used": "graph", **kw}


def test_an_op_with_tests_in_two_files_gets_a_line_per_file():
    rows = [row("mul", "benchmark/test_binary_pointwise_perf.py::test_perf_mul", 1.0, 1.0),
            row("mul", "benchmark/test_blas_perf_parallel.py::test_perf_mul[case]", 3.0, 1.0),
            row("exp", "benchmark/test_exp.py::test_perf_exp", 2.0, 1.0)]
    table = per_op_table(rows)
    assert [(line[0], line[6]) for line in table] == [
        ("exp", "2"),
        ("mul (benchmark/test_binary_pointwise_perf.py)", "1"),
        ("mul (benchmark/test_blas_perf_parallel.py)", "3")]
