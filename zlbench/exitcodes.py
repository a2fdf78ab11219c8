"""One table of exit codes for every zlbench command (README: "Exit codes")."""

from __future__ import annotations

from enum import IntEnum
from typing import Iterable, Mapping, Sequence

# Node statuses and A/B verdicts that fail_on may name.
FAILABLE_STATUSES = ("failed", "crashed", "timeout", "poisoned", "fatal", "skipped")
FAILABLE_VERDICTS = ("slower", "faster", "unstable", "inconclusive", "inconclusive (cut)", "changed below threshold")


class Exit(IntEnum):
    OK = 0  # nothing named in fail_on, and not every node skipped
    NOT_OK = 1  # nodes with a status (or A/B rows with a verdict) named in fail_on; or every node skipped
    USAGE = 2  # bad input: config, override, corpus, selection, result file
    DEAD_AXIS = 3  # the A/B axis is not live (ab.allow_dead=true accepts it)
    CUT = 4  # the run was cut short (time limit, jobs ended early): nodes left to resume
    INTERNAL = 70  # a bug in zlbench (the traceback is in zlbench.log)
    INTERRUPTED = 130  # Ctrl-C / SIGTERM: what finished is in the tables, the rest resumable


def run_exit(status_rows: Iterable[Mapping], verdicts: Sequence[str], fail_on: Sequence[str], *,
             cut: bool, dead_axis: bool) -> Exit:
    """The most serious of what a finished run found: a dead axis, then a cut run, then fail_on."""
    if dead_axis:
        return Exit.DEAD_AXIS
    if cut:
        return Exit.CUT
    wanted = set(fail_on)
    if any(s["status"] in wanted for s in status_rows) or any(v in wanted for v in verdicts):
        return Exit.NOT_OK
    if wanted and measured_nothing(status_rows):
        return Exit.NOT_OK
    return Exit.OK


def measured_nothing(status_rows: Iterable[Mapping]) -> bool:
    """Every node skipped (a dtypes= or ops= no test takes): a run that checked nothing does not
    pass, as `history compare` judging no row does not."""
    status_rows = list(status_rows)
    return bool(status_rows) and all(s["status"] == "skipped" for s in status_rows)
