"""`scalebench db backup` / `restore`: a night's report is the same from the restored store."""
import subprocess

import pytest

from scalebench.cli import main
from scalebench.report.build import build_report
from scalebench.store.db import upgrade
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract

NIGHT = "2026-11-28"


def _seed(url: str) -> None:
    """Two nights of a benchmark, a retried cell and a failed one: what a baseline is made of."""
    store = Store(url)
    for night, slow in (("2026-11-27", 1.0), (NIGHT, 1.1)):
        for gpus in (1, 2, 4):
            for repeat in (1, 2):
                cell = sample_cell(gpus=gpus, repeat=repeat, run_id=f"scheduled__{night}", night=night,
                                   run_type="scheduled")
                if gpus == 4 and repeat == 2:
                    store.record_attempt(cell, 1, "failed", reason="lease_lost", exit_code=137, message="lost")
                store.record_attempt(cell, 2 if gpus == 4 and repeat == 2 else 1, "valid",
                                     contract=sample_contract(cell, train_s=slow * 40 / gpus ** 0.8 + repeat))
        store.record_run(dag_id=cell["dag_id"], run_id=cell["run_id"], benchmark=cell["benchmark"],
                         run_type="scheduled", night=night, counts={"valid": 6})


def _report(url: str) -> dict:
    doc = build_report(Store(url), NIGHT).to_json()
    doc.pop("generated")
    return doc


def _cli(*args) -> int:
    return main(["db", *args])


