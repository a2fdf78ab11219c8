"""Where Hydra will write, known before Hydra runs: Hydra creates the run (or sweep) dir and writes
.hydra/ and zlbench.log into it before zlbench sees the config, and answers a dir it cannot write
with a traceback. So the dir is worked out from the command line (or conf/config.yaml), checked
first, and the folders a refused run made for it are removed again."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from zlbench.config.schema import conf_dir
from zlbench.errors import UsageError

_NOW = re.compile(r"\$\{now:([^}]*)\}")
# What the planned dir (and, for a sweep dir, each folder in it) held before Hydra wrote into it:
# a refused or dry run removes only what was made for it, never a folder of the user's own.
_held_before: Dict[Path, FrozenSet[str]] = {}


def _default(key: str) -> str:
    import yaml

    hydra = yaml.safe_load((conf_dir() / "config.yaml").read_text(encoding="utf-8"))["hydra"]
    return str(hydra["sweep" if key == "hydra.sweep.dir" else "run"]["dir"])


def planned(argv: Sequence[str]) -> Tuple[str, str, Optional[Path]]:
    """(key, value as given, the dir it names now) for the run dir, or the sweep dir of a multirun.
    The path is None where the value holds an interpolation other than ${now:...}."""
    key = "hydra.sweep.dir" if any(a in ("-m", "--multirun") for a in argv) else "hydra.run.dir"
    given = [a.split("=", 1)[1] for a in argv if a.split("=", 1)[0].lstrip("+") == key and "=" in a]
    value = given[-1].strip("'\"") if given else _default(key)
    text = _NOW.sub(lambda m: time.strftime(m.group(1)), value)
    return key, value, None if "${" in text else Path(os.path.abspath(os.path.expanduser(text)))


def check_writable(key: str, value: str, path: Path) -> None:
    """The dir, or the nearest folder above it that exists, takes a file."""
    target = path
    while not target.exists() and target != target.parent:
        target = target.parent
    verb = "write into" if target == path else "create"
    if not target.is_dir():
        raise UsageError(f"cannot {verb} {key}={value}: {target} is a file, not a folder. "
                         f"Fix: {key}=<a writable folder>.")
    try:
        fd, probe = tempfile.mkstemp(dir=target, prefix=".zlbench-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"cannot {verb} {key}={value}: {e.strerror or e} ({target}). "
                         f"Fix: {key}=<a writable folder>.")


def missing_folders(path: Path) -> List[Path]:
    """The dir and the folders above it that do not exist yet (Hydra will create them)."""
    return [p for p in (path, *path.parents) if not p.exists()]


def remove_made_folders(run_dir: Path, made: Sequence[Path]) -> None:
    """After a refused run: the empty folders above its run dir that were made for it
    (zl_runs/<date>/), deepest first. A folder that existed before, or holds anything, stays."""
    made_set = {Path(os.path.abspath(p)) for p in made}
    for folder in Path(os.path.abspath(run_dir)).parents:
        if folder not in made_set:
            return
        try:
            folder.rmdir()  # only an empty one
        except OSError:
            return


def remember_contents(path: Path) -> None:
    """Before Hydra writes: the names the dir (and each folder in it: a sweep's job dirs) holds now."""
    _held_before.clear()
    for folder in (path, *(path.iterdir() if path.is_dir() else ())):
        if folder.is_dir():
            _held_before[Path(os.path.abspath(folder))] = frozenset(os.listdir(folder))


def remove_refused_run_dir(run_dir: Path) -> None:
    """After a usage error or a dry run, leave nothing that looks like a result: Hydra made the dir,
    its .hydra/ and the log before zlbench could check anything. A dir that held a result stays
    whole; one that existed before (a folder of FlagGems logs, an empty folder the user made) loses
    only what this run wrote into it."""
    if not run_dir.is_dir():
        return
    names = os.listdir(run_dir)
    if any(not n.startswith(".hydra") and not n.endswith(".log") for n in names):
        return
    remove_written_since(run_dir, _held_before.get(Path(os.path.abspath(run_dir))))


def remove_written_since(folder: Path, held: Optional[Iterable[str]]) -> None:
    """What was written into folder since it held the names `held` (None: it did not exist, and goes
    too once empty)."""
    for name in set(os.listdir(folder) if folder.is_dir() else ()) - set(held or ()):
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if held is None and folder.is_dir() and not os.listdir(folder):
        folder.rmdir()
