"""Why a cell failed, in one reason class; whether trying again can help."""
from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from scalebench_kit.names import CELL_SPEC_FILE, FAILURE_FILE, TRAINER_FAILED, VALIDATION_FILE
from scalebench_kit.names import FAILURE_REASONS as REASONS  # reason -> transient (retried) or not

CUDA_OOM = re.compile(r"CUDA out of memory|CUDA error: out of memory|OOM when allocating|RESOURCE_EXHAUSTED|"
                      r"cudaErrorMemoryAllocation|torch\.OutOfMemoryError", re.I)
COMM = re.compile(r"\bNCCL\b.*(error|timeout|timed out)|ncclInternalError|ncclSystemError|ncclUnhandledCudaError|"
                  r"ProcessGroupNCCL|Gloo.*(timed out|Connection reset|connection closed)|"
                  r"collective operation timeout|Watchdog caught collective operation timeout", re.I)
DATASET = re.compile(r"CIFAR-10 file missing|dataset .* missing|No such file or directory: '/data|"
                     r"not a CIFAR-10 python batch|FileNotFoundError: .*?/data/", re.I)

OUTPUT_TAIL_LINES = 50  # of the container output, kept with a failed attempt
EXTERNAL_SIGNALS = {"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"}


@dataclass(frozen=True)
class Failure:
    reason: str
    exit_code: int | None
    detail: str

    @property
    def transient(self) -> bool:
        return REASONS[self.reason]

    def line(self, cell: Mapping[str, Any], attempt: int, stage: str | None = None) -> str:
        """The one line a user sees: task failure message, log, XCom, task note, store, report."""
        code = "none" if self.exit_code is None else str(self.exit_code)
        where = f" at {stage}" if stage else ""
        return (f"cell {cell['cell_id']} ({cell['label']}) attempt {attempt} failed{where}: {self.reason}, "
                f"exit code {code}{' (transient)' if self.transient else ''}: {self.detail}")


def signal_of(exit_code: int | None) -> str | None:
    """The signal that ended a container's main process (exit code 128 + N), by name."""
    if exit_code is None or not 128 < exit_code < 128 + 65:
        return None
    try:
        return signal.Signals(exit_code - 128).name
    except ValueError:
        return f"signal {exit_code - 128}"


def classify(exit_code: int | None, output: list[str], *, oom_killed: bool = False, timed_out: bool = False,
             timeout_s: float | None = None, cancelled: bool = False, finished: bool = False,
             hung_s: float | None = None) -> Failure:
    """Classify a finished container; the first match wins, in this order: a user's cancel, every
    rank `finished` (logged its run_stop success: whatever ended it then, a hang stopped by the
    teardown deadline `hung_s` or the cell timeout, the OOM killer, a crash, is the teardown's), our
    watchdog, the kernel OOM killer, any other signal, then what the output says."""
    text = "\n".join(output[-400:])
    if cancelled:
        return Failure("cancelled", exit_code, "stopped on request (the task was marked failed, cleared or killed)")
    if finished:
        how = (f"hung at teardown for {hung_s:.0f} s and was stopped" if hung_s is not None else
               f"hung at teardown until the cell timeout of {timeout_s:.0f}s and was stopped" if timed_out else
               crashed_rank(exit_code, output))
        return Failure("teardown_crash", exit_code, f"after every rank's run_stop success: {how}")
    if timed_out:
        return Failure("timeout", exit_code, f"ran past the cell timeout of {timeout_s:.0f}s and was stopped")
    if oom_killed:
        return Failure("out_of_memory", exit_code, "the container was killed by the kernel OOM killer (host memory)")
    sig = signal_of(exit_code)
    if sig:
        outside = " (docker kill or stop, preemption, host shutdown)" if sig in EXTERNAL_SIGNALS else ""
        return Failure("killed", exit_code, f"the container's main process was ended by {sig}{outside}")
    for pattern, reason, what in ((CUDA_OOM, "out_of_memory", "device memory exhausted"),
                                  (COMM, "communication_error", "collective communication failed"),
                                  (DATASET, "dataset_missing", "dataset missing or malformed")):
        m = pattern.search(text)
        if m:  # quote the whole output line the match is on
            line = text[text.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0].strip()
            return Failure(reason, exit_code, f"{what} ({line[:200]})")
    trainer = next((ln.strip() for ln in reversed(output) if ln.startswith(TRAINER_FAILED)), None)
    if trainer:
        return Failure("unknown", exit_code, trainer[len(TRAINER_FAILED):].strip()[:200])
    return Failure("unknown", exit_code, f"last output line: {last_meaningful_line(output)[:200]}")


