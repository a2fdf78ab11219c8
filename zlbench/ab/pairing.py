"""Pair rows of two sides by (operator, dtype, shape detail, test node) and round.

The test node is part of the key: tests of one op may time the same shapes (FlagGems' einsum
trace, diagonal and transpose; addmm in test_addmm.py and test_blas_perf_parallel.py), and a key
without it paired one test's row with another's. Rows read from a FlagGems result log carry no
node: each takes the node of the one test the other side times at its (op, dtype, shape)
(reconcile_log; history compare and vendors reconcile a log's rows the same way). Where several
tests do, or the log holds more records of the key than that test has rounds, the row is left
unpaired: which test the log's record is, nothing says.

Only rows that succeeded on both sides with a positive latency count; everything else is listed
as unpaired with the reason, so an incomplete pairing never looks complete."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from zlbench.results.events import base_node
from zlbench.results.process_stats import op_read_apart
from zlbench.results.schema import (MARKER_FALLBACK, MARKER_NO_DEVICE_WORK, did_no_device_work,
                                    interval)

Key = Tuple[str, str, str, str]  # (op, dtype, shape, node)
Key3 = Tuple[str, str, str]  # (op, dtype, shape): what a FlagGems log's row names


def row_key(r: dict) -> Key:
    return (str(r.get("op")), str(r.get("dtype")), str(r.get("shape")), str(r.get("node") or ""))


def names_tests(rows: Sequence[dict]) -> bool:
    """Whether rows name their test nodes: not a FlagGems result log's (an empty side is no log)."""
    return not rows or any(r.get("node") for r in rows)


def _key3(r: dict) -> Key3:
    return (str(r.get("op")), str(r.get("dtype")), str(r.get("shape")))


def single_nodes(named: Iterable[dict]) -> Dict[Key3, Optional[str]]:
    """Per (op, dtype, shape) the rows time: the one test node that times it, None where several do."""
    nodes: Dict[Key3, set] = defaultdict(set)
    for r in named:
        if r.get("node"):
            nodes[_key3(r)].add(r["node"])
    return {k: (next(iter(v)) if len(v) == 1 else None) for k, v in nodes.items()}


@dataclass
class LogNodes:
    """Which test each (op, dtype, shape) of a log's rows (no test named) is, against rows that
    name their tests: `nodes` the keys whose test is known, `unknown` the others, and why."""
    nodes: Dict[Key3, str] = field(default_factory=dict)
    unknown: Dict[Key3, str] = field(default_factory=dict)


def reconcile_log(logged: Sequence[dict], named: Iterable[dict]) -> LogNodes:
    """A log's row is the one test of `named` that times its (op, dtype, shape), where nothing else
    could be: not where several tests time it, nor where the log holds more records of it than that
    test has rounds (two tests of one op that the named side did not both run, or a rerun: a log
    cannot tell which)."""
    tests: Dict[Key3, set] = defaultdict(set)
    per_run: Counter = Counter()  # a test's rounds in each named run (history vendors names several)
    for r in named:
        if r.get("node") and r.get("shape") is not None:
            tests[_key3(r)].add(r["node"])
            per_run[(_key3(r), r.get("run_id"))] += 1
    rounds: Dict[Key3, int] = defaultdict(int)
    for (k, _), n in per_run.items():
        rounds[k] = max(rounds[k], n)
    records = Counter(_key3(r) for r in logged if not r.get("node") and r.get("shape") is not None)
    out = LogNodes()
    for k, n in records.items():
        found = tests.get(k)
        if not found:
            continue
        if len(found) > 1:
            out.unknown[k] = (f"{len(found)} tests time this op, dtype and shape, and a side names no test (a "
                              "FlagGems result log): which to pair is unknown")
        elif n > rounds[k]:
            out.unknown[k] = (f"a side names no test (a FlagGems result log) and holds {n} records of this op, "
                              f"dtype and shape where the other side's one test has {rounds[k]} (tests of one op, or "
                              "a rerun): which is that test's is unknown")
        else:
            out.nodes[k] = next(iter(found))
    return out


def reconcile_sides(rows_a: Sequence[dict], rows_b: Sequence[dict]) -> LogNodes:
    """reconcile_log where one side names its tests and the other (a FlagGems result log) does not;
    nothing to reconcile otherwise."""
    if names_tests(rows_a) == names_tests(rows_b):
        return LogNodes()
    return reconcile_log(*((rows_b, rows_a) if names_tests(rows_a) else (rows_a, rows_b)))


def adopt_node(r: dict, nodes: Mapping[Key3, str]) -> dict:
    """A row that names no test (a FlagGems log's) with the test reconcile_log found for its key."""
    node = None if r.get("node") else nodes.get(_key3(r))
    return {**r, "node": node} if node else r


def adopt_nodes(rows: Sequence[dict], named: Iterable[dict]) -> List[dict]:
    """`rows` where each row that names no test takes the node of its test (reconcile_log), where known."""
    nodes = reconcile_log(rows, named).nodes
    return [adopt_node(r, nodes) for r in rows]


