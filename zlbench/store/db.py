"""Opening a store: URL spelling, connection errors, schema version and migrations.

Every failure a user can meet here (server down, wrong password, file locked, a store written by
a newer zlbench, a database that is not a zlbench store) becomes one UsageError naming the problem
and the fix."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from filelock import FileLock
from sqlalchemy import create_engine, event, inspect
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, OperationalError, SQLAlchemyError

from zlbench.errors import UsageError
from zlbench.store.schema import SCHEMA_HEAD

from zlbench.store import DB_FILE, OFF  # noqa: E402 (one list of the words that turn the store off)
# How long a writer waits for another one's lock before giving up (SQLite busy timeout,
# PostgreSQL lock_timeout). Long enough for a concurrent 10,000-row write to finish.
# ZLBENCH_STORE_LOCK_TIMEOUT_S overrides it.
LOCK_TIMEOUT_S = 30.0


def default_lock_timeout_s() -> float:
    return float(os.environ.get("ZLBENCH_STORE_LOCK_TIMEOUT_S") or LOCK_TIMEOUT_S)


def is_off(url: Optional[str]) -> bool:
    return url is None or str(url).strip().lower() in OFF


def normalize_url(url: str) -> str:
    """A plain path means an SQLite file; postgresql:// picks whichever psycopg is installed
    (SQLAlchemy's default is psycopg2, the `store` extra installs psycopg 3)."""
    text = str(url).strip()
    if "://" not in text:
        return "sqlite:///" + str(Path(text).expanduser().resolve())
    if text.startswith("postgresql://") or text.startswith("postgres://"):
        rest = text.split("://", 1)[1]
        if importlib.util.find_spec("psycopg") is not None:
            return "postgresql+psycopg://" + rest
        return "postgresql://" + rest
    return text


def sqlite_file(url: str) -> Optional[Path]:
    """The database file of an SQLite URL (sqlite:///PATH); None for another database, an
    in-memory one, or a URL that does not parse."""
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return None
    db = parsed.database
    return Path(db) if parsed.get_backend_name() == "sqlite" and db and db != ":memory:" else None


def display_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"://([^:/@]*):[^@/]*@", r"://\1:***@", url)


def _engine(url: str, lock_timeout_s: float, wal: bool = True) -> Engine:
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise UsageError(f"store URL {display_url(url)!r} is not a database URL. Fix: store.url=sqlite:///PATH/"
                         "zlbench.db, postgresql://USER:PASSWORD@HOST/DB, or none to turn the store off.")
    backend = parsed.get_backend_name()
    connect_args = {}
    if backend == "sqlite":
        db = parsed.database
        if db and db != ":memory:" and not Path(db).parent.is_dir():
            raise UsageError(f"the results store {url} cannot be created: folder {Path(db).parent} does not "
                             "exist. Fix: create it, or point store.url elsewhere (store.url=none: off).")
        connect_args["timeout"] = lock_timeout_s
    elif backend == "postgresql":
        connect_args["connect_timeout"] = 10
        connect_args["options"] = f"-c lock_timeout={int(lock_timeout_s * 1000)}"
    try:
        engine = create_engine(parsed, connect_args=connect_args)
    except NoSuchModuleError as e:
        raise UsageError(f"store URL {display_url(url)}: SQLAlchemy has no dialect for it ({e}). Fix: use "
                         "sqlite:// or postgresql:// (pip install 'zlbench[store]' for PostgreSQL).")
    except ImportError as e:
        raise UsageError(f"store URL {display_url(url)} needs a database driver that is not installed ({e}). "
                         "Fix: install the driver named there (for PostgreSQL: pip install 'zlbench[store]').")
    if backend == "sqlite" and wal:  # a writer's: the mode stays in the file (a reader changes nothing)
        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _record):  # noqa: ANN001
            # WAL: readers (history, the site) never block the writer of a finishing run.
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.close()
    return engine