# torchrun's own log lines once a child failed (closing the others, "failed (exitcode: ...)"), then
# its traceback and summary table: what comes before the first is the children's
LAUNCHER_FAILED = re.compile(r"torch/distributed/elastic/multiprocessing/api\.py:\d+\]")


def before_launcher(output: list[str]) -> list[str]:
    """The output up to torchrun's own first line about a failure: the children's."""
    return output[:next((i for i, ln in enumerate(output) if LAUNCHER_FAILED.search(ln)), len(output))]


# torchrun's summary of each failed child: "[0]:" / "rank      : 1 (local_rank: 1)" / "exitcode  : -6 (pid: 42)"
CHILD_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
CHILD_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)")
TEARDOWN_LINES = 3  # the last lines before the launcher's report, quoted in the reason


def every_rank_finished(events: list[dict]) -> bool:
    """Every process of the run (ranks 0..world_size-1, as its events say) logged its run_stop
    success in events.jsonl: the run was over, its result written."""
    world = max((int(e.get("world_size") or 1) for e in events), default=0)
    done = {e.get("rank") for e in events if e.get("key") == "run_stop" and e.get("value") == "success"}
    return world >= 1 and set(range(world)) <= done


def crashed_rank(exit_code: int | None, output: list[str]) -> str:
    """Which rank died and how, as torchrun's report or the exit code says, and the last lines
    before the report (e.g. `terminate called without an active exception`)."""
    rank = code = None
    for line in output:
        if (m := CHILD_RANK.match(line)) and rank is None:
            rank = int(m.group(1))
        elif (m := CHILD_EXIT.match(line)) and code is None:
            code = int(m.group(1))
    sig = signal_of(128 - code) if code is not None and code < 0 else signal_of(exit_code)
    who = f"rank {rank}" if rank is not None else "the main process"
    how = f"ended by {sig}" if sig else f"exited {code if code is not None else exit_code}"
    last = [ln.strip() for ln in before_launcher(output) if ln.strip()][-TEARDOWN_LINES:]
    return f"{who} {how} at teardown; last lines: {' | '.join(last)[:300] or 'none'}"


def last_meaningful_line(output: list[str]) -> str:
    """The last non-blank line, or under torchrun the last one before its own lines about the
    failure (closing the other children, its report of '====' rules and fields that name no
    cause; the child's error comes first)."""
    for scope in (before_launcher(output), output):
        found = next((ln.strip() for ln in reversed(scope) if ln.strip()), None)
        if found:
            return found
    return "no output"


def write_failure(attempt_dir, failure: Failure, line: str, *, attempt: int, stage: str,
                  logs: list[str] | None = None) -> dict:
    """The attempt's failure record (failure.json): what the store, `scalebench results` and the report read."""
    from scalebench_kit.contract import write_json_atomic

    record = {"reason": failure.reason, "exit_code": failure.exit_code, "transient": failure.transient,
              "attempt": attempt, "stage": stage, "message": line, "output_tail": (logs or [])[-OUTPUT_TAIL_LINES:]}
    attempt_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(attempt_dir / FAILURE_FILE, record)
    return record


def account_for_lost_attempts(cell: dict, current: int) -> list[str]:
    """Earlier attempts of this cell that left no verdict (no failure.json, no validation.json)
    died with their task process (a killed Celery worker, a lost host): the scheduler retried
    them without anyone writing their record. Each gets one now, so it is not mistaken for an
    unvalidated result. Returns the lines."""
    from scalebench.core.attempt_folders import attempt_dir

    lines = []
    for number in range(1, current):
        out = attempt_dir(cell, number)
        if not out.exists() or (out / FAILURE_FILE).exists() or (out / VALIDATION_FILE).exists():
            continue
        failure = Failure("worker_lost", None, f"the task process of attempt {number} was lost (worker killed, host "
                                               f"restarted or task heartbeat timeout) before it wrote a record; "
                                               f"retried as attempt {current}")
        line = failure.line(cell, number, "run")
        write_failure(out, failure, line, attempt=number, stage="run")
        lines.append(line)
    return lines


def fail_planned_cells(cells: Sequence[Mapping[str, Any]], stage: str, failure: Failure) -> list[str]:
    """A task before the cells failed: each planned cell that has not started gets a failed
    attempt 1 naming that task (a retry of the task rewrites it), so nothing is reported as
    merely missing. Returns the lines."""
    from scalebench.core.attempt_folders import attempt_dir

    lines = []
    for cell in cells:
        out = attempt_dir(cell, 1)
        if (out / CELL_SPEC_FILE).exists():
            continue  # the cell did start: its own record stands
        line = failure.line(cell, 1, stage)
        write_failure(out, failure, line, attempt=1, stage=stage)
        lines.append(line)
    return lines
