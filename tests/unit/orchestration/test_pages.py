"""The browsing pages served in process (the plugin's app, Airflow's login dependency satisfied;
test_report_ui checks the login on a real api-server): what each page shows and links to, and
its CSV/JSON exports."""
import csv
import io
import json
import re
import shutil

import pytest

from scalebench.orchestration.ui.webapp import create_app
from scalebench.store.results import Store
from tests.support.routes import HOSTILE, routes, url
from tests.support.samples import seed_nights

BENCH = "resnet50_keras_cifar10"
DAG = f"scalebench_{BENCH}"


def open_app():
    from fastapi.testclient import TestClient

    app = create_app()
    for route in app.routes:  # the login is Airflow's JWT check (tested against a real api-server elsewhere)
        for dep in getattr(getattr(route, "dependant", None), "dependencies", []):
            app.dependency_overrides[dep.call] = lambda: None
    return TestClient(app, root_path="/scalebench")


@pytest.fixture(scope="module")
def seeded_home(tmp_path_factory, upgraded_store_file):
    """The seeded nights and their reports made once per module (seconds of summaries and reports)."""
    home = tmp_path_factory.mktemp("seeded") / "state"
    home.mkdir()
    shutil.copy(upgraded_store_file, home / "results.db")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCALEBENCH_HOME", str(home))  # (made before each test's own isolated_state)
        mp.delenv("SCALEBENCH_STORE_URL", raising=False)
        return home, seed_nights(Store())


@pytest.fixture
def nights(isolated_state, seeded_home):
    """A copy of the seeded state folder for this test (a test may change it)."""
    home, facts = seeded_home
    shutil.copytree(home, isolated_state, dirs_exist_ok=True)
    return facts


def test_the_history_page_embeds_every_nights_summary_with_its_marks_and_loads_only_vendored_scripts(nights):
    client = open_app()
    page = client.get(f"/benchmarks/{BENCH}")
    assert page.status_code == 200
    doc = json.loads(re.search(r'id="history-data">(.*?)</script>', page.text, re.S).group(1).replace("<\\/", "</"))
    points = [dict(zip(doc["fields"], row)) | doc["runs"][row[0]] for row in doc["rows"]]  # as history.js reads it
    assert [(p["night"], p["gpus"]) for p in points][:2] == [("2026-11-23", 1), ("2026-11-23", 2)]
    last = [p for p in points if p["night"] == nights["last"] and p["gpus"] == 2][0]
    assert last["relative_time"] == pytest.approx(76.5 / 101.5, rel=1e-6) and last["image_digest"] == "sha256:new"
    assert last["run_id"] == nights["run_id"] and "every night since 2026-11-23" in page.text
    assert last["valid"] == 2 and last["cells"] == 3 and last["retried"] == 1
    assert last["basis"] == "train time" and "<th>timed by</th>" in page.text  # each figure's basis, charted and tabled
    # the new image is judged against the old baseline: marked as the change it is, with its verdict
    changes = [m for m in last["marks"] if m["kind"] in ("change", "flagged", "alert")]
    assert changes and all("image digest sha256:old -> sha256:new" in m["text"] for m in changes), last["marks"]
    assert f"{changes[0]['kind']}: " in page.text  # the marked nights, in words
    scripts = re.findall(r'<script src="([^"?]+)\?v=[0-9a-f]{12}"', page.text)  # each under its content's hash
    assert scripts == ["/scalebench/static/uPlot.iife.min.js", "/scalebench/static/pages.js",
                       "/scalebench/static/history.js"]
    for src in scripts:
        assert client.get(src.removeprefix("/scalebench")).status_code == 200
    assert "http" not in "".join(re.findall(r'(?:src|href)="([^"]+)"', page.text))  # nothing from another site


