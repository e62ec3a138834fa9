import copy
import json
import os
import subprocess
import sys

import pytest
from airflow.sdk.exceptions import ParamValidationError

from scalebench.core.config import Configs
from tests.support import ROOT


@pytest.fixture(scope="module")
def dagbag():
    os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(ROOT / "dags"))


def test_dagbag_has_one_dag_per_config_and_the_report_dag(dagbag):
    assert dagbag.import_errors == {}
    benchmarks = Configs().benchmarks
    expected = ({f"scalebench_{b}" for b in benchmarks} | {f"scalebench_{b}_accuracy" for b in benchmarks}
                | {"scalebench_nightly_report", "scalebench_maintenance", "scalebench_bisect", "scalebench_allreduce"})
    assert set(dagbag.dags) == expected
    assert len(expected) == 16
    maintenance = dagbag.dags["scalebench_maintenance"]
    assert maintenance.timetable.summary == "0 5 * * 0" and set(maintenance.task_ids) == {"prune"}
    sweeps = dagbag.dags["scalebench_allreduce"]  # the local host's counts above 1, on its queue and pool
    [sweep] = sweeps.tasks
    assert sweeps.timetable.summary == "0 4 * * 6" and sweep.task_id == "sweep_local"
    assert (sweep.queue, sweep.pool, sweep.pool_slots) == ("default", "scalebench_local", 4)


@pytest.mark.parametrize("dag_id, now", [
    ("scalebench_resnet50_keras_cifar10", "2026-12-01T01:30:00"),  # half an hour after its cron time
    ("scalebench_nightly_report", "2026-12-01T07:01:00"),
    ("scalebench_maintenance", "2026-12-06T05:10:00"),  # a Sunday
])
def test_unpausing_waits_for_the_next_cron_time_instead_of_running_the_past_one(dagbag, dag_id, now, monkeypatch):
    import datetime as dt

    from airflow.timetables.base import TimeRestriction

    dag = dagbag.dags[dag_id]
    assert dag.start_date is None and not dag.catchup
    frozen = dt.datetime.fromisoformat(now).replace(tzinfo=dt.timezone.utc)
    monkeypatch.setattr("airflow.timetables.trigger.utcnow", lambda: frozen)
    first = dag.timetable.next_dagrun_info(last_automated_data_interval=None,
                                           restriction=TimeRestriction(earliest=None, latest=None, catchup=False))
    assert first.run_after > frozen  # the past time would start a full night of cells at once
    assert (first.run_after - frozen) < dt.timedelta(days=7)


