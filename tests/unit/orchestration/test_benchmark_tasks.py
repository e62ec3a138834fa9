"""The benchmark DAG's tasks as plain functions, called without a DAG run (their `.function`)."""
import datetime as dt
from types import SimpleNamespace

import pytest
from airflow.sdk.exceptions import AirflowFailException

from scalebench.orchestration.dags import benchmark_tasks as tasks
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
    return {"params": p, "dag_run": run, "ti": SimpleNamespace(), "dag": SimpleNamespace(task_ids=[])}


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
    with pytest.raises(AirflowFailException, match=r"^1 of 3 cells have no valid result: 2 GPUs · fp32 · 3 epochs · repeat 1: "
                                                   r"failed \(killed\)$"):
        tasks.check_cells.function({"valid": 2, "not_valid": ["2 GPUs · fp32 · 3 epochs · repeat 1: failed (killed)"]})


def test_select_cells_gives_each_group_its_slice():
    planned = tasks.plan_cells.function("resnet50_keras_cifar10", ["local_1gpu", "local_2gpu"], **context())
    assert [c["gpus"] for c in tasks.select_cells.function(planned, "local_2gpu")] == [2]
    assert tasks.select_cells.function(planned, "local_3gpu") == []


def test_a_run_id_that_cannot_name_a_folder_fails_plan_cells_with_the_reason(noted):
    ctx = context()
    ctx["dag_run"].run_id = ".."
    with pytest.raises(AirflowFailException, match=r"run id '\.\.' cannot name a folder"):
        tasks.plan_cells.function("resnet50_keras_cifar10", ["local_1gpu", "local_2gpu"], **ctx)
    assert noted and "trigger the run again with another run id" in noted[0]


GPU_GROUPS = [f"gpu_node_1_{n}gpu" for n in (1, 2, 3, 4)]


def scheduled_at(when: dt.datetime, **params):
    ctx = context(**({"profile": "nightly", "gpu_counts": [1, 2, 3, 4]} | params))
    ctx["dag_run"] = SimpleNamespace(run_id=f"scheduled__{when.isoformat()}", run_type="scheduled",
                                     logical_date=when, run_after=when)
    return ctx


@pytest.mark.parametrize("when, skipped", [
    (dt.datetime(2026, 12, 5, 1, tzinfo=dt.timezone.utc), False),   # Saturday 01:00: before the window
    (dt.datetime(2026, 12, 6, 1, tzinfo=dt.timezone.utc), True),    # Sunday 01:00: Saturday 18:00 + 48 h
    (dt.datetime(2026, 12, 7, 1, tzinfo=dt.timezone.utc), True),    # Monday 01:00
    (dt.datetime(2026, 12, 8, 1, tzinfo=dt.timezone.utc), False),   # Tuesday 01:00: the window has closed
])
def test_a_scheduled_nightly_run_in_the_accuracy_window_plans_nothing_and_is_recorded_skipped(noted, monkeypatch,
                                                                                           when, skipped):
    from scalebench.store.results import Store
    from tests.support import ROOT

    monkeypatch.setenv("SCALEBENCH_FLEET", str(ROOT / "include/configs/fleet.gpu-example.yaml"))
    planned = tasks.plan_cells.function("unet_torch_voc2007", GPU_GROUPS, **scheduled_at(when))
    runs = Store().runs(when.date().isoformat())
    if not skipped:
        assert len(planned) == 12 and not noted and not runs  # 4 GPU counts x schedule_repeats 3
        return
    why = "weekly accuracy window on gpu-node-1, Sat 2026-12-05 18:00 to Mon 2026-12-07 18:00 UTC"
    assert planned == [] and noted == [f"nightly run skipped: {why}"]
    assert [(r["benchmark"], r["run_type"], r["counts"]) for r in runs] == [("unet_torch_voc2007", "scheduled",
                                                                            {"skipped": why})]
    # what follows an empty plan: plan_cells skips every dataset check and cell slice, the verdict passes
    from scalebench.core.config import Configs
    from scalebench.orchestration.dags.dag_factory import build_benchmark_dag

    configs = Configs()
    dag = build_benchmark_dag(configs.benchmark("unet_torch_voc2007"), configs.fleet)
    idle = tasks.idle_tasks(dag.task_ids, planned)
    assert {"check_dataset_gpu_node_1", "check_dataset_gpu_node_2", "gpu_node_1_4gpu.cells"} <= set(idle)
    assert sorted(idle) == sorted(t for t in dag.task_ids if t.startswith("check_dataset_")
                                  or (t.endswith(".cells") and t.count(".") == 1))
    tasks.check_cells.function({"valid": 0, "invalid": 0, "failed": 0, "missing": 0, "not_valid": []})


def test_the_accuracy_dags_runs_are_of_run_type_accuracy_and_run_inside_the_window(noted, monkeypatch):
    from tests.support import ROOT

    monkeypatch.setenv("SCALEBENCH_FLEET", str(ROOT / "include/configs/fleet.gpu-example.yaml"))
    saturday = dt.datetime(2026, 12, 5, 18, tzinfo=dt.timezone.utc)
    planned = tasks.plan_cells.function("unet_torch_voc2007", GPU_GROUPS, "accuracy",
                                        **scheduled_at(saturday, profile="full", epochs=[100], repeats=1))
    assert [(c["gpus"], c["epochs"], c["repeat"], c["profile"], c["run_type"]) for c in planned] == \
        [(n, 100, 1, "full", "accuracy") for n in (1, 2, 3, 4)] and not noted