def test_the_history_exports_are_the_summaries_as_csv_and_json(nights):
    client = open_app()
    got = client.get(f"/api/benchmarks/{BENCH}/history.csv")
    assert got.headers["content-disposition"] == (f'attachment; filename="{BENCH}-history.csv"; '
                                                  f"filename*=UTF-8''{BENCH}-history.csv")
    rows = list(csv.DictReader(io.StringIO(got.text)))
    assert len(rows) == 12 and rows[-1]["night"] == nights["last"] and rows[-1]["gpus"] == "2"
    assert float(rows[-1]["relative_time"]) == pytest.approx(76.5 / 101.5) and "change:" in rows[-1]["marks"]
    assert {"metric_precision", "share_compute"} <= set(rows[0])
    # streamed as it is read, the same values as the whole export made at once, and `other` (a metric or
    # share no newest night carries) empty here
    from scalebench.report.exports import HISTORY_COLUMNS, history_row, to_csv
    whole = list(csv.DictReader(io.StringIO(to_csv(HISTORY_COLUMNS, [history_row(r) for r in Store().summaries(
        benchmark=BENCH)]))))
    assert [{k: v for k, v in r.items() if k != "other"} for r in rows] == whole and {r["other"] for r in rows} == {""}
    assert client.get(f"/api/benchmarks/{BENCH}/history.json").json() == Store().summaries(benchmark=BENCH)
    assert client.get(f"/api/benchmarks/{BENCH}/history.xml").status_code == 422


def test_a_nights_page_lists_the_failed_cell_first_with_its_reason_and_a_link_to_each_attempts_log(nights):
    client = open_app()
    page = client.get(f"/nights/{nights['last']}").text
    failed = page.index("Cells without a valid result (1)")
    assert failed < page.index("<h2>Cells (5)</h2>")
    assert "oom, exit code 137: CUDA out of memory" in page
    run = nights["run_id"].replace(":", "%3A").replace("+", "%2B")
    for k in (1, 2):
        link = f'target="_top" href="/dags/{DAG}/runs/{run}/tasks/local_2gpu.train/mapped/2?try_number={k}"'
        assert link in page[failed:]
    assert f'href="/scalebench/{nights["last"]}/report.html"' in page
    assert 'href="/scalebench/compare?a=2026-11-27&amp;b=2026-11-28"' in page
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/nights/{nights['last']}/cells.csv").text)))
    assert rows[0]["status"] == "failed" and rows[0]["detail"] == "oom, exit code 137: CUDA out of memory"
    assert len(rows) == 5 and client.get("/nights/not-a-night").status_code == 422


def test_a_dag_run_tab_shows_its_cells_and_the_other_dags_say_what_they_are(nights):
    client = open_app()
    page = client.get("/runs", params={"dag_id": DAG, "run_id": nights["run_id"]}).text
    assert "Cells without a valid result (1)" in page and f'href="/scalebench/benchmarks/{BENCH}"' in page
    assert "has no recorded cell" in client.get("/runs", params={"dag_id": DAG, "run_id": "manual__none"}).text
    assert "nightly report DAG" in client.get("/runs", params={"dag_id": "scalebench_nightly_report", "run_id": "x"}).text
    assert "records no figure" in client.get("/runs", params={"dag_id": "scalebench_maintenance", "run_id": "x"}).text
    for dag_id, where in ((DAG, f"/scalebench/benchmarks/{BENCH}"), (f"{DAG}_accuracy", f"/scalebench/benchmarks/{BENCH}"),
                          ("scalebench_nightly_report", "/scalebench/")):
        got = client.get("/dags", params={"dag_id": dag_id}, follow_redirects=False)
        assert got.status_code == 307 and got.headers["location"] == where
    assert "No night of <code>unet_torch_voc2007</code>" in client.get("/dags", params={"dag_id": "scalebench_unet_torch_voc2007"}).text
    assert "records no figure" in client.get("/dags", params={"dag_id": "scalebench_maintenance"}).text
    # a DAG id Airflow would not allow is refused by a page naming the parameter and what it must be, not echoing it
    hostile = client.get("/dags", params={"dag_id": "scalebench_<img src=x onerror=alert(1)>"})
    assert hostile.status_code == 422 and hostile.headers["content-type"].startswith("text/html")
    assert "img" not in hostile.text and "onerror" not in hostile.text and 'href="/scalebench/static/pages.css?v=' in hostile.text
    assert "query parameter dag_id: expected an Airflow DAG id (letters, digits, _ . -, at most 250)." in hostile.text
    assert '<a href="/scalebench/">the nights</a>' in hostile.text  # a way back
    api = client.get("/api/runs/cells.csv", params={"dag_id": "<img>", "run_id": "x"})  # under /api/: JSON
    assert api.status_code == 422 and api.json() == {"detail": [
        "query parameter dag_id: expected an Airflow DAG id (letters, digits, _ . -, at most 250)."]}


