"""Time goes where the variance is: after a plain run's timer.processes passes, the nodes whose
processes disagree (a row >= 20 us whose interval is wider than timer.target_width) get more passes,
up to timer.max_processes in all, for those rows and their node's other rows marked
BENCHMARK_PROCESS_UNSTABLE (riding_rows), and other nodes' rows under 20 us that read apart by process
where they cost no pass more (passenger_rows); the others are not measured again. They are chosen once, when the
planned passes have ended (the intervals of the others move a little as the more processes come in,
through the pooled spread of rows of their size: chasing that would plan pass after pass); a resumed
run that has them gets no more. Where processes start ahead (engine/jobs.py), the first ones were
started as spares while the last planned pass measured (engine/spares.py), the others start together,
and they measure one at a time. They add at most timer.more_budget of the wall the planned passes
took (a spare's pass costs its measuring; the others a process' start-up however few their nodes,
one start-up when they start together), and under launcher.run_timeout_s only the passes that fit are planned; one the
limit stops all the same leaves its nodes stopped (engine/plain_worker.py): more processes never turn
a whole run into a cut one."""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from zlbench.config.schema import TimerConf
from zlbench.results.events import (alive_seconds, base_node, events_path, node_seconds, process_spans,
                                    read_events, startup_seconds)

# The least share of a node's planned pass a more pass that times some of its shapes is counted at.
MIN_SHARE = 0.25


class MoreChoice(NamedTuple):
    nodes: List[str]  # the nodes that get more passes
    last: int  # the pass to stop before
    line: str  # what to log
    shapes: Dict[str, Dict[str, Dict[str, Any]]]  # base node -> item -> the calls its more passes make


def more_wanted(run_dir: Path, plan, timer: Mapping[str, Any], deadline: Optional[float],
                spares: int = 0) -> MoreChoice:
    """What a plan's finished passes call for (plan: its processes, max_processes, more_passes,
    units, devices). spares: how many more passes have their processes started already
    (engine/spares.py: no start-up left). The more passes make each chosen shape's calls as the
    planned passes made them, the baseline's too."""
    from zlbench.results.process_stats import relative_width, wide_nodes, wide_rows
    from zlbench.results.tables import collect

    first, last = plan.processes or 1, plan.max_processes or 0
    if last <= first or plan.more_passes is None or (deadline is not None and time.time() >= deadline):
        return MoreChoice([], first, "", {})
    if any(u.round >= first for u in plan.units):  # planned once per run (a resumed run has them)
        return MoreChoice([], first, "", {})
    settings = TimerConf.from_plugin(dict(timer))  # the schema's defaults where the mapping has none
    target = settings.target_width
    measured = collect(run_dir)[0]
    rows = wide_rows(measured, target)
    if not rows:
        return MoreChoice([], first, "", {})
    wide = wide_nodes(rows, target)  # node -> its widest row
    riders = riding_rows(measured, wide, rows)
    passengers = passenger_rows(measured, wide)
    share, planned = settings.more_budget, planned_seconds(run_dir, plan)

    def budgeted(nodes: Sequence[str], shares: Mapping[str, float]) -> Tuple[int, str, str]:
        """(how many more passes fit, what limits them ("" where nothing does), the line saying
        why none fits ("" where one does)), the passes timing the shares of their nodes given."""
        startup, measuring = pass_seconds(run_dir, plan, nodes, shares)
        per_pass = startup + measuring

        def takes(k: int) -> float:
            """About the wall k more passes add: the spares' passes only measure; the others start
            together (where processes start ahead: one start-up, which the spares' measuring hides in
            part) or one after another (a start-up each)."""
            spared = min(k, spares)
            if k == spared:
                return k * measuring
            if plan.more_together:
                return max(spared * measuring, startup) + (k - spared) * measuring
            return spared * measuring + (k - spared) * per_pass

        def fit(seconds: float) -> int:
            return max([k for k in range(1, last - first + 1) if takes(k) <= seconds], default=0)

        limits = [(fit(share * planned), f"in timer.more_budget ({share:g} of the planned passes' "
                                         f"{planned:.0f} s)")] if per_pass > 0 else []
        if deadline is not None and per_pass > 0:
            limits.append((fit(deadline - time.time()), "before launcher.run_timeout_s"))
        for passes, limit in sorted(limits)[:1]:
            if passes < 1:
                return 0, "", (f"[zlbench] {len(wide)} node(s) whose processes disagree get no more processes: "
                               f"one more pass (about {takes(1):.0f} s) would not fit {limit}")
            if first + passes < last:
                return passes, f", as many as fit {limit} of {last - first}", ""
        return last - first, "", ""

    shapes, shares = chosen_shapes(run_dir, plan, rows)
    passes, fits, none_fit = budgeted(sorted(wide), shares)
    if none_fit:
        return MoreChoice([], first, none_fit, {})
    nodes = sorted(wide)
    # Riders and passengers come along only where they cost the wide rows no pass; else riders alone.
    for riding, joining in ((riders, passengers), (riders, [])) if passengers else ((riders, []),):
        if not riding + joining:
            continue
        with_extra = chosen_shapes(run_dir, plan, rows + riding + joining)
        joined = sorted(wide.keys() | {base_node(r.get("node") or "") for r in joining})
        if budgeted(joined, with_extra[1])[0] == passes:
            shapes, nodes, passengers = with_extra[0], joined, joining
            break
    else:
        riders, passengers = [], []
    last = first + passes
    widest = sorted(wide.values(), key=relative_width, reverse=True)[:3]
    only, joining_nodes = len(shapes), len(nodes) - len(wide)
    return MoreChoice(nodes, last, (
        f"[zlbench] {len(wide)} node(s) whose processes disagree get {last - first} more process(es) each{fits} "
        f"(rows >= 20 us wider than timer.target_width={target:g}; widest: "
        + "; ".join(f"{r.get('op')} {r.get('shape')} {100 * relative_width(r):.1f}%" for r in widest) + ")"
        + (f", and {len(riders)} other row(s) of theirs that read apart by process" if riders else "")
        + (f"; {joining_nodes} other node(s) join those passes for {len(passengers)} row(s) under 20 us that "
           "read apart by process (no pass more)" if joining_nodes else "")
        + ("; they time their tests up to those rows only" if only == len(nodes) else
           f"; {only} of them time their tests up to those rows only, the others every row" if only else "")), shapes)


