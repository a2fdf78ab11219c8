"""run_in_turn's order of prestarts and of after_last (the spares), with stand-in runners."""
import pytest

from zlbench.engine.jobs import run_in_turn


class Fake:
    def __init__(self, i, k, log, measures):
        # measures None: its nodes were there when it started ahead, then another unit took them
        self.taken = measures is None
        self.i, self.unit, self.log, self.measures = i, {"unit_id": f"u{i}", "prestart": k}, log, measures or 0
        self.on_measuring, self.ahead = None, None

    def prestart(self, leave_out=()):
        if self.ahead is None and (self.measures or self.taken):
            self.ahead = True
            self.log.append(f"pre{self.i}")

    def discard_ahead(self):
        if self.ahead:
            self.log.append(f"stop{self.i}")
        self.ahead = None

    def run(self):
        for _ in range(self.measures):
            self.ahead = None  # the process started ahead measures (UnitRunner._launch takes it)
            self.log.append(f"m{self.i}")
            self.on_measuring()
        return {}


def trace(ks, measures=None, max_ahead=None):
    log = []
    runners = [Fake(i, k, log, m) for i, (k, m) in enumerate(zip(ks, measures or [1] * len(ks)))]
    run_in_turn(runners, lambda: log.append("S"), max_ahead=max_ahead)
    return " ".join(log)


@pytest.mark.parametrize("ks, measures, expected", [
    ([2], None, "m0 S"),
    ([2, 2], None, "m0 pre1 m1 S"),  # not before the first unit ended
    ([2] * 3, None, "m0 pre1 pre2 m1 S m2"),
    ([2] * 4, None, "m0 pre1 pre2 m1 pre3 m2 S m3"),  # n-2, not n-3
    ([2] * 6, None, "m0 pre1 pre2 m1 pre3 m2 pre4 m3 pre5 m4 S m5"),
    ([1] * 3, None, "m0 pre1 m1 pre2 m2 S"),  # plan.json of a run planned one ahead
    ([True] * 3, None, "m0 pre1 m1 pre2 m2 S"),
    ([False] * 3, None, "m0 m1 m2 S"),  # no k: once the last measures
    ([2] * 3, [0, 0, 1], "m2 S"),  # resumed: the unit at start_next_at has nothing left
    ([2] * 4, [0, 0, 1, 1], "m2 pre3 S m3"),
    ([2] * 3, [1, 3, 1], "m0 pre1 pre2 m1 S m1 m1 m2"),  # retries: once
])
def test_prestarts_and_spares_start_in_order(ks, measures, expected):
    assert trace(ks, measures) == expected


def test_no_more_processes_ahead_than_the_cpus_beside_the_measuring_one():
    """On a 2-CPU share (a Slurm task's default) one ahead, as before two ahead was planned."""
    assert trace([2] * 3, max_ahead=1) == "m0 pre1 m1 pre2 m2 S"


def test_a_process_started_ahead_whose_nodes_another_unit_took_is_stopped_when_its_turn_ends():
    """A shard's sibling took its nodes: it never measures, and its process goes at once, not when
    the whole queue ends."""
    assert trace([2] * 3, [1, None, 1]) == "m0 pre1 pre2 stop1 m2 S"
