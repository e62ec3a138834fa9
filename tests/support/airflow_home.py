"""A throwaway Airflow home for `airflow dags test` and a real api-server on it."""
import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.support import CONFIGS, ROOT

BIN = Path(sys.executable).parent


def airflow_env(home: Path, benchmarks: tuple[str, ...] = ()) -> dict:
    """The environment of a throwaway Airflow home. With `benchmarks`, its config folder holds the
    shipped configs of those benchmarks only: `airflow dags test` parses and serializes every DAG
    of the folder twice a run (about 10 s of CPU for all the shipped ones), and a test that runs
    one benchmark's DAG needs that one (tests/unit/orchestration/test_dags.py opens them all)."""
    env = {**os.environ, "SCALEBENCH_HOME": str(home), "AIRFLOW_HOME": str(home / "airflow"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW__CORE__EXECUTOR": "LocalExecutor", "GX_ANALYTICS_ENABLED": "false"}
    if benchmarks:
        configs = home / "configs"
        shutil.copytree(CONFIGS, configs, ignore=shutil.ignore_patterns("benchmarks"), dirs_exist_ok=True)
        (configs / "benchmarks").mkdir(exist_ok=True)
        for bench in benchmarks:
            shutil.copy(CONFIGS / "benchmarks" / f"{bench}.yaml", configs / "benchmarks")
        env["SCALEBENCH_CONFIG_DIR"] = str(configs)
    return env


def run(cmd, env, timeout=900):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return out.returncode, out.stdout + out.stderr


_MIGRATED: dict[str, Path] = {}  # one `airflow db migrate` per test session, copied into each new home


def _migrated_airflow_db(env) -> Path:
    if "db" not in _MIGRATED:
        home = Path(tempfile.mkdtemp(prefix="scalebench-airflow-template-"))
        atexit.register(shutil.rmtree, home, True)
        rc, log = run([BIN / "airflow", "db", "migrate"], {**env, "AIRFLOW_HOME": str(home)}, 300)
        assert rc == 0, log[-3000:]
        _MIGRATED["db"] = home / "airflow.db"
    return _MIGRATED["db"]


def prepare_homes(env):
    """What `make airflow-db` does: Airflow's metadata DB, the results store, the fleet's pools. The
    SQLite metadata DB is migrated once per session and copied (a migration is about 4 s of CPU here)."""
    home = Path(env["AIRFLOW_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    if "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in env or (home / "airflow.db").exists():
        rc, log = run([BIN / "airflow", "db", "migrate"], env, 300)
        assert rc == 0, log[-3000:]
    else:
        shutil.copy(_migrated_airflow_db(env), home / "airflow.db")
    for cmd in (["scalebench", "db", "upgrade"], ["scalebench", "pools", "--apply"]):
        rc, log = run([BIN / cmd[0], *cmd[1:]], env, 300)
        assert rc == 0, log[-3000:]


def api_get(port, user, password, path):
    import httpx

    base = f"http://127.0.0.1:{port}"
    token = httpx.post(f"{base}/auth/token", json={"username": user, "password": password}).json()["access_token"]
    r = httpx.get(base + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    r.raise_for_status()
    return r.json()


@contextlib.contextmanager
def api_server(env, port):
    """A real Airflow api-server on this Airflow home; stopped with its whole process group."""
    import httpx

    proc = subprocess.Popen([str(Path(sys.executable).parent / "airflow"), "api-server", "--port", str(port), "--host", "127.0.0.1"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        else:
            raise RuntimeError("api-server did not answer within 120 s")
        yield
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