@pytest.mark.parametrize("when, hosts", [
    (dt.datetime(2026, 12, 1, 0, tzinfo=dt.timezone.utc), 2),   # a Tuesday: both GPU hosts
    (dt.datetime(2026, 12, 6, 0, tzinfo=dt.timezone.utc), 0),   # Sunday: inside the weekly accuracy window
])
def test_the_host_probe_plans_its_cells_on_every_gpu_host(noted, monkeypatch, when, hosts):
    from scalebench.store.results import Store
    from tests.support import ROOT

    monkeypatch.setenv("SCALEBENCH_FLEET", str(ROOT / "include/configs/fleet.gpu-example.yaml"))
    groups = ["gpu_node_1_1gpu", "gpu_node_2_1gpu"]
    planned = tasks.plan_cells.function("unet_torch_voc2007", groups, "probe",
                                        **scheduled_at(when, gpu_counts=[1], repeats=2))
    assert len(planned) == 24 * hosts  # the fleet's cells a night, not the trigger's repeats
    for c in planned:
        assert (c["role"], c["dag_id"], c["gpus"], c["run_type"], c["precision"]) == \
            ("probe", "scalebench_host_probe", 1, "scheduled", "bf16")
    assert {c["host"] for c in planned} == {f"gpu-node-{i}" for i in range(1, hosts + 1)}
    assert not Store().runs(when.date().isoformat())  # a skipped probe records no benchmark's run as skipped
    # the probe is never rerun: plan_reruns has nothing to plan from its cells
    assert tasks.plan_reruns("unet_torch_voc2007", planned, scheduled_at(when)) == []


def test_a_gpu_run_plans_every_cell_on_the_benchmarks_assigned_host(noted, monkeypatch, tmp_path):
    import yaml

    from scalebench.store.results import Store

    hosts = [{"name": f"gpu-node-{i}", "kind": "gpu", "queue": f"gpu-node-{i}", "device_ids": ["0", "1", "2", "3"]}
             for i in (1, 2)]
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump({"hosts": hosts}))
    monkeypatch.setenv("SCALEBENCH_FLEET", str(tmp_path / "fleet.yaml"))
    groups = [f"gpu_node_{i}_{n}gpu" for i in (1, 2) for n in (1, 2, 3, 4)]
    hosts_of = {}
    for bench in ("resnet50_keras_cifar10", "unet_torch_voc2007", "maskrcnn_mmdet_voc2012"):
        planned = tasks.plan_cells.function(bench, groups, **context(profile="nightly", gpu_counts=[1, 2, 3, 4]))
        hosts_of[bench] = {c["host"] for c in planned}
    stored = Store().assignments()
    assert len(stored) == 6  # settled for every benchmark at once, as the nights decide it
    assert all(hosts == {stored[b]["host"]} for b, hosts in hosts_of.items())  # one host per run: like for like
    assert {r["host"] for r in stored.values()} == {"gpu-node-1", "gpu-node-2"}


def test_plan_cells_skips_the_tasks_of_groups_and_hosts_without_cells_at_once(tmp_path):
    """A run plans on one host and some GPU counts; the other groups' cell slices and the other
    hosts' dataset checks are skipped by plan_cells itself, without a task process each."""
    import yaml
    from airflow.sdk.exceptions import DownstreamTasksSkipped

    from scalebench.core.config import Configs
    from scalebench.orchestration.dags.dag_factory import build_benchmark_dag

    hosts = [{"name": f"gpu-node-{i}", "kind": "gpu", "queue": f"q{i}", "device_ids": ["0", "1", "2", "3"]} for i in (1, 2)]
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump({"hosts": hosts}))
    gpu = Configs(fleet_path=tmp_path / "fleet.yaml")
    dag = build_benchmark_dag(gpu.benchmark("unet_torch_voc2007"), gpu.fleet)
    pushed = {}
    ctx = {"dag": dag, "ti": SimpleNamespace(xcom_push=lambda key, value: pushed.update({key: value}))}
    planned = [{"host": "gpu-node-2", "gpus": 2, "group": "gpu_node_2_2gpu"}]
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        tasks.skip_idle(planned, ctx)
    assert sorted(skipped.value.tasks) == ["check_dataset_gpu_node_1"] + sorted(
        f"gpu_node_{i}_{n}gpu.cells" for i in (1, 2) for n in (1, 2, 3, 4) if (i, n) != (2, 2))
    assert pushed == {"return_value": planned}  # what the cell slices and dataset checks read
    assert not [t for t in skipped.value.tasks if t.startswith(("reruns.", "more_pairs."))]
    # record does the same for the rerun step: reruns at 2 GPUs on gpu-node-2 start that group's slice only
    assert sorted(tasks.idle_tasks(dag.task_ids, planned, tasks.RERUNS)) == sorted(
        f"reruns.gpu_node_{i}_{n}gpu.cells" for i in (1, 2) for n in (1, 2, 3, 4) if (i, n) != (2, 2))
    everything = [{"host": f"gpu-node-{i}", "gpus": n, "group": f"gpu_node_{i}_{n}gpu"} for i in (1, 2) for n in (1, 2, 3, 4)]
    assert tasks.skip_idle(everything, ctx) == everything  # nothing idle: an ordinary return
