"""CellDockerOperator: one training cell in its framework container.

Static per task (known when the DAG is built): image, command, queue, pool, pool_slots.
Per mapped instance: the `cell` dict from the plan. Everything with side effects happens in
execute(): lease a device set, pre-flight it, write cell.json, run the container under a
watchdog, classify a failure, check the result contract, release the lease.
"""
from __future__ import annotations

import threading
from typing import Any

from airflow.providers.docker.exceptions import DockerContainerFailedException
from airflow.providers.docker.operators.docker import DockerOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from scalebench_kit.contract import CELL_SPEC_FILE, CONTRACT_VERSION, RESULT_FILE, ContractError, load_result, write_json_atomic

from . import notes, preflight, runs
from .cells import timing_policy
from .config import Configs
from .container import settings
from .failures import Failure, classify
from .runs import PLACEMENT_FILE

OUTPUT_TAIL_LINES = 50


class CellFailedMixin:
    """Carries the reason class, the one-line message and the container output tail."""

    def __init__(self, message: str, failure: Failure, logs: list[str] | None = None):
        super().__init__(message)
        self.failure = failure
        self.logs = logs or []


class CellFailed(CellFailedMixin, AirflowException):
    """A transient failure: Airflow retries the cell with backoff."""


class CellFailedPermanently(CellFailedMixin, AirflowFailException):
    """A deterministic failure (OOM at this batch, bad dataset...): retrying cannot help."""


