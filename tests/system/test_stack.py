"""The distributed deployment, driven as users drive it (`make e2e` brings the stack up, runs
these, and tears it down): REST triggers, PostgreSQL rows, the report from the Asset, the UI
in a browser, and a Celery worker killed in the middle of a cell. Not part of `make test`."""
import os
import subprocess
import time
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from tests.support.service_clients import AirflowApi, browser, task_log_text, trigger_form_text, ui_login

ENV_FILE = os.environ.get("SCALEBENCH_STACK_ENV")
pytestmark = [pytest.mark.stack, pytest.mark.skipif(not ENV_FILE, reason="make e2e runs these against the stack")]
RESNET = "scalebench_resnet50_keras_cifar10"
DRILL = "scalebench_drill"


def dotenv() -> dict:
    return dict(line.split("=", 1) for line in Path(ENV_FILE).read_text().splitlines() if "=" in line and not line.startswith("#"))


def compose(*args) -> str:
    root = Path(__file__).resolve().parents[2]
    return subprocess.run([str(root / "deploy" / "stack.sh"), "compose", *args], capture_output=True, text=True,
                          check=True, timeout=300, cwd=root).stdout


@pytest.fixture(scope="module")
def api():
    env = dotenv()
    client = AirflowApi(f"http://localhost:{env.get('AIRFLOW_PORT', '8080')}", "admin", env["AIRFLOW_ADMIN_PASSWORD"])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # the dag-processor's first parse
        try:
            ids = {d["dag_id"] for d in client.get("/api/v2/dags", params={"limit": 100})["dags"]}
            if {RESNET, DRILL} <= ids:
                return client
        except httpx.HTTPError:
            pass
        time.sleep(3)
    raise TimeoutError("the benchmark DAGs did not appear within 300 s")


@pytest.fixture(scope="module")
def first_runs(api):
    conf = {"gpu_counts": [1, 2], "profile": "smoke"}
    ids = {RESNET: api.trigger(RESNET, conf), DRILL: api.trigger(DRILL, {"gpu_counts": [1], "profile": "smoke"})}
    done = {dag: api.wait_run(dag, run_id, 1200) for dag, run_id in ids.items()}
    tis = {dag: api.task_instances(dag, run_id) for dag, run_id in ids.items()}
    starts = [datetime.fromisoformat(t["start_date"]) for t in tis[RESNET] if t["task_id"].endswith(".train") and t["start_date"]]
    latency = (min(starts) - datetime.fromisoformat(done[RESNET]["queued_at"])).total_seconds()
    print(f"\ntrigger to first cell start: {latency:.1f} s; ResNet50 run (2 cells): {done[RESNET]['duration']:.0f} s")
    return {"ids": ids, "done": done, "tis": tis}


def store_rows(sql: str) -> list:
    from sqlalchemy import create_engine, text

    env = dotenv()
    url = f"postgresql+psycopg2://scalebench:{env['SCALEBENCH_DB_PASSWORD']}@127.0.0.1:{env.get('POSTGRES_PORT', '5432')}/scalebench"
    with create_engine(url).connect() as conn:
        return conn.execute(text(sql)).fetchall()


def test_rest_triggered_cells_succeed_on_the_celery_worker_and_land_in_postgresql(api, first_runs):
    assert first_runs["done"][RESNET]["state"] == "success", first_runs["tis"][RESNET]
    trains = [t for t in first_runs["tis"][RESNET] if t["task_id"].endswith(".train") and t["state"] == "success"]
    assert sorted(t["task_id"] for t in trains) == ["local_1gpu.train", "local_2gpu.train"]
    assert {t["queue"] for t in trains} == {"default"} and {t["pool"] for t in trains} == {"scalebench_local"}
    run_id = first_runs["ids"][RESNET]
    rows = store_rows(f"select c.gpus, a.status from cells c join attempts a on a.cell_id = c.id "
                      f"where c.run_id = '{run_id}' order by c.gpus, a.attempt")
    assert [tuple(r) for r in rows] == [(1, "valid"), (2, "valid")]


def test_the_report_dag_ran_from_the_asset_and_its_page_needs_the_login(api, first_runs):
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        runs = api.runs("scalebench_nightly_report")
        if any(r["state"] == "success" and r["run_type"] == "asset_triggered" for r in runs):
            break
        time.sleep(3)
    else:
        raise AssertionError(f"no successful asset-triggered report run: {runs}")
    page = api.request("GET", "/scalebench/latest", follow_redirects=True)
    assert page.status_code == 200 and "resnet50_keras_cifar10" in page.text
    assert httpx.get(api.base + "/scalebench/latest").status_code == 401


