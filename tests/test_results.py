import csv
import json
import subprocess
import sys

import pytest

from zlbench.report.batch_summary import main as batch_summary
from zlbench.errors import UsageError
from zlbench.plugins import _runtime
from zlbench.plugins.record import _markers_for_results
from zlbench.results.flaggems_log import rows_from_log
from zlbench.results.tables import side_log

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
    with pytest.raises(UsageError, match=r"bad.log:3: malformed result record") as e:
        rows_from_log(log)
    assert str(e.value).endswith("Fix: repair or delete that line (each `[INFO] {...}` line is one JSON "
                                 "object), or add --skip-bad-lines to read the rest of the log.")


def test_batch_summary_skips_malformed_log_lines_when_asked_and_counts_them(tmp_path):
    other = {**RECORD, "op_name": "softmax"}
    log = write_log(tmp_path / "result_test.log", [
        "[INFO] " + json.dumps(RECORD), '[INFO] {"op_name": "exp", "result": [ }',
        '[INFO] {"op_name": "add", "result": "oops"}', "[INFO] " + json.dumps(other), '[INFO] {"op_name": "sum", "res'])
    cmd = [sys.executable, "-m", "zlbench", "summary", str(log)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 2 and f"zlbench: error: {log}:3: malformed result record" in res.stderr
    assert "{{" not in res.stderr
    res = subprocess.run(cmd + ["--skip-bad-lines"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert f"zlbench: skipped 3 malformed line(s) of {log}: 3, 4, 6\n" in res.stderr
    assert "| exp" in res.stdout and "| softmax" in res.stdout
    # ... and the summary itself says so (summary.md is what gets shared, stderr is not)
    assert (f"> **Note**: Skipped 3 malformed line(s) of {log}: 3, 4, 6 (--skip-bad-lines): their records are in no "
            "table here.") in res.stdout.split("## Status")[0], res.stdout


def test_batch_summary_of_tables_without_an_identity_says_what_it_cannot_know(tmp_path):
    """A folder of a run's tables whose run_identity.json is gone: summarized, and said so."""
    (tmp_path / "rows.jsonl").write_text(json.dumps({"op": "exp", "dtype": "torch.float16", "shape": "[[64]]",
                                                     "latency": 0.5, "latency_base": 1.0, "speedup": 2.0,
                                                     "status": "ok", "side": "main", "node": "t.py::test_exp"}) + "\n")
    (tmp_path / "ops_status.csv").write_text("op,test_node,side,status,rows,backend,device,timer,wall_s,reason,host,"
                                             "job_id\nexp,t.py::test_exp,main,ok,1,cpu,0:cpu,host,0.5,,h,\n")
    res = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert (f"> **Note**: {tmp_path} holds no run_identity.json: its backend, devices, timer and caliber are unknown "
            "here") in res.stdout, res.stdout


@pytest.mark.slow
def test_a_truncated_rows_file_points_at_collect_which_rebuilds_it(run_zlbench):
    res = run_zlbench("ops=[exp]", "dtypes=[float32]")
    assert res.returncode == 0, res.stderr[-2000:]
    with open(res.run_dir / "ops_status.csv") as f:
        assert [(s["op"], s["status"]) for s in csv.DictReader(f)] == [("exp", "ok")]  # it measured
    rows = res.run_dir / "rows.jsonl"
    text = rows.read_text()
    rows.write_text(text[:-20])  # a torn last line
    lines = len(text.splitlines())
    summary = [sys.executable, "-m", "zlbench", "summary", str(res.run_dir)]
    out = subprocess.run(summary, capture_output=True, text=True)
    assert out.returncode == 2
    assert (f"{rows}:{lines}: malformed row" in out.stderr
            and f"Fix: run `zlbench collect {res.run_dir}` to rebuild it from the events." in out.stderr)
    assert subprocess.run([sys.executable, "-m", "zlbench", "collect", str(res.run_dir)],
                          capture_output=True, text=True).returncode == 0
    assert rows.read_text() == text
    out = subprocess.run(summary, capture_output=True, text=True)
    assert out.returncode == 0 and "| exp" in out.stdout


@pytest.mark.slow
def test_collect_names_event_lines_it_cannot_read_and_a_process_whose_events_are_gone(run_zlbench, tmp_path):
    res = run_zlbench("ops=[exp]", "dtypes=[float32]", "timer.processes=2")
    assert res.returncode == 0, res.stderr[-2000:]
    collect = [sys.executable, "-m", "zlbench", "collect", "--store-url", "none"]
    # A record line cut in half (a full disk, an edit): the row it held is lost, and collect says where.
    torn = res.run_dir / "units" / "main.r1.d0.s0" / "events.jsonl"
    lines = torn.read_text().splitlines(True)
    at = next(i for i, line in enumerate(lines) if '"event": "record"' in line)
    torn.write_text("".join(lines[:at] + [lines[at][:40] + "\n", "[1, 2]\n"] + lines[at + 1:]))
    out = subprocess.run([*collect, str(res.run_dir)], capture_output=True, text=True)
    said = f"units/main.r1.d0.s0/events.jsonl: 2 line(s) hold no event (line {at + 1}, {at + 2})"
    assert out.returncode == 0 and said in out.stderr, out.stderr[-2000:]
    assert said in (res.run_dir / "summary.md").read_text()
    # Another unit's events copied over this one's: its process would count twice, unsaid.
    torn.write_text((res.run_dir / "units" / "main.r0.d0.s0" / "events.jsonl").read_text())
    out = subprocess.run([*collect, str(res.run_dir)], capture_output=True, text=True)
    assert "units/main.r1.d0.s0/events.jsonl holds the events of main.r0.d0.s0" in out.stderr, out.stderr[-2000:]
    # A process whose events are all gone: its node was measured in 1 of 2 processes, resumable.
    torn.write_text("xx\n")
    out = subprocess.run([*collect, str(res.run_dir)], capture_output=True, text=True)
    assert out.returncode == 4, out.stderr[-2000:]
    with open(res.run_dir / "ops_status.csv") as f:
        (status,) = list(csv.DictReader(f))
    assert status["status"] == "interrupted" and status["reason"].startswith("measured in 1 of 2 processes")
    assert "Run cut short" in (res.run_dir / "summary.md").read_text()


@pytest.mark.slow
def test_collect_records_the_run_where_the_run_did(run_zlbench, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "ZLBENCH_STORE_URL"}
    other = f"sqlite:///{tmp_path / 'other.db'}"
    for url, said in ((other, f"store {other}: unchanged"), ("none", None)):
        res = run_zlbench("ops=[exp]", "dtypes=[float32]", f"store.url={url}", run_dir=tmp_path / url[:4])
        assert res.returncode == 0, res.stderr[-2000:]
        out = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(res.run_dir)], capture_output=True,
                             text=True, env=env)
        assert out.returncode == 0 and (said in out.stderr if said else "store" not in out.stderr), out.stderr
    assert not (tmp_path / "zlbench.db").exists()  # nothing went to the default store beside them


def test_an_event_written_after_a_torn_line_is_kept(tmp_path):
    from zlbench.results import events as ev

    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "start", "node": "a"}\n{"event": "rec')  # a writer killed mid-line
    ev.append(path, "exited", code=0)
    writer = ev.EventWriter(str(path))
    writer.emit("start", node="b")
    writer.close()
    assert [e["event"] for e in ev.read_events(path)] == ["start", "exited", "start"]
    assert ev.read_checked(path)[1] == [2]


def test_a_test_whose_next_case_started_and_never_ended_is_not_done():
    """The whole run killed (its worker too) after one case of a parametrized test ended and the next
    started: nothing wrote a placeholder, and the test must not read as measured."""
    from zlbench.results import events as ev

    events = [{"event": "start", "node": "b/t.py::f[a]"}, {"event": "end", "node": "b/t.py::f[a]", "status": "ok"},
              {"event": "start", "node": "b/t.py::f[b]"}]
    assert ev.final_ends(events) == {} and ev.done_nodes(events) == set()
    events.append({"event": "end", "node": "b/t.py::f[b]", "status": "ok"})
    assert list(ev.final_ends(events)) == ["b/t.py::f"]


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
    # --out without --ab: summary.md goes there (it wrote nothing before, silently).
    assert batch_summary([str(log), "--out", str(tmp_path / "out")]) == 0
    assert "| exp" in (tmp_path / "out" / "summary.md").read_text()


def test_a_record_without_a_name_or_a_result_is_malformed_and_counted(tmp_path, capsys):
    log = write_log(tmp_path / "result.log", ["[INFO] " + json.dumps(RECORD), '[INFO] {"op_name": 5, "result": []}',
                                              '[INFO] {"op_name": "exp"}'])
    with pytest.raises(UsageError, match=r"result.log:3: malformed result record \(its op_name is 5, not a name\)"):
        rows_from_log(log)
    skipped = []
    assert len(rows_from_log(log, skipped)) == 2 and skipped == [3, 4]
    bad = write_log(tmp_path / "bad.log", ['[INFO] {"op_name": "exp"}', '[INFO] {"op_name": "exp", "result": [ }'])
    assert batch_summary([str(bad), "--skip-bad-lines"]) == 2
    assert "every result record of it is malformed (2 skipped, lines 2, 3)" in capsys.readouterr().err
    # A record with no cases is a record: the log is not "every record malformed" for it.
    empty = write_log(tmp_path / "empty.log", ['[INFO] {"op_name": "exp", "result": []}', '[INFO] {"op_name": 5}'])
    assert batch_summary([str(empty), "--skip-bad-lines"]) == 2
    assert "holds no `[INFO] {json}` result records" in capsys.readouterr().err


def test_timing_markers_attach_to_their_shape():
    _runtime.timing_calls[:] = [
        {"timer_used": "graph", "markers": [], "reason": None},
        {"timer_used": "graph", "markers": [], "reason": None},
        {"timer_used": "graph", "markers": [], "reason": None},
        {"timer_used": "direct", "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"], "reason": "capture refused"},
    ]
    per_shape = _markers_for_results([{}] * 2)
    assert per_shape[0]["markers"] == [] and per_shape[0]["timer_used"] == "graph"
    assert per_shape[1]["markers"] == ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]
    assert per_shape[1]["timer_used"] == "direct" and per_shape[1]["timer_used_base"] == "graph"
    assert _runtime.timing_calls == []


