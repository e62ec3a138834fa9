import pytest

from scalebench.core import cells as cellmod
from scalebench.core.config import ConfigError, Configs


@pytest.fixture(scope="module")
def configs():
    return Configs()


def test_matrix_counts_batches_and_seeds():
    from tests.support import CONFIGS

    gpu = Configs(CONFIGS, CONFIGS / "fleet.gpu-example.yaml")
    b = gpu.benchmark("resnet50_keras_cifar10")
    planned = cellmod.plan(b, gpu.fleet, profile="full", run_id="r1", repeats=3, seed=7)
    assert len(planned) == 4 * 4 * 3  # GPU counts x epochs x repeats
    by_gpus = {c["gpus"]: (c["per_device_batch"], c["global_batch"]) for c in planned}
    assert by_gpus == {1: (800, 800), 2: (800, 1600), 3: (800, 2400), 4: (800, 3200)}
    assert {c["seed"] for c in planned if c["gpus"] == 2 and c["epochs"] == 40} == {7, 8, 9}
    lrs = {c["gpus"]: c["lr"] for c in planned}
    assert lrs[4] == pytest.approx(4 * lrs[1])  # linear LR rule on the global batch
    assert planned[0]["label"] == "1 GPU · bf16 · 40 epochs · repeat 1"
    assert {c["host"] for c in planned} == {"gpu-node-1"}  # full needs GPUs; all cells on one host


def test_keys_are_stable_include_the_run_and_not_the_attempt(configs):
    b = configs.benchmark("resnet50_keras_cifar10")
    a = cellmod.plan(b, configs.fleet, profile="smoke", run_id="night-1", gpu_counts=[1, 2])
    again = cellmod.plan(b, configs.fleet, profile="smoke", run_id="night-1", gpu_counts=[1, 2])
    other_night = cellmod.plan(b, configs.fleet, profile="smoke", run_id="night-2", gpu_counts=[1, 2])
    assert [c["key"] for c in a] == [c["key"] for c in again]
    assert not {c["key"] for c in a} & {c["key"] for c in other_night}
    assert len({c["key"] for c in a}) == len(a) == 2


def test_epochs_override_and_grouping(configs):
    b = configs.benchmark("frcnn_mmdet_voc2007")
    planned = cellmod.plan(b, configs.fleet, profile="smoke", run_id="r", gpu_counts=[2, 1], epochs=[2, 1])
    assert [(c["gpus"], c["epochs"]) for c in planned] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert {k: len(v) for k, v in cellmod.group_by_task(planned).items()} == {"local_1gpu": 2, "local_2gpu": 2}


def test_unservable_requests_are_rejected_at_plan_time(configs):
    b = configs.benchmark("resnet50_keras_cifar10")
    with pytest.raises(ConfigError, match=r"gpu_counts \[5\] cannot be served: the largest host has 4 devices"):
        cellmod.plan(b, configs.fleet, profile="smoke", run_id="r", gpu_counts=[1, 5])
    with pytest.raises(ConfigError, match="no GPU host in the fleet has 2 devices for profile 'nightly'"):
        cellmod.plan(b, configs.fleet, profile="nightly", run_id="r", gpu_counts=[1, 2])


def test_scheduled_runs_repeat_as_the_config_says_manual_runs_as_asked(configs):
    b = configs.benchmark("resnet50_keras_cifar10")
    assert b.schedule_repeats == 3
    assert cellmod.repeats_for(b, "scheduled", 1) == 3 and cellmod.repeats_for(b, "manual", 2) == 2
    assert cellmod.repeats_for(b.model_copy(update={"schedule_repeats": 5}), "scheduled", 1) == 5


def test_timing_policy_follows_the_profile_unless_the_host_says(configs):
    from scalebench.core.cells import timing_policy
    from scalebench.core.config import Host

    shared = Host(name="shared", kind="cpu", queue="default", device_ids=["0"], timing_policy="packed")
    dedicated = shared.model_copy(update={"timing_policy": "exclusive"})
    local = configs.fleet.host("local")
    assert [timing_policy(p, local) for p in ("smoke", "nightly", "full")] == ["packed", "exclusive", "exclusive"]
    assert timing_policy("nightly", shared) == "packed" and timing_policy("smoke", dedicated) == "exclusive"


