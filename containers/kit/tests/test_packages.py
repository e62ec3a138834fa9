"""The kit's package reader: Python packages with versions (this environment's, including the kit
itself), Debian packages from dpkg where there is one, CUDA libraries as a map."""
import json
import subprocess
import sys

from scalebench_kit import packages


def test_read_names_python_packages_with_versions_and_prints_one_json_document():
    doc = packages.read()
    assert set(doc) == {"python", "debian", "cuda"}
    assert doc["python"]["scalebench-kit"]  # normalised names: the kit's own distribution
    out = subprocess.run([sys.executable, "-m", "scalebench_kit.packages"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["python"] == doc["python"]


def test_cuda_libraries_come_from_nvidia_wheels_the_base_images_variables_and_the_loader(monkeypatch):
    monkeypatch.setenv("NCCL_VERSION", "2.23.4-1")
    monkeypatch.setattr(packages.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a, 0, stdout="\tlibcudart.so.12 (libc6,x86-64) => /usr/local/cuda/lib64/libcudart.so.12\n"
                     "\tlibz.so.1 (libc6,x86-64) => /lib/libz.so.1\n"))
    cuda = packages.cuda_libraries({"nvidia-nccl-cu12": "2.21.5", "torch": "2.6.0"})
    assert cuda == {"libcudart": "12", "nccl_version": "2.23.4-1", "nvidia-nccl-cu12": "2.21.5"}
