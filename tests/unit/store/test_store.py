import multiprocessing as mp
from pathlib import Path

import pytest
from sqlalchemy import inspect

from scalebench.store.db import HEAD_REVISION, StoreNotReady, upgrade
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract


def test_upgrade_creates_the_schema_once_and_says_what_it_did(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    with pytest.raises(StoreNotReady, match=r"none \(empty database\).*run `scalebench db upgrade`"):
        Store(url)
    assert upgrade(url) == (None, HEAD_REVISION)
    assert upgrade(url) == (HEAD_REVISION, HEAD_REVISION)  # idempotent
    assert {"cells", "attempts", "device_leases", "alembic_version"} <= set(inspect(Store(url).engine).get_table_names())


def test_head_revision_is_the_newest_migration():
    from alembic.script import ScriptDirectory

    import scalebench.store.db

    scripts = ScriptDirectory(str(Path(scalebench.store.db.__file__).parent / "migrations"))
    assert scripts.get_current_head() == HEAD_REVISION


def _upgrade_in_child(url, q):
    try:
        q.put(upgrade(url))
    except Exception as exc:  # reported to the parent, which fails the test
        q.put(repr(exc))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_concurrent_upgrades_of_a_fresh_store_are_safe(tmp_path, request, backend):
    """Several DAG runs starting in the same minute: one migrates, the others find it done
    (a file lock beside SQLite, an advisory lock on PostgreSQL)."""
    url = request.getfixturevalue("postgres_database") if backend == "postgresql" else f"sqlite:///{tmp_path / 'race.db'}"
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_upgrade_in_child, args=(url, q)) for _ in range(4)]
    for p in procs:
        p.start()
    results = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    assert sorted(map(str, results)) == sorted(map(str, [(None, HEAD_REVISION)] + [(HEAD_REVISION, HEAD_REVISION)] * 3))


def test_the_store_records_and_reads_cells_on_postgresql(postgres_database):
    upgrade(postgres_database)
    store = Store(postgres_database)
    cell = sample_cell()
    store.record_attempt(cell, 1, "failed", reason="killed", exit_code=137)
    store.record_attempt(cell, 2, "valid", contract=sample_contract(cell, train_s=7.5))
    [stored] = store.cells()
    assert stored["status"] == "valid" and stored["figure"]["train_s"] == 7.5
    assert [(a["attempt"], a["reason"]) for a in stored["attempts"]] == [(1, "killed"), (2, None)]


def test_same_attempt_twice_is_one_row_and_a_retry_is_a_new_attempt():
    store = Store()
    cell = sample_cell()
    assert store.record_attempt(cell, 1, "failed", reason="container_failed") == "inserted"
    assert store.record_attempt(cell, 1, "failed", reason="container_failed") == "updated"
    assert store.record_attempt(cell, 2, "valid", contract=sample_contract(cell, train_s=9.0)) == "inserted"
    [stored] = store.cells()
    assert [a["attempt"] for a in stored["attempts"]] == [1, 2]
    assert stored["figure"]["attempt"] == 2 and stored["figure"]["train_s"] == 9.0


def test_a_bad_attempt_never_hides_or_replaces_a_good_one():
    store = Store()
    cell = sample_cell()
    store.record_attempt(cell, 1, "valid", contract=sample_contract(cell, train_s=8.0))
    assert store.record_attempt(cell, 1, "invalid", reason="validation_failed") == "kept"
    store.record_attempt(cell, 2, "failed", reason="container_failed")
    [stored] = store.cells()
    assert stored["status"] == "valid" and stored["figure"]["attempt"] == 1 and stored["figure"]["train_s"] == 8.0
    assert stored["attempts"][1]["status"] == "failed"
    assert store.contract(cell["key"])["timing"]["train_s"] == 8.0


def test_two_nights_give_two_cells():
    store = Store()
    for night in ("scheduled__2026-11-27", "scheduled__2026-11-28"):
        cell = sample_cell(run_id=night)
        store.record_attempt(cell, 1, "valid", contract=sample_contract(cell))
    assert [c["run_id"] for c in store.cells()] == ["scheduled__2026-11-27", "scheduled__2026-11-28"]
