"""Fault drills and security checks that fit CI: a results database that is locked or stopped
for 30 s while a run is recorded, one down for longer than the lease TTL while a cell runs, bad
metrics in a contract, the compose stack's secrets and ports. Each
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
from tests.support import ROOT
from tests.support.engine import POSTGRES_IMAGE, requires_docker, requires_image, start_postgres
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
@requires_image(POSTGRES_IMAGE, "make test builds it")
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


@requires_docker
@pytest.mark.timeout(600)
def test_bad_metrics_in_a_contract_never_replace_a_valid_result(tmp_path, monkeypatch, drill):
    """Through the cell task's own path: the container writes the contract, the operator reads it
    with the contract's schema and the GX suite, the record step stores what it left."""
    import json

    from scalebench.orchestration.cell_operator import CellFailedPermanently
    from scalebench.store.recording import record_run
    from tests.support.samples import FakeTI, contract_probe

    drill.update(drill="NaN / negative / missing metrics in a contract",
                 done="a cell's retry (a real container, through the cell task) writes metrics.json with precision "
                      "NaN, recall -0.2, or no recall, after a valid first attempt")
    tree, data, probe_cell = contract_probe(tmp_path)
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    lines, cells = [], []
    for gpus, (corrupt, expected) in zip((1, 2, 3), BAD_METRICS.values()):
        cell, op = probe_cell(gpus, 1, "manual__bad_metrics")
        cells.append(cell)
        bad = sample_contract(cell, attempt=2)
        corrupt(bad)
        (data / f"contract-{cell['key']}-1.json").write_text(json.dumps(sample_contract(cell, attempt=1)))
        (data / f"contract-{cell['key']}-2.json").write_text(json.dumps(bad))
        assert op.execute({"ti": FakeTI(1)})["attempt"] == 1
        with pytest.raises(CellFailedPermanently) as err:
            op.execute({"ti": FakeTI(2)})
        assert expected in str(err.value), err.value
        lines.append(f"{err.value.failure.reason}: {str(err.value).split(': ', 2)[-1]}")
    record_run(Store(), cells[0]["dag_id"], "manual__bad_metrics", cells)
    stored = Store().cells(benchmark="probe")
    assert [(c["status"], c["figure"]["attempt"]) for c in stored] == [("valid", 1)] * 3
    assert [[(a["status"], a["reason"]) for a in c["attempts"]] for c in stored] == [
        [("valid", None), ("failed", "contract_missing_or_invalid")]] * 2 + [
        [("valid", None), ("invalid", "validation_failed")]]
    drill.update(happened="the cell task refused NaN and negative values by the result contract's schema (`" +
                          lines[0].split("contract v1: ", 1)[-1][:70] + "`) and a missing metric by the GX suite "
                          "(`" + lines[2].split("failed validation: ", 1)[-1][:60] + "`), each as a permanent "
                          "failure; the record step stored each bad attempt as failed/invalid and the valid attempt "
                          "stayed the cell's figure",
                 figure="3/3 refused; 3/3 valid figures kept")


