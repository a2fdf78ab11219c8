"""The shard worker survives crashes, hangs and broken files: real pytest processes that die."""

import csv
import json

import pytest

pytestmark = pytest.mark.slow


def status_by_op(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return {r["op"]: r for r in csv.DictReader(f)}


@pytest.mark.parametrize("slots", [1, 2])
def test_faults_get_typed_statuses_and_the_shard_goes_on(run_zlbench, faulty_corpus, slots):
    # With 2 devices each process also gets the other's nodes to take: the same statuses.
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}",
                      "launcher.node_timeout_s=4", f"backend.slots={slots}")
    assert res.returncode == 1, res.stderr[-3000:]  # nodes not ok (fail_on's default)
    st = status_by_op(res.run_dir)
    assert st["good"]["status"] == "ok" and st["good"]["rows"] == "2"
    assert st["fails"]["status"] == "failed" and "kernel produced NaN" in st["fails"]["reason"]
    assert st["skipped_op"]["status"] == "skipped" and "not supported" in st["skipped_op"]["reason"]
    assert st["crash"]["status"] == "crashed" and "exited with code 3" in st["crash"]["reason"]
    assert st["crash"]["rows"] == "2"  # measured before the crash: kept
    assert st["segv"]["status"] == "crashed" and "SIGSEGV" in st["segv"]["reason"]
    assert st["hang"]["status"] == "timeout" and "node_timeout_s=4" in st["hang"]["reason"]
    assert st["after"]["status"] == "ok" and st["after"]["rows"] == "2"  # ran after all the faults
    # A capture that killed its process: retried once in a fresh process, which measured it.
    assert st["capture_abort"]["status"] == "ok" and st["capture_abort"]["rows"] == "2", st["capture_abort"]
    retries = [json.loads(e) for p in (res.run_dir / "units").glob("*/events.jsonl")
               for e in p.read_text().splitlines() if '"retry"' in e]
    assert sorted((r["node"].rpartition("::")[2], r["capture_crash"]) for r in retries) == [
        ("test_perf_capture_abort", True), ("test_perf_capture_abort_late", True)]
    assert all("SIGABRT" in r["reason"] and "Fatal Python error: Aborted" in r["reason"] for r in retries)
    # ... also where it is the second case of a test whose first case had ended ok: both measured
    assert st["capture_abort_late"]["status"] == "ok" and st["capture_abort_late"]["rows"] == "4", st["capture_abort_late"]
    assert st["broken"]["status"] == "failed" and "collection error" in st["broken"]["reason"]
    assert "this_module_does_not_exist" in st["broken"]["reason"]
    # FlagGems refusing a test whose dtypes lack one the run asks for: not applicable, not failed.
    assert st["int_only"]["status"] == "skipped" and "has no float16 case" in st["int_only"]["reason"]
    # A test over several ops, one of them not applicable: the node measured (ok), and says what it skipped.
    assert st["multi_a"]["status"] == "ok" and st["multi_a"]["rows"] == "2", st["multi_a"]
    assert st["multi_a"]["reason"].startswith("some cases skipped: not applicable: the test of 'multi_b'")
    # A test refused after it measured a case (FlagGems' test_to_copy): ok, what it measured kept, and
    # it says that its cases after the refused one did not run.
    assert st["partly"]["status"] == "ok" and st["partly"]["rows"] == "2", st["partly"]
    assert st["partly"]["reason"].startswith("some cases skipped: the test stopped at a case the run's dtypes leave "
                                             "out, and its cases after that one did not run (not applicable: the test "
                                             "of 'partly_bf16' has no float16 case"), st["partly"]
    summary = (res.run_dir / "summary.md").read_text()
    assert "| partly " in summary.split("## Measured in part")[1].split("##")[0], summary
    assert "| partly " not in summary.split("## Not ok")[1].split("##")[0], summary
    rows = [json.loads(l) for l in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    # Two cases whose shape details read alike: two rows (test_process_sampling: over processes too).
    assert [(r["shape"], r["latency"]) for r in rows if r["op"] == "cases"] == [("[[64]]", 0.5), ("[[64]] #2", 4.0)]
    hang_rows = [r for r in rows if r["op"] == "hang"]
    assert hang_rows and hang_rows[0]["status"] == "timeout"  # a status, never a missing row
    ends = [json.loads(e)["node"] for p in (res.run_dir / "units").glob("*/events.jsonl")
            for e in p.read_text().splitlines() if '"end"' in e]
    # every node (every case of it) ended once, wherever it ran; but a test sent back by a retry
    # runs whole again, so its first case ends twice
    once = [e for e in ends if "capture_abort_late" not in e]
    assert len(once) == len(set(once)) and sorted(e for e in ends if "capture_abort_late" in e) == [
        "benchmark/test_faults.py::test_perf_capture_abort_late[torch.float16]"] * 2 + [
        "benchmark/test_faults.py::test_perf_capture_abort_late[torch.float32]"]
    with open(res.run_dir / "ops_status.csv") as f:
        assert len({e.split("[")[0] for e in ends}) == len({r["test_node"] for r in csv.DictReader(f)})
    # Two tests of one op timing the same shapes: rows of their own (test_process_sampling: A/B too).
    assert sorted((r["node"].rpartition("::")[2], r["shape"]) for r in rows if r["op"] == "shared") == [
        ("test_perf_shared_trace", "[[128,128]]"), ("test_perf_shared_trace", "[[64,64]]"),
        ("test_perf_shared_transpose", "[[128,128]]"), ("test_perf_shared_transpose", "[[64,64]]")]
    if slots == 2:
        return
    # Each crash cost one fresh process, not a retry loop.
    launches = sum(1 for l in (res.run_dir / "units").glob("*/events.jsonl")
                   for e in l.read_text().splitlines() if '"launch"' in e)
    # first (refused whole: a named file fails to import) + rest + after crash, segv, 2 capture aborts, hang
    assert launches == 7


def test_crash_retries_rerun_a_crashed_node_once(run_zlbench, faulty_corpus):
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}",
                      "ops=[crash,after,capture_abort]", "launcher.crash_retries=1")
    assert res.returncode == 1, res.stderr[-3000:]
    st = status_by_op(res.run_dir)
    assert st["crash"]["status"] == "crashed" and st["after"]["status"] == "ok"
    events = (res.run_dir / "units").glob("*/events.jsonl")
    retries = [json.loads(e) for p in events for e in p.read_text().splitlines() if '"retry"' in e]
    # the capture's own retry does not spend the crash retry: each node got one
    assert sorted((r["node"].rpartition("::")[2], bool(r.get("capture_crash"))) for r in retries) == [
        ("test_perf_capture_abort", True), ("test_perf_crash", False)]
    assert st["capture_abort"]["status"] == "ok"


