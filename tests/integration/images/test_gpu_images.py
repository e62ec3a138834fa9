"""The GPU images, checked on this CPU machine (`make images-gpu-check`) before a GPU host's first
night: each framework's own CUDA build info is what the image's package list and the trainers'
fingerprint record; mmcv's CUDA extension loads without a driver and carries the archs it was
compiled for; and every trainer runs its smoke cell in its GPU image at 1 and 2 devices through the
real DAG (the run's `image_tag: gpu`; no device is requested on a CPU host, so the frameworks fall
back to CPU) to valid results.

A test needs its image: it skips when the image is missing, except where the image must be there:
under `make images-gpu-check` (SCALEBENCH_GPU_IMAGES=all) and, for the PyTorch image that `make
test` builds, in CI."""
import json
import os
import re
import subprocess

import pytest

from tests.support import ROOT
from tests.support.airflow_home import BIN, airflow_env, prepare_homes, run
from tests.support.engine import docker_ready
from tests.unit.test_cuda_toolchain import tc

STACKS = {"torch": "unet_torch_voc2007", "tensorflow": "resnet50_keras_cifar10", "tf-detection": "frcnn_tf_voc2007",
          "mmdet": "frcnn_mmdet_voc2007"}
# the other two mmdet trainers run in the same image with the same launcher
TRAINERS = [("torch", "unet_torch_voc2007"), ("tensorflow", "resnet50_keras_cifar10"), ("tf-detection", "frcnn_tf_voc2007"),
            ("mmdet", "frcnn_mmdet_voc2007"), ("mmdet", "maskrcnn_mmdet_voc2012"), ("mmdet", "msrcnn_mmdet_voc2012")]
BUILT_IN_CI = {"torch"}

pytestmark = [pytest.mark.slow, pytest.mark.gpu_image]


def needs(stack: str) -> str:
    image = f"scalebench/{stack}:gpu"
    required = os.environ.get("SCALEBENCH_GPU_IMAGES") == "all" or (stack in BUILT_IN_CI and os.environ.get("CI") == "true")
    if not docker_ready(image) and not required:
        pytest.skip(f"needs {image} (make images-gpu)")
    return image


BUILD_INFO = """
import json
out = {}
try:
    import torch
    out["torch"] = {"version": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
                    "nccl": ".".join(map(str, torch.cuda.nccl.version())), "devices": torch.cuda.device_count()}
except ImportError:
    pass
try:
    import tensorflow as tf
    b = tf.sysconfig.get_build_info()
    out["tensorflow"] = {"version": tf.__version__, "cuda": b.get("cuda_version"), "cudnn": b.get("cudnn_version"),
                         "cuda_build": b.get("is_cuda_build")}
except ImportError:
    pass
from scalebench_kit import packages
out["packages"] = packages.read()
print(json.dumps(out))
"""


