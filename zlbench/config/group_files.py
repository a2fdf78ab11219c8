"""A group file of the user's (`--config-dir DIR`: DIR/ab/NAME.yaml, DIR/corpus/NAME.yaml) whose
environment values YAML reads as booleans or numbers: `values: [off, on]` reached every benchmark
process as False/True, an A/B whose sides set the same nothing. The command line's values are refused
before Hydra composes (value_types.env_text_problem); a file's are read here, once Hydra has composed
the config, node by node as YAML composed them (anchors, aliases, merge keys and tags included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Iterator, List, Mapping, Optional, Tuple

import yaml

from zlbench.config.value_types import typed_problem

GETS = "every benchmark process would get {it} as {got}, not as typed"
# The keys read in each group's files, and what a misread value becomes.
CHECKED = {"ab": {"values": GETS, "fixed": GETS, "sides": "the A/B's sides would be named {got}, not as typed"},
           "corpus": {"env": GETS}}


def group_file_problems(choices: Mapping[str, Optional[str]], sources: Iterable[Mapping[str, str]],
                        composed: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """One refusal per misread value of the chosen ab and corpus files and of the files of the same
    group their defaults lists name. choices, sources: Hydra's runtime.choices and
    runtime.config_sources (a file is the first file source that has it, as Hydra finds it; a pkg://
    source is not read). composed: {group: {key: value}} as composed: a file's value counts only where
    it reached the config (the command line or a later file did not replace it)."""
    sources = [Path(s["path"]) for s in sources if s.get("schema") == "file"]
    problems: List[str] = []
    for group, keys in CHECKED.items():
        for path, text, root in _chain(group, choices.get(group), sources, set()):
            problems += [p for p in _file_problems(path, text, root, keys, composed.get(group) or {})
                         if p not in problems]
    return problems


def _chain(group: str, name: Optional[str], sources: List[Path], seen: set) -> Iterator[Tuple[Path, str, Any]]:
    """The group file `name` and, depth first, the files of its group its defaults list names."""
    path = next((s / group / f"{name}.yaml" for s in sources if (s / group / f"{name}.yaml").is_file()), None) \
        if name else None
    if path is None or path in seen:
        return
    seen.add(path)
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=_yaml_loader())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Hydra read it (or refused it, in its own words)
    if not isinstance(root, yaml.MappingNode):
        return
    yield path, text, root
    for key, value in root.value:
        if key.value == "defaults" and isinstance(value, yaml.SequenceNode):
            for item in value.value:  # `- base`: the group's base.yaml; `_self_`, `/other`, `override ...`: not
                if isinstance(item, yaml.ScalarNode) and item.value != "_self_" and not item.value.startswith("/"):
                    yield from _chain(group, item.value, sources, seen)


def _file_problems(path: Path, text: str, root: Any, keys: Mapping[str, str], composed: Mapping[str, Any]) -> List[str]:
    loader = _yaml_loader()("")
    problems = []
    for key_node, value_node in root.value:
        key, now = key_node.value, composed.get(key_node.value)
        if key not in keys:
            continue
        gets = keys[key]
        if isinstance(value_node, yaml.MappingNode) and isinstance(now, Mapping):
            for name, node in _entries(value_node):
                if (v := _misread(node, loader)) and now.get(name) == str(v[0]):
                    problems.append(_one(path, node, f"{name}: ", v[0], gets))
        elif isinstance(value_node, yaml.SequenceNode) and isinstance(now, list):
            bad = [(node, v[0]) for i, node in enumerate(value_node.value)
                   if i < len(now) and (v := _misread(node, loader)) and now[i] == str(v[0])]
            start, end = value_node.start_mark, value_node.end_mark
            if bad and value_node.flow_style and start.line == end.line and all(
                    text[n.start_mark.index:n.end_mark.index] == n.value and start.index <= n.start_mark.index < end.index
                    for n, _ in bad):
                # One line, as typed, rewritten as the fix: values: ['off', 'on'].
                problems.append(typed_problem(
                    f"{key}: ", text[start.index:end.index],
                    [(n.start_mark.index - start.index, n.end_mark.index - start.index, n.value, v) for n, v in bad],
                    where=f"{path}, line {start.line + 1}: ", gets=gets))
            else:
                problems += [_one(path, n, "- " if not value_node.flow_style else "", v, gets, key) for n, v in bad]
    return problems


def _entries(node: Any) -> Iterator[Tuple[str, Any]]:
    """A mapping's (key, value node) pairs, those a merge key (<<: *base) brings in included."""
    for k, v in node.value:
        if k.tag == "tag:yaml.org,2002:merge":
            for m in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                if isinstance(m, yaml.MappingNode):
                    yield from _entries(m)
        elif isinstance(k, yaml.ScalarNode):
            yield k.value, v


def _misread(node: Any, loader: Any) -> Optional[Tuple[Any]]:
    """(value,) where YAML reads a scalar as a boolean or number whose text is not the scalar's
    (off -> False, 1e3 -> 1000.0, 1:30 -> 90), else None."""
    if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(":str"):
        return None
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.YAMLError:
        return None
    return (value,) if isinstance(value, (bool, int, float)) and str(value) != node.value else None


def _one(path: Path, node: Any, setting: str, value: Any, gets: str, key: str = "") -> str:
    """The refusal of one scalar, on its own line (a mapping's entry, a block list's item, or an item
    of a list that spans lines or reaches it through an alias)."""
    where = f"{path}, line {node.start_mark.line + 1}" + (f" ({key})" if key and not setting else "") + ": "
    return typed_problem(setting, node.value, [(0, len(node.value), node.value, value)], where=where, gets=gets)


def _yaml_loader() -> Any:
    """The YAML loader OmegaConf reads config files with (its own float rule, YAML 1.1 booleans)."""
    try:
        from omegaconf._utils import get_yaml_loader
        return get_yaml_loader()
    except ImportError:  # a private helper of OmegaConf's: PyYAML's safe loader reads the same booleans
        return yaml.SafeLoader
