"""The time limits of a node-level A/B's side processes (engine/side_process.py) are a plain run's
(engine/plain_worker.py): launcher.node_timeout_s bounds a test, and a process with no test in flight
(its start-up) gets at least IDLE_FLOOR_S. A real run of the wait corpus, whose start-up is slow."""

import csv
import json

from zlbench.engine.plain_worker import Attempt, outcome

from .conftest import FIXTURES, zlbench

WAIT = FIXTURES / "wait_corpus"
NODE = "benchmark/test_wait.py::test_wait_00"


def test_ab_side_processes_get_a_plain_runs_start_up_allowance(tmp_path):
    # Loading the corpus takes 2 s, each test 0.05 s: a 1 s limit killed every side process while it
    # started, and its node was recorded as crashed ("process killed by signal SIGKILL before running
    # any node"), where a plain run with the same limit measured it.
    run = tmp_path / "run"
    res = zlbench(f"hydra.run.dir={run}", "backend=cpu", "corpus=flaggems", f"corpus.root={WAIT}", "ops=['wait_00']",
                  "progress=plain", "store.url=none", "ab=env", "ab.var=WAIT_SWITCH", "ab.rounds=2", "ab.min_rounds=2",
                  "launcher.node_timeout_s=1", cwd=tmp_path, env={"IMPORT_WAIT_S": "2", "WAIT_S": "0.05"})
    assert res.returncode == 0, res.stderr[-3000:]
    with open(run / "ops_status.csv") as f:
        assert sorted((r["side"], r["status"]) for r in csv.DictReader(f)) == [("off", "ok"), ("on", "ok")]
    exits = [json.loads(line) for path in run.glob("units/*/events.jsonl") for line in path.read_text().splitlines()
             if '"exited"' in line]
    assert not [e for e in exits if e.get("killed_for")], exits


def test_a_resident_process_killed_with_no_test_in_flight_is_a_timeout_not_a_crash():
    # A resident process already serving that starts none of the command's tests in time: zlbench
    # killed it, so the node timed out (it had read as crashed, by SIGKILL).
    attempt = Attempt([NODE], [{"event": "launch"}, {"event": "exited", "returncode": -9}], -9, "between_nodes", "")
    (end,) = outcome(attempt, [NODE], [], node_timeout=5, crash_retries=0).ends
    assert end["status"] == "timeout", end
    assert end["reason"].startswith("the benchmark process went 30 s with no test in flight "
                                    "(launcher.node_timeout_s=5, at least 30 s between tests)"), end["reason"]
