"""Night summaries: the history pages' rows, written at record time, equal to the report's own
figures, kept apart per precision, and marked by the night's report."""
import datetime as dt

import pytest

from scalebench.report.build import publish
from scalebench.report.model import Options
from scalebench.report.summary import summarize_night
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract

NIGHT = "2026-11-28"


def record(store, gpus, repeat, train_s, night=NIGHT, run_id=None, run_type="scheduled", precision="fp32",
           status="valid", ips=None, digest="sha256:def", role="measure"):
    cell = sample_cell(gpus=gpus, repeat=repeat, run_id=run_id or f"scheduled__{night}", night=night, run_type=run_type,
                       precision=precision, role=role)
    contract = sample_contract(cell, train_s=train_s)
    contract["provenance"]["image_digest"] = digest
    if ips is not None:
        contract["timing"]["images_per_s"] = ips
    store.record_attempt(cell, 1, status, contract=contract if status == "valid" else None,
                         reason=None if status == "valid" else "oom", message=None if status == "valid" else "CUDA OOM")
    return cell


def test_a_summary_is_the_reports_row_at_each_gpu_count_and_counts_what_failed():
    store = Store()
    for rep in (1, 2, 3):
        record(store, 1, rep, 100 + rep)
        record(store, 2, rep, 60 + rep)
    record(store, 2, 4, 0, status="failed")
    assert summarize_night(store, "resnet50_keras_cifar10", NIGHT) == 2
    one, two = store.summaries(benchmark="resnet50_keras_cifar10")
    assert (one["gpus"], one["cells"], one["valid"], one["figures"]["relative_time"]) == (1, 3, 3, 1.0)
    assert (two["gpus"], two["cells"], two["valid"]) == (2, 4, 3)
    assert two["figures"]["train_s"] == pytest.approx(62) and two["figures"]["relative_time"] == pytest.approx(62 / 102)
    lo, hi = two["relative_time_ci"]
    assert lo <= two["figures"]["relative_time"] <= hi
    assert two["metrics"]["precision"] == pytest.approx(0.5) and two["image_digest"] == "sha256:def"
    assert set(two["step_shares"]) >= {"compute", "sync"} and two["run_id"] == f"scheduled__{NIGHT}"
    # the report of the night says the same, from the same code
    rep, _ = publish(store, NIGHT, Options(expected=["resnet50_keras_cifar10"]))
    assert rep.rows[0].relative_time[2] == pytest.approx(two["figures"]["relative_time"])


def test_the_scheduled_run_is_the_nights_summary_and_each_precision_has_its_own_rows():
    store = Store()
    for precision, t in (("fp32", 60), ("bf16", 30)):
        record(store, 1, 1, 2 * t, precision=precision)
        record(store, 2, 1, t, precision=precision)
    record(store, 1, 1, 5, run_id="manual__try", run_type="manual")  # an experiment the same night: not the night
    summarize_night(store, "resnet50_keras_cifar10", NIGHT)
    rows = store.summaries(night=NIGHT)
    assert [(r["gpus"], r["precision"]) for r in rows] == [(1, "bf16"), (1, "fp32"), (2, "bf16"), (2, "fp32")]
    assert {r["run_id"] for r in rows} == {f"scheduled__{NIGHT}"}
    assert all(r["figures"]["relative_time"] == pytest.approx(0.5) for r in rows if r["gpus"] == 2)


def test_summarizing_again_replaces_the_rows_and_keeps_the_reports_marks():
    store = Store()
    start = dt.date(2026, 11, 1)
    for i in range(22):  # a throughput drop on the last two nights: flagged, then alerted
        night = (start + dt.timedelta(days=i)).isoformat()
        record(store, 2, 1, 10, night=night, ips=1000 * (0.85 if i >= 20 else 1.0 + 0.01 * (-1) ** i))
        summarize_night(store, "resnet50_keras_cifar10", night)
    for night in ("2026-11-21", "2026-11-22"):
        publish(store, night, Options(expected=["resnet50_keras_cifar10"]))
    marked = {r["night"]: [m["kind"] for m in r["marks"] or []] for r in store.summaries(since="2026-11-20")}
    assert marked == {"2026-11-20": [], "2026-11-21": ["flagged"], "2026-11-22": ["alert"]}
    [alert] = store.summaries(night="2026-11-22")[0]["marks"]
    assert alert["text"].startswith("resnet50_keras_cifar10 2 GPUs fp32 images_per_s: 850")
    # a rerun recorded later re-summarizes the night: counted, and the alert mark stays
    record(store, 2, 9, 10, night="2026-11-22", role="rerun", ips=850)
    summarize_night(store, "resnet50_keras_cifar10", "2026-11-22")
    [row] = store.summaries(night="2026-11-22")
    assert row["reruns"] == 1 and [m["kind"] for m in row["marks"]] == ["alert"]