@pytest.mark.parametrize("op,code", [("good", 0), ("fails", 1)])
def test_the_benchmark_process_leaves_with_pytests_exit_status(run_zlbench, faulty_corpus, op, code):
    # It skips the interpreter's teardown (os._exit once everything is flushed): the status must
    # still be pytest's, and what it printed last must still be in its log.
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}", f"ops=[{op}]")
    assert res.returncode == code, res.stderr[-3000:]  # the run's own code: 1 when a node failed
    unit = next((res.run_dir / "units").iterdir())
    exited = [json.loads(l) for l in (unit / "events.jsonl").read_text().splitlines() if '"exited"' in l]
    assert [e["returncode"] for e in exited] == [code]
    assert ("1 passed" if code == 0 else "1 failed") in (unit / "pytest.log").read_text()


def test_a_capture_that_killed_a_process_is_not_tried_again_in_the_runs_later_processes(run_zlbench, faulty_corpus):
    """timer.processes=3: three passes over the node. The first pass' process died capturing it and
    was retried; the later passes read that retry (any unit of the side) and time it directly at
    once, instead of aborting once each."""
    res = run_zlbench("backend=cpu", "corpus=flaggems", f"corpus.root={faulty_corpus}", "ops=[capture_abort,good]",
                      "timer.processes=3")
    assert res.returncode == 0, res.stderr[-3000:]
    st = status_by_op(res.run_dir)
    assert st["capture_abort"]["status"] == "ok" and st["good"]["status"] == "ok"
    retries = [e for p in (res.run_dir / "units").glob("*/events.jsonl")
               for e in p.read_text().splitlines() if '"retry"' in e]
    assert len(retries) == 1, retries
    rows = [json.loads(l) for l in (res.run_dir / "rows.jsonl").read_text().splitlines()]
    assert {r["processes"] for r in rows if r["op"] == "capture_abort"} == {3}
