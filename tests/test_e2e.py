"""Real runs of `python -m zlbench` on the demo corpus (the embedded default), as a user would."""

import csv
import json
import subprocess
import sys

import pytest

from .conftest import EXP_RUN, copied_run

pytestmark = pytest.mark.slow


def read_status(run_dir):
    with open(run_dir / "ops_status.csv") as f:
        return list(csv.DictReader(f))


def read_rows(run_dir):
    return [json.loads(l) for l in (run_dir / "rows.jsonl").read_text().splitlines() if l.strip()]


def test_demo_run_writes_every_output(run_zlbench):
    res = run_zlbench("ops=[exp,softmax,mm]", "dtypes=[float32]")
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    for name in ("run_identity.json", "ops_status.csv", "rows.jsonl", "run.log", "summary.md", "speedup.png"):
        assert (d / name).is_file(), name
    status = read_status(d)
    assert {s["op"] for s in status} == {"exp", "softmax", "mm"}
    assert all(s["status"] == "ok" and s["backend"] == "cpu" and s["timer"] == "host" for s in status)
    assert all(int(s["rows"]) == 3 for s in status)
    rows = read_rows(d)
    assert len(rows) == 9
    assert all(r["timer_used"] == "host" and r["latency"] > 0 and r["latency_base"] > 0 for r in rows)
    assert {r["dtype"] for r in rows} == {"torch.float32"}
    ident = json.loads((d / "run_identity.json").read_text())
    assert ident["backend"]["name"] == "cpu" and ident["timer"]["name"] == "host"
    assert ident["config"]["ops"] == ["exp", "softmax", "mm"]  # resolved, not Hydra's unresolved copy
    assert ident["processes"] and ident["processes"][0]["torch"]
    assert ident["versions"]["torch"]
    log_records = [l for l in (d / "run.log").read_text().splitlines() if l.startswith("[INFO] {")]
    assert len(log_records) == 3  # one per op and dtype, FlagGems' format
    assert "## Results per op and dtype" in (d / "summary.md").read_text()
    assert "[zlbench] " in res.stderr  # progress was visible


def test_env_migration_reaches_the_identity(run_zlbench):
    res = run_zlbench(env={"OP": "exp", "ZL_DIRECT_REPEAT": "2", "ZL_BACKEND": "cpu"})
    assert res.returncode == 0, res.stderr[-3000:]
    ident = json.loads((res.run_dir / "run_identity.json").read_text())
    assert ident["config"]["ops"] == ["exp"]
    assert ident["timer"]["repeat"] == 2
    assert ident["provenance"]["env"] == {"OP": "exp", "ZL_DIRECT_REPEAT": "2", "ZL_BACKEND": "cpu"}
    assert "ops=[exp]" in ident["provenance"]["env_overrides"]
    # They are config, not switches: a resume that spells them as overrides is the same run.
    assert ident["switch_env"] == {}
    again = run_zlbench("ops=[exp]", "timer.repeat=2", "backend=cpu", f"resume={res.run_dir}")
    assert again.returncode == 0 and "made with other settings" not in again.stderr, again.stderr[-3000:]


def test_batch_summary_reads_a_run_dir(shared_run):
    import subprocess
    import sys

    res = shared_run(*EXP_RUN)
    assert res.returncode == 0, res.stderr[-2000:]
    out = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(res.run_dir)],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "| exp" in out.stdout
    out = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(res.run_dir / "run.log")],
                         capture_output=True, text=True)
    assert out.returncode == 0 and "| exp" in out.stdout


@pytest.mark.parametrize("args,needle", [
    (["backend=tpu"], "unknown backend 'tpu'"),
    (["timer=bogus"], "timer=bogus: no such timer option"),
    (["timer.repeat=abc"], "timer.repeat"),
    (["timer=graph"], "timer=graph needs graph capture"),
    (["ops=[expp]"], "Close matches: exp"),
    (["op_file=test_nope.py"], "is not a test file"),
    (["corpus=flaggems"], "FLAGGEMS_ROOT"),
    (["corpus=flaggems", "corpus.root=/nonexistent/FlagGems"], "does not exist"),
    (["shape=file"], "shape.file"),
    (["shape=file", "shape.file=/nonexistent.yaml"], "does not exist"),
    (["devices=[5]"], "device 5 does not exist on backend=cpu"),
    (["ab.values=[1]", "ab.var=X", "ab.name=x", "ab.sides=[off,on]"], "two values"),
])
def test_bad_input_is_one_clear_message_and_no_result(run_zlbench, args, needle):
    res = run_zlbench(*args)
    assert res.returncode != 0
    assert needle in res.stderr, res.stderr[-2000:]
    assert "Traceback" not in res.stderr
    assert not (res.run_dir / "rows.jsonl").exists() and not (res.run_dir / "run_identity.json").exists()