def test_unaligned_timing_calls_over_mark_rather_than_lose_a_fallback():
    _runtime.timing_calls[:] = [{"timer_used": "direct", "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"], "reason": "x"}]
    per_shape = _markers_for_results([{}] * 3)
    assert all(p["markers"] == ["BENCHMARK_DIRECT_NO_CUDAGRAPH"] for p in per_shape)


def _fake_run(tmp_path, processes, result_fields=None, timing=({"timer_used": "graph"},)):
    """A run dir of two devices whose units each report one process and one record."""
    units = [{"unit_id": f"u{d}", "device": d, "side": "main", "round": 0} for d in (0, 1)]
    plan = {"backend": "cuda", "timer": "graph", "nodes": [], "units": units, "devices": [
        {"index": 0, "name": "NVIDIA H200", "bus_id": "00000000:19:00.0"},
        {"index": 1, "name": "NVIDIA H200", "bus_id": "00000000:3B:00.0"}]}
    tmp_path.mkdir(parents=True)
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    for unit, bus in zip(units, processes):
        d = tmp_path / "units" / unit["unit_id"]
        d.mkdir(parents=True)
        payload = {"op_name": "exp", "dtype": "torch.float16",
                   "result": [{"shape_detail": [[64]], "latency": 0.01, "latency_base": 0.01, **(result_fields or {})}]}
        events = [{"event": "process", "pid": 7, "facts": {"device_name": "NVIDIA H200 (torch)", "device_bus_id": bus}},
                  {"event": "record", "node": "t.py::test_exp", "payload": payload, "timing": list(timing)},
                  {"event": "end", "node": "t.py::test_exp", "status": "ok", "wall_s": 1}]
        (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return tmp_path


def test_rows_carry_the_measuring_process_gpu_and_pinning_is_checked(tmp_path):
    from zlbench.results.tables import PIN_WARNING, collect, pinning_problems, run_pinning_problems

    rows, _ = collect(_fake_run(tmp_path / "good", ["0000:19:00", "0000:3b:00"]))
    assert {(r["device"], r["device_bus_id"], r["device_name"]) for r in rows} == {
        (0, "0000:19:00", "NVIDIA H200 (torch)"), (1, "0000:3b:00", "NVIDIA H200 (torch)")}
    assert PIN_WARNING not in (tmp_path / "good" / "run.log").read_text()

    collect(_fake_run(tmp_path / "shared", ["0000:19:00", "0000:19:00"]))
    log = (tmp_path / "shared" / "run.log").read_text()
    assert f"{PIN_WARNING}devices 0 and 1 both measured on bus 0000:19:00" in log
    assert "device 1 is 00000000:3B:00.0: its visibility env did not pin it" in log
    # The summary's warnings are the same problems, read from the collected run dir.
    assert [f"{PIN_WARNING}{w}" for w in run_pinning_problems(tmp_path / "shared")] == [
        line for line in log.splitlines() if line.startswith(PIN_WARNING)]
    # No bus id (CPU, an older run): nothing to check, nothing claimed.
    assert pinning_problems({"u0:1": {"device": 0}, "u1:1": {"device": 1}}, {}) == []


def test_ops_status_names_the_timer_that_timed_a_node(tmp_path):
    """A node whose every shape fell back to direct timing says direct in ops_status.csv, not the
    run's graph timer (its rows say so; the status table must not claim otherwise)."""
    from zlbench.results.tables import collect

    def timer_of(run):
        collect(run)
        with open(run / "ops_status.csv") as f:
            return {r["timer"] for r in csv.DictReader(f)}

    assert timer_of(_fake_run(tmp_path / "graph", ["", ""])) == {"graph"}
    fell_back = ({"timer_used": "direct", "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"], "reason": "capture refused"},)
    assert timer_of(_fake_run(tmp_path / "direct", ["", ""], timing=fell_back)) == {"direct"}
    # the baseline's fallback counts too, and the corpus' own timer is named as summary.md names it
    base_fell_back = ({"timer_used": "graph", "timer_used_base": "direct", "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]},)
    assert timer_of(_fake_run(tmp_path / "base", ["", ""], timing=base_fell_back)) == {"direct+graph"}
    corpus = ({"timer_used": None, "markers": ["BENCHMARK_NOT_ZLBENCH_TIMER"], "reason": "its own timer"},)
    assert timer_of(_fake_run(tmp_path / "corpus", ["", ""], timing=corpus)) == {"corpus"}


HARNESS_FIELDS = {"tflops": 12.5, "utilization": 0.41, "accuracy": 1e-3, "compared_speedup": 0.97}


def test_rows_keep_what_the_flaggems_harness_reports(tmp_path):
    from zlbench.results.tables import collect

    run = _fake_run(tmp_path / "run", ["", ""], HARNESS_FIELDS)
    collect(run)
    written = [json.loads(line) for line in (run / "rows.jsonl").read_text().splitlines()]
    assert [{k: r[k] for k in HARNESS_FIELDS} for r in written] == [HARNESS_FIELDS] * 2
    # A FlagGems result log gives them too; where the harness reported none they are null.
    record = {**RECORD, "result": [{**RECORD["result"][0], **HARNESS_FIELDS}, RECORD["result"][1]]}
    rows = rows_from_log(write_log(tmp_path / "result.log", ["[INFO] " + json.dumps(record)]))
    assert [r["tflops"] for r in rows] == [12.5, None]


def test_a_side_log_keeps_tests_of_one_op_and_shape_apart_when_read_back(tmp_path):
    """Two tests of one op timing one shape: one record each (as FlagGems' own log), naming its node,
    so reading the log back does not take the second test's row for the first one's next round."""
    def row(node, latency, rnd):
        return {"op": "einsum", "dtype": "torch.float16", "shape": "[[1024,1024]]", "status": "ok",
                "latency": latency, "latency_base": 0.003, "node": f"benchmark/test_einsum.py::{node}", "round": rnd}

    log = tmp_path / "run.main.log"
    log.write_text(side_log([row("test_einsum_trace", 0.0025, 0), row("test_einsum_trace", 0.0025, 1),
                             row("test_einsum_transpose", 0.004, 0)]))
    records = [json.loads(line[len("[INFO] "):]) for line in log.read_text().splitlines()[1:]]
    assert [(r["node"].split("::")[1], r["result"][0]["rounds"]) for r in records] == [
        ("test_einsum_trace", 2), ("test_einsum_transpose", 1)]
    back = rows_from_log(log)
    assert [(r["node"].split("::")[1], r["round"], round(r["latency"], 4)) for r in back] == [
        ("test_einsum_trace", 0, 0.0025), ("test_einsum_transpose", 0, 0.004)]


def test_a_side_logs_speedup_is_its_rounds_that_timed_the_baseline():
    """An A/B times the torch baseline in round 1 only: the side log's speedup divided round 1's
    baseline by the mean over every round (1.6 here), where summary.md reads round 1's own ratio."""
    rows = [{"op": "exp", "dtype": "torch.float16", "shape": "[[64]]", "status": "ok", "latency": lat,
             "latency_base": base, "node": "benchmark/test_exp.py::test_exp", "round": rnd}
            for rnd, lat, base in ((0, 0.002, 0.004), (1, 0.001, None), (2, 0.001, None))]
    (record,) = [json.loads(line[len("[INFO] "):]) for line in side_log(rows).splitlines()[1:]]
    assert record["result"][0]["speedup"] == pytest.approx(2.0)  # round 1: 0.004 / 0.002


def fallback_warning(op, dtype, shape_detail, reason):
    """The line zlbench's record plugin writes beside a record whose shape fell back to direct
    timing (zlbench/plugins/record.py), the only trace of it in a log whose records lack markers."""
    return (f"[WARNING] BENCHMARK_DIRECT_NO_CUDAGRAPH op={op} dtype={dtype} shape={json.dumps(shape_detail)} "
            f"reason={reason}")


def test_fallback_markers_logged_only_as_warning_lines_are_read(tmp_path):
    log = write_log(tmp_path / "result_a.log", [
        fallback_warning("exp", "torch.float16", [[64]], "capture refused: operation not permitted"),
        "[WARNING] some other warning op=exp dtype=torch.float16 shape=[[128]]",
        "[INFO] " + json.dumps(RECORD)])
    rows = rows_from_log(log)
    assert [(r["shape"], r["markers"]) for r in rows] == [("[[64]]", ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]),
                                                          ("[[128]]", [])]
    assert rows[0]["marker_reason"] == "capture refused: operation not permitted"
    # A run.log whose record carries the marker itself and the warning line: marked once.
    marked = {**RECORD, "result": [{**RECORD["result"][0], "markers": ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]},
                                   RECORD["result"][1]]}
    both = write_log(tmp_path / "run.log", [fallback_warning("exp", "torch.float16", [[64]], "x"),
                                            "[INFO] " + json.dumps(marked)])
    assert rows_from_log(both)[0]["markers"] == ["BENCHMARK_DIRECT_NO_CUDAGRAPH"]
    # Paired against a clean log, the row says it was timed another way, and the report counts it.
    clean = write_log(tmp_path / "result_b.log", ["[INFO] " + json.dumps(RECORD)])
    out = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(log), "--ab", str(clean)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "1 row(s) timed by the direct fallback on a side (BENCHMARK_DIRECT_NO_CUDAGRAPH)" in out.stdout
    assert len([l for l in out.stdout.splitlines() if l.startswith("| exp") and "(fallback)" in l]) == 1


