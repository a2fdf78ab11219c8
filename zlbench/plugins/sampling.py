"""What a timing call's numbers are (inside the benchmark process): the summary a timer returns for
its samples, and the sampling facts a row carries.

Every call takes its timer's own budget (stop_reason "fixed"); adaptive stopping, clock screening
and timing at several placements were deleted (why: zlbench/config/keys.py REMOVED), and with them
the per-call statistics (median CIs, bimodality) that only adaptive samples fed.

No torch, no device."""

from __future__ import annotations

import statistics
from typing import Any, Dict, Optional, Sequence

import numpy as np

from zlbench.results.records import SAMPLING_FIELDS

STOP_FIXED = "fixed"  # the timer's own budget (rows carry it as stop_reason)


def summarize(times: Sequence[float], quantiles: Optional[Sequence[float]], return_mode: str):
    """What triton.testing.do_bench returns for these per-call times (ms): the quantiles asked for
    (linear interpolation between order statistics, torch.quantile's and numpy's default; one
    quantile as a number), else the return_mode's statistic (mean by default)."""
    if quantiles is not None:
        out = [float(q) for q in np.quantile(np.asarray(times, dtype=float), list(quantiles))]
        return out[0] if len(out) == 1 else out
    return {"min": min, "max": max, "median": statistics.median, "all": list}.get(return_mode, statistics.fmean)(times)


def facts(stop_reason: str = STOP_FIXED) -> Dict[str, Any]:
    """A timing call's sampling fields as its row carries them: the stop reason; the fields of
    per-sample statistics, clocks and placements stay null, as they always were at defaults (rows of
    older runs may hold them)."""
    return {key: (stop_reason if key == "stop_reason" else None) for key in SAMPLING_FIELDS}
