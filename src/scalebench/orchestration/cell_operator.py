"""CellDockerOperator: one training cell in its framework container.

Static per task (known when the DAG is built): the docker provider's public parameters (image,
docker_url, environment), queue, pool, pool_slots, and the dataset check (an XComArg). Per mapped
instance: the `cell` dict from the plan. Nothing happens in __init__; execute() runs named
phases, each testable alone:

    begin -> lease -> preflight -> spec -> run -> classify -> collect -> validate

validate checks the result with the benchmark's Great Expectations suite in the same task (GX
is imported in the background while the container runs, so a cell costs no extra task start
and no extra import); the verdict goes to validation.json.

The container is created from the settings spec() wrote as container.json (`cell.container`),
through the provider hook's Docker client (`self.cli`): the provider has no parameter for a
cpuset, and its run step creates and starts in one call.

A failure in any phase leaves failure.json in the attempt folder (class, exit code, attempt,
stage, message), pushes the XCom `cell_summary`, sets the task note and raises CellFailed
(transient: retried) or CellFailedPermanently.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.providers.docker.operators.docker import DockerOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTimeout

from scalebench_kit.contract import ContractError, load_result, write_json_atomic
from scalebench_kit.events import read_events
from scalebench_kit.names import (CELL_SPEC_FILE, CONTAINER_FILE, EVENTS_FILE, PLACEMENT_FILE, PREFLIGHT_FILE,
                                  PROGRESS_PREFIX, RESULT_FILE, TASK_FILE, TEARDOWN_FILE, VALIDATION_FILE)

from scalebench.orchestration import notes
from scalebench.core import paths
from scalebench.cell import preflight
from scalebench.core.attempt_folders import claim, contract_mismatch
from scalebench.core.cells import timing_policy
from scalebench.core.config import IMAGE_REF, Benchmark, Configs, Host, Resolved, image_repository
from scalebench.cell.container import CELL_LABEL, ContainerSettings, create, settings
from scalebench.cell.images import keep_reference, read_packages
from scalebench.cell.container import record as container_record
from scalebench.cell.spec import cell_document
from scalebench.cell.failures import (OUTPUT_TAIL_LINES, Failure, account_for_lost_attempts, classify,
                                      every_rank_finished, write_failure)

if TYPE_CHECKING:  # the store's ORM is not imported at DAG parse time
    from scalebench.store.leases import Lease


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


@dataclass
class Attempt:
    """One try of one cell: what it runs with and where its files go."""
    cell: dict
    number: int
    bench: Benchmark
    host: Host
    resolved: Resolved
    policy: str
    timeout_s: float
    out: Path
    stage: str = "begin"
    result: dict | None = None
    container: ContainerSettings | None = None  # set by spec(): what run() starts


T = TypeVar("T")


class PhaseClock:
    """Seconds each phase of the task took (placement.json's phases_s): where a cell's time outside
    its container goes. lap(name, value) closes phase `name` and hands its value on."""

    def __init__(self) -> None:
        self.phases: dict[str, float] = {}
        self._since = time.monotonic()

    def __call__(self, name: str, value: T) -> T:
        now = time.monotonic()
        self.phases[name] = round(now - self._since, 3)
        self._since = now
        return value


@dataclass
class Outcome:
    exit_code: int | None
    lines: list[str]
    oom_killed: bool


def _warm_validation() -> None:
    """Import GX (seconds) while the container runs, quietly: its import logs every API it registers."""
    import logging

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    from scalebench.cell import validation  # noqa: F401
    import great_expectations  # noqa: F401


def _engine_errors() -> tuple[type[BaseException], ...]:
    import docker.errors
    import requests.exceptions

    return (docker.errors.DockerException, requests.exceptions.RequestException, ConnectionError)


class CellDockerOperator(DockerOperator):
    # Only the mapped cell and the dataset check are rendered: image, command and environment come
    # from the validated config, so no trigger conf can reach them through a template.
    template_fields = ("cell", "dataset")
    ui_color = "#d8e8f8"
    image: str  # the docker provider's parameters this operator reads or sets (declared for the type checker)
    environment: dict | None
    container: dict | None
    # phases named in a failure line; a container or contract failure speaks for itself
    QUIET_STAGES = ("begin", "run", "classify", "collect", "validate")
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
        self._lease: Lease | None = None
        self._timed_out = threading.Event()
        self._cancelled = threading.Event()
        self._hung_at_teardown = threading.Event()

    # -- the cell ---------------------------------------------------------------------------
    def execute(self, context) -> dict:
        self._ti = context["ti"]
        lap = PhaseClock()
        attempt = lap("begin", self.begin(self._ti))
        try:
            lease = lap("lease", self.lease(attempt))
            try:
                checked = lap("preflight", self.preflight(attempt, lease))
                self.spec(attempt, lease, checked)
                lap("spec", None)
                outcome = lap("run", self.run(attempt, lease))
                self.write_placement(attempt, lease, checked, lap.phases)
                lost = self.lease_lost(lease)
                failure = (Failure("lease_lost", outcome.exit_code, f"{lost}; its container was stopped") if lost
                           else self.classify(attempt, outcome))
                if failure and failure.reason != "teardown_crash":
                    raise self.fail(attempt, failure, outcome.lines)
                summary = lap("collect", self.collect(attempt, lease, outcome))
                self.validate(attempt)
                lap("validate", None)
                if failure:  # the run was over and its result validates: the cell is valid, the crash kept
                    summary["teardown_crash"] = self.keep_teardown_crash(attempt, failure, outcome.lines)
                self.write_placement(attempt, lease, checked, lap.phases)  # with the phases after the container
                self.log.info("phases (s): %s", ", ".join(f"{k} {v:.2f}" for k, v in lap.phases.items()))
                return summary
            except AirflowTaskTimeout:  # the execution_timeout backstop: stop the container before the
                self._stop_container("execution timeout reached")  # lease frees its devices
                raise
            finally:
                self._lease = None
                lease.release()
        except AirflowTaskTimeout:
            self.fail(attempt, Failure("timeout", None, "ran past the task's execution_timeout (backstop)"))
            raise
        except (CellFailed, AirflowFailException):  # CellFailedPermanently is an AirflowFailException
            raise
        except Exception as exc:  # a defect or an unforeseen error still leaves a record
            raise self.fail(attempt, Failure("unknown", None, f"{type(exc).__name__}: {exc}")) from exc

    def on_kill(self) -> None:
        """A user's cancel (SIGTERM to the task): stop the container, free the devices; the
        attempt is recorded as `cancelled` by execute, which the SDK lets run to its end."""
        self._cancelled.set()
        self._stop_container("task killed")
        if self._lease is not None:
            self._lease.release()

    # -- phases -----------------------------------------------------------------------------
    def begin(self, ti) -> Attempt:
        """A new attempt folder (never one with files of an earlier attempt) and what the attempt runs."""
        cell = self.cell
        if cell is None:
            raise AirflowFailException(f"{self.task_id}: no cell to run (the operator was built without one)")
        configs = Configs()
        bench = configs.benchmark(self.benchmark_id)
        res = bench.resolved(cell["profile"])
        number, out = claim(cell, ti.try_number)
        write_json_atomic(out / TASK_FILE, {"dag_id": cell["dag_id"], "run_id": cell["run_id"], "task_id": ti.task_id,
                                            "map_index": getattr(ti, "map_index", -1), "try_number": ti.try_number,
                                            "attempt": number})
        if number != ti.try_number:
            self.log.warning("try %d of this task: attempt-%d exists already (a re-created run or a repeated "
                             "`dags test`); this try is attempt %d, in its own folder", ti.try_number, ti.try_number,
                             number)
        for line in account_for_lost_attempts(cell, number):
            print(line)
        host = configs.fleet.host(self.host_name)
        a = Attempt(cell=cell, number=number, bench=bench, host=host, resolved=res,
                    policy=timing_policy(cell["profile"], host), timeout_s=res.cell_timeout_minutes * 60, out=out)
        if cell.get("image"):  # a candidate tag from the plan: the configured repository only
            if image_repository(cell["image"]) != image_repository(self.image) or not IMAGE_REF.fullmatch(cell["image"]):
                raise self.fail(a, Failure("unknown", None, f"cell image {cell['image']!r} is not a tag of the "
                                           f"configured image {self.image!r}: refused"))
            self.image = cell["image"]
        return a

    def lease(self, a: Attempt):
        from scalebench.store.leases import LeaseManager, LeaseTimeout  # the store's ORM: not at DAG parse time

        if not self.dataset:
            raise self.fail(a, Failure("dataset_missing", None, "no dataset check result (check_dataset did not run)"))
        a.stage = "lease"
        try:
            lease = LeaseManager().acquire(a.host, a.cell["gpus"], a.cell["key"], timeout_s=a.timeout_s,
                                           exclusive=a.policy == "exclusive", abort=self._cancelled,
                                           avoid=a.cell.get("avoid_devices"))
        except LeaseTimeout as exc:
            if self._cancelled.is_set():
                raise self.fail(a, classify(None, [], cancelled=True)) from None
            raise self.fail(a, Failure("lease_timeout", None, str(exc))) from None
        self._lease = lease
        # its devices may be handed on at any moment now: no grace period for the container
        lease.start_heartbeat(on_lost=lambda why: self._stop_container(f"lease lost ({why})", grace_s=0))
        return lease

    def preflight(self, a: Attempt, lease) -> dict:
        a.stage = "preflight"
        if a.host.kind != "gpu":
            return {"status": "skipped", "reason": "CPU host (emulated devices)"}
        try:
            return preflight.check(lease.device_ids, precision=a.cell["precision"])
        except preflight.PreflightFailed as exc:
            write_json_atomic(a.out / PREFLIGHT_FILE, exc.report)
            reason = "precision_unsupported" if isinstance(exc, preflight.PrecisionUnsupported) else "preflight_failed"
            raise self.fail(a, Failure(reason, None, str(exc))) from None

    def spec(self, a: Attempt, lease, checked: dict) -> None:
        """Write cell.json (what runs, with provenance) and container.json (how it is started), and
        set the container's settings."""
        a.stage = "spec"
        digest, image_ref = self.identify_image(a)
        bench, host, cell = a.bench, a.host, a.cell
        doc = cell_document(cell, a.number, bench, a.resolved, host, lease.device_ids, lease.lease_id, a.policy,
                            checked, self.dataset, self.image, digest, image_ref)
        write_json_atomic(a.out / CELL_SPEC_FILE, doc)
        cache = paths.cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        s = settings(bench, host, cell, lease.device_ids, self.dataset["root"], str(a.out), str(cache),
                     uid_gid=(os.getuid(), os.getgid()))
        from scalebench.store.leases import LEASE_LABEL

        s.image = self.image  # a candidate tag from the plan, when given
        s.environment = {**(self.environment or {}), **s.environment}
        s.labels = {**s.labels, LEASE_LABEL: lease.lease_id}
        s.host_options = self.host_options()
        a.container = s
        write_json_atomic(a.out / CONTAINER_FILE, container_record(s, digest, host.name, lease.device_ids,
                                                                   lease.lease_id))
        self.log.info("cell %s (%s) on %s devices %s (%s timing, waited %.1fs for the lease), attempt %d -> %s",
                      cell["cell_id"], cell["label"], host.name, lease.device_ids, a.policy, lease.waited_s, a.number,
                      a.out)

    def run(self, a: Attempt, lease=None) -> Outcome:
        """Run the container under the cell-timeout watchdog; its output is folded in a log group."""
        a.stage = "run"
        if self._cancelled.is_set():
            raise self.fail(a, classify(None, [], cancelled=True))
        lost = lease and self.lease_lost(lease)  # renewed now: no decider can reclaim it for a TTL
        if lost:
            raise self.fail(a, Failure("lease_lost", None, f"{lost}; no container was started"))
        watchdog = threading.Timer(a.timeout_s, self._stop_for_timeout)
        watchdog.daemon = True
        exited = threading.Event()
        teardown = threading.Thread(target=self._watch_teardown, args=(a, exited), daemon=True, name="teardown")
        threading.Thread(target=_warm_validation, daemon=True, name="gx-import").start()
        self.container = None
        self._remove_leftovers(a)
        self.log.info("::group::Container output (%s)", self.image)
        try:
            watchdog.start()
            teardown.start()
            try:
                exit_code, lines = self.start_container(a)
            except _engine_errors() as exc:
                raise self.fail(a, self._engine_failure(exc)) from None
        finally:
            watchdog.cancel()
            exited.set()
            self.log.info("::endgroup::")
        oom = False
        if self.container:
            try:
                state = self.cli.inspect_container(self.container["Id"])["State"]
                exit_code, oom = state.get("ExitCode", exit_code), bool(state.get("OOMKilled"))
            finally:
                self.cli.remove_container(self.container["Id"], force=True)
        return Outcome(exit_code, [str(x) for x in lines], oom)

    def host_options(self) -> dict:
        """The docker provider's host parameters this task was given (none by default; on a GPU host
        e.g. ipc_mode="host" and a memlock ulimit for NCCL), for the cell's container."""
        given = {"mem_limit": self.mem_limit, "network_mode": self.network_mode, "ipc_mode": self.ipc_mode,
                 "ulimits": self.ulimits, "cap_add": self.cap_add, "dns": self.dns, "extra_hosts": self.extra_hosts,
                 "privileged": self.privileged}
        return {k: v for k, v in given.items() if v}

    def start_container(self, a: Attempt) -> tuple[int | None, list[str]]:
        """Create the container spec() described, start it and log its output as it comes; its
        exit code and lines."""
        if a.container is None:
            raise RuntimeError("run() before spec(): no container settings")
        cli = self.cli
        container_id = create(cli, a.container)
        self.container = {"Id": container_id}  # what a watchdog, a lost lease or a cancel stops
        stream = cli.attach(container=container_id, stdout=True, stderr=True, stream=True)
        cli.start(container_id)
        lines = self.log_output(stream)
        return cli.wait(container_id).get("StatusCode"), lines

    def log_output(self, stream) -> list[str]:
        """Each line of the container's output into the task log, inside the folded group, except a
        trainer's progress line: it closes the group, is logged on its own and reopens it, so the
        task log shows how far the cell is while it runs. Returns the lines."""
        lines: list[str] = []
        buffer = ""
        for chunk in stream:
            buffer += chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else str(chunk)
            *complete, buffer = buffer.split("\n")
            lines += [line.rstrip() for line in complete]
            for line in complete:
                self._log_line(line.rstrip())
        if buffer.rstrip():
            lines.append(buffer.rstrip())
            self._log_line(buffer.rstrip())
        return lines

    def _log_line(self, line: str) -> None:
        if line.startswith(PROGRESS_PREFIX):
            self.log.info("::endgroup::")
            self.log.info("%s", line)
            self.log.info("::group::Container output, continued (%s)", self.image)
        else:
            self.log.info("%s", line)

    @staticmethod
    def lease_lost(lease) -> str | None:
        """Why the lease is lost, renewing it now; None while it holds. A result made after the
        lease was lost is never valid: its devices may have been handed on."""
        from scalebench.store.leases import LeaseLost

        try:
            lease.confirm()
        except LeaseLost as exc:
            return str(exc)
        return None

    def classify(self, a: Attempt, outcome: Outcome) -> Failure | None:
        a.stage = "classify"
        if outcome.exit_code == 0 and not (self._timed_out.is_set() or self._cancelled.is_set()
                                           or self._hung_at_teardown.is_set()):
            return None
        try:  # every rank's run_stop success: a crash after it is the teardown's, not the run's
            finished = every_rank_finished(read_events(a.out / EVENTS_FILE))
        except (OSError, ValueError):  # no events, or a line a killed rank left half-written
            finished = False
        return classify(outcome.exit_code, outcome.lines, oom_killed=outcome.oom_killed,
                        timed_out=self._timed_out.is_set(), timeout_s=a.timeout_s, cancelled=self._cancelled.is_set(),
                        finished=finished, hung_s=self.teardown_deadline_s if self._hung_at_teardown.is_set() else None)

    def keep_teardown_crash(self, a: Attempt, failure: Failure, logs: list[str]) -> str:
        """A crash after the run (every rank's run_stop success, a result that validates): kept
        beside the result (teardown.json, which the store and the report read), said in the log
        and the task's note; the cell stays valid and is not retried."""
        line = failure.line(a.cell, a.number).replace(" failed: ", " valid, then crashed at teardown: ", 1)
        write_json_atomic(a.out / TEARDOWN_FILE, {"reason": failure.reason, "exit_code": failure.exit_code,
                                                  "message": line, "output_tail": logs[-OUTPUT_TAIL_LINES:]})
        self.log.warning("%s", line)
        if self._ti is not None and getattr(self._ti, "dag_id", None):
            notes.note(self._ti, line, log=lambda text: self.log.info("%s", text))
        return line

    def collect(self, a: Attempt, lease, outcome: Outcome) -> dict:
        """The result contract of a clean exit, summarised for validation."""
        a.stage = "collect"
        try:
            result = load_result(a.out / RESULT_FILE)
        except ContractError as exc:
            raise self.fail(a, Failure("contract_missing_or_invalid", outcome.exit_code, str(exc)),
                            outcome.lines) from None
        mismatch = contract_mismatch(a.cell, a.number, result)
        if mismatch:
            raise self.fail(a, Failure("contract_missing_or_invalid", outcome.exit_code, mismatch), outcome.lines)
        summary = {"cell": a.cell, "attempt": a.number, "attempt_dir": str(a.out), "device_ids": lease.device_ids,
                   "timing_policy": a.policy, "co_tenants": sorted(lease.co_tenants),
                   "train_s": result["timing"]["train_s"], "metrics": result["metrics"],
                   "world_size": result["devices"]["world_size"]}
        self.log.info("cell %s done: train %.2fs, metrics %s", a.cell["cell_id"], summary["train_s"], summary["metrics"])
        a.result = result
        return summary

    def validate(self, a: Attempt) -> None:
        """The result against the benchmark's GX suite; the verdict is kept beside it. A result
        that fails is `validation_failed` (deterministic): it is stored as invalid, never as the
        cell's figure."""
        from scalebench.cell.validation import validate_result

        a.stage = "validate"
        verdict = validate_result(a.cell, a.result or {}, list(a.bench.metrics), a.resolved.bounds)
        message = verdict.message(a.cell)
        write_json_atomic(a.out / VALIDATION_FILE, {"success": verdict.success, "failures": verdict.failures,
                                                    "message": message})
        if not verdict.success:
            raise self.fail(a, Failure("validation_failed", 0, "; ".join(verdict.failures)))
        self.log.info("%s", message)

    # -- helpers ----------------------------------------------------------------------------
    def write_placement(self, a: Attempt, lease, checked: dict, phases: dict[str, float]) -> None:
        write_json_atomic(a.out / PLACEMENT_FILE, {
            "host": a.host.name, "device_ids": lease.device_ids, "lease_id": lease.lease_id, "timing_policy": a.policy,
            "co_tenants": sorted(lease.co_tenants), "lease_wait_s": lease.waited_s, "preflight": checked,
            "phases_s": dict(phases)})

    def identify_image(self, a: Attempt) -> tuple[str, str]:
        """(digest, a reference that runs this image again): tagged by its digest on the engine, so a
        later build under the same tag leaves it runnable for an A/B or a bisect. Its package list
        is read and kept the first time the store sees the image; neither step fails the cell."""
        inspected = self._inspect_image(a)
        digest, ref = inspected["Id"], self.image
        try:
            ref = keep_reference(self.cli, self.image, inspected)
        except Exception as exc:
            self.log.warning("could not tag %s by its digest (%s: %s): an A/B may not find it later", self.image,
                             type(exc).__name__, exc)
        try:
            from scalebench.store.results import Store

            store = Store()
            if store.image_packages(digest) is None:
                store.save_image_packages(digest, self.image, ref, read_packages(self.cli, self.image))
                self.log.info("read and kept the package list of %s (%s)", self.image, digest[:19])
        except Exception as exc:
            self.log.warning("could not keep the package list of %s (%s: %s): a change verdict will not name "
                             "its packages", self.image, type(exc).__name__, exc)
        return digest, ref

    def _inspect_image(self, a: Attempt) -> dict:
        try:
            return self.cli.inspect_image(self.image)
        except Exception as exc:
            import docker.errors

            if isinstance(exc, docker.errors.ImageNotFound):
                raise self.fail(a, Failure("image_missing", None, f"image {self.image} is not on the Docker engine; "
                                           "build it with `make images`")) from None
            raise self.fail(a, Failure("engine_unreachable", None, f"Docker engine did not answer "
                                       f"({type(exc).__name__}: {str(exc)[:200]})")) from None

    @staticmethod
    def _engine_failure(exc: BaseException) -> Failure:
        """An engine that refused the container (bad mount, unknown device driver) will refuse it
        again: permanent. One that did not answer or dropped the connection: transient."""
        import docker.errors

        if isinstance(exc, docker.errors.APIError):
            return Failure("unknown", None, f"the Docker engine refused the container: {exc.explanation or exc}")
        return Failure("engine_unreachable", None, f"Docker engine failed during the run "
                                                   f"({type(exc).__name__}: {str(exc)[:200]})")

    def _remove_leftovers(self, a: Attempt) -> None:
        """Remove stopped containers of earlier attempts of this cell: an engine that went away
        mid-run took the container down before its attempt could remove it. (A running one
        belongs to a lost holder; the lease reclaim stops it.)"""
        try:
            left = self.cli.containers(all=True, filters={"label": f"{CELL_LABEL}={a.cell['key']}",
                                                          "status": ["created", "exited", "dead"]})
            for c in left or []:
                self.cli.remove_container(c["Id"], force=True)
                self.log.warning("removed container %s left by an earlier attempt of this cell", c["Id"][:12])
        except _engine_errors() as exc:  # the engine itself is checked when the container starts
            self.log.warning("could not look for leftover containers: %s", exc)

    def _stop_container(self, why: str, grace_s: int = 5) -> None:
        container = getattr(self, "container", None)
        if container:
            self.log.error("%s: stopping container %s", why, container["Id"][:12])
            try:
                self.cli.stop(container["Id"], timeout=grace_s)
            except Exception as exc:
                self.log.warning("could not stop container: %s", exc)

    def _watch_teardown(self, a: Attempt, exited: threading.Event, poll_s: float = 2.0) -> None:
        """The teardown's deadline: once every rank logged its run_stop success (the result is
        written), the processes get `teardown_deadline_s` to exit; a container still running then
        (a hang in destroy_process_group, which has no deadline, or at interpreter exit) is stopped."""
        finished_at = None
        while not exited.wait(poll_s):
            if finished_at is None:
                try:
                    if every_rank_finished(read_events(a.out / EVENTS_FILE)):
                        finished_at = time.monotonic()
                except (OSError, ValueError):  # no events yet, or a line being written
                    pass
            elif time.monotonic() - finished_at >= self.teardown_deadline_s:
                self._hung_at_teardown.set()
                self._stop_container(f"every rank finished {self.teardown_deadline_s:.0f} s ago and the container "
                                     "has not exited (hung at teardown)")
                return

    def _stop_for_timeout(self) -> None:
        self._timed_out.set()
        self._stop_container("cell timeout reached")

    def fail(self, a: Attempt, failure: Failure, logs: list[str] | None = None):
        """Record the failed attempt, log the reason line right after the output, and return the
        exception to raise."""
        logs = logs or []
        line = failure.line(a.cell, a.number, None if a.stage in self.QUIET_STAGES else a.stage)
        write_failure(a.out, failure, line, attempt=a.number, stage=a.stage, logs=logs)
        ti = self._ti
        if ti is not None:  # the UI's XCom tab and the note show why, even though the task failed
            ti.xcom_push(key="cell_summary", value={"cell": a.cell, "attempt": a.number, "stage": a.stage,
                                                    "reason": failure.reason, "exit_code": failure.exit_code,
                                                    "transient": failure.transient, "message": line})
            if getattr(ti, "dag_id", None):
                notes.note(ti, line, log=lambda text: self.log.info("%s", text))
        self.log.error("%s", line)
        if logs:
            self.log.error("last %d lines of the container output:\n%s", min(len(logs), OUTPUT_TAIL_LINES),
                           "\n".join(logs[-OUTPUT_TAIL_LINES:]))
        cls = CellFailed if failure.transient else CellFailedPermanently
        return cls(line, failure, logs)