def test_a_browser_sees_the_trigger_form_and_the_failed_cells_reason(api, first_runs, tmp_path):
    assert first_runs["done"][DRILL]["state"] == "failed"
    with browser(tmp_path / "chrome") as driver:
        wait = ui_login(driver, api.base, api.user, api.password, f"/dags/{RESNET}")
        form = trigger_form_text(driver, wait, api.base, RESNET)
        assert "GPU counts" in form and "Profile" in form
        log = task_log_text(driver, wait, api.base, DRILL, first_runs["ids"][DRILL], "local_1gpu.train", 0,
                            "lines of the container output")
        assert "failed: unknown, exit code 3: last output line" in log


def test_a_worker_killed_mid_cell_costs_that_attempt_only(api):
    """SIGKILL the Celery worker while a cell trains, start it again: the scheduler fails the
    orphaned attempt (task heartbeat timeout), the retry reclaims the lease (TTL) and stops the
    orphaned container; no duplicate rows and no lease left held."""
    run_id = api.trigger(RESNET, {"gpu_counts": [1], "epochs": [6], "profile": "smoke"})
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        running = [t for t in api.task_instances(RESNET, run_id) if t["task_id"] == "local_1gpu.train" and t["state"] == "running"]
        if running:
            break
        time.sleep(2)
    time.sleep(20)  # inside the container's training
    worker = compose("ps", "-q", "airflow-worker").strip()
    _no_process_of_the_worker_has_the_admin_password_or_the_jwt_secret(worker)
    killed_at = time.monotonic()
    subprocess.run(["docker", "kill", worker], check=True, capture_output=True)
    subprocess.run(["docker", "start", worker], check=True, capture_output=True)
    done = api.wait_run(RESNET, run_id, 1500)
    print(f"\nworker killed; run ended {done['state']} {time.monotonic() - killed_at:.0f} s later")
    [ti] = [t for t in api.task_instances(RESNET, run_id) if t["task_id"] == "local_1gpu.train"]
    assert ti["try_number"] >= 2 or ti["state"] == "failed", ti
    rows = store_rows(f"select key, count(*) from cells where run_id = '{run_id}' group by key")
    assert len(rows) == 1 and rows[0][1] == 1  # one cell row
    attempts = store_rows(f"select a.attempt, a.status, a.reason from attempts a join cells c on a.cell_id = c.id "
                          f"where c.run_id = '{run_id}' order by a.attempt")
    assert len({a[0] for a in attempts}) == len(attempts)  # no duplicate attempts
    assert tuple(attempts[0]) == (1, "failed", "worker_lost"), attempts  # the lost attempt, recorded by its retry
    assert attempts[-1][1] == "valid" or attempts[-1][2], attempts  # valid on retry, or failed with its reason
    assert store_rows("select count(*) from device_leases")[0][0] == 0
    left = subprocess.run(["docker", "ps", "-q", "--filter", "label=org.scalebench.lease"], capture_output=True, text=True).stdout
    assert left.strip() == ""


def _no_process_of_the_worker_has_the_admin_password_or_the_jwt_secret(worker: str) -> None:
    """While a cell's task runs: every process of the worker (Celery, the task's supervisor and the
    task) is read from /proc, and the api-server's container from the engine."""
    env = dotenv()
    out = subprocess.run(["docker", "exec", worker, "sh", "-c",
                          "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; echo; echo ---; done 2>/dev/null"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    processes = sum("AIRFLOW__CORE__EXECUTOR" in p for p in out.split("---"))
    assert processes > 0, "no process of the worker could be read"
    # (names, never values, in a failure: a test log must not print a secret)
    leaked = [s for s in ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_JWT_SECRET") if env[s] in out]
    assert leaked == [], f"in a process of the worker: {leaked}"
    has_notes = f"notes:{env['AIRFLOW_NOTES_PASSWORD']}@" in out
    assert has_notes, "the worker lacks the notes login its tasks use"
    # the running cell's container: what the training code sees holds no Airflow secret at all
    cells = subprocess.run(["docker", "ps", "-q", "--filter", "label=org.scalebench.lease"], capture_output=True,
                           text=True, check=True).stdout.split()
    assert cells, "no cell container is running"
    seen = subprocess.run(["docker", "inspect", "-f", "{{json .Config.Env}}", *cells], capture_output=True, text=True,
                          check=True).stdout
    leaked = [s for s in ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_JWT_SECRET", "AIRFLOW_NOTES_PASSWORD",
                          "AIRFLOW_API_SECRET_KEY", "AIRFLOW_FERNET_KEY", "AIRFLOW_DB_PASSWORD", "SCALEBENCH_DB_PASSWORD")
              if env[s] in seen]
    assert leaked == [], f"in the cell's container: {leaked}"
    print(f"\nsecrets: none of the admin password and JWT secret in {processes} worker processes; "
          f"no Airflow secret in {len(cells)} cell container(s)")
    api = compose("ps", "-q", "airflow-apiserver").strip()
    inspected = subprocess.run(["docker", "inspect", "-f", "{{json .Config.Env}}", api], capture_output=True, text=True,
                               check=True).stdout
    leaked = [s for s in ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_NOTES_PASSWORD") if env[s] in inspected]
    assert leaked == [], f"in the api-server's environment: {leaked}"
