"""Range checks on the resolved config: a value the schema's types accept but zlbench cannot honour
(timer.repeat=0, launcher.shard_size=-1, progress=bogus) is a usage error, never silently replaced.
The rules come from the ranges on the schema's fields (zlbench/config/schema.py), so a setting's
default, its range and the fix a refusal suggests are written once, there."""

from __future__ import annotations

import dataclasses
import difflib
import math
import operator
import typing
from dataclasses import dataclass
from enum import Enum
from numbers import Real
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence

from zlbench.config.keys import unknown_keys
from zlbench.config.schema import LAUNCHER_SCHEMAS, TARGET_WIDTH_MIN, ZlbenchConfig
from zlbench.errors import UsageError

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


def spell(value: Any) -> str:
    """A value as an override spells it: 900.0 -> 900, None -> null, a list -> [a,b], an enum by
    its value, a bool lower-case, a mapping in braces."""
    if isinstance(value, (list, tuple)):
        return f"[{','.join(map(spell, value))}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {spell(v)}" for k, v in value.items()) + "}"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "null" if value is None else str(value)


def field_default(f: dataclasses.Field) -> Any:
    """A schema field's default (None where it has none)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]


SIGNS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
BOUNDS = {"ge": operator.ge, "gt": operator.gt, "le": operator.le, "lt": operator.lt}


def _bound_words(m: Mapping[str, Any]) -> str:
    lo = next(((op, m[op]) for op in ("ge", "gt") if op in m), None)
    hi = next(((op, m[op]) for op in ("le", "lt") if op in m), None)
    if lo and hi and (lo[0], hi[0]) == ("ge", "le"):
        return f"from {spell(lo[1])} to {spell(hi[1])}"
    if lo and hi and (lo[0], hi[0]) == ("gt", "lt"):
        return f"between {spell(lo[1])} and {spell(hi[1])}, exclusive"
    return " and ".join(f"{SIGNS[op]} {spell(v)}" for op, v in (b for b in (lo, hi) if b))


def _test(m: Mapping[str, Any], integer: bool) -> Callable[[Any], bool]:
    def ok(v: Any) -> bool:
        if "choices" in m:
            return v in m["choices"]
        if "items" in m:
            return isinstance(v, list) and all(x in m["items"] for x in v)
        kind = int if integer else Real
        return isinstance(v, kind) and not isinstance(v, bool) and all(
            within(v, m[op]) for op, within in BOUNDS.items() if op in m)
    return ok


def rule_of(key: str, f: dataclasses.Field, hint: Any) -> Rule:
    """The rule a field's metadata states (zlbench/config/schema.py: its keys)."""
    m = f.metadata
    nullable = typing.get_origin(hint) is typing.Union and type(None) in typing.get_args(hint)
    base = [a for a in typing.get_args(hint) if a is not type(None)][0] if nullable else hint
    integer = base is int
    if "valid" in m:
        valid = m["valid"]
    elif "choices" in m:
        valid = f"one of {', '.join(m['choices'])}"
    else:
        valid = f"{m.get('noun', 'an integer' if integer else 'a number')} {_bound_words(m)}"
        valid += f" ({m['why']})" if "why" in m else ""
        valid += f", or null for {m['null']}" if nullable and "null" in m else ""
    return Rule(key, _test(m, integer), valid, f"{key}={spell(m.get('fix', field_default(f)))}", nullable)


