import functools
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.unit.test_cuda_toolchain import tc


@functools.cache  # one resolution per variant for the whole module (a PyPI resolve is 10-15 s)
def report(stack: str, variant: str) -> tuple[dict, ...]:
    """What containers/resolve.sh says the variant installs: pip's report, one entry per package."""
    pip = str(Path(sys.executable).parent / "pip")
    out = subprocess.run([str(ROOT / "containers/resolve.sh"), stack, variant], capture_output=True, text=True,
                         timeout=600, env={"PIP": pip, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    return tuple(json.loads(out.stdout)["install"])


def resolved(stack: str, variant: str) -> dict[str, str]:
    """name -> version of what the variant installs."""
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in report(stack, variant)}


@pytest.mark.slow
def test_tensorflow_gpu_variant_resolves_with_cuda_wheels():
    installs = resolved("tensorflow", "gpu")
    assert installs["tensorflow"] == "2.20.0"
    assert {"nvidia-nccl-cu12", "nvidia-cudnn-cu12", "nvidia-cublas-cu12"} <= set(installs)


@pytest.mark.slow
def test_tensorflow_gpu_pins_its_cuda_wheels_at_the_versions_tensorflow_was_built_with():
    """tensorflow[and-cuda] names its CUDA wheels with lower bounds only: unpinned, pip took CUDA 12.9
    and cuDNN 9.28 under a TensorFlow built with 12.5.1 / 9. Each pin is TensorFlow's own lower bound."""
    [tf] = [i["metadata"] for i in report("tensorflow", "gpu") if i["metadata"]["name"].lower() == "tensorflow"]
    floors = {m.group(1): m.group(2) for r in tf["requires_dist"] if 'extra == "and-cuda"' in r
              for m in [re.match(r"(nvidia-[a-z0-9-]+)\s*[^;]*>=([0-9.]+)", r)] if m}
    installs = resolved("tensorflow", "gpu")
    assert len(floors) == 12 and {k: installs[k] for k in floors} == floors
    assert tc.cuda_release(installs["nvidia-cuda-runtime-cu12"]) == "12.5"  # tf.sysconfig's cuda_version 12.5.1


@pytest.mark.slow
def test_tf_detection_gpu_variant_resolves_on_top_of_the_gpu_tensorflow_set():
    installs = resolved("tf-detection", "gpu")
    assert installs["tensorflow"] == "2.20.0" and installs["nvidia-ml-py"] == "13.615.71"
    assert {"pycocotools", "tensorflow-datasets", "gin-config", "opencv-python-headless"} <= set(installs)
    assert installs["tf-models-official"] == "2.20.0" and "tensorflow-text" not in installs  # --no-deps: its pins stay out


@pytest.mark.slow
def test_torch_gpu_variant_resolves_to_the_cuda_build_not_the_hosts_cpu_wheel():
    installs = resolved("torch", "gpu")
    assert installs["torch"] == "2.13.0"  # not 2.13.0+cpu from a local wheel folder
    assert {"nvidia-nccl-cu13", "nvidia-cudnn-cu13", "nvidia-ml-py"} <= set(installs)


@pytest.mark.slow
def test_mmdet_gpu_variant_resolves_on_top_of_the_gpu_torch_set():
    installs = resolved("mmdet", "gpu")
    assert installs["torch"] == "2.13.0" and "nvidia-nccl-cu13" in installs  # the CUDA build, not the host's +cpu
    assert (installs["mmdet"], installs["mmengine"]) == ("3.3.0", "0.10.7") and "pycocotools" in installs
    assert "mmcv" not in installs and "opencv-python" not in installs  # compiled in the image; headless OpenCV


@pytest.mark.slow
def test_the_cuda_toolchain_that_compiles_mmcv_is_torchs_cuda_on_pypi(tmp_path):
    """The mmdet GPU image installs `cuda_toolchain.py requirement`, read from the torch wheel the
    torch GPU set resolves to; resolved here for the image's platform, its nvcc must be the CUDA
    release of torch's own runtime (a toolkit pinned anywhere else would show here)."""
    [torch] = [i["metadata"] for i in report("torch", "gpu") if i["metadata"]["name"].lower() == "torch"]
    installs = resolved("torch", "gpu")
    requirement = tc.requirement(torch["requires_dist"])
    platforms = [f"--platform=manylinux_2_{minor}_x86_64" for minor in range(5, 37)]  # glibc 2.36: Debian 12
    out = subprocess.run([str(Path(sys.executable).parent / "pip"), "--isolated", "install", "--dry-run", "--quiet",
                          "--report", str(tmp_path / "r.json"), "--only-binary=:all:", "--python-version=3.11",
                          *platforms, "--target", str(tmp_path / "t"), "--cert", "/etc/ssl/certs/ca-certificates.crt",
                          requirement], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    toolchain = {i["metadata"]["name"].lower(): i["metadata"]["version"]
                 for i in json.loads((tmp_path / "r.json").read_text())["install"]}
    cuda = tc.cuda_release(tc.toolkit_version(torch["requires_dist"]))
    assert cuda == "13.0" and requirement == "cuda-toolkit[nvcc,cccl,crt,cudart]==13.0.3"
    assert tc.cuda_release(toolchain["nvidia-cuda-nvcc"]) == cuda, toolchain
    assert tc.cuda_release(installs["nvidia-cuda-runtime"]) == cuda and toolchain["nvidia-cuda-runtime"] == \
        installs["nvidia-cuda-runtime"]  # the runtime nvcc links against is torch's own
    pinned = " ".join((ROOT / "containers" / s / "requirements-gpu.txt").read_text() for s in ("torch", "mmdet"))
    assert "cuda-toolkit" not in pinned and "nvidia-cuda-nvcc" not in pinned  # the version is written nowhere else


def test_cpu_and_gpu_variants_pin_the_same_versions():
    cpu = (ROOT / "containers/tensorflow/requirements-cpu.txt").read_text().splitlines()
    gpu = (ROOT / "containers/tensorflow/requirements-gpu.txt").read_text().splitlines()
    strip = lambda lines: sorted(l.replace("[and-cuda]", "").replace("tensorflow-cpu", "tensorflow") for l in lines if l and not l.startswith("#"))  # noqa: E731
    extra = set(strip(gpu)) - set(strip(cpu))
    nvml = "nvidia-ml-py==13.615.71  # NVML: the trainers sample GPU utilisation and memory"
    assert nvml in extra and all(re.fullmatch(r"nvidia-[a-z-]+-cu12==[0-9.]+", line) for line in extra - {nvml}), extra
    assert set(strip(cpu)) <= set(strip(gpu))
    cpu, gpu = ((ROOT / f"containers/tf-detection/requirements-{v}.txt").read_text().splitlines() for v in ("cpu", "gpu"))
    assert strip(cpu) == strip(gpu)
    cpu, gpu = ((ROOT / f"containers/mmdet/requirements-{v}.txt").read_text().splitlines() for v in ("cpu", "gpu"))
    assert strip(cpu) == strip(gpu)
    cpu, gpu = ((ROOT / f"containers/torch/requirements-{v}.txt").read_text().splitlines() for v in ("cpu", "gpu"))
    pins = lambda lines: sorted(l.replace("+cpu", "") for l in lines if l and not l.startswith("#"))  # noqa: E731
    assert sorted(set(pins(gpu)) - set(pins(cpu))) == ["nvidia-ml-py==13.615.71"]  # NVML only where GPUs are
