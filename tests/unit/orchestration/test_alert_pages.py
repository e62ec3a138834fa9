"""The triage pages (/scalebench/alerts): the list and a group's page from the store, and the
actions a user with edit access may take, refused for a read-only user, a request from another
site or one without the page's token; each refusal names what was wrong, never the value sent."""
import re

import pytest

from scalebench.orchestration.ui import triage, webapp
from scalebench.store.alert_groups import AlertGroups
from scalebench.store.results import Store

DETAIL = {"benchmark": "unet_torch_voc2007", "gpus": 4, "precision": "bf16", "metric": "images_per_s", "change": 0.12,
          "line": "unet_torch_voc2007 4 GPUs bf16 images_per_s: regressed with image <script>alert(1)</script>",
          "suspect": {"kind": "image", "text": "image scalebench/torch:b <b>bold</b>", "previous_image": "scalebench/torch:a",
                      "new_image": "scalebench/torch:b", "what_changed": "torch 2.12 -> 2.13"}}


class User:
    def __init__(self, name):
        self.name = name

    def get_id(self):
        return self.name

    def get_name(self):
        return self.name


@pytest.fixture
def site(isolated_state, monkeypatch):
    from fastapi.testclient import TestClient

    monkeypatch.setenv("AIRFLOW__API_AUTH__JWT_SECRET", "a-test-secret")
    AlertGroups(Store()).record_night("2026-12-01", [DETAIL])
    who = {"user": User("alice"), "editor": True}
    monkeypatch.setattr(triage, "may_edit", lambda user: who["editor"])
    app = webapp.create_app()
    for route in app.routes:  # the login is Airflow's JWT check (tested against a real api-server elsewhere)
        for dep in getattr(getattr(route, "dependant", None), "dependencies", []):
            app.dependency_overrides[dep.call] = lambda: None
    app.dependency_overrides[triage.current_user] = lambda: who["user"]
    return TestClient(app, root_path="/scalebench", base_url="http://airflow.test"), who


def token_of(page: str) -> str:
    return re.search(r'name="token" value="([0-9]+\.[0-9a-f]{64})"', page).group(1)


def test_the_list_shows_open_groups_and_filters(site):
    client, _ = site
    page = client.get("/alerts")
    assert page.status_code == 200 and 'href="/scalebench/alerts/1"' in page.text and "unet_torch_voc2007" in page.text
    assert "<b>bold</b>" not in page.text and "&lt;b&gt;bold&lt;/b&gt;" in page.text  # stored text is text
    assert "/scalebench/alerts/1" not in client.get("/alerts?state=fixed").text
    assert client.get("/alerts?state=open&benchmark=unet_torch_voc2007").text.count('href="/scalebench/alerts/1"') == 1
    assert client.get("/alerts?state=gone").status_code == 422
    assert client.get("/api/alerts.json").json()[0]["figures"][0]["gpus"] == 4


def test_an_editor_takes_the_group_and_sets_a_state_with_a_note(site):
    client, _ = site
    page = client.get("/alerts/1")
    assert "<script>alert(1)</script>" not in page.text and 'id="take"' in page.text
    token = token_of(page.text)
    done = client.post("/alerts/1", data={"token": token, "action": "take"}, follow_redirects=False,
                       headers={"Origin": "http://airflow.test", "Sec-Fetch-Site": "same-origin"})
    assert done.status_code == 303 and done.headers["location"] == "/scalebench/alerts/1"
    client.post("/alerts/1", data={"token": token, "action": "state", "state": "investigating", "note": "NCCL 2.29"})
    group = AlertGroups(Store()).group(1)
    assert (group["state"], group["owner"]) == ("investigating", "alice")
    assert [(e["who"], e["kind"], e["to"], e["note"]) for e in group["events"][-2:]] == [
        ("alice", "state", "triaged", None), ("alice", "state", "investigating", "NCCL 2.29")]
    assert "NCCL 2.29" in client.get("/alerts/1").text  # the event log


