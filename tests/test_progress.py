import json

from zlbench.engine.progress import RunState, _failures


def test_progress_counts_done_failures_and_what_each_device_runs(tmp_path):
    units = [{"unit_id": "main.r0.d0.s0", "device": 0, "side": "main", "round": 0, "nodes": ["f::a", "f::b"]},
             {"unit_id": "main.r0.d1.s0", "device": 1, "side": "main", "round": 0, "nodes": ["f::c"]}]
    events = {"main.r0.d0.s0": [{"event": "start", "node": "f::a"}, {"event": "end", "node": "f::a", "status": "ok"},
                                {"event": "start", "node": "f::b"}],
              "main.r0.d1.s0": [{"event": "start", "node": "f::c"},
                                {"event": "end", "node": "f::c", "status": "crashed"}]}
    for uid, evs in events.items():
        (tmp_path / "units" / uid).mkdir(parents=True)
        (tmp_path / "units" / uid / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    state = RunState(tmp_path, units)
    done, statuses, running = state.poll()
    assert (done, state.total, state.counted) == (2, 3, "nodes")
    # Three processes of a plain run (rounds 0-2): each node is counted once a process.
    per_process = [{**u, "unit_id": f"main.r{r}.d{u['device']}.s0", "round": r} for u in units for r in range(3)]
    assert (RunState(tmp_path, per_process).total, RunState(tmp_path, per_process).counted) == (9, "node runs")
    assert _failures(statuses) == "crashed=1"
    assert running == {0: "main r0: b"}


def test_a_resumed_run_does_not_count_resumable_placeholders_as_done(tmp_path):
    units = [{"unit_id": "main.r0.d0.s0", "device": 0, "side": "main", "round": 0, "nodes": ["f::a", "f::b"]}]
    events = [{"event": "end", "node": "f::a", "status": "ok"},
              # the earlier job was killed: both remaining nodes got placeholders
              {"event": "end", "node": "f::b", "status": "crashed", "resumable": True}]
    path = tmp_path / "units" / "main.r0.d0.s0" / "events.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    state = RunState(tmp_path, units)
    done, statuses, _ = state.poll()
    assert done == 1 and _failures(statuses) == "none"
    with open(path, "a") as f:  # the resume measures it
        f.write(json.dumps({"event": "end", "node": "f::b", "status": "ok"}) + "\n")
    done, statuses, _ = state.poll()
    assert done == 2 and statuses["ok"] == 2