def test_a_new_image_is_marked_as_the_suspect_of_its_flagged_night():
    store = Store()
    start = dt.date(2026, 11, 1)
    for i in range(6):
        night = (start + dt.timedelta(days=i)).isoformat()
        record(store, 2, 1, 10, night=night, ips=1000 if i < 5 else 700, digest="sha256:old" if i < 5 else "sha256:new")
        summarize_night(store, "resnet50_keras_cifar10", night)
    publish(store, "2026-11-06", Options(expected=["resnet50_keras_cifar10"]))
    [row] = store.summaries(night="2026-11-06")
    assert row["image_digest"] == "sha256:new"
    # judged against the old image's baseline: flagged, with the image change named
    [flag] = [m for m in row["marks"] if m["kind"] == "flagged"]
    assert "images_per_s: with image digest sha256:old -> sha256:new (inconclusive)" in flag["text"]
    # the accuracy figures came with the same change and did not move: "change" marks, no effect
    assert {m["kind"] for m in row["marks"]} == {"flagged", "change"}
    assert all("(no effect)" in m["text"] for m in row["marks"] if m["kind"] == "change")


def test_scalebench_db_summarize_rebuilds_every_night_from_the_attempts(capsys):
    from scalebench.cli import main

    store = Store()
    for night in ("2026-11-27", "2026-11-28"):
        record(store, 1, 1, 100, night=night)
        record(store, 2, 1, 60, night=night)
    assert store.summaries() == []  # a store from before the summaries (migration 0009 adds an empty table)
    assert main(["db", "summarize"]) == 0
    assert "4 rows for 2 (benchmark, night) pairs" in capsys.readouterr().out
    assert [(r["night"], r["gpus"]) for r in store.summaries()] == [("2026-11-27", 1), ("2026-11-27", 2),
                                                                  ("2026-11-28", 1), ("2026-11-28", 2)]


def test_upgrading_a_store_from_before_the_summaries_summarizes_its_nights(isolated_state, capsys):
    from pathlib import Path

    from alembic import command
    from alembic.config import Config

    from scalebench.cli import main
    from scalebench.store.db import HEAD_REVISION

    store = Store()
    record(store, 1, 1, 100)
    record(store, 2, 1, 60)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parents[3] / "src/scalebench/store/migrations"))
    cfg.set_main_option("sqlalchemy.url", store.url)
    command.downgrade(cfg, "0008")  # the store as the release before the history pages left it
    assert main(["db", "upgrade"]) == 0
    out = capsys.readouterr().out
    assert f"upgraded from 0008 to schema revision {HEAD_REVISION}; history summaries rebuilt: 2 rows" in out
    assert [r["figures"]["relative_time"] for r in Store().summaries()] == [1.0, pytest.approx(0.6)]


def test_an_upgrade_that_adds_a_figure_column_fills_it_for_the_stored_nights(isolated_state, capsys):
    """Migration 0012 adds the exposed sync share; `db upgrade` rebuilds the summaries it asks for."""
    from pathlib import Path

    from alembic import command
    from alembic.config import Config

    from scalebench.cli import main
    from scalebench.store.db import HEAD_REVISION

    store = Store()
    record(store, 1, 1, 100)
    record(store, 2, 1, 60)
    summarize_night(store, "resnet50_keras_cifar10", NIGHT)
    cfg = Config()
    cfg.set_main_option("script_location", str(Path(__file__).parents[3] / "src/scalebench/store/migrations"))
    cfg.set_main_option("sqlalchemy.url", store.url)
    command.downgrade(cfg, "0011")
    assert main(["db", "upgrade"]) == 0
    assert f"upgraded from 0011 to schema revision {HEAD_REVISION}; history summaries rebuilt: 2 rows" in capsys.readouterr().out
    assert [r["figures"]["sync_share"] for r in Store().summaries()] == [0.0, pytest.approx(0.1)]
    assert main(["db", "upgrade"]) == 0 and "already at schema revision" in capsys.readouterr().out


def test_a_benchmark_moved_to_a_new_host_is_marked_on_its_first_night_there():
    from scalebench.core import nights

    store = Store()
    bench = "resnet50_keras_cifar10"
    store.save_assignments({bench: "gpu-node-1"}, {bench: "new"})
    yesterday = (dt.date.fromisoformat(nights.today()) - dt.timedelta(days=1)).isoformat()
    for night in (yesterday, nights.today()):
        for g in (1, 2):
            record(store, g, 1, 10 / g, night=night)
        summarize_night(store, bench, night)
    # tonight's plan moved it: gpu-node-2 joined the fleet
    store.save_assignments({bench: "gpu-node-2"}, {bench: "rebalanced: gpu-node-2 joined"})
    publish(store, yesterday, Options(expected=[bench]))
    publish(store, nights.today(), Options(expected=[bench]))
    marks = {(r["night"], r["gpus"]): [m for m in r["marks"] or [] if m["kind"] == "move"] for r in store.summaries()}
    assert marks[(yesterday, 1)] == marks[(yesterday, 2)] == []
    for g in (1, 2):
        [move] = marks[(nights.today(), g)]
        assert move["text"] == ("moved from gpu-node-1 to gpu-node-2 (rebalanced: gpu-node-2 joined): its series "
                                "start on gpu-node-2")
