"""What a timing call measured (inside the benchmark process): the facts its row carries.

Every call takes its timer's own budget (stop_reason "fixed"); adaptive stopping and clock
screening and timing at several placements were deleted (why: zlbench/config/keys.py REMOVED).

Pure Python: no torch, no device."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict

STOP_FIXED = "fixed"  # the timer's own budget (rows carry it as stop_reason)


# -- one timing call -------------------------------------------------------------------------------
@dataclass
class Sampling:
    """What one timing call measured."""

    stop_reason: str = STOP_FIXED

    def facts(self) -> Dict[str, Any]:
        # The row's sampling fields: those of per-sample statistics (samples, ci_rel, spread_rel,
        # min_ms, the modes), clocks and placements stay null, as they did at defaults (old rows hold them).
        out: Dict[str, Any] = {
            "stop_reason": self.stop_reason,
            "samples": None, "ci_rel": None, "spread_rel": None, "min_ms": None,
            "samples_discarded": None, "sm_mhz": None, "mem_mhz": None,
            "mode_lo_ms": None, "mode_hi_ms": None, "mode_hi_share": None,
            "placements": None, "placement_spread_rel": None, "placement_note": None,
        }
        return out
