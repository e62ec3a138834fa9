"""The cell document (cell.json): what one attempt of a cell runs, on which devices, with which
data and model, and where it comes from. The orchestrator writes it; the trainer reads it (the
kit's contract schema checks both sides)."""
from __future__ import annotations

from typing import Any, Mapping

from scalebench_kit.contract import CONTRACT_VERSION

from scalebench.core.config import Benchmark, Host, Resolved
from scalebench.core.provenance import git_revision

CELL_KEYS = ("key", "benchmark", "dag_id", "run_id", "run_type", "host", "gpus", "epochs", "repeat", "profile", "seed",
             "label")


def cell_document(cell: Mapping[str, Any], attempt: int, bench: Benchmark, resolved: Resolved, host: Host,
                  device_ids: list[str], lease_id: str, timing_policy: str, preflight: dict,
                  dataset: Mapping[str, Any], image: str, image_digest: str, image_ref: str) -> dict:
    """cell.json of one attempt: the planned cell, its leased devices (with the topology between
    them), the training sizes, the dataset check's result, the model and the provenance (image,
    digest, git revision, the fully resolved config)."""
    topology = ({x: {y: k for y, k in (host.topology or {}).get(x, {}).items() if y in device_ids} for x in device_ids}
                if host.topology else None)
    return {
        "contract_version": CONTRACT_VERSION,
        "cell": {k: cell[k] for k in CELL_KEYS}
                | {"attempt": attempt, "role": cell.get("role", "measure"), "rerun_of": cell.get("rerun_of")},
        "devices": {"kind": host.kind, "ids": device_ids, "count": len(device_ids), "topology": topology,
                    "lease_id": lease_id, "timing_policy": timing_policy, "preflight": preflight},
        "training": {"per_device_batch": cell["per_device_batch"], "global_batch": cell["global_batch"],
                     "scaling_mode": cell["scaling_mode"], "lr_policy": bench.lr_policy.model_dump(),
                     "lr": cell["lr"], "warmup_steps": resolved.warmup_steps, "epochs": cell["epochs"],
                     "max_steps_per_epoch": resolved.max_steps_per_epoch,
                     "eval_each_epoch": resolved.eval_each_epoch, "precision": cell["precision"],
                     "profile_steps": cell.get("profile_steps")},
        "data": {"name": dataset["name"], "format": dataset["format"], "path": "/data",
                 "fingerprint": dataset["fingerprint"], "train_limit": resolved.train_images,
                 "test_limit": resolved.test_images, "image_size": resolved.image_size},
        "model": {"name": bench.id, **bench.model},
        "provenance": {"image": image, "image_digest": image_digest, "image_ref": image_ref,
                       "git_revision": git_revision(), "dataset_fingerprint": dataset["fingerprint"],
                       "resolved_config": resolved.summary(cell["precision"])},
    }
