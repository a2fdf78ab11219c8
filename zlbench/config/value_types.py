"""A value of the wrong type on the command line (timer.repeat=1.5, ops=exp, progress=null), refused
before Hydra composes anything: Hydra's own refusal is several lines without the fix. And an env
setting typed as a YAML boolean or number, on the command line or in a group file (values: [off, on]). Same form as
the range checks (zlbench/config/validate.py): `KEY=VALUE is not valid: it must be ... Fix: ...`."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, List, Mapping, Optional, Sequence

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from zlbench.config.keys import base_type, field_of
from zlbench.config.validate import field_default, rule_of, spell


def _words(hint: Any) -> str:
    base, nullable = base_type(hint)
    origin = typing.get_origin(base)
    if base is bool:
        words = "true or false"
    elif isinstance(base, type) and issubclass(base, Enum):
        words = f"one of {', '.join(m.value for m in base)}"
    elif base is int:
        words = "an integer"
    elif base is float:
        words = "a number"
    elif origin in (list, typing.List):
        words = "a list of strings in brackets, e.g. [a,b]"
    elif origin in (dict, typing.Dict):
        words = "a mapping in braces, e.g. {A: '1'}"
    else:
        words = "a string"
    return words + (", or null" if nullable else "")


def _fits(cls: type, name: str, value: Any) -> bool:
    node = OmegaConf.structured(cls)
    try:
        node[name] = value
    except OmegaConfBaseException:
        return False
    return True


def _fix(key: str, f: dataclasses.Field, hint: Any, value: Any) -> str:
    base, _ = base_type(hint)
    if typing.get_origin(base) in (list, typing.List) and isinstance(value, (str, int, float)) \
            and not isinstance(value, bool):
        return f"{key}=[{spell(value)}]"  # ops=exp -> ops=[exp]
    if isinstance(base, type) and issubclass(base, Enum) and isinstance(value, str):
        close = difflib.get_close_matches(value, [m.value for m in base], n=1, cutoff=0.6)
        if close:  # ab.schedule=rounds -> ab.schedule=round, not the default
            return f"{key}={close[0]}"
    if "fix" in f.metadata:
        return f"{key}={spell(f.metadata['fix'])}"
    return f"{key}={spell(field_default(f))}"


def type_problem(key: str, values: Iterable[Any], launchers: Sequence[str] = ("local",)) -> Optional[str]:
    """One line for the first of `values` (one, or a sweep's) that the setting's type refuses."""
    found = field_of(key, launchers)
    if found is None:
        return None
    cls, f, hint = found
    values = list(values)
    scalars = all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in values)
    if len(values) > 1 and scalars and typing.get_origin(base_type(hint)[0]) in (list, typing.List):
        listed = ",".join(map(spell, values))  # ops=exp,softmax: a sweep of two runs, each refused
        return (f"{key}={listed} is a list without its brackets (a comma alone sweeps values). "
                f"Fix: {key}=[{listed}].")
    for value in values:
        if isinstance(value, str) and "${" in value:
            continue  # an interpolation: resolved (and checked) once composed
        if not _fits(cls, f.name, value):
            valid = rule_of(key, f, hint).valid if f.metadata else _words(hint)
            return f"{key}={spell(value)} is not valid: it must be {valid}. Fix: {_fix(key, f, hint, value)}."
    return None


# Settings whose values every benchmark process gets as environment variables' text.
ENV_TEXT = ("ab.values", "ab.fixed", "corpus.env")
# One value of an override as typed: a quoted string, or a bare word that is not a mapping's key.
_TYPED = re.compile(r"""'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"|[^\s\[\]{},:'"]+(?![^\s\[\]{},:'"])(?!\s*:)""")


def _scalars(value: Any) -> Iterable[Any]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _scalars(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _scalars(v)
    else:
        yield value


def env_text_problem(key: str, typed: str, values: Iterable[Any], in_file: Optional[str] = None) -> Optional[str]:
    """An env setting's value (ab.values, ab.fixed, corpus.env) that is not text as typed: `values`
    (Hydra's reading of the override, before the schema makes text of it) holds an unquoted YAML
    boolean or number whose text differs from what was typed (false, off, 1e3): every benchmark process
    would get Python's spelling (False, 1000.0). A quoted 'false' is text, and passes. `in_file`: the
    group file the value was typed in (then `key` is its key there, and the fix is that file's line)."""
    if in_file is None and not any(key == k or key.startswith(k + ".") for k in ENV_TEXT):
        return None
    words, scalars = list(_TYPED.finditer(typed)), list(_scalars(list(values)))
    if len(words) != len(scalars):  # an interpolation or an escape: not read here
        return None
    bad = [(w, v) for w, v in zip(words, scalars) if not isinstance(v, str) and v is not None and str(v) != w[0]]
    if not bad:
        return None
    kinds = sorted({"booleans" if isinstance(v, bool) else "numbers" for _, v in bad})
    one = len(bad) == 1
    said = " and ".join(w[0] for w, _ in bad)
    got = " and ".join(str(v) for _, v in bad)
    setting = ("- " if key == "-" else f"{key}: ") if in_file else f"{key}="  # "-": a block sequence's item

    def rewritten(word: Callable[[Any, str], str]) -> str:
        out, end = [], 0
        for w, v in bad:
            out += [typed[end:w.start()], word(v, w[0])]
            end = w.end()
        return " ".join(("".join(out) + typed[end:]).split())  # a block's lines, on one line

    fix = f"quote {'it' if one else 'them'}, {setting}{rewritten(lambda v, w: repr(w))}"
    if kinds == ["booleans"]:
        fix += f", or use 0/1: {setting}{rewritten(lambda v, w: str(int(v)))}"
    kind = " and ".join(kinds)
    where = f"{in_file}: " if in_file else ""
    return (f"{where}{setting}{' '.join(typed.split())}: unquoted, {said} {'is a YAML ' + kind[:-1] if one else 'are YAML ' + kind}, "
            f"and every benchmark process would get {'it' if one else 'them'} as {got}, not as typed. "
            f"Fix: {'in that file, ' if in_file else ''}{fix}.")


# The group files whose keys every benchmark process gets as environment variables' text (ENV_TEXT).
GROUP_ENV_TEXT = {"ab": ("values", "fixed"), "corpus": ("env",)}


def group_file_problems(choices: Mapping[str, Optional[str]], sources: Iterable[Mapping[str, str]],
                        overridden: Collection[str] = ()) -> List[str]:
    """env_text_problem for the group files Hydra composed (a user's conf/ab/mine.yaml with
    `values: [off, on]` reaches every process as False/True): `choices` and `sources` are Hydra's
    runtime.choices and runtime.config_sources. The file is the first source that has it, as Hydra
    finds it; what the command line sets (`overridden`: a list, or a mapping's entry) replaces the
    file's and is checked there.
    Only file sources are read (a config packaged as pkg:// is not)."""
    problems = []
    for group, keys in GROUP_ENV_TEXT.items():
        choice = choices.get(group)
        if not choice:
            continue
        found = next((Path(s["path"]) / group / f"{choice}.yaml" for s in sources if s.get("schema") == "file"
                      and (Path(s["path"]) / group / f"{choice}.yaml").is_file()), None)
        if found is None:
            continue
        text = found.read_text()
        try:
            root = yaml.compose(text, Loader=_yaml_loader())
            data = yaml.load(text, Loader=_yaml_loader())
        except yaml.YAMLError:
            continue  # Hydra read it; a file it cannot read is its error to give
        if not isinstance(root, yaml.MappingNode) or not isinstance(data, dict):
            continue
        for key_node, value_node in root.value:
            key = key_node.value
            if key not in keys or key not in data:
                continue
            # A mapping's entries one by one (the command line merges its own into them: ab.fixed.X=1
            # replaces X only), a block sequence's items one by one (each on its line), else the whole list
            # (the command line's list replaces it).
            if isinstance(value_node, yaml.MappingNode) and isinstance(data[key], dict):
                entries = [(k.value, v, data[key].get(k.value)) for k, v in value_node.value
                           if f"{group}.{key}.{k.value}" not in overridden]
            elif f"{group}.{key}" in overridden:
                entries = []
            elif isinstance(value_node, yaml.SequenceNode) and not value_node.flow_style:
                entries = [("-", v, d) for v, d in zip(value_node.value, data[key])]
            else:
                entries = [(key, value_node, data[key])]
            for name, node, value in entries:
                typed = text[node.start_mark.index:node.end_mark.index]
                if (problem := env_text_problem(name, typed, [value], in_file=f"{found}, line {node.start_mark.line + 1}")):
                    problems.append(problem)
    return problems


def _yaml_loader() -> Any:
    """The YAML loader OmegaConf reads config files with (its own float rule, YAML 1.1 booleans)."""
    try:
        from omegaconf._utils import get_yaml_loader
        return get_yaml_loader()
    except ImportError:  # a private helper of OmegaConf's: PyYAML's safe loader reads the same booleans
        return yaml.SafeLoader