def explain(error: SQLAlchemyError, url: str, doing: str) -> UsageError:
    """One message for a database error: what failed, and what to do about it."""
    text = str(getattr(error, "orig", None) or error).strip().splitlines()[0][:300]
    shown = display_url(url)
    if "locked" in text.lower() or "lock timeout" in text.lower() or "lock_timeout" in text.lower():
        return UsageError(f"{doing}: the results store {shown} is locked by another writer ({text}). Fix: wait "
                          "for the other zlbench to finish and retry; with many machines writing at once, use "
                          "a PostgreSQL server (store.url=postgresql://...) instead of one SQLite file.")
    sqlite = make_url(url).get_backend_name() == "sqlite"
    if sqlite and "file is not a database" in text:  # SQLite's words for a file that is something else
        return UsageError(f"{doing}: {shown} is no SQLite database ({text}), so no zlbench store. Fix: point "
                          "store.url (or --url) at another file, or move that file away; a store can always be "
                          "rebuilt from the run dirs with `python -m zlbench history import RUN_DIR... --url NEW_URL`.")
    if sqlite and "database disk image is malformed" in text:
        return UsageError(f"{doing}: the results store {shown} is damaged ({text}). Fix: move that file away and "
                          "rebuild the store from the run dirs (`python -m zlbench history import RUN_DIR... --url "
                          "URL`); `sqlite3 FILE .recover` may save what it holds.")
    if sqlite and ("unable to open database file" in text or "readonly database" in text):
        return _sqlite_cannot_open(sqlite_file(url), text, doing, shown)
    if isinstance(error, OperationalError) or (isinstance(error, DBAPIError) and error.connection_invalidated):
        return UsageError(f"{doing}: cannot reach the results store {shown} ({text}). Fix: start the database "
                          "server or correct store.url (host, port, user, password, database), or "
                          "store.url=none to turn the store off.")
    return UsageError(f"{doing}: the results store {shown} failed ({type(error).__name__}: {text}). Fix: check "
                      "that store.url names a zlbench store; a store can always be rebuilt from the run dirs "
                      "with `python -m zlbench history import RUN_DIR... --url NEW_URL`.")


ELSEWHERE = "or point store.url (or --url) at a file you can write; store.url=none turns the store off"


def _sqlite_cannot_open(db: Optional[Path], text: str, doing: str, shown: str) -> UsageError:
    """SQLite's "unable to open database file" and "attempt to write a readonly database": no server
    to start, a path to correct. Which one is read off the file system: the path is a folder, its
    folder is missing, the file (or its -wal/-shm companions) or its folder cannot be written."""
    if db is None:  # not a file (sqlite:// in memory): nothing on disk to name
        return UsageError(f"{doing}: SQLite cannot open the results store {shown} ({text}). Fix: "
                          f"store.url=sqlite:///PATH/zlbench.db, {ELSEWHERE}.")
    db = db.expanduser().absolute()
    folder = db.parent
    if db.is_dir():
        return UsageError(f"{doing}: the results store {db} is a folder, not an SQLite file ({text}). Fix: name "
                          f"the file in it (sqlite:///{db / DB_FILE}), or give the folder as a plain path "
                          f"(store.url={db}, likewise --url and $ZLBENCH_STORE_URL: the {DB_FILE} in it).")
    if not folder.is_dir():
        missing = next((p for p in reversed(db.parents) if not p.is_dir()), folder)
        what = "is a file, not a folder" if missing.exists() else "does not exist"
        return UsageError(f"{doing}: the results store {db} cannot be opened: {missing} {what} ({text}). Fix: "
                          + (f"mkdir -p {folder}, " if not missing.exists() else "") + f"{ELSEWHERE}.")
    for f in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        if f.exists() and not os.access(f, os.R_OK | os.W_OK):
            how = "is read-only for this user" if os.access(f, os.R_OK) else "cannot be read by this user"
            return UsageError(f"{doing}: the results store file {f} {how} ({text}). Fix: chmod u+rw {f}, "
                              f"{ELSEWHERE}.")
    if not os.access(folder, os.W_OK | os.X_OK):
        return UsageError(f"{doing}: the results store's folder {folder} is read-only for this user ({text}): "
                          f"SQLite writes {db.name} and its -wal and -shm files there. Fix: chmod u+wx {folder}, "
                          f"{ELSEWHERE}.")
    if "readonly" in text:  # nothing above says why: a read-only file system, a store opened read-only
        return UsageError(f"{doing}: SQLite can only read the results store {db} ({text}): the file, its -wal "
                          f"and -shm files or the file system they are on cannot be written. Fix: chmod u+rw {db} "
                          f"and u+wx {folder} (a read-only mount: another path), {ELSEWHERE}.")
    return UsageError(f"{doing}: SQLite cannot open the results store {db} ({text}). Fix: check that it is a "
                      f"file you can read and write in a folder you can write, {ELSEWHERE}.")


def _alembic_config(connection: Connection):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", "zlbench.store:migrations")
    cfg.attributes["connection"] = connection
    return cfg


def known_revisions() -> list:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", "zlbench.store:migrations")
    return [s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions()]


class OlderSchema(UsageError):
    """A store a reader only looked at (Store(..., upgrade=False)) needs its schema upgraded first."""


class NoStore(UsageError):
    """A reader (Store(..., create=False)) was pointed at a file or database that holds no store."""


