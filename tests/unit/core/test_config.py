import re

import pytest
import yaml

from scalebench.core.config import ConfigError, Configs

STUDY = {  # id: (per-GPU batch, epochs, metrics)
    "resnet50_keras_cifar10": (800, [40, 50, 60, 70], ["precision", "recall"]),
    "unet_torch_voc2007": (30, [70, 80, 90, 100], ["iou", "precision", "recall"]),
    "frcnn_tf_voc2007": (5, [5, 10, 15, 20], ["precision", "recall", "iou", "map50"]),
    "frcnn_mmdet_voc2007": (16, [5, 10, 15, 20], ["precision", "recall", "iou", "map50"]),
    # the study's IoU of the mask models is the mask IoU; box mAP@0.5 and mask mAP beside it
    "maskrcnn_mmdet_voc2012": (10, [5, 10, 15, 20], ["mask_iou", "map50", "mask_map50", "mask_map"]),
    "msrcnn_mmdet_voc2012": (5, [5, 10, 15, 20], ["mask_iou", "map50", "mask_map50", "mask_map"]),
}


def test_the_six_study_configs_load_with_the_study_values():
    configs = Configs()
    assert set(configs.benchmarks) == set(STUDY)
    for bid, (batch, epochs, metrics) in STUDY.items():
        b = configs.benchmark(bid)
        assert (b.per_gpu_batch, b.epochs, b.metrics, b.gpu_counts) == (batch, epochs, metrics, [1, 2, 3, 4])
        assert b.scaling_mode == "weak"
        full = b.resolved("full")
        assert full.batches(4) == (batch, batch * 4)


def test_profiles_change_sizes_but_never_the_code_path():
    b = Configs().benchmark("resnet50_keras_cifar10")
    smoke, full = b.resolved("smoke"), b.resolved("full")
    assert smoke.per_gpu_batch < full.per_gpu_batch and smoke.synthetic_data and not full.synthetic_data
    # entrypoint, model and launcher are not profile fields at all
    assert {"entrypoint", "model", "launcher", "images"}.isdisjoint(type(b.profiles["smoke"]).model_fields)


def _edit(tree, bench_id, fn):
    path = tree / "benchmarks" / f"{bench_id}.yaml"
    doc = yaml.safe_load(path.read_text())
    fn(doc)
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.mark.parametrize("edit, field, expected", [
    (lambda d: d.pop("per_gpu_batch"), "per_gpu_batch", "required field missing"),
    (lambda d: d.update(per_gpu_batch="lots"), "per_gpu_batch", "valid integer"),
    (lambda d: d.update(epoch=[1]), "epoch", "unknown key"),
    (lambda d: d.update(epochs=[]), "epochs", "at least 1 item"),
    (lambda d: d["profiles"]["smoke"].update(entrypoint=["python", "x.py"]), "profiles.smoke.entrypoint", "unknown key"),
    (lambda d: d.update(bounds={"precision": [0.9, 0.1], "recall": [0, 1]}), "bounds", "lower 0.9 is above upper 0.1"),
    (lambda d: d["dataset"].update(path="../../etc"), "dataset.path", "below the host's data_root without '..'"),
    (lambda d: d["dataset"].update(path="/etc"), "dataset.path", "relative path below"),
    (lambda d: d["images"].update(cpu="{{ dag_run.conf['image'] }}"), "images", "not a plain image reference"),
    (lambda d: d.update(entrypoint=["sh", "-c", "{{ dag_run.conf.cmd }}"]), "entrypoint", "only placeholder allowed"),
    (lambda d: d.update(entrypoint=["python", "--x={epochs}"]), "entrypoint", "only placeholder allowed"),
])
def test_bad_benchmark_file_names_file_field_and_expectation(config_tree, edit, field, expected):
    path = _edit(config_tree, "resnet50_keras_cifar10", edit)
    with pytest.raises(ConfigError) as err:
        Configs(config_tree, config_tree / "fleet.yaml").benchmarks
    msg = str(err.value)
    assert str(path) in msg and f"'{field}" in msg and expected in msg, msg


