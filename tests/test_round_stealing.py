"""Rounds of a node-level A/B taken across devices (zlbench/engine/stealing.py, zlbench/engine/device_ab.py), on
hand-made plans: races between a node's home device and a taker, without running benchmarks."""

import threading

from zlbench.engine import device_ab as resident
from zlbench.engine.device_ab import DeviceAB
from zlbench.results import events as ev
from zlbench.engine.stealing import RoundStealing

SIDES = ["off", "on"]
ROUNDS = 4
SCHEDULE = {"sides": SIDES, "min_rounds": 2}  # plan.json's, written once for every unit
N, M = "t.py::test_n", "t.py::test_m"


def plan_units(run_dir, rounds=ROUNDS):
    """Device 0 holds N, device 1 holds M; every unit may take the other device's node."""
    units = []
    for dev, node, other in ((0, N, M), (1, M, N)):
        for r in range(rounds):
            for s in SIDES:
                units.append({"unit_id": f"d{dev}.{s}.r{r}", "device": dev, "side": s, "round": r, "nodes": [node],
                              "pool": [other], "claims_dir": str(run_dir / "claims" / f"{s}.r{r}")})
    for u in units:
        ev.events_path(run_dir, u["unit_id"]).parent.mkdir(parents=True, exist_ok=True)
    return units


def home_ab(units, run_dir, device=0):
    """A DeviceAB with only what its claims and `stopped` events need (no processes)."""
    ab = DeviceAB.__new__(DeviceAB)
    ab.run_dir, ab.sides = run_dir, SIDES
    ab.units = {(u["side"], u["round"]): u for u in units if u["device"] == device}
    ab.rounds = ROUNDS
    ab.steal = RoundStealing(units, device, SIDES, ROUNDS, run_dir)
    return ab


def test_a_node_stopped_as_not_live_is_never_takeable_while_its_stops_are_written(tmp_path, monkeypatch):
    units = plan_units(tmp_path)
    home, taker = home_ab(units, tmp_path), RoundStealing(units, 1, SIDES, ROUNDS, tmp_path)
    ev.append(ev.events_path(tmp_path, "d0.off.r0"), "end", node=N, status="ok")  # side A timed it
    offered = []
    append = ev.append

    def watched(path, event, **fields):
        append(path, event, **fields)
        if event == "stopped":  # what another device may take at every step of the writing
            offered.append(taker.next_round()[0])

    monkeypatch.setattr(resident.ev, "append", watched)
    # The probe found it not live: as _round writes it.
    home._stop(N, "not live", 1)
    home._stop(N, "not live", 0, sides=["on"])
    assert offered and all(o is None or o[0] != N for o in offered), offered
    assert all(taker.take(N, r) is False for r in range(1, 4))


class BrokenSide:
    broken = "exited with code 1 before it was ready"


def test_a_device_whose_side_process_cannot_start_takes_no_rounds_of_others(tmp_path):
    units = plan_units(tmp_path)
    for s in SIDES:
        ev.append(ev.events_path(tmp_path, f"d0.{s}.r0"), "end", node=N, status="ok")
    taker = home_ab(units, tmp_path, device=1)
    taker.schedule, taker.deadline, taker.taken_in = SCHEDULE, None, {}
    taker.procs = {s: BrokenSide() for s in SIDES}
    taker._take_others()
    # Every round of N after the first is still there for its home device to run.
    assert all(RoundStealing(units, 0, SIDES, ROUNDS, tmp_path).take(N, r) for r in range(1, 4))


class CountedSide:
    """A side process that counts its starts (a stop ends the current one)."""
    broken = None

    def __init__(self):
        self.start = 0

    def stop(self):
        self.start += 1


def test_a_taker_respawns_between_periods_of_a_node_it_runs_several_rounds_of(tmp_path):
    units = plan_units(tmp_path)
    for s in SIDES:
        ev.append(ev.events_path(tmp_path, f"d0.{s}.r0"), "end", node=N, status="ok")
    taker = home_ab(units, tmp_path, device=1)
    taker.schedule = {**SCHEDULE, "respawn_every": 2, "min_rounds": 4}
    taker.deadline, taker.taken_in = None, {}
    taker.procs = {s: CountedSide() for s in SIDES}
    ran = []

    def run_node(side, unit, node):
        ran.append((side, unit["round"], taker.procs[side].start))
        ev.append(ev.events_path(tmp_path, unit["unit_id"]), "end", node=node, status="ok")

    taker._run_node = run_node
    taker._take_others()
    assert sorted(r for _, r, _ in ran) == [1, 1, 2, 2, 3, 3]
    # Round 1 (period 0) and rounds 2-3 (period 1) in different processes, on either side.
    for side in SIDES:
        by_round = {r: start for s, r, start in ran if s == side}
        assert by_round[1] != by_round[2] == by_round[3], ran


