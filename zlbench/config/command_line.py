"""Command-line front: backend aliases and the old runner's env vars, turned into Hydra overrides
before Hydra composes anything. Command-line overrides win over env vars; both are recorded."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import yaml

from zlbench.backends import canonical_name
from zlbench.config.keys import FREE, REMOVED, key_problem, settings
from zlbench.config.schema import SHAPE_LEVELS, SHAPE_MODES, conf_dir, register_schemas
from zlbench.config.secrets import has_password, scrub
from zlbench.config.validate import field_default, spell
from zlbench.config.keys import field_of
from zlbench.config.value_types import env_text_problem, type_problem
from zlbench.errors import UsageError

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in TRUE:
        return True
    if v in FALSE:
        return False
    raise UsageError(f"environment variable {name}={value!r} is not a boolean. Fix: set it to 0 or 1.")


def _quote(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _int(name: str, value: str, least: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < least:
        raise UsageError(f"environment variable {name}={value!r} is not an integer >= {least}. "
                         f"Fix: set it to one, e.g. {name}={max(least, 3)}, or unset it.")
    return number


def _choice(name: str, value: str, choices: Sequence[str]) -> str:
    v = value.strip().lower()
    if v not in choices:
        raise UsageError(f"environment variable {name}={value!r} is not one of {', '.join(choices)}. "
                         f"Fix: set it to one of them, e.g. {name}={choices[0]}, or unset it.")
    return v


# What Hydra's grammar reads unquoted in a list (ops=[exp,*norm*]): the resume command stays readable.
_BARE_MARK = re.compile(r"[\w*?]+")
# An op mark (pytest's marks are Python names) or an fnmatch pattern of them, as ops= takes (ops=['*norm*']).
_OP_PATTERN = re.compile(r"[\w*?!\[\].-]+")


def _given(overrides: Sequence[str], key: str, unquoted: bool = False) -> Optional[str]:
    """The value the first override of `key` gives (as typed; unquoted: the quotes around it dropped)."""
    value = next((a.split("=", 1)[1] for a in overrides if override_key(a) == key), None)
    return value.strip("\"'") if unquoted and value is not None else value


def _holds_a_run(path: Path) -> bool:
    """Whether a run dir holds a run: Hydra's files of one, or zlbench's identity (a copy without .hydra/)."""
    return (path / ".hydra" / "overrides.yaml").is_file() or (path / "run_identity.json").is_file()


def _op_marks(name: str, value: str) -> List[str]:
    """OP=exp,softmax: op marks or patterns, comma-separated. Anything else (a bracket left open,
    a space, a quote) would reach the corpus as an op that matches no test, said as ops=, which the
    user never typed."""
    marks = [x.strip() for x in value.split(",") if x.strip()]
    bad = [m for m in marks if not _OP_PATTERN.fullmatch(m) or m.count("[") != m.count("]")]
    if bad:
        # The marks as meant: quotes and stray brackets dropped, words apart (patterns kept as typed).
        meant = [w for m in marks for w in (re.sub(r"[\[\]\"']", "", m).split() if m in bad else [m])]
        raise UsageError(f"environment variable {name}={value!r}: {bad[0]!r} is not an op mark or pattern. "
                         f"Fix: {name}={','.join(meant) or 'exp'} (op marks or patterns, comma-separated), or "
                         f"unset {name} and pass ops=[...].")
    if value.strip() and not marks:
        raise UsageError(f"environment variable {name}={value!r} names no op. Fix: {name}=exp (op marks, "
                         f"comma-separated), or unset {name} to run every op.")
    return marks


def _backend(name: str, value: str) -> str:
    try:
        return canonical_name(value)
    except UsageError as e:
        what = str(e).split(" Fix:")[0]
        raise UsageError(f"environment variable {name}={value!r}: {what} Fix: set {name} to one of them, "
                         f"e.g. {name}=cuda, or unset it.")


# env var -> (config keys it sets, override builder). The first key is the one a CLI override
# must name to win; selection env vars all yield to any selection given on the command line.
SELECTION = ("ops", "op_file", "test_node")
ENV_MIGRATION: Dict[str, Tuple[Tuple[str, ...], Callable[[str, str], str]]] = {
    "ZL_BACKEND": (("backend",), lambda n, v: f"backend={_backend(n, v)}"),
    "ZL_ENABLE_CUDAGRAPH": (("timer",), lambda n, v: "timer=graph" if _bool(n, v) else "timer=direct"),
    "ZL_DIRECT_REPEAT": (("timer.repeat",), lambda n, v: f"timer.repeat={_int(n, v, 1)}"),
    "ZL_ISOLATE_TUNER_CACHE": (("isolate_caches",), lambda n, v: f"isolate_caches={str(_bool(n, v)).lower()}"),
    "BENCH_LEVEL": (("shape.level",), lambda n, v: f"shape.level={_choice(n, v, SHAPE_LEVELS)}"),
    "SHAPE_MODE": (("shape",), lambda n, v: f"shape={_choice(n, v, SHAPE_MODES)}"),
    "SHAPE_FILE": (("shape.file",), lambda n, v: f"shape.file={_quote(v)}"),
    "TEST_NODE": (SELECTION, lambda n, v: f"test_node={_quote(v)}"),
    "OP": (SELECTION, lambda n, v: "ops=[" + ",".join(x if _BARE_MARK.fullmatch(x) else _quote(x)
                                                      for x in _op_marks(n, v)) + "]"),
    "OP_FILE": (SELECTION, lambda n, v: f"op_file={_quote(v)}"),
    "USE_FLAGTUNE": (("autotune",), lambda n, v: f"autotune={str(_bool(n, v)).lower()}"),
}


def override_key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def set_keys(overrides: Sequence[str]) -> set:
    """The keys a job's overrides set, a mapping's entries included: ab.fixed={X:'0'} sets ab.fixed
    and ab.fixed.X (it merges into the composed mapping, so only X is replaced)."""
    keys = set()
    for arg in overrides:
        key = override_key(arg)
        keys.add(key)
        keys.update(f"{key}.{k}" for value in _values(arg) if isinstance(value, dict) for k in value)
    return keys


def _normalize_backend(arg: str) -> str:
    key, _, value = arg.partition("=")
    if override_key(key) not in ("backend", "backend.name"):
        return arg
    names = [canonical_name(v) for v in value.split(",")]
    return f"{key}={','.join(names)}"


def _launchers(overrides: Sequence[str], primary: Mapping[str, str] = {}) -> Tuple[str, ...]:
    """The launcher option(s) the command line picks (a sweep may pick several); else the primary
    config's (_primary_choices); local by default."""
    chosen = [a.split("=", 1)[1] for a in overrides if override_key(a) == "launcher"]
    return tuple(v.strip() for v in chosen[-1].split(",")) if chosen else (primary.get("launcher", "local"),)