def _backed_up(kind, tmp_path, request, monkeypatch, target: str):
    """A seeded store backed up (the old store's URL, the backup), and an empty target to restore
    into (a new SQLite file, or a fresh database `target` on the session's PostgreSQL); the CLI's
    --pg-container arguments."""
    if kind == "sqlite":
        url, new, container = f"sqlite:///{tmp_path / 'old.db'}", f"sqlite:///{tmp_path / 'new.db'}", None
    else:
        url = request.getfixturevalue("postgres_database")
        container, _ = request.getfixturevalue("postgres_server")
        new = url.rsplit("/", 1)[0] + f"/{target}"
        for sql in (f"DROP DATABASE IF EXISTS {target}", f"CREATE DATABASE {target}"):
            subprocess.run(["docker", "exec", container, "psql", "-U", "postgres", "-c", sql], check=True,
                           capture_output=True)
    upgrade(url)
    _seed(url)
    dump = tmp_path / "store.backup"
    pg = ["--pg-container", container] if container else []
    monkeypatch.setenv("SCALEBENCH_STORE_URL", url)
    assert _cli("backup", str(dump), *pg) == 0
    return url, new, dump, pg, container


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_backup_and_restore_into_a_new_store_gives_the_same_report(kind, tmp_path, monkeypatch, request, drill, capsys):
    drill.update(drill=f"results store backed up and restored ({'SQLite' if kind == 'sqlite' else 'PostgreSQL'})",
                 done="`scalebench db backup` of a store with two nights, then `scalebench db restore` into a new, "
                      "empty store; the night's report built from each")
    url, new, dump, pg, _ = _backed_up(kind, tmp_path, request, monkeypatch, "restored")
    assert _cli("backup", str(dump), *pg) == 2  # never over a file
    monkeypatch.setenv("SCALEBENCH_STORE_URL", new)
    assert _cli("restore", str(dump), *pg) == 0
    assert _cli("restore", str(dump), *pg) == 2  # never over a store
    err = capsys.readouterr().err
    assert "exists; a backup never overwrites a file" in err and "never over a store" in err
    before, after = _report(url), _report(new)
    assert before == after and before["rows"]
    assert Store(new).cells() == Store(url).cells()
    assert "test-only-password" not in err
    drill.update(happened="the restored store held every cell and attempt (the retried cell's failed attempt too) "
                          "and gave the same report; a second backup to the same file and a restore over the "
                          "restored store were refused",
                 figure=f"{dump.stat().st_size} bytes; {len(Store(new).cells())} cells identical; report identical")


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_restore_that_fails_half_way_leaves_the_target_as_it_was_and_a_retry_works(kind, tmp_path, monkeypatch,
                                                                                     request, drill, capsys):
    """SQLite: a backup cut at half its bytes is refused before the store file is written.
    PostgreSQL: a restore that breaks off after it has created tables (a view in the target named
    like a later table) is rolled back whole, the database empty as it was; once the view is gone
    the same backup restores."""
    drill.update(drill=f"a restore that fails half way ({'SQLite' if kind == 'sqlite' else 'PostgreSQL'})",
                 done="`scalebench db restore` into a new store: " + (
                     "a backup cut at half its bytes" if kind == "sqlite" else
                     "a whole backup into a database holding a view named like one of its later tables") +
                 "; then again with the cause gone")
    url, new, dump, pg, container = _backed_up(kind, tmp_path, request, monkeypatch, "halfway")
    if kind == "sqlite":
        broken = tmp_path / "cut.backup"
        broken.write_bytes(dump.read_bytes()[: dump.stat().st_size // 2])
    else:
        broken = dump

        def psql(sql):
            subprocess.run(["docker", "exec", container, "psql", "-U", "postgres", "-d", "halfway", "-c", sql],
                           check=True, capture_output=True)
        psql("CREATE VIEW night_summaries AS SELECT 1 AS x")  # not a table: the empty-store check lets it through
    monkeypatch.setenv("SCALEBENCH_STORE_URL", new)
    assert _cli("restore", str(broken), *pg) == 2
    err = capsys.readouterr().err
    if kind == "sqlite":
        assert not (tmp_path / "new.db").exists() and "nothing was restored" in err
    else:
        from sqlalchemy import create_engine, inspect

        engine = create_engine(new)
        with engine.connect() as conn:
            left = inspect(conn).get_table_names()
        engine.dispose()
        assert left == [] and "rolled back" in err and "already exists" in err, (left, err)
        psql("DROP VIEW night_summaries")
    assert _cli("restore", str(dump), *pg) == 0  # the retry is not refused by what the first left
    assert Store(new).cells() == Store(url).cells()
    drill.update(happened=("refused before the store file was written" if kind == "sqlite" else
                           "pg_restore stopped at the view, after creating earlier tables; the one transaction rolled "
                           "back, no table left") + "; the retry restored every cell",
                 figure=f"{len(Store(new).cells())} cells restored on the retry")


def test_a_database_or_role_that_does_not_exist_is_named_with_its_next_step():
    from sqlalchemy.exc import OperationalError

    from scalebench.store.db import store_error

    for why, says in (('FATAL:  database "scalebench" does not exist', "the database scalebench does not exist; create it"),
                      ('FATAL:  role "sb" does not exist', "the role sb does not exist; create the role"),
                      ('relation "cells" does not exist', "no schema")):
        assert says in store_error(OperationalError("SELECT 1", {}, Exception(why)))


def _at_revision(url: str, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from scalebench.store.db import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    command.downgrade(cfg, revision)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_backup_of_an_older_scalebench_is_restored_and_upgraded_in_one_step(kind, tmp_path, monkeypatch, request,
                                                                              capsys):
    """A store backed up before the last migration, restored by this scalebench: upgraded as part
    of the restore, every cell there, the store opens."""
    from scalebench.store.backup import _pg_command, _run
    from scalebench.store.db import HEAD_REVISION

    url, new, _, pg, container = _backed_up(kind, tmp_path, request, monkeypatch, "older")
    cells = Store(url).cells()
    older = f"{int(HEAD_REVISION) - 1:04d}"
    _at_revision(url, older)
    dump = tmp_path / "older.backup"
    if kind == "sqlite":  # what `db backup` of that scalebench wrote: the backup API's copy
        import sqlite3

        from scalebench.store.backup import _sqlite_copy

        _sqlite_copy(sqlite3.connect(tmp_path / "old.db"), dump)
    else:
        cmd, env = _pg_command(url, ["pg_dump", "--format=custom", "--no-owner"], container)
        with open(dump, "wb") as fh:
            _run(cmd, env, "backup", stdout=fh)
    monkeypatch.setenv("SCALEBENCH_STORE_URL", new)
    capsys.readouterr()
    assert _cli("restore", str(dump), *pg) == 0, capsys.readouterr().err
    assert f"at revision {older}, upgraded to {HEAD_REVISION}" in capsys.readouterr().out
    assert Store(new).cells() == cells


KILLED_AT_UPGRADE = """\
import os, sys, time
from pathlib import Path
from scalebench.store import backup
real = backup._upgrade_restored
def paused(url, src, revision):  # the copy is made: say so, and wait to be killed here
    Path(sys.argv[3]).write_text(url)
    time.sleep(600)
    return real(url, src, revision)
backup._upgrade_restored = paused
backup.restore(Path(sys.argv[1]), sys.argv[2])
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_restore_killed_mid_way_leaves_the_target_as_it_was_and_a_retry_works(kind, tmp_path, monkeypatch, request,
                                                                              drill):
    """SQLite: the restoring process SIGKILLed after its copy, before the copy is upgraded and moved
    into place. PostgreSQL: pg_restore SIGKILLed in the server's container while its one
    transaction has created tables and waits at a later one (another session is creating a table of
    that name). The target is as it was; the same restore then runs to the end."""
    import os
    import signal
    import sys
    import time

    url, new, dump, pg, container = _backed_up(kind, tmp_path, request, monkeypatch, "killed")
    drill.update(drill=f"a restore killed mid-way ({'SQLite' if kind == 'sqlite' else 'PostgreSQL'})",
                 done="`scalebench db restore` into a new store, killed with SIGKILL mid-way: " + (
                     "the restoring process, after its copy and before the copy is upgraded and moved into place"
                     if kind == "sqlite" else "pg_restore in the server's container, inside its one transaction, "
                     "waiting at a table another session is creating") + "; then the same restore again")
    if kind == "sqlite":
        said = tmp_path / "copied"
        proc = subprocess.Popen([sys.executable, "-c", KILLED_AT_UPGRADE, str(dump), new, str(said)])
        deadline = time.monotonic() + 60
        while not said.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the restore did not reach its copy"
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert not (tmp_path / "new.db").exists() and (tmp_path / "new.db.restoring").exists()  # killed mid-way
        happened = "killed after its copy: no store file at the target (the copy left beside it)"
    else:
        def psql(*sql, db="killed"):
            return subprocess.Popen(["docker", "exec", "-i", container, "psql", "-U", "postgres", "-d", db, "-v",
                                     "ON_ERROR_STOP=1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
        holder = psql()
        holder.stdin.write("BEGIN; CREATE TABLE night_summaries (x int); SELECT pg_sleep(600);\n")
        holder.stdin.flush()
        restore = subprocess.Popen([sys.executable, "-m", "scalebench.cli", "db", "restore", str(dump), *pg],
                                   env={**os.environ, "SCALEBENCH_STORE_URL": new}, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)

        def waiting() -> str:
            q = ("SELECT count(*) FROM pg_stat_activity WHERE datname = 'killed' AND application_name = 'pg_restore' "
                 "AND wait_event_type = 'Lock'")
            return subprocess.run(["docker", "exec", container, "psql", "-U", "postgres", "-At", "-c", q],
                                  capture_output=True, text=True).stdout.strip()
        deadline = time.monotonic() + 60
        while waiting() != "1":
            assert restore.poll() is None and time.monotonic() < deadline, "pg_restore never waited at the table"
            time.sleep(0.2)
        kill = "for p in /proc/[0-9]*; do [ \"$(cat $p/comm)\" = pg_restore ] && kill -9 ${p#/proc/}; done; true"
        subprocess.run(["docker", "exec", container, "sh", "-c", kill], check=True)
        assert restore.wait(60) == 2  # the CLI says the restore failed, in one line
        holder.kill()
        holder.wait(30)
        subprocess.run(["docker", "exec", container, "psql", "-U", "postgres", "-c",
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'killed' "
                        "AND pid <> pg_backend_pid()"], check=True, capture_output=True)
        from sqlalchemy import create_engine, inspect

        engine = create_engine(new)
        with engine.connect() as conn:
            left = inspect(conn).get_table_names()
        engine.dispose()
        assert left == [], left
        happened = "pg_restore killed inside its transaction: no table left in the target"
    monkeypatch.setenv("SCALEBENCH_STORE_URL", new)
    assert _cli("restore", str(dump), *pg) == 0  # the retry is not refused by what the kill left
    assert Store(new).cells() == Store(url).cells()
    drill.update(happened=happened + "; the retry restored every cell",
                 figure=f"{len(Store(new).cells())} cells restored on the retry")
