"""What the routers share: the results store, each parameter's pattern and what it must be in a
user's words, the app's base paths, files served only inside their folder, and the CSV/JSON
downloads."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Annotated, Iterable, Iterator
from urllib.parse import quote

from fastapi import HTTPException, Path as PathParam, Query, Request
from fastapi.responses import Response, StreamingResponse

from scalebench.core import paths
from scalebench.core.alert_rules import STATES

NIGHT = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$")  # ASCII digits: \d takes any script's
# What each parameter may be (ASCII only): a benchmark id as include/configs allows it, a DAG id and
# a run id as Airflow allows them (its default allowed_run_id_pattern), a night, an export format.
NIGHT_VALUE = Annotated[str, PathParam(pattern=NIGHT.pattern, max_length=10)]
BENCHMARK = r"^[a-z0-9_]{1,100}$"
FORMAT = Annotated[str, PathParam(pattern=r"^(csv|json)$", max_length=4)]
BENCHMARK_QUERY = Annotated[str | None, Query(pattern=r"^[a-z0-9_]{0,100}$", max_length=100)]
MEDIA = {"html": "text/html", "png": "image/png", "json": "application/json", "md": "text/markdown",
         "js": "text/javascript", "css": "text/css"}
FORMATS = ("csv", "json")

# What each parameter must be, in a user's words (a refusal names the parameter and this, never the value).
EXPECTED = {"night": "a night as YYYY-MM-DD", "a": "a night as YYYY-MM-DD", "b": "a night as YYYY-MM-DD",
            "benchmark": "a benchmark id (lowercase letters, digits and _, at most 100)",
            "dag_id": "an Airflow DAG id (letters, digits, _ . -, at most 250)",
            "run_id": "an Airflow run id (letters, digits, _ . ~ : + -, at most 250)",
            "fmt": "csv or json", "nights": "a whole number of nights from 1 to 36500", "all": "true or false",
            "name": "one of the files the page links to", "group_id": "an alert group number",
            "state": "a state: open, " + ", ".join(STATES), "owner": "a name of at most 100 characters",
            "key": "a cell key (hexadecimal, as `scalebench results -o json` lists it)",
            "index": "a trace's number on the cell's page, from 0",
            "before": "a night as YYYY-MM-DD", "since": "a night as YYYY-MM-DD",
            "days": "a whole number of days from 1 to 146000"}


@functools.lru_cache(maxsize=4)
def _store(url: str):
    from scalebench.store.results import Store

    return Store(url)


def store():
    """The results store, opened once per process (its engine pools connections)."""
    return _store(paths.store_url())


def inside(root: Path, *parts: str) -> Path | None:
    """root/parts as a file whose resolved path is inside root's (a link may not lead out), else None."""
    path = root.joinpath(*parts)
    try:
        resolved, top = path.resolve(strict=True), root.resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    return resolved if resolved.is_relative_to(top) and resolved.is_file() else None


def bases(request: Request) -> tuple[str, str]:
    """(this app's mount path, the Airflow UI's root): links work behind any base URL."""
    base = request.scope.get("root_path", "").rstrip("/")
    return base, base.rsplit("/", 1)[0] if "/" in base else ""


def export(fmt: str, columns: list[str], rows: list[dict], name: str, doc=None) -> Response:
    from scalebench.report.exports import to_csv

    if fmt not in FORMATS:
        raise HTTPException(404, "No such export: csv or json.")
    disposition = {"Content-Disposition": attachment(f"{name}.{fmt}")}
    if fmt == "json":
        return Response(json.dumps(rows if doc is None else doc, default=str, indent=1), media_type="application/json",
                        headers=disposition)
    return Response(to_csv(columns, rows), media_type="text/csv", headers=disposition)


def streamed(fmt: str, name: str, items: Iterator, header: list[str] | None = None) -> StreamingResponse:
    """A download written as it is read: a JSON array of `items`, or CSV of them (lists) under `header`."""
    from scalebench.report.exports import csv_chunks

    def json_array() -> Iterator[str]:
        yield "["
        yield from chunked(("," if i else "") + "\n" + json.dumps(item, default=str) for i, item in enumerate(items))
        yield "\n]\n"

    body = json_array() if fmt == "json" else csv_chunks(header or [], items)
    return StreamingResponse(body, media_type="application/json" if fmt == "json" else "text/csv",
                             headers={"Content-Disposition": attachment(f"{name}.{fmt}")})


def chunked(parts: Iterable[str], per_chunk: int = 2000) -> Iterator[str]:
    """`parts` joined `per_chunk` at a time: a streamed answer in a few hundred pieces, not one
    per row (each piece costs the server a send)."""
    batch: list[str] = []
    for part in parts:
        batch.append(part)
        if len(batch) == per_chunk:
            yield "".join(batch)
            batch = []
    if batch:
        yield "".join(batch)


def attachment(filename: str) -> str:
    """RFC 6266: an ASCII fallback name (no quote, no path, Latin-1 safe) and the exact name as filename*."""
    fallback = re.sub(r"[^A-Za-z0-9._-]", "_", filename)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
