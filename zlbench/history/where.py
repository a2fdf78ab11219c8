"""Which results store a history command reads, found the way runs write it.

A run writes its store beside its run dir (zlbench.store.default_url): zl_runs/zlbench.db for the
default run dirs (zl_runs/<date>/<time>, sweeps under zl_runs/multirun/), else zlbench.db in the run
dir's parent (hydra.run.dir=runs/x -> runs/zlbench.db; hydra.sweep.dir=sweep -> sweep/zlbench.db).
So a history command reads, in this order:

1. --url (a database URL, an SQLite file, a folder holding zlbench.db, or a run dir: its store);
2. $ZLBENCH_STORE_URL, read the same way (zlbench.store.resolve_url, which reads a run's store.url too);
3. ./zl_runs/zlbench.db, where runs launched from this folder write by default;
4. the one zlbench.db up to SEARCH_DEPTH folders below this folder (several: refused, naming them).

Whatever it finds without being told is said on stderr (and what else it saw); when it finds
nothing, the error lists every place it looked."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional, Tuple

from zlbench.errors import UsageError
from zlbench.store import DB_FILE, RUNS_ROOT, resolve_url

ENV_URL = "ZLBENCH_STORE_URL"
SEARCH_DEPTH = 3  # hydra.run.dir=a/b/c/run writes a/b/c/zlbench.db: three folders down


def _sqlite(path: Path) -> str:
    return "sqlite:///" + str(path.resolve())


def stores_below(folder: Path, depth: int = SEARCH_DEPTH) -> List[Path]:
    """Every zlbench.db in `folder` and up to `depth` folders below it (hidden folders skipped)."""
    found: List[Path] = []
    for d in range(depth + 1):
        found += [p for p in folder.glob("/".join(["*"] * d + [DB_FILE])) if p.is_file()]
    return sorted(found)


def find_store(arg: Optional[str], cwd: Optional[Path] = None, create: bool = False) -> Tuple[str, Optional[str]]:
    """(store URL, a note saying where it was found, None when --url or the environment named it).
    create: the store may be new (`import`): a folder given as --url gets one."""
    if arg:
        return resolve_url(arg, create, "--url"), None
    if os.environ.get(ENV_URL):  # read as --url is (a folder: its zlbench.db), as a run reads it
        return resolve_url(os.environ[ENV_URL], create, f"${ENV_URL}"), None
    cwd = (cwd or Path.cwd()).resolve()
    default = cwd / RUNS_ROOT / DB_FILE
    found = stores_below(cwd)
    others = [p for p in found if p != default]
    shown = ", ".join(str(p.relative_to(cwd)) for p in others[:8]) + (" ..." if len(others) > 8 else "")
    if default.is_file():
        return _sqlite(default), (f"store {default}" + (f"; other stores below {cwd}: {shown} (--url reads one)"
                                                         if others else ""))
    if len(found) == 1:
        return _sqlite(found[0]), (f"store {found[0]} (none at ./{RUNS_ROOT}/{DB_FILE}; found below {cwd}, where "
                                   "runs write it beside their run dirs; --url reads another)")
    if found:
        raise UsageError(f"{len(found)} results stores below {cwd} and none at ./{RUNS_ROOT}/{DB_FILE}: {shown}. Fix: "
                         f"choose one with --url PATH (or ${ENV_URL}).")
    raise UsageError(f"no results store found. Looked at: --url (not given), ${ENV_URL} (not set), {default}, and "
                     f"{DB_FILE} up to {SEARCH_DEPTH} folders below {cwd}. A run writes its store beside its run dir "
                     f"(hydra.run.dir=runs/x: runs/{DB_FILE}). Fix: run the command where you ran zlbench, pass --url "
                     "PATH (the store, its folder, or a run dir), or build a store with "
                     "`python -m zlbench history import RUN_DIR...`.")
