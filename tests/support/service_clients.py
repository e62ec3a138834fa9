"""Clients for a running Airflow service, as a user drives it: `make airflow` in a home of its
own, the REST API (JWT from /auth/token) and a headless Chromium logged in to the UI. Shared by
the service, stack and drill tests and the bench scripts."""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.support import ROOT
from tests.support.engine import free_port

DONE = {"success", "failed"}


def api_time(stamp: str) -> float:
    """An ISO time from the REST API as seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


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

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float = 900, poll_s: float = 3) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in DONE:
                return run
            time.sleep(poll_s)
        raise TimeoutError(f"{dag_id} run {run_id} still {run['state']} after {timeout_s} s")

    def task_instances(self, dag_id: str, run_id: str) -> list[dict]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances", params={"limit": 100})["task_instances"]

    def runs(self, dag_id: str) -> list[dict]:
        return self.get(f"/api/v2/dags/{dag_id}/dagRuns")["dag_runs"]


LOGIN = re.compile(r"^Airflow UI: (https?://[^\s/]+)  user: (\w+)  password: in (\S+) \(key", re.M)


def make(target: str, env: dict, timeout: float) -> tuple[int, str]:
    out = subprocess.run(["make", "-s", target], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


@dataclass
class LocalService:
    api: AirflowApi
    env: dict          # the environment `make airflow` ran with (homes, port, configs)
    out: str           # what it printed
    home: Path         # SCALEBENCH_HOME: results, results.db, airflow/
    started_s: float


@contextlib.contextmanager
def local_service(home: Path, config_dir: Path, **extra_env: str):
    """`make airflow` as a user runs it, in a home of its own; `make airflow-stop` afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(SCALEBENCH_HOME=str(home), AIRFLOW_HOME=str(home / "airflow"), AIRFLOW_PORT=str(free_port()),
               SCALEBENCH_CONFIG_DIR=str(config_dir), **extra_env)
    began = time.monotonic()
    try:  # stopped however the start ends (a test timeout mid-start leaves no component running)
        rc, out = make("airflow", env, 900)
        found = LOGIN.search(out)
        if rc != 0 or not found:
            raise RuntimeError(f"make airflow failed (exit {rc}):\n{out[-4000:]}")
        base, user, where = found.groups()
        password = json.loads(Path(where).read_text())[user]
        yield LocalService(AirflowApi(base, user, password), env, out, home, time.monotonic() - began)
    finally:
        make("airflow-stop", env, 120)


@contextlib.contextmanager
def browser(profile_dir, network_log: bool = False):
    """Debian's headless Chromium through ChromeDriver; `network_log`: its network events and
    console messages can be read (see page_problems)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
                "--window-size=1400,1000", f"--user-data-dir={profile_dir}"):
        opts.add_argument(arg)
    if network_log:
        opts.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts)
    try:
        yield driver
    finally:
        driver.quit()


# the page and the data it asks for; a script chunk the bundler preloads, a blob: or a data: URL
# may never report its end
DATA_REQUESTS = ("Document", "XHR", "Fetch")


class Network:
    """The browser's requests as its performance log reports them (a browser(..., network_log=True)):
    each (status, url) answered, and the page's data requests sent but not yet finished or failed."""

    def __init__(self, driver):
        self.driver, self.answers, self.in_flight = driver, [], {}

    def read(self) -> list[tuple[int, str]]:
        """Every answer since the last take(), after reading the log's new entries."""
        for entry in self.driver.get_log("performance"):
            event = json.loads(entry["message"])["message"]
            method, params = event["method"], event.get("params", {})
            if method == "Network.requestWillBeSent" and params.get("type") in DATA_REQUESTS:
                self.in_flight[params["requestId"]] = params["request"]["url"]
            elif method == "Network.responseReceived":
                self.answers.append((params["response"]["status"], params["response"]["url"]))
            elif method in ("Network.loadingFinished", "Network.loadingFailed"):
                self.in_flight.pop(params["requestId"], None)
        return self.answers

    def settle(self, quiet_s: float = 0.4, most_s: float = 10.0) -> list[str]:
        """Wait until no request has been in flight and none answered for `quiet_s`; the URLs of
        those still loading after `most_s` (a page that never finishes loading is a finding)."""
        deadline, calm_since = time.monotonic() + most_s, None
        while time.monotonic() < deadline:
            before = len(self.answers)
            self.read()
            if self.in_flight or len(self.answers) != before:
                calm_since = None
            elif calm_since is None:
                calm_since = time.monotonic()
            elif time.monotonic() - calm_since >= quiet_s:
                return []
            time.sleep(0.1)
        return sorted(self.in_flight.values())

    def take(self) -> list[tuple[int, str]]:
        """The answers read so far, forgetting them (and any request a page left behind)."""
        out, self.answers, self.in_flight = self.read(), [], {}
        return out


def console_errors(driver) -> list[str]:
    """The console's errors since the log was last read; not Chromium's own ERR_NETWORK_CHANGED,
    which it logs when the host's interfaces change (other tests' Docker networks come and go
    beside the service reached by the machine's name), not an error of the page."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
            and "net::ERR_NETWORK_CHANGED" not in e["message"]]


def save_screenshot(driver, home, name: str) -> None:
    """Into $SCALEBENCH_SCREENSHOTS (docs/, when the docs' pictures are made) or the test's folder."""
    where = Path(os.environ.get("SCALEBENCH_SCREENSHOTS") or home)
    driver.save_screenshot(str(where / name))
    assert (where / name).read_bytes()[:4] == b"\x89PNG"
    print(f"\nscreenshot: {where / name}")


def ui_login(driver, base: str, user: str, password: str, page: str = "/"):
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    # the UI re-renders while it loads: an element found a moment ago may be gone, so look again
    wait = WebDriverWait(driver, 60, ignored_exceptions=(StaleElementReferenceException,))

    def username_field(d):
        try:
            return d.find_element(By.NAME, "username")
        except WebDriverException as exc:  # the page redirected to the login form while we looked
            if "aborted by navigation" in str(exc):
                return False
            raise
    driver.get(base + page)
    wait.until(username_field).send_keys(user)
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
