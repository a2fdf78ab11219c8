"""Record what the benchmark process does: node start/end with typed status, the corpus' own
`[INFO] {json}` records (rows), the kernels each node compiled (zlbench/ab/fingerprints.py), and collection
errors. Events go to the unit's events.jsonl."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import random
import re
import sys
import time
from typing import List, Set

import pytest

from zlbench.results.events import base_node
from zlbench.results.schema import (BUILTIN_MARKS, MARKER_FALLBACK, MARKER_FATAL, MARKER_NOT_ZLBENCH_TIMER,
                                    MARKER_POISONED)
from zlbench.plugins import _runtime, only_shapes

from zlbench.ab import fingerprints
from zlbench.ab.kernels import kernel_stem

RECORD_LOGGER = "flag_gems_benchmark"  # FlagGems' (and the demo's) record logger


def op_of(item) -> str:
    """FlagGems' rule: the first non-builtin mark is the operator id."""
    for mark in item.iter_markers():
        if mark.name not in BUILTIN_MARKS:
            return mark.name
    return item.nodeid


def _markers_for_results(results: list):
    """Attach the timing calls made since the last record to its shapes (results).

    Per shape the corpus times torch, then the alternative: 2 calls a shape (or 1 where only one
    latency is measured). When the count does not fit, every shape carries the union of markers:
    a fallback is over-marked rather than lost; sampling facts are then not attributed."""
    n_results = len(results)
    calls, _runtime.timing_calls[:] = list(_runtime.timing_calls), []
    if n_results and not calls:  # the corpus timed these itself: said, never accepted silently
        return [{"timer_used": None, "timer_used_base": None, "markers": [MARKER_NOT_ZLBENCH_TIMER],
                 "marker_reason": "no zlbench timing call: the corpus timed this row itself", "facts": None,
                 "facts_base": None} for _ in range(n_results)]
    per, fits = _calls_per_result(calls, n_results)
    timing = [_timing_of(group, fits) for group in per]
    if any(c.get("skipped") for c in calls):  # a more pass that times some shapes only (plugins/only_shapes.py)
        left_out = [any(c.get("skipped") for c in g) for g in per]
        why = _misfit(results, per, fits, left_out)
        if why:
            only_shapes.give_up(f"{len(calls)} timing call(s) for {n_results} shape(s) of {_runtime.current_node}: "
                                f"{why}")
        for t, out in zip(timing, left_out):
            if why or out:
                t["untimed"] = True  # counted for its place (case keys), never a row
    return timing


def _misfit(results: list, per: list, fits: bool, left_out: list) -> str:
    """Why a more pass' record cannot be matched to the calls it made and left out ('' if it can):
    a shape's calls partly made, another number of calls a shape than chosen, or a result whose
    value is (or is not) the stand-in where its calls were left out (or made): results listed in
    another order than they were timed."""
    if not fits:
        return "they do not fit the shapes"
    if any(any(c.get("skipped") for c in g) and not all(c.get("skipped") for c in g) for g in per):
        return "a shape's calls were made in part"
    expected = only_shapes.calls_per_shape()
    other = next((len(g) for g in per if len(g) != expected), None) if expected else None
    if other is not None:
        return f"{other} call(s) a shape, not the {expected} chosen"
    if any(only_shapes.is_stand_in(res) != out for res, out in zip(results, left_out)):
        return "the results are not in the order they were timed"
    return ""


def _calls_per_result(calls: list, n_results: int):
    """The calls of each result ([torch, alternative] or [alternative]), and whether they fit; when
    they do not, every result gets all of them."""
    if n_results and len(calls) == 2 * n_results:
        return [calls[2 * i : 2 * i + 2] for i in range(n_results)], True
    if n_results and len(calls) == n_results:
        return [[c] for c in calls], True
    return [calls] * n_results, False


