"""`scalebench db backup FILE` / `restore FILE`: the results store (every baseline) to one file and back.

SQLite: the sqlite3 backup API (a consistent copy while writers run). PostgreSQL: `pg_dump
--format=custom`, run inside the PostgreSQL container (`--pg-container`, which has the client
of the server's own version) or by a local client; the password goes in the environment
(PGPASSWORD), never on a command line. A restore goes into an empty database only: it never
replaces what a store already holds. A backup of an older scalebench is upgraded to this one's
schema in the same step: all of it is restored and upgraded, or nothing is.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path

from sqlalchemy import inspect
from sqlalchemy.engine import make_url

from scalebench.store.db import check_schema, make_engine, shown_url


def _check_sqlite_backup(src: Path) -> str:
    """The schema revision of a SQLite backup, read without writing to it; BackupError when the file
    is not an intact SQLite database, not a scalebench store, or at a revision this scalebench
    does not know (a newer one)."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import DBAPIError

    from scalebench.store.db import HEAD_REVISION, schema_revision

    engine = create_engine("sqlite://", creator=lambda: _read_only(src))
    try:
        with engine.connect() as conn:
            ok = conn.exec_driver_sql("PRAGMA integrity_check").scalar()
        revision = schema_revision(engine)
    except DBAPIError as exc:
        raise BackupError(f"{src}: not a SQLite database ({exc.orig}); nothing was restored") from None
    finally:
        engine.dispose()
    if ok != "ok":
        raise BackupError(f"{src}: the SQLite file is damaged (integrity check: {ok}); nothing was restored")
    if not revision:
        raise BackupError(f"{src}: not a scalebench store (no schema revision); nothing was restored")
    if revision[:4] > HEAD_REVISION:
        raise BackupError(f"{src}: a store at revision {revision}, newer than this scalebench's {HEAD_REVISION}; "
                          "upgrade scalebench first; nothing was restored")
    return revision


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def _sqlite_copy(source: sqlite3.Connection, dest: Path) -> None:
    """The sqlite3 backup API: a consistent copy of `source` into the file `dest`, while writers run."""
    out = sqlite3.connect(dest)
    try:
        source.backup(out)
    finally:
        out.close()
        source.close()


class BackupError(RuntimeError):
    """A backup or restore that cannot run; says which database or file, and why."""


def _sqlite_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def _pg_command(url: str, tool: list[str], container: str | None) -> tuple[list[str], dict[str, str]]:
    """The pg_dump/pg_restore command line (no secret in it) and its environment."""
    u = make_url(url)
    if container:  # inside the server's container: its local socket, as the store's user
        return ["docker", "exec", "-i", container, *tool, "--username", u.username or "postgres",
                "--dbname", u.database or "postgres"], dict(os.environ)
    env = {**os.environ, "PGHOST": u.host or "localhost", "PGPORT": str(u.port or 5432),
           "PGUSER": u.username or "postgres", "PGDATABASE": u.database or "postgres"}
    if u.password:
        env["PGPASSWORD"] = u.password
    return tool, env


def _run(cmd: list[str], env: dict, what: str, **kw) -> bytes:
    try:
        done = subprocess.run(cmd, env=env, stderr=subprocess.PIPE, **{"stdout": subprocess.PIPE, **kw})
    except FileNotFoundError:
        raise BackupError(f"{what}: {cmd[0]} is not installed here; use --pg-container NAME to run it inside the "
                          "PostgreSQL container, or install the PostgreSQL client") from None
    if done.returncode != 0:
        lines = done.stderr.decode(errors="replace").strip().splitlines() or ["no output"]
        told = next((x for x in lines if "error" in x.lower()), lines[-1])  # pg's line, not the SQL after it
        raise BackupError(f"{what}: {' '.join(cmd[:4])} ... exited {done.returncode}: {' '.join(told.split())[:300]}")
    return done.stdout or b""


def _dump_revision(src: Path, pg_container: str | None) -> str:
    """The schema revision inside a PostgreSQL dump, read without a database (pg_restore to SQL);
    BackupError when it is no scalebench store or one newer than this scalebench."""
    from scalebench.store.db import HEAD_REVISION

    tool = ["pg_restore", "--data-only", "--table=alembic_version", "--file=-"]
    cmd = ["docker", "exec", "-i", pg_container, *tool] if pg_container else tool
    with open(src, "rb") as fh:
        sql = _run(cmd, dict(os.environ), f"reading {src}", stdin=fh).decode(errors="replace")
    lines = sql.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("COPY ") and "alembic_version" in line), None)
    revision = lines[start + 1].strip() if start is not None and start + 1 < len(lines) else ""
    if not revision or revision == "\\.":
        raise BackupError(f"{src}: not a scalebench store (no schema revision in the dump); nothing was restored")
    if revision[:4] > HEAD_REVISION:
        raise BackupError(f"{src}: a store at revision {revision}, newer than this scalebench's {HEAD_REVISION}; "
                          "upgrade scalebench first; nothing was restored")
    return revision


