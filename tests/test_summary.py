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


def host(op, latency_base, latency, shape):
    return row(op, f"benchmark/test_{op}.py::test_perf_{op}", latency_base, latency, shape, timer_used="host",
               timer_used_base="host")


QUIET = [host("exp", 0.0135, 0.19, "[[64]]"), host("exp", 0.03, 0.2, "[[256]]"),
         host("softmax", 0.17, 1.18, "[[1024]]"), host("mm", 0.005, 0.017, "[[64,64]]")]


def test_rows_of_a_busy_cpu_are_called_out_in_the_summary():
    from zlbench.report.summary import contention_warning

    assert contention_warning(QUIET) is None
    assert "Warning" not in render_summary(QUIET, [], "t")
    # Quantized to a 4 ms scheduler slice: 1147x "faster" (the torch call lost its core).
    busy = QUIET + [host("add", 4.013, 0.0035, "[[64]]"), host("gelu", 0.004, 4.0, "[[64]]")]
    warning = contention_warning(busy)
    assert warning.startswith("2 of 6 host-timed rows look contended")
    assert "add float16 [[64]]: torch 4.013 ms, alternative 0.0035 ms" in warning
    assert f"> **Warning**: {warning}" in render_summary(busy, [], "t")
    # Device timers are not judged by the CPU's scheduler: a 100x GPU row is the op's own.
    assert contention_warning([row("exp", "t.py::test_exp", 2.0, 0.02)]) is None


def test_a_round_that_jumps_against_the_same_rows_other_rounds_is_called_out():
    from zlbench.report.summary import contention_warning

    rounds = [{**host("softmax", 0.17, 0.25, "[[1024]]"), "round": r} for r in range(5)]
    assert contention_warning(rounds) is None
    rounds[3].update(latency=4.1, speedup=0.17 / 4.1)  # one round of gems waited out a 4 ms slice
    assert contention_warning(rounds).startswith("1 of 5 host-timed rows look contended")
    # A side of a millisecond or more that stays within 10x of its rounds' median is the op's own.
    for r in rounds:
        r.update(latency=2.0 if r["round"] == 3 else 0.25)
    assert contention_warning(rounds) is None


def test_ab_columns_of_a_row_that_stopped_early_use_the_rounds_its_change_rests_on(tmp_path):
    """Issue 26: a row settled at round 4 while its node ran on to round 8 for a noisier row; its A and
    B columns covered all 8 rounds while change, interval and verdict rest on 4 (B 20% faster there,
    slower after): the columns contradicted the change. Now one set of rounds for every column."""
    import math

    from zlbench.report.ab import compare, write

    node = "benchmark/test_norm.py::test_layer_norm"
    settled_b = [0.80, 0.81, 0.79, 0.80, 1.30, 1.31, 1.29, 1.30]  # B/A per round; A = 1 ms
    noisy_b = [1.05, 0.95, 1.04, 0.97, 1.06, 0.94, 1.03, 0.96]

    def side(b):
        return [{"op": "layer_norm", "dtype": "torch.bfloat16", "shape": shape, "round": r, "status": "ok",
                 "node": node, "markers": [], "latency": x if b else 1.0}
                for shape, xs in (("[[1024]]", settled_b), ("[[64]]", noisy_b)) for r, x in enumerate(xs)]

    res = compare(side(False), side(True), "off", "on", stops={node: {"why": "settled", "round": 8}},
                  rounds={"min": 4, "max": 10})
    for t in res["rows"]:
        assert math.isclose(t["b_ms"] / t["a_ms"] - 1, t["change_pct"] / 100, rel_tol=1e-3, abs_tol=1e-5), t
    settled = next(t for t in res["rows"] if t["shape"] == "[[1024]]")
    assert settled["verdict"] == "faster" and settled["look"] == 4 and settled["rounds"] == 8
    assert math.isclose(settled["b_ms"], math.exp(sum(math.log(x) for x in settled_b[:4]) / 4), rel_tol=1e-9)
    assert "| 8 (settled at 4) " in res["markdown"]
    write(res, tmp_path)
    import csv
    row = next(r for r in csv.DictReader(open(tmp_path / "ab.csv")) if r["shape"] == "[[1024]]")
    assert float(row["b_ms"]) < 0.81


