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
    (lambda d: d.update(images={"cpu": "{{ dag_run.conf['image'] }}"}), "images", "not a plain image reference"),
    (lambda d: d.update(stack="jax"), "stack", "unknown stack 'jax'; expected one of ['mmdet', 'tensorflow', "
                                               "'tf-detection', 'torch']"),
    (lambda d: d["dataset"].update(format="vocdevkit-2007-seg"), "dataset.format",
     "stack 'tensorflow' reads ['cifar10-python'], got 'vocdevkit-2007-seg'"),
    (lambda d: d.update(entrypoint=["sh", "-c", "{{ dag_run.conf.cmd }}"]), "entrypoint", "only placeholder allowed"),
    (lambda d: d.update(entrypoint=["python", "--x={epochs}"]), "entrypoint", "only placeholder allowed"),
    (lambda d: d.update(precision="fp8"), "precision", "Input should be 'fp32', 'tf32', 'bf16' or 'fp16'"),
    (lambda d: d.update(precision=["bf16", "bf16"]), "precision", "precisions must not repeat"),
    (lambda d: d["profiles"]["smoke"].update(precision="fp16"), "profiles.smoke.precision",
     "(profile 'smoke'): precision fp16 cannot run on CPU hosts with stack 'tensorflow' (tf32 is a CUDA tensor-core "
     "mode and fp16 needs CUDA kernels); expected some of ['fp32', 'bf16']"),
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
    assert lines[0].split()[:3] == ["benchmark", "stack", "model"]
    assert sorted(line.split()[0] for line in lines[1:-3]) == sorted(STUDY) and lines[-3].startswith("fleet: local")
    assert lines[-2:] == ["alerts: none", "acknowledged shifts: 0"]  # the other two files are validated too


def test_cli_reports_config_errors_without_a_traceback(config_tree, capsys, monkeypatch):
    from scalebench.cli import main

    _edit(config_tree, "resnet50_keras_cifar10", lambda d: d.update(epochs=[]))
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(config_tree))
    assert main(["configs"]) == 2
    assert "field 'epochs'" in capsys.readouterr().err


@pytest.mark.parametrize("change, same", [
    ({"lr_policy": {"rule": "sqrt", "base_lr": 0.01, "reference_batch": 256}}, False),
    ({"entrypoint": ["python", "-m", "trainers.other"]}, False),
    # a new image is judged as an image (its reference and digest are in the fingerprint), not as an edit
    ({"images": {"cpu": "scalebench/tensorflow:next", "gpu": "scalebench/tensorflow:gpu"}}, True),
    ({"stack": "torch"}, False),
    ({"warmup_steps": 5}, False),
    ({"schedule": "0 3 * * *", "retries": 5, "title": "renamed", "cell_timeout_minutes": 99}, True),
])
def test_config_identity_covers_what_changes_a_result(change, same):
    from scalebench.core.config import Benchmark
    from scalebench.store.results import config_sha

    base = Configs().benchmark("resnet50_keras_cifar10")
    other = Benchmark.model_validate({**base.model_dump(), **change})
    other._stack = Configs().stacks.stacks[other.stack]  # as load_benchmark attaches it
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


@pytest.mark.parametrize("edit, expected", [
    (lambda s: s["stacks"]["mmdet"].update(base="pytorch"), "field 'stacks': Value error, stacks.mmdet.base: 'pytorch' "
                                                            "is not a stack"),
    (lambda s: s["stacks"]["torch"].update(base="mmdet"), "stacks.yaml: field 'stacks': Value error, stacks.mmdet.base: a cycle mmdet -> torch -> mmdet"),
    (lambda s: s["stacks"]["torch"].update(formats=["parquet"]), "field 'stacks.torch.formats.0': Input should be"),
    (lambda s: s["stacks"]["torch"].pop("launcher"), "field 'stacks.torch.launcher': required field missing"),
    (lambda s: s["datasets"]["cifar10"]["archives"][0].update(sha256="abc"), "field 'datasets.cifar10.archives.0.sha256'"),
])
def test_a_bad_stacks_file_names_the_field(config_tree, edit, expected):
    stacks = yaml.safe_load((config_tree / "stacks.yaml").read_text())
    edit(stacks)
    (config_tree / "stacks.yaml").write_text(yaml.safe_dump(stacks))
    with pytest.raises(ConfigError) as err:
        Configs(config_tree, config_tree / "fleet.yaml").benchmarks
    assert str(config_tree / "stacks.yaml") in str(err.value) and expected in str(err.value), str(err.value)


def test_stacks_are_built_after_their_base_and_each_has_its_folder():
    from tests.support import ROOT

    stacks = Configs().stacks
    order = stacks.build_order()
    assert order.index("tensorflow") < order.index("tf-detection") and order.index("torch") < order.index("mmdet")
    for name in order:
        assert (ROOT / "containers" / name / "Dockerfile").is_file(), name
    assert {b.stack for b in Configs().benchmarks.values()} == set(order)


