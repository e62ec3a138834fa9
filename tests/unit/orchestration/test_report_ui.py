"""The report pages inside the Airflow UI: login enforced on every plugin route, and a real
browser (Debian's headless Chromium) that logs in and finds the table."""
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT
from tests.support.airflow_home import api_server
from tests.support.engine import chromium, free_port
from tests.support.service_clients import browser, ui_login

NIGHT = "2026-11-28"
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("ui")
    (home / "pw.json").write_text('{"ops": "s3cret"}')
    env = {**os.environ, "SCALEBENCH_HOME": str(home / "state"), "AIRFLOW_HOME": str(home / "airflow"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "ops:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "pw.json")}
    out = subprocess.run([BIN / "airflow", "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    script = ("from scalebench.store.db import upgrade\nfrom scalebench.store.results import Store\nfrom scalebench.report.build import write_report\n"
              "from tests.support.samples import sample_cell, sample_contract\nupgrade()\ns = Store()\n"
              "for rep in (1, 2):\n    for g, t in ((1, 100), (2, 60), (4, 40)):\n"
              f"        c = sample_cell(gpus=g, repeat=rep, night='{NIGHT}', run_id='scheduled__x', run_type='scheduled')\n"
              "        s.record_attempt(c, 1, 'valid', contract=sample_contract(c, train_s=t + rep))\n"
              f"write_report(s, night='{NIGHT}')\n")
    out = subprocess.run([sys.executable, "-c", script], env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    port = free_port()
    with api_server(env, port):
        yield f"http://127.0.0.1:{port}", home


ROUTES = ["/scalebench/", "/scalebench/api/nights", "/scalebench/latest", f"/scalebench/{NIGHT}/",
          f"/scalebench/{NIGHT}/report.html", f"/scalebench/{NIGHT}/speedup.png", f"/scalebench/{NIGHT}/table.json",
          f"/scalebench/{NIGHT}/report.md", "/scalebench/2026-01-01/report.html"]


@pytest.mark.parametrize("route", ROUTES)
def test_every_plugin_route_refuses_requests_without_the_airflow_login(server, route):
    base, _ = server
    assert httpx.get(base + route, follow_redirects=False).status_code == 401
    bad = httpx.get(base + route, headers={"Authorization": "Bearer not-a-jwt"}, follow_redirects=False)
    assert bad.status_code in (401, 403)
    assert httpx.get(base + route, cookies={"_token": "forged"}, follow_redirects=False).status_code in (401, 403)


def test_no_path_leaves_the_reports_folder(server):
    base, _ = server
    token = httpx.post(f"{base}/auth/token", json={"username": "ops", "password": "s3cret"}).json()["access_token"]
    for path in (f"/scalebench/{NIGHT}/..%2F..%2F..%2Fetc%2Fpasswd", "/scalebench/..%2F..%2Fetc/passwd"):
        r = httpx.get(base + path, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 404 and "root:" not in r.text


def test_with_the_login_the_pages_images_and_json_are_served(server):
    base, _ = server
    token = httpx.post(f"{base}/auth/token", json={"username": "ops", "password": "s3cret"}).json()["access_token"]
    h = {"Authorization": f"Bearer {token}"}
    assert "scalebench reports" in httpx.get(f"{base}/scalebench/", headers=h).text
    assert httpx.get(f"{base}/scalebench/api/nights", headers=h).json()[0]["night"] == NIGHT
    page = httpx.get(f"{base}/scalebench/latest", headers=h, follow_redirects=True)
    assert page.status_code == 200 and "<table>" in page.text and page.url.path.endswith(f"{NIGHT}/report.html")
    png = httpx.get(f"{base}/scalebench/{NIGHT}/speedup.png", headers=h)
    assert png.headers["content-type"] == "image/png" and png.content[:4] == b"\x89PNG"
    assert httpx.get(f"{base}/scalebench/2026-01-01/report.html", headers=h).status_code == 404
    plugins = httpx.get(f"{base}/api/v2/plugins", headers=h).json()["plugins"]
    [view] = [v for p in plugins for v in p["external_views"] if v["url_route"] == "scalebench-report"]
    assert view["name"] == "Scaling report" and view["href"] == "/scalebench/latest"


@chromium
def test_a_browser_logs_in_and_sees_the_report_table_inside_the_airflow_ui(server, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    base, home = server
    with browser(tmp_path / "chrome") as driver:
        wait = ui_login(driver, base, "ops", "s3cret", "/plugin/scalebench-report")
        driver.get(f"{base}/plugin/scalebench-report")
        frame = wait.until(EC.presence_of_element_located((By.TAG_NAME, "iframe")))
        driver.switch_to.frame(frame)
        table = wait.until(EC.presence_of_element_located((By.TAG_NAME, "table")))
        assert "resnet50_keras_cifar10" in table.text and "60.6%" in table.text
        driver.switch_to.default_content()
        shot = home / "report-view.png"
        driver.save_screenshot(str(shot))
        assert shot.read_bytes()[:4] == b"\x89PNG"
        print(f"\nscreenshot: {shot}")
