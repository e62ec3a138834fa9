"""Retention: old bulky files go; result rows, record files, reports and recent attempts stay."""
import json
import os
import time

import pytest

from scalebench.cli import main
from scalebench.store.results import Store
from tests.support.samples import sample_cell, sample_contract

OLD = time.time() - 40 * 86400


def write(path, size=1000, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    if mtime:
        os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def grown(isolated_state, monkeypatch):
    home = isolated_state
    monkeypatch.setenv("AIRFLOW_HOME", str(home / "airflow"))
    old = home / "results" / "scalebench_x" / "scheduled__a" / "g1-fp32-e3-r1" / "attempt-1"
    new = home / "results" / "scalebench_x" / "scheduled__b" / "g1-fp32-e3-r1" / "attempt-1"
    files = {
        "old_record": [write(old / n, 100, OLD) for n in ("cell.json", "metrics.json", "events.jsonl", "validation.json")],
        "old_bulky": [write(old / "checkpoint.h5", 3 * 2**20, OLD), write(old / "work_dirs" / "run.log", 5000, OLD)],
        "new": [write(new / "metrics.json", 100), write(new / "checkpoint.h5", 2**20)],
        "old_log": [write(home / "airflow" / "logs" / "dag_id=x" / "run_id=a" / "task_id=t" / "attempt=1.log", 9000, OLD)],
        "new_log": [write(home / "airflow" / "logs" / "dag_id=x" / "run_id=b" / "task_id=t" / "attempt=1.log", 9000)],
        "report": [write(home / "reports" / "2026-10-01" / "report.md", 100, OLD),
                   write(home / "reports" / "2026-10-01" / "speedup.png", 50000, OLD)],
    }
    cell = sample_cell()
    Store().record_attempt(cell, 1, "valid", contract=sample_contract(cell))
    return home, files


def run_cli(capsys, *args):
    assert main(["prune", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_dry_run_counts_and_removes_nothing(grown, capsys):
    _, files = grown
    summary = run_cli(capsys, "--dry-run")
    assert summary == {"older_than_days": 30, "dry_run": True, "files": 3, "megabytes": round((3 * 2**20 + 5000 + 9000) / 2**20, 2)}
    assert all(p.exists() for group in files.values() for p in group)


def test_prune_removes_old_bulky_files_and_logs_only(grown, capsys):
    home, files = grown
    summary = run_cli(capsys)
    assert summary["files"] == 3 and not summary["dry_run"]
    assert not any(p.exists() for p in files["old_bulky"] + files["old_log"])
    assert all(p.exists() for k in ("old_record", "new", "new_log", "report") for p in files[k])
    assert not (home / "airflow" / "logs" / "dag_id=x" / "run_id=a").exists()  # emptied folders go too
    assert [c["status"] for c in Store().cells()] == ["valid"]  # rows are never pruned
    assert run_cli(capsys)["files"] == 0  # idempotent


@pytest.mark.parametrize("days", ["0", "0.0001", "0.99"])
def test_the_age_comes_from_the_flag_or_the_fleet_and_is_at_least_a_day(grown, capsys, days):
    assert run_cli(capsys, "--older-than", "50", "--dry-run")["files"] == 0
    with pytest.raises(SystemExit) as exited:
        main(["prune", "--older-than", days])
    assert exited.value.code == 2
    assert (f"scalebench: prune: --older-than: {days!r} is out of range (expected at least 1 and at most 36500)"
            in capsys.readouterr().err)


def test_a_running_cells_attempt_is_never_pruned(grown, capsys):
    """An old checkpoint of a cell that holds a device lease now (a long cell) stays."""
    from scalebench.core.config import Host
    from scalebench.store.leases import LeaseManager

    home, files = grown
    attempt = files["old_record"][0].parent
    (attempt / "cell.json").write_text(json.dumps({"cell": {"key": "running-cell"}}))
    host = Host(name="local", kind="cpu", queue="default", device_ids=["0", "1"])
    lease = LeaseManager().acquire(host, 1, "running-cell", timeout_s=5)
    try:
        summary = run_cli(capsys)
        assert summary["files"] == 1 and all(p.exists() for p in files["old_bulky"])  # only the old task log went
    finally:
        lease.release()
    assert run_cli(capsys)["files"] == 2  # released: now its old files go


def test_prune_refuses_what_a_form_might_send_as_text(tmp_path):
    from scalebench.store.prune import prune

    for bad in ({"days": "30"}, {"days": True}, {"dry_run": "false"}):
        with pytest.raises(ValueError, match="prune: "):
            prune(tmp_path, None, **({"days": 30.0} | bad))


def test_the_maintenance_dags_params_have_a_schema():
    from airflow.sdk.exceptions import ParamValidationError

    from scalebench.orchestration.dags.maintenance_dag import build_maintenance_dag

    import copy

    params = build_maintenance_dag().params
    for bad, why in (({"older_than_days": 0.0001}, "less than the minimum of 1"),
                     ({"dry_run": "false"}, "'false' is not of type 'boolean'")):
        p = copy.deepcopy(params)
        with pytest.raises(ParamValidationError, match=why):
            p.update(bad)
            p.validate()