def test_the_compare_page_defaults_to_the_last_two_nights_and_exports_the_same_rows(nights):
    client = open_app()
    page = client.get("/compare").text
    assert "A = scheduled__2026-11-27T01:00:00+00:00" in page and "systems differ in: image digest sha256:old" in page
    assert "B slower by" in page or "inconclusive" in page
    rows = list(csv.DictReader(io.StringIO(client.get("/api/compare.csv", params={"a": "2026-11-27", "b": "2026-11-28"}).text)))
    assert [(r["gpus"], r["run_b"]) for r in rows] == [("1", nights["run_id"]), ("2", nights["run_id"])]
    assert float(rows[1]["ratio"]) == pytest.approx(76.5 / 61.5)
    assert "no stored run" in client.get("/compare", params={"a": "2026-01-01", "b": "2026-01-02"}).text


def test_the_history_page_shows_a_window_of_nights_unless_asked_for_all(nights):
    client = open_app()
    recent = client.get(f"/benchmarks/{BENCH}", params={"nights": 2}).text
    rows = json.loads(re.search(r'id="history-data">(.*?)</script>', recent, re.S).group(1))["rows"]
    assert sorted({r[0] for r in rows}) == ["2026-11-27", "2026-11-28"]
    assert "nights since 2026-11-27 (its first: 2026-11-23)" in recent
    every = client.get(f"/benchmarks/{BENCH}", params={"all": 1}).text
    assert len(json.loads(re.search(r'id="history-data">(.*?)</script>', every, re.S).group(1))["rows"]) == 12


def test_every_route_answers_hostile_values_with_4xx_or_an_escaped_page_never_500(nights, monkeypatch):
    """Each path and query parameter of every route the app declares, set in turn to each hostile
    value (the others valid): a 4xx or a page in which the value appears only escaped, and the
    page headers on every answer. Prints each route's answers (pytest -s)."""
    from scalebench.orchestration.ui import triage

    monkeypatch.setattr(triage, "may_edit", lambda user: False)  # a reader (the actions: test_alert_pages)
    client = open_app()
    valid = {"night": nights["last"], "fmt": "csv", "benchmark": BENCH, "dag_id": DAG, "run_id": nights["run_id"],
             "a": "2026-11-27", "b": nights["last"], "nights": "90", "all": "false", "static:name": "pages.js",
             "night_file:name": "report.html", "group_id": "1", "state": "open", "owner": "alice",
             "key": "0" * 20, "index": "0", "before": nights["last"], "since": "2026-11-20", "days": "30"}
    walked = routes(create_app())
    assert {r["name"] for r in walked} >= {"history_page", "history_older", "history_export", "night", "night_export", "run", "run_export",
                                           "dag", "compare", "compare_export", "static", "night_file", "index"}
    table = []
    for route in walked:
        plain = client.get(url(route, valid), follow_redirects=False)
        assert plain.status_code in (200, 307, 404), (route["path"], plain.status_code, plain.text[:300])
        answers = {}
        for param in route["path_params"] + list(route["query_params"]):
            for what, value in HOSTILE.items():
                got = client.get(url(route, valid, (param, value)), follow_redirects=False)
                assert got.status_code < 500, (route["path"], param, what)
                assert got.headers["x-content-type-options"] == "nosniff" and got.headers["cache-control"] == "no-store"
                if got.status_code >= 400:  # a refusal names what was wrong, never the value sent
                    api = route["path"].startswith("/api/")
                    assert got.headers["content-type"].startswith("application/json" if api else "text/html"), \
                        (route["path"], param, what, got.headers["content-type"])
                    assert len(value) < 3 or value not in got.text, (route["path"], param, what)
                assert "script-src 'self'" in got.headers["content-security-policy"] or \
                    "script-src" not in got.headers["content-security-policy"]  # the report files run no script
                if got.status_code == 200:
                    assert value not in got.text or not set(value) & set("<>\"'"), (route["path"], param, what)
                    got.headers.get("content-disposition", "").encode("ascii")  # never a raw non-ASCII name
                answers.setdefault(param, {}).setdefault(got.status_code, []).append(what)
        table.append((route["path"], plain.status_code, answers))
    for path, plain, answers in table:  # one Markdown row per route: its answer to each hostile value
        print(f"| `{path}` | {plain} | " + "; ".join(
            f"`{param}`: " + ", ".join(f"{code} ({', '.join(whats)})" for code, whats in sorted(codes.items()))
            for param, codes in answers.items()) + " |")


