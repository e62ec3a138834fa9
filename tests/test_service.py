"""`make airflow` as a user runs it: the real api-server, scheduler, dag-processor and triggerer
on this machine, driven through the REST API and a headless browser; `make airflow-stop` ends
every process it started and nothing else. One service and one pair of runs for the module."""
import json
import os
import re
import subprocess
import time
from datetime import datetime, timezone

import psutil
import pytest

from tests.conftest import ROOT, chromium, free_port, requires_docker
from tests.drill_configs import write_drill_configs
from tests.service_clients import AirflowApi, browser, task_log_text, trigger_form_text, ui_login

pytestmark = [requires_docker, pytest.mark.slow]
RESNET = "scalebench_resnet50_keras_cifar10"
DRILL = "scalebench_drill"  # a benchmark whose cell fails on purpose, to inspect in the UI
LOGIN = re.compile(r"^Airflow UI: (http://localhost:\d+)  user: (\w+)  password: (\S+)  ", re.M)


def make(target, env, timeout):
    out = subprocess.run(["make", "-s", target], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("service")
    tree = write_drill_configs(tmp / "configs")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(SCALEBENCH_HOME=str(tmp / "state"), AIRFLOW_HOME=str(tmp / "state" / "airflow"),
               AIRFLOW_PORT=str(free_port()), SCALEBENCH_CONFIG_DIR=str(tree))
    began = time.monotonic()
    rc, out = make("airflow", env, 900)
    try:
        assert rc == 0, out[-4000:]
        base, user, password = LOGIN.search(out).groups()
        print(f"\nmake airflow: {time.monotonic() - began:.0f} s; {LOGIN.search(out).group(0)}")
        yield {"api": AirflowApi(base, user, password), "env": env, "out": out, "home": tmp / "state", "tmp": tmp}
    finally:
        make("airflow-stop", env, 120)


@pytest.fixture(scope="module")
def runs(service):
    """One ResNet50 smoke cell and one deliberately failing cell, triggered through the REST API."""
    api = service["api"]
    before = api.runs(RESNET)
    conf = {"gpu_counts": [1], "epochs": [1], "profile": "smoke"}
    ids = {dag: api.trigger(dag, conf) for dag in (RESNET, DRILL)}
    done = {dag: api.wait_run(dag, run_id) for dag, run_id in ids.items()}
    tis = {dag: api.task_instances(dag, run_id) for dag, run_id in ids.items()}
    [train] = [t for t in tis[RESNET] if t["task_id"] == "local_1gpu.train"]
    latency = (datetime.fromisoformat(train["start_date"]) - datetime.fromisoformat(done[RESNET]["queued_at"])).total_seconds()
    print(f"\ntrigger to first cell start: {latency:.1f} s; ResNet50 run {done[RESNET]['duration']:.0f} s")
    return {"before": before, "ids": ids, "done": done, "tis": tis}


def test_make_airflow_prints_a_generated_login_and_unpauses_without_running_the_past_night(service):
    api = service["api"]
    assert api.password not in ("admin", "airflow") and len(api.password) >= 12
    dags = api.get("/api/v2/dags", params={"limit": 100})["dags"]
    assert {d["dag_id"] for d in dags} == {RESNET, DRILL, "scalebench_nightly_report", "scalebench_maintenance"}
    assert not any(d["is_paused"] for d in dags)
    now = datetime.now(timezone.utc)
    for dag in dags:  # unpausing started nothing: every schedule waits for its next cron time
        assert datetime.fromisoformat(dag["next_dagrun_run_after"].replace("Z", "+00:00")) > now, dag
        assert api.runs(dag["dag_id"]) == [], dag["dag_id"]
    health = api.get("/api/v2/monitor/health")
    assert {health[c]["status"] for c in ("metadatabase", "scheduler", "triggerer", "dag_processor")} == {"healthy"}
    pools = {p["name"]: p["slots"] for p in api.get("/api/v2/pools")["pools"]}
    assert pools["scalebench_local"] == 4


def test_a_rest_triggered_smoke_cell_runs_under_the_scheduler_and_is_recorded_and_reported(service, runs):
    api, env = service["api"], service["env"]
    assert runs["before"] == []
    assert runs["done"][RESNET]["state"] == "success", runs["tis"][RESNET]
    assert runs["done"][RESNET]["run_type"] == "manual"
    out = subprocess.run([str(ROOT / ".venv/bin/scalebench"), "results", "--json", "--benchmark", "resnet50_keras_cifar10"],
                         env=env, capture_output=True, text=True, timeout=120)
    cells = json.loads(out.stdout)
    assert [(c["gpus"], c["epochs"], c["status"]) for c in cells] == [(1, 1, "valid")]
    deadline = time.monotonic() + 120
    while not any(r["state"] == "success" for r in api.runs("scalebench_nightly_report")) and time.monotonic() < deadline:
        time.sleep(3)
    reports = api.runs("scalebench_nightly_report")
    assert any(r["state"] == "success" and r["run_type"] == "asset_triggered" for r in reports), reports
    page = api.request("GET", "/scalebench/latest", follow_redirects=True)
    assert "resnet50_keras_cifar10" in page.text


def test_the_failed_cell_carries_its_reason_as_note(runs):
    assert runs["done"][DRILL]["state"] == "failed"
    [train] = [t for t in runs["tis"][DRILL] if t["task_id"] == "local_1gpu.train"]
    assert train["state"] == "failed"
    assert train["note"].endswith("failed: unknown, exit code 3: last output line: RuntimeError: drill cell fails on purpose")


@chromium
def test_a_browser_sees_the_trigger_form_the_failed_cell_log_and_the_report(service, runs):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    api = service["api"]
    with browser(service["tmp"] / "chrome") as driver:
        wait = ui_login(driver, api.base, api.user, api.password, f"/dags/{RESNET}")
        form = trigger_form_text(driver, wait, api.base, RESNET)
        assert "GPU counts" in form and "Profile" in form and "Which GPU counts to run" in form
        # the log tab: the reason line, then the container output tail (only the log has that heading)
        log = task_log_text(driver, wait, api.base, DRILL, runs["ids"][DRILL], "local_1gpu.train", 0,
                            "lines of the container output")
        assert "failed: unknown, exit code 3: last output line" in log

        driver.get(f"{api.base}/plugin/scalebench-report")
        driver.switch_to.frame(wait.until(EC.presence_of_element_located((By.TAG_NAME, "iframe"))))
        assert "resnet50_keras_cifar10" in wait.until(EC.presence_of_element_located((By.TAG_NAME, "table"))).text


def test_make_airflow_stop_ends_every_process_it_started_and_nothing_else(service, runs):
    env, home = service["env"], str(service["home"] / "airflow")
    pids = json.loads((service["home"] / "airflow" / "service" / "pids.json").read_text())
    started = [psutil.Process(r["pid"]) for r in pids.values()]
    tree = started + [c for p in started for c in p.children(recursive=True)]
    bystander = subprocess.Popen(["sleep", "300"], env=env)  # same Airflow home, not started by the service
    try:
        rc, out = make("airflow-stop", env, 120)
        stopped = re.search(r"stopped 4 Airflow components \((\d+) processes\)", out)
        # the count is taken at stop time: a task process may have come or gone since the snapshot
        assert rc == 0 and stopped and int(stopped.group(1)) >= len(started), out
        assert not [p for p in tree if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert bystander.poll() is None
        left = [p.pid for p in psutil.process_iter(["environ"]) if p.pid != bystander.pid
                and (p.info["environ"] or {}).get("AIRFLOW_HOME") == home]
        assert left == []
        rc, out = make("airflow-stop", env, 60)
        assert rc == 0 and "Airflow was not running" in out
    finally:
        bystander.kill()
