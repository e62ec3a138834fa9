"""The failure line as the task instance's note in the Airflow UI.

Airflow 3.3's Task SDK cannot set a note from inside a task, so the operator goes through the
public REST API (PATCH .../taskInstances/{task}/{map_index}?update_mask=note) with the
credentials of the Airflow connection `scalebench_airflow_api` (type http, e.g.
AIRFLOW_CONN_SCALEBENCH_AIRFLOW_API='http://user:password@api-server:8080'). Without that
connection the note is skipped and the reason stays in the failure message, log and XCom.
"""
from __future__ import annotations

from typing import Callable, NoReturn
from urllib.parse import quote

CONN_ID = "scalebench_airflow_api"
MAX_NOTE = 1000  # the API's limit


def _base_url(conn) -> str:
    scheme = "https" if "https" in (conn.conn_type, conn.schema) else "http"
    host = conn.host or "localhost"
    if host.startswith(("http://", "https://")):
        return host.rstrip("/")
    return f"{scheme}://{host}{f':{conn.port}' if conn.port else ''}"


def _connection():
    from airflow.sdk import BaseHook

    return BaseHook.get_connection(CONN_ID)


def _api(conn, timeout_s: float):
    """(an httpx client, the api-server's base URL, its auth header), logged in as the connection's account."""
    import httpx

    base = _base_url(conn)
    client = httpx.Client(timeout=timeout_s)
    try:
        r = client.post(f"{base}/auth/token", json={"username": conn.login, "password": conn.password})
        r.raise_for_status()
        return client, base, {"Authorization": f"Bearer {r.json()['access_token']}"}
    except BaseException:
        client.close()
        raise


def set_note(ti, note: str, timeout_s: float = 15) -> str:
    """Set the note of task instance `ti`; returns 'set' or why it was skipped. Never raises."""
    try:
        conn = _connection()
    except Exception:
        return f"skipped (no Airflow connection {CONN_ID!r})"
    try:
        client, base, auth = _api(conn, timeout_s)
        try:
            map_index = getattr(ti, "map_index", -1)
            path = (f"/api/v2/dags/{quote(ti.dag_id)}/dagRuns/{quote(ti.run_id, safe='')}/taskInstances/"
                    f"{quote(ti.task_id)}" + (f"/{map_index}" if map_index is not None and map_index >= 0 else ""))
            r = client.patch(f"{base}{path}", params={"update_mask": "note"}, json={"note": note[:MAX_NOTE]},
                             headers=auth)
            r.raise_for_status()
        finally:
            client.close()
        return "set"
    except Exception as exc:  # the note is a convenience; the failure itself must still surface
        return f"skipped ({type(exc).__name__}: {str(exc)[:200]})"


def account() -> str | None:
    """The login the connection acts as (None without the connection)."""
    try:
        return _connection().login or None
    except Exception:
        return None


def trigger(dag_id: str, conf: dict, timeout_s: float = 15) -> str:
    """Trigger a run of `dag_id` with `conf` through the REST API; returns its run id. Raises
    with the reason when it cannot (no connection, refused)."""
    client, base, auth = _api(_connection(), timeout_s)
    try:
        r = client.post(f"{base}/api/v2/dags/{quote(dag_id)}/dagRuns", json={"logical_date": None, "conf": conf},
                        headers=auth)
        r.raise_for_status()
        return r.json()["dag_run_id"]
    finally:
        client.close()


def note(ti, text: str, log: Callable[[str], None] = print) -> str:
    """Set the task's note to `text` and say in the task log whether it was set."""
    outcome = set_note(ti, text)
    log(f"task note: {outcome}")
    return outcome


def fail_with_note(ti, message: str) -> NoReturn:
    """The task's note says why, then the task fails for good (no retry) with the same message."""
    from airflow.sdk.exceptions import AirflowFailException

    note(ti, message)
    raise AirflowFailException(message)