def test_stored_text_from_a_container_or_a_config_is_shown_as_text(nights, isolated_state):
    """A failure reason comes from a container's log and a shift's reason from include/configs:
    both reach the pages as text, never as markup."""
    from scalebench.orchestration.ui import pages

    cells = Store().cells(night=nights["last"])
    bad = next(c for c in cells if c["figure"] is None)
    bad["attempts"][-1]["message"] = "<script>alert(1)</script>"
    html = pages.night_page("/scalebench", "", nights["last"], [bad], False, None)
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    summaries = Store().summaries(benchmark=BENCH)
    summaries[-1]["marks"] = [{"kind": "alert", "text": "</script><script>alert(2)</script>"}]
    html = pages.history_page("/scalebench", BENCH, summaries, [{"since": "2026-11-25", "reason": "<b>new driver</b>",
                                                                  "gpus": None}], True, None, "2026-11-23")
    assert "<script>alert(2)" not in html and "<b>new" not in html and "&lt;b&gt;new driver&lt;/b&gt;" in html
    blob = re.search(r'id="history-data">(.*?)</script>', html, re.S).group(1)
    doc = json.loads(blob)
    assert doc["rows"][-1][doc["fields"].index("marks")][0]["text"] == "</script><script>alert(2)</script>"


def test_download_names_follow_rfc_6266():
    from scalebench.orchestration.ui.shared import attachment

    assert attachment('cells-a"b\u0661\u00e9.csv') == ("attachment; filename=\"cells-a_b__.csv\"; "
                                                     "filename*=UTF-8''cells-a%22b%D9%A1%C3%A9.csv")


def test_the_pages_carry_their_policy_and_the_night_and_window_ranges_hold(nights):
    client = open_app()
    page = client.get(f"/benchmarks/{BENCH}")
    assert page.headers["content-security-policy"].startswith("default-src 'none'; script-src 'self'; style-src 'self'")
    assert "<style" not in page.text and " style=" not in page.text  # nothing inline for the policy to block
    run = client.get("/api/runs/cells.csv", params={"dag_id": DAG, "run_id": nights["run_id"]})
    assert run.headers["content-disposition"].startswith('attachment; filename="cells-scheduled__2026-11-28T01_00_00_00_00.csv"')
    assert client.get("/nights/\u0662\u0660\u0662\u0666-11-01").status_code == 422
    assert client.get(f"/benchmarks/{BENCH}", params={"nights": 10**12}).status_code == 422
    assert client.get(f"/benchmarks/{BENCH}", params={"nights": 0}).status_code == 422
    assert client.get(f"/benchmarks/{BENCH}", params={"nights": 36500}).status_code == 200


def test_latest_is_the_newest_night_that_holds_a_report_else_a_page_saying_none_yet(isolated_state):
    client = open_app()
    first = client.get("/latest", follow_redirects=False)  # a new install: no reports folder at all
    assert first.status_code == 200 and first.headers["content-type"].startswith("text/html")
    assert "No report yet" in first.text and 'href="/scalebench/static/pages.css?v=' in first.text
    reports = isolated_state / "reports"
    (reports / "2026-11-27").mkdir(parents=True)
    (reports / "2026-11-27" / "report.html").write_text("<p>the 27th</p>")
    (reports / "2026-11-28").mkdir()  # the report DAG is writing it, or it failed: no report.html yet
    got = client.get("/latest", follow_redirects=False)
    assert got.status_code == 307 and got.headers["location"] == "2026-11-27/report.html"
    assert client.get("/latest", follow_redirects=True).text == "<p>the 27th</p>"