def test_a_plain_run_s_summary_has_no_side_column_and_names_its_estimators():
    """Issue 26: a plain run showed `side: main` on every line; the header now says which value is a
    median and which a geometric mean."""
    plain = [row("exp", "benchmark/test_unary.py::test_exp", 0.2, 0.1),
             row("exp", "benchmark/test_unary.py::test_exp", 0.4, 0.1, shape="[[128]]")]
    text = render_summary(plain, [{"op": "exp", "test_node": "benchmark/test_unary.py::test_exp", "status": "ok"}], "t")
    header = next(line for line in text.splitlines() if line.startswith("| op"))
    assert "side" not in header and "main" not in text
    assert "torch ms (median)" in header and "speedup (geomean)" in header
    line = next(line for line in text.splitlines() if line.startswith("| exp"))
    assert line.split("|")[2].strip() == "float16"
    assert "geometric mean" in text and "median" in text
    ab = [{**r, "side": side} for r in plain for side in ("off", "on")]
    header_ab = next(line for line in render_summary(ab, [], "t").splitlines() if line.startswith("| op"))
    assert header_ab.split("|")[2].strip() == "side"


def test_rows_whose_intervals_are_equally_wide_summarise():
    """An A/B side pair (or two shapes) with intervals of the same relative width: the Processes
    section sorted (width, row) pairs and compared the rows themselves on a tie (TypeError)."""
    rows = [{**row("exp", "benchmark/test_unary.py::test_exp", 0.2, 0.1, shape=shape), "processes": 3,
             "latency_ci": [0.09, 0.11]} for shape in ("[[64]]", "[[128]]")]
    text = render_summary(rows, [], "t")
    assert "- interval width (hi - lo) / latency: median 20%, p90 20%, widest 20% (exp float16 [[128]])" in text


