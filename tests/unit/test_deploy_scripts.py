"""The deployment's shell scripts as a user runs them: `make secrets` (deploy/make-secrets.sh) and
the Airflow image's entrypoint (deploy/airflow/entrypoint.sh), which refuses placeholders."""
import base64
import functools
import json
import os
import stat
import subprocess
import sys

import pytest

from tests.support import ROOT

SECRETS = ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_NOTES_PASSWORD", "AIRFLOW_FERNET_KEY", "AIRFLOW_JWT_SECRET",
           "AIRFLOW_API_SECRET_KEY", "POSTGRES_PASSWORD", "AIRFLOW_DB_PASSWORD", "SCALEBENCH_DB_PASSWORD", "REDIS_PASSWORD")


def _secrets(env_file, **env):
    out = subprocess.run(["bash", str(ROOT / "deploy/make-secrets.sh"), str(env_file)], capture_output=True, text=True,
                         env={**os.environ, "SCALEBENCH_REGISTRY": "off", **env}, timeout=120)
    assert out.returncode == 0, out.stderr
    values = dict(line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line and line[0] != "#")
    return out.stdout, values


def test_make_secrets_writes_a_private_env_of_fresh_distinct_secrets_and_never_changes_one(tmp_path):
    env_file = tmp_path / ".env"
    said, values = _secrets(env_file)
    assert "mode 0600" in said and stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert all(len(values[k]) >= 32 for k in SECRETS) and len({values[k] for k in SECRETS}) == len(SECRETS)
    assert len(base64.urlsafe_b64decode(values["AIRFLOW_FERNET_KEY"])) == 32  # what Fernet accepts
    assert values["POSTGRES_IMAGE"] == "scalebench/postgres:15"  # SCALEBENCH_REGISTRY=off: the local images
    said, again = _secrets(env_file)
    assert again == values and "kept its values (delete it" in said
    # an .env from before the Fernet key and the notes account: only those are added
    old = "".join(f"{k}={v}\n" for k, v in values.items() if k not in ("AIRFLOW_FERNET_KEY", "AIRFLOW_NOTES_PASSWORD"))
    env_file.write_text(old)
    env_file.chmod(0o644)
    said, upgraded = _secrets(env_file)
    assert "added AIRFLOW_NOTES_PASSWORD AIRFLOW_FERNET_KEY" in said and stat.S_IMODE(env_file.stat().st_mode) == 0o600
    assert {k: v for k, v in upgraded.items() if k in old} == {k: v for k, v in values.items() if k in old}


def _entrypoint(tmp_path, passwords: dict | None = None, **env):
    base = {"PATH": os.environ["PATH"], "AIRFLOW_HOME": str(tmp_path / "airflow"),
            **{k: f"{k.lower()}-{'x' * 24}" for k in ("AIRFLOW__API__SECRET_KEY", "AIRFLOW__CORE__FERNET_KEY")}}
    if passwords is not None:  # the api-server: its users' passwords come as a mounted file
        (tmp_path / "api-passwords.json").write_text(json.dumps(passwords))
        base["SCALEBENCH_PASSWORDS_FROM"] = str(tmp_path / "api-passwords.json")
    return subprocess.run(["bash", str(ROOT / "deploy/airflow/entrypoint.sh"), "sh", "-c",
                           "echo $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS; env"], capture_output=True, text=True,
                          env={**base, **env}, timeout=60)


GOOD = {"admin": "a" * 32, "notes": "n" * 32}


@pytest.mark.parametrize("var, value", [
    ("AIRFLOW__CORE__FERNET_KEY", "changeme"), ("AIRFLOW__API__SECRET_KEY", ""),
    ("AIRFLOW__API_AUTH__JWT_SECRET", "CHANGE_ME_please"), ("REDIS_PASSWORD", "redis"),
])
def test_the_entrypoint_refuses_a_missing_or_placeholder_secret(tmp_path, var, value):
    out = _entrypoint(tmp_path, GOOD, **{var: value}, SCALEBENCH_SECRET_VARS="REDIS_PASSWORD AIRFLOW__API_AUTH__JWT_SECRET",
                      **{k: "r" * 30 for k in ("REDIS_PASSWORD", "AIRFLOW__API_AUTH__JWT_SECRET") if k != var})
    assert out.returncode == 78
    assert f"refusing to start: {var} is unset or a known placeholder; run 'make secrets'" in out.stderr
    assert not (tmp_path / "airflow" / "passwords.json").exists()


