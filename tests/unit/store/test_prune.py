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


def test_the_age_comes_from_the_flag_or_the_fleet_and_must_be_positive(grown, capsys):
    assert run_cli(capsys, "--older-than", "50", "--dry-run")["files"] == 0
    assert main(["prune", "--older-than", "0"]) == 2
    assert "older-than must be a positive number of days, got 0" in capsys.readouterr().err