def test_task_chain_routing_and_names(dagbag):
    dag = dagbag.dags["scalebench_resnet50_keras_cifar10"]
    assert dag.timetable.summary == "0 1 * * *"
    assert dag.get_task("check_dataset_local").upstream_task_ids == {"plan_cells"}
    assert dag.get_task("check_dataset_local").queue == "default"  # the host's own queue
    for n in (1, 2, 3, 4):
        train = dag.get_task(f"local_{n}gpu.train")
        assert (train.partial_kwargs["pool"], train.partial_kwargs["pool_slots"], train.partial_kwargs["queue"]) == \
            ("scalebench_local", n, "default")
        assert "check_dataset_local" in train.upstream_task_ids
        assert f"local_{n}gpu.train" in dag.get_task("record").upstream_task_ids  # validated inside the cell task
        rerun = dag.get_task(f"reruns.local_{n}gpu.rerun")  # same routing; cells from record's decision
        assert rerun.partial_kwargs["pool_slots"] == n and f"reruns.local_{n}gpu.cells" in rerun.upstream_task_ids
        assert "check_dataset_local" in rerun.upstream_task_ids
        assert dag.get_task(f"reruns.local_{n}gpu.cells").upstream_task_ids == {"record"}
        assert f"reruns.local_{n}gpu.rerun" in dag.get_task("record_reruns").upstream_task_ids
    assert not [t for t in dag.task_ids if t.endswith(".validate")]
    assert dag.get_task("record").upstream_task_ids == {"plan_cells"} | {f"local_{n}gpu.train" for n in (1, 2, 3, 4)}
    # an A/B that says "unknown" adds pairs in a second round, on the same routing
    for n in (1, 2, 3, 4):
        more = dag.get_task(f"more_pairs.local_{n}gpu.more")
        assert more.partial_kwargs["pool_slots"] == n and f"more_pairs.local_{n}gpu.cells" in more.upstream_task_ids
        assert f"more_pairs.local_{n}gpu.more" in dag.get_task("record_more_pairs").upstream_task_ids
    assert dag.get_task("plan_more_pairs").downstream_task_ids == {f"more_pairs.local_{n}gpu.cells" for n in (1, 2, 3, 4)}
    assert "record_reruns" in dag.get_task("record_more_pairs").upstream_task_ids
    # record's one decision: with nothing flagged it skips exactly these, and finish follows record at once
    from scalebench.orchestration.dags.benchmark_tasks import rerun_steps

    skipped = set(rerun_steps(dag.task_ids))
    assert skipped == {t for t in dag.task_ids if t.startswith(("reruns.", "more_pairs."))} | {
        "record_reruns", "plan_more_pairs", "record_more_pairs"} and len(skipped) == 16 + 3
    assert dag.get_task("finish").upstream_task_ids == {"record", "record_more_pairs"}
    assert dag.get_task("finish").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("check_cells").upstream_task_ids == {"record"}
    assert {t for t in dag.task_ids if t not in skipped} == {"plan_cells", "check_dataset_local", "record",
                                                            "check_cells", "finish"} | {
        f"local_{n}gpu.{t}" for n in (1, 2, 3, 4) for t in ("cells", "train")}
    # the report is triggered once the reruns and pairs are in
    assert dag.get_task("finish").outlets[0].name == "scalebench_results_resnet50_keras_cifar10"
    assert not [t for t in dag.task_ids if t != "finish" and dag.get_task(t).outlets]


@pytest.mark.parametrize("bad, why", [
    ({"gpu_counts": [5]}, "5 is not one of [1, 2, 3, 4]"),
    ({"gpu_counts": []}, "should be non-empty"),
    ({"epochs": ["1; rm -rf /"]}, "'1; rm -rf /' is not of type 'integer'"),
    ({"repeats": 11}, "11 is greater than the maximum of 10"),
    ({"profile": "huge"}, "'huge' is not one of ['smoke', 'nightly', 'full']"),
    ({"profile": "../smoke"}, "'../smoke' is not one of ['smoke', 'nightly', 'full']"),
    ({"gpu_counts": ["2"]}, "'2' is not of type 'integer'"),
    ({"seed": "0; id"}, "'0; id' is not of type 'integer'"),
    ({"image_tag": "evil/image:latest"}, "does not match"),   # a tag, never another repository
    ({"image_tag": "{{ var.value.x }}"}, "does not match"),
    ({"ab_images": ["evil/image:latest"]}, "does not match"),
    ({"ab_images": ["a", "a"]}, "has non-unique elements"),
])
def test_params_reject_bad_trigger_input(dagbag, bad, why):
    params = copy.deepcopy(dagbag.dags["scalebench_resnet50_keras_cifar10"].params)
    with pytest.raises(ParamValidationError) as err:
        params.update(bad)  # ParamsDict validates on assignment, as a trigger does
        params.validate()
    assert why in str(err.value)


def test_the_tasks_read_the_trigger_form_as_one_typed_object(dagbag):
    from scalebench.orchestration.dags.run_params import PARAM_NAMES, RunParams

    for dag_id in ("scalebench_resnet50_keras_cifar10", "scalebench_resnet50_keras_cifar10_accuracy"):
        params = dagbag.dags[dag_id].params
        assert set(params.keys()) == set(PARAM_NAMES), dag_id  # every field of the form, and no other
    form = dict(dagbag.dags["scalebench_resnet50_keras_cifar10"].params.dump()) | {"epochs": [], "image_tag": ""}
    p = RunParams.of(form)
    assert (p.profile, p.epochs, p.image_tag, p.precisions, p.ab_images) == ("smoke", None, None, None, None)
    assert p.gpu_counts == form["gpu_counts"] and p.repeats == form["repeats"] and p.seed == 0


