"""The results database: one engine factory (SQLite: WAL and a busy timeout; PostgreSQL: connect,
statement and lock timeouts), the declarative base of every table, and the schema's life cycle.
Schema changes go through Alembic migrations (scalebench/migrations), applied only by the
explicit, locked `scalebench db upgrade`; everything else checks the revision and says what to run."""
from __future__ import annotations

import contextlib
import re
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.orm import DeclarativeBase

from scalebench.core import paths


class Base(DeclarativeBase):
    pass


CONNECT_TIMEOUT_S = 10  # a server that accepts no connection is given up on after this


def make_engine(url: str, *, immediate: bool = False, deadline_s: float | None = None):
    """An engine for the results database. SQLite: WAL (readers never block the writer) and a
    busy timeout (60 s, or `deadline_s`); `immediate` makes every transaction take the write lock
    at BEGIN, which the lease allocator needs to serialise its decisions. PostgreSQL: connections
    pre-pinged, a connect timeout and TCP keepalives (a server or link that died is noticed), and
    with `deadline_s` server-side statement and lock timeouts and an idle-in-transaction timeout,
    so a call the client gave up on does not keep running or holding a lock. A paused server
    enforces none of these: a caller that must not hang bounds its calls itself (leases.bounded).
    A URL whose database keeps nothing (SQLite in memory) is refused: every night would be lost."""
    if url.startswith("sqlite") and (url.split("?")[0] in ("sqlite://", "sqlite:///") or ":memory:" in url):
        raise StoreNotReady(f"results store {url}: an in-memory SQLite database keeps nothing; set "
                            "SCALEBENCH_STORE_URL to a file (sqlite:////path/to/results.db) or a postgresql:// URL")
    if not url.startswith("sqlite"):
        args: dict[str, int | str] = {}
        if url.startswith("postgresql"):
            args = {"connect_timeout": CONNECT_TIMEOUT_S, "keepalives": 1, "keepalives_idle": 30,
                    "keepalives_interval": 10, "keepalives_count": 3}
            if deadline_s:
                ms = int(deadline_s * 1000)
                args["options"] = (f"-c statement_timeout={ms} -c lock_timeout={ms} "
                                   f"-c idle_in_transaction_session_timeout={2 * ms}")
        return create_engine(url, pool_pre_ping=True, connect_args=args)
    busy_s = deadline_s or 60
    engine = create_engine(url, connect_args={"timeout": busy_s, **({"isolation_level": None} if immediate else {})})

    @event.listens_for(engine, "connect")
    def _wal(conn, _):
        # WAL is kept in the file: switched on for our store only (one with its schema table), so
        # opening a file that is not a scalebench store, or garbage, writes nothing to it
        if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal" and conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'").fetchone():
            conn.execute("PRAGMA journal_mode=WAL")

    if immediate:
        @event.listens_for(engine, "begin")
        def _begin_immediate(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
    return engine


class StoreUnavailable(RuntimeError):
    """The results database stayed unreachable (stopped, locked) longer than a writer waits."""


OUTAGE_WAIT_S = 180.0  # a record step outlasts a database restart or a long lock, then fails with the reason


def outlasting_outages(fn, *, what: str, within_s: float = OUTAGE_WAIT_S, pause_s: float = 3.0, log=print):
    """fn(), called again while the database refuses connections or stays locked, up to within_s.
    fn must be idempotent (the record step is: an attempt is one row, kept once written)."""
    import time

    from sqlalchemy.exc import InterfaceError, OperationalError

    began = time.monotonic()
    while True:
        try:
            return fn()
        except (OperationalError, InterfaceError) as exc:
            waited = time.monotonic() - began
            reason = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
            if waited >= within_s:
                raise StoreUnavailable(f"{what}: the results database was unavailable for {waited:.0f} s "
                                       f"(last error: {reason})") from None
            log(f"{what}: results database unavailable ({reason}); trying again in {pause_s:.0f} s "
                f"({waited:.0f} of {within_s:.0f} s waited)")
            time.sleep(pause_s)


MIGRATIONS = Path(__file__).parent / "migrations"
# the newest migration: versions/NNNN_*.py, numbered in order (a test keeps it equal to Alembic's head)
HEAD_REVISION = max(p.name[:4] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


class StoreNotReady(RuntimeError):
    """The results database is missing or at an older schema: `scalebench db upgrade` fixes it."""


def store_error(exc: BaseException) -> str | None:
    """One line for an error that came from opening or using the results store (which store, why,
    what to do), or None when it did not. The store's URL is never printed with its password."""
    import sqlalchemy.exc as sa

    try:
        url = shown_url(paths.store_url())
    except Exception:  # the URL itself is what is wrong
        url = "(SCALEBENCH_STORE_URL)"
    if isinstance(exc, ModuleNotFoundError) and exc.name in ("psycopg", "psycopg2", "pg8000", "asyncpg"):
        return (f"results store {url}: its database driver {exc.name!r} is not installed; install it "
                f"(pip install {'psycopg[binary]' if exc.name == 'psycopg' else exc.name}) or use the "
                "postgresql+psycopg2:// driver the project installs")
    if isinstance(exc, sa.NoSuchModuleError):
        return f"results store {url}: {exc}; set SCALEBENCH_STORE_URL to a sqlite:/// or postgresql:// URL"
    if isinstance(exc, sa.ArgumentError):
        return f"results store {url}: not a database URL ({exc}); set SCALEBENCH_STORE_URL"
    if not isinstance(exc, sa.DBAPIError):
        return None
    why = str(getattr(exc, "orig", exc)).strip().splitlines()[0][:200]
    low = why.lower()
    if "file is not a database" in low or "file is encrypted" in low:
        return (f"results store {url}: the file is not a SQLite database ({why}); restore it from a backup "
                "(scalebench db restore FILE)")
    if "readonly" in low or "read-only" in low:
        return f"results store {url}: read-only ({why}); give this user write access to the file and its folder"
    if "locked" in low:
        return f"results store {url}: locked by another process ({why}); try again when it finishes"
    missing = re.search(r'(database|role|schema) "([^"]{1,100})" does not exist', why)
    if missing:
        kind, name = missing.groups()
        fix = {"database": f"create it (createdb {name}, or the stack's init) and run `scalebench db upgrade`",
               "role": "create the role, or name an existing user in SCALEBENCH_STORE_URL",
               "schema": f"create the schema (CREATE SCHEMA {name}) and run `scalebench db upgrade`"}[kind]
        return f"results store {url}: the {kind} {name} does not exist; {fix}"
    if "no such table" in low or "does not exist" in low:
        return f"results store {url}: no schema ({why}); run `scalebench db upgrade`"
    if "unable to open" in low:
        return f"results store {url}: cannot open the file ({why}); check that its folder exists and is writable"
    return f"results store {url}: {type(getattr(exc, 'orig', exc)).__name__}: {why}; check the database and SCALEBENCH_STORE_URL"


def shown_url(url: str) -> str:
    """A database URL as it may be printed: the password masked (***), the user, host and
    database kept. The one way a URL reaches a message or a log."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # not a URL SQLAlchemy reads: mask whatever stands between ':' and '@'
        return re.sub(r"(//[^/:@]*:)[^@/]*@", r"\1***@", url)


def schema_revision(engine) -> str | None:
    """The Alembic revision the database is at, or None when it has no schema yet (the one read
    of it: the upgrade, the schema check and a backup's check all take it)."""
    from sqlalchemy import inspect, text

    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def check_schema(engine, url: str) -> None:
    """Refuse to work on a database that `scalebench db upgrade` has not brought to this version
    (a SQLite file that does not exist yet is not created here: a new checkout gets one line)."""
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).exists():
        raise StoreNotReady(f"results store {url.removeprefix('sqlite:///')} does not exist yet: run `scalebench db "
                            "upgrade` (make demo, make test and make airflow do)")
    found = schema_revision(engine)
    if found != HEAD_REVISION:
        raise StoreNotReady(f"results store {shown_url(url)} is at schema revision {found or 'none (empty database)'}; "
                            f"this scalebench needs {HEAD_REVISION}: run `scalebench db upgrade`")


@contextlib.contextmanager
def _migration_lock(url: str, engine):
    """One migrator at a time: a file lock beside a SQLite file, an advisory lock on PostgreSQL."""
    if url.startswith("sqlite:///"):
        import fcntl

        db = Path(url.removeprefix("sqlite:///"))
        db.parent.mkdir(parents=True, exist_ok=True)
        with open(db.with_name(db.name + ".migrate-lock"), "w") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
    elif engine.dialect.name == "postgresql":
        from sqlalchemy import text

        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(7311)"))  # any fixed key shared by all migrators
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(7311)"))
    else:
        yield


def summaries_outdated(before: str, after: str) -> bool:
    """Whether a migration after `before` up to `after` says the night summaries need rebuilding
    (`rebuilds_summaries = True`: the table is new, or a figure column was added)."""
    from alembic.script import ScriptDirectory

    scripts = ScriptDirectory(str(MIGRATIONS))
    return any(getattr(s.module, "rebuilds_summaries", False) for s in scripts.iterate_revisions(after, before))


def upgrade(url: str | None = None) -> tuple[str | None, str | None]:
    """Bring the database to the newest schema (Alembic upgrade head), idempotent and locked, so
    several processes starting at once are safe. Returns (revision before, revision after)."""
    import logging

    from alembic import command
    from alembic.config import Config

    url = url or paths.store_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = make_engine(url)
    try:
        with _migration_lock(url, engine):
            before = schema_revision(engine)
            if before != HEAD_REVISION:
                cfg = Config()
                cfg.set_main_option("script_location", str(MIGRATIONS))
                cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
                logging.getLogger("alembic").setLevel(logging.WARNING)  # no "Context impl ..." chatter
                command.upgrade(cfg, "head")
            return before, schema_revision(engine)
    finally:
        engine.dispose()


