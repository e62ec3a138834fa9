"""Fault drills and security checks that fit CI: a results database that is locked or stopped
for 30 s while a run is recorded, bad metrics in a contract, the compose stack's secrets. Each
fills its drill row (`make drills` writes them to docs/reliability.md); the ones that need the
running scheduler are in tests/system/test_service.py and bench/drills/."""
import re
import sqlite3
import subprocess
import threading
import time

import pytest
import yaml

from scalebench.store.recording import record_run_when_reachable
from scalebench.store.results import Store
from scalebench.cell.validation import validate_result
from tests.support import ROOT
from tests.support.engine import POSTGRES_IMAGE, docker_ready, start_postgres
from tests.support.samples import sample_cell, sample_contract, write_attempt

OUTAGE_S = 30


def _planned_run(run_id: str) -> list[dict]:
    cells = [sample_cell(gpus=g, run_id=run_id) for g in (1, 2)]
    for c in cells:
        write_attempt(c, 1, contract=sample_contract(c), validation={"success": True})
    return cells


def _record_during_outage(cells, url, outage, restore) -> tuple[dict, float]:
    """Start the record step while the database is out; restore it OUTAGE_S later."""
    outage()
    timer = threading.Timer(OUTAGE_S, restore)
    timer.start()
    t = time.monotonic()
    try:
        counts = record_run_when_reachable(cells[0]["dag_id"], cells[0]["run_id"], cells, url=url)
    finally:
        timer.cancel()
        restore()
    return counts, time.monotonic() - t


def _recorded_once(url: str, cells: list[dict]) -> None:
    stored = Store(url).cells()
    assert sorted(c["gpus"] for c in stored) == [1, 2]
    assert all(len(c["attempts"]) == 1 and c["status"] == "valid" for c in stored)


@pytest.mark.timeout(180)
def test_results_database_locked_by_another_writer_for_30_s(isolated_state, drill):
    drill.update(drill="results database locked 30 s (SQLite)",
                 done=f"another process holds SQLite's write lock on results.db for {OUTAGE_S} s while a run's record "
                      "step starts")
    url = f"sqlite:///{isolated_state / 'results.db'}"
    cells = _planned_run("manual__locked")
    holder = sqlite3.connect(isolated_state / "results.db", isolation_level=None, check_same_thread=False)

    def lock():
        holder.execute("BEGIN EXCLUSIVE")

    def unlock():
        if holder.in_transaction:
            holder.execute("ROLLBACK")

    counts, took = _record_during_outage(cells, url, lock, unlock)
    assert counts["valid"] == 2 and counts["not_valid"] == []
    assert took >= OUTAGE_S - 1
    _recorded_once(url, cells)
    drill.update(happened="the record step waited (SQLite busy timeout, then the store's retry) and recorded every "
                          "cell once when the lock went", figure=f"recorded {took:.1f} s after it began; 2/2 cells, 0 duplicates")


@pytest.mark.timeout(300)
@pytest.mark.skipif(not docker_ready(POSTGRES_IMAGE), reason=f"needs {POSTGRES_IMAGE} (make test builds it)")
def test_results_database_stopped_for_30_s(isolated_state, drill):
    from scalebench.store.db import upgrade

    drill.update(drill="results database stopped 30 s (PostgreSQL)",
                 done=f"the deployment's PostgreSQL image stopped (`docker stop`) for {OUTAGE_S} s while a run's record "
                      "step starts")
    name = f"scalebench-drill-pg-{time.time_ns()}"
    try:
        url = start_postgres(name, "drill-only") + "/postgres"
        time.sleep(1)
        upgrade(url)
        cells = _planned_run("manual__pg_down")
        counts, took = _record_during_outage(
            cells, url, lambda: subprocess.run(["docker", "stop", name], check=True, capture_output=True),
            lambda: subprocess.run(["docker", "start", name], check=True, capture_output=True))
        assert counts["valid"] == 2 and took >= OUTAGE_S - 1
        _recorded_once(url, cells)
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    drill.update(happened="connections were refused; the record step tried again every 3 s and recorded every cell "
                          "once PostgreSQL was back", figure=f"recorded {took:.1f} s after it began; 2/2 cells, 0 duplicates")