def test_report_and_static_files_are_served_only_inside_their_folder(isolated_state, tmp_path):
    client = open_app()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "report.html").write_text("secret night")
    (outside / "table.json").write_text('{"secret": 1}')
    night = isolated_state / "reports" / "2026-11-27"
    night.mkdir(parents=True)
    (night / "report.html").write_text("<p>real</p>")
    (night / "table.json").symlink_to(outside / "table.json")  # a file linked out of the folder
    (isolated_state / "reports" / "2026-11-28").symlink_to(outside, target_is_directory=True)  # a linked night
    (isolated_state / "reports" / "index.html").symlink_to(outside / "report.html")
    assert client.get("/2026-11-27/report.html").text == "<p>real</p>"
    for path in ("/2026-11-27/table.json", "/2026-11-28/report.html"):
        got = client.get(path)
        assert got.status_code == 404 and "secret" not in got.text and "table.json" not in got.text, path
    assert client.get("/latest", follow_redirects=False).headers["location"] == "2026-11-27/report.html"
    assert "secret" not in client.get("/").text and "No report yet" in client.get("/").text
    missing = client.get("/static/nope<b>.js")
    assert missing.status_code == 404 and "nope" not in missing.text and "No such static file" in missing.text


def test_a_bidirectional_control_in_stored_text_is_shown_not_obeyed(nights):
    from scalebench.core import tables
    from scalebench.orchestration.ui import pages

    cells = Store().cells(night=nights["last"])
    bad = next(c for c in cells if c["figure"] is None)
    bad["attempts"][-1]["message"] = "exit code 3: \u202egnp.exe"
    html = pages.night_page("/scalebench", "", nights["last"], [bad], False, None)
    assert "\u202e" not in html and "exit code 3: [U+202E]gnp.exe" in html
    table = tables.build([tables.Column("why", lambda s: s)], ["a\u2067b\u200f"])
    assert tables.markdown(table)[-1] == "| a[U+2067]b[U+200F] |" and tables.text(table).endswith("a[U+2067]b[U+200F]")


def test_a_static_file_under_its_hash_is_kept_and_a_page_never(nights):
    from scalebench.orchestration.ui.pages import static_hash

    client = open_app()
    page = client.get(f"/benchmarks/{BENCH}")
    link = f"/scalebench/static/history.js?v={static_hash('history.js')}"
    assert link in page.text and page.headers["cache-control"] == "no-store"
    kept = client.get(link.removeprefix("/scalebench"))
    assert kept.status_code == 200 and kept.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert client.get("/static/history.js?v=000000000000").headers["cache-control"] == "no-store"  # an old address
    assert client.get("/static/history.js").headers["cache-control"] == "no-store"


def test_no_page_scans_a_table_that_grows_with_the_nights(nights):
    """The pages read what they show (SQLite's planner on each query they ran): the span and the
    newest nights through the indexes, never every summary, cell or prediction of all the years."""
    from scalebench.orchestration.ui.shared import store as app_store
    from tests.support.query_plans import recorded, whole_table_scans

    client = open_app()
    store = app_store()  # the one the routes read
    with recorded(store.engine) as queries:
        for path, params in (("/benchmarks", {}), (f"/benchmarks/{BENCH}", {}), (f"/nights/{nights['last']}", {}),
                             ("/compare", {}), ("/runs", {"dag_id": DAG, "run_id": nights["run_id"]}),
                             ("/dags", {"dag_id": DAG}), (f"/api/benchmarks/{BENCH}/history/older",
                                                          {"before": nights["last"], "days": 3})):
            # (the history's downloads read every night: streamed)
            assert client.get(path, params=params, follow_redirects=False).status_code in (200, 307), path
    assert len(queries) > 10
    assert whole_table_scans(store.engine, queries) == []
