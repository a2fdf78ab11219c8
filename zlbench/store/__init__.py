"""The results store: every finished run dir (identity, statuses, rows, A/B results) in one
database behind SQLAlchemy, SQLite by default, any URL for a shared server. It only ever takes
what a run dir holds, so the run dir stays the source of truth and the store can be rebuilt
(`python -m zlbench.history import RUN_DIR...`)."""

from __future__ import annotations

import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Optional


DB_FILE = "zlbench.db"
# store.url values that turn the store off (kept here so that "off" needs no database packages).
OFF = ("", "none", "null", "off", "false", "0")
RUNS_ROOT = "zl_runs"

__all__ = ["record_run", "record_or_warn", "default_url", "resolve_url", "Store", "DB_FILE"]


def __getattr__(name: str):
    # Store (and SQLAlchemy with it) is imported when first asked for: a finished run on a machine
    # without the store's packages still gets its results (record_or_warn says what is missing).
    if name == "Store":
        from zlbench.store.db import Store

        return Store
    raise AttributeError(name)


def default_url(run_dir: Path) -> str:
    """An SQLite file beside the run dirs: `zl_runs/zlbench.db` for a run dir under a folder named
    zl_runs (zl_runs/<date>/<time>), else zlbench.db in the run dir's parent."""
    run_dir = Path(run_dir).resolve()
    # The run dir itself may be the zl_runs folder (`history import zl_runs`).
    root = next((p for p in (run_dir, *run_dir.parents) if p.name == RUNS_ROOT), run_dir.parent)
    return "sqlite:///" + str(root / DB_FILE)


def resolve_url(given: str, create: bool = False, source: str = "--url") -> str:
    """The one reading of a store named by `--url`, `$ZLBENCH_STORE_URL` or `store.url` (README: The
    store and history): a database URL (as it is), an SQLite file (its path, as it is), a folder (the
    zlbench.db in it), or a run dir (the store beside it, default_url). create: the store may be new
    (a run, a collect, `import`): any folder gets one, and a path ending in / that does not exist yet
    is a folder too. Else (a reader) a folder holding neither zlbench.db nor run_identity.json is a
    UsageError naming `source` (the option or variable it came from)."""
    text = str(given).strip()
    path = Path(text).expanduser()
    if "://" in text:
        return text
    if create and text.endswith(("/", os.sep)) and not path.is_dir():
        return "sqlite:///" + str(path.resolve() / DB_FILE)  # `--url ci/store/`: a folder meant, made by import
    if not path.is_dir():
        return text
    if (path / "run_identity.json").is_file():
        return default_url(path)
    if create or (path / DB_FILE).is_file():
        return "sqlite:///" + str(path.resolve() / DB_FILE)
    from zlbench.errors import UsageError

    named = f"{source} {given}" if source.startswith("-") else f"{source}={given}"
    raise UsageError(f"{named} is a folder without a results store ({DB_FILE}) and not a run dir. Fix: pass "
                     f"the folder that holds {DB_FILE} (runs write it beside their run dirs), the run dir itself, "
                     "or a database URL.")


def run_url(run_dir: Path, url: Optional[str]) -> Optional[str]:
    """The store a run's store.url names (None, "" or "default": the default store beside its run
    dir; else as resolve_url reads it, a folder meaning the zlbench.db in it); None where the store
    is off."""
    if url in (None, "", "default"):
        return default_url(run_dir)
    return None if str(url).strip().lower() in OFF else resolve_url(str(url), create=True, source="store.url")


def record_run(run_dir: Path, url: Optional[str]) -> None:
    """Write a finished run dir into the store at `url` (None or "none": the store is off).
    Idempotent. Raises UsageError (problem and fix) when the store cannot take it; the run dir is
    only read, never changed."""
    if url is None or str(url).strip().lower() in OFF:
        return
    from zlbench.store.db import Store
    from zlbench.store.ingest import rows_said, run_dir_record, write_record

    logging.getLogger("alembic").setLevel(logging.WARNING)  # its "Running upgrade" lines are no news

    record = run_dir_record(Path(run_dir))
    with Store(url) as store:
        written = write_record(store, record)
    print(f"[zlbench] store {store.shown}: {written.outcome} {record['run']['path']} "
          f"({rows_said(record)}){written.note}", file=sys.stderr)


def record_or_warn(run_dir: Path, url: Optional[str]) -> None:
    """record_run at the end of a run or a collect ("default": default_url). A store that cannot
    take the run costs one message and nothing else: the run dir is the source of truth, and the
    run's exit code is the run's."""
    from zlbench.errors import UsageError

    target = url
    try:
        target = run_url(run_dir, url)
        record_run(run_dir, target)
    except UsageError as e:
        why = str(e)
    except ImportError as e:  # a machine that carries zlbench without its store's packages
        why = f"{e}. Fix: pip install 'sqlalchemy>=2,<3' 'alembic>=1.12,<2', or store.url=none."
    except Exception as e:  # a bug in the store must not cost a finished run its result
        logging.getLogger("zlbench").debug("results store failed", exc_info=True)
        why = f"{type(e).__name__}: {e} (a bug in zlbench's store; the traceback is in zlbench.log)."
    else:
        return
    print(f"[zlbench] results store not written: {why} The run dir is intact; later: "
          f"`python -m zlbench history {_url_option(target)}import {shlex.quote(str(run_dir))}`.", file=sys.stderr)


def _url_option(url: Optional[str]) -> str:
    """`--url URL ` naming the store a run records into, for the import that records it later (its
    own default is the store beside the run dir, maybe not this one); nothing where the URL holds a
    password, which only the environment gives (ZLBENCH_STORE_URL: the import reads it too)."""
    from zlbench.config.secrets import has_password

    if url is None or has_password(str(url)):
        return ""
    text = str(url)
    if "://" not in text:  # a file (its folder resolved: resolve_url): as the import is run from anywhere
        text = str(Path(text).expanduser().resolve())
    elif text.startswith("sqlite:///"):
        text = text[len("sqlite:///"):]
    return f"--url {shlex.quote(text)} "