def test_default_profile_follows_the_fleet(dagbag):
    params = dagbag.dags["scalebench_unet_torch_voc2007"].params
    assert params["profile"] == "smoke" and params["gpu_counts"] == [1, 2, 3, 4]
    # a CPU-only fleet has no weekly accuracy run: its DAG is there to trigger, never scheduled
    accuracy = dagbag.dags["scalebench_unet_torch_voc2007_accuracy"]
    assert type(accuracy.timetable).__name__ == "NullTimetable" and accuracy.params["profile"] == "smoke"


def test_every_task_that_touches_a_hosts_disk_or_engine_runs_on_its_queue(tmp_path):
    import yaml

    from scalebench.orchestration.dags.dag_factory import build_benchmark_dag

    hosts = [{"name": f"gpu-node-{i}", "kind": "gpu", "queue": f"q{i}", "device_ids": ["0", "1", "2", "3"]}
             for i in (1, 2)]
    (tmp_path / "fleet.yaml").write_text(yaml.safe_dump({"hosts": hosts}))
    gpu = Configs(fleet_path=tmp_path / "fleet.yaml")
    dag = build_benchmark_dag(gpu.benchmark("unet_torch_voc2007"), gpu.fleet)
    for i in (1, 2):
        check = dag.get_task(f"check_dataset_gpu_node_{i}")
        assert check.queue == f"q{i}"
        for n in (1, 2, 3, 4):
            for name in ("train", "reruns.{}.rerun", "more_pairs.{}.more"):
                gid = f"gpu_node_{i}_{n}gpu"
                task = dag.get_task(f"{gid}.{name}" if name == "train" else name.format(gid))
                assert task.partial_kwargs["queue"] == f"q{i}" and check.task_id in task.upstream_task_ids
                assert f"check_dataset_gpu_node_{3 - i}" not in task.upstream_task_ids


def test_the_weekly_accuracy_dag_runs_the_full_profile_cut_on_a_gpu_fleet():
    from scalebench.orchestration.dags.dag_factory import build_benchmark_dag

    gpu = Configs(fleet_path=ROOT / "include/configs/fleet.gpu-example.yaml")
    bench = gpu.benchmark("resnet50_keras_cifar10")
    dag = build_benchmark_dag(bench, gpu.fleet, "accuracy")
    assert dag.dag_id == "scalebench_resnet50_keras_cifar10_accuracy" and "accuracy" in dag.tags
    assert dag.timetable.summary == "0 18 * * 6"  # the fleet's accuracy_schedule
    assert (dag.params["profile"], dag.params["epochs"], dag.params["repeats"]) == ("full", [70], 3)
    assert set(dag.task_ids) == set(build_benchmark_dag(bench, gpu.fleet).task_ids)  # the same tasks
    assert dag.get_task("plan_cells").op_args[2] == "accuracy"


def test_the_host_probe_dag_runs_its_cells_on_every_gpu_host_on_its_queue():
    from scalebench.orchestration.dags.dag_factory import build_all

    gpu = Configs(fleet_path=ROOT / "include/configs/fleet.gpu-example.yaml")
    dags = build_all(gpu)
    dag = dags["scalebench_host_probe"]
    assert dag.timetable.summary == "0 0 * * *" and "probe" in dag.tags  # before the benchmarks at 01:00
    assert (dag.params["gpu_counts"], dag.params["repeats"], dag.params["profile"]) == ([1], 24, "nightly")
    for i in (1, 2):  # every GPU host, none of the CPU ones
        train = dag.get_task(f"gpu_node_{i}_1gpu.train")
        assert train.partial_kwargs["queue"] == f"gpu-node-{i}" and train.partial_kwargs["pool_slots"] == 1
        assert dag.get_task(f"check_dataset_gpu_node_{i}").queue == f"gpu-node-{i}"
    assert not [t for t in dag.task_ids if t.startswith("local_")]
    assert not dag.get_task("finish").outlets  # the probe's run starts no report
    assert dag.get_task("plan_cells").op_args[2] == "probe"
    # a probe naming a benchmark that does not load is a placeholder DAG with the fleet's field
    bad = Configs(fleet_path=ROOT / "include/configs/fleet.gpu-example.yaml")
    bad.fleet = bad.fleet.model_copy(update={"probe": bad.fleet.probe.model_copy(update={"benchmark": "nope"})})
    placeholder = build_all(bad)["scalebench_host_probe"]
    assert "config-error" in placeholder.tags and "fleet: field 'probe.benchmark'" in placeholder.doc_md
    # the CPU-only fleet has no probe
    assert "scalebench_host_probe" not in build_all(Configs())


