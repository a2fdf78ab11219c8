"""Timers (inside the benchmark process): each times one batch of a timing call.

A timing call (the corpus' do_bench(fn, warmup, rep, ...)) is timed by the run's timer
(timer.name): `measure` enters the timer's guards (plugins/guards.py), lets the timer prepare the
call once, and takes timer.repeat batches (the median kept; one batch where the corpus asked for
quantiles or every sample). A timer may override `time` to choose another timer for a call (graph
falls back to direct where a capture is refused).

A new timer is one module here, zlbench/plugins/timers/<name>.py, defining `Timer` (a subclass of
BaseTimer with a `batch`), plus conf/timer/<name>.yaml that selects it (`name: <name>`)."""

from __future__ import annotations

import importlib
import statistics
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ContextManager, Dict, List, Optional, Sequence

from zlbench.backends.base import DeviceBackend
from zlbench.config.schema import TimerConf


@dataclass(frozen=True)
class Call:
    """One timing call as the corpus made it (triton.testing.do_bench's arguments)."""

    fn: Callable[[], Any]
    warmup: float = 25
    rep: float = 100
    grad_to_none: Optional[Sequence[Any]] = None
    quantiles: Optional[Sequence[float]] = None
    return_mode: str = "mean"
    kw: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean", **kw) -> "Call":
        return cls(fn, warmup, rep, grad_to_none, quantiles, return_mode, kw)

    def with_rep(self, rep: float) -> "Call":
        return replace(self, rep=rep)


@dataclass
class Timed:
    """What a timing call returns to the corpus, and what its row says about it."""

    value: Any
    timer_used: str
    markers: List[str] = field(default_factory=list)
    reason: Optional[str] = None


@dataclass(frozen=True)
class Context:
    """What every timer may use: the run's timer settings, the backend, the corpus' own timers."""

    conf: TimerConf
    backend: DeviceBackend
    orig_bench: Callable[..., Any]
    orig_graph: Optional[Callable[..., Any]] = None
    capture_deny_ops: frozenset = frozenset()


class BaseTimer:
    name = ""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    def around_test(self) -> ContextManager[Any]:
        """Entered around each test's call phase, its inputs and untimed calls included."""
        return nullcontext()

    def guards(self, call: Call) -> List[ContextManager[Any]]:
        """Context managers entered around the call's batches (and its preparation)."""
        return []

    def prepare(self, call: Call) -> Call:
        """The call as its batches take it (e.g. a widened replay budget), once per timing call."""
        return call

    def batch(self, call: Call) -> Any:
        """One timing of the call: what the corpus' timer would return for it."""
        raise NotImplementedError

    def time(self, call: Call) -> Timed:
        return Timed(measure(self, call), self.name)


def measure(timer: BaseTimer, call: Call) -> Any:
    """timer.repeat batches under the timer's guards, their median kept."""
    n = 1 if call.quantiles is not None or call.return_mode == "all" else timer.ctx.conf.repeat
    with ExitStack() as stack:
        for guard in timer.guards(call):
            stack.enter_context(guard)
        call = timer.prepare(call)
        values = [timer.batch(call) for _ in range(n)]
    return values[0] if n == 1 else statistics.median(values)


def timer_class(name: str) -> type:
    """The Timer of zlbench/plugins/timers/<name>.py."""
    return importlib.import_module(f"{__name__}.{name}").Timer