def schema_rules(cls: type = ZlbenchConfig, prefix: str = "") -> Iterator[Rule]:
    """Every field with a range in the schema, at its dotted key (each launcher's own settings too)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        if key == "launcher":
            seen: Dict[str, Rule] = {}
            for schema in LAUNCHER_SCHEMAS.values():
                seen.update({r.key: r for r in schema_rules(schema, "launcher.")})
            yield from seen.values()
        elif dataclasses.is_dataclass(hints[f.name]):
            yield from schema_rules(hints[f.name], key + ".")
        elif f.metadata:
            yield rule_of(key, f, hints[f.name])


RULES: List[Rule] = list(schema_rules())

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


def dtype_problem(dtypes: Any, taken: Optional[Sequence[str]] = None) -> Optional[str]:
    """A dtypes= name torch does not have, or (`taken`: corpus.dtypes_taken) the corpus' --dtypes does
    not take: every benchmark process would die on it at start."""
    bad = [str(d) for d in dtypes or [] if str(d) not in TORCH_DTYPES]
    names = [str(d) for d in dtypes or []]
    twice = sorted({d for d in names if names.count(d) > 1})
    if not bad and twice:
        # The corpus would measure each case twice in one process: rows read as two processes' readings.
        once = ",".join(dict.fromkeys(names))
        return (f"dtypes=[{','.join(names)}] lists {', '.join(twice)} more than once: each dtype is measured once "
                f"per process (more readings come from timer.processes). Fix: dtypes=[{once}].")
    if not bad and taken:
        untaken = [str(d) for d in dtypes or [] if str(d) not in taken]
        if untaken:
            near = difflib.get_close_matches(untaken[0], list(taken), n=1, cutoff=0.0)
            return (f"dtypes=[{','.join(map(str, dtypes))}]: the corpus' --dtypes does not take "
                    f"{', '.join(untaken)} (it takes {', '.join(taken)}: corpus.dtypes_taken), so every benchmark "
                    f"process would stop at start. Fix: dtypes=[{near[0] if near else taken[0]}], or dtypes=[] for "
                    f"the corpus' own choice (where its --dtypes does take {untaken[0]}, add it to "
                    "corpus.dtypes_taken).")
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


def ab_fixed_problem(resolved: Mapping[str, Any]) -> Optional[str]:
    """ab.fixed (what both sides set alike) naming the axis' own variable: the sides' values win, so
    the entry was silently ignored."""
    ab = resolved.get("ab") or {}
    var = ab.get("var")
    if ab.get("name", "none") != "none" and var and var in (ab.get("fixed") or {}):
        return (f"ab.fixed.{var}={ab['fixed'][var]}: {var} is the axis' own variable, which each side sets "
                f"(ab.values), so both sides would ignore this. Fix: drop ab.fixed.{var} (~ab.fixed.{var}); "
                f"ab.values=[A,B] sets what each side gives {var}.")
    return None


def ab_rounds_problem(resolved: Mapping[str, Any]) -> Optional[str]:
    """An interleaved A/B (both sides, one run) judges each row on a paired interval over its rounds,
    which needs two of them; one side's pass (ab.side) may run one."""
    ab = resolved.get("ab") or {}
    rounds = ab.get("rounds")
    if ab.get("name", "none") != "none" and not ab.get("side") and isinstance(rounds, int) and rounds == 1:
        # (below 1 the setting's own check refuses it, with its one fix)
        return (f"ab.rounds={rounds}: an A/B judges each row on a paired interval over its rounds, which needs "
                "at least 2. Fix: ab.rounds=2 or more (default 10), or ab.side=off / ab.side=on to run one "
                "side's pass.")
    return None


# A/B variables read by Triton's or FlagTree's GPU compiler (and FLAGTREE_*): a CPU run, which runs no
# Triton kernel, never reads them. (Not TRITON_INTERPRET: it runs Triton kernels on the CPU.)
TRITON_COMPILER_VARS = ("TRITON_DEFAULT_FP_FUSION",)


def is_compiler_switch(var: str) -> bool:
    """A Triton/FlagTree compiler setting: it changes nothing where no Triton kernel runs (the CPU)."""
    return var.startswith("FLAGTREE_") or var in TRITON_COMPILER_VARS


def round_by_round(ab: Mapping[str, Any]) -> bool:
    """Whether an A/B runs whole passes round by round, each in fresh side processes: ab.schedule=round,
    or ab.tuning=replay (side B must start after side A has tuned). ab.respawn_every does nothing then."""
    def value(key: str, default: str) -> str:  # an enum where Hydra composed the config
        v = ab.get(key, default)
        return str(getattr(v, "value", v))
    return value("schedule", "node") != "node" or value("tuning", "separate") == "replay"


def _runs_on_cpu(resolved: Mapping[str, Any]) -> bool:
    name = (resolved.get("backend") or {}).get("name")
    if name == "auto":
        from zlbench.backends.registry import detect

        name = detect()
    return name == "cpu"


