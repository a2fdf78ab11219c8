"""A value of the wrong type on the command line (timer.repeat=1.5, ops=exp, progress=null), refused
before Hydra composes anything: Hydra's own refusal is several lines without the fix. And an env
setting typed as a YAML boolean or number (ab.values=[false,true]). Same form as
the range checks (zlbench/config/validate.py): `KEY=VALUE is not valid: it must be ... Fix: ...`."""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from enum import Enum
from typing import Any, Callable, Iterable, Optional, Sequence, Tuple

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


def env_text_problem(key: str, typed: str, values: Iterable[Any]) -> Optional[str]:
    """An env setting's value (ab.values, ab.fixed, corpus.env) that is not text as typed: `values`
    (Hydra's reading of the override, before the schema makes text of it) holds an unquoted YAML
    boolean or number whose text differs from what was typed (false, 1e3): every benchmark process
    would get Python's spelling (False, 1000.0). A quoted 'false' is text, and passes. A group file's
    values: zlbench/config/group_files.py."""
    if not any(key == k or key.startswith(k + ".") for k in ENV_TEXT):
        return None
    words, scalars = list(_TYPED.finditer(typed)), list(_scalars(list(values)))
    if len(words) != len(scalars):  # an interpolation or an escape: not read here
        return None
    bad = [(w.start(), w.end(), w[0], v) for w, v in zip(words, scalars)
           if not isinstance(v, str) and v is not None and str(v) != w[0]]
    return typed_problem(f"{key}=", typed, bad) if bad else None


def typed_problem(setting: str, typed: str, bad: Sequence[Tuple[int, int, str, Any]], where: str = "",
                  gets: str = "every benchmark process would get {it} as {got}, not as typed",
                  zero_one: bool = True) -> str:
    """The refusal of `typed` (what follows `setting`), whose words bad = (start, end, word, value)
    YAML read as booleans or numbers: what each becomes, and `typed` rewritten quoted (and in 0/1).
    where: 'FILE, line N: ' for a group file (the fix goes there); gets: what becomes of them; zero_one:
    whether 0/1 is a fix for booleans (not for names)."""
    kinds = sorted({"booleans" if isinstance(v, bool) else "numbers" for *_, v in bad})
    one = len(bad) == 1
    said = " and ".join(w for _, _, w, _ in bad)
    got = " and ".join(str(v) for *_, v in bad)

    def rewritten(word: Callable[[Any, str], str]) -> str:
        out, end = [], 0
        for start, stop, w, v in bad:
            out += [typed[end:start], word(v, w)]
            end = stop
        return "".join(out) + typed[end:]

    fix = f"quote {'it' if one else 'them'}, {setting}{rewritten(lambda v, w: repr(w))}"
    if kinds == ["booleans"] and zero_one:
        fix += f", or use 0/1: {setting}{rewritten(lambda v, w: str(int(v)))}"
    kind = " and ".join(kinds)
    return (f"{where}{setting}{typed}: unquoted, {said} {'is a YAML ' + kind[:-1] if one else 'are YAML ' + kind}, "
            f"and {gets.format(it='it' if one else 'them', got=got)}. "
            f"Fix: {'in that file, ' if where else ''}{fix}.")
