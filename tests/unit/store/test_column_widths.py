"""Values a config or trigger may give reach bounded columns: their widths are declared once
(scalebench.core.columns), the tables take them from there, and what the checks let through fits
on PostgreSQL, which, unlike SQLite, refuses a longer value at night."""
import pytest

from scalebench.core.cells import plan as plan_cells
from scalebench.core.columns import WIDTH
from scalebench.core.config import Configs, Host
from scalebench.store.db import Base
from scalebench.store.leases import LeaseManager
from scalebench.store.results import Store

UUIDS = [f"GPU-{i:08x}-1c2d-4e5f-8a9b-0c1d2e3f4a5b" for i in range(8)]  # nvidia-smi -L's form: 40 characters


def test_each_declared_width_is_its_tables_and_every_benchmark_and_host_column_takes_it():
    tables = Base.metadata.tables
    for name, width in WIDTH.items():
        table, column = name.split(".")
        assert tables[table].c[column].type.length == width, name
    for table in tables.values():
        for column in table.c:
            if column.name in ("benchmark", "host", "from_host", "to_host"):
                want = WIDTH["cells.benchmark" if column.name == "benchmark" else "cells.host"]
                assert column.type.length == want, f"{table.name}.{column.name}"


@pytest.fixture
def url(both_stores):
    return both_stores


def test_eight_gpu_uuids_are_leased_and_logged(url):
    host = Host(name="dgx-a", kind="gpu", queue="dgx-a", device_ids=UUIDS)
    mgr = LeaseManager(url, stop_containers=lambda lease_id: [])
    lease = mgr.acquire(host, 8, "all-eight", timeout_s=10)
    assert sorted(lease.device_ids) == sorted(UUIDS)
    lease.release()
    from sqlalchemy import create_engine, text

    with create_engine(url).connect() as conn:
        logged = conn.execute(text("SELECT devices FROM lease_events WHERE event = 'acquired'")).scalar_one()
    assert sorted(logged.split(",")) == sorted(UUIDS) and len(logged) == 8 * 40 + 7


def test_a_bisection_cell_with_the_longest_tag_is_recorded(url):
    from tests.support.samples import sample_contract

    configs = Configs()
    bench = configs.load_all()[0]["unet_torch_voc2007"]
    tags = ["a" * 128, "b" * 128]
    [cell, *_] = plan_cells(bench, configs.fleet, profile="smoke", run_id="manual__bisect", gpu_counts=[1], epochs=[1],
                            ab_images=tags)
    assert cell["label"].endswith(" · image " + "a" * 128) and len(cell["label"]) > 100
    store = Store(url)
    assert store.record_attempt(cell, 1, "valid", contract=sample_contract(cell, train_s=1.0)) == "inserted"
    [row] = store.cells(key=cell["key"])
    assert row["label"] == cell["label"]


def test_a_device_id_the_lease_table_cannot_hold_is_refused_naming_its_column():
    with pytest.raises(ValueError, match=r"device id 'GPU-0+'\.\.\. is 65 characters; the store's column "
                                         r"device_leases.device_id holds 64"):
        Host(name="dgx-a", kind="gpu", queue="dgx-a", device_ids=["GPU-" + "0" * 61])