def short_test_name(node: Optional[str]) -> str:
    """A test node as tables name it beside its op: the test (with its parameters), or the node."""
    return (node or "").rpartition("::")[2] or (node or "")


def name_shared_keys(rows: List[dict], by: Sequence[str] = ("op", "dtype", "shape")) -> List[dict]:
    """Rows (table dicts with "node") whose op, dtype and shape another row of another test shares
    get "test" (short_test_name; the whole node where two files' tests have one name): tables show it
    beside the op, so the two read apart."""
    nodes: Dict[tuple, set] = defaultdict(set)
    for t in rows:
        nodes[tuple(t.get(k) for k in by)].add(t.get("node"))
    for t in rows:
        group = nodes[tuple(t.get(k) for k in by)]
        if len(group) > 1:
            label = short_test_name(t.get("node"))
            t["test"] = label if sum(short_test_name(n) == label for n in group) == 1 else (t.get("node") or "")
    return rows


def op_with_test(t: dict) -> str:
    """A table row's op, with its test where name_shared_keys gave it one."""
    return f"{t['op']} ({t['test']})" if t.get("test") else str(t.get("op"))


def _usable(r: dict, field_name: str) -> bool:
    v = r.get(field_name)
    return r.get("status") == "ok" and isinstance(v, (int, float)) and v > 0


@dataclass
class PairedRow:
    key: Key
    a: List[float] = field(default_factory=list)  # per round, same order as b
    rounds: List[int] = field(default_factory=list)  # the round numbers of a and b, in their order
    b: List[float] = field(default_factory=list)
    a_base: List[float] = field(default_factory=list)  # the torch baseline: a free control
    b_base: List[float] = field(default_factory=list)
    with_base: List[bool] = field(default_factory=list)  # per round of a and b: both sides timed the baseline
    base_one_side: int = 0  # rounds where one side timed the baseline and the other did not
    fallback: bool = False
    node: Optional[str] = None
    dropped: List[str] = field(default_factory=list)  # the rounds left out, and why
    # Each side's process-level interval (latency_ci) where it has one round: two plain runs' row
    a_ci: Optional[Tuple[float, float]] = None
    b_ci: Optional[Tuple[float, float]] = None
    # ... and whether its processes disagreed on a side (BENCHMARK_PROCESS_UNSTABLE: its value is a draw)
    process_unstable: bool = False
    no_work_rounds: int = 0  # rounds that launched no device work on either side (a view), left out


@dataclass
class Pairing:
    rows: List[PairedRow]
    unpaired: List[Tuple[Key, str]]  # (key, why)
    nodes: Mapping[Key3, str] = field(default_factory=dict)  # the tests a log's rows adopted
    # Unpaired keys one side measured whose test ended on the other side without rows (crashed,
    # timed out, failed): key -> the side that lost them ("A" or "B").
    lost: Mapping[Key, str] = field(default_factory=dict)
    # Unpaired keys whose rounds ran on both sides but launched no device work there (views).
    views: Set[Key] = field(default_factory=set)

    def key(self, r: dict) -> Key:
        """A row's key as the pairing keyed it (a log's row with the test it adopted)."""
        return row_key(adopt_node(r, self.nodes))


def _by_key(rows: Sequence[dict]) -> Dict[Key, Dict[int, dict]]:
    out: Dict[Key, Dict[int, dict]] = defaultdict(dict)
    for r in rows:
        if r.get("dtype") is None and r.get("shape") is None:
            continue  # a node-level status row: its status is reported in ops_status
        out[row_key(r)][int(r.get("round") or 0)] = r
    return out


# A test's statuses that lose the rows it did not measure (skipped is not applicable, not a loss).
LOST_STATUSES = frozenset({"failed", "crashed", "timeout", "poisoned", "fatal", "interrupted"})


def _node_statuses(rows: Sequence[dict], extra: Optional[Mapping[str, Tuple[str, str]]] = None) -> Dict[str, Tuple[str, str]]:
    """A side's tests that did not end ok: test node -> (status, reason), from its node-level status
    rows (a test that crashed, timed out or failed before any shape) and `extra` (its ops_status:
    a test that crashed after some shapes has rows, and no such row)."""
    out = dict(extra or {})
    out.update({base_node(r["node"]): (str(r.get("status")), r.get("reason") or "-") for r in rows
                if r.get("dtype") is None and r.get("shape") is None and r.get("node") and r.get("status") != "ok"})
    return out


def _lost_side(ra: Mapping[int, dict], rb: Mapping[int, dict], field_name: str) -> Optional[str]:
    """The side that lost a row the other measured: no usable round on it, each of its rows failed
    (a shape whose check failed, a case a crash or a timeout cut), while the other side measured it."""
    for side, mine, other in (("B", rb, ra), ("A", ra, rb)):
        if mine and any(_usable(r, field_name) for r in other.values()) and \
                all(r.get("status") in LOST_STATUSES for r in mine.values()):
            return side
    return None


