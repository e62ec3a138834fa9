"""The benchmark DAG's tasks as plain functions, called without a DAG run (their `.function`)."""
import datetime as dt
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from scalebench.orchestration import benchmark_tasks as tasks
from scalebench.orchestration import notes


@pytest.fixture
def noted(monkeypatch):
    seen = []
    monkeypatch.setattr(notes, "set_note", lambda ti, text: seen.append(text) or "set")
    return seen


def context(**params):
    run = SimpleNamespace(run_id="manual__t", run_type="manual", logical_date=dt.datetime(2026, 12, 1, 2, tzinfo=dt.timezone.utc),
                          run_after=None)
    p = {"profile": "smoke", "gpu_counts": [1, 2], "epochs": None, "repeats": 1, "seed": 0, "image_tag": None} | params
    return {"params": p, "dag_run": run, "ti": SimpleNamespace()}


def test_fail_with_note_sets_the_note_then_fails_for_good(noted, capsys):
    with pytest.raises(AirflowFailException, match="^why it failed$"):
        notes.fail_with_note(SimpleNamespace(), "why it failed")
    assert noted == ["why it failed"] and "task note: set" in capsys.readouterr().out


def test_plan_cells_plans_the_params_and_refuses_what_cannot_run_with_a_note(noted):
    planned = tasks.plan_cells.function("resnet50_keras_cifar10", ["local_1gpu", "local_2gpu"], **context())
    assert [(c["gpus"], c["night"], c["run_type"]) for c in planned] == [(1, "2026-12-01", "manual"), (2, "2026-12-01", "manual")]
    with pytest.raises(AirflowFailException, match=r"gpu_counts \[8\] cannot be served"):
        tasks.plan_cells.function("resnet50_keras_cifar10", ["local_1gpu"], **context(gpu_counts=[8]))
    assert noted == ["gpu_counts [8] cannot be served: the largest host has 4 devices"]
    with pytest.raises(AirflowFailException, match=r"plan produced cells for \['local_2gpu'\] that this DAG lacks"):
        tasks.plan_cells.function("resnet50_keras_cifar10", ["local_1gpu"], **context())


def test_check_cells_fails_the_run_naming_each_cell_without_a_valid_result(capsys):
    tasks.check_cells.function({"valid": 2, "not_valid": []})
    assert "all 2 cells valid" in capsys.readouterr().out
    with pytest.raises(AirflowFailException, match=r"^1 of 3 cells have no valid result: 2 GPUs · 3 epochs · repeat 1: "
                                                   r"failed \(killed\)$"):
        tasks.check_cells.function({"valid": 2, "not_valid": ["2 GPUs · 3 epochs · repeat 1: failed (killed)"]})


def test_select_cells_gives_each_group_its_slice():
    planned = tasks.plan_cells.function("resnet50_keras_cifar10", ["local_1gpu", "local_2gpu"], **context())
    assert [c["gpus"] for c in tasks.select_cells.function(planned, "local_2gpu")] == [2]
    assert tasks.select_cells.function(planned, "local_3gpu") == []
