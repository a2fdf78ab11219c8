"""What a timing call measured (inside the benchmark process): the facts its row carries.

Every call takes its timer's own budget (stop_reason "fixed"); adaptive stopping and clock
screening were deleted (why: zlbench/config/keys.py REMOVED).

Pure Python: no torch, no device."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional

STOP_FIXED = "fixed"  # the timer's own budget (rows carry it as stop_reason)


# -- one timing call -------------------------------------------------------------------------------
@dataclass
class Sampling:
    """What one timing call measured."""

    stop_reason: str = STOP_FIXED
    # timer.placements: how many memory placements of the inputs were timed, the spread of their
    # values ((max - min) / median), and why there was one only where more were asked for.
    placements: Optional[int] = None
    placement_spread_rel: Optional[float] = None
    placement_note: Optional[str] = None

    def facts(self) -> Dict[str, Any]:
        # The row's sampling fields: those of per-sample statistics (samples, ci_rel, spread_rel,
        # min_ms, the modes) and of clocks stay null, as they did at defaults (old rows hold them).
        out: Dict[str, Any] = {
            "stop_reason": self.stop_reason,
            "samples": None, "ci_rel": None, "spread_rel": None, "min_ms": None,
            "samples_discarded": None, "sm_mhz": None, "mem_mhz": None,
            "mode_lo_ms": None, "mode_hi_ms": None, "mode_hi_share": None,
            "placements": self.placements, "placement_spread_rel": _round(self.placement_spread_rel),
            "placement_note": self.placement_note,
        }
        return out


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else float(f"{x:.4g}")