def _primary_choices(flags: Sequence[str]) -> Dict[str, str]:
    """The launcher and A/B axis a primary config of the user's (--config-name NAME, found in a
    --config-dir or conf/) picks: its defaults list's `launcher: X`, `ab: X` (`override ab: X`), and
    its `ab:` mapping's name. The command line's own checks read them as its defaults: an ab.*
    setting is an A/B's where the file chose the axis. A choice its nested defaults make is not seen."""
    name = next((flags[i + 1] for i, f in enumerate(flags[:-1]) if f in ("--config-name", "-cn")), None)
    name = next((f.split("=", 1)[1] for f in flags if f.startswith("--config-name=")), name)
    if not name or name == "config":
        return {}
    path = next((p for d in reversed(_config_dirs(flags)) if (p := d / f"{name}.yaml").is_file()), None)
    try:
        content = yaml.safe_load(path.read_text(encoding="utf-8")) if path else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return {}  # Hydra reads it (or refuses it, in its own words)
    if not isinstance(content, dict):
        return {}
    picked = {}
    for entry in content.get("defaults") or []:
        for key, value in (entry.items() if isinstance(entry, dict) else []):
            group = str(key).removeprefix("override ").strip()
            if group in ("ab", "launcher") and isinstance(value, str):
                picked[group] = value
    if isinstance(content.get("ab"), dict) and isinstance(content["ab"].get("name"), str):
        picked["ab"] = content["ab"]["name"]
    return picked