def config_notes(resolved: Mapping[str, Any]) -> List[str]:
    """Settings that run but may not do what they seem to: said when the run starts."""
    ab = resolved.get("ab") or {}
    rounds, least = ab.get("rounds"), ab.get("min_rounds")
    interleaved = ab.get("name", "none") != "none" and not ab.get("side") and not round_by_round(ab)
    notes = []
    if interleaved and isinstance(rounds, int) and isinstance(least, int) and 2 <= rounds < least:
        notes.append(f"ab.rounds={rounds} is below ab.min_rounds={least}: every node runs all {rounds} rounds (none "
                     f"stops early on a settled verdict) and each verdict rests on {rounds} rounds. Fix: "
                     f"ab.rounds={least} or more, or ab.min_rounds={max(2, rounds)} to plan it so.")
    every = ab.get("respawn_every")
    if interleaved and isinstance(rounds, int) and isinstance(every, int) and rounds >= 2 and every >= rounds:
        notes.append(f"ab.respawn_every={every} is no fewer than ab.rounds={rounds}: each side keeps one process for "
                     "the whole run, as ab.respawn_every=0 does, so process effects are not sampled (ab.md says so). "
                     "Fix: ab.respawn_every=1 (the default) or a period below ab.rounds.")
    timer = resolved.get("timer") or {}
    most, planned = timer.get("max_processes"), timer.get("processes")
    if ab.get("name", "none") == "none" and isinstance(most, int) and isinstance(planned, int) and most < planned:
        notes.append(f"timer.max_processes={most} is below timer.processes={planned}: every node is still measured in "
                     f"{planned} processes, and none gets more. Fix: timer.max_processes={planned} (none more) or "
                     "above it, or timer.processes to the count you want.")
    var = str(ab.get("var") or "")
    if ab.get("name", "none") != "none" and is_compiler_switch(var) and _runs_on_cpu(resolved):
        cpu = "backend=cpu" if (resolved.get("backend") or {}).get("name") == "cpu" else \
            "backend=auto found no accelerator here, so the run is on the CPU, which"
        notes.append(f"ab={ab.get('name')} switches {var}, a Triton/FlagTree compiler setting, but {cpu} runs "
                     "no Triton kernel: both sides run the same code, so expect no difference (liveness cannot be "
                     "checked on the CPU). Fix: run it on the backend the switch is for (backend=cuda, musa, ...).")
    notes += fail_on_notes(resolved)
    from zlbench.results.process_stats import narrowest_width

    width = (resolved.get("timer") or {}).get("target_width")
    if isinstance(width, (int, float)) and TARGET_WIDTH_MIN <= width < narrowest_width():  # below: refused
        notes.append(f"timer.target_width={width:g} is below the narrowest interval a row can have "
                     f"({narrowest_width():.4f}, the run-level share): every node with a row of 20 us or more "
                     f"gets more processes (on an accelerator), up to timer.max_processes. Fix: "
                     f"timer.target_width={math.ceil(narrowest_width() * 1000) / 1000:g} or more.")
    return notes


def fail_on_notes(resolved: Mapping[str, Any]) -> List[str]:
    """fail_on=[slower] (README: add slower to gate on an A/B) replaces the list: the node statuses it
    held no longer fail the run; and a plain run has no verdict to fail on."""
    from zlbench.exitcodes import FAILABLE_STATUSES, FAILABLE_VERDICTS

    fail_on = [str(v) for v in resolved.get("fail_on") or []]
    verdicts = [v for v in fail_on if v in FAILABLE_VERDICTS]
    if not verdicts:
        return []
    notes = []
    ab = resolved.get("ab") or {}
    if ab.get("name", "none") == "none" or ab.get("side"):
        run = "this plain run" if ab.get("name", "none") == "none" else f"one side's pass (ab.side={ab['side']})"
        notes.append(f"fail_on names A/B verdicts ({', '.join(verdicts)}), and {run} has none: they never fail it. "
                     "Fix: gate it against another run with `zlbench history compare A B --fail-on slower`"
                     + (", or run both sides in one run (drop ab.side): its verdicts meet fail_on" if ab.get("side")
                        else "") + ".")
    if not any(v in FAILABLE_STATUSES for v in fail_on):
        wanted = ",".join(["failed", "crashed", "timeout", "poisoned", "fatal", *verdicts])
        notes.append(f"fail_on=[{','.join(fail_on)}] replaces the default list: a test that fails, crashes or times out "
                     f"no longer fails the run. Fix: fail_on=[{wanted}] to keep them.")
    return notes


def slurm_signal_problem(resolved: Mapping[str, Any]) -> Optional[str]:
    """launcher=slurm signals each task launcher.signal_delay_s before its time limit to requeue it:
    no later than its start, it would requeue at once, over and over, measuring nothing."""
    launcher = resolved.get("launcher") or {}
    minutes, delay = launcher.get("time_min"), launcher.get("signal_delay_s")
    if launcher.get("name") != "slurm" or type(minutes) is not int or type(delay) is not int:
        return None
    if any(problem(r, launcher[r.key.split(".", 1)[1]]) for r in RULES
           if r.key in ("launcher.time_min", "launcher.signal_delay_s")):
        return None  # its own rule says so
    if minutes == 0 or delay < minutes * 60:  # (0 minutes: no time limit, no signal)
        return None
    return (f"launcher.signal_delay_s={delay} is not below launcher.time_min={minutes} ({minutes * 60} s): Slurm would "
            "signal each task to requeue as soon as it starts, and it would requeue over and over, measuring nothing. "
            f"Fix: launcher.time_min={max(60, 2 * math.ceil(delay / 60))}, or "
            f"launcher.signal_delay_s={min(90, minutes * 30)}.")


def validate_config(resolved: Mapping[str, Any]) -> None:
    """Raises one UsageError naming every out-of-range value (key, value, valid range, fix)."""
    problems = unknown_keys(resolved)
    problems += [p for rule in RULES if (p := problem(rule, _lookup(resolved, rule.key)))]
    taken = (resolved.get("corpus") or {}).get("dtypes_taken")
    problems += [p for p in (dtype_problem(resolved.get("dtypes"), taken), devices_problem(resolved),
                             ab_rounds_problem(resolved),
                             ab_fixed_problem(resolved), slurm_signal_problem(resolved)) if p]
    if problems:
        raise UsageError("\n".join(problems))
