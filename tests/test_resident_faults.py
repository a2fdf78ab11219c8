"""Node-level A/B (zlbench/engine/device_ab.py) under faults of its liveness prober, cuts and resumes while
it probes, and crashes in respawned processes: real runs of the fixture corpus, whose knobs
ZL_FIXTURE_FAULT / ZL_FIXTURE_PROBER_BROKEN hit one process of the run (a prober, side on/off)."""

import json
import os
from pathlib import Path

import pytest

from .test_resident import CORPUS, DEAD, LIVE, ab_rows, node_runs

pytestmark = pytest.mark.slow
# A run cut by its time limit while a fixture process stalls (until killed) at a chosen point: the
# limit must leave room to reach that point on a busy machine, and is all the stall costs.
CUT_S = 20


def events_of(run_dir, name="events.jsonl"):
    out = []
    for path in sorted(Path(run_dir).glob(f"units/*/{name}")):
        out += [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return out


def probe_events(run_dir):
    return events_of(run_dir, "probe.jsonl")


def assert_no_process_left(run_dir):
    """Every benchmark process (timed sides and the prober) has ended with the run."""
    pids = {e["pid"] for e in events_of(run_dir) + probe_events(run_dir) if e.get("event") == "session_start"}
    assert pids
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            alive.append(pid)
        except ProcessLookupError:
            pass
    assert not alive, alive


def summary_of(rows):
    return {k[0]: (v["rounds"], v["stop"], v["verdict"]) for k, v in rows.items()}


def side_probes(run_dir, side):
    """The probe events of one side's prober (beside its round-1 unit)."""
    plan = json.loads((Path(run_dir) / "plan.json").read_text())
    unit = next(u for u in plan["units"] if u["round"] == 0 and u["side"] == side)
    path = Path(run_dir) / "units" / unit["unit_id"] / "probe.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_a_prober_that_crashes_mid_probe_costs_only_that_probe(run_zlbench):
    # Side on's prober dies while probing live_op, after its kernel reached the Triton cache it
    # shares with side on: the node is timed on both sides as usual, dead_op is still probed (a
    # fresh prober), and side off's prober is not touched.
    res = run_zlbench(*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3",
                      env={"ZL_FIXTURE_FAULT": "prober.on:live_kernel:crash"})
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    runs = node_runs(d)
    assert sorted((r[2], r[3]) for r in runs if r[4] == LIVE and r[6] == "ok") == \
        [("off", 0), ("off", 1), ("off", 2), ("on", 0), ("on", 1), ("on", 2)]
    assert [r[2] for r in runs if r[4] == DEAD] == ["off"]
    plan = json.loads((d / "plan.json").read_text())
    order = next(u["nodes"] for u in plan["units"] if u["round"] == 0 and u["side"] == "off")
    on, off = side_probes(d, "on"), side_probes(d, "off")
    # A fresh prober for dead_op when live_op's probe killed the first one.
    assert len({e["pid"] for e in on if e["event"] == "probe_process"}) == 1 + (order.index(LIVE) < order.index(DEAD))
    assert sorted(e["node"] for e in on if e["event"] == "served") == [DEAD]
    assert len({e["pid"] for e in off if e["event"] == "probe_process"}) == 1
    assert sorted(e["node"] for e in off if e["event"] == "served") == sorted([DEAD, LIVE])
    assert summary_of(ab_rows(d)) == {"live_op": ("3", "max rounds", "slower"),
                                      "dead_op": ("1", "not live", "not live")}
    # The crash lost the probe's evidence, not liveness: side B's kernels of live_op are known, the
    # row is live, and the axis is not called dead while a live row is measured slower.
    ab = json.loads((d / "ab.json").read_text())
    assert {r["op"]: r["live"] for r in ab["rows"]} == {"live_op": "live", "dead_op": "not live"}
    assert "AXIS NOT LIVE" not in (d / "ab.md").read_text()
    assert_no_process_left(d)


def test_a_prober_that_cannot_start_leaves_every_node_timed_on_both_sides(run_zlbench):
    res = run_zlbench(*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3",
                      "launcher.node_timeout_s=300", env={"ZL_FIXTURE_PROBER_BROKEN": "1"})
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    runs = node_runs(d)
    for node in (LIVE, DEAD):
        assert sorted((r[2], r[3]) for r in runs if r[4] == node and r[6] == "ok") == \
            [("off", 0), ("off", 1), ("off", 2), ("on", 0), ("on", 1), ("on", 2)], node
    # No node timeout waited for it (the whole run took less than one), and it was started once: a
    # second start would only fail again.
    assert runs[-1][1] - min(e["t"] for e in events_of(d)) < 300
    for side in ("off", "on"):
        assert (d / "resident" / f"d0.{side}.probe" / "pytest.log").read_text().count("==== zlbench: resident prober") == 1
    # Liveness comes from the timed runs: both sides compiled both ops.
    ab = json.loads((d / "ab.json").read_text())
    assert {r["op"]: r["live"] for r in ab["rows"]} == {"live_op": "live", "dead_op": "not live"}
    # And the run says why liveness first did not stop dead_op after round 1.
    warnings = [e["message"] for e in events_of(d) if e["event"] == "warning"]
    assert any("prober" in w and "ZL_FIXTURE_PROBER_BROKEN" in w for w in warnings), warnings
    assert_no_process_left(d)


def test_a_probe_that_fails_leaves_liveness_unknown_and_the_node_timed_on_both_sides(run_zlbench):
    # Side on's probe of dead_op fails after compiling (as a case that ran out of memory beside the
    # other side's probe would): identical kernels from a partial probe prove nothing, so dead_op
    # is timed on both sides in every round instead of being stopped as not live.
    res = run_zlbench(*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3", "fail_on=[]",
                      env={"ZL_FIXTURE_FAULT": "prober.on:dead_kernel:fail"})
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    assert sorted((r[2], r[3]) for r in node_runs(d) if r[4] == DEAD and r[6] == "ok") == \
        [("off", 0), ("off", 1), ("off", 2), ("on", 0), ("on", 1), ("on", 2)]
    assert not [e for e in events_of(d) if e["event"] == "stopped" and e["node"] == DEAD]
    failed = [e for e in events_of(d) if e["event"] == "artifacts" and e.get("probe_failed")]
    assert [e["node"] for e in failed] == [DEAD]
    assert summary_of(ab_rows(d))["live_op"] == ("3", "max rounds", "slower")
    assert_no_process_left(d)


def test_sides_sharing_one_triton_cache_probe_one_after_the_other(run_zlbench, tmp_path):
    # isolate_caches=false with the shell's TRITON_CACHE_DIR: both sides compile into one cache, where
    # a probe running beside the other would read the other's kernels as its own.
    res = run_zlbench(*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3", "isolate_caches=false",
                      env={"TRITON_CACHE_DIR": str(tmp_path / "triton")})
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    off, on = side_probes(d, "off"), side_probes(d, "on")
    for node in (LIVE, DEAD):
        served_off = next(e["t"] for e in off if e["event"] == "served" and e["node"] == node)
        start_on = next(e["t"] for e in on if e["event"] == "start" and e["node"].startswith(node))
        assert served_off < start_on, node
    # live_op's two codes are two cache entries: live. dead_op's one entry is side off's compile,
    # side on's probe compiled nothing new (no launch hook on the CPU to say what it ran): unknown,
    # so it is timed on both sides.
    ab = json.loads((d / "ab.json").read_text())
    assert {r["op"]: r["live"] for r in ab["rows"]} == {"live_op": "live", "dead_op": "unknown"}
    assert sorted(r[2] for r in node_runs(d) if r[4] == DEAD) == ["off"] * 3 + ["on"] * 3
    assert_no_process_left(d)


def test_a_run_cut_while_the_prober_probes_resumes_to_the_verdicts_of_an_uncut_run(run_zlbench, tmp_path):
    # The time limit kills one side's prober in the middle of dead_op's probe (its kernel already in
    # the Triton cache it shares with its side), while the other side's probe was served: the
    # resume probes again only the side that was cut, and finds dead_op not live.
    args = [*CORPUS, "ops=[dead_op]", "ab.rounds=3", "ab.min_rounds=3", "ab.allow_dead=true"]
    env = {"ZL_FIXTURE_FAULT": "prober:dead_kernel:600", "ZL_FIXTURE_FAULT_ONCE": str(tmp_path / "stalled")}
    cut = run_zlbench(*args, f"launcher.run_timeout_s={CUT_S}", env=env)
    assert cut.returncode == 4, cut.stderr[-3000:]
    assert (tmp_path / "stalled").exists(), f"the time limit came before the stall: raise CUT_S={CUT_S}"
    d = cut.run_dir
    served = {side: [e["node"] for e in side_probes(d, side) if e["event"] == "served"] for side in ("off", "on")}
    stalled = next(side for side, nodes in served.items() if not nodes)
    other = "on" if stalled == "off" else "off"
    assert served[other] == [DEAD], served
    starts = [e["node"] for e in side_probes(d, stalled) if e["event"] == "start"]
    assert starts == [DEAD + "[64]"] or starts[:1] == [DEAD], starts
    assert not node_runs(d)  # nothing timed before every probe is in
    assert_no_process_left(d)
    done = run_zlbench(*args, f"resume={d}", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert summary_of(ab_rows(d)) == {"dead_op": ("1", "not live", "not live")}
    assert [r[2] for r in node_runs(d) if r[6] == "ok"] == ["off"]
    assert [e["node"] for e in side_probes(d, other) if e["event"] == "served"] == [DEAD]  # not probed again
    assert [e["node"] for e in side_probes(d, stalled) if e["event"] == "served"] == [DEAD]
    assert_no_process_left(d)


def test_a_resume_does_not_probe_again_what_the_cut_run_probed(run_zlbench, tmp_path):
    # Cut while side B times live_op in round 1, after the probers found it live.
    args = [*CORPUS, "ops=[live_op]", "ab.rounds=3", "ab.min_rounds=3"]
    env = {"ZL_FIXTURE_FAULT": "on:live_kernel:600", "ZL_FIXTURE_FAULT_ONCE": str(tmp_path / "stalled")}
    cut = run_zlbench(*args, f"launcher.run_timeout_s={CUT_S}", env=env)
    assert cut.returncode == 4, cut.stderr[-3000:]
    assert (tmp_path / "stalled").exists(), f"the time limit came before the stall: raise CUT_S={CUT_S}"
    d = cut.run_dir
    assert [e["node"] for e in probe_events(d) if e["event"] == "served"] == [LIVE, LIVE]
    assert [(r[2], r[6]) for r in node_runs(d)] == [("off", "ok"), ("on", "timeout")]
    done = run_zlbench(*args, f"resume={d}", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # No second probe, no prober started at all by the resume.
    probes = probe_events(d)
    assert [e["node"] for e in probes if e["event"] == "served"] == [LIVE, LIVE]
    assert len([e for e in probes if e["event"] == "probe_process"]) == 2
    assert summary_of(ab_rows(d)) == {"live_op": ("3", "max rounds", "slower")}
    ab = json.loads((d / "ab.json").read_text())
    assert {r["live"] for r in ab["rows"]} == {"live"}
    assert_no_process_left(d)


def test_a_crash_in_a_respawned_process_restarts_it_with_a_tuning_cache_of_its_own(run_zlbench, tmp_path):
    # Decided: a process started again after a crash tunes afresh too (a crash in tuning, or a pick
    # that crashes, would otherwise be read back and repeat); no two processes share a cache.
    res = run_zlbench(*CORPUS, "ops=[flaky_op,live_op]", "ab.rounds=4", "ab.min_rounds=4", "ab.respawn_every=2",
                      "fail_on=[]", env={"ZL_FIXTURE_CRASH_ONCE": str(tmp_path / "crashed")})
    assert res.returncode == 0, res.stderr[-3000:]
    runs = node_runs(res.run_dir)
    assert sorted(r[6] for r in runs if r[4].endswith("flaky_op")) == ["crashed"] + ["ok"] * 7
    caches = {e["pid"]: e["facts"]["tuning_cache"] for e in events_of(res.run_dir) if e["event"] == "process"}
    assert set(caches) == {r[5] for r in runs}
    assert len(caches) == 5 and len(set(caches.values())) == 5
    assert_no_process_left(res.run_dir)


def test_a_timed_side_that_crashes_after_compiling_still_gets_its_liveness_known(run_zlbench, tmp_path):
    # Side off dies on dead_op in round 1 once its kernel is in its Triton cache; the retry (a fresh
    # process) must compile it again and record it, so liveness first still finds dead_op not live.
    env = {"ZL_FIXTURE_FAULT": "off:dead_kernel:crash", "ZL_FIXTURE_FAULT_ONCE": str(tmp_path / "crashed")}
    res = run_zlbench(*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3",
                      "launcher.crash_retries=1", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    assert (tmp_path / "crashed").exists()  # the fault did fire
    d = res.run_dir
    assert [(r[2], r[6]) for r in node_runs(d) if r[4] == DEAD] == [("off", "ok")]
    rows = ab_rows(d)
    assert summary_of(rows)["dead_op"] == ("1", "not live", "not live")
    assert summary_of(rows)["live_op"] == ("3", "max rounds", "slower")
    assert_no_process_left(d)
