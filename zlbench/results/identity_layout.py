"""The layout of a run identity that its hash (planning/identity.py) and a run's caliber in the
store (store/ingest.py) read: the one zlbench wrote before each setting was stored once and before
the timer settings were deleted (stores hold calibers hashed so). An identity written now is read
with what that layout held besides, so runs before and after resume and form one history series."""

from __future__ import annotations

from typing import Iterable, List, Mapping

# The deleted timer settings (adaptive stopping, clock screening, placements: config/keys.py REMOVED)
# at the values whose behaviour every run now has, as an identity written before held them.
REMOVED_TIMER_DEFAULTS = {
    "placements": 1, "placement_max_mb": 256.0, "placement_tol": None,
    "stop": "fixed", "target_rel": 0.005, "min_samples": 10, "max_samples": 1000, "max_time_ms": 1000.0,
    "throttle_threshold": 0.75, "throttle_retries": 3, "throttle_pause_ms": 20.0, "clock_reader": "none",
}
# Timer settings added since, and their defaults: at them a setting is left out of the layout, so a
# run made before it hashes as it did then (stores hold calibers hashed so) and a run made at them
# now is of its caliber: it resumes and its history series goes on (its rows say how many
# processes measured them). At another value the setting is part of the caliber.
ADDED_TIMER_DEFAULTS = {"max_processes": None, "target_width": 0.02, "more_budget": 0.5}
_UNREAD = "the first of these that works in the benchmark process (each process says which)"
_NOT_SCREENED = "; samples are not screened for clocks"
# The identity's "clocks" entry each backend wrote before clock screening was deleted.
REMOVED_CLOCKS = {
    "cuda": {"sources": ["nvml", "kernel_timer"], "reading": _UNREAD},
    "rocm": {"sources": ["torch_clock_rate"], "reading": _UNREAD},
    "musa": {"sources": [], "reading": "none: no clock reader for MThreads yet (mthreads-gmi shows clocks, "
                                       "nothing reads them per sample)" + _NOT_SCREENED},
    "ascend": {"sources": [], "reading": "none: no clock reader for Ascend yet (npu-smi shows clocks, nothing "
                                         "reads them per sample)" + _NOT_SCREENED},
    "cpu": {"sources": [], "reading": "none: the cpu backend has no device clock to read (host frequency "
                                      "scaling is not screened)" + _NOT_SCREENED},
}


def hashed_layout(identity: Mapping) -> dict:
    """The identity as its hash (planning/identity.py) and a run's caliber (store/ingest.py) read
    it: the layout zlbench wrote before each setting was stored once and before the timer settings
    were deleted (stores hold calibers hashed so). That layout also held the timer and autotune
    under "config" (the timer as at the top, autotune as its bool), the deleted timer settings (a
    run now behaves as their defaults did) and the backend's clock reading. Whatever of it an
    identity lacks is filled in, and the settings added since are left out where they are at their
    defaults, so a run made before still resumes and the runs before and after form one history
    series."""
    config, timer = identity.get("config"), identity.get("timer")
    if not isinstance(config, Mapping) or not isinstance(timer, Mapping):
        return dict(identity)  # not a run's identity
    timer = _as_before({**REMOVED_TIMER_DEFAULTS, **timer})  # an earlier run's own values (stop=adaptive) stay
    config = {**config, "timer": _as_before({**REMOVED_TIMER_DEFAULTS, **config.get("timer", timer)}),
              "autotune": config.get("autotune", str(identity.get("autotune")) == "1")}
    backend = identity.get("backend")
    name = backend.get("name") if isinstance(backend, Mapping) else backend
    clocks = {"clocks": REMOVED_CLOCKS[name]} if name in REMOVED_CLOCKS and "clocks" not in identity else {}
    return {**identity, **clocks, "timer": timer, "config": config}


# Identity keys outside the hash: how the run was asked for and judged, and what it observed.
NOT_HASHED = ("identity_hash", "provenance", "created", "resumed", "host", "processes", "fail_on")


def hashed_fields(identity: Mapping) -> dict:
    """What an identity's hash covers (planning/identity.py): its hashed layout less NOT_HASHED.
    Two identities equal here are one identity, whichever zlbench wrote them."""
    return {k: v for k, v in hashed_layout(identity).items() if k not in NOT_HASHED}


def _as_before(timer: Mapping) -> dict:
    """The timer settings less those added since that are at their defaults."""
    return {k: v for k, v in timer.items() if k not in ADDED_TIMER_DEFAULTS or v != ADDED_TIMER_DEFAULTS[k]}


def said_once(fa: Mapping, fb: Mapping, keys: Iterable[str]) -> List[str]:
    """keys (flat, as 'config.timer.repeat') less the copies the layout makes: a config.timer.* key
    whose two values are those of its timer.* key says the same change again."""
    keys = set(keys)

    def copied(key: str) -> bool:
        top = key[len("config."):]
        return key.startswith("config.timer.") and top in keys and (fa.get(key), fb.get(key)) == (fa.get(top), fb.get(top))
    return sorted(k for k in keys if not copied(k))