def test_a_row_logged_again_is_its_next_round_and_a_lost_round_is_listed(tmp_path, capsys):
    again = {**RECORD, "result": [{**RECORD["result"][0], "latency": 0.021}]}
    a = write_log(tmp_path / "result_a.log", ["[INFO] " + json.dumps(RECORD), "[INFO] " + json.dumps(again)])
    b = write_log(tmp_path / "result_b.log", ["[INFO] " + json.dumps(RECORD)])
    rows = rows_from_log(a)
    assert [(r["shape"], r["round"], r["latency"]) for r in rows] == [("[[64]]", 0, 0.02), ("[[128]]", 0, 0.02),
                                                                      ("[[64]]", 1, 0.021)]
    assert batch_summary([str(a), "--ab", str(b)]) == 0
    out = capsys.readouterr().out
    assert "## Rounds dropped inside rows" in out and "round 1: missing on side B" in out


def test_cases_whose_shapes_read_alike_are_rows_of_their_own_in_every_round(tmp_path):
    # FlagGems' bincount yields three class counts per shape: one shape detail, three cases. Within a
    # record the n-th such case is `<shape> #n`; a record logged again is the next round of each.
    cases = {**RECORD, "result": [RECORD["result"][0], {**RECORD["result"][0], "latency": 0.09},
                                  {**RECORD["result"][0], "latency": 0.5}, RECORD["result"][1]]}
    log = write_log(tmp_path / "result_a.log", [
        fallback_warning("exp", "torch.float16", [[64]], "capture refused"),
        "[INFO] " + json.dumps(cases), "[INFO] " + json.dumps(cases)])
    rows = rows_from_log(log)
    assert [(r["shape"], r["round"], r["latency"]) for r in rows] == [
        ("[[64]]", 0, 0.02), ("[[64]] #2", 0, 0.09), ("[[64]] #3", 0, 0.5), ("[[128]]", 0, 0.02),
        ("[[64]]", 1, 0.02), ("[[64]] #2", 1, 0.09), ("[[64]] #3", 1, 0.5), ("[[128]]", 1, 0.02)]
    # The marker line names the shape alone: every case of it is marked.
    assert [r["markers"] for r in rows[:4]] == [["BENCHMARK_DIRECT_NO_CUDAGRAPH"]] * 3 + [[]]
    # Written back as one side's FlagGems log (the cases in their order), they read back the same.
    again = rows_from_log(write_log(tmp_path / "side.log", side_log(rows).splitlines()[1:]))
    assert [r["shape"] for r in again] == [r["shape"] for r in rows[:4]]
    assert [r["markers"] for r in again] == [r["markers"] for r in rows[:4]]  # how each row was timed
    assert [r["latency"] for r in again] == pytest.approx([r["latency"] for r in rows[:4]])