def _timing_of(group: list, fits: bool) -> dict:
    """One result's timing: its timers, markers and (where the calls fit) each call's facts."""
    reasons = sorted({c["reason"] for c in group if c.get("reason")})
    # timer_used: the alternative's ("latency") call; the baseline's is kept beside it.
    return {
        "calls": len(group) if fits else None,  # per shape: where a more pass' chosen shapes' calls are
        "timer_used": group[-1]["timer_used"] if group else None,
        "timer_used_base": group[0]["timer_used"] if len(group) == 2 else None,
        "markers": sorted({m for c in group for m in c.get("markers", [])}),
        "marker_reason": "; ".join(reasons) or None,
        # How each call sampled (stop reason, samples, precision, clocks, modes): Row fields.
        "facts": group[-1].get("facts") if fits and group else None,
        "facts_base": group[0].get("facts") if fits and len(group) == 2 else None,
    }


_recorded: set = set()  # the nodes that recorded results since they started


def _process(record: logging.LogRecord) -> bool:
    """Once per log record of the corpus' record logger: a result record becomes a `record` event
    (with each result's timing), and its line for run.log names the test; a more pass' results whose
    shapes were left out (plugins/only_shapes.py) are taken out of the message itself, so that no log
    (the corpus' own result log included) shows their stand-in values. False: nothing is left to log."""
    if hasattr(record, "zlbench_line"):
        return record.zlbench_line is not None
    message = record.getMessage()
    record.zlbench_line, record.zlbench_extra = f"[{record.levelname}] {message}", []
    try:
        payload = json.loads(message)
    except (TypeError, ValueError):
        payload = None
    if not (isinstance(payload, dict) and "op_name" in payload and "result" in payload):
        return True
    results = payload.get("result") or []
    timing = _markers_for_results(results)
    for res, tinfo in zip(results, timing):
        res.update({k: v for k, v in tinfo.items() if k in ("timer_used", "markers")})
    _runtime.emit("record", node=_runtime.current_node, op=_runtime.current_op, payload=payload, timing=timing)
    timed = [(res, tinfo) for res, tinfo in zip(results, timing) if not tinfo.get("untimed")]
    if timed:
        _recorded.add(_runtime.current_node)
    if results and not timed:
        record.zlbench_line = None  # a more pass that timed none of these shapes: nothing to log
        return False
    if len(timed) < len(results):
        original = json.loads(message)
        original["result"] = [r for r, t in zip(original["result"], timing) if not t.get("untimed")]
        record.msg, record.args = json.dumps(original), ()
        payload = {**payload, "result": [res for res, _ in timed]}
    # run.log names the test (an extra key FlagGems' tools pass over): tests of one op may time one
    # shape, and a log read back must not take one test's record for another's round
    record.zlbench_line = "[INFO] " + json.dumps({**payload, "node": _runtime.current_node}
                                                 if _runtime.current_node else payload)
    record.zlbench_extra = [
        f"[WARNING] {MARKER_FALLBACK} op={payload['op_name']} dtype={payload['dtype']} "
        f"shape={json.dumps(res.get('shape_detail'))} reason={tinfo['marker_reason']}"
        for res, tinfo in timed if MARKER_FALLBACK in tinfo["markers"]]
    return True


class _RecordFilter(logging.Filter):
    """On the record logger itself: it runs before any of its handlers, the corpus' result log too."""

    def filter(self, record):
        return _process(record)


class _RecordHandler(logging.Handler):
    def emit(self, record):
        if not _process(record):  # a record that reached the handler alone (from a child logger)
            return
        for line in record.zlbench_extra:
            _runtime.emit("log", line=line)
        _runtime.emit("log", line=record.zlbench_line)


_handler = _RecordHandler(level=logging.INFO)
_filter = _RecordFilter()
_reports = {}

def pytest_sessionstart(session):
    # The corpus' pytest_configure replaces its record logger's handlers; attach ours after it.
    logger = logging.getLogger(RECORD_LOGGER)
    logger.addHandler(_handler)
    logger.addFilter(_filter)
    logger.setLevel(logging.INFO)
    _runtime.emit("session_start", unit=_runtime.config().get("unit"))


def pytest_collectreport(report):
    if report.failed:
        _runtime.emit("collect_error", nodeid=report.nodeid, reason=report_reason(report))


def _taken_elsewhere(item) -> bool:
    """Another unit claimed this node (it runs there); see zlbench/results/claims.py."""
    cfg = _runtime.config()
    if not cfg.get("claims_dir"):
        return False
    from zlbench.results.claims import claim

    return not claim(cfg["claims_dir"], base_node(item.nodeid), cfg["unit"])