def test_a_read_only_user_sees_no_action_and_cannot_post_one(site):
    client, who = site
    token = token_of(client.get("/alerts/1").text)
    who["editor"] = False
    page = client.get("/alerts/1")
    assert page.status_code == 200 and 'name="token"' not in page.text and "needs edit access" in page.text
    refused = client.post("/alerts/1", data={"token": token, "action": "take"})
    assert refused.status_code == 403 and AlertGroups(Store()).group(1)["state"] == "new"


@pytest.mark.parametrize("headers, data, status, says", [
    ({"Origin": "https://evil.example"}, {"action": "take"}, 403, "own alert page"),
    ({"Sec-Fetch-Site": "cross-site"}, {"action": "take"}, 403, "own alert page"),
    ({}, {"action": "take", "token": "0" * 64}, 403, "token"),
    ({}, {"action": "take", "token": None}, 403, "token"),
    ({}, {"action": "state", "state": "<img src=x onerror=alert(1)>"}, 422, "state: expected"),
    ({}, {"action": "state", "state": "invalid", "note": "n" * 2001}, 422, "note: expected"),
    ({}, {"action": "drop"}, 422, "action: expected"),
])
def test_a_forged_or_bad_post_is_refused_and_changes_nothing(site, headers, data, status, says):
    client, _ = site
    token = token_of(client.get("/alerts/1").text)
    data = {"token": token, **data}
    got = client.post("/alerts/1", data={k: v for k, v in data.items() if v is not None}, headers=headers,
                      follow_redirects=False)
    assert got.status_code == status and says in got.text, got.text
    assert "onerror" not in got.text and "evil.example" not in got.text
    assert AlertGroups(Store()).group(1)["state"] == "new"


def test_a_token_is_the_users_own_for_one_group(site):
    client, who = site
    token = token_of(client.get("/alerts/1").text)
    who["user"] = User("mallory")  # another user replaying alice's token
    assert client.post("/alerts/1", data={"token": token, "action": "take"}).status_code == 403
    assert client.get("/alerts/2").status_code == 404


def test_a_token_expires_after_12_hours(site):
    import time

    client, who = site
    old = triage._action_token(who["user"], 1, int(time.time()) - triage.TOKEN_TTL_S - 60)
    got = client.post("/alerts/1", data={"token": old, "action": "take"})
    assert got.status_code == 403 and "older than 12 hours" in got.text
    forged = old.split(".")[0] + "9." + old.split(".")[1]  # a later time under the old signature
    assert client.post("/alerts/1", data={"token": forged, "action": "take"}).status_code == 403
    assert AlertGroups(Store()).group(1)["state"] == "new"


@pytest.mark.parametrize("moves, refused, says", [
    ([("invalid", None)], 0, "invalid needs a note (invalid closes the group)"),
    ([("fixed", None)], 0, "fixed needs a note (1 figure(s) are not back yet)"),
    ([("fixed", "the driver rollback"), ("new", None)], 1, "fixed cannot become new by hand (from fixed: investigating)"),
])
def test_the_transitions_table_refuses_a_move_it_does_not_list_or_one_without_its_note(site, moves, refused, says):
    client, _ = site
    token = token_of(client.get("/alerts/1").text)
    for i, (state, note) in enumerate(moves):
        got = client.post("/alerts/1", data={"token": token, "action": "state", "state": state,
                                             **({"note": note} if note else {})}, follow_redirects=False)
        assert got.status_code == (409 if i == refused else 303), got.text
    assert says in got.text
    assert AlertGroups(Store()).group(1)["state"] == (moves[refused - 1][0] if refused else "new")


def test_behind_a_proxy_the_origin_is_compared_with_the_base_url(site, monkeypatch):
    client, _ = site
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "https://airflow.example.com/")
    token = token_of(client.get("/alerts/1").text)
    ok = client.post("/alerts/1", data={"token": token, "action": "take"}, follow_redirects=False,
                     headers={"Origin": "https://airflow.example.com"})  # the Host the app sees is airflow.test
    assert ok.status_code == 303
    other = client.post("/alerts/1", data={"token": token, "action": "note", "note": "x"},
                        headers={"Origin": "https://airflow.example.org"})
    assert other.status_code == 403


