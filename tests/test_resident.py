"""Node-level A/B (zlbench/engine/device_ab.py, plugins/serve.py) through real runs of a fixture corpus whose
effect is known: ABBA per node, one process at a time per device, resident processes and respawn,
liveness first, crashes and hangs inside a resident process, A/A."""

import csv
import json
import re
import signal
from collections import defaultdict

import pytest

from .conftest import FIXTURES, start_zlbench, wait_for, zlbench

pytestmark = pytest.mark.slow

CORPUS = [f"corpus.root={FIXTURES / 'ab_corpus'}", "corpus.name=fixture", "ab=env", "ab.var=ZL_FIXTURE_SWITCH"]
LIVE, DEAD = "benchmark/test_switch_perf.py::test_perf_live_op", "benchmark/test_switch_perf.py::test_perf_dead_op"


def node_runs(run_dir):
    """Every timed run of a node: (start, end, side, round, node, pid), in time order."""
    plan = json.loads((run_dir / "plan.json").read_text())
    runs = []
    for u in plan["units"]:
        starts = {}
        for line in (run_dir / "units" / u["unit_id"] / "events.jsonl").read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "start":
                starts[e["node"]] = e
            elif e["event"] == "end" and e["node"] in starts:
                s = starts.pop(e["node"])
                runs.append((s["t"], e["t"], u["side"], u["round"], e["node"], s["pid"], e["status"]))
    return sorted(runs)


def ab_rows(run_dir):
    return {(r["op"], r["shape"]): r for r in csv.DictReader(open(run_dir / "ab.csv"))}


