"""A benchmark's history: its page, which carries its newest nights itself and hands history.js
the address of the older ones; those older nights, in pages whose span doubles each time (years of
nights arrive in a few requests, the charts redrawn as each lands, each streamed as it is read);
and every night's summaries as CSV or JSON."""
from __future__ import annotations

import datetime as dt
import json
from typing import Annotated, Iterator
from urllib.parse import quote, urlencode

from fastapi import APIRouter, HTTPException, Path as PathParam, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse

from scalebench.orchestration.ui import pages
from scalebench.orchestration.ui.shared import EXPECTED, FORMAT, NIGHT, bases, chunked, store, streamed

BENCHMARK_PATH = Annotated[str, PathParam(pattern=r"^[a-z0-9_]{1,100}$", max_length=100)]
NIGHT_PARAM = Annotated[str, Query(pattern=NIGHT.pattern, max_length=10)]
SINCE_PARAM = Annotated[str | None, Query(pattern=NIGHT.pattern, max_length=10)]
EMBEDDED_NIGHTS = pages.HISTORY_NIGHTS  # the newest nights a page carries itself (one year: a few hundred kB)
FIRST_PAGE_DAYS = 3650                  # the first older page: ten years of nights; each next one twice the span
MAX_PAGE_DAYS = 36500 * 4

history = APIRouter()


def _day(night: str, days: int, name: str = "before") -> str:
    """The night `days` before `night` (a parameter's value: a date that does not exist, or a day
    before the calendar's first, is refused naming it)."""
    try:
        return (dt.date.fromisoformat(night) - dt.timedelta(days=days)).isoformat()
    except (ValueError, OverflowError):
        raise HTTPException(422, f"query parameter {name}: expected {EXPECTED[name]} of the calendar, "
                                 "not before the year 1.") from None


@history.get("/benchmarks/{benchmark}", response_class=HTMLResponse)
def history_page(request: Request, benchmark: BENCHMARK_PATH,
                 nights: Annotated[int, Query(ge=1, le=36500)] = pages.HISTORY_NIGHTS, all: bool = False):
    base, _ = bases(request)
    first, last = store().summary_span(benchmark).get(benchmark, (None, None))
    since = None if all or not last else _day(last, nights - 1)
    embedded = None if not last else max(since or "", _day(last, EMBEDDED_NIGHTS - 1))
    charts = pages.STATIC_FILES["uPlot.iife.min.js"].is_file()
    rows = store().summaries(benchmark=benchmark, since=embedded, columns=pages.CHART_FIELDS + pages.RUN_FIELDS)
    more = (_older_url(base, benchmark, embedded, since, FIRST_PAGE_DAYS)
            if embedded and _earlier(first, embedded, since) else None)
    return pages.history_page(base, benchmark, rows, _shifts(benchmark), charts, since, first,
                              _predicted(benchmark, embedded), more)


@history.get("/api/benchmarks/{benchmark}/history/older")
def history_older(request: Request, benchmark: BENCHMARK_PATH, before: NIGHT_PARAM, since: SINCE_PARAM = None,
                  days: Annotated[int, Query(ge=1, le=MAX_PAGE_DAYS)] = FIRST_PAGE_DAYS):
    """The nights from `before` - `days` (not before `since`) up to `before`, in the rows history.js
    reads, streamed as read: {"next": the next older page's address or null, "predicted": [...],
    "rows": [...], "runs": {night: its run}}."""
    base, _ = bases(request)
    lo = max(since or "", _day(before, days))
    first, _ = store().summary_span(benchmark).get(benchmark, (None, None))
    more = _older_url(base, benchmark, lo, since, min(2 * days, MAX_PAGE_DAYS)) if _earlier(first, lo, since) else None
    predicted = _predicted(benchmark, lo, _day(before, 1))
    arrays = store().summary_arrays(benchmark, pages.CHART_COLUMNS, pages.RUN_FIELDS_WITH_NIGHT, lo, before)

    def body() -> Iterator[str]:
        yield json.dumps({"next": more, "predicted": pages.predicted_rows(predicted)})[:-1] + ', "rows": ['
        runs: dict[str, dict] = {}

        def rows() -> Iterator[str]:
            for i, (night, *run, text) in enumerate(arrays):
                runs.setdefault(night, dict(zip(pages.RUN_FIELDS, run)))
                yield ("," if i else "") + text
        yield from chunked(rows())
        yield '], "runs": ' + json.dumps(runs) + "}\n"

    return StreamingResponse(body(), media_type="application/json")


@history.get("/api/benchmarks/{benchmark}/history.{fmt}")
def history_export(benchmark: BENCHMARK_PATH, fmt: FORMAT):
    """Every night's summaries, streamed as they are read (years of nights start at once); the CSV's
    metric and share columns are those of the newest nights, any other one in its `other` column."""
    from scalebench.report.exports import CSV_JSON, CSV_PLAIN, HEADER_SAMPLE, history_header, history_rows

    if fmt == "json":
        return streamed(fmt, f"{benchmark}-history", store().iter_summaries(benchmark=benchmark))
    header = history_header(store().newest_summaries(benchmark, HEADER_SAMPLE, ("metrics", "step_shares")))
    read = store().summary_arrays(benchmark, CSV_JSON, CSV_PLAIN)
    return streamed(fmt, f"{benchmark}-history", history_rows(read, header), header)


def _earlier(first: str | None, shown_from: str | None, since: str | None) -> bool:
    """Whether the window (from `since`, None: every night) holds nights before `shown_from`."""
    return bool(first and shown_from and first < shown_from and (not since or since < shown_from))


def _older_url(base: str, benchmark: str, before: str, since: str | None, days: int) -> str:
    query = {"before": before, **({"since": since} if since else {}), "days": days}
    return f"{base}/api/benchmarks/{quote(benchmark, safe='')}/history/older?{urlencode(query)}"


def _shifts(benchmark: str) -> list[dict]:
    """The acknowledged shifts of one benchmark (include/configs), as the history page marks them."""
    from scalebench.analysis.regress import load_shifts
    from scalebench.core.config import SHIFTS_FILE, Configs

    path = Configs().config_dir / SHIFTS_FILE
    return [{"since": s.since.isoformat(), "reason": s.reason, "gpus": s.gpus} for s in load_shifts(path)
            if s.benchmark == benchmark] if path.exists() else []


def _predicted(benchmark: str, since: str | None, up_to: str | None = None) -> list[dict]:
    """The frozen one-host predictions of a benchmark from `since` to `up_to` that made a figure:
    drawn beside the measured images/s on the night they were frozen."""
    from scalebench.store.predictions import Predictions

    return [f for f in Predictions(store()).frozen(benchmark=benchmark, doc=False, since=since, up_to=up_to)
            if f["hosts"] == 1 and f["images_per_s"] is not None]
