"""The address the service is reached at: `make airflow` sets Airflow's base_url (login redirects,
report and alert links) from SCALEBENCH_BASE_URL or SCALEBENCH_BIND and says it at start; a bad
value is one line naming the setting."""
import importlib.util
import pytest

from scalebench.core.web_origin import machine_name, origin_of
from tests.support import ROOT


@pytest.fixture
def service(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("SCALEBENCH_HOME", str(tmp_path))
    for name in ("SCALEBENCH_BIND", "SCALEBENCH_BASE_URL", "SCALEBENCH_TRUSTED_ORIGINS", "AIRFLOW_PORT"):
        monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location("airflow_service", ROOT / "deploy" / "local" / "airflow_service.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("env, public, internal", [
    ({}, "http://localhost:8080", "http://localhost:8080"),
    ({"SCALEBENCH_BIND": "127.0.0.1"}, "http://localhost:8080", "http://localhost:8080"),
    ({"SCALEBENCH_BIND": "0.0.0.0"}, f"http://{machine_name()}:8080", "http://localhost:8080"),
    ({"SCALEBENCH_BIND": "10.0.0.5"}, "http://10.0.0.5:8080", "http://10.0.0.5:8080"),
    ({"SCALEBENCH_BIND": "fd00::5"}, "http://[fd00::5]:8080", "http://[fd00::5]:8080"),
    ({"SCALEBENCH_BIND": "0.0.0.0", "SCALEBENCH_BASE_URL": "https://Airflow.Example.com:443/"},
     "https://airflow.example.com", "http://localhost:8080"),
    ({"SCALEBENCH_BASE_URL": "https://proxy.example.com/airflow/"}, "https://proxy.example.com/airflow",
     "http://localhost:8080"),
])
def test_base_url_is_what_the_service_is_reached_as(service, monkeypatch, capsys, env, public, internal):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    made = service.service_env(service.load_secrets())
    assert made["AIRFLOW__API__BASE_URL"] == public
    assert made["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == f"{internal}/execution/"
    assert made["AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API"].endswith("@" + internal.split("://", 1)[1])
    assert service.login_line({}).startswith(f"Airflow UI: {public}  user: admin")


@pytest.mark.parametrize("name, value", [
    ("SCALEBENCH_BASE_URL", "gpu-server:8080"), ("SCALEBENCH_BASE_URL", "ftp://gpu-server"),
    ("SCALEBENCH_BASE_URL", "http://u:p@gpu-server"), ("SCALEBENCH_BASE_URL", "http://gpu-server:99999"),
    ("SCALEBENCH_BASE_URL", "http://gpu-server/?next=evil"), ("SCALEBENCH_BIND", "not an address"),
    ("SCALEBENCH_TRUSTED_ORIGINS", "https://ok.example,javascript:alert(1)"),
    ("SCALEBENCH_TRUSTED_ORIGINS", "https://proxy.example/path"),
])
def test_a_bad_address_is_one_line_naming_the_setting(service, monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as exc:
        service.service_env(service.load_secrets())
    said = str(exc.value)
    assert said.startswith(f"airflow_service: {name}: expected") and "\n" not in said
    assert repr(value.split(",")[-1]) in said  # the bad entry itself


@pytest.mark.parametrize("url, origin", [
    ("HTTP://Gpu-Server.Corp:8080/x", "http://gpu-server.corp:8080"), ("https://a.example:443", "https://a.example"),
    ("http://a.example:80", "http://a.example"), ("http://[FD00::5]:8080", "http://[fd00::5]:8080"),
    ("null", None), ("", None), ("javascript:alert(1)", None), ("http://a.example:x", None), ("http://u@a.example", None),
])
def test_origins_compare_as_browsers_do(url, origin):
    assert origin_of(url) == origin


def test_every_address_means_this_machines_name_never_localhost():
    assert machine_name() not in ("localhost", "localhost.localdomain", "")
