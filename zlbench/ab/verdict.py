"""A row's verdict from its paired statistics (RowStat): the vocabulary both the paired statistics
(stats.py) and the sequential rule (sequential.py) speak."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

ALPHA = 0.05
POWER = 0.80
UNSTABLE_SD = 0.25  # round-to-round sd of ln ratio above which a row's numbers are not trusted

VERDICTS = ("faster", "slower", "changed below threshold", "no difference beyond threshold",
            "inconclusive", "inconclusive (cut)", "unstable", "not live")


@dataclass
class RowStat:
    n: int
    ratio: Optional[float]  # exp(mean d): B/A latency
    lo: Optional[float]
    hi: Optional[float]
    sd: Optional[float]
    p: Optional[float]
    q: Optional[float] = None
    mde: Optional[float] = None  # minimum detectable relative change at 80% power
    verdict: str = "inconclusive"
    d: Optional[Tuple[float, ...]] = field(default=None, repr=False, compare=False)  # ln(B/A) per round
    look: Optional[int] = None  # sequential: the rounds the verdict rests on (n = rounds done)
    stop: Optional[str] = None  # sequential: "settled", "futile", "max rounds", or None


def decide(s: RowStat, threshold: float, live: Optional[bool], min_rounds: Optional[int] = None,
           max_rounds: Optional[int] = None) -> str:
    """The row's verdict. In a sequential run (min_rounds given) s must hold the sequential look's
    numbers (analyse() puts them there) and a row with fewer than min_rounds rounds is a cut one;
    max_rounds is accepted for symmetry with analyse() (the look already respects it)."""
    if live is False:
        return "not live"
    if min_rounds is not None and s.n < min_rounds:
        return "inconclusive (cut)"
    if s.n < 2 or s.p is None:
        return "inconclusive"
    significant = s.q is not None and s.q < ALPHA
    if s.sd is not None and s.sd > UNSTABLE_SD:
        # Rounds this noisy judge nothing, unless the change is so large that even their interval
        # lies wholly beyond the threshold (a 7x faster kernel on a busy CPU): that is a verdict.
        beyond = s.lo is not None and (s.hi < 1 - threshold or s.lo > 1 + threshold)
        if not (significant and beyond):
            return "unstable"
    change = abs(s.ratio - 1.0)
    if significant:
        if change < threshold:
            return "changed below threshold"
        return "faster" if s.ratio < 1 else "slower"
    if s.lo is not None and s.lo >= 1 - threshold and s.hi <= 1 + threshold:
        return "no difference beyond threshold"
    return "inconclusive"