def test_the_compose_stack_has_no_default_password(drill):
    drill.update(drill="compose stack: no default password, no open port", kind="security",
                 done="every secret variable in docker-compose.yaml checked (password, JWT and API keys, DB URIs), and "
                      "every published port of both compose files")
    text = (ROOT / "docker-compose.yaml").read_text()
    secret = re.compile(r"PASSWORD|SECRET|_KEY\b")
    refs = re.findall(r"\$\{([A-Z0-9_]+)(:?[-?][^}]*)?\}", text)
    secrets = {name for name, _ in refs if secret.search(name)}
    defaults = sorted({name for name, how in refs if secret.search(name) and how.startswith((":-", "-"))})
    required = {name for name, how in refs if how.startswith(":?")}
    assert defaults == [], f"secrets with a default value: {defaults}"
    assert secrets <= required, f"secrets that compose would leave empty: {sorted(secrets - required)}"
    published = {}
    for path in (ROOT / "docker-compose.yaml", ROOT / "deploy" / "gpu-host.compose.yaml"):
        for name, svc in (yaml.safe_load(path.read_text()).get("services") or {}).items():
            for port in svc.get("ports") or []:
                published[f"{path.name}:{name}"] = str(port)
    assert published, "the stack publishes no port: the API server must be reachable"
    open_to_all = {k: p for k, p in published.items() if not p.startswith("${SCALEBENCH_BIND:-127.0.0.1}:")}
    assert open_to_all == {}, f"ports published on every interface: {open_to_all}"
    made = (ROOT / "deploy" / "make-secrets.sh").read_text()
    drawn = {name for name in secrets if re.search(rf"^{name}=\$\((rand|fernet)\)", made, re.M)}
    assert "secrets.token_urlsafe" in made and "os.urandom(32)" in made and drawn == secrets  # drawn at random
    drill.update(happened=f"{len(secrets)} secret variables, each required (`${{VAR:?run make secrets}}`), none with a "
                          "default; `make secrets` draws them at random; every published port "
                          f"({', '.join(sorted(published))}) bound to 127.0.0.1 unless SCALEBENCH_BIND",
                 figure=f"{len(secrets)}/{len(secrets)} required, 0 defaults; {len(published)}/{len(published)} ports "
                        "on localhost")


def _watch_devices(stop: threading.Event, seen: list, cells: set[str]):
    """Every 0.2 s: the running containers of `cells` per leased device (label org.scalebench.devices);
    other tests' containers on the same engine are not counted."""
    import docker

    client = docker.from_env()
    while not stop.is_set():
        per_device: dict[str, list[str]] = {}
        for c in client.containers.list(filters={"label": "org.scalebench.devices"}):
            if c.labels.get("org.scalebench.cell") not in cells:
                continue
            for d in c.labels["org.scalebench.devices"].split(","):
                per_device.setdefault(d, []).append(c.labels["org.scalebench.cell"])
        seen.append(max((len(v) for v in per_device.values()), default=0))
        stop.wait(0.2)


