"""direct: the corpus' own direct timer (triton.testing.do_bench), its number passed through. With
timer.fill_gaps, on a device that can spin, the device is kept busy after each L2 clear
(guards.filled_gaps), so that host launch time stays out of the kernel's events."""

from __future__ import annotations

from zlbench.plugins import guards
from zlbench.plugins.timers import BaseTimer, Call


class Timer(BaseTimer):
    name = "direct"

    def guards(self, call: Call):
        spin = guards.device_spin() if self.ctx.conf.fill_gaps else None
        return [guards.filled_gaps(call.fn, spin)] if spin is not None else []

    def batch(self, call: Call):
        return self.ctx.orig_bench(call.fn, warmup=call.warmup, rep=call.rep, grad_to_none=call.grad_to_none,
                                   quantiles=call.quantiles, return_mode=call.return_mode, **call.kw)
