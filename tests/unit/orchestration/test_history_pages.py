"""A benchmark's history over many nights: the page carries its newest nights and the address of
the older ones, and following the older pages gives every night of the window once, newest page
first, each page's span twice the last (served in process, as test_pages does)."""
import datetime as dt
import json
import re

import pytest

from scalebench.orchestration.ui import history
from scalebench.store.results import Store
from tests.support.samples import copy_summaries, summary_rows
from tests.unit.orchestration.test_pages import BENCH, open_app, seeded_home  # noqa: F401 (fixtures)

EARLIER = 40  # nights copied before the seeded six (2026-11-23 .. 28)


@pytest.fixture
def long_history(isolated_state, seeded_home, monkeypatch):  # noqa: F811
    import shutil

    home, facts = seeded_home
    shutil.copytree(home, isolated_state, dirs_exist_ok=True)
    store = Store()
    first = dt.date(2026, 11, 23)
    copy_summaries(store, summary_rows(store, BENCH, "2026-11-23"),
                   [(first - dt.timedelta(days=k)).isoformat() for k in range(EARLIER, 0, -1)])
    monkeypatch.setattr(history, "EMBEDDED_NIGHTS", 5)
    monkeypatch.setattr(history, "FIRST_PAGE_DAYS", 4)
    return [(first - dt.timedelta(days=k)).isoformat() for k in range(EARLIER, -6, -1)]  # every night, oldest first


def _embedded(html: str) -> dict:
    return json.loads(re.search(r'id="history-data">(.*?)</script>', html, re.S).group(1))


def _follow(client, doc: dict) -> list[dict]:
    pages, url = [], doc["more"]
    while url:
        assert url.startswith("/scalebench/api/benchmarks/")
        answer = client.get(url.removeprefix("/scalebench"))
        assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
        pages.append(answer.json())
        url = pages[-1]["next"]
    return pages


def test_every_night_arrives_once_the_newest_embedded_the_older_in_pages_of_doubling_span(long_history):
    client = open_app()
    html = client.get(f"/benchmarks/{BENCH}", params={"all": 1}).text
    doc = _embedded(html)
    assert sorted(doc["runs"]) == long_history[-5:]  # the newest five nights, carried by the page
    assert "older nights load page by page" in html and f"Marked nights since {long_history[-5]}" in html
    pages = _follow(client, doc)
    spans = [sorted(p["runs"]) for p in pages]
    assert [len(s) for s in spans] == [4, 8, 16, 13]  # 4, 8, 16 days, then what is left of 41
    assert all(older[-1] < newer[0] for older, newer in zip(spans[1:], spans))  # each page before the last
    nights = sorted(n for p in pages for n in p["runs"]) + sorted(doc["runs"])
    assert nights == long_history
    rows = [row for p in pages for row in p["rows"]] + doc["rows"]
    assert len(rows) == 2 * len(long_history) and {r[0] for r in rows} == set(long_history)  # 1 and 2 GPUs a night
    fields = doc["fields"]
    one = dict(zip(fields, pages[0]["rows"][0]))
    assert one["gpus"] in (1, 2) and one["images_per_s"] > 0 and "precision" in one  # history.js reads these


def test_a_window_stops_at_its_first_night_and_a_short_one_needs_no_page(long_history):
    client = open_app()
    doc = _embedded(client.get(f"/benchmarks/{BENCH}", params={"nights": 12}).text)
    nights = sorted(n for p in _follow(client, doc) for n in p["runs"]) + sorted(doc["runs"])
    assert nights == long_history[-12:]
    short = _embedded(client.get(f"/benchmarks/{BENCH}", params={"nights": 3}).text)
    assert short["more"] is None and sorted(short["runs"]) == long_history[-3:]


@pytest.mark.parametrize("query, name", [({"before": "2026-13-45"}, "before"),
                                         ({"before": "0001-01-02", "days": 10}, "before"),
                                         ({"before": "2026-11-28", "days": 0}, "days")])
def test_an_older_page_refuses_a_night_that_is_not_a_date_naming_the_parameter(long_history, query, name):
    answer = open_app().get(f"/api/benchmarks/{BENCH}/history/older", params=query)
    assert answer.status_code == 422 and f"query parameter {name}: expected" in json.dumps(answer.json())