@pytest.mark.parametrize("user, value", [("admin", "admin"), ("notes", ""), ("admin", "CHANGE_ME")])
def test_the_api_server_refuses_a_placeholder_password_in_its_file(tmp_path, user, value):
    out = _entrypoint(tmp_path, GOOD | {user: value})
    assert out.returncode == 78
    assert f"refusing to start: the {user} password in {tmp_path / 'api-passwords.json'} is unset or a known placeholder" \
        in out.stderr
    assert not (tmp_path / "airflow" / "passwords.json").exists()


def test_the_api_server_keeps_the_passwords_in_a_private_file_and_no_component_has_them_in_its_environment(tmp_path):
    out = _entrypoint(tmp_path, GOOD)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "admin:admin,notes:user"
    passwords = tmp_path / "airflow" / "passwords.json"
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600 and json.loads(passwords.read_text()) == GOOD
    assert f"AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE={passwords}" in out.stdout
    assert GOOD["admin"] not in out.stdout and "SCALEBENCH_PLACEHOLDERS" not in out.stdout
    other = _entrypoint(tmp_path / "worker")  # any other component: no passwords file at all
    assert other.returncode == 0, other.stderr
    assert not (tmp_path / "worker" / "airflow" / "passwords.json").exists()
    assert "SIMPLE_AUTH_MANAGER_PASSWORDS_FILE" not in other.stdout


def _compose() -> list[str] | None:
    import shutil

    if subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def _compose_config(env_file, *files: str, **env: str) -> tuple[str, dict]:
    """The stack's config as Compose resolves it: its text and its services."""
    import yaml

    compose = _compose()
    assert compose, "Docker Compose is not installed: make test installs it (deploy/stack.sh install)"
    args = [a for f in files for a in ("-f", str(ROOT / f))]
    out = subprocess.run([*compose, "--env-file", str(env_file), "--project-directory", str(ROOT), *args, "config"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "CONTROL_HOST": "control.example", "SCALEBENCH_WORKER_QUEUES": "gpu-a", **env})
    assert out.returncode == 0, out.stderr
    return out.stdout, yaml.safe_load(out.stdout)["services"]


needs_compose = pytest.mark.skipif(_compose() is None and os.environ.get("CI") != "true",
                                   reason="no Docker Compose (make test installs it)")