def riding_rows(measured: Sequence[Mapping], nodes: Mapping[str, Any], wide: Sequence[Mapping]) -> List[Mapping]:
    """The other rows of the chosen `nodes` (base node ids) whose processes disagree far beyond rows
    of their size and timer (BENCHMARK_PROCESS_UNSTABLE for the op's own processes, not its baseline's
    alone: more processes are for the alternative's interval), whatever their size: their node's more
    passes run anyway, and a few shapes more give a row that draws its autotune pick per process
    (a us row read 4.7 us in some processes and 11.9 us in others) a median of more processes.
    Nodes with such rows only are not chosen for them (a pass' start-up for a us row)."""
    from zlbench.results.process_stats import op_read_apart, row_key

    chosen = {row_key(r) for r in wide}
    return [r for r in measured if r.get("status") == "ok" and op_read_apart(r)
            and base_node(r.get("node") or "") in nodes and row_key(r) not in chosen]


def passenger_rows(measured: Sequence[Mapping], nodes: Mapping[str, Any]) -> List[Mapping]:
    """The rows under 20 us of nodes not chosen whose own processes disagree far beyond rows of their
    size and timer (as riding_rows): alone they choose no node (a pass' start-up for a us row), but
    where more passes run anyway their nodes join them at the cost of their measuring: a us row that
    draws its pick or placement per process (mean_dim's 8.9 us row read 8.92, 8.92 and 9.23 us) then
    reports a median of more processes, and flips between runs less often."""
    from zlbench.results.process_stats import TOP_UP_MIN_MS, op_read_apart

    return [r for r in measured if r.get("status") == "ok" and op_read_apart(r) and r["latency"] < TOP_UP_MIN_MS
            and base_node(r.get("node") or "") not in nodes]


def chosen_shapes(run_dir: Path, plan, rows: Sequence[Mapping]
                  ) -> Tuple[Dict[str, Dict[str, Dict[str, Any]]], Dict[str, float]]:
    """(base node -> item -> the timing calls its more passes make (only_shapes.chosen), base node -> the share of its
    planned timing calls they make) for the wide `rows`: a row's calls are found by its place among
    its item's results in a planned pass. A node whose planned records do not say how their calls
    fit their shapes (a corpus that times a row itself, or twice) is left out: its more passes time
    everything."""
    from zlbench.plugins.only_shapes import chosen as chosen_calls

    wanted: Dict[str, set] = {}
    for r in rows:
        wanted.setdefault(r.get("node") or "", set()).add((r.get("op"), r.get("dtype"), r.get("shape")))
    places, started = _planned_places(run_dir, plan, set(wanted))
    shapes: Dict[str, Dict[str, Dict[str, Any]]] = {}
    shares: Dict[str, float] = {}
    for node in sorted({base_node(item) for item in wanted}):
        # Every shape a planned pass timed before the last wanted one is timed too, each with its
        # baseline: a process that skipped them (their tuning, compiles, allocations) read rows apart
        # from the planned ones, the more processes faster in 27 of 38 rows apart (chance: 21 apart;
        # RESULTS.md, thirty-eighth session), and one that skipped the baseline read the 4-byte rows
        # of 2**30 elements 10-11% faster (forty-fifth session); what comes after a row cannot
        # change it, and is left out.
        order = [item for item in started if base_node(item) == node]  # as the items run
        mine = {item: keys for item, keys in wanted.items() if base_node(item) == node}
        if any(item not in order or places.get(item) is None or not keys <= set(places[item][0])
               for item, keys in mine.items()):
            continue  # not found as planned: its more passes time every shape
        last = max(order.index(item) for item in mine)
        if any(places.get(item) is None for item in order[:last]):
            continue  # an item before it that never ended ok: its calls are not known, time everything
        chosen: Dict[str, Dict[str, Any]] = {}
        made = total = 0
        for n, item in enumerate(order):
            keys, per_shape = places.get(item) or ([], 1)
            upto = (len(keys) if n < last else 0 if n > last else
                    1 + max(i for i, k in enumerate(keys) if k in mine[item]))
            if n <= last:
                chosen[item] = chosen_calls(list(range(upto)), per_shape)
            made, total = made + upto, total + len(keys)
        shapes[node] = chosen
        shares[node] = made / total if total else 1.0
    return shapes, shares


