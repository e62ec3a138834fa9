"""`make airflow-units`: the one-machine service's components as systemd units, written into a
folder and checked with `systemd-analyze verify` where systemd is installed."""
import importlib.util
import shutil
import stat
import subprocess

import pytest

from tests.support import ROOT

COMPONENTS = ["api-server", "scheduler", "dag-processor", "triggerer"]


@pytest.fixture
def service(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("SCALEBENCH_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW__CORE__DAGS_FOLDER", str(ROOT / "dags"))
    spec = importlib.util.spec_from_file_location("airflow_service", ROOT / "deploy" / "local" / "airflow_service.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_one_unit_per_component_and_a_target_that_wants_them_all(service, tmp_path):
    written = service.units(tmp_path / "units")
    assert sorted(written) == sorted([*(f"scalebench-airflow-{c}.service" for c in COMPONENTS), "scalebench-airflow.target"])
    for c in COMPONENTS:
        text = written[f"scalebench-airflow-{c}.service"]
        [exec_start] = [line for line in text.splitlines() if line.startswith("ExecStart=")]
        assert exec_start.endswith(f"/airflow {c}"), exec_start
        assert "Restart=on-failure" in text and "After=network-online.target docker.service" in text
        assert "PartOf=scalebench-airflow.target" in text and "WantedBy=scalebench-airflow.target" in text
    assert "After=network-online.target docker.service scalebench-airflow-api-server.service" in \
        written["scalebench-airflow-scheduler.service"]  # the others call the api-server
    target = written["scalebench-airflow.target"]
    assert all(f"scalebench-airflow-{c}.service" in target for c in COMPONENTS) and "WantedBy=multi-user.target" in target
    env = tmp_path / "airflow" / "service" / "systemd.env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600  # it holds the admin password and the JWT secret
    lines = dict(line.split("=", 1) for line in env.read_text().splitlines())
    assert lines["AIRFLOW_HOME"] == f'"{tmp_path / "airflow"}"' and lines["AIRFLOW__CORE__DAGS_FOLDER"] == f'"{ROOT / "dags"}"'
    assert "AIRFLOW__API_AUTH__JWT_SECRET" in lines and "AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API" in lines


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verifies_the_units(service, tmp_path):
    service.units(tmp_path / "units")
    files = sorted(str(p) for p in (tmp_path / "units").iterdir())
    proc = subprocess.run(["systemd-analyze", "verify", *files], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "scalebench-airflow" not in proc.stderr, proc.stderr  # no warning about our units either


def test_the_service_knows_its_processes_by_their_start_whatever_the_wall_clock_says(service, monkeypatch):
    """A process is the one started when its pid and its start (ticks since boot) match; a wall
    clock moved by a second, which moves psutil's create_time, changes nothing."""
    import json
    import subprocess

    import psutil

    child = subprocess.Popen(["sleep", "60"])
    try:
        service.SERVICE.mkdir(parents=True, exist_ok=True)
        start = service.started_at(child.pid)
        service.PIDS.write_text(json.dumps({"scheduler": {"pid": child.pid, "start": start},
                                            "triggerer": {"pid": child.pid, "start": start - 1}}))
        real = psutil.Process.create_time
        monkeypatch.setattr(psutil.Process, "create_time", lambda self: real(self) + 1.0)  # btime moved by 1 s
        assert list(service.recorded()) == ["scheduler"]  # the other record's start is not this process's
    finally:
        child.kill()
        child.wait()
    assert service.recorded() == {}  # gone


def test_the_shared_airflow_settings_reach_make_airflow_and_the_units_and_airflow_reads_them(service, tmp_path,
                                                                                             monkeypatch):
    import json

    from airflow.configuration import conf
    from airflow.dag_processing.bundles.manager import DagBundlesManager

    from scalebench.orchestration.dag_bundle import GeneratedDagBundle

    shared = service.settings()
    assert {"AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST", "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES"} <= set(shared)
    env = service.service_env(service.load_secrets())
    assert {k: env[k] for k in shared} == shared  # make airflow
    service.units(tmp_path / "units")
    lines = dict(line.split("=", 1) for line in (tmp_path / "airflow" / "service" / "systemd.env").read_text().splitlines())
    assert {k: json.loads(lines[k]) for k in shared} == shared  # the units, quoted as systemd unquotes
    for k, v in shared.items():
        monkeypatch.setenv(k, v)
    assert conf.getint("dag_processor", "min_file_process_interval") == int(shared[
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL"])
    bundle = DagBundlesManager().get_bundle("dags-folder")  # the name Airflow's default bundle has: DAGs keep theirs
    assert isinstance(bundle, GeneratedDagBundle)
    assert bundle.refresh_interval <= 30  # a config edit reaches the DAG list within a minute
    # its folder is [core] dags_folder, as each way of starting sets it (read when Airflow is imported)
    assert "path" not in json.loads(shared["AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST"])[0]["kwargs"]


def test_the_units_run_on_the_cores_no_cell_is_pinned_to(service, tmp_path, monkeypatch):
    monkeypatch.setattr(service, "cores", lambda queues=None: ([6, 7], "Airflow on cores 6-7, the cells on 0-5"))
    written = service.units(tmp_path / "units")
    for c in COMPONENTS:
        text = written[f"scalebench-airflow-{c}.service"]
        assert "\nCPUAffinity=6 7\n" in text and "# Airflow on cores 6-7, the cells on 0-5\n" in text
    if shutil.which("systemd-analyze"):
        files = sorted(str(p) for p in (tmp_path / "units").iterdir())
        proc = subprocess.run(["systemd-analyze", "verify", *files], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and "scalebench-airflow" not in proc.stderr, proc.stderr
    monkeypatch.setattr(service, "cores", lambda queues=None: (None, "Airflow shares all 2 cores with the cells"))
    assert "CPUAffinity" not in service.units(tmp_path / "units2")["scalebench-airflow-scheduler.service"]
