"""Where a result came from, beyond what the cell spec says: the orchestrator's own revision."""
from __future__ import annotations

import os
import subprocess

from scalebench.core import paths


def git_revision() -> str:
    """The checkout's commit (+ "-dirty" with uncommitted changes to tracked files), read afresh
    for every cell: a long-lived worker must not report the revision it started with."""
    if os.environ.get("SCALEBENCH_GIT_REVISION"):  # an installed image has no checkout: its build records it
        return os.environ["SCALEBENCH_GIT_REVISION"]
    root = paths.project_root()
    if root is None:
        return "unknown"
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        rev = out.stdout.strip()
        if out.returncode == 0 and rev:
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            return rev + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def system_of(contract: dict | None) -> dict | None:
    """The system fingerprint a figure was measured on, the fields a regression baseline must not
    mix: image (as run, and `image_ref`: the reference that runs it again, tagged by its digest),
    image digest, framework and its CUDA/cuDNN/NCCL, driver, GPU model, link topology.
    Device names of emulated slots and a leased set's ids are left out (they vary by placement)."""
    if not contract:
        return None
    system, devices = contract.get("system") or {}, contract.get("devices") or {}
    links = sorted({k for row in (devices.get("topology") or {}).values() for k in (row or {}).values()})
    gpus = system.get("nvml_devices") or []
    prov = contract.get("provenance") or {}
    doc = {"image": prov.get("image"), "image_ref": prov.get("image_ref"), "image_digest": prov.get("image_digest"),
           "framework": system.get("framework"), "framework_version": system.get("framework_version"),
           "cuda": system.get("cuda"), "cudnn": system.get("cudnn"), "nccl": system.get("nccl"),
           "driver": system.get("driver"), "gpu_model": gpus[0] if gpus else None,
           "topology": ",".join(links) or None}
    return {k: v for k, v in doc.items() if v is not None}