def test_malformed_shape_file(run_zlbench, tmp_path):
    bad = tmp_path / "shapes.yaml"
    bad.write_text("softmax:\n  shapes: nope\n")
    res = run_zlbench("shape=file", f"shape.file={bad}")
    assert res.returncode == 2 and "entry 'softmax' needs a list" in res.stderr


def test_shape_file_is_checked_whole_before_anything_runs(run_zlbench, tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("softmax:\n  shapes:\n    - [64, 64]\n    - [64, -8]\nsofmax:\n  shapes: [[32, 32]]\n")
    res = run_zlbench("shape=file", f"shape.file={shapes}", "ops=[softmax]")
    assert res.returncode == 2, res.stderr[-2000:]
    assert (f"zlbench: error: shape file {shapes}:4: op 'softmax': shape [64, -8] has a negative dimension "
            "(-8). Fix: give every dimension as an integer >= 0, or delete that shape.\n") in res.stderr
    assert (f"shape file {shapes}:5: 'sofmax' is neither an op of the corpus nor a Benchmark class name "
            "(did you mean softmax?)") in res.stderr
    assert not (res.run_dir / "rows.jsonl").exists() and not (res.run_dir / "run_identity.json").exists()


def test_shape_file_mode_runs_the_given_shapes(run_zlbench, tmp_path):
    shapes = tmp_path / "shapes.yaml"
    shapes.write_text("Benchmark:\n  shapes: [[32, 16]]\n")
    res = run_zlbench("shape=file", f"shape.file={shapes}", "ops=[exp]", "dtypes=[float32]")
    assert res.returncode == 0, res.stderr[-2000:]
    assert [r["shape"] for r in read_rows(res.run_dir)] == ["[[32,16]]"]


def _drawn(run_dir):
    """node -> (its start event's seed, the checksum of the inputs its record says it drew)."""
    seeds, drawn = {}, {}
    for path in (run_dir / "units").glob("*/events.jsonl"):
        for e in map(json.loads, path.read_text().splitlines()):
            if e["event"] == "start":
                seeds[e["node"]] = e.get("seed")
            elif e["event"] == "record":
                drawn[e["node"]] = e["payload"]["result"][0]["checksum"]
    return {n: (seeds[n], drawn[n]) for n in drawn}


def test_a_node_draws_the_same_inputs_alone_or_after_other_tests(run_zlbench, tmp_path):
    from .conftest import FIXTURES

    corpus = ("backend=cpu", "corpus=flaggems", f"corpus.root={FIXTURES / 'seed_corpus'}")
    alone = run_zlbench(*corpus, "ops=[draw_b]", run_dir=tmp_path / "alone")
    after = run_zlbench(*corpus, "ops=[draw_a,draw_b]", run_dir=tmp_path / "after")
    assert alone.returncode == 0 and after.returncode == 0, alone.stderr[-2000:] + after.stderr[-2000:]
    a, b = _drawn(alone.run_dir), _drawn(after.run_dir)
    node = "benchmark/test_draw.py::test_perf_draw_b"
    assert a[node] == b[node]  # torch, random and numpy drew the same, and the seed is recorded
    assert a[node][0] is not None
    assert b["benchmark/test_draw.py::test_perf_draw_a"] != b[node]  # each node its own seed


def test_an_env_switch_set_for_a_resume_is_another_caliber(run_zlbench, tmp_path):
    args = ("ops=[softmax]", "dtypes=[float32]", "identity.env=[DEMO_GEMS_FUSED_SOFTMAX]")
    first = run_zlbench(*args)
    assert first.returncode == 0, first.stderr[-2000:]
    again = run_zlbench(*args, f"resume={first.run_dir}", run_dir=tmp_path / "x")
    assert again.returncode == 0, again.stderr[-2000:]
    # One read inside Triton's compiled library, and the corpus' own switch named by identity.env.
    for env in ({"DISABLE_LLVM_OPT": "1"}, {"DEMO_GEMS_FUSED_SOFTMAX": "1"}):
        res = run_zlbench(*args, f"resume={first.run_dir}", env=env, run_dir=tmp_path / "x")
        assert res.returncode == 2 and "made with other settings" in res.stderr, (env, res.stderr[-2000:])
        assert "switch_env" in res.stderr


def test_rows_of_a_busy_cpu_warn_in_the_terminal_and_summary(shared_run, tmp_path):
    import subprocess
    import sys

    res = shared_run(*EXP_RUN)
    assert res.returncode == 0, res.stderr[-2000:]
    run = copied_run(res, tmp_path / "run")
    # The rows' latencies are set here: what this (maybe busy) machine measured is not the point.
    (events,) = (run / "units").glob("*/events.jsonl")
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    record = next(e for e in lines if e["event"] == "record")

    def collect(*latencies):
        for row, (base, alt) in zip(record["payload"]["result"], latencies):
            row.update(latency_base=base, latency=alt)
        events.write_text("".join(json.dumps(e) + "\n" for e in lines))
        out = subprocess.run([sys.executable, "-m", "zlbench", "collect", str(run)], capture_output=True, text=True)
        return [line for line in out.stderr.splitlines() if line.startswith("[zlbench] warning:")], out.stderr

    calm = [(0.013, 0.0035)] * 3
    warning, err = collect(*calm)
    assert warning == [], err
    assert "Warning" not in (run / "summary.md").read_text()
    # As a busy 2-core machine measured it: the torch call waited out a 4 ms scheduler slice.
    warning, err = collect((4.013, 0.0035), *calm[1:])
    assert len(warning) == 1 and "1 of 3 host-timed rows look contended" in warning[0], err
    assert "> **Warning**: 1 of 3 host-timed rows look contended" in (run / "summary.md").read_text()


def test_a_run_whose_every_node_is_skipped_measured_nothing_and_does_not_pass(run_zlbench, tmp_path):
    """A dtypes= no test takes: every node skipped, no row, and the run exited 0 ("every node
    measured"), so a CI job with a wrong dtypes= passed without measuring anything."""
    res = run_zlbench("ops=[exp]", "dtypes=[float16]", "store.url=none")
    assert res.returncode == 1, res.stderr[-2000:]
    assert "[zlbench] exit 1: every node skipped (1), no row measured: a run that checked nothing does not pass" in res.stderr
    with open(res.run_dir / "ops_status.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["skipped"]
    again = subprocess.run([sys.executable, "-m", "zlbench", "summary", str(res.run_dir)],
                           capture_output=True, text=True)
    assert again.returncode == 1, again.stderr[-2000:]  # the tables as they stand say the same
    res = run_zlbench("ops=[exp]", "dtypes=[float16]", "store.url=none", "fail_on=[]", run_dir=tmp_path / "r2")
    assert res.returncode == 0, res.stderr[-2000:]


def test_a_fresh_run_into_a_run_dir_that_held_another_adds_to_the_history(run_zlbench, tmp_path):
    """`rm -rf runs/pr && zlbench ... hydra.run.dir=runs/pr` in CI: each run replaced the one before in
    the store (same path, host and identity), so the history never grew past one run."""
    import shutil

    store = f"store.url=sqlite:///{tmp_path / 'zlbench.db'}"
    for _ in range(2):
        shutil.rmtree(tmp_path / "run", ignore_errors=True)
        res = run_zlbench(*EXP_RUN, "timer.processes=1", store)
        assert res.returncode == 0, res.stderr[-2000:]
        assert "store sqlite:///" in res.stderr and ": recorded " in res.stderr, res.stderr[-2000:]
    res = subprocess.run([sys.executable, "-m", "zlbench", "history", "--url", str(tmp_path / "zlbench.db"), "list",
                          "--format", "json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert len(json.loads(res.stdout)) == 2