BAD_METRICS = {  # what a retry writes, and where the cell task refuses it
    "NaN": (lambda d: d["metrics"].update(precision=float("nan")), "metrics/precision: not a finite number"),
    "negative": (lambda d: d["metrics"].update(recall=-0.2), "metrics/recall: -0.2 is less than the minimum of 0"),
    "missing": (lambda d: d["metrics"].pop("recall"), "column=recall) got field missing"),
}


def refusal(cell, path) -> str:
    """What the cell task does with a result file: the contract's schema, then the GX suite."""
    from scalebench_kit.contract import ContractError, load_result

    try:
        doc = load_result(path)
    except ContractError as exc:
        return f"contract_missing_or_invalid: {exc}"
    verdict = validate_result(cell, doc, ["precision", "recall"], {"precision": (0.0, 1.0), "recall": (0.0, 1.0)})
    return "" if verdict.success else f"validation_failed: {verdict.message(cell)}"


def test_bad_metrics_in_a_contract_never_replace_a_valid_result(drill):
    import json

    from scalebench.store.recording import record_run

    drill.update(drill="NaN / negative / missing metrics in a contract",
                 done="a cell's retry writes metrics.json with precision NaN, recall -0.2, or no recall, "
                      "after a valid first attempt")
    lines = []
    cells = [sample_cell(gpus=k, run_id="manual__bad_metrics") for k in (1, 2, 3)]
    for cell, (corrupt, expected) in zip(cells, BAD_METRICS.values()):
        write_attempt(cell, 1, contract=sample_contract(cell), validation={"success": True})
        doc = sample_contract(cell)
        corrupt(doc)
        second = write_attempt(cell, 2, contract=doc)
        why = refusal(cell, second / "metrics.json")
        assert expected in why, why
        lines.append(why)
        if why.startswith("validation_failed"):
            (second / "validation.json").write_text(json.dumps({"success": False, "message": why}))
        else:
            (second / "failure.json").write_text(json.dumps({"reason": "contract_missing_or_invalid", "message": why}))
    record_run(Store(), cells[0]["dag_id"], "manual__bad_metrics", cells)
    stored = Store().cells()
    assert [(c["status"], c["figure"]["attempt"]) for c in stored] == [("valid", 1)] * 3
    assert [[a["status"] for a in c["attempts"]] for c in stored] == [["valid", "failed"], ["valid", "failed"],
                                                                       ["valid", "invalid"]]
    drill.update(happened="NaN and negative values refused by the result contract's schema (`" +
                          lines[0].split("contract v1: ", 1)[1] + "`), a missing metric by the GX suite (`" +
                          lines[2].split("failed validation: ", 1)[1][:60] + "`); each bad attempt stored as "
                          "failed/invalid; the valid attempt stayed the cell's figure",
                 figure="3/3 refused; 3/3 valid figures kept")


def test_the_compose_stack_has_no_default_password(drill):
    drill.update(drill="compose stack: no default password", kind="security",
                 done="every secret variable in docker-compose.yaml checked: password, JWT and API keys, DB URIs")
    text = (ROOT / "docker-compose.yaml").read_text()
    secret = re.compile(r"PASSWORD|SECRET|_KEY\b")
    refs = re.findall(r"\$\{([A-Z0-9_]+)(:?[-?][^}]*)?\}", text)
    secrets = {name for name, _ in refs if secret.search(name)}
    defaults = sorted({name for name, how in refs if secret.search(name) and how.startswith((":-", "-"))})
    required = {name for name, how in refs if how.startswith(":?")}
    assert defaults == [], f"secrets with a default value: {defaults}"
    assert secrets <= required, f"secrets that compose would leave empty: {sorted(secrets - required)}"
    doc = yaml.safe_load(text)
    assert "ports" not in doc["services"]["postgres"] or all(
        str(p).startswith("${SCALEBENCH_BIND:-127.0.0.1}") for p in doc["services"]["postgres"]["ports"])
    made = (ROOT / "deploy" / "make-secrets.sh").read_text()
    assert "secrets.token_urlsafe" in made and all(f"{name}=$(rand)" in made for name in secrets)  # drawn at random
    drill.update(happened=f"{len(secrets)} secret variables, each required (`${{VAR:?run make secrets}}`), none with a "
                          "default; `make secrets` draws them at random; ports bound to 127.0.0.1 unless SCALEBENCH_BIND",
                 figure=f"{len(secrets)}/{len(secrets)} required, 0 defaults")