def test_parsing_dags_imports_nothing_heavy():
    code = ("import runpy, sys; runpy.run_path('dags/scalebench_benchmarks.py'); "
            "runpy.run_path('dags/scalebench_nightly_report.py'); "
            "print([m for m in ('pandas', 'great_expectations', 'matplotlib', 'tensorflow', 'torch', 'scalebench.store.results', 'alembic') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1].replace("'", '"')) == []


def test_one_broken_config_fails_only_its_own_dag(config_tree, monkeypatch):
    import yaml
    from airflow.dag_processing.dagbag import DagBag

    bad = config_tree / "benchmarks" / "unet_torch_voc2007.yaml"
    doc = yaml.safe_load(bad.read_text())
    doc["per_gpu_batch"] = -3
    bad.write_text(yaml.safe_dump(doc))
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(config_tree))
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {}
    assert len(bag.dags) == 15 and "scalebench_nightly_report" in bag.dags  # 5 benchmarks x 2, a placeholder, 4
    placeholder = bag.dags["scalebench_unet_torch_voc2007"]
    assert "config-error" in placeholder.tags and type(placeholder.timetable).__name__ == "NullTimetable"  # never scheduled
    assert f"{bad}: field 'per_gpu_batch': Input should be greater than 0 (got -3)" in placeholder.doc_md
    assert placeholder.task_ids == ["config_error"]
    good = bag.dags["scalebench_resnet50_keras_cifar10"]
    assert "local_2gpu.train" in good.task_ids and "config-error" not in good.tags


def test_the_report_is_written_for_the_nights_of_the_runs_that_triggered_it():
    import datetime as dt
    from types import SimpleNamespace as Event

    from scalebench.orchestration.dags.report_dag import nights_to_report

    late = {"asset_a": [Event(extra={"night": "2026-11-28"}), Event(extra={"night": "2026-11-29"})],
            "asset_b": [Event(extra={"night": "2026-11-28"}), Event(extra={})]}
    run_after = dt.datetime(2026, 11, 30, 7, tzinfo=dt.timezone.utc)
    assert nights_to_report(late, None, run_after) == ["2026-11-28", "2026-11-29"]
    assert nights_to_report({}, None, run_after) == ["2026-11-30"]  # the 07:00 cron: that day's night
    assert nights_to_report({}, "2026-11-01", run_after) == ["2026-11-01"]


def test_the_bisect_dag_triggers_each_step_on_the_benchmarks_own_dag_and_waits(dagbag):
    from scalebench.orchestration.dags.bisect_dag import MAX_STEPS, step_run_id

    dag = dagbag.dags["scalebench_bisect"]
    assert type(dag.timetable).__name__ == "NullTimetable"  # triggered only (from an alert's link)
    assert set(dag.params.get_param("benchmark").schema["enum"]) == set(Configs().benchmarks)
    for k in range(1, MAX_STEPS + 1):
        run = dag.get_task(f"run_step_{k}")
        assert run.trigger_dag_id == "scalebench_{{ params.benchmark }}" and run.wait_for_completion
        assert run.trigger_run_id == step_run_id("{{ run_id }}", k)  # the judge reads the same run
        assert run.upstream_task_ids == {f"plan_step_{k}"}
        assert dag.get_task(f"judge_step_{k}").upstream_task_ids == ({"start"} if k == 1 else {f"judge_step_{k - 1}"}) | {
            f"run_step_{k}"}
    assert dag.get_task("result").upstream_task_ids == {f"judge_step_{MAX_STEPS}"}
    params = copy.deepcopy(dag.params)
    with pytest.raises(ParamValidationError, match="does not match"):  # a tag, never another repository
        params.update({"bad": "evil/image:latest"})
        params.validate()


