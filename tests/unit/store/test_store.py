import multiprocessing as mp
from pathlib import Path

import pytest
from sqlalchemy import inspect

from scalebench.store.db import HEAD_REVISION, StoreNotReady, upgrade
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract


def test_upgrade_creates_the_schema_once_and_says_what_it_did(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    with pytest.raises(StoreNotReady, match=r"fresh.db does not exist yet: run `scalebench db upgrade`"):
        Store(url)
    assert not (tmp_path / "fresh.db").exists()  # reading never creates it
    (tmp_path / "fresh.db").touch()
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


def test_the_migrated_schema_is_the_models(tmp_path):
    """A column the models declare (a history figure of core.figures, say) needs its migration:
    Alembic's comparison of the migrated database with the models finds nothing to add or drop."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from scalebench.store.db import Base

    url = f"sqlite:///{tmp_path / 'schema.db'}"
    upgrade(url)
    with Store(url).engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), Base.metadata)
    tables_and_columns = [d for d in diff if isinstance(d, tuple) and d[0] in ("add_table", "remove_table", "add_column",
                                                                                "remove_column")]
    assert tables_and_columns == [], "\n".join(map(str, tables_and_columns))


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


def test_figures_decode_the_attempts_json_as_the_orm_does_on_both_engines(both_stores):
    """Store.figures reads the JSON columns as text and decodes them itself: the same values as the
    ORM's own decoding (Store.cells), a failed attempt's never the figure's."""
    store = Store(both_stores)
    cell = sample_cell()
    store.record_attempt(cell, 1, "failed", reason="killed", exit_code=137)
    store.record_attempt(cell, 2, "valid", contract=sample_contract(cell, train_s=7.5))
    [row], [stored] = store.figures(), store.cells()
    f, want = row["figure"], stored["figure"]
    assert f["attempt"] == 2 and row["others"] == ["attempt 1 failed (killed)"]
    assert (f["metrics"], f["fingerprint"]) == (want["metrics"], want["fingerprint"]) and f["metrics"]
    assert f["timing"] == store.contract(cell["key"])["timing"] and f["timing"]["train_s"] == 7.5


def test_same_attempt_twice_is_one_row_and_a_retry_is_a_new_attempt():
    store = Store()
    cell = sample_cell()
    assert store.record_attempt(cell, 1, "failed", reason="container_failed") == "inserted"
    assert store.record_attempt(cell, 1, "failed", reason="container_failed") == "kept"
    assert store.record_attempt(cell, 2, "valid", contract=sample_contract(cell, train_s=9.0)) == "inserted"
    [stored] = store.cells()
    assert [a["attempt"] for a in stored["attempts"]] == [1, 2]
    assert stored["figure"]["attempt"] == 2 and stored["figure"]["train_s"] == 9.0


def test_a_bad_attempt_never_hides_or_replaces_a_good_one():
    store = Store()
    cell = sample_cell()
    store.record_attempt(cell, 1, "valid", contract=sample_contract(cell, train_s=8.0))
    assert store.record_attempt(cell, 1, "invalid", reason="validation_failed") == "conflict"
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


@pytest.mark.parametrize("first, second", [
    (("valid", None, 8.0), ("valid", None, 5.0)),        # a valid figure is never replaced by another
    (("failed", "killed", None), ("valid", None, 5.0)),  # nor a failure turned into a figure afterwards
    (("valid", None, 8.0), ("failed", "killed", None)),
])
def test_a_recorded_attempt_is_never_updated(first, second, caplog):
    store = Store()
    cell = sample_cell()

    def record(status, reason, train_s):
        contract = sample_contract(cell, train_s=train_s) if train_s else None
        return store.record_attempt(cell, 1, status, reason=reason, contract=contract)

    assert record(*first) == "inserted"
    assert record(*second) == "conflict"
    [stored] = store.cells()
    [attempt] = stored["attempts"]
    assert (attempt["status"], attempt["reason"], attempt["train_s"]) == first
    assert "the first record stands" in caplog.text and cell["key"] in caplog.text


def test_upgrading_a_store_keeps_every_row(tmp_path):
    """A store at 0006 with cells, attempts and leases: 0007 and 0008 add columns, nothing is lost."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, text

    url = f"sqlite:///{tmp_path / 'old.db'}"
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parents[3] / "src/scalebench/store/migrations"))
    cfg.set_main_option("sqlalchemy.url", url)
    command.upgrade(cfg, "0006")
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO cells (key, dag_id, run_id, run_type, benchmark, host, gpus, epochs, repeat, "
                          "profile, seed, scaling_mode, per_device_batch, global_batch, label, created_at) VALUES "
                          "('k1', 'd', 'r', 'scheduled', 'b', 'h', 2, 3, 1, 'nightly', 0, 'weak', 16, 32, 'l', "
                          "'2026-11-30 01:00:00')"))
        conn.execute(text("INSERT INTO attempts (cell_id, attempt, status, train_s, recorded_at) VALUES "
                          "(1, 1, 'failed', NULL, '2026-11-30 01:00:00'), (1, 2, 'valid', 9.5, '2026-11-30 01:05:00')"))
        conn.execute(text("INSERT INTO device_leases (lease_id, host, device_id, cell_key, holder_host, holder_pid, "
                          "exclusive, acquired_at, heartbeat_at) VALUES ('l1', 'h', '0', 'k1', 'w', 1, 0, 1.0, 2.0)"))
    assert upgrade(url) == ("0006", HEAD_REVISION)
    [stored] = Store(url).cells()
    assert [(a["attempt"], a["status"], a["train_s"], a["task_id"]) for a in stored["attempts"]] == [
        (1, "failed", None, None), (2, "valid", 9.5, None)]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT lease_id, reclaim_reason FROM device_leases")).all() == [("l1", None)]
