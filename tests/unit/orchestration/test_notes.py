"""The REST calls tasks make as the `notes` account (a task's note, a triggered bisection),
against a local stand-in of the api-server's three routes: log in, then one call with the token."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest

from scalebench.orchestration import notes


@pytest.fixture
def api(monkeypatch):
    calls = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, doc):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            calls.append((self.command, self.path, self.headers.get("Authorization"), json.loads(body or b"null")))
            out = json.dumps(doc).encode()
            self.send_response(200 if self.path == "/auth/token" or self.headers.get("Authorization") == "Bearer t"
                               else 401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def do_POST(self):
            self._answer({"access_token": "t"} if self.path == "/auth/token" else {"dag_run_id": "manual__1"})

        def do_PATCH(self):
            self._answer({"note": "ok"})

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API", f"http://notes:pw@127.0.0.1:{server.server_address[1]}")
    yield calls
    server.shutdown()


def test_a_note_is_set_with_the_accounts_token(api):
    ti = SimpleNamespace(dag_id="scalebench_drill", run_id="manual__2026-12-05T01:52:22+00:00", task_id="local_1gpu.train",
                         map_index=0)
    assert notes.set_note(ti, "failed: oom") == "set"
    assert [c[:3] for c in api] == [
        ("POST", "/auth/token", None),
        ("PATCH", "/api/v2/dags/scalebench_drill/dagRuns/manual__2026-12-05T01%3A52%3A22%2B00%3A00/taskInstances/"
                  "local_1gpu.train/0?update_mask=note", "Bearer t")]
    assert api[0][3] == {"username": "notes", "password": "pw"} and api[1][3] == {"note": "failed: oom"}


def test_a_run_is_triggered_with_its_conf(api):
    assert notes.trigger("scalebench_bisect", {"good": "a", "bad": "b"}) == "manual__1"
    assert api[1][:2] == ("POST", "/api/v2/dags/scalebench_bisect/dagRuns")
    assert api[1][3] == {"logical_date": None, "conf": {"good": "a", "bad": "b"}}


def test_without_the_connection_a_note_is_skipped_and_says_why(monkeypatch):
    monkeypatch.delenv("AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API", raising=False)
    ti = SimpleNamespace(dag_id="d", run_id="r", task_id="t", map_index=-1)
    assert notes.set_note(ti, "x") == "skipped (no Airflow connection 'scalebench_airflow_api')"