class _SkipTakenNodes:
    """Runs before pytest's own protocol: a node another unit claimed is not run here."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        return True if item.nodeid in _taken else None


_taken: set = set()


@pytest.hookimpl(trylast=True)  # after compat plugins have rewritten the items' markers
def pytest_collection_modifyitems(session, config, items):
    """Of a node selected through its parametrize cases' marks, only those cases run (as with
    `pytest -m bmm`)."""
    only = _runtime.config().get("only_marks") or {}
    if not only:
        return
    kept, dropped = [], []
    for item in items:
        wanted = only.get(base_node(item.nodeid))
        keep = wanted is None or any(m.name in wanted for m in item.iter_markers())
        (kept if keep else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


_deselected: set = set()  # base node ids with at least one item deselected


def pytest_deselected(items):
    _deselected.update(base_node(item.nodeid) for item in items)


def pytest_collection_finish(session):
    """A node none of whose items is left to run was deselected by the corpus' pytest options (-k, -m,
    --deselect in corpus.pytest_args), as pytest itself reports it: not a failure. Said once, at
    collection, so that the worker does not take it for a node pytest could not find."""
    left = {base_node(item.nodeid) for item in session.items}
    gone = sorted(n for n in _deselected - left if _runtime.kept_nodes is None or n in _runtime.kept_nodes)
    if not gone:
        return
    opts = session.config.option
    how = [f"{flag} {value!r}" for flag, value in (("-k", getattr(opts, "keyword", "")),
                                                     ("-m", getattr(opts, "markexpr", ""))) if value]
    how += [f"--deselect {d}" for d in getattr(opts, "deselect", None) or []][:1]
    reason = f"deselected by {' '.join(how) or 'a pytest option'} in corpus.pytest_args"
    for node in gone:
        _runtime.emit("end", node=node, status="skipped", reason=reason, deselected=True, wall_s=0.0)


@pytest.hookimpl(tryfirst=True)  # before the corpus' conftest names its record log
def pytest_configure(config):
    # FlagGems (and the demo) name the record log after the command-line arguments, which here are
    # plugin options and an @args file (result-p_no:cacheprovider-...@pytest_args.txt.log): name it
    # after the unit instead (result_main.r0.d0.s0.log). pytest reads only invocation_params.dir
    # from here on.
    unit = _runtime.config().get("unit")
    if unit:
        config.invocation_params = dataclasses.replace(config.invocation_params, args=(str(unit),))
    if _runtime.config().get("claims_dir"):
        config.pluginmanager.register(_SkipTakenNodes(), "zlbench-skip-taken-nodes")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _taken_elsewhere(item):
        _taken.add(item.nodeid)  # its own unit runs and records it
        yield
        return
    started = _start(item)
    compiled_before = fingerprints.cache_entries()
    yield
    _record_kernels(item, compiled_before)
    status = _end(item, started)
    if status in ("fatal", "poisoned"):
        leave_dead_context(f"{status}: device context unusable")


def node_seed(nodeid: str) -> int:
    """A stable seed of the base node id (Python's hash() of a str changes per process)."""
    return int.from_bytes(hashlib.sha256(base_node(nodeid).encode()).digest()[:4], "big")


def seed_inputs(nodeid: str) -> int:
    """Seed every random source a corpus draws inputs from, so a node draws the same inputs
    whether it runs alone or after other tests."""
    seed = node_seed(nodeid)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch
    except ImportError:
        return seed
    torch.manual_seed(seed)  # every device's generator too
    return seed


def _start(item) -> float:
    """Make the node current (the timing plugin reads it), seed its inputs and record its start."""
    _runtime.current_node = item.nodeid
    _runtime.current_op = op_of(item)
    _runtime.timing_calls.clear()
    _runtime.launched.clear()
    _reports[item.nodeid] = []
    _recorded.discard(item.nodeid)
    seed = seed_inputs(item.nodeid)
    started = time.time()
    marks = [m.name for m in item.iter_markers() if m.name not in BUILTIN_MARKS]
    _runtime.emit("start", node=item.nodeid, op=_runtime.current_op, marks=marks, seed=seed)
    return started


def _record_kernels(item, compiled_before) -> None:
    """Liveness evidence: the distinct kernels this node compiled (first compiles only), with those
    it launched that another test or process of its side compiled (in an A/B, which records
    launches), and the names it launched."""
    kernels = evidence(fingerprints.new_kernels(compiled_before), _runtime.launched)
    launched = sorted(_runtime.launched)
    if kernels or launched:
        _runtime.emit("artifacts", node=item.nodeid, op=_runtime.current_op, kernels=kernels,
                      **({"launched": launched} if launched else {}))


def evidence(compiled: List[str], launched: Set[str]) -> List[str]:
    """A test's kernels: those it compiled and, of those it launched but did not compile, every
    variant its side's cache holds under that name. A kernel another test or process of the side
    compiled is only launched again (FlagGems' special_modified_bessel_k0_out after
    special_modified_bessel_k0: its own compiles were one fill kernel, identical on both sides, and it
    read "not live" while it moved 16%; RESULTS.md, forty-second session)."""
    missing = set(launched) - {kernel_stem(k) for k in compiled}
    return sorted(set(compiled) | set(fingerprints.cached_kernels(missing)))


def _end(item, started: float) -> str:
    """Record the node's typed status; returns it. No node is current after this."""
    status, reason = _status(_reports.pop(item.nodeid, []))
    if status == "skipped" and reason.startswith(_REFUSED_PREFIX) and item.nodeid in _recorded:
        # FlagGems refused a later case of a test that loops over cases of several dtypes (its
        # test_to_copy): what it measured before stands (ok, as a node whose other parametrized
        # cases were refused), and the cases after the refused one never ran.
        status, reason = "ok", (f"some cases skipped: the test stopped at a case the run's dtypes leave out, and "
                                f"its cases after that one did not run ({reason})")
    _runtime.emit("end", node=item.nodeid, op=_runtime.current_op, status=status, reason=reason,
                  wall_s=round(time.time() - started, 3))
    _runtime.current_node = _runtime.current_op = None
    return status


def leave_dead_context(reason: str) -> None:
    # The device context is unusable now: anything measured after this in this process would be
    # measured inside a dead context. Leave; the worker goes on in a fresh process.
    _runtime.emit("exit", reason=reason)
    os._exit(70)


def pytest_runtest_logreport(report):
    if report.nodeid in _reports:
        _reports[report.nodeid].append(report)


_exitstatus = 0


def pytest_sessionfinish(session, exitstatus):
    global _exitstatus
    _exitstatus = int(exitstatus)
    _runtime.emit("session_end", exitstatus=_exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    # Everything is recorded and flushed by now. Leave without the interpreter's teardown: with
    # torch loaded it takes ~0.9 s per process even on a CPU, paid again by every A/B round.
    if not _runtime.config().get("fast_exit", True):
        return
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exitstatus)


def report_reason(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None:
        return crash.message
    return str(longrepr).strip().splitlines()[-1] if str(longrepr).strip() else ""


# FlagGems' Benchmark.set_dtypes refuses a test when a dtype that --dtypes asks for is not among the
# test's own (an integer op under dtypes=[float16]): the test runs none of its cases, no failure of the op.
_DTYPE_REFUSED = re.compile(r"Given dtype\(s\) '([^']*)'\s*can't be supported by this op '([^']*)'")


_REFUSED_PREFIX = "not applicable: the test of"


def _dtype_refused(reason: str) -> str:
    m = _DTYPE_REFUSED.search(reason)
    if not m:
        return ""
    return (f"{_REFUSED_PREFIX} '{m[2]}' has no {m[1].replace('torch.', '')} case, which the "
            "run's dtypes ask for (FlagGems refuses a test when any dtype asked for is not among its "
            "own). Fix: to measure it, run it with dtypes it has, or without dtypes")


def _status(reports):
    """Typed status of one test item from its phase reports."""
    for rep in reports:
        if rep.failed:
            reason = report_reason(rep)
            text = getattr(rep, "longreprtext", "") or reason
            if MARKER_POISONED in text:
                return "poisoned", reason
            if MARKER_FATAL in text:
                return "fatal", reason
            refused = _dtype_refused(reason)
            return ("skipped", refused) if refused else ("failed", reason)
    for rep in reports:
        if rep.skipped:
            return "skipped", report_reason(rep)
    return "ok", ""
