"""A group file of the user's (`--config-dir DIR`: DIR/ab/NAME.yaml, DIR/corpus/NAME.yaml) whose
environment values YAML reads as booleans or numbers: `values: [off, on]` reached every benchmark
process as False/True, an A/B whose sides set the same nothing. The command line's values are refused
before Hydra composes (value_types.env_text_problem); a file's are read here, once Hydra has composed
the config, node by node as YAML composed them (anchors, aliases, merge keys and tags included), each
file's part where its `# @package` header puts it (`_global_`: its ab: and corpus: mappings)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Collection, Iterable, Iterator, List, Mapping, Optional, Tuple

import yaml

from zlbench.config.value_types import typed_problem

GETS = "every benchmark process would get {it} as {got}, not as typed"
NAMED = "the A/B's sides would be named {got}, not as typed"
# The keys read in each group's files, and what a misread value becomes.
CHECKED = {"ab": {"values": GETS, "fixed": GETS, "sides": NAMED}, "corpus": {"env": GETS}}
# A one-line list longer than this is refused item by item, not quoted whole.
LINE_SHOWN = 120


def group_file_problems(choices: Mapping[str, Optional[str]], sources: Iterable[Mapping[str, str]],
                        composed: Mapping[str, Mapping[str, Any]], overridden: Collection[str] = (),
                        primary: Optional[str] = None) -> List[str]:
    """One refusal per misread value of the chosen ab and corpus files and of the files of the same
    group their defaults lists name, and of the primary config (`--config-name NAME`: its ab: and
    corpus: mappings). choices, sources: Hydra's runtime.choices and runtime.config_sources (a file is
    the first file source that has it, as Hydra finds it; a pkg:// source is not read); primary: the
    primary config's name (Hydra's job.config_name). A file's value counts only where it reached the
    config: `composed` ({group: {key: value}} as composed) holds it, and the command line did not set
    it (`overridden`: keys such as ab.values, ab.fixed.X)."""
    sources = [Path(s["path"]) for s in sources if s.get("schema") == "file"]
    # (its group, path, text, root node, under, the package its header names: read once a file)
    files = [(owner, path, text, root, under, None if under is not None else _header_package(text))
             for owner in CHECKED for path, text, root, under in _chain(owner, choices.get(owner), None, sources, set())]
    # The primary config lands at the root (Hydra's default package for it), unless its header says otherwise.
    files += [(None, path, text, root, None, _header_package(text) or "_global_")
              for path, text, root, _ in _chain("", primary, None, sources, set())]
    problems: List[str] = []
    for group, keys in CHECKED.items():
        now = composed.get(group) or {}
        skip = {k[len(group) + 1:] for k in overridden if k.startswith(group + ".")}
        for owner, path, text, root, under, package in files:
            content = _placed(group, owner, root, package)
            if content is None:
                continue
            for problem in _file_problems(path, text, content, under, keys, now, skip):
                if problem not in problems:
                    problems.append(problem)
    return problems


def _placed(group: str, owner: Optional[str], root: Any, package: Optional[str]) -> Any:
    """The part of a file of `owner`'s that lands in `group`'s config, or None. Its `# @package` header
    names where the whole file lands (none: its own group's; `_global_.corpus` or `corpus`: corpus'),
    and `_global_` puts it at the root: there its `group:` mapping is the group's."""
    if package == "_global_":
        node = dict(_entries(root)).get(group)
        return node if isinstance(node, yaml.MappingNode) else None
    if package in (None, "_group_"):
        package = owner
    return root if package and package.removeprefix("_global_.") == group else None


def _header_package(text: str) -> Optional[str]:
    """The package a `# @package X` line of the file's header names, read as Hydra reads its header:
    the leading `# @key value` lines, blank lines skipped, up to the first other line."""
    package = None
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if not re.match(r"^#\s*@", line):
            break
        key, _, value = line.lstrip("#").strip().partition(" ")
        if key == "@package" and value.strip():
            package = value.strip()
    return package


def _chain(group: str, name: Optional[str], under: Optional[str], sources: List[Path],
           seen: set) -> Iterator[Tuple[Path, str, Any, Optional[str]]]:
    """The group file `name` and, depth first, the files of its group its defaults list names; under:
    the key the file's content lands in (`- fx@fixed`: fixed), None for the group itself."""
    path = next((s / group / f"{name}.yaml" for s in sources if (s / group / f"{name}.yaml").is_file()), None) \
        if name else None  # group "": the primary config, at a source's top
    if path is None or (path, under) in seen:
        return
    seen.add((path, under))
    try:
        text = path.read_text(encoding="utf-8")
        root = yaml.compose(text, Loader=_yaml_loader())
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Hydra read it (or refused it, in its own words)
    if not isinstance(root, yaml.MappingNode):
        return
    yield path, text, root, under
    if under is not None or not group:
        return
    for key, value in _entries(root):
        if key == "defaults" and isinstance(value, yaml.SequenceNode):
            for item in value.value:
                if isinstance(item, yaml.ScalarNode) and (entry := _same_group(group, item.value)):
                    yield from _chain(group, *entry, sources, seen)