def test_rows_that_launched_no_device_work_are_named_and_kept_out_of_the_widths():
    from zlbench.results.schema import MARKER_NO_DEVICE_WORK

    kernel = {**row("exp", "benchmark/test_unary.py::test_exp", 0.2, 0.1), "processes": 3, "latency_ci": [0.09, 0.11]}
    view = {**row("einsum", "benchmark/test_einsum.py::test_einsum_transpose", 1.2e-6, 1.4e-6, shape="[[1024,1024]]"),
            "processes": 3, "latency_ci": None, "markers": [MARKER_NO_DEVICE_WORK]}
    text = render_summary([kernel, view], [], "t")
    assert f"> 1 row(s) launched no device work on a side ({MARKER_NO_DEVICE_WORK}" in text
    assert "e.g. einsum float16 [[1024,1024]]" in text
    assert "widest 20% (exp float16 [[64]])" in text
    # its speedup (0.86: nanoseconds of replay noise) is no op's speedup: left out, and counted
    line = next(x for x in text.splitlines() if x.startswith("| einsum"))
    assert "0.857" not in line and "graph (1 no device work)" in line, line
    both = render_summary([kernel, {**view, "op": "exp", "node": kernel["node"], "shape": "[[8]]"}], [], "t")
    line = next(x for x in both.splitlines() if x.startswith("| exp"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert cells[2:] == ["2", "0.1", "0.05", "2", "2..2", "graph (1 no device work)"], cells  # the kernel row alone


def test_plots_draw_whatever_mplbackend_says():
    """zlbench only writes image files: an MPLBACKEND matplotlib does not know (a leftover from a
    desktop session) must not fail the report after every node was measured (it was exit 70)."""
    import os
    import subprocess
    import sys

    res = subprocess.run([sys.executable, "-c", "import zlbench.report.plots as p; print(p.plt.get_backend())"],
                         env={**os.environ, "MPLBACKEND": "no-such-backend"}, capture_output=True, text=True)
    assert res.returncode == 0 and res.stdout.strip().lower() == "agg", res.stderr[-2000:]


def test_the_processes_section_says_which_rows_have_no_interval():
    """A run cut before its second process had no Processes section at all; one where some rows had
    no interval said every row carried one."""
    from zlbench.report.summary import process_lines

    def row(op, ci):
        return {"op": op, "dtype": "torch.float32", "shape": "[[64]]", "status": "ok", "latency": 1.0,
                "processes": 3 if ci else 1, "latency_ci": [0.99, 1.01] if ci else None, "markers": []}

    identity = {"timer": {"processes": 3}}
    cut = process_lines([row("exp", False), row("abs", False)], identity)
    assert cut[0] == "## Processes" and "2 row(s) measured in fewer processes than the 3 planned" in cut[2], cut
    cut_short = [{"status": "interrupted", "resumable": True}]
    assert "(resume the run to measure the others)" in process_lines([row("exp", False)], identity, cut_short)[2]
    # the other processes timed out (launcher.node_timeout_s): a resume would measure nothing, and said it would
    timed_out = [{"status": "timeout", "resumable": False}, {"status": "ok"}]
    said = process_lines([row("exp", False)], identity, timed_out)[2]
    assert "the other processes ended timeout (ops_status.csv says why): a resume does not run them again" in said
    assert "resume the run to measure" not in said
    mixed = "\n".join(process_lines([row("exp", True), row("abs", False)], identity))
    assert "; 1 row(s) have none (one process, and too few tests of its timer measured in several to borrow a spread from)" in mixed, mixed
    assert "have none" not in "\n".join(process_lines([row("exp", True)], identity))


def test_the_processes_section_says_more_processes_timed_the_op_only_for_runs_that_did():
    """Runs made from 9279d69 to 2026-12-06 timed the op only in their more processes (the baseline's
    interval is the planned processes'); since, they time the baseline too, and a row whose baseline
    one of its processes failed is no sign of the old regime."""
    from zlbench.report.summary import process_lines

    def row(node, processes, base_processes):
        return {"op": node, "node": f"t.py::test_{node}", "dtype": "torch.float32", "shape": "[[64]]",
                "status": "ok", "latency": 0.05, "latency_base": 0.05, "processes": processes,
                "latency_ci": [0.049, 0.051], "markers": [], "timing_base": {"processes": base_processes}}

    identity = {"timer": {"processes": 3}}
    said = "the more processes timed the op only, the baseline is the planned 3'"
    old = "\n".join(process_lines([row("a", 5, 3), row("b", 3, 3)], identity))
    assert "1 node(s) got more processes than the 3 planned" in old and said in old, old
    new = "\n".join(process_lines([row("a", 5, 5), row("c", 5, 4), row("b", 3, 3)], identity))
    assert "2 node(s) got more processes than the 3 planned" in new and said not in new, new


def test_an_ab_run_s_summary_has_no_processes_section():
    """An A/B's rows are its sides' rounds (one process each, no process-level interval: ab.md judges
    them); its summary.md said "776 row(s) measured in fewer processes than the 3 planned ... resume the
    run" (a GPU A/A, 2026-12-05), sending its user to resume a finished run."""
    from zlbench.report.summary import process_lines

    ab = [{**row("exp", "benchmark/test_unary.py::test_exp", 0.2, 0.1), "side": side, "round": r, "processes": None,
           "latency_ci": None} for side in ("off", "on") for r in (0, 1)]
    identity = {"timer": {"processes": 3}, "config": {"ab": {"var": "TRITON_DEFAULT_FP_FUSION"}}}
    assert process_lines(ab, identity) == []
    assert "## Processes" not in render_summary(ab, [], "t", identity) and "fewer processes" not in \
        render_summary(ab, [], "t", identity)
    plain = [{**r, "side": "main", "round": None} for r in ab[:1]]  # the same row of a plain run cut short
    assert "1 row(s) measured in fewer processes than the 3 planned" in "\n".join(process_lines(plain, identity))


def test_a_run_resumed_on_another_gpu_says_so(tmp_path):
    """The device UUIDs its processes recorded under one index differ (a resume on another machine,
    2026-12-05): summary.md says so, and what it means for a plain run's rows; an A/B's note says
    whether each node's two sides of a round ran on one GPU, from its processes' events."""
    import json

    from zlbench.report.run_report import gpus_note
    from zlbench.results.rundir import devices_swapped, pairs_apart, swapped_note

    procs = [{"device": 0, "device_uuid": "326c3d9b-b1cb"}, {"device": 0, "device_uuid": "d4c8fff3-8ae9"},
             {"device": 1, "device_uuid": "aaaa0000-1111"}]
    identity = {"timer": {"processes": 3}, "processes": procs, "config": {"ab": {"var": None}}}
    assert devices_swapped(identity) == {0: ["326c3d9b-b1cb", "d4c8fff3-8ae9"]}
    note = swapped_note(identity, ab=False)
    text = render_summary([row("exp", "benchmark/test_unary.py::test_exp", 0.2, 0.1)], [], "t", identity, note)
    assert "- **GPUs changed**: device 0 was 2 GPUs (326c3d9b, d4c8fff3)" in text
    assert "rows' processes ran on different GPUs" in text
    one_gpu = {**identity, "processes": procs[:1] + procs[2:]}  # two devices of a pool, one GPU each
    assert devices_swapped(one_gpu) == {} and swapped_note(one_gpu, ab=False) is None

    # An A/B: round 0 on the first GPU; round 1 cut between its sides, the on side resumed elsewhere.
    def unit(uid, uuid, pid, nodes):
        path = tmp_path / "units" / uid / "events.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        events = [{"event": "process", "pid": pid, "facts": {"device_uuid": uuid}}]
        events += [{"event": "record", "pid": pid, "node": n} for n in nodes]
        path.write_text("".join(json.dumps(e) + "\n" for e in events))

    unit("off.r0.d0.s0", "326c3d9b-b1cb", 1, ["t::a", "t::b"])
    unit("on.r0.d0.s0", "326c3d9b-b1cb", 2, ["t::a", "t::b"])
    unit("off.r1.d0.s0", "326c3d9b-b1cb", 3, ["t::a", "t::b"])
    assert pairs_apart(tmp_path, ["off", "on"]) == (0, 2)
    ab_identity = {**identity, "config": {"ab": {"var": "X", "sides": ["off", "on"]}}}
    assert "each node's two sides of a round ran on one GPU (2 pairs" in gpus_note(tmp_path, ab_identity, ["off", "on"])
    unit("on.r1.d0.s0", "d4c8fff3-8ae9", 4, ["t::a", "t::b"])
    assert pairs_apart(tmp_path, ["off", "on"]) == (2, 4)
    assert "2 of 4 node-round pairs ran their two sides on different GPUs" in gpus_note(
        tmp_path, ab_identity, ["off", "on"])
    # one side of an A/B in this run (ab.side=on): nothing is paired here, its rounds mix GPUs
    assert "rows' processes ran on different GPUs" in gpus_note(tmp_path, ab_identity, ["on"])


def test_percentages_never_read_in_exponent_form():
    """A CPU process slowed by load made an interval 6.6 times its row: summary.md read '6.6e+02%'."""
    from zlbench.report.summary import _pct

    assert [_pct(x) for x in (0.064, 0.31, 1.0, 6.6, 12.345, None)] == ["6.4%", "31%", "100%", "660%", "1234%", "-"]


def test_the_widest_rows_whose_processes_read_apart_are_judged_on_the_side_that_did():
    """A row marked for its torch baseline alone is ranked by torch's interval, not by the op's (which
    its processes did not make wide): the op row 1.0 .. 3.0 comes first, then torch's 0.5 .. 1.2."""
    from zlbench.report.summary import _unstable_line

    marked = ["BENCHMARK_PROCESS_UNSTABLE"]
    op_apart = row("pick", "t.py::test_pick", 1.0, 2.0, markers=marked, latency_ci=[1.0, 3.0],
                   marker_reason="processes read 1, 2, 2.9 ms")
    torch_apart = row("base", "t.py::test_base", 1.0, 2.0, markers=marked, latency_ci=[1.99, 2.01],
                      timing_base={"latency_ci": [0.5, 1.2]}, marker_reason="torch processes read 0.5, 1, 1.1 ms")
    wide_op_only = row("noisy", "t.py::test_noisy", 1.0, 2.0, markers=marked, latency_ci=[0.4, 8.0],
                       timing_base={"latency_ci": [0.99, 1.01]}, marker_reason="torch processes read 0.9, 1, 1.1 ms")
    line = _unstable_line([torch_apart, wide_op_only, op_apart])
    names = [part.split(" float16")[0] for part in line.split("widest: ")[1].split("; ")]
    assert names == ["pick", "base", "noisy"], line


def test_a_one_side_table_of_rounds_says_its_rows_are_rounds():
    """One side's rows over two rounds (a side of an `ab.side=off,on` sweep): the legend of rounds,
    though the side column is dropped (it was chosen after the columns moved, reading the torch cell)."""
    from zlbench.report.summary import _results_lines

    rs = [row("exp", "t.py::test_exp", 1.0, 0.5, round=r) for r in (0, 1)]
    text = "\n".join(_results_lines(rs))
    assert "1 x 2 rounds" in text and "the median over shapes and rounds of each row's latency" in text, text
    text = "\n".join(_results_lines([row("exp", "t.py::test_exp", 1.0, 0.5)]))
    assert "a row's latency: a plain run's median over its processes; in an A/B side's run.<side>.log, the " \
        "geometric mean over its rounds" in text, text


def test_a_logs_rows_with_no_identity_say_nothing_of_planned_processes():
    # a side's run.off.log read alone said "measured in fewer processes than the None planned" (a review)
    from zlbench.report.summary import process_lines

    assert process_lines([row("exp", "t.py::test_exp", 1.0, 0.5)], None) == []
    cut = process_lines([row("exp", "t.py::test_exp", 1.0, 0.5)], {"timer": {"processes": 3}})
    assert "fewer processes than the 3 planned" in cut[2], cut
