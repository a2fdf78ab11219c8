"""Range checks on the resolved config: a value the schema's types accept but zlbench cannot honour
(timer.repeat=0, launcher.shard_size=-1, progress=bogus) is a usage error, never silently replaced."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable, List, Mapping, Optional, Sequence

from zlbench.errors import UsageError
from zlbench.exitcodes import FAILABLE_STATUSES, FAILABLE_VERDICTS

SHAPE_LEVELS = ("core", "comprehensive")
SHAPE_MODES = ("upstream", "file")


@dataclass(frozen=True)
class Rule:
    key: str  # dotted path in the resolved config
    ok: Callable[[Any], bool]
    valid: str  # the valid range, in words
    fix: str  # an override that is valid
    nullable: bool = False  # null means "none" / "not set" and is fine


def _number(test: Callable[[float], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, Real) and not isinstance(v, bool) and test(v)


def _integer(test: Callable[[int], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and test(v)


def _choice(key: str, choices: Sequence[str]) -> Rule:
    return Rule(key, lambda v: v in choices, f"one of {', '.join(choices)}", f"{key}={choices[0]}")


RULES: List[Rule] = [
    Rule("timer.repeat", _integer(lambda v: v >= 1), "an integer >= 1 (the median of N timings)",
         "timer.repeat=1"),
    Rule("timer.warmup_ms", _number(lambda v: v > 0), "a number of milliseconds > 0, or null for the "
         "corpus' default", "timer.warmup_ms=null", nullable=True),
    Rule("timer.rep_ms", _number(lambda v: v > 0), "a number of milliseconds > 0, or null for the "
         "corpus' default", "timer.rep_ms=null", nullable=True),
    Rule("timer.min_window_ms", _number(lambda v: v >= 0), "a number of milliseconds >= 0 (0 = no "
         "widening)", "timer.min_window_ms=2"),
    Rule("timer.target_rel", _number(lambda v: 0 < v < 1), "a relative CI half-width between 0 and 1, "
         "exclusive", "timer.target_rel=0.005"),
    Rule("timer.min_samples", _integer(lambda v: v >= 1), "an integer >= 1", "timer.min_samples=10"),
    Rule("timer.max_samples", _integer(lambda v: v >= 1), "an integer >= 1", "timer.max_samples=1000"),
    Rule("timer.max_time_ms", _number(lambda v: v >= 0), "a number of milliseconds >= 0",
         "timer.max_time_ms=1000"),
    Rule("timer.throttle_threshold", _number(lambda v: 0 <= v <= 1), "a fraction of the maximum SM clock "
         "between 0 and 1 (0 = no screening)", "timer.throttle_threshold=0.75"),
    Rule("timer.throttle_retries", _integer(lambda v: v >= 0), "an integer >= 0", "timer.throttle_retries=3"),
    Rule("timer.throttle_pause_ms", _number(lambda v: v >= 0), "a number of milliseconds >= 0",
         "timer.throttle_pause_ms=20"),
    Rule("timer.placements", _integer(lambda v: v >= 1), "an integer >= 1 (1: the inputs' own placement only)",
         "timer.placements=1"),
    Rule("timer.processes", _integer(lambda v: 1 <= v <= 50), "an integer from 1 to 50 (benchmark processes "
         "per node in a plain run; 1: no process-level interval)", "timer.processes=3"),
    Rule("timer.placement_max_mb", _number(lambda v: v > 0), "a number of MB > 0", "timer.placement_max_mb=256"),
    Rule("timer.placement_tol", _number(lambda v: 0 < v < 1), "a relative difference between 0 and 1, "
         "exclusive, or null (every call at every placement)", "timer.placement_tol=null", nullable=True),
    Rule("ab.rounds", _integer(lambda v: v >= 1), "an integer >= 1", "ab.rounds=10"),
    Rule("ab.min_rounds", _integer(lambda v: v >= 2), "an integer >= 2 (a paired interval needs two rounds)",
         "ab.min_rounds=4"),
    Rule("ab.respawn_every", _integer(lambda v: v >= 0), "an integer >= 0 (0: never)", "ab.respawn_every=0"),
    Rule("ab.threshold", _number(lambda v: 0 < v < 1), "a relative change between 0 and 1, exclusive",
         "ab.threshold=0.02"),
    Rule("launcher.node_timeout_s", _number(lambda v: v > 0), "a number of seconds > 0",
         "launcher.node_timeout_s=900"),
    Rule("launcher.run_timeout_s", _number(lambda v: v > 0), "a number of seconds > 0, or null for no "
         "limit", "launcher.run_timeout_s=null", nullable=True),
    Rule("launcher.shard_size", _integer(lambda v: v >= 0), "an integer >= 0 (0 = every node of a "
         "device in one process)", "launcher.shard_size=0"),
    Rule("launcher.crash_retries", _integer(lambda v: v >= 0), "an integer >= 0",
         "launcher.crash_retries=0"),
    Rule("launcher.tasks", _integer(lambda v: v >= 1), "an integer >= 1", "launcher.tasks=1"),
    _choice("shape.level", SHAPE_LEVELS),
    _choice("shape.mode", SHAPE_MODES),
    Rule("fail_on", lambda v: isinstance(v, list) and all(x in FAILABLE_STATUSES + FAILABLE_VERDICTS for x in v),
         f"a list of node statuses ({', '.join(FAILABLE_STATUSES)}) and A/B verdicts "
         f"({', '.join(FAILABLE_VERDICTS)})", "fail_on=[failed,crashed,timeout,poisoned,fatal]"),
]

_ABSENT = object()


def _lookup(resolved: Mapping[str, Any], key: str) -> Any:
    node: Any = resolved
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _show(value: Any) -> str:
    return "null" if value is None else str(value)


def problem(rule: Rule, value: Any) -> Optional[str]:
    if value is _ABSENT or (value is None and rule.nullable) or (value is not None and rule.ok(value)):
        return None
    return f"{rule.key}={_show(value)} is not valid: it must be {rule.valid}. Fix: {rule.fix}."


def unknown_keys(resolved: Mapping[str, Any]) -> List[str]:
    """Top-level keys the schema does not know (`+foo=1` is accepted by Hydra and would change the
    identity hash while doing nothing)."""
    from dataclasses import fields

    from zlbench.config.schema import ZlbenchConfig

    known = {f.name for f in fields(ZlbenchConfig)}
    return [f"{k} is not a zlbench setting. Fix: drop +{k}=... (README lists the settings)."
            for k in resolved if k not in known]


def placement_problem(timer: Mapping[str, Any], timer_name: Optional[str]) -> Optional[str]:
    """timer.placements > 1 where it would do nothing: with timer=direct or host (as named, or as
    timer=auto resolved for the backend) or with timer.stop=adaptive."""
    stop = getattr(timer.get("stop"), "name", timer.get("stop"))  # an enum where Hydra composed it
    if (timer.get("placements") or 1) <= 1 or (stop != "adaptive" and timer_name not in ("direct", "host")):
        return None
    resolved = f" (timer={timer.get('name')} is {timer_name} here)" if timer.get("name") != timer_name else ""
    return (f"timer.placements={timer['placements']} does nothing with timer={timer_name} timer.stop={stop}{resolved}: "
            "placements apply to graph timing with timer.stop=fixed. Fix: timer=graph timer.stop=fixed, "
            "or timer.placements=1.")


def validate_config(resolved: Mapping[str, Any]) -> None:
    """Raises one UsageError naming every out-of-range value (key, value, valid range, fix)."""
    problems = unknown_keys(resolved)
    problems += [p for rule in RULES if (p := problem(rule, _lookup(resolved, rule.key)))]
    timer = resolved.get("timer") or {}
    if (p := placement_problem(timer, timer.get("name"))):
        problems.append(p)
    if problems:
        raise UsageError("\n".join(problems))