def test_a_node_skipped_or_failed_where_it_ran_stays_so_where_the_time_limit_cut_it(tmp_path):
    """A plain run of three processes cut by its time limit before the third: a test with no case
    of the run's dtype was skipped in the two that ran it and never started in the third. It is
    skipped (a third process would skip it too), not cut, and nothing is left to resume; a test the
    limit cut before any process started it stays cut (H200, 2026-12-04: `special_bessel_y0` read
    `timeout`, the cut banner counting it). A test that failed in the one process that ran it reads
    failed with its error, not cut (H100, 2026-12-06: FlagGems' `special_gammainc` raised in its one
    process and ops_status said only that the time limit came before it ran)."""
    from zlbench.report.run_report import cut_nodes
    from zlbench.results.events import DEADLINE_REASON
    from zlbench.results.tables import collect

    units = [{"unit_id": f"main.r{r}.d0.s0", "device": 0, "side": "main", "round": r,
              "nodes": ["t.py::test_y0", "t.py::test_broken", "t.py::test_late"]} for r in range(3)]
    plan = {"backend": "cuda", "timer": "graph", "processes": 3, "units": units, "devices": [],
            "nodes": [{"nodeid": "t.py::test_y0", "op": "special_bessel_y0"}, {"nodeid": "t.py::test_late", "op": "late"},
                      {"nodeid": "t.py::test_broken", "op": "special_gammainc"}]}
    failed = {"status": "failed", "reason": "Failed: 'NoneType' object has no attribute 'device'"}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    skipped = {"status": "skipped", "reason": "not applicable: the test of 'special_bessel_y0' has no float16 case"}
    cut = {"status": "timeout", "reason": f"{DEADLINE_REASON} before it ran", "resumable": True}
    for r, unit in enumerate(units):
        d = tmp_path / "units" / unit["unit_id"]
        d.mkdir(parents=True)
        events = [{"event": "launch"}] if r < 2 else []
        events += [{"event": "end", "node": "t.py::test_y0", **(skipped if r < 2 else cut)},
                   {"event": "end", "node": "t.py::test_broken", **(failed if r == 0 else cut)},
                   {"event": "end", "node": "t.py::test_late", **cut}]
        (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    _, status = collect(tmp_path)
    by_op = {s["op"]: s for s in status}
    assert by_op["special_bessel_y0"]["status"] == "skipped" and "no float16 case" in by_op["special_bessel_y0"]["reason"]
    assert not by_op["special_bessel_y0"]["resumable"]
    assert by_op["special_gammainc"]["status"] == "failed" and "'NoneType'" in by_op["special_gammainc"]["reason"]
    assert not by_op["special_gammainc"]["resumable"]
    assert by_op["late"]["status"] == "timeout" and by_op["late"]["resumable"]
    assert [s["op"] for s in cut_nodes(status)] == ["late"]


def test_a_node_cut_in_its_later_processes_keeps_the_host_and_job_that_measured_it(tmp_path):
    """ops_status.csv's host and job_id came from a node's worst process: one the run's limit cut
    before it started has neither, so a node measured on a Slurm host in one process read blank."""
    from zlbench.results.events import DEADLINE_REASON
    from zlbench.results.tables import collect

    units = [{"unit_id": f"main.r{r}.d0.s0", "device": 0, "side": "main", "round": r, "nodes": ["t.py::test_a"]}
             for r in range(2)]
    plan = {"backend": "cuda", "timer": "graph", "processes": 2, "units": units, "devices": [],
            "nodes": [{"nodeid": "t.py::test_a", "op": "a"}]}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    unit_events = [[{"event": "launch", "host": "gpu-node-7", "job_id": "4242_0"},
                    {"event": "start", "node": "t.py::test_a"}, {"event": "end", "node": "t.py::test_a", "status": "ok"}],
                   [{"event": "end", "node": "t.py::test_a", "status": "timeout", "resumable": True,
                     "reason": f"{DEADLINE_REASON} before it ran"}]]
    for unit, events in zip(units, unit_events):
        d = tmp_path / "units" / unit["unit_id"]
        d.mkdir(parents=True)
        (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (status,) = collect(tmp_path)[1]
    assert status["status"] == "timeout" and status["resumable"]
    assert (status["host"], status["job_id"]) == ("gpu-node-7", "4242_0")
