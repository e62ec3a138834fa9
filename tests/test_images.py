import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_tensorflow_gpu_variant_resolves_with_cuda_wheels():
    pip = str(Path(sys.executable).parent / "pip")
    out = subprocess.run([str(ROOT / "containers/resolve.sh"), "tensorflow", "gpu"], capture_output=True, text=True,
                         timeout=600, env={"PIP": pip, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr[-3000:]
    installs = {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in json.loads(out.stdout)["install"]}
    assert installs["tensorflow"] == "2.20.0"
    assert {"nvidia-nccl-cu12", "nvidia-cudnn-cu12", "nvidia-cublas-cu12"} <= set(installs)


def test_cpu_and_gpu_variants_pin_the_same_versions():
    cpu = (ROOT / "containers/tensorflow/requirements-cpu.txt").read_text().splitlines()
    gpu = (ROOT / "containers/tensorflow/requirements-gpu.txt").read_text().splitlines()
    strip = lambda lines: sorted(l.replace("[and-cuda]", "").replace("tensorflow-cpu", "tensorflow") for l in lines if l and not l.startswith("#"))  # noqa: E731
    assert strip(cpu) == strip(gpu)