def test_a_device_that_ended_never_reads_as_alive_afterwards(tmp_path, monkeypatch):
    """The heartbeat thread may be mid-beat when the run ends: its beat must not land after the
    `finished` mark, or other devices wait for rounds of it that nobody will run."""
    units = plan_units(tmp_path)
    ab = home_ab(units, tmp_path)
    ab.lock, ab.procs, ab.probers = None, {}, {}
    ab._take_others = lambda: None
    second_beat, marked, landed, beats = threading.Event(), threading.Event(), threading.Event(), []
    finished, beat = RoundStealing.finished, RoundStealing.beat

    def late_beat(self):
        beats.append(1)
        if len(beats) == 2:  # under way while the run ends
            second_beat.set()
            marked.wait(0.5)
        beat(self)
        if len(beats) == 2:
            landed.set()

    def mark(self):
        finished(self)
        marked.set()

    monkeypatch.setattr(RoundStealing, "beat", late_beat)
    monkeypatch.setattr(RoundStealing, "finished", mark)
    monkeypatch.setattr(resident, "HEARTBEAT_S", 0.01)
    ab._round = lambda r: second_beat.wait(5)
    ab.run()
    assert landed.wait(5)
    assert (tmp_path / "resident" / "d0.alive").read_text() == "finished"


def test_looking_for_rounds_to_take_reads_only_what_is_new(tmp_path, monkeypatch):
    """A waiting taker polls next_round every POLL_S, and a taken round reads the rows before it:
    events and rows already seen are not folded again (a big corpus made each poll cost seconds
    of CPU on the host that times the other devices)."""
    from zlbench.results import tables

    units = plan_units(tmp_path)
    for s in SIDES:
        ev.append(ev.events_path(tmp_path, f"d0.{s}.r0"), "end", node=N, status="ok")
    taker = RoundStealing(units, 1, SIDES, ROUNDS, tmp_path)
    folded, rows_made = [], []
    done_nodes, unit_rows = ev.done_nodes, tables.unit_rows
    monkeypatch.setattr(ev, "done_nodes", lambda events: folded.extend(list(events)) or done_nodes(events))
    monkeypatch.setattr(tables, "unit_rows", lambda u, events: rows_made.append(u) or unit_rows(u, events))
    first = (taker.next_round(), taker.rows_before(3, [N]))
    assert folded and rows_made
    folded.clear(), rows_made.clear()
    assert (taker.next_round(), taker.rows_before(3, [N])) == first
    assert folded == [] and rows_made == []
    # What is new is seen.
    for s in SIDES:
        ev.append(ev.events_path(tmp_path, f"d1.{s}.r1"), "end", node=N, status="ok")
    assert taker.next_round()[0] == (N, 2)


def test_a_round_a_taker_claimed_before_a_cut_runs_on_resume_whenever_its_home_device_finishes(tmp_path, monkeypatch):
    """Resumed, a taker holds N's round 2 (claimed, cut before it ran) and waits for round 1 on N's
    home device, which finishes it (and the rest, round 2 left to its claimant) right after the
    taker looked: the taker still runs round 2 instead of leaving it for yet another resume."""
    units = plan_units(tmp_path)
    for s in SIDES:
        ev.append(ev.events_path(tmp_path, f"d0.{s}.r0"), "end", node=N, status="ok")
    home = RoundStealing(units, 0, SIDES, ROUNDS, tmp_path)
    home.beat()
    taker = home_ab(units, tmp_path, device=1)
    taker.schedule, taker.deadline, taker.taken_in = SCHEDULE, None, {}
    taker.procs = {s: CountedSide() for s in SIDES}
    assert taker.steal.take(N, 2) and home.take(N, 1)  # round 1 runs on N's home device
    ran = []

    def run_node(side, unit, node):
        ran.append((side, unit["round"]))
        ev.append(ev.events_path(tmp_path, unit["unit_id"]), "end", node=node, status="ok")

    taker._run_node = run_node
    next_round = taker.steal.next_round

    def home_finishes_after_the_look():
        found = next_round()
        if not (tmp_path / "resident" / "d0.alive").read_text() == "finished":
            for r in (1, 3):
                for s in SIDES:
                    ev.append(ev.events_path(tmp_path, f"d0.{s}.r{r}"), "end", node=N, status="ok")
            home.finished()
        return found

    monkeypatch.setattr(taker.steal, "next_round", home_finishes_after_the_look)
    taker._take_others()
    assert sorted(ran) == [("off", 2), ("on", 2)]


def test_a_taken_round_cut_between_its_sides_runs_only_the_side_left_on_resume(tmp_path):
    """A taker ran side A of N's round 2 and was cut before side B (a time limit or a Ctrl-C: side B
    got a placeholder in the taker's unit). Resumed, the taker still holds the round: it runs side
    B alone; side A measured again would be a second row of one (node, side, round)."""
    units = plan_units(tmp_path)
    for r in (0, 1, 3):  # N's home device ran every other round of it
        for s in SIDES:
            ev.append(ev.events_path(tmp_path, f"d0.{s}.r{r}"), "end", node=N, status="ok")
    RoundStealing(units, 0, SIDES, ROUNDS, tmp_path).finished()
    taker = home_ab(units, tmp_path, device=1)
    taker.schedule, taker.deadline, taker.taken_in = SCHEDULE, None, {}
    taker.procs = {s: CountedSide() for s in SIDES}
    assert taker.steal.take(N, 2)
    ev.append(ev.events_path(tmp_path, "d1.off.r2"), "end", node=N, status="ok")
    ev.append(ev.events_path(tmp_path, "d1.on.r2"), "end", node=N, status="timeout", resumable=True,
              reason="the run's time limit")
    ran = []

    def run_node(side, unit, node):
        ran.append((side, unit["round"]))
        ev.append(ev.events_path(tmp_path, unit["unit_id"]), "end", node=node, status="ok")

    taker._run_node = run_node
    taker._take_others()
    assert ran == [("on", 2)]