class CellDockerOperator(DockerOperator):
    template_fields = (*DockerOperator.template_fields, "cell")
    ui_color = "#d8e8f8"

    def __init__(self, *, cell: dict | None = None, benchmark_id: str, host_name: str, **kwargs: Any):
        kwargs.setdefault("mount_tmp_dir", False)
        kwargs["auto_remove"] = "never"  # we inspect the state (OOMKilled) before removing it
        kwargs.setdefault("xcom_all", True)
        super().__init__(**kwargs)
        self.cell = cell
        self.benchmark_id = benchmark_id
        self.host_name = host_name
        self._lease = None
        self._ti = None
        self._cpuset = None
        self._timed_out = threading.Event()

    # -- pieces -----------------------------------------------------------------------------
    def _image_digest(self, cell: dict) -> str:
        try:
            return self.cli.inspect_image(self.image)["Id"]
        except Exception as exc:
            import docker.errors

            if isinstance(exc, docker.errors.ImageNotFound):
                raise self._failure(cell, Failure("image_missing", None, f"image {self.image} is not on the Docker "
                                                  "engine; build it with `make images`")) from None
            raise self._failure(cell, Failure("engine_unreachable", None, f"Docker engine did not answer ({exc})")) from None

    def _spec(self, cell: dict, bench, host, lease, dataset: dict, attempt: int, policy: str, checked: dict) -> dict:
        res = bench.resolved(cell["profile"])
        topo = {a: {b: k for b, k in (host.topology or {}).get(a, {}).items() if b in lease.device_ids}
                for a in lease.device_ids} if host.topology else None
        return {
            "contract_version": CONTRACT_VERSION,
            "cell": {k: cell[k] for k in ("key", "benchmark", "dag_id", "run_id", "run_type", "host", "gpus", "epochs",
                                          "repeat", "profile", "seed", "label")} | {"attempt": attempt},
            "devices": {"kind": host.kind, "ids": lease.device_ids, "count": len(lease.device_ids), "topology": topo,
                        "lease_id": lease.lease_id, "timing_policy": policy, "preflight": checked},
            "training": {"per_device_batch": cell["per_device_batch"], "global_batch": cell["global_batch"],
                         "scaling_mode": cell["scaling_mode"], "lr_policy": bench.lr_policy.model_dump(),
                         "lr": cell["lr"], "warmup_steps": res.warmup_steps, "epochs": cell["epochs"],
                         "max_steps_per_epoch": res.max_steps_per_epoch},
            "data": {"name": dataset["name"], "format": dataset["format"], "path": "/data",
                     "fingerprint": dataset["fingerprint"], "train_limit": res.train_images,
                     "test_limit": res.test_images, "image_size": res.image_size},
            "model": {"name": bench.id, **bench.model},
            "provenance": {"image": self.image, "image_digest": self._image_digest(cell),
                           "git_revision": runs.git_revision(), "dataset_fingerprint": dataset["fingerprint"],
                           "resolved_config": res.summary()},
        }

    def _stop_for_timeout(self) -> None:
        self._timed_out.set()
        container = getattr(self, "container", None)
        if container:
            self.log.error("cell timeout reached: stopping container %s", container["Id"][:12])
            try:
                self.cli.stop(container["Id"], timeout=5)
            except Exception as exc:
                self.log.warning("could not stop container: %s", exc)

    def _run_container(self, context, timeout_s: float) -> tuple[int | None, list[str], bool]:
        """(exit code, output lines, OOM-killed); the output is folded in a log group."""
        if self._cpuset:  # DockerOperator has no cpuset parameter; add it to the host config it builds
            make_host_config = self.cli.create_host_config
            self.cli.create_host_config = lambda **kw: make_host_config(**kw, cpuset_cpus=self._cpuset)
        watchdog = threading.Timer(timeout_s, self._stop_for_timeout)
        watchdog.daemon = True
        self.container = None
        self.log.info("::group::Container output (%s)", self.image)
        try:
            watchdog.start()
            try:
                lines = super().execute(context) or []
                exit_code = 0
            except DockerContainerFailedException as exc:
                lines = [str(x) for x in (exc.logs or [])]
                exit_code = None
        finally:
            watchdog.cancel()
            self.log.info("::endgroup::")
        oom = False
        if self.container:
            try:
                state = self.cli.inspect_container(self.container["Id"])["State"]
                exit_code, oom = state.get("ExitCode", exit_code), bool(state.get("OOMKilled"))
            finally:
                self.cli.remove_container(self.container["Id"], force=True)
        return exit_code, [str(x) for x in lines], oom

    def _failure(self, cell: dict, failure: Failure, logs: list[str] | None = None, out=None, attempt: int = 0):
        """Write failure.json, log the reason line right after the output, return the exception to raise."""
        logs = logs or []
        line = failure.line(cell, attempt)
        if out is not None:
            write_json_atomic(out / runs.FAILURE_FILE, {"reason": failure.reason, "exit_code": failure.exit_code,
                                                        "transient": failure.transient, "message": line,
                                                        "output_tail": logs[-OUTPUT_TAIL_LINES:]})
        ti = getattr(self, "_ti", None)
        if ti is not None:  # the UI's XCom tab and the note show why, even though the task failed
            ti.xcom_push(key="cell_summary", value={"cell": cell, "attempt": attempt, "reason": failure.reason,
                                                    "exit_code": failure.exit_code, "message": line})
            if getattr(ti, "dag_id", None):
                self.log.info("task note: %s", notes.set_note(ti, line))
        self.log.error("%s", line)
        if logs:
            self.log.error("last %d lines of the container output:\n%s", min(len(logs), OUTPUT_TAIL_LINES),
                           "\n".join(logs[-OUTPUT_TAIL_LINES:]))
        cls = CellFailed if failure.transient else CellFailedPermanently
        return cls(line, failure, logs)

    # -- the cell ---------------------------------------------------------------------------
    def execute(self, context) -> dict:
        cell, ti = self.cell, context["ti"]
        self._ti = ti
        attempt = ti.try_number
        configs = Configs()
        bench, host = configs.benchmark(self.benchmark_id), configs.fleet.host(self.host_name)
        res = bench.resolved(cell["profile"])
        policy = timing_policy(cell["profile"])
        timeout_s = res.cell_timeout_minutes * 60
        dataset = ti.xcom_pull(task_ids="check_dataset", map_indexes=-1)
        out = runs.attempt_dir(cell, attempt)
        out.mkdir(parents=True, exist_ok=True)
        for stale in (RESULT_FILE, runs.FAILURE_FILE, runs.VALIDATION_FILE, PLACEMENT_FILE, "events.jsonl"):
            (out / stale).unlink(missing_ok=True)
        from .leases import LEASE_LABEL, LeaseManager, LeaseTimeout  # the store's ORM: not at DAG parse time

        if not dataset:
            raise self._failure(cell, Failure("dataset_missing", None, "no dataset check result (check_dataset did not "
                                              "run)"), out=out, attempt=attempt)
        try:
            self._lease = LeaseManager().acquire(host, cell["gpus"], cell["key"], exclusive=policy == "exclusive",
                                                 timeout_s=timeout_s)
        except LeaseTimeout as exc:
            raise self._failure(cell, Failure("lease_timeout", None, str(exc)), out=out, attempt=attempt) from None
        lease = self._lease
        lease.start_heartbeat()
        try:
            checked = {"status": "skipped", "reason": "CPU host (emulated devices)"}
            if host.kind == "gpu":
                try:
                    checked = preflight.check(lease.device_ids)
                except preflight.PreflightFailed as exc:
                    write_json_atomic(out / "preflight.json", exc.report)
                    raise self._failure(cell, Failure("preflight_failed", None, str(exc)), out=out, attempt=attempt) from None
            write_json_atomic(out / CELL_SPEC_FILE, self._spec(cell, bench, host, lease, dataset, attempt, policy, checked))
            s = settings(bench, host, cell, lease.device_ids, dataset["root"], str(out))
            self.command, self.environment, self.mounts = s.command, {**self.environment, **s.environment}, s.mounts
            self.device_requests, self.shm_size = s.device_requests, s.shm_size
            self.labels = {**s.labels, LEASE_LABEL: lease.lease_id}
            self._cpuset = s.cpuset_cpus
            self.log.info("cell %s (%s) on %s devices %s (%s timing, waited %.1fs for the lease), attempt %d -> %s",
                          cell["cell_id"], cell["label"], host.name, lease.device_ids, policy, lease.waited_s, attempt, out)
            exit_code, lines, oom = self._run_container(context, timeout_s)
            placement = {"host": host.name, "device_ids": lease.device_ids, "lease_id": lease.lease_id,
                         "timing_policy": policy, "co_tenants": sorted(lease.co_tenants), "lease_wait_s": lease.waited_s,
                         "preflight": checked}
            write_json_atomic(out / PLACEMENT_FILE, placement)
            if exit_code != 0 or self._timed_out.is_set():
                failure = classify(exit_code, lines, oom_killed=oom, timed_out=self._timed_out.is_set(), timeout_s=timeout_s)
                raise self._failure(cell, failure, lines, out, attempt)
            try:
                result = load_result(out / RESULT_FILE)
            except ContractError as exc:
                raise self._failure(cell, Failure("contract_missing_or_invalid", exit_code, str(exc)), lines, out,
                                    attempt) from None
        finally:
            self._lease = None
            lease.release()
        summary = {"cell": cell, "attempt": attempt, "attempt_dir": str(out), "device_ids": lease.device_ids,
                   "timing_policy": policy, "co_tenants": sorted(lease.co_tenants), "train_s": result["timing"]["train_s"],
                   "metrics": result["metrics"], "world_size": result["devices"]["world_size"]}
        self.log.info("cell %s done: train %.2fs, metrics %s", cell["cell_id"], summary["train_s"], summary["metrics"])
        return summary

    def on_kill(self) -> None:
        super().on_kill()  # stops the container
        if self._lease is not None:
            self._lease.release()
            self._lease = None