@pytest.mark.parametrize("host, origin, trusted, status", [
    # the service reached by colleagues under any of its names, base_url still localhost
    ("gpu-server.corp:8080", "http://gpu-server.corp:8080", "", 303),
    ("10.0.0.5:8080", "http://10.0.0.5:8080", "", 303),
    ("127.0.0.1:8080", "http://127.0.0.1:8080", "", 303),
    ("Airflow.Example.com", "http://airflow.example.com", "", 303),      # case
    ("airflow.example.com", "http://airflow.example.com:80", "", 303),   # an explicit default port
    ("[::1]:8080", "http://[::1]:8080", "", 303),
    ("localhost:8080", "http://localhost:8080", "", 303),                # base_url itself
    ("internal:8080", "https://airflow.example.com", "https://airflow.example.com,https://b.example", 303),
    # cross-site: another host, port or scheme, an opaque origin, a list that names another site
    ("gpu-server.corp:8080", "http://evil.example", "", 403),
    ("gpu-server.corp:8080", "http://gpu-server.corp:8081", "", 403),
    ("gpu-server.corp:8080", "https://gpu-server.corp:8080", "", 403),
    ("gpu-server.corp:8080", "null", "", 403),
    ("gpu-server.corp:8080", "http://evil.example", "https://airflow.example.com", 403),
    ("gpu-server.corp:8080", "http://evil.example", "not an origin", 403),
])
def test_a_post_is_same_site_by_the_host_it_was_addressed_to(site, monkeypatch, host, origin, trusted, status):
    client, _ = site
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", "http://localhost:8080")
    monkeypatch.setenv("SCALEBENCH_TRUSTED_ORIGINS", trusted)
    token = token_of(client.get("/alerts/1").text)
    got = client.post("/alerts/1", data={"token": token, "action": "take"}, follow_redirects=False,
                      headers={"Host": host, "Origin": origin, "Sec-Fetch-Site": "same-origin"})
    assert got.status_code == status, got.text
    assert AlertGroups(Store()).group(1)["state"] == ("triaged" if status == 303 else "new")


@pytest.mark.parametrize("token, says", [
    ("\u0663\u0663." + "0" * 64, "not this page"),   # Arabic-Indic digits: a number to isdigit(), not ASCII
    ("1." + "\u00e9" * 64, "not this page"),         # a MAC that is not hex
    ("1.2.3", "not this page"), ("." + "0" * 64, "not this page"), ("9" * 13 + "." + "0" * 64, "not this page"),
])
def test_a_malformed_token_is_refused_not_an_error(site, token, says):
    client, _ = site
    got = client.post("/alerts/1", data={"token": token, "action": "take"})
    assert got.status_code == 403 and says in got.text, got.text
    assert AlertGroups(Store()).group(1)["state"] == "new"


def test_a_token_from_the_future_is_refused_as_such(site):
    import time

    client, who = site
    ahead = triage._action_token(who["user"], 1, int(time.time()) + 3600)
    got = client.post("/alerts/1", data={"token": ahead, "action": "take"})
    assert got.status_code == 403 and "from the future" in got.text and "older than" not in got.text
    near = triage._action_token(who["user"], 1, int(time.time()) + 10)  # a clock a little ahead: taken
    assert client.post("/alerts/1", data={"token": near, "action": "take"}, follow_redirects=False).status_code == 303


def test_the_store_work_of_an_action_runs_off_the_event_loop(site, monkeypatch):
    """A move may wait for the group's lock: never on the api-server's event loop, which serves every page."""
    import asyncio

    client, _ = site
    seen = []
    real = AlertGroups.set

    def watched(self, *a, **kw):
        try:
            asyncio.get_running_loop()
            seen.append("on the event loop")
        except RuntimeError:
            seen.append("in a worker thread")
        return real(self, *a, **kw)

    monkeypatch.setattr(AlertGroups, "set", watched)
    token = token_of(client.get("/alerts/1").text)
    assert client.post("/alerts/1", data={"token": token, "action": "take"}, follow_redirects=False).status_code == 303
    assert seen == ["in a worker thread"]
