"""One attempt of one cell as a pipeline of named phases, with no Airflow in it.

    begin -> lease -> preflight -> spec -> run -> classify -> collect -> validate

`CellRun.walk()` runs PHASES in order; one clock times each phase and names the stage a failure
is recorded under (placement.json's phases_s: where a cell's time outside its container goes).
A phase that fails records failure.json in the attempt folder (class, exit code, attempt,
stage, message) and raises CellRunFailed; the operator turns that into Airflow's retry decision,
the task note and the XCom. Every Docker call goes through `cell.engine.Engine`.

classify decides what the exit means; a crash after every rank's run_stop success (a teardown
crash) is not a failure but an outcome that collect keeps beside the result (teardown.json):
the cell stays valid when its result validates.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from scalebench_kit.contract import ContractError, load_result, write_json_atomic
from scalebench_kit.events import read_events
from scalebench_kit.names import (CELL_SPEC_FILE, CONTAINER_FILE, EVENTS_FILE, PLACEMENT_FILE, PREFLIGHT_FILE,
                                  PROGRESS_PREFIX, RESULT_FILE, TASK_FILE, TEARDOWN_FILE, VALIDATION_FILE)

from scalebench.cell import preflight
from scalebench.cell.container import ContainerSettings, record as container_record, settings
from scalebench.cell.engine import CELL_LABEL, ENGINE_ERRORS, LEASE_LABEL, Engine, EngineError, ImageMissing, explain, refused
from scalebench.cell.failures import (OUTPUT_TAIL_LINES, Failure, account_for_lost_attempts, classify,
                                      every_rank_finished, write_failure)
from scalebench.cell.images import keep_reference, read_packages
from scalebench.cell.spec import cell_document
from scalebench.core import paths
from scalebench.core.attempt_folders import claim, contract_mismatch
from scalebench.core.cells import timing_policy
from scalebench.core.config import IMAGE_REF, Configs, image_repository

if TYPE_CHECKING:  # the store's ORM is not imported at DAG parse time
    from scalebench.store.leases import Lease

PHASES = ("begin", "lease", "preflight", "spec", "run", "classify", "collect", "validate")
QUIET_STAGES = ("begin", "run", "classify", "collect", "validate")  # a failure here speaks for itself


class CellRunFailed(Exception):
    """A recorded failure: its one-line message, the Failure, the container output tail."""

    def __init__(self, line: str, failure: Failure, logs: list[str]):
        super().__init__(line)
        self.line, self.failure, self.logs = line, failure, logs


@dataclass
class TaskIdentity:
    """What the attempt folder records of the Airflow task running the cell."""
    dag_id: str
    task_id: str
    map_index: int
    try_number: int


@dataclass
class Outcome:
    exit_code: int | None
    lines: list[str]
    oom_killed: bool


@dataclass
class PhaseClock:
    """Seconds each phase took, and the phase now running (the stage a failure is recorded under)."""
    stage: str = "begin"
    phases: dict[str, float] = field(default_factory=dict)
    _since: float = field(default_factory=time.monotonic)

    def enter(self, name: str) -> None:
        self.stage, self._since = name, time.monotonic()

    def close(self) -> None:
        self.phases[self.stage] = round(time.monotonic() - self._since, 3)


def fold_output(stream: Iterable, log, image: str) -> list[str]:
    """Each line of the container's output into the task log, inside a folded group, except a
    trainer's progress line: it closes the group, is logged on its own and reopens it, so the
    task log shows how far the cell is while it runs. Returns the lines."""
    def one(line: str) -> None:
        if line.startswith(PROGRESS_PREFIX):
            log.info("::endgroup::")
            log.info("%s", line)
            log.info("::group::Container output, continued (%s)", image)
        else:
            log.info("%s", line)

    lines: list[str] = []
    buffer = ""
    for chunk in stream:
        buffer += chunk.decode("utf-8", "replace") if isinstance(chunk, bytes) else str(chunk)
        *complete, buffer = buffer.split("\n")
        for line in complete:
            lines.append(line.rstrip())
            one(line.rstrip())
    if buffer.rstrip():
        lines.append(buffer.rstrip())
        one(buffer.rstrip())
    return lines


def _warm_validation() -> None:
    """Import GX (seconds) while the container runs, quietly: its import logs every API it registers."""
    import logging

    logging.getLogger("great_expectations").setLevel(logging.WARNING)
    from scalebench.cell import validation  # noqa: F401
    import great_expectations  # noqa: F401


class CellRun:
    """One attempt: built by the operator with what the task knows, walked once."""

    def __init__(self, *, cell: dict, dataset: Any, benchmark_id: str, host_name: str, image: str, task: TaskIdentity,
                 engine: Engine, log, environment: dict | None = None, host_options: dict | None = None,
                 teardown_deadline_s: float = 120.0):
        self.cell, self.dataset, self.benchmark_id, self.host_name = cell, dataset, benchmark_id, host_name
        self.image, self.task, self.engine, self.log = image, task, engine, log
        self.environment, self.host_options = environment or {}, host_options or {}
        self.teardown_deadline_s = teardown_deadline_s
        self.clock = PhaseClock()
        self.number = 0
        self.out: Path | None = None
        self.lease_held: Lease | None = None
        self.checked: dict = {}
        self.container: ContainerSettings | None = None
        self.container_id: str | None = None
        self.outcome: Outcome | None = None
        self.teardown: Failure | None = None
        self.result: dict = {}
        self.summary: dict = {}
        self.cancelled, self.timed_out, self.hung = threading.Event(), threading.Event(), threading.Event()

    def walk(self) -> dict:
        """Every phase in order; the summary XCom of a valid cell. The lease is released whatever happens."""
        try:
            for name in PHASES:
                self.clock.enter(name)
                getattr(self, name)()
                self.clock.close()
            self.write_placement()  # again, with the phases after the container
            self.log.info("phases (s): %s", ", ".join(f"{k} {v:.2f}" for k, v in self.clock.phases.items()))
            return self.summary
        except CellRunFailed:
            raise
        except BaseException as exc:  # from outside the phases (the task's execution_timeout, a defect):
            self.stop_container(f"the cell's task ended ({type(exc).__name__})")  # before its devices are freed
            raise
        finally:
            self.release()

    # -- the phases -----------------------------------------------------------------------
    def begin(self) -> None:
        """A new attempt folder (never one with files of an earlier attempt) and what it runs."""
        cell = self.cell
        configs = Configs()
        self.bench = configs.benchmark(self.benchmark_id)
        self.resolved = self.bench.resolved(cell["profile"])
        self.number, self.out = claim(cell, self.task.try_number)
        write_json_atomic(self.out / TASK_FILE, {"dag_id": cell["dag_id"], "run_id": cell["run_id"],
                                                 "task_id": self.task.task_id, "map_index": self.task.map_index,
                                                 "try_number": self.task.try_number, "attempt": self.number})
        if self.number != self.task.try_number:
            self.log.warning("try %d of this task: attempt-%d exists already (a re-created run or a repeated "
                             "`dags test`); this try is attempt %d, in its own folder", self.task.try_number,
                             self.task.try_number, self.number)
        for line in account_for_lost_attempts(cell, self.number):
            print(line)
        self.host = configs.fleet.host(self.host_name)
        self.policy = timing_policy(cell["profile"], self.host)
        self.timeout_s = self.resolved.cell_timeout_minutes * 60
        if cell.get("image"):  # a candidate tag from the plan: the configured repository only
            if image_repository(cell["image"]) != image_repository(self.image) or not IMAGE_REF.fullmatch(cell["image"]):
                raise self.fail(Failure("unknown", None, f"cell image {cell['image']!r} is not a tag of the "
                                        f"configured image {self.image!r}: refused"))
            self.image = cell["image"]
        if not self.dataset:
            raise self.fail(Failure("dataset_missing", None, "no dataset check result (check_dataset did not run)"))

    def lease(self) -> None:
        from scalebench.store.leases import LeaseManager, LeaseTimeout  # the store's ORM: not at DAG parse time

        try:
            lease = LeaseManager(stop_containers=self.engine.stop_lease_containers).acquire(
                self.host, self.cell["gpus"], self.cell["key"], timeout_s=self.timeout_s,
                exclusive=self.policy == "exclusive", abort=self.cancelled, avoid=self.cell.get("avoid_devices"))
        except LeaseTimeout as exc:
            if self.cancelled.is_set():
                raise self.fail(classify(None, [], cancelled=True)) from None
            raise self.fail(Failure("lease_timeout", None, str(exc))) from None
        self.lease_held = lease
        # its devices may be handed on at any moment now: no grace period for the container
        lease.start_heartbeat(on_lost=lambda why: self.stop_container(f"lease lost ({why})", grace_s=0))

    def preflight(self) -> None:
        if self.host.kind != "gpu":
            self.checked = {"status": "skipped", "reason": "CPU host (emulated devices)"}
            return
        try:
            self.checked = preflight.check(self.held.device_ids, precision=self.cell["precision"])
        except preflight.PreflightFailed as exc:
            write_json_atomic(self.attempt_dir / PREFLIGHT_FILE, exc.report)
            reason = "precision_unsupported" if isinstance(exc, preflight.PrecisionUnsupported) else "preflight_failed"
            raise self.fail(Failure(reason, None, str(exc))) from None

    def spec(self) -> None:
        """cell.json (what runs, with provenance), container.json (how it is started), and the
        container's settings."""
        digest, image_ref = self.identify_image()
        lease, cell, out = self.held, self.cell, self.attempt_dir
        doc = cell_document(cell, self.number, self.bench, self.resolved, self.host, lease.device_ids, lease.lease_id,
                            self.policy, self.checked, self.dataset, self.image, digest, image_ref)
        write_json_atomic(out / CELL_SPEC_FILE, doc)
        cache = paths.cache_dir()
        cache.mkdir(parents=True, exist_ok=True)
        s = settings(self.bench, self.host, cell, lease.device_ids, self.dataset["root"], str(out), str(cache),
                     uid_gid=(os.getuid(), os.getgid()))
        s.image = self.image  # a candidate tag from the plan, when given
        s.environment = {**self.environment, **s.environment}
        s.labels = {**s.labels, LEASE_LABEL: lease.lease_id}
        s.host_options = dict(self.host_options)
        self.container = s
        write_json_atomic(out / CONTAINER_FILE, container_record(s, digest, self.host.name, lease.device_ids,
                                                                 lease.lease_id))
        self.log.info("cell %s (%s) on %s devices %s (%s timing, waited %.1fs for the lease), attempt %d -> %s",
                      cell["cell_id"], cell["label"], self.host.name, lease.device_ids, self.policy, lease.waited_s,
                      self.number, out)

    def run(self) -> None:
        """The container under the cell-timeout watchdog and the teardown deadline; its output
        folded in a log group."""
        if self.cancelled.is_set():
            raise self.fail(classify(None, [], cancelled=True))
        lost = self.lease_lost()  # renewed now: no decider can reclaim it for a TTL
        if lost:
            raise self.fail(Failure("lease_lost", None, f"{lost}; no container was started"))
        watchdog = threading.Timer(self.timeout_s, self._stop_for_timeout)
        watchdog.daemon = True
        exited = threading.Event()
        teardown = threading.Thread(target=self._watch_teardown, args=(exited,), daemon=True, name="teardown")
        threading.Thread(target=_warm_validation, daemon=True, name="gx-import").start()
        self._remove_leftovers()
        self.log.info("::group::Container output (%s)", self.image)
        try:
            watchdog.start()
            teardown.start()
            try:
                exit_code, lines = self._start_and_follow()
            except ENGINE_ERRORS as exc:
                raise self.fail(self._engine_failure(exc)) from None
        finally:
            watchdog.cancel()
            exited.set()
            self.log.info("::endgroup::")
        oom = False
        if self.container_id:
            try:
                exit_code, oom = self.engine.exit_state(self.container_id, exit_code)
            finally:
                self.engine.remove(self.container_id)
        self.outcome = Outcome(exit_code, [str(x) for x in lines], oom)

    def classify(self) -> None:
        """What the exit means: a lost lease first (a result made after it is never valid), then
        the exit code, the output and the watchdogs; a crash after every rank finished is kept as
        the teardown's, for collect."""
        self.write_placement()  # the container's placement, whatever follows
        out = self.outcome
        assert out is not None
        lost = self.lease_lost()
        if lost:
            raise self.fail(Failure("lease_lost", out.exit_code, f"{lost}; its container was stopped"))
        if out.exit_code == 0 and not (self.timed_out.is_set() or self.cancelled.is_set() or self.hung.is_set()):
            return
        try:  # every rank's run_stop success: a crash after it is the teardown's, not the run's
            finished = every_rank_finished(read_events(self.attempt_dir / EVENTS_FILE))
        except (OSError, ValueError):  # no events, or a line a killed rank left half-written
            finished = False
        failure = classify(out.exit_code, out.lines, oom_killed=out.oom_killed, timed_out=self.timed_out.is_set(),
                           timeout_s=self.timeout_s, cancelled=self.cancelled.is_set(), finished=finished,
                           hung_s=self.teardown_deadline_s if self.hung.is_set() else None)
        if failure.reason != "teardown_crash":
            raise self.fail(failure, out.lines)
        self.teardown = failure

    def collect(self) -> None:
        """The result contract, summarised for validation; a teardown crash kept beside it."""
        out = self.outcome
        assert out is not None
        try:
            result = load_result(self.attempt_dir / RESULT_FILE)
        except ContractError as exc:
            raise self.fail(Failure("contract_missing_or_invalid", out.exit_code, str(exc)), out.lines) from None
        mismatch = contract_mismatch(self.cell, self.number, result)
        if mismatch:
            raise self.fail(Failure("contract_missing_or_invalid", out.exit_code, mismatch), out.lines)
        lease = self.held
        self.result = result
        self.summary = {"cell": self.cell, "attempt": self.number, "attempt_dir": str(self.out),
                        "device_ids": lease.device_ids, "timing_policy": self.policy,
                        "co_tenants": sorted(lease.co_tenants), "train_s": result["timing"]["train_s"],
                        "metrics": result["metrics"], "world_size": result["devices"]["world_size"]}
        self.log.info("cell %s done: train %.2fs, metrics %s", self.cell["cell_id"], self.summary["train_s"],
                      self.summary["metrics"])
        if self.teardown:  # the run was over: kept with the result, which validate still judges
            line = self.teardown.line(self.cell, self.number).replace(" failed: ", " valid, then crashed at teardown: ", 1)
            write_json_atomic(self.attempt_dir / TEARDOWN_FILE, {
                "reason": self.teardown.reason, "exit_code": self.teardown.exit_code, "message": line,
                "output_tail": out.lines[-OUTPUT_TAIL_LINES:]})
            self.summary["teardown_crash"] = line

    def validate(self) -> None:
        """The result against the benchmark's GX suite; the verdict is kept beside it. A result
        that fails is `validation_failed` (deterministic): stored as invalid, never as the figure."""
        from scalebench.cell.validation import validate_result

        verdict = validate_result(self.cell, self.result, list(self.bench.metrics), self.resolved.bounds)
        message = verdict.message(self.cell)
        write_json_atomic(self.attempt_dir / VALIDATION_FILE, {"success": verdict.success,
                                                               "failures": verdict.failures, "message": message})
        if not verdict.success:
            raise self.fail(Failure("validation_failed", 0, "; ".join(verdict.failures)))
        self.log.info("%s", message)

    # -- stopping, from other threads -----------------------------------------------------
    def cancel(self) -> None:
        """A user's cancel: stop the container, free the devices; walk() records `cancelled`."""
        self.cancelled.set()
        self.stop_container("task killed")
        self.release()

    def stop_container(self, why: str, grace_s: int = 5) -> None:
        if self.container_id:
            self.log.error("%s: stopping container %s", why, self.container_id[:12])
            try:
                self.engine.stop(self.container_id, grace_s)
            except Exception as exc:
                self.log.warning("could not stop container: %s", exc)

    def release(self) -> None:
        if self.lease_held is not None:  # idempotent: a cancel and the walk's end both release
            self.lease_held.release()

    def fail(self, failure: Failure, logs: list[str] | None = None) -> CellRunFailed:
        """Record the failed attempt (failure.json) and return the exception to raise."""
        logs = logs or []
        stage = self.clock.stage
        line = failure.line(self.cell, self.number, None if stage in QUIET_STAGES else stage)
        if self.out is not None:
            write_failure(self.out, failure, line, attempt=self.number, stage=stage, logs=logs)
        return CellRunFailed(line, failure, logs)

    # -- helpers --------------------------------------------------------------------------
    @property
    def held(self) -> Lease:
        assert self.lease_held is not None, "a phase after lease() ran without one"
        return self.lease_held

    @property
    def attempt_dir(self) -> Path:
        assert self.out is not None, "a phase after begin() ran without an attempt folder"
        return self.out

    def write_placement(self) -> None:
        lease = self.held
        write_json_atomic(self.attempt_dir / PLACEMENT_FILE, {
            "host": self.host.name, "device_ids": lease.device_ids, "lease_id": lease.lease_id,
            "timing_policy": self.policy, "co_tenants": sorted(lease.co_tenants), "lease_wait_s": lease.waited_s,
            "preflight": self.checked, "phases_s": dict(self.clock.phases)})

    def lease_lost(self) -> str | None:
        """Why the lease is lost, renewing it now; None while it holds."""
        from scalebench.store.leases import LeaseLost

        try:
            self.held.confirm()
        except LeaseLost as exc:
            return str(exc)
        return None

    def identify_image(self) -> tuple[str, str]:
        """(digest, a reference that runs this image again): tagged by its digest on the engine, so a
        later build under the same tag leaves it runnable for an A/B or a bisect. Its package list
        is read and kept the first time the store sees the image; neither step fails the cell."""
        try:
            inspected = self.engine.inspect_image(self.image)
        except ImageMissing:
            raise self.fail(Failure("image_missing", None, f"image {self.image} is not on the Docker engine; "
                                    "build it with `make images`")) from None
        except EngineError as exc:
            raise self.fail(Failure("engine_unreachable", None, str(exc))) from None
        digest, ref = inspected["Id"], self.image
        try:
            ref = keep_reference(self.engine, self.image, inspected)
        except Exception as exc:
            self.log.warning("could not tag %s by its digest (%s: %s): an A/B may not find it later", self.image,
                             type(exc).__name__, exc)
        try:
            from scalebench.store.results import Store

            store = Store()
            if store.image_packages(digest) is None:
                store.save_image_packages(digest, self.image, ref, read_packages(self.engine, self.image))
                self.log.info("read and kept the package list of %s (%s)", self.image, digest[:19])
        except Exception as exc:
            self.log.warning("could not keep the package list of %s (%s: %s): a change verdict will not name "
                             "its packages", self.image, type(exc).__name__, exc)
        return digest, ref

    def _start_and_follow(self) -> tuple[int | None, list[str]]:
        if self.container is None:
            raise RuntimeError("run() before spec(): no container settings")
        self.container_id = self.engine.create(self.container)  # what a watchdog, a lost lease or a cancel stops
        stream = self.engine.attach(self.container_id)
        self.engine.start(self.container_id)
        lines = fold_output(stream, self.log, self.image)
        return self.engine.wait(self.container_id), lines

    @staticmethod
    def _engine_failure(exc: BaseException) -> Failure:
        """An engine that refused the container (bad mount, unknown device driver) will refuse it
        again: permanent. One that did not answer or dropped the connection: transient."""
        if refused(exc):
            return Failure("unknown", None, f"the Docker engine refused the container: {explain(exc)}")
        return Failure("engine_unreachable", None, f"Docker engine failed during the run ({explain(exc)})")

    def _remove_leftovers(self) -> None:
        """Remove stopped containers of earlier attempts of this cell: an engine that went away
        mid-run took the container down before its attempt could remove it. (A running one
        belongs to a lost holder; the lease reclaim stops it.)"""
        try:
            for container_id in self.engine.remove_stopped(CELL_LABEL, self.cell["key"]):
                self.log.warning("removed container %s left by an earlier attempt of this cell", container_id[:12])
        except ENGINE_ERRORS as exc:  # the engine itself is checked when the container starts
            self.log.warning("could not look for leftover containers: %s", exc)

    def _watch_teardown(self, exited: threading.Event, poll_s: float = 2.0) -> None:
        """The teardown's deadline: once every rank logged its run_stop success (the result is
        written), the processes get `teardown_deadline_s` to exit; a container still running then
        (a hang in destroy_process_group, which has no deadline, or at interpreter exit) is stopped."""
        finished_at = None
        while not exited.wait(poll_s):
            if finished_at is None:
                try:
                    if every_rank_finished(read_events(self.attempt_dir / EVENTS_FILE)):
                        finished_at = time.monotonic()
                except (OSError, ValueError):  # no events yet, or a line being written
                    pass
            elif time.monotonic() - finished_at >= self.teardown_deadline_s:
                self.hung.set()
                self.stop_container(f"every rank finished {self.teardown_deadline_s:.0f} s ago and the container "
                                    "has not exited (hung at teardown)")
                return

    def _stop_for_timeout(self) -> None:
        self.timed_out.set()
        self.stop_container("cell timeout reached")

