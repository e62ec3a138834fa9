"""What this image carries, printed as one JSON document: its Python packages with versions, its
Debian packages, and the CUDA libraries it ships (NVIDIA's wheels, the CUDA base image's
variables, the shared libraries the loader finds). The orchestrator runs it once per image
(`python3 -m scalebench_kit.packages`, no network) and keeps the answer by the image's digest,
so a regression can name what changed between two images.

Reads only metadata: it imports no framework and takes well under a second.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
from importlib import metadata

# the CUDA base images' own record of what they installed
CUDA_ENV = ("CUDA_VERSION", "NV_CUDNN_VERSION", "CUDNN_VERSION", "NCCL_VERSION", "NV_LIBNCCL_PACKAGE_VERSION")
SONAME = re.compile(r"^\s*(lib(?:cudart|cudnn|nccl|cublas|cufft|nvrtc))\.so\.([0-9.]+)\s")


def python_packages() -> dict[str, str]:
    out = {}
    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").strip()
        if name:
            out[re.sub(r"[-_.]+", "-", name).lower()] = dist.version
    return dict(sorted(out.items()))


def debian_packages() -> dict[str, str]:
    try:
        text = subprocess.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\n"], capture_output=True,
                              text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return dict(sorted(line.split("\t", 1) for line in text.splitlines() if "\t" in line))


def cuda_libraries(python: dict[str, str]) -> dict[str, str]:
    out = {k: v for k, v in python.items() if k.startswith("nvidia-")}  # NVIDIA's wheels (torch's CUDA)
    out |= {k.lower(): os.environ[k] for k in CUDA_ENV if os.environ.get(k)}
    try:
        text = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    for line in text.splitlines():
        m = SONAME.match(line)
        if m:
            out.setdefault(m.group(1), m.group(2))
    return dict(sorted(out.items()))


def read() -> dict:
    python = python_packages()
    return {"python": python, "debian": debian_packages(), "cuda": cuda_libraries(python)}


if __name__ == "__main__":
    print(json.dumps(read(), sort_keys=True))