def _values(arg: str) -> List[Any]:
    """The value(s) an override gives (a sweep's each), as Hydra parses them; [] where it cannot say
    (an interval sweep, a value Hydra's parser refuses: Hydra then says why)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        override = OverridesParser.create().parse_overrides([arg])[0]
        if not override.is_sweep_override():
            return [override.value()]
        # A sweep's elements keep Hydra's QuotedString inside lists (ab.values=['a','b'],['c','d']).
        return [] if override.is_interval_sweep() else [_unquoted(v) for v in override.sweep_iterator()]
    except Exception:  # noqa: BLE001 (Hydra's parse errors have no common type)
        return []


def _unquoted(value: Any) -> Any:
    from hydra.core.override_parser.types import QuotedString

    if isinstance(value, QuotedString):
        return value.text
    if isinstance(value, list):
        return [_unquoted(v) for v in value]
    if isinstance(value, dict):
        return {k: _unquoted(v) for k, v in value.items()}
    return value


def _deletion_problem(name: str, launchers: Sequence[str]) -> Optional[str]:
    """`~key`: a removed or unknown key is said as such (Hydra: "does not exist"); a setting cannot
    be deleted, only set (Hydra: "does not support deletion")."""
    if name in REMOVED:
        return f"{name} was removed: {REMOVED[name]}. Fix: drop ~{name}."
    if (problem := key_problem(name, None, launchers)):
        return problem.replace(f"Fix: {name}=...", f"Fix: drop ~{name}").replace("Fix: drop it", f"Fix: drop ~{name}")
    found = field_of(name, launchers)
    if found is None:
        return None
    return (f"~{name}: a setting cannot be deleted, only set (every setting has a value). "
            f"Fix: drop ~{name}, or {name}={spell(field_default(found[1]))} for its default.")


def _free_dict(name: str, launchers: Sequence[str]) -> Optional[str]:
    """The free dict (corpus.env, ab.fixed, ...) that `name` is an entry of, or None."""
    parts, node = name.split("."), settings(launchers)
    for i, part in enumerate(parts):
        if node == FREE:
            return ".".join(parts[:i])
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None


def _missing_entries(overrides: Sequence[str], launchers: Sequence[str]) -> List[str]:
    """`~corpus.env.X` where the composed config has no X: only Hydra's composition knows a free dict's
    entries (a config group or an earlier override sets them), so it composes here, and its "Could not
    delete ... does not exist" (no fix) becomes a line with the dict's entries and the fix."""
    deletes = {override_key(a): d for a in overrides
               if a.startswith("~") and (d := _free_dict(override_key(a), launchers))}
    if not deletes:
        return []
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    register_schemas()
    groups = {p.name for p in conf_dir().iterdir() if p.is_dir()}
    rest, problems = list(overrides), []
    with initialize_config_dir(str(conf_dir()), version_base="1.3"):
        while True:
            try:
                compose("config", overrides=rest)
                return problems
            except Exception as e:  # noqa: BLE001 (a sweep, a bad value: Hydra says why, as before)
                name = next((n for n in deletes if str(e) == f"Could not delete from config. '{n}' does not exist."),
                            None)
            if name is None:
                return problems
            i = next(j for j, a in enumerate(rest) if a.startswith("~") and override_key(a) == name)
            try:  # the dict where the delete comes: groups apply first, values in order
                cfg = compose("config", overrides=rest[:i] + [a for a in rest[i + 1:] if override_key(a) in groups])
                held = sorted(OmegaConf.select(cfg, deletes[name]) or {})
                what = f" ({deletes[name]} holds {', '.join(held)})" if held else f" ({deletes[name]} is empty)"
            except Exception:  # noqa: BLE001
                what = ""
            problems.append(f"~{name}: {name} is not set{what}, so there is nothing to delete. Fix: drop ~{name}.")
            del rest[i]


def _config_dirs(flags: Sequence[str]) -> List[Path]:
    """conf/ and the folders --config-dir / -cd add (a user's own axes: DIR/ab/NAME.yaml)."""
    dirs = [conf_dir()]
    for i, flag in enumerate(flags):
        if flag in ("--config-dir", "-cd") and i + 1 < len(flags):
            dirs.append(Path(os.path.expanduser(flags[i + 1])))
        elif flag.startswith("--config-dir="):
            dirs.append(Path(os.path.expanduser(flag.split("=", 1)[1])))
    return dirs


