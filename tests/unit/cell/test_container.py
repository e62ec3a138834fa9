import pytest
from docker.types import DeviceRequest

from scalebench.core.config import Configs
from scalebench.cell.container import settings
from tests.support import CONFIGS
from tests.support.samples import sample_cell


@pytest.fixture(scope="module")
def gpu_configs():
    return Configs(CONFIGS, CONFIGS / "fleet.gpu-example.yaml")


def test_gpu_host_requests_exactly_the_leased_ids(gpu_configs):
    bench, host = gpu_configs.benchmark("resnet50_keras_cifar10"), gpu_configs.fleet.host("gpu-node-1")
    s = settings(bench, host, sample_cell(gpus=2), ["2", "3"], "/data/scalebench/cifar10", "/results/x")
    assert s.device_requests == [DeviceRequest(device_ids=["2", "3"], capabilities=[["gpu"]])]
    assert s.image == "scalebench/tensorflow:gpu"
    assert s.environment["NVIDIA_VISIBLE_DEVICES"] == "2,3"
    assert s.environment["OMP_NUM_THREADS"] == "8"  # 4 threads per device x 2 devices in one TF process
    assert s.shm_size >= 1024**3
    data, results = s.mounts
    assert (data["Target"], data["Source"], data["ReadOnly"]) == ("/data", "/data/scalebench/cifar10", True)
    assert (results["Target"], results["ReadOnly"]) == ("/results", False)
    assert s.labels["org.scalebench.devices"] == "2,3"
    assert s.cpuset_cpus == "8,9,10,11,12,13,14,15"  # the cores of GPUs 2 and 3, 4 each


def test_cpu_host_sends_no_device_request_and_emulates_slots():
    configs = Configs()
    bench, host = configs.benchmark("resnet50_keras_cifar10"), configs.fleet.host("local")
    s = settings(bench, host, sample_cell(gpus=2), ["0", "1"], "/d", "/r")
    assert s.device_requests is None and "NVIDIA_VISIBLE_DEVICES" not in s.environment
    assert s.cpuset_cpus is None  # this host lists no cores to pin
    assert s.environment["SCALEBENCH_NUM_DEVICES"] == "2" and s.environment["SCALEBENCH_DEVICE_KIND"] == "cpu"
    assert s.command == ["python", "-m", "trainers.resnet50_keras"]


def test_torchrun_gets_one_process_per_device(gpu_configs):
    bench, host = gpu_configs.benchmark("unet_torch_voc2007"), gpu_configs.fleet.host("gpu-node-1")
    s = settings(bench, host, sample_cell(gpus=3, per_device_batch=30), ["0", "1", "2"], "/d", "/r")
    assert "--nproc-per-node=3" in s.command and s.environment["OMP_NUM_THREADS"] == "4"


def test_device_count_must_match_the_cell():
    configs = Configs()
    bench, host = configs.benchmark("resnet50_keras_cifar10"), configs.fleet.host("local")
    with pytest.raises(ValueError, match=r"needs 2 devices, got ids \['0'\]"):
        settings(bench, host, sample_cell(gpus=2), ["0"], "/d", "/r")


def test_cpu_host_with_listed_cores_pins_each_cell_to_its_slots_cores():
    configs = Configs()
    bench = configs.benchmark("resnet50_keras_cifar10")
    host = configs.fleet.host("local").model_copy(update={"cpus": [0, 1, 2, 3, 4, 5, 6, 7]})
    s = settings(bench, host, sample_cell(gpus=2), ["2", "3"], "/d", "/r")
    assert s.cpuset_cpus == "4,5,6,7" and s.environment["OMP_NUM_THREADS"] == "2"
    few = configs.fleet.host("local").model_copy(update={"cpus": [0, 1]})  # 2 cores, 4 slots: no pinning
    assert settings(bench, few, sample_cell(gpus=1), ["0"], "/d", "/r").cpuset_cpus is None


def test_a_shared_cache_folder_is_mounted_writable_when_given():
    configs = Configs()
    bench, host = configs.benchmark("frcnn_tf_voc2007"), configs.fleet.hosts[0]
    s = settings(bench, host, sample_cell(gpus=1, per_device_batch=1, global_batch=1), ["0"], "/d", "/r", "/state/cache")
    cache = s.mounts[-1]
    assert (cache["Target"], cache["Source"], cache["ReadOnly"]) == ("/cache", "/state/cache", False)
    assert s.environment["SCALEBENCH_CACHE_DIR"] == "/cache"
    assert len(settings(bench, host, sample_cell(gpus=1), ["0"], "/d", "/r").mounts) == 2


def test_a_cell_runs_as_a_non_root_worker_so_its_results_stay_the_workers():
    bench, host = Configs().benchmark("resnet50_keras_cifar10"), Configs().fleet.host("local")
    as_root = settings(bench, host, sample_cell(gpus=1), ["0"], "/d", "/r")
    assert as_root.user is None and "HOME" not in as_root.environment  # the image's own user (root)
    s = settings(bench, host, sample_cell(gpus=1), ["0"], "/d", "/r", uid_gid=(1000, 1000))
    assert s.user == "1000:1000" and s.environment["HOME"] == "/tmp"  # an arbitrary uid has no home in the image


def test_the_all_reduce_sweep_runs_nccl_on_exactly_the_leased_gpus_and_gloo_on_a_cpu_host(gpu_configs):
    from scalebench.cell.container import sweep_settings

    host = gpu_configs.fleet.hosts_of("gpu")[0]
    s = sweep_settings(host, "scalebench/torch:gpu", ["2", "3"], [26214400, 7771668], "/tmp/out", (1000, 1000))
    assert s.device_requests == [DeviceRequest(device_ids=["2", "3"], capabilities=[["gpu"]])]
    assert s.environment["NVIDIA_VISIBLE_DEVICES"] == "2,3" and s.user == "1000:1000"
    assert s.command[:5] == ["python", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    assert s.command[5:] == ["-m", "scalebench_kit.allreduce", "/results/allreduce.json", "--bytes", "26214400,7771668"]
    local = Configs().fleet.host("local")
    cpu = sweep_settings(local, "scalebench/torch:cpu", ["0", "1"], [26214400], "/tmp/out")
    assert cpu.device_requests is None and cpu.command[-1] == "--cpu" and cpu.user is None


def test_the_sweep_covers_every_count_above_one_the_hosts_benchmarks_run_and_the_models_gradients():
    from scalebench.orchestration.dags.allreduce_dag import sizes, sweep_counts, sweep_image

    configs = Configs()
    local = configs.fleet.host("local")
    assert sweep_counts(configs, local) == [2, 3, 4] and sweep_image(configs, local) == "scalebench/torch:cpu"
    assert sizes({"unet": 1_942_917, "resnet": 23_608_202}) == [1_942_917 * 4, 25 * 2**20, 23_608_202 * 4]