def no_store(where: str, what: str) -> NoStore:
    return NoStore(f"no results store at {where}: {what}; reading makes none. Fix: pass --url (or set "
                   "ZLBENCH_STORE_URL) to an existing store, or build one with `python -m zlbench history "
                   "import RUN_DIR...`.")


def migrate(connection: Connection, url: str, target: str = "head", upgrade: bool = True,
            create: bool = True) -> None:
    """Bring the store to `target` (head by default): creates a new store, upgrades an old one,
    refuses a newer or foreign one with the way out. upgrade=False: an older store is left as it is
    (OlderSchema), for a reader that only looks whether the store is the one it wants. create=False:
    a database without a store is refused (NoStore), for a reader."""
    from alembic import command
    from alembic.runtime.migration import MigrationContext

    current = MigrationContext.configure(connection).get_current_revision()
    shown = display_url(url)
    if current is None:
        tables = inspect(connection).get_table_names()
        if "runs" in tables:
            raise UsageError(f"{shown} has a `runs` table but no zlbench schema version (alembic_version): it "
                             "is not a zlbench store. Fix: point store.url at another database or file.")
        if not create:
            raise no_store(shown, f"its {len(tables)} table(s) are another program's" if tables else
                           "the database is empty")
    elif current not in known_revisions():
        raise UsageError(
            f"the results store {shown} has schema revision {current}, newer than this zlbench knows "
            f"(up to {SCHEMA_HEAD}): a newer zlbench wrote it. Fix: upgrade zlbench on this machine "
            "(pip install -U zlbench; its migrations open any older store), or write to another store and "
            "rebuild it from the run dirs: `python -m zlbench history import RUN_DIR... --url NEW_URL`.")
    if current == target or (target == "head" and current == SCHEMA_HEAD):
        return
    if not upgrade:
        raise OlderSchema(f"the results store {shown} has schema {current or '(none)'}, older than this zlbench's "
                          f"{SCHEMA_HEAD}; a look does not upgrade it. Fix: `python -m zlbench history --url {shown} "
                          "list` (or any run recording into it) upgrades it.")
    if current is not None and target == "head":
        print(f"[zlbench] store {shown}: upgrading schema {current} -> {SCHEMA_HEAD}", file=sys.stderr)
    command.upgrade(_alembic_config(connection), target)


MIGRATION_LOCK_ID = 0x7A6C6265  # "zlbe": the advisory lock that serializes creating/upgrading a store


@contextmanager
def _creation_lock(url: str) -> Iterator[None]:
    """SQLite: an exclusive lock (filelock) on a sibling file (zlbench.db.lock) while the schema is
    checked, created or upgraded. SQLite runs DDL outside transactions here, so two runs finishing at once
    could each create half the tables. Never on the database file itself: closing any descriptor
    of it drops the POSIX locks SQLite holds in this process, and the database gets corrupted."""
    parsed = make_url(url)
    db = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if not db or db == ":memory:":
        yield
        return
    with FileLock(db + ".lock"):
        yield


class Store:
    """An open store: an engine whose schema is at head."""

    def __init__(self, url: str, lock_timeout_s: Optional[float] = None, target: str = "head",
                 create: bool = True, upgrade: bool = True):
        if is_off(url):
            raise UsageError("no store URL given. Fix: --url sqlite:///PATH/zlbench.db or postgresql://...")
        self.url = normalize_url(url)
        if not create:  # a reader never makes a store: at a mistyped path, in an empty file, in another database
            db = sqlite_file(self.url)
            if db is not None and not db.is_file():
                raise no_store(str(db), "no such file")
            if db is not None and db.stat().st_size == 0:
                raise no_store(str(db), "the file is empty")
        self.engine = _engine(self.url, lock_timeout_s if lock_timeout_s is not None else default_lock_timeout_s(),
                              wal=create)
        try:
            with _creation_lock(self.url), self.engine.begin() as conn:
                if conn.dialect.name == "postgresql":
                    # Machines opening a new shared store at once: one creates it, the others wait.
                    conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
                migrate(conn, self.url, target, upgrade, create)
        except SQLAlchemyError as e:
            self.engine.dispose()
            raise explain(e, self.url, "opening the store") from None
        except OSError as e:  # the SQLite file itself: read-only, no permission, a full disk
            self.engine.dispose()
            raise UsageError(f"cannot open the results store {self.shown}: {e}. Fix: make the file and its folder "
                             "writable, or point store.url elsewhere (store.url=none: off).") from None
        except BaseException:
            self.engine.dispose()
            raise

    @property
    def shown(self) -> str:
        return display_url(self.url)

    @contextmanager
    def begin(self, doing: str) -> Iterator[Connection]:
        """A transaction; database errors become a UsageError saying what was being done."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as e:
            raise explain(e, self.url, doing) from None

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