def test_a_candidate_image_tag_stays_in_the_configured_repository(configs):
    from scalebench.core.config import image_repository, with_tag

    assert image_repository("registry.local:5000/team/tf:2.20@sha256:" + "a" * 64) == "registry.local:5000/team/tf"
    assert with_tag("scalebench/tensorflow:cpu", "cpu-tf2.21") == "scalebench/tensorflow:cpu-tf2.21"
    b = configs.benchmark("resnet50_keras_cifar10")
    planned = cellmod.plan(b, configs.fleet, profile="smoke", run_id="r", gpu_counts=[1, 2], image_tag="cpu-rc1")
    assert {c["image"] for c in planned} == {"scalebench/tensorflow:cpu-rc1"}
    assert "image" not in cellmod.plan(b, configs.fleet, profile="smoke", run_id="r", gpu_counts=[1])[0]
    for bad in ("other/repo:x", "x;rm", ".hidden", "a" * 129):
        with pytest.raises(ConfigError, match=r"image_tag .*expected a plain tag of scalebench/tensorflow"):
            cellmod.plan(b, configs.fleet, profile="smoke", run_id="r", gpu_counts=[1], image_tag=bad)


def test_precision_is_a_matrix_axis_of_the_cells_identity_folder_and_config(configs):
    b = configs.benchmark("unet_torch_voc2007")
    assert b.resolved("smoke").precision == ["fp32"] and b.resolved("nightly").precision == ["bf16"]
    both = cellmod.plan(b, configs.fleet, profile="smoke", run_id="r", gpu_counts=[1, 2], precisions=["fp32", "bf16"])
    assert [(c["gpus"], c["precision"], c["cell_id"]) for c in both] == [
        (1, "fp32", "g1-fp32-e12-r1"), (1, "bf16", "g1-bf16-e12-r1"), (2, "fp32", "g2-fp32-e12-r1"),
        (2, "bf16", "g2-bf16-e12-r1")]
    assert len({c["key"] for c in both}) == 4 and both[1]["label"] == "1 GPU · bf16 · 12 epochs · repeat 1"
    assert both[0]["seed"] == both[1]["seed"]  # the same data order: only the precision differs
    res = b.resolved("smoke")
    assert res.summary("fp32")["precision"] == "fp32" and res.summary("fp32") != res.summary("bf16")


@pytest.mark.parametrize("bench, precisions, refusal", [
    ("unet_torch_voc2007", ["fp16"], "precision fp16 cannot run on CPU hosts with stack 'torch' (tf32 is a CUDA "
                                     "tensor-core mode and fp16 needs torch.amp.GradScaler on CUDA)"),
    ("frcnn_mmdet_voc2007", ["fp32", "bf16"], "precision bf16 cannot run on CPU hosts with stack 'mmdet' (mmengine's "
                                              "AmpOptimWrapper asserts a GPU in its constructor"),
])
def test_a_cpu_host_refuses_a_precision_its_stack_cannot_run_there(configs, bench, precisions, refusal):
    with pytest.raises(ConfigError) as exc:
        cellmod.plan(configs.benchmark(bench), configs.fleet, profile="smoke", run_id="r", precisions=precisions)
    assert f"{bench}: parameter 'precisions' on host local: {refusal}" in str(exc.value)


def test_a_gpu_host_runs_every_preset(configs):
    from tests.support import CONFIGS

    gpu = Configs(CONFIGS, CONFIGS / "fleet.gpu-example.yaml")
    b = gpu.benchmark("frcnn_mmdet_voc2007")
    cells = cellmod.plan(b, gpu.fleet, profile="nightly", run_id="r", gpu_counts=[1], repeats=1,
                         precisions=["fp32", "tf32", "bf16", "fp16"])
    assert [c["precision"] for c in cells] == ["fp32", "tf32", "bf16", "fp16"]