def _group_option_problems(overrides: Sequence[str], flags: Sequence[str]) -> List[str]:
    """`timer=bar`: an option no config group has (Hydra answers with a block of its own and no fix).
    backend= is checked by its own names (aliases: NVIDIA, MTHREADS, ...)."""
    dirs = _config_dirs(flags)
    groups = {p.name for p in conf_dir().iterdir() if p.is_dir()} - {"backend"}
    problems = []
    for arg in overrides:
        group = override_key(arg)
        if group not in groups or arg.startswith(("~", "+")):
            continue
        options = sorted({f.stem for d in dirs for f in (d / group).glob("*.yaml")})
        unknown = [v for v in _values(arg) if isinstance(v, str) and v not in options]
        if unknown:
            problems.append(f"{group}={unknown[0]}: no such {group} option. Fix: {group}=<one of {', '.join(options)}>"
                            + (" (any variable: ab=env ab.var=NAME; your own axis: DIR/ab/NAME.yaml with "
                               "--config-dir DIR)." if group == "ab" else "."))
    return problems


def _hydra_settings(cls: Any = None) -> Dict[str, Any]:
    """Hydra's own settings (hydra.conf.HydraConf) as a tree: a dict per structured level, None for a
    value or a free level (hydra.launcher, hydra.job_logging, ...: anything below it is Hydra's to judge)."""
    import dataclasses
    import typing

    from hydra.conf import HydraConf

    cls = cls or HydraConf
    hints, tree = typing.get_type_hints(cls), {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint
        tree[f.name] = _hydra_settings(hint) if dataclasses.is_dataclass(hint) else None
    return tree


def _hydra_key_problem(name: str, value: str) -> Optional[str]:
    """hydra.run.dri=DIR: Hydra refuses it in three lines and offers `+hydra.run.dri=DIR`, which it
    then takes, and the run goes to zl_runs/<date>/<time>/; `+hydra.run.dri` it takes silently."""
    parts, node = name.split("."), _hydra_settings()
    for i, part in enumerate(parts[1:], 1):
        if node is None:
            return None
        if part not in node:
            where = ".".join(parts[:i])
            close = difflib.get_close_matches(part, list(node), n=1, cutoff=0.5)
            fix = f"{where}.{close[0]}={value}" if close else f"drop {name}="
            return (f"{name} is not a Hydra setting. The settings of {where} are: {', '.join(node)}. "
                    f"Fix: {fix}.")
        node = node[part]
    return None


def _check_overrides(overrides: Sequence[str], cli_keys: set, primary: Mapping[str, str] = {}) -> None:
    """Refuse, before Hydra composes anything, what Hydra would take or answer with the wrong advice:
    unknown keys at any level (Hydra suggests `+key=`, which would then run), both gpus= and
    devices=, and a password on the command line (written into .hydra/ and run_identity.json).
    primary: the launcher and axis a primary config of the user's picks (_primary_choices)."""
    launchers = _launchers(overrides, primary)
    problems = []
    for arg in overrides:
        key, _, value = arg.partition("=")
        name = override_key(key)
        if name.startswith("hydra.") and (problem := _hydra_key_problem(name, value)):
            problems.append(problem)  # Hydra's answer: "+hydra.run.dri=", which runs into another dir
            continue
        if name == "hydra" or name.startswith("hydra.") or "/" in name or "@" in name:
            continue  # Hydra's own settings and config groups: Hydra checks them
        if key.startswith("~"):
            if (problem := _deletion_problem(name, launchers)):
                problems.append(problem)
            continue
        parsed = _values(arg)
        if (problem := key_problem(name, value, launchers) or type_problem(name, parsed, launchers)
                or env_text_problem(name, value, parsed)):
            problems.append(problem)
        if has_password(value):
            problems.append(f"{name}= holds a password, and zlbench writes its command line into the run dir "
                            "(.hydra/, run_identity.json) and the results store. Fix: give the URL without it "
                            "and keep the password in ~/.pgpass or a libpq service file, or export "
                            "ZLBENCH_STORE_URL=<the URL> (read at run time, written nowhere).")
    problems += _missing_entries(overrides, launchers)
    # The axis: a config group (ab=<name>) or one named on the command line (ab.name=x ab.var=X).
    axis = next((a.split("=", 1)[1] for a in reversed(overrides) if override_key(a) in ("ab", "ab.name")),
                primary.get("ab", "none"))
    ab_keys = sorted(k for k in cli_keys if k.startswith("ab.") and k != "ab.name")
    if ab_keys and axis == "none":
        which = ", ".join(f"{k}=" for k in ab_keys) + (" is an A/B setting" if len(ab_keys) == 1 else " are A/B settings")
        problems.append(f"{which}, but no A/B axis is chosen (ab=none): a plain run would ignore "
                        f"{'it' if len(ab_keys) == 1 else 'them'}. Fix: add ab=<axis> (python -m zlbench --help "
                        "lists them; ab=env ab.var=NAME for any variable), or drop it (a plain run's processes: "
                        "timer.processes=N).")
    plain_keys = sorted(k for k in cli_keys if k in PLAIN_RUN_KEYS)
    # (a resume repeats the run's own overrides: an A/B made before this refusal may hold them)
    if plain_keys and axis != "none" and "resume" not in cli_keys:
        which = ", ".join(f"{k}=" for k in plain_keys)
        problems.append(f"{which} {'sets' if len(plain_keys) == 1 else 'set'} a plain run's processes, but an A/B axis "
                        f"is chosen (ab={axis}): its rounds are its processes (ab.rounds, ab.min_rounds, "
                        "ab.respawn_every), so it would ignore "
                        f"{'it' if len(plain_keys) == 1 else 'them'} (and a resume would refuse the run for it). "
                        "Fix: drop it, or run without ab= for a plain run.")
    if "ab.min_rounds" in cli_keys and axis != "none" and "resume" not in cli_keys \
            and (fixed := _fixed_horizon(overrides)):
        problems.append(f"ab.min_rounds= is ignored where {fixed}, so every node runs all ab.rounds rounds (only an A/B "
                        "of both sides node by node stops a node early, once its verdict settles). Fix: drop "
                        "ab.min_rounds (ab.rounds sets the rounds).")
    if {"gpus", "devices"} <= cli_keys:
        problems.append("gpus= and devices= both select devices (gpus is the old runner's spelling of devices). "
                        "Fix: keep one, e.g. devices=[0,1].")
    if problems:
        raise UsageError("\n".join(problems))


def _fixed_horizon(overrides: Sequence[str]) -> Optional[str]:
    """Why the A/B the overrides choose runs every round (its ab.min_rounds unused), in words; None where
    it runs node by node (config/validate.py round_by_round; an ab.side pass has no verdict to settle)."""
    def given(key: str) -> List[Any]:
        arg = next((a for a in reversed(overrides) if override_key(a) == key), None)
        return _values(arg) if arg else []
    if "round" in given("ab.schedule"):
        return "ab.schedule=round (whole passes, round by round)"
    if "replay" in given("ab.tuning"):
        return "ab.tuning=replay (it runs round by round)"
    side = next((v for v in given("ab.side") if v is not None), None)
    return f"ab.side={side} (one side's pass: no verdict of its own)" if side is not None else None


# Settings only a plain run reads (its processes, and the more processes where they disagree).
PLAIN_RUN_KEYS = ("timer.processes", "timer.max_processes", "timer.target_width", "timer.more_budget",
                  "timer.share_tuning")


# `~` at the start of a value (or of a list element): Hydra's lexer cannot read it, and the shell
# does not expand it after `=` (corpus.root=~/FlagGems).
_HOME = re.compile(r"(?P<lead>^|[\[,])(?P<path>~[\w.-]*(?:/[^,\]]*)?)(?=[,\]]|$)")
_PLAIN = re.compile(r"^[\w./@+:-]+$")  # what Hydra reads unquoted in a path


def expand_home(arg: str) -> str:
    key, sep, value = arg.partition("=")
    if not sep or "~" not in value:
        return arg

    def expanded(m: "re.Match[str]") -> str:
        path = os.path.expanduser(m.group("path"))
        return m.group("lead") + (path if _PLAIN.match(path) else _quote(path))

    return f"{key}={_HOME.sub(expanded, value)}"


def _env_overrides(environ: Mapping[str, str],
                   overrides: Sequence[str]) -> Tuple[Dict[str, str], List[str], Dict[str, str]]:
    """(env vars used, the overrides they make, env vars ignored -> why)."""
    used: Dict[str, str] = {}
    made: List[str] = []
    ignored: Dict[str, str] = {}
    for name, (keys, build) in ENV_MIGRATION.items():
        if name not in environ:
            continue
        value = environ[name]
        used[name] = value
        given = [a for a in overrides if override_key(a.replace("backend.name=", "backend=", 1)) in keys]
        if given:  # the command line wins
            ignored[name] = (f"environment variable {name}={value!r} is ignored: the command line gives "
                             f"{given[-1]}. Fix: unset {name}, or drop {override_key(given[-1])}=.")
            continue
        if keys == SELECTION and any(o.startswith("test_node=") for o in made):
            # TEST_NODE alone wins; OP with OP_FILE is one selection (the op's tests in that file)
            ignored[name] = (f"environment variable {name}={value!r} is ignored: TEST_NODE={environ['TEST_NODE']!r} "
                             f"selects one test. Fix: unset {name} or TEST_NODE.")
            continue
        made.append(build(name, value))
    return used, made, ignored


# How an error about a selection names it (planning/corpus.py), and so which selection it is about.
_SAID_AS = {"ops": "op '", "op_file": "op_file '", "test_node": "test_node"}


def env_origin(message: str, provenance: Mapping[str, Any]) -> str:
    """Where an error is about a setting an environment variable made (OP=nosuch: "op 'nosuch'
    matches no test ... Fix: ops=[...]", which the user never typed), the words that say so."""
    for name, value in (provenance.get("env") or {}).items():
        if name not in ENV_MIGRATION:
            continue
        build = ENV_MIGRATION[name][1]
        try:
            made = build(name, value)
        except UsageError:
            continue
        if made in (provenance.get("env_overrides") or []):
            key = override_key(made)
            if _SAID_AS.get(key, f"{key}=") in message:
                return (f" ({made} came from the environment variable {name}={value!r}: fix it there, or unset "
                        f"{name} and pass {key}=.)")
    return ""


def _free_entries_added(overrides: Sequence[str]) -> List[str]:
    """`corpus.env.FOO=1` (the README's spelling) as `++corpus.env.FOO=1`: an entry of a free dict
    (corpus.env, ab.fixed, ...) is added where no config set it and replaced where one did, where
    Hydra wants `+` for the one and refuses it for the other."""
    launchers = _launchers(overrides)
    return [f"++{a}" if not a.startswith(("+", "~")) and "=" in a and _free_dict(override_key(a), launchers)
            else a for a in overrides]


def _check_grammar(overrides: Sequence[str], multirun: bool = False) -> None:
    """Each override as Hydra's grammar reads it: Hydra's own complaint is ANTLR's ("no viable
    alternative at input '[[exp]'") with a link, and no fix."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in overrides:
        try:
            (parsed,) = parser.parse_overrides([arg])
            if parsed.is_sweep_override() and not multirun:  # Hydra: "Ambiguous value ... add --multirun"
                key, value = override_key(arg), arg.partition("=")[2]
                raise UsageError(f"{scrub(arg)!r} lists several values (a comma makes a sweep). Fix: quote it as "
                                 f"one value ({key}='{scrub(value)}'), or sweep them with -m.")
        except OverrideParseException as e:
            why = "; ".join(line for line in str(e).splitlines()
                            if line and not line.startswith(("See ", "Error parsing")))
            key, value = override_key(arg) or "key", arg.partition("=")[2]
            listed = f"a list as '{key}=[a,b]' (brackets balanced, no empty element), " if value.startswith("[") else ""
            raise UsageError(
                f"cannot read the override {scrub(arg)!r} ({scrub(why)}). Fix: {listed}the override quoted for "
                f"the shell, a value with spaces, commas, brackets or $&#?! quoted inside it too ({key}='\"...\"'); "
                "Hydra's grammar: https://hydra.cc/docs/advanced/override_grammar/basic/.")


def normalize_argv(argv: Sequence[str], environ: Mapping[str, str]) -> Tuple[List[str], dict]:
    """Returns (argv for Hydra, provenance). Raises UsageError on an unknown backend or key, a bad env
    value, a password on the command line. provenance["env_ignored"]: env vars the command line
    overrode (name -> a line saying so)."""
    if any(a in ("-sc", "--shell-completion") for a in argv):
        # Hydra's shell completion takes its own words (install=bash, query=...): not overrides.
        return list(argv), {"env": {}, "env_overrides": [], "cli_overrides": [], "env_ignored": {}, "notes": []}
    is_flag = lambda a: a.startswith("-") or ("=" not in a and not a.startswith("~"))  # noqa: E731 (~key deletes)
    flags = [a for a in argv if is_flag(a)]
    overrides = [expand_home(_normalize_backend(a)) for a in argv if not is_flag(a)]
    overrides = _free_entries_added(overrides)
    cli_keys = {override_key(a) for a in overrides}
    if (problems := _group_option_problems(overrides, flags)):
        raise UsageError("\n".join(problems))
    _check_overrides(overrides, cli_keys, _primary_choices(flags))  # first: a password is refused before any message shows it
    _check_grammar(overrides, multirun=any(f in ("-m", "--multirun") for f in flags))
    env_used, env_overrides, ignored = _env_overrides(environ, overrides)
    resume = _given(overrides, "resume")
    resume_path = os.path.abspath(os.path.expanduser(resume.strip("\"'"))) if resume else None
    if resume_path and not os.path.exists(resume_path):  # said before Hydra makes it its run dir
        raise UsageError(f"resume={resume}: {resume_path} does not exist. Fix: pass the run dir printed when that "
                         "run started, or drop resume= for a new run.")
    if resume and os.path.isfile(os.path.expanduser(resume)):  # not said as hydra.run.dir= below
        raise UsageError(f"resume={resume} is a file, not a run dir. Fix: resume={os.path.dirname(resume) or '.'}")
    notes = []
    other = _given(overrides, "hydra.run.dir", unquoted=True) if resume_path else None
    if other and os.path.abspath(os.path.expanduser(other)) != resume_path:
        # It made that dir to hold the resume's zlbench.log alone, and the run's own log missed its lines.
        notes.append(f"hydra.run.dir={other} is not used: resume={resume} measures the rest into {resume_path} "
                     "itself, and writes its log there. Fix: drop hydra.run.dir=, or drop resume= for a new run "
                     f"into {other}.")
        overrides = [o for o in overrides if override_key(o) != "hydra.run.dir"]
        cli_keys.discard("hydra.run.dir")
    if resume and "hydra.run.dir" not in cli_keys:
        # A resumed run writes into its own run dir (Hydra's files and zlbench.log too), not a new one.
        overrides.append(f"hydra.run.dir={resume}")
    run_dir, sweep_dir = (_given(overrides, key, unquoted=True) for key in ("hydra.run.dir", "hydra.sweep.dir"))
    dry = any(override_key(a) == "dry_run" and a.split("=", 1)[1].strip().lower() in TRUE for a in overrides)
    if "hydra.output_subdir" not in cli_keys and (
            dry or resume or (run_dir and _holds_a_run(Path(run_dir).expanduser()))
            or (sweep_dir and any(map(_holds_a_run, Path(sweep_dir).expanduser().glob("*"))))):
        # No Hydra files from a dry run (it writes nothing), a resume, or a run into a run dir (or a
        # sweep into a sweep dir) that holds a run (which zlbench may refuse): .hydra/ keeps what
        # the run was made with, and an accepted resume lists its own overrides in
        # run_identity.json (`resumed`).
        overrides.append("hydra.output_subdir=null")
    provenance = {"env": env_used, "env_overrides": env_overrides, "cli_overrides": list(overrides),
                  "env_ignored": ignored, "notes": notes}
    # Env-derived overrides first: a later override of the same key (from the CLI) would win anyway.
    return flags + env_overrides + overrides, provenance