def _pair_rounds(key: Key, ra: Dict[int, dict], rb: Dict[int, dict], field_name: str,
                 where: str = "on side") -> PairedRow:
    """The rounds both sides measured usably, and why the others were left out (p.dropped); where:
    as pair()'s."""
    p = PairedRow(key)
    who = where.split()[-1]  # "side", or "run" for two runs
    reasons, no_work = p.dropped, []
    for rnd in sorted(set(ra) | set(rb)):
        x, y = ra.get(rnd), rb.get(rnd)
        if x is None or y is None:
            reasons.append(f"round {rnd}: missing {where} {'A' if x is None else 'B'}")
            continue
        if not (_usable(x, field_name) and _usable(y, field_name)):
            side, bad = ("A", x) if not _usable(x, field_name) else ("B", y)
            reasons.append(f"round {rnd}: {who} {side} {bad.get('status')} {bad.get('reason') or ''}".strip())
            continue
        if did_no_device_work(x, field_name) and did_no_device_work(y, field_name):
            # nanoseconds of empty replay on both sides: no kernel to compare, noise a test could misread
            # (a view on one side and a kernel on the other is a change, and is compared)
            no_work.append(rnd)
            continue
        p.rounds.append(rnd)
        p.a.append(float(x[field_name]))
        p.b.append(float(y[field_name]))
        x_base, y_base = _usable(x, "latency_base"), _usable(y, "latency_base")
        p.with_base.append(x_base and y_base)
        p.base_one_side += x_base != y_base
        if x_base and y_base:
            p.a_base.append(float(x["latency_base"]))
            p.b_base.append(float(y["latency_base"]))
        p.fallback |= MARKER_FALLBACK in (x.get("markers") or []) + (y.get("markers") or [])
        p.node = p.node or x.get("node")
    if len(p.a) == 1 and field_name == "latency":  # latency_ci is the latency's
        x, y = ra[p.rounds[0]], rb[p.rounds[0]]
        p.a_ci, p.b_ci = interval(x.get("latency_ci")), interval(y.get("latency_ci"))
        # The op's own processes read apart (not only its baseline's: torch's spread is not the latency's)
        p.process_unstable = op_read_apart(x) or op_read_apart(y)
    p.no_work_rounds = len(no_work)
    if no_work:
        reasons.append(f"launched no device work on either side ({MARKER_NO_DEVICE_WORK}: a view; its latency "
                       f"times no kernel) in {len(no_work)} round(s)")
    return p


def pair(rows_a: Sequence[dict], rows_b: Sequence[dict], field_name: str = "latency",
         statuses: Sequence[Optional[Mapping[str, Tuple[str, str]]]] = (None, None), where: str = "on side") -> Pairing:
    """statuses: each side's tests that did not end ok (test node -> (status, reason)), where its
    ops_status is known: rows a test lost after measuring others are then said lost too. where: how
    an unpaired row names A and B ("in run" for two runs whose rows have A/B sides of their own)."""
    # A side that names no test (a FlagGems result log) against one that does: its rows adopt the
    # other side's tests where nothing else could be theirs; the other keys are left unpaired.
    log = reconcile_sides(rows_a, rows_b)
    who = where.split()[-1]  # "side", or "run" for two runs
    rows_a, rows_b = ([adopt_node(r, log.nodes) for r in rows] for rows in (rows_a, rows_b))
    by_a, by_b = _by_key(rows_a), _by_key(rows_b)
    status_a, status_b = _node_statuses(rows_a, statuses[0]), _node_statuses(rows_b, statuses[1])
    paired: List[PairedRow] = []
    unpaired: List[Tuple[Key, str]] = []
    lost: Dict[Key, str] = {}
    views: Set[Key] = set()
    for key in sorted(set(by_a) | set(by_b)):
        ra, rb = by_a.get(key, {}), by_b.get(key, {})
        if key[:3] in log.unknown:
            if not key[3]:  # the log's row; its tests on the other side are this one entry
                unpaired.append((key, log.unknown[key[:3]]))
            continue
        if not ra or not rb:
            # where the other side ran the test and it ended with no rows (crashed, timed out), say so
            ended = (status_b if ra else status_a).get(base_node(key[3])) if key[3] else None
            unpaired.append((key, f"only {where} " + ("A" if ra else "B")
                             + (f" ({who} {'B' if ra else 'A'}'s test {f'{ended[0]}: {ended[1]}'[:160]})"
                                if ended else "")))
            if ended and ended[0] in LOST_STATUSES:
                lost[key] = "B" if ra else "A"
            continue
        p = _pair_rounds(key, ra, rb, field_name, where)
        if p.a:
            paired.append(p)
        else:
            unpaired.append((key, "; ".join(p.dropped) or "no usable round"))
            if p.no_work_rounds:
                views.add(key)
            side = _lost_side(ra, rb, field_name)
            if side:
                lost[key] = side
    return Pairing(paired, unpaired, log.nodes, lost, views)