OUTAGES = {  # how the database goes away and comes back, and what its clients see meanwhile
    "stop": (("stop", "start"), "down", "PostgreSQL stopped (`docker stop`: connections refused)"),
    "pause": (("pause", "unpause"), "hung (paused)",
              "PostgreSQL paused (`docker pause`: connections neither answer nor refuse, no server timeout runs)"),
}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("how", list(OUTAGES))
@requires_image(POSTGRES_IMAGE, "make test builds it")
def test_results_database_outage_longer_than_the_lease_ttl(tmp_path, monkeypatch, drill, how):
    """A cell holds all four devices when PostgreSQL stops, or hangs, for longer than the lease TTL,
    while a second cell waits for them. CI: TTL 5 s, outage 15 s; `make drills`: TTL 30 s, outage 150 s."""
    import json
    import os

    import docker

    from scalebench.orchestration.cell_operator import CellFailed
    from scalebench.store.db import upgrade
    from scalebench.store.leases import LeaseManager
    from tests.support.fixtures import DRILL_ROWS
    from tests.support.samples import FakeTI, contract_probe

    ttl, outage = (30, 150) if os.environ.get(DRILL_ROWS) else (5, 15)
    (away, back), state, what = OUTAGES[how]
    drill.update(drill=f"results database {state} longer than the lease TTL",
                 done=f"{what} for {outage} s (lease TTL {ttl} s) while cell A runs on all 4 devices "
                      "and cell B waits for them")
    # B waits in its lease through the outage: the cell timeout (its longest lease wait) outlasts it
    tree, data, probe_cell = contract_probe(tmp_path, timeout_minutes=outage / 60 + 5)
    monkeypatch.setenv("SCALEBENCH_CONFIG_DIR", str(tree))
    name = f"scalebench-drill-pg-{time.time_ns()}"
    stop_watch, seen = threading.Event(), []
    try:
        url = start_postgres(name, "drill-only") + "/postgres"
        upgrade(url)
        monkeypatch.setenv("SCALEBENCH_STORE_URL", url)
        monkeypatch.setenv("SCALEBENCH_LEASE_TTL_S", str(ttl))
        (a_cell, a_op), (b_cell, b_op) = (probe_cell(4, r, "manual__outage") for r in (1, 2))
        for cell in (a_cell, b_cell):
            for k in (1, 2, 3):
                (data / f"contract-{cell['key']}-{k}.json").write_text(json.dumps(sample_contract(cell, attempt=k)))
        (data / f"slow-{a_cell['key']}-1").touch()
        client = docker.from_env()
        threading.Thread(target=_watch_devices, args=(stop_watch, seen, {a_cell["key"], b_cell["key"]}),
                         daemon=True).start()
        a_result: dict = {}

        def run_a():
            try:
                a_op.execute({"ti": FakeTI(1)})
            except CellFailed as exc:
                a_result.update(failure=exc.failure, at=time.monotonic())

        a_thread = threading.Thread(target=run_a, daemon=True)
        a_thread.start()
        for _ in range(1200):
            if client.containers.list(filters={"label": f"org.scalebench.cell={a_cell['key']}"}):
                break
            time.sleep(0.1)
        time.sleep(2)  # A's container runs
        stop_at = time.monotonic()
        subprocess.run(["docker", away, name], check=True, capture_output=True)
        down_at = time.monotonic()
        b_result: dict = {}

        def run_b():
            b_result["summary"] = b_op.execute({"ti": FakeTI(1)})

        b_thread = threading.Thread(target=run_b, daemon=True)
        b_thread.start()
        time.sleep(outage)
        subprocess.run(["docker", back, name], check=True, capture_output=True)
        back_at = time.monotonic()
        a_thread.join(300)
        b_thread.join(300)
        failure = a_result["failure"]
        assert failure.reason == "lease_lost" and failure.transient, failure
        lost_after = a_result["at"] - down_at
        assert lost_after < back_at - down_at, "A must stop its container during the outage, not when B reclaims"
        # A kept its lease for the TTL since its last heartbeat (at most one interval, TTL/4, before the stop)
        held = a_result["at"] - stop_at
        assert held >= 0.75 * ttl, f"A gave its lease up {held:.1f} s after the database began to stop (ttl {ttl} s)"
        left = client.containers.list(all=True, filters={"label": f"org.scalebench.cell={a_cell['key']}"})
        assert left == [], f"A's container is left after its lease was lost: {[c.name for c in left]}"
        assert b_result["summary"]["device_ids"] == ["0", "1", "2", "3"]
        retry = a_op.execute({"ti": FakeTI(2)})  # Airflow's retry of A
        assert retry["attempt"] == 2 and retry["device_ids"] == ["0", "1", "2", "3"]
        stop_watch.set()
        assert seen and max(seen) == 1, f"two containers on one device: {max(seen)}"
        mgr = LeaseManager(url)
        assert mgr.holders() == []
        # A's lease ends once: reclaimed by B's decider for its stale heartbeat, or (paused database)
        # by A's own release, sent during the outage and answered when the database resumes
        # (a late release after a reclaim finds no rows and says so)
        a_events = [e for e in mgr.events() if e.cell_key == a_cell["key"]]
        first = a_events[0]
        assert first.event == "acquired", a_events
        ended = [(e.event, e.detail) for e in a_events if e.lease_id == first.lease_id][1:]
        ending = ended[0]
        assert ending in [("released", None)] or ending[0] == "reclaimed" and "heartbeat" in ending[1], ended
        assert ended[1:] in ([], [("released", "was already reclaimed")]), ended
    finally:
        stop_watch.set()
        subprocess.run(["docker", "unpause", name], capture_output=True)
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    line = str(failure.detail)
    how_ended = ("reclaimed for its stale heartbeat" if ending[0] == "reclaimed"
                 else "released by A, answered when the database resumed")
    drill.update(happened=f"A's heartbeat kept the lease for the TTL, then A stopped its container and failed "
                          f"`lease_lost` (transient): {line[:110]}; B's decision waited for the database, then ran once "
                          f"A's lease had ended ({how_ended}; no container left); A's retry ran after B, valid",
                 figure=f"A failed {lost_after:.0f} s into the outage; database back after {back_at - down_at:.0f} s; "
                        f"at most {max(seen)} container per device in {len(seen)} samples; 0 leases held")
