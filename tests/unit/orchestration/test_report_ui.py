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
from tests.support.service_clients import browser, console_errors, save_screenshot, ui_login

NIGHT = "2026-11-28"
LONG, LONG_NIGHTS = "unet_torch_voc2007", 800  # a benchmark with more nights than its page carries
JWT_SECRET = "a-test-only-jwt-secret"  # known here, so the test can sign a form token as an old page would
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    home = tmp_path_factory.mktemp("ui")
    (home / "pw.json").write_text('{"ops": "s3cret"}')
    env = {**os.environ, "SCALEBENCH_HOME": str(home / "state"), "AIRFLOW_HOME": str(home / "airflow"),
           "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"), "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "ops:admin",
           "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "pw.json"),
           "AIRFLOW__API_AUTH__JWT_SECRET": JWT_SECRET}
    out = subprocess.run([BIN / "airflow", "db", "migrate"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    script = ("from scalebench.store.db import upgrade\nfrom scalebench.store.results import Store\n"
              "from tests.support.samples import seed_nights\nupgrade()\n"
              f"seed_nights(Store(), last='{NIGHT}')\n"
              "from scalebench.store.alert_groups import AlertGroups\n"  # one alert group to triage
              f"AlertGroups(Store()).record_night('{NIGHT}', [{{'benchmark': 'resnet50_keras_cifar10', 'gpus': 2, "
              "'metric': 'images_per_s', 'change': 0.2, 'line': 'slower'}])\n"
              # a long history: the page carries its newest year, the browser fetches the rest
              "import datetime as dt\nfrom tests.support.samples import copy_summaries, summary_rows\n"
              f"last = dt.date.fromisoformat('{NIGHT}')\n"
              f"copy_summaries(Store(), summary_rows(Store(), 'resnet50_keras_cifar10', '{NIGHT}'), "
              f"[(last - dt.timedelta(days=k)).isoformat() for k in range({LONG_NIGHTS})], '{LONG}')\n")
    out = subprocess.run([sys.executable, "-c", script], env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    port = free_port()
    with api_server(env, port):
        yield f"http://127.0.0.1:{port}", home


def _routes() -> list[str]:
    """Every route the plugin's app declares (read from the app), with valid values filled in."""
    from scalebench.orchestration.ui.webapp import create_app
    from tests.support.routes import routes, url

    valid = {"night": NIGHT, "fmt": "csv", "benchmark": "resnet50_keras_cifar10", "dag_id": "a", "run_id": "b",
             "a": "2026-11-27", "b": NIGHT, "static:name": "history.js", "night_file:name": "report.html",
             "group_id": "1", "key": "0" * 20, "index": "0", "before": NIGHT}
    return ["/scalebench" + url(r, valid) for r in routes(create_app())]


def test_every_plugin_route_refuses_requests_without_the_airflow_login(server):
    base, _ = server
    answers = {}
    for route in _routes():
        answers[route] = (httpx.get(base + route, follow_redirects=False).status_code,
                          httpx.get(base + route, headers={"Authorization": "Bearer not-a-jwt"}, follow_redirects=False).status_code,
                          httpx.get(base + route, cookies={"_token": "forged"}, follow_redirects=False).status_code)
    assert len(answers) == 21 and "/scalebench/api/runs/cells.csv?dag_id=a&run_id=b" in answers  # the one a list missed
    assert f"/scalebench/api/benchmarks/resnet50_keras_cifar10/history/older?before={NIGHT}" in answers
    assert {r: a for r, a in answers.items() if a[0] != 401 or not set(a[1:]) <= {401, 403}} == {}
    # the one action route: a POST without a login changes nothing
    assert httpx.post(f"{base}/scalebench/alerts/1", data={"action": "take"}).status_code == 401


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
    views = {v["url_route"]: v for p in plugins for v in p["external_views"]}
    assert views["scalebench-report"]["name"] == "Scaling report" and views["scalebench-report"]["href"] == "/scalebench/latest"
    assert (views["scalebench-history"]["destination"], views["scalebench-run"]["destination"]) == ("dag", "dag_run")
    assert views["scalebench-run"]["href"] == "/scalebench/runs?dag_id={DAG_ID}&run_id={RUN_ID}"


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
        assert "resnet50_keras_cifar10" in table.text and "75.4%" in table.text
        driver.switch_to.default_content()
        save_screenshot(driver, home, "report-view.png")


@chromium
def test_the_history_page_in_the_airflow_ui_hovers_zooms_toggles_and_downloads_its_csv(server, tmp_path):
    import csv
    import json

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    base, home = server
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with browser(tmp_path / "chrome") as driver:
        wait = ui_login(driver, base, "ops", "s3cret", "/plugin/scalebench-benchmarks")
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
        driver.get(f"{base}/plugin/scalebench-benchmarks")  # Browse > Scaling history
        driver.switch_to.frame(wait.until(EC.presence_of_element_located((By.TAG_NAME, "iframe"))))
        wait.until(EC.element_to_be_clickable((By.LINK_TEXT, "resnet50_keras_cifar10"))).click()
        wait.until(lambda d: d.execute_script("return !!(window.scalebenchCharts && window.scalebenchCharts.steps)"))
        assert driver.execute_script("return typeof window.uPlot") == "function"  # the vendored script, served by the plugin
        # the style sheet applies under the pages' policy (nothing inline is allowed)
        assert driver.execute_script("return getComputedStyle(document.querySelector('nav a')).marginRight") == "14px"

        # a share is drawn in percent: the newest night's 2-GPU exposed sync share, as stored
        drawn = driver.execute_script("const u = window.scalebenchCharts.sync_share; "
                                      "return [u.series.map((s) => s.label), u.data.map((ys) => ys[ys.length - 1])]")
        doc = json.loads(driver.find_element(By.ID, "history-data").get_attribute("textContent"))
        points = [dict(zip(doc["fields"], row)) for row in doc["rows"]]
        stored = next(p for p in points if p["night"] == NIGHT and p["gpus"] == 2 and p["precision"] == "fp32")
        assert stored["sync_share"] > 0 and drawn[1][drawn[0].index("2 GPUs fp32")] == pytest.approx(100 * stored["sync_share"])

        # every date the x axis writes lies inside its chart's canvas (a label is centred on its tick)
        cut = driver.execute_script("""
          return Object.entries(window.scalebenchCharts).flatMap(([id, u]) => {
            const ax = u.axes[0], ctx = u.ctx;
            ctx.font = ax.font[0];
            return ax._splits.map((t, i) => [id, ax._values[i], u.valToPos(t, 'x', true),
                                            ax._values[i] == null ? 0 : ctx.measureText(ax._values[i]).width / 2])
              .filter(([, v, x, half]) => v != null && (x - half < 0 || x + half > ctx.canvas.width));
          });""")
        assert driver.execute_script("return Object.keys(window.scalebenchCharts).length") >= 4 and cut == []

        over = driver.find_element(By.CSS_SELECTOR, "#chart-relative_time .u-over")
        width = over.size["width"]
        ActionChains(driver).move_to_element_with_offset(over, width // 2 - 2, 0).perform()  # the newest night
        tip = wait.until(lambda d: d.find_element(By.ID, "tip-relative_time").text or None)
        assert f"night {NIGHT} · run scheduled__{NIGHT}T01:00:00+00:00 (scheduled)" in tip
        assert "image sha256:new" in tip and "2 GPUs fp32: 2/3 valid" in tip and "change:" in tip
        assert "timed by train time" in tip  # the basis of the hovered figures

        chart = "window.scalebenchCharts.images_per_s"
        span = driver.execute_script(f"return {chart}.scales.x.max - {chart}.scales.x.min")
        over = driver.find_element(By.CSS_SELECTOR, "#chart-images_per_s .u-over")
        ActionChains(driver).move_to_element_with_offset(over, -width // 4, 0).click_and_hold() \
            .move_by_offset(width // 4, 0).release().perform()  # drag: zoom into the middle nights
        wait.until(lambda d: d.execute_script(f"return {chart}.scales.x.max - {chart}.scales.x.min") < span / 1.5)
        legend = driver.find_elements(By.CSS_SELECTOR, "#chart-images_per_s .u-legend .u-series")[1]
        legend.click()  # hide the 1-GPU series
        assert driver.execute_script(f"return {chart}.series[1].show") is False

        driver.find_element(By.LINK_TEXT, "CSV").click()
        wait.until(lambda d: (downloads / "resnet50_keras_cifar10-history.csv").exists())
        rows = list(csv.DictReader((downloads / "resnet50_keras_cifar10-history.csv").open()))
        assert len(rows) == 12 and rows[-1]["night"] == NIGHT and "change:" in rows[-1]["marks"]
        driver.execute_script("window.scalebenchCharts.images_per_s.setScale('x', {min: null, max: null}); window.scrollTo(0, 0)")
        ActionChains(driver).move_to_element_with_offset(driver.find_element(By.CSS_SELECTOR, "#chart-relative_time .u-over"),
                                                         width // 2 - 2, 0).perform()  # the picture shows a hover
        driver.switch_to.default_content()
        save_screenshot(driver, home, "history-view.png")



@chromium
def test_the_every_night_history_draws_the_nights_its_page_carries_then_the_older_ones_it_fetches(server, tmp_path):
    """800 nights: the page carries the newest 365, history.js fetches the rest (the page's
    policy allows fetches from the plugin only) and draws them on the same charts."""
    import json

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base, _ = server
    with browser(tmp_path / "chrome", network_log=True) as driver:
        ui_login(driver, base, "ops", "s3cret", "/plugin/scalebench-benchmarks")
        console_errors(driver)  # (read: the login page's own, before the login)
        driver.get(f"{base}/scalebench/benchmarks/{LONG}?all=1")
        WebDriverWait(driver, 60).until(lambda d: d.execute_script("return window.scalebenchLoaded === true"))
        carried = json.loads(driver.find_element(By.ID, "history-data").get_attribute("textContent"))
        assert len(carried["runs"]) == 365 and "/history/older?" in carried["more"]
        xs = driver.execute_script("return window.scalebenchCharts.images_per_s.data[0]")
        assert len(xs) == LONG_NIGHTS and xs == sorted(xs)
        assert xs[-1] - xs[0] == (LONG_NIGHTS - 1) * 86400
        status = driver.execute_script("return document.getElementById('history-status').textContent")
        assert status == f"Every night of the window is drawn ({LONG_NIGHTS} nights)."
        assert console_errors(driver) == []  # no fetch the page's policy refused, no script error


def test_through_the_real_server_an_old_form_token_and_a_move_the_table_forbids_are_refused(server):
    """The triage POST behind the real api-server's login: a token signed 13 hours ago is refused
    (403), so is "accepted" without a note (409, the table's line); a current token and a note pass."""
    import hashlib
    import hmac
    import re
    import time

    base, _ = server
    jwt = httpx.post(f"{base}/auth/token", json={"username": "ops", "password": "s3cret"}).json()["access_token"]
    h = {"Authorization": f"Bearer {jwt}", "Origin": base, "Sec-Fetch-Site": "same-origin"}
    page = httpx.get(f"{base}/scalebench/alerts/1", headers=h)
    token = re.search(r'name="token" value="([0-9]+\.[0-9a-f]{64})"', page.text).group(1)
    issued = int(time.time()) - 13 * 3600
    mac = hmac.new(JWT_SECRET.encode(), f"ops:1:{issued}".encode(), hashlib.sha256).hexdigest()
    old = httpx.post(f"{base}/scalebench/alerts/1", headers=h, data={"token": f"{issued}.{mac}", "action": "take"})
    assert old.status_code == 403 and "older than 12 hours" in old.text, old.text[:500]
    no_note = httpx.post(f"{base}/scalebench/alerts/1", headers=h,
                         data={"token": token, "action": "state", "state": "accepted"})
    assert no_note.status_code == 409 and "accepted needs a note" in no_note.text
    ok = httpx.post(f"{base}/scalebench/alerts/1", headers=h, data={"token": token, "action": "state",
                                                                    "state": "accepted", "note": "fp8 is the default"})
    assert ok.status_code == 303, ok.text[:500]
