"""Range checks on the resolved config: a value the schema's types accept but zlbench cannot honour
(timer.repeat=0, launcher.shard_size=-1, progress=bogus) is a usage error, never silently replaced."""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Real
from typing import Any, Callable, List, Mapping, Optional, Sequence

from zlbench.config.keys import unknown_keys
from zlbench.errors import UsageError
from zlbench.exitcodes import FAILABLE_STATUSES, FAILABLE_VERDICTS

SHAPE_LEVELS = ("core", "comprehensive")
SHAPE_MODES = ("upstream", "file")
# torch's dtype names as a corpus takes them (`--dtypes float16`, FlagGems' conftest: getattr(torch,
# name), its choices spelled as str(dtype) less "torch."), listed so that a bad name is refused
# before any process starts, without importing torch here (tests/test_validate.py checks the list
# against torch). FlagGems' own choices: float16, float32, bfloat16, int16, int32, bool, complex64.
TORCH_DTYPES = (
    "float16", "float32", "bfloat16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "bool", "complex32", "complex64", "complex128", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2",
)
# torch's other names for them: a corpus' --dtypes choices hold only the names above.
DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "short": "int16",
                 "int": "int32", "long": "int64", "chalf": "complex32", "cfloat": "complex64",
                 "cdouble": "complex128"}


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
    Rule("timer.processes", _integer(lambda v: 1 <= v <= 50), "an integer from 1 to 50 (benchmark processes "
         "per node in a plain run; 1: no process-level interval)", "timer.processes=3"),
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


def dtype_problem(dtypes: Any) -> Optional[str]:
    bad = [str(d) for d in dtypes or [] if str(d) not in TORCH_DTYPES]
    if not bad:
        return None
    what = f"{bad[0]} is not a torch dtype name" if len(bad) == 1 else f"{', '.join(bad)} are not torch dtype names"
    first = bad[0].replace("torch.", "")
    fix = DTYPE_ALIASES.get(first, first if first in TORCH_DTYPES else "float16")
    alias = f" ({bad[0]} is torch's other name for {fix}: a corpus takes {fix})" if first in DTYPE_ALIASES else ""
    return (f"dtypes=[{','.join(map(str, dtypes))}]: {what}{alias}. Valid: {', '.join(TORCH_DTYPES)} "
            "(FlagGems takes float16, float32, bfloat16, int16, int32, bool, complex64). "
            f"Fix: dtypes=[{fix}], or dtypes=[] for the corpus' own choice.")


def devices_problem(resolved: Mapping[str, Any]) -> Optional[str]:
    """An empty selection (devices=[], gpus=[]) selects nothing to run on."""
    for key in ("gpus", "devices"):
        value = resolved.get(key)
        if isinstance(value, (list, tuple)) and not value:
            return f"{key}=[] selects no device. Fix: devices=all, or devices=[0] (indices of the backend's devices)."
    return None


def config_notes(resolved: Mapping[str, Any]) -> List[str]:
    """Settings that run but may not do what they seem to: said when the run starts."""
    ab = resolved.get("ab") or {}
    rounds, least = ab.get("rounds"), ab.get("min_rounds")
    schedule = getattr(ab.get("schedule"), "value", ab.get("schedule"))  # an enum where Hydra composed it
    interleaved = ab.get("name", "none") != "none" and not ab.get("side") and schedule == "node"
    if interleaved and isinstance(rounds, int) and isinstance(least, int) and rounds < least:
        return [f"ab.rounds={rounds} is below ab.min_rounds={least}: every node runs all {rounds} rounds (none "
                f"stops early on a settled verdict) and each verdict rests on {rounds} rounds. Fix: "
                f"ab.rounds={least} or more, or ab.min_rounds={max(2, rounds)} to plan it so."]
    return []


def validate_config(resolved: Mapping[str, Any]) -> None:
    """Raises one UsageError naming every out-of-range value (key, value, valid range, fix)."""
    problems = unknown_keys(resolved)
    problems += [p for rule in RULES if (p := problem(rule, _lookup(resolved, rule.key)))]
    problems += [p for p in (dtype_problem(resolved.get("dtypes")), devices_problem(resolved)) if p]
    if problems:
        raise UsageError("\n".join(problems))
