import json

from zlbench.progress import RunState, _failures


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
    assert (done, state.total) == (2, 3)
    assert _failures(statuses) == "crashed=1"
    assert running == {0: "main r0: b"}
