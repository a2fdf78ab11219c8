"""What a timing call measured (inside the benchmark process): the facts its row carries.

Every call takes its timer's own budget (stop_reason "fixed"); adaptive stopping was deleted (its
measurement: zlbench/config/keys.py REMOVED). ClockLog: each batch is bracketed by the device's clock
reader (plugins/clocks.py); a batch whose SM clock was below throttle_threshold x the device's
maximum is discarded and retaken after a pause, at most throttle_retries times per timing call; then
it is kept and the row is marked.

Pure Python: no torch, no device."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

DEFAULTS: Dict[str, Any] = {
    "throttle_threshold": 0.75,
    "throttle_retries": 3,
    "throttle_pause_ms": 20.0,
    "clock_reader": "none",
}
STOP_FIXED = "fixed"  # the timer's own budget (rows carry it as stop_reason)


# -- clocks around each batch ----------------------------------------------------------------------
def setting(timer: Mapping[str, Any], key: str) -> Any:
    """A timer setting of the plugin config, or its default when unset."""
    return DEFAULTS[key] if timer.get(key) is None else timer[key]


@dataclass(frozen=True)
class ClockPolicy:
    threshold: float = DEFAULTS["throttle_threshold"]
    retries: int = DEFAULTS["throttle_retries"]
    pause_ms: float = DEFAULTS["throttle_pause_ms"]

    @classmethod
    def from_timer(cls, timer: Mapping[str, Any]) -> "ClockPolicy":
        get = lambda k: setting(timer, k)  # noqa: E731
        return cls(float(get("throttle_threshold")), max(0, int(get("throttle_retries"))),
                   float(get("throttle_pause_ms")))


class ClockLog:
    """One timing call's batches under a clock reader (None: no reading, nothing screened). A reader
    that raises is dropped (on_error is told why) and the call goes on unscreened."""

    def __init__(self, reader, policy: ClockPolicy, sleep: Callable[[float], None] = time.sleep,
                 on_error: Callable[[str], None] = lambda why: None):
        self.reader, self.policy, self.sleep, self.on_error = reader, policy, sleep, on_error
        self.had_reader = reader is not None
        self.discarded = 0
        self.retried = 0
        self.kept: List[Tuple[Optional[float], Optional[float]]] = []  # (sm_mhz, mem_mhz) of kept batches
        self.throttled_kept: Optional[str] = None

    def _floor(self) -> Optional[float]:
        top = getattr(self.reader, "max_sm_mhz", None)
        return self.policy.threshold * top if top and self.policy.threshold > 0 else None

    def _failed(self, e: Exception) -> None:
        self.reader = None
        self.on_error(f"clock reader failed ({type(e).__name__}: {e}); no clock reading from here on")

    def _during(self) -> None:
        if self.reader is not None:
            try:
                self.reader.during()
            except Exception as e:
                self._failed(e)

    def take(self, batch: Callable[[Callable[[], None]], Any], count: Callable[[Any], int] = len):
        """Run batch(during) bracketed by the reader; a batch whose SM clock was below the floor is
        discarded (count(result) samples) and retaken after a pause, at most `retries` times per
        timing call; after that it is kept and said to be throttled."""
        while True:
            if self.reader is None:
                return batch(_nothing)
            try:
                self.reader.begin()
            except Exception as e:
                self._failed(e)
                continue
            result = batch(self._during)
            if self.reader is None:
                return result
            try:
                sm, mem = self.reader.end()
            except Exception as e:
                self._failed(e)
                return result
            floor = self._floor()
            if sm is None or floor is None or sm >= floor:
                self.kept.append((sm, mem))
                return result
            if self.retried >= self.policy.retries:
                self.kept.append((sm, mem))
                self.throttled_kept = (f"SM clock {sm:.0f} MHz below {self.policy.threshold:g} x "
                                       f"{self.reader.max_sm_mhz:.0f} MHz after {self.retried} retries")
                return result
            self.discarded += count(result)
            self.retried += 1
            self.sleep(self.policy.pause_ms * self.retried / 1000)

    def facts(self) -> Dict[str, Any]:
        sms = [s for s, _ in self.kept if s is not None]
        mems = [m for _, m in self.kept if m is not None]
        return {"samples_discarded": self.discarded if self.had_reader else None,
                "sm_mhz": round(min(sms), 1) if sms else None,
                "mem_mhz": round(min(mems), 1) if mems else None}


def _nothing() -> None:
    return None


# -- one timing call -------------------------------------------------------------------------------
@dataclass
class Sampling:
    """What one timing call measured: why it stopped and what the clock log saw."""

    stop_reason: str
    clocks: Dict[str, Any] = field(default_factory=dict)
    throttled: Optional[str] = None
    # timer.placements: how many memory placements of the inputs were timed, the spread of their
    # values ((max - min) / median), and why there was one only where more were asked for.
    placements: Optional[int] = None
    placement_spread_rel: Optional[float] = None
    placement_note: Optional[str] = None

    def facts(self) -> Dict[str, Any]:
        # The row's sampling fields: those of per-sample statistics (samples, ci_rel, spread_rel,
        # min_ms, the modes) stay null, as they did for the timer's own budget (old rows hold them).
        out: Dict[str, Any] = {
            "stop_reason": self.stop_reason,
            "samples": None, "ci_rel": None, "spread_rel": None, "min_ms": None,
            "samples_discarded": None, "sm_mhz": None, "mem_mhz": None,
            "mode_lo_ms": None, "mode_hi_ms": None, "mode_hi_share": None,
            "placements": self.placements, "placement_spread_rel": _round(self.placement_spread_rel),
            "placement_note": self.placement_note,
        }
        out.update(self.clocks)
        return out


def _round(x: Optional[float]) -> Optional[float]:
    return None if x is None or not math.isfinite(x) else float(f"{x:.4g}")
