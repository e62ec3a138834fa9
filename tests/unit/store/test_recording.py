import pytest

from scalebench.store.recording import record_run
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract
from tests.support.samples import write_attempt as _attempt


def test_record_run_reads_every_attempt_folder_and_is_idempotent():
    ok, retried, invalid, missing = (sample_cell(gpus=g, run_id="manual__x") for g in (1, 2, 3, 4))
    _attempt(ok, 1, contract=sample_contract(ok), validation={"success": True})
    _attempt(retried, 1, failure={"reason": "container_failed", "message": "exit 137"})
    _attempt(retried, 2, contract=sample_contract(retried, attempt=2), validation={"success": True})
    _attempt(invalid, 1, contract=sample_contract(invalid), validation={"success": False, "message": "precision 1.7"})
    store = Store()
    planned = [ok, retried, invalid, missing]
    counts = record_run(store, ok["dag_id"], ok["run_id"], planned)
    assert {k: v for k, v in counts.items() if k != "not_valid"} == {"valid": 2, "invalid": 1, "failed": 1, "missing": 1}
    assert counts["not_valid"] == ["3 GPUs · fp32 · 3 epochs · repeat 1: invalid (validation_failed)",
                                   "4 GPUs · fp32 · 3 epochs · repeat 1: missing (never started)"]
    assert record_run(store, ok["dag_id"], ok["run_id"], planned) == counts
    stored = {c["gpus"]: c for c in store.cells()}
    assert sorted(stored) == [1, 2, 3, 4]
    assert stored[4]["status"] == "missing" and stored[4]["attempts"] == []  # kept, so the report can mark it
    [run] = store.runs()
    assert run["run_id"] == "manual__x" and run["counts"]["missing"] == 1
    assert [a["status"] for a in stored[2]["attempts"]] == ["failed", "valid"] and stored[2]["figure"]["attempt"] == 2
    assert stored[3]["status"] == "invalid" and stored[3]["attempts"][0]["message"] == "precision 1.7"


def test_a_failed_task_before_the_cells_marks_each_planned_cell_failed_with_its_reason():
    from scalebench.cell.failures import Failure, fail_planned_cells

    cells = [sample_cell(gpus=g, run_id="manual__y") for g in (1, 2)]
    _attempt(cells[1], 1, failure={"reason": "killed", "message": "it had started"})  # its own record stands
    lines = fail_planned_cells(cells, "check_dataset",
                               Failure("dataset_missing", None, "/data/VOCdevkit/VOC2007: ImageSets/Segmentation missing"))
    assert lines == ["cell g1-fp32-e3-r1 (1 GPU · fp32 · 3 epochs · repeat 1) attempt 1 failed at check_dataset: dataset_missing, "
                     "exit code none: /data/VOCdevkit/VOC2007: ImageSets/Segmentation missing"]
    counts = record_run(Store(), cells[0]["dag_id"], "manual__y", cells)
    assert counts["missing"] == 0 and counts["failed"] == 2
    assert counts["not_valid"] == ["1 GPU · fp32 · 3 epochs · repeat 1: failed (dataset_missing)",
                                   "2 GPUs · fp32 · 3 epochs · repeat 1: failed (killed)"]
    stored = {c["gpus"]: c["attempts"][-1] for c in Store().cells()}
    assert stored[1]["message"] == lines[0] and stored[1]["reason"] == "dataset_missing"


def test_results_command_prints_each_failed_cells_class_exit_code_and_message(capsys):
    from scalebench.cli import main

    ok, killed = sample_cell(gpus=1, run_id="manual__z"), sample_cell(gpus=2, run_id="manual__z")
    _attempt(ok, 1, contract=sample_contract(ok, train_s=12.5), validation={"success": True})
    _attempt(killed, 1, failure={"reason": "killed", "exit_code": 137, "message": "cell g2-fp32-e3-r1 ... SIGKILL"})
    _attempt(killed, 2, failure={"reason": "killed", "exit_code": 143, "message": "cell g2-fp32-e3-r1 ... SIGTERM"})
    record_run(Store(), ok["dag_id"], "manual__z", [ok, killed])
    assert main(["results"]) == 0
    head, valid, failed = capsys.readouterr().out.splitlines()
    assert head.split() == ["night", "benchmark", "run_id", "cell", "status", "train_s", "attempt", "detail"]
    assert "valid" in valid and " 12.5 " in valid and valid.endswith("50.0 images/s")
    assert "failed" in failed and " 2 of 2 " in failed
    assert failed.endswith("killed, exit code 143: cell g2-fp32-e3-r1 ... SIGTERM")


