"""CellDockerOperator: the Airflow adapter of one training cell in its framework container.

Static per task (known when the DAG is built): the docker provider's public parameters (image,
docker_url, environment, host options), queue, pool, pool_slots, and the dataset check (an
XComArg). Per mapped instance: the `cell` dict from the plan. Nothing happens in __init__;
execute() builds a `CellRun` (orchestration/cell_run.py: the attempt's phases, with no Airflow in
them) on the provider hook's Docker client and walks it:

    begin -> lease -> preflight -> spec -> run -> classify -> collect -> validate

What is Airflow's stays here: the retry decision (CellFailed is retried, CellFailedPermanently
is not), the XCom `cell_summary` and the task note a failure or a teardown crash leaves, a
user's cancel (on_kill), and the task's execution_timeout as a backstop.
"""
from __future__ import annotations

from typing import Any

from airflow.providers.docker.operators.docker import DockerOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout

from scalebench.cell.engine import Engine
from scalebench.cell.failures import OUTPUT_TAIL_LINES, Failure
from scalebench.orchestration import notes
from scalebench.orchestration.cell_run import CellRun, CellRunFailed, TaskIdentity


class CellFailedMixin(Exception):
    """Carries the reason class, the one-line message and the container output tail."""

    def __init__(self, message: str, failure: Failure, logs: list[str] | None = None):
        super().__init__(message)
        self.failure = failure
        self.logs = logs or []


class CellFailed(CellFailedMixin, AirflowException):
    """A transient failure: Airflow retries the cell with backoff."""


class CellFailedPermanently(CellFailedMixin, AirflowFailException):
    """A deterministic failure (OOM at this batch, bad dataset, cancelled...): retrying cannot help."""


class CellDockerOperator(DockerOperator):
    # Only the mapped cell and the dataset check are rendered: image, command and environment come
    # from the validated config, so no trigger conf can reach them through a template.
    template_fields = ("cell", "dataset")
    ui_color = "#d8e8f8"
    image: str  # the docker provider's parameters this operator reads or sets (declared for the type checker)
    environment: dict | None
    # after every rank's run_stop success, how long the processes may take to exit (destroy_process_group
    # and interpreter exit have no deadline of their own); then the container is stopped, the result kept
    teardown_deadline_s = 120.0

    def __init__(self, *, cell: dict | None = None, dataset: Any = None, benchmark_id: str, host_name: str,
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.cell = cell
        self.dataset = dataset
        self.benchmark_id = benchmark_id
        self.host_name = host_name
        self._ti = None
        self.cell_run: CellRun | None = None

    def execute(self, context) -> dict:
        self._ti = ti = context["ti"]
        if self.cell is None:
            raise AirflowFailException(f"{self.task_id}: no cell to run (the operator was built without one)")
        run = self.cell_run = CellRun(
            cell=self.cell, dataset=self.dataset, benchmark_id=self.benchmark_id, host_name=self.host_name,
            image=self.image, engine=Engine(self.cli), log=self.log, environment=self.environment,
            host_options=self.host_options(), teardown_deadline_s=self.teardown_deadline_s,
            task=TaskIdentity(getattr(ti, "dag_id", "") or "", ti.task_id, getattr(ti, "map_index", -1), ti.try_number))
        try:
            summary = run.walk()
        except CellRunFailed as failed:
            raise self.report(failed) from None
        except AirflowTaskTimeout:  # the execution_timeout backstop (walk stopped the container first)
            self.report(run.fail(Failure("timeout", None, "ran past the task's execution_timeout (backstop)")))
            raise
        except Exception as exc:  # a defect or an unforeseen error still leaves a record
            raise self.report(run.fail(Failure("unknown", None, f"{type(exc).__name__}: {exc}"))) from exc
        finally:
            self.image = run.image
        if summary.get("teardown_crash"):  # valid, and the crash after the run said where people look
            self.log.warning("%s", summary["teardown_crash"])
            self._note(summary["teardown_crash"])
        return summary

    def on_kill(self) -> None:
        """A user's cancel (SIGTERM to the task): stop the container, free the devices; the
        attempt is recorded as `cancelled` by execute, which the SDK lets run to its end."""
        if self.cell_run is not None:
            self.cell_run.cancel()

    def host_options(self) -> dict:
        """The docker provider's host parameters this task was given (none by default; on a GPU host
        e.g. ipc_mode="host" and a memlock ulimit for NCCL), for the cell's container."""
        given = {"mem_limit": self.mem_limit, "network_mode": self.network_mode, "ipc_mode": self.ipc_mode,
                 "ulimits": self.ulimits, "cap_add": self.cap_add, "dns": self.dns, "extra_hosts": self.extra_hosts,
                 "privileged": self.privileged}
        return {k: v for k, v in given.items() if v}

    def report(self, failed: CellRunFailed) -> CellFailedMixin:
        """Say a recorded failure where people look (the XCom tab, the note, the log right after
        the output) and return the exception that tells Airflow whether to retry."""
        run, failure, logs = self.cell_run, failed.failure, failed.logs
        ti = self._ti
        if ti is not None and run is not None:  # the UI's XCom tab and the note show why, though the task failed
            ti.xcom_push(key="cell_summary", value={"cell": run.cell, "attempt": run.number, "stage": run.clock.stage,
                                                    "reason": failure.reason, "exit_code": failure.exit_code,
                                                    "transient": failure.transient, "message": failed.line})
        self._note(failed.line)
        self.log.error("%s", failed.line)
        if logs:
            self.log.error("last %d lines of the container output:\n%s", min(len(logs), OUTPUT_TAIL_LINES),
                           "\n".join(logs[-OUTPUT_TAIL_LINES:]))
        cls = CellFailed if failure.transient else CellFailedPermanently
        return cls(failed.line, failure, logs)

    def _note(self, line: str) -> None:
        if self._ti is not None and getattr(self._ti, "dag_id", None):
            notes.note(self._ti, line, log=lambda text: self.log.info("%s", text))
