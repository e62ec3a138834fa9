"""CellDockerOperator: one training cell in its framework container.

Static per task (known when the DAG is built): image, command, queue, pool, pool_slots.
Per mapped instance: the `cell` dict from the plan. Everything with side effects happens in
execute(): device set, attempt folder, cell.json, then the container, then the contract.
"""
from __future__ import annotations

import json
from typing import Any

from airflow.providers.docker.exceptions import DockerContainerFailedException
from airflow.providers.docker.operators.docker import DockerOperator
from airflow.sdk.exceptions import AirflowException

from scalebench_kit.contract import CELL_SPEC_FILE, CONTRACT_VERSION, RESULT_FILE, ContractError, load_result, write_json_atomic

from . import runs
from .config import Configs
from .container import settings

OUTPUT_TAIL_LINES = 50


class CellFailed(AirflowException):
    """A cell's container failed or left no valid result; carries the output tail."""

    def __init__(self, message: str, logs: list[str] | None = None):
        super().__init__(message)
        self.logs = logs or []


class CellDockerOperator(DockerOperator):
    template_fields = (*DockerOperator.template_fields, "cell")
    ui_color = "#d8e8f8"

    def __init__(self, *, cell: dict | None = None, benchmark_id: str, host_name: str, **kwargs: Any):
        kwargs.setdefault("mount_tmp_dir", False)
        kwargs.setdefault("auto_remove", "force")
        super().__init__(**kwargs)
        self.cell = cell
        self.benchmark_id = benchmark_id
        self.host_name = host_name

    def _spec(self, cell: dict, bench, host, device_ids: list[str], dataset: dict, attempt: int) -> dict:
        res = bench.resolved(cell["profile"])
        try:
            digest = self.cli.inspect_image(self.image)["Id"]
        except Exception as exc:  # image missing is a failure class of its own
            raise CellFailed(f"cell {cell['cell_id']}: image {self.image} not found on the Docker engine ({exc}); "
                             f"build it with `make images`") from None
        return {
            "contract_version": CONTRACT_VERSION,
            "cell": {k: cell[k] for k in ("key", "benchmark", "dag_id", "run_id", "run_type", "host", "gpus", "epochs",
                                          "repeat", "profile", "seed", "label")} | {"attempt": attempt},
            "devices": {"kind": host.kind, "ids": device_ids, "count": len(device_ids)},
            "training": {"per_device_batch": cell["per_device_batch"], "global_batch": cell["global_batch"],
                         "scaling_mode": cell["scaling_mode"], "lr_policy": bench.lr_policy.model_dump(),
                         "lr": cell["lr"], "warmup_steps": res.warmup_steps, "epochs": cell["epochs"],
                         "max_steps_per_epoch": res.max_steps_per_epoch},
            "data": {"name": dataset["name"], "format": dataset["format"], "path": "/data",
                     "fingerprint": dataset["fingerprint"], "train_limit": res.train_images,
                     "test_limit": res.test_images, "image_size": res.image_size},
            "model": {"name": bench.id, **bench.model},
            "provenance": {"image": self.image, "image_digest": digest, "git_revision": runs.git_revision(),
                           "dataset_fingerprint": dataset["fingerprint"], "resolved_config": res.summary()},
        }

    def execute(self, context) -> dict:
        cell = self.cell
        ti = context["ti"]
        attempt = ti.try_number
        configs = Configs()
        bench, host = configs.benchmark(self.benchmark_id), configs.fleet.host(self.host_name)
        dataset = ti.xcom_pull(task_ids="check_dataset", map_indexes=-1)
        if not dataset:
            raise CellFailed(f"cell {cell['cell_id']}: no dataset check result (check_dataset did not run)")
        device_ids = host.device_ids[: cell["gpus"]]  # leasing concrete ids comes with the GPU-lease issue
        out = runs.attempt_dir(cell, attempt)
        out.mkdir(parents=True, exist_ok=True)
        for stale in (RESULT_FILE, runs.FAILURE_FILE, runs.VALIDATION_FILE, "events.jsonl"):
            (out / stale).unlink(missing_ok=True)
        spec = self._spec(cell, bench, host, device_ids, dataset, attempt)
        write_json_atomic(out / CELL_SPEC_FILE, spec)
        s = settings(bench, host, cell, device_ids, dataset["root"], str(out))
        self.command, self.environment, self.mounts = s.command, {**self.environment, **s.environment}, s.mounts
        self.device_requests, self.shm_size, self.labels = s.device_requests, s.shm_size, s.labels
        self.log.info("cell %s (%s) on %s devices %s, attempt %d -> %s", cell["cell_id"], cell["label"], host.name,
                      device_ids, attempt, out)
        try:
            super().execute(context)
        except DockerContainerFailedException as exc:
            logs = [str(line) for line in (exc.logs or [])]
            self._fail(cell, attempt, out, f"container exited non-zero: {exc}", "container_failed", logs)
        try:
            result = load_result(out / RESULT_FILE)
        except ContractError as exc:
            self._fail(cell, attempt, out, str(exc), "contract_missing_or_invalid", [])
        summary = {"cell": cell, "attempt": attempt, "attempt_dir": str(out), "device_ids": device_ids,
                   "train_s": result["timing"]["train_s"], "metrics": result["metrics"],
                   "world_size": result["devices"]["world_size"]}
        self.log.info("cell %s done: train %.2fs, metrics %s", cell["cell_id"], summary["train_s"], summary["metrics"])
        return summary

    def _fail(self, cell: dict, attempt: int, out, message: str, reason: str, logs: list[str]) -> None:
        line = f"cell {cell['cell_id']} ({cell['label']}) attempt {attempt} failed [{reason}]: {message}"
        write_json_atomic(out / runs.FAILURE_FILE, {"reason": reason, "message": line,
                                                    "output_tail": logs[-OUTPUT_TAIL_LINES:]})
        if logs:
            self.log.error("last %d lines of the container output:\n%s", min(len(logs), OUTPUT_TAIL_LINES),
                           "\n".join(logs[-OUTPUT_TAIL_LINES:]))
        self.log.error(line)
        raise CellFailed(line, logs)

    @staticmethod
    def summary_json(summary: dict) -> str:
        return json.dumps(summary, indent=2, sort_keys=True)
