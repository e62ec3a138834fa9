"""The deployment's shell scripts as a user runs them: `make secrets` (deploy/make-secrets.sh) and
the Airflow image's entrypoint (deploy/airflow/entrypoint.sh), which refuses placeholders."""
import base64
import json
import os
import stat
import subprocess

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


def _entrypoint(tmp_path, **env):
    base = {"PATH": os.environ["PATH"], "AIRFLOW_HOME": str(tmp_path / "airflow"),
            **{k: f"{k.lower()}-{'x' * 24}" for k in ("AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_NOTES_PASSWORD",
                                                      "AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW__API__SECRET_KEY",
                                                      "AIRFLOW__CORE__FERNET_KEY")}}
    return subprocess.run(["bash", str(ROOT / "deploy/airflow/entrypoint.sh"), "sh", "-c",
                           "echo $AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"], capture_output=True, text=True,
                          env={**base, **env}, timeout=60)


@pytest.mark.parametrize("var, value", [
    ("AIRFLOW_ADMIN_PASSWORD", "admin"), ("AIRFLOW_NOTES_PASSWORD", ""), ("AIRFLOW__CORE__FERNET_KEY", "changeme"),
    ("AIRFLOW__API_AUTH__JWT_SECRET", "CHANGE_ME_please"), ("REDIS_PASSWORD", "redis"),
])
def test_the_entrypoint_refuses_a_missing_or_placeholder_secret(tmp_path, var, value):
    out = _entrypoint(tmp_path, **{var: value}, SCALEBENCH_SECRET_VARS="REDIS_PASSWORD",
                      **({} if var == "REDIS_PASSWORD" else {"REDIS_PASSWORD": "r" * 30}))
    assert out.returncode == 78
    assert f"refusing to start: {var} is unset or a known placeholder; run 'make secrets'" in out.stderr
    assert not (tmp_path / "airflow" / "passwords.json").exists()


def test_the_entrypoint_writes_a_private_password_file_with_the_notes_account(tmp_path):
    out = _entrypoint(tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "admin:admin,notes:user"
    passwords = tmp_path / "airflow" / "passwords.json"
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600
    assert set(json.loads(passwords.read_text())) == {"admin", "notes"}


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
    assert env["AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API"].startswith("http://notes:${AIRFLOW_NOTES_PASSWORD}@")