def _same_group(group: str, item: str) -> Optional[Tuple[str, Optional[str]]]:
    """A defaults entry that names a file of `group` (base, /ab/base, sub/base, base@_here_, fx@fixed):
    (its name, the key its content lands in: None for the group); None for `_self_`, another group's
    file, or a package elsewhere."""
    name, _, package = item.partition("@")
    if name == "_self_":
        return None
    if name.startswith("/"):
        if not name.startswith(f"/{group}/"):
            return None
        name = name[len(group) + 2:]
    if package in ("", "_here_", group, f"_global_.{group}"):
        return name, None
    if package.startswith(f"{group}."):
        package = package[len(group) + 1:]
    elif package.startswith("_global_.") or package.startswith("_"):
        return None
    return (name, package) if package in CHECKED[group] else None


def _file_problems(path: Path, text: str, root: Any, under: Optional[str], keys: Mapping[str, str],
                   composed: Mapping[str, Any], overridden: Collection[str]) -> List[str]:
    loader = _yaml_loader()("")
    problems = []
    # (key, its node, where the key is typed): the file's own keys, or the whole file as one key's value.
    pairs = [(under, root, None)] if under else [(k, v, kn) for (k, v), kn in _entries(root, with_keys=True)]
    for key, value_node, key_node in pairs:
        if key not in keys:
            continue
        now, gets = composed.get(key), keys[key]
        # The command line's mapping merges into the file's (ab.fixed={X:'0'} replaces X only); its list replaces it.
        if isinstance(value_node, yaml.MappingNode) and isinstance(now, Mapping):
            for name, node in _entries(value_node):
                if f"{key}.{name}" not in overridden and (v := _misread(node, loader)) and now.get(name) == str(v[0]):
                    problems.append(_one(path, text, node, f"{name}: ", v[0], gets))
        elif isinstance(value_node, yaml.SequenceNode) and isinstance(now, list) and key not in overridden:
            bad = [(node, v[0]) for i, node in enumerate(value_node.value)
                   if i < len(now) and (v := _misread(node, loader)) and now[i] == str(v[0])]
            start, end = value_node.start_mark, value_node.end_mark
            typed = text[start.index:end.index]
            if bad and value_node.flow_style and start.line == end.line and len(typed) <= LINE_SHOWN \
                    and key_node is not None and key_node.end_mark.index <= start.index \
                    and all(_source(text, n) == n.value and start.index <= n.start_mark.index < end.index for n, _ in bad):
                # One line, as typed, rewritten as the fix: values: ['off', 'on'].
                problems.append(typed_problem(
                    f"{key}: ", typed,
                    [(n.start_mark.index - start.index, n.end_mark.index - start.index, n.value, v) for n, v in bad],
                    where=f"{path}, line {start.line + 1}: ", gets=gets, zero_one=gets is GETS))
            else:  # over lines, reached through an alias, tagged or long: each item on its own line
                for n, v in bad:
                    said = _one(path, text, n, "- " if not value_node.flow_style else "", v, gets, key)
                    if said not in problems:
                        problems.append(said)
    return problems


def _entries(node: Any, with_keys: bool = False) -> Iterator[Any]:
    """A mapping's (key, value node) pairs, those a merge key (<<: *base) brings in included;
    with_keys: ((key, value node), key node)."""
    for k, v in node.value:
        if k.tag == "tag:yaml.org,2002:merge":
            for m in v.value if isinstance(v, yaml.SequenceNode) else [v]:
                if isinstance(m, yaml.MappingNode):
                    yield from _entries(m, with_keys)
        elif isinstance(k, yaml.ScalarNode):
            yield ((k.value, v), k) if with_keys else (k.value, v)


def _misread(node: Any, loader: Any) -> Optional[Tuple[Any]]:
    """(value,) where YAML reads a scalar as a boolean or number whose text is not the scalar's
    (off -> False, 1e3 -> 1000.0, 1:30 -> 90, !!float 1 -> 1.0), else None."""
    if not isinstance(node, yaml.ScalarNode) or node.tag.endswith(":str"):
        return None
    try:
        value = loader.construct_object(node, deep=True)
    except yaml.YAMLError:
        return None
    return (value,) if isinstance(value, (bool, int, float)) and str(value) != node.value else None


def _source(text: str, node: Any) -> str:
    return text[node.start_mark.index:node.end_mark.index]


def _one(path: Path, text: str, node: Any, setting: str, value: Any, gets: str, key: str = "") -> str:
    """The refusal of one scalar, on its own line (a mapping's entry, a block list's item, or an item
    of a list that spans lines, reaches it through an alias or carries a tag)."""
    where = f"{path}, line {node.start_mark.line + 1}" + (f" ({key})" if key and not setting else "") + ": "
    source = _source(text, node)
    if source.startswith("!"):  # a tag (!!float 1, !!bool 'yes'): quoting alone would keep it
        tag = source.split()[0]
        return (f"{where}{setting}{source}: the tag {tag} makes YAML read it as {value!r}, and "
                f"{gets.format(it='it', got=value)}. Fix: in that file, drop the tag: {setting}'{node.value}'.")
    return typed_problem(setting, node.value, [(0, len(node.value), node.value, value)], where=where, gets=gets,
                         zero_one=gets is GETS)


def _yaml_loader() -> Any:
    """The YAML loader OmegaConf reads config files with (its own float rule, YAML 1.1 booleans)."""
    try:
        from omegaconf._utils import get_yaml_loader
        return get_yaml_loader()
    except ImportError:  # a private helper of OmegaConf's: PyYAML's safe loader reads the same booleans
        return yaml.SafeLoader