def test_sides_alternate_per_node_in_resident_processes_and_dead_nodes_stop_after_round_one(run_zlbench):
    res = run_zlbench(*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3")
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    runs = node_runs(d)
    # One process runs a node on the device at a time: no two runs overlap.
    assert all(b[0] >= a[1] for a, b in zip(runs, runs[1:])), runs
    # One resident process per side for the whole run (no respawn asked).
    pids = defaultdict(set)
    for r in runs:
        pids[r[2]].add(r[5])
    assert {k: len(v) for k, v in pids.items()} == {"off": 1, "on": 1}
    # ABBA per node: in round r, the node at position i starts with side A when i + r is even.
    plan = json.loads((d / "plan.json").read_text())
    for rnd in range(3):
        order = next(u["nodes"] for u in plan["units"] if u["round"] == rnd and u["side"] == "off")
        for i, node in enumerate(order):
            sides = [r[2] for r in runs if r[3] == rnd and r[4] == node]
            if node == DEAD:
                # Liveness first: both sides compiled it (probes, untimed) and found its kernels
                # identical, so only side A timed it, and only in round 1.
                assert sides == ([] if rnd else ["off"]), (rnd, sides)
            else:
                assert sides == (["off", "on"] if (i + rnd) % 2 == 0 else ["on", "off"]), (rnd, i, sides)
    # The probes ran in processes of their own, one per side (their untimed tuning picks never
    # reach a timed run), each with a scratch tuning cache beside its side's, its path as long
    # (liveness masks it by length), and all of them before anything was timed.
    probers = {}
    for side in ("off", "on"):
        unit = next(u for u in plan["units"] if u["round"] == 0 and u["side"] == side)
        probe_events = [json.loads(x) for x in (d / "units" / unit["unit_id"] / "probe.jsonl").read_text().splitlines()]
        prober = [e for e in probe_events if e["event"] == "probe_process"]
        assert len(prober) == 1 and prober[0]["pid"] not in pids["on"] | pids["off"]
        served = [e for e in probe_events if e["event"] == "served"]
        assert {e["pid"] for e in served} == {prober[0]["pid"]}
        assert sorted(e["node"] for e in served) == sorted([LIVE, DEAD])
        assert max(e["t"] for e in served) < runs[0][0]
        # a served node says what device memory its process still holds: nothing to ask on the CPU
        assert all("memory" in e and e["memory"] is None for e in served)
        own = unit["env"]["FLAGGEMS_CACHE_DIR"]
        assert prober[0]["tuning_cache"] != own and len(prober[0]["tuning_cache"]) == len(own)
        assert isinstance(prober[0]["untimed_tuning"], bool)
        probers[side] = prober[0]
    assert probers["off"]["pid"] != probers["on"]["pid"]
    assert probers["off"]["tuning_cache"] != probers["on"]["tuning_cache"]
    rows = ab_rows(d)
    assert {k[0]: (v["rounds"], v["stop"], v["verdict"]) for k, v in rows.items()} == {
        "live_op": ("3", "max rounds", "slower"), "dead_op": ("1", "not live", "not live")}
    md = (d / "ab.md").read_text()
    assert "| 1 (not live)   |" in md and "rows stopped: 2 at max rounds, 2 not live" in md
    assert "rounds: 3 to 3 per side (node by node, ABBA" in res.stderr


def test_respawn_restarts_both_sides_every_k_rounds(run_zlbench):
    res = run_zlbench(*CORPUS, "ops=[live_op]", "ab.rounds=4", "ab.min_rounds=4", "ab.respawn_every=2")
    assert res.returncode == 0, res.stderr[-3000:]
    pids = defaultdict(set)
    for r in node_runs(res.run_dir):
        pids[(r[2], r[3] // 2)].add(r[5])
    # Rounds 0-1 in one process per side, rounds 2-3 in another.
    assert all(len(v) == 1 for v in pids.values()), pids
    assert len({p for v in pids.values() for p in v}) == 4
    # Each of them tuned afresh: a FlagGems tuning cache of its own (picks drawn again per respawn).
    caches = {e["pid"]: e["facts"]["tuning_cache"] for path in res.run_dir.glob("units/*/events.jsonl")
              for e in map(json.loads, path.read_text().splitlines()) if e["event"] == "process"}
    assert set(caches) == {p for v in pids.values() for p in v}
    assert len(set(caches.values())) == 4 and all(c.endswith(("tune0001", "tune0002")) for c in caches.values())
    # A respawn starts both sides' processes together: the second side's start-up runs beside the
    # first side's, not after the round's first node (round 1 starts side A only: liveness first).
    first_event = {}
    for path in res.run_dir.glob("units/*/events.jsonl"):
        for e in map(json.loads, path.read_text().splitlines()):
            if e.get("pid") is not None:
                first_event[e["pid"]] = min(first_event.get(e["pid"], e["t"]), e["t"])
    first_run = min(r for r in node_runs(res.run_dir) if r[3] == 2)
    assert all(first_event[p] < first_run[1] for side in ("off", "on") for p in pids[(side, 1)])


AA = [*CORPUS, "ops=[live_op,dead_op]", "ab.rounds=3", "ab.min_rounds=3", "ab.aa=true"]


def test_aa_measures_every_row_on_both_sides_and_reports_the_false_positive_rate(shared_run):
    res = shared_run(*AA)
    assert res.returncode == 0, res.stderr[-3000:]
    ab = json.loads((res.run_dir / "ab.json").read_text())
    assert ab["summary"]["aa"] and ab["summary"]["paired_rows"] == 4
    assert all(r["rounds"] == 3 for r in ab["rows"]), ab["rows"]
    assert ab["summary"]["false_positive_rate"] is not None
    assert "identical by construction" in (res.run_dir / "ab.md").read_text()


def test_a_crash_and_a_hang_in_a_resident_process_cost_one_node_and_a_fresh_process(run_zlbench, tmp_path):
    env = {"ZL_FIXTURE_CRASH_ONCE": str(tmp_path / "crashed"), "ZL_FIXTURE_HANG_ONCE": str(tmp_path / "hung")}
    # The hang is a test's: the node timeout ends it (a fresh process' start-up, with no test in
    # flight, gets at least 30 s, as in a plain run).
    res = run_zlbench(*CORPUS, "ops=[flaky_op,live_op]", "ab.rounds=3", "ab.min_rounds=3",
                      "launcher.node_timeout_s=12", "fail_on=[]", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    runs = node_runs(res.run_dir)
    flaky = [r for r in runs if r[4].endswith("test_perf_flaky_op")]
    statuses = sorted(r[6] for r in flaky)
    # Six runs of the node (2 sides x 3 rounds), one crashed and one timed out; the rest measured.
    assert statuses == ["crashed", "ok", "ok", "ok", "ok", "timeout"], statuses
    # The live op still ran every round on both sides, in processes started again after the faults.
    assert sum(1 for r in runs if r[4] == LIVE and r[6] == "ok") == 6
    assert len({r[5] for r in runs}) >= 3
    st = {(r["op"], r["side"]): r for r in csv.DictReader(open(res.run_dir / "ops_status.csv"))}
    assert {st[("flaky_op", s)]["status"] for s in ("off", "on")} <= {"crashed", "timeout"}
    assert any("node_timeout_s=12" in st[("flaky_op", s)]["reason"] for s in ("off", "on"))
    # The run was not cut: the row short of its rounds says why, with nothing to resume.
    ab = json.loads((res.run_dir / "ab.json").read_text())
    flaky_rows = [r for r in ab["rows"] if r["op"] == "flaky_op"]
    assert flaky_rows and all(r["stop"] == "failed rounds" and r["verdict"] == "inconclusive" for r in flaky_rows)
    assert not ab["summary"]["cut"] and "Run cut short" not in (res.run_dir / "ab.md").read_text()


def test_sequential_rounds_stop_a_clear_effect_at_the_minimum(run_zlbench):
    res = run_zlbench(*CORPUS, "ops=[live_op]", "ab.rounds=10", "ab.min_rounds=3")
    assert res.returncode == 0, res.stderr[-3000:]
    rows = ab_rows(res.run_dir)
    # +30% with 0.5% noise: settled at the first look, not run to the maximum.
    assert {(v["rounds"], v["stop"], v["verdict"]) for v in rows.values()} == {("3", "settled", "slower")}
    runs = node_runs(res.run_dir)
    assert max(r[3] for r in runs) == 2 and len(runs) == 6


def test_a_node_with_nothing_to_compare_stops_after_round_one_and_keeps_no_round_alive(run_zlbench):
    # live_op settles at round 3; view_op (no device work) and skip_op (not applicable) can never
    # give a row to compare, so they run in round 1 only, and no round 4.. runs for them.
    res = run_zlbench(*CORPUS, "ops=[live_op,view_op,skip_op]", "ab.rounds=6", "ab.min_rounds=3")
    assert res.returncode == 0, res.stderr[-3000:]
    runs = node_runs(res.run_dir)
    by_node = defaultdict(set)
    for r in runs:
        by_node[r[4].split("::")[-1]].add(r[3])
    assert by_node == {"test_perf_live_op": {0, 1, 2}, "test_perf_view_op": {0}, "test_perf_skip_op": {0}}, by_node
    rows = ab_rows(res.run_dir)
    assert {(k[0], v["rounds"], v["stop"]) for k, v in rows.items()} == {("live_op", "3", "settled")}
    md = (res.run_dir / "ab.md").read_text()
    assert md.count("launched no device work on either side") == 2 and "in 1 round(s)" in md
    assert "Run cut short" not in md


def test_a_node_whose_kernel_case_failed_in_round_one_is_not_stopped_for_its_views(run_zlbench, tmp_path):
    # half_op's view case records rows in round 1 while its kernel case fails on both sides: a
    # failure may measure in a later round, so the node runs on and its kernel row is compared.
    res = run_zlbench(*CORPUS, "ops=[half_op]", "ab.rounds=4", "ab.min_rounds=3", "fail_on=[]",
                      env={"ZL_FIXTURE_FAIL_ONCE": str(tmp_path / "failed_once")})
    assert res.returncode == 0, res.stderr[-3000:]
    assert {r[3] for r in node_runs(res.run_dir)} == {0, 1, 2, 3}
    rows = ab_rows(res.run_dir)
    assert list(rows) == [("half_op", "[[128]]")] and rows[("half_op", "[[128]]")]["rounds"] == "3", rows


def test_a_neutral_noisy_row_runs_to_the_maximum_and_a_cut_run_says_so_and_resumes(run_zlbench, tmp_path):
    # Cut (Ctrl-C) once slow_op's 7th run (round 4, side on) started: 3 of its 4 rounds measured.
    env = {"ZL_FIXTURE_SWING": "0.2", "ZL_FIXTURE_SLEEP": "0.05", "ZL_FIXTURE_RUNS": str(tmp_path / "runs"),
           "ZL_FIXTURE_STALL": "7"}
    args = [*CORPUS, "ops=[slow_op]", "ab.rounds=4", "ab.min_rounds=3"]
    run = tmp_path / "run"
    proc = start_zlbench(f"hydra.run.dir={run}", "progress=plain", *args, "launcher.run_timeout_s=3600",
                         cwd=tmp_path, env=env)
    assert wait_for(lambda: (tmp_path / "runs" / "stalled").exists() or proc.poll() is not None)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-3000:]
    md = (run / "ab.md").read_text()
    assert md.splitlines()[2].startswith("- **Run cut short**") and "of the 3 to 4 rounds planned" in md
    assert "each reached the minimum, so its verdict stands" in md and "A/B Run cut short" in err
    summarized = zlbench("summary", run, defaults=True)  # the verdicts of the cut run, as its summary.md has them
    assert summarized.returncode == 4, summarized.stderr[-2000:]  # cut: the rest is resumable
    assert summarized.stdout.strip() == (run / "summary.md").read_text().strip(), summarized.stdout[:3000]
    # summary.md's banner: the cut pairs have rows from their earlier rounds, and says so.
    banner = next(x for x in (run / "summary.md").read_text().splitlines() if x.startswith("> **Run cut short"))
    assert "Run cut short** (interrupted)" in banner and "of 2 node-side pair(s) not measured in every round (" \
        in banner and "in fewer: the A/B section says how many each row got)" in banner, banner
    # ops_status.csv: the cut pairs were interrupted, not crashed, and their earlier rounds' rows are kept.
    with open(run / "ops_status.csv") as f:
        cut = [r for r in csv.DictReader(f) if r["status"] != "ok"]
    assert cut and all(r["status"] == "interrupted" and int(r["rows"]) > 0 and r["reason"].startswith(
        "measured in 3 round(s) (their rows kept); in the others: not measured (interrupted)") for r in cut), cut
    # A resume (another time limit is not another caliber) runs what the cut left, to the maximum.
    done = run_zlbench(*args, f"resume={run}", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = ab_rows(run)
    assert {(v["rounds"], v["stop"]) for v in rows.values()} == {("4", "max rounds")}, rows
    assert "Run cut short" not in (run / "ab.md").read_text()


def test_the_demo_switch_is_found_node_by_node(run_zlbench):
    res = run_zlbench("ab=demo_fused_softmax", "ab.rounds=6", "ab.min_rounds=3", "ops=[softmax]", "dtypes=[bfloat16]")
    assert res.returncode == 0, res.stderr[-3000:]
    ab = json.loads((res.run_dir / "ab.json").read_text())
    verdicts = [r["verdict"] for r in ab["rows"]]
    assert verdicts.count("faster") >= 2 and set(verdicts) <= {"faster", "unstable", "inconclusive"}, ab["rows"]
    assert all(3 <= r["rounds"] <= 6 and r["stop"] in ("settled", "futile", "max rounds") for r in ab["rows"])
    for side in ("off", "on"):
        assert (res.run_dir / f"run.{side}.log").is_file()


def runs_by_device(run_dir):
    """node_runs with the device whose unit reported each run (a device may take other devices'
    rounds: zlbench/engine/stealing.py)."""
    plan = json.loads((run_dir / "plan.json").read_text())
    device = {(u["side"], u["round"], u["unit_id"]): u["device"] for u in plan["units"]}
    home = {n: u["device"] for u in plan["units"] for n in u["nodes"]}
    out = []
    for u in plan["units"]:
        starts = {}
        path = run_dir / "units" / u["unit_id"] / "events.jsonl"
        for line in path.read_text().splitlines() if path.exists() else []:
            e = json.loads(line)
            if e["event"] == "start":
                starts[e["node"]] = e
            elif e["event"] == "end" and e["node"] in starts:
                s = starts.pop(e["node"])
                out.append({"t0": s["t"], "t1": e["t"], "side": u["side"], "round": u["round"], "node": e["node"],
                            "device": device[(u["side"], u["round"], u["unit_id"])], "home": home[e["node"]],
                            "pid": s["pid"], "status": e["status"]})
    return sorted(out, key=lambda r: r["t0"])


def test_on_two_devices_both_sides_of_a_round_run_on_one_device(shared_run, tmp_path_factory):
    res = taking_run(shared_run, tmp_path_factory)
    assert res.returncode == 0, res.stderr[-3000:]
    plan = json.loads((res.run_dir / "plan.json").read_text())
    assert {u["device"] for u in plan["units"]} == {0, 1}
    runs = runs_by_device(res.run_dir)
    for key in {(r["node"], r["round"]) for r in runs}:
        assert len({r["device"] for r in runs if (r["node"], r["round"]) == key}) == 1, key
    # One resident process per side and device (rounds taken from another device included).
    assert len({r["pid"] for r in runs}) == 4


# Three nodes of equal cost split 2:1 over two devices (device 0 holds two).
TAKING = [*CORPUS, "backend=cpu", "backend.slots=2", "ops=[slow_op,nap_op,doze_op]"]


def taking_env(tmp_path, **extra):
    return {"ZL_FIXTURE_SLEEP": "0.05", "ZL_FIXTURE_RUNS": str(tmp_path / "runs"), "ZL_FIXTURE_HOLD": "0", **extra}


def assert_layout(run_dir):
    plan = json.loads((run_dir / "plan.json").read_text())
    per_device = {d: len(next(u["nodes"] for u in plan["units"] if u["device"] == d)) for d in (0, 1)}
    assert per_device == {0: 2, 1: 1}, f"ZL_FIXTURE_HOLD=0 assumes device 0 holds two nodes: {per_device}"


def taking_run(shared_run, tmp_path_factory):
    """4 rounds of TAKING; device 0 holds its nodes after their round 1 until device 1 took a round
    (ZL_FIXTURE_HOLD): taking is then certain, whatever the machine's speed."""
    return shared_run(*TAKING, "ab.rounds=4", "ab.min_rounds=4", env=taking_env(tmp_path_factory.getbasetemp() / "taking"))


def test_a_device_done_with_its_rounds_takes_later_rounds_of_another_devices_nodes(shared_run, tmp_path_factory):
    """Three nodes of equal cost split 2:1 over two devices: the device with one node finishes its
    rounds first and takes later rounds of the other's nodes (both sides of a round at once), so
    every (node, side, round) is measured once, each round's pair on one device."""
    res = taking_run(shared_run, tmp_path_factory)
    assert res.returncode == 0, res.stderr[-3000:]
    assert_layout(res.run_dir)
    runs = runs_by_device(res.run_dir)
    keys = [(r["node"], r["side"], r["round"]) for r in runs]
    assert len(keys) == len(set(keys)) == 3 * 2 * 4 and all(r["status"] == "ok" for r in runs), runs
    for key in {(r["node"], r["round"]) for r in runs}:
        assert len({r["device"] for r in runs if (r["node"], r["round"]) == key}) == 1, key
    taken = [(r["node"], r["round"]) for r in runs if r["device"] != r["home"]]
    assert taken and all(rnd > 0 for _, rnd in taken), runs  # round 1 (liveness) stays home
    # Still one node at a time per device, taken rounds included.
    for dev in (0, 1):
        mine = [r for r in runs if r["device"] == dev]
        assert all(b["t0"] >= a["t1"] for a, b in zip(mine, mine[1:])), mine
    # The report counts every round wherever it ran; nothing reads as missing or cut.
    assert {v["rounds"] for v in ab_rows(res.run_dir).values()} == {"4"}
    statuses = {(r["test_node"], r["side"]): r["status"] for r in csv.DictReader(open(res.run_dir / "ops_status.csv"))}
    assert len(statuses) == 6 and set(statuses.values()) == {"ok"}, statuses


def test_tuning_replay_runs_round_by_round_and_says_so(run_zlbench):
    res = run_zlbench(*CORPUS, "ops=[live_op]", "ab.tuning=replay", "dry_run=true")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "note: ab.tuning=replay runs round by round (ab.schedule=round)" in res.stdout
    res = run_zlbench(*CORPUS, "ops=[live_op]", "ab.min_rounds=1")
    assert res.returncode == 2 and "ab.min_rounds=1" in res.stderr and "Fix: ab.min_rounds=4" in res.stderr


def test_a_run_cut_between_the_sides_of_a_taken_round_resumes_to_every_round_once(run_zlbench, tmp_path):
    """Cut (Ctrl-C) while device 1 times side B of the first round it took of device 0's nodes, side A
    of it measured: the resume measures side B alone, so every (node, side, round) is measured once."""
    args = [*TAKING, "ab.rounds=3", "ab.min_rounds=3"]
    env = taking_env(tmp_path, ZL_FIXTURE_STALL="away")
    run = tmp_path / "run"
    proc = start_zlbench(f"hydra.run.dir={run}", "progress=plain", *args, cwd=tmp_path, env=env)
    stalled = tmp_path / "runs" / "stalled"
    assert wait_for(lambda: stalled.exists() or proc.poll() is not None, timeout=600), "no round taken"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=300)
    assert stalled.exists() and proc.returncode == 130, err[-3000:]
    assert_layout(run)
    away = [r for r in runs_by_device(run) if r["device"] != r["home"]]
    # Side A of the taken round measured; side B cut (its placeholder: a resume measures it).
    assert [(r["status"], r["round"]) for r in away] == [("ok", 1), ("interrupted", 1)], away
    assert away[0]["node"] == away[1]["node"] and away[0]["side"] != away[1]["side"], away
    assert "Run cut short" in (run / "ab.md").read_text()
    done = run_zlbench(*args, f"resume={run}", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    ok = [(r["node"], r["side"], r["round"]) for r in runs_by_device(run) if r["status"] == "ok"]
    assert len(ok) == len(set(ok)) == 3 * 2 * 3, sorted(ok)
    assert {v["rounds"] for v in ab_rows(run).values()} == {"3"}
    text = (run / "ab.md").read_text()
    assert "Run cut short" not in text
    # That round's two sides were measured in two sessions (and any other round the interrupt split on
    # device 0): ab.md says so (it said nothing).
    split = re.search(r"(\d+) node round\(s\) pair a side measured before a resume with one measured after it", text)
    assert split and int(split[1]) >= 1, text[:3000]


def test_aa_starts_no_prober_and_alternates_from_round_one(shared_run):
    res = shared_run(*AA)
    assert res.returncode == 0, res.stderr[-3000:]
    d = res.run_dir
    assert not list((d / "resident").glob("*.probe")) and not list((d / "units").glob("*/probe.jsonl"))
    plan = json.loads((d / "plan.json").read_text())
    sides = plan["schedule"]["sides"]
    runs = node_runs(d)
    for rnd in range(3):
        order = next(u["nodes"] for u in plan["units"] if u["round"] == rnd and u["side"] == sides[0])
        for i, node in enumerate(order):
            got = [r[2] for r in runs if r[3] == rnd and r[4] == node]
            assert got == (sides if (i + rnd) % 2 == 0 else sides[::-1]), (rnd, i, got)


SERVED_CORPUS = {
    # A device at its memory calls (guards.device_module): tensors count as allocated while alive,
    # freed blocks stay reserved until empty_cache, as a caching allocator keeps them.
    "conftest.py": """
import os

from zlbench.plugins import guards


class Dev:
    allocated = reserved = 0

    def empty_cache(self):
        if os.environ.get("ZL_TEST_BROKEN_CONTEXT"):
            raise RuntimeError("CUDA error: unspecified launch failure")
        Dev.reserved = Dev.allocated

    def memory_allocated(self):
        return Dev.allocated

    def memory_reserved(self):
        return Dev.reserved


guards.device_module = lambda: Dev()


class Tensor:
    def __init__(self, mib):
        self.n = mib * 2**20
        Dev.allocated += self.n
        Dev.reserved = max(Dev.reserved, Dev.allocated)
        self.me = self  # only a collection frees it

    def __del__(self):
        Dev.allocated -= self.n
""",
    "test_ops.py": """
from conftest import Tensor


def test_fails_holding_an_input():
    x = Tensor(4096)
    raise RuntimeError("the op failed")


def test_passes():
    x = Tensor(1024)
""",
}


def serve(tmp_path, nodes, **env):
    """The serve loop of a resident process, run on SERVED_CORPUS with `nodes` as its commands;
    returns the events it wrote and its exit code."""
    import os
    import subprocess
    import sys

    for name, text in SERVED_CORPUS.items():
        (tmp_path / name).write_text(text)
    events, cmds = tmp_path / "events.jsonl", tmp_path / "commands.jsonl"
    cmds.write_text("".join(json.dumps({"seq": i + 1, "node": n, "unit": "u", "events": str(events)}) + "\n"
                            for i, n in enumerate(nodes)) + json.dumps({"quit": True}) + "\n")
    (tmp_path / "plugin.json").write_text(json.dumps({"events": str(events), "unit": "u", "serve": str(cmds)}))
    env = {**os.environ, "ZLBENCH_PLUGIN_CONFIG": str(tmp_path / "plugin.json"), **env}
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "zlbench.plugins.serve",
                          "test_ops.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return [json.loads(x) for x in events.read_text().splitlines()], res


SERVED_NODES = ["test_ops.py::test_fails_holding_an_input", "test_ops.py::test_passes"]


def test_a_served_node_leaves_no_device_memory_held(tmp_path):
    """The serve loop gives the device back what a node held, through a reference cycle or the
    traceback pytest keeps of a failed test (sys.last_*, cleared only when the next item starts),
    before it says the node was served: the other side's process runs next on that device."""
    events, res = serve(tmp_path, SERVED_NODES)
    served = [e for e in events if e["event"] == "served"]
    assert [e["node"] for e in served] == SERVED_NODES, res.stdout[-2000:] + res.stderr[-2000:]
    assert [e["memory"] for e in served] == [{"allocated_mib": 0.0, "reserved_mib": 0.0}] * 2


def test_a_process_whose_memory_cannot_be_released_leaves_after_serving(tmp_path):
    """A context an op left broken (the release raises): the node reads served, its process leaves
    with why, and the scheduler's next command goes to a fresh process."""
    events, res = serve(tmp_path, SERVED_NODES, ZL_TEST_BROKEN_CONTEXT="1")
    served = [e for e in events if e["event"] == "served"]
    assert [e["node"] for e in served] == SERVED_NODES[:1], res.stdout[-2000:] + res.stderr[-2000:]
    assert "unspecified launch failure" in served[0]["memory"]["release_failed"]
    assert events[-1]["event"] == "exit" and "could not be released" in events[-1]["reason"]
    assert res.returncode == 70