def backup(url: str, dest: Path, *, pg_container: str | None = None) -> str:
    """Write the whole store (schema revision included) to `dest`; refuses to overwrite a file."""
    engine = make_engine(url)
    check_schema(engine, url)  # a store this version can read back
    dest = Path(dest)
    if dest.exists():
        raise BackupError(f"{dest} exists; a backup never overwrites a file")
    dest.parent.mkdir(parents=True, exist_ok=True)
    if url.startswith("sqlite"):
        _sqlite_copy(sqlite3.connect(_sqlite_path(url)), dest)
    else:
        cmd, env = _pg_command(url, ["pg_dump", "--format=custom", "--no-owner"], pg_container)
        tmp = dest.with_name(dest.name + ".partial")
        with open(tmp, "wb") as fh:
            try:
                _run(cmd, env, f"backup of {shown_url(url)}", stdout=fh)
            except BackupError:
                tmp.unlink(missing_ok=True)
                raise
        tmp.rename(dest)
    return f"results store {shown_url(url)} backed up to {dest} ({dest.stat().st_size} bytes)"


def restore(src: Path, url: str, *, pg_container: str | None = None) -> str:
    """Load a backup into an empty database (a new SQLite file, or a created, empty PostgreSQL database)."""
    src = Path(src)
    if not src.is_file():
        raise BackupError(f"{src}: no such backup file")
    if url.startswith("sqlite"):
        dest = _sqlite_path(url)
        if dest.exists() and dest.stat().st_size:
            raise BackupError(f"{shown_url(url)} exists; restore into a new file, never over a store")
        revision = _check_sqlite_backup(src)
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".restoring")  # copied and upgraded beside it, then moved into place
        part.unlink(missing_ok=True)
        try:
            _sqlite_copy(_read_only(src), part)
            _, now = _upgrade_restored(f"sqlite:///{part}", src, revision)
        except BaseException:
            for left in (part, part.with_name(part.name + "-wal"), part.with_name(part.name + "-shm")):
                left.unlink(missing_ok=True)
            raise
        os.replace(part, dest)
        engine = make_engine(url)
        check_schema(engine, url)
        return _restored(src, revision, now, url)
    engine = make_engine(url)  # PostgreSQL: pg_restore into an empty database
    with engine.connect() as conn:
        tables = inspect(conn).get_table_names()
    if tables:
        raise BackupError(f"{shown_url(url)} has tables ({', '.join(sorted(tables)[:4])}...); restore into an "
                          "empty database, never over a store")
    revision = _dump_revision(src, pg_container)  # before anything is written
    # one transaction: a dump that fails half way (or a restore killed) leaves the database empty
    cmd, env = _pg_command(url, ["pg_restore", "--no-owner", "--exit-on-error", "--single-transaction"], pg_container)
    with open(src, "rb") as fh:
        _run(cmd, env, f"restore into {shown_url(url)} (rolled back: the database is as it was)", stdin=fh)
    try:
        _, now = _upgrade_restored(url, src, revision)
    except BaseException:
        _drop_restored(url)  # the database was empty: it is again
        raise
    engine = make_engine(url)
    check_schema(engine, url)
    return _restored(src, revision, now, url)


def _restored(src: Path, revision: str, now: str | None, url: str) -> str:
    upgraded = f", upgraded to {now}" if now != revision else ""
    return f"{src} (a scalebench store at revision {revision}{upgraded}) restored into results store {shown_url(url)}"


def _upgrade_restored(url: str, src: Path, revision: str) -> tuple[str | None, str | None]:
    """The restored store brought to this scalebench's schema; BackupError when that fails."""
    from scalebench.store.db import upgrade

    try:
        return upgrade(url)
    except Exception as exc:
        raise BackupError(f"{src}: upgrading the restored store from revision {revision} failed "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0][:200]}); nothing was restored") from None


def _drop_restored(url: str) -> None:
    """Every table the restore made (the database held none before it)."""
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for table in inspect(conn).get_table_names():
                conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{table}" CASCADE')
    finally:
        engine.dispose()