def _planned_places(run_dir: Path, plan, items: set
                    ) -> Tuple[Dict[str, Optional[Tuple[List[tuple], int]]], List[str]]:
    """(item -> (its rows' keys (op, dtype, shape) in the order a planned pass timed them, the timing
    calls a shape took), for every item of the nodes of `items`, from the first planned unit that
    measured it whole, None where its records do not say how their calls fit; the items in the order
    the planned passes started them (pytest's order within a node: an item that failed in the first
    pass and ended ok in a later one keeps its place))."""
    from zlbench.results.records import Row

    nodes = {base_node(i) for i in items}
    out: Dict[str, Optional[Tuple[List[tuple], int]]] = {}
    started: List[str] = []
    for u in sorted(plan.units, key=lambda u: u.round):
        if u.round >= (plan.processes or 1):
            continue
        records: Dict[str, List[dict]] = {}
        seen_here: List[str] = []
        for e in read_events(events_path(run_dir, u.unit_id)):
            item = e.get("node") or ""
            if e.get("event") == "start" and base_node(item) in nodes and item not in seen_here:
                seen_here.append(item)
            if base_node(item) not in nodes or item in out:
                continue
            if e.get("event") == "start":
                records[item] = []  # a retried item is measured again whole
            elif e.get("event") == "record" and item in records:
                records[item].append(e)
            elif e.get("event") == "end" and e.get("status") == "ok" and item in records:
                keys, calls = [], set()
                for rec in records.pop(item):
                    timing = rec.get("timing") or []
                    keys += [(row.op, row.dtype, row.shape) for row in Row.from_record(rec["payload"], timing)]
                    calls |= {t.get("calls") for t in timing} if timing else {None}
                out[item] = (keys, calls.pop()) if len(calls) == 1 and None not in calls else None
        for item in seen_here:  # a pass that ran more of a node than the ones before places the rest after
            if item not in started:
                at = max((started.index(i) for i in seen_here[:seen_here.index(item)] if i in started), default=-1)
                started.insert(at + 1, item)
    return out, started


def planned_seconds(run_dir: Path, plan) -> float:
    """The wall the planned passes took: the time any of their processes lived (devices side by side
    counted once; a resumed run's pause not at all)."""
    return alive_seconds(s for u in plan.units for s in process_spans(read_events(events_path(run_dir, u.unit_id))))


def pass_seconds(run_dir: Path, plan, nodes: Sequence[str],
                 shares: Optional[Mapping[str, float]] = None) -> Tuple[float, float]:
    """About how long one more pass over `nodes` takes: (a process' start-up, its measuring). Its
    measuring: each node's slowest planned pass but its first (the first compiles; a node that tunes
    afresh in every process varies from pass to pass, a batch norm 2.9-6.5 s on an H200: its quickest
    pass let a run limit be overrun), times the share of its shapes a more pass times (`shares`, at
    least MIN_SHARE: a test builds every shape's inputs all the same), the nodes spread over the
    devices, plus what a process spends past its nodes (a fraction of a second)."""
    passes: Dict[str, List[Tuple[int, float]]] = {}
    startups, beyond = [], []
    for u in plan.units:
        events = read_events(events_path(run_dir, u.unit_id))
        took = node_seconds(events)
        for node, seconds in took.items():
            passes.setdefault(node, []).append((u.round, seconds))
        startups.append(startup_seconds(events))
        beyond += past_nodes_seconds(events)
    startups = [s for s in startups if s is not None]
    startup = statistics.median(startups) if startups else 0.0
    slowest = {node: max(seconds for _, seconds in (sorted(runs)[1:] or runs)) for node, runs in passes.items()}
    shares = shares or {}
    measuring = sum(slowest.get(n, 0.0) * max(MIN_SHARE, shares.get(n, 1.0)) for n in nodes) / max(1, len(plan.devices))
    return startup, measuring + (statistics.median(beyond) if beyond else 0.0)


def past_nodes_seconds(events: Sequence[dict]) -> List[float]:
    """For each process of a unit that passed its gate and exited: the seconds from its gate to its
    exit that none of its nodes took (the harness' first and last moments, teardown)."""
    out: List[float] = []
    gate, nodes, started = None, 0.0, {}
    for e in events:
        kind = e.get("event")
        if kind == "launch":
            gate, nodes, started = None, 0.0, {}
        elif kind == "gate" and gate is None:
            gate = e["t"]
        elif kind == "start":
            started[e.get("node")] = e["t"]
        elif kind == "end" and e.get("node") in started:
            nodes += e["t"] - started.pop(e.get("node"))
        elif kind == "exited" and gate is not None:
            out.append(max(0.0, e["t"] - gate - nodes))
            gate = None
    return out