@needs_compose
def test_each_secret_reaches_only_the_containers_that_use_it(tmp_path):
    """The stack's config as Compose resolves it, with an .env from make secrets: the admin
    password in no container's environment (only the api-server's mounted file), the JWT secret
    only where tokens are checked or signed, the notes login only in the worker, whose tasks use it."""
    env_file = tmp_path / ".env"
    _, values = _secrets(env_file)
    config = functools.partial(_compose_config, env_file)
    def holders(services: dict, value: str) -> set[str]:
        return {n for n, s in services.items() if value in json.dumps(s.get("environment") or {})}

    text, services = config("docker-compose.yaml")
    assert values["AIRFLOW_ADMIN_PASSWORD"] not in text  # in no environment, command or label
    assert holders(services, values["AIRFLOW_NOTES_PASSWORD"]) == {"airflow-worker"}
    assert holders(services, values["AIRFLOW_JWT_SECRET"]) == {"airflow-apiserver", "airflow-scheduler"}
    assert {n for n, s in services.items() if "api-passwords.json" in json.dumps(s.get("volumes"))} == {"airflow-apiserver"}
    worker = services["airflow-worker"]["environment"]
    assert worker["AIRFLOW__API__SECRET_KEY"] == values["AIRFLOW_API_SECRET_KEY"]  # its log server checks the UI's requests
    assert worker["AIRFLOW__CORE__FERNET_KEY"] == values["AIRFLOW_FERNET_KEY"]
    assert values["AIRFLOW_DB_PASSWORD"] in worker["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    text, services = config("docker-compose.yaml", "deploy/gpu-host.compose.yaml")  # another GPU host's worker
    worker = json.dumps(services["airflow-worker"]["environment"])
    assert values["AIRFLOW_ADMIN_PASSWORD"] not in text and values["AIRFLOW_JWT_SECRET"] not in worker
    assert f"notes:{values['AIRFLOW_NOTES_PASSWORD']}@control.example" in worker


def test_the_stack_runs_as_non_root_users_keeps_logs_and_puts_no_secret_on_a_command_line():
    import re

    import yaml

    doc = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
    services = doc["services"]
    airflow = {n: s for n, s in services.items() if n.startswith("airflow-")}
    socket_users = {n for n, s in services.items() if any("docker.sock" in str(v) for v in s.get("volumes") or [])}
    assert socket_users == {"airflow-worker"} and services["airflow-worker"]["user"] == "0:0"
    assert all("user" not in s for n, s in airflow.items() if n != "airflow-worker")  # the image's USER airflow
    dockerfile = (ROOT / "deploy/airflow/Dockerfile").read_text()
    assert "\nUSER airflow\n" in dockerfile.split("\nFROM ")[-1]  # the final stage
    assert services["redis"]["user"] == "redis"
    assert all("airflow-logs:/opt/airflow/logs" in s.get("volumes", []) for s in airflow.values()), \
        "every Airflow container writes and reads task logs on the named volume"
    assert "airflow-logs" in doc["volumes"]
    secret = re.compile(r"\$\{?\w*(PASSWORD|SECRET|_KEY)\b")
    on_command_lines = {n: s["command"] for n, s in services.items() if secret.search(str(s.get("command", "")))}
    assert on_command_lines == {}, f"a secret on a command line: {on_command_lines}"
    env = services["airflow-apiserver"]["environment"]
    assert env["AIRFLOW__CORE__FERNET_KEY"] == "${AIRFLOW_FERNET_KEY:?run make secrets}"
    notes = services["airflow-worker"]["environment"]["AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API"]
    assert notes.startswith("http://notes:${AIRFLOW_NOTES_PASSWORD:?run make secrets}@")


@needs_compose
def test_every_airflow_container_has_the_shared_settings_and_the_cores_make_stack_gives_it(tmp_path):
    """deploy/airflow/settings.env (what `make airflow` reads too) in each Airflow service's
    environment, here and on another GPU host; the cpuset `make stack` computes, or none."""
    env_file = tmp_path / ".env"
    _secrets(env_file)
    shared = dict(line.split("=", 1) for line in (ROOT / "deploy/airflow/settings.env").read_text().splitlines()
                  if line and not line.startswith("#"))
    for files in (["docker-compose.yaml"], ["docker-compose.yaml", "deploy/gpu-host.compose.yaml"]):
        _, services = _compose_config(env_file, *files, SCALEBENCH_ORCHESTRATOR_CPUS="6-7")
        airflow = {n: s for n, s in services.items() if n.startswith("airflow-")}
        assert {"airflow-worker"} <= set(airflow)
        for name, service in airflow.items():
            assert {k: service["environment"].get(k) for k in shared} == shared, name
            assert service["cpuset"] == "6-7", name
    _, services = _compose_config(env_file, "docker-compose.yaml", SCALEBENCH_ORCHESTRATOR_CPUS="")
    assert not services["airflow-scheduler"].get("cpuset")  # empty: Docker's default, every core


@needs_compose
def test_the_stack_is_told_the_address_it_is_reached_at(tmp_path):
    """deploy/stack.sh computes base_url from .env's SCALEBENCH_BASE_URL or SCALEBENCH_BIND (the
    helper below, run as the script runs it) and compose gives it to every Airflow container."""
    helper = [sys.executable, "-m", "scalebench.core.web_origin"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    said = subprocess.run([*helper, "", "10.0.0.5", "8080", ""], capture_output=True, text=True, env=env, timeout=60)
    assert said.stdout.strip() == "http://10.0.0.5:8080", said.stderr
    bad = subprocess.run([*helper, "gpu-server:8080", "", "8080", ""], capture_output=True, text=True, env=env,
                         timeout=60)
    assert bad.returncode == 1 and bad.stderr.strip().startswith("stack.sh: SCALEBENCH_BASE_URL: expected") \
        and len(bad.stderr.strip().splitlines()) == 1
    env_file = tmp_path / ".env"
    _secrets(env_file)
    _, services = _compose_config(env_file, "docker-compose.yaml", SCALEBENCH_BASE_URL="http://10.0.0.5:8080",
                                  SCALEBENCH_TRUSTED_ORIGINS="https://proxy.example")
    apiserver = services["airflow-apiserver"]["environment"]
    assert apiserver["AIRFLOW__API__BASE_URL"] == "http://10.0.0.5:8080"
    assert apiserver["SCALEBENCH_TRUSTED_ORIGINS"] == "https://proxy.example"