def test_listing_commands_print_a_table_json_or_csv(capsys):
    import csv
    import json

    from scalebench.cli import main

    cell = sample_cell(gpus=1, run_id="manual__z")
    _attempt(cell, 1, contract=sample_contract(cell, train_s=12.5), validation={"success": True})
    record_run(Store(), cell["dag_id"], "manual__z", [cell])
    outputs = {}
    for args in (["-o", "json"], ["--json"], ["-o", "csv"]):
        assert main(["results", *args]) == 0
        outputs[" ".join(args)] = capsys.readouterr().out
    assert outputs["-o json"] == outputs["--json"]  # the old flag, kept for one release
    [doc] = json.loads(outputs["-o json"])
    assert doc["key"] == cell["key"] and doc["figure"]["train_s"] == 12.5
    [row] = list(csv.DictReader(outputs["-o csv"].splitlines()))
    assert row["status"] == "valid" and float(row["train_s"]) == 12.5 and row["attempt"] == "1"
    with pytest.raises(SystemExit):
        main(["results", "-o", "yaml"])
    assert "invalid choice: 'yaml' (choose from 'table', 'json', 'csv')" in capsys.readouterr().err


def test_a_contract_filed_under_another_cell_is_refused_naming_both():
    """A metrics.json copied into the wrong folder never becomes that cell's figure."""
    cell, other = sample_cell(gpus=1, run_id="manual__z"), sample_cell(gpus=2, run_id="manual__z")
    _attempt(cell, 1, contract=sample_contract(other), validation={"success": True})
    counts = record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    assert counts["valid"] == 0 and counts["invalid"] == 1
    [stored] = Store().cells()
    message = stored["attempts"][0]["message"]
    assert stored["figure"] is None and stored["attempts"][0]["reason"] == "contract_missing_or_invalid"
    assert f"cell key {other['key']!r} (the folder's is {cell['key']!r})" in message


def test_attempt_folders_are_read_in_number_order_past_nine():
    cell = sample_cell(run_id="manual__many")
    for k in range(1, 12):
        _attempt(cell, k, failure={"reason": "killed", "message": f"try {k}"})
    record_run(Store(), cell["dag_id"], cell["run_id"], [cell])
    [stored] = Store().cells()
    assert [a["attempt"] for a in stored["attempts"]] == list(range(1, 12))


def test_results_filter_by_night_since_and_failed(capsys):
    import json

    from scalebench.cli import main

    for night in ("2026-11-27", "2026-11-28", "2026-11-29"):
        ok, bad = (sample_cell(gpus=g, run_id=f"scheduled__{night}", night=night) for g in (1, 2))
        _attempt(ok, 1, contract=sample_contract(ok), validation={"success": True})
        _attempt(bad, 1, failure={"reason": "lease_lost", "exit_code": 137, "message": "lost"})
        record_run(Store(), ok["dag_id"], ok["run_id"], [ok, bad])

    def listed(*args):
        assert main(["results", "-o", "json", *args]) == 0
        return [(c["night"], c["gpus"]) for c in json.loads(capsys.readouterr().out)]

    assert listed("--night", "2026-11-28") == [("2026-11-28", 1), ("2026-11-28", 2)]
    assert listed("--since", "2026-11-28", "--failed") == [("2026-11-28", 2), ("2026-11-29", 2)]
    assert len(listed()) == 6
    with pytest.raises(SystemExit):
        main(["results", "--night", "28.11.2026"])
    assert "'28.11.2026' is not a night: expected YYYY-MM-DD" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["results", "--night", "2026-11-28", "--since", "2026-11-27"])
