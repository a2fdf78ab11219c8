"""Which keys the config has, derived from the schema dataclasses (zlbench/config/schema.py): a
field added there is a valid key everywhere at once. Hydra takes any `+key=value` (and suggests it
for a key it does not know), and an unknown key would enter the identity hash while it changes
nothing, so every level is checked: on the command line before Hydra composes anything, and on
the composed config."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from zlbench.config.schema import LAUNCHER_SCHEMAS, ZlbenchConfig

# Settings that were removed, and why (one clause): naming one is refused with its reason, not with
# the list of valid keys. Old run dirs and store rows that hold them still load (they are only read).
_ADAPTIVE = ("adaptive stopping was deleted: on the H200 it stopped at min_samples in 94% of calls and was no "
             "more repeatable than the timer's own budget, which every call now takes (benchmarks/gpu/RESULTS.md, "
             "sixth session)")
_CLOCKS = ("clock screening was deleted: retaking batches read at a low SM clock made the power-capped bmm read "
           "faster and less repeatable than its steady state, and found nothing to retake elsewhere "
           "(benchmarks/gpu/RESULTS.md, sixth session)")
_PLACEMENTS = ("timing at several memory placements was deleted: five placements did not move the run-to-run "
               "p90 and cost 8% more wall, and a plain run now samples placements through its timer.processes "
               "processes (benchmarks/gpu/RESULTS.md, issue 13 and issue 23)")
REMOVED: Dict[str, str] = {
    **{f"timer.{k}": _PLACEMENTS for k in ("placements", "placement_max_mb", "placement_tol")},
    **{f"timer.{k}": _CLOCKS for k in ("clock_reader", "throttle_threshold", "throttle_retries", "throttle_pause_ms")},
    **{f"timer.{k}": _ADAPTIVE for k in ("stop", "target_rel", "min_samples", "max_samples", "max_time_ms")},
}

FREE = "free"  # a Dict field (corpus.env, ab.fixed, ...): any key is the user's to name
Children = Any  # Dict[str, Any] of a settings group, FREE, or None for a value


def _children(tp: Any) -> Children:
    """What a field of type `tp` holds: its settings (a dataclass), any key (a dict), or a value."""
    if dataclasses.is_dataclass(tp):
        return {name: _children(hint) for name, hint in typing.get_type_hints(tp).items()}
    origin = typing.get_origin(tp)
    if origin in (dict, Dict):
        return FREE
    if origin is typing.Union:
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _children(inner[0]) if len(inner) == 1 else None
    return None


def _launcher_settings(names: Sequence[str]) -> Dict[str, Any]:
    merged: Dict[str, Any] = {}
    for name in names:
        if name in LAUNCHER_SCHEMAS:
            merged.update(_children(LAUNCHER_SCHEMAS[name]))
    return merged or _children(LAUNCHER_SCHEMAS["local"])


def settings(launchers: Sequence[str] = ("local",)) -> Dict[str, Any]:
    """The whole tree of settings for these launcher choices (a sweep over launchers: all of them)."""
    tree = _children(ZlbenchConfig)
    tree["launcher"] = _launcher_settings(launchers)
    return tree


def _paths(tree: Mapping[str, Any], prefix: Tuple[str, ...] = ()) -> Iterator[Tuple[str, ...]]:
    for name, sub in tree.items():
        yield prefix + (name,)
        if isinstance(sub, dict):
            yield from _paths(sub, prefix + (name,))


def _elsewhere(name: str, tree: Mapping[str, Any]) -> List[str]:
    """Full keys whose last part is `name` (node_timeout_s -> launcher.node_timeout_s)."""
    return [".".join(p) for p in _paths(tree) if p[-1] == name and len(p) > 1]


def key_problem(key: str, value: Optional[str] = None, launchers: Sequence[str] = ("local",)) -> Optional[str]:
    """None when `key` (dotted) is a setting; else one line: what is wrong, what is valid, the fix."""
    if key in REMOVED:
        return f"{key} was removed: {REMOVED[key]}. Fix: drop {key}=."
    parts = key.split(".")
    tree = settings(launchers)
    node: Children = tree
    for i, part in enumerate(parts):
        where = ".".join(parts[:i])
        if node == FREE:
            return None
        if node is None:
            return (f"{key} is not a zlbench setting: {where} is a value, it has no settings of its own. "
                    f"Fix: {where}=VALUE.")
        if part not in node:
            return _unknown(key, parts[:i], part, node, "..." if value is None else value, launchers, parts[i + 1:])
        node = node[part]
    return None


def _unknown(key: str, parent: Sequence[str], part: str, siblings: Mapping[str, Any], value: str,
             launchers: Sequence[str], rest: Sequence[str] = ()) -> str:
    """The line for an unknown `part` under `parent`; `rest`: the key's parts below it (corpus.envv.X:
    X), kept in a fix that names a mapping (corpus.env.X=1, not corpus.env=1)."""
    where, valid = ".".join(parent), list(siblings)
    if where == "launcher":
        owners = [n for n, schema in LAUNCHER_SCHEMAS.items() if part in _children(schema)]
        if owners:
            return (f"{key} is not a zlbench setting of launcher={','.join(launchers)}: only launcher={owners[0]} "
                    f"has it. Fix: launcher={owners[0]} {key}={value}.")
    moved = [k for k in _elsewhere(part, settings(launchers)) if k != key]
    names = difflib.get_close_matches(part, valid, n=2, cutoff=0.5)
    ratios = [difflib.SequenceMatcher(None, part, c).ratio() for c in names]
    if len(names) > 1 and ratios[0] - ratios[1] >= 0.2:
        names = names[:1]  # one much the closer (ab.valu: values, not var)
    below = "".join(f".{p}" for p in rest)
    close = [f"{where + '.' if where else ''}{c}{below if siblings[c] == FREE or isinstance(siblings[c], dict) else ''}"
             for c in names]
    if len(close) > 1 and value != "...":  # of two as close, the one that takes a value of this shape
        shaped = [c for c in close if takes_list(c, launchers) in (None, value.lstrip().startswith("["))]
        close = shaped or close
    # A list setting's value in brackets (ab.valu=1 -> ab.values=[1]).
    fixes = [f"{k}=[{value}]" if value != "..." and takes_list(k, launchers) and not value.lstrip().startswith("[")
             else f"{k}={value}" for k in (moved or close)]
    fix = f"{fixes[0]}" if len(fixes) == 1 else f"one of {', '.join(fixes)}" if fixes else "drop it"
    return (f"{key} is not a zlbench setting. The settings {'of ' + where if where else 'at the top level'} "
            f"are: {', '.join(valid)}. Fix: {fix}.")


def unknown_keys(resolved: Mapping[str, Any]) -> List[str]:
    """A problem line for every key of the composed config that the schema does not know."""
    launcher = (resolved.get("launcher") or {}).get("name") or "local"
    problems: List[str] = []

    def walk(node: Mapping[str, Any], prefix: str) -> None:
        for name, sub in node.items():
            key = f"{prefix}{name}"
            problem = key_problem(key, launchers=[launcher])
            if problem:
                problems.append(problem)
            elif isinstance(sub, Mapping):
                walk(sub, key + ".")

    walk({k: v for k, v in resolved.items() if k != "hydra"}, "")
    return problems


Field = Tuple[type, dataclasses.Field, Any]  # (the dataclass holding it, the field, its type)


def field_of(key: str, launchers: Sequence[str] = ("local",)) -> Optional[Field]:
    """The schema field a dotted key names, or None (a group, a free dict's entry, unknown)."""
    cls: Any = ZlbenchConfig
    found: Optional[Field] = None
    for part in key.split("."):
        if found is not None:
            return None  # below a value (or a free dict: corpus.env.X)
        hints = typing.get_type_hints(cls)
        if part not in hints:
            return None
        if cls is ZlbenchConfig and part == "launcher":
            cls = next((LAUNCHER_SCHEMAS[n] for n in launchers if n in LAUNCHER_SCHEMAS), LAUNCHER_SCHEMAS["local"])
            continue
        if dataclasses.is_dataclass(hints[part]):
            cls = hints[part]
            continue
        found = (cls, next(f for f in dataclasses.fields(cls) if f.name == part), hints[part])
    return found


def takes_list(key: str, launchers: Sequence[str] = ("local",)) -> Optional[bool]:
    """Whether the setting a dotted key names takes a list; None where the key names no setting."""
    found = field_of(key, launchers)
    return None if found is None else typing.get_origin(base_type(found[2])[0]) in (list, typing.List)


def base_type(hint: Any) -> Tuple[Any, bool]:
    """(the type without Optional, whether null is allowed)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Union and len(args) == 1:
        return args[0], True
    return hint, False
