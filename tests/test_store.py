from sqlalchemy import inspect

from scalebench.store import Store
from tests.conftest import sample_cell, sample_contract


def test_migrations_create_the_schema(isolated_state):
    store = Store()
    insp = inspect(store.engine)
    assert {"cells", "attempts", "alembic_version"} <= set(insp.get_table_names())
    Store()  # migrating twice is a no-op


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
