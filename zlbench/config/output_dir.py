"""Where Hydra will write, known before Hydra runs: Hydra creates the run (or sweep) dir and writes
.hydra/ and zlbench.log into it before zlbench sees the config, and answers a dir it cannot write
with a traceback. So the dir is worked out from the command line (or conf/config.yaml), checked
first, and the folders a refused run made for it are removed again."""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from zlbench.config.schema import conf_dir
from zlbench.errors import UsageError

_NOW = re.compile(r"\$\{now:([^}]*)\}")


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