def test_a_seventh_benchmark_on_a_known_stack_is_one_yaml_file(config_tree, monkeypatch):
    """Another dataset in a known format on the UNet's stack and trainer: only a benchmark file.
    Its plan, cell spec settings and image follow from the stacks file."""
    from scalebench.cell.container import settings
    from scalebench.core.cells import plan

    doc = yaml.safe_load((config_tree / "benchmarks" / "unet_torch_voc2007.yaml").read_text())
    doc.update(id="unet_torch_voc2007_small", title="UNet, half the batch", per_gpu_batch=15)
    (config_tree / "benchmarks" / "unet_torch_voc2007_small.yaml").write_text(yaml.safe_dump(doc))
    configs = Configs(config_tree, config_tree / "fleet.yaml")
    b = configs.benchmark("unet_torch_voc2007_small")
    host = configs.fleet.hosts[0]
    [cell] = plan(b, configs.fleet, profile="smoke", run_id="manual__x", gpu_counts=[2])
    s = settings(b, host, cell, ["0", "1"], "/data", "/results/x")
    assert b.images == {"cpu": "scalebench/torch:cpu", "gpu": "scalebench/torch:gpu"} and s.image == "scalebench/torch:cpu"
    assert s.environment["OMP_NUM_THREADS"] == str(host.threads_per_device)  # torchrun: one process per device
    assert s.command[:3] == ["torchrun", "--standalone", "--nproc-per-node=2"]


def test_a_new_stack_is_a_stacks_entry_and_a_container_folder(config_tree, tmp_path):
    """No edit to src/, the Makefile or containers/resolve.sh: the stacks file names it."""
    from scalebench.cell.container import settings

    stacks = yaml.safe_load((config_tree / "stacks.yaml").read_text())
    stacks["stacks"]["jax"] = {"title": "JAX with pmap", "images": {"cpu": "scalebench/jax:cpu", "gpu": "scalebench/jax:gpu"},
                               "base": None, "launcher": "jax-pmap", "processes_per_device": False,
                               "formats": ["cifar10-python"],
                               "precision": {"switch": "jax.default_matmul_precision", "cpu": ["fp32"],
                                             "gpu": ["fp32", "bf16"], "cpu_refusal": "not tried on CPU"}}
    (config_tree / "stacks.yaml").write_text(yaml.safe_dump(stacks))
    doc = yaml.safe_load((config_tree / "benchmarks" / "resnet50_keras_cifar10.yaml").read_text())
    doc.update(id="resnet50_jax_cifar10", title="ResNet50 + JAX", stack="jax", entrypoint=["python", "-m", "trainers.r50"])
    (config_tree / "benchmarks" / "resnet50_jax_cifar10.yaml").write_text(yaml.safe_dump(doc))
    configs = Configs(config_tree, config_tree / "fleet.yaml")
    b = configs.benchmark("resnet50_jax_cifar10")
    assert "jax" in configs.stacks.build_order()
    host = configs.fleet.hosts[0]
    cell = {"gpus": 2, "cell_id": "g2", "seed": 0, "key": "k"}
    s = settings(b, host, cell, ["0", "1"], "/data", "/results/x")
    assert s.image == "scalebench/jax:cpu" and s.environment["OMP_NUM_THREADS"] == str(2 * host.threads_per_device)
    assert b.resolved("nightly").summary()["launcher"] == "jax-pmap"


def _host(name, devices, cpus=None):
    from scalebench.core.config.fleet import Host

    return Host(name=name, kind="gpu", queue=name, device_ids=devices, cpus=cpus)


@pytest.mark.parametrize("hosts, online, cores, says", [
    # 8 GPUs on cores 0-15 of a 20-core host: the orchestrator gets the four left over
    ([_host("a", [str(i) for i in range(8)], list(range(16)))], list(range(20)), [16, 17, 18, 19],
     "Airflow on cores 16-19, the cells on 0-15"),
    # every core a cell's: nothing to spare, said
    ([_host("a", ["0", "1"], [0, 1])], [0, 1], None, "they are pinned to all 2 cores, none to spare"),
    # no host pins its cells: their containers may use any core, so no core is Airflow's alone
    ([_host("a", ["0", "1"])], [0, 1], None, "fleet.yaml pins no cell to any of them"),
    # 3 cores for 2 devices: one each, the third unused by cells
    ([_host("a", ["0", "1"], [0, 1, 2])], [0, 1, 2, 3], [2, 3], "Airflow on cores 2-3, the cells on 0-1"),
    # one host pinned, one not: the spare cores still go to Airflow, and the unpinned host is named
    ([_host("a", ["0"], [0, 1]), _host("b", ["1"])], [0, 1, 2, 3], [2, 3], "(the cells of b are not pinned)"),
    # cores the process may not use (a container's cpuset) are neither pinned nor spare
    ([_host("a", ["0"], [4, 5])], [0, 1, 2, 3], None, "fleet.yaml pins no cell to any of them"),
])
def test_the_orchestrator_runs_on_the_cores_no_cell_is_pinned_to(hosts, online, cores, says):
    from scalebench.core.config.fleet import orchestrator_cores

    got, why = orchestrator_cores(hosts, online)
    assert got == cores
    assert says in why


def test_core_lists_are_written_as_taskset_reads_them():
    from scalebench.core.config.fleet import core_list

    assert core_list([0, 1, 2, 3, 6, 8, 9]) == "0-3,6,8-9"
    assert core_list([5]) == "5"