def _ui_structures(dag) -> tuple[list, list]:
    """What the UI's Graph (structure_data) and Grid (grid/structure) routes build from the stored
    DAG: the serialized DAG read back, its task groups sorted both ways the grid may sort them."""
    from airflow.api_fastapi.core_api.services.ui.task_group import task_group_to_dict, task_group_to_dict_grid
    from airflow.serialization.serialized_objects import DagSerialization

    stored = DagSerialization.from_dict(DagSerialization.to_dict(dag))
    groups = stored.task_group.get_task_group_dict()
    graph = [task_group_to_dict(c, group_dict=groups) for c in stored.task_group.topological_sort(group_dict=groups)]
    grid = [task_group_to_dict_grid(c, group_dict=groups) for c in stored.task_group.topological_sort(group_dict=groups)]
    grid += [task_group_to_dict_grid(c, group_dict=groups) for c in stored.task_group.hierarchical_alphabetical_sort()]
    return graph, grid


def test_every_dag_we_make_opens_in_the_grid_and_graph_views(config_tree, monkeypatch):
    """The Grid and Graph views sort task groups topologically: a group that both feeds and follows
    another one (a cycle between groups, not tasks) makes them answer 500."""
    import yaml
    from airflow.dag_processing.dagbag import DagBag

    from scalebench.orchestration.dags.dag_factory import build_all

    seventh = yaml.safe_load((config_tree / "benchmarks" / "unet_torch_voc2007.yaml").read_text())
    (config_tree / "benchmarks" / "unet_seventh.yaml").write_text(yaml.safe_dump({**seventh, "id": "unet_seventh"}))
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(config_tree))
    bag = DagBag(dag_folder=str(ROOT / "dags"))
    assert bag.import_errors == {} and "scalebench_unet_seventh_accuracy" in bag.dags
    # seven benchmarks x 2 and four more; on the GPU example fleet (two hosts) seven x 2 and the probe
    gpu = build_all(Configs(fleet_path=ROOT / "include/configs/fleet.gpu-example.yaml"))
    dags = {**bag.dags, **{f"gpu:{k}": d for k, d in gpu.items()}}
    assert len(dags) == 18 + 15 and "gpu:scalebench_host_probe" in dags
    opened = {}
    for name, dag in dags.items():
        graph, grid = _ui_structures(dag)
        opened[name] = len(graph)
        assert graph and grid, name
    assert sorted(opened) == sorted(dags)


@pytest.mark.parametrize("parsing_for, built", [
    ("scalebench_unet_torch_voc2007_accuracy", ["scalebench_unet_torch_voc2007_accuracy"]),
    ("scalebench_resnet50_keras_cifar10", ["scalebench_resnet50_keras_cifar10"]),
    ("scalebench_nightly_report", None),  # another file's DAG, or the dag-processor (no context): every DAG
    (None, None),
])
def test_a_task_process_builds_only_its_own_dag(monkeypatch, parsing_for, built):
    import runpy

    from airflow.sdk import DAG

    if parsing_for:  # what Airflow's task runner sets while it parses the file for a task
        monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", parsing_for)
    else:
        monkeypatch.delenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", raising=False)
    found = sorted(k for k, v in runpy.run_path(str(ROOT / "dags/scalebench_benchmarks.py")).items()
                   if isinstance(v, DAG))
    assert found == (built or sorted(f"scalebench_{b}{s}" for b in Configs().benchmarks for s in ("", "_accuracy")))
