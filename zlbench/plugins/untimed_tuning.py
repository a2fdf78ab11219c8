"""Autotuning without timing, for the liveness probes of a node-level A/B (zlbench/engine/device_ab.py).

A probe needs the kernels a node compiles, not the configs an autotuner would pick: timing every
config of every shape (Triton's do_bench: 25 ms warm-up + 100 ms per config) is most of a probe's
cost on FlagGems' tuned ops. In a probe process, Triton's Autotuner (and FlagGems' LibTuner, its
subclass) compiles and launches each config once and gives it a dummy time, so every config is
still compiled, as a timed side's tuning compiles them. The picks this makes are worthless, so the
probe process must keep them to itself: its FlagGems tuning cache is a scratch folder (the resident
scheduler sets FLAGGEMS_CACHE_DIR) and Triton's on-disk autotuning cache is neither read nor
written here (the Triton kernel cache it shares with its side holds code only, keyed by content).
"""

from __future__ import annotations

_MISSING = object()


def _run_once(kernel_call, quantiles=None, **_):
    kernel_call()
    return [1.0] * len(quantiles) if quantiles else 1.0


def install() -> bool:
    """Patch Triton's Autotuner in this process; False when Triton is not importable here."""
    try:
        from triton.runtime.autotuner import Autotuner
    except Exception:
        return False
    if getattr(Autotuner, "_zlbench_untimed", False):
        return True
    timed_bench = Autotuner._bench

    def _bench(self, *args, config, **meta):
        # do_bench is a cached_property (FlagGems' LibTuner also assigns it per call): the instance
        # attribute wins; whatever was there comes back afterwards.
        saved = self.__dict__.get("do_bench", _MISSING)
        self.__dict__["do_bench"] = _run_once
        try:
            return timed_bench(self, *args, config=config, **meta)
        finally:
            if saved is _MISSING:
                self.__dict__.pop("do_bench", None)
            else:
                self.__dict__["do_bench"] = saved

    def check_disk_cache(self, tuning_key, configs, bench_fn):
        bench_fn()  # never read or write Triton's autotuning cache with dummy timings
        return False

    Autotuner._bench = _bench
    Autotuner.check_disk_cache = check_disk_cache
    Autotuner._zlbench_untimed = True
    return True
