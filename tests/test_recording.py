import json

from scalebench import runs
from scalebench.recording import record_run
from scalebench.store import Store
from scalebench_kit.contract import write_json_atomic
from tests.conftest import sample_cell, sample_contract


def _attempt(cell, k, *, contract=None, validation=None, failure=None):
    d = runs.attempt_dir(cell, k)
    d.mkdir(parents=True)
    write_json_atomic(d / "cell.json", {"cell": cell})
    if contract is not None:
        (d / "metrics.json").write_text(json.dumps(contract))
    if validation is not None:
        write_json_atomic(d / runs.VALIDATION_FILE, validation)
    if failure is not None:
        write_json_atomic(d / runs.FAILURE_FILE, failure)


def test_record_run_reads_every_attempt_folder_and_is_idempotent():
    ok, retried, invalid, missing = (sample_cell(gpus=g, run_id="manual__x") for g in (1, 2, 3, 4))
    _attempt(ok, 1, contract=sample_contract(ok), validation={"success": True})
    _attempt(retried, 1, failure={"reason": "container_failed", "message": "exit 137"})
    _attempt(retried, 2, contract=sample_contract(retried), validation={"success": True})
    _attempt(invalid, 1, contract=sample_contract(invalid), validation={"success": False, "message": "precision 1.7"})
    store = Store()
    planned = [ok, retried, invalid, missing]
    counts = record_run(store, ok["dag_id"], ok["run_id"], planned)
    assert {k: v for k, v in counts.items() if k != "not_valid"} == {"valid": 2, "invalid": 1, "failed": 1, "missing": 1}
    assert counts["not_valid"] == ["3 GPUs · 3 epochs · repeat 1: invalid (validation_failed)",
                                   "4 GPUs · 3 epochs · repeat 1: missing (no attempt ran)"]
    assert record_run(store, ok["dag_id"], ok["run_id"], planned) == counts
    stored = {c["gpus"]: c for c in store.cells()}
    assert sorted(stored) == [1, 2, 3, 4]
    assert stored[4]["status"] == "missing" and stored[4]["attempts"] == []  # kept, so the report can mark it
    [run] = store.runs()
    assert run["run_id"] == "manual__x" and run["counts"]["missing"] == 1
    assert [a["status"] for a in stored[2]["attempts"]] == ["failed", "valid"] and stored[2]["figure"]["attempt"] == 2
    assert stored[3]["status"] == "invalid" and stored[3]["attempts"][0]["message"] == "precision 1.7"