def test_gpu_count_above_the_fleet_is_rejected(config_tree):
    path = _edit(config_tree, "unet_torch_voc2007", lambda d: d.update(gpu_counts=[1, 2, 8]))
    with pytest.raises(ConfigError, match=re.escape(f"{path}: field 'gpu_counts': [8] above the largest host")):
        Configs(config_tree, config_tree / "fleet.yaml").benchmarks


def test_strong_scaling_needs_a_global_batch_that_divides(config_tree):
    _edit(config_tree, "unet_torch_voc2007", lambda d: d.update(scaling_mode="strong", global_batch=50))
    with pytest.raises(ConfigError, match="global_batch 50 does not divide over 3 GPUs"):
        Configs(config_tree, config_tree / "fleet.yaml").benchmarks
    _edit(config_tree, "unet_torch_voc2007", lambda d: d.update(global_batch=120))
    res = Configs(config_tree, config_tree / "fleet.yaml").benchmark("unet_torch_voc2007").resolved("full")
    assert [res.batches(n) for n in (1, 2, 3, 4)] == [(120, 120), (60, 120), (40, 120), (30, 120)]


def test_bad_fleet_file(config_tree):
    fleet = config_tree / "fleet.yaml"
    fleet.write_text("hosts:\n  - {name: local, kind: tpu, queue: default, device_ids: ['0']}\n")
    with pytest.raises(ConfigError, match=r"fleet.yaml: field 'hosts.0.kind': Input should be 'cpu' or 'gpu' \(got 'tpu'\)"):
        Configs(config_tree, fleet)


def test_cli_configs_prints_all_six(capsys):
    from scalebench.cli import main

    assert main(["configs", "-o", "json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert {b: (v["per_gpu_batch"], v["epochs"]) for b, v in out["benchmarks"].items()} == \
        {b: (s[0], s[1]) for b, s in STUDY.items()}
    assert main(["configs"]) == 0  # a table for a person: one row per benchmark, then the fleet
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["benchmark", "framework", "model"]
    assert sorted(line.split()[0] for line in lines[1:-1]) == sorted(STUDY) and lines[-1].startswith("fleet: local")


def test_cli_reports_config_errors_without_a_traceback(config_tree, capsys, monkeypatch):
    from scalebench.cli import main

    _edit(config_tree, "resnet50_keras_cifar10", lambda d: d.update(epochs=[]))
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(config_tree))
    assert main(["configs"]) == 2
    assert "field 'epochs'" in capsys.readouterr().err


@pytest.mark.parametrize("change, same", [
    ({"lr_policy": {"rule": "sqrt", "base_lr": 0.01, "reference_batch": 256}}, False),
    ({"entrypoint": ["python", "-m", "trainers.other"]}, False),
    ({"images": {"cpu": "scalebench/tensorflow:next", "gpu": "scalebench/tensorflow:gpu"}}, False),
    ({"launcher": "torchrun"}, False),
    ({"warmup_steps": 5}, False),
    ({"schedule": "0 3 * * *", "retries": 5, "title": "renamed", "cell_timeout_minutes": 99}, True),
])
def test_config_identity_covers_what_changes_a_result(change, same):
    from scalebench.core.config import Benchmark
    from scalebench.store.results import config_sha

    base = Configs().benchmark("resnet50_keras_cifar10")
    other = Benchmark.model_validate({**base.model_dump(), **change})
    sha = [config_sha({"provenance": {"resolved_config": b.resolved("full").summary()}}) for b in (base, other)]
    assert (sha[0] == sha[1]) is same


def test_configs_are_found_from_the_working_directory_without_an_editable_install(tmp_path, monkeypatch):
    from scalebench.core import paths

    monkeypatch.delenv("SCALEBENCH_CONFIG_DIR", raising=False)
    monkeypatch.delenv("SCALEBENCH_PROJECT_DIR", raising=False)
    monkeypatch.setattr(paths, "__file__", str(tmp_path / "site-packages" / "scalebench" / "core" / "paths.py"))
    project = tmp_path / "checkout"
    (project / "include" / "configs").mkdir(parents=True)
    (project / "dags").mkdir()
    monkeypatch.chdir(project / "dags")
    assert paths.config_dir() == project / "include" / "configs"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(paths.ProjectNotFound, match="set SCALEBENCH_CONFIG_DIR .* looked up from"):
        paths.config_dir()
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(project / "include" / "configs"))
    assert paths.config_dir() == project / "include" / "configs"
