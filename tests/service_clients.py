"""Clients for a running Airflow service, as a user drives it: the REST API (JWT from
/auth/token) and a headless Chromium logged in to the UI. Shared by the one-machine service
test and the compose stack test."""
from __future__ import annotations

import contextlib
import shutil
import time

import httpx

DONE = {"success", "failed"}


class AirflowApi:
    def __init__(self, base: str, user: str, password: str):
        self.base, self.user, self.password = base.rstrip("/"), user, password
        self._token = None

    def token(self) -> str:
        if self._token is None:
            r = httpx.post(f"{self.base}/auth/token", json={"username": self.user, "password": self.password}, timeout=30)
            r.raise_for_status()
            self._token = r.json()["access_token"]
        return self._token

    def request(self, method: str, path: str, **kw) -> httpx.Response:
        r = httpx.request(method, self.base + path, headers={"Authorization": f"Bearer {self.token()}"},
                          timeout=60, **kw)
        r.raise_for_status()
        return r

    def get(self, path: str, **kw):
        return self.request("GET", path, **kw).json()

    def trigger(self, dag_id: str, conf: dict) -> str:
        r = self.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf})
        return r.json()["dag_run_id"]

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 900) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in DONE:
                return run
            time.sleep(3)
        raise TimeoutError(f"{dag_id} run {run_id} still {run['state']} after {timeout_s} s")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100})["task_instances"]

    def runs(self, dag_id: str) -> list[dict]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]


@contextlib.contextmanager
def browser(profile_dir):
    """Debian's headless Chromium through ChromeDriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
                "--window-size=1400,1000", f"--user-data-dir={profile_dir}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


def ui_login(driver, base: str, user: str, password: str, page: str = "/"):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    # the UI re-renders while it loads: an element found a moment ago may be gone, so look again
    wait = WebDriverWait(driver, 60, ignored_exceptions=(StaleElementReferenceException,))
    driver.get(base + page)
    wait.until(EC.presence_of_element_located((By.NAME, "username"))).send_keys(user)
    driver.find_element(By.NAME, "password").send_keys(password)
    next(b for b in driver.find_elements(By.TAG_NAME, "button") if b.text == "Sign in").click()
    wait.until(lambda d: "/auth/login" not in d.current_url)
    return wait


def trigger_form_text(driver, wait, base: str, dag_id: str) -> str:
    """Open the DAG's page, click Trigger; the text of the form with its Params."""
    from selenium.webdriver.common.by import By

    def click_trigger(d) -> bool:
        button = next((b for b in d.find_elements(By.TAG_NAME, "button") if b.text.strip() == "Trigger"), None)
        if button is not None:
            button.click()  # a stale button raises, and the wait looks again
        return button is not None

    driver.get(f"{base}/dags/{dag_id}")
    wait.until(click_trigger)
    wait.until(lambda d: "Run Parameters" in d.find_element(By.TAG_NAME, "body").text)
    return driver.find_element(By.TAG_NAME, "body").text


def task_log_text(driver, wait, base: str, dag_id: str, run_id: str, task_id: str, map_index: int, marker: str) -> str:
    """Open a mapped task instance's log tab and wait until `marker` is shown; the page text."""
    from selenium.webdriver.common.by import By

    driver.get(f"{base}/dags/{dag_id}/runs/{run_id}/tasks/{task_id}/mapped/{map_index}")
    wait.until(lambda d: marker in d.find_element(By.TAG_NAME, "body").text)
    return driver.find_element(By.TAG_NAME, "body").text