def in_image(image: str, script: str, timeout: int = 300) -> dict:
    proc = subprocess.run(["docker", "run", "--rm", "--network", "none", image, "python", "-c", script],
                          capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build_info(stack: str) -> dict:
    return in_image(needs(stack), BUILD_INFO)


def framework_cuda(info: dict) -> str:
    return (info.get("torch") or info["tensorflow"])["cuda"]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("stack", sorted(STACKS))
def test_each_frameworks_cuda_build_is_what_the_package_list_records(stack):
    info = build_info(stack)
    cuda = info["packages"]["cuda"]  # what the orchestrator keeps per image digest (scalebench diff)
    if "torch" in info:
        t = info["torch"]
        assert t["cuda"] and t["version"].endswith("+cu" + t["cuda"].replace(".", "")), t  # not the host's +cpu wheel
        assert tc.cuda_release(cuda["nvidia-cuda-runtime"]) == t["cuda"], (t, cuda)
        major, minor, patch = map(int, cuda["nvidia-cudnn-cu13"].split(".")[:3])
        assert t["cudnn"] == major * 10000 + minor * 100 + patch, (t, cuda)  # cuDNN 9's version number
        assert t["nccl"] == cuda["nvidia-nccl-cu13"], (t, cuda)
        assert t["devices"] == 0  # no driver here: the trainers take their CPU path
    else:
        t = info["tensorflow"]
        assert t["cuda_build"] is True and t["version"] == "2.20.0", t
        assert tc.cuda_release(t["cuda"]) == tc.cuda_release(cuda["nvidia-cuda-runtime-cu12"]), (t, cuda)
        assert t["cudnn"] == cuda["nvidia-cudnn-cu12"].split(".")[0], (t, cuda)
        assert {"nvidia-nccl-cu12", "nvidia-cublas-cu12"} <= set(cuda)
    print(f"\n{stack}: {json.dumps({k: v for k, v in t.items()})}")


MMCV = """
import json, subprocess, torch
import mmcv
from mmcv.ops import get_compiler_version, get_compiling_cuda_version, nms
from mmcv.utils import ext_loader
ext = ext_loader.load_ext("_ext", ["nms"])
boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 10, 10], [20, 20, 30, 30]], dtype=torch.float)
kept = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5)[1].tolist()
# where the loader finds them once torch is imported: torch's own lib folder and its CUDA wheels
import glob, os
libs = [os.path.join(os.path.dirname(torch.__file__), "lib")] + glob.glob(
    os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "*", "lib"))
ldd = subprocess.run(["ldd", ext.__file__], capture_output=True, text=True,
                     env={**os.environ, "LD_LIBRARY_PATH": ":".join(libs)}).stdout
print(json.dumps({"mmcv": mmcv.__version__, "cuda": get_compiling_cuda_version(), "compiler": get_compiler_version(),
                  "torch_cuda": torch.version.cuda, "kept": kept, "ldd": ldd,
                  "build": open("/opt/openmmlab/mmcv-build.txt").read()}))
"""


@pytest.mark.timeout(300)
def test_mmcvs_cuda_ops_load_without_a_driver_and_carry_every_arch_of_the_list():
    got = in_image(needs("mmdet"), MMCV)
    assert got["mmcv"] == "2.1.0" and got["cuda"] == got["torch_cuda"], got  # compiled with torch's CUDA
    assert got["kept"] == [0, 2]  # an op of the extension runs (its CPU kernel)
    assert "libc10_cuda.so" in got["ldd"] and "not found" not in got["ldd"], got["ldd"]
    build = got["build"]
    assert f"nvcc CUDA {got['torch_cuda']} = torch" in build, build
    # the TORCH_CUDA_ARCH_LIST it was built with (the Dockerfile's default unless the build set one),
    # read back from the built extension by cuobjdump: every arch, nothing missing
    listed = re.search(r"TORCH_CUDA_ARCH_LIST=([^)]+)\)", build).group(1)
    sass, ptx = tc.expected_archs(listed)
    want = (f"SASS {' '.join(f'sm_{a}' for a in tc._ordered(sass))}; "
            f"PTX {' '.join(f'compute_{a}' for a in tc._ordered(ptx)) or 'none'}")
    assert f"_ext.cpython-311-x86_64-linux-gnu.so: {want}" in build, (want, build)
    default = re.search(r'ARG TORCH_CUDA_ARCH_LIST="([^"]+)"', (ROOT / "containers/mmdet/Dockerfile").read_text()).group(1)
    if listed == default:
        assert want == "SASS sm_80 sm_86 sm_89 sm_90; PTX compute_90", want
    print("\n" + build)


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("stack, bench", TRAINERS)
def test_every_trainer_runs_its_smoke_cell_in_its_gpu_image(tmp_path, stack, bench):
    image = needs(stack)
    cuda = framework_cuda(build_info(stack))
    env = airflow_env(tmp_path, (bench,))
    prepare_homes(env)
    rc, log = run([BIN / "scalebench", "data", bench, "--profile", "smoke"], env, 600)
    assert rc == 0, log[-3000:]
    dag = f"scalebench_{bench}"
    conf = {"gpu_counts": [1, 2], "repeats": 1, "profile": "smoke", "seed": 0, "image_tag": "gpu"}
    rc, log = run([BIN / "airflow", "dags", "test", dag, "-c", json.dumps(conf)], env, 2300)
    (tmp_path / "dags-test.log").write_text(log)
    assert rc == 0 and re.search(r"DagRun Finished.*state=success", log), log[-5000:]
    contracts = sorted((tmp_path / "results" / dag).glob("*/g*/attempt-1/metrics.json"))
    assert [json.loads(p.read_text())["cell"]["gpus"] for p in contracts] == [1, 2], contracts
    for path in contracts:
        doc = json.loads(path.read_text())
        assert doc["system"]["cuda"] == cuda, doc["system"]  # the fingerprint records the image's CUDA build
        assert doc["devices"]["world_size"] == doc["cell"]["gpus"]
        assert (path.parent / "validation.json").exists()
        print(f"\n{image} {doc['cell']['label']}: train {doc['timing']['train_s']:.1f} s, "
              f"{doc['timing']['images_per_s']:.2f} images/s, metrics {doc['metrics']}")
    rc, out = run([BIN / "scalebench", "results", "--benchmark", bench, "-o", "json"], env, 120)
    assert rc == 0, out
    rows = json.loads(out)
    assert len(rows) == 2 and all(r.get("status") == "valid" for r in rows), rows


@pytest.mark.timeout(600)
def test_make_gpu_check_runs_the_trainer_from_the_built_gpu_image_where_docker_is(tmp_path):
    """deploy/gpu-check/run.sh finds the engine and scalebench/torch:gpu, and runs the check inside
    it: the image's UNet trainer and CUDA torch, here as its CPU twin (no --gpus on a CPU host)."""
    image = needs("torch")
    cuda = framework_cuda(build_info("torch"))
    proc = subprocess.run([str(ROOT / "deploy" / "gpu-check" / "run.sh"), str(tmp_path), "--cpu"],
                          capture_output=True, text=True, timeout=580)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert proc.stdout.startswith(f"gpu-check: in {image} (CPU twin)\n"), proc.stdout[:300]
    summary = json.loads((tmp_path / "gpu-check.json").read_text())
    assert summary["ok"] and summary["image"] == image and summary["devices"] == 2
    assert summary["trainer"] == "/opt/scalebench/trainers/unet_voc.py"  # the image's trainer, not this checkout's
    assert summary["system"]["cuda"] == cuda and summary["system"]["framework_version"].endswith("+cu130")
    assert {p: r["observed_dtype"] for p, r in summary["precisions"].items()} == {"fp32": "float32", "bf16": "bfloat16"}
    assert all(0 < r["window"]["share"] < 1 for r in summary["precisions"].values())  # the image's kit reads the window
