"""The record step: every attempt folder of a run goes into the results store (idempotent)."""
from __future__ import annotations

from pathlib import Path

from scalebench_kit.contract import ContractError, load_result, read_json
from scalebench_kit.names import (CELL_SPEC_FILE, FAILURE_FILE, PLACEMENT_FILE, RESULT_FILE, TASK_FILE, TEARDOWN_FILE,
                                  VALIDATION_FILE)

from scalebench.core.attempt_folders import cell_attempts, contract_mismatch
from scalebench.core.records import PlannedCell
from scalebench.store.db import OUTAGE_WAIT_S, outlasting_outages
from scalebench.store.results import Store


def attempt_record(folder: Path, cell: PlannedCell | None = None, number: int | None = None) -> tuple[str, dict]:
    """(status, fields) for one attempt folder, from what it holds on disk. With the cell and the
    attempt number, a contract that names another cell, benchmark, run or attempt is refused."""
    failure = folder / FAILURE_FILE
    validation = folder / VALIDATION_FILE
    if failure.exists() and not validation.exists():  # a verdict means the result was read: judged below
        doc = read_json(failure)
        return "failed", {"reason": doc.get("reason"), "message": doc.get("message"), "exit_code": doc.get("exit_code")}
    if not (folder / RESULT_FILE).exists():
        return "failed", {"reason": "contract_missing_or_invalid", "message": f"{folder}: no {RESULT_FILE}"}
    try:
        contract = load_result(folder / RESULT_FILE)
    except ContractError as exc:
        return "invalid", {"reason": "contract_missing_or_invalid", "message": str(exc)}
    mismatch = cell is not None and number is not None and contract_mismatch(cell, number, contract)
    if mismatch:  # never filed under a cell it is not: the contract stays in its folder, not in the store
        return "invalid", {"reason": "contract_missing_or_invalid", "message": f"{folder}: {mismatch}"}
    if not validation.exists():
        return "invalid", {"reason": "not_validated", "message": f"{folder}: not validated", "contract": contract}
    verdict = read_json(validation)
    if not verdict.get("success"):
        return "invalid", {"reason": "validation_failed", "message": verdict.get("message"), "contract": contract}
    if (folder / TEARDOWN_FILE).exists():  # valid, and the crash after the run is kept with it
        crash = read_json(folder / TEARDOWN_FILE)
        return "valid", {"contract": contract, "reason": crash.get("reason"), "message": crash.get("message"),
                         "exit_code": crash.get("exit_code")}
    return "valid", {"contract": contract}


def record_run(store: Store, dag_id: str, run_id: str, cells: list[PlannedCell], run_row: bool = True) -> dict:
    """Record every attempt of the planned cells; counts by status, and the cells with no valid
    attempt. `run_row`: also note the run as recorded (not for its reruns, which come later)."""
    counts = {"valid": 0, "invalid": 0, "failed": 0, "missing": 0}
    not_valid = []
    for cell in cells:
        # an attempt that failed before its container (lease, pre-flight, a task before the cells)
        # has failure.json but no cell.json: it still counts, with its reason
        attempts = [(n, a) for n, a in cell_attempts(cell) if (a / CELL_SPEC_FILE).exists() or (a / FAILURE_FILE).exists()]
        if not attempts:  # planned and never started: the only meaning of "missing"
            counts["missing"] += 1
            not_valid.append(f"{cell['label']}: missing (never started)")
            store.record_missing(cell)
            continue
        statuses = []
        for number, a in attempts:
            status, fields = attempt_record(a, cell, number)
            if (a / PLACEMENT_FILE).exists():
                fields["placement"] = read_json(a / PLACEMENT_FILE)
            if (a / TASK_FILE).exists():
                fields["task"] = read_json(a / TASK_FILE)
            store.record_attempt(cell, number, status, **fields)
            counts[status] += 1
            statuses.append((status, fields.get("reason")))
        if "valid" not in [s for s, _ in statuses]:
            status, reason = statuses[-1]
            not_valid.append(f"{cell['label']}: {status} ({reason})")
    if cells and run_row:
        first = cells[0]
        store.record_run(dag_id=dag_id, run_id=run_id, benchmark=first["benchmark"], run_type=first["run_type"],
                         night=first.get("night"), counts=counts)
    return {**counts, "not_valid": not_valid}


def record_run_when_reachable(dag_id: str, run_id: str, cells: list[PlannedCell], *, url: str | None = None,
                              within_s: float = OUTAGE_WAIT_S, run_row: bool = True) -> dict:
    """The record step as the DAG runs it: a results database that is down or locked for a while
    (a restart, a long writer) delays the step instead of failing the night."""
    return outlasting_outages(lambda: record_run(Store(url), dag_id, run_id, cells, run_row),
                              what=f"record {dag_id} {run_id}", within_s=within_s)
